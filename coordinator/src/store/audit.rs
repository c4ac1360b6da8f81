//! The startup audit: every run's stored totals must equal the sum of its stored results, every result
//! must have its job marked done and every job marked done must have its result. A store that fails it is
//! not served.

use std::collections::HashMap;

use nqueens_common::Tally;

use super::records::{decode, job_key, run_key, split_job_key, JobRecord, JobState};
use super::Store;
use crate::error::{Error, Result};

/// The audit of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    pub run: u64,
    /// The sum of the stored results (equal to the stored totals, or the audit fails).
    pub tally: Tally,
    /// The stored results per id of the worker process that computed them (records of store format 1,
    /// which carry no id, are left out).
    pub by_worker: HashMap<String, u64>,
}

impl Store {
    /// Recomputes every run's totals from its results; an error names the first disagreement.
    pub fn audit(&self) -> Result<Vec<AuditLine>> {
        let mut lines = Vec::new();
        for meta in self.runs()? {
            let stored = self.tally(meta.id)?;
            let mut sum = Tally::new(stored.unique8.is_some());
            let fingerprint = meta.fingerprint_value()?;
            let mut by_worker: HashMap<String, u64> = HashMap::new();
            for item in self.results(meta.id) {
                let (key, record) = item?;
                if !record.sealed(fingerprint, &key) {
                    return Err(Error::Corrupt(format!(
                        "run {}: the stored result of job {key} fails its seal",
                        meta.id
                    )));
                }
                if self.job(meta.id, &key)?.map(|r| r.state) != Some(JobState::Done) {
                    return Err(Error::Corrupt(format!(
                        "run {}: job {key} has a result but is not marked done",
                        meta.id
                    )));
                }
                sum.add(&record.result)?;
                if !record.worker_id.is_empty() {
                    *by_worker.entry(record.worker_id).or_insert(0) += 1;
                }
            }
            let mut marked = 0;
            for kv in self.jobs.scan_prefix(run_key(meta.id)) {
                let (k, v) = kv?;
                let record: JobRecord = decode("job", &v)?;
                if record.state == JobState::Done {
                    marked += 1;
                    if !self
                        .results
                        .contains_key(job_key(meta.id, &split_job_key(&k)?.1))?
                    {
                        return Err(Error::Corrupt(format!(
                            "run {}: job {} is marked done but has no result",
                            meta.id,
                            split_job_key(&k)?.1
                        )));
                    }
                }
            }
            if sum != stored || marked != stored.jobs {
                return Err(Error::Corrupt(format!(
                    "run {}: stored totals {stored:?} ({marked} jobs marked done) but the results sum to {sum:?}",
                    meta.id
                )));
            }
            if meta.is_done() != (stored.jobs == meta.jobs_total) {
                return Err(Error::Corrupt(format!(
                    "run {}: {} of {} jobs done but the run is {}",
                    meta.id,
                    stored.jobs,
                    meta.jobs_total,
                    if meta.is_done() {
                        "marked done"
                    } else {
                        "not marked done"
                    }
                )));
            }
            lines.push(AuditLine {
                run: meta.id,
                tally: sum,
                by_worker,
            });
        }
        Ok(lines)
    }
}
