//! How many jobs a GPU takes at a time: as many as it computes while one CPU thread computes one job, so
//! that a device's share of the jobs follows its speed, and its last batch of a run ends about when the
//! CPU threads' last jobs do (a device slower than a core once held 64 leases while the CPU threads of
//! the cluster idled).

/// A node rate over recent work: sums of nodes and seconds, the older work weighing less with each
/// addition.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    nodes: f64,
    seconds: f64,
}

impl Rate {
    /// The weight the work before an addition keeps.
    const KEEP: f64 = 0.8;

    /// Adds work of `nodes` nodes that took `seconds`.
    pub fn add(&mut self, nodes: u64, seconds: f64) {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return;
        }
        self.nodes = self.nodes * Self::KEEP + nodes as f64;
        self.seconds = self.seconds * Self::KEEP + seconds;
    }

    /// Nodes per second; `None` until some work with nodes has taken some time.
    pub fn per_second(&self) -> Option<f64> {
        (self.nodes > 0.0 && self.seconds > 0.0).then(|| self.nodes / self.seconds)
    }
}

/// The batch a GPU starts with, before anything is measured: one job, so that a device slower than a core
/// holds no more than one.
pub const FIRST_BATCH: usize = 1;

/// The next batch of a GPU whose last batch was `current` jobs, at most `most`: the jobs it computes
/// while a CPU thread computes one (`gpu` and `cpu`, a CPU thread's rate, in nodes per second), at least
/// one. While the CPU's rate is unknown (no CPU thread, or none has finished a job yet), twice the last
/// batch once the device has computed one; the same batch before.
pub fn next_batch(current: usize, most: usize, gpu: Option<f64>, cpu: Option<f64>) -> usize {
    let most = most.max(1);
    match (gpu, cpu) {
        // A ratio that is not a number (both rates infinite) is taken for one job.
        (Some(g), Some(c)) => ((g / c).round() as usize).clamp(1, most),
        (Some(_), None) => current.saturating_mul(2).clamp(1, most),
        (None, _) => current.clamp(1, most),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_weighs_recent_work_more() {
        let mut r = Rate::default();
        assert_eq!(r.per_second(), None, "nothing measured");
        r.add(0, 1.0);
        assert_eq!(r.per_second(), None, "no nodes yet");
        let mut r = Rate::default();
        r.add(100, 0.0);
        assert_eq!(r.per_second(), None, "no time yet");
        r.add(1000, 1.0);
        // 100 * 0.8 + 1000 nodes over 1 second.
        assert_eq!(r.per_second(), Some(1080.0));
        r.add(0, 1.0);
        // (1080 * 0.8) / (1 * 0.8 + 1).
        assert_eq!(r.per_second(), Some(864.0 / 1.8));
        // A time that is no time is left out.
        let before = r;
        r.add(5, f64::NAN);
        r.add(5, -1.0);
        r.add(5, f64::INFINITY);
        assert_eq!(r, before);
    }

    #[test]
    fn a_batch_follows_the_speeds() {
        // Ten times a CPU thread's rate: ten jobs, within the bound.
        assert_eq!(next_batch(1, 64, Some(10e9), Some(1e9)), 10);
        assert_eq!(next_batch(1, 64, Some(10.4e9), Some(1e9)), 10);
        assert_eq!(next_batch(1, 64, Some(10.6e9), Some(1e9)), 11);
        assert_eq!(next_batch(1, 8, Some(10e9), Some(1e9)), 8);
        // Slower than a core (PoCL): one job at a time.
        assert_eq!(next_batch(64, 64, Some(0.3e9), Some(1e9)), 1);
        // The CPU not measured yet: doubling, within the bound.
        assert_eq!(next_batch(3, 64, Some(1e9), None), 6);
        assert_eq!(next_batch(40, 64, Some(1e9), None), 64);
        assert_eq!(next_batch(usize::MAX, 64, Some(1e9), None), 64);
        // Nothing measured on the device: as it was, within the bound, at least one.
        assert_eq!(next_batch(3, 64, None, Some(1e9)), 3);
        assert_eq!(next_batch(0, 64, None, None), 1);
        assert_eq!(next_batch(9, 4, None, None), 4);
        assert_eq!(next_batch(9, 0, None, None), 1);
        // Degenerate rates stay within bounds.
        assert_eq!(next_batch(1, 64, Some(f64::INFINITY), Some(1.0)), 64);
        assert_eq!(
            next_batch(5, 64, Some(f64::INFINITY), Some(f64::INFINITY)),
            1
        );
    }
}
