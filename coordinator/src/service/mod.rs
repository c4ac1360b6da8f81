//! The service layer: the coordinator's logic, independent of the wire. Runs live in memory ([`live`]),
//! the lease table ([`lease_table`]) and the lease policy ([`lease`]), reports, spot checks, the steer
//! of second results to another kernel family ([`steer`]), workers and strikes, control, each run's
//! history and progress, and the metrics. The gRPC layer and the embedded local mode both call this,
//! so they share one behaviour; it writes through the durable layer's committer.

mod certify;
mod changes;
mod contacts;
mod control;
mod grant;
mod hand_backs;
pub mod history;
mod lease;
pub(crate) mod lease_table;
pub(crate) mod live;
pub mod metrics;
pub mod progress;
mod quarantines;
mod report;
mod spot;
mod steer;
mod strikes;
#[cfg(test)]
pub(crate) mod tests;
mod view;
mod waiting;
mod workers;

pub use control::{DEFAULT_JOB_LIMIT, MAX_JOB_LIMIT};
pub use grant::{Grant, Granted};
pub(crate) use lease::check_worker;
pub use lease::{scoped_id, Ask};
pub use report::Report;
pub use spot::{
    check_max_error, default_max_error, max_error_at, rate as spot_check_rate, spot_rate_for,
    MIN_RATE as MIN_SPOT_RATE, NEW_RATE as NEW_SPOT_RATE,
};
pub use strikes::Expiries;
pub use view::{RunView, WorkerState, WorkerView};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nqueens_common::{Plan, Strategy};
use tokio::sync::watch;

use self::strikes::Strikes;
use crate::durable::committer::{Committer, Write};
use crate::durable::ledger::LEDGER_FILE;
use crate::durable::reconcile::reconcile;
use crate::durable::storage_health::StorageHealth;
use crate::durable::store::{JobState, Phase, Store};
use crate::error::{Error, Result};
use crate::service::lease_table::Leases;
use crate::service::live::LiveRun;
use crate::service::metrics::Metrics;
pub use quarantines::DISTRUSTED;
use workers::Workers;

/// The fraction of a run's jobs computed twice when the request does not say.
pub const DEFAULT_VERIFY_FRACTION: f64 = 0.01;

/// Coordinator settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long a lease lives without a heartbeat.
    pub lease_timeout: Duration,
    /// Expired leases after which a job fails (a job that kills or stalls every worker that takes it).
    pub max_attempts: u32,
    /// Trust the ledger's intact lines at startup although it has damaged ones (`serve --repair`).
    pub repair: bool,
    /// Most report batches on their way to the committer at once; more wait for a place (backpressure
    /// in front of the commit thread, however many workers report at once).
    pub max_in_flight: usize,
    /// Quarantined workers to let lease again (`serve --release-quarantine`), by name: each must be
    /// quarantined, else the open is refused.
    pub release: Vec<String>,
    /// Workers to quarantine at the open (`serve --quarantine`), by name: a credential known stolen or
    /// a machine known faulty. Each is quarantined as a worker shown wrong is, its unconfirmed results
    /// taken back; only `--release-quarantine` lifts it.
    pub distrust: Vec<String>,
    /// Failed jobs to put back to pending at the open, once the store is reconciled and mended.
    pub retry_failed: RetryFailed,
    /// Most open runs (running, stalled or paused) at once; a creation past it is refused
    /// ([`MAX_OPEN_RUNS`] by default). Runs already stored are all served, however many.
    pub max_open_runs: usize,
    /// How long a verified job waiting for its second result is kept from workers of its first
    /// result's kernel family while a live worker of another family serves ([`FAMILY_WAIT`] by
    /// default; zero: never).
    pub family_wait: Duration,
    /// Longest a lease lives, however many heartbeats it gets ([`MAX_LEASE_HOLD`] by default): past
    /// it, the lease expires as a silent one does (a strike, the job leased again), and its worker's
    /// late result is still taken.
    pub max_lease_hold: Duration,
}

