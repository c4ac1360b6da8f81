//! The leases handed back, kept across restarts. A lease's tag stays valid for good, and after a
//! restart the lease table knows none of the earlier incarnation's leases: without this record, a tag
//! kept from a lease handed back (free: no strike, no attempt) would count as a lease issued for its
//! job, so that a hoarder could report made-up counts under it, or dispute honest ones. A hand-back is
//! written as the coordinator takes the lease back (not in a commit, not flushed at once: a hand-back
//! lost to a crash reopens that one lease's tag, which costs a recount, never a count).
//!
//! Since store format 8 a hand-back is one bit, in a bitmap of every lease id: the tree
//! `handed_back_bits` holds one chunk of [`CHUNK_LEASES`] lease ids per key. So the record grows with
//! the leases issued (a bit each, however many are handed back), never past an eighth of a byte per
//! lease: a credential that leases and hands back in a loop costs the disk 2 KiB a lease timeout at
//! its allowance of 16,384, where format 7's entry of about 60 bytes per hand-back cost 1 MiB. The
//! `handed_back` tree of format 7 (one entry per hand-back) is still read, and no longer written.

use serde::{Deserialize, Serialize};

use super::records::{decode, run_key};
use super::Store;
use crate::error::Result;
use nqueens_common::checksum::checksum;

/// Format 7's tree: run id (8 bytes, big-endian) ++ lease id (8 bytes, big-endian) → [`HandedBack`].
pub(super) const HANDED_BACK: &str = "handed_back";

/// Format 8's tree: a chunk's number (a lease id shifted right by [`CHUNK_BITS`], 8 bytes,
/// big-endian) → [`VERSION`] ++ CRC-64 of the key and the bits (8 bytes, big-endian) ++ the bits.
pub(super) const HANDED_BACK_BITS: &str = "handed_back_bits";

/// The version byte of a chunk.
const VERSION: u8 = 1;

/// Lease ids per chunk: 2^CHUNK_BITS.
const CHUNK_BITS: u32 = 12;

/// Lease ids per chunk (a lease id is `epoch << 40 | sequence`, so one incarnation's leases fill
/// chunks one after another).
pub const CHUNK_LEASES: u64 = 1 << CHUNK_BITS;

/// Bytes of a chunk's bits.
const BITS_BYTES: usize = (CHUNK_LEASES / 8) as usize;

/// Bytes of a whole chunk as stored.
pub const CHUNK_BYTES: usize = 1 + 8 + BITS_BYTES;

/// Format 7's entry, as stored (checked JSON): it repeats its key, so that a key damaged on disk is
/// seen.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandedBack {
    version: u32,
    run: u64,
    lease: u64,
}

/// The version of format 7's entries.
const ENTRY_VERSION: u32 = 1;

fn entry_key(run: u64, lease: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&run_key(run));
    k[8..].copy_from_slice(&lease.to_be_bytes());
    k
}

/// The key of lease `lease`'s chunk.
pub(super) fn chunk_key(lease: u64) -> [u8; 8] {
    (lease >> CHUNK_BITS).to_be_bytes()
}

/// The key of lease `lease`'s chunk, and its bit's byte and mask in the chunk's bits.
fn place(lease: u64) -> ([u8; 8], usize, u8) {
    let offset = lease & (CHUNK_LEASES - 1);
    (chunk_key(lease), (offset / 8) as usize, 1 << (offset % 8))
}

/// The check of a chunk stored under `key` holding `bits`: it covers the key, so that an intact chunk
/// under another key (a key damaged on disk) fails it.
fn chunk_check(key: &[u8], bits: &[u8]) -> u64 {
    checksum(&[key, bits].concat())
}

/// A chunk's bits, if its value is whole and passes its check under `key`.
fn read_chunk<'a>(key: &[u8], value: &'a [u8]) -> Option<&'a [u8]> {
    if value.len() != CHUNK_BYTES || value[0] != VERSION {
        return None;
    }
    let sum = u64::from_be_bytes(value[1..9].try_into().ok()?);
    let bits = &value[9..];
    (chunk_check(key, bits) == sum).then_some(bits)
}

