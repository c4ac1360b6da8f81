//! How evenly a GPU launch's seeds fall on the device's lanes, for both expansions (largest first, the
//! default, and level by level, the order before it), from every seed's true size searched on the host.
//!
//! Usage: `seed_balance N FIRST_JOB JOBS SEEDS THREADS`: the `JOBS` d4 jobs of N from `FIRST_JOB` in one
//! batch expanded to at least `SEEDS` seeds, modelled on a device of `THREADS` resident threads. The
//! model: each warp of 32 lanes takes the next 32 seeds and lasts as long as its largest; warps take
//! turns on `THREADS / 32` slots, first free first served. `efficiency` is the ideal launch time (every
//! lane busy) over the modelled one. BENCHMARKS.md, "Seeds balanced by their size", reads it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use nqueens_common::kernel::seeds::{Balance, Batch, WARP};
use nqueens_common::{Plan, Strategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let [n, first, jobs, target, threads] = args[..] else {
        return Err("usage: seed_balance N FIRST_JOB JOBS SEEDS THREADS".into());
    };
    let plan = Plan::new(n as u32, Strategy::D4)?;
    let works: Vec<_> = plan
        .jobs()
        .skip(first)
        .take(jobs)
        .map(|k| plan.job(&k).map(|j| j.work()))
        .collect::<Result<_, _>>()?;
    for (name, by_level) in [("largest first", false), ("level by level", true)] {
        let mut batch = Batch::new(n as u8);
        for w in &works {
            batch
                .push_group(&w.units)
                .ok_or("the jobs do not fit a batch")?;
        }
        let t = Instant::now();
        if by_level {
            batch.expand_by_level(target);
        } else {
            batch.expand(target);
        }
        let expand = t.elapsed();
        let out = search_all(&batch);
        let balance = Balance::of(&out, threads);
        let sizes: Vec<u64> = out.chunks_exact(2).map(|o| o[1]).collect();
        let mean = balance.nodes as f64 / sizes.len().max(1) as f64;
        let largest = sizes.iter().copied().max().unwrap_or(0);
        println!(
            "N = {n}, jobs {first}..{}, {name}: {} seeds expanded in {:.1} ms, largest {largest} nodes = {:.1}x the mean, {balance}, modelled efficiency {:.3}",
            first + works.len(),
            sizes.len(),
            expand.as_secs_f64() * 1e3,
            largest as f64 / mean,
            efficiency(&sizes, threads)
        );
    }
    Ok(())
}

/// Every seed searched on the host's cores: `(completions, nodes)` per seed, the device's layout.
fn search_all(batch: &Batch) -> Vec<u64> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let per = batch.len().div_ceil(cores).max(1);
    let mut out = vec![0u64; 2 * batch.len()];
    std::thread::scope(|s| {
        for (k, chunk) in out.chunks_mut(2 * per).enumerate() {
            s.spawn(move || {
                for (j, o) in chunk.chunks_exact_mut(2).enumerate() {
                    let (c, nodes) = batch.search(k * per + j);
                    (o[0], o[1]) = (c, nodes);
                }
            });
        }
    });
    out
}

/// The ideal launch time over the modelled one (see the file's comment).
fn efficiency(sizes: &[u64], threads: usize) -> f64 {
    let slots = (threads / WARP).max(1);
    let mut free: BinaryHeap<Reverse<u64>> = (0..slots).map(|_| Reverse(0)).collect();
    for warp in sizes.chunks(WARP) {
        let Reverse(at) = free.pop().expect("slots > 0");
        free.push(Reverse(at + warp.iter().copied().max().unwrap_or(0)));
    }
    let end = free.into_iter().map(|Reverse(t)| t).max().unwrap_or(0);
    let ideal = sizes.iter().sum::<u64>() as f64 / (slots * WARP) as f64;
    if end == 0 {
        return 1.0;
    }
    ideal / end as f64
}
