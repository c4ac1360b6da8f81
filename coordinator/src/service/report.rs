//! Reports: a worker's results, validated as a whole (one bad result rejects the batch and changes
//! nothing), committed and flushed, then applied to the in-memory state. A result for a job already done
//! is compared with the stored one, never added; a verified job's result waits for a second worker, and a
//! worker whose result is disproved is quarantined.

use nqueens_common::checksum::verify_seal;
use nqueens_common::error::check_n;
use nqueens_common::{JobKey, JobResult, Strategy};
use tokio::time::Instant;

use super::changes;
use super::lease::{check_device, check_worker};
use super::workers::{Contact, Reported};
use super::{lookup, to_the_end, truncate, Coordinator};
use crate::durable::store::{Drawn, HandBack, Incoming, JobState, Outcome};
use crate::error::{Error, Result};

/// Most results in one report (the wire's bound, checked again here for callers of the service).
pub const MAX_BATCH: usize = nqueens_proto::MAX_REPORT_RESULTS;

/// Search nodes per second under one lease that no device reaches: about ten times the fastest rate
/// measured, a whole NVIDIA H100 on one launch (1.9e11, BENCHMARKS.md). A result reported faster than
/// this since its lease was issued is verified by a second identity whatever the run's fraction, and
/// logged: its counts were not searched.
pub const MAX_PLAUSIBLE_RATE: f64 = 2e12;

/// The least time a result is taken to have had: a round trip and a lease call at least (and small
/// jobs, of up to 2e9 nodes, are never implausible).
pub const MIN_ELAPSED: std::time::Duration = std::time::Duration::from_millis(1);

/// Whether `nodes` searched in `elapsed` (at least [`MIN_ELAPSED`]) is faster than any device (see
/// [`MAX_PLAUSIBLE_RATE`]).
pub fn implausible(nodes: u64, elapsed: std::time::Duration) -> bool {
    nodes as f64 > MAX_PLAUSIBLE_RATE * elapsed.max(MIN_ELAPSED).as_secs_f64()
}

/// One result as a worker reports it (unchecked).
#[derive(Debug, Clone)]
pub struct Report {
    pub lease: u64,
    pub run: String,
    /// The run's N, as the worker believes it.
    pub n: u32,
    pub job: String,
    pub result: JobResult,
    /// The seal the worker computed (absent from a worker older than seals: refused).
    pub seal: Option<u64>,
    /// The lease's authentication tag.
    pub tag: u64,
    /// The GPU that computed it (`None`: a CPU).
    pub device: Option<String>,
    /// The kernel family that computed it, as the worker states it (`None`: not stated).
    pub family: Option<nqueens_common::Family>,
}

impl Coordinator {
    /// Validates, commits durably, and applies a batch of results from the worker process `worker`
    /// named `name`, whose name is only stated (no worker credential: a record run refuses its
    /// results); one outcome per result, in order.
    pub async fn report(
        &self,
        worker: &str,
        name: &str,
        reports: Vec<Report>,
    ) -> Result<Vec<Outcome>> {
        self.report_as(worker, name, false, reports).await
    }

    /// The same from a caller that holds a worker credential (`credential`: `name` is its identity)
    /// or not.
    pub async fn report_as(
        &self,
        worker: &str,
        name: &str,
        credential: bool,
        reports: Vec<Report>,
    ) -> Result<Vec<Outcome>> {
        // The request itself: refused whole, marked so (the worker stops, its results kept).
        check_worker("worker id", worker).map_err(Error::of_the_request)?;
        check_worker("worker name", name).map_err(Error::of_the_request)?;
        if reports.len() > MAX_BATCH {
            return Err(Error::Invalid(format!(
                "{} results in one report; at most {MAX_BATCH}",
                reports.len()
            ))
            .of_the_request());
        }
        for device in reports.iter().filter_map(|r| r.device.as_deref()) {
            check_device(device).map_err(Error::of_the_request)?;
        }
        // A bounded number of batches are validated and committed at once; the rest wait here, holding
        // nothing (validation may read the store for each result whose lease fails its check).
        let place = super::place_in(&self.shared.in_flight).await?;
        // Validated off the runtime's threads (each job is rebuilt from its key; the store may be read),
        // then committed; once started, to the end, whether or not the caller waits.
        let this = self.clone();
        let (worker, name) = (worker.to_string(), name.to_string());
        to_the_end(async move {
            let validating = this.clone();
            let turn = super::place_in(&this.shared.validating).await?;
            let (reports, batch, worker, name) = super::joined(
                tokio::task::spawn_blocking(move || {
                    let _turn = turn;
                    let batch = validating.validate(&worker, &name, credential, &reports);
                    (reports, batch, worker, name)
                })
                .await,
            )?;
            let batch = batch?;
            if batch.is_empty() {
                return Ok(Vec::new());
            }
            this.commit(&worker, &name, reports, batch, place).await
        })
        .await
    }

