//! The quarantine steps of a start, in order: revocations a failed write left incomplete are completed,
//! the operator's releases (`serve --release-quarantine`) and quarantines (`serve --quarantine`) are
//! applied, their results taken back, and the rule that lifts a quarantine whose deciders are all
//! disproved runs. Each writes the ledger and the store in the order that a crash between them leaves
//! the safe side.

use crate::durable::ledger::{Entry, Ledger};
use crate::durable::store::{now_unix, Lifts, Quarantine, Store};
use crate::error::{Error, Result};

use super::lease::check_stored_worker;
use super::Config;

/// Runs every quarantine step of a start over `store` (and its `ledger`), as `config` asks. Returns
/// whether results were taken back (the store's audit, made before, is then out of date).
pub(super) fn settle_at_start(
    store: &Store,
    mut ledger: Option<&mut Ledger>,
    config: &Config,
) -> Result<bool> {
    // A quarantine whose revocation did not complete (a write that failed after the quarantine was
    // committed) is completed now, store and ledger alike, before anything is audited or served.
    let mut revoked = revoke_quarantined(store, ledger.as_deref_mut())?;
    // The operator's releases before the rule: a lift whose decider is released loses its basis.
    if let Some(name) = config.distrust.iter().find(|n| config.release.contains(n)) {
        return Err(Error::Invalid(format!(
            "{name:?} is both to quarantine and to release; nothing changed"
        )));
    }
    for name in &config.distrust {
        check_stored_worker("worker name", name)?;
    }
    release(store, ledger.as_deref_mut(), &config.release)?;
    // The operator's quarantines, their results taken back now (before the rule, which may lift a
    // quarantine they decided).
    distrust(store, ledger.as_deref_mut(), &config.distrust)?;
    revoked |= revoke_quarantined(store, ledger.as_deref_mut())?;
    if apply_quarantine_rule(store, ledger.as_deref_mut())? {
        revoked |= revoke_quarantined(store, ledger.as_deref_mut())?;
    }
    // Held checkers whose wait for another dispute ended (before a crash, or by a step above) take
    // up their next kept contradiction, last: while one waits, nothing above makes it whole. One
    // released may take a lift's basis away: the rule runs again (a rule with nothing to change
    // changes nothing).
    revoked |= take_up_waiting(store, ledger.as_deref_mut())?;
    if apply_quarantine_rule(store, ledger.as_deref_mut())? {
        revoked |= revoke_quarantined(store, ledger)?;
    }
    Ok(revoked)
}

/// Takes back the unconfirmed results of every quarantined worker that still has some (revocation is
/// idempotent: a completed one finds nothing); the ledger gets the revocation lines and the store is
/// flushed. Returns whether anything was revoked.
pub(super) fn revoke_quarantined(store: &Store, ledger: Option<&mut Ledger>) -> Result<bool> {
    let mut entries = Vec::new();
    for q in store.quarantined()? {
        let revocation = store.revoke(&q.worker)?;
        if revocation.incomplete {
            // The reconciliation has repaired what the ledger could: what is still unreadable may be a
            // result of this worker, counted.
            return Err(Error::Corrupt(format!(
                "results of the quarantined worker {:?} cannot all be read after the repair from the ledger, so they cannot be taken back (the errors above name them)",
                q.worker
            )));
        }
        if !revocation.revoked.is_empty() {
            tracing::warn!(worker = %q.worker, results = revocation.revoked.len(), "a quarantined worker's unconfirmed results were still counted (its revocation had not completed): taken back now");
        }
        entries.extend(revocation.revoked.iter().map(Entry::taken_back));
        // A hold that ended undecided: the whole record, so that a store rebuilt from the ledger
        // does not take back again what is taken back now (it restores the record held). After
        // the take-backs: an append cut short then leaves it held in the ledger, and the next start
        // holds it again to take back anew what the ledger restores.
        if let Some(whole) = revocation.whole {
            tracing::warn!(worker = %whole.worker, "a held worker's dispute ended undecided: its quarantine is whole, its record counts and the counts only those it contradicted stand behind are taken back");
            entries.push(Entry::Quarantine(whole));
        }
    }
    if entries.is_empty() {
        return Ok(false);
    }
    store.flush()?;
    if let Some(ledger) = ledger {
        ledger.append(&entries)?;
    }
    Ok(true)
}

