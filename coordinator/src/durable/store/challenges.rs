//! A held checker's further contradictions of confirmed counts, kept until a decision for it takes
//! the next one up (the `challenges` tree, by worker name).
//!
//! In a record run an identity takes back at most one confirmed count per commit. A checker whose
//! one batch contradicts two confirmed counts under live leases disputes the first; before, the
//! second lived only in its quarantine's reason. A decision for the checker released it only once
//! every identity it had contradicted was quarantined whole, so with a second colluding pair behind
//! the second count it stayed held with no dispute open: the next start made it whole (its record
//! counts taken back) and the second lie stood (found by a review, 2026-12-01). Now the second
//! contradiction is kept here, and each decision for the checker that does not release it takes the
//! next one up: that count is taken back and disputed between it and the checker's result, one
//! dispute at a time, as the first was.

use nqueens_common::JobKey;
use serde::{Deserialize, Serialize};

use super::records::{decode, encode, ResultRecord};
use super::txn::TxResult;

/// The tree of the contradictions kept, by worker name (checked JSON lists of [`Challenge`]s).
pub(super) const CHALLENGES: &str = "challenges";

/// The most contradictions kept for one worker: one batch holds at most this many more (the rest
/// are dropped, logged; the checker stays held, as before they were kept).
pub(super) const MAX_CHALLENGES: usize = 16;

/// A confirmed count a held checker contradicted under a live lease, not taken back then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub run: u64,
    pub key: JobKey,
    /// The checker's result, as it would have stood in the dispute.
    pub record: ResultRecord,
    /// The identities behind the count contradicted (its worker and confirmers).
    #[serde(default)]
    pub against: Vec<String>,
}

/// What is kept for one held checker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// Its contradictions not disputed yet, in order.
    pub challenges: Vec<Challenge>,
    /// The identities behind the counts of contradictions passed over (their counts went, or now
    /// agree with the checker): no dispute can show them wrong any more, so they keep it held no
    /// longer.
    #[serde(default)]
    pub moot: Vec<String>,
    /// The disputes its contradictions opened, `(run, job)`: its first, then each one taken up. While
    /// one is open, nothing more is taken up and it is not released on that path (a dispute it
    /// merely stands in, decided against an identity it also contradicted, released it before: a
    /// review, 2026-12-01).
    #[serde(default)]
    pub open: Vec<(u64, JobKey)>,
    /// The identities behind the counts of those disputes and of the contradictions kept: a further
    /// contradiction of a count only they stand behind is not kept (their quarantine, if the checker
    /// is shown right, takes every count they stand behind back), so that a batch of many
    /// contradictions of one pair leaves room for another pair's.
    #[serde(default)]
    pub covered: Vec<String>,
}

impl Kept {
    /// `names` are behind a count it disputes or keeps.
    fn cover(&mut self, names: &[String]) {
        for name in names {
            if !self.covered.contains(name) {
                self.covered.push(name.clone());
            }
        }
    }

    /// `challenge`'s identities are moot now.
    pub fn passed_over(&mut self, challenge: Challenge) {
        for name in challenge.against {
            if !self.moot.contains(&name) {
                self.moot.push(name);
            }
        }
    }
}

/// What is kept for `worker`. A record that fails its check (damaged on disk) reads as nothing kept,
/// logged: the checker stays held, as it did before contradictions were kept.
pub(super) fn txn_get(tree: &sled::transaction::TransactionalTree, worker: &str) -> TxResult<Kept> {
    let Some(raw) = tree.get(worker.as_bytes())? else {
        return Ok(Kept::default());
    };
    Ok(decode::<Kept>("challenges", &raw).unwrap_or_else(|e| {
        tracing::error!(worker, error = %e, place = "store", "a held checker's kept contradictions fail their check (damaged on disk): dropped");
        Kept::default()
    }))
}

/// Stores `kept` for `worker` (nothing kept: the entry goes).
pub(super) fn txn_put(
    tree: &sled::transaction::TransactionalTree,
    worker: &str,
    kept: &Kept,
) -> TxResult<()> {
    if kept.challenges.is_empty()
        && kept.moot.is_empty()
        && kept.open.is_empty()
        && kept.covered.is_empty()
    {
        tree.remove(worker.as_bytes())?;
    } else {
        tree.insert(worker.as_bytes(), encode(kept))?;
    }
    Ok(())
}

