//! The lease table, in memory only: which worker holds which job until when. On restart every leased job
//! is simply pending again (the worst case is recomputation, never loss or double counting).
//!
//! A lease id is `epoch << 40 | sequence`, and every lease carries a tag: SipHash-2-4 of the lease id,
//! the run, the job key and the identity it was issued to, under a 128-bit secret kept in the store
//! (created with it, never sent). A
//! report naming a lease of this incarnation must name the job that lease was for; one naming a lease of
//! an earlier incarnation must also repeat that lease's tag, which only this store's coordinators can
//! have computed. Nothing is accepted because it cannot be checked.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use std::hash::Hasher;

use nqueens_common::JobKey;
use siphasher::sip::SipHasher24;
use tokio::time::Instant;

use crate::durable::store::{Drawn, Sides};
use crate::error::{Error, Result};

const SEQ_BITS: u32 = 40;

/// One active lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    pub run: u64,
    pub key: JobKey,
    pub worker: String,
    /// The name of the worker it was issued to (a result under it counts only under that name).
    pub name: String,
    pub deadline: Instant,
    /// When it was issued (a result's rate is its nodes over the time since).
    pub issued: Instant,
    /// When its last heartbeat came (its issue, before any).
    pub beat: Instant,
    /// When its hold counts from: its issue, or for a barrable one the issue of an earlier lease of
    /// the job to the same identity less than a hold before ([`Leases::bar_at_hold`]).
    pub hold_from: Instant,
    /// Ended past half its hold, it bars its identity from its job for a hold ([`Leases::bar_at_hold`]).
    pub barrable: bool,
    /// What it was drawn for: to confirm one of its job's results, or to decide their dispute
    /// ([`Leases::mark_after_first`], [`Leases::mark_for_dispute`]).
    pub drawn: Drawn,
}

type JobId = (u64, JobKey);

/// A lease ended and still remembered.
#[derive(Debug)]
struct Ended {
    job: JobId,
    /// The identity it was issued to.
    name: String,
    /// Handed back unstarted by its worker.
    handed_back: bool,
    /// A result came back under it (credited once: see [`Leases::deliver`]).
    delivered: bool,
    /// Kept after its job was counted under another lease ([`Leases::settle_counted`]): forgotten once
    /// it delivers.
    outlived: bool,
    /// When it was issued (a late result's rate is still its nodes over the time since).
    issued: Instant,
    /// When its hold counted from ([`Lease::hold_from`]).
    hold_from: Instant,
    /// [`Lease::drawn`].
    drawn: Drawn,
}

/// Ended leases of one job still recognised for a late report: the most recent ones.
pub const PAST_PER_JOB: usize = 16;

/// Identities whose bars from one job are kept: past them, the bar that ends first goes (a lapsed
/// one, if any).
pub const BARS_PER_JOB: usize = 64;

/// One identity's bar from one job: until when, and how many times it was barred from the job
/// since the job was last counted in this incarnation. Its first bar lasts a hold, each later one
/// twice the one before, so that colluders taking turns at holding a job are all barred at once after
/// a few turns each, while an honest identity's first bar is a hold whatever others did.
#[derive(Debug)]
struct Bar {
    name: String,
    until: Instant,
    times: u32,
}

/// The longest bar: for good, as far as a run goes (and an instant that far ahead never overflows).
const MAX_BAR: Duration = Duration::from_secs(100 * 365 * 86_400);

impl Bar {
    /// How long its `times`-th bar lasts: a hold, doubled for each bar before, at most [`MAX_BAR`].
    fn length(hold: Duration, times: u32) -> Duration {
        hold.saturating_mul(1 << times.saturating_sub(1).min(16))
            .min(MAX_BAR)
    }
}

/// Leases of one identity kept past their jobs' counts ([`Leases::settle_counted`]): the most recent
/// ones. Each may carry one result that disputes an unconfirmed count; an identity that lets its leases
/// expire by the thousand keeps no more than these.
pub const OUTLIVED_PER_IDENTITY: usize = 1024;

/// Every lease of this incarnation whose job is not done yet.
#[derive(Debug)]
pub struct Leases {
    timeout: Duration,
    /// Longest a lease lives however many heartbeats it gets (`None`: no bound).
    max_hold: Option<Duration>,
    epoch: u64,
    /// The store's lease secret.
    secret: [u8; 16],
    next_seq: u64,
    active: HashMap<u64, Lease>,
    by_job: HashMap<JobId, u64>,
    /// Active leases per run and worker id: what a run's view counts, without a walk over every
    /// lease of every run (a view is built for each status call, watch stream and page).
    held: HashMap<u64, HashMap<String, u64>>,
    /// Active leases per worker name (identity), all runs together.
    by_name: HashMap<String, u64>,
    /// Ended leases still recognised: of jobs not done yet (a late result under one that expired or was
    /// closed is still accepted; under one handed back, refused), and of jobs counted meanwhile under
    /// another lease (a different result under one disputes the count: see [`Leases::settle_counted`]).
    past: HashMap<u64, Ended>,
    past_by_job: HashMap<JobId, Vec<u64>>,
    /// The outlived leases among `past`, per identity, oldest first (ids grow with their issue).
    outlived_by_name: HashMap<String, BTreeSet<u64>>,
    /// Leases of this incarnation ended because their run was cancelled: heartbeats name them, so that
    /// their workers drop the jobs.
    cancelled: HashSet<u64>,
    /// When each earlier incarnation on record began, by epoch: its leases were issued after.
    began: HashMap<u64, Instant>,
    /// Active leases that are spot checks ([`Leases::issue_check`]): ended, they are forgotten.
    checks: HashSet<u64>,
    /// Jobs whose lease ended past half its hold (ran out the hold, was handed back or fell silent
    /// then), and the identities they barred from them. Kept, lapsed bars too, until the job is
    /// counted or its run cancelled: an identity's count of bars makes each of its later ones last
    /// longer.
    barred: HashMap<JobId, Vec<Bar>>,
}

impl Leases {
    /// An empty table for one incarnation.
    pub fn new(epoch: u64, secret: [u8; 16], timeout: Duration) -> Leases {
        Leases {
            timeout,
            max_hold: None,
            epoch,
            secret,
            next_seq: 1,
            active: HashMap::new(),
            by_job: HashMap::new(),
            held: HashMap::new(),
            by_name: HashMap::new(),
            past: HashMap::new(),
            past_by_job: HashMap::new(),
            outlived_by_name: HashMap::new(),
            cancelled: HashSet::new(),
            began: HashMap::new(),
            checks: HashSet::new(),
            barred: HashMap::new(),
        }
    }

    /// The table, knowing when earlier incarnations began: `starts` in Unix seconds by epoch, read at
    /// `now_unix` (the store's records, see `store::epochs`).
    pub fn with_epoch_starts(
        mut self,
        starts: &std::collections::BTreeMap<u64, u64>,
        now_unix: u64,
    ) -> Leases {
        let now = Instant::now();
        self.began = starts
            .iter()
            .filter(|(epoch, _)| **epoch < self.epoch)
            .map(|(epoch, at)| {
                let ago = Duration::from_secs(now_unix.saturating_sub(*at));
                (*epoch, now.checked_sub(ago).unwrap_or(now))
            })
            .collect();
        self
    }

    /// The table, whose leases live at most `max_hold` from their issue, however many heartbeats
    /// they get: a credential that heartbeats its leases and never reports cannot hold their jobs for
    /// good (its leases then expire as silent ones do: a strike, the job leased again).
    pub fn holding_at_most(mut self, max_hold: Duration) -> Leases {
        self.max_hold = Some(max_hold);
        self
    }

    /// How long a lease lives without a heartbeat.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The deadline of a lease issued at `issued`, extended at `now`: a lease timeout from now, and
    /// never past its longest hold.
    fn deadline(&self, issued: Instant, now: Instant) -> Instant {
        let next = now + self.timeout;
        match self.max_hold {
            Some(hold) => next.min(issued + hold),
            None => next,
        }
    }

    /// Whether `lease` ends at its longest hold: its last heartbeat would have kept it past it. One
    /// whose worker fell silent earlier ends for want of a heartbeat, as it would have anyway.
    pub fn held_longest(&self, lease: &Lease) -> bool {
        self.max_hold
            .is_some_and(|hold| lease.beat + self.timeout > lease.hold_from + hold)
    }

    /// Whether `lease`, ending at `end` (handed back then, or expired with its deadline then), was held
    /// past half its longest hold: a barrable one bars its identity from its job for a hold, as one
    /// that runs out the hold does. Else a hoarder hands its leases back (or falls silent) just before
    /// the hold ends and leases them again at once, for another hold, whenever no other worker asks
    /// at that moment (found by a review, 2026-11-30). A worker that stops and starts again early in
    /// a lease gets its jobs back.
    pub fn held_past_half(&self, lease: &Lease, end: Instant) -> bool {
        self.max_hold
            .is_some_and(|hold| end > lease.hold_from + hold / 2)
    }

