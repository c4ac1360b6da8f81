//! The coordinator of nqueens-cluster and the `nqueens` command: the job store (sled), the lease state
//! machine, the gRPC service, progress reporting, and the embedded local mode.

pub mod auth;
pub mod cli;
mod committer;
pub mod error;
pub mod grpc;
pub mod history;
mod leases;
pub mod ledger;
mod live;
pub mod loadgen;
pub mod local;
pub mod metrics;
pub mod progress;
pub mod reconcile;
mod rpc_timer;
pub mod server;
pub mod service;
pub mod status_json;
pub mod storage_health;
pub mod store;
pub mod web;

pub use error::{Error, Result};
pub use service::{Config, Coordinator};