/// A chunk as stored under `key`.
fn write_chunk(key: &[u8], bits: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(CHUNK_BYTES);
    v.push(VERSION);
    v.extend_from_slice(&chunk_check(key, bits).to_be_bytes());
    v.extend_from_slice(bits);
    v
}

impl Store {
    /// Records leases `(run, lease id)` as handed back: sets each one's bit, a chunk at a time, each
    /// chunk changed atomically (two hand-backs at once into one chunk both stay). A chunk that fails
    /// its check (damaged on disk) is left as it is: every lease of it reads as handed back already.
    /// Returns how many such chunks it met.
    pub fn put_handed_back(&self, leases: &[(u64, u64)]) -> Result<usize> {
        let mut by_chunk: std::collections::BTreeMap<[u8; 8], Vec<(usize, u8)>> =
            std::collections::BTreeMap::new();
        for &(_, lease) in leases {
            let (key, byte, mask) = place(lease);
            by_chunk.entry(key).or_default().push((byte, mask));
        }
        let mut damaged = 0;
        for (key, bits) in by_chunk {
            let mut met_damage = false;
            self.handed_back_bits.fetch_and_update(key, |old| {
                met_damage = false;
                let mut chunk = match old {
                    None => vec![0u8; BITS_BYTES],
                    Some(v) => match read_chunk(&key, v) {
                        Some(b) => b.to_vec(),
                        None => {
                            met_damage = true;
                            return Some(v.to_vec());
                        }
                    },
                };
                for &(byte, mask) in &bits {
                    chunk[byte] |= mask;
                }
                Some(write_chunk(&key, &chunk))
            })?;
            damaged += usize::from(met_damage);
        }
        Ok(damaged)
    }

    /// Whether lease `lease` of run `run` was recorded as handed back: its bit, or (a store of format
    /// 7 or before) its entry. A chunk or entry that fails its check (damaged on disk, or of another
    /// version) is [`HandBack::Damaged`]: the caller reads it as handed back, loudly (the lease is
    /// then refused, which costs its job a recount, never a count).
    pub fn was_handed_back(&self, run: u64, lease: u64) -> Result<HandBack> {
        let (key, byte, mask) = place(lease);
        let bit = match self.handed_back_bits.get(key)? {
            None => HandBack::No,
            Some(v) => match read_chunk(&key, &v) {
                Some(bits) if bits[byte] & mask != 0 => return Ok(HandBack::Yes),
                Some(_) => HandBack::No,
                None => HandBack::Damaged,
            },
        };
        let Some(bytes) = self.handed_back.get(entry_key(run, lease))? else {
            return Ok(bit);
        };
        Ok(match decode::<HandedBack>("hand-back", &bytes) {
            Ok(e) if e.version == ENTRY_VERSION && e.run == run && e.lease == lease => {
                HandBack::Yes
            }
            _ => HandBack::Damaged,
        })
    }

    /// The bytes the hand-back bitmap holds (its keys and values; sled's own overhead aside).
    #[cfg(test)]
    fn handed_back_bytes(&self) -> Result<u64> {
        let mut bytes = 0u64;
        for kv in self.handed_back_bits.iter() {
            let (k, v) = kv?;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok(bytes)
    }
}

/// What the store says of one lease's hand-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBack {
    /// None recorded.
    No,
    /// Recorded, intact.
    Yes,
    /// A chunk or entry that would hold it fails its check.
    Damaged,
}

#[cfg(test)]
mod tests {
    use super::super::records::encode;
    use super::*;

