//! A commit's changes applied to the in-memory state: the runs it reopened and the jobs it moved, its
//! quarantines and lifts, the leases of the results it took back, its confirmed jobs and its new
//! totals. A report's commit applies them with its results; so does a write after which the commit
//! thread took back a held worker's counts (a disputed job failed, a record run cancelled).

use tokio::time::Instant;

use crate::durable::store::{Committed, JobState};

/// Applies a commit's reopened runs, moved jobs, quarantines and lifts, and ends the leases of the
/// results it took back (not its totals: [`apply_tallies`]; nor its confirmed jobs: [`note_confirmed`]).
pub(super) fn apply(state: &mut super::State, committed: &Committed) {
    for meta in &committed.reopened {
        if let Some(run) = state.runs.get_mut(&meta.id) {
            tracing::warn!(
                run = meta.id,
                "run reopened: counted results were taken back (a quarantined worker's, or a count a different result disputed)"
            );
            run.reopen(meta.clone(), committed.seq);
        }
    }
    for moved in &committed.moved {
        if let Some(run) = state.runs.get_mut(&moved.run) {
            run.moved_by(&moved.key, moved.from, moved.to, committed.seq);
            if moved.to == Some(JobState::Failed) {
                tracing::error!(run = moved.run, job = %moved.key, "job failed: its workers gave different results");
            }
        }
        // Pending again (its results taken back): no lease of before confirms anything for it (one
        // issued while it held a result would confirm a new first result with no draw). A second
        // guard: the store lets a lease confirm only a result its job held at its issue.
        // (A job that leaves a dispute keeps its leases' marks: each names the results the job held
        // when it was issued, and the store lets a result under it confirm only one of those, and
        // second only in that dispute, `Incoming::drawn`. Taken off here, once
        // the move was applied, they also took those of a lease a call issued between the commit
        // and this, from the new record: found by a review, 2026-12-01.)
        if moved.to.is_none() {
            state.leases.unmark_job(moved.run, &moved.key);
        }
    }
    apply_quarantines(state, committed);
    for r in &committed.revoked {
        // (A check of the job out ends with its count.)
        if let Some(live) = state.leases.settle(r.run, &r.key) {
            state.spot.ended(live.id);
        }
    }
}

/// Applies a commit's new totals to their live runs (a later commit's supersede an earlier one's).
pub(super) fn apply_tallies(state: &mut super::State, committed: &Committed, now: Instant) {
    for (run, tally) in &committed.tallies {
        if let Some(live) = state.runs.get_mut(run) {
            live.update(*tally, committed.seq, now);
        }
    }
}

/// Applies what the commit thread took back after a write ([`crate::durable::committer::Wrote`]):
/// a commit with no results of its own.
pub(super) fn apply_taken_back(state: &mut super::State, committed: &Committed, now: Instant) {
    note_confirmed(state, committed);
    apply(state, committed);
    apply_tallies(state, committed, now);
}

/// Applies a commit's quarantines and lifts to the workers kept out of service. Commits of one round
/// are applied by their reports' tasks in whatever order they take the lock: a change of a worker's
/// quarantine older than the last one applied is passed by, so that a lift is never undone in
/// memory by the quarantine it lifted (until a restart).
pub(super) fn apply_quarantines(state: &mut super::State, committed: &Committed) {
    let mut newer = |worker: &str| match state.quarantine_seq.get(worker) {
        Some(&seq) if seq > committed.seq => false,
        _ => {
            state
                .quarantine_seq
                .insert(worker.to_string(), committed.seq);
            true
        }
    };
    let quarantined: Vec<_> = committed
        .quarantined
        .iter()
        .filter(|q| newer(&q.worker))
        .collect();
    let lifted: Vec<_> = committed
        .lifted
        .iter()
        .filter(|q| newer(&q.worker))
        .collect();
    if !quarantined.is_empty() || !lifted.is_empty() {
        state.workers.forget_fleet();
    }
    for q in quarantined {
        let revoked = committed
            .revoked
            .iter()
            .filter(|r| r.record.worker == q.worker)
            .count();
        tracing::warn!(worker = %q.worker, reason = %q.reason, revoked, held = q.held, "worker quarantined; its unconfirmed results are revoked and their jobs computed again (held: those of record runs stand until its dispute is decided)");
        state.quarantined.insert(q.worker.clone(), q.shown_reason());
    }
    // Holds ended in the round: shown whole.
    for q in &committed.made_whole {
        if newer(&q.worker) {
            tracing::warn!(worker = %q.worker, "a held worker's hold ended undecided: its quarantine is whole");
            state.quarantined.insert(q.worker.clone(), q.shown_reason());
        }
    }
    for q in lifted {
        tracing::warn!(worker = %q.worker, deciders = ?q.by, "quarantine lifted: every identity that disproved the worker is quarantined now, or a majority decided its dispute for it; its results taken back are computed again, and it earns its record again");
        state.quarantined.remove(&q.worker);
        // Its record goes: it decides no dispute until it earns one again.
        state.confirmed.remove(&q.worker);
        state.spot.forget_passes(&q.worker);
    }
}

/// The confirmed jobs of a commit, in memory: each run's counts of confirmed jobs (and of those two
/// kernel families confirmed), the identities with a record, and the spot checks' pool. Jobs two
/// identities agreed on may serve as spot checks; a result taken back may not.
pub(super) fn note_confirmed(state: &mut super::State, committed: &Committed) {
    // (Not a job no queen ring fits: its one plausible answer, zero, tests nothing.)
    for (run, key, record) in &committed.counted {
        if !record.confirmed_by.is_empty() {
            for who in record.confirmed_by.iter().chain([&record.worker]) {
                if !state.confirmed.contains(who) {
                    state.confirmed.insert(who.clone());
                }
            }
            if let Some(live) = state.runs.get_mut(run) {
                live.jobs_confirmed += 1;
                if nqueens_common::Family::distinct(&record.families) >= 2 {
                    live.jobs_two_families += 1;
                }
            }
        }
        // (Not one a later commit, applied first, took back: its `forget` is past. It counts above
        // all the same, that commit having taken it off: found by a review, 2026-12-01.)
        let taken_later = state
            .runs
            .get(run)
            .is_some_and(|r| r.reopened_after(key, committed.seq));
        if !record.confirmed_by.is_empty() && record.result.nodes > 0 && !taken_later {
            let mut by = record.confirmed_by.clone();
            by.push(record.worker.clone());
            state.spot.confirmed(*run, key.clone(), by);
        }
    }
    let taken = || committed.revoked.iter().chain(&committed.disputed);
    state.spot.forget(taken().map(|r| (r.run, &r.key)));
    for r in taken() {
        if !r.record.confirmed_by.is_empty() {
            if let Some(live) = state.runs.get_mut(&r.run) {
                live.jobs_confirmed = live.jobs_confirmed.saturating_sub(1);
                if nqueens_common::Family::distinct(&r.record.families) >= 2 {
                    live.jobs_two_families = live.jobs_two_families.saturating_sub(1);
                }
            }
        }
    }
}
