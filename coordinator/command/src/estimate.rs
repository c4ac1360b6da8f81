//! `nqueens estimate`: prices a run before it starts. It computes a simple random sample of the plan's
//! jobs on local threads, timing each, and extrapolates the search nodes, the core-hours and the count
//! itself to the whole job list, each with a confidence interval.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use clap::Args;
use nqueens_common::estimate::{
    population_total, sample_indices, two_stage_total, z_for, Interval,
};
use nqueens_common::{Job, JobKey};
use serde::Serialize;

use super::{default_threads, PartitionArgs};

/// Arguments of `nqueens estimate`.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    #[command(flatten)]
    pub kernel: crate::KernelFlag,
    #[command(flatten)]
    pub partition: PartitionArgs,
    /// Jobs to compute (drawn at random, without replacement; all of them when the plan has fewer).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(2..))]
    pub sample: u64,
    /// Seed of the draw (default: random; printed, so a draw can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Confidence level of the intervals, between 0 and 1.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Compute threads (default: all cores). Each job is timed alone: the figures are per core.
    #[arg(long, value_parser = crate::worker::threads)]
    pub threads: Option<usize>,
    /// Split each sampled job this many rows further and compute only --subsample of its parts: a
    /// two-stage sample, still unbiased, for N whose jobs take too long to compute whole (N >= 24).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=4))]
    pub split_rows: u8,
    /// Parts computed per sampled job with --split-rows (drawn at random, without replacement).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub subsample: u64,
    /// Compute the sample on a GPU instead (`--gpu` for the first one found, or `cuda:0`,
    /// `opencl:1`): the run is priced in GPU-hours at the device's measured node rate.
    #[arg(long, value_name = "DEVICE", num_args = 0..=1, default_missing_value = "all")]
    pub gpu: Option<String>,
    /// The GPU kernel variant and launch shape (`VARIANT[/BLOCK[/PER_THREAD]]`, e.g. `flat/128/4`).
    /// Default: the device's calibration chooses.
    #[arg(long, value_name = "SHAPE", requires = "gpu", value_parser = crate::worker::gpu_kernel)]
    pub gpu_kernel: Option<nqueens_gpu::Shape>,
    /// Calibrate the device anew (with `--gpu`), though a calibration is kept for it, and keep the new
    /// one.
    #[arg(long, requires = "gpu", conflicts_with = "gpu_kernel")]
    pub gpu_recalibrate: bool,
    /// Price a record run (`submit --record`): every job computed by two credentials, so twice the
    /// hours (the nodes and solutions of the run are the same).
    #[arg(long)]
    pub record: bool,
}

/// What `estimate --json` prints.
#[derive(Debug, Serialize)]
pub struct EstimateOutput {
    pub n: u8,
    pub strategy: String,
    pub jobs: u64,
    pub sampled: u64,
    /// Rows each sampled job was split further (0: computed whole).
    pub split_rows: u8,
    /// Searches computed: the sampled jobs, or the sampled parts of them.
    pub computed: u64,
    pub seed: u64,
    pub confidence: f64,
    /// Search nodes of the whole run.
    pub nodes: Interval,
    /// Single-core CPU time of the whole run, in hours (absent with `--gpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_hours: Option<Interval>,
    /// With `--gpu`: the device's time for the whole run, in hours, at its rate over the sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_hours: Option<Interval>,
    /// Priced as a record run: the hours count every job twice.
    pub record: bool,
    /// With `--gpu`: the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The solution count (a check on the estimate where the count is known).
    pub total: Interval,
    /// Nodes per second of one core (with `--gpu`, of the device), over the sample.
    pub nodes_per_second: f64,
    /// Wall time of the estimate itself.
    pub seconds: f64,
}

/// One sampled job's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    nodes: f64,
    seconds: f64,
    total: f64,
}

