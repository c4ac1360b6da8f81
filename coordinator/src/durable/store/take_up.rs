//! Taking up a held checker's next kept contradiction ([`super::challenges`]): after a decision for
//! it (inside the commit that decides), and once the dispute its next one waited for has ended (the
//! commit thread after each commit and write that ends a dispute, and each start).

use std::collections::{BTreeMap, BTreeSet};

use sled::transaction::{Transactional, TransactionalTree};

use super::challenges::{self, Kept};
use super::changed::Committed;
use super::records::{decode, encode, job_key, now_unix, run_key, JobState, Quarantine};
use super::take_back::take_back;
use super::txn::{abort, job_record, TxResult};
use super::{groups, RunMeta, Store};
use crate::error::{Error, Result};

/// The trees a take-up reads and writes, inside one transaction.
pub(super) struct Trees<'a> {
    pub runs: &'a TransactionalTree,
    pub jobs: &'a TransactionalTree,
    pub results: groups::Tx<'a>,
    pub totals: &'a TransactionalTree,
    pub quarantine: &'a TransactionalTree,
    pub kept: &'a TransactionalTree,
    /// The notes of counts taken back ([`super::revoked`]).
    pub taken: &'a TransactionalTree,
}

/// What one transaction changed so far: its effects, the runs read, and the runs with a count
/// disputed in it.
pub(super) struct Effects<'a> {
    pub out: &'a mut Committed,
    pub metas: &'a mut BTreeMap<u64, RunMeta>,
    pub disputed_runs: &'a mut BTreeSet<u64>,
}