    /// Marks active lease `id` as one whose end past half its hold (running out the hold, or handed
    /// back or silent then) bars its identity from its job for a hold: an issued credential's (not the shared token's, every one of its workers; not the
    /// operator's, trusted). Else a hoarder that asks at the deadline takes the job back for another
    /// hold, and the run never ends (found by a review, 2026-11-29).
    ///
    /// Its hold counts from the issue of an earlier lease of the job to the same identity, if that was
    /// less than a hold ago: a hoarder that hands its leases back (or falls silent) before half its
    /// hold and leases the jobs again at once keeps the hold it began with, not a new one (found by a
    /// review, 2026-11-30). A worker that stops and starts again gets its jobs back with the hold it
    /// has left.
    pub fn bar_at_hold(&mut self, id: u64) {
        let Some(l) = self.active.get(&id) else {
            return;
        };
        let (job, name, issued) = ((l.run, l.key.clone()), l.name.clone(), l.issued);
        let earlier = match self.max_hold {
            Some(hold) => self
                .past_by_job
                .get(&job)
                .into_iter()
                .flatten()
                .filter_map(|past| self.past.get(past))
                .filter(|e| e.name == name && e.hold_from + hold > issued)
                .map(|e| e.hold_from)
                .min(),
            None => None,
        };
        if let Some(l) = self.active.get_mut(&id) {
            l.barrable = true;
            if let (Some(from), Some(hold)) = (earlier, self.max_hold) {
                l.hold_from = l.hold_from.min(from);
                l.deadline = l.deadline.min(l.hold_from + hold);
            }
        }
    }

    /// Whether the identity `name` is barred from job `key` of `run` now: a lease of it ended past half
    /// its hold ([`Leases::held_past_half`]), less than its bar ago ([`Leases::bar`]).
    pub fn barred(&self, run: u64, key: &JobKey, name: &str) -> bool {
        let now = Instant::now();
        self.barred
            .get(&(run, key.clone()))
            .is_some_and(|bars| bars.iter().any(|b| b.name == name && now < b.until))
    }

    /// Bars identity `name` from `job` from `now`: for a hold if it is its first bar from the job
    /// since the job's last count, else for twice its last ([`Bar`]). Other identities' bars stay.
    /// Before, one bar per job, for a hold, replaced the one before: two colluding credentials taking
    /// turns at holding a job (each handing it back or letting it run out past half its hold, the
    /// other leasing it at once) held it for good, the run never ending (found by a review,
    /// 2026-12-01). Now two colluders are both barred from their fourth turn on. (A first fix counted
    /// the job's bars, whoever's: an honest identity's first bar after the colluders' lasted as long
    /// as their last, up to 65,536 holds; found by the review of that fix.)
    fn bar(&mut self, job: JobId, name: String, now: Instant, hold: Duration) {
        let bars = self.barred.entry(job).or_default();
        let at = bars.iter().position(|b| b.name == name).unwrap_or_else(|| {
            bars.push(Bar {
                name,
                until: now,
                times: 0,
            });
            bars.len() - 1
        });
        let bar = &mut bars[at];
        bar.times = bar.times.saturating_add(1);
        bar.until = now + Bar::length(hold, bar.times);
        if bars.len() > BARS_PER_JOB {
            if let Some(first) = (0..bars.len()).min_by_key(|&i| bars[i].until) {
                bars.swap_remove(first);
            }
        }
    }

    /// Leases a job to a worker until `now + timeout`.
    pub fn issue(&mut self, run: u64, key: JobKey, worker: &str, name: &str, now: Instant) -> u64 {
        let id = (self.epoch << SEQ_BITS) | self.next_seq;
        self.next_seq += 1;
        self.by_job.insert((run, key.clone()), id);
        *self
            .held
            .entry(run)
            .or_default()
            .entry(worker.to_string())
            .or_default() += 1;
        *self.by_name.entry(name.to_string()).or_default() += 1;
        self.active.insert(
            id,
            Lease {
                id,
                run,
                key,
                worker: worker.to_string(),
                name: name.to_string(),
                deadline: self.deadline(now, now),
                issued: now,
                beat: now,
                hold_from: now,
                barrable: false,
                drawn: Drawn::Nothing,
            },
        );
        id
    }

    /// Marks active lease `id` as issued while its job held a result already (a verified job's first,
    /// or a dispute's): one the draw of confirmers or the dispute rule let its identity take. Only a
    /// result under such a lease confirms or seconds another identity's ([`Leases::drawn`]), and only
    /// one of `held` (the leases of the results the job held): a result the job came to hold later
    /// met no draw for this lease. (No results, no mark: [`Drawn::to_confirm`].)
    pub fn mark_after_first(&mut self, id: u64, held: Sides) {
        if let Some(l) = self.active.get_mut(&id) {
            l.drawn = Drawn::to_confirm(held);
        }
    }

    /// Marks active lease `id` as issued for its job's dispute: one the draw of deciders let its
    /// identity take ([`super::steer::Steer::admits_decider`]). Only a result under such a lease
    /// seconds a side of a dispute ([`Leases::drawn`]), and only of the dispute between the results
    /// its [`Leases::mark_after_first`] names: once one of them is gone, the job has left that
    /// dispute. (Not one marked with no results: [`Drawn::for_dispute`].)
    pub fn mark_for_dispute(&mut self, id: u64) {
        if let Some(l) = self.active.get_mut(&id) {
            l.drawn = std::mem::take(&mut l.drawn).for_dispute();
        }
    }

    /// Takes the marks of [`Leases::mark_after_first`] and [`Leases::mark_for_dispute`] off every
    /// lease of job `key` of run `run`,
    /// active or ended: the job is back to pending (retried, or its results taken back), and the
    /// results they were issued against are gone. Before, such a lease confirmed a partner's new first
    /// result with no draw of confirmers (found by a review, 2026-12-01). The leases themselves run
    /// on: a result under one is the job's first result, as any.
    pub fn unmark_job(&mut self, run: u64, key: &JobKey) {
        let job = (run, key.clone());
        if let Some(l) = self.by_job.get(&job).and_then(|id| self.active.get_mut(id)) {
            l.drawn = Drawn::Nothing;
        }
        for id in self.past_by_job.get(&job).into_iter().flatten() {
            if let Some(e) = self.past.get_mut(id) {
                e.drawn = Drawn::Nothing;
            }
        }
    }

    /// What lease `id` of this incarnation (active, or ended and still remembered) was drawn for.
    /// A lease issued before its job held a result (one that expired, or was kept by a partner
    /// across the first result) was taken without the draw of confirmers: a result under it that
    /// agrees with the first confirms nothing (found by a review, 2026-12-01). Nor does one under a
    /// lease of an earlier incarnation, nor under one forgotten ([`Drawn::Nothing`]). A lease issued
    /// before the dispute (drawn to confirm, a spot check's, or one that expired before it) was not
    /// drawn to decide: a result under it that agrees with a side seconds nothing. Before, a partner
    /// drawn to check a job, its lease lapsed, seconded the lie of the dispute an honest check
    /// opened, with no draw of deciders (found by a review, 2026-12-01).
    pub fn drawn(&self, id: u64) -> Drawn {
        match self.active.get(&id) {
            Some(l) => l.drawn.clone(),
            None => self
                .past
                .get(&id)
                .map(|e| e.drawn.clone())
                .unwrap_or_default(),
        }
    }

    /// Leases a spot check of a done job, as [`Leases::issue`]. However it ends, it is forgotten: it
    /// is no lease of its job's count, and it takes no place in the job's history of ended leases,
    /// whose leases kept past the count a check must not push out (an expiring check did, found by a
    /// review, 2026-11-29).
    pub fn issue_check(
        &mut self,
        run: u64,
        key: JobKey,
        worker: &str,
        name: &str,
        now: Instant,
    ) -> u64 {
        let id = self.issue(run, key, worker, name, now);
        self.checks.insert(id);
        // Issued for a counted job: should the count be taken back while it is out, its answer
        // confirms nothing and decides no dispute. It was drawn to check, not to decide (a check owed
        // after a hand-back, issued again for the disputed job, decided it: found by a review,
        // 2026-12-01), nor to confirm a result the job came to hold later (a side left alone once
        // the other's worker was quarantined: found by a review, 2026-12-01).
        id
    }

    /// Whether lease `id` is a spot check's.
    pub fn is_check(&self, id: u64) -> bool {
        self.checks.contains(&id)
    }

    /// When the active lease `id` was issued (`None` for one ended, or of an earlier incarnation).
    pub fn issued_at(&self, id: u64) -> Option<Instant> {
        self.active.get(&id).map(|l| l.issued)
    }

    /// When lease `id` of this incarnation was issued, active or ended and still remembered (`None` for
    /// one of an earlier incarnation or forgotten): a late result's rate is its nodes over the time since.
    pub fn issued_at_any(&self, id: u64) -> Option<Instant> {
        match self.active.get(&id) {
            Some(l) => Some(l.issued),
            None => self.past.get(&id).map(|e| e.issued),
        }
    }

    /// A time lease `id` was issued at or after: its issue time, for one of this incarnation still
    /// remembered; its incarnation's start, for one of an earlier incarnation on record (never later
    /// than its issue); `None` otherwise (forgotten, or of an incarnation with no record).
    pub fn issued_by(&self, id: u64) -> Option<Instant> {
        self.issued_at_any(id)
            .or_else(|| self.began.get(&(id >> SEQ_BITS)).copied())
    }

    /// The name of the worker lease `id` of this incarnation was issued to (active, or ended and still
    /// remembered); `None` for a lease of an earlier incarnation or one forgotten.
    pub fn issued_to(&self, id: u64) -> Option<&str> {
        match self.active.get(&id) {
            Some(l) => Some(&l.name),
            None => self.past.get(&id).map(|e| e.name.as_str()),
        }
    }

    /// Whether lease `id` of this incarnation ended unsettled and was kept past its job's count under
    /// another lease ([`Leases::settle_counted`]), and has delivered nothing since: its worker computed
    /// the job too, and its one result may take the count back, as a live lease's may. (Such a lease is
    /// never one handed back, and is forgotten once it delivers.)
    pub fn outlived(&self, id: u64) -> bool {
        self.past.get(&id).is_some_and(|e| e.outlived)
    }

