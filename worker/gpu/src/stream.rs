//! Batches of jobs through one device as one stream of launches: the host prepares the next launch,
//! of the same batch or of the next one, while the device runs the launches under way, so the device
//! does not wait for the host between two batches. Each batch is answered whole, in the order given.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::time::Instant;

use nqueens_common::{Job, JobResult, Work};

use crate::engine::{finish, prepare, Prepared};
use crate::{Gpu, GpuError, Started, IN_FLIGHT};

/// A batch's answer: every job's result, in the batch's order, or why the device failed it.
pub type Answer = Result<Vec<JobResult>, GpuError>;

/// How a batch is cut into launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// As the device's pace says ([`crate::split::Pace::launches`]).
    Paced,
    /// At most this many launches for each board size (calibration times one).
    Fixed(usize),
}

/// Computes `jobs` on `gpu`: the same results as [`Job::run`], in the same order. Jobs of different
/// board sizes go in separate launches, and those of one size in up to [`crate::LAUNCHES`], [`IN_FLIGHT`] at
/// once. A caller with batch after batch keeps the device busy between them with a [`Stream`].
pub fn run_jobs<J: Borrow<Job>>(gpu: &mut Gpu, jobs: &[J]) -> Result<Vec<JobResult>, GpuError> {
    run_split(gpu, jobs, Split::Paced)
}

/// [`run_jobs`], the jobs cut into launches as `split` says (`Fixed(1)`: one launch per size, as
/// calibration times it).
pub(crate) fn run_split<J: Borrow<Job>>(
    gpu: &mut Gpu,
    jobs: &[J],
    split: Split,
) -> Result<Vec<JobResult>, GpuError> {
    let mut stream = Stream::new(gpu);
    stream.push(jobs.iter().map(|j| j.borrow().clone()).collect(), split);
    stream.run().unwrap_or_else(|| Ok(Vec::new()))
}

/// A batch given to the stream and not yet answered.
struct Open {
    jobs: Vec<Job>,
    results: Vec<Option<JobResult>>,
    /// Its launches not yet started: indices of its jobs, of one board size each.
    waiting: VecDeque<Vec<usize>>,
    /// Its launches started and not yet collected.
    flying: usize,
    /// The first error of one of its launches: the batch is failed whole.
    failed: Option<GpuError>,
}

/// A launch under way.
struct Flying {
    /// Its batch's number (the stream counts batches from 0).
    batch: u64,
    n: u8,
    members: Vec<(usize, Work)>,
    prepared: Prepared,
    started: Started,
    /// When it was handed to the device (just before its submit).
    at: Instant,
}

/// One device's stream of batches. [`Stream::fill`] starts launches, [`Stream::collect`] waits for the
/// oldest, [`Stream::answer`] hands back the oldest batch once all of its launches are in.
pub struct Stream<'g> {
    gpu: &'g mut Gpu,
    open: VecDeque<Open>,
    /// The number of `open[0]`.
    first: u64,
    flight: VecDeque<Flying>,
    /// When the last launch was collected: a launch's device time starts there if it was under way
    /// then (the device ran the launches one after another).
    last_collected: Option<Instant>,
}