/// Held checker `name`, shown right where the identities `losing` were shown wrong (none: the
/// dispute its next contradiction waited for has ended), takes up its next kept contradiction: that
/// count is taken back and disputed between it and the checker's result. While a dispute it opened
/// is open it waits for that one; while its next contradiction's count is in another dispute, for
/// that one. With nothing left to dispute it is released if every identity it contradicted is on the
/// losing side, behind a count passed over, or quarantined whole. Not held (quarantined whole by a
/// later result of the commit, say): nothing.
pub(super) fn txn_take_up(
    t: &Trees,
    e: &mut Effects,
    name: &str,
    losing: &[String],
) -> TxResult<()> {
    let Some(q) = t
        .quarantine
        .get(name.as_bytes())?
        .and_then(|raw| decode::<Quarantine>("quarantine", &raw).ok())
        .filter(|q| q.held)
    else {
        // Not held (whole, lifted, released): what was kept for it goes.
        t.kept.remove(name.as_bytes())?;
        return Ok(());
    };
    let mut held = challenges::txn_get(t.kept, name)?;
    // The disputes it opened that are still open (not the one decided now): while one is, it waits
    // for that one.
    let mut open = Vec::new();
    for (run, key) in std::mem::take(&mut held.open) {
        let standing = job_record(t.jobs, &job_key(run, &key))?
            .is_some_and(|r| r.state == JobState::Disputed && r.computed_by(name));
        if standing {
            open.push((run, key));
        }
    }
    held.open = open;
    if !held.open.is_empty() {
        return challenges::txn_put(t.kept, name, &held);
    }
    let mut disputed = false;
    while !held.challenges.is_empty() {
        let c = held.challenges.remove(0);
        if let std::collections::btree_map::Entry::Vacant(slot) = e.metas.entry(c.run) {
            let Some(raw) = t.runs.get(run_key(c.run))? else {
                held.passed_over(c);
                continue;
            };
            slot.insert(decode("run", &raw).or_else(abort)?);
        }
        // Taken back meanwhile (its run cancelled, or one of its identities quarantined), or
        // counted as the checker said: nothing to dispute.
        let stored = match e.metas[&c.run].is_cancelled() {
            true => None,
            false => groups::txn_counts(t.results.groups, c.run, &c.key)?,
        };
        // (Taken back by another dispute, open: the checker waits for it, and is taken up again
        // once it ends ([`Store::take_up_waiting`]). Before, its identities were moot at once, and
        // a liar whose kept lie a colluder had put in dispute was released: found by a review,
        // 2026-12-01.)
        if stored.is_none()
            && !e.metas[&c.run].is_cancelled()
            && job_record(t.jobs, &job_key(c.run, &c.key))?
                .is_some_and(|r| r.state == JobState::Disputed)
        {
            held.challenges.insert(0, c);
            break;
        }
        if stored.is_none_or(|s| s == c.record.result) {
            held.passed_over(c);
            continue;
        }
        let Some(counted) = groups::txn_get(t.results, c.run, &c.key)? else {
            return abort(Error::Corrupt(format!(
                "run {} job {}: counts without a result",
                c.run, c.key
            )));
        };
        take_back(
            t.results,
            (t.jobs, t.totals, t.taken),
            e.out,
            (c.run, &c.key),
            counted,
            c.record,
        )?;
        e.disputed_runs.insert(c.run);
        held.open.push((c.run, c.key));
        disputed = true;
        break;
    }
    challenges::txn_put(t.kept, name, &held)?;
    if disputed {
        return Ok(());
    }
    // Nothing disputed now: released if every identity it contradicted is on the losing side,
    // behind a count passed over, or quarantined whole (those behind a count it waits for are none
    // of these, unless quarantined whole: then nothing is left to show, and it waits no more). Before, a contradiction passed
    // over left it held with no dispute open, and the next start made it whole (found by a review,
    // 2026-12-01: a colluder quarantining itself took its pair's count back before the decision).
    let mut shown_wrong = true;
    for by in
        q.by.iter()
            .filter(|by| !losing.contains(by) && !held.moot.contains(by))
    {
        shown_wrong &= quarantined_whole(t.quarantine, by)?;
    }
    if shown_wrong {
        t.quarantine.remove(name.as_bytes())?;
        t.kept.remove(name.as_bytes())?;
        e.out.lifted.push(q);
    } else if held.open.is_empty() && held.challenges.is_empty() {
        // Nothing left to hold it (an identity it contradicted stands: an old decider of a lifted
        // record joined it): its hold has ended, and the commit thread (or the start) ends it in
        // this round.
        // Before, it stayed held with no dispute until the next start (found by a review,
        // 2026-12-01).
        e.out.hold_ended.push(name.to_string());
    }
    Ok(())
}

/// Stores the new totals of the runs in `e.out.tallies`: a run whose last job they count is finished
/// (anew, where a count of it was disputed in the transaction), and a done run short of its jobs
/// (a count taken back) is running again.
pub(super) fn txn_settle(
    runs: &TransactionalTree,
    totals: &TransactionalTree,
    e: &mut Effects,
) -> TxResult<()> {
    for (run, tally) in &e.out.tallies {
        totals.insert(&run_key(*run), encode(tally))?;
        let meta = &e.metas[run];
        if tally.jobs > meta.jobs_total {
            return abort(Error::Corrupt(format!(
                "run {run} would have {} results for {} jobs",
                tally.jobs, meta.jobs_total
            )));
        }
        if tally.jobs == meta.jobs_total && (!meta.is_done() || e.disputed_runs.contains(run)) {
            let done = RunMeta {
                finished_unix: Some(now_unix()),
                ..meta.clone()
            };
            runs.insert(&run_key(*run), encode(&done))?;
            e.out.finished.push(done);
        } else if tally.jobs < meta.jobs_total && meta.is_done() {
            let open = RunMeta {
                finished_unix: None,
                ..meta.clone()
            };
            runs.insert(&run_key(*run), encode(&open))?;
            e.out.reopened.push(open);
        }
    }
    Ok(())
}

