//! Fault injection, for tests of the coordinator's defences only. The switches exist only in a build with
//! the `faults` cargo feature (the test command turns it on; a release build has none of them): a worker
//! can be made to report a wrong count every K jobs, to stall (stop talking to the coordinator, as a hung
//! machine does) after K jobs, to die mid-batch after K jobs, to drop one job every time it gets it (a
//! job that kills its workers), or to send every report late (a slow link or coordinator).

use nqueens_common::JobResult;

/// The faults a worker injects (all off by default, and always off without the `faults` feature).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Report a wrong count for every K-th job computed: one class of eight solutions more on both
    /// counts, a wrong count whose counts still bound each other (`Job::check`), as a fault in the
    /// search itself gives; it takes verification or a dispute to catch it.
    pub fault_wrong_every: Option<u64>,
    /// After K jobs computed, stop talking to the coordinator for good (no reports, heartbeats or
    /// leases), as a hung machine does.
    pub fault_stall_after: Option<u64>,
    /// Exit abruptly (code 86) when the K-th job finishes, before journaling or reporting it.
    pub fault_die_after: Option<u64>,
    /// Never compute this job (a job key) and let its lease expire, every time it is leased.
    pub fault_drop_job: Option<String>,
    /// Delay every report by this many milliseconds before it is sent (a slow link or coordinator).
    pub fault_slow_report_ms: Option<u64>,
}

impl Faults {
    /// Whether any fault is switched on.
    pub fn any(&self) -> bool {
        self.fault_wrong_every.is_some()
            || self.fault_stall_after.is_some()
            || self.fault_die_after.is_some()
            || self.fault_drop_job.is_some()
            || self.fault_slow_report_ms.is_some()
    }

    /// Applied to the `nth` job's result (counting from 1) as it finishes: dies, or falsifies it.
    pub fn on_finished(&self, nth: u64, result: &mut JobResult) {
        if self.fault_die_after == Some(nth) {
            tracing::warn!(jobs = nth, "fault injection: dying mid-batch");
            // The injected fault is a crash: nothing may run after it, not even destructors.
            std::process::exit(86);
        }
        if self
            .fault_wrong_every
            .is_some_and(|k| nth.is_multiple_of(k))
        {
            tracing::warn!(jobs = nth, "fault injection: reporting a wrong count");
            result.total = result.total.wrapping_add(8);
            result.unique8 = result.unique8.map(|u| u.wrapping_add(8));
        }
    }

    /// Whether the worker stalls now, after `jobs` jobs.
    pub fn stalls(&self, jobs: u64) -> bool {
        self.fault_stall_after.is_some_and(|k| jobs >= k)
    }

    /// Whether to drop this job instead of computing it.
    pub fn drops(&self, job: &str) -> bool {
        self.fault_drop_job.as_deref() == Some(job)
    }
}

/// The fault-injection switches on a worker's command line, in a build with the `faults` feature.
#[cfg(feature = "faults")]
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Fault injection (a test build only; never on a real run)")]
pub struct FaultArgs {
    /// Report a wrong count for every K-th job computed: one class of eight solutions more on both
    /// counts, a wrong count whose counts still bound each other (`Job::check`), as a fault in the
    /// search itself gives; it takes verification or a dispute to catch it.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub fault_wrong_every: Option<u64>,
    /// After K jobs computed, stop talking to the coordinator for good (no reports, heartbeats or
    /// leases), as a hung machine does.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub fault_stall_after: Option<u64>,
    /// Exit abruptly (code 86) when the K-th job finishes, before journaling or reporting it.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub fault_die_after: Option<u64>,
    /// Never compute this job (a job key) and let its lease expire, every time it is leased.
    #[arg(long, value_name = "JOB")]
    pub fault_drop_job: Option<String>,
    /// Delay every report by MS milliseconds before it is sent (a slow link or coordinator).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub fault_slow_report_ms: Option<u64>,
}

#[cfg(feature = "faults")]
impl FaultArgs {
    /// The faults these switches ask for.
    pub fn faults(&self) -> Faults {
        Faults {
            fault_wrong_every: self.fault_wrong_every,
            fault_stall_after: self.fault_stall_after,
            fault_die_after: self.fault_die_after,
            fault_drop_job: self.fault_drop_job.clone(),
            fault_slow_report_ms: self.fault_slow_report_ms,
        }
    }
}

/// No switches: a build without the `faults` feature cannot inject faults.
#[cfg(not(feature = "faults"))]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FaultArgs {}

#[cfg(not(feature = "faults"))]
impl FaultArgs {
    /// No faults.
    pub fn faults(&self) -> Faults {
        Faults::default()
    }
}
