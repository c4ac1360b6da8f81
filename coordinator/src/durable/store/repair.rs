//! Checking and mending the store at startup: the migration from earlier formats, the
//! raw read of a run's results that tells a damaged record from an intact one, and the repairs the
//! reconciliation with the ledger applies (damaged results removed, totals recomputed from the results).

use nqueens_common::checksum::seal;
use std::collections::HashMap;

use nqueens_common::{JobKey, Plan, Tally};
use sled::transaction::{ConflictableTransactionError, Transactional};

use super::records::{
    checked, decode, decode_plain, decode_result, encode, encode_result, is_checked, job_key,
    run_key, run_of_key, split_job_key, JobRecord, JobState, MENDED,
};
use super::workers::Names;
use super::{
    groups, ResultRecord, RunMeta, Store, FORMAT, FORMAT_VERSION, LEGACY_RESULTS, UPGRADE,
};
use crate::error::{Error, Result};

impl Store {
    /// Brings a store of an earlier format up to [`FORMAT_VERSION`]: format 1 results and candidates
    /// are sealed; format 3's `done` records in the `jobs` tree are dropped (a done job is its result
    /// from format 4 on); the single results of formats 1 to 4 are regrouped (format 5) and their tree
    /// dropped; every other record gets its checksum (format 6, done first); format 7's hand-back
    /// entries become bits and their tree is dropped (format 8). The new format is recorded first,
    /// with the format it came from under [`UPGRADE`]: an older build refuses the store from then on,
    /// and a migration cut short (a crash) is taken up again at the next open; the mark goes once
    /// every record is converted and flushed.
    pub(super) fn migrate(&self) -> Result<()> {
        let format = match super::read_u64(&self.meta, FORMAT)? {
            Some(f) => f,
            // A new, empty store: nothing to migrate, only the format to record.
            None if self.runs.is_empty() => {
                self.meta.insert(FORMAT, &FORMAT_VERSION.to_be_bytes())?;
                return Ok(());
            }
            None => 1,
        };
        if format > FORMAT_VERSION {
            return Err(super::newer_format(format));
        }
        let from = match super::read_u64(&self.meta, UPGRADE)? {
            // A migration cut short: this build's, or an earlier build's (to a format before this
            // one), whose every step this build takes up where it stopped.
            Some(from) if from < format => from,
            Some(from) => {
                return Err(Error::Corrupt(format!(
                    "the store is marked as migrating from format {from} to {format}, which no build writes"
                )))
            }
            None if format == FORMAT_VERSION => return Ok(()),
            None => format,
        };
        // Formats before 5 read the record of every run with results to carry over (its plan checks
        // them; before format 2, every run's, to seal its results): one that cannot be read refuses
        // the store before anything is written, so that the build before still opens it as it was
        // (before, the mark was written first, and neither build opened the store again; found by a
        // review, 2026-11-30).
        if from < 5 {
            let marked = super::read_u64(&self.meta, UPGRADE)?.is_some();
            self.check_runs_readable(from, marked)?;
        }
        let mut mark = sled::Batch::default();
        mark.insert(FORMAT, &FORMAT_VERSION.to_be_bytes());
        mark.insert(UPGRADE, &from.to_be_bytes());
        self.meta.apply_batch(mark)?;
        self.flush()?;
        // 5 -> 6 first, since every later step reads records as checked.
        let checked = self.check_records()?;
        self.flush()?;
        let legacy = self.db.open_tree(LEGACY_RESULTS)?;
        let mut sealed = 0u64;
        // 2 -> 3 changes no record: the run controls are new fields with defaults. Nor does 6 -> 7:
        // groups of the tag before kernel families are read as they are (their results name none).
        let sealing = if from < 2 { self.runs()? } else { Vec::new() };
        for meta in sealing {
            let fingerprint = meta.fingerprint_value()?;
            for kv in legacy.scan_prefix(run_key(meta.id)) {
                let (k, v) = kv?;
                // A key or record that does not decode is left for the regrouping to report.
                let (Ok((_, key)), Ok(mut record)) = (split_job_key(&k), decode_result(&v)) else {
                    continue;
                };
                if record.seal.is_none() {
                    record.seal = Some(seal(fingerprint, &key, &record.result));
                    legacy.insert(k, encode_result(&record))?;
                    sealed += 1;
                }
            }
            for kv in self.jobs.scan_prefix(run_key(meta.id)) {
                let (k, v) = kv?;
                // A key or record that does not decode (damaged on disk) is left as it is: the
                // start's mending rewrites it as open, or drops it ([`Store::mend_records`]).
                let (Ok((_, key)), Ok(mut record)) =
                    (split_job_key(&k), decode::<JobRecord>("job", &v))
                else {
                    continue;
                };
                if record.candidates.iter().any(|c| c.seal.is_none()) {
                    for c in &mut record.candidates {
                        c.seal
                            .get_or_insert_with(|| seal(fingerprint, &key, &c.result));
                    }
                    self.jobs.insert(k, encode(&record))?;
                }
            }
        }
        // 3 -> 4: a done job's record is its result; the `done` marks go, in batches. Each is checked
        // against its result first: a mark without a result is damage, left for the audit to report.
        let mut dropped = 0u64;
        let mut batch = sled::Batch::default();
        let mut in_batch = 0;
        for kv in self.jobs.iter() {
            let (k, v) = kv?;
            let done = decode::<JobRecord>("job", &v).is_ok_and(|r| r.state == JobState::Done);
            let counted = legacy.contains_key(&k)?
                || split_job_key(&k).is_ok_and(|(run, key)| {
                    groups::contains(&self.results, run, &key).unwrap_or(false)
                });
            if done && counted {
                batch.remove(k);
                in_batch += 1;
                if in_batch == 10_000 {
                    self.jobs.apply_batch(std::mem::take(&mut batch))?;
                    dropped += in_batch;
                    in_batch = 0;
                }
            }
        }
        self.jobs.apply_batch(batch)?;
        dropped += in_batch;
        self.flush()?;
        let (regrouped, unreadable) = self.regroup(&legacy)?;
        self.flush()?;
        self.db.drop_tree(LEGACY_RESULTS)?;
        self.flush()?;
        // 7 -> 8: each hand-back entry becomes its lease's bit, and their tree goes.
        let hand_backs = self.convert_hand_backs()?;
        self.flush()?;
        self.meta.remove(UPGRADE)?;
        self.flush()?;
        tracing::info!(
            from,
            to = FORMAT_VERSION,
            results_sealed = sealed,
            done_marks_dropped = dropped,
            results_regrouped = regrouped,
            records_checked = checked,
            hand_backs_converted = hand_backs,
            "store migrated"
        );
        if unreadable > 0 {
            tracing::error!(results = unreadable, place = "store", "results of the earlier format that did not decode (damaged on disk) were not carried over: the reconciliation restores them from the ledger, or their jobs are computed again");
        }
        Ok(())
    }