/// Whether the held checker whose kept contradictions are `kept` waits for them: no dispute of its
/// own is open (a decision for it took them up) and one is left. Its hold stands while one does.
pub(super) fn waits(kept: &Kept) -> bool {
    kept.open.is_empty() && !kept.challenges.is_empty()
}

impl Store {
    /// Whether `name`'s quarantine is stored held. A record that fails its check reads as held (the
    /// start mends it; nothing kept is dropped on it meanwhile).
    fn held(&self, name: &str) -> Result<bool> {
        Ok(match self.quarantine.get(name.as_bytes())? {
            Some(raw) => decode::<Quarantine>("quarantine", &raw).map_or(true, |q| q.held),
            None => false,
        })
    }

    /// Whether held checker `name` waits to take up a kept contradiction ([`waits`]). Kept
    /// contradictions that fail their check read as none.
    pub(super) fn waits(&self, name: &str) -> Result<bool> {
        Ok(match self.challenges.get(name.as_bytes())? {
            Some(raw) => decode::<Kept>("challenges", &raw).is_ok_and(|k| waits(&k)),
            None => false,
        })
    }

    /// Takes up the next kept contradiction of every held checker that waits for the dispute of its
    /// next one, where that dispute has ended (decided, failed, its job put back, its run
    /// cancelled): in one transaction, whose effects are returned as a commit's (not flushed). Before,
    /// nothing woke such a checker: it stayed held with no dispute open, the next start made it whole
    /// (its record counts taken back), and what it kept was never disputed.
    pub fn take_up_waiting(&self) -> Result<Committed> {
        let mut names = Vec::new();
        for item in self.challenges.iter() {
            let (name, raw) = item?;
            // (Damaged: dropped, logged, by the next decision for its checker, as before.)
            let Ok(kept) = decode::<Kept>("challenges", &raw) else {
                continue;
            };
            let name = String::from_utf8_lossy(&name).into_owned();
            // (Not held any more: stale, dropped by the take-up.)
            if !self.held(&name)? {
                names.push(name);
                continue;
            }
            let Some(next) = kept.challenges.first().filter(|_| waits(&kept)) else {
                continue;
            };
            // (Its run cancelled or gone: no dispute of it is decided any more.)
            let live = self.run(next.run)?.is_some_and(|m| !m.is_cancelled());
            let open = live
                && self
                    .job(next.run, &next.key)?
                    .is_some_and(|r| r.state == JobState::Disputed);
            if !open {
                names.push(name);
            }
        }
        if names.is_empty() {
            return Ok(Committed::default());
        }
        let trees = self.commit_trees();
        let committed = trees.transaction(
            |(runs, jobs, groups, workers, totals, quarantine, kept, taken)| {
                let t = Trees {
                    runs,
                    jobs,
                    results: groups::Tx { groups, workers },
                    totals,
                    quarantine,
                    kept,
                    taken,
                };
                let mut out = Committed::default();
                let (mut metas, mut disputed_runs) = (BTreeMap::new(), BTreeSet::new());
                let mut e = Effects {
                    out: &mut out,
                    metas: &mut metas,
                    disputed_runs: &mut disputed_runs,
                };
                for name in &names {
                    txn_take_up(&t, &mut e, name, &[])?;
                }
                txn_settle(runs, totals, &mut e)?;
                Ok(out)
            },
        )?;
        // A run running again has another root when it finishes (as for a revocation).
        for run in &committed.reopened {
            self.forget_certificate_root(run.id)?;
        }
        Ok(committed)
    }
}

/// Whether `name` is quarantined, and not held (inside a commit's transaction). A record that does
/// not decode is taken for held (the safe side: nothing is released on it).
fn quarantined_whole(
    tree: &sled::transaction::TransactionalTree,
    name: &str,
) -> super::txn::TxResult<bool> {
    Ok(match tree.get(name.as_bytes())? {
        Some(raw) => decode::<Quarantine>("quarantine", &raw).is_ok_and(|d| !d.held),
        None => false,
    })
}
