//! Jobs on a device: their units gathered into batches of seeds sized to fill it, the device's answer
//! checked, and each job's result assembled exactly as the CPU would.

use nqueens_common::kernel::balance::Balance;
use nqueens_common::kernel::seeds::{Batch, SEED_WORDS};
use nqueens_common::kernel::Totals;
use nqueens_common::{Job, JobResult, Work};

use crate::{DeviceInfo, GpuError, Launch};

/// Seeds of every batch searched again on the host, drawn at random, whose answers must equal the
/// device's exactly. A device wrong on a share `f` of its seeds escapes a batch's checks with probability `(1 - f)^8`.
const SPOT_CHECKS: usize = 8;

/// The seeds of a batch of `n` to search again on the host: all of a small batch, else [`SPOT_CHECKS`]
/// drawn anew (a device's faults need not sit at fixed places). 8 of the (default) 8 seeds per device
/// thread a batch holds.
fn spot_checks(n: usize) -> impl Iterator<Item = usize> {
    use std::hash::{BuildHasher, Hasher};
    // A freshly keyed SipHash of nothing: random enough to pick seeds, with no dependency.
    let mut state = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let all = n <= SPOT_CHECKS;
    (0..n.min(SPOT_CHECKS)).map(move |i| {
        if all {
            return i;
        }
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    })
}

/// A device ready to search, with the checks around it.
pub struct Gpu {
    launch: Box<dyn Launch>,
    /// Search nodes the device itself visited (for rates).
    pub device_nodes: u64,
    /// How long the last launch took, copies included.
    pub last_launch: std::time::Duration,
    /// What calibration measured, if the shape was calibrated rather than given.
    pub calibration: Option<crate::Calibration>,
    /// How evenly the launches since the device opened fell on its lanes.
    pub balance: Balance,
    /// What a launch takes of the host and of the device: how finely batches are cut.
    pub(crate) pace: crate::split::Pace,
}

impl Gpu {
    /// Wraps an opened device.
    pub fn new(launch: Box<dyn Launch>) -> Gpu {
        Gpu {
            launch,
            device_nodes: 0,
            last_launch: std::time::Duration::ZERO,
            calibration: None,
            balance: Balance::default(),
            pace: Default::default(),
        }
    }

    /// The device.
    pub fn info(&self) -> &DeviceInfo {
        self.launch.info()
    }

    /// Seeds a batch should have to fill the device: `per_thread` for each thread, or for each block
    /// where a block searches a seed together.
    pub fn target_seeds(&self) -> usize {
        let info = self.info();
        let searchers = info.threads / info.shape.threads_per_seed() as usize;
        searchers.max(1) * info.shape.per_thread.max(1) as usize
    }

    /// Searches every seed of `batch` and returns the totals of its groups, once the answer is checked.
    pub fn search(&mut self, batch: &Batch) -> Result<Vec<Totals>, GpuError> {
        let started = self.submit(batch)?;
        self.collect(batch, started)
    }

    /// Starts the search of `batch` on the device; [`Gpu::collect`] waits for it and checks the answer.
    /// Up to [`IN_FLIGHT`] launches may be under way at once.
    pub fn submit(&mut self, batch: &Batch) -> Result<Started, GpuError> {
        let n = batch.len();
        if n > u32::MAX as usize {
            return Err(GpuError::TooLarge(format!("{n} seeds")));
        }
        let at = std::time::Instant::now();
        let pending = if n == 0 {
            crate::Pending::ready(Vec::new())
        } else {
            self.launch
                .submit(batch.seeds(), batch.forbid(), batch.tails(), batch.full())?
        };
        Ok(Started { pending, at })
    }

