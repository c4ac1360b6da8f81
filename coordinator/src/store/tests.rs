//! Unit tests of the store: commits, duplicates and mismatches, the audit catching a tampered total, and a
//! run finishing in the transaction of its last job.

use nqueens_common::{JobResult, Plan, Strategy, Tally};

use super::records::{encode, run_key};
use super::{Incoming, Outcome, Store};
use crate::error::Error;

fn incoming(run: u64, plan: &Plan, i: usize) -> Incoming {
    let key = plan.jobs().nth(i).unwrap();
    let result = plan.job(&key).unwrap().run();
    Incoming {
        run,
        key,
        result,
        worker: "w".into(),
        lease: 1,
    }
}

#[test]
fn results_commit_once_and_the_last_one_finishes_the_run() {
    let store = Store::temporary().unwrap();
    let plan = Plan::new(8, Strategy::D4).unwrap();
    let run = store.create_run(plan).unwrap();
    let all: Vec<Incoming> = (0..run.jobs_total as usize)
        .map(|i| incoming(run.id, &plan, i))
        .collect();
    let first = store.commit(&all[..1]).unwrap();
    assert_eq!(first.outcomes, vec![Outcome::Accepted]);
    assert!(first.finished.is_empty());

    let mut wrong = all[0].clone();
    wrong.result.total += 1;
    let again = store.commit(&[all[0].clone(), wrong]).unwrap();
    assert_eq!(again.outcomes[0], Outcome::Duplicate);
    assert!(matches!(again.outcomes[1], Outcome::Mismatch { .. }));
    assert!(again.tallies.is_empty(), "nothing was added");

    let rest = store.commit(&all[1..]).unwrap();
    assert_eq!(rest.finished.len(), 1);
    let tally = store.tally(run.id).unwrap();
    assert_eq!((tally.total, tally.unique().unwrap()), (92, Some(12)));
    assert!(store.run(run.id).unwrap().unwrap().is_done());
    assert_eq!(store.audit().unwrap()[0].tally, tally);
}

#[test]
fn the_audit_catches_totals_that_disagree_with_the_results() {
    let store = Store::temporary().unwrap();
    let plan = Plan::new(9, Strategy::D4).unwrap();
    let run = store.create_run(plan).unwrap();
    store
        .commit(&[incoming(run.id, &plan, 0), incoming(run.id, &plan, 1)])
        .unwrap();
    assert!(store.audit().is_ok());
    let mut tampered: Tally = store.tally(run.id).unwrap();
    tampered
        .add(&JobResult {
            total: 8,
            unique8: Some(8),
            nodes: 1,
        })
        .unwrap();
    store
        .totals
        .insert(run_key(run.id), encode(&tampered))
        .unwrap();
    assert!(matches!(store.audit(), Err(Error::Corrupt(_))));
}

#[test]
fn a_reopened_store_keeps_runs_and_results_and_counts_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::new(7, Strategy::Mirror).unwrap();
    let id = {
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.epoch(), 1);
        let run = store.create_run(plan).unwrap();
        store.commit(&[incoming(run.id, &plan, 0)]).unwrap();
        store.flush().unwrap();
        run.id
    };
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.epoch(), 2);
    assert_eq!(store.runs().unwrap().len(), 1);
    assert_eq!(store.tally(id).unwrap().jobs, 1);
    assert_eq!(store.results(id).count(), 1);
    let second = store.create_run(plan).unwrap();
    assert_eq!(second.id, id + 1);
}
