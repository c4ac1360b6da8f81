//! Counted results grouped by job prefix (store format 5): the jobs of one run whose keys differ only in
//! their last number share one sled entry in the `result_groups` tree, keyed by the run id and the
//! shared prefix; the entry lists each job's last number with its compact result, in order. sled 0.34
//! spends about 130 bytes on every entry before its data, more than a compact result itself, so one
//! entry per done job could not come near 200 bytes a job (BENCHMARKS.md).
//!
//! An entry is a tag byte, a 32-bit check of the rest (the low half of its CRC-64) and the members in
//! postcard: the seals cover a result's counts, the check the rest (its worker's number above all: a
//! changed bit there would credit the result to another worker, which quarantines depend on). A
//! member names its worker by number ([`super::workers`]). A group is read, changed and written back
//! inside the transaction that changes one of its results, so a result is still committed with its
//! totals in one transaction. An entry that does not decode
//! is damage to every result in it: readers get it as one damaged item named by its prefix, which the
//! reconciliation removes as a whole and restores from the ledger.

use nqueens_common::{Family, JobKey, JobResult};
use serde::{Deserialize, Serialize};
use sled::transaction::TransactionalTree;

use super::records::{job_key, split_job_key, ResultRecord};
use super::txn::{abort, TxResult};
use super::workers::{self, Names, Worker};
use crate::error::{Error, Result};

/// The tag byte of a group entry of the build before 2026-11-28 (its members hold no kernel
/// families: [`StoredV1`]); still read. A single result of format 4 starts with 1 and a JSON one with
/// `{`: neither is taken for a group.
const GROUP_V1: u8 = 2;
/// The tag byte of a group entry this build writes (its check and the postcard of its members follow).
const GROUP_V2: u8 = 3;

/// The check of a group's payload.
fn check(payload: &[u8]) -> [u8; 4] {
    (nqueens_common::checksum::checksum(payload) as u32).to_le_bytes()
}

/// Most members a group can have: one per value of a job key's last number.
const MAX_MEMBERS: usize = 256;

/// A result as a group stores it: its worker by number, its seal as 8 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    total: u64,
    unique8: Option<u64>,
    nodes: u64,
    worker: u32,
    lease: u64,
    at_unix: u64,
    confirmed_by: Vec<String>,
    seal: Option<[u8; 8]>,
    families: Vec<Option<Family>>,
}

/// A member of a group of [`GROUP_V1`]: a [`Stored`] without kernel families.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredV1 {
    total: u64,
    unique8: Option<u64>,
    nodes: u64,
    worker: u32,
    lease: u64,
    at_unix: u64,
    confirmed_by: Vec<String>,
    seal: Option<[u8; 8]>,
}

impl From<StoredV1> for Stored {
    fn from(s: StoredV1) -> Stored {
        Stored {
            total: s.total,
            unique8: s.unique8,
            nodes: s.nodes,
            worker: s.worker,
            lease: s.lease,
            at_unix: s.at_unix,
            confirmed_by: s.confirmed_by,
            seal: s.seal,
            families: Vec::new(),
        }
    }
}

impl Stored {
    fn of(record: &ResultRecord, worker: u32) -> Stored {
        Stored {
            total: record.result.total,
            unique8: record.result.unique8,
            nodes: record.result.nodes,
            worker,
            lease: record.lease,
            at_unix: record.at_unix,
            confirmed_by: record.confirmed_by.clone(),
            seal: record.seal.map(u64::to_le_bytes),
            families: record.families.clone(),
        }
    }

    /// Its counts.
    fn counts(&self) -> JobResult {
        JobResult {
            total: self.total,
            unique8: self.unique8,
            nodes: self.nodes,
        }
    }

    /// The record, with its worker's name and process id.
    fn record(self, worker: Worker) -> ResultRecord {
        ResultRecord {
            result: self.counts(),
            worker: worker.name,
            worker_id: worker.id,
            lease: self.lease,
            at_unix: self.at_unix,
            confirmed_by: self.confirmed_by,
            seal: self.seal.map(u64::from_le_bytes),
            families: self.families,
        }
    }
}

