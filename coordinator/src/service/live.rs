//! A run as the coordinator holds it in memory: its stored metadata and totals, how many jobs are in each
//! state, where it is in its job list, the jobs to lease again, how often each job's lease ended without a
//! result, its recent completion rate (for the ETA), the workers that reported for it lately, and its
//! history (for the status page).
//!
//! The rate counts only this incarnation's work, from the moment a worker first took a job of the run
//! (its first lease, or its first result when a result of an earlier incarnation's lease comes first):
//! jobs done before a restart, and the time the run waited for workers, are not in it, so an ETA is
//! neither shortened by a resumed run's old jobs nor stretched by the idle time before workers joined.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use nqueens_common::{JobKey, Plan, Tally};
use tokio::time::Instant;

use crate::durable::store::{JobRecord, JobState, Phase, RunMeta};
use crate::error::Result;
use crate::service::history::{unix_seconds, History};
use crate::service::lease_table::Leases;
use crate::service::Expiries;

/// How far back the rate looks.
const RATE_WINDOW: Duration = Duration::from_secs(300);

/// Most worker ids a run remembers as having reported (its `active workers` figure): as many as the
/// worker table holds.
pub const MAX_REPORTERS: usize = super::workers::MAX_SEEN;

/// The smallest size of a run's reporters at which they are pruned.
const MIN_PRUNE: usize = 64;

/// Candidates for a lease ([`LiveRun::take_candidates`]): from the retry queue, then from the plan's list.
#[derive(Debug, Default)]
pub struct Candidates {
    pub retry: Vec<JobKey>,
    pub list: Vec<JobKey>,
    /// The run's count of looks when these were taken (see [`LiveRun::settle`]).
    pub look: u64,
    /// Whether keys were passed by that the asking identity is barred from for a while (a lease of
    /// theirs ended past half its hold): they are its again once the bar lapses, so it is not idle.
    pub barred: bool,
    /// Keys passed by unread, held for another identity by the records kept of them
    /// ([`LiveRun::settle`]): the asking identity may take them later, so it is not idle.
    pub held: usize,
}

impl Candidates {
    /// Every candidate, in order.
    pub fn keys(&self) -> impl Iterator<Item = &JobKey> {
        self.retry.iter().chain(&self.list)
    }
}

/// One run in memory.
pub struct LiveRun {
    pub meta: RunMeta,
    pub plan: Plan,
    /// The plan's fingerprint as a number (sent with leases, sealed into results).
    pub fingerprint: u64,
    /// Equal to the stored totals (updated after every commit).
    pub tally: Tally,
    /// The rest of the plan's job list not yet handed out in this incarnation (`None`: exhausted).
    cursor: Option<Box<dyn Iterator<Item = JobKey> + Send>>,
    /// Jobs whose lease ended (expired or released) without a result, and verified jobs waiting for
    /// another worker.
    retry: VecDeque<JobKey>,
    /// Keys of the plan's list taken by a lease call but not leased, in list order: handed out before
    /// the rest of the list.
    ahead: VecDeque<JobKey>,
    /// Candidates taken by lease calls that read their records with the lock released and have not
    /// settled them yet.
    in_flight: usize,
    /// Jobs that came back to the retry queue (handed back, expired, waiting for verification) so far.
    requeued: u64,
    /// Lease calls' takes of candidates so far, and the calls in the middle of a pass over the run (of
    /// one round or more): a call that hands keys back announces them only where another call looked
    /// while they were out of the queues, or is in the middle of its pass (its later rounds look at
    /// the queue as it was when it began); any other call looks at them itself.
    looks: u64,
    passes: usize,
    /// Jobs per state, as stored (pending jobs are not counted). Signed: the moves of two commits
    /// applied out of order add up the same (a move out of a state may come before the move into it).
    states: HashMap<JobState, i64>,
    /// Jobs put back (pending again) by a commit, and the latest such commit: an Accepted result of an
    /// older commit, applied after, must not end the lease the job has since.
    reopened_at: HashMap<JobKey, u64>,
    /// Leases of a job that expired in this incarnation, and under which workers.
    attempts: HashMap<JobKey, Expiries>,
    /// Verified jobs waiting in the retry queue, and the worker names known (from their stored
    /// records, read by earlier lease calls) to have computed them: a lease call of such a name passes
    /// them by without reading the store, or taking them out of the queue (which other waiting calls
    /// would then have to be woken for).
    computed_by: HashMap<JobKey, Vec<String>>,
    /// Verified jobs held back for another identity ([`super::steer::Steer::holds_at`]), with their
    /// records as a lease call read them: later calls decide from these whether the job is still held
    /// from them, and pass it by unread. Before, every look read every held job's record from the
    /// store: a run verifying every job among 1,000 identities spent two fifths of the coordinator's
    /// time there (measured, 2026-12-01). A record is dropped at any move of its job; one read while
    /// its job moved is never kept (see `out`).
    held_records: HashMap<JobKey, JobRecord>,
    /// Jobs drawn for (disputed, or waiting for a second result), with when (seconds since the Unix
    /// epoch) each last moved or its last lease ended: the draw counts its periods from then, from
    /// the results where later, or from the run's load or resumption (`opened_unix`) for one not
    /// known here ([`super::steer::Steer::holds_at`]). Before, it counted from the results alone: a
    /// seconder, a lease held long, a kept contradiction taken up late, a pause or a restart left
    /// periods spent, and the draw admitted everyone (found by reviews, 2026-12-01). Kept only for
    /// jobs leased or moved back while drawn for (a first result's own time counts for it), and
    /// dropped as each job leaves them.
    draw_since: HashMap<JobKey, u64>,
    /// When this run was loaded or last resumed, in seconds since the Unix epoch.
    opened_unix: u64,
    /// The wall clock of `draw_since` (the results' `at_unix`): seconds since the Unix epoch.
    clock: fn() -> u64,
    /// Candidates out with lease calls, read with the lock released: how many calls hold each (a key
    /// may be twice in the retry queue), and whether its job moved meanwhile (a record read may be
    /// older than the move: not kept in `held_records`). Before, one flag per key: a second call's
    /// take cleared the first's move (found by a review, 2026-12-01).
    out: HashMap<JobKey, Out>,
    /// Keys out of the queues for a lease: leased by this incarnation's calls, or passed by (dropped
    /// from the queues) while a lease held them. Each leaves at its requeue, its count, or its job's
    /// end; [`LiveRun::strays`] puts back any whose job no lease holds any more. Before, each path
    /// that ends a lease had to put its job back itself, and three did not (a copy, a mismatch, a
    /// result not kept: found by a review, 2026-12-01, each mended where it ends the lease); a
    /// job so missed sat open in no queue until a restart.
    away: HashSet<JobKey>,
    /// When [`LiveRun::strays`] last looked (it looks once per lease timeout at most).
    strays_at: Option<Instant>,
    /// `(when, jobs done, total)` samples, oldest first; empty until a worker first takes a job of the
    /// run in this incarnation (the rate window starts there).
    samples: VecDeque<(Instant, u64, u128)>,
    /// Workers (by id) that reported a result for the run, and when they last did: at most
    /// [`MAX_REPORTERS`], pruned of those silent past the lease timeout once it doubles.
    reporters: HashMap<String, Instant>,
    /// The size of `reporters` at which it is pruned next, and when it last was (at the cap it is
    /// pruned at most once a second).
    prune_at: usize,
    pruned_at: Option<Instant>,
    /// Search nodes of the results reported for the run in this incarnation, and of those a GPU computed
    /// (u128: N = 28's search alone is more nodes than a u64 holds).
    reported_nodes: u128,
    gpu_nodes: u128,
    /// Sequence number of the commit whose totals `tally` holds.
    seq: u64,
    /// Sequence number of the latest commit that finished the run, reopened it, or put back one of its
    /// jobs (see [`LiveRun::finish`] and `open_at`): older ones say nothing of whether it is done.
    meta_seq: u64,
    /// Progress over time, for the status page.
    pub history: History,
    /// Counted results that a second identity confirmed (counted jobs checked independently).
    pub jobs_confirmed: u64,
    /// Of those, the ones whose two results came from two kernel families.
    pub jobs_two_families: u64,
    /// The Merkle root of the run's certificate (`nqueens certificate`), once computed after it
    /// finished; cleared when it reopens.
    pub root: Option<String>,
}

/// A candidate out with lease calls ([`LiveRun::take_candidates`]).
#[derive(Debug, Clone, Copy, Default)]
struct Out {
    /// The calls holding it.
    calls: u32,
    /// Whether its job moved since the first of them took it.
    moved: bool,
}

/// Who asks [`LiveRun::settle`] for jobs, and what it may be leased.
#[derive(Clone, Copy)]
pub struct Asking<'a> {
    /// Its identity.
    pub name: &'a str,
    /// Whether it may decide a dispute (it has a record).
    pub may_decide: bool,
    /// Which second results wait for another kernel family or a drawn identity: made at the first job
    /// that could wait.
    pub steer: &'a dyn Fn() -> super::steer::Steer,
}

#[cfg(test)]
impl<'a> Asking<'a> {
    /// Identity `name`, with a record, steered nowhere (tests of what else decides a lease).
    pub fn plain(name: &'a str) -> Asking<'a> {
        Asking {
            name,
            may_decide: true,
            steer: &super::steer::Steer::none,
        }
    }
}

/// What [`LiveRun::settle`] decided.
#[derive(Debug, Default)]
pub struct Settled {
    /// The keys to lease.
    pub chosen: Vec<JobKey>,
    /// Keys that went back to the retry queue.
    pub requeued: usize,
    /// Whether a key went back that another lease call waiting may now find (held keys aside): only
    /// where another call looked at the run's queues while it was out of them, or is in the middle of
    /// its pass ([`LiveRun::news_since`]). A call that looked before saw it; one that looks after
    /// finds it.
    pub returned: bool,
    /// Keys held for a worker of another kernel family or a drawn identity (the asking worker may take
    /// them later).
    pub held: usize,
    /// Of the keys to lease, those whose job holds a result already (a verified job's first, or a
    /// dispute's): their leases may confirm or second ([`super::lease_table::Leases::mark_after_first`]).
    /// With the leases of the results each held as read.
    pub after_first: Vec<(JobKey, crate::durable::store::Sides)>,
    /// Of those, the disputed ones: their leases may second a side of that dispute, between the
    /// results of `after_first` ([`super::lease_table::Leases::mark_for_dispute`]).
    pub for_dispute: Vec<JobKey>,
}

impl LiveRun {
    /// A run as loaded from the store.
    pub fn new(meta: RunMeta, tally: Tally, states: HashMap<JobState, u64>) -> Result<LiveRun> {
        let plan = meta.plan()?;
        let fingerprint = meta.fingerprint_value()?;
        let cursor = (!meta.is_done() && !meta.is_cancelled()).then(|| plan.jobs());
        let mut history = History::default();
        history.record(unix_seconds(), tally.jobs, tally.total);
        Ok(LiveRun {
            history,
            jobs_confirmed: 0,
            jobs_two_families: 0,
            root: None,
            samples: VecDeque::new(),
            reporters: HashMap::new(),
            prune_at: MIN_PRUNE,
            pruned_at: None,
            reported_nodes: 0,
            gpu_nodes: 0,
            meta,
            plan,
            fingerprint,
            tally,
            cursor,
            retry: VecDeque::new(),
            ahead: VecDeque::new(),
            in_flight: 0,
            requeued: 0,
            looks: 0,
            passes: 0,
            states: states
                .into_iter()
                .map(|(state, n)| (state, i64::try_from(n).unwrap_or(i64::MAX)))
                .collect(),
            reopened_at: HashMap::new(),
            attempts: HashMap::new(),
            computed_by: HashMap::new(),
            held_records: HashMap::new(),
            draw_since: HashMap::new(),
            opened_unix: crate::durable::store::now_unix(),
            clock: crate::durable::store::now_unix,
            out: HashMap::new(),
            away: HashSet::new(),
            strays_at: None,
            seq: 0,
            meta_seq: 0,
        })
    }

