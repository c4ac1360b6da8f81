//! The worker's command line, shared by `nqueens-worker` and `nqueens worker`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::setup;
use crate::{http, Connection, Faults, Metrics, WorkerConfig};

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// Compute threads (default: all cores).
    #[arg(long, value_parser = threads)]
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
    /// Interval of the summary log line (jobs done, nodes/s), e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub progress_interval: Duration,
    /// Serve Prometheus metrics over HTTP at this address (e.g. 0.0.0.0:9101), path /metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    #[command(flatten)]
    pub faults: Faults,
}

/// Runs a worker process (logging already set up): signals, the client loop.
pub async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let name = args.name.unwrap_or_else(setup::host_name);
    let metrics = Arc::new(Metrics::default());
    let shutdown = setup::shutdown_on_signals();
    if let Some(addr) = args.metrics_listen {
        let m = metrics.clone();
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || async move { http::metrics_response(m.render()) }),
        );
        // It serves until the process exits.
        http::spawn(addr, router, std::future::pending()).await?;
    }
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
            progress_interval: args.progress_interval,
            metrics,
        };
    crate::run(config, shutdown).await?;
    Ok(())
}

/// Parses a thread count: a whole number from 1 (0 is an error, never read as one).
pub fn threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number of threads")),
    }
}