/// The entry key of the group holding job `key` of `run` (its job key without the last number), and
/// the job's place in it: that last number (none for a run whose only job has an empty key).
pub fn group_of(run: u64, key: &JobKey) -> (Vec<u8>, Option<u8>) {
    let mut k = job_key(run, key);
    let last = key.0.last().copied();
    if last.is_some() {
        k.pop();
    }
    (k, last)
}

/// The key of member `last` of the group whose prefix is `prefix`.
fn member_key(prefix: &JobKey, last: Option<u8>) -> JobKey {
    let mut key = prefix.0.clone();
    key.extend(last);
    JobKey(key)
}

/// A group's members (each a job's last number and its result), in order of their last number.
pub type Members = Vec<(Option<u8>, Stored)>;

/// Encodes a group (members in order, at least one).
pub fn encode_group(members: &Members) -> Vec<u8> {
    let payload = postcard::to_allocvec(members).expect("groups serialize to postcard");
    let mut bytes = Vec::with_capacity(payload.len() + 5);
    bytes.push(GROUP_V2);
    bytes.extend_from_slice(&check(&payload));
    bytes.extend_from_slice(&payload);
    bytes
}

/// Decodes the group entry at entry key `k`. An unknown tag, a failed check, a truncated entry, trailing
/// bytes, an empty group, members out of order or repeated, or a member without a last number beside
/// others or under a prefix (only the one job of a run whose key is empty has none) are damage.
pub fn decode_group(k: &[u8], bytes: &[u8]) -> Result<Members> {
    let damaged = |why: String| Error::Corrupt(format!("undecodable result group: {why}"));
    let (tag, payload) = match bytes.split_first() {
        Some((&tag, rest)) if tag == GROUP_V1 || tag == GROUP_V2 => {
            match rest.split_first_chunk::<4>() {
                Some((sum, payload)) if *sum == check(payload) => (tag, payload),
                Some(_) => return Err(damaged("it fails its check".into())),
                None => return Err(damaged("shorter than its check".into())),
            }
        }
        Some((tag, _)) => return Err(damaged(format!("unknown tag {tag}"))),
        None => return Err(damaged("empty entry".into())),
    };
    let (members, rest) = if tag == GROUP_V1 {
        postcard::take_from_bytes::<Vec<(Option<u8>, StoredV1)>>(payload).map(|(m, rest)| {
            let m: Members = m.into_iter().map(|(l, s)| (l, s.into())).collect();
            (m, rest)
        })
    } else {
        postcard::take_from_bytes::<Members>(payload)
    }
    .map_err(|e| damaged(e.to_string()))?;
    if !rest.is_empty() {
        return Err(damaged(format!("{} bytes after the group", rest.len())));
    }
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(damaged(format!("{} members", members.len())));
    }
    let ordered = members
        .windows(2)
        .all(|w| matches!((w[0].0, w[1].0), (Some(a), Some(b)) if a < b));
    if !ordered {
        return Err(damaged("members out of order or repeated".into()));
    }
    if k.len() > 8 && members[0].0.is_none() {
        return Err(damaged(
            "a member without a last number under a prefix".into(),
        ));
    }
    Ok(members)
}

/// Every result of the group entry `(k, v)`, in key order, its worker named through `names`; or the
/// damage that keeps them unread: the group's, named by its prefix, or one member's (a worker number
/// that is not defined).
pub fn members_of(
    k: &[u8],
    v: &[u8],
    names: &mut Names,
) -> Result<Vec<(JobKey, Result<ResultRecord>)>> {
    let (_, prefix) = split_job_key(k)?;
    Ok(match decode_group(k, v) {
        Ok(members) => members
            .into_iter()
            .map(|(last, stored)| {
                let record = names.get(stored.worker).map(|w| stored.record(w));
                (member_key(&prefix, last), record)
            })
            .collect(),
        Err(e) => vec![(prefix, Err(e))],
    })
}

