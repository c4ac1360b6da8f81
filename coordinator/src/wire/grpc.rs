//! The gRPC service: decodes requests, calls the [`Coordinator`], encodes answers. The one place where
//! coordinator errors become `tonic::Status` codes.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use nqueens_common::JobResult;
use nqueens_proto::strategy_from_wire;
use nqueens_proto::{self as proto, coordinator_server};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::durable::store::{Control, JobState, Outcome, Phase};
use crate::error::Error;
use crate::service::{Ask, Coordinator, Grant, NewRun, Report, RunView, WorkerView};
use crate::wire::auth::{require_operator, worker_identity};

/// The most entries (runs, workers) one ListRuns or ListWorkers reply holds.
pub const PAGE_ENTRIES: usize = 10_000;
/// The most bytes of entries one such reply holds (clients decode at most 4 MiB): past it, the
/// page ends and `more` is set.
pub const PAGE_BYTES: usize = 1 << 20;

/// The entries a page holds for a request's `limit` (0: as many as a page holds).
fn page_limit(limit: u32) -> usize {
    match limit {
        0 => PAGE_ENTRIES,
        l => (l as usize).min(PAGE_ENTRIES),
    }
}

/// A page of a listing: the first of `items` up to `limit` of them and `bytes` of their encoding (at
/// least one), and whether any is left out.
fn page<M: prost::Message>(
    items: impl Iterator<Item = M>,
    limit: usize,
    bytes: usize,
) -> (Vec<M>, bool) {
    let mut page = Vec::new();
    let mut size = 0;
    for item in items {
        // A field's tag and length take at most 6 bytes beside the message.
        size += item.encoded_len() + 6;
        if page.len() == limit || (size > bytes && !page.is_empty()) {
            return (page, true);
        }
        page.push(item);
    }
    (page, false)
}

/// The wire form of a grant.
fn lease_response(grant: &Grant) -> proto::LeaseResponse {
    let leases = grant
        .leases
        .iter()
        .map(|g| proto::JobLease {
            lease_id: g.id,
            run: g.run.to_string(),
            n: g.plan.n() as u32,
            strategy: proto::Strategy::from(g.plan.strategy()) as i32,
            depth: g.plan.depth() as u32,
            job: g.key.to_string(),
            plan_fingerprint: g.fingerprint,
            lease_tag: g.tag,
        })
        .collect();
    proto::LeaseResponse {
        leases,
        lease_timeout_ms: millis(grant.lease_timeout),
        retry_after_ms: millis(grant.retry_after),
        idle: grant.idle,
    }
}

/// Who a worker's call speaks for.
struct Caller {
    /// Its identity for every check, dispute, quarantine and strike: the credential's, or (operator's
    /// token, or none) the name it states.
    name: String,
    /// The name it states.
    label: String,
    /// Its process id as the coordinator knows it: scoped to its credential's identity.
    worker: String,
    /// Whether it holds a worker credential (not the operator's token).
    credential: bool,
}

/// The caller of a worker's call made with `req`'s token, stating `id` and `name`. A stated id that is
/// not one is refused before it is scoped.
fn caller<T>(req: &Request<T>, id: &str, name: &str) -> Result<Caller, Error> {
    crate::service::check_worker("worker id", id)?;
    Ok(match worker_identity(req) {
        Some(identity) => Caller {
            name: identity.to_string(),
            label: name.to_string(),
            worker: crate::service::scoped_id(&identity, id),
            credential: true,
        },
        None => Caller {
            name: name.to_string(),
            label: name.to_string(),
            worker: id.to_string(),
            credential: false,
        },
    })
}

/// The tonic service over a coordinator.
#[derive(Clone)]
pub struct CoordinatorService {
    coordinator: Coordinator,
    /// One permit per open `WatchRun` stream.
    watchers: Arc<tokio::sync::Semaphore>,
}

/// Most `WatchRun` streams open at once, all clients together: each builds a run's view (under the
/// state lock) up to every [`MIN_WATCH_INTERVAL`], so that many bound what watchers cost the leases and
/// reports. One more is refused with `RESOURCE_EXHAUSTED`.
pub const MAX_WATCHERS: usize = 256;

