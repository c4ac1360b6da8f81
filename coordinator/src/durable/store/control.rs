//! Run controls in the store: cancelling, pausing, resuming and re-prioritising a run (one transaction on
//! its record, flushed before the call returns), and listing a run's jobs in one state (what `status
//! --jobs failed` reads).

use nqueens_common::JobKey;

use super::records::{decode, encode, now_unix, run_key, split_job_key, JobRecord, JobState};
use super::txn::abort;
use super::{RunMeta, Store};
use crate::error::{Error, Result};

/// An operator's change to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// For good: nothing more is leased or counted. A cancelled run stays cancelled.
    Cancel,
    /// Nothing is leased until [`Control::Resume`].
    Pause,
    Resume,
    /// Workers take the running run of the highest priority first.
    Priority(i32),
}

impl Control {
    /// Its name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Control::Cancel => "cancel",
            Control::Pause => "pause",
            Control::Resume => "resume",
            Control::Priority(_) => "priority",
        }
    }
}

/// One job of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedJob {
    pub run: u64,
    pub key: JobKey,
    pub state: JobState,
    /// Why it failed.
    pub reason: Option<String>,
    /// The names of the workers whose results it holds (a verifying or disputed job).
    pub workers: Vec<String>,
}

/// Jobs in one state, in run and key order, at most a limit of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobListing {
    pub jobs: Vec<ListedJob>,
    /// More jobs were in that state than the limit.
    pub truncated: bool,
}

impl Store {
    /// Applies `change` to run `id`'s record and makes it durable; returns the record as it now is.
    /// A done run takes no change (its totals are final), a cancelled run none but another cancel.
    pub fn control(&self, id: u64, change: Control) -> Result<RunMeta> {
        let meta = self.apply_control(id, change)?;
        self.flush()?;
        Ok(meta)
    }

    /// [`Store::control`] without the flush: the committer makes it durable with its round.
    pub fn apply_control(&self, id: u64, change: Control) -> Result<RunMeta> {
        let meta = self.runs.transaction(|runs| {
            let Some(raw) = runs.get(run_key(id))? else {
                return abort(Error::UnknownRun(id.to_string()));
            };
            let mut meta: RunMeta = decode("run", &raw).or_else(abort)?;
            if meta.is_done() {
                return abort(Error::RunDone(id.to_string()));
            }
            match change {
                Control::Cancel if meta.is_cancelled() => return Ok(meta),
                Control::Cancel => meta.cancelled_unix = Some(now_unix()),
                _ if meta.is_cancelled() => return abort(Error::RunCancelled(id.to_string())),
                Control::Pause => meta.paused = true,
                Control::Resume => meta.paused = false,
                Control::Priority(p) => meta.priority = p,
            }
            runs.insert(&run_key(id), encode(&meta))?;
            Ok(meta)
        })?;
        Ok(meta)
    }

    /// The jobs of `runs` in `state`, in run and key order, at most `limit` of them.
    ///
    /// The listing also stops (`truncated`) before its entries pass `max_bytes` of text (keys, reasons
    /// and worker names, about what its answer takes on the wire), so that an answer always fits what
    /// clients decode.
    pub fn jobs_in_state(
        &self,
        runs: &[u64],
        state: JobState,
        limit: usize,
        max_bytes: usize,
    ) -> Result<JobListing> {
        let mut listing = JobListing::default();
        let mut bytes = 0;
        for &run in runs {
            for kv in self.jobs.scan_prefix(run_key(run)) {
                let (k, v) = kv?;
                let record: JobRecord = decode("job", &v)?;
                if record.state != state {
                    continue;
                }
                let (_, key) = split_job_key(&k)?;
                let workers: Vec<String> =
                    record.candidates.into_iter().map(|c| c.worker).collect();
                // Per entry: its key as text (at most 4 bytes a number), its reason, its names, and
                // some framing.
                let size = 16
                    + 4 * key.0.len()
                    + record.reason.as_ref().map_or(0, String::len)
                    + workers.iter().map(|w| w.len() + 2).sum::<usize>();
                if listing.jobs.len() == limit || bytes + size > max_bytes {
                    listing.truncated = true;
                    return Ok(listing);
                }
                bytes += size;
                listing.jobs.push(ListedJob {
                    run,
                    key,
                    state,
                    reason: record.reason,
                    workers,
                });
            }
        }
        Ok(listing)
    }
}
