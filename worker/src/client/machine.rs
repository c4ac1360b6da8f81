//! The worker's loop, a state machine over its [`Link`] to the coordinator: lease batches sized to the
//! compute threads, compute them on the pool, journal and report results, heartbeat held leases, and
//! ride out coordinator outages with capped backoff (computing what it holds meanwhile). On shutdown it
//! hands back the jobs it has not started, finishes the running ones and reports them.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::config::WorkerConfig;
use super::link::{Ask, CallError, Kind, Lease, Link, Outcome};
use super::plan_check::{PlanCheck, Plans};
use crate::compute::{ComputePool, Device, Done, Task};
use crate::error::{Error, Result};
use crate::journal::{Finished, Journal};
use crate::metrics::Window;

/// Most results in one report.
const REPORT_BATCH: usize = 1024;
/// How long the coordinator may hold a lease request when no job is free (long polling).
const LEASE_WAIT_MS: u32 = 5_000;

/// The longest wait between two attempts to reach the coordinator, jitter included.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);

/// What a worker did before it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Jobs computed.
    pub jobs: u64,
    /// Search nodes of those jobs.
    pub nodes: u128,
    /// Of those nodes, the ones its GPUs searched.
    pub gpu_nodes: u128,
    /// Results the coordinator accepted as new.
    pub accepted: u64,
}

/// Why a report or a lease call did not go through: the coordinator's answer, or something that stops
/// the worker whatever the coordinator says (its journal failing, an answer it cannot take).
#[derive(Debug)]
enum Failure {
    Call(CallError),
    Stop(Error),
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Failure {
        Failure::Call(e)
    }
}

/// Delays between attempts to reach the coordinator: 50 to 100 ms, doubling, up to 5 to 10 s. The
/// jitter (backon adds up to the delay itself) is inside the cap, not on top of it.
fn retry_backoff() -> backon::ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(MAX_RETRY_DELAY / 200)
        .with_max_delay(MAX_RETRY_DELAY / 2)
        .with_jitter()
        .without_max_times()
        .build()
}