/// [`Config::max_lease_hold`] by default: a day, hundreds of times what a job of a plan's default
/// depth takes on one core at N = 28 (BENCHMARKS.md), so that only a lease held on purpose meets it.
pub const MAX_LEASE_HOLD: Duration = Duration::from_secs(86_400);

/// [`Config::family_wait`] by default: a few lease timeouts, so that a worker of another family, busy
/// with its own jobs, meets the waiting job at its next lease (they come first, from the retry
/// queue), and a fleet whose other family is slow or gone delays checks a little, never for ever.
pub const FAMILY_WAIT: Duration = Duration::from_secs(300);

/// Most open runs (running, stalled or paused) a coordinator creates ([`Config::max_open_runs`]): each
/// is scanned by every Lease call, and far more than a cluster can compute at once.
pub const MAX_OPEN_RUNS: usize = 1024;

/// Which failed jobs an open puts back to pending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RetryFailed {
    #[default]
    None,
    /// Every run's (`serve --retry-failed`).
    All,
    /// Those of the runs of this plan that verify nothing and are not cancelled (a local count's, which
    /// has no operator to look into a failed job).
    Plan(nqueens_common::Plan),
}

/// What a caller asks of a new run beside its plan ([`Coordinator::create_run_as`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NewRun {
    /// The fraction of jobs computed twice; none: [`DEFAULT_VERIFY_FRACTION`].
    pub verify_fraction: Option<f64>,
    pub priority: i32,
    /// Return the newest run of the same plan instead, if one verifies as much as asked.
    pub reuse: bool,
    /// Record mode.
    pub record: bool,
    /// The bound on undetected wrong results per lying credential ([`check_max_error`]); none: the
    /// default ([`default_max_error`]).
    pub max_error: Option<f64>,
}

/// The plan of N = `n` under `strategy`, at `depth` or the strategy's default depth.
pub fn plan_of(n: u32, strategy: Strategy, depth: Option<u32>) -> Result<Plan> {
    Ok(match depth {
        None => Plan::new(n, strategy)?,
        Some(d) => {
            let d = u8::try_from(d)
                .map_err(|_| Error::Invalid(format!("depth {d} is out of range")))?;
            Plan::with_depth(n, strategy, d)?
        }
    })
}

/// Plans enumerated at once for CreateRun (seconds of a core each at N = 28); more callers wait.
pub const MAX_PLANNING: usize = 2;

/// Report batches validated at once, each on a thread of the blocking pool (512 threads at most).
pub const VALIDATING: usize = 16;

/// Default of [`Config::max_in_flight`].
pub const MAX_IN_FLIGHT: usize = 512;

impl Default for Config {
    fn default() -> Config {
        Config {
            lease_timeout: Duration::from_secs(60),
            max_attempts: 5,
            repair: false,
            max_in_flight: MAX_IN_FLIGHT,
            release: Vec::new(),
            distrust: Vec::new(),
            retry_failed: RetryFailed::None,
            max_open_runs: MAX_OPEN_RUNS,
            family_wait: FAMILY_WAIT,
            max_lease_hold: MAX_LEASE_HOLD,
        }
    }
}

/// The coordinator: cheap to clone, shared by every connection.
#[derive(Clone)]
pub struct Coordinator {
    shared: Arc<Shared>,
}

