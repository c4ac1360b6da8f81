//! A ledger or an export read and checked whole ([`LedgerView`]): its runs, its results as of its end,
//! its quarantines, and what could not be trusted.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use nqueens_common::jsonl::{Damage, Line};
use nqueens_common::JobKey;

use super::{scan, Entry, EXPORT_FORMAT};
use crate::durable::store::{same_run, taken_back, Quarantine, ResultRecord, RunMeta};
use crate::error::{Error, Result};

/// Everything a ledger (or an export) holds once read and checked: its runs, its results as of its end
/// (revocations applied, copies kept once), and what could not be trusted.
#[derive(Debug, Default)]
pub struct LedgerView {
    pub runs: BTreeMap<u64, RunMeta>,
    pub results: BTreeMap<u64, BTreeMap<JobKey, ResultRecord>>,
    /// Damaged lines and records: the line, and why (each is logged at error level by the reader); at
    /// most [`nqueens_common::jsonl::MAX_DAMAGE_KEPT`], the earliest of those found.
    pub damaged: Vec<Damage>,
    /// Damaged lines and records in all.
    pub damaged_lines: u64,
    /// Lines of the format before checksums (their results were sealed on reading; see [`LedgerView::read`]).
    pub legacy: u64,
    /// Results of such lines that carried no seal either: nothing in the file can show them intact.
    pub unchecked: u64,
    /// Those results' runs and jobs.
    pub unchecked_jobs: std::collections::BTreeSet<(u64, JobKey)>,
    /// The results taken back by revocation lines, in order.
    pub revocations: Vec<RevokedLine>,
    /// Every revocation line's run, job and lease (where the line carries its result): a result line
    /// of that lease coming after it is damage, never counted again.
    revoked_leases: std::collections::BTreeSet<(u64, JobKey, u64)>,
    /// The length of the file's good content (a torn last line excluded).
    pub len: u64,
    /// A torn last line was found.
    pub torn: bool,
    /// The first worker number no intact line defines (see [`super::scan`]).
    pub next_worker: u32,
    /// The workers quarantined as of the file's end (quarantine lines, less those released after), by
    /// name.
    pub quarantines: BTreeMap<String, Quarantine>,
    /// Every worker an intact quarantine or release line names, released since or not.
    pub ever_quarantined: std::collections::BTreeSet<String>,
    /// For an export of format 2 on (a file with the header line): whether its end line was found,
    /// counting exactly what precedes it. `Some(false)`: the export was cut short. `None`: not such an
    /// export (a ledger, or an export of an earlier version).
    pub export_whole: Option<bool>,
}

/// A revocation line that took a result back.
#[derive(Debug, Clone)]
pub struct RevokedLine {
    pub run: u64,
    pub key: JobKey,
    /// The worker whose result was taken back.
    pub worker: String,
    /// The result taken back (ledger format 2 on): only that very result is taken back from a store.
    pub record: Option<ResultRecord>,
    /// Whether neither its worker nor a confirmer was quarantined at the line: a later result disputed
    /// the count (a quarantine's revocations follow the quarantine's line; a release later does not
    /// change this).
    pub disputed: bool,
}

impl LedgerView {
    /// Every take-back line's run, job and lease (where the line carries its result), in no order:
    /// counts the file took back, which no older copy may bring back (`Store::note_taken_back`).
    pub fn taken_back(&self) -> impl Iterator<Item = &(u64, JobKey, u64)> {
        self.revoked_leases.iter()
    }