    /// Candidates for a lease, taken out of the run's queues without reading the store: keys from the
    /// front of the retry queue (jobs handed back, and verified jobs waiting for another worker), at
    /// most `retry_left` of them and as many as wanted (at least `batch`), then keys of the plan's list,
    /// as many as still wanted (at least `batch`, to walk past done jobs quickly; those not used go
    /// back in front of the list). `retry_left` counts down the keys of the retry queue the lease call
    /// may still look at (0 once the queue is empty): retry keys not leased go to the back of the
    /// queue, so that a call's next round looks at others. Keys leased meanwhile are dropped (an
    /// expired lease puts its job back). The caller reads their records with the state lock released
    /// and hands every one back to [`LiveRun::settle`] (or, on a read error, [`LiveRun::put_back`]):
    /// until then they count as in flight, and the run is not dry.
    pub fn take_candidates(
        &mut self,
        leases: &Leases,
        asking: &Asking,
        want: usize,
        batch: usize,
        retry_left: &mut usize,
    ) -> Candidates {
        let run = self.meta.id;
        let name = asking.name;
        let mut retry = Vec::new();
        let mut passed = Vec::new();
        let mut barred = false;
        let mut held = 0;
        let mut made: Option<super::steer::Steer> = None;
        let mut looked = 0;
        while looked < want.max(batch) && *retry_left > 0 {
            let Some(key) = self.retry.pop_front() else {
                *retry_left = 0;
                break;
            };
            looked += 1;
            *retry_left -= 1;
            let computed = self
                .computed_by
                .get(&key)
                .is_some_and(|names| names.iter().any(|n| n == name));
            // (Or barred from it for a while: a lease of it ended past half its hold.)
            let bar = !computed && leases.barred(run, &key, name);
            barred |= bar;
            if computed || bar {
                passed.push(key);
            } else if leases.is_leased(run, &key) {
                // (Its lease's end puts it back.)
                self.away.insert(key);
            } else if let Some((own, holds)) = self.held_records.get(&key).map(|record| {
                // (A dispute is as good as its own to one that may not decide it: passed by, and
                // no reason to wait. Before, it was counted held from it: never told idle.)
                let own = record.computed_by(name)
                    || (record.state == JobState::Disputed && !asking.may_decide);
                let since = self.draw_since.get(&key).copied();
                let holds = !own
                    && made.get_or_insert_with(asking.steer).holds_at(
                        run,
                        &key,
                        record,
                        since.unwrap_or(self.opened_unix),
                    );
                (own, holds)
            }) {
                // Held for another identity, by the record a call read: decided from it, unread.
                if own {
                    // Its own result: it waits for another, as a read would say.
                    if self.held_records[&key].computed_by(name) {
                        self.computed(&key, name);
                    }
                    passed.push(key);
                } else if holds {
                    held += 1;
                    passed.push(key);
                } else {
                    retry.push(key);
                }
            } else {
                retry.push(key);
            }
        }
        // Known to be this worker's own already: to the back, never out of the queue.
        self.retry.extend(passed);
        let need = want.saturating_sub(retry.len());
        let mut list = Vec::new();
        if need > 0 {
            let take = need.max(batch);
            while list.len() < take {
                if let Some(key) = self.ahead.pop_front() {
                    list.push(key);
                    continue;
                }
                let Some(cursor) = self.cursor.as_mut() else {
                    break;
                };
                match cursor.next() {
                    Some(key) => list.push(key),
                    None => self.cursor = None,
                }
            }
        }
        self.in_flight += retry.len() + list.len();
        for key in retry.iter().chain(&list) {
            self.out.entry(key.clone()).or_default().calls += 1;
        }
        self.looks += 1;
        Candidates {
            retry,
            list,
            look: self.looks,
            barred,
            held,
        }
    }

    /// A call is done with candidate `key`: whether its job moved since it was taken (or is not
    /// known out: taken as moved).
    fn settled_out(&mut self, key: &JobKey) -> bool {
        let Some(out) = self.out.get_mut(key) else {
            return true;
        };
        let moved = out.moved;
        out.calls = out.calls.saturating_sub(1);
        if out.calls == 0 {
            self.out.remove(key);
        }
        moved
    }

    /// Jobs in the retry queue now.
    pub fn retry_len(&self) -> usize {
        self.retry.len()
    }

    /// Decides on the candidates of [`LiveRun::take_candidates`], given their stored records (read
    /// with the lock released; `None`: pending), in the same order: returns at most `want` to lease to
    /// the worker named `name`, never a job that is done, failed or leased, nor a verified job this
    /// worker has already computed (those wait in the retry queue for another worker; candidates
    /// beyond `want` go back where they came from, and second results `steer` holds for another kernel
    /// family or a drawn identity go back to the retry queue): see [`Settled`]. Keys back in the retry queue count as
    /// [requeued](LiveRun::requeued): a concurrent lease call that looked at the queue while they were
    /// out does not take the run for dry.
    pub fn settle(
        &mut self,
        leases: &Leases,
        asking: &Asking,
        candidates: Candidates,
        records: Vec<Option<JobRecord>>,
        want: usize,
    ) -> Settled {
        let Asking {
            name,
            may_decide,
            steer,
        } = *asking;
        let run = self.meta.id;
        self.in_flight = self
            .in_flight
            .saturating_sub(candidates.retry.len() + candidates.list.len());
        let from_retry = candidates.retry.len();
        // Whether another call may have missed these keys, and may wait without having seen them.
        let missed = self.news_since(candidates.look);
        let mut chosen: Vec<JobKey> = Vec::new();
        // (A set beside: a call may choose 4,096 of 8,192 candidates, each looked up. A scan of the
        // list was 25 million comparisons under the state lock: found by a review, 2026-12-01.)
        let mut chosen_keys: HashSet<JobKey> = HashSet::new();
        let (mut after_first, mut for_dispute) = (Vec::new(), Vec::new());
        let (mut retry_back, mut ahead_back, mut computed) = (Vec::new(), Vec::new(), Vec::new());
        // Second results held for a worker of another kernel family, or an identity drawn.
        let mut held = Vec::new();
        let mut reread = 0;
        let mut made: Option<super::steer::Steer> = None;
        let keys = candidates.retry.into_iter().chain(candidates.list);
        for (i, (key, record)) in keys.zip(records).enumerate() {
            // Whether the job moved since its record was read: the record may be older than the move.
            let moved = self.settled_out(&key);
            // The record kept, if any, is older than this read: this read decides what is kept.
            self.held_records.remove(&key);
            if leases.is_leased(run, &key) {
                // (Its lease's end puts it back.)
                self.away.insert(key);
                continue;
            }
            if chosen_keys.contains(&key) {
                continue;
            }
            let holds_result = record
                .as_ref()
                .is_some_and(|r| r.state.is_open() && !r.candidates.is_empty());
            match record {
                Some(r) if !r.state.is_open() => {}
                // (Not from a record older than a move: it is read again below. Before, a stale
                // record marked an identity whose result had gone, and the job was passed by for it
                // until it moved again: found by a review, 2026-12-01.)
                Some(r) if r.computed_by(name) && !moved => {
                    self.computed(&key, name);
                    computed.push(key)
                }
                // A dispute waits for a worker with a record of confirmed results.
                Some(r) if r.state == JobState::Disputed && !may_decide => computed.push(key),
                // A second result waits a while for a worker of another kernel family, or an
                // identity the draw admits; a dispute, for a decider its draw admits
                // ([`super::steer::Steer::holds_at`]).
                Some(r)
                    if super::steer::Steer::may_hold(&r)
                        && made.get_or_insert_with(steer).holds_at(
                            run,
                            &key,
                            &r,
                            self.draw_since
                                .get(&key)
                                .copied()
                                .unwrap_or(self.opened_unix),
                        ) =>
                {
                    if !moved && !self.meta.is_done() && !self.meta.is_cancelled() {
                        self.held_records.insert(key.clone(), r);
                    }
                    held.push(key)
                }
                // A job holding a result that moved since it was read (disputed since, say, or
                // taken back) is read again: its lease's marks would be of the record before.
                // Before, a lease drawn from a job's first result was issued with its mark after
                // the job became disputed (found by a review, 2026-12-01).
                // (Counted as held: the asking worker may take it at its next look, so it is not
                // told idle meanwhile.)
                _ if moved && holds_result => {
                    reread += 1;
                    match i < from_retry {
                        true => retry_back.push(key),
                        false => ahead_back.push(key),
                    }
                }
                Some(r) if chosen.len() < want => {
                    if holds_result {
                        let held = r.candidates.iter().map(|c| c.lease).collect();
                        after_first.push((key.clone(), held));
                        // (Its lease's end counts its draw's periods afresh.)
                        if !self.meta.is_done() && !self.meta.is_cancelled() {
                            self.draw_since
                                .entry(key.clone())
                                .or_insert(self.opened_unix);
                        }
                    }
                    // (Its sides are the results of `after_first`.)
                    if r.state == JobState::Disputed && holds_result {
                        for_dispute.push(key.clone());
                    }
                    chosen_keys.insert(key.clone());
                    chosen.push(key)
                }
                None if chosen.len() < want => {
                    chosen_keys.insert(key.clone());
                    chosen.push(key)
                }
                _ if i < from_retry => retry_back.push(key),
                _ => ahead_back.push(key),
            }
        }
        if self.meta.is_done() || self.meta.is_cancelled() {
            // (Never leased: the lease call puts back what a run no longer running chose.)
            return Settled {
                chosen,
                ..Settled::default()
            };
        }
        retry_back.extend(computed);
        // Held keys go back too, but wake no other call: they wait for a family or a drawn identity,
        // not for a lease.
        let returned = missed && (!retry_back.is_empty() || !ahead_back.is_empty());
        let held_back = held.len();
        retry_back.extend(held);
        let requeued = retry_back.len();
        self.requeued += requeued as u64;
        // To the back: the lease call's next round, and the next call, look at the keys after them.
        self.retry.extend(retry_back);
        for key in ahead_back.into_iter().rev() {
            self.ahead.push_front(key);
        }
        Settled {
            chosen,
            requeued,
            returned,
            held: held_back + reread,
            after_first,
            for_dispute,
        }
    }

