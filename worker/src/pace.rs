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

/// What is known of a CPU thread's speed, beside a GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cpu {
    /// The pool has no CPU thread: nothing to keep pace with.
    Absent,
    /// CPU threads compute, and none has finished a job yet.
    Unmeasured,
    /// One CPU thread's nodes per second.
    Rate(f64),
}

/// The next batch of a GPU whose last batch was `current` jobs, at most `most`, at least one. The aim:
/// the jobs the device computes while a CPU thread computes one, `r` = its rate (`gpu`, nodes per
/// second) over a CPU thread's. It grows while `r` is at least the batch, at least doubling each time,
/// since a device may compute more per job in a larger batch (launches overlapped, fewer slowest
/// seeds waited on) than the batch it was measured on shows; it shrinks to `r` once `r` is under half
/// the batch; between the two it stays. So it settles within twice `r`. With no CPU thread it doubles
/// up to `most`; while the CPU threads have not finished a job, or nothing is measured on the device,
/// it stays.
pub fn next_batch(current: usize, most: usize, gpu: Option<f64>, cpu: Cpu) -> usize {
    let most = most.max(1);
    let current = current.clamp(1, most);
    let (Some(g), Cpu::Rate(c)) = (gpu, cpu) else {
        return match (gpu, cpu) {
            (Some(_), Cpu::Absent) => current.saturating_mul(2).min(most),
            _ => current,
        };
    };
    let r = g / c;
    if r.is_nan() {
        current
    } else if r >= current as f64 {
        // `as` saturates: an infinite ratio is `usize::MAX`, then `most`.
        (r.round() as usize)
            .max(current.saturating_mul(2))
            .min(most)
    } else if r < current as f64 / 2.0 {
        (r.round() as usize).clamp(1, most)
    } else {
        current
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
        let rate = |r: f64| Cpu::Rate(r * 1e9);
        // Ten times a CPU thread's rate, measured on one job: ten jobs, within the bound.
        assert_eq!(next_batch(1, 64, Some(10e9), rate(1.0)), 10);
        assert_eq!(next_batch(1, 8, Some(10e9), rate(1.0)), 8);
        // Growing at least doubles: a device may do better in a larger batch than it showed.
        assert_eq!(next_batch(4, 64, Some(4.2e9), rate(1.0)), 8);
        assert_eq!(next_batch(4, 64, Some(4e9), rate(1.0)), 8);
        assert_eq!(next_batch(40, 64, Some(41e9), rate(1.0)), 64);
        // Between half the batch and the batch: it stays.
        assert_eq!(next_batch(8, 64, Some(5e9), rate(1.0)), 8);
        assert_eq!(next_batch(8, 64, Some(4e9), rate(1.0)), 8);
        // Under half: down to the ratio, at least one.
        assert_eq!(next_batch(8, 64, Some(3.4e9), rate(1.0)), 3);
        assert_eq!(next_batch(64, 64, Some(0.3e9), rate(1.0)), 1);
        // Slower than a core (PoCL): one job, and it stays there.
        assert_eq!(next_batch(1, 64, Some(0.8e9), rate(1.0)), 1);
        // Settles within twice the ratio, from one job: 1, 5, 10, then 10 for a ratio of 5.
        let mut seen = vec![1];
        for _ in 0..4 {
            seen.push(next_batch(*seen.last().unwrap(), 64, Some(5e9), rate(1.0)));
        }
        assert_eq!(seen, [1, 5, 10, 10, 10]);
        // No CPU thread: doubling, within the bound.
        assert_eq!(next_batch(3, 64, Some(1e9), Cpu::Absent), 6);
        assert_eq!(next_batch(40, 64, Some(1e9), Cpu::Absent), 64);
        assert_eq!(next_batch(usize::MAX, 64, Some(1e9), Cpu::Absent), 64);
        // CPU threads that have not finished a job, or nothing measured on the device: as it was.
        assert_eq!(next_batch(3, 64, Some(1e9), Cpu::Unmeasured), 3);
        assert_eq!(next_batch(3, 64, None, rate(1.0)), 3);
        assert_eq!(next_batch(3, 64, None, Cpu::Absent), 3);
        assert_eq!(next_batch(0, 64, None, Cpu::Absent), 1);
        assert_eq!(next_batch(9, 4, None, Cpu::Absent), 4);
        assert_eq!(next_batch(9, 0, None, Cpu::Absent), 1);
        // Degenerate rates stay within bounds.
        assert_eq!(next_batch(1, 64, Some(f64::INFINITY), Cpu::Rate(1.0)), 64);
        assert_eq!(
            next_batch(5, 64, Some(f64::INFINITY), Cpu::Rate(f64::INFINITY)),
            5
        );
    }
}
