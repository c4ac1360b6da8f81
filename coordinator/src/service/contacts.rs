//! The log lines of workers joining, leaving and coming back, at most [`LINES_PER_MINUTE`] per
//! identity a minute: worker ids cost a credential nothing, and each new one was a line (a review,
//! 2026-12-01: one credential's made-up ids wrote a line per call, about a megabyte a second).

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Lines per identity a minute.
pub const LINES_PER_MINUTE: u32 = 16;

/// The window of [`LINES_PER_MINUTE`].
const MINUTE: Duration = Duration::from_secs(60);

/// Identities whose windows are kept: beyond it, windows a minute old go (identities are issued
/// credentials, the shared token's and the operator's: few).
const MAX_IDENTITIES: usize = 4096;

/// Whether to log a contact's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Log it.
    Log,
    /// Log that the identity's lines stop until its minute ends.
    Last,
    /// Log nothing.
    Quiet,
}

/// The lines each identity logged in its current minute.
#[derive(Debug, Default)]
pub struct ContactLog {
    windows: HashMap<String, (Instant, u32)>,
}

impl ContactLog {
    /// Whether a line about worker `id` (scoped `identity/worker`, or the operator's, unscoped) may
    /// be logged at `now`. The first refused in a minute logs that the identity's lines stop.
    pub fn logs(&mut self, id: &str, now: Instant) -> bool {
        match self.line(id, now) {
            Line::Log => true,
            Line::Last => {
                let who = super::workers::owner(id);
                tracing::info!(identity = who, lines = LINES_PER_MINUTE, "this identity's workers joining, leaving and returning are not logged until its minute ends");
                false
            }
            Line::Quiet => false,
        }
    }

    fn line(&mut self, id: &str, now: Instant) -> Line {
        let who = super::workers::owner(id);
        if self.windows.len() >= MAX_IDENTITIES && !self.windows.contains_key(who) {
            self.windows
                .retain(|_, (at, _)| now.saturating_duration_since(*at) < MINUTE);
            if self.windows.len() >= MAX_IDENTITIES {
                self.windows.clear();
            }
        }
        let (at, lines) = self.windows.entry(who.to_string()).or_insert((now, 0));
        if now.saturating_duration_since(*at) >= MINUTE {
            (*at, *lines) = (now, 0);
        }
        *lines = lines.saturating_add(1);
        match *lines {
            n if n <= LINES_PER_MINUTE => Line::Log,
            n if n == LINES_PER_MINUTE + 1 => Line::Last,
            _ => Line::Quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each identity logs at most [`LINES_PER_MINUTE`] lines a minute, then one that says so, then
    /// nothing until its minute ends; another identity's lines are its own.
    #[tokio::test(start_paused = true)]
    async fn an_identity_logs_a_bounded_number_of_contacts_a_minute() {
        let mut log = ContactLog::default();
        let t0 = Instant::now();
        for i in 0..LINES_PER_MINUTE {
            assert_eq!(log.line(&format!("m/{i}"), t0), Line::Log);
        }
        assert_eq!(log.line("m/x", t0), Line::Last);
        assert_eq!(log.line("m/y", t0), Line::Quiet);
        assert_eq!(log.line("h/1", t0), Line::Log, "another identity");
        assert_eq!(
            log.line("m/z", t0 + MINUTE - Duration::from_millis(1)),
            Line::Quiet
        );
        assert_eq!(log.line("m/z", t0 + MINUTE), Line::Log, "a new minute");
    }

    /// Bounded: a full map makes room by the windows a minute old, keeping the others as they are
    /// (an identity at its limit stays quiet); a known identity never makes room.
    #[tokio::test(start_paused = true)]
    async fn a_full_log_forgets_only_windows_a_minute_old() {
        let mut log = ContactLog::default();
        let t0 = Instant::now();
        for i in 0..MAX_IDENTITIES - 1 {
            log.line(&format!("i{i}/1"), t0);
        }
        let t1 = t0 + MINUTE - Duration::from_secs(1);
        let mut last = Line::Log;
        for _ in 0..LINES_PER_MINUTE + 2 {
            last = log.line("m/1", t1);
        }
        assert_eq!(last, Line::Quiet, "full, and m's window kept");
        assert_eq!(log.windows.len(), MAX_IDENTITIES);
        let t2 = t0 + MINUTE;
        assert_eq!(log.line("new/1", t2), Line::Log);
        assert_eq!(log.windows.len(), 2, "the old windows went");
        assert_eq!(log.line("m/2", t2), Line::Quiet, "m's kept");
    }
}