    /// The identity active lease `id` was issued to, if the worker process `worker` holds it.
    pub fn held_as(&self, id: u64, worker: &str) -> Option<&str> {
        self.active
            .get(&id)
            .filter(|l| l.worker == worker)
            .map(|l| l.name.as_str())
    }

    /// Whether lease `id` of this incarnation was handed back unstarted (and is still remembered): a
    /// result under it is refused, and it proves no lease.
    pub fn handed_back(&self, id: u64) -> bool {
        self.past.get(&id).is_some_and(|e| e.handed_back)
    }

    /// The tag of lease `id` for a job, issued to the identity `name`: what a worker repeats to prove the
    /// lease was issued to it.
    pub fn tag(&self, id: u64, run: u64, key: &JobKey, name: &str) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.secret);
        h.write(&id.to_be_bytes());
        h.write(&run.to_be_bytes());
        h.write(&[key.0.len() as u8]);
        h.write(&key.0);
        // The identity it was issued to (tag format 2, 2026-11-29): after a restart, a colluder cannot
        // report under another identity's lease of an earlier incarnation.
        h.write(&(name.len() as u64).to_be_bytes());
        h.write(name.as_bytes());
        h.finish()
    }

    /// Whether the job is leased right now.
    pub fn is_leased(&self, run: u64, key: &JobKey) -> bool {
        self.by_job.contains_key(&(run, key.clone()))
    }

    /// Number of active leases of a run.
    pub fn count(&self, run: u64) -> u64 {
        self.held.get(&run).map_or(0, |by| by.values().sum())
    }

    /// The workers (by id) holding a lease of a run, each once.
    pub fn holders(&self, run: u64) -> impl Iterator<Item = &str> {
        self.held
            .get(&run)
            .into_iter()
            .flat_map(|by| by.keys().map(String::as_str))
    }

    /// Takes an active lease out of the table (and out of [`Leases::held`]).
    fn take(&mut self, id: u64) -> Option<Lease> {
        let lease = self.active.remove(&id)?;
        self.checks.remove(&id);
        if let Some(by) = self.held.get_mut(&lease.run) {
            if let Some(n) = by.get_mut(&lease.worker) {
                *n -= 1;
                if *n == 0 {
                    by.remove(&lease.worker);
                }
            }
            if by.is_empty() {
                self.held.remove(&lease.run);
            }
        }
        if let Some(n) = self.by_name.get_mut(&lease.name) {
            *n -= 1;
            if *n == 0 {
                self.by_name.remove(&lease.name);
            }
        }
        Some(lease)
    }

    /// Active leases issued to the worker name (identity) `name`, all runs together.
    pub fn held_by(&self, name: &str) -> u64 {
        self.by_name.get(name).copied().unwrap_or(0)
    }

    /// Active leases per worker id.
    pub fn per_worker(&self) -> HashMap<&str, u64> {
        let mut out = HashMap::new();
        for l in self.active.values() {
            *out.entry(l.worker.as_str()).or_insert(0) += 1;
        }
        out
    }

    /// Extends the worker's leases; returns the ids that are not (or no longer) its.
    pub fn heartbeat(&mut self, worker: &str, ids: &[u64], now: Instant) -> Vec<u64> {
        let mut lost = Vec::new();
        for id in ids {
            let deadline = match self.active.get(id) {
                Some(l) if l.worker == worker => self.deadline(l.hold_from, now),
                _ => {
                    lost.push(*id);
                    continue;
                }
            };
            if let Some(l) = self.active.get_mut(id) {
                l.deadline = deadline;
                l.beat = now;
            }
        }
        lost
    }

    /// Ends every lease whose deadline has passed; returns them so their jobs can be leased again.
    pub fn expire(&mut self, now: Instant) -> Vec<Lease> {
        let ids: Vec<u64> = self
            .active
            .values()
            .filter(|l| l.deadline <= now)
            .map(|l| l.id)
            .collect();
        let ended: Vec<Lease> = ids.into_iter().filter_map(|id| self.end(id)).collect();
        if let Some(hold) = self.max_hold {
            let bars: Vec<(JobId, String)> = ended
                .iter()
                .filter(|l| l.barrable && self.held_past_half(l, l.beat + self.timeout))
                .map(|l| ((l.run, l.key.clone()), l.name.clone()))
                .collect();
            for (job, name) in bars {
                self.bar(job, name, now, hold);
            }
        }
        ended
    }

    /// Ends the worker's leases among `ids` (handed back unstarted); returns them. One held past half
    /// its longest hold bars its identity from its job for a hold ([`Leases::held_past_half`]).
    pub fn release(&mut self, worker: &str, ids: &[u64]) -> Vec<Lease> {
        let now = Instant::now();
        let mine: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| self.active.get(id).is_some_and(|l| l.worker == worker))
            .collect();
        let ended: Vec<Lease> = mine
            .into_iter()
            .filter_map(|id| self.end_as(id, true, false))
            .collect();
        if let Some(hold) = self.max_hold {
            for l in &ended {
                if l.barrable && self.held_past_half(l, now) {
                    self.bar((l.run, l.key.clone()), l.name.clone(), now, hold);
                }
            }
        }
        ended
    }

    /// Ends one lease (its worker reported a result that does not settle the job); a later report under
    /// it is still recognised, and it has delivered.
    pub fn close(&mut self, id: u64) -> Option<Lease> {
        self.end_as(id, false, true)
    }

    /// Takes a copy of a job's counted result under lease `id`, reported by the identity `name`: `true`
    /// if the lease was issued to `name` for that job, is known (active, or ended and remembered), was
    /// not handed back, and had delivered nothing yet. It has delivered from then on (an active one is
    /// ended; one kept past its job's count is forgotten), so a second copy under it is `false`: a
    /// worker's work is credited once per lease.
    pub fn deliver(&mut self, id: u64, run: u64, key: &JobKey, name: &str) -> bool {
        if let Some(l) = self.active.get(&id) {
            let ours = l.run == run && &l.key == key && l.name == name;
            if ours {
                self.end_as(id, false, true);
            }
            return ours;
        }
        match self.past.get(&id) {
            Some(e)
                if e.job.0 == run
                    && &e.job.1 == key
                    && e.name == name
                    && !e.handed_back
                    && !e.delivered =>
            {
                self.delivered(id);
                true
            }
            _ => false,
        }
    }

    /// Whether a result the run took (counted, held for a check, disputing) under lease `id` is credited:
    /// `false` only if the lease delivered already (a copy of it, applied first, was credited); it has
    /// delivered from then on. A lease the table does not know (of an earlier incarnation) is credited.
    pub fn credit_once(&mut self, id: u64) -> bool {
        if self.active.contains_key(&id) {
            // (Its result's handling ends it: `close`, or the job's count.)
            return true;
        }
        match self.past.get(&id) {
            Some(e) if e.delivered => false,
            Some(_) => {
                self.delivered(id);
                true
            }
            None => true,
        }
    }

    /// Marks the ended lease `id` as having delivered; one kept past its job's count goes.
    fn delivered(&mut self, id: u64) {
        let Some(e) = self.past.get_mut(&id) else {
            return;
        };
        if !e.outlived {
            e.delivered = true;
            return;
        }
        let job = e.job.clone();
        self.forget_past(id);
        if let Some(ids) = self.past_by_job.get_mut(&job) {
            ids.retain(|x| *x != id);
            if ids.is_empty() {
                self.past_by_job.remove(&job);
            }
        }
    }

    /// Ends lease `id` if it is active, for job `(run, key)` and held by `worker` (a result came back
    /// under it that the job did not need: the job was done already, or this worker had reported it);
    /// anything else is left alone, since such a report's lease is not checked.
    pub fn close_delivered(&mut self, id: u64, run: u64, key: &JobKey, worker: &str) {
        if self
            .active
            .get(&id)
            .is_some_and(|l| l.run == run && &l.key == key && l.worker == worker)
        {
            self.end_as(id, false, true);
        }
    }

    fn end(&mut self, id: u64) -> Option<Lease> {
        self.end_as(id, false, false)
    }

    /// Ends lease `id`, remembered as handed back or not, and as having delivered a result or not.
    fn end_as(&mut self, id: u64, handed_back: bool, delivered: bool) -> Option<Lease> {
        // (The history of ended leases, kept so that a late report under one is still recognised, is
        // bounded per job: see `PAST_PER_JOB`.)
        let check = self.checks.contains(&id);
        let lease = self.take(id)?;
        let job = (lease.run, lease.key.clone());
        self.by_job.remove(&job);
        if check {
            return Some(lease);
        }
        let ended = Ended {
            job: job.clone(),
            name: lease.name.clone(),
            handed_back,
            delivered,
            outlived: false,
            issued: lease.issued,
            hold_from: lease.hold_from,
            drawn: lease.drawn.clone(),
        };
        self.past.insert(id, ended);
        let ids = self.past_by_job.entry(job).or_default();
        ids.push(id);
        // A report under a lease forgotten is then refused (its job is computed again). Those handed
        // back go first, then those that delivered, then the oldest: leases handed back cost nothing,
        // and must not push an honest worker's expired lease out (its late result may take back a
        // lie counted meanwhile; found by a review, 2026-11-29). A forgotten lease handed back is
        // refused all the same, and the store keeps its hand-back for after a restart.
        while ids.len() > PAST_PER_JOB {
            let past = &self.past;
            let rank = |id: &u64| match past.get(id) {
                Some(e) if e.handed_back => 0,
                Some(e) if e.delivered => 1,
                _ => 2,
            };
            let least = ids.iter().map(rank).min().unwrap_or(2);
            let at = ids.iter().position(|id| rank(id) == least).unwrap_or(0);
            let old = ids.remove(at);
            forget_past(&mut self.past, &mut self.outlived_by_name, old);
        }
        Some(lease)
    }

    /// Checks that a result for `(run, key)` reported by the identity `name` may name lease `id` with
    /// `tag`: the tag must be that lease's for that job and that identity (ids are guessable; tags need the
    /// store's secret), and a lease of this incarnation must have been issued for that job and not
    /// handed back.
    pub fn check_report(
        &self,
        id: u64,
        tag: u64,
        run: u64,
        key: &JobKey,
        name: &str,
    ) -> Result<()> {
        let named = match self.active.get(&id) {
            Some(l) => Some((l.run, &l.key)),
            None => self.past.get(&id).map(|e| (e.job.0, &e.job.1)),
        };
        // A lease handed back (unstarted, its worker said) names no job a result may be for.
        let ok = tag == self.tag(id, run, key, name)
            && !self.handed_back(id)
            && match named {
                Some((r, k)) => r == run && k == key,
                None => {
                    let epoch = id >> SEQ_BITS;
                    epoch < self.epoch && epoch > 0
                }
            };
        if ok {
            Ok(())
        } else {
            Err(Error::NotLeased {
                run: run.to_string(),
                job: key.to_string(),
                lease: id,
            })
        }
    }

    /// Ends every lease of a cancelled run (active or past: a result under any is refused); returns how
    /// many were active.
    pub fn cancel_run(&mut self, run: u64) -> usize {
        let active: Vec<u64> = self
            .active
            .values()
            .filter(|l| l.run == run)
            .map(|l| l.id)
            .collect();
        for id in &active {
            if let Some(lease) = self.take(*id) {
                self.by_job.remove(&(lease.run, lease.key));
            }
        }
        let ids: Vec<u64> = self
            .past
            .iter()
            .filter(|(_, e)| e.job.0 == run)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.forget_past(id);
        }
        self.past_by_job.retain(|(r, _), _| *r != run);
        self.barred.retain(|(r, _), _| *r != run);
        self.cancelled.extend(&active);
        active.len()
    }

    /// The leases among `ids` that ended because their run was cancelled.
    pub fn cancelled_among(&self, ids: &[u64]) -> Vec<u64> {
        ids.iter()
            .copied()
            .filter(|id| self.cancelled.contains(id))
            .collect()
    }

    /// Forgets every lease of a job that is now done; returns its active lease, if any.
    pub fn settle(&mut self, run: u64, key: &JobKey) -> Option<Lease> {
        let job = (run, key.clone());
        self.barred.remove(&job);
        for id in self.past_by_job.remove(&job).unwrap_or_default() {
            self.forget_past(id);
        }
        let id = self.by_job.remove(&job)?;
        self.take(id)
    }

    /// Ends spot check `id` (answered, expired or handed back), if it is still active, and forgets it
    /// ([`Leases::issue_check`]). The job's other ended leases stay, a lease kept past the count among
    /// them: its honest late result may still take back a lie two colluders confirmed (found by a
    /// review, 2026-11-29: ending a check forgot them all, [`Leases::settle`], and such a result then
    /// quarantined its sender, the lie standing).
    pub fn end_check(&mut self, id: u64) {
        if self.active.contains_key(&id) {
            self.checks.insert(id);
            self.end(id);
        }
    }

    /// Settles a job counted under lease `counted`, as [`Leases::settle`], except that the job's other
    /// leases that delivered nothing are remembered, ended: one still active (its job was leased again
    /// after `counted` expired) and those that ended without being handed back (expired, say). Their
    /// workers computed the job too: a different result under one may dispute the count, and an equal
    /// one is credited once ([`Leases::deliver`]); either way the lease is forgotten once it delivers,
    /// so a done job keeps no lease for good. Leases handed back or delivered, and `counted`, go.
    /// Returns the job's active lease it ended, if any (a spot check's, say).
    pub fn settle_counted(&mut self, run: u64, key: &JobKey, counted: u64) -> Option<u64> {
        let job = (run, key.clone());
        self.barred.remove(&job);
        // The job's active lease ends (`counted` itself is forgotten below, with those handed back).
        let live = self.by_job.get(&job).copied();
        if let Some(live) = live {
            self.end(live);
        }
        let Some(ids) = self.past_by_job.get_mut(&job) else {
            return live;
        };
        let (past, by_name) = (&mut self.past, &mut self.outlived_by_name);
        let mut newly = Vec::new();
        ids.retain(|id| {
            let kept = match past.get_mut(id) {
                Some(e) if *id != counted && !e.handed_back && !e.delivered => {
                    if !e.outlived {
                        e.outlived = true;
                        newly.push((e.name.clone(), *id));
                    }
                    true
                }
                _ => false,
            };
            if !kept {
                forget_past(past, by_name, *id);
            }
            kept
        });
        if ids.is_empty() {
            self.past_by_job.remove(&job);
        }
        // An identity keeps its most recent outlived leases only: the oldest beyond the bound are
        // forgotten (a result under one is then compared, never counted, as under no lease).
        for (name, id) in newly {
            let kept = self.outlived_by_name.entry(name.clone()).or_default();
            kept.insert(id);
            while kept.len() > OUTLIVED_PER_IDENTITY {
                let Some(oldest) = kept.pop_first() else {
                    break;
                };
                if let Some(e) = self.past.remove(&oldest) {
                    if let Some(ids) = self.past_by_job.get_mut(&e.job) {
                        ids.retain(|x| *x != oldest);
                        if ids.is_empty() {
                            self.past_by_job.remove(&e.job);
                        }
                    }
                }
            }
            if kept.is_empty() {
                self.outlived_by_name.remove(&name);
            }
        }
        live
    }

    /// Forgets the ended lease `id` (not its job's list of ended leases: the caller's).
    fn forget_past(&mut self, id: u64) {
        forget_past(&mut self.past, &mut self.outlived_by_name, id);
    }
}

