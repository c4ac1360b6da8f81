//! How many leases each identity handed back lately. A worker credential may hand back, within one
//! lease timeout, twice as many leases as it may hold, at most 16,384
//! ([`super::lease::hand_back_allowance`]): a worker that stops hands back what it holds, and may
//! start and stop again. Beyond that, a hand-back is refused: the lease stays the worker's, and
//! expires (a strike) unless its worker computes it. Each hand-back is written to the store
//! (`store::handbacks`), so a loop of leases handed back must not fill the disk at no cost. The
//! operator's workers are trusted, as for their leases, and not counted.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Most identities counted at once (windows that are over go first beyond it, then the oldest).
const MAX_NAMES: usize = 65_536;

/// Hand-backs by identity: since when (the window's start) and how many.
#[derive(Debug, Default)]
pub struct HandBacks {
    by_name: HashMap<String, (Instant, u64)>,
}

impl HandBacks {
    /// How many of `wanted` hand-backs `name` may make at `now`, if it may make `allowance` within one
    /// `window` (the lease timeout); those it makes are counted.
    pub fn take(
        &mut self,
        name: &str,
        wanted: u64,
        allowance: u64,
        now: Instant,
        window: Duration,
    ) -> u64 {
        if !self.by_name.contains_key(name) && self.by_name.len() >= MAX_NAMES {
            self.by_name
                .retain(|_, (since, _)| now.saturating_duration_since(*since) < window);
            if self.by_name.len() >= MAX_NAMES {
                if let Some(oldest) = self
                    .by_name
                    .iter()
                    .min_by_key(|(_, (since, _))| *since)
                    .map(|(n, _)| n.clone())
                {
                    self.by_name.remove(&oldest);
                }
            }
        }
        let (since, count) = self.by_name.entry(name.to_string()).or_insert((now, 0));
        if now.saturating_duration_since(*since) >= window {
            (*since, *count) = (now, 0);
        }
        let taken = wanted.min(allowance.saturating_sub(*count));
        *count += taken;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Free up to the allowance within one window, per identity; a new window starts afresh.
    #[tokio::test(start_paused = true)]
    async fn hand_backs_are_allowed_up_to_the_allowance_per_window() {
        let window = Duration::from_secs(60);
        let mut h = HandBacks::default();
        let now = Instant::now();
        assert_eq!(h.take("a", 200, 256, now, window), 200);
        assert_eq!(h.take("a", 100, 256, now, window), 56, "the rest of it");
        assert_eq!(h.take("a", 1, 256, now, window), 0);
        assert_eq!(h.take("b", 256, 256, now, window), 256, "per identity");
        let almost = now + window - Duration::from_millis(1);
        assert_eq!(h.take("a", 1, 256, almost, window), 0, "the same window");
        let later = now + window;
        assert_eq!(h.take("a", 300, 256, later, window), 256, "a new window");
    }

    /// A full table makes room: windows that are over first, then the oldest.
    #[tokio::test(start_paused = true)]
    async fn the_table_is_bounded() {
        let window = Duration::from_secs(60);
        let mut h = HandBacks::default();
        let start = Instant::now();
        for i in 0..MAX_NAMES {
            let at = start + Duration::from_millis(i as u64);
            h.take(&format!("n{i}"), 1, 1, at, window);
        }
        assert_eq!(h.by_name.len(), MAX_NAMES);
        // All still in their windows: the oldest goes.
        h.take("new", 1, 1, start + Duration::from_secs(1), window);
        assert_eq!(h.by_name.len(), MAX_NAMES);
        assert!(!h.by_name.contains_key("n0") && h.by_name.contains_key("n1"));
        // Windows over (a window of exactly its length is over): n1 and n2 go, nobody else.
        h.take(
            "later",
            1,
            1,
            start + window + Duration::from_millis(2),
            window,
        );
        assert_eq!(h.by_name.len(), MAX_NAMES - 1);
        assert!(!h.by_name.contains_key("n2") && h.by_name.contains_key("n3"));
        h.take(
            "fill",
            1,
            1,
            start + window + Duration::from_millis(2),
            window,
        );
        assert_eq!(h.by_name.len(), MAX_NAMES);
        // Every window over: all go but the newcomer.
        h.take("newer", 1, 1, start + Duration::from_secs(600), window);
        assert_eq!(h.by_name.len(), 1);
    }
}
