//! `nqueens-worker`: parse the command line and run the worker (the same as `nqueens worker`).

use clap::Parser;
use nqueens_worker::cli::WorkerArgs;

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Parser)]
#[command(name = "nqueens-worker", version, about)]
struct Cli {
    #[command(flatten)]
    args: WorkerArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    nqueens_worker::cli::run(Cli::parse().args).await
}