struct Shared {
    store: Store,
    committer: Committer,
    state: Mutex<State>,
    /// Bumped after every change a status watcher may want to see.
    changes: watch::Sender<u64>,
    /// Bumped after every change that may let a waiting lease call lease a job, or tell it idle: a
    /// job back in a queue, a run created, resumed, finished or reopened, a quarantine or a lift. Not
    /// after a result that only counts its job: at the tail of a run, where thousands of calls wait,
    /// each would look at the queues again at every count.
    lease_news: watch::Sender<u64>,
    metrics: Arc<Metrics>,
    /// Whether the store takes writes.
    health: Arc<StorageHealth>,
    /// Set when the coordinator begins to shut down: long enumerations end early.
    stopping: Arc<std::sync::atomic::AtomicBool>,
    /// Places for report batches between validation and the committer's answer.
    in_flight: Arc<tokio::sync::Semaphore>,
    /// Batches validated at once on the blocking pool ([`VALIDATING`]): a flood of reports takes a
    /// few of its threads, never all (the store's probe, credential calls and certificates use it).
    validating: Arc<tokio::sync::Semaphore>,
    /// Places for plan enumerations ([`MAX_PLANNING`]), each held until its thread ends.
    planning: Arc<tokio::sync::Semaphore>,
    /// Held by an operator's control of a run from its store write to its application in memory.
    control: tokio::sync::Mutex<()>,
    /// Held by a CreateRun with `reuse` from its look for a run of the plan to the new run in memory
    /// (kept by the write's task if the caller goes away): two such calls, or a retry after a client's
    /// timeout, never both create a run of one plan.
    reusing: Arc<tokio::sync::Mutex<()>>,
    /// Held from the count of open runs to the new run's place in memory: creations at once never pass
    /// [`Config::max_open_runs`] together.
    creating: tokio::sync::Mutex<()>,
    /// [`Config::max_open_runs`].
    max_open_runs: usize,
    /// Places for walks of the job records ([`control::MAX_LISTINGS`]).
    listing: Arc<tokio::sync::Semaphore>,
    /// The worker credentials this coordinator issues and accepts.
    credentials: crate::durable::credentials::Credentials,
    /// Lease calls waiting for a job, by identity.
    waiting: waiting::Waiting,
}

struct State {
    runs: BTreeMap<u64, LiveRun>,
    leases: Leases,
    workers: Workers,
    /// The lines each identity's workers joining, leaving and returning logged lately.
    contacts: contacts::ContactLog,
    /// Quarantined workers by name, with the reason (as stored).
    quarantined: HashMap<String, String>,
    /// The commit that last changed each worker's entry in `quarantined` (see
    /// [`changes::apply_quarantines`]).
    quarantine_seq: HashMap<String, u64>,
    /// Workers charged for leases that expired.
    strikes: Strikes,
    /// Leases each identity handed back lately ([`hand_backs`]).
    hand_backs: hand_backs::HandBacks,
    /// Results per worker name (identity, where it holds a credential): counted in the store, or
    /// proving work in this incarnation (counted, held for a check, disputing, a spot check answered:
    /// a credential cannot tell these apart, so neither may its room): a credential holds more leases
    /// the more it has.
    counted: HashMap<String, u64>,
    /// Worker names with a result counted (in the store, or accepted in this incarnation): only the
    /// expired leases of one of these can make a job fail (a result held for a check, which costs a
    /// liar nothing, does not qualify).
    accepted: HashSet<String>,
    /// Identities with a result a second identity confirmed (in the store, or in this incarnation): a
    /// worker credential decides a dispute only once it has one, or has passed a spot check.
    confirmed: HashSet<String>,
    /// Confirmed jobs leased again to worker credentials, unseen, as checks.
    spot: spot::SpotChecks,
    max_attempts: u32,
    /// [`Config::family_wait`].
    family_wait: Duration,
    /// The secret of this incarnation's draws of who may give a verified job its second result
    /// ([`steer::Steer::admits`]).
    draw_secret: [u8; 16],
}

/// A random key for the draws of `what` (the spot checks, who confirms a result).
fn random_key(what: &str) -> Result<[u8; 16]> {
    let mut key = [0u8; 16];
    getrandom::fill(&mut key).map_err(|e| {
        Error::io(
            format!("no randomness for {what}"),
            std::io::Error::other(e),
        )
    })?;
    Ok(key)
}

