//! One run's results in the store against the ledger's ([`compare`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use nqueens_common::JobKey;

use super::LedgerView;
use crate::durable::store::{JobRecord, JobState, ResultRecord, RunMeta, Store};
use crate::error::Result;

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
    /// Results of the ledger that the store shows it took back later, the ledger's line that took
    /// them back lost (the store is written first, and sled writes on its own: a crash can keep the
    /// store's part of a round and lose the ledger's): a count the store noted it took back
    /// (`Store::was_taken_back`), a count a later result disputed (the store's
    /// open record of the job lists it beside a different candidate), or a count of a worker the
    /// store has quarantined where the store holds another worker's result (different or equal
    /// counts). The store's side stands.
    pub superseded: Vec<JobKey>,
}

impl Difference {
    /// Whether both sides agree.
    pub fn is_empty(&self) -> bool {
        self.store_only.is_empty()
            && self.ledger_only.is_empty()
            && self.conflicting.is_empty()
            && self.damaged.is_empty()
            && self.superseded.is_empty()
    }
}

/// Compares one run's results in the store with the ledger's.
pub fn compare(store: &Store, meta: &RunMeta, view: &LedgerView) -> Result<Difference> {
    // The store's quarantines, read once and only where a conflict asks.
    let mut names: Option<HashSet<String>> = None;
    compare_by(store, meta, view, &mut |worker| {
        if names.is_none() {
            let q = store.quarantined()?;
            names = Some(q.into_iter().map(|q| q.worker).collect());
        }
        Ok(names.as_ref().is_some_and(|n| n.contains(worker)))
    })
}

