//! `nqueens submit` and `nqueens status`: clients of a running coordinator.

use clap::Args;
use nqueens_common::proto::{self, RunState};
use nqueens_common::Strategy;
use serde::Serialize;

use super::PartitionArgs;
use crate::progress::format_eta;

/// A call the coordinator refused or could not answer.
#[derive(Debug, thiserror::Error)]
#[error("coordinator: {message} ({code:?})")]
pub struct RpcError {
    pub code: tonic::Code,
    pub message: String,
}

fn rpc(s: tonic::Status) -> RpcError {
    RpcError {
        code: s.code(),
        message: s.message().to_string(),
    }
}

/// Arguments of `nqueens submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub partition: PartitionArgs,
    #[command(flatten)]
    pub connection: nqueens_worker::Connection,
    /// Fraction of jobs (0 to 1) computed twice by workers of different names (default: the
    /// coordinator's, 0.01).
    #[arg(long)]
    pub verify_fraction: Option<f64>,
}

/// Arguments of `nqueens status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: nqueens_worker::Connection,
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    /// One JSON object per run (with --workers: per worker), one per line.
    #[arg(long)]
    pub json: bool,
    /// List the workers (seen by this coordinator incarnation, and every quarantined one) instead.
    #[arg(long)]
    pub workers: bool,
}

/// A run's status as `status --json` and `submit --json` print it.
#[derive(Debug, Serialize)]
pub struct StatusOutput {
    pub run: String,
    pub n: u32,
    pub strategy: String,
    pub depth: u32,
    pub state: &'static str,
    pub jobs_done: u64,
    pub jobs_total: u64,
    pub jobs_leased: u64,
    pub jobs_verifying: u64,
    pub jobs_disputed: u64,
    pub jobs_failed: u64,
    pub verify_fraction: f64,
    pub percent: f64,
    /// The partial total while running; the final count once done.
    pub total: String,
    /// Present once the run is done (d4 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique: Option<String>,
    pub nodes: String,
    pub active_workers: u32,
    pub jobs_per_second: f64,
    pub eta_seconds: Option<f64>,
}

impl From<proto::RunStatus> for StatusOutput {
    fn from(s: proto::RunStatus) -> StatusOutput {
        let strategy = nqueens_common::proto::strategy_from_wire(s.strategy)
            .map_or_else(|_| "unknown".to_string(), |st: Strategy| st.to_string());
        StatusOutput {
            percent: if s.jobs_total == 0 {
                100.0
            } else {
                100.0 * s.jobs_done as f64 / s.jobs_total as f64
            },
            run: s.run,
            n: s.n,
            strategy,
            depth: s.depth,
            state: match RunState::try_from(s.state) {
                Ok(RunState::Done) => "done",
                Ok(RunState::Stalled) => "stalled",
                _ => "running",
            },
            jobs_done: s.jobs_done,
            jobs_total: s.jobs_total,
            jobs_leased: s.jobs_leased,
            jobs_verifying: s.jobs_verifying,
            jobs_disputed: s.jobs_disputed,
            jobs_failed: s.jobs_failed,
            verify_fraction: s.verify_fraction,
            total: s.total,
            unique: s.unique,
            nodes: s.nodes,
            active_workers: s.active_workers,
            jobs_per_second: s.jobs_per_second,
            eta_seconds: s.eta_seconds,
        }
    }
}

fn print(s: &StatusOutput, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(s)?);
    } else {
        let unique = s
            .unique
            .as_deref()
            .map(|u| format!(", {u} unique"))
            .unwrap_or_default();
        let mut checks = format!(", {} verifying", s.jobs_verifying);
        if s.jobs_disputed > 0 {
            checks += &format!(", {} DISPUTED", s.jobs_disputed);
        }
        if s.jobs_failed > 0 {
            checks += &format!(", {} FAILED", s.jobs_failed);
        }
        println!(
            "run {}: N = {} {} {}, {}/{} jobs ({:.2}%), total {}{unique}, {} leased{checks}, {} workers, {:.2} jobs/s, ETA {}",
            s.run,
            s.n,
            s.strategy,
            s.state,
            s.jobs_done,
            s.jobs_total,
            s.percent,
            s.total,
            s.jobs_leased,
            s.active_workers,
            s.jobs_per_second,
            if s.state == "done" { "-".to_string() } else { format_eta(s.eta_seconds) },
        );
    }
    Ok(())
}

/// Creates a run on the coordinator and prints it.
pub fn submit(args: &SubmitArgs) -> anyhow::Result<()> {
    let plan = args.partition.plan()?;
    let status = super::runtime()?.block_on(async {
        let mut client = nqueens_worker::connect(&args.connection)?;
        let req = proto::CreateRunRequest {
            n: plan.n() as u32,
            strategy: proto::Strategy::from(plan.strategy()) as i32,
            depth: Some(plan.depth() as u32),
            reuse: false,
            verify_fraction: args.verify_fraction,
        };
        anyhow::Ok(client.create_run(req).await.map_err(rpc)?.into_inner())
    })?;
    print(&status.into(), args.partition.json)
}

/// A worker as `status --workers --json` prints it.
#[derive(Debug, Serialize)]
pub struct WorkerOutput {
    pub name: String,
    pub worker_id: String,
    pub threads: u32,
    pub accepted: u64,
    pub seen_seconds_ago: Option<f64>,
    pub quarantined: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

fn print_worker(w: proto::WorkerStatus, json: bool) -> anyhow::Result<()> {
    let w = WorkerOutput {
        name: w.name,
        worker_id: w.worker_id,
        threads: w.threads,
        accepted: w.accepted,
        seen_seconds_ago: w.seen_seconds_ago,
        quarantined: w.quarantined,
        reason: w.reason,
    };
    if json {
        println!("{}", serde_json::to_string(&w)?);
    } else if w.quarantined {
        println!("worker {}: QUARANTINED: {}", w.name, w.reason);
    } else {
        println!(
            "worker {} ({}): {} threads, {} results accepted, seen {}",
            w.name,
            w.worker_id,
            w.threads,
            w.accepted,
            w.seen_seconds_ago
                .map_or("-".into(), |s| format!("{s:.0}s ago"))
        );
    }
    Ok(())
}

/// Prints the status of one or every run (or the workers), and the quarantined workers.
pub fn status(args: &StatusArgs) -> anyhow::Result<()> {
    let (runs, workers) = super::runtime()?.block_on(async {
        let mut client = nqueens_worker::connect(&args.connection)?;
        let workers = client
            .list_workers(proto::ListWorkersRequest {})
            .await
            .map_err(rpc)?
            .into_inner()
            .workers;
        if args.workers {
            return anyhow::Ok((Vec::new(), workers));
        }
        let runs = match &args.run {
            Some(run) => vec![client
                .get_run(proto::GetRunRequest { run: run.clone() })
                .await
                .map_err(rpc)?
                .into_inner()],
            None => {
                client
                    .list_runs(proto::ListRunsRequest {})
                    .await
                    .map_err(rpc)?
                    .into_inner()
                    .runs
            }
        };
        anyhow::Ok((runs, workers))
    })?;
    if args.workers {
        for w in workers {
            print_worker(w, args.json)?;
        }
        return Ok(());
    }
    for run in runs {
        print(&run.into(), args.json)?;
    }
    if !args.json {
        for w in workers.into_iter().filter(|w| w.quarantined) {
            print_worker(w, false)?;
        }
    }
    Ok(())
}
