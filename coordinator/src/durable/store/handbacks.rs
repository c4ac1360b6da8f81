//! The leases handed back, kept across restarts. A lease's tag stays valid for good, and after a
//! restart the lease table knows none of the earlier incarnation's leases: without this record, a tag
//! kept from a lease handed back (free: no strike, no attempt) would count as a lease issued for its
//! job, so that a hoarder could report made-up counts under it, or dispute honest ones. A hand-back is
//! written as the coordinator takes the lease back (not in a commit, not flushed at once: a hand-back
//! lost to a crash reopens that one lease's tag, which costs a recount, never a count).
//!
//! Since store format 8 a hand-back is one bit, in a bitmap of every lease id: the tree
//! `handed_back_bits` holds one chunk of [`CHUNK_LEASES`] lease ids per key. Only a lease that is
//! active and its worker's is handed back, so the record grows with the leases the coordinator
//! issues, to anyone: at most one chunk of [`CHUNK_BYTES`] per 512 lease ids, however many are
//! handed back. Format 7 kept an entry per hand-back (266 bytes on disk), never pruned; the migration
//! to format 8 turns those entries into bits and drops their tree.

use super::Store;
use crate::error::Result;
use nqueens_common::checksum::checksum;

/// Format 7's tree: run id (8 bytes, big-endian) ++ lease id (8 bytes, big-endian) → an entry (checked
/// JSON naming its run and lease). Read only by the migration to format 8, which drops it.
pub(super) const HANDED_BACK: &str = "handed_back";

/// Format 8's tree: a chunk's number (a lease id shifted right by [`CHUNK_BITS`], 8 bytes,
/// big-endian) → [`VERSION`] ++ CRC-64 of the key and the bits (8 bytes, big-endian) ++ the bits.
pub(super) const HANDED_BACK_BITS: &str = "handed_back_bits";

/// The version byte of a chunk.
const VERSION: u8 = 1;

/// Lease ids per chunk: 2^CHUNK_BITS. Small, so that a hand-back rewrites few bytes (a chunk is
/// written whole: sled keeps values whole) and a chunk damaged on disk concerns few leases.
const CHUNK_BITS: u32 = 9;

/// Lease ids per chunk (a lease id is `epoch << 40 | sequence`, so one incarnation's leases fill
/// chunks one after another).
pub const CHUNK_LEASES: u64 = 1 << CHUNK_BITS;

/// Bytes of a chunk's bits.
const BITS_BYTES: usize = (CHUNK_LEASES / 8) as usize;

/// Bytes of a whole chunk as stored (its value; its key is 8 more).
pub const CHUNK_BYTES: usize = 1 + 8 + BITS_BYTES;

/// Hand-backs of format 7 converted to bits at a time.
const CONVERT_BATCH: usize = 65_536;

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
    /// Records leases (their ids) as handed back: sets each one's bit, a chunk at a time, each
    /// chunk changed atomically (two hand-backs at once into one chunk both stay). A chunk that fails
    /// its check (damaged on disk) is left as it is: every lease of it reads as handed back already.
    /// Returns how many such chunks it met.
    pub fn put_handed_back(&self, leases: &[u64]) -> Result<u64> {
        let mut by_chunk: std::collections::BTreeMap<[u8; 8], Vec<(usize, u8)>> =
            std::collections::BTreeMap::new();
        for &lease in leases {
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
            damaged += u64::from(met_damage);
        }
        Ok(damaged)
    }

    /// Whether lease `lease` was recorded as handed back (lease ids are never given twice in one
    /// store, whatever the run). A chunk that fails its check (damaged on disk, or of another version)
    /// is [`HandBack::Damaged`]: the caller reads it as handed back, loudly (the lease is then refused,
    /// which costs its job a recount, never a count).
    pub fn was_handed_back(&self, lease: u64) -> Result<HandBack> {
        let (key, byte, mask) = place(lease);
        Ok(match self.handed_back_bits.get(key)? {
            None => HandBack::No,
            Some(v) => match read_chunk(&key, &v) {
                Some(bits) if bits[byte] & mask != 0 => HandBack::Yes,
                Some(_) => HandBack::No,
                None => HandBack::Damaged,
            },
        })
    }

    /// The migration from format 7: sets the bit of every lease format 7's `handed_back` tree has an
    /// entry for, by its key (an entry that failed its check read as handed back for its key's lease,
    /// as it still does), then drops that tree. Taken up again whole if cut short. Returns how many
    /// entries it converted.
    pub(super) fn convert_hand_backs(&self) -> Result<u64> {
        let legacy = self.db.open_tree(HANDED_BACK)?;
        let mut leases = Vec::new();
        let mut converted = 0u64;
        for kv in legacy.iter() {
            let (k, _) = kv?;
            // A key of another length was never looked up: it stood for no lease.
            let Ok(k) = <[u8; 16]>::try_from(k.as_ref()) else {
                continue;
            };
            let [_, _, _, _, _, _, _, _, lease @ ..] = k;
            leases.push(u64::from_be_bytes(lease));
            if leases.len() == CONVERT_BATCH {
                self.put_handed_back(&leases)?;
                converted += leases.len() as u64;
                leases.clear();
            }
        }
        self.put_handed_back(&leases)?;
        converted += leases.len() as u64;
        self.flush()?;
        self.db.drop_tree(HANDED_BACK)?;
        Ok(converted)
    }

    /// The bytes the hand-back record holds (its keys and values; sled's own overhead aside).
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
    /// The chunk that would hold it fails its check.
    Damaged,
}

