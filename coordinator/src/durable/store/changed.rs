//! What a write changed, for the caller to apply in memory: jobs moved between states, counted results
//! taken back. Made by a commit (`commit.rs`) and by a revocation (`revoke.rs`).

use nqueens_common::JobKey;

use super::records::{JobState, ResultRecord};

/// A job that changed state in a commit or a revocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub run: u64,
    pub key: JobKey,
    pub from: Option<JobState>,
    /// `None`: pending again.
    pub to: Option<JobState>,
}

/// A counted result taken back.
#[derive(Debug, Clone)]
pub struct Revoked {
    pub run: u64,
    pub key: JobKey,
    pub record: ResultRecord,
}
