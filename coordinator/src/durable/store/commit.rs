//! Committing results: one sled transaction over `runs`, `jobs`, `result_groups`, `workers`, `totals`
//! and `quarantine`.
//!
//! A plain job's result is counted at once: the job is marked done, its result stored and added to the run
//! totals with checked u128 additions. A verified job's first result is only recorded (the job is
//! `verifying`); a result from a worker of another name that agrees with a recorded one is counted, and
//! the workers whose recorded results disagree with it are quarantined. Results that disagree with every
//! recorded one make the job `disputed` until a further worker decides; [`MAX_CANDIDATES`] results without
//! any two agreeing fail the job. A result for a job already done is compared, never added; different,
//! under a lease issued for the job, it quarantines its worker when that worker contradicts its own
//! counted result or a confirmed one, and disputes the count unless it was its own (taken back, the run
//! reopened: two that agreed may have agreed on a lie).

use std::collections::BTreeMap;

use nqueens_common::{JobKey, JobResult};
use sled::transaction::{ConflictableTransactionError as Abort, Transactional};

use super::changed::{Committed, Moved, Outcome};
use super::drawn::Drawn;
use super::records::{
    decode, encode, job_key, now_unix, run_key, JobRecord, JobState, Quarantine, ResultRecord,
};
use super::take_back::take_back;
use super::txn::{abort, job_record, stored_tally};
use super::{challenges, take_up};
use super::{groups, RunMeta, Store};
use crate::error::{Error, Result};

/// Most disagreeing results a verified job collects before it fails. Any two honest results agree and
/// decide the job (three, in a record run's dispute), so failing it takes this many less one lying
/// identities, each (after the second) with a record and a checked lease of the job, before a second
/// honest result: with 3, a pair of liars failed any job, and again after each retry, at no cost
/// (found by a review, 2026-11-29). (A disagreeing result needs no lease drawn for the dispute: a
/// lapsed one, or one of an earlier incarnation, adds a side. So five credentials, four with a
/// record and each holding a lease of the job, can fail it again after each retry: known.)
pub const MAX_CANDIDATES: usize = 6;

/// Identities that must stand behind a disputed job's count in a record run, and more than behind any
/// other trusted result of it: a majority of three. With two (the disputant and one decider), two
/// colluding credentials could take an honest result they disputed for a lie, quarantining its worker.
pub const RECORD_DISPUTE_MAJORITY: usize = 3;

/// A validated result on its way into the store.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub run: u64,
    pub key: JobKey,
    pub result: JobResult,
    /// The worker's process id and name.
    pub worker: String,
    pub name: String,
    pub lease: u64,
    /// The result's seal, checked against it before it got here.
    pub seal: u64,
    /// Whether the lease it names is one validation found issued for its job. A result for a job read as
    /// done or failed passes validation without one (it is only compared); should the job be open again
    /// by the commit (a revocation in between), the commit refuses the batch (`Error::Raced`) instead of
    /// counting a result no lease stands behind.
    pub lease_checked: bool,
    /// Whether the lease it names was issued for its job (its tag, which needs the store's secret, is
    /// that job's), remembered or not, and not known handed back: a result for a done job that differs
    /// from the counted one is evidence against its own sender under such a lease (see
    /// [`Store::commit`]). Against another worker's count it is evidence only under a lease checked
    /// (`lease_checked`: remembered): a tag is valid for good, and one kept from a lease handed back, its
    /// job since counted, must not take an honest count back.
    pub lease_issued: bool,
    /// Whether that lease is live: issued for its job to its identity, and not ended (a spot check
    /// being answered, say), or ended unsettled when another lease's count settled its job and silent
    /// since (an honest worker's lease that expired while colluders computed the job), or of an
    /// earlier incarnation and not handed back (its worker computed across a restart). Only such a
    /// lease's different result takes a confirmed count back: a tag kept from a lease long over (an
    /// honest answer to a check, a lease handed back) must not. And one identity takes back one per
    /// commit: shown wrong by it, it is quarantined, so that no credential reopens confirmed jobs in
    /// bulk.
    pub lease_active: bool,
    /// Whether its identity may decide a dispute: the operator's workers, or a worker credential with
    /// a record (a result a second identity confirmed, or a spot check passed). A disputed job is
    /// leased only to such identities; a result for one under any other lease (one that expired, say)
    /// is not kept, so that two fresh credentials cannot decide a dispute one of them opened.
    pub may_decide: bool,
    /// Verified whatever the run's fraction says: its identity reported it at a rate no device reaches
    /// (see `service::report::MAX_PLAUSIBLE_RATE`).
    pub check: bool,
    /// The kernel family that computed it, as its worker states it (not sealed, never trusted for a
    /// count: it steers and is shown).
    pub family: Option<nqueens_common::Family>,
    /// What the lease it names was drawn for (this incarnation's, remembered). Only under a lease
    /// issued while its job held results may it confirm or second another identity's result, and only
    /// one of those: under a lease issued before the first result (one that expired, or of an earlier
    /// incarnation), a partner's copy of a lie would count without the draw of confirmers (found by a
    /// review, 2026-12-01); a result the job came to hold later (a side left alone once the other's
    /// worker was quarantined) met no draw for it (found by a review, 2026-12-01). In a dispute, only
    /// under a lease drawn for it ([`Drawn::ForDispute`]), and only while each of its sides stands
    /// (the same dispute): a lease issued before the dispute (drawn to confirm, or a spot check's)
    /// was never drawn to decide it (found by a review, 2026-12-01); nor was one drawn for an earlier
    /// dispute of the job (known until 2026-12-01).
    pub drawn: Drawn,
}

