//! Times every kernel variant this CPU runs on all the `d4` jobs of N, in one thread, the variants
//! alternating round by round so that they share the machine's drift.
//!
//! `cargo run --release -p nqueens-common --example kernel_variants -- [N...] [--rounds R]`
//! (default: N = 16, 3 rounds). The jobs are split into kernel units before the clock starts, so the
//! figures are the kernel's own; the node counts are the jobs' (units and the settled part together),
//! as `nqueens bench` reports them, and every variant must produce the same total and nodes. Beside wall
//! seconds it prints the thread's CPU seconds (Linux: `/proc/thread-self/schedstat`), which a busy
//! machine disturbs less: time the thread spent waiting for a core is not in them.

use std::time::Instant;

use nqueens_common::kernel::{self, Variant};
use nqueens_common::{reference, JobResult, Plan, Strategy, Work};

/// Nanoseconds this thread has run on a CPU, where Linux says.
fn cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn main() {
    let mut sizes = Vec::new();
    let mut rounds = 3;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--rounds" {
            rounds = args
                .next()
                .and_then(|r| r.parse().ok())
                .expect("--rounds takes a number");
        } else {
            sizes.push(arg.parse::<u32>().expect("a board size"));
        }
    }
    if sizes.is_empty() {
        sizes.push(16);
    }
    let variants = Variant::available();
    let start = Instant::now();
    println!(
        "variants this CPU runs: {variants:?}; default: {}",
        kernel::chosen()
    );
    let took = start.elapsed();
    let (_, times) = kernel::calibrate(&variants);
    println!("calibration: {took:.1?} at start; best times of a second one: {times:.2?}");
    println!(
        "{:>3} {:<7} {:>5} {:>16} {:>14} {:>9} {:>10} {:>9} {:>12}",
        "N", "kernel", "round", "total", "nodes", "seconds", "Mnodes/s", "cpu s", "cpu Mnodes/s"
    );
    for n in sizes {
        let plan = Plan::new(n, Strategy::D4).expect("a valid N");
        let start = Instant::now();
        let works: Vec<Work> = plan
            .jobs()
            .map(|key| plan.job(&key).expect("the plan's own keys").work())
            .collect();
        let units: usize = works.iter().map(|w| w.units.len()).sum();
        eprintln!(
            "N = {n}: {} jobs, {units} units, split in {:.3} s",
            works.len(),
            start.elapsed().as_secs_f64()
        );
        let mut seconds = vec![Vec::new(); variants.len()];
        let mut cpu_seconds = vec![Vec::new(); variants.len()];
        let mut first: Option<(u64, u64)> = None;
        for round in 1..=rounds {
            for (i, &variant) in variants.iter().enumerate() {
                let (start, cpu_start) = (Instant::now(), cpu_ns());
                let (mut total, mut nodes) = (0u64, 0u64);
                for work in &works {
                    let JobResult {
                        total: t, nodes: v, ..
                    } = work
                        .finish(kernel::run_with(variant, work.units.iter().copied()))
                        .expect("a job's sums fit 64 bits");
                    total += t;
                    nodes += v;
                }
                let secs = start.elapsed().as_secs_f64();
                let cpu = cpu_start
                    .zip(cpu_ns())
                    .map_or(f64::NAN, |(a, b)| (b - a) as f64 / 1e9);
                seconds[i].push(secs);
                cpu_seconds[i].push(cpu);
                println!(
                    "{n:>3} {:<7} {round:>5} {total:>16} {nodes:>14} {secs:>9.3} {:>10.1} {cpu:>9.3} {:>12.1}",
                    variant.name(),
                    nodes as f64 / secs / 1e6,
                    nodes as f64 / cpu / 1e6
                );
                match first {
                    None => first = Some((total, nodes)),
                    Some(seen) => assert_eq!(seen, (total, nodes), "{variant} disagrees"),
                }
            }
        }
        let (total, nodes) = first.unwrap_or_default();
        if let Some((known, _)) = reference::counts(n) {
            assert_eq!(total as u128, known, "N = {n}: not the published count");
        }
        let best = |secs: &[f64]| secs.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = |secs: &[f64]| secs.iter().sum::<f64>() / secs.len() as f64;
        for ((variant, secs), cpu) in variants.iter().zip(&seconds).zip(&cpu_seconds) {
            println!(
                "N = {n} {:<7} wall best {:.3} s, mean {:.3} s; cpu best {:.3} s, mean {:.3} s; {:.1} Mnodes/s at best cpu ({nodes} nodes)",
                variant.name(),
                best(secs),
                mean(secs),
                best(cpu),
                mean(cpu),
                nodes as f64 / best(cpu) / 1e6
            );
        }
    }
}
