//! One simulated worker: its own gRPC connection, a fixed pace of one job batch per period, and the
//! lease-compute-report cycle of a real one-batch worker with the computing left out. Each result is a
//! deterministic function of its job key, so any worker (and a re-run) reports the same value.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use nqueens_proto as proto;
use nqueens_proto::Client;
use tokio::time::{Instant, MissedTickBehavior};

/// Pause after a failed call, so that a coordinator in trouble is not hammered.
const ERROR_PAUSE: Duration = Duration::from_millis(100);

/// What one simulated worker does.
#[derive(Debug, Clone)]
pub struct Role {
    /// The worker's name (as `--name` gives it).
    pub name: String,
    /// Its process id, spelled as a real worker's (name, process id, start time: about 30 bytes, so
    /// that the store measured at scale holds results of a real size).
    pub id: String,
    pub run: String,
    pub n: u32,
    pub d4: bool,
    /// Jobs per lease request (and so results per report).
    pub batch: u32,
    /// Lease the next jobs with each report, instead of with a Lease call of their own (as workers do).
    pub with_report: bool,
    /// Time between two of its cycles (zero: as fast as the coordinator answers).
    pub period: Duration,
    /// When its first cycle starts (staggered across workers).
    pub start: Instant,
    /// Calls and results count from here ...
    pub measure_from: Instant,
    /// ... to here, when the worker stops.
    pub until: Instant,
}

/// What one simulated worker saw.
#[derive(Debug)]
pub struct Tallies {
    /// Latency of lease and report calls started in the measured window (microseconds).
    pub lease: Histogram<u64>,
    pub report: Histogram<u64>,
    /// Results acknowledged (accepted or pending: both committed) in the measured window.
    pub committed: u64,
    /// Calls that failed (they are retried).
    pub errors: u64,
    /// Each job this worker's reports made done, with its synthetic total: accepted, or a duplicate after a
    /// report whose answer was lost (the first attempt committed it).
    pub done: BTreeMap<String, u64>,
    /// Each job whose last report got no answer (the call failed, and the worker stopped before an
    /// answered retry), with its synthetic total: committed or not, the client cannot tell.
    pub unanswered: BTreeMap<String, u64>,
    /// The first error, for the summary.
    pub first_error: Option<String>,
}

impl Tallies {
    fn new() -> Tallies {
        Tallies {
            lease: latency_histogram(),
            report: latency_histogram(),
            committed: 0,
            errors: 0,
            done: BTreeMap::new(),
            unanswered: BTreeMap::new(),
            first_error: None,
        }
    }

    fn failed(&mut self, s: &tonic::Status) {
        self.errors += 1;
        self.first_error
            .get_or_insert_with(|| format!("{:?}: {}", s.code(), s.message()));
    }
}

/// An empty latency histogram: 1 µs to 100 s at 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("static histogram bounds are valid")
}

/// The synthetic result of a job: `(total, unique8, nodes)`, a hash of its key; both counts equal and
/// a multiple of 8, so that they fit the bounds the coordinator checks (`Job::check`: the weights of
/// every job divide 8), except where the job is nothing at all ([`synthetic_result`]).
pub fn synthetic(job: &str) -> (u64, u64, u64) {
    // FNV-1a, 64 bits.
    let h = job.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let total = 8 * (h % 125_000);
    (total, total, total * 3 + 1)
}

/// The result a simulated worker reports for `lease`: [`synthetic`], or nothing at all for a job
/// that no sub-problem fits (a `d4` job whose every ring clashes with its prefix), as its search
/// would give.
fn synthetic_result(lease: &proto::JobLease, n: u32, d4: bool) -> nqueens_common::JobResult {
    let (total, unique8, nodes) = synthetic(&lease.job);
    let strategy = if d4 {
        nqueens_common::Strategy::D4
    } else {
        nqueens_common::Strategy::Mirror
    };
    let result = nqueens_common::JobResult {
        total,
        unique8: d4.then_some(unique8),
        nodes,
    };
    let fits = u8::try_from(lease.depth)
        .ok()
        .and_then(|depth| nqueens_common::Plan::with_depth(n, strategy, depth).ok())
        .zip(lease.job.parse().ok())
        .and_then(|(plan, key)| plan.job(&key).ok())
        .is_some_and(|job| job.check(&result).is_ok());
    if fits {
        result
    } else {
        nqueens_common::JobResult {
            total: 0,
            unique8: d4.then_some(0),
            nodes: 0,
        }
    }
}