impl Incoming {
    /// Its record as stored now (a candidate of a verified job, or a result counted unconfirmed).
    pub(crate) fn record(&self) -> ResultRecord {
        ResultRecord {
            result: self.result,
            worker: self.name.clone(),
            worker_id: self.worker.clone(),
            lease: self.lease,
            at_unix: now_unix(),
            confirmed_by: Vec::new(),
            seal: Some(self.seal),
            families: ResultRecord::families_of([self.family]),
        }
    }
}

impl Store {
    /// Applies a batch of results in one transaction. Not flushed: the caller flushes (once for a group
    /// of batches) before acknowledging any of them.
    pub fn commit(&self, batch: &[Incoming]) -> Result<Committed> {
        let trees = self.commit_trees();
        let committed = trees.transaction(
            |(runs, jobs, groups, workers, totals, quarantine, kept, taken)| {
            let results = groups::Tx { groups, workers };
            let mut out = Committed::default();
            let mut metas: BTreeMap<u64, RunMeta> = BTreeMap::new();
            // Workers shown wrong by a result of their own: quarantined once the batch is through (so
            // that their other results in it are taken, then revoked with the rest of theirs).
            let mut contradicted: Vec<Quarantine> = Vec::new();
            // Runs with a count disputed in this commit.
            let mut disputed_runs = std::collections::BTreeSet::new();
            // Quarantined identities a decision showed right, with the identities behind the side
            // it showed wrong: once the batch is through, each one held is released if every
            // identity it contradicted is shown wrong, or takes up its next kept contradiction
            // ([`challenges`]).
            let mut take_up: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for inc in batch {
                if let std::collections::btree_map::Entry::Vacant(slot) = metas.entry(inc.run) {
                    let Some(raw) = runs.get(run_key(inc.run))? else {
                        return abort(Error::UnknownRun(inc.run.to_string()));
                    };
                    slot.insert(decode("run", &raw).or_else(abort)?);
                }
                let meta = &metas[&inc.run];
                if meta.is_cancelled() {
                    // No result is added to it any more (a quarantine may still take some back).
                    return abort(Error::RunCancelled(inc.run.to_string()));
                }
                // A worker quarantined after its report was validated (by a commit queued before this
                // one, or earlier in this one) gets nothing counted: its results were revoked with the
                // quarantine, and one committed afterwards would never be.
                if let Some(raw) = quarantine.get(inc.name.as_bytes())? {
                    let q: Quarantine = decode("quarantine", &raw).or_else(abort)?;
                    return abort(Error::Quarantined {
                        worker: q.worker,
                        reason: q.reason,
                    });
                }
                let k = job_key(inc.run, &inc.key);
                if let Some(stored) = groups::txn_counts(results.groups, inc.run, &inc.key)? {
                    if stored == inc.result || !inc.lease_issued {
                        out.outcomes.push(compare(&stored, &inc.result));
                        continue;
                    }
                    // A different result under a lease issued for the job: one of the two is wrong.
                    let Some(counted) = groups::txn_get(results, inc.run, &inc.key)? else {
                        return abort(Error::Corrupt(format!(
                            "run {} job {}: counts without a result",
                            inc.run, inc.key
                        )));
                    };
                    // (Under the counted result's lease and another name, a worker renamed over its
                    // journal: one lease, two answers. Disputed below, which takes the count back.)
                    let own = counted.stands_behind(&inc.name);
                    // (Shown wrong already in this commit: it takes back one confirmed count, no
                    // more; quarantined, it takes back none after.)
                    let shown_wrong = contradicted.iter().any(|q| q.worker == inc.name);
                    if own || !counted.confirmed_by.is_empty() {
                        // It contradicts itself, or two workers that agreed: it is the wrong one.
                        // (Two that agreed may have agreed on a lie: see below.)
                        let takes_back = !own && inc.lease_active && !shown_wrong;
                        contradicted.push(Quarantine {
                            worker: inc.name.clone(),
                            reason: format!(
                                "run {} job {}: reported total {} nodes {}, {} is total {} nodes {}",
                                inc.run,
                                inc.key,
                                inc.result.total,
                                inc.result.nodes,
                                if own {
                                    "its own counted result"
                                } else {
                                    "the confirmed result"
                                },
                                stored.total,
                                stored.nodes
                            ),
                            at_unix: now_unix(),
                            // Shown wrong by two that agreed: lifted if both are disproved later.
                            by: match own {
                                true => Vec::new(),
                                false => std::iter::once(counted.worker.clone())
                                    .chain(counted.confirmed_by.iter().cloned())
                                    .collect(),
                            },
                            // In a record run, held until the dispute below is decided: it leases
                            // and counts nothing more, but its record counts stand meanwhile (each
                            // has a second identity behind it), and its result stands in the
                            // dispute. Before, the checker of a lie two colluders confirmed lost
                            // every record count at once, until three deciders lifted it. So is a
                            // later contradiction of the same commit under a live lease, which takes
                            // nothing back: its count goes once its confirmers are disproved. Before,
                            // it was whole, and made the checker's quarantine whole (found by a
                            // review, 2026-12-01: two colluders framed a checker that way).
                            held: !own && inc.lease_active && meta.record,
                            // (Taken back with its record counts should its hold end undecided.)
                            contradicted: match !own && inc.lease_active && meta.record {
                                true => vec![(inc.run, inc.key.clone())],
                                false => Vec::new(),
                            },
                        });
                        if takes_back {
                            // Two that agreed may have agreed on a lie (two colluding credentials):
                            // the count is taken back too, and further identities decide. Shown
                            // wrong, both are quarantined and this worker is lifted (its deciders
                            // disproved); shown right, it stays quarantined.
                            let against: Vec<String> = counted.identities().collect();
                            take_back(
                                results,
                                (jobs, totals, taken),
                                &mut out,
                                (inc.run, &inc.key),
                                counted,
                                inc.record(),
                            )?;
                            disputed_runs.insert(inc.run);
                            if meta.record {
                                // (Held: its kept contradictions wait for this dispute.)
                                challenges::txn_opened(
                                    kept,
                                    &inc.name,
                                    (inc.run, &inc.key),
                                    &against,
                                )?;
                            }
                        } else if !own && inc.lease_active && meta.record {
                            // Held, but its one take-back of the commit is spent: kept, and taken
                            // up once a decision shows it right ([`challenges`]).
                            challenges::txn_add(
                                kept,
                                &inc.name,
                                challenges::Challenge {
                                    run: inc.run,
                                    key: inc.key.clone(),
                                    record: inc.record(),
                                    against: counted.identities().collect(),
                                },
                            )?;
                        }
                        out.outcomes.push(Outcome::Mismatch { stored });
                        continue;
                    }
                    // Neither was confirmed. Under a lease no longer remembered (a tag kept from a lease
                    // handed back, its job since counted by another), a tag proves nothing against
                    // another's count: compared only.
                    if !inc.lease_checked {
                        out.outcomes.push(Outcome::Mismatch { stored });
                        continue;
                    }
                    // Disputed, a further worker decides.
                    take_back(
                        results,
                        (jobs, totals, taken),
                        &mut out,
                        (inc.run, &inc.key),
                        counted,
                        inc.record(),
                    )?;
                    out.outcomes.push(Outcome::Disputed);
                    disputed_runs.insert(inc.run);
                    continue;
                }
                let record = job_record(jobs, &k)?;
                let from = record.as_ref().map(|r| r.state);
                if from == Some(JobState::Failed) {
                    out.outcomes.push(Outcome::JobFailed);
                    continue;
                }
                // A verified job's results so far (none for a pending job). A candidate damaged on disk
                // is dropped here, loudly: it must neither count nor get an honest worker quarantined.
                let fingerprint = meta.fingerprint_value().or_else(abort)?;
                let mut candidates = record.map(|r| r.candidates).unwrap_or_default();
                // (The leases of every side stored, a damaged one among them: a side damaged on disk
                // still stands for the dispute a decider's lease was drawn for, and its decision drops
                // it. Checked against the intact ones alone, no decider's result was kept, and the
                // dispute stalled for good: found by a review, 2026-12-01.)
                let stored_sides: Vec<u64> = candidates.iter().map(|c| c.lease).collect();
                candidates.retain(|c| {
                    let intact = c.sealed(fingerprint, &inc.key);
                    if !intact {
                        tracing::error!(run = inc.run, job = %inc.key, worker = %c.worker, place = "store", "a stored candidate result fails its seal (damaged on disk); dropped");
                    }
                    intact
                });
                // The worker's own earlier result, or this very lease's under another name (a worker
                // restarted with a new name over the same journal, or a replay): one result, compared,
                // never a confirmation of itself. Lease ids are unique across incarnations.
                if let Some(own) = candidates
                    .iter()
                    .find(|c| c.stands_behind(&inc.name) || c.lease == inc.lease)
                {
                    out.outcomes.push(compare(&own.result, &inc.result));
                    continue;
                }
                if !inc.lease_checked {
                    // Read as settled when validated, open now: only a revocation in between does
                    // this. No checked lease stands behind the result, so it cannot count; the batch
                    // is refused for now, and validated anew when the worker sends it again.
                    return abort(Error::Raced {
                        run: inc.run.to_string(),
                        job: inc.key.to_string(),
                    });
                }
                let mine = inc.record();
                // (With those that confirmed an agreeing candidate: a count taken back from two. Not
                // a candidate of an identity shown wrong or quarantined earlier in this commit: its
                // revocation comes once the commit is through, and until then it must confirm
                // nothing.)
                // Whether an identity shown wrong or quarantined earlier in this commit stands behind
                // a candidate.
                let tainted = |c: &ResultRecord| {
                    c.identities().any(|n| {
                        contradicted
                            .iter()
                            .chain(&out.quarantined)
                            .any(|q| q.worker == n)
                    })
                };
                let trusted = |c: &&ResultRecord| c.result == inc.result && !tainted(c);
                let agreeing: Vec<String> = candidates
                    .iter()
                    .filter(trusted)
                    .flat_map(ResultRecord::identities)
                    .collect();
                // (Each identity's, in the order of `agreeing`: a candidate taken back from two
                // gives both, and both their families.)
                let agreeing_families: Vec<Option<nqueens_common::Family>> = candidates
                    .iter()
                    .filter(trusted)
                    .flat_map(|c| (0..=c.confirmed_by.len()).map(|i| c.family_at(i)))
                    .collect();
                // A job open for verification (a result waiting, or two disagreeing) stays verified
                // whatever the run record says: the record's fraction, damaged, must not let this
                // result count alone over the one waiting.
                let verified = inc.check
                    || meta.verifies(&self.lease_secret, &inc.key)
                    || from.is_some_and(JobState::is_open);
                // A disputed job is decided only by an identity that may decide: any other's result
                // for it (under a lease that expired, say) is not kept.
                if from == Some(JobState::Disputed) && !inc.may_decide {
                    out.outcomes.push(Outcome::NotKept);
                    continue;
                }
                // Nor does a result that agrees with another identity's confirm or second it, unless
                // its lease was issued while the job held a result already: a lease taken before the
                // first result (expired since, or of an earlier incarnation) never met the draw of
                // confirmers, and a partner could keep one to confirm a lie at will (found by a
                // review, 2026-12-01). Not kept: the job waits as it was, for an identity the draw
                // admits. (A result that disagrees still disputes: an honest worker's late result
                // takes a lie back.) Nor, in a dispute, unless its lease was issued for the dispute,
                // by the draw of deciders: a lease drawn to confirm (its holder a partner that let it
                // lapse), or a spot check's, seconds no side (found by a review, 2026-12-01).
                // (The dispute it was drawn for is this one while each of its sides stands: one
                // dropped, and the job left that dispute, whatever it holds now. Read here, from the
                // record: a lease's marks read by the service before the job left a dispute, committed
                // after the next one opened, seconded that one. A mark of no sides is no mark,
                // `Drawn::to_confirm`.)
                let drawn_for_this = inc.drawn.decides(|lease| stored_sides.contains(&lease));
                let undrawn = from == Some(JobState::Disputed) && !drawn_for_this;
                // Nor, out of a dispute, does one drawn for a dispute (the job left it: decided, or
                // back to one side) confirm the side left: it was drawn to decide, not to confirm.
                // (Before, the service took its marks off once the move was applied, and a report
                // checked before that confirmed all the same: found by a review, 2026-12-01.)
                let left = from != Some(JobState::Disputed) && inc.drawn.is_for_dispute();
                let drawn_to_confirm = candidates
                    .iter()
                    .filter(trusted)
                    .any(|c| inc.drawn.names(c.lease));
                if !agreeing.is_empty() && (!drawn_to_confirm || undrawn || left) {
                    out.outcomes.push(Outcome::NotKept);
                    continue;
                }
                // In a record run a dispute is decided by a majority of three: the side this result
                // agrees with must have three identities behind it, more than any other trusted
                // side. So a colluder who disputes an honest result needs two partners, not one, to
                // have it taken for a lie (and its worker quarantined); an honest side needs two
                // deciders where one sufficed, and a run of three identities, one of them wrong,
                // decides no dispute (other runs keep a majority of two, for small clusters). Short
                // of it, this identity seconds the side it agrees with, and the job waits, disputed,
                // for a further decider.
                if meta.record && from == Some(JobState::Disputed) && !agreeing.is_empty() {
                    let support = agreeing
                        .iter()
                        .chain(std::iter::once(&inc.name))
                        .collect::<std::collections::BTreeSet<_>>()
                        .len();
                    let rival = candidates
                        .iter()
                        .filter(|c| c.result != inc.result && !tainted(c))
                        .map(|c| c.identities().count())
                        .max()
                        .unwrap_or(0);
                    if support < RECORD_DISPUTE_MAJORITY || support <= rival {
                        let side = candidates
                            .iter()
                            .position(|c| trusted(&c))
                            .expect("a candidate agrees");
                        candidates[side].second(&inc.name, inc.family);
                        let record = JobRecord {
                            state: JobState::Disputed,
                            candidates,
                            reason: None,
                        };
                        jobs.insert(k, encode(&record))?;
                        out.moved.push(Moved {
                            run: inc.run,
                            key: inc.key.clone(),
                            from,
                            to: Some(JobState::Disputed),
                        });
                        out.outcomes.push(Outcome::Disputed);
                        continue;
                    }
                }
                if verified && agreeing.is_empty() {
                    // Recorded, not counted: a worker of another name must agree first.
                    candidates.push(mine);
                    let n = candidates.len();
                    let (to, outcome, reason) = if n == 1 {
                        (JobState::Verifying, Outcome::Pending, None)
                    } else if n < MAX_CANDIDATES {
                        (JobState::Disputed, Outcome::Disputed, None)
                    } else {
                        let why = format!("{n} workers gave as many different results");
                        (JobState::Failed, Outcome::JobFailed, Some(why))
                    };
                    let record = JobRecord {
                        state: to,
                        candidates,
                        reason,
                    };
                    jobs.insert(k, encode(&record))?;
                    out.moved.push(Moved {
                        run: inc.run,
                        key: inc.key.clone(),
                        from,
                        to: Some(to),
                    });
                    out.outcomes.push(outcome);
                    continue;
                }
                // A record run's dispute decided by a majority: an identity held by it on this side
                // (the checker whose contradiction opened it) is shown right, and released. Before, it
                // waited for the rule to lift it once its deciders were quarantined, and the rule
                // keeps two quarantines that name each other: a colluder quarantined whole elsewhere
                // by the checker and its partner kept the checker quarantined for good (found by a
                // review, 2026-12-01).
                // Only a quarantine this dispute holds: an identity that disproved it stands behind a
                // side this result shows wrong, and each other one is quarantined whole already (a
                // checker held by another dispute waits for that one; a held decider may be an honest
                // checker released later, and a release is never undone: found by a review of the
                // change).
                if meta.record && from == Some(JobState::Disputed) {
                    let losing: Vec<String> = candidates
                        .iter()
                        .filter(|c| c.result != inc.result)
                        .flat_map(ResultRecord::identities)
                        .collect();
                    for name in &agreeing {
                        let Some(raw) = quarantine.get(name.as_bytes())? else {
                            continue;
                        };
                        let Ok(q) = decode::<Quarantine>("quarantine", &raw) else {
                            continue;
                        };
                        // Shown right where one it contradicted is shown wrong: released once
                        // every other is too, after the batch (or its next kept contradiction
                        // is disputed).
                        // (Or its own dispute, whatever its other side became: identities
                        // quarantined whole leave it with the checker's result alone.)
                        let tied = q.by.iter().any(|by| losing.contains(by))
                            || challenges::txn_get(kept, name)?
                                .open
                                .contains(&(inc.run, inc.key.clone()));
                        if tied {
                            take_up.entry(name.clone()).or_insert_with(|| losing.clone());
                        }
                    }
                }
                // Counted: a plain job, or a verified job that a second worker confirmed. Every
                // identity behind a different candidate is shown wrong (both of a count taken back).
                let wrongs = candidates
                    .iter()
                    .filter(|c| c.result != inc.result)
                    .flat_map(|c| c.identities().map(move |name| (name, c)));
                for (name, wrong) in wrongs {
                    let q = Quarantine {
                        worker: name,
                        reason: format!(
                            "run {} job {}: reported total {} nodes {}, confirmed result is total {} nodes {}",
                            inc.run,
                            inc.key,
                            wrong.result.total,
                            wrong.result.nodes,
                            inc.result.total,
                            inc.result.nodes
                        ),
                        at_unix: now_unix(),
                        by: agreeing
                            .iter()
                            .cloned()
                            .chain(std::iter::once(inc.name.clone()))
                            .collect(),
                        // Decided: a held one is made whole by the join.
                        held: false,
                        contradicted: Vec::new(),
                    };
                    // (Whole: what was kept for it while held goes.)
                    kept.remove(q.worker.as_bytes())?;
                    put_quarantine(quarantine, &mut out, q)?;
                }
                let mut tally = match out.tallies.get(&inc.run) {
                    Some(t) => *t,
                    None => stored_tally(totals, inc.run)?,
                };
                tally.add(&inc.result).map_err(|e| Abort::Abort(e.into()))?;
                let counted = ResultRecord {
                    confirmed_by: agreeing,
                    families: ResultRecord::families_of(
                        std::iter::once(inc.family).chain(agreeing_families),
                    ),
                    ..mine
                };
                groups::txn_put(results, inc.run, &inc.key, &counted)?;
                out.counted.push((inc.run, inc.key.clone(), counted));
                // A done job is its result (store format 4): the verified job's record goes.
                if from.is_some() {
                    jobs.remove(k)?;
                }
                out.moved.push(Moved {
                    run: inc.run,
                    key: inc.key.clone(),
                    from,
                    to: Some(JobState::Done),
                });
                out.tallies.insert(inc.run, tally);
                out.outcomes.push(Outcome::Accepted);
            }
            for q in contradicted {
                put_quarantine(quarantine, &mut out, q)?;
            }
            // One whole after all (a contradiction of its own beside one kept): nothing it kept is
            // taken up.
            for q in out.quarantined.iter().filter(|q| !q.held) {
                kept.remove(q.worker.as_bytes())?;
            }
            let t = take_up::Trees {
                runs,
                jobs,
                results,
                totals,
                quarantine,
                kept,
                taken,
            };
            let mut e = take_up::Effects {
                out: &mut out,
                metas: &mut metas,
                disputed_runs: &mut disputed_runs,
            };
            for (name, losing) in &take_up {
                take_up::txn_take_up(&t, &mut e, name, losing)?;
            }
            // (One released, then quarantined again by a later result of the commit, stays.)
            let again: Vec<String> = e.out.quarantined.iter().map(|q| q.worker.clone()).collect();
            e.out.lifted.retain(|l| !again.contains(&l.worker));
            take_up::txn_settle(runs, totals, &mut e)?;
            Ok(out)
        })?;
        Ok(committed)
    }