    /// Recorded and read back by lease; another lease is not, in the same chunk or another, in this
    /// epoch or another.
    #[test]
    fn hand_backs_are_kept_by_lease() {
        let store = Store::temporary().unwrap();
        let epoch = 5u64 << 40;
        let leases = [epoch | 7, epoch | 9, epoch | CHUNK_LEASES, 6 << 40 | 7];
        for &l in &leases {
            assert_eq!(store.was_handed_back(1, l).unwrap(), HandBack::No);
        }
        assert_eq!(
            store
                .put_handed_back(&[(1, leases[0]), (2, leases[1])])
                .unwrap(),
            0
        );
        assert_eq!(store.was_handed_back(1, leases[0]).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(2, leases[1]).unwrap(), HandBack::Yes);
        for l in [epoch | 6, epoch | 8, epoch | 10, leases[2], leases[3]] {
            assert_eq!(store.was_handed_back(1, l).unwrap(), HandBack::No, "{l:#x}");
        }
        // Every bit of a chunk, each on its own, from its first lease id to its last.
        for offset in 0..CHUNK_LEASES {
            let lease = 9 << 40 | CHUNK_LEASES | offset;
            store.put_handed_back(&[(1, lease)]).unwrap();
            assert_eq!(store.was_handed_back(1, lease).unwrap(), HandBack::Yes);
            if offset + 1 < CHUNK_LEASES {
                assert_eq!(store.was_handed_back(1, lease + 1).unwrap(), HandBack::No);
            }
        }
        assert_eq!(
            store
                .was_handed_back(1, 9 << 40 | (2 * CHUNK_LEASES))
                .unwrap(),
            HandBack::No
        );
        assert_eq!(
            store
                .was_handed_back(1, 9 << 40 | (CHUNK_LEASES - 1))
                .unwrap(),
            HandBack::No
        );
    }

    /// A flipped byte anywhere in a chunk, a chunk cut short or grown, of another version, or moved
    /// under another key (a key damaged on disk) is damage for every lease of it; a hand-back into a
    /// damaged chunk leaves it as it is and says so; the other chunks are not touched.
    #[test]
    fn a_damaged_chunk_reads_as_damage_and_is_left_as_it_is() {
        let store = Store::temporary().unwrap();
        let lease = 3u64 << 40 | 77;
        let other = 3u64 << 40 | CHUNK_LEASES | 77;
        store.put_handed_back(&[(1, lease), (1, other)]).unwrap();
        let (key, ..) = place(lease);
        let good = store.handed_back_bits.get(key).unwrap().unwrap().to_vec();
        assert_eq!(good.len(), CHUNK_BYTES);
        let mut bads: Vec<Vec<u8>> = (0..good.len())
            .map(|i| {
                let mut bad = good.clone();
                bad[i] ^= 0x04;
                bad
            })
            .collect();
        bads.push(good[..good.len() - 1].to_vec());
        bads.push([&good[..], &[0]].concat());
        bads.push(Vec::new());
        for (i, bad) in bads.into_iter().enumerate() {
            store.handed_back_bits.insert(key, bad.clone()).unwrap();
            for l in [lease, lease + 1, lease - 77] {
                assert_eq!(
                    store.was_handed_back(1, l).unwrap(),
                    HandBack::Damaged,
                    "case {i}"
                );
            }
            assert_eq!(store.put_handed_back(&[(1, lease + 1)]).unwrap(), 1);
            assert_eq!(
                store.handed_back_bits.get(key).unwrap().unwrap().as_ref(),
                &bad[..],
                "case {i}: left as it was"
            );
            assert_eq!(store.was_handed_back(1, other).unwrap(), HandBack::Yes);
            assert_eq!(store.was_handed_back(1, other + 1).unwrap(), HandBack::No);
        }
        // An intact chunk under another key.
        store.handed_back_bits.insert(key, good.clone()).unwrap();
        let (other_key, ..) = place(other);
        store.handed_back_bits.insert(other_key, good).unwrap();
        assert_eq!(store.was_handed_back(1, other).unwrap(), HandBack::Damaged);
        assert_eq!(store.was_handed_back(1, lease).unwrap(), HandBack::Yes);
    }

