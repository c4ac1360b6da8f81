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
/// the batch; between the two it stays. So it settles within twice `r` (between [`Pacer`]'s probes).
/// With no CPU thread it doubles
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

/// Batches a GPU keeps the same size, with both rates known, before it tries one twice as large (a
/// probe): a device measured on small batches may compute more per second on larger ones (more of it
/// busy) than any small batch shows, and would otherwise never learn it (a fast GPU whose one-job batches
/// measured under a core's rate stayed at one job).
pub const PROBE_EVERY: usize = 8;

/// How much faster than before each of a probe's two batches must compute, per second, for the larger
/// size to count as a new regime (twice the jobs in the same time is twice the rate).
pub const PROBE_GAIN: f64 = 1.5;

/// The largest batch a device reaches while no CPU thread has finished its first job (then only the
/// device's job count bounds the ratio, and jobs differ in size).
pub const UNMEASURED_MOST: usize = 8;

/// Where a probe stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Probe {
    /// No probe.
    Off,
    /// The probe's first batch runs; before it the batch was `from` and the rate `before`.
    First { from: usize, before: f64 },
    /// Its first batch gained; the second, confirming, runs (its first measured `own`).
    Second { from: usize, before: f64, own: Rate },
}

/// One GPU's batch, kept in pace with the CPU threads beside it as its batches finish.
#[derive(Debug, Clone)]
pub struct Pacer {
    batch: usize,
    most: usize,
    rate: Rate,
    /// Jobs the device has computed.
    jobs: u64,
    /// Measured batches since the size last changed.
    steady: usize,
    probe: Probe,
}

impl Pacer {
    /// A device that takes at most `most` jobs at a time (at least one), starting at [`FIRST_BATCH`].
    pub fn new(most: usize) -> Pacer {
        let most = most.max(1);
        Pacer {
            batch: FIRST_BATCH.clamp(1, most),
            most,
            rate: Rate::default(),
            jobs: 0,
            steady: 0,
            probe: Probe::Off,
        }
    }

    /// The jobs it takes at a time now.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Its rate over its recent batches, nodes per second.
    pub fn per_second(&self) -> Option<f64> {
        self.rate.per_second()
    }

    /// A batch failed (computed on the CPU): a probe under way ends, the size it had stays.
    pub fn failed(&mut self) {
        self.probe = Probe::Off;
    }

    /// A batch of `jobs` jobs that searched `nodes` nodes in `seconds`, taken at another size than the
    /// one in force (before the last change, while the batch before it ran): its jobs and its rate count,
    /// but it decides nothing. A probe is judged on batches of its own size only.
    pub fn measured(&mut self, jobs: usize, nodes: u64, seconds: f64) {
        self.jobs = self.jobs.saturating_add(jobs as u64);
        self.rate.add(nodes, seconds);
    }

    /// After a batch of `jobs` jobs that searched `nodes` nodes in `seconds`, with `cpu` known of a CPU
    /// thread: the next batch, from 1 to the most.
    ///
    /// - With a CPU thread's rate: [`next_batch`]; and after [`PROBE_EVERY`] measured batches of one
    ///   size, two batches of twice that size (a probe). Only if each computes at least [`PROBE_GAIN`]
    ///   times the rate before it does the rate start afresh from the two (the smaller batches no
    ///   longer say what the device does) and [`next_batch`] go on from there; otherwise the size goes
    ///   back to what it was.
    /// - While the CPU threads have not finished a job: the jobs this device computed meanwhile bound
    ///   the ratio from below (they started together), so the batch grows to that count once it is
    ///   twice the batch, up to [`UNMEASURED_MOST`] (jobs differ in size: a count is weak evidence).
    /// - With no CPU thread: doubling ([`next_batch`]).
    pub fn after(&mut self, jobs: usize, nodes: u64, seconds: f64, cpu: Cpu) -> usize {
        self.jobs = self.jobs.saturating_add(jobs as u64);
        let mut own = Rate::default();
        own.add(nodes, seconds);
        let gained = |before: f64| own.per_second().is_some_and(|r| r >= before * PROBE_GAIN);
        let current = self.batch;
        let next = match std::mem::replace(&mut self.probe, Probe::Off) {
            Probe::First { from, before } if gained(before) => {
                self.rate.add(nodes, seconds);
                self.probe = Probe::Second { from, before, own };
                current
            }
            Probe::Second {
                before, own: first, ..
            } if gained(before) => {
                self.rate = first;
                self.rate.add(nodes, seconds);
                next_batch(current, self.most, self.per_second(), cpu)
            }
            Probe::First { from, .. } | Probe::Second { from, .. } => {
                self.rate.add(nodes, seconds);
                from
            }
            Probe::Off => {
                self.rate.add(nodes, seconds);
                self.paced(current, cpu)
            }
        };
        if next != current || self.probe != Probe::Off {
            self.steady = 0;
        }
        self.batch = next;
        next
    }