    /// Marks a job that is not done failed (too many attempts), with the reason; durable on return.
    /// Returns the state it left, or `None` when it was done or failed already.
    pub fn fail_job(
        &self,
        run: u64,
        key: &JobKey,
        reason: &str,
    ) -> Result<Option<Option<JobState>>> {
        let moved = self.mark_failed(run, key, reason)?;
        self.flush()?;
        Ok(moved)
    }

    /// [`Store::fail_job`] without the flush: the committer makes it durable with its round.
    pub fn mark_failed(
        &self,
        run: u64,
        key: &JobKey,
        reason: &str,
    ) -> Result<Option<Option<JobState>>> {
        let k = job_key(run, key);
        let moved = (&self.jobs, &self.results).transaction(|(jobs, results)| {
            if groups::txn_counts(results, run, key)?.is_some() {
                return Ok(None);
            }
            let record = job_record(jobs, &k)?;
            let from = record.as_ref().map(|r| r.state);
            if matches!(from, Some(JobState::Done | JobState::Failed)) {
                return Ok(None);
            }
            let mut record = record.unwrap_or_else(JobRecord::done);
            record.state = JobState::Failed;
            record.reason = Some(reason.to_string());
            jobs.insert(k.as_slice(), encode(&record))?;
            Ok(Some(from))
        })?;
        Ok(moved)
    }
}