/// Draws the sample and computes it.
pub fn run(args: &EstimateArgs) -> anyhow::Result<()> {
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        return Err(nqueens_common::Error::InvalidSetting(format!(
            "--confidence {} is out of range: between 0 and 1",
            args.confidence
        ))
        .into());
    }
    let plan = args.partition.plan()?;
    let start = Instant::now();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    // Bounded as a run's creation is: an absurd plan is refused in moments, not walked for hours.
    let (jobs, _) = plan.fingerprint_within(nqueens_common::partition::MAX_JOBS)?;
    let picked = sample_indices(jobs, args.sample, seed);
    let mut wanted = picked.iter().copied().peekable();
    let keys: Vec<JobKey> = plan
        .jobs()
        .enumerate()
        .filter_map(|(i, key)| {
            (wanted.peek() == Some(&(i as u64))).then(|| {
                wanted.next();
                key
            })
        })
        .collect();
    // What is computed: a sample of each sampled job's parts (with --split-rows 0, its one part: the
    // job itself), each part tagged with its job and scaled by (parts of the job / parts computed).
    let mut work = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let (deeper, parts) = plan.parts(key, args.split_rows)?;
        let chosen = sample_indices(parts.len() as u64, args.subsample, seed ^ (i as u64 + 1));
        let scale = parts.len() as f64 / chosen.len().max(1) as f64;
        for p in chosen {
            work.push(Piece {
                unit: i,
                scale,
                job: deeper.job(&parts[p as usize])?,
            });
        }
    }
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    let (measured, device) = match &args.gpu {
        None => (compute(&work, threads), None),
        Some(spec) => {
            let keep = crate::worker::keep(args.gpu_recalibrate);
            let (m, d) = compute_on_gpu(&work, spec, args.gpu_kernel, keep.as_ref())?;
            (m, Some(d))
        }
    };
    // Each sampled job's figures: computed whole, or estimated from its parts (a job without parts
    // counts nothing).
    let mut units = vec![Measured::default(); keys.len()];
    for (piece, m) in work.iter().zip(&measured) {
        let u = &mut units[piece.unit];
        u.nodes += piece.scale * m.nodes;
        u.seconds += piece.scale * m.seconds;
        u.total += piece.scale * m.total;
    }
    let z = z_for(args.confidence);
    let of = |f: fn(&Measured) -> f64| {
        let values: Vec<f64> = units.iter().map(f).collect();
        if args.split_rows == 0 {
            population_total(jobs, &values, z)
        } else {
            two_stage_total(jobs, &values, z)
        }
    };
    let nodes = of(|m| m.nodes);
    let core_seconds = of(|m| m.seconds);
    let sample_nodes: f64 = measured.iter().map(|m| m.nodes).sum();
    let sample_seconds: f64 = measured.iter().map(|m| m.seconds).sum();
    // On a GPU the pieces run together, so their seconds are shares of the device's wall time: the
    // same interval arithmetic gives device-hours.
    let hours = run_hours(core_seconds, args.record);
    let (core_hours, gpu_hours) = if device.is_some() {
        (None, Some(hours))
    } else {
        (Some(hours), None)
    };
    let out = EstimateOutput {
        n: plan.n(),
        strategy: plan.strategy().to_string(),
        jobs,
        sampled: keys.len() as u64,
        split_rows: args.split_rows,
        computed: work.len() as u64,
        seed,
        confidence: args.confidence,
        nodes,
        core_hours,
        gpu_hours,
        device,
        total: of(|m| m.total),
        nodes_per_second: sample_nodes / sample_seconds.max(1e-9),
        seconds: start.elapsed().as_secs_f64(),
        record: args.record,
    };
    if args.partition.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print_text(&out);
    }
    Ok(())
}

/// The hours a run costs, from the core- or device-seconds of computing each job once: a record run
/// computes every job twice.
fn run_hours(seconds: Interval, record: bool) -> Interval {
    let copies = if record { 2.0 } else { 1.0 };
    seconds.scaled(copies / 3600.0)
}

/// One search to time: a sampled job, or a part of one.
struct Piece {
    /// Index of the sampled job it belongs to.
    unit: usize,
    /// How many of the job's parts it stands for.
    scale: f64,
    job: Job,
}