    /// A lease call begins a pass over the run (its first round).
    pub fn begin_pass(&mut self) {
        self.passes += 1;
    }

    /// A lease call ends its pass over the run.
    pub fn end_pass(&mut self) {
        self.passes = self.passes.saturating_sub(1);
    }

    /// Whether keys taken at look `look` (see [`Candidates::look`]) and handed back now are news to
    /// another lease call: one looked at the run's queues since, or is in the middle of its pass.
    pub fn news_since(&self, look: u64) -> bool {
        self.looks != look || self.passes > 1
    }

    /// Lease calls' looks at the run so far.
    #[cfg(test)]
    pub fn looks(&self) -> u64 {
        self.looks
    }

    /// Hands back keys [`LiveRun::settle`] chose but that were not leased (the run stopped running
    /// meanwhile, or the caller's room was full).
    pub fn put_back_chosen(&mut self, chosen: Vec<JobKey>) {
        if !self.meta.is_done() && !self.meta.is_cancelled() {
            for key in chosen.into_iter().rev() {
                self.retry.push_front(key);
            }
        }
    }

    /// Hands candidates back unread (their records could not be read).
    pub fn put_back(&mut self, candidates: Candidates) {
        self.in_flight = self
            .in_flight
            .saturating_sub(candidates.retry.len() + candidates.list.len());
        for key in candidates.keys() {
            self.settled_out(key);
        }
        for key in candidates.list.into_iter().rev() {
            self.ahead.push_front(key);
        }
        for key in candidates.retry.into_iter().rev() {
            self.retry.push_front(key);
        }
    }

    /// Whether other lease calls hold candidates of the run they have not settled yet.
    pub fn candidates_in_flight(&self) -> bool {
        self.in_flight > 0
    }

    /// Whether the plan's job list has been handed out to the end in this incarnation (what is left is
    /// in the retry queue).
    pub fn list_exhausted(&self) -> bool {
        self.cursor.is_none() && self.ahead.is_empty()
    }

    /// Counts a lease of `key`, held by the worker named `worker`, that expired; returns the job's
    /// expiries in this incarnation.
    pub fn attempt_failed(&mut self, key: &JobKey, worker: &str) -> Expiries {
        let e = self.attempts.entry(key.clone()).or_default();
        e.add(worker);
        e.clone()
    }

    /// A failed job put back to pending by the operator: leased again, its expiries forgotten.
    pub fn retried(&mut self, key: &JobKey) {
        self.attempts.remove(key);
        self.moved(key, Some(JobState::Failed), None);
    }

    /// Records a job's change of state (`to: None`: pending again, and leased again), outside any
    /// commit (a lease's expiry).
    pub fn moved(&mut self, key: &JobKey, from: Option<JobState>, to: Option<JobState>) {
        // Done, failed, or pending again (its results taken back): whoever computed it is no longer
        // passed by. Nor when its candidates changed in the same state (a revocation dropped a
        // candidate and those that seconded it; a seconder joined one), or shrank from a dispute to
        // one (a revocation, which alone makes that move): the next lease call reads who still
        // stands behind one from the record.
        // Any move changes its record: the one kept of a held job is read again, and one being read
        // now is not kept.
        self.held_records.remove(key);
        if let Some(out) = self.out.get_mut(key) {
            out.moved = true;
        }
        // A dispute's draw counts its periods from its latest move (a new result, a seconder, its
        // candidates changed, or a kept contradiction taken up); so does that of a job back to one
        // result (a side dropped, a count taken back): its result is old. A first result's own time
        // counts for it.
        let drawn_anew =
            to == Some(JobState::Disputed) || (to == Some(JobState::Verifying) && from.is_some());
        if drawn_anew && !self.meta.is_cancelled() {
            self.draw_since.insert(key.clone(), (self.clock)());
        } else {
            self.draw_since.remove(key);
        }
        let shrank = from == Some(JobState::Disputed) && to == Some(JobState::Verifying);
        if !to.is_some_and(JobState::is_open) || from == to || shrank {
            self.computed_by.remove(key);
        }
        if !to.is_none_or(JobState::is_open) {
            // (Done or failed: never leased again.)
            self.away.remove(key);
        }
        if let Some(from) = from {
            *self.states.entry(from).or_insert(0) -= 1;
        }
        match to {
            Some(to) => *self.states.entry(to).or_insert(0) += 1,
            None => self.requeue(key.clone()),
        }
    }

    /// [`LiveRun::moved`] by commit `seq`. A job put back says the run was open at `seq`: a finish
    /// of an older commit applied after it is ignored (see [`LiveRun::finish`]), and the job is
    /// [reopened after](LiveRun::reopened_after) any older commit.
    pub fn moved_by(
        &mut self,
        key: &JobKey,
        from: Option<JobState>,
        to: Option<JobState>,
        seq: u64,
    ) {
        // Pending again, or a count disputed (done, then open again): put back.
        let taken_back = from == Some(JobState::Done) && to.is_some_and(JobState::is_open);
        if to.is_none() || taken_back {
            self.open_at(seq);
            let at = self.reopened_at.entry(key.clone()).or_insert(seq);
            *at = (*at).max(seq);
        }
        self.moved(key, from, to);
        // (`moved` puts a pending job back in line.) A count taken back is put back here, whichever
        // report's result took it back: the commit thread merges reports, and only the first one's
        // part carries the commit's moves (found by a review, 2026-11-29: a take-back by a later part
        // left its job disputed in no queue).
        if taken_back {
            self.requeue(key.clone());
        }
    }

    /// [`LiveRun::requeue`] of a job that commit `seq` left open (a verified job waiting for another
    /// result): the run was open at `seq`.
    pub fn requeue_by(&mut self, key: JobKey, seq: u64) {
        self.open_at(seq);
        self.requeue(key);
    }

    /// The run was open as of commit `seq`: a finish of an older commit is ignored from now on, and
    /// one applied already (older than `seq`) is undone.
    fn open_at(&mut self, seq: u64) {
        // A later commit's finish or reopen holds, and so does a finish of this very commit: a commit
        // that finishes a run puts back none of its jobs (a run its revocations reopen is not among
        // those it finished), yet its parts (one per report it merged) are applied in any order.
        if seq < self.meta_seq || (seq == self.meta_seq && self.meta.is_done()) {
            return;
        }
        self.meta_seq = seq;
        if self.meta.is_done() {
            self.meta.finished_unix = None;
        }
    }

    /// Whether job `key` was put back by commit `seq` or a later one: a commit's put-backs (its
    /// revocations) come after its results, whichever of its parts is applied first.
    pub fn reopened_after(&self, key: &JobKey, seq: u64) -> bool {
        self.reopened_at.get(key).is_some_and(|&at| at >= seq)
    }

    /// Job `key`, waiting for verification, was computed by a worker named `name`: a lease call of
    /// that name passes it by from now on (see [`LiveRun::take_candidates`]).
    pub fn computed(&mut self, key: &JobKey, name: &str) {
        if self.meta.is_done() || self.meta.is_cancelled() {
            return;
        }
        let names = self.computed_by.entry(key.clone()).or_default();
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }

    /// Job `key` was counted by commit `seq`: a put-back older than that is over, and so are the
    /// expiries of its leases (the table keeps only jobs not done yet; a job reopened later starts its
    /// attempts anew).
    pub fn counted(&mut self, key: &JobKey, seq: u64) {
        self.away.remove(key);
        self.attempts.remove(key);
        self.computed_by.remove(key);
        self.held_records.remove(key);
        if self.reopened_at.get(key).is_some_and(|&at| at < seq) {
            self.reopened_at.remove(key);
        }
    }

    /// Takes a run that was done and is running again (its results were revoked), by commit `seq`;
    /// ignored after a later commit's finish (see [`LiveRun::finish`]).
    pub fn reopen(&mut self, meta: RunMeta, seq: u64) {
        if seq < self.meta_seq {
            return;
        }
        self.meta_seq = seq;
        self.root = None;
        self.meta = self.with_controls(meta);
    }

    /// `meta` (from a commit) with the operator's controls as this run holds them: those are changed
    /// only by [`LiveRun::control`], which may have run since that commit.
    fn with_controls(&self, meta: RunMeta) -> RunMeta {
        RunMeta {
            paused: self.meta.paused,
            cancelled_unix: self.meta.cancelled_unix,
            priority: self.meta.priority,
            ..meta
        }
    }

    /// Takes the operator's controls of `meta` (as just stored); a cancelled run drops its job list.
    pub fn control(&mut self, meta: &RunMeta) {
        // Resumed: its draws count their periods afresh, known here or not. Before, a pause spent
        // them, and every identity could take its disputes and checks once it resumed (found by
        // reviews, 2026-12-01).
        if self.meta.paused && !meta.paused {
            let now = (self.clock)();
            self.opened_unix = now;
            for since in self.draw_since.values_mut() {
                *since = now;
            }
        }
        self.meta.paused = meta.paused;
        self.meta.cancelled_unix = meta.cancelled_unix;
        self.meta.priority = meta.priority;
        if meta.is_cancelled() {
            self.cursor = None;
            self.ahead.clear();
            self.retry.clear();
            // (Never leased again: what was kept for its jobs goes with them.)
            self.held_records.clear();
            self.draw_since.clear();
            self.away.clear();
            self.computed_by.clear();
        }
    }

    /// Jobs in a state.
    pub fn jobs_in(&self, state: JobState) -> u64 {
        self.states
            .get(&state)
            .map_or(0, |&n| u64::try_from(n).unwrap_or(0))
    }

    /// Where the run stands.
    pub fn phase(&self) -> Phase {
        self.meta.phase(&self.tally, self.jobs_in(JobState::Failed))
    }

    /// Puts a job whose lease ended back in line.
    pub fn requeue(&mut self, key: JobKey) {
        self.away.remove(&key);
        // A drawn-for job's lease ended: its draw counts its periods afresh, so that one held long
        // (or let lapse) leaves no periods spent.
        if let Some(since) = self.draw_since.get_mut(&key) {
            *since = (self.clock)();
        }
        if !self.meta.is_done() && !self.meta.is_cancelled() {
            self.retry.push_back(key);
            self.requeued += 1;
        }
    }

    /// Key `key` is leased now: out of the queues until its lease's end puts it back (or its count, or
    /// [`LiveRun::strays`]).
    pub fn leased(&mut self, key: &JobKey) {
        self.away.insert(key.clone());
    }

    /// Puts back in line every job out of the queues for a lease ([`LiveRun::leased`], or passed by
    /// while leased) that no lease holds now: a lease ended on a path that did not put its job back.
    /// Returns how many. The lease sweep calls it before it ends the leases due, so that a job whose
    /// last expiry fails it is not put back while its failure is written. A job done meanwhile is
    /// dropped by the next lease call that reads its record. It looks once per lease timeout at most
    /// (a look checks every lease out, under the state lock): a job missed waits about as long as
    /// one whose lease expired.
    pub fn strays(&mut self, leases: &Leases, now: Instant) -> usize {
        if self
            .strays_at
            .is_some_and(|at| now.saturating_duration_since(at) < leases.timeout())
        {
            return 0;
        }
        self.strays_at = Some(now);
        let run = self.meta.id;
        let stray: Vec<JobKey> = self
            .away
            .iter()
            .filter(|key| !leases.is_leased(run, key))
            .cloned()
            .collect();
        for key in &stray {
            self.requeue(key.clone());
        }
        stray.len()
    }

