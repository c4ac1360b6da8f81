//! How evenly a GPU launch's seeds fall on the device's lanes, for both expansions (largest first, the
//! default, and level by level, the order before it), from every seed's true size searched on the host.
//!
//! Usage: `seed_balance N FIRST_JOB JOBS SEEDS GRID RESIDENT`: the `JOBS` d4 jobs of N from `FIRST_JOB`
//! in one batch expanded to at least `SEEDS` seeds, for a launch of `GRID` threads of which `RESIDENT`
//! run at once. `largest / a searcher's share` is the largest seed over the launch's nodes per `GRID`
//! thread, as `bench --gpu` reports it. The model: each warp of 32 lanes takes the next 32 seeds and
//! lasts as long as its largest; warps take turns on `RESIDENT / 32` slots, first free first served.
//! `efficiency` is the ideal launch time (every lane busy) over the modelled one; `without waiting` is
//! the same for lanes that take their next seed as soon as theirs is done (the `stream` kernel: each
//! of the `RESIDENT` threads first free first served). `correlation` is that
//! of the seeds' size estimates with the log of their nodes. BENCHMARKS.md, "Seeds balanced by their
//! size", reads it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use nqueens_common::kernel::balance::{Balance, WARP};
use nqueens_common::kernel::seeds::{Batch, SEED_WORDS};
use nqueens_common::{Plan, Strategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let [n, first, jobs, target, grid, resident] = args[..] else {
        return Err("usage: seed_balance N FIRST_JOB JOBS SEEDS GRID RESIDENT".into());
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
        let balance = Balance::of(&out, grid);
        let sizes: Vec<u64> = out.chunks_exact(2).map(|o| o[1]).collect();
        let mean = balance.nodes as f64 / sizes.len().max(1) as f64;
        let largest = sizes.iter().copied().max().unwrap_or(0);
        println!(
            "N = {n}, jobs {first}..{}, {name}: {} seeds expanded in {:.1} ms, deepest {} levels, largest {largest} nodes = {:.1}x the mean, {balance}, modelled efficiency {:.3}, without waiting {:.3}, correlation {:.3}",
            first + works.len(),
            sizes.len(),
            expand.as_secs_f64() * 1e3,
            deepest(&batch),
            largest as f64 / mean,
            efficiency(&sizes, resident, WARP),
            efficiency(&sizes, resident, 1),
            correlation(&batch, &sizes)
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
                    (o[0], o[1]) = batch.search(k * per + j);
                }
            });
        }
    });
    out
}

/// The levels the deepest seed's search holds: what the `flat` and `stream` kernels size their shared
/// stack by (so fewer blocks fit an SM when it grows).
fn deepest(batch: &Batch) -> u32 {
    batch
        .seeds()
        .chunks_exact(SEED_WORDS)
        .map(|s| (batch.tails()[(s[3] >> 5) as usize] + 1).saturating_sub(s[3] & 31))
        .max()
        .unwrap_or(0)
}

/// The ideal launch time over the modelled one (see the file's comment), for groups of `lanes` lanes
/// that wait for their slowest (32: a warp; 1: lanes that never wait).
fn efficiency(sizes: &[u64], resident: usize, lanes: usize) -> f64 {
    let slots = (resident / lanes).max(1);
    let mut free: BinaryHeap<Reverse<u64>> = (0..slots).map(|_| Reverse(0)).collect();
    for group in sizes.chunks(lanes) {
        let Reverse(at) = free.pop().expect("slots > 0");
        free.push(Reverse(at + group.iter().copied().max().unwrap_or(0)));
    }
    let end = free.into_iter().map(|Reverse(t)| t).max().unwrap_or(0);
    let ideal = sizes.iter().sum::<u64>() as f64 / (slots * lanes) as f64;
    if end == 0 {
        return 1.0;
    }
    ideal / end as f64
}

/// Pearson's correlation of the seeds' size estimates with the log of their nodes.
fn correlation(batch: &Batch, sizes: &[u64]) -> f64 {
    let pairs: Vec<(f64, f64)> = batch
        .seeds()
        .chunks_exact(SEED_WORDS)
        .zip(sizes)
        .map(|(s, &z)| {
            let e = batch.size_estimate(&[s[0], s[1], s[2], s[3]]);
            (f64::from(e), (z.max(1) as f64).log2())
        })
        .collect();
    let k = pairs.len().max(1) as f64;
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / k, b + y / k));
    let (sxy, sxx, syy) = pairs.iter().fold((0.0, 0.0, 0.0), |(a, b, c), (x, y)| {
        let (dx, dy) = (x - mx, y - my);
        (a + dx * dy, b + dx * dx, c + dy * dy)
    });
    sxy / (sxx * syy).sqrt()
}
