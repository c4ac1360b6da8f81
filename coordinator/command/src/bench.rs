//! `nqueens bench`: times the production kernel (and every other kernel variant the CPU runs) against the
//! plain recursive mirror baseline in the same process, so that the ratio holds even on a shared machine
//! whose absolute speed drifts.

use std::time::Instant;

use crate::pool::run_jobs;
use clap::Args;
use nqueens_common::kernel::Variant;
use nqueens_common::{baseline, Job, JobResult, Plan, Strategy};
use serde::Serialize;

/// Arguments of `nqueens bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub kernel: crate::KernelFlag,
    /// Board sizes to time.
    #[arg(default_values_t = [16u32])]
    pub n: Vec<u32>,
    /// Thread counts for the d4 count: `--threads 1 2` or `--threads 1,2` (give the sizes first).
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [1usize, 2], value_parser = crate::worker::threads)]
    pub threads: Vec<usize>,
    /// Skip the baseline (it is the slowest row).
    #[arg(long)]
    pub no_baseline: bool,
    /// Print one JSON object per row instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Time the d4 count on a GPU instead of the CPU rows: `--gpu` for the first device found (CUDA,
    /// else an OpenCL GPU), or `--gpu cuda:0`, `--gpu opencl:1`. Each total is checked against the
    /// published count.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "DEVICE")]
    pub gpu: Option<String>,
    /// Jobs per GPU launch (with `--gpu`), 0 to 65536; 0 picks about 16 launches per count (at most
    /// 65536 jobs each).
    #[arg(long, default_value_t = 0, requires = "gpu", value_parser = gpu_batch)]
    pub gpu_batch: usize,
    /// Kernel variants and launch shapes to time (with `--gpu`), comma-separated, each
    /// `VARIANT[/BLOCK[/PER_THREAD]]`: `--gpu-kernel local/256/8,flat/128/4`. Default: the shape the
    /// device's calibration chooses (printed with every candidate's time).
    #[arg(long, value_delimiter = ',', requires = "gpu", value_parser = crate::worker::gpu_kernel)]
    pub gpu_kernel: Vec<nqueens_gpu::Shape>,
    /// Calibrate the device anew (with `--gpu`, no `--gpu-kernel`), though a calibration is kept for
    /// it, and keep the new one.
    #[arg(long, requires = "gpu", conflicts_with = "gpu_kernel")]
    pub gpu_recalibrate: bool,
}

/// One measured row.
#[derive(Debug, Serialize)]
struct Row {
    /// The machine's CPU ([`nqueens_worker::cpu::model`]): kernel speed depends on it.
    cpu: &'static str,
    n: u32,
    what: String,
    threads: usize,
    total: String,
    nodes: String,
    seconds: f64,
    mnodes_per_s: f64,
    /// Baseline seconds divided by this row's seconds.
    speedup: Option<f64>,
}

