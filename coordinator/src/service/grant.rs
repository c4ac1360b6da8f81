//! What a lease call hands out: the leased jobs and when to ask again. Made by the lease policy
//! (`lease.rs`) and by spot checks (`spot.rs`), read by the wire.

use std::time::Duration;

use nqueens_common::{JobKey, Plan};

/// The answer to a lease request.
#[derive(Debug, Clone)]
pub struct Grant {
    pub leases: Vec<Granted>,
    pub lease_timeout: Duration,
    /// When nothing was leased: how long to wait before asking again.
    pub retry_after: Duration,
    /// No run is running, or nothing left is for this worker: every open job is a verified job it
    /// computed itself, waiting for a second worker name.
    pub idle: bool,
}

/// One leased job.
#[derive(Debug, Clone)]
pub struct Granted {
    pub id: u64,
    pub run: u64,
    pub plan: Plan,
    pub key: JobKey,
    /// The lease's authentication tag.
    pub tag: u64,
    /// The run's plan fingerprint (sealed into the result).
    pub fingerprint: u64,
}
