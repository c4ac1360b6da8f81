//! Restoring a store from an export or the ledger (`nqueens import`): runs keep their ids, results are
//! checked against their run's plan and added with checked u128 sums, a repeated identical result is kept
//! once and a conflicting one is refused.

use nqueens_common::{JobKey, Tally};
use sled::transaction::{ConflictableTransactionError as Abort, Transactional};

use super::records::{
    decode, encode, job_key, run_key, JobRecord, JobState, Quarantine, ResultRecord, RunMeta,
};
use super::txn::{abort, stored_tally};
use super::{groups, Store, NEXT_RUN};
use crate::error::{Error, Result};

/// Results restored per transaction by [`Store::restore_all_results`].
pub const RESTORE_BATCH: usize = 4096;

impl Store {
    /// Restores a quarantine (from an export, or a ledger ahead of the store): the worker stays out of
    /// service. One already stored is kept as it is. A held one is restored held: a file holds no
    /// open job's results, so no dispute holds it, and the next revocation of it (the start's, or
    /// the import's) makes it whole. That revocation takes back its record counts, and each count
    /// of the jobs it lists as contradicted that only the identities it contradicted stand behind,
    /// since a file holds none of what it kept ([`Store::revoke`]). Before, it was restored whole,
    /// and a lie of a second pair it had contradicted stood.
    pub fn restore_quarantine(&self, q: &Quarantine) -> Result<()> {
        super::records::check_quarantine(q)?;
        self.quarantine
            .compare_and_swap(q.worker.as_bytes(), None as Option<&[u8]>, Some(encode(q)))?
            .ok();
        Ok(())
    }

    /// Holds again the stored whole quarantine of the worker of the ledger's held record `q` (a hold
    /// that ended in the store, its ledger lines lost in a crash), with the jobs `q` lists, and says
    /// whether it did: the next revocation of it ends the hold again and takes back again what the
    /// ledger may have restored ([`Store::revoke`]). Only where the store's deciders are the
    /// ledger's: a record whole with more (a decision against it, whose lines the ledger lost) or
    /// none (put back by the rule) was not made whole by a hold's end, and is left as it is.
    pub fn hold_again(&self, q: &Quarantine) -> Result<bool> {
        super::records::check_quarantine(q)?;
        let Some(raw) = self.quarantine.get(q.worker.as_bytes())? else {
            return Ok(false);
        };
        let stored: Quarantine = decode("quarantine", &raw)?;
        // Whole with other deciders (a decision against it joined them, or the rule put it back
        // with none): not a hold's end, and what it contradicted stands (found by a review,
        // 2026-12-01: held again, a decided count was taken back).
        let same =
            |a: &[String], b: &[String]| a.len() == b.len() && a.iter().all(|n| b.contains(n));
        if !same(&stored.by, &q.by) {
            return Ok(false);
        }
        let held = Quarantine {
            held: true,
            contradicted: q.contradicted.clone(),
            ..stored
        };
        self.quarantine.insert(q.worker.as_bytes(), encode(&held))?;
        Ok(true)
    }

    /// Makes the stored quarantine of `worker` whole if it is held (a ledger ahead of the store holds
    /// the decision against it, or its dispute ended undecided).
    pub fn make_quarantine_whole(&self, worker: &str) -> Result<()> {
        if let Some(q) = self
            .quarantined()?
            .into_iter()
            .find(|q| q.worker == worker && q.held)
        {
            let whole = Quarantine { held: false, ..q };
            self.quarantine.insert(worker.as_bytes(), encode(&whole))?;
        }
        // Whole, it takes nothing up: what was kept for it while held goes.
        self.challenges.remove(worker.as_bytes())?;
        Ok(())
    }

