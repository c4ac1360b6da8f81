//! The rule that lifts a quarantine whose deciders are all disproved, and puts back one whose lift lost
//! its basis. Quarantines the rule lifted stay on record in the `lifted` tree, so that each time the
//! rule runs it decides anew from every record, quarantined or lifted: a worker cleared because its
//! deciders were shown wrong is quarantined again once those deciders are cleared in turn.
//!
//! The rule, over a set of records: every worker with a record starts shown wrong. A pass clears the
//! largest set of them whose every member names deciders, all shown wrong and none cleared in the
//! same pass (two that decided each other both stay; one that contradicted itself names none and
//! stays). Passes repeat over what is left until one clears nobody (a chain of deciders).

use std::collections::{BTreeMap, HashSet};

use sled::transaction::Transactional;

use super::records::{decode, encode, Quarantine};
use super::Store;
use crate::error::Result;

/// The tree of the quarantines the rule lifted, by worker name (checked JSON records).
pub(super) const LIFTED: &str = "lifted";

/// What one run of the rule changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lifts {
    /// Quarantines lifted: every decider is disproved.
    pub lifted: Vec<Quarantine>,
    /// Lifted quarantines put back: a decider of theirs is cleared now.
    pub restored: Vec<Quarantine>,
}

/// The workers among `records` that the rule clears.
pub fn cleared(records: &[Quarantine]) -> HashSet<&str> {
    let mut wrong: HashSet<&str> = records.iter().map(|q| q.worker.as_str()).collect();
    let mut cleared = HashSet::new();
    loop {
        let mut lift: HashSet<&str> = records
            .iter()
            .filter(|q| wrong.contains(q.worker.as_str()))
            .filter(|q| !q.by.is_empty() && q.by.iter().all(|b| wrong.contains(b.as_str())))
            .map(|q| q.worker.as_str())
            .collect();
        loop {
            let keep: HashSet<&str> = records
                .iter()
                .filter(|q| lift.contains(q.worker.as_str()))
                .filter(|q| q.by.iter().all(|b| !lift.contains(b.as_str())))
                .map(|q| q.worker.as_str())
                .collect();
            if keep.len() == lift.len() {
                break;
            }
            lift = keep;
        }
        if lift.is_empty() {
            return cleared;
        }
        for name in lift {
            wrong.remove(name);
            cleared.insert(name);
        }
    }
}

impl Store {
    /// The quarantines the rule lifted, by name. A record that fails its check (damaged on disk) reads
    /// as a quarantine of its worker naming no decider, logged: the rule then puts it back, for good
    /// (the safe side), and the start is never refused over it.
    pub fn lifted(&self) -> Result<Vec<Quarantine>> {
        let mut out = Vec::new();
        for kv in self.lifted.iter() {
            let (k, v) = kv?;
            let worker = String::from_utf8_lossy(&k).into_owned();
            out.push(match decode::<Quarantine>("quarantine", &v) {
                Ok(q) if q.worker == worker => q,
                Ok(_) | Err(_) => {
                    tracing::error!(worker = %worker, place = "store", "a lifted quarantine record fails its check (damaged on disk): the worker is quarantined again, naming no decider");
                    Quarantine {
                        worker,
                        reason: "its lifted quarantine record was damaged on disk".into(),
                        at_unix: super::now_unix(),
                        by: Vec::new(),
                        held: false,
                        contradicted: Vec::new(),
                    }
                }
            });
        }
        Ok(out)
    }