    /// Reads a ledger or an export; `path` names it in errors and logs. Every line's checksum and every
    /// result's seal is checked; what fails is listed in `damaged`, never used. Lines of the format
    /// before checksums (a ledger of the previous version) cannot be checked: their results are sealed
    /// as read, and the caller cross-checks them against the store. A file holding intact lines of a
    /// newer build (a downgrade) is refused, before anything is repaired or rewritten from it.
    pub fn read(path: &Path) -> Result<LedgerView> {
        let io = |e: std::io::Error| Error::durable_io(path.display().to_string(), e);
        let mut view = LedgerView::default();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(view),
            Err(e) => return Err(io(e)),
        };
        let size = file.metadata().map_err(io)?.len();
        let mut extra = nqueens_common::jsonl::Scan::default();
        let mut last_line = 0;
        let (scan, next_worker) = scan(file, |number, line| {
            last_line = number;
            let (entry, verified) = match line {
                Line::Verified(e) => (e, true),
                Line::Legacy(e) => (e, false),
            };
            if let Err(reason) = view.apply(entry, verified) {
                extra.damage(Damage {
                    line: number,
                    offset: 0,
                    reason,
                });
            }
        })
        .map_err(io)?;
        if scan.unknown > 0 {
            return Err(Error::Corrupt(format!(
                "{} holds {} lines of a newer build, or is not a ledger (intact lines, of a format or kind this build does not know): use that build with it (the file was not changed; this build would have dropped them as damaged lines)",
                path.display(),
                scan.unknown
            )));
        }
        view.next_worker = next_worker;
        view.damaged_lines = scan.damaged_lines + extra.damaged_lines;
        view.damaged = scan.damaged;
        view.damaged.extend(extra.damaged);
        // An export whose end line is missing lacks what came after the cut, every line intact.
        if view.export_whole == Some(false) {
            view.damaged_lines += 1;
            view.damaged.push(Damage {
                line: last_line + 1,
                offset: size,
                reason: "an export cut short: its end line, counting what it holds, is missing (a copy interrupted, a full disk)".into(),
            });
        }
        view.damaged.sort_by_key(|d| d.line);
        view.damaged
            .truncate(nqueens_common::jsonl::MAX_DAMAGE_KEPT as usize);
        view.legacy = scan.legacy;
        view.torn = scan.torn.is_some();
        view.len = scan.torn.unwrap_or(size);
        for d in &view.damaged {
            tracing::error!(path = %path.display(), line = d.line, reason = %d.reason, place = "ledger", "damaged ledger line: not used");
        }
        let unlisted = view.damaged_lines - view.damaged.len() as u64;
        if unlisted > 0 {
            tracing::error!(path = %path.display(), lines = unlisted, place = "ledger", "more damaged ledger lines, not listed: not used");
        }
        Ok(view)
    }

    fn apply(&mut self, entry: Entry, verified: bool) -> std::result::Result<(), String> {
        match entry {
            Entry::Run(meta) => {
                // Ids are handed out from 1, and the next one must exist: refused here, as damage,
                // before anything is restored from the file.
                if meta.id == 0 || meta.id == u64::MAX {
                    return Err(format!("run id {} is out of range", meta.id));
                }
                meta.fingerprint_value().map_err(|e| e.to_string())?;
                if let Some(known) = self.runs.get(&meta.id) {
                    if !same_run(known, &meta) {
                        return Err(format!("run {} appears twice as different runs", meta.id));
                    }
                    // A later line of the same run carries an operator's control (cancel, pause,
                    // priority): the last one holds.
                    self.runs.insert(meta.id, meta);
                    return Ok(());
                }
                self.results.entry(meta.id).or_default();
                self.runs.insert(meta.id, meta);
            }
            Entry::Result {
                run,
                job,
                mut record,
            } => {
                let key: JobKey = job.parse().map_err(|_| format!("bad job key {job:?}"))?;
                let meta = self
                    .runs
                    .get(&run)
                    .ok_or_else(|| format!("result of run {run} before the run"))?;
                meta.plan()
                    .and_then(|p| Ok(p.job(&key)?))
                    .map_err(|e| format!("run {run} job {job}: {e}"))?;
                // A d4 result without its unique count would turn its run's check of the unique
                // counts off for good; a mirror one with one is foreign.
                if let Some(why) = record.result.shape_error(meta.strategy) {
                    return Err(format!("run {run} job {job}: {why}"));
                }
                let fingerprint = meta.fingerprint_value().map_err(|e| e.to_string())?;
                if !verified && record.seal.is_none() {
                    self.unchecked += 1;
                    self.unchecked_jobs.insert((run, key.clone()));
                    record.seal = Some(nqueens_common::checksum::seal(
                        fingerprint,
                        &key,
                        &record.result,
                    ));
                }
                if !record.sealed(fingerprint, &key) {
                    return Err(format!("run {run} job {job}: the result fails its seal"));
                }
                if self
                    .revoked_leases
                    .contains(&(run, key.clone(), record.lease))
                {
                    return Err(format!(
                        "run {run} job {job}: a result under lease {} after the revocation that took it back (a line copied or moved)",
                        record.lease
                    ));
                }
                let results = self.results.entry(run).or_default();
                if let Some(earlier) = results.get(&key) {
                    if earlier.result != record.result {
                        return Err(format!(
                            "run {run} job {job}: a second, different result ({:?}, earlier {:?})",
                            record.result, earlier.result
                        ));
                    }
                    return Ok(());
                }
                results.insert(key, record);
            }
            Entry::Revoked {
                run,
                job,
                worker,
                record,
            } => {
                let key: JobKey = job.parse().map_err(|_| format!("bad job key {job:?}"))?;
                if let Some(r) = &record {
                    self.revoked_leases.insert((run, key.clone(), r.lease));
                }
                let results = self.results.entry(run).or_default();
                if results
                    .get(&key)
                    .is_some_and(|held| taken_back(held, &worker, record.as_ref()))
                {
                    results.remove(&key);
                    // A dispute takes back the count of a worker nobody quarantined; a quarantine
                    // takes back its worker's counts, and in a record run those it confirmed.
                    let confirmer_quarantined = record.as_ref().is_some_and(|r| {
                        r.confirmed_by
                            .iter()
                            .any(|c| self.quarantines.contains_key(c))
                    });
                    let disputed =
                        !self.quarantines.contains_key(&worker) && !confirmer_quarantined;
                    self.revocations.push(RevokedLine {
                        run,
                        key,
                        worker,
                        record,
                        disputed,
                    });
                }
            }
            line @ (Entry::Quarantine(_) | Entry::Released { .. }) => {
                let name = match &line {
                    Entry::Quarantine(q) => q.worker.clone(),
                    Entry::Released { worker, .. } => worker.clone(),
                    _ => unreachable!("matched above"),
                };
                quarantine_line(&mut self.quarantines, line)?;
                self.ever_quarantined.insert(name);
            }
            Entry::Export { version } => {
                if version != EXPORT_FORMAT {
                    return Err(format!(
                        "an export of format {version}, not {EXPORT_FORMAT}"
                    ));
                }
                // Every header opens an export that must end (two files joined: the second's too).
                self.export_whole = Some(false);
            }
            Entry::End {
                runs,
                results,
                quarantines,
            } => {
                let held = (
                    self.runs.len() as u64,
                    self.results.values().map(|r| r.len() as u64).sum::<u64>(),
                    self.quarantines.len() as u64,
                );
                if held != (runs, results, quarantines) {
                    return Err(format!(
                        "the export's end counts {runs} runs, {results} results and {quarantines} quarantines, but {} runs, {} results and {} quarantines precede it: it was cut short or altered",
                        held.0, held.1, held.2
                    ));
                }
                self.export_whole = Some(true);
            }
        }
        Ok(())
    }

    /// Number of results it holds for `run`.
    pub fn count(&self, run: u64) -> u64 {
        self.results.get(&run).map_or(0, |r| r.len() as u64)
    }
}

