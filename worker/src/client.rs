//! The worker's client loop: lease batches sized to the compute threads, compute them on the pool,
//! journal and report results, heartbeat held leases, and ride out coordinator outages with exponential
//! backoff (computing what it holds meanwhile). On shutdown it hands back the jobs it has not started,
//! finishes the running ones and reports them.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use nqueens_common::{JobKey, Plan};
use nqueens_proto as proto;
use nqueens_proto::strategy_from_wire;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tonic::{Code, Status};

use crate::compute::{ComputePool, Device, Done, Task};
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::journal::{Finished, Journal};
use crate::metrics::{Metrics, Window};
use nqueens_proto::{connect, Client, Connection};

/// Most results in one report.
const REPORT_BATCH: usize = 1024;
/// How long the coordinator may hold a lease request when no job is free (long polling).
const LEASE_WAIT_MS: u32 = 5_000;

/// What a worker needs to know.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// How to reach the coordinator.
    pub connection: Connection,
    /// Compute threads.
    pub threads: usize,
    /// A human name, shown in status and logs.
    pub name: String,
    /// Where to journal unacknowledged results (none: results in flight are lost on a crash and
    /// simply recomputed after their leases expire).
    pub journal: Option<PathBuf>,
    /// Only lease jobs of this run.
    pub run: Option<String>,
    /// Stop once there is nothing to lease and nothing in flight.
    pub exit_when_idle: bool,
    /// Faults to inject (tests only; none by default).
    pub faults: Faults,
    /// Interval of the summary log line.
    pub progress_interval: Duration,
    /// Where the worker counts what it does (served by `--metrics-listen`).
    pub metrics: Arc<Metrics>,
    /// GPUs to compute on besides the CPU threads (none by default).
    pub gpu: GpuConfig,
}

/// The GPUs a worker computes on.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    /// The devices, as `--gpu` takes them (`all`, `cuda:0`, `opencl:1,cuda:0`, ...); `None`: CPU only.
    pub devices: Option<String>,
    /// Jobs per launch.
    pub batch: usize,
    /// How long one launch may run before the device is taken for hung: its jobs are then computed on
    /// the CPU and the device is used no more (a hung driver would otherwise hold its leases, heartbeated,
    /// for ever).
    pub timeout: Duration,
    /// The kernel variant and launch shape every device runs; `None`: each device is calibrated.
    pub shape: Option<nqueens_gpu::Shape>,
}

impl Default for GpuConfig {
    /// No GPU.
    fn default() -> GpuConfig {
        GpuConfig {
            devices: None,
            batch: DEFAULT_GPU_BATCH,
            timeout: DEFAULT_GPU_TIMEOUT,
            shape: None,
        }
    }
}

/// Jobs per GPU launch unless told otherwise: the engine splits them into enough seeds to fill the
/// device, so this only needs to cover the launch overhead and the tail of a batch.
pub const DEFAULT_GPU_BATCH: usize = 64;

/// How long one GPU launch may run unless told otherwise (`--gpu-timeout`): a hung device costs an hour,
/// not the run. A launch takes about its batch's CPU time divided by the device's speed-up over a core;
/// jobs larger than that allows need a longer timeout, and the worker warns when a launch has run half
/// of it.
pub const DEFAULT_GPU_TIMEOUT: Duration = Duration::from_secs(3600);

/// Opens the configured GPUs (compiling the kernel for each), on a blocking thread.
async fn open_devices(config: &GpuConfig, metrics: &Arc<Metrics>) -> Result<Vec<Device>> {
    let Some(spec) = config.devices.clone() else {
        return Ok(Vec::new());
    };
    let (batch, timeout, shape) = (config.batch.max(1), config.timeout, config.shape);
    let gpus = tokio::task::spawn_blocking(move || nqueens_gpu::open_shaped(Some(&spec), shape))
        .await
        .map_err(|e| Error::Gpu(nqueens_gpu::GpuError::NoDevice(e.to_string())))??;
    for g in &gpus {
        tracing::info!(device = %g.info(), threads = g.info().threads, batch, "GPU ready");
        metrics.device(&g.info().label());
        let rate = g.calibration.as_ref().map_or(0.0, |c| c.rate());
        metrics.gpu_kernel(&g.info().label(), &g.info().shape.to_string(), rate);
    }
    Ok(gpus
        .into_iter()
        .map(|gpu| Device {
            gpu,
            batch,
            metrics: metrics.clone(),
            timeout,
        })
        .collect())
}

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
    Rpc(Status),
    Stop(Error),
}

impl From<Status> for Failure {
    fn from(s: Status) -> Failure {
        Failure::Rpc(s)
    }
}

/// Whether a failed call is worth retrying later (the coordinator is down, restarting or overloaded).
fn transient(s: &Status) -> bool {
    tls_refusal(s).is_none()
        && matches!(
            s.code(),
            Code::Unavailable
                | Code::Unknown
                | Code::DeadlineExceeded
                | Code::ResourceExhausted
                | Code::Aborted
                | Code::Cancelled
                | Code::Internal
        )
}

pub use nqueens_common::names::MAX_WORKER_NAME_LEN as MAX_NAME_LEN;

/// A worker process's id: its name, process id and start time (`-` and at most 10 digits, `-` and at most
/// 16 hex digits: the 28 characters [`MAX_NAME_LEN`] leaves).
fn worker_id(name: &str, pid: u32, started_ns: u64) -> String {
    format!("{name}-{pid}-{started_ns:x}")
}