/// Forgets the ended lease `id` of `past`, and from its identity's outlived leases if it was one.
fn forget_past(
    past: &mut HashMap<u64, Ended>,
    outlived_by_name: &mut HashMap<String, BTreeSet<u64>>,
    id: u64,
) {
    let Some(e) = past.remove(&id) else {
        return;
    };
    if e.outlived {
        if let Some(kept) = outlived_by_name.get_mut(&e.name) {
            kept.remove(&id);
            if kept.is_empty() {
                outlived_by_name.remove(&e.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 16] = *b"0123456789abcdef";

    fn key(s: &str) -> JobKey {
        s.parse().unwrap()
    }

    /// A lease marked with no results, or for a dispute of no sides, is not marked: it confirms and
    /// seconds nothing. Marked with results, it keeps them, drawn to confirm and then for their
    /// dispute; an ended lease keeps its mark, and a job back to pending takes them off.
    #[test]
    fn a_lease_marked_with_no_results_is_not_marked() {
        let mut t = Leases::new(3, SECRET, Duration::from_secs(10));
        let id = t.issue(1, key("0.1"), "w-1", "w", Instant::now());
        t.mark_after_first(id, Box::new([]));
        t.mark_for_dispute(id);
        assert_eq!(t.drawn(id), Drawn::Nothing);
        let held: Box<[u64]> = Box::new([5, 6]);
        t.mark_after_first(id, held.clone());
        assert_eq!(t.drawn(id), Drawn::ToConfirm(held.clone()));
        t.mark_for_dispute(id);
        assert_eq!(t.drawn(id), Drawn::ForDispute(held.clone()));
        assert!(t.close(id).is_some());
        assert_eq!(t.drawn(id), Drawn::ForDispute(held));
        t.unmark_job(1, &key("0.1"));
        assert_eq!(t.drawn(id), Drawn::Nothing);
        assert_eq!(t.drawn(id + 1), Drawn::Nothing);
    }

    /// A lease id carries its incarnation's epoch above its sequence number: two incarnations never
    /// give one id (issue 42: `<<` → `>>` survived; `|` → `^` is equivalent, the two parts share no
    /// bit).
    #[tokio::test(start_paused = true)]
    async fn lease_ids_carry_their_epoch() {
        let now = Instant::now();
        let mut first = Leases::new(3, SECRET, Duration::from_secs(10));
        let mut second = Leases::new(4, SECRET, Duration::from_secs(10));
        let a = first.issue(1, key("0.1"), "w", "w", now);
        let b = second.issue(1, key("0.1"), "w", "w", now);
        assert_eq!((a >> SEQ_BITS, b >> SEQ_BITS), (3, 4));
        assert_ne!(a, b);
    }

    /// A spot check's lease says so; another does not.
    #[tokio::test(start_paused = true)]
    async fn a_check_is_known_as_one() {
        let now = Instant::now();
        let mut t = Leases::new(3, SECRET, Duration::from_secs(10));
        let lease = t.issue(1, key("0.1"), "w", "w", now);
        let check = t.issue_check(1, key("0.2"), "w", "w", now);
        assert!(!t.is_check(lease) && t.is_check(check));
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_a_lease_and_silence_ends_it() {
        let mut t = Leases::new(3, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let id = t.issue(1, key("0.1"), "w", "w", now);
        assert!(t.is_leased(1, &key("0.1")));
        for s in 1..=5 {
            assert!(t
                .heartbeat("w", &[id], now + Duration::from_secs(8 * s))
                .is_empty());
        }
        assert!(t.expire(now + Duration::from_secs(45)).is_empty());
        assert_eq!(t.heartbeat("other", &[id], now), vec![id]);
        let gone = t.expire(now + Duration::from_secs(51));
        assert_eq!(gone.len(), 1);
        assert!(!t.is_leased(1, &key("0.1")));
        // A late report under the expired lease is still recognised, for its own job only, with its tag.
        let tag = t.tag(id, 1, &key("0.1"), "w");
        assert!(t.check_report(id, tag, 1, &key("0.1"), "w").is_ok());
        assert!(t.check_report(id, 0, 1, &key("0.1"), "w").is_err());
        assert!(t.check_report(id, tag, 1, &key("0.2"), "w").is_err());
        t.settle(1, &key("0.1"));
        assert!(t.check_report(id, tag, 1, &key("0.1"), "w").is_err());
    }

    /// A barrable lease of a job keeps the hold of an earlier lease of it to the same identity issued
    /// less than a hold before, and only that: not another identity's, nor one issued a whole hold
    /// ago. The bounds are strict: a lease whose last heartbeat would keep it exactly to its hold has
    /// not held longest, and one that ends exactly at half its hold has not held past half.
    #[tokio::test(start_paused = true)]
    async fn a_lease_keeps_only_its_own_identitys_hold_of_less_than_a_hold_ago() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(s(30));
        let job = key("0.1");
        let first = t.issue(1, job.clone(), "o/1", "o", now);
        t.bar_at_hold(first);
        t.release("o/1", &[first]);
        // Another identity, 5 s later: a hold of its own.
        let other = t.issue(1, job.clone(), "h/1", "h", now + s(5));
        t.bar_at_hold(other);
        let l = t.active[&other].clone();
        assert_eq!((l.hold_from, l.deadline), (now + s(5), now + s(15)));
        t.release("h/1", &[other]);
        // h again, exactly a hold after its first issue: a hold of its own.
        let again = t.issue(1, job.clone(), "h/1", "h", now + s(35));
        t.bar_at_hold(again);
        let l = t.active[&again].clone();
        assert_eq!((l.hold_from, l.deadline), (now + s(35), now + s(45)));
        t.release("h/1", &[again]);
        // h once more, 28 s after that: the hold it began 28 s ago, 2 s left.
        let late = t.issue(1, job.clone(), "h/1", "h", now + s(63));
        t.bar_at_hold(late);
        let l = t.active[&late].clone();
        assert_eq!((l.hold_from, l.deadline), (now + s(35), now + s(65)));
        // The strict bounds.
        let at = |beat| Lease { beat, ..l.clone() };
        assert!(
            !t.held_longest(&at(now + s(55))),
            "kept exactly to its hold"
        );
        assert!(t.held_longest(&at(now + s(55) + Duration::from_nanos(1))));
        assert!(!t.held_past_half(&l, now + s(50)), "ends exactly at half");
        assert!(t.held_past_half(&l, now + s(50) + Duration::from_nanos(1)));
    }

    /// A barrable lease that runs out its hold bars its identity from its job for a hold, then no
    /// more; a count of the job lifts the bar at once. So does one that expires past half its hold (its
    /// worker silent from a heartbeat whose deadline lay past it). A lease that is not barrable bars
    /// nobody, nor does a worker silent early in its lease (crashed): it gets its job back.
    #[tokio::test(start_paused = true)]
    async fn a_lease_run_out_its_hold_bars_its_identity_for_a_hold() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(s(30));
        let held = t.issue(1, key("0.1"), "h/1", "h", now);
        t.bar_at_hold(held);
        let free = t.issue(1, key("0.2"), "o", "o", now);
        let crashed = t.issue(1, key("0.3"), "c/1", "c", now);
        t.bar_at_hold(crashed);
        let late = t.issue(1, key("0.5"), "l/1", "l", now);
        t.bar_at_hold(late);
        for at in [8, 16, 24] {
            assert!(t.heartbeat("h/1", &[held], now + s(at)).is_empty());
            assert!(t.heartbeat("o", &[free], now + s(at)).is_empty());
        }
        // c's last heartbeat at 4 s: its lease ends at 14 s, before half its hold (15 s).
        assert!(t.heartbeat("c/1", &[crashed], now + s(4)).is_empty());
        // l's last heartbeat at 6 s: its lease ends at 16 s, past half its hold.
        assert!(t.heartbeat("l/1", &[late], now + s(6)).is_empty());
        assert!(t.expire(now + s(13)).is_empty());
        assert_eq!(t.expire(now + s(14))[0].id, crashed);
        assert_eq!(t.expire(now + s(16))[0].id, late);
        assert!(t.expire(now + s(29)).is_empty());
        let gone = t.expire(now + s(30));
        assert_eq!(gone.len(), 2);
        for l in &gone {
            assert!(t.held_longest(l), "{l:?}");
        }
        tokio::time::advance(s(30)).await;
        // A sweep keeps a bar until it lapses.
        assert!(t.expire(now + s(31)).is_empty());
        assert!(t.barred(1, &key("0.1"), "h"));
        assert!(!t.barred(1, &key("0.1"), "o"), "another identity");
        assert!(!t.barred(1, &key("0.2"), "o"), "not barrable");
        assert!(!t.barred(1, &key("0.3"), "c"), "crashed early");
        assert!(t.barred(1, &key("0.5"), "l"), "silent past half its hold");
        tokio::time::advance(s(16)).await;
        assert!(!t.barred(1, &key("0.5"), "l"), "for a hold from its end");
        tokio::time::advance(s(13)).await;
        assert!(t.barred(1, &key("0.1"), "h"));
        tokio::time::advance(s(1)).await;
        assert!(!t.barred(1, &key("0.1"), "h"), "for a hold, no more");
        // Counted meanwhile, a job's bar goes at once.
        let again = t.issue(1, key("0.4"), "h/1", "h", Instant::now());
        t.bar_at_hold(again);
        for _ in 0..3 {
            tokio::time::advance(s(8)).await;
            t.heartbeat("h/1", &[again], Instant::now());
        }
        tokio::time::advance(s(6)).await;
        assert_eq!(t.expire(Instant::now()).len(), 1);
        assert!(t.barred(1, &key("0.4"), "h"));
        t.settle_counted(1, &key("0.4"), 1);
        assert!(!t.barred(1, &key("0.4"), "h"));
    }

    /// Two colluding credentials that take turns at holding a job, each leasing it the moment the
    /// other's lease runs out its hold, are both barred from it after four turns: each identity's
    /// bar lasts twice its last, and one identity's bar leaves the other's. An honest identity takes
    /// the job then, and its own first bar lasts a hold, whatever the colluders' were. Before, one bar
    /// per job, for a hold, replaced the last: the pair held the job for good (found by a review,
    /// 2026-12-01).
    #[tokio::test(start_paused = true)]
    async fn colluders_taking_turns_at_a_job_are_all_barred_after_a_few_turns() {
        let s = Duration::from_secs;
        let job = key("0.1");
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(s(30));
        // A turn of `name`: leased now, heartbeats to its hold, expires; the clock moves with it.
        async fn turn(t: &mut Leases, job: &JobKey, name: &str) {
            let at = Instant::now();
            let id = t.issue(1, job.clone(), name, name, at);
            t.bar_at_hold(id);
            for k in 1..3 {
                assert!(t
                    .heartbeat(name, &[id], at + Duration::from_secs(10 * k))
                    .is_empty());
            }
            tokio::time::advance(Duration::from_secs(30)).await;
            let gone = t.expire(Instant::now());
            assert_eq!(gone.iter().map(|l| l.id).collect::<Vec<_>>(), [id]);
        }
        let barred = |t: &Leases, name: &str| t.barred(1, &job, name);
        turn(&mut t, &job, "a").await; // 30 s: a barred a hold
        assert!(barred(&t, "a") && !barred(&t, "b"));
        turn(&mut t, &job, "b").await; // 60 s: a's bar lapsed, b barred a hold
        assert!(!barred(&t, "a") && barred(&t, "b"));
        turn(&mut t, &job, "a").await; // 90 s: a barred two holds, b's lapsed
        assert!(barred(&t, "a") && !barred(&t, "b"));
        turn(&mut t, &job, "b").await; // 120 s: b barred two holds, a's stands (to 150 s)
        assert!(barred(&t, "a"), "a's second bar: two holds");
        assert!(barred(&t, "b"), "b's bar beside a's");
        assert!(!barred(&t, "honest"));
        // An honest identity that ran out its hold too is barred for one hold, not four.
        turn(&mut t, &job, "honest").await; // 150 s
        assert!(barred(&t, "honest") && barred(&t, "b") && !barred(&t, "a"));
        tokio::time::advance(s(29)).await;
        assert!(barred(&t, "honest") && barred(&t, "b"));
        tokio::time::advance(s(1)).await; // 180 s
        assert!(!barred(&t, "honest") && !barred(&t, "b"));
        // Counted, the job forgets its bars and their counts: a's next bar lasts a hold.
        t.settle(1, &job);
        assert!(!t.barred.contains_key(&(1, job.clone())));
        turn(&mut t, &job, "a").await;
        assert!(barred(&t, "a"));
        tokio::time::advance(s(30)).await;
        assert!(!barred(&t, "a"));
    }

    /// A cancelled run's bars go with it; another run's stay.
    #[test]
    fn a_cancelled_runs_bars_go_and_anothers_stay() {
        let s = Duration::from_secs;
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(s(30));
        for run in [1, 2] {
            t.bar((run, key("0.1")), "a".into(), Instant::now(), s(30));
        }
        t.cancel_run(1);
        assert!(!t.barred.contains_key(&(1, key("0.1"))));
        assert!(t.barred(2, &key("0.1"), "a"));
    }

    /// An identity's bar doubles with each of its bars from the job, from a hold, up to [`MAX_BAR`]:
    /// a bar with the longest hold the flags allow, or a huge one, never overflows an instant.
    #[test]
    fn a_bars_length_doubles_and_is_bounded() {
        let s = Duration::from_secs;
        assert_eq!(Bar::length(s(30), 1), s(30));
        assert_eq!(Bar::length(s(30), 2), s(60));
        assert_eq!(Bar::length(s(30), 3), s(120));
        assert_eq!(Bar::length(s(30), 17), s(30 << 16));
        assert_eq!(Bar::length(s(30), 1000), s(30 << 16));
        assert_eq!(Bar::length(s(365 * 86_400), 17), MAX_BAR);
        assert_eq!(Bar::length(Duration::MAX, 1), MAX_BAR);
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(Duration::MAX);
        for _ in 0..3 {
            t.bar((1, key("0.1")), "a".into(), Instant::now(), Duration::MAX);
        }
        assert!(t.barred(1, &key("0.1"), "a"));
    }

    /// The bars kept of one job are bounded: past [`BARS_PER_JOB`] identities, the bar that ends first
    /// goes, a lapsed one before any that stands.
    #[tokio::test(start_paused = true)]
    async fn a_jobs_bars_are_bounded_and_the_first_to_end_goes() {
        let s = Duration::from_secs;
        let job = (1, key("0.1"));
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(s(30));
        let now = Instant::now();
        t.bar(job.clone(), "lapsed".into(), now - s(60), s(30));
        for i in 0..BARS_PER_JOB {
            t.bar(job.clone(), format!("w{i}"), now, s(30));
        }
        let bars = &t.barred[&job];
        assert_eq!(bars.len(), BARS_PER_JOB);
        assert!(bars.iter().all(|b| b.name != "lapsed"));
        assert!((0..BARS_PER_JOB).all(|i| t.barred(1, &job.1, &format!("w{i}"))));
    }

    /// A spot check that ends (here: expires) takes no place in its job's history of ended leases:
    /// sixteen leases ended unsettled and kept past the job's count all stay. Before, an expiring
    /// check was recorded like any lease, and the history's trim pushed out the oldest, an honest
    /// worker's (found by a review, 2026-11-29).
    #[tokio::test(start_paused = true)]
    async fn an_ended_spot_check_pushes_no_lease_out_of_its_jobs_history() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let job = key("0.1");
        let mut t = Leases::new(2, SECRET, s(10));
        let honest = t.issue(1, job.clone(), "s", "s", now);
        t.expire(now + s(11));
        for k in 1..PAST_PER_JOB as u64 {
            t.issue(1, job.clone(), "x", "x", now + s(11 * k));
            assert_eq!(t.expire(now + s(11 * k + 11)).len(), 1);
        }
        // Counted under a lease of an earlier incarnation: every one of the sixteen is kept past it.
        t.settle_counted(1, &job, (1 << SEQ_BITS) | 5);
        assert!(t.outlived(honest));
        let at = now + s(11 * PAST_PER_JOB as u64);
        let check = t.issue_check(1, job.clone(), "y", "y", at);
        assert!(t.is_leased(1, &job));
        assert_eq!(t.expire(at + s(11)).len(), 1);
        t.end_check(check);
        assert!(!t.is_leased(1, &job));
        assert!(t.outlived(honest), "the honest lease is remembered");
        assert_eq!(t.past_by_job[&(1, job.clone())].len(), PAST_PER_JOB);
        assert!(!t.past.contains_key(&check), "the check is forgotten");
        // A check handed back, or answered, is forgotten too; ended by `end_check` while active, so.
        for end in 0..3 {
            let check = t.issue_check(1, job.clone(), "y", "y", at);
            match end {
                0 => assert_eq!(t.release("y", &[check]).len(), 1),
                1 => assert!(t.deliver(check, 1, &job, "y")),
                _ => t.end_check(check),
            }
            assert!(!t.is_leased(1, &job));
            assert!(!t.past.contains_key(&check) && !t.checks.contains(&check));
            assert!(t.outlived(honest));
        }
    }

    /// Heartbeats keep a lease no longer than its longest hold: then it expires as a silent one does,
    /// said to be held longest. A lease ended for want of a heartbeat is not; without a bound,
    /// heartbeats keep a lease for good.
    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_a_lease_no_longer_than_its_longest_hold() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut t = Leases::new(3, SECRET, s(10)).holding_at_most(s(35));
        let held = t.issue(1, key("0.1"), "w", "w", now);
        let silent = t.issue(1, key("0.2"), "w", "w", now);
        for at in [5, 10, 15, 20, 25, 30, 34] {
            assert!(t.heartbeat("w", &[held], now + s(at)).is_empty());
            let gone = t.expire(now + s(at));
            assert!(gone.iter().all(|l| l.id == silent), "{gone:?}");
            assert!(gone.iter().all(|l| !t.held_longest(l)));
        }
        assert!(!t.is_leased(1, &key("0.2")));
        assert!(t.expire(now + s(35) - Duration::from_millis(1)).is_empty());
        let gone = t.expire(now + s(35));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].id, held);
        assert!(t.held_longest(&gone[0]));
        assert!(!t.is_leased(1, &key("0.1")));
        // Its late result is still recognised, as an expired lease's is.
        let tag = t.tag(held, 1, &key("0.1"), "w");
        assert!(t.check_report(held, tag, 1, &key("0.1"), "w").is_ok());
        // Without a bound, a lease lives as long as its heartbeats come.
        let mut free = Leases::new(3, SECRET, s(10));
        let id = free.issue(1, key("0.1"), "w", "w", now);
        for at in (5..1000).step_by(5) {
            assert!(free.heartbeat("w", &[id], now + s(at)).is_empty());
            assert!(free.expire(now + s(at)).is_empty());
        }
        // A bound shorter than the timeout ends a lease at the bound, heartbeat or not.
        let mut short = Leases::new(3, SECRET, s(10)).holding_at_most(s(3));
        let id = short.issue(1, key("0.1"), "w", "w", now);
        assert!(short.expire(now + s(2)).is_empty());
        let gone = short.expire(now + s(3));
        assert_eq!(gone[0].id, id);
        assert!(short.held_longest(&gone[0]));
    }

    #[tokio::test(start_paused = true)]
    async fn leases_of_earlier_epochs_count_only_with_their_tag_for_their_job() {
        let earlier = Leases::new(2, SECRET, Duration::from_secs(10));
        let old = (2 << SEQ_BITS) | 7;
        let tag = earlier.tag(old, 1, &key("0.1"), "w");
        let t = Leases::new(3, SECRET, Duration::from_secs(10));
        assert!(t.check_report(old, tag, 1, &key("0.1"), "w").is_ok());
        // Forged: no tag, a tag of another job or run, another secret, or an epoch not yet reached.
        assert!(t.check_report(old, 0, 1, &key("0.1"), "w").is_err());
        assert!(t.check_report(old, tag, 1, &key("0.2"), "w").is_err());
        assert!(t.check_report(old, tag, 2, &key("0.1"), "w").is_err());
        assert!(t.check_report(old ^ 1, tag, 1, &key("0.1"), "w").is_err());
        let other = Leases::new(2, *b"fedcba9876543210", Duration::from_secs(10));
        assert!(t
            .check_report(
                old,
                other.tag(old, 1, &key("0.1"), "w"),
                1,
                &key("0.1"),
                "w"
            )
            .is_err());
        let future = (3 << SEQ_BITS) | 7;
        assert!(t
            .check_report(
                future,
                t.tag(future, 1, &key("0.1"), "w"),
                1,
                &key("0.1"),
                "w"
            )
            .is_err());
        assert!(t.check_report(7, 0, 1, &key("0.1"), "w").is_err());
        // Epoch 0 was never an incarnation's: refused even with its tag (issue 42: `> 0` → `>= 0`).
        assert!(t
            .check_report(7, t.tag(7, 1, &key("0.1"), "w"), 1, &key("0.1"), "w")
            .is_err());
    }

    /// Cancelling a run ends its leases, active and past (a result under any is refused), and a
    /// heartbeat's ids name them; another run's leases are untouched, and its history still goes when
    /// its job is done (issue 42: the filters of `cancel_run` and `cancelled_among` survived).
    #[tokio::test(start_paused = true)]
    async fn a_cancelled_runs_leases_end_and_are_named_and_no_other_runs() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let past1 = t.issue(1, key("0.1"), "w", "w", now);
        t.close(past1);
        let active1 = t.issue(1, key("0.1"), "w", "w", now);
        let past2 = t.issue(2, key("0.1"), "w", "w", now);
        t.close(past2);
        let active2 = t.issue(2, key("0.2"), "w", "w", now);
        let counts = |t: &Leases, id: u64, run: u64, job: &str| {
            t.check_report(id, t.tag(id, run, &key(job), "w"), run, &key(job), "w")
                .is_ok()
        };
        assert_eq!(t.cancel_run(1), 1);
        assert!(!counts(&t, past1, 1, "0.1") && !counts(&t, active1, 1, "0.1"));
        assert!(counts(&t, past2, 2, "0.1") && counts(&t, active2, 2, "0.2"));
        assert_eq!(
            t.cancelled_among(&[past1, active1, past2, active2, 999]),
            vec![active1]
        );
        assert!(t.heartbeat("w", &[active2], now).is_empty());
        t.settle(2, &key("0.1"));
        assert!(
            !counts(&t, past2, 2, "0.1"),
            "forgotten once its job is done"
        );
    }

    /// A lease's issue time, or for one of an earlier incarnation, when that incarnation began (on
    /// record); none for one of an incarnation with no record, or of this one forgotten.
    #[tokio::test(start_paused = true)]
    async fn a_lease_was_issued_no_earlier_than_its_incarnation_began() {
        let starts = std::collections::BTreeMap::from([(2, 1_000), (3, 1_900), (5, 2_000)]);
        let mut t =
            Leases::new(5, SECRET, Duration::from_secs(10)).with_epoch_starts(&starts, 2_000);
        let now = Instant::now();
        let of = |epoch: u64| epoch << SEQ_BITS | 7;
        assert_eq!(t.issued_by(of(2)), Some(now - Duration::from_secs(1_000)));
        assert_eq!(t.issued_by(of(3)), Some(now - Duration::from_secs(100)));
        assert_eq!(t.issued_by(of(4)), None, "no record");
        assert_eq!(t.issued_by(of(5)), None, "this one's, unknown");
        let live = t.issue(1, key("1.2"), "a", "a", now);
        assert_eq!(t.issued_by(live), Some(now));
        t.settle(1, &key("1.2"));
        assert_eq!(t.issued_by(live), None, "forgotten");
    }

    /// The history of a job's ended leases is bounded; leases handed back go first, then those that
    /// delivered, then the oldest. An honest worker's expired lease outlasts any number of hand-backs
    /// of its job (before, 16 hand-backs pushed it out, and its late result framed it instead of
    /// taking back the lie counted meanwhile).
    #[tokio::test(start_paused = true)]
    async fn a_jobs_history_drops_hand_backs_first() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let job = key("1.2");
        let honest = t.issue(1, job.clone(), "s", "s", now);
        let later = now + Duration::from_secs(11);
        t.expire(later);
        let answered = t.issue(1, job.clone(), "d", "d", later);
        t.close(answered);
        for _ in 0..2 * PAST_PER_JOB {
            let back = t.issue(1, job.clone(), "l", "l", later);
            t.release("l", &[back]);
        }
        assert_eq!(t.past_by_job[&(1, job.clone())].len(), PAST_PER_JOB);
        assert_eq!(
            t.issued_to(honest),
            Some("s"),
            "kept: it expired undelivered"
        );
        assert_eq!(t.issued_to(answered), Some("d"), "kept: it delivered");
        // Only leases that delivered, and the expired one: those that delivered go first.
        let mut delivered = Vec::new();
        for _ in 0..PAST_PER_JOB - 1 {
            let id = t.issue(1, job.clone(), "d", "d", later);
            t.close(id);
            delivered.push(id);
        }
        assert_eq!(t.issued_to(honest), Some("s"));
        assert_eq!(t.issued_to(answered), None, "the oldest that delivered");
        assert_eq!(t.issued_to(delivered[0]), Some("d"));
        // Only leases that expired undelivered: the oldest goes.
        let mut expired = Vec::new();
        for i in 0..PAST_PER_JOB as u64 {
            let at = later + Duration::from_secs(11 * (i + 1));
            expired.push(t.issue(1, job.clone(), "e", "e", at));
            t.expire(at + Duration::from_secs(11));
        }
        assert_eq!(t.issued_to(honest), None, "the oldest, at last");
        assert!(expired.iter().all(|id| t.issued_to(*id) == Some("e")));
    }

    /// A lease of this incarnation, active or ended, counts only for the job it was issued for, even
    /// under a tag made with the secret for another job or run (issue 42: `&&` → `||` on the run and the
    /// job survived).
    #[tokio::test(start_paused = true)]
    async fn a_lease_of_this_incarnation_counts_only_for_its_job() {
        let mut t = Leases::new(3, SECRET, Duration::from_secs(10));
        let id = t.issue(1, key("0.1"), "w", "w", Instant::now());
        for _ in 0..2 {
            assert!(t
                .check_report(id, t.tag(id, 1, &key("0.1"), "w"), 1, &key("0.1"), "w")
                .is_ok());
            assert!(t
                .check_report(id, t.tag(id, 1, &key("0.2"), "w"), 1, &key("0.2"), "w")
                .is_err());
            assert!(t
                .check_report(id, t.tag(id, 2, &key("0.1"), "w"), 2, &key("0.1"), "w")
                .is_err());
            assert!(t
                .check_report(id, t.tag(id, 2, &key("0.2"), "w"), 2, &key("0.2"), "w")
                .is_err());
            // Ended: still recognised, for its job only.
            t.close(id);
        }
    }

    /// A job leased and handed back over and over (a worker looping Lease and Release) keeps only its
    /// last [`PAST_PER_JOB`] leases recognised: the history no longer grows without bound. Found by a
    /// review, 2026-11-24.
    #[tokio::test(start_paused = true)]
    async fn a_runs_lease_count_and_holders_follow_every_way_a_lease_ends() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let ids: Vec<u64> = ["1", "2", "3", "4"]
            .iter()
            .map(|k| {
                let w = if *k == "4" { "b" } else { "a" };
                t.issue(1, key(k), w, w, now)
            })
            .collect();
        let other = t.issue(2, key("1"), "a", "a", now);
        let holders = |t: &Leases, run| {
            let mut h: Vec<String> = t.holders(run).map(str::to_string).collect();
            h.sort();
            h
        };
        assert_eq!(
            (t.count(1), holders(&t, 1)),
            (4, vec!["a".into(), "b".into()])
        );
        t.settle(1, &key("1"));
        t.release("a", &[ids[1]]);
        assert_eq!(
            (t.count(1), holders(&t, 1)),
            (2, vec!["a".into(), "b".into()])
        );
        let later = now + Duration::from_secs(5);
        t.heartbeat("b", &[ids[3]], later);
        t.heartbeat("a", &[other], later);
        assert_eq!(t.expire(now + Duration::from_secs(11)).len(), 1);
        assert_eq!((t.count(1), holders(&t, 1)), (1, vec!["b".into()]));
        assert_eq!(t.cancel_run(1), 1);
        assert_eq!((t.count(1), holders(&t, 1)), (0, vec![]));
        assert_eq!((t.count(2), holders(&t, 2)), (1, vec!["a".into()]));
    }

    /// The worker table's lease column: active leases per worker id, every run together, and a lease
    /// ended no longer counted.
    #[tokio::test(start_paused = true)]
    async fn each_workers_active_leases_are_counted_across_runs() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        assert!(t.per_worker().is_empty());
        let first = t.issue(1, key("1"), "a", "n", now);
        t.issue(1, key("2"), "a", "n", now);
        t.issue(2, key("1"), "a", "n", now);
        t.issue(2, key("2"), "b", "n", now);
        let expected: HashMap<&str, u64> = [("a", 3), ("b", 1)].into_iter().collect();
        assert_eq!(t.per_worker(), expected);
        t.release("a", &[first]);
        let expected: HashMap<&str, u64> = [("a", 2), ("b", 1)].into_iter().collect();
        assert_eq!(t.per_worker(), expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_jobs_lease_history_is_bounded() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let mut ids = Vec::new();
        for _ in 0..1000 {
            let id = t.issue(1, key("1.2"), "a", "a", now);
            assert!(t.close(id).is_some());
            ids.push(id);
        }
        assert!(t.past.len() <= PAST_PER_JOB, "{}", t.past.len());
        let last = *ids.last().unwrap();
        assert!(t
            .check_report(last, t.tag(last, 1, &key("1.2"), "a"), 1, &key("1.2"), "a")
            .is_ok());
        assert!(t
            .check_report(
                ids[0],
                t.tag(ids[0], 1, &key("1.2"), "a"),
                1,
                &key("1.2"),
                "a"
            )
            .is_err());
    }

    /// A lease handed back names no job: a result under it is refused, with its tag, and it proves no
    /// lease; one closed (its worker reported) is still recognised.
    #[tokio::test(start_paused = true)]
    async fn a_lease_handed_back_is_refused_and_one_closed_is_not() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let back = t.issue(1, key("1.2"), "a", "a", now);
        let closed = t.issue(1, key("1.3"), "a", "a", now);
        assert_eq!(t.release("a", &[back]).len(), 1);
        assert!(t.close(closed).is_some());
        assert!(t.handed_back(back) && !t.handed_back(closed));
        assert!(t
            .check_report(back, t.tag(back, 1, &key("1.2"), "a"), 1, &key("1.2"), "a")
            .is_err());
        assert!(t
            .check_report(
                closed,
                t.tag(closed, 1, &key("1.3"), "a"),
                1,
                &key("1.3"),
                "a"
            )
            .is_ok());
        assert_eq!(t.issued_to(back), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn release_only_ends_the_workers_own_leases() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let a = t.issue(1, key("1.2"), "a", "a", now);
        let b = t.issue(1, key("1.3"), "b", "b", now);
        assert_eq!(t.release("a", &[a, b]).len(), 1);
        assert!(t.is_leased(1, &key("1.3")));
        assert_eq!(t.count(1), 1);
    }

    #[test]
    fn a_delivered_lease_is_closed_only_for_its_own_job_and_worker() {
        let mut leases = Leases::new(1, [7; 16], Duration::from_secs(60));
        let now = Instant::now();
        let key: JobKey = "1.2".parse().unwrap();
        let other: JobKey = "1.3".parse().unwrap();
        let id = leases.issue(1, key.clone(), "w-1", "w", now);
        leases.close_delivered(id, 1, &other, "w-1");
        leases.close_delivered(id, 2, &key, "w-1");
        leases.close_delivered(id, 1, &key, "someone-else");
        assert!(
            leases.is_leased(1, &key),
            "a report naming it for another job or worker ends nothing"
        );
        leases.close_delivered(id, 1, &key, "w-1");
        assert!(!leases.is_leased(1, &key));
        assert!(
            leases.expire(now + Duration::from_secs(3600)).is_empty(),
            "nothing left to expire"
        );
    }

    /// A job counted under its own lease forgets every lease of it. Counted under an expired lease while
    /// another worker held it again, it keeps that other lease, ended, for a dispute; and a lease that
    /// expired unsettled too; not one handed back, nor the counted one.
    #[tokio::test(start_paused = true)]
    async fn a_count_keeps_the_jobs_other_unsettled_leases_only() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let own = t.issue(1, key("1.2"), "a", "a", now);
        t.settle_counted(1, &key("1.2"), own);
        assert_eq!(t.issued_to(own), None, "forgotten");
        assert!(!t.is_leased(1, &key("1.2")));
        assert!(t.past.is_empty() && t.past_by_job.is_empty() && t.active.is_empty());

        let back = t.issue(1, key("1.3"), "hoarder", "hoarder", now);
        t.release("hoarder", &[back]);
        let late = t.issue(1, key("1.3"), "late", "late", now);
        let slow = {
            t.expire(now + Duration::from_secs(11));
            t.issue(1, key("1.3"), "slow", "slow", now + Duration::from_secs(11))
        };
        t.expire(now + Duration::from_secs(22));
        let fresh = t.issue(
            1,
            key("1.3"),
            "fresh",
            "fresh",
            now + Duration::from_secs(22),
        );
        assert!(!t.outlived(slow), "expired, its job still open");
        t.settle_counted(1, &key("1.3"), late);
        assert!(t.outlived(slow) && t.outlived(fresh));
        assert!(!t.outlived(late) && !t.outlived(back));
        assert_eq!(t.issued_to(late), None, "the counted lease is forgotten");
        assert_eq!(t.issued_to(back), None, "a lease handed back is forgotten");
        assert_eq!(t.issued_to(slow), Some("slow"), "expired unsettled: kept");
        assert_eq!(t.issued_to(fresh), Some("fresh"), "live: kept");
        assert_eq!(t.issued_at(fresh), None, "ended");
        assert!(!t.is_leased(1, &key("1.3")));
        for (id, name) in [(slow, "slow"), (fresh, "fresh")] {
            assert!(t
                .check_report(id, t.tag(id, 1, &key("1.3"), name), 1, &key("1.3"), name)
                .is_ok());
        }
        assert_eq!(t.past.len(), 2);
        // Each is forgotten once it delivers: a done job keeps no lease for good.
        assert!(t.deliver(slow, 1, &key("1.3"), "slow"));
        assert_eq!(t.issued_to(slow), None);
        assert!(!t.outlived(slow), "one result");
        assert_eq!(
            t.past_by_job[&(1, key("1.3"))],
            vec![fresh],
            "the other stays"
        );
        assert!(!t.deliver(slow, 1, &key("1.3"), "slow"), "once");
        assert!(t.credit_once(fresh), "a dispute under it");
        assert_eq!(t.issued_to(fresh), None);
        assert!(t.past.is_empty() && t.past_by_job.is_empty());

        // A lease that delivered before the count (a result held for a check) is not kept.
        let held = t.issue(1, key("1.4"), "a", "a", now);
        t.close(held);
        let second = t.issue(1, key("1.4"), "b", "b", now);
        t.settle_counted(1, &key("1.4"), second);
        assert_eq!(t.issued_to(held), None);
        assert!(t.past.is_empty() && t.past_by_job.is_empty() && t.active.is_empty());
    }

    /// A result the run took is credited once per lease, whichever of it and a copy is applied first:
    /// a copy delivered first leaves nothing to credit; a result credited first (its lease closed)
    /// leaves no copy to credit. A lease the table does not know (an earlier incarnation's) is credited.
    #[tokio::test(start_paused = true)]
    async fn a_lease_is_credited_once_whichever_comes_first() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let copy_first = t.issue(1, key("1.2"), "w", "a", now);
        assert!(t.deliver(copy_first, 1, &key("1.2"), "a"));
        assert!(!t.credit_once(copy_first));
        let taken_first = t.issue(1, key("1.3"), "w", "a", now);
        assert!(t.credit_once(taken_first));
        assert!(t.is_leased(1, &key("1.3")), "its handling ends it");
        t.close(taken_first);
        assert!(!t.credit_once(taken_first));
        assert!(!t.deliver(taken_first, 1, &key("1.3"), "a"));
        let expired = t.issue(1, key("1.4"), "w", "a", now);
        t.expire(now + Duration::from_secs(11));
        assert!(t.credit_once(expired), "a late result");
        assert!(!t.credit_once(expired));
        assert!(t.credit_once(12345), "unknown");
    }

    /// A lease delivers a copy of its job's counted result once: only for its own job and identity,
    /// not handed back, active or ended; a lease that delivered a result of its own (`close`) delivers
    /// none more.
    #[tokio::test(start_paused = true)]
    async fn a_lease_delivers_once_for_its_own_job_and_identity() {
        let mut t = Leases::new(1, SECRET, Duration::from_secs(10));
        let now = Instant::now();
        let live = t.issue(1, key("1.2"), "w", "a", now);
        assert!(!t.deliver(live, 1, &key("1.3"), "a"), "another job");
        assert!(!t.deliver(live, 2, &key("1.2"), "a"), "another run");
        assert!(!t.deliver(live, 1, &key("1.2"), "b"), "another identity");
        assert!(t.is_leased(1, &key("1.2")));
        assert!(t.deliver(live, 1, &key("1.2"), "a"));
        assert!(!t.is_leased(1, &key("1.2")), "ended");
        assert_eq!(t.issued_to(live), Some("a"), "still recognised");
        assert!(!t.deliver(live, 1, &key("1.2"), "a"), "once");

        let expired = t.issue(1, key("1.4"), "w", "a", now);
        t.expire(now + Duration::from_secs(11));
        assert!(!t.deliver(expired, 1, &key("1.4"), "b"));
        assert!(t.deliver(expired, 1, &key("1.4"), "a"));
        assert!(!t.deliver(expired, 1, &key("1.4"), "a"));

        let back = t.issue(1, key("1.5"), "w", "a", now);
        t.release("w", &[back]);
        assert!(!t.deliver(back, 1, &key("1.5"), "a"), "handed back");
        let closed = t.issue(1, key("1.6"), "w", "a", now);
        t.close(closed);
        assert!(!t.deliver(closed, 1, &key("1.6"), "a"), "delivered its own");
        assert!(!t.deliver(999, 1, &key("1.6"), "a"), "never issued");
    }

    /// An identity keeps at most [`OUTLIVED_PER_IDENTITY`] leases past their jobs' counts, the most
    /// recent: one that lets its leases expire by the thousand, honest workers counting the jobs, keeps
    /// no more, so its different results can take back no more counts at once, and the table does not
    /// grow with its expiries. Before, every one was kept until it delivered (found by a review,
    /// 2026-11-30). Another identity's are untouched.
    #[tokio::test(start_paused = true)]
    async fn an_identity_keeps_a_bounded_number_of_leases_past_their_jobs_counts() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let mut t = Leases::new(2, SECRET, s(10));
        let honest = t.issue(1, key("1"), "h", "h", now);
        let extra = 5;
        let leases: Vec<(u64, JobKey)> = (0..OUTLIVED_PER_IDENTITY + extra)
            .map(|k| {
                let job = key(&format!("0.{}.{}", k / 200, k % 200));
                (t.issue(1, job.clone(), "l", "l", now), job)
            })
            .collect();
        assert_eq!(t.expire(now + s(11)).len(), leases.len() + 1);
        let jobs = leases.iter().map(|(_, job)| job.clone()).chain([key("1")]);
        for job in jobs {
            let counted = t.issue(1, job.clone(), "c", "c", now + s(11));
            assert!(t.deliver(counted, 1, &job, "c"));
            t.settle_counted(1, &job, counted);
        }
        let kept = leases.iter().filter(|(id, _)| t.outlived(*id)).count();
        assert_eq!(kept, OUTLIVED_PER_IDENTITY);
        for (id, job) in &leases[..extra] {
            assert!(!t.outlived(*id), "the oldest go first");
            assert!(
                !t.past_by_job.contains_key(&(1, job.clone())),
                "gone from its job's history too"
            );
            assert!(t
                .check_report(*id, t.tag(*id, 1, job, "l"), 1, job, "l")
                .is_err());
        }
        let (last, job) = leases.last().unwrap();
        assert!(t
            .check_report(*last, t.tag(*last, 1, job, "l"), 1, job, "l")
            .is_ok());
        assert!(t.outlived(honest), "another identity's stays");
        assert_eq!(t.outlived_by_name["l"].len(), OUTLIVED_PER_IDENTITY);
        assert_eq!(t.past.len(), OUTLIVED_PER_IDENTITY + 1);
        // Delivering forgets one, from its identity's count too.
        assert!(t.deliver(*last, 1, job, "l"));
        assert_eq!(t.outlived_by_name["l"].len(), OUTLIVED_PER_IDENTITY - 1);
        assert!(t.deliver(honest, 1, &key("1"), "h"));
        assert!(!t.outlived_by_name.contains_key("h"));
    }
}
