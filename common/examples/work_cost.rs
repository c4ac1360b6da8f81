//! The host's time to turn every job of N into kernel units (`Job::work`): what a GPU's host does for
//! each job before the device can search it, one host thread per job.
//!
//! Usage: `work_cost N...`. For each N: the jobs, their units, the seconds `Job::work` took over every
//! job, the slowest job and its time, and the nodes the settled part counted. BENCHMARKS.md,
//! "Symmetric rings on the kernel", reads it.

use std::time::{Duration, Instant};

use nqueens_common::{Plan, Strategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for arg in std::env::args().skip(1) {
        let n: u32 = arg.parse()?;
        let plan = Plan::new(n, Strategy::D4)?;
        let (mut jobs, mut units, mut settled) = (0u64, 0u64, 0u64);
        let (mut all, mut slowest, mut slowest_key) =
            (Duration::ZERO, Duration::ZERO, String::new());
        for key in plan.jobs() {
            let job = plan.job(&key)?;
            let t = Instant::now();
            let work = job.work();
            let took = t.elapsed();
            jobs += 1;
            units += work.units.len() as u64;
            settled += work.base.nodes;
            all += took;
            if took > slowest {
                (slowest, slowest_key) = (took, key.to_string());
            }
        }
        println!(
            "N = {n}: {jobs} jobs, {units} units, Job::work {:.3} s in all, slowest job {slowest_key} {:.3} s, settled nodes {settled}",
            all.as_secs_f64(),
            slowest.as_secs_f64()
        );
    }
    Ok(())
}
