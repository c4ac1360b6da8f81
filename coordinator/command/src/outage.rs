//! A coordinator outage as `status --watch` rides it out: since when the coordinator is unreachable, the
//! line that says so, and the backoff between tries (doubling from the watch interval, capped at a few
//! seconds so that the display resumes soon after the coordinator is back).

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// Longest wait between two tries (unless the watch interval itself is longer).
pub const MAX_BACKOFF: Duration = Duration::from_secs(3);

/// An outage in progress.
#[derive(Debug, Clone)]
pub struct Outage {
    /// Wall-clock time of the first failed try (for the line).
    since: SystemTime,
    /// The same moment on the monotonic clock (for the duration).
    started: Instant,
    /// The wait before the next try.
    delay: Duration,
    cap: Duration,
}

impl Outage {
    /// An outage whose first failed try was now; `interval` is the watch's refresh interval.
    pub fn begin(interval: Duration) -> Outage {
        Outage::at(SystemTime::now(), Instant::now(), interval)
    }

    /// The same at explicit times.
    pub fn at(since: SystemTime, started: Instant, interval: Duration) -> Outage {
        let first = interval.max(Duration::from_millis(50));
        Outage {
            since,
            started,
            delay: first,
            cap: MAX_BACKOFF.max(first),
        }
    }

    /// The wait before the next try; each call doubles the next one, up to the cap.
    pub fn backoff(&mut self) -> Duration {
        let delay = self.delay;
        self.delay = self.delay.saturating_mul(2).min(self.cap);
        delay
    }

    /// `coordinator unreachable since HH:MM:SS UTC (Ns)`, as of `now`.
    pub fn line(&self, now: Instant) -> String {
        let rfc3339 = humantime::format_rfc3339_seconds(self.since).to_string();
        let clock = rfc3339.get(11..19).unwrap_or("?");
        format!(
            "coordinator unreachable since {clock} UTC ({}s)",
            now.saturating_duration_since(self.started).as_secs()
        )
    }
}

/// Whether a failed status call means the coordinator cannot be reached right now (down, restarting,
/// network trouble), as opposed to an answer that retrying will not change (an unknown run, a wrong
/// token).
pub fn is_outage(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Cancelled
            | tonic::Code::Aborted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_backoff_doubles_up_to_a_few_seconds() {
        let mut o = Outage::begin(Duration::from_millis(100));
        let waits: Vec<u64> = (0..8).map(|_| o.backoff().as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3000, 3000, 3000]);
        // A watch interval longer than the cap is kept.
        let mut slow = Outage::begin(Duration::from_secs(10));
        assert_eq!(slow.backoff(), Duration::from_secs(10));
        assert_eq!(slow.backoff(), Duration::from_secs(10));
    }

    /// A watch interval as long as a duration can be (`--interval 300000000000years`) backs off without
    /// overflowing (it panicked at the first outage).
    #[tokio::test(start_paused = true)]
    async fn the_longest_interval_backs_off_without_overflow() {
        let mut o = Outage::begin(Duration::MAX);
        assert_eq!(o.backoff(), Duration::MAX);
        assert_eq!(o.backoff(), Duration::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn the_line_says_since_when_and_for_how_long() {
        // 2026-01-02 03:04:05 UTC.
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045);
        let o = Outage::at(since, Instant::now(), Duration::from_secs(2));
        tokio::time::advance(Duration::from_secs(42)).await;
        assert_eq!(
            o.line(Instant::now()),
            "coordinator unreachable since 03:04:05 UTC (42s)"
        );
    }

    #[test]
    fn only_failures_to_reach_the_coordinator_are_outages() {
        assert!(is_outage(tonic::Code::Unavailable));
        assert!(!is_outage(tonic::Code::NotFound));
        assert!(!is_outage(tonic::Code::Unauthenticated));
    }
}