    /// Whether `meta` can be restored into this store: its id is in range, its plan is one this build
    /// makes, and the store holds no other run of that id. Returns whether the store holds that very run
    /// already (a restore cut short, done again), which [`Store::restore_run`] then keeps as it is.
    pub fn check_restore_run(&self, meta: &RunMeta) -> Result<bool> {
        // Ids are handed out from 1, and the next one must exist.
        if meta.id == 0 || meta.id == u64::MAX {
            return Err(Error::Invalid(format!(
                "run id {} is out of range (1 to {})",
                meta.id,
                u64::MAX - 1
            )));
        }
        // Its plan's own jobs: a file's count or fingerprint, changed (seals cover neither), would
        // restore a run done short of its plan. Checked as a start checks a run it resumes, with the
        // count first held within the limit of a run's creation.
        meta.plan()?;
        if meta.jobs_total > nqueens_common::partition::MAX_JOBS {
            return Err(Error::Invalid(format!(
                "run {}: N = {} {} depth {} records {} jobs, more jobs than a run may have ({}); the file was altered, or made by a build before that limit (such a run resumes where it is, but is not restored from a file)",
                meta.id,
                meta.n,
                meta.strategy,
                meta.depth,
                meta.jobs_total,
                nqueens_common::partition::MAX_JOBS
            )));
        }
        meta.check_job_list().map_err(|why| {
            Error::Invalid(format!(
                "run {}: {why}, not its plan's job list; the file was altered, or made by another build",
                meta.id
            ))
        })?;
        let Some(stored) = self.run(meta.id)? else {
            return Ok(false);
        };
        // The same run: its plan (verifying as much), made at the same time. Its controls (pause,
        // priority, cancel) may have changed since: the store's hold.
        let same = super::records::same_run(&stored, meta);
        if !same {
            return Err(Error::Invalid(format!(
                "run {} of the file is another run than this store's run {} (N = {} {} depth {}, created at {}, verify fraction {}, against N = {} {} depth {}, created at {}, verify fraction {}); import into another directory",
                meta.id,
                meta.id,
                meta.n,
                meta.strategy,
                meta.depth,
                meta.created_unix,
                meta.verify_fraction,
                stored.n,
                stored.strategy,
                stored.depth,
                stored.created_unix,
                stored.verify_fraction
            )));
        }
        Ok(true)
    }

