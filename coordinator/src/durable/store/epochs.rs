//! When each incarnation began: the `meta` key `started:` ++ epoch (8 bytes, big-endian) holds the Unix
//! second its store was opened, written at the open. A lease of an earlier incarnation was issued
//! after its incarnation began, so a result under it came at most that long after: the speed check
//! measures from there (`service::lease_table`). A record that is missing or damaged gives no time,
//! and its leases' results skip the speed check, as those of a build before the record did.

use std::collections::BTreeMap;

use super::Store;
use crate::error::Result;

/// The prefix of the keys.
const STARTED: &[u8] = b"started:";

fn key(epoch: u64) -> Vec<u8> {
    [STARTED, &epoch.to_be_bytes()].concat()
}

impl Store {
    /// Records that incarnation `epoch` began at Unix second `at` (not flushed: the open flushes).
    pub(super) fn put_epoch_start(&self, epoch: u64, at: u64) -> Result<()> {
        self.meta.insert(key(epoch), &at.to_be_bytes())?;
        Ok(())
    }

    /// When each incarnation on record began, by epoch, in Unix seconds. A record whose key or value is
    /// not 8 bytes (damaged on disk) is left out, loudly.
    pub fn epoch_starts(&self) -> Result<BTreeMap<u64, u64>> {
        let mut starts = BTreeMap::new();
        for kv in self.meta.scan_prefix(STARTED) {
            let (k, v) = kv?;
            let epoch = <[u8; 8]>::try_from(&k[STARTED.len()..]).map(u64::from_be_bytes);
            let at = <[u8; 8]>::try_from(v.as_ref()).map(u64::from_be_bytes);
            match (epoch, at) {
                (Ok(epoch), Ok(at)) => {
                    starts.insert(epoch, at);
                }
                _ => {
                    tracing::error!(place = "store", key = %String::from_utf8_lossy(&k), "an incarnation's start record is damaged: left out (its leases' results skip the speed check)")
                }
            }
        }
        Ok(starts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each open records its incarnation's start; damaged records are left out.
    #[test]
    fn each_open_records_when_its_incarnation_began() {
        let dir = tempfile::tempdir().unwrap();
        let before = super::super::now_unix();
        let first = Store::open(dir.path()).unwrap();
        let epoch = first.epoch();
        drop(first);
        let store = Store::open_when_free(dir.path(), std::time::Duration::from_secs(30)).unwrap();
        let starts = store.epoch_starts().unwrap();
        assert_eq!(
            starts.keys().copied().collect::<Vec<_>>(),
            [epoch, store.epoch()]
        );
        let after = super::super::now_unix();
        assert!(starts.values().all(|at| (before..=after).contains(at)));
        store.meta.insert(key(7), &[1, 2, 3][..]).unwrap();
        store
            .meta
            .insert(b"started:abc", &0u64.to_be_bytes())
            .unwrap();
        assert_eq!(store.epoch_starts().unwrap(), starts, "damage left out");
    }
}
