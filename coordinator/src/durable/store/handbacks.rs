//! The leases handed back, kept across restarts. A lease's tag stays valid for good, and after a
//! restart the lease table knows none of the earlier incarnation's leases: without this record, a tag
//! kept from a lease handed back (free: no strike, no attempt) would count as a lease issued for its
//! job, so that a hoarder could report made-up counts under it, or dispute honest ones. Each hand-back
//! is one entry of the `handed_back` tree, written as the coordinator takes the lease back (not in a
//! commit, not flushed at once: a hand-back lost to a crash reopens that one lease's tag, which costs a
//! recount, never a count).

use serde::{Deserialize, Serialize};

use super::records::{decode, encode, run_key};
use super::Store;
use crate::error::Result;

/// The tree: run id (8 bytes, big-endian) ++ lease id (8 bytes, big-endian) → [`HandedBack`].
pub(super) const HANDED_BACK: &str = "handed_back";

/// The entry's version.
const VERSION: u32 = 1;

/// One entry, as stored (checked JSON): it repeats its key, so that a key damaged on disk is seen.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandedBack {
    version: u32,
    run: u64,
    lease: u64,
}

fn entry_key(run: u64, lease: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&run_key(run));
    k[8..].copy_from_slice(&lease.to_be_bytes());
    k
}

impl Store {
    /// Records leases `(run, lease id)` as handed back.
    pub fn put_handed_back(&self, leases: &[(u64, u64)]) -> Result<()> {
        let mut batch = sled::Batch::default();
        for &(run, lease) in leases {
            let entry = HandedBack {
                version: VERSION,
                run,
                lease,
            };
            batch.insert(&entry_key(run, lease), encode(&entry));
        }
        self.handed_back.apply_batch(batch)?;
        Ok(())
    }

    /// Whether lease `lease` of run `run` was recorded as handed back. An entry that fails its check
    /// (damaged on disk, or of another version) is [`HandBack::Damaged`]: the caller reads it as handed
    /// back, loudly (the lease is then refused, which costs its job a recount, never a count).
    pub fn was_handed_back(&self, run: u64, lease: u64) -> Result<HandBack> {
        let Some(bytes) = self.handed_back.get(entry_key(run, lease))? else {
            return Ok(HandBack::No);
        };
        Ok(match decode::<HandedBack>("hand-back", &bytes) {
            Ok(e) if e.version == VERSION && e.run == run && e.lease == lease => HandBack::Yes,
            _ => HandBack::Damaged,
        })
    }
}

/// What the store says of one lease's hand-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBack {
    /// None recorded.
    No,
    /// Recorded, intact.
    Yes,
    /// An entry under its key fails its check.
    Damaged,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded and read back by run and lease; another run's lease of the same id, or another
    /// lease, is not; a flipped byte anywhere in an entry, or an entry that names another key, is
    /// damage.
    #[test]
    fn hand_backs_are_kept_and_damage_is_seen() {
        let store = Store::temporary().unwrap();
        assert_eq!(store.was_handed_back(1, 7).unwrap(), HandBack::No);
        store.put_handed_back(&[(1, 7), (2, 9)]).unwrap();
        assert_eq!(store.was_handed_back(1, 7).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(2, 9).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(2, 7).unwrap(), HandBack::No);
        assert_eq!(store.was_handed_back(1, 9).unwrap(), HandBack::No);
        let key = entry_key(1, 7);
        let good = store.handed_back.get(key).unwrap().unwrap().to_vec();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x04;
            store.handed_back.insert(key, bad).unwrap();
            assert_eq!(
                store.was_handed_back(1, 7).unwrap(),
                HandBack::Damaged,
                "byte {i}"
            );
        }
        // An intact entry under another key (a key damaged on disk), or naming another run, another
        // lease, or another version.
        store.handed_back.insert(entry_key(3, 3), good).unwrap();
        assert_eq!(store.was_handed_back(3, 3).unwrap(), HandBack::Damaged);
        for (version, run, lease) in [(2, 1, 7), (1, 2, 7), (1, 1, 8)] {
            let entry = HandedBack {
                version,
                run,
                lease,
            };
            store.handed_back.insert(key, encode(&entry)).unwrap();
            assert_eq!(store.was_handed_back(1, 7).unwrap(), HandBack::Damaged);
        }
    }

    /// Kept when the store is opened again (a restart).
    #[test]
    fn hand_backs_survive_a_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.put_handed_back(&[(4, 1 << 40 | 5)]).unwrap();
            store.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.was_handed_back(4, 1 << 40 | 5).unwrap(),
            HandBack::Yes
        );
    }
}
