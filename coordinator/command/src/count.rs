//! `nqueens count`: counts through the embedded coordinator over the on-disk store (resuming an earlier,
//! interrupted count of the same plan), with a progress bar, and prints the totals.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use nqueens_common::Strategy;
use serde::Serialize;

use super::CountArgs;
use crate::local::{self, LocalCount};

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
    /// Jobs that were already done in the store when this count started (a resumed count).
    pub jobs_resumed: u64,
    pub threads: usize,
    /// The run's id in the store.
    pub run: String,
    /// The store's directory.
    pub data: String,
    /// Search-tree nodes visited (by this and earlier invocations).
    pub nodes: String,
    /// With `--gpu`: the nodes of the jobs this invocation's GPUs computed (host-settled parts included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_nodes: Option<String>,
    pub seconds: f64,
}

/// Counts and prints.
pub fn run(args: &CountArgs) -> anyhow::Result<()> {
    let plan = args.partition.plan()?;
    let threads = args.gpu.threads(args.threads).max(1);
    let data = args
        .data
        .clone()
        .unwrap_or_else(crate::setup::default_data_dir);
    let start = Instant::now();
    let summary = plan.summary()?;
    let bar = ProgressBar::new(summary.jobs);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} jobs, ETA {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(bar_eta(None));
    let opts = LocalCount {
        n: plan.n() as u32,
        strategy: plan.strategy(),
        depth: Some(plan.depth() as u32),
        threads,
        data: data.clone(),
        gpu: args.gpu.config(),
    };
    let runtime = super::runtime()?;
    // Jobs acknowledged so far (each is in the store: a later count resumes from them); `u64::MAX`
    // until the run is first seen (the store still opening).
    let saved = std::sync::atomic::AtomicU64::new(u64::MAX);
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = local::count(opts, |v| {
                bar.set_position(v.tally.jobs);
                bar.set_message(bar_eta(v.eta_seconds));
                saved.store(v.tally.jobs, std::sync::atomic::Ordering::Relaxed);
            }) => outcome.map_err(|e| match e {
                // Kept as the coordinator's error: its exit code tells bad input apart.
                local::LocalError::Coordinator(e) => anyhow::Error::from(e),
                other => anyhow::Error::from(other),
            }),
            _ = tokio::signal::ctrl_c() => {
                bar.abandon();
                let seen = saved.load(std::sync::atomic::Ordering::Relaxed);
                Err(Interrupted {
                    saved: (seen != u64::MAX).then_some(seen),
                    jobs: summary.jobs,
                    data: data.clone(),
                }
                .into())
            }
        }
    })?;
    bar.finish_and_clear();
    let view = &outcome.view;
    // Every job counted, yet the counts cannot be right (some result is wrong): no total is printed
    // as the answer.
    if let Some(why) = view.meta.contradiction(&view.tally) {
        anyhow::bail!(
            "run {} of N = {} in {}: every job is counted, but {why}: some result is wrong and the total ({}) is not the answer (run state: inconsistent). Count again in a new directory (--data); on a cluster, `submit --verify-fraction 1` has every job computed twice",
            view.id(),
            plan.n(),
            data.display(),
            view.tally.total
        );
    }
    let out = CountOutput {
        n: plan.n(),
        strategy: plan.strategy(),
        total: view.tally.total.to_string(),
        unique: view.tally.unique()?.map(|u| u.to_string()),
        subproblems: summary.subproblems,
        jobs: summary.jobs,
        jobs_resumed: outcome.jobs_resumed,
        threads,
        run: view.id(),
        data: data.display().to_string(),
        nodes: view.tally.nodes.to_string(),
        gpu_nodes: args
            .gpu
            .gpu
            .is_some()
            .then(|| outcome.gpu_nodes.to_string()),
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
        let resumed = match out.jobs_resumed {
            0 => String::new(),
            k if k == out.jobs => " (all jobs were already done: answered from the store)".into(),
            k => format!(" (resumed: {k} jobs were already done)"),
        };
        let on_gpu = out
            .gpu_nodes
            .as_deref()
            .map(|g| format!(" ({g} on GPUs)"))
            .unwrap_or_default();
        eprintln!(
            "strategy {}, {} sub-problems in {} jobs, {} threads, {} nodes{on_gpu}, {:.3} s; run {} in {}{resumed}",
            out.strategy, out.subproblems, out.jobs, out.threads, out.nodes, out.seconds, out.run, out.data
        );
    }
    Ok(())
}

/// The ETA beside the progress bar: the coordinator's (at the rate of the jobs this invocation
/// completed, not counting the jobs a resumed count found done), `-` until there is such a rate.
fn bar_eta(eta_seconds: Option<f64>) -> String {
    match eta_seconds {
        Some(s) if s.is_finite() => nqueens_coordinator::service::progress::format_eta(Some(s)),
        _ => "-".to_string(),
    }
}

/// A count stopped by Ctrl-C: what is saved, and how to go on.
#[derive(Debug, thiserror::Error)]
#[error("{}", interrupted(self))]
pub struct Interrupted {
    /// Jobs saved, once the run was seen (`None`: interrupted while the store was opening).
    pub saved: Option<u64>,
    pub jobs: u64,
    pub data: std::path::PathBuf,
}

fn interrupted(i: &Interrupted) -> String {
    match i.saved {
        Some(saved) => format!(
            "interrupted: {saved} of {} jobs are saved in {}; run the same command again to resume",
            i.jobs,
            i.data.display()
        ),
        None => format!(
            "interrupted while {} was being opened, before its run was read: every job it saved before is kept; run the same command again to resume",
            i.data.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::bar_eta;

    /// A Ctrl-C while the store opens says so, not "0 of N jobs are saved" of a store that may hold
    /// many (found by a review, 2026-11-24, a later session).
    #[test]
    fn an_interrupt_before_the_run_is_read_does_not_say_nothing_is_saved() {
        let early = super::Interrupted {
            saved: None,
            jobs: 69,
            data: "D".into(),
        };
        let text = early.to_string();
        assert!(
            !text.contains("0 of") && text.contains("before its run was read"),
            "{text}"
        );
        let late = super::Interrupted {
            saved: Some(18),
            jobs: 69,
            data: "D".into(),
        };
        assert!(late
            .to_string()
            .starts_with("interrupted: 18 of 69 jobs are saved in D"));
    }

    #[test]
    fn the_bar_shows_no_eta_until_there_is_a_rate() {
        assert_eq!(bar_eta(None), "-");
        assert_eq!(bar_eta(Some(f64::INFINITY)), "-");
        assert_eq!(bar_eta(Some(20.0)), "20s");
        assert_eq!(bar_eta(Some(125.0)), "2m 5s");
    }
}
