//! The results ledger: an append-only file of checksummed JSON lines ([`nqueens_common::jsonl`]) beside the
//! store (`DATA/results.jsonl`), with one line per run created and one per result counted, fsynced before
//! any result in it is acknowledged. It is a second, independent copy of everything acknowledged (sled 0.34
//! has open corruption reports): at startup the store and the ledger are reconciled both ways
//! ([`crate::reconcile`]), `nqueens import` rebuilds a store from it, and `nqueens export` writes the same
//! format from a store.
//!
//! An entry is `{"kind":"run", ...RunMeta}`, `{"kind":"result","run":R,"job":"3.7.1", ...ResultRecord}`
//! (with the result's seal) or `{"kind":"revoked","run":R,"job":"3.7.1","worker":NAME}` (a result taken
//! back from a quarantined worker). A result may appear twice (identical copies; readers keep one); a run's
//! line appears again after each operator's control (cancel, pause, resume, priority), and the last holds.
//! Appends never leave a partial line behind: a failed append is cut off, and its entries stay queued in
//! memory and go first in the next append, so nothing the store applied is missing from the ledger once
//! an append succeeds.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use nqueens_common::jsonl::{self, Appender, Damage, Line};
use nqueens_common::JobKey;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{ResultRecord, RunMeta, Store};

/// The ledger's file name in the data directory.
pub const LEDGER_FILE: &str = "results.jsonl";

/// One line of the ledger (and of an export).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Entry {
    /// A run, as created.
    Run(RunMeta),
    /// A counted result.
    Result {
        run: u64,
        job: String,
        #[serde(flatten)]
        record: ResultRecord,
    },
    /// A counted result taken back (its worker was quarantined): the job is pending again.
    Revoked {
        run: u64,
        job: String,
        worker: String,
    },
}

/// Everything a ledger (or an export) holds once read and checked: its runs, its results as of its end
/// (revocations applied, copies kept once), and what could not be trusted.
#[derive(Debug, Default)]
pub struct LedgerView {
    pub runs: BTreeMap<u64, RunMeta>,
    pub results: BTreeMap<u64, BTreeMap<JobKey, ResultRecord>>,
    /// Damaged lines and records: the line, and why (each is logged at error level by the reader).
    pub damaged: Vec<Damage>,
    /// Lines of the format before checksums (their results were sealed on reading; see [`LedgerView::read`]).
    pub legacy: u64,
    /// Results taken back by revocation lines.
    pub revoked: u64,
    /// The length of the file's good content (a torn last line excluded).
    pub len: u64,
    /// A torn last line was found.
    pub torn: bool,
}