/// Stores quarantine `q` inside a commit's transaction, joined with the worker's quarantine stored
/// before (by an earlier commit, or earlier in this one: [`Quarantine::merged`]), so that a second
/// disproof adds its deciders instead of replacing the first's. A stored record that does not decode
/// joins as one naming no decider and not held (the worker is never lifted by the rule, and its
/// results are taken back: the safe side).
fn put_quarantine(
    tree: &sled::transaction::TransactionalTree,
    out: &mut Committed,
    q: Quarantine,
) -> super::txn::TxResult<()> {
    let q = match tree.get(q.worker.as_bytes())? {
        Some(raw) => match decode::<Quarantine>("quarantine", &raw) {
            Ok(before) => before.merged(q),
            Err(_) => Quarantine {
                by: Vec::new(),
                held: false,
                ..q
            },
        },
        None => q,
    };
    tree.insert(q.worker.as_bytes(), encode(&q))?;
    out.quarantined.retain(|o| o.worker != q.worker);
    out.quarantined.push(q);
    Ok(())
}

fn compare(stored: &JobResult, reported: &JobResult) -> Outcome {
    if stored == reported {
        Outcome::Duplicate
    } else {
        Outcome::Mismatch { stored: *stored }
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    /// Each outcome has its own name: the `outcome` label of `nqueens_results_total`, by which the
    /// dashboard splits results (issue 42: a mutant naming them all alike survived the unit tests).
    #[test]
    fn each_outcome_has_its_own_metric_label() {
        let stored = nqueens_common::JobResult::default();
        let names: Vec<&str> = [
            Outcome::Accepted,
            Outcome::Pending,
            Outcome::Disputed,
            Outcome::Duplicate,
            Outcome::Mismatch { stored },
            Outcome::JobFailed,
            Outcome::NotKept,
        ]
        .iter()
        .map(Outcome::name)
        .collect();
        assert_eq!(
            names,
            [
                "accepted",
                "pending",
                "disputed",
                "duplicate",
                "mismatch",
                "job_failed",
                "not_kept"
            ]
        );
    }
}
