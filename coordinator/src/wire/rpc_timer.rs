//! A tower layer on the gRPC server that times every call of the coordinator service into the RPC latency
//! metrics, by method (a fixed set of labels, whatever paths clients send).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tower_layer::Layer;
use tower_service::Service;

use crate::service::metrics::Metrics;

/// The methods timed by name; any other path is timed as `other`.
const METHODS: [&str; 14] = [
    "CreateRun",
    "ListRuns",
    "GetRun",
    "WatchRun",
    "Lease",
    "Report",
    "Heartbeat",
    "Release",
    "ListWorkers",
    "CancelRun",
    "PauseRun",
    "ResumeRun",
    "SetPriority",
    "ListJobs",
];

/// The method label of a request path such as `/nqueens.v1.Coordinator/Lease`.
fn method(path: &str) -> &'static str {
    let name = path
        .strip_prefix("/nqueens.v1.Coordinator/")
        .unwrap_or_default();
    METHODS.into_iter().find(|m| *m == name).unwrap_or("other")
}

/// Whether a response's headers say the call succeeded (a failed unary call carries its status in the
/// headers; a successful one, in the trailers).
fn ok<B>(res: &http::Response<B>) -> bool {
    res.status().is_success()
        && res
            .headers()
            .get("grpc-status")
            .is_none_or(|s| s.as_bytes() == b"0")
}

/// The layer.
#[derive(Clone)]
pub struct RpcTimer {
    metrics: Arc<Metrics>,
}

impl RpcTimer {
    pub fn new(metrics: Arc<Metrics>) -> RpcTimer {
        RpcTimer { metrics }
    }
}

impl<S> Layer<S> for RpcTimer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// A service whose calls are timed (until the response headers: the whole call for unary methods).
#[derive(Clone)]
pub struct Timed<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, R> Service<http::Request<B>> for Timed<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = method(req.uri().path());
        let start = Instant::now();
        let call = self.inner.call(req);
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let res = call.await;
            let ok = res.as_ref().is_ok_and(ok);
            metrics.rpc.observe(method, start.elapsed(), ok);
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::method;

    #[test]
    fn paths_map_to_a_fixed_set_of_methods() {
        assert_eq!(method("/nqueens.v1.Coordinator/Report"), "Report");
        assert_eq!(method("/nqueens.v1.Coordinator/Nonsense"), "other");
        assert_eq!(method("/grpc.health.v1.Health/Check"), "other");
        assert_eq!(method(""), "other");
    }
}
