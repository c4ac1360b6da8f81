//! A coordinator that answers as a test tells it (tests only): Report, Lease, Heartbeat, Release and
//! GetRun from closures, every other call UNIMPLEMENTED; it counts the calls it gets.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nqueens_proto as proto;
use proto::coordinator_server::{Coordinator, CoordinatorServer};
use tonic::{Request, Response, Status};

pub type Answer<Q, A> = Box<dyn Fn(&Q) -> Result<A, Status> + Send + Sync>;

/// What the fake answers, and the calls it got.
pub struct Fake {
    pub report: Answer<proto::ReportRequest, proto::ReportResponse>,
    pub lease: Answer<proto::LeaseRequest, proto::LeaseResponse>,
    pub get_run: Answer<proto::GetRunRequest, proto::RunStatus>,
    pub leases: Arc<AtomicUsize>,
    pub reports: Arc<AtomicUsize>,
    pub released: Arc<AtomicUsize>,
}

impl Default for Fake {
    /// Accepts every result; leases nothing (idle).
    fn default() -> Fake {
        Fake {
            report: Box::new(|r: &proto::ReportRequest| {
                Ok(proto::ReportResponse {
                    outcomes: vec![proto::Outcome::Accepted as i32; r.results.len()],
                    lease: None,
                })
            }),
            lease: Box::new(|_| {
                Ok(proto::LeaseResponse {
                    retry_after_ms: 1000,
                    idle: true,
                    ..Default::default()
                })
            }),
            get_run: Box::new(|_| Err(Status::unimplemented("not in this fake"))),
            leases: Arc::default(),
            reports: Arc::default(),
            released: Arc::default(),
        }
    }
}

/// A Lease answer: the leases `first` makes of the first request, then none (idle, asked again soon).
pub fn lease_once(
    first: impl Fn(&proto::LeaseRequest) -> Vec<proto::JobLease> + Send + Sync + 'static,
) -> Answer<proto::LeaseRequest, proto::LeaseResponse> {
    let fresh = AtomicBool::new(true);
    Box::new(move |r| {
        let leases = if fresh.swap(false, Ordering::SeqCst) {
            first(r)
        } else {
            Vec::new()
        };
        Ok(proto::LeaseResponse {
            idle: leases.is_empty(),
            leases,
            lease_timeout_ms: 60_000,
            retry_after_ms: 10,
        })
    })
}

/// A Report answer that accepts every result, noting its lease id in `ids`.
pub fn accept_noting(
    ids: Arc<Mutex<Vec<u64>>>,
) -> Answer<proto::ReportRequest, proto::ReportResponse> {
    Box::new(move |r| {
        ids.lock()
            .unwrap()
            .extend(r.results.iter().map(|x| x.lease_id));
        Ok(proto::ReportResponse {
            outcomes: vec![proto::Outcome::Accepted as i32; r.results.len()],
            lease: None,
        })
    })
}

impl Fake {
    /// Serves it on a loopback port; returns its address and the server's task.
    pub async fn serve(self) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(CoordinatorServer::new(self))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
        });
        (address, server)
    }
}

type Stream = Pin<Box<dyn tokio_stream::Stream<Item = Result<proto::RunStatus, Status>> + Send>>;

fn no<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this fake"))
}

#[tonic::async_trait]
impl Coordinator for Fake {
    async fn create_run(
        &self,
        _: Request<proto::CreateRunRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        no()
    }
    async fn list_runs(
        &self,
        _: Request<proto::ListRunsRequest>,
    ) -> Result<Response<proto::ListRunsResponse>, Status> {
        no()
    }
    async fn get_run(
        &self,
        r: Request<proto::GetRunRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        (self.get_run)(r.get_ref()).map(Response::new)
    }
    type WatchRunStream = Stream;
    async fn watch_run(
        &self,
        _: Request<proto::WatchRunRequest>,
    ) -> Result<Response<Stream>, Status> {
        no()
    }
    async fn lease(
        &self,
        r: Request<proto::LeaseRequest>,
    ) -> Result<Response<proto::LeaseResponse>, Status> {
        self.leases.fetch_add(1, Ordering::SeqCst);
        (self.lease)(r.get_ref()).map(Response::new)
    }
    async fn report(
        &self,
        r: Request<proto::ReportRequest>,
    ) -> Result<Response<proto::ReportResponse>, Status> {
        self.reports.fetch_add(1, Ordering::SeqCst);
        (self.report)(r.get_ref()).map(Response::new)
    }
    async fn heartbeat(
        &self,
        _: Request<proto::HeartbeatRequest>,
    ) -> Result<Response<proto::HeartbeatResponse>, Status> {
        Ok(Response::new(proto::HeartbeatResponse::default()))
    }
    async fn release(
        &self,
        r: Request<proto::ReleaseRequest>,
    ) -> Result<Response<proto::ReleaseResponse>, Status> {
        self.released
            .fetch_add(r.get_ref().lease_ids.len(), Ordering::SeqCst);
        Ok(Response::new(proto::ReleaseResponse::default()))
    }
    async fn list_workers(
        &self,
        _: Request<proto::ListWorkersRequest>,
    ) -> Result<Response<proto::ListWorkersResponse>, Status> {
        no()
    }
    async fn cancel_run(
        &self,
        _: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        no()
    }
    async fn pause_run(
        &self,
        _: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        no()
    }
    async fn resume_run(
        &self,
        _: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        no()
    }
    async fn set_priority(
        &self,
        _: Request<proto::SetPriorityRequest>,
    ) -> Result<Response<proto::RunStatus>, Status> {
        no()
    }
    async fn list_jobs(
        &self,
        _: Request<proto::ListJobsRequest>,
    ) -> Result<Response<proto::ListJobsResponse>, Status> {
        no()
    }
    async fn issue_credential(
        &self,
        _: Request<proto::IssueCredentialRequest>,
    ) -> Result<Response<proto::IssueCredentialResponse>, Status> {
        no()
    }
    async fn revoke_credential(
        &self,
        _: Request<proto::RevokeCredentialRequest>,
    ) -> Result<Response<proto::RevokeCredentialResponse>, Status> {
        no()
    }
    async fn list_credentials(
        &self,
        _: Request<proto::ListCredentialsRequest>,
    ) -> Result<Response<proto::ListCredentialsResponse>, Status> {
        no()
    }
    async fn retry_failed(
        &self,
        _: Request<proto::RunControlRequest>,
    ) -> Result<Response<proto::RetryFailedResponse>, Status> {
        no()
    }
}