    /// How many jobs have come back to the retry queue so far (a lease call compares it before and
    /// after it looked at the queue).
    pub fn requeued(&self) -> u64 {
        self.requeued
    }

    /// A worker took a job of the run at `now`: the rate window starts here if it has not started yet.
    pub fn working(&mut self, now: Instant) {
        if self.samples.is_empty() {
            self.samples
                .push_back((now, self.tally.jobs, self.tally.total));
        }
    }

    /// Worker `worker` (its id) reported a result of `nodes` search nodes for the run at `now`, computed
    /// on a GPU if `on_gpu`; `took`: the run took it (a result under a lease of an open job), which
    /// makes the worker one of the run's for a while.
    pub fn reported_by(
        &mut self,
        worker: &str,
        nodes: u64,
        on_gpu: bool,
        took: bool,
        now: Instant,
        timeout: Duration,
    ) {
        self.reported_nodes = self.reported_nodes.saturating_add(u128::from(nodes));
        if on_gpu {
            self.gpu_nodes = self.gpu_nodes.saturating_add(u128::from(nodes));
        }
        if !took {
            return;
        }
        if let Some(t) = self.reporters.get_mut(worker) {
            *t = now;
            return;
        }
        // Pruned once the map doubles, not at each new id: worker ids cost a caller nothing, and a
        // walk of the whole map per new id, under the state lock, grew with the square of the rate.
        let full = self.reporters.len() >= MAX_REPORTERS
            && self
                .pruned_at
                .is_none_or(|at| now - at >= Duration::from_secs(1));
        if self.reporters.len() >= self.prune_at || full {
            self.reporters.retain(|_, t| now - *t <= timeout);
            self.prune_at = (2 * self.reporters.len()).max(MIN_PRUNE);
            self.pruned_at = Some(now);
        }
        // Beyond the cap a new id is not counted among the run's workers (a figure shown, nothing
        // more); its nodes are.
        if self.reporters.len() < MAX_REPORTERS {
            self.reporters.insert(worker.to_string(), now);
        }
    }

    /// The share of the nodes reported for the run in this incarnation that GPUs searched (`None` before
    /// any was reported).
    pub fn gpu_share(&self) -> Option<f64> {
        (self.reported_nodes > 0).then(|| self.gpu_nodes as f64 / self.reported_nodes as f64)
    }

    /// The workers working on the run as of `now`: those holding a lease of it (`holders`, by id) and
    /// those that reported a result for it within `timeout`, less the ones in `gone` (left or lost).
    pub fn workers<'a>(
        &'a self,
        holders: impl IntoIterator<Item = &'a str>,
        gone: impl Fn(&str) -> bool,
        now: Instant,
        timeout: Duration,
    ) -> u32 {
        let mut ids: std::collections::HashSet<&str> = holders.into_iter().collect();
        ids.extend(
            self.reporters
                .iter()
                .filter(|(id, t)| now - **t <= timeout && !gone(id))
                .map(|(id, _)| id.as_str()),
        );
        ids.len() as u32
    }

    /// Takes the totals of commit `seq` (ignoring an older commit's that arrive after a newer one's).
    pub fn update(&mut self, tally: Tally, seq: u64, now: Instant) {
        // A later commit's totals supersede; the same commit's (split among its batches) apply once.
        if seq <= self.seq {
            return;
        }
        self.seq = seq;
        if tally.jobs < self.tally.jobs {
            // Results were revoked: the rate window starts again.
            self.samples.clear();
        }
        self.tally = tally;
        self.history.record(unix_seconds(), tally.jobs, tally.total);
        // A first result without a lease of this incarnation (reported under an earlier one's) starts
        // the window after it: a result computed before this incarnation is not in its rate.
        self.samples.push_back((now, tally.jobs, tally.total));
        while self.samples.len() > 2
            && self
                .samples
                .front()
                .is_some_and(|s| now - s.0 > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Marks the run finished by commit `seq`: nothing more to lease. Each request applies its own
    /// commit to memory, in any order: a finish older than the last reopen (results revoked by a later
    /// commit, their jobs requeued) is ignored, as an older reopen after a later finish is. Returns
    /// whether it was applied.
    pub fn finish(&mut self, meta: RunMeta, seq: u64) -> bool {
        if seq < self.meta_seq {
            return false;
        }
        self.meta_seq = seq;
        self.meta = self.with_controls(meta);
        self.cursor = None;
        self.ahead.clear();
        self.retry.clear();
        true
    }

    /// Jobs and solutions per second over the recent window, as of `now` (zero before a worker took a
    /// job in this incarnation).
    pub fn rates(&self, now: Instant) -> (f64, f64) {
        // From the last sample the window has left behind (the totals as it began), else the oldest.
        let start = now.checked_sub(RATE_WINDOW);
        let behind = start.and_then(|s| self.samples.iter().rev().find(|x| x.0 <= s));
        let Some(first) = behind.or(self.samples.front()) else {
            return (0.0, 0.0);
        };
        let secs = (now - first.0).as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0);
        }
        (
            // Revocations can take jobs and solutions back within the window: never below zero.
            self.tally.jobs.saturating_sub(first.1) as f64 / secs,
            self.tally.total.saturating_sub(first.2) as f64 / secs,
        )
    }

    /// Seconds left at the recent rate; `None` before any rate is known (before this incarnation
    /// completed a job of the run), `Some(0)` once done.
    pub fn eta(&self, now: Instant) -> Option<f64> {
        if self.meta.is_done() {
            return Some(0.0);
        }
        if self.meta.is_cancelled() || self.meta.paused {
            return None;
        }
        let (jobs_per_s, _) = self.rates(now);
        (jobs_per_s > 0.0).then(|| (self.meta.jobs_total - self.tally.jobs) as f64 / jobs_per_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nqueens_common::Strategy;

    fn run(jobs_total: u64) -> RunMeta {
        let plan = Plan::new(12, Strategy::D4).unwrap();
        RunMeta {
            id: 1,
            n: 12,
            strategy: Strategy::D4,
            depth: plan.depth(),
            jobs_total,
            fingerprint: "0000000000000000".into(),
            created_unix: 0,
            finished_unix: None,
            verify_fraction: 0.0,
            paused: false,
            cancelled_unix: None,
            priority: 0,
            checks: crate::durable::store::Checks::Keyed,
            record: false,
            max_error: None,
        }
    }

    /// A commit's run record applied after a control keeps the operator's controls as they are in
    /// memory (pause, cancel and priority): the commit may predate the control (found by cargo mutants,
    /// 2026-11-29: any one of the three could be dropped unseen).
    #[test]
    fn a_finish_or_reopen_keeps_the_controls_made_since_its_commit() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let mut steered = run(100);
        (steered.paused, steered.cancelled_unix, steered.priority) = (true, Some(7), 5);
        live.control(&steered);
        let mut done = run(100);
        done.finished_unix = Some(9);
        assert!(live.finish(done.clone(), 1));
        assert_eq!(
            (
                live.meta.paused,
                live.meta.cancelled_unix,
                live.meta.priority
            ),
            (true, Some(7), 5)
        );
        assert_eq!(live.meta.finished_unix, Some(9), "the rest is the commit's");
        live.reopen(run(100), 2);
        assert_eq!(
            (
                live.meta.paused,
                live.meta.cancelled_unix,
                live.meta.priority
            ),
            (true, Some(7), 5)
        );
        assert_eq!(live.meta.finished_unix, None);
    }

    /// A run's reporters are capped and pruned once they double, not at each new id (a walk of the
    /// map per new id, under the state lock, grew with the square of the rate of fresh ids, which
    /// cost a caller nothing: found by a review, 2026-11-29); the count still drops the silent ones.
    #[tokio::test(start_paused = true)]
    async fn a_runs_reporters_are_bounded_and_pruned_once_they_double() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let timeout = Duration::from_secs(60);
        let now = Instant::now();
        // The first walk at 64 ids, none silent: the next at twice as many.
        for i in 0..=MIN_PRUNE {
            live.reported_by(&format!("w/{i}"), 1, false, true, now, timeout);
        }
        assert_eq!(live.prune_at, 2 * MIN_PRUNE);
        for i in 0..MAX_REPORTERS + 10 {
            live.reported_by(&format!("w/{i}"), 1, false, true, now, timeout);
        }
        assert_eq!(live.reporters.len(), MAX_REPORTERS);
        assert_eq!(
            live.workers([], |_| false, now, timeout),
            MAX_REPORTERS as u32
        );
        assert_eq!(
            live.reported_nodes,
            (MIN_PRUNE + 1 + MAX_REPORTERS + 10) as u128
        );
        // Later, the old ones silent: pruned at the next new id, since the map is at its cap.
        let later = now + timeout + Duration::from_secs(1);
        live.reported_by("fresh", 1, false, true, later, timeout);
        assert_eq!(live.reporters.len(), 1);
        assert_eq!(live.prune_at, MIN_PRUNE);
        assert_eq!(live.workers([], |_| false, later, timeout), 1);
        // Below the prune size nothing is walked: silent ids stay in the map, uncounted.
        for i in 0..10 {
            live.reported_by(&format!("x/{i}"), 1, false, true, later, timeout);
        }
        let last = later + timeout + Duration::from_secs(1);
        live.reported_by("y", 1, false, true, last, timeout);
        assert_eq!(live.reporters.len(), 12);
        assert_eq!(live.workers([], |_| false, last, timeout), 1);
    }

