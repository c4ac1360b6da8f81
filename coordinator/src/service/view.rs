//! Status views: what `status`, `watch` and the progress log show of a run, computed from the stored totals
//! and the live leases.

use nqueens_common::Tally;
use tokio::time::Instant;

use super::{Coordinator, State};
use crate::live::LiveRun;
use crate::store::{JobState, Phase, RunMeta};

/// A run's status at one moment.
#[derive(Debug, Clone)]
pub struct RunView {
    pub meta: RunMeta,
    /// The stored totals.
    pub tally: Tally,
    pub jobs_leased: u64,
    /// Verified jobs with one result, waiting for a second.
    pub jobs_verifying: u64,
    /// Verified jobs whose results disagree, waiting for a decision.
    pub jobs_disputed: u64,
    /// Jobs that failed (see the log for why).
    pub jobs_failed: u64,
    pub phase: Phase,
    /// Workers active within one lease timeout (all runs share them).
    pub active_workers: u32,
    pub jobs_per_second: f64,
    pub solutions_per_second: f64,
    pub eta_seconds: Option<f64>,
}

impl RunView {
    /// The client-facing id.
    pub fn id(&self) -> String {
        self.meta.id.to_string()
    }

    /// Whether every job is done (the totals are final).
    pub fn is_done(&self) -> bool {
        self.meta.is_done()
    }

    /// Whether the run can make no more progress because jobs failed.
    pub fn is_stalled(&self) -> bool {
        self.phase == Phase::Stalled
    }

    /// The unique count, once the run is done and its strategy counts them.
    pub fn unique(&self) -> Option<u128> {
        if !self.is_done() {
            return None;
        }
        self.tally.unique().ok().flatten()
    }

    /// Percentage of jobs done.
    pub fn percent(&self) -> f64 {
        if self.meta.jobs_total == 0 {
            return 100.0;
        }
        100.0 * self.tally.jobs as f64 / self.meta.jobs_total as f64
    }
}

impl Coordinator {
    pub(super) fn view(&self, state: &State, run: &LiveRun) -> RunView {
        let now = Instant::now();
        let (jobs_per_second, solutions_per_second) = run.rates(now);
        RunView {
            meta: run.meta.clone(),
            tally: run.tally,
            jobs_leased: state.leases.count(run.meta.id),
            jobs_verifying: run.jobs_in(JobState::Verifying),
            jobs_disputed: run.jobs_in(JobState::Disputed),
            jobs_failed: run.jobs_in(JobState::Failed),
            phase: run.phase(),
            active_workers: state.workers.active(now, state.leases.timeout()),
            jobs_per_second,
            solutions_per_second,
            eta_seconds: run.eta(now),
        }
    }
}

/// One worker as status shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    pub name: String,
    /// Empty for a quarantined worker this incarnation has not seen.
    pub id: String,
    pub threads: u32,
    pub accepted: u64,
    pub seen_ago: Option<std::time::Duration>,
    /// Why it is quarantined, if it is.
    pub quarantined: Option<String>,
}

impl Coordinator {
    /// Every worker seen by this incarnation (by name, then id), then the quarantined ones not seen.
    pub fn workers(&self) -> Vec<WorkerView> {
        let now = Instant::now();
        let state = self.state();
        let mut out: Vec<WorkerView> = state
            .workers
            .all()
            .map(|(id, w)| WorkerView {
                name: w.name.clone(),
                id: id.clone(),
                threads: w.threads,
                accepted: w.accepted,
                seen_ago: Some(now - w.last_seen),
                quarantined: state.quarantined.get(&w.name).cloned(),
            })
            .collect();
        for (name, reason) in &state.quarantined {
            if !out.iter().any(|w| &w.name == name) {
                out.push(WorkerView {
                    name: name.clone(),
                    id: String::new(),
                    threads: 0,
                    accepted: 0,
                    seen_ago: None,
                    quarantined: Some(reason.clone()),
                });
            }
        }
        out.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        out
    }
}