/// [`compare`], a worker judged quarantined in the store by `quarantined`.
pub fn compare_by(
    store: &Store,
    meta: &RunMeta,
    view: &LedgerView,
    quarantined: &mut dyn FnMut(&str) -> Result<bool>,
) -> Result<Difference> {
    let fingerprint = meta.fingerprint_value()?;
    let empty = BTreeMap::new();
    let logged = view.results.get(&meta.id).unwrap_or(&empty);
    let mut seen: HashMap<&JobKey, ()> = HashMap::with_capacity(logged.len());
    let mut diff = Difference::default();
    // Whether the store took the ledger's count back, by a revocation or a dispute (its job then
    // pending, open, or counted anew under another lease): `Store::was_taken_back`.
    let revoked = |key: &JobKey, l: &ResultRecord| store.was_taken_back(meta.id, key, l.lease);
    for item in store.results_raw(meta.id) {
        let (key, record) = item?;
        // Sealed, and with a unique count exactly where its run's strategy has one (a d4 result
        // without one would turn the run's check of unique counts off): else damaged.
        let intact = record.as_ref().is_ok_and(|r| {
            r.sealed(fingerprint, &key) && r.result.shape_error(meta.strategy).is_none()
        });
        let theirs = logged.get_key_value(&key);
        if let Some((k, _)) = theirs {
            seen.insert(k, ());
        }
        match (intact, theirs) {
            // (Damaged, a count the store took back is not restored in its place: the job is
            // computed anew.)
            (false, Some((_, l))) if revoked(&key, l)? => {
                diff.damaged.push(key.clone());
                diff.superseded.push(key);
            }
            (false, Some(_)) => {
                diff.damaged.push(key.clone());
                diff.ledger_only.push(key);
            }
            (false, None) => diff.damaged.push(key),
            (true, None) => diff.store_only.push(key),
            (true, Some((_, l))) => match record {
                // A different count, where the ledger's was its worker's, quarantined in the store
                // since, or a count the store took back (another's since, or its own worker's anew,
                // released: under another lease either way).
                Ok(r)
                    if r.result != l.result
                        && ((r.worker != l.worker && quarantined(&l.worker)?)
                            || (r.lease != l.lease && revoked(&key, l)?)) =>
                {
                    diff.superseded.push(key)
                }
                Ok(r) if r.result != l.result => diff.conflicting.push(key),
                // The same counts credited to another worker, the ledger's quarantined in the store
                // (or taken back by a revocation of it): the store's count replaced it after its
                // revocation (whose ledger lines, and the replacement's, were lost). The store's side
                // stands; restoring the ledger's would only have it taken back again.
                Ok(r) if r.worker != l.worker && (quarantined(&l.worker)? || revoked(&key, l)?) => {
                    diff.superseded.push(key)
                }
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
    for (key, l) in logged {
        if seen.contains_key(key) {
            continue;
        }
        // The store's open (or failed) record of the job is its state after the ledger's count: the
        // count was taken back if the record lists it beside a different result (a dispute), or if
        // its worker is quarantined in the store (the quarantine's revocation; a dispute's loser's
        // candidate is removed by it too). A damaged record is not evidence: the count is restored
        // (the record was mended first: removed, or open and marked `MENDED`).
        // And whatever the record, a count the store noted it took back (a revocation leaves no
        // record, nor does a failed dispute's retry): before, such a count was restored, nothing in the store showing that its job ever
        // held it; a count taken back for a record run's quarantined confirmer quarantined the worker
        // of the job's later first result, and a lie a held checker's undecided end took back was
        // counted again for good (found by a review, 2026-12-01).
        let later = revoked(key, l)?
            || match store.job(meta.id, key) {
                Ok(Some(job))
                    if job.state != JobState::Done
                        && job.reason.as_deref()
                            != Some(crate::durable::store::records::MENDED) =>
                {
                    disputed(&job, l) || quarantined(&l.worker)?
                }
                _ => false,
            };
        if later {
            diff.superseded.push(key.clone());
        } else {
            diff.ledger_only.push(key.clone());
        }
    }
    Ok(diff)
}

/// Whether the store's record `job` lists the ledger's counted result `l` as a candidate beside a
/// different one: a later result disputed it. (A record listing it alone is a verified job whose
/// confirmation the store lost: restored.) The candidate is `l` by its lease and result, under its
/// worker or one of its confirmers: in a record run's dispute a quarantined worker's side stays
/// behind its first confirmer (`ResultRecord::handed_to_confirmer`).
fn disputed(job: &JobRecord, l: &ResultRecord) -> bool {
    let listed = |c: &&ResultRecord| {
        (c.lease, &c.result) == (l.lease, &l.result) && l.identities().any(|n| n == c.worker)
    };
    job.candidates.iter().any(|c| listed(&c)) && job.candidates.iter().any(|c| c.result != l.result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::store::JobState;

    fn result(worker: &str, lease: u64, total: u64, confirmed_by: &[&str]) -> ResultRecord {
        ResultRecord {
            result: nqueens_common::JobResult {
                total,
                unique8: Some(1),
                nodes: 9,
            },
            worker: worker.into(),
            worker_id: String::new(),
            lease,
            at_unix: 1,
            confirmed_by: confirmed_by.iter().map(|c| c.to_string()).collect(),
            seal: None,
            families: Vec::new(),
        }
    }

    /// A count disputed in the store is listed by its lease and result, under its worker or, handed
    /// on, its confirmer; not under another identity, nor another lease, nor alone.
    #[test]
    fn a_disputed_count_is_found_under_its_worker_or_its_confirmer() {
        let counted = result("b", 7, 8, &["a"]);
        let job = |side: ResultRecord| JobRecord {
            state: JobState::Disputed,
            candidates: vec![side, result("h", 9, 16, &[])],
            reason: None,
        };
        assert!(disputed(&job(result("b", 7, 8, &["a"])), &counted));
        assert!(
            disputed(&job(result("a", 7, 8, &[])), &counted),
            "handed on"
        );
        assert!(
            !disputed(&job(result("x", 7, 8, &[])), &counted),
            "another identity"
        );
        assert!(
            !disputed(&job(result("a", 6, 8, &[])), &counted),
            "another lease"
        );
        let alone = JobRecord {
            candidates: vec![result("b", 7, 8, &["a"])],
            ..job(result("b", 7, 8, &[]))
        };
        assert!(!disputed(&alone, &counted), "alone");
    }
}
