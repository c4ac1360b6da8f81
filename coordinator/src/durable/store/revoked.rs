//! The counts taken back, by run, lease and job: an older copy of one (an export, a ledger ahead of
//! the store) is never restored over the store's decision (`ledger::compare`).
//!
//! A revocation takes a count back and leaves its job pending; a dispute's take-back leaves a record
//! that a failed job's retry drops: without this note nothing in the store shows that the job ever
//! held the count. An export written before, imported into the same directory, then restored it: a
//! count its confirmer's quarantine had taken back in a record run (and a later worker's different
//! result disproved by it, that worker quarantined), one that a held checker's undecided end had
//! taken back, or one a dispute took back before its job failed and was retried (a lie counted again,
//! for good: found by a review, 2026-12-01). Noted by a revocation (`revoke.rs`), a dispute's
//! take-back (`take_back.rs`), and a take-back replayed from the ledger (`restore.rs`). A dispute
//! decided for the count counts it again under the decider's lease, which no note names.
//!
//! The tree `taken_back`: run id (8 bytes, big-endian) ++ lease id (8 bytes, big-endian) ++ job key →
//! the byte [`VERSION`]. Any value reads as taken back (a damaged one too: the safe side is a
//! recomputation). One entry per count taken back, never pruned: each takes back a count that was
//! committed once, so the notes grow as the results do, at a few dozen bytes each. Written within
//! store format 8: an older build ignores the tree, and restores such a count as it did; a store it
//! served holds no note of the take-backs it made. The ledger's take-back lines that name their count
//! are noted when a store is rebuilt from it, at a start or by an import of it; an export carries
//! none: a store imported from an export holds no note of the take-backs before it.

use nqueens_common::JobKey;
use sled::transaction::TransactionalTree;

use super::txn::TxResult;
use super::Store;
use crate::error::Result;

/// The tree's name.
pub(super) const TAKEN_BACK: &str = "taken_back";

/// The version byte of an entry.
const VERSION: u8 = 1;

/// The key of the count of job `key` of run `run` counted under lease `lease` (the lease and run
/// first, of fixed length: no two counts share a key).
fn entry_key(run: u64, lease: u64, key: &JobKey) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + key.0.len());
    k.extend_from_slice(&run.to_be_bytes());
    k.extend_from_slice(&lease.to_be_bytes());
    k.extend_from_slice(&key.0);
    k
}

/// Notes, inside a take-back's transaction (a revocation's, a dispute's, a replayed line's), that
/// the count of job `key` of run `run` under lease `lease` was taken back.
pub(super) fn txn_note(
    tree: &TransactionalTree,
    run: u64,
    key: &JobKey,
    lease: u64,
) -> TxResult<()> {
    tree.insert(entry_key(run, lease, key), &[VERSION])?;
    Ok(())
}

impl Store {
    /// Notes that the count of job `key` of run `run` under lease `lease` was taken back (a take-back
    /// line of a file: a ledger, or an export of a build that writes them). Durable with the next
    /// flush.
    pub fn note_taken_back(&self, run: u64, key: &JobKey, lease: u64) -> Result<()> {
        let k = entry_key(run, lease, key);
        if !self.revoked_counts.contains_key(&k)? {
            self.revoked_counts.insert(k, &[VERSION])?;
        }
        Ok(())
    }

    /// Forgets every note (a store of a build before them, for tests of the other evidence).
    #[cfg(test)]
    pub(crate) fn forget_taken_back(&self) -> Result<()> {
        Ok(self.revoked_counts.clear()?)
    }

    /// Whether this store took back the count of job `key` of run `run` under lease `lease` (or a
    /// file restored into it said so).
    pub fn was_taken_back(&self, run: u64, key: &JobKey, lease: u64) -> Result<bool> {
        Ok(self
            .revoked_counts
            .contains_key(entry_key(run, lease, key))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count is known taken back by its run, lease and job, each: another run's, lease's or job's
    /// is not.
    #[test]
    fn a_count_taken_back_is_known_by_its_run_lease_and_job() {
        let store = Store::temporary().unwrap();
        let key = |b: &[u8]| JobKey(b.to_vec());
        store
            .revoked_counts
            .transaction(|t| txn_note(t, 3, &key(&[1, 2]), 7))
            .unwrap();
        assert!(store.was_taken_back(3, &key(&[1, 2]), 7).unwrap());
        assert!(!store.was_taken_back(4, &key(&[1, 2]), 7).unwrap());
        assert!(!store.was_taken_back(3, &key(&[1, 2]), 8).unwrap());
        assert!(!store.was_taken_back(3, &key(&[1, 3]), 7).unwrap());
        assert!(!store.was_taken_back(3, &key(&[1]), 7).unwrap());
    }
}