    /// Commits a validated batch durably, then applies it to the in-memory state; one outcome per
    /// result, in order (`batch` holds every report, in order). `place` is the batch's place among those
    /// in flight, given back once the store has it.
    async fn commit(
        &self,
        worker: &str,
        name: &str,
        reports: Vec<Report>,
        batch: Vec<Incoming>,
        place: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Vec<Outcome>> {
        let committed = self.shared.committer.commit(batch.clone()).await?;
        drop(place);
        let now = Instant::now();
        let mut guard = self.state();
        let state = &mut *guard;
        // Each run of the batch, as it stood before: its phase and its active leases (a run stalled,
        // or its last lease ended, may tell a waiting call it is idle).
        let runs: std::collections::BTreeSet<u64> = batch.iter().map(|inc| inc.run).collect();
        let stood: Vec<(u64, Option<crate::durable::store::Phase>, u64)> = runs
            .into_iter()
            .map(|id| {
                let phase = state.runs.get(&id).map(|r| r.phase());
                (id, phase, state.leases.count(id))
            })
            .collect();
        // Results that differ from a done job's under no lease issued for it: how many, and the first.
        let mut unleased: Option<(usize, u64, JobKey)> = None;
        // Each result's nodes (and its job) are credited when it proves work: one the run took (counted,
        // held for a check, or disputing), or a copy of a counted result that its lease delivers for the
        // first time (a job done meanwhile, a spot check). Not one that differs from a done job's stored
        // result (the store proves it wrong), nor a copy sent again (its acknowledgement lost, or on
        // purpose, in one batch or many: it would inflate its worker's rate and the run's GPU share).
        // Decided here, in order, under the state lock, where leases end as their results come.
        let mut credited: Vec<Option<u64>> = Vec::with_capacity(batch.len());
        // Whether a job went back in line because a copy (or a result not kept) ended its lease.
        let mut put_back = false;
        for (inc, outcome) in batch.iter().zip(&committed.outcomes) {
            self.shared.metrics.result(outcome.name());
            // (A spot check's job goes back in line when the check ends, below.)
            let leased =
                state.leases.is_leased(inc.run, &inc.key) && !state.leases.is_check(inc.lease);
            credited.push(match outcome {
                // (Its lease has delivered, though: one kept past its job's count takes a count
                // back once, even after a lift. A result for a failed job passed validation under
                // any lease id: only a lease of its own sender and job ends, so that no identity
                // ends another's, kept for its late result.)
                Outcome::Mismatch { .. } | Outcome::JobFailed => {
                    state.leases.deliver(inc.lease, inc.run, &inc.key, name);
                    None
                }
                // (Not kept, but computed under its lease: credited as a result taken is, since a
                // credential sees it as accepted.)
                Outcome::NotKept => state
                    .leases
                    .deliver(inc.lease, inc.run, &inc.key, name)
                    .then_some(inc.result.nodes),
                // (Ends the lease if it is active: it has delivered, and must not expire and charge
                // an honest worker.)
                Outcome::Duplicate => state
                    .leases
                    .deliver(inc.lease, inc.run, &inc.key, name)
                    .then_some(inc.result.nodes),
                // (Unless a copy under its lease, committed after it and applied first, was. Its
                // lease was checked: issued for its job to its sender.)
                Outcome::Accepted | Outcome::Pending | Outcome::Disputed => state
                    .leases
                    .credit_once(inc.lease)
                    .then_some(inc.result.nodes),
            });
            // A lease call passes a leased job by and drops it from the retry queue, counting on the
            // lease's end to put it back: a copy, a mismatch or a result not kept that ended the job's
            // lease puts it back here (a done job is dropped at the next look). Before, nothing did:
            // a credential that sent a copy under its second lease of a job waiting for its second
            // result left the job open in no queue, and the run could not end before a restart
            // (found by a review, 2026-12-01). (Pending and disputed results put theirs back below;
            // a failed job is not leased again. A path missed here is caught by the lease sweep
            // within a lease timeout: `LiveRun::strays`.)
            if matches!(
                outcome,
                Outcome::Mismatch { .. } | Outcome::NotKept | Outcome::Duplicate
            ) && leased
                && !state.leases.is_leased(inc.run, &inc.key)
            {
                if let Some(run) = state.runs.get_mut(&inc.run) {
                    run.requeue(inc.key.clone());
                    put_back = true;
                }
            }
            // A result that proves work grows its identity's lease limit and clears its strikes,
            // whatever became of it: counted, held for a check, disputing, or a spot check's answer
            // alike (a worker credential sees them all as accepted; the room it gets next must not
            // tell them apart). Not a copy sent again, nor one the store proves wrong.
            if credited.last().is_some_and(Option::is_some) {
                *state.counted.entry(name.to_string()).or_insert(0) += 1;
                if state.strikes.clear(name) {
                    tracing::info!(
                        worker,
                        name,
                        "worker's strikes cleared: it reported a result"
                    );
                }
            }
            match outcome {
                Outcome::Accepted => {
                    if !state.accepted.contains(name) {
                        state.accepted.insert(name.to_string());
                    }
                    let run = state.runs.get_mut(&inc.run);
                    if run
                        .as_ref()
                        .is_some_and(|r| r.reopened_after(&inc.key, committed.seq))
                    {
                        // A later commit, applied first, took the result back and the job may be
                        // leased again since: only this worker's lease ends. A call that passed the
                        // job by while it was leased dropped it: it goes back in line.
                        let leased = state.leases.is_leased(inc.run, &inc.key);
                        state
                            .leases
                            .close_delivered(inc.lease, inc.run, &inc.key, worker);
                        if leased && !state.leases.is_leased(inc.run, &inc.key) {
                            if let Some(run) = run {
                                run.requeue(inc.key.clone());
                                put_back = true;
                            }
                        }
                    } else {
                        if let Some(run) = run {
                            run.counted(&inc.key, committed.seq);
                        }
                        // (A check of the job out meanwhile ends with it: its job is counted.)
                        if let Some(live) =
                            state.leases.settle_counted(inc.run, &inc.key, inc.lease)
                        {
                            state.spot.ended(live);
                        }
                    }
                }
                Outcome::JobFailed => {
                    if let Some(live) = state.leases.settle(inc.run, &inc.key) {
                        state.spot.ended(live.id);
                    }
                }
                Outcome::NotKept => {
                    // (Its lease ended above: the job stays where it is, for an identity that may
                    // decide.)
                    tracing::warn!(worker, name, run = inc.run, job = %inc.key, "a result not kept: its job is disputed and its identity has no record, or its lease was not drawn for that result or dispute; a drawn identity decides");
                }
                Outcome::Pending | Outcome::Disputed => {
                    // This worker is done with the job; another must compute it.
                    state.leases.close(inc.lease);
                    if let Some(run) = state.runs.get_mut(&inc.run) {
                        run.requeue_by(inc.key.clone(), committed.seq);
                        run.computed(&inc.key, name);
                    }
                    if *outcome == Outcome::Disputed {
                        tracing::warn!(worker, name, run = inc.run, job = %inc.key, total = inc.result.total, nodes = inc.result.nodes, "disputed job: results disagree (or, in a record run, this one seconds a side short of a majority of three); another worker decides");
                    }
                }
                Outcome::Duplicate => {
                    // (Its lease was ended above, if it was active and this worker's: a job done
                    // meanwhile can be leased once more.)
                    tracing::debug!(worker, run = inc.run, job = %inc.key, "duplicate result")
                }
                Outcome::Mismatch { stored } => {
                    // A confirmed count contradicted under a live lease of its job is taken back (its
                    // confirmers may have agreed on a lie): the commit's moves put the job back in
                    // line ([`LiveRun::moved_by`](super::live::LiveRun::moved_by)).
                    // Under no lease issued for its job, a different result proves nothing: counted
                    // for one line per batch, not one each (its sender can send thousands for free).
                    if !inc.lease_issued {
                        unleased.get_or_insert((0, inc.run, inc.key.clone())).0 += 1;
                        continue;
                    }
                    tracing::error!(
                        worker,
                        run = inc.run,
                        job = %inc.key,
                        lease = inc.lease,
                        reported_total = inc.result.total,
                        stored_total = stored.total,
                        reported_nodes = inc.result.nodes,
                        stored_nodes = stored.nodes,
                        lease_active = inc.lease_active,
                        "result differs from the stored result of a done job: the worker is quarantined if it contradicts a confirmed result under a lease issued for the job (which takes the count back for further identities to decide), else the stored one is kept"
                    )
                }
            }
        }
        // Spot checks answered by their own job's result: passed, or failed (the commit quarantined the
        // worker).
        let mut spot_answered = false;
        for (inc, outcome) in batch.iter().zip(&committed.outcomes) {
            // Only under its lease, checked for this identity: another's result under the check's id
            // (a partner told it) answers nothing. Before, it ended the check, unowed, and a stored
            // count sent so passed it (found by a review, 2026-11-29).
            if !inc.lease_checked {
                continue;
            }
            let Some(out) = state.spot.answered(inc.lease, inc.run, &inc.key) else {
                continue;
            };
            spot_answered = true;
            super::lease::end_spot_check(state, inc.lease, &out);
            match outcome {
                Outcome::Duplicate => {
                    state.spot.passed(name);
                    tracing::debug!(worker, name, run = out.run, job = %out.key, "spot check passed");
                }
                // (Its count was taken back while it was out: nothing to pass or fail.)
                Outcome::NotKept | Outcome::Pending | Outcome::Disputed => {
                    tracing::debug!(worker, name, run = out.run, job = %out.key, outcome = outcome.name(), "spot check answered after its count was taken back")
                }
                _ => {
                    tracing::warn!(worker, name, run = out.run, job = %out.key, outcome = outcome.name(), "spot check failed: the result contradicts a confirmed one")
                }
            }
        }
        // News for waiting lease calls and progress streams: not a batch of copies of counted results
        // sent again (their leases long delivered) or of different results under no lease issued for
        // their jobs, which change nothing (a credential could send one in a loop to wake every
        // waiting call each time).
        let news = committed.has_effects()
            || credited.iter().any(Option::is_some)
            || spot_answered
            || batch
                .iter()
                .zip(&committed.outcomes)
                .any(|(inc, o)| match o {
                    Outcome::Duplicate => false,
                    Outcome::Mismatch { .. } => inc.lease_issued,
                    _ => true,
                });
        let records_before = state.confirmed.len();
        changes::note_confirmed(state, &committed);
        // News for waiting lease calls too: whatever may put a job back in a queue (a first result
        // of a verified job, a dispute, a count taken back), end or reopen a run, or change who may
        // lease or decide. A result that only counts its job is news to status watchers alone.
        let mut lease_news = news
            && (!committed.finished.is_empty()
                || !committed.reopened.is_empty()
                || !committed.quarantined.is_empty()
                || !committed.lifted.is_empty()
                || !committed.revoked.is_empty()
                || !committed.disputed.is_empty()
                || committed.incomplete.is_some()
                || committed.moved.iter().any(|m| m.to != Some(JobState::Done))
                || committed
                    .outcomes
                    .iter()
                    .any(|o| !matches!(o, Outcome::Accepted | Outcome::Duplicate))
                || spot_answered
                || state.confirmed.len() != records_before)
            || put_back;
        if state.workers.seen(worker, now) == Contact::Returned && state.contacts.logs(worker, now)
        {
            tracing::info!(worker = %worker, name = %name, "worker returned");
        }
        let accepted = committed
            .outcomes
            .iter()
            .filter(|o| **o == Outcome::Accepted)
            .count();
        let on_gpu = || {
            credited
                .iter()
                .zip(&reports)
                .filter(|(_, r)| r.device.is_some())
                .filter_map(|(n, _)| *n)
        };
        let reported = Reported {
            jobs: credited.iter().flatten().count() as u64,
            nodes: credited
                .iter()
                .flatten()
                .fold(0, |a, n| a.saturating_add(*n)),
            accepted: accepted as u64,
            gpu_jobs: on_gpu().count() as u64,
            gpu_nodes: on_gpu().fold(0, |a, n| a.saturating_add(n)),
            families: reports.iter().filter_map(|r| r.family).collect(),
        };
        state.workers.reported(worker, reported, now);
        changes::apply(state, &committed);
        let timeout = state.leases.timeout();
        for (((inc, r), nodes), outcome) in batch
            .iter()
            .zip(&reports)
            .zip(&credited)
            .zip(&committed.outcomes)
        {
            if let Some(live) = state.runs.get_mut(&inc.run) {
                // A worker of the run delivered what the run took (under a lease of an open job); a
                // result sent again costs nothing, and names any worker id.
                let took = matches!(
                    outcome,
                    Outcome::Accepted | Outcome::Pending | Outcome::Disputed
                );
                live.reported_by(
                    worker,
                    nodes.unwrap_or(0),
                    r.device.is_some(),
                    took,
                    now,
                    timeout,
                );
            }
        }
        changes::apply_tallies(state, &committed, now);
        let mut finished = Vec::new();
        for meta in committed.finished {
            let id = meta.id;
            if let Some(live) = state.runs.get_mut(&id) {
                // An older commit's finish, applied after a later one reopened the run, says nothing.
                if !live.finish(meta, committed.seq) {
                    continue;
                }
                if let Some(why) = live.meta.contradiction(&live.tally) {
                    tracing::error!(
                        run = id,
                        n = live.meta.n,
                        total = %live.tally.total,
                        error = %why,
                        "every job is counted, but the counts cannot be right: some result is wrong and the total is not final (run state: inconsistent)"
                    );
                    continue;
                }
                let unique = live.tally.unique();
                tracing::info!(
                    run = id,
                    n = live.meta.n,
                    strategy = %live.meta.strategy,
                    total = %live.tally.total,
                    unique = %match unique {
                        Ok(Some(u)) => u.to_string(),
                        Ok(None) => "-".to_string(),
                        Err(e) => e.to_string(),
                    },
                    nodes = %live.tally.nodes,
                    "run finished"
                );
                finished.push(live.meta.clone());
            }
        }
        // A run whose phase changed (stalled, say), or whose last lease ended.
        lease_news |= news
            && stood.iter().any(|&(id, phase, leases)| {
                let now_leased = state.leases.count(id);
                state.runs.get(&id).map(|r| r.phase()) != phase || (leases > 0 && now_leased == 0)
            });
        drop(guard);
        if let Some((results, run, first)) = unleased {
            tracing::warn!(worker, name, results, run, job = %first, "results that differ from done jobs' stored results, under no lease issued for their jobs: only compared, the stored ones kept (the first named here)");
        }
        for meta in finished {
            self.certify(meta);
        }
        if lease_news {
            self.changed();
        } else if news {
            self.progressed();
        }
        Ok(committed.outcomes)
    }

    /// Checks every result of a report against the runs, the plans and the leases. The state is locked
    /// twice, briefly: rebuilding each job from its key (the costly part) happens between the two.
    pub(super) fn validate(
        &self,
        worker: &str,
        name: &str,
        credential: bool,
        reports: &[Report],
    ) -> Result<Vec<Incoming>> {
        let runs: Vec<(u64, u32, Strategy, nqueens_common::Plan, u64)> = {
            let state = self.state();
            if let Some(reason) = state.quarantined.get(name) {
                return Err(Error::Quarantined {
                    worker: name.to_string(),
                    reason: reason.clone(),
                });
            }
            reports
                .iter()
                .map(|r| {
                    let run = lookup(&state, &r.run)?;
                    if run.meta.is_cancelled() {
                        return Err(Error::RunCancelled(run.meta.id.to_string()));
                    }
                    // Leased to credentials only; a lease of an earlier incarnation is checked by its
                    // tag alone, so the caller is checked too.
                    if run.meta.record
                        && (!credential || name == crate::durable::credentials::SHARED_IDENTITY)
                    {
                        return Err(Error::RecordOnly(run.meta.id.to_string()));
                    }
                    Ok((
                        run.meta.id,
                        u32::from(run.meta.n),
                        run.meta.strategy,
                        run.plan,
                        run.fingerprint,
                    ))
                })
                .collect::<Result<_>>()?
        };
        let named = reports
            .iter()
            .zip(&runs)
            .map(|(r, &(id, n, _, plan, _))| {
                check_n(r.n)?;
                if r.n != n {
                    return Err(Error::Invalid(format!(
                        "result for run {id} says N = {}, but the run is N = {n}",
                        r.n
                    )));
                }
                Ok((plan, r.job.parse::<JobKey>()?))
            })
            .collect::<Result<Vec<_>>>()?;
        // Each group of sides built once for the batch, however its keys are ordered.
        let jobs = nqueens_common::job::jobs_of(&named)?;
        // (Each group of sides built once again for the results with no node, which need theirs.)
        let results: Vec<nqueens_common::JobResult> = reports.iter().map(|r| r.result).collect();
        let plausible = nqueens_common::job::check_each(&jobs, &results);
        let keys = reports
            .iter()
            .zip(&runs)
            .zip(named.into_iter().zip(plausible))
            .map(|((r, &(id, _, strategy, _, fingerprint)), ((_, key), plausible))| {
                if let Some(why) = r.result.shape_error(strategy) {
                    return Err(Error::Invalid(format!(
                        "result for job {} of run {id}: {why}",
                        truncate(&r.job)
                    )));
                }
                // The seal: a result damaged anywhere between the worker's compute pool and here (its
                // journal, the wire) is refused, and its job computed again.
                if !r
                    .seal
                    .is_some_and(|s| verify_seal(fingerprint, &key, &r.result, s))
                {
                    self.shared.metrics.corrupt_record("wire");
                    tracing::error!(worker, name, run = id, job = %key, lease = r.lease, place = "wire", "a reported result fails its seal (damaged in the worker's journal or in transit, or from a worker older than seals): refused; the job is computed again");
                    return Err(Error::Unsealed {
                        run: id.to_string(),
                        job: key.to_string(),
                    });
                }
                // Counts that contradict each other, sealed (a fault before the worker sealed them, a
                // faulty device's sums, a forged or broken worker): refused, never compared or counted.
                if let Err(why) = plausible {
                    self.shared.metrics.result("implausible");
                    tracing::error!(worker, name, run = id, job = %key, lease = r.lease, reason = %why, "a reported result that no search of its job can produce: refused; the job is computed again");
                    // Its lease is left to expire (the worker drops the result): the expiry charges
                    // the worker a strike and the job an attempt, so that a fault that repeats on the
                    // job fails it in sight (`stalled`) instead of a loop of leases handed back.
                    return Err(why.into());
                }
                Ok(key)
            })
            .collect::<Result<Vec<JobKey>>>()?;
        // Every lease is checked (in memory), a done job's too: its result needs none, but one whose
        // job is open again by the commit (a revocation in between) counts only under a checked lease.
        let (checked, may_decide): (Vec<LeaseCheck>, bool) = {
            let now = Instant::now();
            let state = self.state();
            let may_decide = super::lease::may_decide(&state, credential, name);
            let checked = reports
                .iter()
                .zip(&keys)
                .zip(&runs)
                .map(|((r, key), &(run, ..))| {
                    // A lease of this incarnation counts only under the name it was issued to: a
                    // worker reporting under another name cannot confirm its own result with a
                    // second lease of the job.
                    if state.leases.issued_to(r.lease).is_some_and(|n| n != name) {
                        let refused = Error::NotLeased {
                            run: run.to_string(),
                            job: key.to_string(),
                            lease: r.lease,
                        };
                        return LeaseCheck {
                            check: Err(refused),
                            tag_holds: false,
                            issued: false,
                            too_fast: false,
                            active: false,
                            earlier: false,
                            handed_back: false,
                            forgotten: false,
                            drawn: Drawn::Nothing,
                        };
                    }
                    // (A lease handed back proves none: it can be had for the asking.)
                    let tag_holds = state.leases.tag(r.lease, run, key, name) == r.tag;
                    let issued = tag_holds && !state.leases.handed_back(r.lease);
                    let check = state.leases.check_report(r.lease, r.tag, run, key, name);
                    // (An ended lease's too: letting a lease expire must not skip the check.)
                    // (One of an earlier incarnation was issued before this one started: its rate
                    // is at least its nodes over the time since.)
                    let too_fast = issued
                        && state
                            .leases
                            .issued_by(r.lease)
                            .is_some_and(|at| implausible(r.result.nodes, now.duration_since(at)));
                    // Live: checked for this job under this name, and active now (`issued_at`), or
                    // ended unsettled when another's count settled its job (one result, once).
                    let active = check.is_ok()
                        && (state.leases.issued_at(r.lease).is_some()
                            || state.leases.outlived(r.lease));
                    // Its tag holds and the table knows it not: of an earlier incarnation (its tag
                    // checked), or of this one and forgotten once its job was counted. Whether it was
                    // handed back is read from the store, with the state lock released.
                    let forgotten = tag_holds && state.leases.issued_to(r.lease).is_none();
                    let earlier = check.is_ok() && forgotten;
                    let drawn = match check.is_ok() {
                        true => state.leases.drawn(r.lease),
                        false => Drawn::Nothing,
                    };
                    LeaseCheck {
                        check,
                        tag_holds,
                        issued,
                        too_fast,
                        active,
                        earlier,
                        handed_back: state.leases.handed_back(r.lease),
                        forgotten,
                        drawn,
                    }
                })
                .collect();
            (checked, may_decide)
        };
        reports
            .iter()
            .zip(keys)
            .zip(&runs)
            .zip(checked)
            .map(|(((r, key), &(run, ..)), lc)| {
                let LeaseCheck {
                    check,
                    tag_holds,
                    issued: lease_issued,
                    too_fast,
                    active: lease_active,
                    earlier,
                    handed_back: handed_back_here,
                    forgotten,
                    drawn,
                } = lc;
                // A lease handed back by its worker is over: its tag proves no lease for its job. The
                // table knows the hand-backs of the leases it remembers; the store, those of an
                // earlier incarnation's, and of this one's forgotten once their job was counted.
                let handed_back =
                    handed_back_here || (forgotten && self.handed_back_in_store(run, r.lease)?);
                let (check, lease_issued) = match handed_back {
                    true => (
                        Err(Error::NotLeased {
                            run: run.to_string(),
                            job: key.to_string(),
                            lease: r.lease,
                        }),
                        false,
                    ),
                    false => (check, lease_issued),
                };
                let lease_checked = check.is_ok();
                // A lease of an earlier incarnation, not handed back: its worker may have computed
                // the job across the restart, and its one different result may take back a count
                // colluders confirmed meanwhile (one per commit; the sender is quarantined by it).
                let lease_active = lease_active || (earlier && !handed_back);
                if too_fast {
                    tracing::warn!(worker, name, run, job = %key, nodes = r.result.nodes, "a result reported faster than any device searches: verified by a second identity");
                }
                // A job already done only gets its result compared, whatever lease it names: the store
                // is read (with the state lock released) only for a result whose lease check failed.
                // But a worker credential's result under a lease never issued for its job (its tag
                // fails) is refused whether or not the job is done: the answer would tell it which of
                // its results are held for a check and which are counted. Nor under a lease it
                // handed back (the job leased to it again since), whatever the result: a refusal
                // that hung on the job's state, here or by the result's place in its batch (the
                // first refusal answers), would tell the same. (So a result under a lease the table
                // forgot once its job was counted is compared while the job holds a result of its
                // sender's, as when the count is taken back to be decided again: it was refused
                // then, and compared while counted, found by a review, 2026-12-01.)
                if let Err(refused) = check {
                    if credential && (!tag_holds || handed_back) {
                        return Err(refused);
                    }
                    if !self.compared_without_lease(run, &key, name)? {
                        return Err(refused);
                    }
                }
                Ok(Incoming {
                    run,
                    key,
                    result: r.result,
                    worker: worker.to_string(),
                    name: name.to_string(),
                    lease: r.lease,
                    seal: r.seal.unwrap_or_default(),
                    lease_checked,
                    lease_issued,
                    lease_active,
                    may_decide,
                    check: too_fast,
                    family: r.family,
                    drawn,
                })
            })
            .collect()
    }
}

impl Coordinator {
    /// Whether a result of the identity `name` whose lease check failed is compared (never counted):
    /// its job is done or failed, or holds a result `name` stands behind (the commit compares it with
    /// that one). Else it is refused.
    fn compared_without_lease(&self, run: u64, key: &JobKey, name: &str) -> Result<bool> {
        let job = self
            .shared
            .store
            .job(run, key)
            .inspect_err(|e| self.note_damage(e))?;
        Ok(job.is_some_and(|job| {
            !job.state.is_open() || job.candidates.iter().any(|c| c.stands_behind(name))
        }))
    }