    /// Mends the run, job and quarantine records that fail their checks (damaged on disk), at a start,
    /// with the ledger's last intact line of each run and its quarantines (`runs`, `quarantines`):
    /// a run's record is written again from the ledger's line; a job's record goes (the job is
    /// pending again: its candidates were never counted, and are computed again); a quarantine is
    /// kept, as the ledger has it or with a reason saying why. Every record is looked at before any is
    /// mended: a damaged run the ledger has no line of refuses the start, naming it, and so does any
    /// damage when the ledger is not `trusted` (it has damaged lines: `--repair` trusts it), the store
    /// left as it was. Returns how many of each were mended.
    pub fn mend_records(
        &self,
        runs: &std::collections::BTreeMap<u64, RunMeta>,
        trusted: bool,
        quarantines: &std::collections::BTreeMap<String, super::Quarantine>,
    ) -> Result<(u64, u64, u64)> {
        let mut damaged_runs = Vec::new();
        for kv in self.runs.iter() {
            let (k, v) = kv?;
            let id = run_of_key(&k)
                .ok_or_else(|| Error::Corrupt(format!("a run key of {} bytes", k.len())))?;
            let damage = match decode::<RunMeta>("run", &v) {
                Ok(meta) if meta.id == id => continue,
                Ok(meta) => format!("the record of run {id} names run {}", meta.id),
                Err(e) => e.to_string(),
            };
            let Some(logged) = runs.get(&id) else {
                return Err(Error::Corrupt(format!(
                    "run {id}: its stored record is damaged ({damage}) and the ledger holds no intact line of it; restore the data directory from a backup"
                )));
            };
            damaged_runs.push((k, id, damage, logged));
        }
        let mut damaged_jobs = Vec::new();
        for kv in self.jobs.iter() {
            let (k, v) = kv?;
            if let Err(e) = decode::<JobRecord>("job", &v) {
                let job = split_job_key(&k)
                    .map(|(run, key)| format!("run {run} job {key}"))
                    .unwrap_or_else(|_| format!("key {k:?}"));
                damaged_jobs.push((k, job, e));
            }
        }
        let mut damaged_quarantines = Vec::new();
        for kv in self.quarantine.iter() {
            let (k, v) = kv?;
            if let Err(e) = decode::<super::Quarantine>("quarantine", &v) {
                damaged_quarantines.push((k, e));
            }
        }
        let first = damaged_runs
            .first()
            .map(|(_, id, damage, _)| format!("run {id}: {damage}"))
            .or_else(|| {
                damaged_jobs
                    .first()
                    .map(|(_, job, e)| format!("{job}: {e}"))
            })
            .or_else(|| {
                damaged_quarantines.first().map(|(k, e)| {
                    format!("the quarantine of {:?}: {e}", String::from_utf8_lossy(k))
                })
            });
        if let (Some(first), false) = (&first, trusted) {
            return Err(Error::Corrupt(format!(
                "stored records fail their checks (first: {first}), and the ledger has damaged lines: neither copy can be trusted alone. Start once with --repair to mend them from the ledger's intact lines, or restore the data directory from a backup"
            )));
        }
        for (k, id, damage, logged) in &damaged_runs {
            let restored = RunMeta {
                finished_unix: None,
                ..(*logged).clone()
            };
            self.runs.insert(k, encode(&restored))?;
            tracing::error!(run = id, damage = %damage, place = "store", "a stored run record is damaged: written again from the ledger's line");
        }
        // What the record said is unknown: perhaps a dispute, whose evidence it alone held (a ledger
        // rewrite keeps no revocation lines). In a run that verifies jobs it becomes an open record with
        // no candidates, so that the job is computed again and verified whatever its own draw: a
        // removed record made the job plain, and a disputed worker's result, sent again, counted alone.
        // In a run that verifies nothing (one worker's count stands alone there anyway, and a local
        // count runs one worker) it is removed, the job pending again.
        for (k, job, e) in &damaged_jobs {
            // The store's run record, else the ledger's (a run the start restores after this).
            let verifies = split_job_key(k)
                .ok()
                .and_then(|(run, _)| {
                    self.run(run)
                        .ok()
                        .flatten()
                        .or_else(|| runs.get(&run).cloned())
                })
                .is_some_and(|meta| meta.verify_fraction > 0.0);
            if verifies {
                let open = JobRecord {
                    state: JobState::Verifying,
                    candidates: Vec::new(),
                    reason: Some(MENDED.into()),
                };
                self.jobs.insert(k, encode(&open))?;
                tracing::error!(job = %job, damage = %e, place = "store", "a stored job record is damaged: written again as open, the job is computed again and verified by two workers of different names (its results waiting for verification, never counted, are computed again)");
            } else {
                self.jobs.remove(k)?;
                tracing::error!(job = %job, damage = %e, place = "store", "a stored job record is damaged: removed, the job is pending again (its results waiting for verification, never counted, are computed again)");
            }
        }
        for (k, e) in &damaged_quarantines {
            let worker = String::from_utf8_lossy(k).into_owned();
            let kept = quarantines.get(&worker).cloned().unwrap_or_else(|| super::Quarantine {
                worker: worker.clone(),
                reason: format!("the stored quarantine record was damaged on disk ({e}); the quarantine is kept"),
                at_unix: super::now_unix(),
                by: Vec::new(),
                held: false,
                contradicted: Vec::new(),
            });
            self.quarantine.insert(k, encode(&kept))?;
            tracing::error!(worker = %worker, damage = %e, place = "store", "a stored quarantine record is damaged: written again, the worker stays quarantined");
        }
        Ok((
            damaged_runs.len() as u64,
            damaged_jobs.len() as u64,
            damaged_quarantines.len() as u64,
        ))
    }

