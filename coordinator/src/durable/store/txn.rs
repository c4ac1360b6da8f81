//! Reading records inside sled transactions, shared by commits, revocations and restores: an error aborts
//! the transaction with the coordinator's error.

use nqueens_common::Tally;
use sled::transaction::{ConflictableTransactionError as Abort, TransactionalTree};

use super::records::{decode, run_key, JobRecord};
use crate::error::Error;

/// What a transaction's closure returns.
pub type TxResult<T> = std::result::Result<T, Abort<Error>>;

/// Aborts the transaction with `e`.
pub fn abort<T>(e: Error) -> TxResult<T> {
    Err(Abort::Abort(e))
}

/// A job's record (`None`: pending).
pub fn job_record(jobs: &TransactionalTree, key: &[u8]) -> TxResult<Option<JobRecord>> {
    jobs.get(key)?
        .map(|raw| decode("job", &raw))
        .transpose()
        .or_else(abort)
}

/// A run's stored totals.
pub fn stored_tally(totals: &TransactionalTree, run: u64) -> TxResult<Tally> {
    match totals.get(run_key(run))? {
        Some(raw) => decode("totals", &raw).or_else(abort),
        None => abort(Error::Corrupt(format!("run {run} has no totals"))),
    }
}