    /// Whether the store's hand-back record holds lease `lease` (of run `run`, for the log). A chunk
    /// damaged on disk reads as handed back, loudly: its leases are refused, never trusted.
    fn handed_back_in_store(&self, run: u64, lease: u64) -> Result<bool> {
        let read = self
            .shared
            .store
            .was_handed_back(lease)
            .inspect_err(|e| self.note_damage(e))?;
        Ok(match read {
            HandBack::No => false,
            HandBack::Yes => true,
            HandBack::Damaged => {
                self.shared.metrics.corrupt_record("store");
                tracing::error!(run, lease, place = "store", "the chunk of the hand-back record holding this lease fails its check (damaged on disk): read as handed back, its lease refused");
                true
            }
        })
    }
}

/// What validation found of one result's lease, under the state lock.
struct LeaseCheck {
    /// Checked for its job and identity ([`super::lease_table::Leases::check_report`]).
    check: Result<()>,
    /// Its tag is the job's lease's, for its identity (handed back or not).
    tag_holds: bool,
    /// Issued for its job (its tag), and not known handed back.
    issued: bool,
    /// Reported at a rate no device reaches since its issue.
    too_fast: bool,
    /// Live, or kept past its job's count ([`Incoming::lease_active`]); one of an earlier
    /// incarnation is, once the store says it was not handed back.
    active: bool,
    /// Of an earlier incarnation (checked by its tag alone): live unless the store says it was
    /// handed back.
    earlier: bool,
    /// The table knows it handed back.
    handed_back: bool,
    /// Its tag holds, and the table knows it not (of an earlier incarnation, or forgotten once its
    /// job was counted): whether it was handed back is in the store.
    forgotten: bool,
    /// Checked, and what it was drawn for ([`Incoming::drawn`]); else [`Drawn::Nothing`].
    drawn: Drawn,
}
