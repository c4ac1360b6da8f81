//! The startup audit: every run's stored totals must equal the sum of its stored results, every result
//! must pass its seal, and no job with a result may also have a record of another state (a done job is
//! its result alone). One pass over the results, beside the few records of open and failed jobs. A store
//! that fails it is not served.

use std::collections::{HashMap, HashSet};

use nqueens_common::Tally;

use super::records::{decode, run_key, split_job_key, JobRecord, JobState};
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
            // The run's open and failed jobs (few): none of them may have a result.
            let mut recorded = HashSet::new();
            for kv in self.jobs.scan_prefix(run_key(meta.id)) {
                let (k, v) = kv?;
                let (_, key) = split_job_key(&k)?;
                let record: JobRecord = decode("job", &v)?;
                if record.state == JobState::Done {
                    return Err(Error::Corrupt(format!(
                        "run {}: job {key} has a done record (a done job is its result alone)",
                        meta.id
                    )));
                }
                recorded.insert(key);
            }
            for item in self.results(meta.id) {
                let (key, record) = item?;
                if !record.sealed(fingerprint, &key) {
                    return Err(Error::Corrupt(format!(
                        "run {}: the stored result of job {key} fails its seal",
                        meta.id
                    )));
                }
                if recorded.contains(&key) {
                    return Err(Error::Corrupt(format!(
                        "run {}: job {key} has a result but is recorded as open or failed",
                        meta.id
                    )));
                }
                sum.add(&record.result)?;
                if !record.worker_id.is_empty() {
                    *by_worker.entry(record.worker_id).or_insert(0) += 1;
                }
            }
            if sum != stored {
                return Err(Error::Corrupt(format!(
                    "run {}: stored totals {stored:?} but the results sum to {sum:?}",
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
