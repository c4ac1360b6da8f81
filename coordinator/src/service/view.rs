//! Status views: what `status`, `watch` and the progress log show of a run, computed from the stored totals
//! and the live leases.

use nqueens_common::Tally;
use tokio::time::Instant;

use super::workers::Gpus;
use super::{Coordinator, State};
use crate::durable::store::{JobState, Phase, RunMeta};
use crate::service::live::LiveRun;

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
    /// Counted jobs whose result a second identity confirmed.
    pub jobs_confirmed: u64,
    /// Of those, the jobs whose two results two kernel families computed.
    pub jobs_two_families: u64,
    /// The Merkle root of the run's certificate, once computed after it finished.
    pub root: Option<String>,
    pub phase: Phase,
    /// Workers on this run: holding a lease of it, or that reported a result for it within one lease
    /// timeout (and have not left or been lost since).
    pub active_workers: u32,
    pub jobs_per_second: f64,
    pub solutions_per_second: f64,
    pub eta_seconds: Option<f64>,
    /// The share of the nodes reported for the run in this incarnation that GPUs searched.
    pub gpu_share: Option<f64>,
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

    /// The unique count, once the run is done (its counts final: not `inconsistent`) and its strategy
    /// counts them.
    pub fn unique(&self) -> Option<u128> {
        if self.phase != Phase::Done {
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
            jobs_confirmed: run.jobs_confirmed,
            jobs_two_families: run.jobs_two_families,
            root: run.root.clone(),
            phase: run.phase(),
            active_workers: run.workers(
                state.leases.holders(run.meta.id),
                |id| state.workers.gone(id),
                now,
                state.leases.timeout(),
            ),
            jobs_per_second,
            solutions_per_second,
            eta_seconds: run.eta(now),
            gpu_share: run.gpu_share(),
        }
    }
}

/// One worker as status shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    /// Its identity (for a worker under the operator's token, the name it states).
    pub name: String,
    /// The name it states for itself (empty for a quarantined worker this incarnation has not seen).
    pub label: String,
    /// Empty for a quarantined worker this incarnation has not seen.
    pub id: String,
    pub threads: u32,
    /// Its GPUs, and what they computed of the results it reported to this incarnation.
    pub gpus: Gpus,
    /// The kernel shapes its GPUs run, as it last said: each once.
    pub gpu_kernels: Vec<String>,
    /// The kernel families its results stated (in this incarnation).
    pub families: nqueens_common::FamilySet,
    pub accepted: u64,
    /// Results it reported, and their search nodes.
    pub jobs: u64,
    pub nodes: u64,
    pub nodes_per_second: f64,
    /// Jobs it holds leases on.
    pub leases: u64,
    pub state: WorkerState,
    pub seen_ago: Option<std::time::Duration>,
    /// Why it is quarantined, if it is.
    pub quarantined: Option<String>,
}

/// Where a worker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Holds leases.
    Working,
    /// Seen within a lease timeout, holding nothing.
    Idle,
    /// Said it is shutting down, and still holds leases (it finishes its running jobs).
    Leaving,
    /// Shut down.
    Left,
    /// Silent for longer than a lease timeout.
    Lost,
    Quarantined,
}

impl WorkerState {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Working => "working",
            WorkerState::Idle => "idle",
            WorkerState::Leaving => "leaving",
            WorkerState::Left => "left",
            WorkerState::Lost => "lost",
            WorkerState::Quarantined => "quarantined",
        }
    }
}

impl Coordinator {
    /// Every worker seen by this incarnation (by name, then id), then the quarantined ones not seen.
    pub fn workers(&self) -> Vec<WorkerView> {
        let now = Instant::now();
        let state = self.state();
        let held = state.leases.per_worker();
        let timeout = state.leases.timeout();
        let mut out: Vec<WorkerView> = state
            .workers
            .all()
            .map(|(id, w)| {
                let quarantined = state.quarantined.get(&w.name).cloned();
                let leases = held.get(id.as_str()).copied().unwrap_or(0);
                let state = if quarantined.is_some() {
                    WorkerState::Quarantined
                } else if w.leaving && leases > 0 {
                    WorkerState::Leaving
                } else if w.leaving {
                    WorkerState::Left
                } else if w.lost || now - w.last_seen > timeout {
                    WorkerState::Lost
                } else if leases > 0 {
                    WorkerState::Working
                } else {
                    WorkerState::Idle
                };
                WorkerView {
                    name: w.name.clone(),
                    label: w.label.clone(),
                    id: id.clone(),
                    threads: w.threads,
                    gpus: w.gpus,
                    gpu_kernels: w.gpu_kernels.clone(),
                    families: w.families,
                    accepted: w.accepted,
                    jobs: w.jobs,
                    nodes: w.nodes,
                    nodes_per_second: w.nodes_per_second(now),
                    leases,
                    state,
                    seen_ago: Some(now - w.last_seen),
                    quarantined,
                }
            })
            .collect();
        for (name, reason) in &state.quarantined {
            if !out.iter().any(|w| &w.name == name) {
                out.push(WorkerView {
                    name: name.clone(),
                    label: String::new(),
                    id: String::new(),
                    threads: 0,
                    gpus: Gpus::default(),
                    gpu_kernels: Vec::new(),
                    families: nqueens_common::FamilySet::default(),
                    accepted: 0,
                    jobs: 0,
                    nodes: 0,
                    nodes_per_second: 0.0,
                    leases: 0,
                    state: WorkerState::Quarantined,
                    seen_ago: None,
                    quarantined: Some(reason.clone()),
                });
            }
        }
        out.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        out
    }
}
