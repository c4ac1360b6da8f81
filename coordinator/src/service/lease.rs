//! Leasing: handing jobs to workers, heartbeats that keep them, hand-backs, and expiry of leases whose
//! worker went silent (their jobs are leased again). A lease call never reads the store under the state
//! lock: it takes candidate jobs out of the run's queues under the lock, reads their records without it,
//! and decides on them under the lock again (a candidate settled by another call meanwhile is dropped,
//! one still wanted goes back where it came from).

use crate::durable::credentials::SHARED_IDENTITY;
use std::time::Duration;

use nqueens_common::JobKey;
use tokio::time::Instant;

use super::grant::{Grant, Granted};
use super::strikes::Charge;
use super::workers::Contact;
use super::{lookup, truncate, Coordinator};
use crate::durable::committer::{Write, Written};
use crate::durable::store::{JobRecord, JobState, Phase};
use crate::error::{Error, Result};
use nqueens_common::names::{distinct_gpu_kernels, MAX_GPU_SHAPES};

/// Most keys of a plan's list one round of a lease call takes (the rounds double from what is wanted
/// while they find only done jobs, as after a restart).
const MAX_BATCH_OF_CANDIDATES: usize = 4096;

/// Most keys of a run's retry queue one lease call looks at (each costs a store read). A call stops
/// there, with what it found; a worker that nothing there is for (verified jobs it computed itself,
/// waiting for another worker name) is not told it is idle while the queue holds more.
const MAX_RETRY_LOOK: usize = 4 * MAX_BATCH_OF_CANDIDATES;

/// Shortest time between two looks of one waiting lease call, whatever wakes it: calls whose looks
/// overlap (on several threads) announce their hand-backs to one another, and must not wake one
/// another round after round.
pub const MIN_LOOK_GAP: Duration = Duration::from_millis(250);

/// Longest time between two looks of one waiting lease call: its gap doubles from [`MIN_LOOK_GAP`]
/// after each look that found nothing. At the tail of a verified run, each first result is news to
/// every waiting call and a job for a few of them (those the draw admits): a thousand calls looking
/// four times a second cut what the coordinator committed by a third (`loadgen --waiters`,
/// BENCHMARKS.md). A job freed by news (`Shared::lease_news`) waits at most this long for a call that
/// has waited long; one freed by time alone (a bar lapsing, the draw's period doubling, the family wait
/// ending) waits for the end of the call's wait, 10 s at most.
pub const MAX_LOOK_GAP: Duration = Duration::from_secs(2);

/// Most jobs one lease request may ask for.
pub const MAX_CAPACITY: u32 = nqueens_proto::MAX_LEASE_CAPACITY;
/// Most lease ids one heartbeat or release may name.
pub const MAX_IDS: usize = nqueens_proto::MAX_LEASE_IDS;
/// Longest a lease request may wait for a job.
pub const MAX_WAIT: Duration = Duration::from_secs(10);
/// Longest worker id or name.
const MAX_ID_LEN: usize = nqueens_common::names::MAX_WORKER_ID_LEN;
/// Most GPUs a worker may say it computes on.
pub const MAX_GPUS: u32 = nqueens_proto::MAX_GPUS;
/// Leases a worker credential with no result counted may hold at once, all its processes together.
pub const NEW_IDENTITY_LEASES: u64 = 256;
/// Further leases it may hold per result it had counted.
pub const LEASES_PER_RESULT: u64 = 4;

/// Leases a worker credential with `counted` results counted may hold at once.
pub fn lease_limit(counted: u64) -> u64 {
    NEW_IDENTITY_LEASES.saturating_add(counted.saturating_mul(LEASES_PER_RESULT))
}

/// Most leases one worker credential may hand back within one lease timeout, whatever its lease limit.
pub const MAX_HAND_BACKS: u64 = 16_384;

/// Leases a worker credential with `counted` results counted may hand back within one lease timeout:
/// twice what it may hold (a worker that stops, and starts and stops again, is not refused), at most
/// [`MAX_HAND_BACKS`].
pub fn hand_back_allowance(counted: u64) -> u64 {
    lease_limit(counted).saturating_mul(2).min(MAX_HAND_BACKS)
}

/// A worker's request for jobs.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub worker: &'a str,
    /// Who the worker is for every check, dispute, quarantine and strike: its credential's identity, or
    /// under the operator's token (or none) the name it states.
    pub name: &'a str,
    /// The name it states for itself (a label for people).
    pub label: &'a str,
    /// Whether it holds a worker credential: it may hold at most [`lease_limit`] leases.
    pub credential: bool,
    pub threads: u32,
    /// GPUs computing beside its threads (at most [`MAX_GPUS`]).
    pub gpus: u32,
    /// The kernel shape each of its GPUs runs (at most [`MAX_GPUS`], of them at most
    /// [`MAX_GPU_SHAPES`] distinct, each as [`nqueens_common::names::valid_gpu_kernel`]).
    pub gpu_kernels: &'a [String],
    /// How many jobs it wants (1 to [`MAX_CAPACITY`]).
    pub capacity: u32,
    /// Only jobs of this run.
    pub only: Option<&'a str>,
}