/// Shortest interval between two messages of a `WatchRun` stream (a shorter one asked is raised to it).
pub const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(250);

impl CoordinatorService {
    /// The service for `coordinator`.
    pub fn new(coordinator: Coordinator) -> CoordinatorService {
        CoordinatorService {
            coordinator,
            watchers: Arc::new(tokio::sync::Semaphore::new(MAX_WATCHERS)),
        }
    }
}

/// The status code and message for a coordinator error.
pub fn status(e: Error) -> Status {
    use nqueens_common::Error as Input;
    let e = match e {
        // Its cause's code, marked as a refusal of the request as a whole.
        Error::WholeRequest(why) => return nqueens_proto::refusing_the_request(status(*why)),
        e => e,
    };
    match &e {
        Error::Input(Input::UnknownJob(_)) | Error::UnknownRun(_) => {
            Status::not_found(e.to_string())
        }
        Error::Input(Input::Cancelled(_)) => Status::unavailable(e.to_string()),
        Error::Input(Input::Overflow(_) | Input::Inconsistent(_)) => {
            Status::internal(e.to_string())
        }
        Error::Input(_) | Error::Invalid(_) | Error::Unsealed { .. } => {
            Status::invalid_argument(e.to_string())
        }
        Error::WholeRequest(_) => Status::invalid_argument(e.to_string()),
        Error::NotLeased { .. }
        | Error::RunCancelled(_)
        | Error::RunDone(_)
        | Error::RecordOnly(_) => Status::failed_precondition(e.to_string()),
        Error::Quarantined { .. } => Status::permission_denied(e.to_string()),
        Error::TooMany(_) => Status::resource_exhausted(e.to_string()),
        // Transient: the worker sends the batch again and the next validation decides.
        Error::Raced { .. } => Status::aborted(e.to_string()),
        // Nothing was acknowledged and the worker keeps the results in its journal: it tries again.
        Error::ShuttingDown | Error::Durability(_) | Error::DurableIo { .. } => {
            Status::unavailable(e.to_string())
        }
        Error::Corrupt(_) | Error::Store(_) | Error::Io { .. } | Error::InUse(_) => {
            Status::internal(e.to_string())
        }
    }
}

/// The wire form of a run's status.
pub fn run_status(v: &RunView) -> proto::RunStatus {
    proto::RunStatus {
        run: v.id(),
        n: v.meta.n as u32,
        strategy: proto::Strategy::from(v.meta.strategy) as i32,
        depth: v.meta.depth as u32,
        state: match v.phase {
            Phase::Running => proto::RunState::Running,
            Phase::Done => proto::RunState::Done,
            Phase::Stalled => proto::RunState::Stalled,
            Phase::Paused => proto::RunState::Paused,
            Phase::Cancelled => proto::RunState::Cancelled,
            Phase::Inconsistent => proto::RunState::Inconsistent,
        } as i32,
        jobs_total: v.meta.jobs_total,
        jobs_done: v.tally.jobs,
        jobs_leased: v.jobs_leased,
        total: v.tally.total.to_string(),
        unique: v.unique().map(|u| u.to_string()),
        nodes: v.tally.nodes.to_string(),
        active_workers: v.active_workers,
        created_unix: v.meta.created_unix,
        finished_unix: v.meta.finished_unix,
        jobs_per_second: v.jobs_per_second,
        eta_seconds: v.eta_seconds,
        jobs_verifying: v.jobs_verifying,
        jobs_disputed: v.jobs_disputed,
        jobs_failed: v.jobs_failed,
        jobs_confirmed: v.jobs_confirmed,
        jobs_two_families: v.jobs_two_families,
        record: v.meta.record,
        root: v.root.clone().unwrap_or_default(),
        max_error: v.meta.max_error,
        verify_fraction: v.meta.verify_fraction,
        solutions_per_second: v.solutions_per_second,
        priority: v.meta.priority,
        plan_fingerprint: v.meta.fingerprint_value().unwrap_or(0),
        cancelled_unix: v.meta.cancelled_unix,
    }
}