/// Takes up the next kept contradiction of every held checker whose wait for another dispute ended
/// ([`Store::take_up_waiting`]): the store first (flushed), then the ledger's lines (counts taken
/// back, releases), as a commit's. Returns whether a count was taken back.
fn take_up_waiting(store: &Store, mut ledger: Option<&mut Ledger>) -> Result<bool> {
    let woken = store.take_up_waiting()?;
    if !woken.has_effects() {
        return Ok(false);
    }
    // A take-up that left a checker nothing to hold it: its hold ends now (below), as in a
    // commit's round (found by a review, 2026-12-01: it waited for the next start).
    let ended = !woken.hold_ended.is_empty();
    store.flush()?;
    for r in &woken.disputed {
        tracing::warn!(run = r.run, job = %r.key, worker = %r.record.worker, "a held checker's kept contradiction taken up at the start: the count is disputed");
    }
    for q in &woken.lifted {
        tracing::warn!(worker = %q.worker, "a held checker released at the start: its last kept contradiction was passed over");
    }
    if let Some(ledger) = ledger.as_deref_mut() {
        let at_unix = now_unix();
        let lines: Vec<_> = woken
            .disputed
            .iter()
            .map(Entry::taken_back)
            .chain(woken.lifted.iter().map(|q| Entry::Released {
                worker: q.worker.clone(),
                at_unix,
            }))
            .collect();
        ledger.append(&lines)?;
    }
    let ended = ended && revoke_quarantined(store, ledger)?;
    Ok(!woken.disputed.is_empty() || ended)
}

/// Runs the quarantine rule at the start ([`Store::apply_quarantine_rule`]): a lift the commit thread
/// made in the store whose `released` line a crash lost (the reconciliation has put the ledger's
/// quarantine back), one the commit thread could not make, and a lift whose basis went are decided
/// again. The store first, then the ledger's lines (quarantines put back, then releases): a crash
/// between the two leaves the ledger's side, which the reconciliation joins the safe way and the next
/// start decides again. Returns whether a quarantine was put back (its results are to be taken back).
fn apply_quarantine_rule(store: &Store, ledger: Option<&mut Ledger>) -> Result<bool> {
    let lifts = store.apply_quarantine_rule()?;
    if lifts == Lifts::default() {
        return Ok(false);
    }
    store.flush()?;
    for q in &lifts.lifted {
        tracing::warn!(worker = %q.worker, deciders = ?q.by, "quarantine lifted at the start: every identity that disproved the worker is quarantined");
    }
    for q in &lifts.restored {
        tracing::warn!(worker = %q.worker, deciders = ?q.by, "quarantine put back at the start: an identity that disproved the worker is cleared now");
    }
    if let Some(ledger) = ledger {
        let at_unix = now_unix();
        let lines: Vec<_> = lifts
            .restored
            .iter()
            .cloned()
            .map(Entry::Quarantine)
            .chain(lifts.lifted.iter().map(|q| Entry::Released {
                worker: q.worker.clone(),
                at_unix,
            }))
            .collect();
        ledger.append(&lines)?;
    }
    Ok(!lifts.restored.is_empty())
}

/// The names of a flag given more than once, each once, in order.
fn each_once(names: &[String]) -> Vec<String> {
    let mut names = names.to_vec();
    names.sort();
    names.dedup();
    names
}

/// Lifts the quarantine of the worker named `name`: the ledger's release line first (made durable), then
/// the store. A crash between the two leaves the store's quarantine, which the next start writes to the
/// ledger again: the worker stays out, and the release is to be given again.
/// Every name is checked before any is released: one that is neither quarantined nor lifted by the rule
/// refuses them all. A lifted one (a flag left in a deployment) loses its lifted record: the rule never
/// puts it back.
fn release(store: &Store, mut ledger: Option<&mut Ledger>, names: &[String]) -> Result<()> {
    let names = each_once(names);
    let quarantined = store.quarantined()?;
    let lifted = store.lifted()?;
    let held = |list: &[Quarantine], n: &str| list.iter().any(|q| q.worker == n);
    if let Some(name) = names
        .iter()
        .find(|n| !held(&quarantined, n) && !held(&lifted, n))
    {
        return Err(Error::Invalid(format!(
            "no quarantined worker is named {name:?}; nothing released"
        )));
    }
    for name in &names {
        if !held(&quarantined, name) {
            // Lifted by the rule already (a flag left in a deployment): its record goes, so that the
            // rule never puts it back.
            store.release_quarantine(name)?;
            tracing::info!(worker = %name, "worker already lifted from its quarantine by the rule; released for good");
            continue;
        }
        if let Some(ledger) = ledger.as_deref_mut() {
            ledger.append(&[Entry::Released {
                worker: name.to_string(),
                at_unix: now_unix(),
            }])?;
        }
        store.release_quarantine(name)?;
        tracing::info!(worker = %name, "worker released from quarantine");
    }
    Ok(())
}

/// Why the operator's quarantine (`serve --quarantine`) names a worker.
pub const DISTRUSTED: &str = "quarantined by the operator (serve --quarantine)";

