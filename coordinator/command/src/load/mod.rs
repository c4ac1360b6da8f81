//! The load generator behind `nqueens loadgen`: W simulated workers, each on its own gRPC connection, lease
//! jobs of a fresh run and report synthetic results (no search) at an offered rate for a bounded time. It
//! measures the results the coordinator acknowledged per second and the lease and report latencies, then
//! checks that the run holds exactly the results acknowledged as done (none lost, none counted twice).

mod tail;
mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use nqueens_proto as proto;
use nqueens_proto::connect;
use nqueens_proto::Connection;
use serde::Serialize;
use tokio::time::Instant;

pub use tail::{Tail, Waited};
use worker::{latency_histogram, simulate, Role};

/// Most simulated workers in one process: each holds a connection, and with the load generator's own
/// client they fit in a coordinator's [`MAX_CONNECTIONS`](nqueens_coordinator::wire::connections::MAX_CONNECTIONS).
pub const MAX_WORKERS: usize = nqueens_coordinator::wire::connections::MAX_CONNECTIONS - 1;

/// The load to offer.
#[derive(Debug, Clone)]
pub struct Load {
    /// Simulated workers, each with its own connection.
    pub workers: usize,
    /// Results per second offered over all workers (`None`: each worker as fast as it is answered).
    pub rate: Option<f64>,
    /// Jobs per lease request and results per report.
    pub batch: u32,
    /// Lease the next jobs with each report (otherwise with a Lease call of their own, as workers do).
    pub with_report: bool,
    /// Time to connect and settle before measuring.
    pub warmup: Duration,
    /// Time measured.
    pub duration: Duration,
    /// N of the run to draw jobs from (d4).
    pub n: u32,
    /// The run's verification fraction (verified jobs are reported by two workers).
    pub verify_fraction: f64,
    /// Load the coordinator's existing run of the same N (d4, default depth), if any, instead of a new
    /// run: successive loads fill one run further.
    pub reuse: bool,
    /// The token of the simulated workers (a worker credential, say), where it is not the one that
    /// creates the run.
    pub worker_token: Option<String>,
    /// Workers, each on its own connection, whose lease calls wait meanwhile on a second run none of
    /// whose jobs is free (the tail of a run), and what holds its jobs.
    pub waiters: usize,
    pub tail: Tail,
}

/// Latency percentiles of one kind of call, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub calls: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let ms = |micros: u64| micros as f64 / 1000.0;
        Latency {
            calls: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// What a load run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub workers: usize,
    pub run: String,
    pub n: u32,
    pub batch: u32,
    /// Whether the next jobs were leased with each report.
    pub lease_with_report: bool,
    /// Offered results per second (absent: unpaced).
    pub offered_per_second: Option<f64>,
    pub seconds: f64,
    /// Results acknowledged in the measured window (accepted or awaiting verification: both durable).
    pub committed: u64,
    pub committed_per_second: f64,
    pub lease: Latency,
    pub report: Latency,
    /// Failed calls (retried), and the first one's error.
    pub errors: u64,
    pub first_error: Option<String>,
    /// The jobs the run holds as done, and their total, once the load stopped: equal to what the
    /// coordinator acknowledged as done (checked).
    pub jobs_done: u64,
    pub total: String,
    /// The run's job list: the full plan of N.
    pub jobs_total: u64,
    /// What the waiting workers saw (absent without them).
    pub waited: Option<Waited>,
}