    /// The next batch outside a probe (which it may start).
    fn paced(&mut self, current: usize, cpu: Cpu) -> usize {
        let next = match cpu {
            Cpu::Unmeasured => {
                let done = usize::try_from(self.jobs).unwrap_or(usize::MAX);
                let most = self.most.min(UNMEASURED_MOST);
                // (A batch over `most` is never seen here: only probes and a CPU rate take it further.)
                match done / 2 >= current {
                    true => done.min(most),
                    false => current,
                }
            }
            _ => next_batch(current, self.most, self.per_second(), cpu),
        };
        let before = match (self.per_second(), cpu) {
            (Some(before), Cpu::Rate(_)) if next == current => before,
            _ => return next,
        };
        self.steady += 1;
        let probe = current.saturating_mul(2).min(self.most);
        if self.steady >= PROBE_EVERY && probe != current {
            self.probe = Probe::First {
                from: current,
                before,
            };
            return probe;
        }
        next
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

    /// A device whose batch time does not grow with its batch (most of it idle on one job) measures
    /// under a core on one job, yet keeps pace at many: probes find it (issue 39, second review).
    #[test]
    fn a_probe_finds_a_device_that_is_faster_on_larger_batches() {
        // A CPU thread: 1e9 nodes a second; every job 1e9 nodes. The device takes 1.25 s a batch of
        // up to 32 jobs, then longer in proportion: 0.8 jobs per CPU job at one job, 25.6 at 32.
        let cpu = Cpu::Rate(1e9);
        let seconds = |b: usize| 1.25 * (b.max(32) as f64 / 32.0);
        let mut p = Pacer::new(64);
        let mut sizes = Vec::new();
        for _ in 0..200 {
            let b = p.batch();
            sizes.push(b);
            p.after(b, b as u64 * 1_000_000_000, seconds(b), cpu);
        }
        // One job for PROBE_EVERY batches (it measured under a core), then a probe...
        assert_eq!(&sizes[..PROBE_EVERY], &[1; PROBE_EVERY]);
        assert_eq!(sizes[PROBE_EVERY], 2);
        // ... and in the end within twice its ratio at full occupancy (25.6), at least half of it.
        let last = &sizes[150..];
        assert!(
            last.iter().all(|&b| (13..=64).contains(&b)),
            "{last:?} (all: {sizes:?})"
        );
        // A device truly slower than a core: a probe is one batch of two, then back to one.
        let mut p = Pacer::new(64);
        let mut sizes = Vec::new();
        for _ in 0..40 {
            let b = p.batch();
            sizes.push(b);
            p.after(b, b as u64 * 1_000_000_000, 1.25 * b as f64, cpu);
        }
        assert_eq!(sizes.iter().filter(|&&b| b == 2).count(), 4, "{sizes:?}");
        assert!(sizes.iter().all(|&b| b <= 2), "{sizes:?}");
        assert!(
            sizes.windows(2).all(|w| w[0] == 1 || w[1] == 1),
            "{sizes:?}"
        );
        // No probe while the CPU's rate is unknown, nor beyond the bound.
        let mut p = Pacer::new(1);
        for _ in 0..3 * PROBE_EVERY {
            assert_eq!(p.after(1, 1, 1.0, cpu), 1);
        }
        let mut p = Pacer::new(64);
        for _ in 0..3 * PROBE_EVERY {
            assert_eq!(p.after(0, 0, 1.0, cpu), 1, "nothing measured");
        }
    }

    /// While no CPU thread has finished its first job, every job the device finished meanwhile shows it
    /// at least that much faster than a thread: its batch grows with that count, not before, and no
    /// further than [`UNMEASURED_MOST`].
    #[test]
    fn a_device_grows_before_the_cpus_first_job_ends() {
        let mut p = Pacer::new(64);
        assert_eq!(p.batch(), FIRST_BATCH);
        assert_eq!(p.after(1, 10, 1.0, Cpu::Unmeasured), 1, "1 job done");
        assert_eq!(p.after(1, 10, 1.0, Cpu::Unmeasured), 2, "2 jobs done");
        assert_eq!(p.after(2, 10, 1.0, Cpu::Unmeasured), 4, "4 jobs done");
        assert_eq!(
            p.after(1, 10, 1.0, Cpu::Unmeasured),
            4,
            "5 jobs done: under twice 4"
        );
        assert_eq!(p.after(3, 10, 1.0, Cpu::Unmeasured), 8, "8 jobs done");
        assert_eq!(p.after(100, 10, 1.0, Cpu::Unmeasured), UNMEASURED_MOST);
        // No probe without a CPU rate: it stays.
        for _ in 0..3 * PROBE_EVERY {
            assert_eq!(p.after(8, 10, 1.0, Cpu::Unmeasured), UNMEASURED_MOST);
        }
        // Within a smaller bound.
        let mut small = Pacer::new(3);
        assert_eq!(small.after(100, 10, 1.0, Cpu::Unmeasured), 3);
        // Then the CPU's rate decides, and the batches before it count for no probe: a ratio of 6
        // keeps 8 for PROBE_EVERY batches, then the probe.
        let cpu = Cpu::Rate(10.0 / 6.0);
        for _ in 0..PROBE_EVERY - 1 {
            assert_eq!(p.after(8, 10, 1.0, cpu), 8);
        }
        assert_eq!(p.after(8, 10, 1.0, cpu), 16, "the probe");
        assert_eq!(p.after(16, 10, 1.0, cpu), 8, "it gained nothing: back");
        // A CPU thread far faster: down to one.
        assert_eq!(p.after(8, 10, 1.0, Cpu::Rate(1e9)), 1);
        // Nothing done yet: stays at one; without CPU threads, doubling.
        let mut p = Pacer::new(64);
        assert_eq!(p.after(0, 0, 1.0, Cpu::Unmeasured), 1);
        assert_eq!(p.after(1, 5, 1.0, Cpu::Absent), 2);
        // (0 * 0.8 + 5) nodes over (1 * 0.8 + 1) seconds.
        assert_eq!(p.per_second(), Some(5.0 / 1.8));
    }

    /// A batch taken at the size before a probe (a GPU's thread hands the next batch over while one
    /// runs) is measured and decides nothing: the probe is judged on its own two batches. Before, such a
    /// batch came back first and ended every probe (found by a review).
    #[test]
    fn a_batch_taken_before_a_probe_does_not_end_it() {
        let cpu = Cpu::Rate(1e9);
        let mut p = Pacer::new(64);
        p.batch = 4;
        for _ in 0..PROBE_EVERY - 1 {
            assert_eq!(p.after(4, 4_000_000_000, 4.0 / 3.0, cpu), 4);
        }
        assert_eq!(
            p.after(4, 4_000_000_000, 4.0 / 3.0, cpu),
            8,
            "the probe starts"
        );
        // The batch of 4 handed over before it comes back, at the old rate: nothing changes.
        p.measured(4, 4_000_000_000, 4.0 / 3.0);
        assert_eq!(p.batch(), 8);
        assert!(matches!(p.probe, Probe::First { from: 4, .. }), "{p:?}");
        assert_eq!(p.jobs, 8 * 4 + 4, "its jobs count");
        // The probe's two batches gain: the new size holds.
        assert_eq!(p.after(8, 8_000_000_000, 1.0, cpu), 8, "confirming");
        assert_eq!(p.after(8, 8_000_000_000, 1.0, cpu), 16, "ratio 8 at 8");
    }

    /// A probe counts only when both its batches gain: one lucky batch (heavier jobs) does not move the
    /// size, and a probe cut short by a failed batch ends at the size it had.
    #[test]
    fn a_probe_needs_two_batches_that_gain() {
        let cpu = Cpu::Rate(1e9);
        // The device at 3e9 nodes a second: ratio 3 at a batch of 4, where it stays (between half the
        // batch and the batch).
        let at_3e9 =
            |p: &mut Pacer, b: usize| p.after(b, b as u64 * 1_000_000_000, b as f64 / 3.0, cpu);
        let steady = |p: &mut Pacer| {
            for _ in 0..PROBE_EVERY - 1 {
                assert_eq!(at_3e9(p, 4), 4, "{p:?}");
            }
        };
        let mut p = Pacer::new(64);
        p.batch = 4;
        steady(&mut p);
        assert_eq!(at_3e9(&mut p, 4), 8, "the probe starts");
        // Its first batch gains (8e9), its second not: back to 4.
        assert_eq!(p.after(8, 8_000_000_000, 1.0, cpu), 8, "confirming");
        assert_eq!(at_3e9(&mut p, 8), 4, "back");
        // A probe whose first batch does not gain: back at once.
        steady(&mut p);
        assert_eq!(at_3e9(&mut p, 4), 8);
        assert_eq!(at_3e9(&mut p, 8), 4);
        // A probe cut by a failed batch: the next batch is measured as any other.
        steady(&mut p);
        assert_eq!(at_3e9(&mut p, 4), 8);
        p.failed();
        assert_eq!(p.probe, Probe::Off);
        // Both gain: the rate starts afresh from the two, and the ratio decides from there.
        let mut p = Pacer::new(64);
        p.batch = 4;
        steady(&mut p);
        assert_eq!(at_3e9(&mut p, 4), 8);
        assert_eq!(p.after(8, 8_000_000_000, 1.0, cpu), 8);
        assert_eq!(
            p.after(8, 8_000_000_000, 1.0, cpu),
            16,
            "ratio 8 at a batch of 8"
        );
        assert_eq!(p.per_second(), Some(8e9));
        // A probe gaining less than PROBE_GAIN (1.2 times) counts for nothing: back.
        let mut p = Pacer::new(64);
        p.batch = 4;
        steady(&mut p);
        assert_eq!(at_3e9(&mut p, 4), 8);
        assert_eq!(p.after(8, 8_000_000_000, 8.0 / 3.6, cpu), 4);
        // A size the ratio asks for wins over a probe due at the same batch.
        steady(&mut p);
        assert_eq!(p.after(4, 400_000_000_000, 1.0, cpu), 64);
        // A change of size starts the count to the next probe afresh: after a shrink, PROBE_EVERY
        // batches at the new size, then the probe.
        let mut p = Pacer::new(64);
        p.batch = 4;
        for _ in 0..PROBE_EVERY - 3 {
            assert_eq!(at_3e9(&mut p, 4), 4);
        }
        assert_eq!(
            p.after(4, 1_000_000, 100.0, cpu),
            1,
            "far slower: down to one"
        );
        for _ in 0..PROBE_EVERY - 1 {
            assert_eq!(p.after(1, 1_000_000, 100.0, cpu), 1, "{p:?}");
        }
        assert_eq!(p.after(1, 1_000_000, 100.0, cpu), 2, "the probe");
        // At the bound there is nothing to probe.
        let mut p = Pacer::new(4);
        p.batch = 4;
        for _ in 0..3 * PROBE_EVERY {
            assert_eq!(at_3e9(&mut p, 4), 4);
        }
    }
}