impl<'g> Stream<'g> {
    pub fn new(gpu: &'g mut Gpu) -> Stream<'g> {
        Stream {
            gpu,
            open: VecDeque::new(),
            first: 0,
            flight: VecDeque::with_capacity(IN_FLIGHT),
            last_collected: None,
        }
    }

    /// No batch is waiting for its answer.
    pub fn is_idle(&self) -> bool {
        self.open.is_empty()
    }

    /// Queues a batch behind those given before: its jobs of each board size cut into launches as
    /// `split` says.
    pub fn push(&mut self, jobs: Vec<Job>, split: Split) {
        let mut sizes: Vec<u8> = jobs.iter().map(|j| j.plan().n()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut waiting = VecDeque::new();
        for n in sizes {
            let of_size: Vec<usize> = (0..jobs.len())
                .filter(|&i| jobs[i].plan().n() == n)
                .collect();
            let launches = match split {
                Split::Paced => self.gpu.pace.launches(n, of_size.len()),
                Split::Fixed(k) => k.max(1),
            };
            let per_launch = of_size.len().div_ceil(launches).max(1);
            waiting.extend(of_size.chunks(per_launch).map(<[usize]>::to_vec));
        }
        self.open.push_back(Open {
            results: vec![None; jobs.len()],
            jobs,
            waiting,
            flying: 0,
            failed: None,
        });
    }

    /// Starts launches, oldest batch first, until [`IN_FLIGHT`] are under way. True when every launch
    /// of every batch given has started: the stream would take the next batch now.
    pub fn fill(&mut self) -> bool {
        while self.flight.len() < IN_FLIGHT {
            let Some(i) = self.open.iter().position(|b| !b.waiting.is_empty()) else {
                break;
            };
            let batch = &mut self.open[i];
            let members = batch.waiting.pop_front().expect("a launch waits");
            let n = batch.jobs[members[0]].plan().n();
            let chunk: Vec<(usize, &Job)> = members.iter().map(|&j| (j, &batch.jobs[j])).collect();
            let t = Instant::now();
            let prepared = prepare(&chunk, n, self.gpu.target_seeds());
            let started = prepared.and_then(|p| {
                self.gpu.pace.prepared(t.elapsed().as_secs_f64());
                // Stamped before the submit: a backend without launches of its own (OpenCL here)
                // searches inside it.
                let at = Instant::now();
                let started = self.gpu.submit(&p.batch)?;
                Ok((p, started, at))
            });
            match started {
                Ok((mut prepared, started, at)) => {
                    batch.flying += 1;
                    self.flight.push_back(Flying {
                        batch: self.first + i as u64,
                        n,
                        members: std::mem::take(&mut prepared.members),
                        prepared,
                        started,
                        at,
                    });
                }
                Err(e) => self.fail(i, e),
            }
        }
        self.open.iter().all(|b| b.waiting.is_empty())
    }

    /// Fails the `i`th open batch with `e` (its first error kept): its launches not started are
    /// dropped, and so are those under way (their answers would not be used).
    fn fail(&mut self, i: usize, e: GpuError) {
        let number = self.first + i as u64;
        let batch = &mut self.open[i];
        batch.failed.get_or_insert(e);
        batch.waiting.clear();
        batch.flying = 0;
        self.flight.retain(|f| f.batch != number);
    }

    /// Waits for the oldest launch under way, if any, and takes its answer into its batch.
    pub fn collect(&mut self) {
        let Some(f) = self.flight.pop_front() else {
            return;
        };
        let i = (f.batch - self.first) as usize;
        let answer = self.gpu.collect(&f.prepared.batch, f.started);
        let now = Instant::now();
        let since = self.last_collected.map_or(f.at, |c| c.max(f.at));
        self.last_collected = Some(now);
        self.open[i].flying -= 1;
        let totals = match answer {
            Ok(totals) => totals,
            Err(e) => return self.fail(i, e),
        };
        self.gpu
            .pace
            .searched(f.n, f.members.len(), (now - since).as_secs_f64());
        let batch = &mut self.open[i];
        for ((j, work), t) in f.members.into_iter().zip(totals) {
            match finish(&batch.jobs[j], &work, t) {
                Ok(r) => batch.results[j] = Some(r),
                Err(e) => return self.fail(i, e),
            }
        }
    }

    /// The oldest batch's answer, once all of its launches are in (or it failed); batches are answered
    /// in the order given.
    pub fn answer(&mut self) -> Option<Answer> {
        let b = self.open.front()?;
        if !b.waiting.is_empty() || b.flying > 0 {
            return None;
        }
        let b = self.open.pop_front()?;
        self.first += 1;
        Some(match b.failed {
            Some(e) => Err(e),
            None => Ok(b
                .results
                .into_iter()
                .map(|r| r.expect("every job of a batch is in one of its launches"))
                .collect()),
        })
    }

    /// Runs the stream until the oldest batch is answered; `None` if no batch was given.
    pub fn run(&mut self) -> Option<Answer> {
        loop {
            if let Some(a) = self.answer() {
                return Some(a);
            }
            if self.is_idle() {
                return None;
            }
            self.fill();
            if let Some(a) = self.answer() {
                return Some(a);
            }
            self.collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::SeqCst;

    use nqueens_common::{Plan, Strategy};

    use super::*;
    use crate::doubles::Later;
    use crate::{Backend, DeviceInfo, Pending, Shape, LAUNCHES};

    fn info() -> DeviceInfo {
        DeviceInfo {
            backend: Backend::OpenCl,
            index: 0,
            name: "double".into(),
            threads: 64,
            shape: Shape::default_for(Backend::OpenCl),
        }
    }

    fn jobs(n: u32) -> Vec<Job> {
        let plan = Plan::new(n, Strategy::D4).unwrap();
        plan.jobs().map(|k| plan.job(&k).unwrap()).collect()
    }

    /// Two batches given together: the second's launch starts while the first's is under way, and
    /// each batch is answered whole, in order, with the CPU's results. Before, a worker's device
    /// finished one batch (its last launch alone on the device) before the host began the next.
    #[test]
    fn the_next_batch_starts_while_the_one_before_runs() {
        let double = Later::new(info());
        let (launches, most) = (double.launches.clone(), double.most.clone());
        let mut gpu = Gpu::new(Box::new(double));
        let all = jobs(11);
        let (a, b) = all.split_at(all.len() / 2);
        let mut stream = Stream::new(&mut gpu);
        assert!(stream.is_idle());
        assert!(stream.answer().is_none());
        stream.push(a.to_vec(), Split::Fixed(1));
        stream.push(b.to_vec(), Split::Fixed(1));
        assert!(!stream.is_idle());
        assert!(stream.fill(), "both batches' launches started");
        assert_eq!(most.load(SeqCst), 2, "two batches under way at once");
        assert!(stream.answer().is_none(), "nothing collected yet");
        stream.collect();
        let first = stream.answer().expect("the first batch is in").unwrap();
        assert!(stream.answer().is_none(), "the second is still under way");
        stream.collect();
        let second = stream.answer().expect("the second batch is in").unwrap();
        assert!(stream.is_idle());
        assert_eq!(launches.load(SeqCst), 2);
        for (job, r) in all.iter().zip(first.iter().chain(&second)) {
            assert_eq!(*r, job.run(), "job {}", job.key());
        }
        // An empty batch is answered at once, and `run` on an idle stream says so.
        stream.push(Vec::new(), Split::Paced);
        assert_eq!(stream.run().unwrap().unwrap(), Vec::<JobResult>::new());
        assert!(stream.run().is_none());
    }

    /// The answer `p` with as many completions as nodes on every seed: wrong.
    fn wrong(p: Pending) -> Pending {
        Pending::later(move || {
            let mut out = p.wait()?;
            for o in out.chunks_exact_mut(2) {
                o[0] = o[1];
            }
            Ok(out)
        })
    }

    /// The second launch (number 1) wrong, the others right.
    fn second_wrong(i: usize, _: usize, p: Pending) -> Pending {
        match i {
            1 => wrong(p),
            _ => p,
        }
    }

    /// A launch the checks refuse fails its own batch only: the batch before and the one after are
    /// answered, and every launch of the failed batch not yet started is dropped.
    #[test]
    fn a_wrong_launch_fails_its_own_batch_only() {
        let all = jobs(12);
        let third = all.len() / 3;
        let double = Later::new(info());
        let launches = double.launches.clone();
        let mut gpu = Gpu::new(Box::new(double.altered(second_wrong)));
        let mut stream = Stream::new(&mut gpu);
        stream.push(all[..third].to_vec(), Split::Fixed(1));
        stream.push(all[third..2 * third].to_vec(), Split::Fixed(3));
        stream.push(all[2 * third..].to_vec(), Split::Fixed(1));
        let answers: Vec<Answer> = std::iter::from_fn(|| stream.run()).collect();
        assert_eq!(answers.len(), 3);
        assert!(answers[0].is_ok());
        assert!(
            matches!(answers[1], Err(GpuError::BadAnswer(_))),
            "{:?}",
            answers[1].as_ref().map(Vec::len)
        );
        let last = answers[2].as_ref().unwrap();
        for (job, r) in all[2 * third..].iter().zip(last) {
            assert_eq!(*r, job.run());
        }
        drop(stream);
        // Launches: the first batch's, the second's first (wrong) and second (under way with it, then
        // dropped), none of its third, and the last batch's; two answers taken in.
        assert_eq!(launches.load(SeqCst), 4);
        assert_eq!(gpu.balance.launches, 2);
        // A later batch fails while an earlier one waits to be answered: the earlier is still answered
        // whole, the later failed.
        let mut gpu = Gpu::new(Box::new(Later::new(info()).altered(second_wrong)));
        let mut stream = Stream::new(&mut gpu);
        stream.push(all[..third].to_vec(), Split::Fixed(1));
        stream.push(all[third..].to_vec(), Split::Fixed(1));
        assert!(stream.fill());
        stream.collect();
        stream.collect();
        let first = stream.answer().unwrap().unwrap();
        for (job, r) in all[..third].iter().zip(&first) {
            assert_eq!(*r, job.run());
        }
        assert!(matches!(stream.answer(), Some(Err(GpuError::BadAnswer(_)))));
        assert!(stream.is_idle());
    }

    /// `run_jobs` splits a call's jobs into up to [`LAUNCHES`] launches with [`IN_FLIGHT`] under way at
    /// once, and still returns every job's result, in order, equal to the CPU's; calibration's one
    /// launch is one. Each launch's answer is counted in the device's balance.
    #[test]
    fn jobs_are_split_into_launches_two_under_way_and_the_results_are_the_cpus() {
        use std::sync::atomic::Ordering::SeqCst;
        let plan = Plan::new(12, Strategy::D4).unwrap();
        let jobs: Vec<Job> = plan.jobs().map(|k| plan.job(&k).unwrap()).collect();
        assert!(jobs.len() > LAUNCHES, "{} jobs", jobs.len());
        // 34 jobs in launches of 5: 7 launches.
        let split = jobs.len().div_ceil(jobs.len().div_ceil(LAUNCHES));
        assert!(split > IN_FLIGHT && split <= LAUNCHES, "{split}");
        for (launches, want) in [(LAUNCHES, split), (1, 1)] {
            let double = Later::new(info());
            let (count, most) = (double.launches.clone(), double.most.clone());
            let mut g = Gpu::new(Box::new(double));
            let results = run_split(&mut g, &jobs, Split::Fixed(launches)).unwrap();
            assert_eq!(count.load(SeqCst), want);
            // Every launch's answer is in the balance, all its nodes.
            assert_eq!(g.balance.launches, want as u64);
            assert_eq!(g.balance.nodes, g.device_nodes);
            assert!(g.balance.lane_steps >= g.balance.nodes && g.balance.largest_share > 0.0);
            assert_eq!(most.load(SeqCst), want.min(IN_FLIGHT));
            for (job, r) in jobs.iter().zip(&results) {
                assert_eq!(*r, job.run());
            }
        }
        assert_eq!(
            run_jobs(&mut Gpu::new(Box::new(Later::new(info()))), &jobs[..0]).unwrap(),
            Vec::<JobResult>::new()
        );
    }

    /// A paced batch is cut into launches that take the device at least twice what the host takes to
    /// prepare one. Before, eight jobs were always eight launches (a million seeds each on a large
    /// device), the host's preparation far longer than the device's search.
    #[test]
    fn a_paced_batch_is_cut_no_finer_than_the_host_keeps_up_with() {
        let all = jobs(12);
        assert!(all.len() > LAUNCHES);
        let double = Later::new(info());
        let launches = double.launches.clone();
        let mut gpu = Gpu::new(Box::new(double));
        // Nothing measured: as many launches as allowed.
        let results = crate::run_jobs(&mut gpu, &all[..LAUNCHES]).unwrap();
        assert_eq!(launches.swap(0, SeqCst), LAUNCHES);
        assert_eq!(results.len(), LAUNCHES);
        // The host slow against the device (a second a launch, a millisecond a job): one launch.
        gpu.pace = Default::default();
        gpu.pace.prepared(1.0);
        gpu.pace.searched(12, 1, 0.001);
        let results = crate::run_jobs(&mut gpu, &all).unwrap();
        assert_eq!(launches.swap(0, SeqCst), 1);
        for (job, r) in all.iter().zip(&results) {
            assert_eq!(*r, job.run());
        }
        // The device slow against the host: as many as allowed (34 jobs in launches of 5: 7).
        gpu.pace = Default::default();
        gpu.pace.prepared(0.001);
        gpu.pace.searched(12, 1, 1.0);
        crate::run_jobs(&mut gpu, &all).unwrap();
        let most = all.len().div_ceil(all.len().div_ceil(LAUNCHES));
        assert_eq!(launches.swap(0, SeqCst), most);
    }
}