    /// Whether counted results of the run `meta` can be restored: each names a job of the run's plan,
    /// passes its seal, and is the result this store holds for its job, if it holds one (or one the
    /// store took back, where another identity's count stands since: the store's side, which a
    /// restore keeps, `ledger::compare`).
    pub fn check_restore_results<'a>(
        &self,
        meta: &RunMeta,
        results: impl IntoIterator<Item = (&'a JobKey, &'a ResultRecord)>,
    ) -> Result<()> {
        let run = meta.id;
        let plan = meta.plan()?;
        let fingerprint = meta.fingerprint_value()?;
        let held = self.run(run)?.is_some();
        for (key, record) in results {
            plan.job(key)?;
            if !record.sealed(fingerprint, key) {
                return Err(Error::Corrupt(format!(
                    "run {run} job {key}: the result fails its seal; not restored"
                )));
            }
            // A d4 result without its unique count would turn the run's check of the unique counts
            // off for good (its tally then has none), as a mirror one with a unique count is foreign.
            if let Some(why) = record.result.shape_error(meta.strategy) {
                return Err(Error::Corrupt(format!(
                    "run {run} job {key}: {why}; not restored"
                )));
            }
            if held {
                if let Some(stored) = self.result(run, key)? {
                    // (Unless the store took the file's count back and another identity's count
                    // stands since.)
                    let superseded = stored.lease != record.lease
                        && self.was_taken_back(run, key, record.lease)?;
                    if stored.result != record.result && !superseded {
                        return Err(Error::Invalid(format!(
                            "run {run} job {key}: two different results ({:?} and {:?})",
                            stored.result, record.result
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the counted results of the run `meta` that a file hands over could each have been
    /// reported: within the bounds of a result (`Job::check`), under identities the coordinator
    /// takes, two of them in a record run. What a report's validation refuses, an import refuses
    /// too. (Seals and checksums are CRCs anyone computes: whoever hands over a file controls its
    /// counts and names, so this catches damage and careless edits, not a forger who keeps within
    /// the bounds. Before, a file's result was held to its seal and shape alone: an import counted a
    /// total past its nodes, and a record run's count on one identity. Found by a review,
    /// 2026-12-01.) Not asked of a store's own ledger at a start: a build before the bounds wrote
    /// what they refuse now, and a start must not be refused for it.
    pub fn check_as_reported<'a>(
        &self,
        meta: &RunMeta,
        results: impl IntoIterator<Item = (&'a JobKey, &'a ResultRecord)>,
    ) -> Result<()> {
        let run = meta.id;
        let plan = meta.plan()?;
        for (key, record) in results {
            if let Err(why) = plan.job(key)?.check(&record.result) {
                return Err(Error::Corrupt(format!(
                    "run {run}: {why} (a result no report could be); not imported"
                )));
            }
            let names: std::collections::BTreeSet<String> = record.identities().collect();
            if let Some(bad) = names
                .iter()
                .find(|n| !nqueens_common::names::valid_worker_id(n))
            {
                return Err(Error::Corrupt(format!(
                    "run {run} job {key}: an identity the coordinator never takes ({bad:?}); not imported"
                )));
            }
            if meta.record && names.len() < 2 {
                return Err(Error::Corrupt(format!(
                    "run {run} job {key}: a record run's count that a second identity did not confirm; not imported"
                )));
            }
        }
        Ok(())
    }

    /// Restores a run under its own id, with no results yet. Refused if the store has another run with
    /// that id; the same run (a restore done again) is kept as it is.
    pub fn restore_run(&self, meta: &RunMeta) -> Result<()> {
        if self.check_restore_run(meta)? {
            return Ok(());
        }
        let restored = RunMeta {
            finished_unix: None,
            ..meta.clone()
        };
        let with_unique = meta.strategy == nqueens_common::Strategy::D4;
        (&self.meta, &self.runs, &self.totals).transaction(|(m, runs, totals)| {
            if runs.get(run_key(meta.id))?.is_some() {
                return abort(Error::Invalid(format!(
                    "run {} exists already in this store",
                    meta.id
                )));
            }
            let next = match m.get(NEXT_RUN)? {
                Some(v) => u64::from_be_bytes(
                    v.as_ref()
                        .try_into()
                        .map_err(|_| Abort::Abort(Error::Corrupt("next_run".into())))?,
                ),
                None => 1,
            };
            m.insert(NEXT_RUN, &next.max(meta.id + 1).to_be_bytes())?;
            runs.insert(&run_key(meta.id), encode(&restored))?;
            totals.insert(&run_key(meta.id), encode(&Tally::new(with_unique)))?;
            Ok(())
        })?;
        Ok(())
    }

    /// Restores counted results of a run, [`RESTORE_BATCH`] to a transaction; returns how many were new.
    pub fn restore_all_results(&self, run: u64, results: &[(JobKey, ResultRecord)]) -> Result<u64> {
        let mut new = 0;
        for chunk in results.chunks(RESTORE_BATCH) {
            new += self.restore_results(run, chunk)?;
        }
        Ok(new)
    }

    /// Restores counted results of a run in one transaction; returns how many were new. A result for a
    /// job that has one already must be identical (then it is skipped).
    pub fn restore_results(&self, run: u64, batch: &[(JobKey, ResultRecord)]) -> Result<u64> {
        let meta = self
            .run(run)?
            .ok_or_else(|| Error::Invalid(format!("result of run {run} before the run itself")))?;
        self.check_restore_results(&meta, batch.iter().map(|(k, r)| (k, r)))?;
        let trees = self.result_trees();
        // A verified job's candidates that disagree with its restored result are evidence against
        // their workers (the commit that counted the result quarantined them; a crash can have kept the
        // result alone, in the ledger): kept as quarantines, written before the transaction that drops
        // the job's record, so that no crash keeps the result and loses them.
        for q in self.disproved(&meta, batch)? {
            tracing::warn!(worker = %q.worker, reason = %q.reason, "a restored result disproves a candidate of its job: its worker is quarantined");
            self.restore_quarantine(&q)?;
        }
        let added = trees.transaction(|(runs, jobs, groups, workers, totals)| {
            let results = groups::Tx { groups, workers };
            let mut tally = stored_tally(totals, run)?;
            let mut added = 0;
            for (key, record) in batch {
                let k = job_key(run, key);
                if let Some(stored) = groups::txn_get(results, run, key)? {
                    if stored.result != record.result {
                        return abort(Error::Invalid(format!(
                            "run {run} job {key}: two different results ({:?} and {:?})",
                            stored.result, record.result
                        )));
                    }
                    continue;
                }
                tally
                    .add(&record.result)
                    .map_err(|e| Abort::Abort(e.into()))?;
                groups::txn_put(results, run, key, record)?;
                // A done job is its result: a verified job's record, if any, goes (its disproved
                // candidates were kept as quarantines first, below).
                jobs.remove(k)?;
                added += 1;
            }
            totals.insert(&run_key(run), encode(&tally))?;
            if tally.jobs == meta.jobs_total {
                let done = RunMeta {
                    finished_unix: Some(record_time(batch).unwrap_or(meta.created_unix)),
                    ..meta.clone()
                };
                runs.insert(&run_key(run), encode(&done))?;
            }
            Ok(added)
        })?;
        Ok(added)
    }

    /// The identities behind candidates (their workers and confirmers; intact: a candidate that fails
    /// its seal is damage, never evidence) that disagree with the results `batch` restores for their jobs
    /// of run `meta`, as quarantines. An identity behind the restored result, or its lease, is never
    /// among them.
    fn disproved(
        &self,
        meta: &RunMeta,
        batch: &[(JobKey, ResultRecord)],
    ) -> Result<Vec<Quarantine>> {
        let fingerprint = meta.fingerprint_value()?;
        let mut disproved = Vec::new();
        for (key, record) in batch {
            let Some(raw) = self.jobs.get(job_key(meta.id, key))? else {
                continue;
            };
            let Ok(job) = decode::<JobRecord>("job", &raw) else {
                continue;
            };
            disproved.extend(
                job.candidates
                    .into_iter()
                    .filter(|c| {
                        c.sealed(fingerprint, key)
                            && c.worker != record.worker
                            && c.lease != record.lease
                            && c.result != record.result
                    })
                    // Every identity behind the candidate: both of a count taken back from two.
                    .flat_map(|c| {
                        let names: Vec<String> = c
                            .identities()
                            .filter(|name| !record.stands_behind(name))
                            .collect();
                        names.into_iter().map(move |name| (name, c.clone()))
                    })
                    .map(|(name, c)| Quarantine {
                        reason: format!(
                            "run {} job {key}: reported total {} nodes {}, confirmed result is total {} nodes {}",
                            meta.id,
                            c.result.total,
                            c.result.nodes,
                            record.result.total,
                            record.result.nodes
                        ),
                        worker: name,
                        at_unix: record.at_unix,
                        by: std::iter::once(record.worker.clone())
                            .chain(record.confirmed_by.iter().cloned())
                            .collect(),
                        held: false,
                        contradicted: Vec::new(),
                    }),
            );
        }
        Ok(disproved)
    }
}

/// The latest commit time in a batch.
fn record_time(batch: &[(JobKey, ResultRecord)]) -> Option<u64> {
    batch.iter().map(|(_, r)| r.at_unix).max()
}

impl Store {
    /// Applies a revocation while restoring: the job's result, if it is the one revoked (`worker`'s, and
    /// `revoked` where the line carries it: see [`super::records::taken_back`]), is taken out of the
    /// totals. The job is then pending again, or, for a count a later result `disputed` (its worker
    /// not quarantined), disputed with that count as its candidate, as the commit that disputed it
    /// left it: the disputing worker's result (which the ledger does not hold) cannot count alone
    /// when it comes again, a worker of a third name decides. Returns whether a result was removed.
    /// A result that cannot be read (its group or its worker's definition damaged) is left alone: the
    /// reconciliation removes it as damaged and restores the ledger's copy, revocations applied.
    pub fn restore_revocation(
        &self,
        run: u64,
        key: &JobKey,
        worker: &str,
        revoked: Option<&ResultRecord>,
        disputed: bool,
    ) -> Result<bool> {
        if let Err(Error::Corrupt(why)) = self.result(run, key) {
            tracing::warn!(run, job = %key, reason = %why, "a revoked result that cannot be read: left for the repair of damaged results");
            return Ok(false);
        }
        let k = job_key(run, key);
        let (runs, jobs, groups, workers, totals) = self.result_trees();
        let trees = (runs, jobs, groups, workers, totals, &self.revoked_counts);
        let removed = trees.transaction(|(runs, jobs, groups, workers, totals, taken)| {
            let results = groups::Tx { groups, workers };
            let Some(record) = groups::txn_get(results, run, key)? else {
                return Ok(false);
            };
            if !super::records::taken_back(&record, worker, revoked) {
                return Ok(false);
            }
            // Totals that cannot be read (or that this result does not fit) are damage the recount
            // after the revocations mends from the results: dropped here, never a reason to keep a
            // revoked result counted.
            let tally = match stored_tally(totals, run) {
                Ok(mut t) => t.remove(&record.result).ok().map(|()| t),
                Err(Abort::Abort(_)) => None,
                Err(conflict) => return Err(conflict),
            };
            groups::txn_remove(results.groups, run, key)?;
            if disputed {
                let open = JobRecord {
                    state: JobState::Disputed,
                    candidates: vec![record.clone()],
                    reason: None,
                };
                jobs.insert(k.as_slice(), encode(&open))?;
            } else {
                jobs.remove(k.as_slice())?;
            }
            // (As the take-back it replays, a revocation's or a dispute's: [`super::revoked`]. Only
            // where the line names the count: a line of ledger format 1 names its worker alone, and
            // may have taken back a later count of that worker's, which no note must keep out.)
            if revoked.is_some() {
                super::revoked::txn_note(taken, run, key, record.lease)?;
            }
            match tally {
                Some(tally) => totals.insert(&run_key(run), encode(&tally))?,
                None => totals.remove(&run_key(run))?,
            };
            if let Some(raw) = runs.get(run_key(run))? {
                let meta: RunMeta = decode("run", &raw).or_else(abort)?;
                if meta.is_done() {
                    let open = RunMeta {
                        finished_unix: None,
                        ..meta
                    };
                    runs.insert(&run_key(run), encode(&open))?;
                }
            }
            Ok(true)
        })?;
        if removed {
            // It lost a counted result: a root kept for it no longer holds.
            self.forget_certificate_root(run)?;
        }
        Ok(removed)
    }
}
