//! The coordinator's Prometheus metrics: counters bumped where things happen (results by outcome, leases
//! issued and expired, RPC latencies), and gauges read from the same run and worker views that `status`
//! shows, refreshed at each scrape.

use std::sync::atomic::AtomicU64;

use nqueens_proto::metrics::{registered, RpcMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::service::{RunView, WorkerState, WorkerView};

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlaceLabel {
    pub place: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabel {
    pub run: String,
    pub n: u32,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunStateLabel {
    pub run: String,
    pub n: u32,
    pub state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobsLabel {
    pub run: String,
    pub state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

/// The job states a run's jobs gauge shows; they sum to the plan's jobs. `pending` includes the jobs
/// leased for their first computation (leases are their own gauge: a verifying job can be leased too).
const JOB_STATES: [&str; 5] = ["done", "pending", "verifying", "disputed", "failed"];

/// The coordinator's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    results: Family<OutcomeLabel, Counter>,
    corrupt: Family<PlaceLabel, Counter>,
    pub leases_issued: Counter,
    pub leases_expired: Counter,
    /// Jobs the lease sweep put back because their lease ended on a path that did not.
    pub jobs_returned: Counter,
    pub rpc: RpcMetrics,
    jobs: Family<JobsLabel, Gauge>,
    jobs_total: Family<RunLabel, Gauge>,
    leased: Family<RunLabel, Gauge>,
    solutions: Family<RunLabel, FloatGauge>,
    nodes: Family<RunLabel, FloatGauge>,
    jobs_per_second: Family<RunLabel, FloatGauge>,
    solutions_per_second: Family<RunLabel, FloatGauge>,
    eta_seconds: Family<RunLabel, FloatGauge>,
    done: Family<RunLabel, Gauge>,
    state: Family<RunStateLabel, Gauge>,
    workers: Family<StateLabel, Gauge>,
    nodes_per_second: FloatGauge,
    /// 1 while the store takes no writes (see [`crate::durable::storage_health`]), set at each scrape.
    pub store_degraded: Gauge,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut r = Registry::with_prefix("nqueens");
        Metrics {
            results: registered(
                &mut r,
                "results",
                "Results received, by outcome (accepted, pending, duplicate, disputed, mismatch, job_failed)",
            ),
            corrupt: registered(
                &mut r,
                "corrupt_records",
                "Records refused or dropped because their checksum or seal failed, by where they were found (wire, store, ledger)",
            ),
            leases_issued: registered(&mut r, "leases_issued", "Leases issued"),
            leases_expired: registered(
                &mut r,
                "leases_expired",
                "Leases that expired without a result",
            ),
            jobs_returned: registered(
                &mut r,
                "jobs_returned",
                "Jobs whose lease ended on a path that did not put them back, put back by the lease sweep (0 unless a path misses)",
            ),
            rpc: RpcMetrics::register(&mut r, "calls served"),
            jobs: registered(&mut r, "jobs", "Jobs of a run, by state"),
            jobs_total: registered(&mut r, "run_jobs", "Jobs in a run's plan"),
            leased: registered(&mut r, "run_leased", "Jobs of a run leased to a worker now"),
            solutions: registered(
                &mut r,
                "run_solutions",
                "Solutions counted so far (exact value: nqueens status)",
            ),
            nodes: registered(&mut r, "run_nodes", "Search nodes of the counted results"),
            jobs_per_second: registered(
                &mut r,
                "run_jobs_per_second",
                "Jobs completed per second over the last five minutes",
            ),
            solutions_per_second: registered(
                &mut r,
                "run_solutions_per_second",
                "Solutions counted per second over the last five minutes",
            ),
            eta_seconds: registered(
                &mut r,
                "run_eta_seconds",
                "Seconds left at the recent rate (-1: unknown)",
            ),
            done: registered(&mut r, "run_done", "1 once every job of the run is counted and the counts agree (its total is final)"),
            state: registered(
                &mut r,
                "run_state",
                "1 for the state the run is in (running, done, stalled, paused, cancelled, inconsistent), 0 for the others",
            ),
            workers: registered(&mut r, "workers", "Workers by state"),
            nodes_per_second: registered(
                &mut r,
                "nodes_per_second",
                "Search nodes per second reported by all workers over the last five minutes",
            ),
            store_degraded: registered(
                &mut r,
                "store_degraded",
                "1 while the coordinator cannot write its store (it leases nothing until a probe succeeds)",
            ),
            registry: r,
        }
    }
}

impl Metrics {
    /// Counts a result by its outcome.
    pub fn corrupt_record(&self, place: &'static str) {
        self.corrupt.get_or_create(&PlaceLabel { place }).inc();
    }

    /// Counts one received result by its outcome.
    pub fn result(&self, outcome: &'static str) {
        self.results.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// The metrics in the OpenMetrics text format, with the gauges set from `runs` and `workers`.
    pub fn render(&self, runs: &[RunView], workers: &[WorkerView]) -> String {
        for v in runs {
            let label = RunLabel {
                run: v.id(),
                n: v.meta.n as u32,
            };
            let open = v.jobs_verifying + v.jobs_disputed + v.jobs_failed;
            let pending = v.meta.jobs_total.saturating_sub(v.tally.jobs + open);
            let by_state = [
                v.tally.jobs,
                pending,
                v.jobs_verifying,
                v.jobs_disputed,
                v.jobs_failed,
            ];
            for (state, n) in JOB_STATES.into_iter().zip(by_state) {
                self.jobs
                    .get_or_create(&JobsLabel { run: v.id(), state })
                    .set(n as i64);
            }
            self.jobs_total
                .get_or_create(&label)
                .set(v.meta.jobs_total as i64);
            self.leased.get_or_create(&label).set(v.jobs_leased as i64);
            self.solutions
                .get_or_create(&label)
                .set(v.tally.total as f64);
            self.nodes.get_or_create(&label).set(v.tally.nodes as f64);
            self.jobs_per_second
                .get_or_create(&label)
                .set(v.jobs_per_second);
            self.solutions_per_second
                .get_or_create(&label)
                .set(v.solutions_per_second);
            self.eta_seconds
                .get_or_create(&label)
                .set(v.eta_seconds.unwrap_or(-1.0));
            self.done
                .get_or_create(&label)
                .set((v.phase == crate::durable::store::Phase::Done) as i64);
            for phase in crate::durable::store::Phase::ALL {
                self.state
                    .get_or_create(&RunStateLabel {
                        run: v.id(),
                        n: v.meta.n as u32,
                        state: phase.as_str(),
                    })
                    .set((v.phase == phase) as i64);
            }
        }
        for state in [
            WorkerState::Working,
            WorkerState::Idle,
            WorkerState::Leaving,
            WorkerState::Left,
            WorkerState::Lost,
            WorkerState::Quarantined,
        ] {
            let n = workers.iter().filter(|w| w.state == state).count();
            self.workers
                .get_or_create(&StateLabel {
                    state: state.as_str(),
                })
                .set(n as i64);
        }
        self.nodes_per_second
            .set(workers.iter().map(|w| w.nodes_per_second).sum());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
