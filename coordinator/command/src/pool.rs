//! The compute pool: runs a stream of jobs on `threads` dedicated OS threads (the search is pure CPU work
//! and must never share threads with I/O), and sums their results exactly.

use std::sync::Mutex;

use nqueens_common::{Job, JobResult, Result, Tally};

/// Receives each finished job, from whichever compute thread finished it.
pub trait Progress: Sync {
    /// Called once per finished job.
    fn job_done(&self, job: &Job, result: &JobResult);
}

impl<F: Fn(&Job, &JobResult) + Sync> Progress for F {
    fn job_done(&self, job: &Job, result: &JobResult) {
        self(job, result)
    }
}

/// Runs every job of `jobs` on `threads` threads (at least 1) and returns the exact sum of their results.
///
/// Jobs are pulled one at a time from the shared iterator, so threads stay busy until the very end.
/// `with_unique` says whether the strategy reports unique counts.
pub fn run_jobs<I>(
    jobs: I,
    threads: usize,
    with_unique: bool,
    progress: &dyn Progress,
) -> Result<Tally>
where
    I: Iterator<Item = Job> + Send,
{
    let queue = Mutex::new(jobs);
    let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).next();
    let tallies: Vec<Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("compute-{i}"))
                    .spawn_scoped(s, || {
                        let mut tally = Tally::new(with_unique);
                        while let Some(job) = next() {
                            let result = job.run();
                            tally.add(&result)?;
                            progress.job_done(&job, &result);
                        }
                        Ok(tally)
                    })
                    .expect("spawn a compute thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("compute thread panicked"))
            .collect()
    });
    let mut total = Tally::new(with_unique);
    for t in tallies {
        let t = t?;
        total.merge(&t)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nqueens_common::{Plan, Strategy};

    #[test]
    fn threads_agree_with_one_thread() {
        let plan = Plan::new(11, Strategy::D4).unwrap();
        let jobs = || plan.jobs().map(|k| plan.job(&k).unwrap());
        let one = run_jobs(jobs(), 1, true, &|_: &Job, _: &JobResult| {}).unwrap();
        let three = run_jobs(jobs(), 3, true, &|_: &Job, _: &JobResult| {}).unwrap();
        assert_eq!(one, three);
        assert_eq!(one.total, 2680);
        assert_eq!(one.unique().unwrap(), Some(341));
    }
}