impl Ask<'_> {
    /// Checks the request's worker id, name, GPUs and capacity.
    pub fn check(&self) -> Result<()> {
        check_worker("worker id", self.worker)?;
        check_worker("worker name", self.name)?;
        check_worker("worker name", self.label)?;
        if self.gpus > MAX_GPUS {
            return Err(Error::Invalid(format!(
                "{} GPUs; at most {MAX_GPUS}",
                self.gpus
            )));
        }
        if self.gpu_kernels.len() > MAX_GPUS as usize {
            return Err(Error::Invalid(format!(
                "{} GPU kernels; at most {MAX_GPUS}",
                self.gpu_kernels.len()
            )));
        }
        if let Some(bad) = self
            .gpu_kernels
            .iter()
            .find(|k| !nqueens_common::names::valid_gpu_kernel(k))
        {
            let shown: String = bad.chars().take(40).collect();
            return Err(Error::Invalid(format!(
                "GPU kernel {shown:?}: 1 to {} characters of a-z, 0-9 and /",
                nqueens_common::names::MAX_GPU_KERNEL_LEN
            )));
        }
        if distinct_gpu_kernels(self.gpu_kernels, MAX_GPU_SHAPES + 1).len() > MAX_GPU_SHAPES {
            return Err(Error::Invalid(format!(
                "more than {MAX_GPU_SHAPES} distinct GPU kernels"
            )));
        }
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return Err(Error::Invalid(format!(
                "capacity {} is out of range: 1 to {MAX_CAPACITY}",
                self.capacity
            )));
        }
        Ok(())
    }
}

/// Ends the leases among `ids` that `worker` holds and puts their jobs back in line; returns how many.
/// The leases among `ids` that `worker` holds and may hand back now: as many as its identity may
/// still hand back within this lease timeout ([`super::hand_backs`]), in the order given.
fn allowed_hand_backs(state: &mut super::State, worker: &str, ids: &[u64]) -> Vec<u64> {
    let now = Instant::now();
    let timeout = state.leases.timeout();
    let mut seen = std::collections::HashSet::new();
    let mine: Vec<(u64, String)> = ids
        .iter()
        .filter(|id| seen.insert(**id))
        .filter_map(|&id| Some((id, state.leases.held_as(id, worker)?.to_string())))
        .collect();
    let mut wanted = std::collections::BTreeMap::<&str, u64>::new();
    for (_, name) in &mine {
        *wanted.entry(name.as_str()).or_default() += 1;
    }
    let mut room: std::collections::HashMap<&str, u64> = wanted
        .into_iter()
        .map(|(name, n)| {
            let allowance = hand_back_allowance(state.counted.get(name).copied().unwrap_or(0));
            (
                name,
                state.hand_backs.take(name, n, allowance, now, timeout),
            )
        })
        .collect();
    mine.iter()
        .filter(|(_, name)| {
            room.get_mut(name.as_str()).is_some_and(|left| match *left {
                0 => false,
                _ => {
                    *left -= 1;
                    true
                }
            })
        })
        .map(|(id, _)| *id)
        .collect()
}

/// Ends spot check `id` of `out` (answered, expired or handed back): that lease alone
/// ([`super::lease_table::Leases::end_check`]). Its job goes back in line: a count taken back while
/// the check was out left the job open, and a lease call that met it then, leased, dropped it (found
/// by a review, 2026-11-29: such a job sat disputed in no queue until a restart). A job still done is
/// dropped by the next lease call that reads its record.
pub(super) fn end_spot_check(state: &mut super::State, id: u64, out: &super::spot::Out) {
    state.leases.end_check(id);
    if let Some(run) = state.runs.get_mut(&out.run) {
        run.requeue(out.key.clone());
    }
}

fn hand_back(state: &mut super::State, worker: &str, ids: &[u64]) -> Vec<(u64, u64, String)> {
    let released = state.leases.release(worker, ids);
    for lease in &released {
        // A spot check ends alone; its job goes back in line in case a count was taken back while
        // it was out (a job done is dropped there); the identity owes the check.
        if let Some((out, owed)) = state.spot.ended_owing(lease.id) {
            end_spot_check(state, lease.id, &out);
            if owed {
                state.spot.owe(&lease.name, out);
            }
            continue;
        }
        if let Some(run) = state.runs.get_mut(&lease.run) {
            run.requeue(lease.key.clone());
        }
    }
    released
        .into_iter()
        .map(|l| (l.run, l.id, l.name))
        .collect()
}

/// Whether the identity `name` may decide a dispute: the operator's workers (`!credential`), or a
/// worker credential with a record (a result a second identity confirmed, or a spot check passed),
/// never an identity that is new.
pub(super) fn may_decide(state: &super::State, credential: bool, name: &str) -> bool {
    !credential || state.confirmed.contains(name) || state.spot.passed_by(name) > 0
}

/// Whether `id` is the id of a process of the worker named `name`: the name itself, the name, a
/// process id and a start time in hex (`NAME-PID-STARTHEX`, as workers make it), or any id the
/// coordinator scoped to the identity `name` (`NAME/ID`, see [`scoped_id`]).
fn id_of(id: &str, name: &str) -> bool {
    let Some(rest) = id.strip_prefix(name) else {
        return false;
    };
    if rest.is_empty() || rest.starts_with('/') {
        return true;
    }
    let mut parts = rest.split('-');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(""), Some(pid), Some(start), None)
            if !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && !start.is_empty()
                && start.bytes().all(|b| b.is_ascii_hexdigit())
    )
}

/// The worker id a process of the credential `identity` is known by: `IDENTITY/ID`, so that no holder
/// of another credential can heartbeat, hand back or report as it, whatever id it states. An id too long
/// for that is replaced by a hash of it.
pub fn scoped_id(identity: &str, id: &str) -> String {
    let scoped = format!("{identity}/{id}");
    if scoped.len() <= MAX_ID_LEN {
        return scoped;
    }
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher24::new();
    h.write(id.as_bytes());
    format!("{identity}/{:016x}", h.finish())
}

/// Checks a worker id or name from the network ([`nqueens_common::names::valid_new_worker_id`]).
pub(crate) fn check_worker(what: &str, id: &str) -> Result<()> {
    named_by_rule(
        what,
        id,
        nqueens_common::names::valid_new_worker_id(id),
        "printable characters, none of Unicode's format characters or separators of lines",
    )
}