    /// Hand-backs into one chunk from many threads at once all stay (each chunk is changed
    /// atomically, never read and written over another's change).
    #[test]
    fn hand_backs_at_once_into_one_chunk_all_stay() {
        let store = Store::temporary().unwrap();
        let base = 2u64 << 40;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let store = &store;
                s.spawn(move || {
                    for i in 0..256u64 {
                        store.put_handed_back(&[(1, base | (i * 4 + t))]).unwrap();
                    }
                });
            }
        });
        for l in 0..1024u64 {
            assert_eq!(
                store.was_handed_back(1, base | l).unwrap(),
                HandBack::Yes,
                "{l}"
            );
        }
        assert_eq!(store.was_handed_back(1, base | 1024).unwrap(), HandBack::No);
    }

    /// The record grows by a bit per lease id, never by an entry per hand-back: 65,536 hand-backs one
    /// at a time (a credential's allowance, four times over) take sixteen chunks.
    #[test]
    fn a_hand_back_costs_a_bit() {
        let store = Store::temporary().unwrap();
        let base = 7u64 << 40;
        for i in 0..65_536u64 {
            store.put_handed_back(&[(1, base | i)]).unwrap();
        }
        assert_eq!(store.handed_back_bits.len(), 16);
        assert_eq!(
            store.handed_back_bytes().unwrap(),
            16 * (8 + CHUNK_BYTES as u64)
        );
        assert!(store.handed_back.is_empty());
    }

    /// Format 7's entries are still read: by run and lease; damage in one, or an entry that names
    /// another key, is damage; a bit set beside it is read first.
    #[test]
    fn format_7_entries_are_still_read() {
        let store = Store::temporary().unwrap();
        let put = |run: u64, lease: u64, entry: HandedBack| {
            store
                .handed_back
                .insert(entry_key(run, lease), encode(&entry))
                .unwrap();
        };
        let entry = |run, lease| HandedBack {
            version: ENTRY_VERSION,
            run,
            lease,
        };
        put(1, 7, entry(1, 7));
        assert_eq!(store.was_handed_back(1, 7).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(2, 7).unwrap(), HandBack::No);
        assert_eq!(store.was_handed_back(1, 8).unwrap(), HandBack::No);
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
        store.handed_back.insert(entry_key(3, 3), good).unwrap();
        assert_eq!(store.was_handed_back(3, 3).unwrap(), HandBack::Damaged);
        for (version, run, lease) in [(2, 1, 7), (1, 2, 7), (1, 1, 8)] {
            put(
                1,
                7,
                HandedBack {
                    version,
                    run,
                    lease,
                },
            );
            assert_eq!(store.was_handed_back(1, 7).unwrap(), HandBack::Damaged);
        }
        // The bit, once set, answers whatever the entry is.
        store.put_handed_back(&[(1, 7)]).unwrap();
        assert_eq!(store.was_handed_back(1, 7).unwrap(), HandBack::Yes);
        // A damaged chunk and no entry: damage; an intact entry beside a damaged chunk: handed back.
        let (k, ..) = place(9);
        store.handed_back_bits.insert(k, vec![0u8; 3]).unwrap();
        assert_eq!(store.was_handed_back(5, 9).unwrap(), HandBack::Damaged);
        put(5, 9, entry(5, 9));
        assert_eq!(store.was_handed_back(5, 9).unwrap(), HandBack::Yes);
    }

    /// A store of format 7 is brought to format 8 at its first open by this build: its hand-backs,
    /// entries of format 7, still count, and new ones are bits. So a run started before the upgrade
    /// keeps refusing the tags its workers handed back.
    #[test]
    fn a_format_7_stores_hand_backs_count_after_the_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let lease = 3u64 << 40 | 11;
        {
            let store = Store::open(dir.path()).unwrap();
            let entry = HandedBack {
                version: ENTRY_VERSION,
                run: 1,
                lease,
            };
            store
                .handed_back
                .insert(entry_key(1, lease), encode(&entry))
                .unwrap();
            store
                .meta
                .insert(super::super::FORMAT, &7u64.to_be_bytes())
                .unwrap();
            store.flush().unwrap();
        }
        let store = Store::open_when_free(dir.path(), std::time::Duration::from_secs(30)).unwrap();
        let format = store.meta.get(super::super::FORMAT).unwrap().unwrap();
        assert_eq!(format.as_ref(), 8u64.to_be_bytes());
        assert_eq!(store.was_handed_back(1, lease).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(1, lease + 1).unwrap(), HandBack::No);
        store.put_handed_back(&[(1, lease + 1)]).unwrap();
        assert_eq!(store.was_handed_back(1, lease + 1).unwrap(), HandBack::Yes);
        assert_eq!(store.handed_back.len(), 1, "format 7's tree is not written");
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
        let store = Store::open_when_free(dir.path(), std::time::Duration::from_secs(30)).unwrap();
        assert_eq!(
            store.was_handed_back(4, 1 << 40 | 5).unwrap(),
            HandBack::Yes
        );
        assert_eq!(store.was_handed_back(4, 1 << 40 | 6).unwrap(), HandBack::No);
    }
}