/// What a worker credential may read of a run: its plan (what it checks its jobs against) and its
/// state, never its progress. The counts move with each report, and would tell a worker which of its
/// results were held for a check, or confirmed.
pub fn run_plan(v: &RunView) -> proto::RunStatus {
    let full = run_status(v);
    proto::RunStatus {
        run: full.run,
        n: full.n,
        strategy: full.strategy,
        depth: full.depth,
        state: full.state,
        jobs_total: full.jobs_total,
        created_unix: full.created_unix,
        finished_unix: full.finished_unix,
        record: full.record,
        max_error: full.max_error,
        verify_fraction: full.verify_fraction,
        priority: full.priority,
        plan_fingerprint: full.plan_fingerprint,
        cancelled_unix: full.cancelled_unix,
        ..proto::RunStatus::default()
    }
}

/// [`run_status`] for the operator, [`run_plan`] for a worker credential (or the shared workers' token).
fn run_status_for<T>(req: &Request<T>) -> fn(&RunView) -> proto::RunStatus {
    match worker_identity(req) {
        None => run_status,
        Some(_) => run_plan,
    }
}

/// The job state a listing asks for; unspecified or unknown is bad input.
fn job_state_from_wire(value: i32) -> Result<JobState, Status> {
    match proto::JobState::try_from(value) {
        Ok(proto::JobState::Failed) => Ok(JobState::Failed),
        Ok(proto::JobState::Disputed) => Ok(JobState::Disputed),
        Ok(proto::JobState::Verifying) => Ok(JobState::Verifying),
        _ => Err(Status::invalid_argument(format!(
            "job state {value} is not one of failed, disputed, verifying"
        ))),
    }
}

fn job_state_to_wire(state: JobState) -> proto::JobState {
    match state {
        JobState::Failed => proto::JobState::Failed,
        JobState::Disputed => proto::JobState::Disputed,
        JobState::Verifying => proto::JobState::Verifying,
        JobState::Done => proto::JobState::Unspecified,
    }
}

/// The wire form of a worker's status.
pub fn worker_status(w: WorkerView) -> proto::WorkerStatus {
    proto::WorkerStatus {
        name: w.name,
        label: w.label,
        worker_id: w.id,
        threads: w.threads,
        gpus: w.gpus.count,
        gpu_jobs: w.gpus.jobs,
        gpu_nodes: w.gpus.nodes,
        families: w.families.iter().map(|f| f.name().to_string()).collect(),
        gpu_kernels: w.gpu_kernels,
        accepted: w.accepted,
        seen_seconds_ago: w.seen_ago.map(|d| d.as_secs_f64()),
        quarantined: w.quarantined.is_some(),
        reason: w.quarantined.unwrap_or_default(),
        jobs_done: w.jobs,
        nodes: w.nodes,
        nodes_per_second: w.nodes_per_second,
        leases: w.leases,
        state: w.state.as_str().to_string(),
    }
}

