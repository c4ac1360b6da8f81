//! A run's progress over time for the status page's chart: `(unix time, jobs done, total)` points, at most
//! a few hundred whatever the run's length. When full, every other point goes and the spacing doubles, so
//! the whole run stays in view at a coarser grain. In memory only: it starts again with each incarnation.

use serde::Serialize;

/// Most points kept.
const MAX_POINTS: usize = 256;
/// Spacing of the points at first, in seconds.
const FIRST_STEP: f64 = 2.0;

/// One point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Seconds since the Unix epoch.
    pub unix: f64,
    pub jobs: u64,
    /// The partial total as a decimal string (u128).
    #[serde(serialize_with = "as_string")]
    pub total: u128,
}

fn as_string<S: serde::Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Seconds since the Unix epoch, now (the time axis of histories and of the status page).
pub fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The points of one run.
#[derive(Debug, Clone)]
pub struct History {
    step: f64,
    points: Vec<Point>,
}

impl Default for History {
    fn default() -> History {
        History {
            step: FIRST_STEP,
            points: Vec::new(),
        }
    }
}

impl History {
    /// Records the run's state at `unix`: a new point once `step` has passed since the one before the
    /// last, else the last point moves to now (so the latest state is always the last point).
    pub fn record(&mut self, unix: f64, jobs: u64, total: u128) {
        let point = Point { unix, jobs, total };
        let n = self.points.len();
        if n >= 2 && unix - self.points[n - 2].unix < self.step {
            self.points[n - 1] = point;
            return;
        }
        self.points.push(point);
        if self.points.len() > MAX_POINTS {
            let last = *self.points.last().expect("not empty");
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            if self.points.last() != Some(&last) {
                self.points.push(last);
            }
            self.step *= 2.0;
        }
    }

    pub fn points(&self) -> &[Point] {
        &self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_spaced_and_the_latest_state_is_last() {
        let mut h = History::default();
        h.record(100.0, 0, 0);
        h.record(100.5, 1, 10);
        h.record(101.0, 2, 20);
        assert_eq!(h.points().len(), 2, "{:?}", h.points());
        assert_eq!(h.points()[1].jobs, 2);
        h.record(102.5, 3, 30);
        assert_eq!(h.points().len(), 3);
        assert_eq!(h.points().last().unwrap().jobs, 3);
    }

    #[test]
    fn a_long_run_stays_bounded_and_keeps_its_ends() {
        let mut h = History::default();
        for i in 0..100_000u64 {
            h.record(i as f64, i, i as u128 * 7);
        }
        let p = h.points();
        assert!(p.len() <= MAX_POINTS, "{}", p.len());
        assert!(p.len() >= MAX_POINTS / 4, "{}", p.len());
        assert_eq!(p[0].jobs, 0);
        assert_eq!(p.last().unwrap().jobs, 99_999);
        assert!(p.windows(2).all(|w| w[0].unix < w[1].unix));
    }
}
