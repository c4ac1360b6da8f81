//! `nqueens count`: plan, compute every job on local threads with a progress bar, print the totals.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use nqueens_common::{Job, JobResult, Strategy};
use nqueens_worker::run_jobs;
use serde::Serialize;

use super::{default_threads, CountArgs};

/// The result of a count, as printed with `--json`.
#[derive(Debug, Serialize)]
pub struct CountOutput {
    pub n: u8,
    pub strategy: Strategy,
    /// All solutions, as a decimal string (u128).
    pub total: String,
    /// Solutions up to rotation and reflection, as a decimal string; absent for `mirror`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique: Option<String>,
    pub subproblems: u64,
    pub jobs: u64,
    pub threads: usize,
    /// Search-tree nodes visited.
    pub nodes: String,
    pub seconds: f64,
}

/// Counts and prints.
pub fn run(args: &CountArgs) -> anyhow::Result<()> {
    let plan = args.partition.plan()?;
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    let start = Instant::now();
    let summary = plan.summary();
    let bar = ProgressBar::new(summary.jobs);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} jobs, ETA {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let jobs = plan
        .jobs()
        .map(move |k| plan.job(&k).expect("the plan's own keys are valid"));
    let progress = |_: &Job, _: &JobResult| bar.inc(1);
    let tally = run_jobs(jobs, threads, plan.strategy() == Strategy::D4, &progress)?;
    bar.finish_and_clear();
    let out = CountOutput {
        n: plan.n(),
        strategy: plan.strategy(),
        total: tally.total.to_string(),
        unique: tally.unique()?.map(|u| u.to_string()),
        subproblems: summary.subproblems,
        jobs: summary.jobs,
        threads,
        nodes: tally.nodes.to_string(),
        seconds: start.elapsed().as_secs_f64(),
    };
    if args.partition.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        let unique = out
            .unique
            .as_deref()
            .map(|u| format!(", {u} unique"))
            .unwrap_or_default();
        println!("N = {}: {} solutions{unique}", out.n, out.total);
        eprintln!(
            "strategy {}, {} sub-problems in {} jobs, {} threads, {} nodes in {:.3} s ({:.0} Mnodes/s)",
            out.strategy,
            out.subproblems,
            out.jobs,
            out.threads,
            out.nodes,
            out.seconds,
            tally.nodes as f64 / out.seconds / 1e6
        );
    }
    Ok(())
}