fn millis(d: Duration) -> u32 {
    d.as_millis().min(u32::MAX as u128) as u32
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<proto::RunStatus, Status>> + Send>>;

#[tonic::async_trait]
impl coordinator_server::Coordinator for CoordinatorService {
    async fn create_run(
        &self,
        req: Request<proto::CreateRunRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        require_operator(&req)?;
        let r = req.into_inner();
        let strategy = strategy_from_wire(r.strategy).map_err(|e| status(e.into()))?;
        let view = self
            .coordinator
            .create_run_as(
                r.n,
                strategy,
                r.depth,
                NewRun {
                    verify_fraction: r.verify_fraction,
                    priority: r.priority,
                    reuse: r.reuse,
                    record: r.record,
                    max_error: r.max_error,
                },
            )
            .await
            .map_err(status)?;
        Ok(Response::new(run_status(&view)))
    }

    async fn list_runs(
        &self,
        req: Request<proto::ListRunsRequest>,
    ) -> Result<Response<proto::ListRunsResponse>, Status> {
        let shown = run_status_for(&req);
        let r = req.into_inner();
        let limit = page_limit(r.limit);
        // One more than the page holds, to tell whether more follow.
        let views = self.coordinator.runs_after(r.after, limit + 1);
        let (runs, more) = page(views.iter().map(shown), limit, PAGE_BYTES);
        Ok(Response::new(proto::ListRunsResponse { runs, more }))
    }

    async fn get_run(
        &self,
        req: Request<proto::GetRunRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        let shown = run_status_for(&req);
        let view = self
            .coordinator
            .run(&req.into_inner().run)
            .map_err(status)?;
        Ok(Response::new(shown(&view)))
    }

    type WatchRunStream = WatchStream;

    async fn watch_run(
        &self,
        req: Request<proto::WatchRunRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        // The operator's: a worker needs no stream (and a credential could hold every one).
        require_operator(&req)?;
        let r = req.into_inner();
        let coordinator = self.coordinator.clone();
        coordinator.run(&r.run).map_err(status)?;
        let permit = self.watchers.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "too many WatchRun streams open (at most {MAX_WATCHERS}, all clients together): close one, or poll GetRun"
            ))
        })?;
        let interval = match r.interval_ms {
            0 => Duration::from_secs(1),
            ms => Duration::from_millis(u64::from(ms.min(3_600_000))).max(MIN_WATCH_INTERVAL),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            // Held until the stream's task ends (its client gone, or the run finished).
            let _permit = permit;
            let mut changes = coordinator.subscribe();
            loop {
                changes.borrow_and_update();
                let view = match coordinator.run(&r.run) {
                    Ok(v) => v,
                    Err(e) => {
                        let _ = tx.send(Err(status(e))).await;
                        return;
                    }
                };
                if tx.send(Ok(run_status(&view))).await.is_err()
                    || view.is_done()
                    || view.is_stalled()
                    || view.meta.is_cancelled()
                {
                    return;
                }
                // A client gone (or its connection closed by a stopping server) ends the task at
                // once: it holds the coordinator, and with it the store.
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = tx.closed() => return,
                }
                tokio::select! {
                    r = changes.changed() => if r.is_err() { return },
                    _ = tokio::time::sleep(interval.max(Duration::from_secs(5))) => {}
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn lease(
        &self,
        req: Request<proto::LeaseRequest>,
    ) -> Result<Response<proto::LeaseResponse>, Status> {
        let who =
            caller(&req, &req.get_ref().worker_id, &req.get_ref().worker_name).map_err(status)?;
        let r = req.into_inner();
        let grant = self
            .coordinator
            .lease(
                &Ask {
                    worker: &who.worker,
                    name: &who.name,
                    label: &who.label,
                    credential: who.credential,
                    threads: r.threads,
                    gpus: r.gpus,
                    gpu_kernels: &r.gpu_kernels,
                    capacity: r.capacity,
                    only: r.run.as_deref(),
                },
                Duration::from_millis(r.wait_ms as u64),
            )
            .await
            .map_err(status)?;
        Ok(Response::new(lease_response(&grant)))
    }

    async fn report(
        &self,
        req: Request<proto::ReportRequest>,
    ) -> Result<Response<proto::ReportResponse>, Status> {
        let who = caller(&req, &req.get_ref().worker_id, &req.get_ref().worker_name)
            .map_err(|e| status(e.of_the_request()))?;
        let mut r = req.into_inner();
        // Taken out of the request, not copied: a report waiting for its place holds its results once.
        let results = std::mem::take(&mut r.results);
        let ask = (r.lease_capacity > 0).then(|| Ask {
            worker: &who.worker,
            name: &who.name,
            label: &who.label,
            credential: who.credential,
            threads: r.threads,
            gpus: r.gpus,
            gpu_kernels: &r.gpu_kernels,
            capacity: r.lease_capacity,
            only: r.lease_run.as_deref(),
        });
        // Checked before anything is committed: a bad request changes nothing, and is refused whole
        // (marked so: not a refusal of the results it carries).
        if let Some(ask) = &ask {
            ask.check().map_err(|e| status(e.of_the_request()))?;
        }
        let reports = results
            .into_iter()
            .map(|x| Report {
                family: x.family().known(),
                lease: x.lease_id,
                run: x.run,
                n: x.n,
                job: x.job,
                result: JobResult {
                    total: x.total,
                    unique8: x.unique8,
                    nodes: x.nodes,
                },
                seal: x.seal,
                tag: x.lease_tag,
                device: x.device,
            })
            .collect();
        let outcomes = self
            .coordinator
            .report_as(&who.worker, &who.name, who.credential, reports)
            .await
            .map_err(status)?;
        let outcomes = outcomes
            .iter()
            .map(|o| {
                let wire = match o {
                    Outcome::Accepted => proto::Outcome::Accepted,
                    // A worker credential cannot tell a result held for a check, or a spot check's
                    // answer, from one counted.
                    Outcome::Pending
                    | Outcome::Disputed
                    | Outcome::Duplicate
                    | Outcome::NotKept
                        if who.credential =>
                    {
                        proto::Outcome::Accepted
                    }
                    Outcome::Duplicate => proto::Outcome::Duplicate,
                    Outcome::Mismatch { .. } => proto::Outcome::Mismatch,
                    Outcome::Pending => proto::Outcome::Pending,
                    // (The operator's workers may decide: theirs are always kept.)
                    Outcome::Disputed | Outcome::NotKept => proto::Outcome::Disputed,
                    Outcome::JobFailed => proto::Outcome::JobFailed,
                };
                wire as i32
            })
            .collect();
        // The results are durable and acknowledged whatever happens to the lease: a lease that fails now
        // (the run named was just finished, say) is left to the worker's next Lease call.
        let lease = match ask {
            Some(ask) => match self.coordinator.lease(&ask, Duration::ZERO).await {
                Ok(grant) => Some(lease_response(&grant)),
                Err(e) => {
                    tracing::debug!(worker = %who.worker, error = %e, "no lease with the report");
                    None
                }
            },
            None => None,
        };
        Ok(Response::new(proto::ReportResponse { outcomes, lease }))
    }

    async fn heartbeat(
        &self,
        req: Request<proto::HeartbeatRequest>,
    ) -> Result<Response<proto::HeartbeatResponse>, Status> {
        let who = caller(&req, &req.get_ref().worker_id, "-").map_err(status)?;
        let r = req.into_inner();
        let (lost, cancelled) = self
            .coordinator
            .heartbeat(&who.worker, &r.lease_ids)
            .map_err(status)?;
        Ok(Response::new(proto::HeartbeatResponse {
            lost,
            lease_timeout_ms: millis(self.coordinator.lease_timeout()),
            cancelled,
        }))
    }

    async fn release(
        &self,
        req: Request<proto::ReleaseRequest>,
    ) -> Result<Response<proto::ReleaseResponse>, Status> {
        let who = caller(&req, &req.get_ref().worker_id, "-").map_err(status)?;
        let r = req.into_inner();
        let released = self
            .coordinator
            .release_as(&who.worker, &r.lease_ids, r.leaving, who.credential)
            .map_err(status)?;
        Ok(Response::new(proto::ReleaseResponse { released }))
    }

    async fn list_workers(
        &self,
        req: Request<proto::ListWorkersRequest>,
    ) -> Result<Response<proto::ListWorkersResponse>, Status> {
        require_operator(&req)?;
        let r = req.into_inner();
        let after = (r.after_name, r.after_id);
        let limit = page_limit(r.limit);
        // In (name, id) order already.
        let views = self.coordinator.workers();
        let (workers, more) = page(
            views
                .into_iter()
                .filter(|w| (&w.name, &w.id) > (&after.0, &after.1))
                .map(worker_status),
            limit,
            PAGE_BYTES,
        );
        Ok(Response::new(proto::ListWorkersResponse { workers, more }))
    }

    async fn cancel_run(
        &self,
        req: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        require_operator(&req)?;
        self.control(&req.into_inner().run, Control::Cancel).await
    }

    async fn pause_run(
        &self,
        req: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        require_operator(&req)?;
        self.control(&req.into_inner().run, Control::Pause).await
    }

    async fn resume_run(
        &self,
        req: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        require_operator(&req)?;
        self.control(&req.into_inner().run, Control::Resume).await
    }

    async fn set_priority(
        &self,
        req: Request<proto::SetPriorityRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        require_operator(&req)?;
        let r = req.into_inner();
        self.control(&r.run, Control::Priority(r.priority)).await
    }

    async fn list_jobs(
        &self,
        req: Request<proto::ListJobsRequest>,
    ) -> Result<Response<proto::ListJobsResponse>, Status> {
        require_operator(&req)?;
        let r = req.into_inner();
        let state = job_state_from_wire(r.state)?;
        let listing = self
            .coordinator
            .jobs(r.run.as_deref(), state, r.limit)
            .await
            .map_err(status)?;
        let jobs = listing
            .jobs
            .into_iter()
            .map(|j| proto::JobEntry {
                run: j.run.to_string(),
                job: j.key.to_string(),
                state: job_state_to_wire(j.state) as i32,
                reason: j.reason.unwrap_or_default(),
                workers: j.workers,
            })
            .collect();
        Ok(Response::new(proto::ListJobsResponse {
            jobs,
            truncated: listing.truncated,
        }))
    }
    async fn issue_credential(
        &self,
        req: Request<proto::IssueCredentialRequest>,
    ) -> Result<Response<proto::IssueCredentialResponse>, Status> {
        require_operator(&req)?;
        let identity = req.into_inner().identity;
        let credentials = self.coordinator.credentials().clone();
        let token = tokio::task::spawn_blocking(move || credentials.issue(&identity))
            .await
            .map_err(|_| status(Error::ShuttingDown))?
            .map_err(status)?;
        Ok(Response::new(proto::IssueCredentialResponse { token }))
    }

    async fn revoke_credential(
        &self,
        req: Request<proto::RevokeCredentialRequest>,
    ) -> Result<Response<proto::RevokeCredentialResponse>, Status> {
        require_operator(&req)?;
        let identity = req.into_inner().identity;
        let credentials = self.coordinator.credentials().clone();
        let revoked = tokio::task::spawn_blocking(move || credentials.revoke(&identity))
            .await
            .map_err(|_| status(Error::ShuttingDown))?
            .map_err(status)?;
        Ok(Response::new(proto::RevokeCredentialResponse { revoked }))
    }

    async fn list_credentials(
        &self,
        req: Request<proto::ListCredentialsRequest>,
    ) -> Result<Response<proto::ListCredentialsResponse>, Status> {
        require_operator(&req)?;
        let credentials = self
            .coordinator
            .credentials()
            .book()
            .into_iter()
            .map(|(identity, issued)| proto::Credential {
                identity,
                issued_unix: issued.issued_unix,
                revoked_unix: issued.revoked_unix,
            })
            .collect();
        Ok(Response::new(proto::ListCredentialsResponse {
            credentials,
        }))
    }

    async fn retry_failed(
        &self,
        req: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RetryFailedResponse>, Status> {
        require_operator(&req)?;
        let (retried, view) = self
            .coordinator
            .retry_failed(&req.into_inner().run)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::RetryFailedResponse {
            retried,
            run: Some(run_status(&view)),
        }))
    }
}

impl CoordinatorService {
    async fn control(
        &self,
        run: &str,
        change: Control,
    ) -> Result<Response<proto::RunStatus>, Status> {
        let view = self
            .coordinator
            .control(run, change)
            .await
            .map_err(status)?;
        Ok(Response::new(run_status(&view)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page ends at its size in bytes as at its count, with `more` set; a run larger than the size
    /// alone still makes a page (never an empty page with more to come).
    #[test]
    fn a_page_ends_at_its_size_or_its_count() {
        let run = |i: u64| proto::RunStatus {
            run: i.to_string(),
            total: "1".repeat(100),
            ..Default::default()
        };
        let one = prost::Message::encoded_len(&run(1)) + 6;
        let runs = |k: u64| (1..=k).map(run);
        let count = |(page, more): (Vec<proto::RunStatus>, bool)| (page.len(), more);
        assert_eq!(count(page(runs(10), 100, 3 * one)), (3, true));
        assert_eq!(count(page(runs(10), 4, usize::MAX)), (4, true));
        assert_eq!(count(page(runs(4), 4, usize::MAX)), (4, false));
        assert_eq!(count(page(runs(2), 4, 1)), (1, true));
        assert_eq!(count(page(runs(0), 4, 1)), (0, false));
    }
}