/// Quarantines the workers named `names` for the operator: the ledger's quarantine line first (made
/// durable), then the store, each as a worker shown wrong is, naming no decider, so that no rule lifts
/// it (only `--release-quarantine` does). A worker quarantined already by deciders keeps its reason and
/// loses its deciders; one quarantined already with none is left as it is; a lift the rule made is
/// forgotten. Its unconfirmed results are taken back by the caller ([`revoke_quarantined`]). A crash
/// between the two writes leaves the ledger's line, which the next start restores into the store (the
/// flag, given again, then writes the store's).
fn distrust(store: &Store, mut ledger: Option<&mut Ledger>, names: &[String]) -> Result<()> {
    let quarantined = store.quarantined()?;
    for name in each_once(names) {
        let operators = Quarantine {
            worker: name.clone(),
            reason: DISTRUSTED.to_string(),
            at_unix: now_unix(),
            by: Vec::new(),
            held: false,
            contradicted: Vec::new(),
        };
        let q = match quarantined.iter().find(|q| q.worker == name) {
            Some(q) if q.by.is_empty() => {
                tracing::info!(worker = %name, "worker already quarantined for good; --quarantine changes nothing");
                continue;
            }
            Some(q) => q.clone().merged(operators),
            None => operators,
        };
        if let Some(ledger) = ledger.as_deref_mut() {
            ledger.append(&[Entry::Quarantine(q.clone())])?;
        }
        store.put_quarantine(&q)?;
        tracing::warn!(worker = %name, "worker quarantined by the operator: its unconfirmed results are taken back and computed again");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::store::tests::{
        a_checker_waiting, a_liar_and_another_dispute, decided_by_two, in_turn,
    };
    use crate::durable::store::Outcome;

    /// A held checker whose wait for another dispute ended before a crash (the write that failed
    /// that dispute stored, its take-up not) is taken up at the next start: its contradiction is
    /// passed over and, every identity it contradicted shown wrong or moot, it is released (not
    /// lifted by the rule: two of those identities were never quarantined). Without the step it
    /// stayed held, nothing left to wake it.
    #[test]
    fn a_start_takes_up_a_checker_whose_wait_ended_before_a_crash() {
        let (store, _, run, _, _, j2) = a_checker_waiting();
        store.fail_job(run.id, &j2.key, "5 leases expired").unwrap();
        assert!(store
            .quarantined()
            .unwrap()
            .iter()
            .any(|q| q.worker == "h" && q.held));
        settle_at_start(&store, None, &Config::default()).unwrap();
        let names =
            |qs: Vec<Quarantine>| -> Vec<String> { qs.into_iter().map(|q| q.worker).collect() };
        let quarantined = names(store.quarantined().unwrap());
        assert!(!quarantined.contains(&"h".to_string()), "{quarantined:?}");
        assert!(!names(store.lifted().unwrap()).contains(&"h".to_string()));
        assert!(quarantined.contains(&"c".to_string()), "c's dispute failed");
    }

    /// A held liar whose wait ended before a crash (the dispute it waited for decided against its
    /// contradiction, stored, its take-up not) takes the count up at the next start: the count is
    /// taken back in the store and, by a line, in the ledger, and the start says results were taken
    /// back (the audit made before is out of date).
    #[test]
    fn a_start_takes_up_a_waiting_liars_count_in_the_store_and_the_ledger() {
        let (store, plan, run, j1, j2) = a_liar_and_another_dispute();
        decided_by_two(&store, &plan, &j1);
        in_turn(&store, &plan, &j2, &[("f", 0, Outcome::Accepted)]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::durable::ledger::LEDGER_FILE);
        let mut ledger = crate::durable::ledger::rewrite(&path, &store).unwrap();
        let read = |path: &std::path::Path| crate::durable::ledger::LedgerView::read(path).unwrap();
        assert!(read(&path).results[&run.id].contains_key(&j2.key));
        let revoked = settle_at_start(&store, Some(&mut ledger), &Config::default()).unwrap();
        assert!(revoked, "a count taken back");
        assert_eq!(store.result(run.id, &j2.key).unwrap(), None);
        drop(ledger);
        let view = read(&path);
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        assert!(!view.results[&run.id].contains_key(&j2.key));
        // Nothing more at the next start.
        assert!(!settle_at_start(&store, None, &Config::default()).unwrap());
    }

    /// A lift whose basis a start's release took away puts the worker back, takes its count back,
    /// and the start says results were taken back (the audit made before is out of date).
    #[test]
    fn a_start_whose_rule_puts_a_worker_back_says_results_were_taken_back() {
        use crate::durable::store::tests::{by, incoming_from, quarantined_by};
        let store = Store::temporary().unwrap();
        let plan = nqueens_common::Plan::new(8, nqueens_common::Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let counted = store
            .commit(&[by(&plan, "w", incoming_from(run.id, &plan, 0, "w"), 0)])
            .unwrap();
        assert_eq!(counted.outcomes, [Outcome::Accepted]);
        store.put_quarantine(&quarantined_by("w", &["h"])).unwrap();
        store.put_quarantine(&quarantined_by("h", &["z"])).unwrap();
        assert_eq!(store.apply_quarantine_rule().unwrap().lifted.len(), 1);
        let config = Config {
            release: vec!["h".into()],
            ..Config::default()
        };
        assert!(settle_at_start(&store, None, &config).unwrap());
        assert_eq!(store.tally(run.id).unwrap().jobs, 0);
    }
}