/// Sets its flag when dropped (a caller gone: the work it started ends).
#[derive(Default)]
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Coordinator {
    /// Audits the store, checks that this build plans every unfinished run the way it was planned, and
    /// loads the runs. A store that fails either check is refused.
    pub fn open(store: Store, config: Config) -> Result<Coordinator> {
        let started = std::time::Instant::now();
        let (mut ledger, mut audited_already) = match store.dir() {
            Some(dir) => {
                let (ledger, _, audit) = reconcile(&store, &dir.join(LEDGER_FILE), config.repair)?;
                (Some(ledger), audit)
            }
            None => (None, None),
        };
        // The quarantines: revocations left incomplete, the operator's releases and quarantines, and
        // the rule, before anything is audited or served.
        if quarantines::settle_at_start(&store, ledger.as_mut(), &config)? {
            audited_already = None;
        }
        let retried = match config.retry_failed {
            RetryFailed::None => 0,
            RetryFailed::All => store.retry_failed(|_| true)?,
            RetryFailed::Plan(plan) => store.retry_failed(|meta| {
                !meta.is_cancelled()
                    && meta.verify_fraction <= 0.0
                    && meta.plan().is_ok_and(|p| p == plan)
            })?,
        };
        if retried > 0 {
            tracing::info!(jobs = retried, "failed jobs put back to pending");
        }
        let reconciled = started.elapsed();
        // The quick reconciliation audits on its own pass over the results; otherwise audit now.
        let audit = match audited_already {
            Some(audit) => audit,
            None => store.audit()?,
        };
        let audited = started.elapsed();
        let mut runs = BTreeMap::new();
        let mut earlier_results: HashMap<String, u64> = HashMap::new();
        let mut counted: HashMap<String, u64> = HashMap::new();
        let mut confirmed = HashSet::new();
        // A worker the rule lifted from a quarantine has no record from its results before: it earns
        // one again by passing a spot check (passes are saved).
        let lifted: HashSet<String> = store.lifted()?.into_iter().map(|q| q.worker).collect();
        for (meta, line) in store.runs()?.into_iter().zip(audit) {
            for (worker, n) in &line.by_worker {
                *earlier_results.entry(worker.clone()).or_insert(0) += n;
            }
            for (name, n) in line.names {
                *counted.entry(name).or_insert(0) += n;
            }
            confirmed.extend(
                line.confirmed_names
                    .into_iter()
                    .filter(|n| !lifted.contains(n)),
            );
            let (jobs_confirmed, jobs_two_families) = (line.confirmed, line.two_families);
            // A cancelled run is never resumed: its plan need not match this build's.
            if !meta.is_done() && !meta.is_cancelled() {
                // Bounded by the job count it records, not by the limits of run creation, which runs
                // of earlier builds may pass.
                meta.check_job_list().map_err(|why| {
                    Error::Corrupt(format!(
                        "run {}: {why}; the store is damaged, or the run was made by another build (resume it with the build that created it)",
                        meta.id
                    ))
                })?;
            }
            let states = store.job_states(meta.id)?;
            let mut live = LiveRun::new(meta, line.tally, states)?;
            live.jobs_confirmed = jobs_confirmed;
            live.jobs_two_families = jobs_two_families;
            tracing::info!(
                run = live.meta.id,
                n = live.meta.n,
                strategy = %live.meta.strategy,
                jobs_done = line.tally.jobs,
                jobs_total = live.meta.jobs_total,
                jobs_failed = live.jobs_in(JobState::Failed),
                total = %line.tally.total,
                state = %live.phase(),
                "run loaded, audit passed"
            );
            runs.insert(live.meta.id, live);
        }
        let quarantined: HashMap<String, String> = store
            .quarantined()?
            .into_iter()
            .map(|q| (q.worker.clone(), q.shown_reason()))
            .collect();
        for (worker, reason) in &quarantined {
            tracing::warn!(worker = %worker, reason = %reason, "worker quarantined (from the store)");
        }
        tracing::info!(
            reconcile_ms = reconciled.as_millis() as u64,
            audit_ms = (audited - reconciled).as_millis() as u64,
            load_ms = (started.elapsed() - audited).as_millis() as u64,
            "store opened"
        );
        let mut spot = spot::SpotChecks::new(random_key("the spot checks")?);
        match store.spot_passes() {
            Ok(passed) => spot.restore(passed),
            // A cost, never a count: every identity is checked at the new-identity rate again.
            Err(e) => {
                tracing::warn!(error = %e, "the saved spot-check passes cannot be read: every identity starts over at the new-identity rate")
            }
        }
        let credentials = crate::durable::credentials::Credentials::open(store.dir())?;
        // (A cost, never a count: without them, results under earlier leases skip the speed check.)
        let epoch_starts = store.epoch_starts().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "when earlier incarnations began cannot be read: results under their leases skip the speed check");
            Default::default()
        });
        let health = Arc::new(StorageHealth::default());
        let committer = Committer::start(store.clone(), ledger, health.clone())
            .map_err(|e| Error::Durability(format!("cannot start the commit thread: {e}")))?;
        Ok(Coordinator {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    runs,
                    leases: Leases::new(store.epoch(), store.lease_secret(), config.lease_timeout)
                        .holding_at_most(config.max_lease_hold)
                        .with_epoch_starts(&epoch_starts, crate::durable::store::now_unix()),
                    workers: Workers::with_earlier_results(earlier_results),
                    contacts: contacts::ContactLog::default(),
                    quarantined,
                    quarantine_seq: HashMap::new(),
                    strikes: Strikes::default(),
                    hand_backs: hand_backs::HandBacks::default(),
                    accepted: counted.keys().cloned().collect(),
                    counted,
                    confirmed,
                    spot,
                    max_attempts: config.max_attempts.max(1),
                    family_wait: config.family_wait,
                    draw_secret: random_key("the draws of who confirms a result")?,
                }),
                store,
                committer,
                changes: watch::channel(0).0,
                lease_news: watch::channel(0).0,
                metrics: Arc::default(),
                health,
                stopping: Arc::default(),
                in_flight: Arc::new(tokio::sync::Semaphore::new(config.max_in_flight.max(1))),
                validating: Arc::new(tokio::sync::Semaphore::new(VALIDATING)),
                planning: Arc::new(tokio::sync::Semaphore::new(MAX_PLANNING)),
                control: tokio::sync::Mutex::new(()),
                reusing: Arc::default(),
                creating: tokio::sync::Mutex::new(()),
                max_open_runs: config.max_open_runs,
                listing: Arc::new(tokio::sync::Semaphore::new(control::MAX_LISTINGS)),
                credentials,
                waiting: waiting::Waiting::default(),
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the store inconsistent (the store is only changed
        // by transactions), so a poisoned lock is still usable.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A run's progress over time (this incarnation's), for the status page.
    pub fn history(&self, id: u64) -> Vec<crate::service::history::Point> {
        self.state()
            .runs
            .get(&id)
            .map(|r| r.history.points().to_vec())
            .unwrap_or_default()
    }

    /// The worker credentials it issues and accepts (the token check of its server holds them too).
    pub fn credentials(&self) -> &crate::durable::credentials::Credentials {
        &self.shared.credentials
    }

    /// The coordinator's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// The metrics in the OpenMetrics text format, as of now.
    pub fn render_metrics(&self) -> String {
        self.shared
            .metrics
            .store_degraded
            .set(self.storage().degraded().is_some() as i64);
        self.shared.metrics.render(&self.runs(), &self.workers())
    }

    /// Announces a change to status watchers and waiting lease calls.
    fn changed(&self) {
        self.shared
            .lease_news
            .send_modify(|v| *v = v.wrapping_add(1));
        self.progressed();
    }

    /// Announces a change to status watchers alone: one that frees no job (a result that only counts
    /// its job, a lease issued).
    fn progressed(&self) {
        self.shared.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver that wakes up after every change of any run's progress.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// A receiver that wakes up after every change that may let a waiting lease call lease a job
    /// (see `Shared::lease_news`).
    pub(super) fn subscribe_lease_news(&self) -> watch::Receiver<u64> {
        self.shared.lease_news.subscribe()
    }

    /// Damage met while serving (a record that cannot be read): storage is marked degraded, as after a
    /// failed write, so that `serve` reopens the store and the startup reconciliation repairs it from
    /// the ledger (or refuses it, naming what is wrong). Other errors pass by.
    pub(crate) fn note_damage(&self, e: &Error) {
        match e {
            Error::Corrupt(why) => self.storage().failed(&format!(
                "the store is damaged ({why}): reopening it to repair it from the ledger"
            )),
            // sled's own: a page that fails its check, or a read the disk refused (found by a review,
            // 2026-11-29: a lease call met it, put the job back first in line and failed, and so did
            // every later call, the coordinator still serving).
            Error::Store(why) => self.storage().failed(&format!(
                "the store failed a read ({why}): reopening it to repair it from the ledger"
            )),
            _ => {}
        }
    }

    /// Saves the spot checks each identity passed, if they changed since the last save (a background
    /// task calls it now and then, and at the server's end): the lock is held for the copy only.
    pub async fn save_spot_passes(&self) -> Result<()> {
        let Some(passed) = self.state().spot.unsaved() else {
            return Ok(());
        };
        let store = self.shared.store.clone();
        let saved = tokio::task::spawn_blocking(move || store.save_spot_passes(passed))
            .await
            .map_err(|e| Error::io("saving the spot-check passes", std::io::Error::other(e)))
            .and_then(|saved| saved);
        if saved.is_err() {
            self.state().spot.unsaved_again();
        }
        saved
    }

    /// Whether the store takes writes (see [`crate::durable::storage_health`]).
    pub fn storage(&self) -> &StorageHealth {
        &self.shared.health
    }

    /// Begins the shutdown: enumerations in progress (a CreateRun of a huge plan) end at once with
    /// UNAVAILABLE, so that the server can stop within moments.
    pub fn begin_shutdown(&self) {
        self.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The store's directory (none for a temporary store).
    pub fn data_dir(&self) -> Option<std::path::PathBuf> {
        self.shared.store.dir().map(std::path::Path::to_path_buf)
    }

    /// Tries the disk of a degraded coordinator again; Ok (and healthy) once it takes writes.
    pub async fn probe_storage(&self) -> Result<()> {
        self.shared.committer.probe().await
    }

    /// How long a lease lives without a heartbeat.
    pub fn lease_timeout(&self) -> Duration {
        self.state().leases.timeout()
    }

    /// Creates a run at `priority` (`verify_fraction` of its jobs computed twice; default
    /// [`DEFAULT_VERIFY_FRACTION`]), or with `reuse` returns the newest existing run with the same plan
    /// that is not cancelled and verifies at least a `verify_fraction` asked (refused if such runs
    /// exist, all verifying less).
    pub async fn create_run(
        &self,
        n: u32,
        strategy: Strategy,
        depth: Option<u32>,
        verify_fraction: Option<f64>,
        priority: i32,
        reuse: bool,
    ) -> Result<RunView> {
        let ask = NewRun {
            verify_fraction,
            priority,
            reuse,
            ..NewRun::default()
        };
        self.create_run_as(n, strategy, depth, ask).await
    }

    /// [`Coordinator::create_run`] with everything a caller may ask ([`NewRun`]): in record mode, every
    /// job computed by two identities that hold worker credentials (a fraction below 1 is refused),
    /// leased to credential holders only, and with `reuse` only a record run of the plan is returned; a
    /// stated `max_error` raises the spot checks while the run is open ([`spot_rate_for`]).
    pub async fn create_run_as(
        &self,
        n: u32,
        strategy: Strategy,
        depth: Option<u32>,
        ask: NewRun,
    ) -> Result<RunView> {
        let NewRun {
            verify_fraction,
            priority,
            reuse,
            record,
            max_error,
        } = ask;
        if let Some(e) = max_error {
            check_max_error(e)?;
        }
        if record && verify_fraction.is_some_and(|f| f < 1.0) {
            return Err(Error::Invalid(
                "a record run verifies every job: leave --verify-fraction out, or give 1".into(),
            ));
        }
        let verify_fraction = if record { Some(1.0) } else { verify_fraction };
        let asked = verify_fraction;
        let mut verify_fraction = verify_fraction.unwrap_or(DEFAULT_VERIFY_FRACTION);
        crate::durable::store::check_verify_fraction(verify_fraction)?;
        // The bound rests on keyed verification: a liar may tell a re-leased job (a check, a second
        // result) from a fresh one, and lie on fresh ones only; each of those is verified, unseen, at
        // the run's fraction. A bounded run verifies at least the bound's rate.
        if let Some(e) = max_error {
            let least = spot_rate_for(e);
            if asked.is_some_and(|f| f + 1e-9 < least) {
                return Err(Error::Invalid(format!(
                    "a run bounded at {e} verifies at least {}% of its jobs: give --verify-fraction {:.4} or more, or leave it out",
                    percent(least),
                    (least * 10_000.0).ceil() / 10_000.0
                )));
            }
            verify_fraction = verify_fraction.max(least).min(1.0);
        }
        let plan = plan_of(n, strategy, depth)?;
        let one_reuse_at_a_time = match reuse {
            true => Some(self.shared.reusing.clone().lock_owned().await),
            false => None,
        };
        if reuse {
            let state = self.state();
            let same: Vec<&LiveRun> = state
                .runs
                .values()
                .rev()
                // Not a cancelled run. An inconsistent one is returned (it fails `count` at once):
                // a new run of the plan is asked for without `reuse`, never made behind a caller's
                // back at each retry.
                .filter(|r| r.plan == plan && !r.meta.is_cancelled())
                .collect();
            // The newest verified at least as asked: never a run whose count would be trusted more than
            // it was checked.
            // And bounded at least as tightly as asked: a reuse never returns a run checked less.
            let enough = |r: &&&LiveRun| {
                asked.is_none_or(|f| r.meta.verify_fraction >= f)
                    && (!record || r.meta.record)
                    && max_error.is_none_or(|e| {
                        r.meta.max_error.is_some_and(|m| m <= e)
                            && r.meta.verify_fraction + 1e-9 >= spot_rate_for(e)
                    })
            };
            if let Some(run) = same.iter().find(enough) {
                return Ok(self.view(&state, run));
            }
            if let (Some(newest), true) = (same.first(), record) {
                return Err(Error::Invalid(format!(
                    "run {} of the same plan is not a record run: submit --record without --reuse for a new one",
                    newest.meta.id
                )));
            }
            if let (Some(newest), Some(f)) = (same.first(), asked) {
                return Err(Error::Invalid(format!(
                    "run {} of the same plan verifies {}% of its jobs, less than the {}% asked: submit without --reuse for a new run, or reuse it without --verify-fraction",
                    newest.meta.id,
                    percent(newest.meta.verify_fraction),
                    percent(f)
                )));
            }
        }
        // A run created now could be acknowledged and then lost with the unsynced writes the reopen
        // drops: refused as retryable instead, like leases.
        if let Some(why) = self.storage().degraded() {
            return Err(Error::Durability(format!(
                "not creating runs while the coordinator cannot write its store ({why}); try again once it serves"
            )));
        }
        // Refused before the enumeration, where there is no room (and checked again at the write).
        self.room_for_a_run()?;
        // The plan is enumerated here (seconds at N = 28), [`MAX_PLANNING`] at a time: a caller that
        // goes away meanwhile creates nothing, and its enumeration ends (as all do at shutdown). From
        // the write on, the run is created whatever becomes of the caller.
        let place = place_in(&self.shared.planning).await?;
        let abandoned = CancelOnDrop::default();
        let flags = [abandoned.0.clone(), self.shared.stopping.clone()];
        let (jobs_total, fingerprint) = joined(
            tokio::task::spawn_blocking(move || {
                let _place = place;
                plan.fingerprint_cancellable(nqueens_common::partition::MAX_JOBS, flags)
            })
            .await,
        )??;
        drop(abandoned);
        let this = self.clone();
        let create = Write::CreateRun {
            plan,
            jobs_total,
            fingerprint,
            options: crate::durable::store::RunOptions {
                verify_fraction,
                priority,
                record,
                max_error,
            },
        };
        to_the_end(async move {
            let _one_reuse_at_a_time = one_reuse_at_a_time;
            this.create(create).await
        })
        .await
    }

    /// Refuses a new run when [`Config::max_open_runs`] runs are open.
    fn room_for_a_run(&self) -> Result<()> {
        let state = self.state();
        let open = state
            .runs
            .values()
            .filter(|r| matches!(r.phase(), Phase::Running | Phase::Stalled | Phase::Paused))
            .count();
        let max = self.shared.max_open_runs;
        if open >= max {
            return Err(Error::TooMany(format!(
                "{open} runs are open (running, stalled or paused), the most this coordinator creates: \
                 cancel one (`nqueens cancel RUN`) or let one finish, then submit again"
            )));
        }
        Ok(())
    }

    /// Writes a run (a [`Write::CreateRun`]) through the committer, then adds it to memory.
    async fn create(&self, create: Write) -> Result<RunView> {
        let _one_at_a_time = self.shared.creating.lock().await;
        self.room_for_a_run()?;
        let (meta, _) = self.shared.committer.write_run(create).await?;
        tracing::info!(
            run = meta.id,
            n = meta.n,
            strategy = %meta.strategy,
            depth = meta.depth,
            jobs_total = meta.jobs_total,
            verify_fraction = meta.verify_fraction,
            priority = meta.priority,
            "run created"
        );
        let tally = self.shared.store.tally(meta.id)?;
        let id = meta.id;
        let mut state = self.state();
        state
            .runs
            .insert(id, LiveRun::new(meta, tally, HashMap::new())?);
        let view = self.view(&state, &state.runs[&id]);
        drop(state);
        self.changed();
        Ok(view)
    }

    /// Every run, oldest first.
    pub fn runs(&self) -> Vec<RunView> {
        let state = self.state();
        state.runs.values().map(|r| self.view(&state, r)).collect()
    }

    /// At most `max` runs of ids greater than `after`, in id order.
    pub fn runs_after(&self, after: u64, max: usize) -> Vec<RunView> {
        let state = self.state();
        let from = (std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded);
        state
            .runs
            .range(from)
            .take(max)
            .map(|(_, r)| self.view(&state, r))
            .collect()
    }

    /// One run, by the id clients use.
    pub fn run(&self, id: &str) -> Result<RunView> {
        let state = self.state();
        let run = lookup(&state, id)?;
        Ok(self.view(&state, run))
    }
}

/// A fraction as a percentage for a message: at most two decimals, none when whole (`1%`, `0.25%`).
fn percent(f: f64) -> String {
    let p = format!("{:.2}", f * 100.0);
    p.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Runs `work` to its end in a task of its own, whatever becomes of the caller. A handler whose caller
/// goes away (a worker killed, a connection reset, a deadline passed) is dropped where it waits; a write
/// already handed to the committer still becomes durable, and its effects in memory (a run finished or
/// created, a run cancelled, jobs reopened, a worker quarantined) must follow it, not wait for a restart.
async fn to_the_end<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    joined(tokio::spawn(work).await)?
}

/// A place of `places`, held until dropped; waits its turn (the semaphore closed: shutting down).
async fn place_in(
    places: &Arc<tokio::sync::Semaphore>,
) -> Result<tokio::sync::OwnedSemaphorePermit> {
    places
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| Error::ShuttingDown)
}

/// What a task's handle gave: its value; its panic, resumed here; or, cancelled (the runtime shutting
/// down), [`Error::ShuttingDown`].
fn joined<T>(joined: std::result::Result<T, tokio::task::JoinError>) -> Result<T> {
    match joined {
        Ok(done) => Ok(done),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(Error::ShuttingDown),
    }
}

/// Looks up a run by its client-facing id.
fn lookup<'a>(state: &'a State, id: &str) -> Result<&'a LiveRun> {
    id.parse::<u64>()
        .ok()
        .and_then(|id| state.runs.get(&id))
        .ok_or_else(|| Error::UnknownRun(truncate(id)))
}

pub(crate) use crate::error::truncate;