/// Member `last` of the group entry `raw` read at entry key `k`, if there is one.
fn member(k: &[u8], raw: Option<sled::IVec>, last: Option<u8>) -> Result<Option<Stored>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    Ok(decode_group(k, &raw)?
        .into_iter()
        .find(|(l, _)| *l == last)
        .map(|(_, stored)| stored))
}

/// Whether job `key` has a result in group tree `groups` (outside a transaction).
pub fn contains(groups: &sled::Tree, run: u64, key: &JobKey) -> Result<bool> {
    let (k, last) = group_of(run, key);
    Ok(member(&k, groups.get(&k)?, last)?.is_some())
}

/// Job `key`'s result (outside a transaction).
pub fn get(
    groups: &sled::Tree,
    workers: &sled::Tree,
    run: u64,
    key: &JobKey,
) -> Result<Option<ResultRecord>> {
    let (k, last) = group_of(run, key);
    let Some(stored) = member(&k, groups.get(&k)?, last)? else {
        return Ok(None);
    };
    let worker = Names::new(workers).get(stored.worker)?;
    Ok(Some(stored.record(worker)))
}

/// The trees of the results, inside a transaction.
#[derive(Clone, Copy)]
pub struct Tx<'a> {
    pub groups: &'a TransactionalTree,
    pub workers: &'a TransactionalTree,
}

/// Job `key`'s counts, inside a transaction (a damaged group aborts it; its worker is not looked up).
pub fn txn_counts(
    groups: &TransactionalTree,
    run: u64,
    key: &JobKey,
) -> TxResult<Option<JobResult>> {
    let (k, last) = group_of(run, key);
    let stored = member(&k, groups.get(&k)?, last).or_else(abort)?;
    Ok(stored.map(|s| s.counts()))
}

/// Job `key`'s result, inside a transaction (a damaged group or worker aborts it).
pub fn txn_get(tx: Tx, run: u64, key: &JobKey) -> TxResult<Option<ResultRecord>> {
    let (k, last) = group_of(run, key);
    let Some(stored) = member(&k, tx.groups.get(&k)?, last).or_else(abort)? else {
        return Ok(None);
    };
    let worker = workers::txn_worker(tx.workers, stored.worker)?;
    Ok(Some(stored.record(worker)))
}

/// Stores job `key`'s result (replacing the one it had), inside a transaction; its worker gets a
/// number if it has none.
pub fn txn_put(tx: Tx, run: u64, key: &JobKey, record: &ResultRecord) -> TxResult<()> {
    let worker = Worker {
        name: record.worker.clone(),
        id: record.worker_id.clone(),
    };
    let stored = Stored::of(record, workers::number(tx.workers, &worker)?);
    let (k, last) = group_of(run, key);
    let mut members = match tx.groups.get(&k)? {
        Some(raw) => decode_group(&k, &raw).or_else(abort)?,
        None => Vec::new(),
    };
    if members
        .first()
        .is_some_and(|(l, _)| l.is_none() != last.is_none())
    {
        // Only a run whose only job has an empty key has a member without a last number.
        return abort(Error::Corrupt(format!(
            "run {run} job {key}: keys of different lengths in one group"
        )));
    }
    match members.binary_search_by_key(&last, |(l, _)| *l) {
        Ok(i) => members[i].1 = stored,
        Err(i) => members.insert(i, (last, stored)),
    }
    tx.groups.insert(k, encode_group(&members))?;
    Ok(())
}

/// Takes job `key`'s result out (the entry goes with its last member), inside a transaction; returns
/// it as stored (its worker by number).
pub fn txn_remove(groups: &TransactionalTree, run: u64, key: &JobKey) -> TxResult<Option<Stored>> {
    let (k, last) = group_of(run, key);
    let Some(raw) = groups.get(&k)? else {
        return Ok(None);
    };
    let mut members = decode_group(&k, &raw).or_else(abort)?;
    let Ok(i) = members.binary_search_by_key(&last, |(l, _)| *l) else {
        return Ok(None);
    };
    let (_, stored) = members.remove(i);
    if members.is_empty() {
        groups.remove(k)?;
    } else {
        groups.insert(k, encode_group(&members))?;
    }
    Ok(Some(stored))
}