#[cfg(test)]
mod tests {
    use super::super::records::{encode, run_key};
    use super::*;

    /// Recorded and read back by lease; another lease is not, in the same chunk or another, in this
    /// epoch or another.
    #[test]
    fn hand_backs_are_kept_by_lease() {
        let store = Store::temporary().unwrap();
        let epoch = 5u64 << 40;
        let leases = [epoch | 7, epoch | 9, epoch | CHUNK_LEASES, 6 << 40 | 7];
        for &l in &leases {
            assert_eq!(store.was_handed_back(l).unwrap(), HandBack::No);
        }
        let put = store.put_handed_back(&[leases[0], leases[1]]);
        assert_eq!(put.unwrap(), 0);
        assert_eq!(store.was_handed_back(leases[0]).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(leases[1]).unwrap(), HandBack::Yes);
        for l in [epoch | 6, epoch | 8, epoch | 10, leases[2], leases[3]] {
            assert_eq!(store.was_handed_back(l).unwrap(), HandBack::No, "{l:#x}");
        }
        // Every bit of a chunk, each on its own, from its first lease id to its last.
        let chunk = 9 << 40 | CHUNK_LEASES;
        for offset in 0..CHUNK_LEASES {
            let lease = chunk | offset;
            store.put_handed_back(&[lease]).unwrap();
            assert_eq!(store.was_handed_back(lease).unwrap(), HandBack::Yes);
            if offset + 1 < CHUNK_LEASES {
                assert_eq!(store.was_handed_back(lease + 1).unwrap(), HandBack::No);
            }
        }
        for l in [chunk - 1, chunk + CHUNK_LEASES] {
            assert_eq!(store.was_handed_back(l).unwrap(), HandBack::No);
        }
    }

