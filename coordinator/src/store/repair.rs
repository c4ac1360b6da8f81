//! Checking and mending the store at startup: the migration from format 1 (results without seals), the
//! raw read of a run's results that tells a damaged record from an intact one, and the repairs the
//! reconciliation with the ledger applies (damaged results removed, totals recomputed from the results).

use nqueens_common::checksum::seal;
use nqueens_common::{JobKey, Tally};
use sled::transaction::Transactional;

use super::records::{decode, encode, job_key, run_key, split_job_key, JobRecord, JobState};
use super::{ResultRecord, RunMeta, Store, FORMAT, FORMAT_VERSION};
use crate::error::{Error, Result};

impl Store {
    /// Brings a store of an earlier format up to [`FORMAT_VERSION`]: format 1 results and candidates
    /// get the seal of what they hold (they had none; the reconciliation with the ledger then checks them
    /// against the ledger's copy). A store of a newer format is refused.
    pub(super) fn migrate(&self) -> Result<()> {
        let format = match self.meta.get(FORMAT)? {
            Some(v) => u64::from_be_bytes(
                v.as_ref()
                    .try_into()
                    .map_err(|_| Error::Corrupt("the store format is not a u64".into()))?,
            ),
            // A new, empty store: nothing to migrate, only the format to record.
            None if self.runs.is_empty() => {
                self.meta.insert(FORMAT, &FORMAT_VERSION.to_be_bytes())?;
                return Ok(());
            }
            None => 1,
        };
        if format > FORMAT_VERSION {
            return Err(Error::Corrupt(format!(
                "the store has format {format}, newer than this build's {FORMAT_VERSION}: run it with a newer nqueens"
            )));
        }
        if format == FORMAT_VERSION {
            return Ok(());
        }
        let mut sealed = 0u64;
        // 2 -> 3 changes no record: the run controls are new fields with defaults.
        for meta in self.runs()?.into_iter().filter(|_| format < 2) {
            let fingerprint = meta.fingerprint_value()?;
            for kv in self.results.scan_prefix(run_key(meta.id)) {
                let (k, v) = kv?;
                let (_, key) = split_job_key(&k)?;
                let mut record: ResultRecord = decode("result", &v)?;
                if record.seal.is_none() {
                    record.seal = Some(seal(fingerprint, &key, &record.result));
                    self.results.insert(k, encode(&record))?;
                    sealed += 1;
                }
            }
            for kv in self.jobs.scan_prefix(run_key(meta.id)) {
                let (k, v) = kv?;
                let (_, key) = split_job_key(&k)?;
                let mut record: JobRecord = decode("job", &v)?;
                if record.candidates.iter().any(|c| c.seal.is_none()) {
                    for c in &mut record.candidates {
                        c.seal
                            .get_or_insert_with(|| seal(fingerprint, &key, &c.result));
                    }
                    self.jobs.insert(k, encode(&record))?;
                }
            }
        }
        self.meta.insert(FORMAT, &FORMAT_VERSION.to_be_bytes())?;
        self.flush()?;
        if sealed > 0 {
            tracing::info!(
                from = format,
                to = FORMAT_VERSION,
                results = sealed,
                "store migrated: results sealed"
            );
        } else {
            tracing::info!(from = format, to = FORMAT_VERSION, "store format migrated");
        }
        Ok(())
    }

    /// A run's results in key order, each either decoded or the reason it cannot be (a damaged record);
    /// seals are not checked here.
    pub fn results_raw(
        &self,
        run: u64,
    ) -> impl Iterator<Item = Result<(JobKey, Result<ResultRecord>)>> {
        self.results.scan_prefix(run_key(run)).map(|kv| {
            let (k, v) = kv?;
            let (_, key) = split_job_key(&k)?;
            Ok((key, decode("result", &v)))
        })
    }

    /// Removes results (damaged ones) and their jobs' done marks; the caller recounts the run.
    pub fn remove_results(&self, run: u64, keys: &[JobKey]) -> Result<()> {
        for key in keys {
            let k = job_key(run, key);
            self.results.remove(&k)?;
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
        let fingerprint = meta.fingerprint_value()?;
        let with_unique = meta.strategy == nqueens_common::Strategy::D4;
        let mut tally = Tally::new(with_unique);
        let mut last = meta.created_unix;
        for item in self.results(meta.id) {
            let (key, record) = item?;
            if !record.sealed(fingerprint, &key) {
                return Err(Error::Corrupt(format!(
                    "run {} job {key}: the stored result fails its seal",
                    meta.id
                )));
            }
            tally.add(&record.result)?;
            last = last.max(record.at_unix);
        }
        let stored: Option<Tally> = self
            .totals
            .get(run_key(meta.id))?
            .and_then(|v| decode("totals", &v).ok());
        let done = tally.jobs == meta.jobs_total;
        let changed = stored != Some(tally) || done != meta.is_done();
        if changed {
            let updated = RunMeta {
                finished_unix: done.then(|| meta.finished_unix.unwrap_or(last)),
                ..meta.clone()
            };
            (&self.runs, &self.totals).transaction(|(runs, totals)| {
                totals.insert(&run_key(meta.id), encode(&tally))?;
                runs.insert(&run_key(meta.id), encode(&updated))?;
                Ok::<_, sled::transaction::ConflictableTransactionError<Error>>(())
            })?;
        }
        Ok((tally, changed))
    }
}
