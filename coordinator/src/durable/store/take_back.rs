//! Taking a counted result back into a dispute, inside a commit's transaction: by a different result
//! under a live lease of its job (`commit.rs`), or by a held checker's kept contradiction taken up
//! (`take_up.rs`).

use nqueens_common::JobKey;
use sled::transaction::ConflictableTransactionError as Abort;

use super::changed::{Committed, Moved, Revoked};
use super::groups;
use super::records::{encode, job_key, JobRecord, JobState, ResultRecord};
use super::txn::stored_tally;

/// Takes `counted`, the result of job `key` of run `run`, back and makes the job disputed between it
/// and `disputing` (the job stays verified while open; a further worker decides, as for any dispute),
/// inside a commit's transaction, noting the effects in `out` (all but the outcome, which is the
/// caller's).
pub(super) fn take_back(
    results: groups::Tx,
    (jobs, totals, taken): (
        &sled::transaction::TransactionalTree,
        &sled::transaction::TransactionalTree,
        &sled::transaction::TransactionalTree,
    ),
    out: &mut Committed,
    (run, key): (u64, &JobKey),
    counted: ResultRecord,
    disputing: ResultRecord,
) -> super::txn::TxResult<()> {
    groups::txn_take(results, run, key)?;
    // Noted, as a revocation's take-back is: should the job fail and be retried, nothing else would
    // show it held the count (an older copy of it was then restored, a lie counted again: found by a
    // review, 2026-12-01). A decision for it counts it again under the decider's lease.
    super::revoked::txn_note(taken, run, key, counted.lease)?;
    let mut tally = match out.tallies.get(&run) {
        Some(t) => *t,
        None => stored_tally(totals, run)?,
    };
    tally
        .remove(&counted.result)
        .map_err(|e| Abort::Abort(e.into()))?;
    out.tallies.insert(run, tally);
    let record = JobRecord {
        state: JobState::Disputed,
        candidates: vec![counted.clone(), disputing],
        reason: None,
    };
    jobs.insert(job_key(run, key), encode(&record))?;
    out.moved.push(Moved {
        run,
        key: key.clone(),
        from: Some(JobState::Done),
        to: Some(JobState::Disputed),
    });
    // A count of this very commit never reaches the ledger; an earlier one is taken back there
    // (before this commit's counts, one of which may decide the job).
    let before = out.counted.len();
    out.counted.retain(|(r, k, _)| !(*r == run && k == key));
    if out.counted.len() == before {
        out.disputed.push(Revoked {
            run,
            key: key.clone(),
            record: counted,
        });
    }
    Ok(())
}
