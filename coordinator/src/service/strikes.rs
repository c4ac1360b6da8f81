//! Strikes against workers whose leases expire: a worker that takes jobs and lets them expire is charged,
//! not only its jobs. Expiries of a worker within one lease timeout of its last strike are the same
//! outage (its leases, taken at different times, expire in different sweeps) and count once; a strike
//! halves how many jobs the worker may hold, and from [`BENCH_AFTER`] strikes on it gets no jobs at all
//! for a time that doubles with every further strike. One accepted result clears its strikes.
//!
//! Jobs are charged too, but a job fails for its expiries only once they came under at least
//! [`MIN_WORKERS_TO_FAIL`] different workers: one bad worker cannot fail the jobs of a run.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Strikes after which a worker is benched (leased nothing for a while).
pub const BENCH_AFTER: u32 = 3;
/// Longest a worker is benched.
pub const MAX_BENCH: Duration = Duration::from_secs(3600);
/// Distinct workers whose leases of a job must have expired before the job may fail.
pub const MIN_WORKERS_TO_FAIL: usize = 2;
/// Most worker names remembered per job (enough to decide [`MIN_WORKERS_TO_FAIL`]).
const MAX_NAMES_PER_JOB: usize = 8;
/// Most workers with strikes remembered (the oldest are forgiven first beyond it).
const MAX_WORKERS: usize = 65_536;

#[derive(Debug, Clone)]
struct Record {
    strikes: u32,
    last: Instant,
    benched_until: Option<Instant>,
}

/// Strikes by worker name.
#[derive(Debug, Default)]
pub struct Strikes {
    by_name: HashMap<String, Record>,
}

/// What one more strike did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// The worker may hold fewer jobs.
    Throttled { strikes: u32 },
    /// The worker gets nothing for this long.
    Benched { strikes: u32, bench: Duration },
}

impl Strikes {
    /// Charges `name` with one strike (leases of it expired in the sweep at `now`), unless it had one
    /// within the last `timeout` (the lease timeout; the first bench lasts that long too).
    pub fn charge(&mut self, name: &str, now: Instant, timeout: Duration) -> Charge {
        if !self.by_name.contains_key(name) && self.by_name.len() >= MAX_WORKERS {
            if let Some(oldest) = self
                .by_name
                .iter()
                .min_by_key(|(_, r)| r.last)
                .map(|(n, _)| n.clone())
            {
                self.by_name.remove(&oldest);
            }
        }
        let record = self.by_name.entry(name.to_string()).or_insert(Record {
            strikes: 0,
            last: now,
            benched_until: None,
        });
        if record.strikes > 0 && now.saturating_duration_since(record.last) < timeout {
            // The same outage as the last strike.
            return match record.benched_until {
                Some(until) if until > now => Charge::Benched {
                    strikes: record.strikes,
                    bench: until - now,
                },
                _ => Charge::Throttled {
                    strikes: record.strikes,
                },
            };
        }
        record.strikes = record.strikes.saturating_add(1);
        record.last = now;
        if record.strikes < BENCH_AFTER {
            return Charge::Throttled {
                strikes: record.strikes,
            };
        }
        let doublings = (record.strikes - BENCH_AFTER).min(16);
        let bench = timeout
            .saturating_mul(1 << doublings)
            .min(MAX_BENCH)
            .max(Duration::from_millis(100));
        record.benched_until = Some(now + bench);
        Charge::Benched {
            strikes: record.strikes,
            bench,
        }
    }

    /// A result of `name` was accepted: its strikes are forgiven.
    pub fn clear(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }

    /// How long `name` is still benched at `now`, if it is.
    pub fn benched(&self, name: &str, now: Instant) -> Option<Duration> {
        let until = self.by_name.get(name)?.benched_until?;
        (until > now).then(|| until - now)
    }

    /// How many of the `asked` jobs `name` may be leased: halved by every strike, at least one.
    pub fn capacity(&self, name: &str, asked: u32) -> u32 {
        match self.by_name.get(name) {
            None => asked,
            Some(r) => (asked >> r.strikes.min(31)).max(1),
        }
    }
}

/// The expiries of one job: how many, and under which workers.
#[derive(Debug, Clone, Default)]
pub struct Expiries {
    pub count: u32,
    names: Vec<String>,
}

impl Expiries {
    /// Records one expiry under worker `name`.
    pub fn add(&mut self, name: &str) {
        self.count = self.count.saturating_add(1);
        if self.names.len() < MAX_NAMES_PER_JOB && !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_string());
        }
    }

    /// Distinct workers (up to a small bound) whose leases of the job expired.
    pub fn workers(&self) -> usize {
        self.names.len()
    }

    /// Whether the job should fail: `max_attempts` expiries, under enough different workers (when
    /// `max_attempts` allows that many).
    pub fn exhausted(&self, max_attempts: u32) -> bool {
        self.count >= max_attempts
            && self.workers() >= MIN_WORKERS_TO_FAIL.min(max_attempts as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strikes_throttle_then_bench_for_doubling_times_and_one_result_forgives() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(10);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut s = Strikes::default();
        assert_eq!(s.capacity("w", 64), 64);
        assert_eq!(
            s.charge("w", at(0), timeout),
            Charge::Throttled { strikes: 1 }
        );
        // Leases of the same outage expiring in later sweeps: no further strike.
        assert_eq!(
            s.charge("w", at(3), timeout),
            Charge::Throttled { strikes: 1 }
        );
        assert_eq!(
            s.charge("w", at(9), timeout),
            Charge::Throttled { strikes: 1 }
        );
        assert_eq!(s.capacity("w", 64), 32);
        assert_eq!(
            s.charge("w", at(10), timeout),
            Charge::Throttled { strikes: 2 }
        );
        assert_eq!(s.capacity("w", 64), 16);
        assert_eq!(s.benched("w", at(10)), None);
        assert_eq!(
            s.charge("w", at(20), timeout),
            Charge::Benched {
                strikes: 3,
                bench: timeout
            }
        );
        assert_eq!(s.benched("w", at(24)), Some(Duration::from_secs(6)));
        assert_eq!(s.benched("w", at(30)), None);
        assert_eq!(
            s.charge("w", at(30), timeout),
            Charge::Benched {
                strikes: 4,
                bench: 2 * timeout
            }
        );
        for k in 0..40 {
            s.charge("w", at(40 + 10 * k), timeout);
        }
        assert_eq!(s.benched("w", at(430)), Some(MAX_BENCH), "capped");
        assert_eq!(s.capacity("w", 4096), 1, "never below one");
        assert_eq!(s.capacity("other", 7), 7, "others are not charged");
        assert!(s.clear("w"));
        assert_eq!((s.capacity("w", 64), s.benched("w", at(430))), (64, None));
    }

    #[test]
    fn a_job_fails_only_after_expiries_under_two_workers() {
        let mut e = Expiries::default();
        for _ in 0..10 {
            e.add("bad");
        }
        assert_eq!((e.count, e.workers()), (10, 1));
        assert!(!e.exhausted(5), "one worker cannot fail a job");
        e.add("other");
        assert!(e.exhausted(5));
        assert!(!e.exhausted(20));
        // With max_attempts 1 the operator asked for the first expiry to fail the job.
        let mut once = Expiries::default();
        once.add("w");
        assert!(once.exhausted(1));
        for i in 0..20 {
            once.add(&format!("w{i}"));
        }
        assert_eq!(once.workers(), MAX_NAMES_PER_JOB);
    }
}