/// Why a load run failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("invalid load: {0}")]
    Invalid(String),
    #[error(transparent)]
    Connect(#[from] nqueens_proto::Error),
    #[error("coordinator: {}: {}", .0.code(), .0.message())]
    Rpc(#[from] tonic::Status),
    #[error("the run does not hold what was acknowledged: {acknowledged_jobs} jobs acknowledged done with total {acknowledged_total}, but the run has {stored_jobs} jobs done with total {stored_total}")]
    Lost {
        acknowledged_jobs: u64,
        acknowledged_total: u128,
        stored_jobs: u64,
        stored_total: String,
    },
}

impl Load {
    /// Checks the settings.
    pub fn check(&self) -> Result<(), LoadError> {
        let bad = |s: String| Err(LoadError::Invalid(s));
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return bad(format!("workers must be 1 to {MAX_WORKERS}"));
        }
        if self.workers + self.waiters > MAX_WORKERS {
            return bad(format!(
                "workers and waiters together must be at most {MAX_WORKERS}"
            ));
        }
        // A smaller rate's period between two results is past what a clock can add.
        if self.rate.is_some_and(|r| !(1e-3..=1e9).contains(&r)) {
            return bad(
                "--rate must be 0 (as fast as answered) or 0.001 to 1e9 results per second".into(),
            );
        }
        if !(1..=4096).contains(&self.batch) {
            return bad("the batch must be 1 to 4096 jobs".into());
        }
        if self.duration.is_zero() {
            return bad("the duration must be more than zero".into());
        }
        Ok(())
    }
}

/// Whether a run holding `stored` (jobs, total) holds every acknowledged result and, beyond them, at
/// most the unanswered ones (`maybe`): a report whose call failed after its commit counts in the store
/// though the client never saw it acknowledged (found when a loadgen process was stopped for minutes
/// and its calls timed out on resuming, 2026-11-28).
fn holds(acknowledged: (u64, u128), maybe: (u64, u128), stored: (u64, u128)) -> bool {
    (acknowledged.0..=acknowledged.0 + maybe.0).contains(&stored.0)
        && (acknowledged.1..=acknowledged.1 + maybe.1).contains(&stored.1)
}

