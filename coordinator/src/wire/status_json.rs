//! The JSON forms of a run's and a worker's status, from their wire messages: what `status --json`,
//! `submit --json` and the status page show, so that every view prints the same numbers.

use nqueens_common::Strategy;
use nqueens_proto::{self as proto, RunState};
use serde::Serialize;

/// A run's status as `status --json` and `submit --json` print it.
#[derive(Debug, Serialize)]
pub struct StatusOutput {
    pub run: String,
    pub n: u32,
    pub strategy: String,
    pub depth: u32,
    pub state: &'static str,
    pub jobs_done: u64,
    pub jobs_total: u64,
    pub jobs_leased: u64,
    pub jobs_verifying: u64,
    pub jobs_disputed: u64,
    pub jobs_failed: u64,
    /// Counted jobs whose result a worker of a second identity confirmed.
    pub jobs_confirmed: u64,
    /// Of those, the jobs whose two results two kernel families computed.
    pub jobs_two_families: u64,
    /// A record run: done only when every job holds two agreeing results of two credentials.
    pub record: bool,
    /// The root of the finished run's certificate, once computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    pub verify_fraction: f64,
    /// The bound on undetected wrong results per lying worker credential: the run's stated one, or the
    /// default ([`crate::service::default_max_error`]).
    pub max_error: f64,
    /// Whether the run stated it (`submit --max-error`).
    pub max_error_stated: bool,
    pub percent: f64,
    /// The partial total while running; the final count once done.
    pub total: String,
    /// Present once the run is done (d4 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique: Option<String>,
    pub nodes: String,
    pub active_workers: u32,
    pub jobs_per_second: f64,
    pub solutions_per_second: f64,
    pub eta_seconds: Option<f64>,
    /// Workers lease from the running run of the highest priority first.
    pub priority: i32,
    /// What a running run waits for, when it cannot move by itself (see
    /// [`crate::service::progress::waits_for_a_second_identity`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<&'static str>,
}

impl From<proto::RunStatus> for StatusOutput {
    fn from(s: proto::RunStatus) -> StatusOutput {
        let strategy = nqueens_proto::strategy_from_wire(s.strategy)
            .map_or_else(|_| "unknown".to_string(), |st: Strategy| st.to_string());
        let waiting_for = crate::service::progress::waits_for_a_second_identity(
            RunState::try_from(s.state) == Ok(RunState::Running),
            s.jobs_leased,
            s.jobs_done,
            s.jobs_verifying + s.jobs_disputed,
            s.jobs_failed,
            s.jobs_total,
        )
        .then_some(crate::service::progress::WAITING_FOR_A_SECOND_IDENTITY);
        StatusOutput {
            waiting_for,
            percent: if s.jobs_total == 0 {
                100.0
            } else {
                100.0 * s.jobs_done as f64 / s.jobs_total as f64
            },
            run: s.run,
            n: s.n,
            strategy,
            depth: s.depth,
            state: match RunState::try_from(s.state) {
                Ok(RunState::Done) => "done",
                Ok(RunState::Stalled) => "stalled",
                Ok(RunState::Paused) => "paused",
                Ok(RunState::Cancelled) => "cancelled",
                Ok(RunState::Inconsistent) => "inconsistent",
                _ => "running",
            },
            jobs_done: s.jobs_done,
            jobs_total: s.jobs_total,
            jobs_leased: s.jobs_leased,
            jobs_verifying: s.jobs_verifying,
            jobs_disputed: s.jobs_disputed,
            jobs_failed: s.jobs_failed,
            jobs_confirmed: s.jobs_confirmed,
            jobs_two_families: s.jobs_two_families,
            record: s.record,
            root: (!s.root.is_empty()).then_some(s.root),
            verify_fraction: s.verify_fraction,
            max_error: s
                .max_error
                .unwrap_or_else(crate::service::default_max_error),
            max_error_stated: s.max_error.is_some(),
            total: s.total,
            unique: s.unique,
            nodes: s.nodes,
            active_workers: s.active_workers,
            jobs_per_second: s.jobs_per_second,
            solutions_per_second: s.solutions_per_second,
            eta_seconds: s.eta_seconds,
            priority: s.priority,
        }
    }
}

/// A worker as `status --workers --json` prints it.
#[derive(Debug, Serialize)]
pub struct WorkerOutput {
    pub name: String,
    pub worker_id: String,
    pub threads: u32,
    pub accepted: u64,
    pub seen_seconds_ago: Option<f64>,
    pub quarantined: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    pub jobs_done: u64,
    pub nodes: u64,
    pub nodes_per_second: f64,
    pub leases: u64,
    pub state: String,
    /// GPUs it computes on, and what they computed of the results it reported to this incarnation.
    pub gpus: u32,
    pub gpu_jobs: u64,
    pub gpu_nodes: u64,
    /// The kernel families its results stated (`cpu-stack`, `cpu-lists`, `gpu`).
    pub families: Vec<String>,
    /// The kernel shapes its GPUs run (`flat/128/4`), each once, as it last said (empty: no GPU).
    pub gpu_kernels: Vec<String>,
}

impl WorkerOutput {
    /// Its GPUs and their share of its nodes, as the worker table shows them (`1: 87%`), or `-` for a
    /// worker that has no GPU and reported none of their results.
    pub fn gpu_share(&self) -> String {
        if self.gpus == 0 && self.gpu_nodes == 0 {
            return "-".to_string();
        }
        let share = if self.nodes == 0 {
            0.0
        } else {
            100.0 * self.gpu_nodes as f64 / self.nodes as f64
        };
        format!("{}: {share:.0}%", self.gpus)
    }

    /// Its kernel families as the worker table shows them (`lists,gpu`), or `-` before any result,
    /// then the shapes its GPUs run (`lists,gpu flat/128/4`), each once.
    pub fn kernels(&self) -> String {
        let short: Vec<&str> = self
            .families
            .iter()
            .map(|f| f.strip_prefix("cpu-").unwrap_or(f))
            .collect();
        let mut out = match short.is_empty() {
            true => "-".to_string(),
            false => short.join(","),
        };
        let shapes = nqueens_common::names::distinct_gpu_kernels(&self.gpu_kernels, usize::MAX);
        if !shapes.is_empty() {
            out = format!("{out} {}", shapes.join(","));
        }
        out
    }
}

impl From<proto::WorkerStatus> for WorkerOutput {
    fn from(w: proto::WorkerStatus) -> WorkerOutput {
        WorkerOutput {
            name: w.name,
            worker_id: w.worker_id,
            threads: w.threads,
            accepted: w.accepted,
            seen_seconds_ago: w.seen_seconds_ago,
            quarantined: w.quarantined,
            reason: w.reason,
            jobs_done: w.jobs_done,
            nodes: w.nodes,
            nodes_per_second: w.nodes_per_second,
            leases: w.leases,
            state: w.state,
            gpus: w.gpus,
            gpu_jobs: w.gpu_jobs,
            gpu_nodes: w.gpu_nodes,
            families: w.families,
            gpu_kernels: w.gpu_kernels,
        }
    }
}