    /// Keys a lease call hands back wake the other calls only where one of them looked at the run's
    /// queues while the keys were out: a call that looked before saw them, one that looks after finds
    /// them (found by a review, 2026-11-30: every hand-back woke every waiting call, and two waiting
    /// calls that could take nothing woke each other round after round).
    #[test]
    fn keys_handed_back_are_news_only_to_a_call_that_looked_while_they_were_out() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let leases = Leases::new(1, [0; 16], Duration::from_secs(60));
        let asking = Asking {
            name: "a",
            may_decide: true,
            steer: &|| unreachable!("no record asks for a steer"),
        };
        // Alone: 2 of 4 keys of the list chosen, 2 back ahead of the list, no news.
        let mut left = 0;
        let alone = live.take_candidates(&leases, &Asking::plain("a"), 2, 4, &mut left);
        let settled = live.settle(&leases, &asking, alone, vec![None; 4], 2);
        assert_eq!((settled.chosen.len(), settled.returned), (2, false));
        // Another call looks while the keys are out: news.
        let first = live.take_candidates(&leases, &Asking::plain("a"), 2, 4, &mut left);
        let second = live.take_candidates(&leases, &Asking::plain("b"), 1, 1, &mut left);
        let settled = live.settle(&leases, &asking, first, vec![None; 4], 2);
        assert_eq!((settled.chosen.len(), settled.returned), (2, true));
        // The later look's own hand-back: nobody looked since it took its keys.
        let settled = live.settle(&leases, &asking, second, vec![None; 1], 0);
        assert_eq!((settled.chosen.len(), settled.returned), (0, false));
        assert!(!live.candidates_in_flight());
    }

    /// Of the keys chosen, those whose job holds a result (a verified job's first, a dispute's) are
    /// leased after the first: their leases may confirm. A pending job's is not, nor an open job's
    /// with no result (a record mended from damage): its lease computes the first result, and kept
    /// past another's first, it would confirm it without the draw.
    #[test]
    fn only_a_key_whose_job_holds_a_result_is_leased_after_the_first() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let leases = Leases::new(1, [0; 16], Duration::from_secs(60));
        let asking = Asking {
            name: "a",
            may_decide: true,
            steer: &super::super::steer::Steer::none,
        };
        let mut left = 0;
        let taken = live.take_candidates(&leases, &Asking::plain("a"), 3, 3, &mut left);
        let keys: Vec<JobKey> = taken.keys().cloned().collect();
        let (_, _, _, first) = held_fixture();
        let mended = JobRecord {
            state: JobState::Verifying,
            candidates: Vec::new(),
            reason: Some(crate::durable::store::records::MENDED.into()),
        };
        let records = vec![None, Some(first), Some(mended)];
        let settled = live.settle(&leases, &asking, taken, records, 3);
        assert_eq!(settled.chosen, keys);
        let held: Box<[u64]> = Box::new([1]);
        assert_eq!(settled.after_first, [(keys[1].clone(), held)]);
    }

    /// A run, a job `[1, 2]` of it whose one result is "b"'s (at 1,000 s), and a lease table.
    fn held_fixture() -> (Leases, LiveRun, JobKey, JobRecord) {
        use crate::durable::store::ResultRecord;
        let leases = Leases::new(1, [0; 16], Duration::from_secs(60));
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        // (The clock of `held_steer`.)
        (live.opened_unix, live.clock) = (0, || 1_000);
        let key = JobKey(vec![1, 2]);
        let first = JobRecord {
            state: JobState::Verifying,
            candidates: vec![ResultRecord {
                result: nqueens_common::JobResult {
                    total: 8,
                    unique8: Some(8),
                    nodes: 9,
                },
                worker: "b".into(),
                worker_id: "b-1".into(),
                lease: 1,
                at_unix: 1_000,
                confirmed_by: Vec::new(),
                seal: Some(1),
                families: Vec::new(),
            }],
            reason: None,
        };
        (leases, live, key, first)
    }

    /// What 1,000 identities serving tell a lease call of "z" at 1,000 s: the draw admits about 4
    /// of them in the first period.
    fn held_steer() -> super::super::steer::Steer {
        use nqueens_common::FamilySet;
        super::super::steer::Steer {
            own: FamilySet::default(),
            others: std::sync::Arc::new(
                (0..1_000)
                    .map(|i| (format!("h{i}"), FamilySet::default()))
                    .collect(),
            ),
            wait: Duration::from_secs(300),
            now_unix: 1_000,
            name: "z".into(),
            secret: [3; 16],
        }
    }

    /// A dispute of the job of [`held_fixture`]: b's result and c's, both committed at 0 s.
    fn dispute_fixture(first: &JobRecord) -> JobRecord {
        let mut record = first.clone();
        let mut other = record.candidates[0].clone();
        other.result.total += 8;
        (other.worker, other.lease) = ("c".into(), 2);
        record.candidates.push(other);
        for c in &mut record.candidates {
            c.at_unix = 0;
        }
        record.state = JobState::Disputed;
        record
    }

    /// One look of `asking` at the run (every key in the retry queue), `record` read for `key` and
    /// every other job done: the keys chosen, those marked for a dispute, and how many were held.
    fn look_at(
        live: &mut LiveRun,
        leases: &Leases,
        asking: &Asking,
        key: &JobKey,
        record: &JobRecord,
    ) -> (Vec<JobKey>, Vec<JobKey>, usize) {
        let mut left = live.retry_len();
        let taken = live.take_candidates(leases, asking, 1, 1, &mut left);
        let held_unread = taken.held;
        let records = taken
            .keys()
            .map(|k| {
                Some(if k == key {
                    record.clone()
                } else {
                    JobRecord::done()
                })
            })
            .collect();
        let settled = live.settle(leases, asking, taken, records, 1);
        (
            settled.chosen,
            settled.for_dispute,
            held_unread + settled.held,
        )
    }

    /// The draw of a dispute's deciders counts its periods from the job's latest move or lease end
    /// (the run's load, for one not known), not from its latest result: a dispute whose results are
    /// old, seconded, taken up late, or held long by a lease is drawn afresh. Before, its periods were
    /// spent and it went to whoever asked (found by a review, 2026-12-01).
    #[test]
    fn a_disputes_draw_counts_from_its_latest_move_or_lease_end() {
        let (leases, mut live, key, first) = held_fixture();
        let dispute = dispute_fixture(&first);
        // 1,000 identities serve; it is 10,000 s: the results are 33 periods old.
        let steer = || super::super::steer::Steer {
            now_unix: 10_000,
            ..held_steer()
        };
        assert!(
            steer().holds_at(1, &key, &dispute, 10_000),
            "z is not drawn"
        );
        let asking = Asking {
            name: "z",
            may_decide: true,
            steer: &steer,
        };
        live.clock = || 10_000;
        // Loaded long ago: every identity may take it, and its lease is marked for the dispute.
        live.opened_unix = 0;
        live.requeue(key.clone());
        let (chosen, marked, _) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert_eq!((&chosen, &marked), (&vec![key.clone()], &vec![key.clone()]));
        // Its lease ends now: drawn afresh, held from z.
        live.requeue(key.clone());
        let (chosen, _, held) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert!(chosen.is_empty() && held == 1, "{chosen:?} {held}");
        // A move long ago (a seconder): z may take it; one now, and it is held again.
        live.draw_since.insert(key.clone(), 0);
        let (chosen, ..) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert_eq!(chosen, std::slice::from_ref(&key));
        live.requeue(key.clone());
        live.draw_since.insert(key.clone(), 0);
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Disputed));
        let (chosen, _, held) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert!(chosen.is_empty() && held == 1);
        assert_eq!(look_at(&mut live, &leases, &asking, &key, &dispute).2, 1);
        // Loaded now (a restart), its results old: held, read or kept; loaded long ago, taken.
        live.opened_unix = 10_000;
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Disputed));
        live.draw_since.clear();
        let (chosen, _, held) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert!(chosen.is_empty() && held == 1);
        assert_eq!(live.held_records.len(), 1);
        assert_eq!(look_at(&mut live, &leases, &asking, &key, &dispute).2, 1);
        live.opened_unix = 0;
        let (chosen, ..) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert_eq!(chosen, std::slice::from_ref(&key), "kept, then taken");
        // Paused long, then resumed: drawn afresh, as is one not known.
        live.requeue(key.clone());
        live.draw_since.insert(key.clone(), 0);
        let mut meta = live.meta.clone();
        meta.paused = true;
        live.control(&meta);
        meta.paused = false;
        live.control(&meta);
        assert_eq!(live.opened_unix, 10_000);
        let (chosen, _, held) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert!(chosen.is_empty() && held == 1);
        // Out of its dispute, forgotten.
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Disputed));
        assert!(live.draw_since.contains_key(&key));
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Done));
        assert!(live.draw_since.is_empty());
    }

    /// The draw of who gives a job its second result counts its periods from the job's latest lease
    /// end, a move back to one result, or the run's load or resumption, where later than the first
    /// result. Before, from the first result alone: a lease held long, a pause or a restart spent
    /// them, and a partner asking just after confirmed a lie (found by a review, 2026-12-01).
    #[test]
    fn a_checks_draw_counts_from_its_latest_lease_end_or_the_runs_resumption() {
        let (leases, mut live, key, mut first) = held_fixture();
        first.candidates[0].at_unix = 0;
        let steer = || super::super::steer::Steer {
            now_unix: 10_000,
            ..held_steer()
        };
        assert!(steer().holds_at(1, &key, &first, 10_000), "z is not drawn");
        let asking = Asking {
            name: "z",
            may_decide: true,
            steer: &steer,
        };
        live.clock = || 10_000;
        // Loaded long ago, its result old: z may take it.
        live.requeue(key.clone());
        let (chosen, marked, _) = look_at(&mut live, &leases, &asking, &key, &first);
        assert_eq!(chosen, std::slice::from_ref(&key));
        assert!(marked.is_empty(), "no dispute");
        // Its lease ends now: drawn afresh, held from z.
        live.requeue(key.clone());
        assert_eq!(look_at(&mut live, &leases, &asking, &key, &first).2, 1);
        // A first result forgets the clock (its own time counts); a count taken back sets it.
        live.moved(&key, None, Some(JobState::Verifying));
        assert!(live.draw_since.is_empty());
        live.moved(&key, Some(JobState::Done), Some(JobState::Verifying));
        assert_eq!(live.draw_since.get(&key), Some(&10_000));
        live.draw_since.clear();
        // Paused long, then resumed: drawn afresh.
        let mut meta = live.meta.clone();
        meta.paused = true;
        live.control(&meta);
        meta.paused = false;
        live.opened_unix = 0;
        live.control(&meta);
        live.requeue(key.clone());
        assert_eq!(look_at(&mut live, &leases, &asking, &key, &first).2, 1);
        // A control that resumes nothing (a priority changed) resets nothing.
        live.opened_unix = 0;
        meta.priority += 1;
        live.control(&meta);
        assert_eq!(live.opened_unix, 0);
        meta.paused = true;
        live.control(&meta);
        assert_eq!(live.opened_unix, 0, "paused: nothing reset");
    }

    /// A call chooses at most what it wants of jobs holding a result too, and a key put back to be
    /// read again goes back to the queue it came from (found by mutation testing of the change that
    /// split the choice by the record, 2026-12-01).
    #[test]
    fn jobs_holding_a_result_are_chosen_up_to_the_want_and_a_reread_key_keeps_its_queue() {
        let (leases, mut live, key, first) = held_fixture();
        let all = super::super::steer::Steer::none;
        let asking = Asking {
            name: "z",
            may_decide: true,
            steer: &all,
        };
        let other = JobKey(vec![1, 3]);
        live.requeue(key.clone());
        live.requeue(other.clone());
        let mut left = live.retry_len();
        let taken = live.take_candidates(&leases, &asking, 2, 2, &mut left);
        assert_eq!(taken.retry.len(), 2);
        let records = vec![Some(first.clone()), Some(first.clone())];
        let settled = live.settle(&leases, &asking, taken, records, 1);
        assert_eq!(settled.chosen, std::slice::from_ref(&key), "one wanted");
        assert_eq!(live.retry_len(), 1, "the other back in line");
        // The other, moved while read, goes back to the retry queue, not ahead of the list.
        let mut left = live.retry_len();
        let taken = live.take_candidates(&leases, &asking, 1, 1, &mut left);
        assert_eq!(taken.retry, std::slice::from_ref(&other));
        live.moved(&other, Some(JobState::Verifying), Some(JobState::Verifying));
        let settled = live.settle(&leases, &asking, taken, vec![Some(first.clone())], 1);
        assert!(settled.chosen.is_empty());
        assert_eq!(live.retry_len(), 1, "back in the retry queue");
        assert!(live.ahead.is_empty());
        // One of the list (ahead of it), moved while read, goes back ahead of the list.
        let mut left = live.retry_len();
        let _ = live.take_candidates(&leases, &asking, 1, 1, &mut left);
        live.ahead.push_front(other.clone());
        let mut left = 0;
        let taken = live.take_candidates(&leases, &asking, 1, 1, &mut left);
        assert_eq!(taken.list, std::slice::from_ref(&other));
        live.moved(&other, Some(JobState::Verifying), Some(JobState::Verifying));
        live.settle(&leases, &asking, taken, vec![Some(first.clone())], 1);
        assert_eq!(live.ahead.front(), Some(&other), "back ahead of the list");
        // A cancelled run keeps no clock for what it chose.
        let mut meta = live.meta.clone();
        meta.cancelled_unix = Some(1);
        live.control(&meta);
        live.draw_since.clear();
        // (Out with this call, unmoved.)
        live.out.insert(
            key.clone(),
            Out {
                calls: 1,
                moved: false,
            },
        );
        let taken = Candidates {
            retry: vec![key.clone()],
            list: Vec::new(),
            look: live.looks,
            barred: false,
            held: 0,
        };
        live.settle(&leases, &asking, taken, vec![Some(first.clone())], 1);
        assert!(live.draw_since.is_empty());
    }

    /// A job holding a result that moved while a call read it is read again, not leased from the
    /// record before the move: a lease drawn from a first result must not be issued after the job
    /// became disputed (found by a review, 2026-12-01). And a dispute held from every identity is
    /// passed by, not held, for one that may not decide it (never told idle, before).
    #[test]
    fn a_job_that_moved_while_read_is_read_again_and_a_dispute_holds_no_one_who_may_not_decide() {
        let (leases, mut live, key, first) = held_fixture();
        let dispute = dispute_fixture(&first);
        let all = super::super::steer::Steer::none;
        let asking = Asking {
            name: "z",
            may_decide: true,
            steer: &all,
        };
        live.requeue(key.clone());
        let mut left = live.retry_len();
        let taken = live.take_candidates(&leases, &asking, 1, 1, &mut left);
        live.moved(&key, Some(JobState::Verifying), Some(JobState::Disputed));
        let settled = live.settle(&leases, &asking, taken, vec![Some(first.clone())], 1);
        assert!(settled.chosen.is_empty(), "read again");
        assert_eq!(settled.held, 1, "not idle meanwhile");
        let (chosen, marked, _) = look_at(&mut live, &leases, &asking, &key, &dispute);
        assert_eq!((&chosen, &marked), (&vec![key.clone()], &vec![key.clone()]));
        // A dispute held from z (1,000 identities serve, it moved now); kept, then passed by unread.
        let steer = || super::super::steer::Steer {
            now_unix: 10_000,
            ..held_steer()
        };
        live.clock = || 10_000;
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Disputed));
        live.requeue(key.clone());
        let decider = Asking {
            name: "z",
            may_decide: true,
            steer: &steer,
        };
        assert_eq!(look_at(&mut live, &leases, &decider, &key, &dispute).2, 1);
        assert_eq!(live.held_records.len(), 1, "kept");
        let new = Asking {
            name: "z",
            may_decide: false,
            steer: &steer,
        };
        assert_eq!(look_at(&mut live, &leases, &new, &key, &dispute).2, 0);
        assert_eq!(look_at(&mut live, &leases, &decider, &key, &dispute).2, 1);
    }

    /// A record that says the asking identity computed the job, read while the job moved (a revocation
    /// dropped that result, say), marks nothing: the job is read again, and the next look, reading the
    /// record as it is now, offers it. Before, the stale record marked the identity as having computed
    /// the job, and the job was passed by for it until the job moved again (found by a review,
    /// 2026-12-01).
    #[test]
    fn a_record_read_while_its_job_moved_marks_no_one_as_having_computed_it() {
        let (leases, mut live, key, first) = held_fixture();
        let all = super::super::steer::Steer::none;
        let asking = Asking {
            name: "b",
            may_decide: true,
            steer: &all,
        };
        live.requeue(key.clone());
        let mut left = live.retry_len();
        let taken = live.take_candidates(&leases, &asking, 1, 1, &mut left);
        // b's side of the dispute goes meanwhile: the job is back to c's result alone.
        let read = dispute_fixture(&first);
        let mut now = read.clone();
        now.candidates.remove(0);
        now.state = JobState::Verifying;
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Verifying));
        let settled = live.settle(&leases, &asking, taken, vec![Some(read)], 1);
        assert!(settled.chosen.is_empty(), "read again");
        assert!(
            !live.computed_by.contains_key(&key),
            "marked from a stale record"
        );
        let (chosen, _, _) = look_at(&mut live, &leases, &asking, &key, &now);
        assert_eq!(chosen, [key]);
    }

    /// A verified job held from an identity is read once: later looks decide from the record kept and
    /// pass it by unread, until the job moves. A record read while its job moved is not kept. Before,
    /// every look read every held job's record: a run verifying every job among 1,000 identities spent
    /// two fifths of the coordinator's time there (measured, 2026-12-01).
    #[test]
    fn a_held_job_is_read_once_until_it_moves() {
        let (leases, mut live, key, first) = held_fixture();
        let steer = held_steer;
        assert!(steer().holds(1, &key, &first), "held from z");
        let asking = Asking {
            name: "z",
            may_decide: true,
            steer: &steer,
        };
        let look = |live: &mut LiveRun| {
            let mut left = live.retry_len();
            let taken = live.take_candidates(&leases, &asking, 1, 1, &mut left);
            let (read, held) = (taken.retry.len(), taken.held);
            // (Keys of the list, taken once the retry queue yields nothing: done.)
            let records = taken
                .keys()
                .map(|k| {
                    Some(if *k == key {
                        first.clone()
                    } else {
                        JobRecord::done()
                    })
                })
                .collect();
            let settled = live.settle(&leases, &asking, taken, records, 1);
            assert!(settled.chosen.is_empty());
            (read, held)
        };
        live.requeue(key.clone());
        assert_eq!(look(&mut live), (1, 0), "read, then held");
        assert_eq!(look(&mut live), (0, 1), "held unread");
        assert_eq!(look(&mut live), (0, 1));
        // A move (a candidate seconded, dropped, or the job counted) drops the record kept.
        live.moved(&key, Some(JobState::Verifying), Some(JobState::Verifying));
        assert_eq!(look(&mut live), (1, 0), "read again");
        assert_eq!(look(&mut live), (0, 1));
        live.counted(&key, 1);
        assert_eq!(look(&mut live), (1, 0), "read again");
        // A record read while its job moved may be older than the move: not kept.
        live.moved(&key, Some(JobState::Verifying), Some(JobState::Verifying));
        let mut left = live.retry_len();
        let taken = live.take_candidates(&leases, &asking, 1, 1, &mut left);
        assert_eq!(taken.retry, std::slice::from_ref(&key));
        live.moved(&key, Some(JobState::Verifying), Some(JobState::Verifying));
        assert!(taken.list.is_empty());
        live.settle(&leases, &asking, taken, vec![Some(first.clone())], 1);
        assert_eq!(look(&mut live), (1, 0), "read again");
        assert_eq!(look(&mut live), (0, 1));
        assert!(live.out.is_empty(), "nothing left out");
    }

    /// A record read by one of two calls holding the same key (twice in the retry queue) while its job
    /// moved is not kept, whichever call took the key later; a record kept is dropped at a fresh read
    /// that does not keep it. Before, the second call's take cleared the first's move: the first kept
    /// its record, older than the move, for good (found by a review, 2026-12-01).
    #[test]
    fn a_move_while_two_calls_hold_a_key_keeps_no_record() {
        let (leases, mut live, key, first) = held_fixture();
        let steer = held_steer;
        let asking = Asking {
            name: "z",
            may_decide: true,
            steer: &steer,
        };
        live.requeue(key.clone());
        live.requeue(key.clone());
        let take = |live: &mut LiveRun| {
            let mut left = 1;
            live.take_candidates(&leases, &asking, 1, 1, &mut left)
        };
        let a = take(&mut live);
        assert_eq!(a.retry, std::slice::from_ref(&key));
        live.moved(&key, Some(JobState::Verifying), Some(JobState::Done));
        let b = take(&mut live);
        assert_eq!(b.retry, std::slice::from_ref(&key));
        live.settle(&leases, &asking, a, vec![Some(first.clone())], 1);
        live.settle(&leases, &asking, b, vec![Some(JobRecord::done())], 1);
        assert!(live.held_records.is_empty() && live.out.is_empty());
        // Two calls hold the key and nothing moves: the later settle's record is kept.
        live.requeue(key.clone());
        live.requeue(key.clone());
        let (a, b) = (take(&mut live), take(&mut live));
        live.settle(&leases, &asking, a, vec![Some(first.clone())], 1);
        live.held_records.clear();
        live.settle(&leases, &asking, b, vec![Some(first.clone())], 1);
        assert_eq!(live.held_records.len(), 1, "kept");
        live.held_records.clear();
        live.retry.clear();
        // A kept record that no longer holds the job from the asker: read, and the fresh read
        // decides what is kept (nothing: done).
        live.requeue(key.clone());
        live.held_records.insert(key.clone(), JobRecord::done());
        let c = take(&mut live);
        assert_eq!(c.retry, std::slice::from_ref(&key));
        live.settle(&leases, &asking, c, vec![Some(JobRecord::done())], 1);
        assert!(live.held_records.is_empty());
    }

    /// The first result's own identity, meeting a record another call kept, passes the job by as its
    /// own (a read would say so), not as held from it: held, it was never idle (found by a review,
    /// 2026-12-01). A cancelled run forgets what it kept.
    #[test]
    fn a_kept_record_of_the_askers_own_result_is_its_own() {
        let (leases, mut live, key, first) = held_fixture();
        let steer = held_steer;
        let by = |name| Asking {
            name,
            may_decide: true,
            steer: &steer,
        };
        live.requeue(key.clone());
        let mut left = 1;
        let z = live.take_candidates(&leases, &by("z"), 1, 1, &mut left);
        live.settle(&leases, &by("z"), z, vec![Some(first.clone())], 1);
        assert_eq!(live.held_records.len(), 1);
        let mut left = 1;
        let b = live.take_candidates(&leases, &by("b"), 1, 1, &mut left);
        assert_eq!((b.retry.len(), b.held), (0, 0));
        assert!(live.computed_by[&key].iter().any(|n| n == "b"));
        let mut cancelled = live.meta.clone();
        cancelled.cancelled_unix = Some(1);
        live.control(&cancelled);
        assert!(live.held_records.is_empty() && live.computed_by.is_empty());
    }

    /// The expiries of a job's leases are forgotten once it is counted: the table does not grow with
    /// every job that ever had one (found by a review, 2026-11-24, a later session).
    #[test]
    fn a_counted_job_forgets_its_expiries() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let key = live.plan.jobs().next().unwrap();
        live.attempt_failed(&key, "a");
        assert_eq!(live.attempt_failed(&key, "b").count, 2);
        live.counted(&key, 1);
        assert!(live.attempts.is_empty());
        assert_eq!(live.attempt_failed(&key, "a").count, 1, "anew");
    }

    /// A job out for a lease that no lease holds any more is put back by the sweep once, at most once
    /// per lease timeout; one counted, failed, or put back by its lease's end is not.
    #[tokio::test(start_paused = true)]
    async fn a_job_out_for_a_lease_no_lease_holds_is_put_back() {
        let timeout = Duration::from_secs(60);
        let mut leases = Leases::new(1, [0; 16], timeout);
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let keys: Vec<JobKey> = live.plan.jobs().take(5).collect();
        let now = Instant::now();
        let mut ids = Vec::new();
        for key in &keys {
            live.leased(key);
            ids.push(leases.issue(1, key.clone(), "w", "w", now));
        }
        assert_eq!(live.strays(&leases, now), 0, "every one leased");
        for id in &ids {
            leases.close(*id);
        }
        live.counted(&keys[0], 1);
        live.moved(&keys[1], None, Some(JobState::Failed));
        live.requeue(keys[2].clone());
        let requeued = live.requeued();
        assert_eq!(live.strays(&leases, now), 0, "looked a moment ago");
        let later = now + timeout;
        assert_eq!(live.strays(&leases, later), 2);
        assert_eq!(live.requeued(), requeued + 2);
        assert_eq!(live.retry_len(), 3);
        assert_eq!(live.strays(&leases, later + timeout), 0, "each once");
    }

    /// A key a lease call passes by because another lease holds it, as it takes candidates or as it
    /// settles them, is out for that lease: the sweep puts it back once no lease holds it.
    #[tokio::test(start_paused = true)]
    async fn a_key_passed_by_while_leased_is_put_back_once_no_lease_holds_it() {
        let timeout = Duration::from_secs(60);
        let mut leases = Leases::new(1, [0; 16], timeout);
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let now = Instant::now();
        // Taken from the retry queue while leased.
        let key = JobKey(vec![1, 2]);
        live.requeue(key.clone());
        let id = leases.issue(1, key.clone(), "w", "w", now);
        let mut left = 1;
        let taken = live.take_candidates(&leases, &Asking::plain("a"), 1, 1, &mut left);
        assert!(!taken.retry.contains(&key), "passed by");
        live.put_back(taken);
        leases.close(id);
        assert_eq!(live.strays(&leases, now), 1);
        assert_eq!(live.retry_len(), 1);
        // Leased while its record was read.
        let mut left = 1;
        let taken = live.take_candidates(&leases, &Asking::plain("a"), 1, 1, &mut left);
        assert_eq!(taken.retry.as_slice(), std::slice::from_ref(&key));
        let id = leases.issue(1, key.clone(), "w", "w", now);
        let settled = live.settle(&leases, &Asking::plain("a"), taken, vec![None], 1);
        assert!(settled.chosen.is_empty());
        assert_eq!(live.retry_len(), 0);
        leases.close(id);
        assert_eq!(live.strays(&leases, now + timeout), 1);
        assert_eq!(live.retry_len(), 1);
    }

    /// A lease call takes from the retry queue what it wants (at least its batch), not the whole
    /// queue: each candidate costs a store read, and a queue of a million jobs (a quarantined worker's
    /// results revoked) read whole by every call would make leasing quadratic in the queue.
    #[test]
    fn a_lease_takes_a_bounded_part_of_the_retry_queue() {
        let leases = Leases::new(1, [7; 16], Duration::from_secs(60));
        let mut live = LiveRun::new(run(100_000), tally(0, 0), HashMap::new()).unwrap();
        let keys: Vec<JobKey> = (0..5_000u32)
            .map(|i| JobKey(vec![(i >> 8) as u8, i as u8]))
            .collect();
        for key in &keys {
            live.requeue(key.clone());
        }
        let mut retry_left = live.retry_len();
        let taken = live.take_candidates(&leases, &Asking::plain("w"), 3, 8, &mut retry_left);
        assert_eq!(
            taken.retry,
            keys[..8].to_vec(),
            "the front of the queue, a batch of it"
        );
        assert!(taken.list.is_empty());
        assert_eq!(retry_left, 5_000 - 8);
        // What was not chosen goes to the back: the next round looks at keys it has not seen.
        let records = vec![None; taken.retry.len()];
        let requeued = live.requeued();
        let Settled {
            chosen,
            requeued: back,
            ..
        } = live.settle(
            &leases,
            &Asking {
                name: "w",
                may_decide: true,
                // Fresh jobs never make one (the pass over the worker table stays off this path).
                steer: &|| panic!("a steer made for fresh jobs"),
            },
            taken,
            records,
            3,
        );
        assert_eq!(chosen, keys[..3].to_vec());
        assert_eq!(back, 5);
        assert_eq!(
            live.requeued(),
            requeued + 5,
            "back in the queue: news to other calls"
        );
        let next = live.take_candidates(&leases, &Asking::plain("w"), 3, 8, &mut retry_left);
        assert_eq!(next.retry, keys[8..16].to_vec());
        assert_eq!(
            live.retry_len(),
            5_000 - 16 + 5,
            "the 5 not chosen wait at the back"
        );
        // A call may look at no more of the queue than it was given.
        let mut one = 1;
        let last = live.take_candidates(&leases, &Asking::plain("w"), 3, 8, &mut one);
        assert_eq!((last.retry.len(), one), (1, 0));
    }

    fn tally(jobs: u64, total: u128) -> Tally {
        Tally {
            total,
            unique8: None,
            nodes: 0,
            jobs,
        }
    }

    #[test]
    fn rate_and_eta_follow_a_run_of_known_progress() {
        let t0 = Instant::now();
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        live.working(t0);
        assert_eq!(live.eta(t0), None, "no rate yet");
        // 20 jobs and 1000 solutions in 10 s: 2 jobs/s, 100 solutions/s, 80 jobs left = 40 s.
        let t10 = t0 + Duration::from_secs(10);
        live.update(tally(20, 1_000), 1, t10);
        assert_eq!(live.rates(t10), (2.0, 100.0));
        assert_eq!(live.eta(t10), Some(40.0));
        // Later, the window still starts at t0: 60 jobs in 20 s.
        let t20 = t0 + Duration::from_secs(20);
        live.update(tally(60, 3_000), 2, t20);
        assert_eq!(live.rates(t20), (3.0, 150.0));
        assert_eq!(live.eta(t20), Some(40.0 / 3.0));
        // An older commit arriving late changes nothing.
        live.update(tally(50, 2_500), 1, t20);
        assert_eq!(live.tally.jobs, 60);
        // Samples older than the window fall out of it (two are always kept).
        let late = t0 + RATE_WINDOW + Duration::from_secs(30);
        live.update(tally(90, 4_500), 3, late);
        let (jobs_per_s, _) = live.rates(late);
        let since_t20 = (late - t20).as_secs_f64();
        assert!((jobs_per_s - 30.0 / since_t20).abs() < 1e-9, "{jobs_per_s}");
        assert_eq!(live.history.points().last().map(|p| p.jobs), Some(90));
        // A finished run has nothing left.
        live.finish(
            RunMeta {
                finished_unix: Some(1),
                ..run(100)
            },
            4,
        );
        assert_eq!(live.eta(late), Some(0.0));
    }

    /// A job put back by a later commit (a revocation) keeps a finish of an older commit, applied after
    /// it, from closing the run (the put-back says the run was open then), and is known as reopened
    /// after that older commit (whose Accepted result for it must not end the lease it has since).
    /// Found by a review, 2026-11-24: the older finish emptied the retry queue, the job was never
    /// leased again until a restart.
    #[test]
    fn a_job_put_back_by_a_later_commit_survives_an_older_finish() {
        let (j1, j2) = (JobKey(vec![0, 1]), JobKey(vec![0, 2]));
        let done = RunMeta {
            finished_unix: Some(1),
            ..run(4)
        };
        let mut live = LiveRun::new(run(4), tally(2, 20), HashMap::new()).unwrap();
        // Commit 1 finished the run; commit 2 reopened it and put j1 back; commit 3 put j2 back.
        // Applied 3, 1, 2.
        live.moved_by(&j2, Some(JobState::Done), None, 3);
        assert!(!live.finish(done, 1), "older than the put-back");
        live.reopen(run(4), 2);
        live.moved_by(&j1, Some(JobState::Done), None, 2);
        assert!(!live.meta.is_done());
        assert_eq!(live.retry.len(), 2, "both still to lease");
        assert!(live.reopened_after(&j2, 1) && live.reopened_after(&j1, 1));
        assert!(!live.reopened_after(&j2, 4) && !live.reopened_after(&j1, 3));
        // Applied 1, 3, 2: the put-back of 3 reopens the run the older finish closed.
        let mut live = LiveRun::new(run(4), tally(2, 20), HashMap::new()).unwrap();
        assert!(live.finish(
            RunMeta {
                finished_unix: Some(1),
                ..run(4)
            },
            1
        ));
        live.moved_by(&j2, Some(JobState::Done), None, 3);
        live.reopen(run(4), 2);
        live.moved_by(&j1, Some(JobState::Done), None, 2);
        assert!(!live.meta.is_done());
        assert_eq!(live.retry.len(), 2, "both still to lease");
    }

    /// The parts of one commit (one per report it merged) are applied in any order: a put-back of a
    /// job in one part is after the results of every part (revocations follow the transaction), and a
    /// finish in one part is the end of the run (a commit that finishes a run puts back none of its
    /// jobs; a verified job left open in another part is moot). Found by a review, 2026-11-24: the
    /// checks compared sequence numbers strictly, so a part's requeue reopened a run its own commit
    /// had finished, and a part's Accepted result ended the new lease of a job another part put back.
    #[test]
    fn the_parts_of_one_commit_apply_in_any_order() {
        let j = JobKey(vec![0, 1]);
        let done = RunMeta {
            finished_unix: Some(1),
            ..run(4)
        };
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        assert!(live.finish(done, 5));
        live.requeue_by(j.clone(), 5);
        assert!(live.meta.is_done(), "still done");
        assert!(live.retry.is_empty());
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.moved_by(&j, Some(JobState::Done), None, 5);
        assert!(live.reopened_after(&j, 5), "put back by the same commit");
        assert!(!live.reopened_after(&j, 6));
    }

    /// A count taken back (done, then disputed or verifying again) goes back in line with the commit's
    /// moves, whichever report's part applies them: only the first part of a merged commit carries
    /// them, and a take-back by a later part's result was requeued by nobody (found by a review,
    /// 2026-11-29: the job sat disputed in no queue until a restart). A job pending again is put back
    /// once; a job that stays open, or is done, is not.
    #[test]
    fn a_count_taken_back_goes_back_in_line_with_the_commits_moves() {
        let k = JobKey(vec![0, 1]);
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.moved_by(&k, Some(JobState::Done), Some(JobState::Disputed), 2);
        assert_eq!(live.retry, VecDeque::from([k.clone()]));
        assert!(live.reopened_after(&k, 2));
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.moved_by(&k, Some(JobState::Done), Some(JobState::Verifying), 2);
        assert_eq!(live.retry.len(), 1);
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.moved_by(&k, Some(JobState::Done), None, 2);
        assert_eq!(live.retry.len(), 1, "pending again: put back once");
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.moved_by(&k, Some(JobState::Verifying), Some(JobState::Disputed), 2);
        live.moved_by(&k, Some(JobState::Disputed), Some(JobState::Done), 3);
        assert!(
            live.retry.is_empty(),
            "open all along, or done: not put back"
        );
    }

    /// Job-state counts add up whatever order two commits' moves are applied in: a move out of a state
    /// applied before the move into it lost its decrement (a count stuck at 1 for good). Found by a
    /// review, 2026-11-24.
    #[test]
    fn job_state_counts_add_up_in_any_order() {
        let k = JobKey(vec![0, 1]);
        let mut live = LiveRun::new(run(4), tally(0, 0), HashMap::new()).unwrap();
        live.moved(&k, Some(JobState::Verifying), Some(JobState::Disputed));
        assert_eq!(
            live.jobs_in(JobState::Verifying),
            0,
            "never below zero shown"
        );
        live.moved(&k, None, Some(JobState::Verifying));
        assert_eq!(live.jobs_in(JobState::Verifying), 0);
        assert_eq!(live.jobs_in(JobState::Disputed), 1);
    }

    /// Each request applies its own commit to memory, in any order: a commit that revokes results of
    /// a finished run (reopening it, its jobs requeued) can be applied before the older commit that
    /// finished it. The older finish must not close the run again; a newer finish still holds against
    /// an older reopen. Before, the run showed done with a total short of the revoked results, and
    /// their jobs were never leased again until a restart. Found by a review, 2026-11-24.
    #[test]
    fn commits_applied_out_of_order_finish_and_reopen_a_run_as_the_latest_says() {
        let t0 = Instant::now();
        let done = RunMeta {
            finished_unix: Some(1),
            ..run(4)
        };
        // Commit 1 counts the last job; commit 2 takes one back. 2 is applied first.
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.reopen(run(4), 2);
        live.requeue(JobKey(vec![0, 1]));
        live.update(tally(3, 30), 2, t0);
        live.update(tally(4, 40), 1, t0);
        assert!(!live.finish(done.clone(), 1), "ignored");
        assert!(!live.meta.is_done(), "open, as commit 2 left it");
        assert_eq!(live.retry.len(), 1, "the revoked job still to lease");
        assert_eq!(live.tally.jobs, 3);
        // Commit 3 finishes it again; the older reopen of commit 2, applied late, changes nothing.
        let mut live = LiveRun::new(run(4), tally(3, 30), HashMap::new()).unwrap();
        live.update(tally(4, 40), 3, t0);
        assert!(live.finish(done, 3));
        live.reopen(run(4), 2);
        assert!(live.meta.is_done());
    }

    #[test]
    fn no_eta_before_this_incarnation_completed_a_job() {
        let t0 = Instant::now();
        let mut live = LiveRun::new(run(79), tally(0, 0), HashMap::new()).unwrap();
        assert_eq!(live.eta(t0 + Duration::from_secs(5)), None, "no worker yet");
        live.working(t0);
        assert_eq!(live.rates(t0 + Duration::from_secs(5)), (0.0, 0.0));
        assert_eq!(
            live.eta(t0 + Duration::from_secs(5)),
            None,
            "leased, none done"
        );
    }

    #[test]
    fn jobs_done_before_a_resume_are_not_in_the_rate() {
        // 49 of 79 jobs were done by an earlier count; this one does 1 job every 2 s.
        let t0 = Instant::now();
        let mut live = LiveRun::new(run(79), tally(49, 4_900), HashMap::new()).unwrap();
        live.working(t0);
        assert_eq!(live.eta(t0), None, "the resumed jobs are no rate");
        live.update(tally(50, 5_000), 1, t0 + Duration::from_secs(2));
        let t = t0 + Duration::from_secs(2);
        assert_eq!(live.rates(t), (0.5, 50.0));
        assert_eq!(live.eta(t), Some(58.0), "29 jobs left at 0.5 jobs/s");
    }

    #[test]
    fn the_rate_window_starts_when_a_worker_first_takes_a_job() {
        // Loaded at t0, no worker for 8 minutes; then 10 jobs in 10 s.
        let t0 = Instant::now();
        let mut live = LiveRun::new(run(70), tally(0, 0), HashMap::new()).unwrap();
        let joined = t0 + Duration::from_secs(480);
        live.working(joined);
        live.working(joined + Duration::from_secs(1)); // later leases move nothing
        let t = joined + Duration::from_secs(10);
        live.update(tally(10, 100), 1, t);
        assert_eq!(live.rates(t).0, 1.0);
        assert_eq!(
            live.eta(t),
            Some(60.0),
            "a minute of work left, not 8 minutes"
        );
    }

    #[test]
    fn a_first_result_from_an_earlier_incarnation_starts_the_window_after_it() {
        let t0 = Instant::now();
        let mut live = LiveRun::new(run(70), tally(0, 0), HashMap::new()).unwrap();
        // Computed under a lease of the coordinator before the restart: not this incarnation's work.
        live.update(tally(5, 50), 1, t0 + Duration::from_secs(300));
        let t = t0 + Duration::from_secs(301);
        assert_eq!(live.rates(t), (0.0, 0.0));
        assert_eq!(live.eta(t), None);
        live.update(tally(6, 60), 2, t0 + Duration::from_secs(302));
        assert_eq!(live.eta(t0 + Duration::from_secs(302)), Some(128.0));
    }

    #[test]
    fn issue_18_a_run_knows_the_share_of_its_nodes_that_gpus_searched() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(10);
        let mut live = LiveRun::new(run(70), tally(0, 0), HashMap::new()).unwrap();
        assert_eq!(live.gpu_share(), None, "nothing reported yet");
        live.reported_by("c-1", 10, false, true, t0, timeout);
        assert_eq!(live.gpu_share(), Some(0.0));
        live.reported_by("g-1", 30, true, true, t0, timeout);
        assert_eq!(live.gpu_share(), Some(0.75), "30 of 40 nodes from a GPU");
    }

    #[test]
    fn a_run_counts_only_the_workers_on_it() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(10);
        let mut live = LiveRun::new(run(70), tally(0, 0), HashMap::new()).unwrap();
        let none = |_: &str| false;
        assert_eq!(live.workers([], none, t0, timeout), 0, "no one works on it");
        assert_eq!(live.workers(["a-1", "a-1", "b-1"], none, t0, timeout), 2);
        live.reported_by("c-1", 10, false, true, t0, timeout);
        assert_eq!(live.workers(["a-1"], none, t0, timeout), 2);
        assert_eq!(
            live.workers(["a-1"], |id| id == "c-1", t0, timeout),
            1,
            "a reporter that left is not on it"
        );
        let later = t0 + timeout + Duration::from_secs(1);
        assert_eq!(
            live.workers([], none, later, timeout),
            0,
            "silent for a lease timeout"
        );
    }

    /// A job whose candidates changed in the same state (a revocation dropped a candidate and its
    /// seconders) forgets who computed it: those seconders may compute it again. A change of state
    /// between open states keeps it. Before, the coordinator passed them by for that job until a
    /// restart (found by a review, 2026-11-29).
    #[test]
    fn a_change_of_candidates_forgets_who_computed_the_job() {
        let mut live = LiveRun::new(run(4), tally(0, 0), HashMap::new()).unwrap();
        let key = JobKey(vec![0]);
        live.computed(&key, "first");
        live.moved(&key, None, Some(JobState::Verifying));
        assert!(
            live.computed_by.contains_key(&key),
            "a first result keeps it (the hot path)"
        );
        live.moved(&key, Some(JobState::Verifying), Some(JobState::Disputed));
        assert!(live.computed_by.contains_key(&key), "a dispute keeps it");
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Disputed));
        assert!(!live.computed_by.contains_key(&key));
        assert_eq!(live.jobs_in(JobState::Disputed), 1);
        // A revocation that leaves one candidate of a dispute (found by a review, 2026-11-29: the
        // seconders it dropped were passed by until a restart).
        live.computed(&key, "seconder");
        live.moved(&key, Some(JobState::Disputed), Some(JobState::Verifying));
        assert!(!live.computed_by.contains_key(&key));
        assert_eq!(live.jobs_in(JobState::Verifying), 1);
    }

    /// A counted job disputed (done, then open again) by commit 2: it is put back as of commit 2 (an
    /// older commit's count, applied after it, does not settle its leases), and a run finished by
    /// commit 1 is running again (found by a review, 2026-11-24, a later session).
    #[test]
    fn a_disputed_count_is_a_job_put_back() {
        let mut live = LiveRun::new(run(4), tally(3, 0), HashMap::new()).unwrap();
        let key = JobKey(vec![0]);
        let done = RunMeta {
            finished_unix: Some(1),
            ..run(4)
        };
        assert!(live.finish(done, 1));
        live.moved_by(&key, Some(JobState::Done), Some(JobState::Disputed), 2);
        assert!(live.reopened_after(&key, 1));
        assert!(!live.meta.is_done());
    }

    /// Rates are over the last five minutes: an hour after the last job was counted they are zero and
    /// the ETA unknown (found by a review, 2026-11-24, a later session: samples were dropped only when
    /// a job was counted, so the rates averaged over everything since and the ETA stayed finite).
    #[test]
    fn rates_fall_to_zero_once_nothing_is_counted() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let t0 = Instant::now();
        for i in 1..=6u64 {
            live.update(tally(2 * i, 0), i, t0 + Duration::from_secs(10 * i));
        }
        assert!(live.rates(t0 + Duration::from_secs(70)).0 > 0.0);
        assert!(live.eta(t0 + Duration::from_secs(70)).is_some());
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(live.rates(later), (0.0, 0.0));
        assert_eq!(live.eta(later), None);
    }
    /// The GPU share of a run's nodes past 2^64 nodes in one incarnation (N = 28's d4 search is about
    /// 5.9e19 nodes): the counts do not saturate (found by a review, 2026-11-25: u64 counters saturated
    /// about a third of the way in, and the share froze, or drifted to 1 while GPUs reported).
    #[test]
    fn the_gpu_share_holds_past_two_to_the_sixty_four_nodes() {
        let mut live = LiveRun::new(run(100), tally(0, 0), HashMap::new()).unwrap();
        let (now, timeout) = (Instant::now(), Duration::from_secs(60));
        for _ in 0..4 {
            live.reported_by("cpu", u64::MAX, false, true, now, timeout);
            live.reported_by("gpu", u64::MAX, true, true, now, timeout);
        }
        assert_eq!(live.gpu_share(), Some(0.5));
        live.reported_by("cpu", u64::MAX, false, true, now, timeout);
        live.reported_by("cpu", u64::MAX, false, true, now, timeout);
        let share = live.gpu_share().unwrap();
        assert!((share - 0.4).abs() < 1e-9, "{share}");
    }
}
