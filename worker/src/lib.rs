//! Worker side of nqueens-cluster. Today: the compute pool that runs jobs on dedicated threads, used by
//! `nqueens count`; the network client loop (lease, report, heartbeat) builds on it.

pub mod pool;

pub use pool::{run_jobs, Progress};