/// Runs the benchmark and prints its rows.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if !args.json {
        println!("cpu: {}", cpu());
        println!(
            "{:>3} {:<29} {:>7} {:>18} {:>15} {:>9} {:>10} {:>8}",
            "N", "what", "threads", "total", "nodes", "seconds", "Mnodes/s", "speedup"
        );
    }
    if let Some(spec) = &args.gpu {
        return gpu(args, spec);
    }
    for &n in &args.n {
        let mut base_secs = None;
        if !args.no_baseline {
            nqueens_common::error::check_n(n)?;
            let start = Instant::now();
            let (total, nodes) = baseline::mirror_count(n as u8);
            let secs = start.elapsed().as_secs_f64();
            base_secs = Some(secs);
            print_row(
                args.json,
                &row(
                    n,
                    "baseline recursive",
                    1,
                    total as u128,
                    nodes as u128,
                    secs,
                    base_secs,
                ),
            )?;
        }
        let chosen = nqueens_common::kernel::chosen();
        // The chosen kernel at every thread count, then every other kernel this CPU runs on one
        // thread, then the mirror strategy.
        let mut runs: Vec<(Strategy, usize, Variant)> = args
            .threads
            .iter()
            .map(|&t| (Strategy::D4, t, chosen))
            .collect();
        for other in Variant::available().into_iter().rev() {
            if other != chosen {
                runs.push((Strategy::D4, 1, other));
            }
        }
        runs.push((Strategy::Mirror, 1, chosen));
        for (strategy, threads, variant) in runs {
            nqueens_common::kernel::choose(variant)?;
            let plan = Plan::new(n, strategy)?;
            let start = Instant::now();
            let jobs = plan
                .jobs()
                .map(move |k| plan.job(&k).expect("the plan's own keys are valid"));
            let tally = run_jobs(
                jobs,
                threads,
                strategy == Strategy::D4,
                &|_: &Job, _: &JobResult| {},
            );
            nqueens_common::kernel::choose(chosen)?;
            let tally = tally?;
            let secs = start.elapsed().as_secs_f64();
            print_row(
                args.json,
                &row(
                    n,
                    &format!("count {strategy} [{variant}]"),
                    threads,
                    tally.total,
                    tally.nodes,
                    secs,
                    base_secs,
                ),
            )?;
        }
    }
    Ok(())
}

/// The `--gpu` rows: each N counted on the device, with the host preparing batches alongside.
fn gpu(args: &BenchArgs, spec: &str) -> anyhow::Result<()> {
    // Every job is held in memory, and a launch's share of them expanded: a count past this is a run
    // for `count` or a cluster, not a timing.
    if let Some(n) = args.n.iter().find(|&&n| n > MAX_GPU_BENCH_N) {
        anyhow::bail!(
            "bench --gpu times N up to {MAX_GPU_BENCH_N} (it holds every job in memory); count N = {n} with `nqueens count {n} --gpu ...`"
        );
    }
    let shapes: Vec<Option<nqueens_gpu::Shape>> = if args.gpu_kernel.is_empty() {
        vec![None]
    } else {
        args.gpu_kernel.iter().copied().map(Some).collect()
    };
    for shape in shapes {
        let keep = crate::worker::keep(args.gpu_recalibrate);
        let mut gpus = nqueens_gpu::open_kept(Some(spec), shape, keep.as_ref())?;
        if let Some(c) = &gpus[0].calibration {
            eprintln!("calibration: {}", c.summary());
        }
        gpu_rows(args, &mut gpus[0])?;
    }
    Ok(())
}

/// The `--gpu` rows of one device built for one shape.
fn gpu_rows(args: &BenchArgs, gpu: &mut nqueens_gpu::Gpu) -> anyhow::Result<()> {
    eprintln!("device: {}", gpu.info());
    let shape = gpu.info().shape;
    let host = std::thread::available_parallelism().map_or(1, |n| n.get());
    for &n in &args.n {
        let plan = Plan::new(n, Strategy::D4)?;
        let jobs: Vec<Job> = plan
            .jobs()
            .map(|k| plan.job(&k).expect("the plan's own keys are valid"))
            .collect();
        let per_batch = if args.gpu_batch > 0 {
            args.gpu_batch
        } else {
            jobs.len().div_ceil(16).clamp(1, MAX_GPU_BATCH)
        };
        let start = Instant::now();
        let device_before = gpu.device_nodes;
        gpu.balance = Default::default();
        let mut tally = nqueens_common::Tally::new(true);
        let mut bad = None;
        nqueens_gpu::run_pipelined(gpu, &jobs, per_batch, host, |_, r| {
            if let Err(e) = tally.add(&r) {
                bad = Some(e);
            }
        })?;
        if let Some(e) = bad {
            return Err(e.into());
        }
        let secs = start.elapsed().as_secs_f64();
        let device_nodes = gpu.device_nodes - device_before;
        let check = match nqueens_common::reference::counts(n) {
            Some((total, unique)) if total == tally.total && tally.unique()? == Some(unique) => {
                "exact"
            }
            Some(_) => "WRONG",
            None => "unpublished",
        };
        print_row(
            args.json,
            &row(
                n,
                &format!("gpu {shape} ({check})"),
                host,
                tally.total,
                tally.nodes,
                secs,
                None,
            ),
        )?;
        eprintln!(
            "N = {n}: {} jobs, {per_batch} per launch, {device_nodes} nodes on the device ({:.1} Gnodes/s); {}",
            jobs.len(),
            device_nodes as f64 / secs / 1e9,
            balance(shape.kernel, &gpu.balance)
        );
        if check == "WRONG" {
            anyhow::bail!(
                "N = {n}: the GPU total {} is not the published count",
                tally.total
            );
        }
    }
    Ok(())
}