/// Offers `load` to the coordinator at `connection` and measures it.
pub async fn run(connection: &Connection, load: &Load) -> Result<LoadReport, LoadError> {
    load.check()?;
    let mut client = connect(connection)?;
    let status = client
        .create_run(proto::CreateRunRequest {
            n: load.n,
            strategy: proto::Strategy::D4.into(),
            depth: None,
            reuse: load.reuse,
            // A reused run keeps its own fraction (asking one would refuse a run verifying less).
            verify_fraction: (!load.reuse).then_some(load.verify_fraction),
            priority: 0,
            record: false,
            max_error: None,
        })
        .await?
        .into_inner();
    let workers_connection = Connection {
        token: load.worker_token.clone().or(connection.token.clone()),
        ..connection.clone()
    };
    let workers = load.workers;
    let period = load.rate.map_or(Duration::ZERO, |r| {
        Duration::from_secs_f64(workers as f64 * f64::from(load.batch) / r)
    });
    let now = Instant::now();
    let measure_from = now + load.warmup;
    let until = measure_from + load.duration;
    // Workers start spread over one period (or half the warm-up), as a real fleet's do.
    let spread = if period.is_zero() {
        load.warmup / 2
    } else {
        period.min(load.warmup)
    };
    let started_nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut tasks = Vec::with_capacity(workers);
    for i in 0..workers {
        let name = format!("sim-{i:05}");
        let role = Role {
            id: format!(
                "{name}-{}-{:x}",
                std::process::id(),
                started_nanos + i as u64
            ),
            name,
            run: status.run.clone(),
            n: status.n,
            d4: true,
            batch: load.batch,
            with_report: load.with_report,
            period,
            start: now + spread.mul_f64(i as f64 / workers as f64),
            measure_from,
            until,
        };
        tasks.push(tokio::spawn(simulate(connect(&workers_connection)?, role)));
    }
    let tail = match load.waiters {
        0 => None,
        waiters => {
            let mut tail_client = connect(&workers_connection)?;
            let prepared = tail::prepare(&mut tail_client, load.tail).await?;
            let mut calls = Vec::with_capacity(waiters);
            for i in 0..waiters {
                calls.push(tokio::spawn(tail::wait(
                    connect(&workers_connection)?,
                    format!("wait-{i:05}"),
                    prepared.run.clone(),
                    until,
                )));
            }
            let held = tail::hold(tail_client, &prepared, until).await;
            let mut waited = Waited {
                waiters,
                tail: Some(load.tail),
                jobs: prepared.jobs,
                ..Waited::default()
            };
            for call in calls {
                let w = call
                    .await
                    .map_err(|e| LoadError::Invalid(format!("a waiting worker panicked: {e}")))?;
                waited.calls += w.calls;
                waited.leased += w.leased;
                waited.errors += w.errors;
                waited.first_error = waited.first_error.or(w.first_error);
            }
            held?;
            Some(waited)
        }
    };
    let mut lease = latency_histogram();
    let mut report = latency_histogram();
    let (mut committed, mut errors, mut first_error) = (0, 0, None);
    let mut done = BTreeMap::new();
    let mut unanswered = BTreeMap::new();
    for task in tasks {
        let t = task
            .await
            .map_err(|e| LoadError::Invalid(format!("a simulated worker panicked: {e}")))?;
        lease.add(&t.lease).expect("histograms of one shape");
        report.add(&t.report).expect("histograms of one shape");
        committed += t.committed;
        errors += t.errors;
        first_error = first_error.or(t.first_error);
        done.extend(t.done);
        unanswered.extend(t.unanswered);
    }
    unanswered.retain(|job, _| !done.contains_key(job));
    let stored = client
        .get_run(proto::GetRunRequest {
            run: status.run.clone(),
        })
        .await?
        .into_inner();
    // A reused run held results before this load: what it holds now is those plus what was acknowledged.
    let before_total: u128 = status.total.parse().unwrap_or(0);
    let acknowledged_total: u128 =
        before_total + done.values().map(|&t| u128::from(t)).sum::<u128>();
    let acknowledged_jobs = status.jobs_done + done.len() as u64;
    // Every acknowledged result is held; beyond them, at most the results whose report got no answer
    // (a call that timed out after its commit, say), each once.
    let maybe_jobs = unanswered.len() as u64;
    let maybe_total: u128 = unanswered.values().map(|&t| u128::from(t)).sum();
    let stored_total: u128 = stored.total.parse().unwrap_or(u128::MAX);
    if !holds(
        (acknowledged_jobs, acknowledged_total),
        (maybe_jobs, maybe_total),
        (stored.jobs_done, stored_total),
    ) {
        return Err(LoadError::Lost {
            acknowledged_jobs,
            acknowledged_total,
            stored_jobs: stored.jobs_done,
            stored_total: stored.total,
        });
    }
    let seconds = load.duration.as_secs_f64();
    Ok(LoadReport {
        workers,
        run: status.run,
        n: status.n,
        batch: load.batch,
        lease_with_report: load.with_report,
        offered_per_second: load.rate,
        seconds,
        committed,
        committed_per_second: committed as f64 / seconds,
        lease: Latency::of(&lease),
        report: Latency::of(&report),
        errors,
        first_error,
        jobs_done: stored.jobs_done,
        total: stored.total,
        jobs_total: stored.jobs_total,
        waited: tail,
    })
}

#[cfg(test)]
mod holds_tests {
    use super::holds;

    /// Every acknowledged result must be held; unanswered ones may be, each at most once.
    #[test]
    fn the_store_holds_the_acknowledged_and_at_most_the_unanswered() {
        assert!(holds((10, 100), (0, 0), (10, 100)));
        assert!(
            !holds((10, 100), (0, 0), (11, 108)),
            "one more than acknowledged, none unanswered"
        );
        assert!(
            holds((10, 100), (2, 16), (11, 108)),
            "one of two unanswered committed"
        );
        assert!(holds((10, 100), (2, 16), (12, 116)));
        assert!(
            !holds((10, 100), (2, 16), (13, 124)),
            "more than the unanswered"
        );
        assert!(
            !holds((10, 100), (2, 16), (9, 92)),
            "an acknowledged result lost"
        );
        assert!(
            !holds((10, 100), (2, 16), (10, 99)),
            "a total below the acknowledged"
        );
    }
}