/// `s` with the Unix times rustls writes (`verification time 1795000000 (UNIX)`) as UTC dates.
fn utc_times(s: &str) -> String {
    s.replace(" (UNIX)", "")
        .split(' ')
        .map(|word| {
            let digits = word.trim_end_matches([',', ')', ';']);
            match digits.parse::<u64>() {
                Ok(secs) if (9..=11).contains(&digits.len()) => {
                    let t = std::time::UNIX_EPOCH + Duration::from_secs(secs);
                    word.replacen(digits, &humantime::format_rfc3339_seconds(t).to_string(), 1)
                }
                _ => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the coordinator's refusal of a report of one result is about that result (a seal that fails,
/// a job it does not know, a lease that does not cover it, a run cancelled or done; a run it does not
/// know at all is the wrong coordinator, see [`Worker::report`]): the result is dropped, since it would
/// be refused forever, and its job is computed again. Any other refusal is about
/// the request or the server (a worker name, a batch size or a device name it refuses, or a message it
/// cannot decode, each marked as a refusal of the request; a service it does not offer behind a proxy):
/// the worker stops and keeps its journal.
fn refuses_the_result(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition
    ) && !nqueens_proto::refuses_the_request(s)
}

/// Whether the coordinator refuses this worker for good (quarantined, or a wrong token), or its
/// certificate cannot be trusted ([`tls_refusal`]): it stops.
fn refused(s: &Status) -> bool {
    matches!(s.code(), Code::PermissionDenied | Code::Unauthenticated) || tls_refusal(s).is_some()
}

/// The error a worker stops with on `s`, a refusal: a TLS failure says what to fix.
fn refusal(s: &Status) -> Error {
    match tls_refusal(s) {
        Some(why) => Error::Tls(why),
        None => Error::Refused(format!("{:?}: {}", s.code(), s.message())),
    }
}

/// A TLS handshake the worker cannot get past alone: the coordinator's certificate does not chain to
/// `--tls-ca`, is outside its validity dates, or names another host. What failed and what to fix, or
/// `None` (a refused or lost connection is retried as before).
pub(crate) fn tls_refusal(s: &Status) -> Option<String> {
    let mut text = s.message().to_string();
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(s);
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    let at = text.find("invalid peer certificate")?;
    let why = utc_times(text[at..].lines().next().unwrap_or_default());
    let fix = if ["Expired", "expired", "NotValidYet", "not valid yet"]
        .iter()
        .any(|w| why.contains(w))
    {
        "the coordinator's certificate is outside its validity dates: renew it on the coordinator \
         (`nqueens tls init DIR --force`) and check both machines' clocks"
    } else if why.contains("NotValidForName") || why.contains("not valid for name") {
        "--coordinator names a host the certificate was not made for: use one of its names, or add \
         this one on the coordinator (`nqueens tls init DIR --host NAME --force`)"
    } else {
        "the coordinator's certificate does not chain to --tls-ca: give the CA it was made with \
         (DIR/ca.pem of `nqueens tls init DIR` on the coordinator)"
    };
    Some(format!("TLS: {why}; {fix}"))
}

/// The worker's state between two turns of its loop.
struct Worker {
    config: WorkerConfig,
    id: String,
    client: Client,
    pool: ComputePool<proto::JobLease>,
    /// GPUs in the pool.
    gpus: usize,
    journal: Option<Journal>,
    /// Leases held: queued, running, or finished but not yet acknowledged.
    held: HashMap<u64, proto::JobLease>,
    /// Each plan's fingerprint as this build enumerates it, or why it has none, by (N, strategy, depth)
    /// on the wire.
    fingerprints: HashMap<(u32, i32, u32), std::result::Result<u64, String>>,
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

/// Runs a worker until `shutdown` is cancelled (then hands back, finishes and reports), or, with
/// `exit_when_idle`, until there is nothing left to lease.
pub async fn run(config: WorkerConfig, shutdown: CancellationToken) -> Result<Summary> {
    // Checked before anything else: a name the coordinator refuses would fail every request.
    if config.name.len() > MAX_NAME_LEN || !nqueens_common::names::valid_worker_id(&config.name) {
        return Err(Error::BadName(
            config.name.chars().take(MAX_NAME_LEN).collect(),
        ));
    }
    let (tx, mut results) = mpsc::unbounded_channel();
    let journal = config.journal.as_deref().map(Journal::open).transpose()?;
    let unreported = journal.as_ref().map(Journal::pending).unwrap_or_default();
    if !unreported.is_empty() {
        tracing::info!(results = unreported.len(), "re-sending journaled results");
    }
    let devices = open_devices(&config.gpu, &config.metrics).await?;
    config.metrics.gpus.set(devices.len() as i64);
    let gpus = devices.len();
    let now = Instant::now();
    let mut w = Worker {
        id: worker_id(
            &config.name,
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        ),
        client: connect(&config.connection)?,
        pool: ComputePool::new(config.threads, devices, tx),
        gpus,
        journal,
        held: HashMap::new(),
        fingerprints: HashMap::new(),
        shutdown: shutdown.clone(),
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
    };
    w.config.metrics.threads.set(w.config.threads as i64);
    tracing::info!(worker = %w.id, coordinator = %w.config.connection.coordinator, threads = w.config.threads, gpus = w.gpus, kernel = %nqueens_common::kernel::chosen(), cpu = ?crate::cpu::model(), "worker started");
    if w.config.faults.any() {
        tracing::warn!(faults = ?w.config.faults, "FAULT INJECTION IS ON: this worker misbehaves on purpose");
    }
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
        // The work-in-hand gauges, read off the state once a turn rather than kept in step by hand.
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

/// The longest wait between two attempts to reach the coordinator, jitter included.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);

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

impl Worker {
    fn connected(&self) -> bool {
        self.backoff
            .as_ref()
            .is_none_or(|(at, _)| Instant::now() >= *at)
    }

    /// Notes a transient failure and schedules the next attempt.
    fn failed(&mut self, what: &str, status: &Status) {
        let (_, backoff) = self
            .backoff
            .get_or_insert_with(|| (Instant::now(), retry_backoff()));
        let delay = backoff
            .next()
            .unwrap_or(MAX_RETRY_DELAY)
            .min(MAX_RETRY_DELAY);
        tracing::warn!(call = what, code = ?status.code(), error = %status.message(), retry_in_ms = delay.as_millis() as u64, "coordinator unreachable");
        self.backoff.as_mut().expect("just set").0 = Instant::now() + delay;
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
    fn timed<T>(&self, method: &str, since: Instant, r: &std::result::Result<T, Status>) {
        self.config
            .metrics
            .rpc
            .observe(method, since.elapsed(), r.is_ok());
    }

    fn next_wake(&self, draining: bool) -> Instant {
        if let Some((at, _)) = &self.backoff {
            return (*at).min(self.next_summary);
        }
        let mut wake = self.next_heartbeat.min(self.next_summary);
        if !draining && self.pool.load() < self.target() {
            wake = wake.min(self.next_lease);
        }
        wake.max(Instant::now() + Duration::from_millis(1))
    }

    /// Jobs to hold at once: one per CPU thread, and two batches per GPU still computing (one searching,
    /// one queued behind it; a GPU given up holds none: its thread computes as one more CPU thread).
    /// Holding more would hide a lease round trip (about a millisecond, against jobs of seconds) but lets
    /// a job wait in one worker's queue while another worker idles at the end of a run.
    fn target(&self) -> usize {
        let alive = self.pool.gpus();
        let gpu = alive * 2 * self.config.gpu.batch + self.gpus.saturating_sub(alive);
        (self.config.threads + gpu).clamp(1, nqueens_proto::MAX_LEASE_CAPACITY as usize)
    }

    /// Journals a finished job and queues its report.
    fn finished(&mut self, (task, mut result, source): Done<proto::JobLease>) -> Result<()> {
        self.config
            .faults
            .on_finished(self.summary.jobs + 1, &mut result);
        let lease = task.lease;
        if self.unwanted.remove(&lease.lease_id) {
            self.held.remove(&lease.lease_id);
            tracing::debug!(run = %lease.run, job = %lease.job, "job of a cancelled run finished; result dropped");
            return Ok(());
        }
        // Sealed here, as the result leaves the compute pool: from now on any change to it is detected.
        let seal = nqueens_common::checksum::seal(lease.plan_fingerprint, task.job.key(), &result);
        let f = Finished {
            lease: lease.lease_id,
            lease_tag: lease.lease_tag,
            run: lease.run,
            n: lease.n,
            fingerprint: lease.plan_fingerprint,
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
                // Refused for good, or for something no retry changes (see `refuses_the_result`): stop,
                // the journal kept for the next start.
                Err(Failure::Rpc(s)) if !transient(&s) => return Err(refusal(&s)),
                Err(Failure::Rpc(s)) => {
                    self.failed("report", &s);
                    return Ok(());
                }
            }
        }
        if Instant::now() >= self.next_heartbeat {
            match self.heartbeat().await {
                // Quarantined (its leases are taken back), or a wrong token: stop, the journal kept.
                Err(s) if refused(&s) => return Err(refusal(&s)),
                Err(s) => {
                    self.failed("heartbeat", &s);
                    return Ok(());
                }
                Ok(_) => {}
            }
            self.succeeded();
        }
        let want = self.target().saturating_sub(self.pool.load());
        if !draining && want > 0 && Instant::now() >= self.next_lease {
            match self.lease(want).await {
                Ok(()) => self.succeeded(),
                Err(Failure::Stop(e)) => return Err(e),
                Err(Failure::Rpc(s)) if transient(&s) => self.failed("lease", &s),
                Err(Failure::Rpc(s)) => return Err(refusal(&s)),
            }
        }
        Ok(())
    }

    /// Reports a batch; a batch refused for bad input is retried one by one, and a single result the
    /// coordinator refuses for good is logged and dropped (it would be refused forever).
    async fn report(&mut self, batch: &[Finished]) -> std::result::Result<(), Failure> {
        match self.send_report(batch).await {
            Err(Failure::Rpc(s)) if refused(&s) => Err(s.into()),
            Err(Failure::Rpc(s)) if refuses_the_result(&s) && batch.len() > 1 => {
                for one in batch {
                    Box::pin(self.report(std::slice::from_ref(one))).await?;
                }
                Ok(())
            }
            // A run the coordinator does not know at all, or knows with another N or plan (run ids
            // start at 1 in every store), means another coordinator (or one restored from an older
            // backup), not a bad result.
            Err(Failure::Rpc(s)) if refuses_the_result(&s) && self.foreign(&batch[0]).await? => {
                Err(Failure::Rpc(Status::not_found(format!(
                    "the coordinator knows no run {:?} of N = {} and this plan, of which this worker holds a journaled result: it is kept for the coordinator of that run (point the worker at it, or remove the journal to drop the result)",
                    batch[0].run, batch[0].n
                ))))
            }
            Err(Failure::Rpc(s)) if refuses_the_result(&s) => {
                tracing::error!(run = %batch[0].run, job = %batch[0].job, lease = batch[0].lease, code = ?s.code(), error = %s.message(), "coordinator refused a result; dropping it");
                self.acknowledged(batch, 0).map_err(Failure::Stop)
            }
            other => other,
        }
    }

    /// Whether `result` belongs to a run this coordinator does not hold: it knows no run of that id, or
    /// one of another N or another plan (by its fingerprint, where the coordinator sends it).
    async fn foreign(&mut self, result: &Finished) -> std::result::Result<bool, Status> {
        let asked = proto::GetRunRequest {
            run: result.run.clone(),
        };
        match self.client.get_run(asked).await {
            Ok(run) => {
                let run = run.into_inner();
                let other_plan = run.plan_fingerprint != 0
                    && result.fingerprint != 0
                    && run.plan_fingerprint != result.fingerprint;
                Ok(run.n != result.n || other_plan)
            }
            Err(s) if s.code() == Code::NotFound => Ok(true),
            Err(s) => Err(s),
        }
    }

    async fn send_report(&mut self, batch: &[Finished]) -> std::result::Result<(), Failure> {
        let results = batch
            .iter()
            .map(|f| proto::JobResult {
                lease_id: f.lease,
                run: f.run.clone(),
                n: f.n,
                job: f.job.clone(),
                total: f.total,
                unique8: f.unique8,
                nodes: f.nodes,
                seal: Some(f.seal),
                lease_tag: f.lease_tag,
                device: f.device.clone(),
                family: proto::Family::from(f.family).into(),
            })
            .collect();
        if let Some(ms) = self.config.faults.fault_slow_report_ms {
            tracing::warn!(ms, "fault injection: a slow report");
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let since = Instant::now();
        let reply = self
            .client
            .report(proto::ReportRequest {
                worker_id: self.id.clone(),
                worker_name: self.config.name.clone(),
                results,
                // Leases come from Lease calls (see docs/cluster.md on leases riding on reports).
                ..Default::default()
            })
            .await;
        self.timed("Report", since, &reply);
        let reply = reply?.into_inner();
        // One known outcome per result, or nothing is acknowledged: an answer without them (a stub, a
        // proxy, another version) says nothing of what the coordinator holds.
        let outcomes: Vec<proto::Outcome> = reply
            .outcomes
            .iter()
            .filter_map(|&o| proto::Outcome::try_from(o).ok())
            .filter(|&o| o != proto::Outcome::Unspecified)
            .collect();
        if outcomes.len() != batch.len() || reply.outcomes.len() != batch.len() {
            return Err(Failure::Stop(Error::Refused(format!(
                "the coordinator answered a report of {} results with {} outcomes, {} of them known to this worker: nothing is acknowledged, and the journal keeps the results (a coordinator of another version, or something else at its address?)",
                batch.len(),
                reply.outcomes.len(),
                outcomes.len()
            ))));
        }
        let accepted = outcomes
            .iter()
            .filter(|&&o| o == proto::Outcome::Accepted)
            .count() as u64;
        for (f, &outcome) in batch.iter().zip(&outcomes) {
            if outcome == proto::Outcome::Mismatch {
                tracing::error!(run = %f.run, job = %f.job, total = f.total, "coordinator holds a different result for this job");
            }
            tracing::debug!(run = %f.run, job = %f.job, total = f.total, nodes = f.nodes, outcome = outcome.as_str_name(), "result acknowledged");
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
        let mut client = self.client.clone();
        let request = self.heartbeat_request();
        let (first, every) = (self.next_heartbeat, self.heartbeat_every);
        async move {
            tokio::time::sleep_until(first).await;
            loop {
                if let Err(s) = client.heartbeat(request.clone()).await {
                    tracing::debug!(code = ?s.code(), error = %s.message(), "heartbeat beside a report failed");
                }
                tokio::time::sleep(every).await;
            }
        }
    }

    /// A heartbeat for every lease held.
    fn heartbeat_request(&self) -> proto::HeartbeatRequest {
        proto::HeartbeatRequest {
            worker_id: self.id.clone(),
            lease_ids: self.held.keys().copied().collect(),
        }
    }

    async fn heartbeat(&mut self) -> std::result::Result<(), Status> {
        let since = Instant::now();
        let request = self.heartbeat_request();
        let reply = self.client.heartbeat(request).await;
        self.timed("Heartbeat", since, &reply);
        let reply = reply?.into_inner();
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
            .take_unstarted_if(|lease| cancelled.contains(&lease.lease_id))
            .iter()
            .map(|t| t.lease.lease_id)
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
        let reply = self
            .client
            .lease(proto::LeaseRequest {
                worker_id: self.id.clone(),
                worker_name: self.config.name.clone(),
                threads: self.config.threads as u32,
                capacity: capacity as u32,
                run: self.config.run.clone(),
                wait_ms,
                gpus: self
                    .config
                    .metrics
                    .gpus
                    .get()
                    .clamp(0, nqueens_proto::MAX_GPUS as i64) as u32,
            })
            .await;
        // A long-polled lease waits on purpose: only the calls asked to answer at once measure latency.
        if wait_ms == 0 || reply.is_err() {
            self.timed("Lease", since, &reply);
        }
        let reply = reply?.into_inner();
        self.idle = reply.idle && reply.leases.is_empty();
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
            let id = lease.lease_id;
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
            self.held.insert(lease.lease_id, lease.clone());
        }
        let mut unchecked = Vec::new();
        for lease in leases {
            if self.config.faults.drops(&lease.job) {
                tracing::warn!(run = %lease.run, job = %lease.job, "fault injection: dropping a job");
                self.held.remove(&lease.lease_id);
                continue;
            }
            let built = match job_of(&lease) {
                Ok(job) => self.same_plan(&lease).await.map(|()| job),
                Err(e) => Err(PlanCheck::Other(e)),
            };
            match built {
                Ok(job) => self.pool.submit(Task { lease, job }),
                Err(PlanCheck::Unchecked(why)) => {
                    tracing::warn!(run = %lease.run, job = %lease.job, error = %why, "cannot check the plan of a leased job now; handing it back");
                    self.held.remove(&lease.lease_id);
                    unchecked.push(lease.lease_id);
                }
                Err(PlanCheck::Other(e)) => {
                    tracing::error!(run = %lease.run, job = %lease.job, error = %e, "coordinator sent a job this worker cannot build");
                    self.held.remove(&lease.lease_id);
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
            let ids = unbuildable.iter().map(|(l, _)| l.lease_id).collect();
            self.give_back(ids).await;
            return Err(Failure::Stop(Error::Refused(why)));
        }
        Ok(())
    }

    /// Whether this build enumerates the lease's plan as the coordinator does: its fingerprint (the
    /// hash of the plan's job keys, in order) must be the lease's. A coordinator of another version
    /// may cut the plan otherwise, and a key would then name other sub-problems; the seal would not
    /// tell, since it is made with the lease's fingerprint. Computed once per plan (a plan found
    /// different is remembered too), on a blocking thread (about a second at N = 28) while heartbeats
    /// go on, bounded as a run's creation is; for a run an earlier build made past those bounds, within
    /// the job count the run records (GetRun, at most [`MAX_STORED_JOBS`]). A plan that cannot be
    /// checked now (GetRun failed) is [`PlanCheck::Unchecked`]: its lease is handed back, nothing
    /// remembered.
    async fn same_plan(&mut self, lease: &proto::JobLease) -> std::result::Result<(), PlanCheck> {
        let id = (lease.n, lease.strategy, lease.depth);
        let ours = match self.fingerprints.get(&id) {
            Some(known) => known.clone(),
            None => {
                let ours = self.fingerprint_of(lease).await?;
                self.fingerprints.insert(id, ours.clone());
                ours
            }
        };
        match ours {
            Ok(ours) if ours == lease.plan_fingerprint => Ok(()),
            Ok(ours) => Err(PlanCheck::Other(nqueens_common::Error::InvalidSetting(format!(
                "its plan's fingerprint is {:#018x} at the coordinator and {ours:#018x} here: the two \
                 enumerate the plan's jobs differently, and a key would name other sub-problems",
                lease.plan_fingerprint
            )))),
            Err(why) => Err(PlanCheck::Other(nqueens_common::Error::InvalidSetting(why))),
        }
    }

    /// The fingerprint of the lease's plan as this build enumerates it (see [`Self::same_plan`]), or why
    /// it has none; `Err` where it cannot be known now.
    async fn fingerprint_of(
        &mut self,
        lease: &proto::JobLease,
    ) -> std::result::Result<std::result::Result<u64, String>, PlanCheck> {
        let plan = match plan_of(lease) {
            Ok(plan) => plan,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let stopping = || PlanCheck::Unchecked("the worker is stopping".into());
        let within = beside(self.heartbeats_beside(), &self.shutdown, move || {
            plan.fingerprint_within(nqueens_common::partition::MAX_JOBS)
        })
        .await
        .ok_or_else(stopping)?;
        let limit = match within {
            Ok((_, fingerprint)) => return Ok(Ok(fingerprint)),
            Err(limit) => limit,
        };
        // Past the limits of a run's creation: a run an earlier build made, which the coordinator still
        // resumes. Checked as it checks it, within the job count the run records.
        let run = match self
            .client
            .get_run(proto::GetRunRequest {
                run: lease.run.clone(),
            })
            .await
        {
            Ok(run) => run.into_inner(),
            Err(s) => {
                return Err(PlanCheck::Unchecked(format!(
                    "{limit}; the run's job count, to check it within, could not be read: {}",
                    s.message()
                )))
            }
        };
        if (run.run.as_str(), run.n, run.plan_fingerprint)
            != (lease.run.as_str(), lease.n, lease.plan_fingerprint)
        {
            return Ok(Err(format!(
                "{limit}; and the coordinator's status of run {} is not of the lease's plan",
                lease.run
            )));
        }
        let jobs = run.jobs_total.min(MAX_STORED_JOBS);
        let stored = beside(self.heartbeats_beside(), &self.shutdown, move || {
            plan.fingerprint_of_stored(jobs)
        })
        .await
        .ok_or_else(stopping)?;
        Ok(stored
            .map(|(_, fingerprint)| fingerprint)
            .map_err(|e| e.to_string()))
    }

    /// Takes back the unstarted jobs and returns their leases to the coordinator (best effort).
    async fn hand_back(&mut self) {
        let unstarted = self.pool.take_unstarted();
        let lease_ids: Vec<u64> = unstarted.iter().map(|t| t.lease.lease_id).collect();
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

    /// Tells the coordinator that this worker takes no more jobs, handing back `lease_ids` (best effort).
    async fn leave(&mut self, lease_ids: Vec<u64>) {
        self.release(lease_ids, true).await
    }

    /// Hands `lease_ids` back to the coordinator, the worker staying (best effort).
    async fn give_back(&mut self, lease_ids: Vec<u64>) {
        self.release(lease_ids, false).await
    }

    async fn release(&mut self, lease_ids: Vec<u64>, leaving: bool) {
        let req = proto::ReleaseRequest {
            worker_id: self.id.clone(),
            lease_ids,
            leaving,
        };
        let since = Instant::now();
        let reply = self.client.release(req).await;
        self.timed("Release", since, &reply);
        if let Err(s) = reply {
            if leaving {
                tracing::warn!(error = %s.message(), "could not tell the coordinator that this worker leaves; its leases will expire");
            } else {
                tracing::warn!(error = %s.message(), "could not hand leases back; they will expire");
            }
        }
    }
}

/// Runs `work` on a blocking thread while `beating` (heartbeats for the leases held) goes on; `None`
/// once `shutdown` is cancelled (the thread is left to end on its own).
async fn beside<T: Send + 'static>(
    beating: impl std::future::Future<Output = std::convert::Infallible>,
    shutdown: &CancellationToken,
    work: impl FnOnce() -> nqueens_common::Result<T> + Send + 'static,
) -> Option<nqueens_common::Result<T>> {
    tokio::select! {
        done = tokio::task::spawn_blocking(work) => Some(done.unwrap_or_else(|e| {
            Err(nqueens_common::Error::InvalidSetting(format!(
                "the plan's fingerprint could not be computed: {e}"
            )))
        })),
        never = beating => match never {},
        _ = shutdown.cancelled() => None,
    }
}

/// Why a lease's job is not computed ([`Worker::same_plan`]).
enum PlanCheck {
    /// Its plan could not be checked now: the lease is handed back, the worker goes on.
    Unchecked(String),
    /// It cannot be built, or its plan is not this build's: the worker stops.
    Other(nqueens_common::Error),
}

/// Most jobs of a run made past the limits of creation that a worker enumerates to check its plan
/// ([`Worker::same_plan`]): four times the limit of creation, whatever a coordinator's status says.
const MAX_STORED_JOBS: u64 = 4 * nqueens_common::partition::MAX_JOBS;

/// The plan a lease names.
fn plan_of(lease: &proto::JobLease) -> nqueens_common::Result<Plan> {
    let strategy = strategy_from_wire(lease.strategy)?;
    let depth = u8::try_from(lease.depth)
        .map_err(|_| nqueens_common::Error::InvalidSetting(format!("depth {}", lease.depth)))?;
    Plan::with_depth(lease.n, strategy, depth)
}

/// The job a lease names, rebuilt from its plan and key.
fn job_of(lease: &proto::JobLease) -> nqueens_common::Result<nqueens_common::Job> {
    let key: JobKey = lease.job.parse()?;
    plan_of(lease)?.job(&key)
}

#[cfg(test)]
mod fake;

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS failure no retry mends stops the worker with what to fix and dates in UTC; a refused or
    /// lost connection is still retried.
    #[test]
    fn certificate_failures_stop_the_worker_naming_the_flag() {
        let expired = Status::unavailable(
            "transport error: invalid peer certificate: certificate expired: verification time 1795000000 (UNIX), but certificate is not valid after 1609459200 (185540800 seconds ago)",
        );
        let why = tls_refusal(&expired).unwrap();
        assert!(
            why.contains("2026-11-18T") && why.contains("2021-01-01T00:00:00Z"),
            "{why}"
        );
        assert!(
            why.contains("tls init DIR --force") && !why.contains("(UNIX)"),
            "{why}"
        );
        assert!(refused(&expired) && !transient(&expired));
        let name = Status::unavailable(
            "invalid peer certificate: certificate not valid for name \"localhost\"; certificate is only valid for IpAddress(127.0.0.1)",
        );
        assert!(tls_refusal(&name)
            .unwrap()
            .contains("--coordinator names a host"));
        let ca = Status::unavailable("invalid peer certificate: BadSignature");
        assert!(tls_refusal(&ca)
            .unwrap()
            .contains("does not chain to --tls-ca"));
        assert!(matches!(refusal(&ca), Error::Tls(_)));
        let lost = Status::unavailable("tcp connect error: Connection refused");
        assert!(tls_refusal(&lost).is_none() && transient(&lost) && !refused(&lost));
    }
    use std::sync::atomic::Ordering::SeqCst;

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

    #[tokio::test(start_paused = true)]
    async fn issue_16_the_loop_rides_out_a_dead_coordinator_with_capped_retries_and_keeps_its_results(
    ) {
        // Nothing listens there: every call fails at once.
        let address = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", probe.local_addr().unwrap())
        };
        let dir = tempfile::tempdir().unwrap();
        // One finished, unacknowledged result from an earlier start.
        let (journal, finished, config) = journaled(dir.path(), address, "w");
        let metrics = config.metrics.clone();
        let shutdown = CancellationToken::new();
        let worker = tokio::spawn(run(config, shutdown.clone()));
        // Two minutes of (paused, auto-advancing) time without a coordinator.
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(!worker.is_finished(), "a worker waits for its coordinator");
        // The journaled result is re-sent first: every attempt is a Report that fails.
        let tried = metrics.rpc.errors("Report");
        // 50 ms doubling to a 5-10 s cap: about two dozen attempts in two minutes (22 here), never a
        // busy loop, never silence. The lower bound leaves room for a connect timeout (5 s, in paused
        // time) taken by every attempt.
        assert!((4..=60).contains(&tried), "{tried} attempts in 120 s");
        shutdown.cancel();
        let summary = tokio::time::timeout(Duration::from_secs(60), worker)
            .await
            .expect("it stops on shutdown while disconnected")
            .unwrap()
            .unwrap();
        assert_eq!(summary, Summary::default());
        // The unacknowledged result is still journaled for the next start.
        assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
    }

    /// A journal holding one finished, unacknowledged result, and a worker configuration around it.
    fn journaled(
        dir: &std::path::Path,
        address: String,
        name: &str,
    ) -> (PathBuf, Finished, WorkerConfig) {
        let journal = dir.join("w.journal");
        let plan = Plan::new(8, nqueens_common::Strategy::D4).unwrap();
        let key = plan.jobs().next().unwrap();
        let result = plan.job(&key).unwrap().run();
        let fingerprint = plan.fingerprint().1;
        let finished = Finished {
            lease: 7,
            lease_tag: 1,
            run: "1".into(),
            n: 8,
            fingerprint,
            job: key.to_string(),
            total: result.total,
            unique8: result.unique8,
            nodes: result.nodes,
            seal: nqueens_common::checksum::seal(fingerprint, &key, &result),
            device: None,
            family: None,
        };
        Journal::open(&journal)
            .unwrap()
            .record(std::slice::from_ref(&finished))
            .unwrap();
        let config = WorkerConfig {
            connection: Connection::new(address),
            threads: 1,
            name: name.into(),
            journal: Some(journal.clone()),
            run: None,
            exit_when_idle: false,
            faults: Faults::default(),
            progress_interval: Duration::from_secs(30),
            metrics: Arc::new(Metrics::default()),
            gpu: GpuConfig::default(),
        };
        (journal, finished, config)
    }

    /// A server that answers every call UNIMPLEMENTED (a wrong address behind a proxy, another gRPC
    /// service) refuses the worker's requests, not its results: the worker stops, naming the code, and
    /// its journaled result stays for the next start. (It used to retry the batch result by result and
    /// drop each one as refused.)
    #[tokio::test]
    async fn a_server_without_the_service_stops_the_worker_and_its_journal_keeps_its_results() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        // Only the health service: every call of the coordinator's service is UNIMPLEMENTED.
        let (_, health) = tonic_health::server::health_reporter();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let dir = tempfile::tempdir().unwrap();
        let (journal, finished, config) = journaled(dir.path(), address, "w");
        let stopped = tokio::time::timeout(
            Duration::from_secs(30),
            run(config, CancellationToken::new()),
        )
        .await
        .expect("the worker stops");
        match stopped {
            Err(Error::Refused(why)) => assert!(why.contains("Unimplemented"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
        server.abort();
    }

    #[test]
    fn a_refusal_of_the_request_is_not_one_of_the_result() {
        // A result refused (its seal, its lease, its job): dropped, computed again.
        assert!(refuses_the_result(&Status::invalid_argument("seal")));
        assert!(refuses_the_result(&Status::failed_precondition(
            "not leased"
        )));
        // The request refused whole (a device name, a batch size, an undecodable message): before, the
        // worker took it for its results', dropped them one by one, and computed them again for ever
        // where the refusal was its own (found by a review, 2026-11-24, a later session).
        let whole = nqueens_proto::refusing_the_request(Status::invalid_argument("device"));
        assert!(!refuses_the_result(&whole));
        assert!(
            !transient(&whole) && !refused(&whole),
            "it stops the worker"
        );
    }

    /// A name the coordinator would refuse (empty, with a control character, too long for the id built
    /// from it) stops the worker at once, before it opens its journal or calls anyone.
    #[tokio::test]
    async fn a_name_the_coordinator_would_refuse_stops_the_worker_before_anything() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["", "a\nb", &"x".repeat(MAX_NAME_LEN + 1)] {
            let (journal, finished, config) =
                journaled(dir.path(), "http://127.0.0.1:9".into(), name);
            let stopped = tokio::time::timeout(
                Duration::from_secs(30),
                run(config, CancellationToken::new()),
            )
            .await
            .expect("the worker stops at once");
            assert!(
                matches!(stopped, Err(Error::BadName(_))),
                "{name:?}: {stopped:?}"
            );
            assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
        }
        let longest = "x".repeat(MAX_NAME_LEN);
        let id = worker_id(&longest, u32::MAX, u64::MAX);
        assert!(
            nqueens_common::names::valid_worker_id(&id),
            "the longest name makes a valid id"
        );
    }

    /// Runs a worker until it stops on its own (at most ten seconds).
    async fn stops(config: WorkerConfig) -> Result<Summary> {
        tokio::time::timeout(
            Duration::from_secs(10),
            run(config, CancellationToken::new()),
        )
        .await
        .expect("the worker stops")
    }

    /// An OK answer to a report without one known outcome per result (a stub, a proxy, another
    /// version) acknowledges nothing: the worker stops, its journal kept (found by a review, 2026-11-24,
    /// a later session: the whole batch was dropped from the journal).
    #[tokio::test]
    async fn an_answer_without_an_outcome_per_result_acknowledges_nothing() {
        for outcomes in [vec![], vec![0], vec![99]] {
            let fake = fake::Fake {
                report: Box::new(move |_| {
                    Ok(proto::ReportResponse {
                        outcomes: outcomes.clone(),
                        lease: None,
                    })
                }),
                ..Default::default()
            };
            let (address, server) = fake.serve().await;
            let dir = tempfile::tempdir().unwrap();
            let (journal, finished, config) = journaled(dir.path(), address, "w");
            let stopped = stops(config).await;
            match stopped {
                Err(Error::Refused(why)) => assert!(why.contains("outcome"), "{why}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
            server.abort();
        }
    }

    /// A journal that cannot be written when results are acknowledged stops the worker, naming the
    /// journal (found by a review, 2026-11-24, a later session: the failure was taken for an
    /// unreachable coordinator, and the worker sent the batch again every few seconds for as long as
    /// the disk stayed full, leasing nothing and never stopping).
    #[tokio::test]
    async fn a_journal_that_cannot_be_written_stops_the_worker() {
        let dir = tempfile::tempdir().unwrap();
        let swap = dir.path().join("w.journal");
        let fake = fake::Fake {
            report: Box::new(move |r| {
                // The journal's file gives way to a directory: its rewrite on acknowledgement fails.
                let _ = std::fs::remove_file(&swap);
                let _ = std::fs::create_dir(&swap);
                let _ = std::fs::write(swap.join("x"), b"x");
                Ok(proto::ReportResponse {
                    outcomes: vec![proto::Outcome::Accepted as i32; r.results.len()],
                    lease: None,
                })
            }),
            ..Default::default()
        };
        let reports = fake.reports.clone();
        let (address, server) = fake.serve().await;
        let (_, _, config) = journaled(dir.path(), address, "w");
        let stopped = stops(config).await;
        assert!(matches!(stopped, Err(Error::Journal(..))), "{stopped:?}");
        assert_eq!(reports.load(SeqCst), 1, "not sent again and again");
        server.abort();
    }

    /// Leases of jobs this worker cannot build (a strategy of a newer coordinator) are handed back, and
    /// the worker stops, saying why (found by a review, 2026-11-24, a later session: they were dropped
    /// unreleased, and the worker asked for more at once, about a thousand calls a second, each taking
    /// jobs of the run from every other worker until their leases expired).
    #[tokio::test]
    async fn leases_of_jobs_this_worker_cannot_build_are_handed_back_and_stop_it() {
        let fake = fake::Fake {
            lease: Box::new(|_| {
                Ok(proto::LeaseResponse {
                    leases: vec![proto::JobLease {
                        lease_id: 9,
                        run: "1".into(),
                        n: 8,
                        strategy: 99,
                        depth: 2,
                        job: "0".into(),
                        plan_fingerprint: 1,
                        lease_tag: 1,
                    }],
                    lease_timeout_ms: 60_000,
                    retry_after_ms: 0,
                    idle: false,
                })
            }),
            ..Default::default()
        };
        let (leases, released) = (fake.leases.clone(), fake.released.clone());
        let (address, server) = fake.serve().await;
        let dir = tempfile::tempdir().unwrap();
        let (_, _, config) = journaled(dir.path(), address, "w");
        let stopped = stops(config).await;
        match stopped {
            Err(Error::Refused(why)) => assert!(why.contains("cannot build"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(leases.load(SeqCst), 1);
        assert_eq!(released.load(SeqCst), 1, "handed back");
        server.abort();
    }
    /// A lease whose plan fingerprint is not this build's enumeration of its plan (a coordinator of
    /// another version, whose job keys may mean other sub-problems) is handed back unstarted and the
    /// worker stops, saying so; with the right fingerprint the same job is computed and reported (found
    /// by a review, 2026-11-25: the fingerprint was only copied into the seal, never compared, and a job
    /// of another enumeration was counted under its key).
    #[tokio::test]
    async fn a_lease_of_another_enumeration_of_its_plan_is_handed_back_and_stops_the_worker() {
        let plan = Plan::new(8, nqueens_common::Strategy::D4).unwrap();
        let key = plan.jobs().nth(1).unwrap();
        let right = plan.fingerprint().1;
        for (fingerprint, refused) in [(right ^ 1, true), (right, false)] {
            let job = key.to_string();
            let reported = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
            let fake = fake::Fake {
                lease: fake::lease_once(move |_| {
                    vec![proto::JobLease {
                        lease_id: 9,
                        run: "1".into(),
                        n: 8,
                        strategy: proto::Strategy::D4 as i32,
                        depth: u32::from(plan.depth()),
                        job: job.clone(),
                        plan_fingerprint: fingerprint,
                        lease_tag: 1,
                    }]
                }),
                report: fake::accept_noting(reported.clone()),
                ..Default::default()
            };
            let released = fake.released.clone();
            let (address, server) = fake.serve().await;
            let dir = tempfile::tempdir().unwrap();
            let (_, _, mut config) = journaled(dir.path(), address, "w");
            config.exit_when_idle = true;
            let stopped = stops(config).await;
            let reported = reported.lock().unwrap().clone();
            if refused {
                match stopped {
                    Err(Error::Refused(why)) => assert!(why.contains("fingerprint"), "{why}"),
                    other => panic!("{other:?}"),
                }
                assert_eq!(released.load(SeqCst), 1, "handed back");
                assert!(!reported.contains(&9), "{reported:?}");
            } else {
                stopped.unwrap();
                assert!(reported.contains(&9), "{reported:?}");
            }
            server.abort();
        }
    }
    /// A lease reply is checked before anything is computed: a lease id given twice (in the reply, or
    /// already held) is computed once, the second ignored (never handed back, which would release the
    /// first); leases beyond the capacity asked are handed back at once (found by a review, 2026-11-25:
    /// both were taken as given, a duplicate id overwrote the first in the worker's books, and a reply
    /// of many thousands took every one).
    #[tokio::test]
    async fn a_lease_reply_with_a_repeated_id_or_more_than_asked_is_trimmed() {
        let plan = Plan::new(8, nqueens_common::Strategy::D4).unwrap();
        let fingerprint = plan.fingerprint().1;
        let keys: Vec<String> = plan.jobs().map(|k| k.to_string()).collect();
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let asked_in = asked.clone();
        let reported = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
        let lease = move |id: u64, k: usize| proto::JobLease {
            lease_id: id,
            run: "1".into(),
            n: 8,
            strategy: proto::Strategy::D4 as i32,
            depth: u32::from(plan.depth()),
            job: keys[k % keys.len()].clone(),
            plan_fingerprint: fingerprint,
            lease_tag: id,
        };
        let fake = fake::Fake {
            lease: fake::lease_once(move |r: &proto::LeaseRequest| {
                let capacity = r.capacity as usize;
                asked_in.store(capacity, SeqCst);
                let mut l = vec![lease(1, 0), lease(1, 1)];
                l.extend((0..capacity + 5).map(|i| lease(100 + i as u64, i + 2)));
                l
            }),
            report: fake::accept_noting(reported.clone()),
            ..Default::default()
        };
        let released = fake.released.clone();
        let (address, server) = fake.serve().await;
        let dir = tempfile::tempdir().unwrap();
        let (_, journaled_result, mut config) = journaled(dir.path(), address, "w");
        config.exit_when_idle = true;
        stops(config).await.unwrap();
        let capacity = asked.load(SeqCst);
        assert!(capacity >= 1);
        let mut reported = reported.lock().unwrap().clone();
        reported.retain(|id| *id != journaled_result.lease);
        reported.sort();
        let mut expected: Vec<u64> = vec![1];
        expected.extend((0..capacity as u64 - 1).map(|i| 100 + i));
        assert_eq!(reported, expected, "capacity {capacity}");
        assert_eq!(
            released.load(SeqCst),
            6,
            "the leases beyond the capacity asked"
        );
        server.abort();
    }
    /// A lease of a run an earlier build created past today's limits of run creation (a split too deep
    /// to create now, which the coordinator still resumes): the worker checks its plan within the job
    /// count the run records (GetRun), computes it and reports it, rather than refusing it as a plan
    /// it cannot build (found by a review of the plan check, 2026-11-25: every worker leased such a job
    /// stopped, and the run could never finish).
    #[tokio::test]
    async fn a_lease_of_a_run_deeper_than_creation_allows_is_checked_and_computed() {
        let deep = Plan::with_depth(14, nqueens_common::Strategy::Mirror, 14).unwrap();
        assert!(deep
            .fingerprint_within(nqueens_common::partition::MAX_JOBS)
            .is_err());
        let (jobs, fingerprint) = deep.fingerprint();
        let key = deep.jobs().next().unwrap().to_string();
        // The run's recorded job count: the plan's (computed), one short (refused, the worker stops),
        // or unreadable now (handed back, the worker goes on).
        for recorded in [Some(jobs), Some(jobs - 1), None] {
            let reported = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
            let job = key.clone();
            let fake = fake::Fake {
                lease: fake::lease_once(move |_| {
                    vec![proto::JobLease {
                        lease_id: 9,
                        run: "3".into(),
                        n: 14,
                        strategy: proto::Strategy::Mirror as i32,
                        depth: 14,
                        job: job.clone(),
                        plan_fingerprint: fingerprint,
                        lease_tag: 1,
                    }]
                }),
                get_run: Box::new(move |r: &proto::GetRunRequest| {
                    assert_eq!(r.run, "3");
                    let jobs_total = recorded.ok_or_else(|| Status::unavailable("restarting"))?;
                    Ok(proto::RunStatus {
                        run: "3".into(),
                        n: 14,
                        jobs_total,
                        plan_fingerprint: fingerprint,
                        ..Default::default()
                    })
                }),
                report: fake::accept_noting(reported.clone()),
                ..Default::default()
            };
            let released = fake.released.clone();
            let (address, server) = fake.serve().await;
            let dir = tempfile::tempdir().unwrap();
            let (_, _, mut config) = journaled(dir.path(), address, "w");
            config.exit_when_idle = true;
            let stopped = stops(config).await;
            let reported = reported.lock().unwrap().clone();
            match recorded {
                Some(r) if r == jobs => {
                    stopped.unwrap();
                    assert!(reported.contains(&9), "{reported:?}");
                }
                // A run recording fewer jobs than its plan has: not the plan this worker enumerates.
                Some(_) => {
                    assert!(matches!(stopped, Err(Error::Refused(_))), "{stopped:?}");
                    assert!(!reported.contains(&9), "{reported:?}");
                }
                None => {
                    stopped.unwrap();
                    assert!(!reported.contains(&9), "{reported:?}");
                    assert_eq!(released.load(SeqCst), 1, "handed back");
                }
            }
            server.abort();
        }
    }
}
