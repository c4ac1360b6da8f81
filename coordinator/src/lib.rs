//! The coordinator of nqueens-cluster, as a library (the `nqueens` command is its own package).
//!
//! Design: one [`Coordinator`] (`service`) owns the runs, the lease table and the live totals in memory
//! behind a short std mutex; the [`store`] (sled, one tree per concept) and the [`ledger`] (an
//! append-only, checksummed JSON-lines copy of every accepted result) are written only by the committer
//! thread, which batches commits, fsyncs them and only then lets a report be acknowledged. At start the
//! store and the ledger are reconciled both ways ([`reconcile`]); a run's total is exact or the
//! coordinator refuses to start. [`grpc`] turns requests into service calls and errors into
//! `tonic::Status` in one place; [`server`] serves it with health and reflection, [`web`] the metrics and
//! the status page.

pub mod auth;
pub mod certify;
mod committer;
pub mod connections;
pub mod credentials;
pub mod digest;
pub mod error;
pub mod grpc;
pub mod history;
mod leases;
pub mod ledger;
mod live;
pub mod metrics;
pub mod offline;
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
