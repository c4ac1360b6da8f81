//! `nqueens-worker`: parse the command line and run the worker (the same as `nqueens worker`).

use clap::Parser;
use nqueens_cli::setup::{self, LogFormat};
use nqueens_cli::worker::WorkerArgs;

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Parser)]
#[command(name = "nqueens-worker", version, about)]
struct Cli {
    #[command(flatten)]
    args: WorkerArgs,
    /// Log format: text lines, or one JSON object per line (levels by RUST_LOG).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Search kernel: `avx512-lists`, `avx2-lists`, `sse41-lists`, `neon-lists`, `avx512`, `avx2`, `avx2-nogather`,
    /// `sse41`, `neon` or `scalar` (default: the fastest this CPU runs, measured at
    /// start). A kernel the CPU cannot run is refused.
    #[arg(long, value_name = "NAME", value_parser = nqueens_cli::worker::kernel)]
    kernel: Option<nqueens_common::kernel::Variant>,
}

/// Errors end as `nqueens worker`'s do: one `error:` line (never a backtrace) and the same exit code.
fn main() {
    let cli = Cli::parse();
    setup::init_logging(cli.log_format, "info");
    setup::private_files();
    if let Err(e) = run(cli) {
        eprintln!("{}", nqueens_cli::message(&e));
        std::process::exit(nqueens_cli::exit_code(&e));
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(variant) = cli.kernel {
        nqueens_common::kernel::choose(variant)?;
    }
    tokio::runtime::Runtime::new()?.block_on(nqueens_cli::worker::run(cli.args))
}