/// [`txn_remove`], the result returned with its worker's name (an undefined worker aborts).
pub fn txn_take(tx: Tx, run: u64, key: &JobKey) -> TxResult<Option<ResultRecord>> {
    match txn_remove(tx.groups, run, key)? {
        None => Ok(None),
        Some(stored) => {
            let worker = workers::txn_worker(tx.workers, stored.worker)?;
            Ok(Some(stored.record(worker)))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn stored() -> impl Strategy<Value = Stored> {
        (
            any::<u64>(),
            any::<Option<u64>>(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec("[a-z]{0,8}", 0..3),
            any::<Option<[u8; 8]>>(),
            proptest::collection::vec(proptest::option::of(0usize..3), 0..4),
        )
            .prop_map(
                |(total, unique8, nodes, worker, lease, at_unix, confirmed_by, seal, families)| {
                    Stored {
                        total,
                        unique8,
                        nodes,
                        worker,
                        lease,
                        at_unix,
                        confirmed_by,
                        seal,
                        families: families
                            .into_iter()
                            .map(|f| f.map(|i| Family::ALL[i]))
                            .collect(),
                    }
                },
            )
    }

    fn members() -> impl Strategy<Value = Members> {
        proptest::collection::btree_map(any::<u8>(), stored(), 1..24)
            .prop_map(|m| m.into_iter().map(|(l, s)| (Some(l), s)).collect())
    }

    proptest! {
        #[test]
        fn groups_round_trip_and_any_changed_byte_is_refused(
            members in members(),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let bytes = encode_group(&members);
            let k = [0, 0, 0, 0, 0, 0, 0, 1, 7];
            prop_assert_eq!(decode_group(&k, &bytes).unwrap(), members);
            let mut changed = bytes.clone();
            let i = at.index(changed.len());
            changed[i] ^= flip;
            prop_assert!(decode_group(&k, &changed).is_err());
            prop_assert!(decode_group(&k, &bytes[..i]).is_err());
        }

        #[test]
        fn any_bytes_decode_or_are_refused_without_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let _ = decode_group(&[0; 8], &bytes);
            // The same bytes behind a valid tag and check reach the decoder of the members.
            for tag in [GROUP_V1, GROUP_V2] {
                let mut framed = vec![tag];
                framed.extend_from_slice(&check(&bytes));
                framed.extend_from_slice(&bytes);
                let _ = decode_group(&[0, 0, 0, 0, 0, 0, 0, 1, 1], &framed);
            }
        }
    }

    /// A group of the build before kernel families (tag [`GROUP_V1`], members without them) reads as
    /// members naming none; this build writes [`GROUP_V2`] and reads its own families back.
    #[test]
    fn a_group_of_the_build_before_families_is_read() {
        let old = StoredV1 {
            total: 92,
            unique8: Some(96),
            nodes: 2000,
            worker: 3,
            lease: 7,
            at_unix: 1_700_000_000,
            confirmed_by: vec!["b".into()],
            seal: Some([1, 2, 3, 4, 5, 6, 7, 8]),
        };
        let payload = postcard::to_allocvec(&vec![(Some(4u8), old.clone())]).unwrap();
        let mut bytes = vec![GROUP_V1];
        bytes.extend_from_slice(&check(&payload));
        bytes.extend_from_slice(&payload);
        let k = [0, 0, 0, 0, 0, 0, 0, 1, 7];
        let read = decode_group(&k, &bytes).unwrap();
        assert_eq!(read, vec![(Some(4), Stored::from(old.clone()))]);
        assert!(read[0].1.families.is_empty());
        let mut new = Stored::from(old);
        new.families = vec![Some(Family::Gpu), None, Some(Family::CpuLists)];
        let members = vec![(Some(4), new)];
        let bytes = encode_group(&members);
        assert_eq!(bytes[0], GROUP_V2);
        assert_eq!(decode_group(&k, &bytes).unwrap(), members);
    }
}
