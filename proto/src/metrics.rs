//! The metrics of gRPC calls that both ends keep (latency and failures per method), and the helpers and
//! content type both ends use to register and serve Prometheus metrics.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

/// The content type Prometheus asks for and prometheus-client writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The label of a per-call metric.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Call {
    /// The gRPC method, e.g. `Lease`.
    pub method: String,
}

/// Buckets of an RPC latency histogram: 0.25 ms to about 8 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

/// Latencies and failures of gRPC calls by method: `PREFIX_rpc_seconds` and `PREFIX_rpc_errors_total`.
#[derive(Debug, Clone)]
pub struct RpcMetrics {
    seconds: Family<Call, Histogram, fn() -> Histogram>,
    errors: Family<Call, Counter>,
}

impl RpcMetrics {
    /// Registers the two families in `registry`; `what` ends their help text.
    pub fn register(registry: &mut Registry, what: &str) -> RpcMetrics {
        let seconds = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register("rpc_seconds", format!("Latency of {what}"), seconds.clone());
        RpcMetrics {
            seconds,
            errors: registered(registry, "rpc_errors", &format!("Failed {what}")),
        }
    }

    /// Failed calls of `method` so far.
    pub fn errors(&self, method: &str) -> u64 {
        self.errors
            .get_or_create(&Call {
                method: method.to_string(),
            })
            .get()
    }

    /// Records one call's latency (and whether it failed).
    pub fn observe(&self, method: &str, took: Duration, ok: bool) {
        let label = Call {
            method: method.to_string(),
        };
        self.seconds
            .get_or_create(&label)
            .observe(took.as_secs_f64());
        if !ok {
            self.errors.get_or_create(&label).inc();
        }
    }
}

/// A new metric, registered in `registry` as `name` with `help` (the registry keeps a handle to it).
pub fn registered<M: Metric + Default + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}
