//! The worker of nqueens-cluster, as a library (its binary, `nqueens-worker`, is in the command package).
//!
//! Design: [`client`] is the loop a worker runs (lease a batch sized to its compute slots, compute,
//! journal, report, heartbeat, reconnect with capped backoff); it never computes on a runtime thread but
//! hands jobs to the [`compute`] pool (dedicated CPU threads and one thread per GPU, behind a bounded
//! queue), so heartbeats never wait behind a search. Every result is sealed where it is computed and
//! written to the fsynced [`journal`] before it is reported, and re-sent until acknowledged. The wire
//! (stubs, connection, token, TLS) is `nqueens-proto`'s; [`metrics`] are the worker's own.

pub mod client;
pub mod compute;
pub mod cpu;
pub mod error;
pub mod faults;
pub mod journal;
pub mod metrics;
pub mod pace;

pub use client::{run, GpuConfig, Summary, WorkerConfig, DEFAULT_GPU_BATCH};
pub use error::{Error, Result};
pub use faults::{FaultArgs, Faults};
pub use metrics::Metrics;
pub use nqueens_proto::{connect, Client, Connection};
