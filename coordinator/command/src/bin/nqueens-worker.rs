//! `nqueens-worker`: parse the command line and run the worker (the same as `nqueens worker`).

use clap::Parser;
use nqueens_cli::setup;
use nqueens_cli::worker::WorkerArgs;

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Parser)]
#[command(name = "nqueens-worker", version, about)]
struct Cli {
    #[command(flatten)]
    args: WorkerArgs,
}

/// Errors end as `nqueens worker`'s do: one `error:` line (never a backtrace) and the same exit code.
fn main() {
    let cli = Cli::parse();
    setup::init_logging(cli.args.process.log_format, "info");
    setup::private_files();
    if let Err(e) = run(cli) {
        eprintln!("{}", nqueens_cli::message(&e));
        std::process::exit(nqueens_cli::exit_code(&e));
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(variant) = cli.args.kernel.kernel {
        nqueens_common::kernel::choose(variant)?;
    }
    nqueens_cli::runtime_with(cli.args.process.runtime_threads)?
        .block_on(nqueens_cli::worker::run(cli.args))
}