/// The balance line of a `--gpu` row: the warp fill only for the variants whose lanes wait for their
/// warp's slowest seed.
fn balance(kernel: nqueens_gpu::Kernel, b: &nqueens_common::kernel::balance::Balance) -> String {
    match kernel {
        nqueens_gpu::Kernel::Coop | nqueens_gpu::Kernel::Stream => format!(
            "largest seed {:.2}x a searcher's share ({} launches, {} seeds)",
            b.largest_share, b.launches, b.seeds
        ),
        _ => b.to_string(),
    }
}

fn row(
    n: u32,
    what: &str,
    threads: usize,
    total: u128,
    nodes: u128,
    seconds: f64,
    base: Option<f64>,
) -> Row {
    Row {
        cpu: cpu(),
        n,
        what: what.to_string(),
        threads,
        total: total.to_string(),
        nodes: nodes.to_string(),
        seconds,
        mnodes_per_s: nodes as f64 / seconds / 1e6,
        speedup: base.map(|b| b / seconds),
    }
}

/// The machine's CPU, read once.
fn cpu() -> &'static str {
    static CPU: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CPU.get_or_init(nqueens_worker::cpu::model)
}

fn print_row(json: bool, r: &Row) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        let speedup = r.speedup.map_or("-".to_string(), |s| format!("{s:.2}x"));
        println!(
            "{:>3} {:<29} {:>7} {:>18} {:>15} {:>9.3} {:>10.1} {:>8}",
            r.n, r.what, r.threads, r.total, r.nodes, r.seconds, r.mnodes_per_s, speedup
        );
    }
    Ok(())
}

/// Largest N `bench --gpu` times (N = 24's d4 plan is under a million jobs).
const MAX_GPU_BENCH_N: u32 = 24;

/// Most jobs per launch of `bench --gpu`.
const MAX_GPU_BATCH: usize = 65_536;

/// Parses `--gpu-batch`: 0 (automatic) to [`MAX_GPU_BATCH`] jobs.
fn gpu_batch(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= MAX_GPU_BATCH => Ok(n),
        Ok(_) => Err(format!("must be 0 (automatic) to {MAX_GPU_BATCH}")),
        Err(_) => Err(format!("{s:?} is not a whole number of jobs")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warp fill is shown only where the lanes of a warp wait for its slowest seed.
    #[test]
    fn the_balance_line_names_the_warp_fill_only_where_lanes_wait() {
        let b = nqueens_common::kernel::balance::Balance::of(&[0, 3, 0, 1], 2);
        for kernel in nqueens_gpu::Kernel::ALL {
            let line = balance(kernel, &b);
            let waits = !matches!(
                kernel,
                nqueens_gpu::Kernel::Coop | nqueens_gpu::Kernel::Stream
            );
            assert_eq!(line.contains("warp fill"), waits, "{kernel}: {line}");
            assert!(
                line.contains("largest seed 1.50x a searcher's share (1 launches, 2 seeds)"),
                "{kernel}: {line}"
            );
        }
    }
}
