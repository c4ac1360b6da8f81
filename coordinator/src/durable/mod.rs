//! The durable layer: what survives a crash. The [`store`] (sled, one tree per concept), the
//! [`ledger`] (an append-only, checksummed copy of every accepted result), the committer thread that
//! writes both and makes them durable before a report is acknowledged, their reconciliation at start
//! ([`reconcile`], [`digest`]), the offline tools over a stopped coordinator's directory ([`offline`]),
//! the certificate's reading of a finished run ([`certify`]), the worker credentials' file
//! ([`credentials`]) and the storage health. Nothing here imports the service or the wire layer.

pub mod certify;
pub(crate) mod committer;
pub mod credentials;
pub mod digest;
pub mod ledger;
pub mod offline;
pub mod reconcile;
pub mod storage_health;
pub mod store;
