//! Counted results grouped by job prefix (store format 5): the jobs of one run whose keys differ only in
//! their last number share one sled entry in the `result_groups` tree, keyed by the run id and the
//! shared prefix; the entry lists each job's last number with its compact result, in order. sled 0.34
//! spends about 130 bytes on every entry before its data, more than a compact result itself, so one
//! entry per done job could not come near 200 bytes a job (BENCHMARKS.md).
//!
//! A group is read, changed and written back inside the transaction that changes one of its results,
//! so a result is still committed with its totals in one transaction. An entry that does not decode
//! is damage to every result in it: readers get it as one damaged item named by its prefix, which the
//! reconciliation removes as a whole and restores from the ledger.

use nqueens_common::JobKey;
use serde::{Deserialize, Serialize};
use sled::transaction::TransactionalTree;

use super::records::{split_job_key, Compact, ResultRecord};
use super::txn::{abort, TxResult};
use crate::error::{Error, Result};

/// The tag byte of a group entry (postcard of its members follows). A single result of format 4 starts
/// with 1 and a JSON one with `{`: neither is taken for a group.
const GROUP_V1: u8 = 2;

/// Most members a group can have: one per value of a job key's last number.
const MAX_MEMBERS: usize = 256;

/// One job of a group: the last number of its key (none for a run whose only job has an empty key) and
/// its result.
#[derive(Serialize, Deserialize)]
struct Member {
    last: Option<u8>,
    result: Compact,
}

/// The entry key of the group holding job `key` of `run`, and the job's place in it.
pub fn group_of(run: u64, key: &JobKey) -> (Vec<u8>, Option<u8>) {
    let (prefix, last) = match key.0.split_last() {
        Some((last, prefix)) => (prefix, Some(*last)),
        None => (&key.0[..], None),
    };
    let mut k = Vec::with_capacity(8 + prefix.len());
    k.extend_from_slice(&run.to_be_bytes());
    k.extend_from_slice(prefix);
    (k, last)
}

/// The key of member `last` of the group at entry key `group`.
fn member_key(prefix: &JobKey, last: Option<u8>) -> JobKey {
    let mut key = prefix.0.clone();
    key.extend(last);
    JobKey(key)
}

/// A group's members, in order of their last number.
pub type Members = Vec<(Option<u8>, ResultRecord)>;

/// Encodes a group (members in order, at least one).
pub fn encode_group(members: &Members) -> Vec<u8> {
    let members: Vec<Member> = members
        .iter()
        .map(|(last, record)| Member {
            last: *last,
            result: Compact::of(record),
        })
        .collect();
    let mut bytes = vec![GROUP_V1];
    bytes.extend(postcard::to_allocvec(&members).expect("groups serialize to postcard"));
    bytes
}

/// Decodes a group entry. An unknown tag, a truncated entry, trailing bytes, an empty group, members out
/// of order or repeated, or an empty key beside others are damage.
pub fn decode_group(bytes: &[u8]) -> Result<Members> {
    let damaged = |why: String| Error::Corrupt(format!("undecodable result group: {why}"));
    match bytes.first() {
        Some(&GROUP_V1) => {}
        Some(tag) => return Err(damaged(format!("unknown tag {tag}"))),
        None => return Err(damaged("empty entry".into())),
    }
    let (members, rest) = postcard::take_from_bytes::<Vec<Member>>(&bytes[1..])
        .map_err(|e| damaged(e.to_string()))?;
    if !rest.is_empty() {
        return Err(damaged(format!("{} bytes after the group", rest.len())));
    }
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(damaged(format!("{} members", members.len())));
    }
    let ordered = members
        .windows(2)
        .all(|w| matches!((w[0].last, w[1].last), (Some(a), Some(b)) if a < b));
    if !ordered {
        return Err(damaged("members out of order or repeated".into()));
    }
    Ok(members
        .into_iter()
        .map(|m| (m.last, m.result.into_record()))
        .collect())
}

/// Every result of the group entry `(k, v)`, in key order, or the damage that keeps them unread (named
/// by the group's prefix).
pub fn members_of(k: &[u8], v: &[u8]) -> Result<Vec<(JobKey, Result<ResultRecord>)>> {
    let (_, prefix) = split_job_key(k)?;
    Ok(match decode_group(v) {
        Ok(members) => members
            .into_iter()
            .map(|(last, record)| (member_key(&prefix, last), Ok(record)))
            .collect(),
        Err(e) => vec![(prefix, Err(e))],
    })
}

/// Job `key`'s result in group tree `groups` (outside a transaction).
pub fn get(groups: &sled::Tree, run: u64, key: &JobKey) -> Result<Option<ResultRecord>> {
    let (k, last) = group_of(run, key);
    let Some(raw) = groups.get(&k)? else {
        return Ok(None);
    };
    Ok(find(decode_group(&raw)?, last))
}

fn find(members: Members, last: Option<u8>) -> Option<ResultRecord> {
    members
        .into_iter()
        .find(|(l, _)| *l == last)
        .map(|(_, record)| record)
}

/// Job `key`'s result, inside a transaction (a damaged group aborts it).
pub fn txn_get(
    groups: &TransactionalTree,
    run: u64,
    key: &JobKey,
) -> TxResult<Option<ResultRecord>> {
    let (k, last) = group_of(run, key);
    match groups.get(&k)? {
        None => Ok(None),
        Some(raw) => Ok(find(decode_group(&raw).or_else(abort)?, last)),
    }
}

/// Stores job `key`'s result (replacing the one it had), inside a transaction.
pub fn txn_put(
    groups: &TransactionalTree,
    run: u64,
    key: &JobKey,
    record: &ResultRecord,
) -> TxResult<()> {
    let (k, last) = group_of(run, key);
    let mut members = match groups.get(&k)? {
        Some(raw) => decode_group(&raw).or_else(abort)?,
        None => Vec::new(),
    };
    match members.binary_search_by_key(&last, |(l, _)| *l) {
        Ok(i) => members[i].1 = record.clone(),
        Err(i) => members.insert(i, (last, record.clone())),
    }
    groups.insert(k, encode_group(&members))?;
    Ok(())
}

/// Takes job `key`'s result out (the entry goes with its last member), inside a transaction; returns it.
pub fn txn_remove(
    groups: &TransactionalTree,
    run: u64,
    key: &JobKey,
) -> TxResult<Option<ResultRecord>> {
    let (k, last) = group_of(run, key);
    let Some(raw) = groups.get(&k)? else {
        return Ok(None);
    };
    let mut members = decode_group(&raw).or_else(abort)?;
    let Ok(i) = members.binary_search_by_key(&last, |(l, _)| *l) else {
        return Ok(None);
    };
    let (_, record) = members.remove(i);
    if members.is_empty() {
        groups.remove(k)?;
    } else {
        groups.insert(k, encode_group(&members))?;
    }
    Ok(Some(record))
}