/// What a lease request says of `kernels`, the shapes of the devices computing: each valid shape once,
/// at most [`nqueens_proto::MAX_GPU_SHAPES`] (the coordinator refuses a request with more).
fn shapes_to_say(mut kernels: Vec<String>) -> Vec<String> {
    kernels.retain(|k| nqueens_proto::valid_gpu_kernel(k));
    nqueens_proto::distinct_gpu_kernels(&kernels, nqueens_proto::MAX_GPU_SHAPES)
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// The worker's state between two turns of its loop.
struct Worker<L> {
    config: WorkerConfig,
    link: L,
    pool: ComputePool<Lease>,
    /// GPUs in the pool.
    gpus: usize,
    journal: Option<Journal>,
    /// Leases held: queued, running, or finished but not yet acknowledged.
    held: HashMap<u64, Lease>,
    /// The plans checked so far.
    plans: Plans,
    /// The worker's shutdown: a plan check under way gives up on it.
    shutdown: CancellationToken,
    /// Finished results not yet acknowledged, in order.
    unreported: Vec<Finished>,
    /// Running jobs of cancelled runs: their results are dropped as they finish.
    unwanted: HashSet<u64>,
    backoff: Option<(Instant, backon::ExponentialBackoff)>,
    next_lease: Instant,
    next_heartbeat: Instant,
    heartbeat_every: Duration,
    idle: bool,
    summary: Summary,
    /// The summary line's window and when the next line is due.
    window: Window,
    next_summary: Instant,
}

/// Runs a worker over `link` on `devices` (and `config.threads` CPU threads) until `shutdown` is
/// cancelled (then hands back, finishes and reports), or, with `exit_when_idle`, until there is
/// nothing left to lease. `journal`: opened, its unacknowledged results re-sent first.
pub async fn run<L: Link>(
    config: WorkerConfig,
    link: L,
    journal: Option<Journal>,
    devices: Vec<Device>,
    shutdown: CancellationToken,
) -> Result<Summary> {
    let (tx, mut results) = mpsc::unbounded_channel();
    let mut w = Worker::new(config, link, journal, devices, shutdown.clone(), tx);
    w.config.metrics.threads.set(w.config.threads as i64);
    if w.config.faults.any() {
        tracing::warn!(faults = ?w.config.faults, "FAULT INJECTION IS ON: this worker misbehaves on purpose");
    }
    // Stopped by an error, the worker hands back what it has not finished: left alone, each such
    // lease would expire, a strike for this worker and an attempt for its job.
    let served: Result<()> = async {
        let mut draining = false;
        loop {
            while let Ok(done) = results.try_recv() {
                w.finished(done)?;
            }
            if w.config.faults.stalls(w.summary.jobs) {
                tracing::warn!(jobs = w.summary.jobs, "fault injection: stalling for good");
                std::future::pending::<()>().await;
            }
            if w.connected() {
                w.turn(draining).await?;
            }
            if Instant::now() >= w.next_summary {
                w.log_summary();
            }
            let in_flight = w.pool.load();
            // A job the pool no longer counts sent its result first, under the pool's lock: take in
            // what came since the top of the turn, or a stop decided below would leave it in the
            // channel, lost (found 2026-11-28: `heartbeats_go_on_beside_a_slow_report` failed 5 runs
            // in 12, its worker told idle by a lease asked for while its one result sat in the
            // channel).
            while let Ok(done) = results.try_recv() {
                w.finished(done)?;
            }
            // The work-in-hand gauges, read off the state once a turn rather than kept in step by
            // hand.
            w.config.metrics.running.set(in_flight as i64);
            w.config.metrics.unreported.set(w.unreported.len() as i64);
            if draining && in_flight == 0 && (w.unreported.is_empty() || !w.connected()) {
                break;
            }
            if w.config.exit_when_idle && w.idle && in_flight == 0 && w.unreported.is_empty() {
                w.leave(Vec::new()).await;
                break;
            }
            let wake = w.next_wake(draining);
            tokio::select! {
                Some(done) = results.recv() => w.finished(done)?,
                _ = sleep_until(wake) => {}
                _ = shutdown.cancelled(), if !draining => {
                    draining = true;
                    w.hand_back().await;
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = served {
        w.give_up().await;
        return Err(e);
    }
    if !w.unreported.is_empty() {
        tracing::warn!(
            results = w.unreported.len(),
            "stopping with unacknowledged results; the journal keeps them for the next start"
        );
    }
    let Worker { pool, summary, .. } = w;
    // Running jobs end on their own threads; waiting for them must not hold a runtime thread.
    let _ = tokio::task::spawn_blocking(move || pool.join()).await;
    tracing::info!(jobs = summary.jobs, accepted = summary.accepted, nodes = %summary.nodes, gpu_nodes = %summary.gpu_nodes, "worker stopped");
    Ok(summary)
}

impl<L: Link> Worker<L> {
    /// A worker over `link` on `devices` (and `config.threads` CPU threads), its pool sending results
    /// to `tx`; `journal`'s unacknowledged results first to report.
    fn new(
        config: WorkerConfig,
        link: L,
        journal: Option<Journal>,
        devices: Vec<Device>,
        shutdown: CancellationToken,
        tx: mpsc::UnboundedSender<Done<Lease>>,
    ) -> Worker<L> {
        let unreported = journal.as_ref().map(Journal::pending).unwrap_or_default();
        if !unreported.is_empty() {
            tracing::info!(results = unreported.len(), "re-sending journaled results");
        }
        config.metrics.gpus.set(devices.len() as i64);
        let gpus = devices.len();
        let now = Instant::now();
        Worker {
            link,
            pool: ComputePool::new(config.threads, devices, tx),
            gpus,
            journal,
            held: HashMap::new(),
            plans: Plans::default(),
            shutdown,
            unreported,
            unwanted: HashSet::new(),
            backoff: None,
            next_lease: now,
            next_heartbeat: now + Duration::from_secs(10),
            heartbeat_every: Duration::from_secs(10),
            idle: false,
            summary: Summary::default(),
            window: Window::start(now, 0, 0),
            next_summary: now + config.progress_interval,
            config,
        }
    }

    fn connected(&self) -> bool {
        self.backoff
            .as_ref()
            .is_none_or(|(at, _)| Instant::now() >= *at)
    }

    /// Notes a transient failure and schedules the next attempt.
    fn failed(&mut self, what: &str, error: &CallError) {
        let (_, backoff) = self
            .backoff
            .get_or_insert_with(|| (Instant::now(), retry_backoff()));
        let delay = backoff
            .next()
            .unwrap_or(MAX_RETRY_DELAY)
            .min(MAX_RETRY_DELAY);
        tracing::warn!(call = what, code = %error.code, error = %error.message, retry_in_ms = delay.as_millis() as u64, "coordinator unreachable");
        self.backoff.as_mut().expect("just set").0 = Instant::now() + delay;
        // No job comes until it answers: an idle GPU may back up the CPU threads' jobs meanwhile.
        self.pool.set_dry(true);
    }

    fn succeeded(&mut self) {
        if self.backoff.take().is_some() {
            tracing::info!("coordinator reachable again");
        }
    }

    /// Logs the summary line: jobs done, nodes per second over the interval, work in hand, the share of
    /// the nodes its GPUs searched.
    fn log_summary(&mut self) {
        let now = Instant::now();
        let rates = self.window.roll(now, self.summary.jobs, self.summary.nodes);
        self.next_summary = now + self.config.progress_interval;
        self.config
            .metrics
            .nodes_per_second
            .set(rates.nodes_per_second);
        let state = if !self.connected() {
            "unreachable"
        } else if self.pool.load() > 0 {
            "working"
        } else {
            "idle"
        };
        tracing::info!(
            jobs = self.summary.jobs,
            jobs_interval = rates.jobs,
            nodes_per_s = %format_args!("{:.3e}", rates.nodes_per_second),
            running = self.pool.load(),
            unreported = self.unreported.len(),
            accepted = self.summary.accepted,
            gpu_share = %match self.summary.nodes {
                0 => "-".to_string(),
                all => format!("{:.0}%", 100.0 * self.summary.gpu_nodes as f64 / all as f64),
            },
            state,
            "worker progress"
        );
    }

    /// Records a call to the coordinator in the metrics.
    fn timed<T>(&self, method: &str, since: Instant, r: &std::result::Result<T, CallError>) {
        self.config
            .metrics
            .rpc
            .observe(method, since.elapsed(), r.is_ok());
    }

    fn next_wake(&self, draining: bool) -> Instant {
        // A retry delay still running; once it has passed with no call made (draining, or nothing
        // wanted), the usual wake-ups: waking at its end, long past, would spin the loop.
        if let Some((at, _)) = &self.backoff {
            if !self.connected() {
                return (*at).min(self.next_summary);
            }
        }
        // A result taken in after the turn (it came during a call) goes out now, not at the next
        // heartbeat or lease.
        if !self.unreported.is_empty() {
            return Instant::now();
        }
        let mut wake = self.next_heartbeat.min(self.next_summary);
        if !draining && self.pool.load() < self.target() {
            wake = wake.min(self.next_lease);
        }
        wake.max(Instant::now() + Duration::from_millis(1))
    }

    /// Jobs to hold at once: one per CPU thread, and two batches per GPU still computing (one searching,
    /// one queued behind it), each batch as it is sized now to its device's speed (`pace`); a GPU given
    /// up holds none: its thread computes as one more CPU thread.
    /// Holding more would hide a lease round trip (about a millisecond, against jobs of seconds) but lets
    /// a job wait in one worker's queue while another worker idles at the end of a run.
    fn target(&self) -> usize {
        let alive = self.pool.gpus();
        let gpu = 2 * self.pool.gpu_batches() + self.gpus.saturating_sub(alive);
        (self.config.threads + gpu).clamp(1, nqueens_proto::MAX_LEASE_CAPACITY as usize)
    }

    /// Journals a finished job and queues its report.
    fn finished(&mut self, (task, mut result, source): Done<Lease>) -> Result<()> {
        self.config
            .faults
            .on_finished(self.summary.jobs + 1, &mut result);
        let lease = task.lease;
        if self.unwanted.remove(&lease.id) {
            self.held.remove(&lease.id);
            tracing::debug!(run = %lease.run, job = %lease.job, "job of a cancelled run finished; result dropped");
            return Ok(());
        }
        // Sealed here, as the result leaves the compute pool: from now on any change to it is detected.
        let seal = nqueens_common::checksum::seal(lease.fingerprint, task.job.key(), &result);
        let f = Finished {
            lease: lease.id,
            lease_tag: lease.tag,
            run: lease.run,
            n: lease.n,
            fingerprint: lease.fingerprint,
            job: lease.job,
            total: result.total,
            unique8: result.unique8,
            nodes: result.nodes,
            seal,
            device: source.as_deref().map(str::to_string),
            family: Some(match source {
                Some(_) => nqueens_common::Family::Gpu,
                None => nqueens_common::Family::of(nqueens_common::kernel::chosen()),
            }),
        };
        if let Some(j) = self.journal.as_mut() {
            j.record(std::slice::from_ref(&f))?;
        }
        self.summary.jobs += 1;
        self.summary.nodes += result.nodes as u128;
        if source.is_some() {
            self.summary.gpu_nodes += result.nodes as u128;
        }
        self.unreported.push(f);
        self.config
            .metrics
            .computed(source.as_deref(), result.nodes);
        Ok(())
    }

    /// One round of talking to the coordinator: report, heartbeat, lease.
    async fn turn(&mut self, draining: bool) -> Result<()> {
        while !self.unreported.is_empty() {
            let n = self.unreported.len().min(REPORT_BATCH);
            let batch: Vec<Finished> = self.unreported[..n].to_vec();
            // Heartbeats go on while the report is under way (it may take longer than a lease lives).
            let beating = self.heartbeats_beside();
            let reported = tokio::select! {
                reported = self.report(&batch) => reported,
                never = beating => match never {},
            };
            match reported {
                Ok(()) => {
                    self.unreported.drain(..n);
                    self.succeeded();
                    // A report frees capacity and may finish a run: ask for work (or learn that there
                    // is none) right away.
                    self.next_lease = Instant::now();
                }
                Err(Failure::Stop(e)) => return Err(e),
                // Refused for good, or for something no retry changes (see `Kind`): stop, the journal
                // kept for the next start.
                Err(Failure::Call(e)) if !e.transient() => return Err(e.stop()),
                Err(Failure::Call(e)) => {
                    self.failed("report", &e);
                    return Ok(());
                }
            }
        }
        if Instant::now() >= self.next_heartbeat {
            match self.heartbeat().await {
                // Quarantined (its leases are taken back), or a wrong token: stop, the journal kept.
                Err(e) if e.refused() => return Err(e.stop()),
                Err(e) => {
                    self.failed("heartbeat", &e);
                    return Ok(());
                }
                Ok(()) => {}
            }
            self.succeeded();
        }
        let want = self.target().saturating_sub(self.pool.load());
        if !draining && want > 0 && Instant::now() >= self.next_lease {
            match self.lease(want).await {
                Ok(()) => self.succeeded(),
                Err(Failure::Stop(e)) => return Err(e),
                Err(Failure::Call(e)) if e.transient() => self.failed("lease", &e),
                Err(Failure::Call(e)) => return Err(e.stop()),
            }
        }
        Ok(())
    }

    /// Reports a batch; a batch refused for bad input is retried one by one, and a single result the
    /// coordinator refuses for good is logged and dropped (it would be refused forever).
    async fn report(&mut self, batch: &[Finished]) -> std::result::Result<(), Failure> {
        match self.send_report(batch).await {
            Err(Failure::Call(e)) if e.kind == Kind::OfTheResult && batch.len() > 1 => {
                for one in batch {
                    Box::pin(self.report(std::slice::from_ref(one))).await?;
                }
                Ok(())
            }
            // A run the coordinator does not know at all, or knows with another N or plan (run ids
            // start at 1 in every store), means another coordinator (or one restored from an older
            // backup), not a bad result.
            Err(Failure::Call(e)) if e.kind == Kind::OfTheResult && self.foreign(&batch[0]).await? => {
                Err(Failure::Call(CallError {
                    kind: Kind::Other,
                    code: "NotFound".into(),
                    message: format!(
                        "the coordinator knows no run {:?} of N = {} and this plan, of which this worker holds a journaled result: it is kept for the coordinator of that run (point the worker at it, or remove the journal to drop the result)",
                        batch[0].run, batch[0].n
                    ),
                }))
            }
            Err(Failure::Call(e)) if e.kind == Kind::OfTheResult => {
                tracing::error!(run = %batch[0].run, job = %batch[0].job, lease = batch[0].lease, code = %e.code, error = %e.message, "coordinator refused a result; dropping it");
                self.acknowledged(batch, 0).map_err(Failure::Stop)
            }
            other => other,
        }
    }

    /// Whether `result` belongs to a run this coordinator does not hold: it knows no run of that id, or
    /// one of another N or another plan (by its fingerprint, where the coordinator sends it).
    async fn foreign(&mut self, result: &Finished) -> std::result::Result<bool, CallError> {
        Ok(match self.link.run(result.run.clone()).await? {
            Some(run) => {
                let other_plan = run.fingerprint != 0
                    && result.fingerprint != 0
                    && run.fingerprint != result.fingerprint;
                run.n != result.n || other_plan
            }
            None => true,
        })
    }

    async fn send_report(&mut self, batch: &[Finished]) -> std::result::Result<(), Failure> {
        if let Some(ms) = self.config.faults.fault_slow_report_ms {
            tracing::warn!(ms, "fault injection: a slow report");
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let since = Instant::now();
        let reply = self.link.report(batch).await;
        self.timed("Report", since, &reply);
        let reply = reply?;
        // One known outcome per result, or nothing is acknowledged: an answer without them (a stub, a
        // proxy, another version) says nothing of what the coordinator holds.
        let outcomes: Vec<Outcome> = reply.iter().flatten().copied().collect();
        if outcomes.len() != batch.len() || reply.len() != batch.len() {
            return Err(Failure::Stop(Error::Refused(format!(
                "the coordinator answered a report of {} results with {} outcomes, {} of them known to this worker: nothing is acknowledged, and the journal keeps the results (a coordinator of another version, or something else at its address?)",
                batch.len(),
                reply.len(),
                outcomes.len()
            ))));
        }
        let accepted = outcomes.iter().filter(|&&o| o == Outcome::Accepted).count() as u64;
        for (f, &outcome) in batch.iter().zip(&outcomes) {
            if outcome == Outcome::Mismatch {
                tracing::error!(run = %f.run, job = %f.job, total = f.total, "coordinator holds a different result for this job");
            }
            tracing::debug!(run = %f.run, job = %f.job, total = f.total, nodes = f.nodes, outcome = outcome.name(), "result acknowledged");
        }
        self.acknowledged(batch, accepted).map_err(Failure::Stop)
    }

    fn acknowledged(&mut self, batch: &[Finished], accepted: u64) -> Result<()> {
        let ids: Vec<u64> = batch.iter().map(|f| f.lease).collect();
        if let Some(j) = self.journal.as_mut() {
            j.ack(&ids)?;
        }
        for id in &ids {
            self.held.remove(id);
        }
        self.summary.accepted += accepted;
        self.config.metrics.accepted.inc_by(accepted);
        Ok(())
    }

    /// Heartbeats for the leases held now, from when the next one is due and at the usual interval, for
    /// as long as the future is polled (beside a report; their answers are left to the next regular
    /// heartbeat).
    fn heartbeats_beside(&self) -> impl std::future::Future<Output = std::convert::Infallible> {
        heartbeats(
            self.link.clone(),
            self.held.keys().copied().collect(),
            self.next_heartbeat,
            self.heartbeat_every,
        )
    }

    async fn heartbeat(&mut self) -> std::result::Result<(), CallError> {
        let since = Instant::now();
        let ids = self.held.keys().copied().collect();
        let reply = self.link.heartbeat(ids).await;
        self.timed("Heartbeat", since, &reply);
        let reply = reply?;
        if !reply.lost.is_empty() {
            tracing::debug!(
                lost = reply.lost.len(),
                "leases no longer ours; finishing them anyway"
            );
        }
        if !reply.cancelled.is_empty() {
            self.drop_cancelled(&reply.cancelled);
        }
        self.set_timeout(reply.lease_timeout_ms);
        Ok(())
    }

    /// Drops the jobs of leases whose run was cancelled: those not started leave the queue, those running
    /// have their results dropped as they finish (the coordinator would refuse them).
    fn drop_cancelled(&mut self, cancelled: &[u64]) {
        let cancelled: HashSet<u64> = cancelled
            .iter()
            .copied()
            .filter(|id| self.held.contains_key(id))
            .collect();
        let unstarted: HashSet<u64> = self
            .pool
            .take_unstarted_if(|lease| cancelled.contains(&lease.id))
            .iter()
            .map(|t| t.lease.id)
            .collect();
        // Finished but unreported ones are left to their report, which the coordinator refuses.
        let unreported: HashSet<u64> = self.unreported.iter().map(|f| f.lease).collect();
        for &id in &cancelled {
            if unreported.contains(&id) {
                continue;
            }
            self.held.remove(&id);
            if !unstarted.contains(&id) {
                self.unwanted.insert(id);
            }
        }
        tracing::info!(
            leases = cancelled.len(),
            unstarted = unstarted.len(),
            "run cancelled: dropping its jobs"
        );
    }

    /// The kernel shapes of the devices still computing (one given up is left out), each once, as the
    /// coordinator takes them: valid names, at most [`nqueens_proto::MAX_GPU_SHAPES`] (more would have
    /// the whole request refused).
    fn gpu_kernels(&self) -> Vec<String> {
        shapes_to_say(self.pool.gpu_kernels())
    }

    fn set_timeout(&mut self, lease_timeout_ms: u32) {
        self.heartbeat_every =
            (Duration::from_millis(lease_timeout_ms as u64) / 3).max(Duration::from_millis(10));
        self.next_heartbeat = Instant::now() + self.heartbeat_every;
    }

    async fn lease(&mut self, capacity: usize) -> std::result::Result<(), Failure> {
        // Long-poll only when holding nothing: a held request must not delay reports.
        let wait_ms = if self.held.is_empty() {
            LEASE_WAIT_MS
        } else {
            0
        };
        let since = Instant::now();
        let ask = Ask {
            capacity,
            wait_ms,
            threads: self.config.threads,
            gpus: self
                .config
                .metrics
                .gpus
                .get()
                .clamp(0, nqueens_proto::MAX_GPUS as i64) as u32,
            gpu_kernels: self.gpu_kernels(),
            run: self.config.run.clone(),
        };
        let reply = self.link.lease(ask).await;
        // A long-polled lease waits on purpose: only the calls asked to answer at once measure latency.
        if wait_ms == 0 || reply.is_err() {
            self.timed("Lease", since, &reply);
        }
        let reply = reply?;
        self.idle = reply.idle && reply.leases.is_empty();
        // None to lease now (at a run's end, most often): an idle GPU may back up the CPU
        // threads' jobs.
        self.pool.set_dry(reply.leases.is_empty());
        if reply.leases.is_empty() {
            self.next_lease = Instant::now()
                + Duration::from_millis(reply.retry_after_ms.clamp(10, 60_000) as u64);
        } else if self.held.is_empty() {
            self.set_timeout(reply.lease_timeout_ms);
        }
        let mut unbuildable = Vec::new();
        // Checked before anything is computed: an id already held (or given twice in the reply) is a
        // coordinator's fault; the second is ignored, never handed back (that would release the first),
        // and expires there. Leases beyond the capacity asked are handed back at once.
        let taken: HashSet<u64> = self
            .unreported
            .iter()
            .map(|f| f.lease)
            .chain(self.unwanted.iter().copied())
            .collect();
        let (mut fresh, mut excess) = (HashSet::new(), Vec::new());
        let mut leases = Vec::with_capacity(reply.leases.len().min(capacity));
        for lease in reply.leases {
            let id = lease.id;
            if self.held.contains_key(&id) || taken.contains(&id) || !fresh.insert(id) {
                tracing::error!(run = %lease.run, job = %lease.job, lease = id, "coordinator sent a lease id this worker already holds; ignored (it expires at the coordinator)");
            } else if leases.len() < capacity {
                leases.push(lease);
            } else {
                excess.push(id);
            }
        }
        if !excess.is_empty() {
            tracing::warn!(
                asked = capacity,
                handed_back = excess.len(),
                "coordinator sent more leases than asked for; handing the rest back"
            );
            self.give_back(excess).await;
        }
        // Held (and so heartbeated) while their plans are checked, which may take seconds.
        for lease in &leases {
            self.held.insert(lease.id, lease.clone());
        }
        let mut unchecked = Vec::new();
        for lease in leases {
            if self.config.faults.drops(&lease.job) {
                tracing::warn!(run = %lease.run, job = %lease.job, "fault injection: dropping a job");
                self.held.remove(&lease.id);
                continue;
            }
            // Heartbeats for every lease held now, beside the plan check.
            let (link, ids) = (self.link.clone(), Vec::from_iter(self.held.keys().copied()));
            let (first, every) = (self.next_heartbeat, self.heartbeat_every);
            let beating = move || heartbeats(link.clone(), ids.clone(), first, every);
            let built = self
                .plans
                .check(&lease, &mut self.link, &beating, &self.shutdown)
                .await;
            match built {
                Ok(job) => self.pool.submit(Task { lease, job }),
                Err(PlanCheck::Unchecked(why)) => {
                    tracing::warn!(run = %lease.run, job = %lease.job, error = %why, "cannot check the plan of a leased job now; handing it back");
                    self.held.remove(&lease.id);
                    unchecked.push(lease.id);
                }
                Err(PlanCheck::Other(e)) => {
                    tracing::error!(run = %lease.run, job = %lease.job, error = %e, "coordinator sent a job this worker cannot build");
                    self.held.remove(&lease.id);
                    unbuildable.push((lease, e));
                }
            }
        }
        if !unchecked.is_empty() {
            self.give_back(unchecked).await;
        }
        // Not this worker's to compute (a plan of a newer coordinator, most likely): handed back at once
        // for a sound worker, and the worker stops, since every later call would get the same.
        if let Some((first, why)) = unbuildable.first() {
            let why = format!(
                "the coordinator sent {} jobs this worker cannot build (first: run {} job {:?}: {why}); handed back. A coordinator newer than this worker? Upgrade the worker",
                unbuildable.len(),
                first.run,
                first.job
            );
            let ids = unbuildable.iter().map(|(l, _)| l.id).collect();
            self.give_back(ids).await;
            return Err(Failure::Stop(Error::Refused(why)));
        }
        Ok(())
    }

    /// Takes back the unstarted jobs and returns their leases to the coordinator (best effort).
    async fn hand_back(&mut self) {
        let unstarted = self.pool.take_unstarted();
        // No job comes any more: an idle GPU may back up the CPU threads' last jobs.
        self.pool.set_dry(true);
        let lease_ids: Vec<u64> = unstarted.iter().map(|t| t.lease.id).collect();
        for id in &lease_ids {
            self.held.remove(id);
        }
        tracing::info!(
            handed_back = lease_ids.len(),
            running = self.pool.load(),
            "shutting down: handing back unstarted jobs, finishing running ones"
        );
        // Sent even with nothing to hand back: the coordinator learns that this worker is leaving.
        self.leave(lease_ids).await;
    }

    /// Hands back every lease not finished (queued, or running: the pool is dropped, its results
    /// with it) as the worker stops on an error, and says it leaves (best effort). Finished results
    /// keep their leases: they are journaled, and sent at the next start.
    async fn give_up(&mut self) {
        let finished: HashSet<u64> = self.unreported.iter().map(|f| f.lease).collect();
        let mut lease_ids: Vec<u64> = self
            .held
            .keys()
            .copied()
            .filter(|id| !finished.contains(id))
            .collect();
        lease_ids.sort_unstable();
        drop(self.pool.take_unstarted());
        for id in &lease_ids {
            self.held.remove(id);
        }
        tracing::warn!(
            handed_back = lease_ids.len(),
            "stopping on an error: handing back the jobs not finished"
        );
        self.leave(lease_ids).await;
    }

    /// Tells the coordinator that this worker takes no more jobs, handing back `lease_ids` (best effort).
    async fn leave(&mut self, lease_ids: Vec<u64>) {
        self.release(lease_ids, true).await
    }

    /// Hands `lease_ids` back to the coordinator, the worker staying (best effort).
    async fn give_back(&mut self, lease_ids: Vec<u64>) {
        self.release(lease_ids, false).await
    }

    async fn release(&mut self, lease_ids: Vec<u64>, leaving: bool) {
        let since = Instant::now();
        let reply = self.link.release(lease_ids, leaving).await;
        self.timed("Release", since, &reply);
        if let Err(e) = reply {
            if leaving {
                tracing::warn!(error = %e.message, "could not tell the coordinator that this worker leaves; its leases will expire");
            } else {
                tracing::warn!(error = %e.message, "could not hand leases back; they will expire");
            }
        }
    }
}

/// Heartbeats for the leases `ids` over `link`, from `first` and every `every`, for as long as the
/// future is polled; failures are logged only.
async fn heartbeats<L: Link>(
    mut link: L,
    ids: Vec<u64>,
    first: Instant,
    every: Duration,
) -> std::convert::Infallible {
    tokio::time::sleep_until(first).await;
    loop {
        if let Err(e) = link.heartbeat(ids.clone()).await {
            tracing::debug!(code = %e.code, error = %e.message, "heartbeat beside a report failed");
        }
        tokio::time::sleep(every).await;
    }
}

/// The loop's unit tests: a coordinator in memory ([`Memory`]), time paused (it advances only when
/// every task waits), so that delays and intervals are exact.
#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use nqueens_common::{Plan, Strategy};

    use super::*;
    use crate::client::link::{Beat, Leased, RunInfo};
    use crate::client::GpuConfig;
    use crate::faults::Faults;
    use crate::metrics::Metrics;

    /// A lease request names each valid shape once, at most as many as the coordinator takes.
    #[test]
    fn a_lease_request_says_each_shape_once() {
        let shapes = |k: &[&str]| shapes_to_say(k.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            shapes(&[
                "flat/128/4",
                "coop/64/8/8",
                "flat/128/4",
                "Bad Shape",
                "coop/64/8/8"
            ]),
            ["flat/128/4", "coop/64/8/8"]
        );
        assert!(shapes(&[]).is_empty());
        let many: Vec<String> = (0..20).map(|i| format!("flat/{}", i % 10)).collect();
        let said = shapes_to_say(many.clone());
        assert_eq!(said, many[..nqueens_proto::MAX_GPU_SHAPES]);
    }

    /// One call the loop made: when, which, and the lease ids it named.
    #[derive(Debug, Clone)]
    struct Call {
        at: Instant,
        what: &'static str,
        ids: Vec<u64>,
    }

    /// A coordinator in memory: each call's answers in turn from a queue (then the default: leases
    /// nothing, idle; accepts every result; keeps every lease), every call noted.
    #[derive(Clone, Default)]
    struct Memory(Arc<Mutex<Answers>>);

    #[derive(Default)]
    struct Answers {
        leases: VecDeque<std::result::Result<Leased, CallError>>,
        reports: VecDeque<std::result::Result<Vec<Option<Outcome>>, CallError>>,
        run: Option<RunInfo>,
        calls: Vec<Call>,
        /// Per lease call in turn, how long it holds the loop's thread before answering (real time,
        /// not the runtime's: a compute thread goes on meanwhile).
        lease_holds: VecDeque<Duration>,
    }

    impl Memory {
        fn note(&self, what: &'static str, ids: Vec<u64>) {
            self.0.lock().unwrap().calls.push(Call {
                at: Instant::now(),
                what,
                ids,
            });
        }
        /// Answers the next lease call with `lease` alone, leases living `lease_timeout_ms`.
        fn lease_one(&self, lease: Lease, lease_timeout_ms: u32) {
            self.0.lock().unwrap().leases.push_back(Ok(Leased {
                leases: vec![lease],
                lease_timeout_ms,
                ..Leased::default()
            }));
        }
        /// Answers the next lease call with a transient failure.
        fn fail_a_lease(&self) {
            let failed = Err(failing(Kind::Transient));
            self.0.lock().unwrap().leases.push_back(failed);
        }
        /// Every lease id handed back, leaving or not, in order.
        fn handed_back(&self) -> Vec<u64> {
            let mut ids: Vec<u64> = self
                .calls("release")
                .into_iter()
                .chain(self.calls("leave"))
                .flat_map(|c| c.ids)
                .collect();
            ids.sort_unstable();
            ids
        }
        fn calls(&self, what: &str) -> Vec<Call> {
            let answers = self.0.lock().unwrap();
            answers
                .calls
                .iter()
                .filter(|c| c.what == what)
                .cloned()
                .collect()
        }
    }

    impl Link for Memory {
        async fn lease(&mut self, ask: Ask) -> std::result::Result<Leased, CallError> {
            self.note("lease", vec![ask.capacity as u64, ask.wait_ms as u64]);
            let hold = self.0.lock().unwrap().lease_holds.pop_front();
            if let Some(hold) = hold {
                std::thread::sleep(hold);
            }
            let next = self.0.lock().unwrap().leases.pop_front();
            next.unwrap_or_else(|| {
                Ok(Leased {
                    retry_after_ms: 1000,
                    idle: true,
                    ..Leased::default()
                })
            })
        }
        async fn report(
            &mut self,
            batch: &[Finished],
        ) -> std::result::Result<Vec<Option<Outcome>>, CallError> {
            self.note("report", batch.iter().map(|f| f.lease).collect());
            let next = self.0.lock().unwrap().reports.pop_front();
            next.unwrap_or_else(|| Ok(vec![Some(Outcome::Accepted); batch.len()]))
        }
        async fn heartbeat(&mut self, ids: Vec<u64>) -> std::result::Result<Beat, CallError> {
            self.note("heartbeat", ids);
            Ok(Beat {
                lease_timeout_ms: 3000,
                ..Beat::default()
            })
        }
        async fn release(
            &mut self,
            ids: Vec<u64>,
            leaving: bool,
        ) -> std::result::Result<(), CallError> {
            self.note(if leaving { "leave" } else { "release" }, ids);
            Ok(())
        }
        async fn run(&mut self, _: String) -> std::result::Result<Option<RunInfo>, CallError> {
            self.note("run", Vec::new());
            Ok(self.0.lock().unwrap().run.clone())
        }
    }

    /// Runs a worker against `link` until it stops by itself (told to stop when idle), with no
    /// journal and nothing to send first.
    async fn run_to_end(config: WorkerConfig, link: &Memory) -> Summary {
        run(
            config,
            link.clone(),
            None,
            Vec::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap()
    }

    fn failing(kind: Kind) -> CallError {
        CallError {
            kind,
            code: "Code".into(),
            message: "said no".into(),
        }
    }

    fn config(exit_when_idle: bool) -> WorkerConfig {
        WorkerConfig {
            connection: crate::Connection::new("http://127.0.0.1:9"),
            threads: 1,
            name: "w".into(),
            journal: None,
            run: None,
            exit_when_idle,
            faults: Faults::default(),
            progress_interval: Duration::from_secs(3600),
            metrics: Arc::new(Metrics::default()),
            gpu: GpuConfig::default(),
        }
    }

    /// The N = 8 `d4` plan, its fingerprint, and a lease of its job `i`.
    fn lease(id: u64, i: usize) -> (Lease, u64) {
        lease_of(8, id, i)
    }

    /// The N = `n` `d4` plan, its fingerprint, and a lease of its job `i`.
    fn lease_of(n: u8, id: u64, i: usize) -> (Lease, u64) {
        let plan = Plan::new(n as u32, Strategy::D4).unwrap();
        let fingerprint = plan.fingerprint().1;
        let key = plan.jobs().nth(i).unwrap();
        let lease = Lease {
            id,
            tag: id,
            run: "1".into(),
            n: n.into(),
            plan: Ok(plan),
            job: key.to_string(),
            fingerprint,
        };
        (lease, fingerprint)
    }

    /// A journal in `dir` holding the finished, unacknowledged results of leases `ids`.
    fn journal_of(dir: &std::path::Path, ids: &[u64]) -> Journal {
        let mut journal = Journal::open(&dir.join("w.journal")).unwrap();
        for (i, &id) in ids.iter().enumerate() {
            let (lease, fingerprint) = lease(id, i);
            let job = super::super::plan_check::job_of(&lease).unwrap();
            let result = job.run();
            journal
                .record(&[Finished {
                    lease: id,
                    lease_tag: id,
                    run: "1".into(),
                    n: 8,
                    fingerprint,
                    job: lease.job.clone(),
                    total: result.total,
                    unique8: result.unique8,
                    nodes: result.nodes,
                    seal: nqueens_common::checksum::seal(fingerprint, job.key(), &result),
                    device: None,
                    family: None,
                }])
                .unwrap();
        }
        journal
    }

    /// A worker that stops on an error hands back every lease it has not finished: the one that
    /// stopped it, those beyond what it asked for, and the one it started (found by a review, 2026-11-29: the
    /// others were left to expire, a strike and an attempt each).
    #[tokio::test]
    async fn a_worker_that_stops_on_an_error_hands_back_every_lease_it_has_not_finished() {
        let link = Memory::default();
        let (first, _) = lease(1, 0);
        let (second, _) = lease(2, 1);
        let (mut unbuildable, _) = lease(3, 2);
        unbuildable.plan = Plan::new(40, Strategy::D4);
        assert!(unbuildable.plan.is_err());
        link.0.lock().unwrap().leases.push_back(Ok(Leased {
            leases: vec![first, unbuildable, second],
            lease_timeout_ms: 60_000,
            ..Leased::default()
        }));
        // Two threads: it asks for two leases, and gets a third beyond them.
        let stopped = run(
            WorkerConfig {
                threads: 2,
                ..config(true)
            },
            link.clone(),
            None,
            Vec::new(),
            CancellationToken::new(),
        )
        .await;
        assert!(matches!(stopped, Err(Error::Refused(_))), "{stopped:?}");
        assert_eq!(link.handed_back(), vec![1, 2, 3]);
        assert!(link.calls("report").is_empty());
    }

    /// A worker that stops on an error keeps the lease of a result it finished and journaled: the
    /// result is sent at the next start under it (handed back, the lease would make the coordinator
    /// refuse it while the job is open, and the work be lost).
    #[tokio::test]
    async fn a_worker_that_stops_on_an_error_keeps_the_leases_of_its_finished_results() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(&dir.path().join("w.journal")).unwrap();
        let link = Memory::default();
        link.lease_one(lease(9, 1).0, 60_000);
        // The answer to its report names no outcome: the worker stops, its result journaled.
        link.0.lock().unwrap().reports.push_back(Ok(Vec::new()));
        let stopped = run(
            config(true),
            link.clone(),
            Some(journal),
            Vec::new(),
            CancellationToken::new(),
        )
        .await;
        assert!(matches!(stopped, Err(Error::Refused(_))), "{stopped:?}");
        assert_eq!(link.calls("report").len(), 1);
        let handed = link.handed_back();
        assert!(!handed.contains(&9), "{handed:?}");
        let journal = Journal::open(&dir.path().join("w.journal")).unwrap();
        assert_eq!(
            journal
                .pending()
                .iter()
                .map(|f| f.lease)
                .collect::<Vec<_>>(),
            vec![9]
        );
    }

    #[test]
    fn retry_delays_start_small_double_and_never_pass_the_cap_jitter_included() {
        for _ in 0..50 {
            let delays: Vec<Duration> = retry_backoff().take(40).collect();
            assert!(
                delays[0] >= Duration::from_millis(50) && delays[0] < Duration::from_millis(100)
            );
            assert!(delays.iter().all(|d| *d <= MAX_RETRY_DELAY), "{delays:?}");
            // At the cap the jitter still spreads workers over 5 to 10 s.
            assert!(delays[39] >= MAX_RETRY_DELAY / 2);
        }
    }

    /// An unreachable coordinator is asked again after 50 to 100 ms, then twice as long each time (the
    /// jitter inside each step), never a busy loop; once it answers that nothing is left, a worker
    /// told to stop when idle says it leaves and stops. The first ask, holding nothing, long-polls.
    #[tokio::test(start_paused = true)]
    async fn an_unreachable_coordinator_is_asked_again_at_doubling_delays() {
        let link = Memory::default();
        for _ in 0..7 {
            link.0
                .lock()
                .unwrap()
                .leases
                .push_back(Err(failing(Kind::Transient)));
        }
        let summary = run_to_end(config(true), &link).await;
        assert_eq!(summary, Summary::default());
        let asked = link.calls("lease");
        assert_eq!(asked.len(), 8);
        assert_eq!(
            asked[0].ids,
            vec![1, u64::from(LEASE_WAIT_MS)],
            "long-polled"
        );
        for (i, pair) in asked.windows(2).enumerate() {
            let gap = pair[1].at - pair[0].at;
            let step = Duration::from_millis(50 << i);
            // Up to twice the step: the timer rounds a sleep up to the next millisecond, so a
            // jitter just under the step can end at exactly twice it.
            assert!(gap >= step && gap <= 2 * step, "attempt {i}: {gap:?}");
        }
        assert_eq!(link.calls("leave").len(), 1);
    }

    /// A lease reply with no job tells the pool the coordinator has none (an idle GPU may then back up
    /// the CPU threads' jobs); one with a job, that it has again. So do a coordinator found unreachable
    /// and a shutdown: no job comes meanwhile.
    #[tokio::test(start_paused = true)]
    async fn a_lease_reply_with_no_job_lets_an_idle_gpu_back_up_the_cpus() {
        let link = Memory::default();
        let mut w = a_worker(&link);
        assert!(!w.pool.is_dry(), "not before the first ask");
        w.lease(2).await.unwrap();
        assert!(w.pool.is_dry(), "an empty reply");
        link.fail_a_lease();
        assert!(w.lease(2).await.is_err());
        assert!(w.pool.is_dry(), "a failed call changes nothing");
        link.lease_one(lease(1, 0).0, 3000);
        w.lease(2).await.unwrap();
        assert!(!w.pool.is_dry(), "a reply with a job");
        link.fail_a_lease();
        assert!(w.lease(2).await.is_err());
        assert!(!w.pool.is_dry(), "a failed call alone changes nothing");
        // The coordinator unreachable (the loop notes each failure): no job comes meanwhile.
        w.failed("lease", &failing(Kind::Transient));
        assert!(w.pool.is_dry());
        link.lease_one(lease(2, 1).0, 3000);
        w.lease(2).await.unwrap();
        assert!(!w.pool.is_dry());
        // Shutting down: no job comes any more.
        w.hand_back().await;
        assert!(w.pool.is_dry());
    }

    /// A worker over `link` with one CPU thread and no GPU, as `run` makes it.
    fn a_worker(link: &Memory) -> Worker<Memory> {
        let (tx, _) = mpsc::unbounded_channel();
        Worker::new(
            config(false),
            link.clone(),
            None,
            Vec::new(),
            CancellationToken::new(),
            tx,
        )
    }

    /// How many Lease calls the worker's latency metric has timed.
    fn leases_timed(w: &Worker<Memory>) -> usize {
        let text = w.config.metrics.render();
        text.lines()
            .find(|l| l.starts_with("nqueens_worker_rpc_seconds_count{method=\"Lease\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// An empty reply is asked again after its retry delay (not before), and makes the worker idle
    /// only when the coordinator says it is; a long-polled ask is no latency, a failed one is.
    #[tokio::test(start_paused = true)]
    async fn an_empty_lease_reply_is_asked_again_after_its_delay_and_idle_only_when_said() {
        let link = Memory::default();
        let mut w = a_worker(&link);
        link.0.lock().unwrap().leases.push_back(Ok(Leased {
            retry_after_ms: 1000,
            idle: false,
            ..Leased::default()
        }));
        let asked = Instant::now();
        w.lease(2).await.unwrap();
        assert!(!w.idle, "not idle: the coordinator did not say so");
        assert!(w.next_lease >= asked + Duration::from_millis(1000));
        assert_eq!(link.calls("lease")[0].ids, [2, LEASE_WAIT_MS as u64]);
        assert_eq!(leases_timed(&w), 0, "a long poll waits on purpose");
        // The default answer: idle, nothing to lease.
        w.lease(2).await.unwrap();
        assert!(w.idle);
        link.fail_a_lease();
        assert!(w.lease(2).await.is_err());
        assert_eq!(leases_timed(&w), 1, "a failed call is timed");
        // Holding a lease, the ask answers at once and is timed.
        link.lease_one(lease(1, 0).0, 3000);
        w.lease(2).await.unwrap();
        w.lease(2).await.unwrap();
        assert_eq!(link.calls("lease").last().unwrap().ids, [2, 0]);
        assert_eq!(leases_timed(&w), 2);
        w.hand_back().await;
    }

    /// A lease whose id names a result not yet acknowledged is the coordinator's fault: ignored,
    /// never computed (nor handed back, which would release the first).
    #[tokio::test(start_paused = true)]
    async fn a_lease_id_of_a_result_not_yet_acknowledged_is_ignored() {
        let link = Memory::default();
        let mut w = a_worker(&link);
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_of(dir.path(), &[5]);
        w.unreported = journal.pending();
        link.lease_one(lease(5, 1).0, 3000);
        w.lease(2).await.unwrap();
        assert!(!w.held.contains_key(&5));
        assert_eq!(w.pool.load(), 0, "nothing computed");
        assert!(link.handed_back().is_empty());
    }

    /// A refusal for good (a quarantine, a wrong token) or of the request stops the worker at once,
    /// naming the code; nothing is asked again.
    #[tokio::test(start_paused = true)]
    async fn a_refused_lease_stops_the_worker_at_once() {
        for kind in [Kind::Refused { tls: None }, Kind::Other] {
            let link = Memory::default();
            link.0.lock().unwrap().leases.push_back(Err(failing(kind)));
            let stopped = run(
                config(true),
                link.clone(),
                None,
                Vec::new(),
                CancellationToken::new(),
            )
            .await;
            assert!(
                matches!(&stopped, Err(Error::Refused(why)) if why == "Code: said no"),
                "{stopped:?}"
            );
            assert_eq!(link.calls("lease").len(), 1);
        }
    }

    /// A batch refused for one of its results is sent again result by result: the one refused is
    /// dropped from the journal (it would be refused for ever), the other acknowledged; the refused
    /// run is asked about once, to tell a bad result from another coordinator.
    #[tokio::test(start_paused = true)]
    async fn a_batch_refused_for_one_result_is_sent_one_by_one_and_that_one_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_of(dir.path(), &[5, 6]);
        let link = Memory::default();
        {
            let mut answers = link.0.lock().unwrap();
            answers.reports.push_back(Err(failing(Kind::OfTheResult)));
            answers.reports.push_back(Err(failing(Kind::OfTheResult)));
            let (_, fingerprint) = lease(5, 0);
            answers.run = Some(RunInfo {
                run: "1".into(),
                n: 8,
                jobs_total: 1,
                fingerprint,
            });
        }
        let summary = run(
            config(true),
            link.clone(),
            Some(journal),
            Vec::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(summary.accepted, 1);
        let sent: Vec<Vec<u64>> = link.calls("report").into_iter().map(|c| c.ids).collect();
        assert_eq!(sent, vec![vec![5, 6], vec![5], vec![6]]);
        assert_eq!(link.calls("run").len(), 1);
        let left = Journal::open(&dir.path().join("w.journal")).unwrap();
        assert!(left.pending().is_empty());
    }

    /// A result of a run the coordinator does not know (another coordinator's, or an older backup's)
    /// stops the worker and stays in its journal for the coordinator of its run.
    #[tokio::test(start_paused = true)]
    async fn a_result_of_a_run_the_coordinator_does_not_know_is_kept_and_stops_the_worker() {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_of(dir.path(), &[5]);
        let link = Memory::default();
        link.0
            .lock()
            .unwrap()
            .reports
            .push_back(Err(failing(Kind::OfTheResult)));
        let stopped = run(
            config(true),
            link.clone(),
            Some(journal),
            Vec::new(),
            CancellationToken::new(),
        )
        .await;
        assert!(
            matches!(&stopped, Err(Error::Refused(why)) if why.starts_with("NotFound: the coordinator knows no run \"1\"")),
            "{stopped:?}"
        );
        let left = Journal::open(&dir.path().join("w.journal")).unwrap();
        assert_eq!(left.pending().len(), 1);
    }

    /// Heartbeats go on beside a report that takes longer than a lease lives (here a slow report of
    /// 10 s against leases of 3 s, heartbeats every second): the lease is named by a heartbeat each
    /// second of it.
    #[tokio::test(start_paused = true)]
    async fn heartbeats_go_on_beside_a_slow_report() {
        let link = Memory::default();
        link.lease_one(lease(9, 1).0, 3000);
        let mut config = config(true);
        config.faults.fault_slow_report_ms = Some(10_000);
        let summary = run_to_end(config, &link).await;
        assert_eq!((summary.jobs, summary.accepted), (1, 1));
        let reported = link.calls("report")[0].at;
        let beside = link
            .calls("heartbeat")
            .into_iter()
            .filter(|c| c.at + Duration::from_secs(10) > reported && c.at <= reported)
            .filter(|c| c.ids == vec![9])
            .count();
        assert!((9..=11).contains(&beside), "{beside} heartbeats in 10 s");
    }

    /// A result that comes in while a lease call is under way is reported as soon as the call returns,
    /// not at the next heartbeat or lease (found 2026-11-29: `nqueens count 18` took 2 s more in one
    /// run of three, its last result held until the next lease was due).
    #[tokio::test(start_paused = true)]
    async fn a_result_that_comes_in_during_a_lease_call_is_reported_at_once() {
        let link = Memory::default();
        // One N = 17 job (tens of milliseconds or more), then nothing for a minute: a second thread
        // asks for more while the job runs, and that call holds the loop (3 s of real time) until
        // the job is done.
        link.lease_one(lease_of(17, 9, 30).0, 30_000);
        {
            let mut answers = link.0.lock().unwrap();
            answers.leases.push_back(Ok(Leased {
                retry_after_ms: 60_000,
                lease_timeout_ms: 30_000,
                ..Leased::default()
            }));
            answers
                .lease_holds
                .extend([Duration::ZERO, Duration::from_secs(3)]);
        }
        let mut config = config(true);
        config.threads = 2;
        let summary = run_to_end(config, &link).await;
        assert_eq!((summary.jobs, summary.accepted), (1, 1));
        let leases = link.calls("lease");
        let reported = link.calls("report")[0].at;
        // The job ended during the second call, as meant (not before it, reported first).
        let order: Vec<&str> = link
            .0
            .lock()
            .unwrap()
            .calls
            .iter()
            .map(|c| c.what)
            .collect();
        assert_eq!(order[..3], ["lease", "lease", "report"], "{order:?}");
        assert!(
            reported < leases[1].at + Duration::from_millis(100),
            "reported {:?} after the lease call that saw the job end",
            reported - leases[1].at
        );
        assert!(
            link.calls("heartbeat").is_empty(),
            "no heartbeat was due before the report"
        );
    }

    /// A report refused for now (the coordinator unreachable) is sent again once the retry delay
    /// (50 to 100 ms) has passed, not before: the loop waits out the delay with the result in hand.
    #[tokio::test(start_paused = true)]
    async fn a_report_refused_for_now_is_sent_again_after_the_retry_delay() {
        let link = Memory::default();
        link.lease_one(lease(9, 1).0, 30_000);
        link.0
            .lock()
            .unwrap()
            .reports
            .push_back(Err(failing(Kind::Transient)));
        let summary = run_to_end(config(true), &link).await;
        assert_eq!((summary.jobs, summary.accepted), (1, 1));
        let reports = link.calls("report");
        assert_eq!(reports.len(), 2, "{reports:?}");
        let waited = reports[1].at - reports[0].at;
        assert!(
            waited >= Duration::from_millis(50) && waited < Duration::from_millis(110),
            "sent again after {waited:?}"
        );
    }

    /// A retry delay that has passed with no call due does not spin the loop: a worker draining its
    /// one running job after a failed lease call goes on heartbeating it (found 2026-11-29 by a
    /// review: the loop woke at the delay's end, long past, without yielding, so time stood still and
    /// no heartbeat was sent until the job ended).
    #[tokio::test(start_paused = true)]
    async fn a_passed_retry_delay_with_no_call_due_does_not_spin() {
        let link = Memory::default();
        // One N = 18 job (a tenth of a second or more), then a lease call that fails.
        link.lease_one(lease_of(18, 9, 30).0, 3000);
        link.fail_a_lease();
        let mut config = config(false);
        config.threads = 2;
        let shutdown = CancellationToken::new();
        let worker = tokio::spawn(run(
            config,
            link.clone(),
            None,
            Vec::new(),
            shutdown.clone(),
        ));
        // Shut down while the retry delay (50 to 100 ms) runs, once the job has started (real time,
        // for the compute thread): no lease is asked for again, the job runs on.
        tokio::time::sleep(Duration::from_millis(20)).await;
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(link.calls("lease").len(), 2, "{:?}", link.calls("lease"));
        shutdown.cancel();
        let summary = worker.await.unwrap().unwrap();
        assert_eq!(summary.jobs, 1);
        let beats = link
            .calls("heartbeat")
            .into_iter()
            .filter(|c| c.ids == vec![9])
            .count();
        assert!(beats > 0, "no heartbeat for the job while it ran");
    }

    /// A shutdown of an idle worker tells the coordinator that it leaves, and it stops.
    #[tokio::test(start_paused = true)]
    async fn a_shutdown_says_the_worker_leaves() {
        let link = Memory::default();
        let shutdown = CancellationToken::new();
        let worker = tokio::spawn(run(
            config(false),
            link.clone(),
            None,
            Vec::new(),
            shutdown.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!worker.is_finished(), "idle, it waits for work");
        shutdown.cancel();
        worker.await.unwrap().unwrap();
        assert_eq!(link.calls("leave").len(), 1);
    }
}