impl LedgerView {
    /// Reads a ledger or an export; `path` names it in errors and logs. Every line's checksum and every
    /// result's seal is checked; what fails is listed in `damaged`, never used. Lines of the format
    /// before checksums (a ledger of the previous version) cannot be checked: their results are sealed
    /// as read, and the caller cross-checks them against the store.
    pub fn read(path: &Path) -> Result<LedgerView> {
        let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", path.display()));
        let mut view = LedgerView::default();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(view),
            Err(e) => return Err(io(e)),
        };
        let size = file.metadata().map_err(io)?.len();
        let mut extra = Vec::new();
        let scan = jsonl::scan(file, |number, line| {
            let (entry, verified) = match line {
                Line::Verified(e) => (e, true),
                Line::Legacy(e) => (e, false),
            };
            if let Err(reason) = view.apply(entry, verified) {
                extra.push(Damage {
                    line: number,
                    offset: 0,
                    reason,
                });
            }
        })
        .map_err(io)?;
        view.damaged = scan.damaged;
        view.damaged.extend(extra);
        view.damaged.sort_by_key(|d| d.line);
        view.legacy = scan.legacy;
        view.torn = scan.torn.is_some();
        view.len = scan.torn.unwrap_or(size);
        for d in &view.damaged {
            tracing::error!(path = %path.display(), line = d.line, reason = %d.reason, place = "ledger", "damaged ledger line: not used");
        }
        Ok(view)
    }

    fn apply(&mut self, entry: Entry, verified: bool) -> std::result::Result<(), String> {
        match entry {
            Entry::Run(meta) => {
                meta.fingerprint_value().map_err(|e| e.to_string())?;
                if let Some(known) = self.runs.get(&meta.id) {
                    if !same_plan(known, &meta) {
                        return Err(format!(
                            "run {} appears twice with different plans",
                            meta.id
                        ));
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
                let fingerprint = meta.fingerprint_value().map_err(|e| e.to_string())?;
                if !verified && record.seal.is_none() {
                    record.seal = Some(nqueens_common::checksum::seal(
                        fingerprint,
                        &key,
                        &record.result,
                    ));
                }
                if !record.sealed(fingerprint, &key) {
                    return Err(format!("run {run} job {job}: the result fails its seal"));
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
            Entry::Revoked { run, job, worker } => {
                let key: JobKey = job.parse().map_err(|_| format!("bad job key {job:?}"))?;
                let results = self.results.entry(run).or_default();
                if results.get(&key).is_some_and(|r| r.worker == worker) {
                    results.remove(&key);
                    self.revoked += 1;
                }
            }
        }
        Ok(())
    }

    /// Number of results it holds for `run`.
    pub fn count(&self, run: u64) -> u64 {
        self.results.get(&run).map_or(0, |r| r.len() as u64)
    }
}

/// Whether two records of a run describe the same plan.
pub fn same_plan(a: &RunMeta, b: &RunMeta) -> bool {
    (a.id, a.n, a.strategy, a.depth, a.jobs_total, &a.fingerprint)
        == (b.id, b.n, b.strategy, b.depth, b.jobs_total, &b.fingerprint)
}

/// The ledger file, open for appending.
pub struct Ledger {
    path: PathBuf,
    file: Appender,
    /// Encoded entries whose append failed: they go first in the next one.
    backlog: Vec<u8>,
}

impl Ledger {
    /// Opens the ledger at `path` for appending after its first `len` good bytes (anything after them,
    /// a torn last line, is cut off).
    pub fn open(path: &Path, len: u64) -> Result<Ledger> {
        let file = Appender::open(path, len)
            .map_err(|e| Error::Durability(format!("{}: {e}", path.display())))?;
        Ok(Ledger {
            path: path.to_path_buf(),
            file,
            backlog: Vec::new(),
        })
    }

    /// A ledger over any sink (tests inject failing ones).
    pub fn with_sink(path: &Path, sink: Box<dyn jsonl::Sink>, len: u64) -> Ledger {
        Ledger {
            path: path.to_path_buf(),
            file: Appender::new(sink, len),
            backlog: Vec::new(),
        }
    }

    /// Appends entries (after any left from a failed append) and makes them durable before returning.
    /// On failure nothing partial stays in the file and the entries stay queued for the next append.
    pub fn append(&mut self, entries: &[Entry]) -> Result<()> {
        for entry in entries {
            self.backlog.extend(jsonl::encode(entry));
        }
        if self.backlog.is_empty() {
            return Ok(());
        }
        match self.file.append(&self.backlog) {
            Ok(()) => {
                self.backlog.clear();
                Ok(())
            }
            Err(e) => Err(Error::Durability(format!("{}: {e}", self.path.display()))),
        }
    }

    /// Whether entries wait for a successful append.
    pub fn behind(&self) -> bool {
        !self.backlog.is_empty()
    }
}

/// Replaces the ledger at `path` with an export of `store` (atomically: temporary file, fsync, rename)
/// and opens it for appending.
pub fn rewrite(path: &Path, store: &Store) -> Result<Ledger> {
    let tmp = path.with_extension("jsonl.rewrite");
    let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", tmp.display()));
    let written = (|| {
        let mut out = std::io::BufWriter::new(File::create(&tmp).map_err(io)?);
        export(store, None, &mut out)?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        drop(file);
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok(len)
    })();
    let len = match written {
        Ok(len) => len,
        Err(e) => {
            // A full disk must not keep the half-written copy (it holds the space a retry needs).
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    jsonl::sync_dir(path).map_err(io)?;
    Ledger::open(path, len)
}

/// Writes a store's runs (all, or one) and their counted results as ledger lines; returns how many
/// results. Every result's seal is checked first: a damaged store is not exported.
pub fn export(store: &Store, only: Option<u64>, out: &mut impl Write) -> Result<u64> {
    let io = |e: std::io::Error| Error::Durability(format!("cannot write the export: {e}"));
    let mut results = 0;
    for meta in store.runs()? {
        if only.is_some_and(|id| id != meta.id) {
            continue;
        }
        let run = meta.id;
        let fingerprint = meta.fingerprint_value()?;
        out.write_all(&jsonl::encode(&Entry::Run(meta)))
            .map_err(io)?;
        for item in store.results(run) {
            let (key, record) = item?;
            if !record.sealed(fingerprint, &key) {
                return Err(Error::Corrupt(format!(
                    "run {run} job {key}: the stored result fails its seal; start the coordinator (it repairs the store from the ledger) before exporting"
                )));
            }
            let entry = Entry::Result {
                run,
                job: key.to_string(),
                record,
            };
            out.write_all(&jsonl::encode(&entry)).map_err(io)?;
            results += 1;
        }
    }
    out.flush().map_err(io)?;
    Ok(results)
}

/// Per run, the results only one side holds (used by `audit` and startup reconciliation).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Results the store holds and the ledger lacks.
    pub store_only: Vec<JobKey>,
    /// Results the ledger holds and the store lacks (or holds damaged).
    pub ledger_only: Vec<JobKey>,
    /// Results both hold, with different counts.
    pub conflicting: Vec<JobKey>,
    /// Results in the store that fail their seal.
    pub damaged: Vec<JobKey>,
}

impl Difference {
    /// Whether both sides agree.
    pub fn is_empty(&self) -> bool {
        self.store_only.is_empty()
            && self.ledger_only.is_empty()
            && self.conflicting.is_empty()
            && self.damaged.is_empty()
    }
}

/// Compares one run's results in the store with the ledger's.
pub fn compare(store: &Store, meta: &RunMeta, view: &LedgerView) -> Result<Difference> {
    let fingerprint = meta.fingerprint_value()?;
    let empty = BTreeMap::new();
    let logged = view.results.get(&meta.id).unwrap_or(&empty);
    let mut seen: HashMap<&JobKey, ()> = HashMap::with_capacity(logged.len());
    let mut diff = Difference::default();
    for item in store.results_raw(meta.id) {
        let (key, record) = item?;
        let intact = record.as_ref().is_ok_and(|r| r.sealed(fingerprint, &key));
        let theirs = logged.get_key_value(&key);
        if let Some((k, _)) = theirs {
            seen.insert(k, ());
        }
        match (intact, theirs) {
            (false, Some(_)) => {
                diff.damaged.push(key.clone());
                diff.ledger_only.push(key);
            }
            (false, None) => diff.damaged.push(key),
            (true, None) => diff.store_only.push(key),
            (true, Some((_, l))) => {
                if record.as_ref().is_ok_and(|r| r.result != l.result) {
                    diff.conflicting.push(key);
                }
            }
        }
    }
    for key in logged.keys() {
        if !seen.contains_key(key) {
            diff.ledger_only.push(key.clone());
        }
    }
    Ok(diff)
}

#[cfg(test)]
mod tests {
    use nqueens_common::{Plan, Strategy};

    use super::*;
    use crate::store::tests::incoming_from;

    fn count(path: &Path) -> (u64, u64) {
        let view = LedgerView::read(path).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        let results = view.runs.keys().map(|&r| view.count(r)).sum();
        (view.runs.len() as u64, results)
    }

    /// Takes `room` bytes in all, then fails like a full disk (keeping the part of a write that fit).
    struct Disk {
        file: File,
        room: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let len = self.file.metadata()?.len();
            let room = self.room.load(std::sync::atomic::Ordering::SeqCst);
            let n = (buf.len() as u64).min(room.saturating_sub(len)) as usize;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "No space left on device",
                ));
            }
            self.file.write(&buf[..n])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl jsonl::Sink for Disk {
        fn sync(&mut self) -> std::io::Result<()> {
            self.file.sync_data()
        }
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.file.set_len(len)
        }
    }

    #[test]
    fn a_full_disk_leaves_no_partial_line_and_nothing_applied_is_missing_once_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::temporary().unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let path = dir.path().join(LEDGER_FILE);
        let room = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1 << 20));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let mut ledger = Ledger::with_sink(
            &path,
            Box::new(Disk {
                file,
                room: room.clone(),
            }),
            0,
        );
        ledger.append(&[Entry::Run(run.clone())]).unwrap();
        let result = |i| {
            let inc = incoming_from(run.id, &plan, i, "w");
            let c = store.commit(&[inc]).unwrap();
            let (run, key, record) = c.counted[0].clone();
            Entry::Result {
                run,
                job: key.to_string(),
                record,
            }
        };
        // The disk fills in the middle of the second entry.
        let used = std::fs::metadata(&path).unwrap().len();
        room.store(used + 40, std::sync::atomic::Ordering::SeqCst);
        assert!(ledger.append(&[result(0)]).is_err());
        assert!(ledger.behind());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            used,
            "no partial line"
        );
        assert!(ledger.append(&[result(1)]).is_err());
        // Space returns: the next append writes what failed before, first, then the new entry.
        room.store(1 << 20, std::sync::atomic::Ordering::SeqCst);
        ledger.append(&[result(2)]).unwrap();
        assert!(!ledger.behind());
        assert_eq!(count(&path), (1, 3));
        let view = LedgerView::read(&path).unwrap();
        let meta = store.run(run.id).unwrap().unwrap();
        assert!(compare(&store, &meta, &view).unwrap().is_empty());
    }
}
