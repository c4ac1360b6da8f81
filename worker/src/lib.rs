//! Worker side of nqueens-cluster: the client loop that leases, computes, journals, reports and
//! heartbeats (`client`), the compute pool on dedicated threads (`compute`, and `pool` for local batch
//! runs), and the journal of unacknowledged results.

pub mod cli;
pub mod client;
pub mod compute;
pub mod connect;
pub mod error;
pub mod faults;
pub mod journal;
pub mod pool;
pub mod setup;

pub use client::{run, Summary, WorkerConfig};
pub use connect::{connect, Client, Connection};
pub use error::{Error, Result};
pub use faults::Faults;
pub use pool::{run_jobs, Progress};