    /// Runs the rule over every quarantine, stored and lifted: lifts those it clears (they lease
    /// again; their results taken back are computed again, not restored: nothing vouches for them)
    /// and puts back the lifted ones it no longer clears (the caller takes back their unconfirmed
    /// results, as for any quarantine). A worker with both records (quarantined again after a lift)
    /// is decided on their join ([`Quarantine::merged`]). Every move is made in one transaction over
    /// both trees: on an error nothing moved. The caller flushes.
    pub fn apply_quarantine_rule(&self) -> Result<Lifts> {
        let mut all: BTreeMap<String, (Quarantine, bool, bool)> = BTreeMap::new();
        for q in self.quarantined()? {
            all.insert(q.worker.clone(), (q, true, false));
        }
        for q in self.lifted()? {
            match all.get_mut(&q.worker) {
                Some((active, _, in_lifted)) => {
                    // A lifted record's disproof is void while it stays lifted: it does not make a
                    // held quarantine whole. Before, the join did, with no revocation until the next
                    // start (found by a review, 2026-12-01).
                    // (Nor does it drop the jobs a held one contradicted: found by a review,
                    // 2026-12-01.)
                    let (held, contradicted) = (active.held, active.contradicted.clone());
                    *active = active.clone().merged(q);
                    active.held = held;
                    active.contradicted = contradicted;
                    *in_lifted = true;
                }
                None => {
                    all.insert(q.worker.clone(), (q, false, true));
                }
            }
        }
        let records: Vec<Quarantine> = all.values().map(|(q, _, _)| q.clone()).collect();
        let clear: HashSet<String> = cleared(&records).into_iter().map(str::to_string).collect();
        let mut out = Lifts::default();
        // (name, record, whether it goes to `lifted`)
        let mut moves: Vec<(String, Vec<u8>, bool)> = Vec::new();
        for (name, (mut q, in_quarantine, in_lifted)) in all {
            let lift = clear.contains(&name);
            match (lift, in_quarantine, in_lifted) {
                // In its place already (every record is in one tree at least).
                (true, false, true) | (false, true, false) | (_, false, false) => continue,
                (true, _, _) => out.lifted.push(q.clone()),
                (false, false, true) => {
                    // Its deciders are cleared: what it contradicted stands, so a quarantine held
                    // for a dispute is made whole.
                    q.held = false;
                    out.restored.push(q.clone())
                }
                (false, true, true) => {}
            }
            moves.push((name, encode(&q), lift));
        }
        if moves.is_empty() {
            return Ok(out);
        }
        (&self.quarantine, &self.lifted, &self.challenges)
            .transaction(|(quarantine, lifted, kept)| {
                for (name, bytes, lift) in &moves {
                    let (to, from) = match lift {
                        true => (lifted, quarantine),
                        false => (quarantine, lifted),
                    };
                    from.remove(name.as_bytes())?;
                    to.insert(name.as_bytes(), bytes.as_slice())?;
                    // Lifted, or put back whole: no longer held, it takes nothing up, and a hold
                    // later starts afresh (found by a review, 2026-12-01: the rule lifted a held
                    // checker and left what it kept, which later wakes read, and a new hold
                    // appended to).
                    kept.remove(name.as_bytes())?;
                }
                Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
            })
            .map_err(|e| -> crate::error::Error {
                match e {
                    sled::transaction::TransactionError::Storage(e) => e.into(),
                    sled::transaction::TransactionError::Abort(()) => {
                        unreachable!("the moves never abort")
                    }
                }
            })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::quarantined_by as q;
    use super::*;

    fn names(qs: &[Quarantine]) -> Vec<String> {
        let mut n: Vec<String> = qs.iter().map(|q| q.worker.clone()).collect();
        n.sort();
        n
    }

    /// Issue 37: a lift is taken back once its basis goes. b decided a, c decided b: a is lifted (its
    /// decider b stays quarantined). Then d disproves c, and b is lifted (its decider is disproved):
    /// a's decider is cleared, so a is quarantined again (before, it stayed lifted for good). A worker
    /// quarantined anew after its lift is decided on the join of both records.
    #[test]
    fn a_lift_is_taken_back_once_its_deciders_are_cleared() {
        let store = Store::temporary().unwrap();
        store.restore_quarantine(&q("a", &["b"])).unwrap();
        store.restore_quarantine(&q("b", &["c"])).unwrap();
        let first = store.apply_quarantine_rule().unwrap();
        assert_eq!(
            (names(&first.lifted), names(&first.restored)),
            (vec!["a".to_string()], vec![])
        );
        assert_eq!(names(&store.quarantined().unwrap()), ["b"]);
        assert_eq!(names(&store.lifted().unwrap()), ["a"]);
        // Nothing changes when the rule runs again.
        assert_eq!(store.apply_quarantine_rule().unwrap(), Lifts::default());
        store.restore_quarantine(&q("c", &["d"])).unwrap();
        let second = store.apply_quarantine_rule().unwrap();
        assert_eq!(names(&second.lifted), ["b"]);
        assert_eq!(names(&second.restored), ["a"]);
        assert_eq!(names(&store.quarantined().unwrap()), ["a", "c"]);
        assert_eq!(names(&store.lifted().unwrap()), ["b"]);
        // b is quarantined anew by e, who serves: the join names c and e; it stays quarantined.
        store.restore_quarantine(&q("b", &["e"])).unwrap();
        let third = store.apply_quarantine_rule().unwrap();
        // With b quarantined again, a's decider is disproved: a is lifted once more.
        assert_eq!(names(&third.lifted), ["a"]);
        assert_eq!(names(&third.restored), Vec::<String>::new());
        let b = store
            .quarantined()
            .unwrap()
            .into_iter()
            .find(|x| x.worker == "b")
            .unwrap();
        assert_eq!(b.by, ["e", "c"], "the join, stored once");
        assert_eq!(names(&store.quarantined().unwrap()), ["b", "c"]);
        assert_eq!(names(&store.lifted().unwrap()), ["a"]);
    }

    /// A held quarantine (a checker whose dispute was open) that the rule lifted and then puts back is
    /// made whole: its deciders are cleared, so its contradiction lost, and its record counts go.
    #[test]
    fn a_held_quarantine_put_back_is_made_whole() {
        let store = Store::temporary().unwrap();
        let held = Quarantine {
            held: true,
            ..q("h", &["a"])
        };
        store.put_quarantine(&held).unwrap();
        store.restore_quarantine(&q("a", &["d"])).unwrap();
        let first = store.apply_quarantine_rule().unwrap();
        assert_eq!(names(&first.lifted), ["h"]);
        assert!(first.lifted[0].held, "lifted as it was");
        store.restore_quarantine(&q("d", &["e"])).unwrap();
        let second = store.apply_quarantine_rule().unwrap();
        assert_eq!(names(&second.lifted), ["a"]);
        assert_eq!(names(&second.restored), ["h"]);
        assert!(!second.restored[0].held);
        let stored = store.quarantined().unwrap();
        assert!(stored.iter().all(|q| !q.held), "{stored:?}");
    }

    /// The pure rule over records: a chain, a cycle, one naming none.
    #[test]
    fn the_rule_clears_chains_and_keeps_cycles_and_self_contradictions() {
        let records = [
            q("a", &["b"]),
            q("b", &["c"]),
            q("c", &["d"]),
            q("d", &[]),
            q("x", &["y"]),
            q("y", &["x"]),
            q("h", &["x", "z"]),
        ];
        let mut c: Vec<&str> = cleared(&records).into_iter().collect();
        c.sort();
        assert_eq!(c, ["a", "c"]);
    }

    /// A lifted record damaged on disk neither refuses the rule (nor the start) nor lifts anyone: its
    /// worker is quarantined again, naming no decider (found by a review, 2026-11-28: the start was
    /// refused for good, and `--repair` could not mend it).
    #[test]
    fn a_damaged_lifted_record_puts_its_worker_back_for_good() {
        let store = Store::temporary().unwrap();
        store
            .lifted
            .insert(b"w", &b"{\"not\":\"a record\"}"[..])
            .unwrap();
        let lifts = store.apply_quarantine_rule().unwrap();
        assert_eq!(names(&lifts.restored), ["w"]);
        assert!(store.lifted().unwrap().is_empty());
        let back = store.quarantined().unwrap();
        assert_eq!(names(&back), ["w"]);
        assert!(back[0].by.is_empty(), "never lifted by the rule");
        assert_eq!(store.apply_quarantine_rule().unwrap(), Lifts::default());
        // A record that decodes but names another worker than its key is damage too (killed the
        // mutant that took it as it read, issue 42).
        let store = Store::temporary().unwrap();
        store.lifted.insert(b"w", encode(&q("v", &["x"]))).unwrap();
        let lifts = store.apply_quarantine_rule().unwrap();
        assert_eq!(names(&lifts.restored), ["w"]);
        assert!(store.quarantined().unwrap()[0].by.is_empty());
    }
}