/// A quarantine or release line, as the full read ([`LedgerView`]) and the streamed digest
/// ([`crate::durable::digest::LedgerDigest`]) both apply it: the workers quarantined as of the line. A name the
/// coordinator would refuse is damage.
pub fn quarantine_line(
    quarantined: &mut BTreeMap<String, Quarantine>,
    line: Entry,
) -> std::result::Result<(), String> {
    match line {
        Entry::Quarantine(q) => {
            crate::durable::store::check_quarantine(&q).map_err(|e| match e {
                Error::Invalid(why) => why,
                other => other.to_string(),
            })?;
            quarantined.insert(q.worker.clone(), q);
        }
        Entry::Released { worker, .. } => {
            if !nqueens_common::names::valid_worker_id(&worker) {
                return Err(format!("a release of a bad worker name {worker:?}"));
            }
            quarantined.remove(&worker);
        }
        _ => return Err("not a quarantine or release line".into()),
    }
    Ok(())
}

/// Whether two records of a run hold the same operator's controls (a cancel by its presence: its
/// time may differ between the two sides).
pub fn same_controls(a: &RunMeta, b: &RunMeta) -> bool {
    (a.paused, a.cancelled_unix.is_some(), a.priority)
        == (b.paused, b.cancelled_unix.is_some(), b.priority)
}

/// Why the store's and the ledger's records of a run (`stored`, `logged`) are refused as two runs,
/// and the way out, for a refusal naming the ledger at `path`.
pub fn different_runs(stored: &RunMeta, logged: &RunMeta, path: &std::path::Path) -> String {
    let plan = |m: &RunMeta| {
        format!(
            "created {}, N = {} {} depth {}, {} jobs, fingerprint {}, verify fraction {}",
            m.created_unix,
            m.n,
            m.strategy,
            m.depth,
            m.jobs_total,
            m.fingerprint,
            m.verify_fraction
        )
    };
    format!(
        "run {}: the store and the ledger describe different runs (store: {}; ledger: {}). The ledger is another directory's, or one of the two was damaged (a store record before format 6 gave it a checksum, say): if this ledger is this directory's, import it into a new directory (`nqueens import --data NEW {}`) and serve that; otherwise restore the directory from a backup",
        stored.id,
        plan(stored),
        plan(logged),
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger that is not there is an empty one; one that cannot be opened is an error, never taken
    /// for empty (issue 42: the guard `NotFound` → `true` survived).
    #[test]
    fn a_missing_ledger_is_empty_and_one_that_cannot_be_opened_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let view = LedgerView::read(&dir.path().join("absent.jsonl")).unwrap();
        assert_eq!((view.len, view.runs.len()), (0, 0));
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"").unwrap();
        let refused = LedgerView::read(&file.join("ledger.jsonl"));
        assert!(
            matches!(refused, Err(Error::DurableIo { .. })),
            "{refused:?}"
        );
    }
}