/// Checks a worker name that may be stored ([`nqueens_common::names::valid_worker_id`]): one the
/// operator names, which an earlier build may have taken.
pub(crate) fn check_stored_worker(what: &str, id: &str) -> Result<()> {
    named_by_rule(
        what,
        id,
        nqueens_common::names::valid_worker_id(id),
        "characters with no control character",
    )
}

/// `Ok` if `id` follows its rule (`follows`), else the refusal saying that rule (`of`).
fn named_by_rule(what: &str, id: &str, follows: bool, of: &str) -> Result<()> {
    match follows {
        true => Ok(()),
        false => Err(Error::Invalid(format!(
            "{what} {:?} must be 1 to {MAX_ID_LEN} bytes of {of}",
            truncate(id)
        ))),
    }
}

/// Checks the device a result names ([`nqueens_common::names::valid_device`]).
pub(crate) fn check_device(device: &str) -> Result<()> {
    if !nqueens_common::names::valid_device(device) {
        return Err(Error::Invalid(format!(
            "device {:?} must be 1 to {} letters, digits or :._-",
            truncate(device),
            nqueens_common::names::MAX_DEVICE_LEN
        )));
    }
    Ok(())
}

fn check_ids(ids: &[u64]) -> Result<()> {
    if ids.len() > MAX_IDS {
        return Err(Error::Invalid(format!(
            "{} lease ids in one request; at most {MAX_IDS}",
            ids.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// Tests: run by a lease call between its take of candidates and their settling (another call's
    /// look meanwhile).
    pub(super) static MEANWHILE: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
        const { std::cell::RefCell::new(None) };
    /// Tests: the job records lease calls read from the store so far.
    pub(super) static READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// One attempt at a lease.
struct Attempt {
    grant: Grant,
    /// Whether it announced a change (jobs leased, or keys handed back that a waiting call may take).
    notified: bool,
    /// Whether a job come free could be leased to the caller: not when it is benched, or holds all the
    /// leases it may (it asks again after `retry_after`).
    may_wait: bool,
}

/// The parts of the state a lease call's [`super::steer::Steer`] is made of, borrowed apart from its
/// runs (which the call holds mutably meanwhile).
macro_rules! state_parts {
    ($state:ident) => {
        (
            &$state.workers,
            &$state.quarantined,
            $state.leases.timeout(),
            ($state.family_wait, $state.draw_secret),
        )
    };
}

/// [`state_parts`]: the worker table, the quarantined identities, the lease timeout, and the family
/// wait with the draw's secret.
type StateParts<'a> = (
    &'a super::workers::Workers,
    &'a std::collections::HashMap<String, String>,
    Duration,
    (Duration, [u8; 16]),
);

/// What the lease call of identity `name` at `now` knows of the identities around it, made at the
/// first job that could wait for another ([`super::steer::Steer::of`]).
fn steer_of<'a>(
    (workers, quarantined, timeout, draw): StateParts<'a>,
    name: &'a str,
    now: Instant,
) -> impl Fn() -> super::steer::Steer + 'a {
    move || super::steer::Steer::of(workers, quarantined, name, now, timeout, draw)
}

impl Coordinator {
    /// Leases up to `ask.capacity` jobs, from the running run of the highest priority first, the oldest
    /// among equals (or from `ask.only`); paused and cancelled runs lease nothing. When
    /// nothing can be leased and a run is still running, waits up to `wait` for a job to come free (an
    /// expired or handed-back lease) or for the runs to end; not when the caller is benched or holds all
    /// the leases it may, nor beyond its identity's [`super::waiting::MAX_WAITING`] waiting calls.
    pub async fn lease(&self, ask: &Ask<'_>, wait: Duration) -> Result<Grant> {
        if let Some(why) = self.storage().degraded() {
            return Err(Error::Durability(format!(
                "not leasing jobs while the coordinator cannot write its store ({why}); it probes the disk and leases again once writes succeed"
            )));
        }
        let deadline = Instant::now() + wait.min(MAX_WAIT);
        let mut changes = self.subscribe_lease_news();
        // This call's place among its identity's waiting calls, taken when it first waits.
        let mut place = None;
        // Its time between two looks, doubled after each that found nothing.
        let mut gap = MIN_LOOK_GAP;
        loop {
            let seen = *changes.borrow_and_update();
            let looked_at = Instant::now();
            let Attempt {
                grant,
                notified,
                may_wait,
            } = self.try_lease(ask)?;
            if !grant.leases.is_empty() || grant.idle || !may_wait || Instant::now() >= deadline {
                return Ok(grant);
            }
            if place.is_none() {
                place = self.shared.waiting.take(ask.name);
                if place.is_none() {
                    tracing::debug!(
                        worker = ask.worker,
                        name = ask.name,
                        "a lease call beyond its identity's waiting places answered at once"
                    );
                    return Ok(grant);
                }
            }
            // Keys this call looked at and handed back are no news to it: a change that is only its
            // own is marked seen, or the call would wake itself at once, look again, and spin.
            if only_its_own_change(notified, seen, *changes.borrow()) {
                changes.borrow_and_update();
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
            tokio::time::sleep_until((looked_at + gap).min(deadline)).await;
            gap = (gap * 2).min(MAX_LOOK_GAP);
        }
    }

    /// One attempt of [`Coordinator::lease`], without waiting.
    fn try_lease(&self, ask: &Ask<'_>) -> Result<Attempt> {
        ask.check()?;
        let Ask {
            worker,
            name,
            label,
            credential,
            threads,
            gpus,
            gpu_kernels,
            capacity,
            only,
        } = *ask;
        let now = Instant::now();
        let mut guard = self.state();
        let only = only
            .map(|id| lookup(&guard, id).map(|r| r.meta.id))
            .transpose()?;
        let state = &mut *guard;
        if let Some(reason) = state.quarantined.get(name) {
            return Err(Error::Quarantined {
                worker: name.to_string(),
                reason: reason.clone(),
            });
        }
        let benched = state.strikes.benched(name, now);
        let capacity = state.strikes.capacity(name, capacity);
        // A credential holds leases in proportion to the results it had counted: a new identity
        // cannot take a whole run and sit on it.
        let capacity = match credential {
            true => {
                let counted = state.counted.get(name).copied().unwrap_or(0);
                let room = lease_limit(counted).saturating_sub(state.leases.held_by(name));
                capacity.min(u32::try_from(room).unwrap_or(u32::MAX))
            }
            false => capacity,
        };
        match state.workers.seen(worker, now) {
            Contact::Joined if state.contacts.logs(worker, now) => {
                tracing::info!(worker = %worker, name = %name, threads, "worker joined")
            }
            Contact::Returned if state.contacts.logs(worker, now) => {
                tracing::info!(worker = %worker, name = %name, threads, "worker returned")
            }
            _ => {}
        }
        state
            .workers
            .describe(worker, name, label, threads, gpus, gpu_kernels);
        // The highest priority first; among equals, the oldest.
        let mut order: Vec<(i32, u64)> = state
            .runs
            .values()
            .filter(|r| r.phase() == Phase::Running && only.is_none_or(|id| id == r.meta.id))
            // A record run's results come from issued credentials only: names stated under the
            // operator's token (or none) are not identities, and the shared workers' token is
            // one identity for any number of machines.
            .filter(|r| (credential && name != SHARED_IDENTITY) || !r.meta.record)
            .map(|r| (r.meta.priority, r.meta.id))
            .collect();
        order.sort_by_key(|&(priority, id)| (std::cmp::Reverse(priority), id));
        // Spot checks first, in place of some of the jobs asked for: confirmed jobs of the runs it may
        // lease from now, never of a finished run (whose every lease would be a check).
        let leasable: Vec<u64> = order.iter().map(|&(_, id)| id).collect();
        let spots = match credential && benched.is_none() {
            true => super::spot::lease(state, worker, name, capacity, &leasable, now),
            false => Vec::new(),
        };
        // Benched, or with no room for a lease: waiting would bring nothing.
        let may_wait = benched.is_none() && capacity > 0;
        let capacity = capacity - spots.len() as u32;
        // A worker credential decides disputes only with a record: a result a second identity
        // confirmed, or a spot check passed (never an identity that is new, or a name of the shared
        // token's that has neither).
        let may_decide = may_decide(state, credential, name);
        drop(guard);

        let spotted = spots.len();
        let mut leases = spots;
        let running = order.len();
        // Whether keys went back to a run's queues that a waiting call might take.
        let mut wake_others = false;
        // Whether everything left in the running runs is out of this worker's reach for good: only
        // verified jobs it computed itself, waiting for another worker name (nothing leased anywhere
        // that could come back to it).
        let mut beyond_reach = benched.is_none();
        for (_, id) in order {
            let mut run_dry = false;
            let mut first_round = true;
            // Whether this call began a pass over the run (ended after its last round).
            let mut in_pass = false;
            // Jobs come back to the retry queue so far, when this call first looked at it.
            let mut requeued_at_look = None;
            // Of the jobs come back to the retry queue since, those this call handed back itself.
            let mut own_back = 0u64;
            // Keys of the retry queue this call may still look at: the queue as it was at the first
            // look, up to MAX_RETRY_LOOK; and whether the queue held more than that.
            let mut retry_left = 0;
            let mut retry_beyond_look = false;
            // Keys of the list taken per round: what is wanted, doubled while the list yields only
            // done jobs (a restarted run walks past them quickly, a fresh one reads no more than needed).
            let mut batch = 0;
            while benched.is_none() && leases.len() - spotted < capacity as usize {
                let want = capacity as usize - (leases.len() - spotted);
                // Candidates are taken under the lock, their records read without it, and decided on
                // under it again: no store read while the state lock is held.
                let candidates = {
                    let mut guard = self.state();
                    let state = &mut *guard;
                    let Some(run) = state.runs.get_mut(&id) else {
                        break;
                    };
                    if run.phase() != Phase::Running {
                        break;
                    }
                    // The retry queue (each key at most once per call), then the list, until both
                    // run out or enough is found.
                    if first_round {
                        run.begin_pass();
                        in_pass = true;
                        requeued_at_look = Some(run.requeued());
                        retry_left = run.retry_len().min(MAX_RETRY_LOOK);
                        retry_beyond_look = run.retry_len() > MAX_RETRY_LOOK;
                    }
                    batch = batch.max(want);
                    let steer = steer_of(state_parts!(state), name, now);
                    let asking = super::live::Asking {
                        name,
                        may_decide,
                        steer: &steer,
                    };
                    run.take_candidates(&state.leases, &asking, want, batch, &mut retry_left)
                };
                first_round = false;
                // A job this identity is barred from for a while is its own again once the bar
                // lapses, and one held from it once the draw admits it: never idle.
                if candidates.barred || candidates.held > 0 {
                    beyond_reach = false;
                }
                #[cfg(test)]
                MEANWHILE.with_borrow_mut(|f| f.as_mut().map_or((), |f| f()));
                #[cfg(test)]
                READS.set(READS.get() + candidates.keys().count() as u64);
                let read: Result<Vec<_>> = candidates
                    .keys()
                    .map(|key| match self.shared.store.job(id, key) {
                        // Damaged on disk (its group of results, say): not leased (it may be done).
                        // Storage is marked degraded, so that the store is reopened and repaired from
                        // the ledger, or refused by name.
                        Err(e @ Error::Corrupt(_)) => {
                            tracing::error!(run = id, job = %key, reason = %e, place = "store", "a job whose stored state cannot be read is not leased");
                            self.shared.metrics.corrupt_record("store");
                            self.note_damage(&e);
                            Ok(Some(JobRecord::done()))
                        }
                        // sled's own (a read the disk refused): the call fails, and storage is marked
                        // degraded too, so that the store is reopened.
                        other => other.inspect_err(|e| self.note_damage(e)),
                    })
                    .collect();
                let mut guard = self.state();
                let state = &mut *guard;
                let Some(run) = state.runs.get_mut(&id) else {
                    break;
                };
                let look = candidates.look;
                let records = match read {
                    Ok(records) => records,
                    Err(e) => {
                        run.put_back(candidates);
                        run.end_pass();
                        return Err(e);
                    }
                };
                let super::live::Settled {
                    chosen,
                    requeued: back,
                    returned,
                    held,
                    after_first,
                    for_dispute,
                } = run.settle(
                    &state.leases,
                    &super::live::Asking {
                        name,
                        may_decide,
                        steer: &steer_of(state_parts!(state), name, now),
                    },
                    candidates,
                    records,
                    want,
                );
                // (A set: a call may lease 4,096 second results at once, each looked up.)
                let mut after_first: std::collections::HashMap<
                    JobKey,
                    crate::durable::store::Sides,
                > = after_first.into_iter().collect();
                let for_dispute: std::collections::HashSet<JobKey> =
                    for_dispute.into_iter().collect();
                // A credential's room measured again as the leases are issued: calls made at once
                // each measured it before the store reads, with the lock released.
                let mut chosen = chosen;
                let mut full = false;
                if credential {
                    let counted = state.counted.get(name).copied().unwrap_or(0);
                    let room = lease_limit(counted).saturating_sub(state.leases.held_by(name));
                    let room = usize::try_from(room).unwrap_or(usize::MAX);
                    if chosen.len() > room {
                        run.put_back_chosen(chosen.split_off(room));
                        wake_others |= run.news_since(look);
                        full = true;
                    }
                }
                own_back += back as u64;
                wake_others |= returned;
                // A job held for another family or a drawn identity is this worker's once the wait
                // ends (at most a few periods): never idle.
                if held > 0 {
                    beyond_reach = false;
                }
                if chosen.is_empty() {
                    batch = (batch * 2).min(MAX_BATCH_OF_CANDIDATES);
                }
                if run.phase() != Phase::Running {
                    // Paused or cancelled meanwhile: what was chosen waits (or is dropped with the run).
                    run.put_back_chosen(chosen);
                    break;
                }
                // (Cut to the room left, `chosen` says nothing of what the run has.)
                run_dry = !full && chosen.len() < want && run.list_exhausted() && retry_left == 0;
                for key in chosen {
                    run.working(now);
                    run.leased(&key);
                    let lease = state
                        .leases
                        .issue(run.meta.id, key.clone(), worker, name, now);
                    if credential && name != SHARED_IDENTITY {
                        state.leases.bar_at_hold(lease);
                    }
                    if let Some(held) = after_first.remove(&key) {
                        state.leases.mark_after_first(lease, held);
                    }
                    if for_dispute.contains(&key) {
                        state.leases.mark_for_dispute(lease);
                    }
                    leases.push(Granted {
                        id: lease,
                        tag: state.leases.tag(lease, run.meta.id, &key, name),
                        run: run.meta.id,
                        plan: run.plan,
                        fingerprint: run.fingerprint,
                        key,
                    });
                }
                if run_dry || full {
                    break;
                }
            }
            let mut state = self.state();
            if let Some(run) = state.runs.get_mut(&id).filter(|_| in_pass) {
                run.end_pass();
            }
            // Nothing of the list left, nothing in other calls' hands, the whole retry queue looked at,
            // and no job come back to it since this call first looked.
            let exhausted = state.runs.get(&id).is_none_or(|run| {
                !retry_beyond_look
                    && run.list_exhausted()
                    && !run.candidates_in_flight()
                    && requeued_at_look.map(|at| at + own_back) == Some(run.requeued())
            });
            if !(run_dry && exhausted && state.leases.count(id) == 0) {
                beyond_reach = false;
            }
        }
        let guard = self.state();
        let state = &*guard;
        let lease_timeout = state.leases.timeout();
        drop(guard);
        self.shared
            .metrics
            .leases_issued
            .inc_by(leases.len() as u64);
        if !leases.is_empty() {
            tracing::debug!(worker, jobs = leases.len(), "leased");
        }
        // Keys handed back are news to waiting calls; leases issued, to status watchers alone.
        let notified = wake_others;
        if notified {
            self.changed();
        } else if !leases.is_empty() {
            self.progressed();
        }
        let retry_after = match benched {
            // A benched worker comes back when its bench ends (within the worker's own cap).
            Some(left) if running > 0 => left.max(Duration::from_millis(50)),
            _ => (lease_timeout / 8).clamp(Duration::from_millis(50), Duration::from_secs(2)),
        };
        // A worker with nothing it may ever lease is idle too: `--exit-when-idle` lets it go.
        let idle = running == 0 || (leases.is_empty() && beyond_reach);
        let grant = Grant {
            leases,
            lease_timeout,
            retry_after,
            idle,
        };
        Ok(Attempt {
            grant,
            notified,
            may_wait,
        })
    }

    /// Extends the worker's leases; returns those that are no longer its, and among them those whose
    /// run was cancelled (their jobs are not wanted any more). A quarantined worker's heartbeat is
    /// refused, and the leases it names go back in line at once.
    pub fn heartbeat(&self, worker: &str, ids: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
        check_worker("worker id", worker)?;
        check_ids(ids)?;
        let now = Instant::now();
        let mut guard = self.state();
        let state = &mut *guard;
        if state.workers.seen(worker, now) == Contact::Returned && state.contacts.logs(worker, now)
        {
            tracing::info!(worker = %worker, "worker returned");
        }
        // By its name as its lease calls gave it, or, where the worker table forgot it (or never
        // heard it), by its id, which workers make as NAME-PID-STARTHEX.
        let named = state.workers.name_of(worker);
        let quarantined = state
            .quarantined
            .iter()
            .find(|(name, _)| name.as_str() == named || id_of(worker, name));
        if let Some((name, reason)) = quarantined {
            let refused = Error::Quarantined {
                worker: name.to_string(),
                reason: reason.clone(),
            };
            let released = hand_back(state, worker, ids);
            drop(guard);
            self.keep_handed_back(&released);
            if !released.is_empty() {
                tracing::warn!(worker = %worker, jobs = released.len(), "a quarantined worker's leases taken back");
                self.changed();
            }
            return Err(refused);
        }
        let lost = state.leases.heartbeat(worker, ids, now);
        let cancelled = state.leases.cancelled_among(&lost);
        Ok((lost, cancelled))
    }

    /// Takes back leases the worker did not start (and notes that it is `leaving`, if it says so);
    /// returns how many were its.
    pub fn release(&self, worker: &str, ids: &[u64], leaving: bool) -> Result<u32> {
        self.release_as(worker, ids, leaving, false)
    }

    /// [`Coordinator::release`] from a caller that holds a worker credential (`credential`) or not:
    /// a worker credential hands back at most as many leases within one lease timeout as it may hold
    /// ([`super::hand_backs`]); the others stay its own.
    pub fn release_as(
        &self,
        worker: &str,
        ids: &[u64],
        leaving: bool,
        credential: bool,
    ) -> Result<u32> {
        check_worker("worker id", worker)?;
        check_ids(ids)?;
        let mut guard = self.state();
        let state = &mut *guard;
        let now = Instant::now();
        state.workers.seen(worker, now);
        if leaving && state.workers.leaving(worker) && state.contacts.logs(worker, now) {
            tracing::info!(worker = %worker, handed_back = ids.len(), "worker left");
        }
        // (A worker credential's beyond its allowance stay its own: see `hand_backs`.)
        let ids = match credential {
            true => allowed_hand_backs(state, worker, ids),
            false => ids.to_vec(),
        };
        let released = hand_back(state, worker, &ids);
        drop(guard);
        self.keep_handed_back(&released);
        if !released.is_empty() {
            tracing::info!(worker = %worker, jobs = released.len(), "leases handed back");
            self.changed();
        }
        Ok(released.len() as u32)
    }

    /// Records the leases of `released` (run, id, worker) as handed back, so that after a restart
    /// their tags prove no lease (docs/security.md). A failed write is logged and marks storage
    /// degraded: after a restart, those tags pass as leases issued, as they did before hand-backs
    /// were recorded. A damaged chunk of the record met is counted and logged.
    fn keep_handed_back(&self, released: &[(u64, u64, String)]) {
        if released.is_empty() {
            return;
        }
        let leases: Vec<u64> = released.iter().map(|(_, id, _)| *id).collect();
        match self.shared.store.put_handed_back(&leases) {
            Ok(0) => {}
            Ok(damaged) => {
                for _ in 0..damaged {
                    self.shared.metrics.corrupt_record("store");
                }
                tracing::error!(chunks = damaged, place = "store", "a chunk of the hand-back record fails its check (damaged on disk): left as it is, its every lease read as handed back");
            }
            Err(e) => {
                tracing::error!(leases = released.len(), error = %e, "hand-backs not recorded: after a restart, their tags pass as leases issued");
                self.note_damage(&e);
            }
        }
    }

    /// Ends the leases whose worker stopped heartbeating and puts their jobs back in line. Each worker
    /// concerned gets a strike ([`super::strikes`]); a job whose leases expired `max_attempts` times,
    /// under at least two different workers, fails. The store is written with the state lock released.
    pub async fn expire_leases(&self) {
        let failing = self.expire_in_memory();
        if failing.is_empty() {
            return;
        }
        // The failing jobs are neither leased nor queued meanwhile: nobody else touches them. The
        // committer writes them, in order with the results.
        let jobs: Vec<(u64, JobKey, String)> = failing.clone();
        let wrote = self.shared.committer.write(Write::Fail(jobs)).await;
        let (written, taken_back) = match wrote {
            Ok(w) => (Ok(w.written), w.taken_back),
            Err(e) => (Err(e), None),
        };
        let moves = match written {
            Ok(Written::Failed(moves)) => moves,
            Ok(Written::Run(_) | Written::Retried(_)) => failing
                .iter()
                .map(|_| {
                    Err(Error::Invalid(
                        "the committer answered another write".into(),
                    ))
                })
                .collect(),
            // Not made durable (the store may hold it; storage is degraded and the store reopened, which
            // reloads memory from it): every job goes back in line meanwhile.
            Err(e) => failing
                .iter()
                .map(|_| Err(Error::Durability(e.to_string())))
                .collect(),
        };
        let written = failing
            .into_iter()
            .zip(moves)
            .map(|((run, key, reason), moved)| (run, key, reason, moved));
        let mut guard = self.state();
        let mut failed_in = std::collections::BTreeSet::new();
        for (id, key, reason, moved) in written {
            let Some(run) = guard.runs.get_mut(&id) else {
                continue;
            };
            match moved {
                Ok(Some(from)) => {
                    run.moved(&key, from, Some(JobState::Failed));
                    tracing::error!(run = id, job = %key, reason = %reason, "job failed");
                    failed_in.insert(id);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(run = id, job = %key, error = %e, "cannot mark the job failed; leasing it again");
                    run.requeue(key);
                }
            }
        }
        // A disputed job that failed may have ended a held worker's dispute: its record counts went
        // (and their jobs are to compute again: said before a run is called stalled).
        if let Some(c) = &taken_back {
            super::changes::apply_taken_back(&mut guard, c, Instant::now());
        }
        for id in failed_in {
            if let Some(run) = guard.runs.get(&id).filter(|r| r.phase() == Phase::Stalled) {
                tracing::error!(
                    run = id,
                    jobs_failed = run.jobs_in(JobState::Failed),
                    "run stalled: every job is done or failed; `nqueens retry RUN` (or a restart with --retry-failed) tries the failed jobs again"
                );
            }
        }
        drop(guard);
        self.changed();
    }

    /// The in-memory part of [`Coordinator::expire_leases`], under the state lock: ends the expired
    /// leases, charges their workers, requeues their jobs; returns the jobs to fail `(run, key, reason)`.
    fn expire_in_memory(&self) -> Vec<(u64, JobKey, String)> {
        let mut failing = Vec::new();
        let mut guard = self.state();
        let state = &mut *guard;
        let now = Instant::now();
        // Jobs whose lease ended on a path that did not put them back: in line again. Before the
        // leases due end, so that a job whose last expiry fails it waits for its failure's write.
        for run in state.runs.values_mut() {
            let strays = run.strays(&state.leases, now);
            if strays > 0 {
                self.shared.metrics.jobs_returned.inc_by(strays as u64);
                tracing::warn!(
                    run = run.meta.id,
                    jobs = strays,
                    "jobs whose lease ended without putting them back are in line again"
                );
            }
        }
        for (id, w) in state.workers.sweep(now, state.leases.timeout()) {
            if !w.leaving {
                tracing::warn!(worker = %id, name = %w.name, silent_s = (now - w.last_seen).as_secs(), "worker lost: silent for longer than the lease timeout");
            }
        }
        let expired = state.leases.expire(now);
        self.shared
            .metrics
            .leases_expired
            .inc_by(expired.len() as u64);
        for lease in expired.iter().filter(|l| state.leases.held_longest(l)) {
            tracing::warn!(worker = %lease.worker, name = %lease.name, run = lease.run, job = %lease.key, lease = lease.id, held_s = (now - lease.issued).as_secs(), "lease taken back: held as long as a lease may (`serve --max-lease-hold`), its heartbeats notwithstanding; the job is leased again, and a late result still taken");
        }
        // Each worker whose leases expired in this sweep gets one strike, however many they were.
        let mut charged = std::collections::BTreeMap::<String, u32>::new();
        for lease in &expired {
            *charged.entry(lease.name.clone()).or_default() += 1;
        }
        for (name, leases) in &charged {
            match state.strikes.charge(name, now, state.leases.timeout()) {
                Charge::Throttled { strikes } => tracing::warn!(
                    worker = %name,
                    leases_expired = leases,
                    strikes,
                    "worker charged for expired leases: it may hold fewer jobs until it reports a result"
                ),
                Charge::Benched { strikes, bench } => tracing::warn!(
                    worker = %name,
                    leases_expired = leases,
                    strikes,
                    bench_s = bench.as_secs_f64(),
                    "worker benched: its leases keep expiring; it gets no jobs for a while"
                ),
            }
        }
        for lease in &expired {
            // A spot check's expiry charged the worker (above), the job nothing; the identity owes
            // the check.
            if let Some((out, owed)) = state.spot.ended_owing(lease.id) {
                end_spot_check(state, lease.id, &out);
                // (Not one that ran out its hold: owed, it would go to its holder again first, for
                // another hold, and nobody else could check the job; found by a review. Nor one
                // whose count was taken back meanwhile.)
                if owed && !state.leases.held_longest(lease) {
                    state.spot.owe(&lease.name, out);
                }
                continue;
            }
            let name = lease.name.as_str();
            let Some(run) = state.runs.get_mut(&lease.run) else {
                continue;
            };
            // A worker that never had a result counted cannot make a job fail: fresh identities that
            // take jobs and walk away only delay them.
            if !state.accepted.contains(name) {
                tracing::info!(worker = %lease.worker, name, run = lease.run, job = %lease.key, lease = lease.id, "lease expired (a worker with no counted result: not an attempt)");
                run.requeue(lease.key.clone());
                continue;
            }
            let expiries = run.attempt_failed(&lease.key, name);
            let attempts = expiries.count;
            tracing::info!(
                worker = %lease.worker,
                name = %name,
                run = lease.run,
                job = %lease.key,
                lease = lease.id,
                attempts,
                workers = expiries.workers(),
                "lease expired"
            );
            if !expiries.exhausted(state.max_attempts) {
                run.requeue(lease.key.clone());
                continue;
            }
            let reason = format!(
                "{attempts} leases expired without a result, under {} different workers",
                expiries.workers()
            );
            failing.push((lease.run, lease.key.clone(), reason));
        }
        drop(guard);
        if !expired.is_empty() {
            self.changed();
        }
        failing
    }
}

/// Whether the change counter, `seen` before a call's look and `now` after it, moved only by that
/// call's own announcement (`notified`): then the call need not wake for it. Another call's change
/// in between (the counter two ahead, or moved while this call announced nothing) wakes it.
fn only_its_own_change(notified: bool, seen: u64, now: u64) -> bool {
    notified && now == seen.wrapping_add(1)
}

/// The request checks and the worker ids of a credential, alone (issue 42: their mutants survived
/// the service's tests, which go through them only with ids that pass).
#[cfg(test)]
mod tests {
    use super::*;

    fn ask<'a>(worker: &'a str, gpus: u32, capacity: u32) -> Ask<'a> {
        Ask {
            worker,
            name: "w",
            label: "w",
            credential: false,
            threads: 1,
            gpus,
            gpu_kernels: &[],
            capacity,
            only: None,
        }
    }

    /// A waiting call marks seen only the one change it announced itself (issue 42: `&&` → `||` and
    /// `==` → `!=` survived; the first would sleep through another call's change, the second spin).
    #[test]
    fn a_call_ignores_only_its_own_change() {
        assert!(only_its_own_change(true, 5, 6));
        assert!(only_its_own_change(true, u64::MAX, 0));
        assert!(!only_its_own_change(false, 5, 6));
        assert!(!only_its_own_change(true, 5, 7));
        assert!(!only_its_own_change(true, 5, 5));
        assert!(!only_its_own_change(false, 5, 5));
    }

    #[test]
    fn a_request_is_checked_at_each_limit() {
        assert!(ask("w-1-a", MAX_GPUS, MAX_CAPACITY).check().is_ok());
        assert!(ask("w-1-a", 0, 1).check().is_ok());
        assert!(matches!(
            ask("w-1-a", MAX_GPUS + 1, 1).check(),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(ask("w-1-a", 0, 0).check(), Err(Error::Invalid(_))));
        assert!(matches!(
            ask("w-1-a", 0, MAX_CAPACITY + 1).check(),
            Err(Error::Invalid(_))
        ));
        for bad in ["", "a\nb", &"x".repeat(MAX_ID_LEN + 1)] {
            assert!(
                matches!(ask(bad, 0, 1).check(), Err(Error::Invalid(_))),
                "{bad:?}"
            );
            assert!(check_worker("worker id", bad).is_err(), "{bad:?}");
            assert!(check_stored_worker("worker name", bad).is_err(), "{bad:?}");
        }
        assert!(check_worker("worker id", &"x".repeat(MAX_ID_LEN)).is_ok());
        assert!(check_stored_worker("worker name", &"x".repeat(MAX_ID_LEN)).is_ok());
        // A right-to-left override: refused in a request, taken as a name an earlier build stored.
        let shifty = "a\u{202e}b";
        assert!(matches!(ask(shifty, 0, 1).check(), Err(Error::Invalid(_))));
        assert!(check_worker("worker id", shifty).is_err());
        assert!(check_stored_worker("worker name", shifty).is_ok());
    }

    /// Kernel shapes: at most [`MAX_GPUS`] entries, at most [`MAX_GPU_SHAPES`] distinct (a worker's
    /// row keeps each once: bounded whatever it says).
    #[test]
    fn a_requests_kernel_shapes_are_bounded() {
        let with = |kernels: &[String]| {
            let mut a = ask("w-1-a", 1, 1);
            a.gpu_kernels = kernels;
            a.check()
        };
        let shapes: Vec<String> = (0..=MAX_GPU_SHAPES).map(|i| format!("flat/{i}")).collect();
        assert!(with(&shapes[..MAX_GPU_SHAPES]).is_ok());
        assert!(matches!(with(&shapes), Err(Error::Invalid(_))));
        let same = vec!["flat/1".to_string(); MAX_GPUS as usize];
        assert!(with(&same).is_ok());
        let more = vec!["flat/1".to_string(); MAX_GPUS as usize + 1];
        assert!(matches!(with(&more), Err(Error::Invalid(_))));
        assert!(matches!(with(&["".into()]), Err(Error::Invalid(_))));
    }

    #[test]
    fn a_request_names_at_most_the_most_lease_ids() {
        assert!(check_ids(&vec![7; MAX_IDS]).is_ok());
        assert!(check_ids(&[]).is_ok());
        assert!(matches!(
            check_ids(&vec![7; MAX_IDS + 1]),
            Err(Error::Invalid(_))
        ));
    }

    /// A process of a name: the name, `NAME-PID-HEX`, or `NAME/ANY`; nothing else that starts with it.
    #[test]
    fn the_ids_of_a_names_processes() {
        for id in ["w", "w/anything", "w-12-ab"] {
            assert!(id_of(id, "w"), "{id}");
        }
        for id in ["wx", "w-12", "w-12-xyz", "w--ab", "v/w", "w-1-a-b"] {
            assert!(!id_of(id, "w"), "{id}");
        }
    }

    /// A credential's process id is `IDENTITY/ID`; one too long for that is `IDENTITY/` and a hash of
    /// the id: within the limit, and another id another hash.
    #[test]
    fn a_scoped_id_names_its_identity_and_fits() {
        assert_eq!(scoped_id("alice", "w-1-a"), "alice/w-1-a");
        let fits = "x".repeat(MAX_ID_LEN - "alice/".len());
        assert_eq!(scoped_id("alice", &fits), format!("alice/{fits}"));
        let long = "y".repeat(MAX_ID_LEN);
        let hashed = scoped_id("alice", &long);
        assert!(
            hashed.starts_with("alice/") && hashed.len() <= MAX_ID_LEN,
            "{hashed}"
        );
        assert_eq!(hashed.len(), "alice/".len() + 16);
        assert_ne!(hashed, scoped_id("alice", &"z".repeat(MAX_ID_LEN)));
        assert!(id_of(&hashed, "alice"));
    }
}
