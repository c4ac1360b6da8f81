//! The startup audit: every run's stored totals must equal the sum of its stored results, every result
//! must pass its seal, and no job with a result may also have a record of another state (a done job is
//! its result alone). A store that fails it is not served.
//!
//! Both the audit and the startup reconciliation read a run's results through [`Store::survey`], one
//! pass that hands every intact result to the caller too: on the quick path the reconciliation's digest,
//! the recount of the totals and the audit share that one pass.

use std::collections::{HashMap, HashSet};

use nqueens_common::{JobKey, Tally};

use super::records::{decode, run_key, split_job_key, JobRecord, JobState, ResultRecord};
use super::{RunMeta, Store};
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
    /// The stored results per worker name (identity, for results of workers with credentials).
    pub names: HashMap<String, u64>,
    /// Results that a second identity confirmed.
    pub confirmed: u64,
    /// The identities with a confirmed result (its worker's, or one that confirmed it).
    pub confirmed_names: HashSet<String>,
    /// Confirmed results computed by two kernel families (as their workers stated them).
    pub two_families: u64,
}

/// What one pass over a run's stored results found.
#[derive(Debug, Clone)]
pub struct Survey {
    /// The sum of its intact results.
    pub sum: Tally,
    /// Its intact results per worker process id.
    pub by_worker: HashMap<String, u64>,
    /// Its intact results per worker name.
    pub names: HashMap<String, u64>,
    /// Its intact results that a second identity confirmed.
    pub confirmed: u64,
    /// The identities with a confirmed result among them.
    pub confirmed_names: HashSet<String>,
    /// Its confirmed results computed by two kernel families.
    pub two_families: u64,
    /// The latest commit time among them (the run's creation time when there are none).
    pub last_at: u64,
    /// The first result that is undecodable or fails its seal (damaged on disk), if any.
    pub damaged: Option<JobKey>,
    /// The first job record that is undecodable, if any (the full reconciliation may remove it with a
    /// damaged result; otherwise the audit refuses the store).
    pub damaged_record: Option<JobKey>,
    /// The first result whose job also has an open or failed record, if any: the store contradicts
    /// itself.
    pub contradicted: Option<JobKey>,
    /// The first `done` record (format 4 writes none; the migration drops them), if any.
    pub done_record: Option<JobKey>,
}

impl Store {
    /// Reads `meta`'s results once, handing each intact one to `each` (in key order).
    pub fn survey(
        &self,
        meta: &RunMeta,
        mut each: impl FnMut(&JobKey, &ResultRecord),
    ) -> Result<Survey> {
        let fingerprint = meta.fingerprint_value()?;
        let mut survey = Survey {
            sum: Tally::new(meta.strategy == nqueens_common::Strategy::D4),
            by_worker: HashMap::new(),
            names: HashMap::new(),
            confirmed: 0,
            confirmed_names: HashSet::new(),
            two_families: 0,
            last_at: meta.created_unix,
            damaged: None,
            damaged_record: None,
            contradicted: None,
            done_record: None,
        };
        // The run's job records, walked beside its results (both in key order, the keys of one run all
        // of one length): no job with a result may have a record, and none is kept in memory.
        let mut records = self
            .jobs
            .scan_prefix(run_key(meta.id))
            .map(|kv| -> Result<_> {
                let (k, v) = kv?;
                let (_, key) = split_job_key(&k)?;
                Ok((key, decode::<JobRecord>("job", &v).ok().map(|r| r.state)))
            });
        let mut next_record: Option<(JobKey, Option<JobState>)> = records.next().transpose()?;
        // Notes what a record says of the store, and steps to the next one.
        let mut pass =
            |survey: &mut Survey, next: &mut Option<(JobKey, Option<JobState>)>| -> Result<()> {
                if let Some((key, state)) = next.take() {
                    match state {
                        Some(JobState::Done) => {
                            survey.done_record.get_or_insert(key);
                        }
                        None => {
                            survey.damaged_record.get_or_insert(key);
                        }
                        Some(_) => {}
                    }
                }
                *next = records.next().transpose()?;
                Ok(())
            };
        for item in self.results_raw(meta.id) {
            let (key, record) = item?;
            while next_record.as_ref().is_some_and(|(k, _)| *k < key) {
                pass(&mut survey, &mut next_record)?;
            }
            let beside = next_record.as_ref().is_some_and(|(k, _)| *k == key);
            let record = match record {
                Ok(r) if r.sealed(fingerprint, &key) => r,
                _ => {
                    survey.damaged.get_or_insert(key);
                    continue;
                }
            };
            if beside {
                survey.contradicted.get_or_insert(key.clone());
            }
            survey.sum.add(&record.result)?;
            survey.last_at = survey.last_at.max(record.at_unix);
            each(&key, &record);
            if !record.worker_id.is_empty() {
                *survey.by_worker.entry(record.worker_id).or_insert(0) += 1;
            }
            // Confirmed by a second identity: a name other than its own worker's.
            if record.confirmed_by.iter().any(|n| *n != record.worker) {
                survey.confirmed += 1;
                if nqueens_common::Family::distinct(&record.families) >= 2 {
                    survey.two_families += 1;
                }
                for name in record.confirmed_by.iter().chain([&record.worker]) {
                    if !survey.confirmed_names.contains(name) {
                        survey.confirmed_names.insert(name.clone());
                    }
                }
            }
            match survey.names.get_mut(&record.worker) {
                Some(n) => *n += 1,
                None => {
                    survey.names.insert(record.worker, 1);
                }
            }
        }
        while next_record.is_some() {
            pass(&mut survey, &mut next_record)?;
        }
        Ok(survey)
    }

    /// Recomputes every run's totals from its results; an error names the first disagreement.
    pub fn audit(&self) -> Result<Vec<AuditLine>> {
        self.runs()?
            .iter()
            .map(|meta| {
                let survey = self.survey(meta, |_, _| {})?;
                self.audited(meta, survey)
            })
            .collect()
    }

    /// The audit of one run from its survey; an error names the first disagreement.
    pub fn audited(&self, meta: &RunMeta, survey: Survey) -> Result<AuditLine> {
        let stored = self.tally(meta.id)?;
        let findings = [
            (
                &survey.damaged,
                "the stored result fails its seal or cannot be read (a group of results is named by its jobs' common prefix)",
            ),
            (&survey.damaged_record, "the stored record is undecodable"),
            (
                &survey.done_record,
                "a done record (a done job is its result alone)",
            ),
            (
                &survey.contradicted,
                "a result, but it is recorded as open or failed",
            ),
        ];
        if let Some((key, what)) = findings
            .iter()
            .find_map(|(key, what)| key.as_ref().map(|k| (k, what)))
        {
            return Err(Error::Corrupt(format!("run {} job {key}: {what}", meta.id)));
        }
        if survey.sum != stored {
            return Err(Error::Corrupt(format!(
                "run {}: stored totals {stored:?} but the results sum to {:?}",
                meta.id, survey.sum
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
        Ok(AuditLine {
            run: meta.id,
            tally: survey.sum,
            by_worker: survey.by_worker,
            names: survey.names,
            confirmed: survey.confirmed,
            confirmed_names: survey.confirmed_names,
            two_families: survey.two_families,
        })
    }
}
