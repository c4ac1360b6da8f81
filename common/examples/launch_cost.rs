//! The host's time to prepare one GPU launch: its jobs turned into units (`Job::work`) and expanded to
//! fill the device (`Batch::expand`), for launches of more and more jobs of one N. A launch is expanded to
//! the same number of seeds whatever its jobs, so its cost barely depends on how many it holds: what
//! `nqueens_gpu`'s split of a batch into launches weighs (BENCHMARKS.md, "Batches that follow one
//! another").
//!
//! Usage: `launch_cost N SEEDS JOBS...`: for each JOBS, the d4 jobs of N from the first, in one launch
//! expanded to at least SEEDS seeds (an H100 or H200 at 4 seeds a thread: about 1,081,344), the best of
//! three times. Each line ends with the launch's depth (the most levels a seed's search holds, which
//! sizes the shared memory of the `flat` and `stream` kernels: 5 x depth + 1 words a thread) and the
//! share of its seeds that need it. `FIRST=K` starts at the K-th job instead.

use std::time::{Duration, Instant};

use nqueens_common::kernel::seeds::{Batch, SEED_WORDS};
use nqueens_common::{Plan, Strategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let [n, target, ref counts @ ..] = args[..] else {
        return Err("usage: launch_cost N SEEDS JOBS...".into());
    };
    let plan = Plan::new(n as u32, Strategy::D4)?;
    let first: usize = std::env::var("FIRST").map_or(Ok(0), |f| f.parse())?;
    let jobs: Vec<_> = plan
        .jobs()
        .skip(first)
        .map(|k| plan.job(&k))
        .collect::<Result<_, _>>()?;
    for &k in counts {
        let k = k.min(jobs.len());
        let mut best = Duration::MAX;
        let (mut units, mut seeds, mut depths) = (0, 0, Vec::new());
        for _ in 0..3 {
            let t = Instant::now();
            let mut batch = Batch::new(n as u8);
            units = 0;
            for job in &jobs[..k] {
                let work = job.work();
                units += work.units.len();
                batch
                    .push_group(&work.units)
                    .ok_or("the jobs do not fit a launch")?;
            }
            batch.expand(target);
            best = best.min(t.elapsed());
            seeds = batch.len();
            depths = batch
                .seeds()
                .chunks_exact(SEED_WORDS)
                .map(|s| (batch.tails()[(s[3] >> 5) as usize] + 1).saturating_sub(s[3] & 31))
                .collect();
        }
        let depth = depths.iter().copied().max().unwrap_or(0);
        let deepest = depths.iter().filter(|&&d| d == depth).count();
        println!(
            "N = {n}: jobs {first}..{}, {units} units, {seeds} seeds: {:.1} ms to prepare; depth {depth} ({:.1} % of the seeds)",
            first + k,
            best.as_secs_f64() * 1e3,
            100.0 * deepest as f64 / seeds.max(1) as f64
        );
    }
    Ok(())
}
