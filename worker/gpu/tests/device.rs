//! The real search kernel on a real OpenCL (or CUDA) device: the reference counts for N = 1..14 under
//! both strategies, and the CPU kernel's exact results (totals, unique counts, nodes) on random jobs.
//!
//! The device is `NQUEENS_TEST_GPU` (a `--gpu` list; default `opencl:0`, which in CI is PoCL's CPU
//! device, installed by `.ci/run`). Without any OpenCL runtime the tests say they were skipped, except
//! under CI (`CI` set), where that is a failure.

use nqueens_common::{reference, Job, Plan, Strategy, Tally};
use nqueens_gpu::{run_jobs, Gpu};

fn device() -> Option<Gpu> {
    let spec = std::env::var("NQUEENS_TEST_GPU").unwrap_or_else(|_| "opencl:0".into());
    match nqueens_gpu::open(Some(&spec)) {
        Ok(mut g) => {
            let g = g.remove(0);
            eprintln!("device: {}", g.info());
            Some(g)
        }
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: no device {spec}: {e}");
            None
        }
        Err(e) => panic!("CI must run the GPU kernel on {spec} (PoCL): {e}"),
    }
}

#[test]
fn reference_counts_n_1_to_14_both_strategies() {
    let Some(mut gpu) = device() else { return };
    for n in 1..=14 {
        let (total, unique) = reference::counts(n).expect("published");
        for strategy in [Strategy::D4, Strategy::Mirror] {
            let plan = Plan::new(n, strategy).unwrap();
            let jobs: Vec<Job> = plan.jobs().map(|k| plan.job(&k).unwrap()).collect();
            let results = run_jobs(&mut gpu, &jobs).unwrap();
            let mut tally = Tally::new(strategy == Strategy::D4);
            for r in &results {
                tally.add(r).unwrap();
            }
            assert_eq!(tally.total, total, "N = {n} {strategy}");
            if strategy == Strategy::D4 {
                assert_eq!(tally.unique().unwrap(), Some(unique), "N = {n} unique");
            }
            // The same results as the CPU, job by job, nodes included.
            for (job, r) in jobs.iter().zip(&results) {
                assert_eq!(*r, job.run(), "N = {n} {strategy} job {}", job.key());
            }
        }
    }
    assert!(gpu.device_nodes > 0, "the device searched");
}

#[test]
fn random_jobs_match_the_cpu_kernel() {
    let Some(mut gpu) = device() else { return };
    // A small deterministic generator from a seed that changes from run to run (`NQUEENS_TEST_SEED`
    // repeats one): the seed is printed, so that a failure can be reproduced.
    let seed: u64 = std::env::var("NQUEENS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("random jobs from NQUEENS_TEST_SEED={seed}");
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (n, strategy, depth) in [
        (15, Strategy::D4, 1),
        (16, Strategy::D4, 2),
        (15, Strategy::Mirror, 4),
        (16, Strategy::Mirror, 5),
    ] {
        let plan = Plan::with_depth(n, strategy, depth).unwrap();
        let keys: Vec<_> = plan.jobs().collect();
        let jobs: Vec<Job> = (0..12)
            .map(|_| plan.job(&keys[next() as usize % keys.len()]).unwrap())
            .collect();
        let results = run_jobs(&mut gpu, &jobs).unwrap();
        for (job, r) in jobs.iter().zip(results) {
            assert_eq!(r, job.run(), "N = {n} {strategy} job {}", job.key());
        }
    }
}