    /// Waits for the search of `batch` that `started` stands for and returns the totals of its groups,
    /// once the answer is checked.
    pub fn collect(&mut self, batch: &Batch, started: Started) -> Result<Vec<Totals>, GpuError> {
        let n = batch.len();
        let out = started.pending.wait()?;
        self.last_launch = started.at.elapsed();
        if out.len() != 2 * n {
            return Err(GpuError::BadAnswer(format!(
                "{} words for {n} seeds",
                out.len()
            )));
        }
        let mut nodes = 0u64;
        for (i, o) in out.chunks_exact(2).enumerate() {
            // Every seed has a free square to try, so at least one node, and each completion is a node.
            if o[0] == u64::MAX || o[1] == u64::MAX || o[1] == 0 || o[0] > o[1] {
                let s = &batch.seeds()[i * SEED_WORDS..][..SEED_WORDS];
                return Err(GpuError::BadAnswer(format!(
                    "seed {i} of {n} {s:?}: {} completions, {} nodes",
                    o[0], o[1]
                )));
            }
            nodes = nodes.saturating_add(o[1]);
        }
        // Plausible is not right: a few seeds searched again on the host must agree exactly.
        for i in spot_checks(n) {
            let host = batch.search(i);
            if host != (out[2 * i], out[2 * i + 1]) {
                let s = &batch.seeds()[i * SEED_WORDS..][..SEED_WORDS];
                return Err(GpuError::BadAnswer(format!(
                    "seed {i} of {n} {s:?}: the device found {} completions in {} nodes, the host {} in {}",
                    out[2 * i], out[2 * i + 1], host.0, host.1
                )));
            }
        }
        self.device_nodes = self.device_nodes.saturating_add(nodes);
        let info = self.info();
        let searchers = info.threads / info.shape.threads_per_seed().max(1) as usize;
        self.balance.add(&Balance::of(&out, searchers));
        batch.finish(&out).ok_or_else(|| {
            GpuError::BadAnswer("the answer's sums overflow (a faulty device)".into())
        })
    }
}

/// Launches under way at once in a pipeline: while the device runs one, the host checks the one before
/// and starts the next, so the device never waits for the host, and the last seeds of one launch overlap
/// the first of the next (a launch otherwise ends on its slowest seed, with most of the device idle).
pub const IN_FLIGHT: usize = 2;

/// A launch started by [`Gpu::submit`].
pub struct Started {
    pending: crate::Pending,
    at: std::time::Instant,
}

/// A job's result from the device's totals and the part settled on the CPU: a sum past 64 bits, or
/// counts that no search of the job can give ([`Job::check`]), is a faulty answer, refused (the batch
/// is then computed on the CPU), never wrapped into a small count.
pub(crate) fn finish(job: &Job, work: &Work, t: Totals) -> Result<JobResult, GpuError> {
    let r = work
        .finish(t)
        .ok_or_else(|| GpuError::BadAnswer("a job's sums pass 64 bits (a faulty device)".into()))?;
    job.check(&r)
        .map_err(|e| GpuError::BadAnswer(format!("{e} (a faulty device)")))?;
    Ok(r)
}

/// One prepared launch: the jobs' indices, their work, and the seeds.
pub(crate) struct Prepared {
    pub(crate) members: Vec<(usize, nqueens_common::Work)>,
    pub(crate) batch: Batch,
}

/// The launch of `jobs` (their indices in a call, and the jobs), all of N = `n`, expanded to at least
/// `target` seeds.
pub(crate) fn prepare(jobs: &[(usize, &Job)], n: u8, target: usize) -> Result<Prepared, GpuError> {
    let mut batch = Batch::new(n);
    let mut members = Vec::with_capacity(jobs.len());
    for &(i, job) in jobs {
        let work = job.work();
        batch
            .push_group(&work.units)
            .ok_or_else(|| GpuError::TooLarge(format!("{} jobs of N = {n}", jobs.len())))?;
        members.push((i, work));
    }
    batch.expand(target);
    Ok(Prepared { members, batch })
}

