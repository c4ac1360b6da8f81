//! One run's results in the store against the ledger's ([`compare`]).

use std::collections::{BTreeMap, HashMap};

use nqueens_common::JobKey;

use super::LedgerView;
use crate::error::Result;
use crate::store::{RunMeta, Store};

/// Per run, the results only one side holds (used by `audit` and startup reconciliation).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Results the store holds and the ledger lacks.
    pub store_only: Vec<JobKey>,
    /// Results the ledger holds and the store lacks (or holds damaged).
    pub ledger_only: Vec<JobKey>,
    /// Results both hold, with different counts.
    pub conflicting: Vec<JobKey>,
    /// Results in the store that fail their seal, cannot be read (a group is named by its prefix), or
    /// credit the ledger's counts to another worker.
    pub damaged: Vec<JobKey>,
}

impl Difference {
    /// Whether both sides agree.
    pub fn is_empty(&self) -> bool {
        self.store_only.is_empty()
            && self.ledger_only.is_empty()
            && self.conflicting.is_empty()
            && self.damaged.is_empty()
    }
}

/// Compares one run's results in the store with the ledger's.
pub fn compare(store: &Store, meta: &RunMeta, view: &LedgerView) -> Result<Difference> {
    let fingerprint = meta.fingerprint_value()?;
    let empty = BTreeMap::new();
    let logged = view.results.get(&meta.id).unwrap_or(&empty);
    let mut seen: HashMap<&JobKey, ()> = HashMap::with_capacity(logged.len());
    let mut diff = Difference::default();
    for item in store.results_raw(meta.id) {
        let (key, record) = item?;
        let intact = record.as_ref().is_ok_and(|r| r.sealed(fingerprint, &key));
        let theirs = logged.get_key_value(&key);
        if let Some((k, _)) = theirs {
            seen.insert(k, ());
        }
        match (intact, theirs) {
            (false, Some(_)) => {
                diff.damaged.push(key.clone());
                diff.ledger_only.push(key);
            }
            (false, None) => diff.damaged.push(key),
            (true, None) => diff.store_only.push(key),
            (true, Some((_, l))) => match record {
                Ok(r) if r.result != l.result => diff.conflicting.push(key),
                // The same counts credited to another worker: the ledger's lines are checked, so the
                // store's copy is the damaged one (quarantines go by worker).
                Ok(r) if (&r.worker, &r.worker_id) != (&l.worker, &l.worker_id) => {
                    diff.damaged.push(key.clone());
                    diff.ledger_only.push(key);
                }
                _ => {}
            },
        }
    }
    for key in logged.keys() {
        if !seen.contains_key(key) {
            diff.ledger_only.push(key.clone());
        }
    }
    Ok(diff)
}
