//! `nqueens-worker`: parse the command line, set up logging and signals, run the client loop.

use std::path::PathBuf;

use clap::Parser;
use nqueens_worker::setup::{self, LogFormat};
use nqueens_worker::WorkerConfig;

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Parser)]
#[command(name = "nqueens-worker", version, about)]
struct Args {
    /// The coordinator's address, e.g. http://10.0.0.1:7447.
    #[arg(long, env = "NQUEENS_COORDINATOR")]
    coordinator: String,
    /// Compute threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// The name shown in status and logs (default: the host name). Workers sharing a machine need
    /// different names (or journals).
    #[arg(long)]
    name: Option<String>,
    /// Journal of unacknowledged results (default: DATA/worker-NAME.journal, DATA as for `nqueens`).
    #[arg(long)]
    journal: Option<PathBuf>,
    /// Only compute jobs of this run.
    #[arg(long)]
    run: Option<String>,
    /// Exit once no run has anything left to lease (instead of waiting for new runs).
    #[arg(long)]
    exit_when_idle: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    setup::init_logging(args.log_format);
    let name = args.name.unwrap_or_else(setup::host_name);
    let config = WorkerConfig {
        coordinator: args.coordinator,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
        journal: Some(
            args.journal
                .unwrap_or_else(|| setup::default_data_dir().join(format!("worker-{name}.journal"))),
        ),
        name,
        run: args.run,
        exit_when_idle: args.exit_when_idle,
    };
    nqueens_worker::run(config, setup::shutdown_on_signals()).await?;
    Ok(())
}
