//! The worker's command line, shared by `nqueens-worker` and `nqueens worker`.

use std::path::PathBuf;

use clap::Args;

use crate::setup::{self, LogFormat};
use crate::{Connection, Faults, WorkerConfig};

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// Compute threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The name shown in status and logs (default: the host name). Workers sharing a machine need
    /// different names (or journals).
    #[arg(long)]
    pub name: Option<String>,
    /// Journal of unacknowledged results (default: DATA/worker-NAME.journal, DATA as for `nqueens`).
    #[arg(long)]
    pub journal: Option<PathBuf>,
    /// Only compute jobs of this run.
    #[arg(long)]
    pub run: Option<String>,
    /// Exit once no run has anything left to lease (instead of waiting for new runs).
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(flatten)]
    pub faults: Faults,
}

/// Runs a worker process: logging, signals, the client loop.
pub async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    setup::init_logging(args.log_format, "info");
    let name = args.name.unwrap_or_else(setup::host_name);
    let config =
        WorkerConfig {
            connection: args.connection,
            threads: args
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .max(1),
            journal: Some(args.journal.unwrap_or_else(|| {
                setup::default_data_dir().join(format!("worker-{name}.journal"))
            })),
            name,
            run: args.run,
            exit_when_idle: args.exit_when_idle,
            faults: args.faults,
        };
    crate::run(config, setup::shutdown_on_signals()).await?;
    Ok(())
}