/// Computes many jobs of one board size on `gpu`, `per_batch` jobs to a launch, with `threads` host
/// threads preparing the next batches while the device searches. Calls `done(i, result)` for the `i`-th
/// job as each batch completes; stops at the first error.
pub fn run_pipelined(
    gpu: &mut Gpu,
    jobs: &[Job],
    per_batch: usize,
    threads: usize,
    mut done: impl FnMut(usize, JobResult),
) -> Result<(), GpuError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let Some(first) = jobs.first() else {
        return Ok(());
    };
    let n = first.plan().n();
    if jobs.iter().any(|j| j.plan().n() != n) {
        return Err(GpuError::TooLarge(
            "jobs of several board sizes in one pipeline".into(),
        ));
    }
    let chunks: Vec<Vec<(usize, &Job)>> = jobs
        .iter()
        .enumerate()
        .collect::<Vec<_>>()
        .chunks(per_batch.max(1))
        .map(<[_]>::to_vec)
        .collect();
    let target = gpu.target_seeds();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Prepared, GpuError>>(threads.max(1));
        for _ in 0..threads.max(1) {
            let (tx, chunks, next, stop) = (tx.clone(), &chunks, &next, &stop);
            scope.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= chunks.len() || stop.load(Ordering::Relaxed) {
                    return;
                }
                if tx.send(prepare(&chunks[k], n, target)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let result = (|| {
            let mut prepared = rx.iter();
            let mut flight = std::collections::VecDeque::with_capacity(IN_FLIGHT);
            loop {
                while flight.len() < IN_FLIGHT {
                    let Some(p) = prepared.next() else { break };
                    let p = p?;
                    let started = gpu.submit(&p.batch)?;
                    flight.push_back((p, started));
                }
                let Some((p, started)) = flight.pop_front() else {
                    return Ok(());
                };
                let totals = gpu.collect(&p.batch, started)?;
                for ((i, work), t) in p.members.into_iter().zip(totals) {
                    done(i, finish(&jobs[i], &work, t)?);
                }
            }
        })();
        stop.store(true, Ordering::Relaxed);
        // Unblock preparers waiting to send.
        for _ in rx.try_iter() {}
        drop(rx);
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, DeviceInfo};
    use nqueens_common::{Plan, Strategy};

    /// A test double of a device that answers `answer` to every launch.
    struct Answers(DeviceInfo, Vec<u64>);

    impl Launch for Answers {
        fn info(&self) -> &DeviceInfo {
            &self.0
        }
        fn launch(
            &mut self,
            _: &[u32],
            _: &[u32],
            _: &[u32],
            _: u32,
        ) -> Result<Vec<u64>, GpuError> {
            Ok(self.1.clone())
        }
    }

    fn gpu(answer: Vec<u64>) -> Gpu {
        let info = DeviceInfo {
            backend: Backend::OpenCl,
            index: 0,
            name: "double".into(),
            threads: 64,
            shape: crate::Shape::default_for(Backend::OpenCl),
        };
        Gpu::new(Box::new(Answers(info, answer)))
    }

    /// A batch of every job of N = 11, expanded to many seeds, and the true answer to it.
    fn batch() -> (Batch, Vec<u64>) {
        let plan = Plan::new(11, Strategy::D4).unwrap();
        let jobs: Vec<Job> = plan.jobs().map(|k| plan.job(&k).unwrap()).collect();
        let of_size: Vec<(usize, &Job)> = jobs.iter().enumerate().collect();
        let p = prepare(&of_size, 11, 4096).unwrap();
        let truth = p.batch.search_all();
        assert!(p.batch.len() > 4 * SPOT_CHECKS, "{} seeds", p.batch.len());
        (p.batch, truth)
    }

    /// A device whose every answer is plausible (completions at most nodes, a node at least) but
    /// wrong is caught by the seeds searched again on the host, whichever they are. Before, only
    /// plausibility was checked: such a device's counts were sealed and reported, and only the
    /// sampled verification of other workers could catch them (found by a review, 2026-11-24, a
    /// later session).
    #[test]
    fn a_plausible_but_wrong_answer_is_caught_by_the_spot_checks() {
        let (batch, truth) = batch();
        assert_eq!(
            gpu(truth.clone()).search(&batch).unwrap(),
            batch.finish(&truth).unwrap()
        );
        let mut wrong = truth.clone();
        for o in wrong.chunks_exact_mut(2) {
            o[0] = if o[0] < o[1] { o[0] + 1 } else { o[0] - 1 };
        }
        for _ in 0..4 {
            let err = gpu(wrong.clone()).search(&batch).unwrap_err();
            assert!(matches!(err, GpuError::BadAnswer(_)), "{err:?}");
        }
        // Wrong nodes alone are caught too.
        let mut nodes = truth.clone();
        for o in nodes.chunks_exact_mut(2) {
            o[1] += 1;
        }
        assert!(matches!(
            gpu(nodes).search(&batch),
            Err(GpuError::BadAnswer(_))
        ));
    }

    /// The seeds checked are drawn anew for every batch, in range, and all of a small batch.
    #[test]
    fn spot_checks_are_drawn_anew_in_range() {
        assert_eq!(spot_checks(3).collect::<Vec<_>>(), [0, 1, 2]);
        let draws: Vec<Vec<usize>> = (0..4).map(|_| spot_checks(1 << 20).collect()).collect();
        for d in &draws {
            assert_eq!(d.len(), SPOT_CHECKS);
            assert!(d.iter().all(|&i| i < 1 << 20));
        }
        assert!(draws.windows(2).any(|w| w[0] != w[1]), "{draws:?}");
    }
}