    /// A flipped byte anywhere in a chunk, a chunk cut short, grown or emptied, or moved under another
    /// key (a key damaged on disk) is damage for every lease of it; a hand-back into a damaged chunk
    /// leaves it as it is and says so; the other chunks are not touched.
    #[test]
    fn a_damaged_chunk_reads_as_damage_and_is_left_as_it_is() {
        let store = Store::temporary().unwrap();
        let lease = 3u64 << 40 | 77;
        let other = lease + CHUNK_LEASES;
        store.put_handed_back(&[lease, other]).unwrap();
        let key = chunk_key(lease);
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
                    store.was_handed_back(l).unwrap(),
                    HandBack::Damaged,
                    "case {i}"
                );
            }
            let put = store.put_handed_back(&[lease + 1, lease + 2, other + 1]);
            assert_eq!(put.unwrap(), 1, "case {i}: one damaged chunk");
            assert_eq!(
                store.handed_back_bits.get(key).unwrap().unwrap().as_ref(),
                &bad[..],
                "case {i}: left as it was"
            );
            assert_eq!(store.was_handed_back(other).unwrap(), HandBack::Yes);
            assert_eq!(store.was_handed_back(other + 2).unwrap(), HandBack::No);
        }
        assert_eq!(store.was_handed_back(other + 1).unwrap(), HandBack::Yes);
        // Two damaged chunks in one hand-back: both said.
        store
            .handed_back_bits
            .insert(chunk_key(other), vec![1u8])
            .unwrap();
        let put = store.put_handed_back(&[lease, other]);
        assert_eq!(put.unwrap(), 2);
        // An intact chunk under another key.
        store.handed_back_bits.insert(key, good.clone()).unwrap();
        store
            .handed_back_bits
            .insert(chunk_key(other), good)
            .unwrap();
        assert_eq!(store.was_handed_back(other).unwrap(), HandBack::Damaged);
        assert_eq!(store.was_handed_back(lease).unwrap(), HandBack::Yes);
    }

    /// Hand-backs into one chunk from several threads at once, started together, all stay (each chunk
    /// is changed atomically, never read and written over another's change).
    #[test]
    fn hand_backs_at_once_into_one_chunk_all_stay() {
        let store = Store::temporary().unwrap();
        for round in 0..8u64 {
            let base = (2 + round) << 40;
            let start = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let (store, start) = (&store, &start);
                    s.spawn(move || {
                        start.wait();
                        for i in 0..CHUNK_LEASES / 4 {
                            store.put_handed_back(&[base | (i * 4 + t)]).unwrap();
                        }
                    });
                }
            });
            for l in 0..CHUNK_LEASES {
                let lease = base | l;
                assert_eq!(
                    store.was_handed_back(lease).unwrap(),
                    HandBack::Yes,
                    "{lease:#x}"
                );
            }
            assert_eq!(
                store.was_handed_back(base | CHUNK_LEASES).unwrap(),
                HandBack::No
            );
        }
    }

    /// The record grows by a bit per lease id, never by an entry per hand-back: 65,536 hand-backs one
    /// at a time (four times a credential's largest allowance) take 128 chunks of 73 bytes.
    #[test]
    fn a_hand_back_costs_a_bit() {
        let store = Store::temporary().unwrap();
        let base = 7u64 << 40;
        for i in 0..65_536u64 {
            store.put_handed_back(&[base | i]).unwrap();
        }
        assert_eq!(CHUNK_BYTES, 73);
        assert_eq!(store.handed_back_bits.len(), 128);
        assert_eq!(store.handed_back_bytes().unwrap(), 128 * (8 + 73));
    }

    /// A format 7 entry, as that build wrote it.
    fn entry_of_format_7(run: u64, lease: u64) -> ([u8; 16], Vec<u8>) {
        #[derive(serde::Serialize)]
        struct HandedBack {
            version: u32,
            run: u64,
            lease: u64,
        }
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&run_key(run));
        k[8..].copy_from_slice(&lease.to_be_bytes());
        let v = encode(&HandedBack {
            version: 1,
            run,
            lease,
        });
        (k, v)
    }

    /// A store of format 7 is brought to format 8 at its first open by this build: each of its
    /// hand-back entries becomes its lease's bit (one that fails its check too, as format 7 read it as
    /// handed back), a key of another length is passed over, and their tree is dropped. So a run started
    /// before the upgrade keeps refusing the tags its workers handed back, and the entries' bytes are
    /// freed.
    #[test]
    fn a_format_7_stores_hand_backs_become_bits_at_the_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let lease = 3u64 << 40 | 11;
        let damaged = 3u64 << 40 | 900;
        {
            let store = Store::open(dir.path()).unwrap();
            let legacy = store.db.open_tree(HANDED_BACK).unwrap();
            for (run, l) in [(1, lease), (2, lease + 2)] {
                let (k, v) = entry_of_format_7(run, l);
                legacy.insert(k, v).unwrap();
            }
            let (k, mut v) = entry_of_format_7(1, damaged);
            v[12] ^= 0x20;
            legacy.insert(k, v).unwrap();
            legacy.insert(b"short", &b"x"[..]).unwrap();
            store
                .meta
                .insert(super::super::FORMAT, &7u64.to_be_bytes())
                .unwrap();
            store.flush().unwrap();
        }
        let store = Store::open_when_free(dir.path(), std::time::Duration::from_secs(30)).unwrap();
        let format = store.meta.get(super::super::FORMAT).unwrap().unwrap();
        assert_eq!(format.as_ref(), 8u64.to_be_bytes());
        for l in [lease, lease + 2, damaged] {
            assert_eq!(store.was_handed_back(l).unwrap(), HandBack::Yes, "{l:#x}");
        }
        for l in [lease + 1, damaged + 1] {
            assert_eq!(store.was_handed_back(l).unwrap(), HandBack::No, "{l:#x}");
        }
        assert!(
            !store
                .db
                .tree_names()
                .iter()
                .any(|t| t.as_ref() == HANDED_BACK.as_bytes()),
            "format 7's tree is dropped"
        );
    }

    /// A migration cut short after the bits were set and before the tree was dropped is taken up
    /// again: the bits stay, the tree goes.
    #[test]
    fn a_conversion_taken_up_again_keeps_every_bit() {
        let store = Store::temporary().unwrap();
        let legacy = store.db.open_tree(HANDED_BACK).unwrap();
        let leases: Vec<u64> = (0..3 * CONVERT_BATCH as u64 / 2)
            .map(|i| (4 << 40) | (i * 3))
            .collect();
        for &l in &leases {
            let (k, v) = entry_of_format_7(1, l);
            legacy.insert(k, v).unwrap();
        }
        store.put_handed_back(&[leases[5]]).unwrap();
        assert_eq!(store.convert_hand_backs().unwrap(), leases.len() as u64);
        assert_eq!(store.convert_hand_backs().unwrap(), 0, "the tree is gone");
        for &l in &leases {
            assert_eq!(store.was_handed_back(l).unwrap(), HandBack::Yes, "{l:#x}");
            assert_eq!(
                store.was_handed_back(l + 1).unwrap(),
                HandBack::No,
                "{l:#x}"
            );
        }
    }

    /// The disk a loop of hand-backs costs, one lease at a time, format 7's entries against format 8's
    /// bits: the bytes of sled's files once flushed, and sled's own count. A benchmark, not a test
    /// (`coordinator/benches/hand-backs-disk.sh`): `HAND_BACKS` hand-backs (default 1,000,000).
    #[test]
    #[ignore]
    fn hand_backs_disk_benchmark() {
        let count: u64 = std::env::var("HAND_BACKS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        for bits in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let started = std::time::Instant::now();
            let on_disk = {
                let store = Store::open(dir.path()).unwrap();
                let legacy = store.db.open_tree(HANDED_BACK).unwrap();
                let base = 5u64 << 40;
                for i in 0..count {
                    if bits {
                        store.put_handed_back(&[base | i]).unwrap();
                    } else {
                        let (k, v) = entry_of_format_7(1, base | i);
                        legacy.insert(k, v).unwrap();
                    }
                }
                store.flush().unwrap();
                store.db.size_on_disk().unwrap()
            };
            let files: u64 = walk(dir.path());
            println!(
                "{}: {count} hand-backs in {:.2} s; sled's files {files} bytes ({:.1} a hand-back); size_on_disk {on_disk}",
                if bits { "format 8 (bits)" } else { "format 7 (entries)" },
                started.elapsed().as_secs_f64(),
                files as f64 / count as f64
            );
        }

        fn walk(p: &std::path::Path) -> u64 {
            std::fs::read_dir(p)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let m = e.metadata().unwrap();
                    if m.is_dir() {
                        walk(&e.path())
                    } else {
                        m.len()
                    }
                })
                .sum()
        }
    }

    /// Kept when the store is opened again (a restart).
    #[test]
    fn hand_backs_survive_a_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.put_handed_back(&[1 << 40 | 5]).unwrap();
            store.flush().unwrap();
        }
        let store = Store::open_when_free(dir.path(), std::time::Duration::from_secs(30)).unwrap();
        assert_eq!(store.was_handed_back(1 << 40 | 5).unwrap(), HandBack::Yes);
        assert_eq!(store.was_handed_back(1 << 40 | 6).unwrap(), HandBack::No);
    }
}
