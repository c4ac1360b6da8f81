//! Status views: what `status`, `watch` and the progress log show of a run, computed from the stored totals
//! and the live leases.

use nqueens_common::Tally;
use tokio::time::Instant;

use super::{Coordinator, State};
use crate::live::LiveRun;
use crate::store::RunMeta;

/// A run's status at one moment.
#[derive(Debug, Clone)]
pub struct RunView {
    pub meta: RunMeta,
    /// The stored totals.
    pub tally: Tally,
    pub jobs_leased: u64,
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
            active_workers: state.workers.active(now, state.leases.timeout()),
            jobs_per_second,
            solutions_per_second,
            eta_seconds: run.eta(now),
        }
    }
}