/// Notes that `worker`'s contradiction opened the dispute of job `key` of run `run`, whose count
/// `against` stood behind.
pub(super) fn txn_opened(
    tree: &sled::transaction::TransactionalTree,
    worker: &str,
    (run, key): (u64, &JobKey),
    against: &[String],
) -> TxResult<()> {
    let mut kept = txn_get(tree, worker)?;
    // (Once: a held checker commits nothing more.)
    kept.open.push((run, key.clone()));
    kept.cover(against);
    txn_put(tree, worker, &kept)
}

/// Keeps `challenge` for `worker`, after those kept already (none of the same job twice; at most
/// [`MAX_CHALLENGES`]).
pub(super) fn txn_add(
    tree: &sled::transaction::TransactionalTree,
    worker: &str,
    challenge: Challenge,
) -> TxResult<()> {
    let mut kept = txn_get(tree, worker)?;
    let covered = challenge
        .against
        .iter()
        .all(|name| kept.covered.contains(name));
    if covered
        || kept
            .challenges
            .iter()
            .any(|c| c.run == challenge.run && c.key == challenge.key)
    {
    } else if kept.challenges.len() < MAX_CHALLENGES {
        let names = challenge.against.clone();
        kept.challenges.push(challenge);
        kept.cover(&names);
    } else {
        tracing::warn!(worker, run = challenge.run, job = %challenge.key, "a held checker's contradiction not kept: it has the most kept already");
    }
    txn_put(tree, worker, &kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(run: u64, job: u8) -> Challenge {
        Challenge {
            run,
            key: JobKey(vec![job]),
            record: ResultRecord {
                result: nqueens_common::JobResult::default(),
                worker: "h".into(),
                worker_id: "h-1".into(),
                lease: 1,
                at_unix: 1,
                confirmed_by: Vec::new(),
                seal: Some(1),
                families: Vec::new(),
            },
            against: vec![format!("a{job}"), format!("b{run}")],
        }
    }

    fn add(tree: &sled::Tree, c: Challenge) {
        tree.transaction(|t| txn_add(t, "h", c.clone())).unwrap();
    }

    fn kept(tree: &sled::Tree) -> Vec<Challenge> {
        tree.transaction(|t| txn_get(t, "h")).unwrap().challenges
    }

    /// Kept in order, each job once, at most [`MAX_CHALLENGES`]; nothing kept leaves no entry.
    #[test]
    fn contradictions_are_kept_in_order_once_each_and_bounded() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree(CHALLENGES).unwrap();
        add(&tree, challenge(1, 1));
        add(&tree, challenge(2, 1));
        add(&tree, challenge(1, 1));
        assert_eq!(kept(&tree), [challenge(1, 1), challenge(2, 1)]);
        for job in 2..200 {
            add(&tree, challenge(1, job));
        }
        let list = kept(&tree);
        assert_eq!(list.len(), MAX_CHALLENGES);
        assert_eq!(list.last(), Some(&challenge(1, MAX_CHALLENGES as u8 - 1)));
        let mut none = Kept::default();
        tree.transaction(|t| txn_put(t, "h", &none)).unwrap();
        assert!(tree.is_empty());
        // Moot names are kept once each, and keep the entry.
        none.passed_over(challenge(1, 1));
        none.passed_over(challenge(1, 1));
        assert_eq!(none.moot, ["a1", "b1"]);
        tree.transaction(|t| txn_put(t, "h", &none)).unwrap();
        assert_eq!(tree.transaction(|t| txn_get(t, "h")).unwrap(), none);
    }

    /// A contradiction of a count only identities already covered stand behind (the dispute it
    /// opened, or another kept) is not kept, and takes no room.
    #[test]
    fn a_contradiction_of_identities_covered_already_is_not_kept() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree(CHALLENGES).unwrap();
        let key = JobKey(vec![9]);
        let pair = |a: &str, b: &str| vec![a.to_string(), b.to_string()];
        tree.transaction(|t| txn_opened(t, "h", (1, &key), &pair("a", "b")))
            .unwrap();
        let of = |job: u8, against: Vec<String>| Challenge {
            against,
            ..challenge(1, job)
        };
        for job in 0..40 {
            add(&tree, of(job, pair("a", "b")));
        }
        assert!(kept(&tree).is_empty(), "a and b are covered");
        add(&tree, of(40, pair("a", "x")));
        add(&tree, of(41, pair("x", "b")));
        add(&tree, of(42, pair("y", "z")));
        let jobs: Vec<u8> = kept(&tree).iter().map(|c| c.key.0[0]).collect();
        assert_eq!(jobs, [40, 42]);
        let all = tree.transaction(|t| txn_get(t, "h")).unwrap();
        assert_eq!(all.open, [(1, key)]);
        assert_eq!(all.covered, ["a", "b", "x", "y", "z"]);
    }
}
