//! Worker side of nqueens-cluster: the client loop that leases, computes, journals, reports and
//! heartbeats (`client`), the compute pool on dedicated threads (`compute`, and `pool` for local batch
//! runs), the journal of unacknowledged results, and the metrics with their HTTP listener.

pub mod cli;
pub mod client;
pub mod compute;
pub mod connect;
pub mod error;
pub mod faults;
pub mod http;
pub mod journal;
pub mod metrics;
pub mod pool;
pub mod setup;

pub use client::{run, GpuConfig, Summary, WorkerConfig, DEFAULT_GPU_BATCH};
pub use connect::{connect, Client, Connection};
pub use error::{Error, Result};
pub use faults::Faults;
pub use metrics::Metrics;
pub use pool::{run_jobs, Progress};
