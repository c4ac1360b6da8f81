//! `nqueens status`: the runs, the workers or the jobs of a running coordinator, once or watched
//! ([`watch`]).

pub mod watch;

use clap::Args;
use nqueens_proto as proto;

use crate::remote::print;
use crate::rpc::{all_runs, all_workers, locate, rpc, RpcError};
use nqueens_coordinator::wire::status_json::WorkerOutput;

/// Arguments of `nqueens status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: crate::connection::ConnectionArgs,
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    /// One JSON object per run (with --workers: per worker), one per line.
    #[arg(long)]
    pub json: bool,
    /// List the workers (seen by this coordinator incarnation, and every quarantined one) instead.
    #[arg(long, conflicts_with = "watch")]
    pub workers: bool,
    /// List the jobs in this state instead (of --run, or of every run), one per line: failed,
    /// disputed or verifying.
    #[arg(long, value_enum, value_name = "STATE", conflicts_with_all = ["watch", "workers"])]
    pub jobs: Option<crate::control::JobsIn>,
    /// With --jobs: most jobs listed (1 to 10000); past it, the listing says it is truncated.
    #[arg(long, default_value_t = 1000, requires = "jobs", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
    /// Keep watching: on a terminal, a live view with a progress bar per run and the worker table;
    /// otherwise one line per run at each interval. Ends when every run shown is done, stalled,
    /// cancelled or inconsistent (or on Ctrl-C); while the coordinator is unreachable it says since when and keeps trying.
    #[arg(long)]
    pub watch: bool,
    /// How often --watch refreshes, e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, requires = "watch")]
    pub interval: std::time::Duration,
}

fn print_worker(w: proto::WorkerStatus, json: bool) -> anyhow::Result<()> {
    let w = WorkerOutput::from(w);
    if json {
        println!("{}", serde_json::to_string(&w)?);
    } else if w.quarantined {
        println!("worker {}: QUARANTINED: {}", w.name, w.reason);
    } else {
        println!("{}", watch::worker_row(&w));
    }
    Ok(())
}

/// The runs (one, or all) and the workers, as the coordinator sees them now.
pub async fn fetch(
    client: &mut nqueens_proto::Client,
    run: Option<&str>,
) -> anyhow::Result<(Vec<proto::RunStatus>, Vec<proto::WorkerStatus>)> {
    let workers = match all_workers(client).await {
        Ok(workers) => workers,
        // A worker credential reads runs but lists no workers: its runs are shown without them.
        Err(e)
            if e.downcast_ref::<RpcError>()
                .is_some_and(|r| r.code == tonic::Code::PermissionDenied) =>
        {
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let runs = match run {
        Some(run) => vec![client
            .get_run(proto::GetRunRequest {
                run: run.to_string(),
            })
            .await
            .map_err(rpc)?
            .into_inner()],
        None => all_runs(client).await?,
    };
    Ok((runs, workers))
}

/// Prints the status of one or every run (or the workers), and the quarantined workers; with --watch,
/// keeps printing.
pub fn status(args: &StatusArgs) -> anyhow::Result<()> {
    if let Some(jobs) = args.jobs {
        return crate::control::list_jobs(
            &args.connection,
            args.run.as_deref(),
            jobs,
            args.limit,
            args.json,
        );
    }
    let runtime = super::runtime()?;
    if args.watch {
        return runtime.block_on(watch::watch(args));
    }
    let (runs, workers) = runtime
        .block_on(async {
            let mut client = args.connection.connect()?;
            fetch(&mut client, args.run.as_deref()).await
        })
        .map_err(|e| locate(e, &args.connection.coordinator))?;
    if args.workers {
        if !args.json {
            println!("{}", watch::WORKER_HEADER);
        }
        // The table first, then why each quarantined worker is.
        let (quarantined, others): (Vec<_>, Vec<_>) = workers
            .into_iter()
            .partition(|w| w.quarantined && !args.json);
        for w in others.into_iter().chain(quarantined) {
            print_worker(w, args.json)?;
        }
        return Ok(());
    }
    if runs.is_empty() && !args.json {
        println!(
            "no runs on {} yet (nqueens submit N creates one)",
            args.connection.coordinator
        );
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
