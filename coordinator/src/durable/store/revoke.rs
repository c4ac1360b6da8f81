//! Revoking a quarantined worker's results: once a worker is shown wrong on one job, none of its results
//! is trusted. Its counted results that no other worker confirmed, and those it computed or confirmed
//! whose other workers are all quarantined as well (in a record run: that fewer than two trusted
//! identities stand behind), are taken out of the run totals (checked
//! subtraction) and their jobs put back to pending, its recorded results of verified jobs are dropped (and
//! its part in a candidate it had confirmed, a count taken back), and
//! a run it had finished is running again. One transaction; the caller flushes. A worker held for an
//! undecided dispute ([`super::Quarantine::held`]) keeps its counts and its sides of disputes in record
//! runs: there it counts as trusted, in its own revocation and in others', until a decision makes its
//! quarantine whole. One whose hold ended undecided is made whole by its revocation, which also takes
//! back each count of the jobs it contradicted that only the identities it contradicted stand
//! behind.

use std::collections::BTreeMap;

use nqueens_common::Tally;
use sled::transaction::{ConflictableTransactionError as Abort, Transactional};

use super::changed::{Moved, Revoked};
use super::records::{
    decode, encode, job_key, run_key, split_job_key, JobRecord, JobState, Quarantine,
};
use super::txn::{abort, job_record, stored_tally};
use super::{groups, RunMeta, Store};
use crate::error::{Error, Result};

/// What revoking a worker's results changed.
#[derive(Debug, Clone, Default)]
pub struct Revocation {
    pub revoked: Vec<Revoked>,
    /// The new totals of every run that lost results.
    pub tallies: BTreeMap<u64, Tally>,
    /// Runs that were done and are running again.
    pub reopened: Vec<RunMeta>,
    /// Jobs whose state changed (`to: None`: pending again), and open jobs whose candidates changed
    /// in the same state (`from == to`: those that stood behind a dropped candidate may compute the
    /// job again).
    pub moved: Vec<Moved>,
    /// Stored results were left out because they cannot be read: the revocation is complete only once
    /// the store is repaired (reopened: see `service::quarantines::revoke_quarantined`).
    pub incomplete: bool,
    /// Its quarantine, made whole by this revocation (its hold had ended undecided): for the ledger,
    /// so that a store rebuilt from it does not take back again what was taken back now.
    pub whole: Option<Quarantine>,
}

impl Store {
    /// Takes back every unconfirmed result of the worker named `worker` (see the module text).
    pub fn revoke(&self, worker: &str) -> Result<Revocation> {
        let Revocable {
            counted,
            recorded,
            incomplete,
            hold_ended,
            record_runs,
        } = self.revocable(worker)?;
        if !hold_ended && counted.is_empty() && recorded.is_empty() {
            return Ok(Revocation {
                incomplete,
                ..Revocation::default()
            });
        }
        let trees = self.commit_trees();
        let revocation = trees.transaction(|tx| {
            let (runs, jobs, groups, workers, totals, quarantine, kept, taken) = tx;
            let results = groups::Tx { groups, workers };
            let mut out = Revocation::default();
            // Its record says so too, with the counts taken back: whole, it takes nothing up, and
            // what was kept for it goes (its counts are among `counted`).
            if hold_ended {
                if let Some(raw) = quarantine.get(worker.as_bytes())? {
                    let q: Quarantine = decode("quarantine", &raw).or_else(abort)?;
                    let whole = Quarantine {
                        held: false,
                        contradicted: Vec::new(),
                        ..q
                    };
                    quarantine.insert(worker.as_bytes(), encode(&whole))?;
                    out.whole = Some(whole);
                }
                kept.remove(worker.as_bytes())?;
            }
            for k in &counted {
                let (run, key) = split_job_key(k).or_else(abort)?;
                let Some(record) = groups::txn_take(results, run, &key)? else {
                    continue;
                };
                let mut tally = match out.tallies.get(&run) {
                    Some(t) => *t,
                    None => stored_tally(totals, run)?,
                };
                tally
                    .remove(&record.result)
                    .map_err(|e| Abort::Abort(e.into()))?;
                jobs.remove(k.as_slice())?;
                // (Noted: nothing else shows that its job, pending now, ever held it.)
                super::revoked::txn_note(taken, run, &key, record.lease)?;
                out.tallies.insert(run, tally);
                out.moved.push(Moved {
                    run,
                    key: key.clone(),
                    from: Some(JobState::Done),
                    to: None,
                });
                out.revoked.push(Revoked { run, key, record });
            }
            for k in &recorded {
                let (run, key) = split_job_key(k).or_else(abort)?;
                let Some(mut record) = job_record(jobs, k)? else {
                    continue;
                };
                let from = Some(record.state);
                let before = record.candidates.clone();
                // In a record run's dispute, a side it computed stays behind those who confirmed it,
                // to be decided: dropped whole, it took their part with it, the dispute that held an
                // honest checker shrank to the checker's result, and its quarantine was made whole,
                // its record counts gone, with nothing left to disprove its confirmer and lift it
                // (found by a review, 2026-12-01).
                // Only where another side stays: a side left alone goes with its worker, and the job
                // is computed anew (handed on then, it became a verified job's first result as old
                // as the dispute, whose draw of confirmers admitted every identity at once: found
                // by a review of the change).
                let others = record.candidates.iter().any(|c| c.worker != worker);
                let dispute = record.state == JobState::Disputed && record_runs.contains(&run);
                if dispute && others {
                    for c in record.candidates.iter_mut().filter(|c| c.worker == worker) {
                        c.handed_to_confirmer();
                    }
                }
                // Its own candidates go; where it confirmed one (a count taken back), its part goes.
                record.candidates.retain(|c| c.worker != worker);
                for c in &mut record.candidates {
                    c.drop_confirmer(worker);
                }
                // A record run's dispute left with one side stays a dispute: a majority of three
                // decides it, and a checker whose result it holds stays held until then. As a
                // verified job's first result (as old as the dispute, so that the draw of
                // confirmers admitted everyone at once) one partner confirmed a liar's lone
                // result, and an honest checker's hold ended with nothing decided: the next start
                // made it whole, and the contradictions it kept were never taken up (found by a
                // review, 2026-12-01).
                let to = match record.candidates.len() {
                    0 => None,
                    1 if !dispute => Some(JobState::Verifying),
                    _ => Some(JobState::Disputed),
                };
                match to {
                    None => jobs.remove(k.as_slice())?,
                    Some(state) => {
                        record.state = state;
                        jobs.insert(k.as_slice(), encode(&record))?
                    }
                };
                if from != to || record.candidates != before {
                    out.moved.push(Moved { run, key, from, to });
                }
            }
            for (run, tally) in &out.tallies {
                totals.insert(&run_key(*run), encode(tally))?;
                let Some(raw) = runs.get(run_key(*run))? else {
                    return abort(Error::UnknownRun(run.to_string()));
                };
                let meta: RunMeta = decode("run", &raw).or_else(abort)?;
                if meta.is_done() {
                    let open = RunMeta {
                        finished_unix: None,
                        ..meta
                    };
                    runs.insert(&run_key(*run), encode(&open))?;
                    out.reopened.push(open);
                }
            }
            Ok(out)
        })?;
        // A run running again has another root when it finishes: the kept one goes (every caller:
        // the commit thread, the start's completion of revocations, offline tools).
        for run in &revocation.reopened {
            self.forget_certificate_root(run.id)?;
        }
        Ok(Revocation {
            incomplete,
            ..revocation
        })
    }