/// Runs one simulated worker until `role.until`, then hands back what it holds.
pub async fn simulate(mut client: Client, role: Role) -> Tallies {
    let mut t = Tallies::new();
    let mut held: Vec<proto::JobLease> = Vec::new();
    let mut tick = (!role.period.is_zero()).then(|| {
        let mut i = tokio::time::interval_at(role.start, role.period);
        // A cycle that overran skips the ticks it missed and keeps its phase: as in a fleet, whose
        // workers finish jobs independently of each other, arrivals stay spread over the period. (Delay
        // would restart each late worker's period at its answer, lining up the workers a group commit
        // answered together into bursts.)
        i.set_missed_tick_behavior(MissedTickBehavior::Skip);
        i
    });
    tokio::time::sleep_until(role.start).await;
    loop {
        if let Some(tick) = tick.as_mut() {
            tick.tick().await;
        }
        let started = Instant::now();
        if started >= role.until {
            break;
        }
        let measured = started >= role.measure_from;
        let mut leased = None;
        if !held.is_empty() {
            let results = held.iter().map(|l| result_of(l, &role)).collect();
            let call = client.report(proto::ReportRequest {
                worker_id: role.id.clone(),
                worker_name: role.name.clone(),
                results,
                lease_capacity: if role.with_report { role.batch } else { 0 },
                threads: role.batch,
                lease_run: Some(role.run.clone()),
                gpus: 0,
                gpu_kernels: Vec::new(),
            });
            match call.await {
                Ok(answer) => {
                    let done_at = Instant::now();
                    if measured {
                        record(&mut t.report, done_at - started);
                    }
                    let answer = answer.into_inner();
                    leased = answer.lease.filter(|l| !l.leases.is_empty());
                    let outcomes = answer.outcomes;
                    for lease in &held {
                        t.unanswered.remove(&lease.job);
                    }
                    for (lease, outcome) in held.drain(..).zip(outcomes) {
                        let outcome = proto::Outcome::try_from(outcome);
                        let in_window = measured && done_at <= role.until;
                        match outcome {
                            Ok(proto::Outcome::Accepted) => {
                                t.committed += u64::from(in_window);
                                t.done.insert(
                                    lease.job.clone(),
                                    synthetic_result(&lease, role.n, role.d4).total,
                                );
                            }
                            Ok(proto::Outcome::Pending) => t.committed += u64::from(in_window),
                            Ok(proto::Outcome::Duplicate) => {
                                t.done.insert(
                                    lease.job.clone(),
                                    synthetic_result(&lease, role.n, role.d4).total,
                                );
                            }
                            _ => {}
                        }
                    }
                }
                Err(s) => {
                    // Kept, and reported again next cycle (idempotent). Until an answer comes, the
                    // store may or may not hold them.
                    for lease in &held {
                        t.unanswered.insert(
                            lease.job.clone(),
                            synthetic_result(lease, role.n, role.d4).total,
                        );
                    }
                    t.failed(&s);
                    tokio::time::sleep(ERROR_PAUSE).await;
                    continue;
                }
            }
        }
        if let Some(lease) = leased {
            held = lease.leases;
            continue;
        }
        let started = Instant::now();
        let call = client.lease(proto::LeaseRequest {
            worker_id: role.id.clone(),
            worker_name: role.name.clone(),
            threads: role.batch,
            capacity: role.batch,
            run: Some(role.run.clone()),
            wait_ms: 0,
            gpus: 0,
            gpu_kernels: Vec::new(),
        });
        match call.await {
            Ok(answer) => {
                if started >= role.measure_from {
                    record(&mut t.lease, started.elapsed());
                }
                let answer = answer.into_inner();
                if answer.leases.is_empty() && tick.is_none() {
                    tokio::time::sleep(Duration::from_millis(answer.retry_after_ms.into())).await;
                }
                held = answer.leases;
            }
            Err(s) => {
                t.failed(&s);
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    let lease_ids = held.iter().map(|l| l.lease_id).collect();
    let release = client.release(proto::ReleaseRequest {
        worker_id: role.id.clone(),
        lease_ids,
        leaving: true,
    });
    if let Err(s) = release.await {
        t.failed(&s);
    }
    t
}

fn result_of(lease: &proto::JobLease, role: &Role) -> proto::JobResult {
    result_of_job(lease, role.n, role.d4)
}

/// The synthetic result of `lease`'s job of N = `n`, sealed, as a worker reports it.
pub fn result_of_job(lease: &proto::JobLease, n: u32, d4: bool) -> proto::JobResult {
    let result = synthetic_result(lease, n, d4);
    let seal = lease
        .job
        .parse()
        .map(|key| nqueens_common::checksum::seal(lease.plan_fingerprint, &key, &result))
        .ok();
    proto::JobResult {
        lease_id: lease.lease_id,
        run: lease.run.clone(),
        n,
        job: lease.job.clone(),
        total: result.total,
        unique8: result.unique8,
        nodes: result.nodes,
        seal,
        lease_tag: lease.lease_tag,
        device: None,
        // Synthetic: no kernel computed it.
        family: proto::Family::Unspecified.into(),
    }
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1));
}

#[cfg(test)]
mod tests {
    use super::synthetic;

    #[test]
    fn synthetic_results_are_a_function_of_the_key() {
        assert_eq!(synthetic("3.17.4"), synthetic("3.17.4"));
        assert_ne!(synthetic("3.17.4"), synthetic("3.17.5"));
        let (total, unique8, nodes) = synthetic("0.1");
        assert!(total < 1_000_000 && total.is_multiple_of(8) && unique8 == total && nodes > total);
    }
}
