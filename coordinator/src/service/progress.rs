//! The progress log: one line per running run at a steady interval (jobs done/total, percent, partial
//! total, rates, ETA, jobs awaiting verification, disputed and failed, active workers, the GPUs' share
//! of the nodes), for the people who watch a months-long run through its logs.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::durable::store::Phase;
use crate::service::{Coordinator, RunView};

/// Whether a run in `phase` gets a progress line: one that is computing or stalled (an operator must act).
/// A finished, cancelled, paused or inconsistent run changes no more by itself: its last line stands.
pub fn worth_a_line(phase: Phase) -> bool {
    matches!(phase, Phase::Running | Phase::Stalled)
}

/// Logs a progress line for every running or stalled run every `interval`, until `stop`.
pub async fn log_every(coordinator: Coordinator, interval: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(100)));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        for view in coordinator.runs().iter().filter(|v| worth_a_line(v.phase)) {
            log_line(view);
            if waits_for_a_second_identity(
                view.phase == Phase::Running,
                view.jobs_leased,
                view.tally.jobs,
                view.jobs_verifying + view.jobs_disputed,
                view.jobs_failed,
                view.meta.jobs_total,
            ) {
                tracing::warn!(
                    run = view.meta.id,
                    "the run waits for {WAITING_FOR_A_SECOND_IDENTITY}"
                );
            }
        }
    }
}

/// What a running run waits for when only its checks are left and no worker holds a lease of it: a
/// worker of another identity than those that computed them (with one credential, for ever).
pub const WAITING_FOR_A_SECOND_IDENTITY: &str = "a worker of another credential to check the jobs left (start one with a second credential: `nqueens credential issue NAME`)";

/// Whether a running run can move only once a worker of another identity comes: every job left waits
/// for a check (verifying or disputed), and no lease is out.
pub fn waits_for_a_second_identity(
    running: bool,
    leased: u64,
    done: u64,
    checks: u64,
    failed: u64,
    total: u64,
) -> bool {
    running && leased == 0 && checks > 0 && done + checks + failed == total
}

/// An ETA as `1d 2h 3m 4s` (or `unknown`).
pub fn format_eta(seconds: Option<f64>) -> String {
    let Some(s) = seconds.filter(|s| s.is_finite()) else {
        return "unknown".to_string();
    };
    let s = s.round() as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

fn log_line(v: &RunView) {
    tracing::info!(
        run = v.meta.id,
        n = v.meta.n,
        jobs_done = v.tally.jobs,
        jobs_total = v.meta.jobs_total,
        percent = %format_args!("{:.2}", v.percent()),
        total = %v.tally.total,
        jobs_per_s = %format_args!("{:.2}", v.jobs_per_second),
        solutions_per_s = %format_args!("{:.0}", v.solutions_per_second),
        eta = %format_eta(v.eta_seconds),
        leased = v.jobs_leased,
        verifying = v.jobs_verifying,
        disputed = v.jobs_disputed,
        failed = v.jobs_failed,
        workers = v.active_workers,
        gpu_share = %v
            .gpu_share
            .map_or("-".to_string(), |s| format!("{:.0}%", 100.0 * s)),
        state = %v.phase,
        "progress"
    );
}

#[cfg(test)]
mod tests {
    use super::{format_eta, worth_a_line, Phase};

    #[test]
    fn only_runs_that_can_move_get_progress_lines() {
        let lined: Vec<Phase> = Phase::ALL
            .into_iter()
            .filter(|&p| worth_a_line(p))
            .collect();
        assert_eq!(lined, [Phase::Running, Phase::Stalled]);
    }

    #[test]
    fn a_run_waits_for_a_second_identity_only_when_checks_alone_are_left_and_nothing_is_leased() {
        use super::waits_for_a_second_identity as waits;
        assert!(waits(true, 0, 70, 9, 0, 79));
        assert!(waits(true, 0, 70, 8, 1, 79));
        assert!(!waits(false, 0, 70, 9, 0, 79), "not running");
        assert!(!waits(true, 1, 70, 9, 0, 79), "a lease is out");
        assert!(!waits(true, 0, 69, 9, 0, 79), "a job is left to compute");
        assert!(!waits(true, 0, 79, 0, 0, 79), "no check left");
    }

    #[test]
    fn etas_read_naturally() {
        assert_eq!(format_eta(None), "unknown");
        assert_eq!(format_eta(Some(f64::INFINITY)), "unknown");
        assert_eq!(format_eta(Some(42.4)), "42s");
        assert_eq!(format_eta(Some(125.0)), "2m 5s");
        assert_eq!(format_eta(Some(7322.0)), "2h 2m");
        assert_eq!(format_eta(Some(2.0 * 86_400.0 + 3.0 * 3600.0)), "2d 3h");
    }
}
