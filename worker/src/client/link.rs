//! What the worker's loop asks of its coordinator, in the worker's own types: the loop
//! ([`super::machine`]) is written against [`Link`]; gRPC ([`super::wire`]) implements it, and so do
//! the loop's unit tests, in memory and in paused time.

use std::future::Future;

use nqueens_common::Plan;

use crate::error::Error;
use crate::journal::Finished;

/// One job leased to this worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub id: u64,
    /// The lease's authentication tag (sealed into the report).
    pub tag: u64,
    pub run: String,
    pub n: u32,
    /// The lease's plan, or why this build cannot make it (a strategy or a depth it does not know).
    pub plan: Result<Plan, nqueens_common::Error>,
    /// The job's key, as sent.
    pub job: String,
    /// The run's plan fingerprint as the coordinator enumerates it.
    pub fingerprint: u64,
}

/// A request for jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// Most jobs wanted.
    pub capacity: usize,
    /// How long the coordinator may hold the call when no job is free (0: answer at once).
    pub wait_ms: u32,
    pub threads: usize,
    pub gpus: u32,
    /// The kernel shapes its GPUs still computing run (`flat/128/4`), each once, for the worker table.
    pub gpu_kernels: Vec<String>,
    /// Only jobs of this run.
    pub run: Option<String>,
}

/// The answer to an [`Ask`].
#[derive(Debug, Clone, Default)]
pub struct Leased {
    pub leases: Vec<Lease>,
    pub lease_timeout_ms: u32,
    /// When nothing was leased: how long to wait before asking again.
    pub retry_after_ms: u32,
    /// Nothing is left for this worker.
    pub idle: bool,
}

/// What the coordinator made of one reported result. `None` in a reply: an outcome this build does not
/// know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Counted into the run's total.
    Accepted,
    /// Already done with the same result.
    Duplicate,
    /// Already done with another result: nothing added.
    Mismatch,
    /// A verified job's result, recorded.
    Pending,
    /// Recorded, disagreeing with the job's other results.
    Disputed,
    /// The job has failed: not recorded.
    JobFailed,
}

impl Outcome {
    /// Its name in the worker's log (`outcome=OUTCOME_ACCEPTED`): the protocol's, as before the
    /// client was split.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Accepted => "OUTCOME_ACCEPTED",
            Outcome::Duplicate => "OUTCOME_DUPLICATE",
            Outcome::Mismatch => "OUTCOME_MISMATCH",
            Outcome::Pending => "OUTCOME_PENDING",
            Outcome::Disputed => "OUTCOME_DISPUTED",
            Outcome::JobFailed => "OUTCOME_JOB_FAILED",
        }
    }
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, Default)]
pub struct Beat {
    /// Leases no longer this worker's.
    pub lost: Vec<u64>,
    /// Leases whose run was cancelled.
    pub cancelled: Vec<u64>,
    pub lease_timeout_ms: u32,
}

/// What the coordinator says of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub run: String,
    pub n: u32,
    pub jobs_total: u64,
    /// 0 where the coordinator does not send it.
    pub fingerprint: u64,
}

/// A call that did not go through, sorted by what the worker does about it.
#[derive(Debug, Clone)]
pub struct CallError {
    pub kind: Kind,
    /// The answer's code, as a word (`Unavailable`, `NotFound`, ...).
    pub code: String,
    pub message: String,
}

/// The sorts of [`CallError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Worth retrying later: the coordinator is down, restarting or overloaded.
    Transient,
    /// The worker is refused for good (a quarantine, a wrong token), or its TLS handshake fails in a
    /// way no retry mends (`tls`: what failed and what to fix).
    Refused { tls: Option<String> },
    /// A report of one result refused for that result: its seal, its job, its lease, its run cancelled
    /// or done, or a run the coordinator does not know. It would be refused for ever.
    OfTheResult,
    /// Anything else: the request or the server (a name, a batch size or a device name it refuses, a
    /// message it cannot decode, a service it does not offer behind a proxy).
    Other,
}

impl CallError {
    /// The error a worker stops with on this answer: a TLS failure says what to fix.
    pub fn stop(&self) -> Error {
        match &self.kind {
            Kind::Refused { tls: Some(why) } => Error::Tls(why.clone()),
            _ => Error::Refused(format!("{}: {}", self.code, self.message)),
        }
    }

    /// Whether retrying later may succeed.
    pub fn transient(&self) -> bool {
        self.kind == Kind::Transient
    }

    /// Whether the worker is refused for good.
    pub fn refused(&self) -> bool {
        matches!(self.kind, Kind::Refused { .. })
    }
}

/// The calls the loop makes. Cloned for heartbeats sent beside a long call.
pub trait Link: Clone + Send + Sync + 'static {
    /// Asks for jobs.
    fn lease(&mut self, ask: Ask) -> impl Future<Output = Result<Leased, CallError>> + Send;
    /// Reports finished results: one outcome per result, `None` for one this build does not know.
    fn report(
        &mut self,
        batch: &[Finished],
    ) -> impl Future<Output = Result<Vec<Option<Outcome>>, CallError>> + Send;
    /// Keeps the leases `ids` alive.
    fn heartbeat(&mut self, ids: Vec<u64>) -> impl Future<Output = Result<Beat, CallError>> + Send;
    /// Hands leases back; `leaving`: the worker takes no more jobs.
    fn release(
        &mut self,
        ids: Vec<u64>,
        leaving: bool,
    ) -> impl Future<Output = Result<(), CallError>> + Send;
    /// The coordinator's view of a run; `None`: it knows no such run.
    fn run(
        &mut self,
        run: String,
    ) -> impl Future<Output = Result<Option<RunInfo>, CallError>> + Send;
}
