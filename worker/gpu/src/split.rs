//! How many launches a batch of jobs is cut into: as many as keep each launch's device time at least
//! [`COVER`] times the host's time to prepare one, up to [`LAUNCHES`]. A launch is expanded to fill the
//! device whatever its jobs, so its preparation costs about the same for one job as for a hundred: cut
//! too fine, a batch waits on the host (a mixed worker's first batches, of one to eight jobs, were eight
//! launches of about a million seeds each, 50 to 90 ms of host time against a few of the device's).

/// Launches a batch's jobs of one board size are cut into, at most: smaller launches have smaller
/// seeds (each is expanded to fill the device), so a launch's slowest seed ends sooner, and the host
/// prepares the next while the device runs one. Fewer where a launch would take the device less than
/// [`COVER`] times its preparation ([`Pace`]).
pub const LAUNCHES: usize = 8;

/// Each launch's device time against the host's time to prepare the next. With [`crate::IN_FLIGHT`]
/// launches under way, the host prepares one while the device runs the others: at twice, it keeps
/// ahead even when a launch ends early.
pub const COVER: f64 = 2.0;

/// Board sizes the pace keeps apart (N up to 32).
const SIZES: usize = 33;

/// The weight a measure keeps when a new one comes.
const KEEP: f64 = 0.75;

/// What the host and the device take per launch and per job, recent launches weighing more.
#[derive(Debug, Clone)]
pub struct Pace {
    /// Host seconds to prepare one launch.
    prepare: Option<f64>,
    /// Device seconds per job, by board size.
    per_job: [Option<f64>; SIZES],
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            prepare: None,
            per_job: [None; SIZES],
        }
    }
}

/// `old` moved towards `new`; a value that is not a finite non-negative number is ignored.
fn blend(old: Option<f64>, new: f64) -> Option<f64> {
    if !(new.is_finite() && new >= 0.0) {
        return old;
    }
    Some(match old {
        Some(o) => o * KEEP + new * (1.0 - KEEP),
        None => new,
    })
}

impl Pace {
    /// The host took `seconds` to prepare a launch.
    pub fn prepared(&mut self, seconds: f64) {
        self.prepare = blend(self.prepare, seconds);
    }

    /// The device searched a launch of `jobs` jobs of N = `n` in `seconds` (its own time: from its
    /// start, or the end of the launch before it, to its end).
    pub fn searched(&mut self, n: u8, jobs: usize, seconds: f64) {
        if jobs == 0 {
            return;
        }
        if let Some(slot) = self.per_job.get_mut(usize::from(n)) {
            *slot = blend(*slot, seconds / jobs as f64);
        }
    }

    /// The launches for `jobs` jobs of N = `n`: from 1 to [`LAUNCHES`] (and no more than the jobs),
    /// each at least [`COVER`] times a launch's preparation; [`LAUNCHES`] (as many as the jobs allow)
    /// until both are measured.
    pub fn launches(&self, n: u8, jobs: usize) -> usize {
        let most = LAUNCHES.min(jobs).max(1);
        let per_job = self.per_job.get(usize::from(n)).copied().flatten();
        match (self.prepare, per_job) {
            (Some(p), Some(j)) if p > 0.0 => {
                // `as` saturates: an enormous ratio is `usize::MAX`, then `most`.
                ((jobs as f64 * j / (COVER * p)) as usize).clamp(1, most)
            }
            _ => most,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_measured_a_batch_takes_the_most_launches_its_jobs_allow() {
        let mut pace = Pace::default();
        assert_eq!(pace.launches(21, 300), LAUNCHES);
        assert_eq!(pace.launches(21, 3), 3);
        assert_eq!(pace.launches(21, 1), 1);
        assert_eq!(pace.launches(21, 0), 1);
        // One of the two measured is not enough.
        pace.prepared(0.08);
        assert_eq!(pace.launches(21, 300), LAUNCHES);
        let mut pace = Pace::default();
        pace.searched(21, 10, 0.1);
        assert_eq!(pace.launches(21, 300), LAUNCHES);
    }

    /// The mixed worker's start at N = 21 on an H200 (2026-11-30): 80 ms to prepare a launch, 12 ms
    /// of the device per job. Eight jobs were eight launches, 640 ms of the host for 96 ms of the
    /// device; now one. Three hundred jobs (3.6 s of the device) are still cut into eight.
    #[test]
    fn a_launch_lasts_at_least_twice_its_preparation() {
        let mut pace = Pace::default();
        pace.prepared(0.08);
        pace.searched(21, 1, 0.012);
        assert_eq!(pace.launches(21, 8), 1);
        assert_eq!(pace.launches(21, 13), 1, "156 ms: under two preparations");
        assert_eq!(pace.launches(21, 14), 1, "168 ms: one launch of 168");
        assert_eq!(pace.launches(21, 27), 2, "324 ms: two of 162");
        assert_eq!(pace.launches(21, 300), LAUNCHES);
        // Other board sizes are measured apart.
        assert_eq!(pace.launches(22, 8), LAUNCHES);
        pace.searched(22, 2, 2.0);
        assert_eq!(pace.launches(22, 8), LAUNCHES, "a second a job");
        assert_eq!(pace.launches(22, 3), 3);
    }

    #[test]
    fn recent_launches_weigh_more_and_nonsense_is_ignored() {
        let mut pace = Pace::default();
        pace.prepared(0.1);
        pace.prepared(0.2);
        assert!((pace.prepare.unwrap() - 0.125).abs() < 1e-12);
        pace.prepared(f64::NAN);
        pace.prepared(-1.0);
        pace.prepared(f64::INFINITY);
        assert!((pace.prepare.unwrap() - 0.125).abs() < 1e-12);
        pace.searched(20, 4, 0.4);
        pace.searched(20, 0, 5.0);
        pace.searched(99, 1, 5.0);
        assert_eq!(pace.per_job[20], Some(0.1));
        // A host that takes no time: as many launches as allowed; a device that takes none: one.
        let mut quick = Pace::default();
        quick.prepared(0.0);
        quick.searched(20, 1, 0.0);
        assert_eq!(quick.launches(20, 100), LAUNCHES);
        quick.prepared(1.0);
        assert_eq!(quick.launches(20, 100), 1);
    }
}
