//! An operator's controls of a run: cancel, pause, resume and priority. Each is written through the
//! committer (store and ledger, in order with the results; one control at a time, so that memory takes
//! them in the store's order), then applied in memory, even if its caller has gone away meanwhile: a
//! cancelled run's leases end at once and heartbeats name them to their workers. Also the listing of a
//! run's jobs in one state (failed, disputed, verifying), read with the lock released.

use super::{lookup, to_the_end, Coordinator, RunView};
use crate::durable::committer::{Write, Written};
use crate::durable::store::{Control, JobListing, JobState};
use crate::error::{Error, Result};

/// Jobs one listing returns when the request does not say.
pub const DEFAULT_JOB_LIMIT: u32 = 1000;
/// Most jobs one listing may return.
pub const MAX_JOB_LIMIT: u32 = 10_000;
/// Most text one listing returns (keys, reasons, worker names): well within the 4 MiB clients decode.
pub const MAX_LISTING_BYTES: usize = 2 << 20;
/// Most listings walking the job records at once.
pub const MAX_LISTINGS: usize = 2;

impl Coordinator {
    /// Puts run `id`'s failed jobs back to pending, durably, then in memory (a stalled run runs again),
    /// while serving; returns how many, and the run as it now is. A cancelled run is refused.
    pub async fn retry_failed(&self, id: &str) -> Result<(u64, RunView)> {
        let run = {
            let state = self.state();
            let meta = &lookup(&state, id)?.meta;
            if meta.is_cancelled() {
                return Err(Error::RunCancelled(meta.id.to_string()));
            }
            meta.id
        };
        if let Some(why) = self.storage().degraded() {
            return Err(Error::Durability(format!(
                "not changing runs while the coordinator cannot write its store ({why}); try again once it serves"
            )));
        }
        let this = self.clone();
        to_the_end(async move { this.retry(run).await }).await
    }

    /// Writes the retry of run `run` through the committer, then applies it in memory.
    async fn retry(&self, run: u64) -> Result<(u64, RunView)> {
        let _one_at_a_time = self.shared.control.lock().await;
        let keys = match self
            .shared
            .committer
            .write(Write::Retry(run))
            .await?
            .written
        {
            Written::Retried(keys) => keys,
            _ => {
                return Err(Error::Invalid(
                    "the committer answered another write".into(),
                ))
            }
        };
        let view = {
            let mut state = self.state();
            // The jobs start afresh: no lease of before confirms anything for them (a lease issued
            // while a job held a result kept that mark across its failure and retry, and confirmed a
            // partner's new first result with no draw: found by a review, 2026-12-01).
            for key in &keys {
                state.leases.unmark_job(run, key);
            }
            let live = state
                .runs
                .get_mut(&run)
                .ok_or_else(|| Error::UnknownRun(run.to_string()))?;
            for key in &keys {
                live.retried(key);
            }
            self.view(&state, &state.runs[&run])
        };
        if !keys.is_empty() {
            tracing::warn!(run, jobs = keys.len(), state = %view.phase, "failed jobs put back to pending by the operator");
            self.changed();
        }
        Ok((keys.len() as u64, view))
    }

    /// Applies `change` to run `id` durably, then in memory; returns the run as it now is. A done run
    /// takes no control; a cancelled one only another cancel (which changes nothing).
    pub async fn control(&self, id: &str, change: Control) -> Result<RunView> {
        let run = lookup(&self.state(), id)?.meta.id;
        if let Some(why) = self.storage().degraded() {
            return Err(Error::Durability(format!(
                "not changing runs while the coordinator cannot write its store ({why}); try again once it serves"
            )));
        }
        let this = self.clone();
        to_the_end(async move { this.apply(run, change).await }).await
    }

    /// Writes `change` to run `run` through the committer, then applies it in memory.
    async fn apply(&self, run: u64, change: Control) -> Result<RunView> {
        let _one_at_a_time = self.shared.control.lock().await;
        // A control that changes nothing is answered without a write: a loop of them grew the ledger
        // by a line and an fsync each (found by a review, 2026-11-24, a later session).
        {
            let state = self.state();
            if let Some(live) = state.runs.get(&run) {
                let m = &live.meta;
                let same = !m.is_done()
                    && match change {
                        Control::Cancel => m.is_cancelled(),
                        _ if m.is_cancelled() => false,
                        Control::Pause => m.paused,
                        Control::Resume => !m.paused,
                        Control::Priority(p) => m.priority == p,
                    };
                if same {
                    return Ok(self.view(&state, live));
                }
            }
        }
        let (meta, taken_back) = self
            .shared
            .committer
            .write_run(Write::Control(run, change))
            .await?;
        let (was, ended, view) = {
            let mut guard = self.state();
            let state = &mut *guard;
            // A cancel that ended a held worker's dispute: its record counts in other runs went.
            if let Some(c) = &taken_back {
                super::changes::apply_taken_back(state, c, tokio::time::Instant::now());
            }
            let live = state
                .runs
                .get_mut(&run)
                .ok_or_else(|| Error::UnknownRun(run.to_string()))?;
            let was = live.phase();
            live.control(&meta);
            let ended = if meta.is_cancelled() {
                state.spot.forget_run(run);
                state.leases.cancel_run(run)
            } else {
                0
            };
            let live = &state.runs[&run];
            (was, ended, self.view(state, live))
        };
        if view.phase != was || ended > 0 {
            tracing::warn!(
                run,
                control = change.name(),
                from = %was,
                to = %view.phase,
                leases_ended = ended,
                jobs_done = view.tally.jobs,
                jobs_total = view.meta.jobs_total,
                total = %view.tally.total,
                "run {}",
                view.phase
            );
        } else {
            tracing::info!(
                run,
                control = change.name(),
                priority = meta.priority,
                "run changed"
            );
        }
        self.changed();
        Ok(view)
    }

    /// The jobs in `state` of run `run` (or of every run, oldest first), at most `limit` of them (0: the
    /// default, [`DEFAULT_JOB_LIMIT`]; at most [`MAX_JOB_LIMIT`]).
    pub async fn jobs(&self, run: Option<&str>, state: JobState, limit: u32) -> Result<JobListing> {
        if state == JobState::Done {
            return Err(Error::Invalid(
                "done jobs are not listed (their results are in `nqueens export`)".into(),
            ));
        }
        let limit = match limit {
            0 => DEFAULT_JOB_LIMIT,
            l if l <= MAX_JOB_LIMIT => l,
            l => {
                return Err(Error::Invalid(format!(
                    "limit {l} is out of range: 1 to {MAX_JOB_LIMIT}"
                )))
            }
        };
        let runs: Vec<u64> = {
            let guard = self.state();
            match run {
                Some(id) => vec![lookup(&guard, id)?.meta.id],
                None => guard.runs.keys().copied().collect(),
            }
        };
        // At most MAX_LISTINGS walks of the job records at once (each reads every open or failed
        // job's record of the runs asked); more wait their turn. A walk goes on after its caller has
        // gone, its place held to its end.
        let place = super::place_in(&self.shared.listing).await?;
        let store = self.shared.store.clone();
        super::joined(
            tokio::task::spawn_blocking(move || {
                let _place = place;
                store.jobs_in_state(&runs, state, limit as usize, MAX_LISTING_BYTES)
            })
            .await,
        )?
        .inspect_err(|e| self.note_damage(e))
    }
}
