//! Committing results: one sled transaction over `runs`, `jobs`, `results` and `totals` that marks the jobs
//! done, stores their counts and adds them to the run totals with checked u128 additions. A result for a
//! job already done is compared with the stored one and never added.

use std::collections::BTreeMap;

use nqueens_common::{JobKey, JobResult, Tally};
use sled::transaction::{ConflictableTransactionError as Abort, Transactional};

use super::records::{
    decode, encode, job_key, now_unix, run_key, JobRecord, JobState, ResultRecord,
};
use super::{RunMeta, Store};
use crate::error::{Error, Result};

/// A validated result on its way into the store.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub run: u64,
    pub key: JobKey,
    pub result: JobResult,
    pub worker: String,
    pub lease: u64,
}

/// What happened to one incoming result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Counted.
    Accepted,
    /// The job was done already, with the same result.
    Duplicate,
    /// The job was done already, with a different result (kept: `stored`).
    Mismatch { stored: JobResult },
}

/// The effect of one commit.
#[derive(Debug, Clone, Default)]
pub struct Committed {
    /// One per incoming result, in order.
    pub outcomes: Vec<Outcome>,
    /// The new totals of every run that accepted a result.
    pub tallies: BTreeMap<u64, Tally>,
    /// Runs whose last job this commit accepted.
    pub finished: Vec<RunMeta>,
}

fn abort<T>(e: Error) -> std::result::Result<T, Abort<Error>> {
    Err(Abort::Abort(e))
}

impl Store {
    /// Applies a batch of results in one transaction. Not flushed: the caller flushes (once for a group
    /// of batches) before acknowledging any of them.
    pub fn commit(&self, batch: &[Incoming]) -> Result<Committed> {
        let trees = (&self.runs, &self.jobs, &self.results, &self.totals);
        let committed = trees.transaction(|(runs, jobs, results, totals)| {
            let mut out = Committed::default();
            let mut metas: BTreeMap<u64, RunMeta> = BTreeMap::new();
            for inc in batch {
                if let std::collections::btree_map::Entry::Vacant(slot) = metas.entry(inc.run) {
                    let Some(raw) = runs.get(run_key(inc.run))? else {
                        return abort(Error::UnknownRun(inc.run.to_string()));
                    };
                    slot.insert(decode("run", &raw).or_else(abort)?);
                }
                let k = job_key(inc.run, &inc.key);
                if let Some(raw) = results.get(&k)? {
                    let stored: ResultRecord = decode("result", &raw).or_else(abort)?;
                    out.outcomes.push(if stored.result == inc.result {
                        Outcome::Duplicate
                    } else {
                        Outcome::Mismatch {
                            stored: stored.result,
                        }
                    });
                    continue;
                }
                let mut tally = match out.tallies.get(&inc.run) {
                    Some(t) => *t,
                    None => match totals.get(run_key(inc.run))? {
                        Some(raw) => decode("totals", &raw).or_else(abort)?,
                        None => {
                            return abort(Error::Corrupt(format!("run {} has no totals", inc.run)))
                        }
                    },
                };
                tally.add(&inc.result).map_err(|e| Abort::Abort(e.into()))?;
                let record = ResultRecord {
                    result: inc.result,
                    worker: inc.worker.clone(),
                    lease: inc.lease,
                    at_unix: now_unix(),
                };
                results.insert(k.as_slice(), encode(&record))?;
                jobs.insert(
                    k,
                    encode(&JobRecord {
                        state: JobState::Done,
                    }),
                )?;
                out.tallies.insert(inc.run, tally);
                out.outcomes.push(Outcome::Accepted);
            }
            for (run, tally) in &out.tallies {
                totals.insert(&run_key(*run), encode(tally))?;
                let meta = &metas[run];
                if tally.jobs > meta.jobs_total {
                    return abort(Error::Corrupt(format!(
                        "run {run} would have {} results for {} jobs",
                        tally.jobs, meta.jobs_total
                    )));
                }
                if tally.jobs == meta.jobs_total && !meta.is_done() {
                    let done = RunMeta {
                        finished_unix: Some(now_unix()),
                        ..meta.clone()
                    };
                    runs.insert(&run_key(*run), encode(&done))?;
                    out.finished.push(done);
                }
            }
            Ok(out)
        })?;
        Ok(committed)
    }
}