    /// Whether the run records the migration from format `from` reads decode (plain JSON, or checked
    /// by a migration cut short, `marked`): each run's with results of the earlier format, with a plan
    /// this build makes; before format 2, every run's, with its fingerprint.
    fn check_runs_readable(&self, from: u64, marked: bool) -> Result<()> {
        // (Opened only where it exists: this check writes nothing, not even a new empty tree.)
        let has_legacy = self
            .db
            .tree_names()
            .iter()
            .any(|n| n.as_ref() == LEGACY_RESULTS.as_bytes());
        let legacy = match has_legacy {
            true => Some(self.db.open_tree(LEGACY_RESULTS)?),
            false => None,
        };
        for kv in self.runs.iter() {
            let (k, v) = kv?;
            let carried = legacy
                .as_ref()
                .is_some_and(|l| l.scan_prefix(&k).next().is_some());
            if from >= 2 && !carried {
                continue;
            }
            let read = match is_checked(&v) {
                true => decode::<RunMeta>("run", &v),
                false => decode_plain::<RunMeta>("run", &v),
            };
            let usable = read.and_then(|meta| {
                if from < 2 {
                    meta.fingerprint_value()?;
                }
                if carried {
                    meta.plan()?;
                }
                Ok(())
            });
            if let Err(e) = usable {
                let run = k
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_be_bytes)
                    .map_or_else(|| format!("{k:?}"), |id| id.to_string());
                let state = match marked {
                    false => "nothing was changed",
                    true => "the store stays as the migration cut short left it",
                };
                return Err(Error::Corrupt(format!(
                    "run {run}: its record cannot be read ({e}), and bringing this store from format {from} to {FORMAT_VERSION} needs it (its results are checked against its plan); {state}. Import the ledger into a new directory (`nqueens import --data NEW DIR/{}`), or restore the directory from a backup",
                    crate::durable::ledger::LEDGER_FILE
                )));
            }
        }
        Ok(())
    }

    /// 5 -> 6: puts a checksum before every plain JSON record of the run, job, totals and quarantine
    /// trees that decodes as its kind, in batches; returns how many. One that does not decode is left
    /// as it is, damage for the audit to report by name (a checked record, written by an earlier step
    /// of this migration or before a crash cut it short, is left as it is too).
    fn check_records(&self) -> Result<u64> {
        fn check<T: for<'de> serde::Deserialize<'de>>(
            tree: &sled::Tree,
            what: &str,
        ) -> Result<u64> {
            let (mut n, mut batch, mut in_batch) = (0u64, sled::Batch::default(), 0);
            for kv in tree.iter() {
                let (k, v) = kv?;
                if is_checked(&v) || decode_plain::<T>(what, &v).is_err() {
                    continue;
                }
                batch.insert(k, checked(&v));
                in_batch += 1;
                if in_batch == 10_000 {
                    tree.apply_batch(std::mem::take(&mut batch))?;
                    n += in_batch;
                    in_batch = 0;
                }
            }
            tree.apply_batch(batch)?;
            Ok(n + in_batch)
        }
        Ok(check::<RunMeta>(&self.runs, "run")?
            + check::<JobRecord>(&self.jobs, "job")?
            + check::<Tally>(&self.totals, "totals")?
            + check::<super::Quarantine>(&self.quarantine, "quarantine")?)
    }

    /// 4 -> 5: moves every single result of `legacy` into its group, a chunk per transaction (each
    /// moved result leaves `legacy` in the transaction that groups it, so a migration cut short goes on
    /// where it stopped). Returns how many results moved, and how many were dropped: undecodable, or
    /// under a key that is no job of a known run (damage, logged).
    fn regroup(&self, legacy: &sled::Tree) -> Result<(u64, u64)> {
        const CHUNK: usize = 2_000;
        let (mut moved, mut unreadable) = (0u64, 0u64);
        let mut plans: HashMap<u64, Option<Plan>> = HashMap::new();
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut entries = legacy.iter();
        loop {
            chunk.clear();
            for kv in entries.by_ref().take(CHUNK) {
                let (k, v) = kv?;
                let mut place = split_job_key(&k).ok();
                if let Some((run, key)) = &place {
                    if !plans.contains_key(run) {
                        // A run record that cannot be read stops the migration (the store is refused
                        // whole); a run that does not exist has no results to carry.
                        let plan = match self.run(*run)? {
                            Some(meta) => Some(meta.plan()?),
                            None => None,
                        };
                        plans.insert(*run, plan);
                    }
                    if plans[run].as_ref().is_none_or(|p| p.job(key).is_err()) {
                        place = None;
                    }
                }
                let carried = match (place, decode_result(&v)) {
                    (Some(place), Ok(record)) => Some((place, record)),
                    (None, _) => {
                        tracing::error!(key = ?k, place = "store", "a result of the earlier format under a key that is no job of a known run: not carried over");
                        None
                    }
                    (_, Err(e)) => {
                        tracing::error!(key = ?k, error = %e, place = "store", "an undecodable result of the earlier format: not carried over");
                        None
                    }
                };
                unreadable += u64::from(carried.is_none());
                chunk.push((k, carried));
            }
            if chunk.is_empty() {
                return Ok((moved, unreadable));
            }
            (legacy, &self.results, &self.workers).transaction(|(old, groups, workers)| {
                for (k, carried) in &chunk {
                    if let Some(((run, key), record)) = carried {
                        groups::txn_put(groups::Tx { groups, workers }, *run, key, record)?;
                    }
                    old.remove(k)?;
                }
                Ok::<_, sled::transaction::ConflictableTransactionError<Error>>(())
            })?;
            let before = moved;
            moved += chunk.iter().filter(|(_, c)| c.is_some()).count() as u64;
            // A store of record size takes minutes: say how far it got, every million results.
            if moved / 1_000_000 > before / 1_000_000 {
                tracing::info!(results_regrouped = moved, "migrating the store to format {FORMAT_VERSION}: results of the earlier format regrouped so far");
            }
        }
    }

    /// A run's results in key order, each either decoded or the reason it cannot be (a damaged record);
    /// seals are not checked here.
    /// A group that does not decode is one item, named by the prefix its jobs share (see [`groups`]).
    pub fn results_raw(
        &self,
        run: u64,
    ) -> impl Iterator<Item = Result<(JobKey, Result<ResultRecord>)>> {
        let mut names = Names::new(&self.workers);
        self.results.scan_prefix(run_key(run)).flat_map(move |kv| {
            let members = kv
                .map_err(Error::from)
                .and_then(|(k, v)| groups::members_of(&k, &v, &mut names));
            match members {
                Ok(members) => members.into_iter().map(Ok).collect::<Vec<_>>(),
                Err(e) => vec![Err(e)],
            }
        })
    }

    /// Removes results (damaged ones, as [`Store::results_raw`] names them: a job, or the prefix of a
    /// group that does not decode) and their jobs' done marks; the caller recounts the run.
    pub fn remove_results(&self, run: u64, keys: &[JobKey]) -> Result<()> {
        for key in keys {
            let k = job_key(run, key);
            // A group's entry key is its run and prefix: a damaged group is named so, and removed whole
            // (only an entry that does not decode: a key that happens to name an intact group is taken
            // as a job's, whose group is another).
            let damaged_group = match self.results.get(&k)? {
                Some(raw) => groups::decode_group(&k, &raw).is_err(),
                None => false,
            };
            if damaged_group {
                self.results.remove(&k)?;
            } else {
                self.results
                    .transaction(|results| groups::txn_remove(results, run, key))?;
            }
            if let Some(v) = self.jobs.get(&k)? {
                let done =
                    decode::<JobRecord>("job", &v).map_or(true, |r| r.state == JobState::Done);
                if done {
                    self.jobs.remove(&k)?;
                }
            }
        }
        Ok(())
    }

    /// Recomputes a run's totals from its (intact) results and sets whether it is done accordingly;
    /// returns the totals and whether they changed.
    pub fn recount(&self, meta: &RunMeta) -> Result<(Tally, bool)> {
        let survey = self.survey(meta, |_, _| {})?;
        if let Some(key) = survey.damaged {
            return Err(Error::Corrupt(format!(
                "run {} job {key}: the stored result fails its seal",
                meta.id
            )));
        }
        let changed = self.settle_count(meta, survey.sum, survey.last_at)?;
        Ok((survey.sum, changed))
    }

    /// Makes `tally` (the sum of the run's intact results, the latest committed at `last_at`) the run's
    /// totals and sets whether it is done accordingly; returns whether anything changed.
    pub fn settle_count(&self, meta: &RunMeta, tally: Tally, last_at: u64) -> Result<bool> {
        let stored: Option<Tally> = self
            .totals
            .get(run_key(meta.id))?
            .and_then(|v| decode("totals", &v).ok());
        let done = tally.jobs == meta.jobs_total;
        let changed = stored != Some(tally) || done != meta.is_done();
        if changed {
            (&self.runs, &self.totals).transaction(|(runs, totals)| {
                // The run as stored now, not as `meta` read it: a control joined from the ledger
                // since (a cancel) stays.
                let raw = runs.get(run_key(meta.id))?.ok_or_else(|| {
                    ConflictableTransactionError::Abort(Error::Corrupt(format!(
                        "run {} vanished",
                        meta.id
                    )))
                })?;
                let now: RunMeta =
                    decode("run", &raw).map_err(ConflictableTransactionError::Abort)?;
                let updated = RunMeta {
                    finished_unix: done.then(|| now.finished_unix.unwrap_or(last_at)),
                    ..now
                };
                totals.insert(&run_key(meta.id), encode(&tally))?;
                runs.insert(&run_key(meta.id), encode(&updated))?;
                Ok::<_, ConflictableTransactionError<Error>>(())
            })?;
        }
        Ok(changed)
    }
}
