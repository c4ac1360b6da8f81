//! Worker names by number (store format 5): a stored result names its worker (name and process id,
//! about 40 bytes) by a small number, defined once in the `workers` tree.
//!
//! - `#` ++ number (u32, big-endian) -> the worker's name and process id (postcard);
//! - `@` ++ the same postcard bytes -> its number (so that a worker seen again gets its number back);
//! - `next` -> the next number to give.
//!
//! Numbers are given inside the transaction that stores the worker's first result, so a number is
//! defined exactly when a result uses it, and never given twice: a number whose definition exists
//! (even damaged) is refused, and every open checks `next` against the highest definition
//! ([`repair_next`]). A definition counts only when it decodes *and* its reverse entry gives its number
//! back, so a changed byte in a name is damage, never another worker: damage to the results that use it
//! (readers report them, the reconciliation restores them from the ledger), and the worker's next
//! result gets a new number.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sled::transaction::TransactionalTree;

use super::txn::{abort, TxResult};
use crate::error::{Error, Result};

const NEXT: &[u8] = b"next";

/// Most defined numbers a new worker's number steps past when `next` went back.
const MAX_PROBES: u32 = 4096;

/// A worker as results name it: its name and its process id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worker {
    pub name: String,
    pub id: String,
}

fn number_key(n: u32) -> [u8; 5] {
    let mut k = [b'#'; 5];
    k[1..].copy_from_slice(&n.to_be_bytes());
    k
}

fn encode(worker: &Worker) -> Vec<u8> {
    postcard::to_allocvec(worker).expect("workers serialize to postcard")
}

fn decode(n: u32, bytes: &[u8]) -> std::result::Result<Worker, String> {
    match postcard::take_from_bytes::<Worker>(bytes) {
        Ok((w, [])) => Ok(w),
        Ok(_) => Err(format!("worker number {n}: bytes after its definition")),
        Err(e) => Err(format!("worker number {n}: undecodable definition: {e}")),
    }
}

/// The number of `worker`, given now if it has none (or only a damaged one), inside a transaction.
pub fn number(workers: &TransactionalTree, worker: &Worker) -> TxResult<u32> {
    let defined = encode(worker);
    let reverse = reverse_key(&defined);
    if let Some(raw) = workers.get(&reverse)? {
        if let Ok(n) = <[u8; 4]>::try_from(raw.as_ref()).map(u32::from_be_bytes) {
            let intact = workers
                .get(number_key(n))?
                .is_some_and(|d| d.as_ref() == defined.as_slice());
            if intact {
                return Ok(n);
            }
        }
    }
    let mut n = match workers.get(NEXT)? {
        None => 0,
        Some(raw) => match <[u8; 4]>::try_from(raw.as_ref()) {
            Ok(b) => u32::from_be_bytes(b),
            Err(_) => {
                return abort(Error::Corrupt(
                    "the next worker number is damaged (the next start repairs it)".into(),
                ))
            }
        },
    };
    // `next` may have gone back (damage since the open that checked it): never give a number twice,
    // step past the numbers defined or in use (a few, numbers being dense).
    let mut probes = 0;
    while workers.get(number_key(n))?.is_some() {
        probes += 1;
        n = match n.checked_add(1) {
            Some(up) if probes <= MAX_PROBES => up,
            _ => {
                return abort(Error::Corrupt(format!(
                    "worker number {n} is defined already: the workers tree is damaged (the next start repairs its count)"
                )))
            }
        };
    }
    let Some(next) = n.checked_add(1) else {
        return abort(Error::Corrupt("worker numbers exhausted".into()));
    };
    workers.insert(NEXT, &next.to_be_bytes())?;
    workers.insert(&number_key(n)[..], defined)?;
    workers.insert(reverse, &n.to_be_bytes())?;
    Ok(n)
}

/// The reverse entry's key of a definition's bytes.
fn reverse_key(defined: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + defined.len());
    k.push(b'@');
    k.extend_from_slice(defined);
    k
}

/// Whether a reverse entry gives number `n`.
fn gives(reverse: Option<&[u8]>, n: u32) -> bool {
    reverse.is_some_and(|r| r == n.to_be_bytes())
}

fn undefined(n: u32) -> String {
    format!("worker number {n} is not defined (or its definition is damaged)")
}

/// The worker of number `n`, inside a transaction (undefined or damaged: the transaction aborts).
pub fn txn_worker(workers: &TransactionalTree, n: u32) -> TxResult<Worker> {
    let Some(raw) = workers.get(number_key(n))? else {
        return abort(Error::Corrupt(undefined(n)));
    };
    let worker = decode(n, &raw).map_err(Error::Corrupt).or_else(abort)?;
    if !gives(workers.get(reverse_key(&raw))?.as_deref(), n) {
        return abort(Error::Corrupt(undefined(n)));
    }
    Ok(worker)
}

/// Makes `next` greater than every defined number (it may have been lost or damaged). Run at every
/// open, before any result is written.
pub fn repair_next(workers: &sled::Tree) -> Result<()> {
    // The highest number a definition has, or a reverse entry gives (a definition may be lost while
    // results still name its number: it is never given again).
    let defined = workers
        .scan_prefix(b"#")
        .keys()
        .filter_map(|k| k.ok())
        .filter_map(|k| <[u8; 4]>::try_from(&k[1..]).ok().map(u32::from_be_bytes))
        .max();
    // A reverse entry far past every definition is damage itself (numbers are given in order), not a
    // number to keep clear of.
    let bound = defined
        .map_or(0, |d| d.saturating_add(1))
        .saturating_add(MAX_PROBES);
    let given = workers
        .scan_prefix(b"@")
        .values()
        .filter_map(|v| v.ok())
        .filter_map(|v| <[u8; 4]>::try_from(v.as_ref()).ok().map(u32::from_be_bytes))
        .filter(|&n| n < bound)
        .max();
    let highest = defined.max(given);
    let want = highest.map_or(0, |h| h.saturating_add(1));
    let have = workers.get(NEXT)?.and_then(|raw| {
        <[u8; 4]>::try_from(raw.as_ref())
            .ok()
            .map(u32::from_be_bytes)
    });
    if have.is_some_and(|h| h >= want) || (have.is_none() && want == 0) {
        return Ok(());
    }
    tracing::error!(have = ?have, set = want, place = "store", "the next worker number was missing, damaged or behind a defined one: set past the highest");
    workers.insert(NEXT, &want.to_be_bytes())?;
    Ok(())
}

/// Workers by number, read from the tree once each (a scan over millions of results names a few
/// hundred workers).
pub struct Names {
    tree: sled::Tree,
    known: HashMap<u32, std::result::Result<Worker, String>>,
}

impl Names {
    /// Names from the `workers` tree.
    pub fn new(tree: &sled::Tree) -> Names {
        Names {
            tree: tree.clone(),
            known: HashMap::new(),
        }
    }

    /// The worker of number `n` (undefined or damaged: an error).
    pub fn get(&mut self, n: u32) -> Result<Worker> {
        if let Some(known) = self.known.get(&n) {
            return known.clone().map_err(Error::Corrupt);
        }
        let found = match self.tree.get(number_key(n))? {
            Some(raw) => match decode(n, &raw) {
                Ok(w) if gives(self.tree.get(reverse_key(&raw))?.as_deref(), n) => Ok(w),
                Ok(_) => Err(undefined(n)),
                Err(e) => Err(e),
            },
            None => Err(undefined(n)),
        };
        self.known.insert(n, found.clone());
        found.map_err(Error::Corrupt)
    }
}