/// Computes the pieces on `threads` threads, timing each alone; the figures in the pieces' order.
fn compute(work: &[Piece], threads: usize) -> Vec<Measured> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![Measured::default(); work.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads.min(work.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(piece) = work.get(i) else { return };
                let t = Instant::now();
                let r = piece.job.run();
                let m = Measured {
                    nodes: r.nodes as f64,
                    seconds: t.elapsed().as_secs_f64(),
                    total: r.total as f64,
                };
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = m;
            });
        }
    });
    out.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Computes the pieces on the GPU `spec` names, in batches of a few dozen jobs; each piece's seconds are
/// its share (by nodes) of its batch's wall time.
fn compute_on_gpu(
    work: &[Piece],
    spec: &str,
    shape: Option<nqueens_gpu::Shape>,
    keep: Option<&nqueens_gpu::kept::Keep>,
) -> anyhow::Result<(Vec<Measured>, String)> {
    let mut gpus = nqueens_gpu::open_kept(Some(spec), shape, keep)?;
    let mut gpu = gpus.remove(0);
    let device = gpu.info().to_string();
    let mut out = Vec::with_capacity(work.len());
    for chunk in work.chunks(nqueens_worker::DEFAULT_GPU_BATCH) {
        let jobs: Vec<&Job> = chunk.iter().map(|p| &p.job).collect();
        let t = Instant::now();
        let results = nqueens_gpu::run_jobs(&mut gpu, &jobs)?;
        let seconds = t.elapsed().as_secs_f64();
        let nodes: f64 = results.iter().map(|r| r.nodes as f64).sum::<f64>().max(1.0);
        out.extend(results.iter().map(|r| Measured {
            nodes: r.nodes as f64,
            seconds: seconds * r.nodes as f64 / nodes,
            total: r.total as f64,
        }));
    }
    Ok((out, device))
}

fn print_text(o: &EstimateOutput) {
    let pct = o.confidence * 100.0;
    let parts = if o.split_rows > 0 {
        format!(
            ", {} parts of them computed ({} rows further)",
            o.computed, o.split_rows
        )
    } else {
        String::new()
    };
    println!(
        "N = {} {}: {} of {} jobs sampled{parts} (seed {}), {pct:.0}% intervals",
        o.n, o.strategy, o.sampled, o.jobs, o.seed
    );
    use crate::human::{hours, number};
    let range = |i: &Interval| {
        format!(
            "{} ({} to {})",
            number(i.estimate, 4),
            number(i.low, 4),
            number(i.high, 4)
        )
    };
    println!("search nodes: {}", range(&o.nodes));
    if o.record {
        println!("a record run: every job computed twice, the hours below count both");
    }
    // Machines for 30 days, or, below one, how long one takes.
    let fleet = |h: f64, what: &str| {
        let machines = h / 24.0 / 30.0;
        if machines >= 1.0 {
            format!("{} {what} for 30 days", number(machines, 3))
        } else {
            format!("one {what} for {}", hours(h))
        }
    };
    if let Some(h) = &o.core_hours {
        println!(
            "core-hours:   {} at {} nodes/s per core",
            range(h),
            number(o.nodes_per_second, 3)
        );
        println!(
            "that is {} ({} to {})",
            fleet(h.estimate, "core"),
            fleet(h.low, "core"),
            fleet(h.high, "core")
        );
    }
    if let (Some(h), Some(device)) = (&o.gpu_hours, &o.device) {
        println!(
            "GPU-hours:    {} at {} nodes/s on {device}",
            range(h),
            number(o.nodes_per_second, 3)
        );
        println!(
            "that is {} ({} to {})",
            fleet(h.estimate, "such GPU"),
            fleet(h.low, "such GPU"),
            fleet(h.high, "such GPU")
        );
    }
    println!("solutions:    {}", range(&o.total));
    eprintln!("estimated in {:.1} s", o.seconds);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record run is priced at twice the hours of a plain one (every job computed by two
    /// credentials), bounds and all.
    #[test]
    fn a_record_run_costs_twice_the_hours() {
        let seconds = Interval {
            estimate: 7200.0,
            low: 3600.0,
            high: 10_800.0,
        };
        let plain = run_hours(seconds, false);
        assert_eq!((plain.estimate, plain.low, plain.high), (2.0, 1.0, 3.0));
        let record = run_hours(seconds, true);
        assert_eq!((record.estimate, record.low, record.high), (4.0, 2.0, 6.0));
    }
}