    /// What revoking `worker` would take back, read without changing anything: its counted results
    /// that nobody confirmed, and every counted result it computed or confirmed whose other workers
    /// are all quarantined too (nobody trusted stands behind it), or, in a record run, that fewer than
    /// two trusted identities stand behind.
    fn revocable(&self, worker: &str) -> Result<Revocable> {
        let runs = self.runs()?;
        // Record runs that may still decide a dispute (not cancelled).
        let record_runs: std::collections::HashSet<u64> = runs
            .iter()
            .filter(|m| m.record && !m.is_cancelled())
            .map(|m| m.id)
            .collect();
        let stored = self.quarantined()?;
        // A held worker stays held while it stands behind a side of a dispute of such a run: one that
        // no dispute can decide any more (its job failed or was put back, its run cancelled) is
        // taken for whole, so that its record counts do not stand for good.
        let mut in_dispute = std::collections::HashSet::new();
        if stored.iter().any(|q| q.held) {
            for kv in self.jobs.iter() {
                let (k, v) = kv?;
                let record: JobRecord = decode("job", &v)?;
                if record.state == JobState::Disputed && record_runs.contains(&split_job_key(&k)?.0)
                {
                    for q in stored.iter().filter(|q| q.held) {
                        if record.computed_by(&q.worker) {
                            in_dispute.insert(q.worker.clone());
                        }
                    }
                }
            }
        }
        // So does one that waits to take up its next kept contradiction (its dispute decided for it,
        // that contradiction's count in another dispute meanwhile): before, nothing held it, and the
        // next start made it whole while that dispute was still open.
        for q in stored.iter().filter(|q| q.held) {
            if !in_dispute.contains(&q.worker) && self.waits(&q.worker)? {
                in_dispute.insert(q.worker.clone());
            }
        }
        let held_record = stored.iter().find(|q| q.worker == worker && q.held);
        let held_stored = held_record.is_some();
        // (Held: the identities and jobs it contradicted.)
        let (accused, contradicted) = held_record
            .map(|q| {
                let jobs: std::collections::HashSet<Vec<u8>> = q
                    .contradicted
                    .iter()
                    .map(|(run, key)| job_key(*run, key))
                    .collect();
                (q.by.clone(), jobs)
            })
            .unwrap_or_default();
        // Each quarantined worker, and whether it is held (see [`super::Quarantine::held`]).
        let quarantined: std::collections::HashMap<String, bool> = stored
            .into_iter()
            .map(|q| {
                let held = q.held && in_dispute.contains(&q.worker);
                (q.worker, held)
            })
            .collect();
        let held = quarantined.get(worker).copied().unwrap_or(false);
        // In a record run a held worker is still trusted: its dispute is undecided.
        let untrusted = |name: &str, record: bool| match quarantined.get(name) {
            _ if name == worker => !(record && held),
            Some(&h) => !(record && h),
            None => false,
        };
        let ended = held_stored && !held;
        // A held record of a build before the jobs were listed: what was kept for it names them
        // (its dispute's, and its kept contradictions'), so that an upgrade mid-dispute keeps the
        // rule.
        let mut contradicted = contradicted;
        if contradicted.is_empty() {
            if let Some(raw) = self.challenges.get(worker.as_bytes())? {
                if let Ok(kept) = decode::<super::challenges::Kept>("challenges", &raw) {
                    let jobs = kept.open.iter().map(|(run, key)| (*run, key));
                    let jobs = jobs.chain(kept.challenges.iter().map(|c| (c.run, &c.key)));
                    contradicted.extend(jobs.map(|(run, key)| job_key(run, key)));
                }
            }
        }
        let mut counted = Vec::new();
        let mut incomplete = false;
        for meta in runs {
            let run = meta.id;
            for item in self.results_raw(run) {
                // A result that cannot be read is damage: the next start removes it and restores the
                // ledger's copy, then completes this revocation (see `revoke_quarantined`).
                let (key, record) = match item {
                    Ok((key, Ok(record))) => (key, record),
                    Ok((key, Err(e))) => {
                        tracing::error!(run, job = %key, error = %e, place = "store", "a stored result that cannot be read, left out of a revocation");
                        incomplete = true;
                        continue;
                    }
                    Err(Error::Corrupt(e)) => {
                        tracing::error!(run, error = %e, place = "store", "a stored entry that cannot be read, left out of a revocation");
                        incomplete = true;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let involved =
                    record.worker == worker || record.confirmed_by.iter().any(|c| c == worker);
                // The identities still trusted behind it; a record run needs two of them.
                let mut trusted: Vec<&str> = std::iter::once(record.worker.as_str())
                    .chain(record.confirmed_by.iter().map(String::as_str))
                    .filter(|name| !untrusted(name, meta.record))
                    .collect();
                trusted.sort_unstable();
                trusted.dedup();
                let needed = if meta.record { 2 } else { 1 };
                // Its hold ended undecided (its dispute's job failed, its run was cancelled, or a
                // store rebuilt from a file holds no dispute): nothing shows whether the counts it
                // contradicted are wrong. Each one that only the identities it contradicted stand
                // behind (beside identities not trusted) is taken back too, to be computed anew,
                // kept or not. Before, what it kept went with its hold, and a lie a second pair
                // confirmed stood (a colluder stalling the first dispute until its job failed ended
                // the run done with the lie), as it did in a store rebuilt from the ledger. Only the
                // jobs it contradicted: keyed on the identities alone, one batch contradicting many
                // honest counts took back every count of theirs (found by a review, 2026-12-01).
                let k = job_key(run, &key);
                let accused_only = ended
                    && meta.record
                    && contradicted.contains(&k)
                    && trusted.iter().all(|name| accused.iter().any(|a| a == name));
                if (involved && trusted.len() < needed) || accused_only {
                    counted.push(k);
                }
            }
        }
        let mut recorded = Vec::new();
        for kv in self.jobs.iter() {
            let (k, v) = kv?;
            let record: JobRecord = decode("job", &v)?;
            // A held worker's results of a record run's disputes stand: one of them is its side of
            // the dispute that decides it. Those waiting for a confirmation go, so that nothing new
            // is counted with it behind.
            let kept = held
                && record.state == JobState::Disputed
                && record_runs.contains(&split_job_key(&k)?.0);
            if record.state.is_open() && record.computed_by(worker) && !kept {
                recorded.push(k.to_vec());
            }
        }
        Ok(Revocable {
            counted,
            recorded,
            incomplete,
            hold_ended: ended,
            record_runs,
        })
    }

    /// The quarantined workers whose revocation has not completed (a write that failed, or a crash,
    /// between the quarantine and the revocation; the coordinator's next start completes it), each with
    /// how many of its unconfirmed results are still counted. A store for which this is not empty may hold
    /// a wrong count: `export` and `audit` refuse it.
    pub fn unrevoked_quarantines(&self) -> Result<Vec<(String, usize)>> {
        let mut left = Vec::new();
        for q in self.quarantined()? {
            let r = self.revocable(&q.worker)?;
            if r.incomplete || !r.counted.is_empty() || !r.recorded.is_empty() {
                left.push((q.worker, r.counted.len()));
            }
        }
        Ok(left)
    }
}

/// What a revocation would take back.
struct Revocable {
    /// Keys of the counted results nobody trusted stands behind (see [`Store::revocable`]).
    counted: Vec<Vec<u8>>,
    /// Keys of open jobs that hold a result of the worker.
    recorded: Vec<Vec<u8>>,
    /// Some stored results could not be read.
    incomplete: bool,
    /// The worker's quarantine is stored held, but no dispute holds it any more: taken for whole.
    hold_ended: bool,
    /// Record runs that may still decide a dispute (not cancelled).
    record_runs: std::collections::HashSet<u64>,
}
