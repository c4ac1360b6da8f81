//! The coordinator of nqueens-cluster, as a library (the `nqueens` command is its own package).
//!
//! Three layers, from the top: [`wire`] (gRPC, the server, authentication, connections, the web page
//! and status JSON), [`service`] (one [`Coordinator`] owning the runs, the lease table and the live
//! totals in memory behind a short std mutex; lease policy, workers, strikes, history, progress,
//! metrics), and the durable layer: the [`store`] (sled, one tree per concept) and the [`ledger`] (an
//! append-only, checksummed copy of every accepted result), written only by the committer thread, which
//! batches commits, fsyncs them and only then lets a report be acknowledged. At start the store and the
//! ledger are reconciled both ways ([`reconcile`]); a run's total is exact or the coordinator refuses to
//! start. `docs/architecture.md` draws the layers and the path of a result.

pub mod certify;
mod committer;
pub mod credentials;
pub mod digest;
pub mod error;
pub mod ledger;
pub mod offline;
pub mod reconcile;
pub mod service;
pub mod storage_health;
pub mod store;
pub mod wire;

pub use error::{Error, Result};
pub use service::{Config, Coordinator};
