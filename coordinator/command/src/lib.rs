//! The `nqueens` command (and `nqueens-worker`): the command line and the glue around the libraries.
//!
//! Design: one module per subcommand (`count`, `serve`, `worker`, `submit`/`status` in `remote`,
//! `cancel`/`pause`/`resume`/`priority` in `control`, ...),
//! each parsing with clap derive and calling into `nqueens-coordinator`, `nqueens-worker` and
//! `nqueens-common`; `local` is the embedded mode behind `count` (a coordinator on loopback and an
//! in-process worker, the cluster's own code path); `setup` is process setup (logging, signals, the data
//! directory); `load` is the load generator's engine. Nothing here is needed to embed a coordinator or a
//! worker in another program.

mod backup;
mod bench;
mod certificate;
pub mod connection;
mod control;
mod count;
mod credential;
mod durations;
mod estimate;
pub mod http;
mod human;
mod load;
mod loadgen;
pub mod local;
pub mod outage;
mod plan;
pub mod pool;
pub mod probe;
mod remote;
mod rpc;
mod serve;
pub mod setup;
mod solve;
mod status;
pub mod tls;
pub mod worker;

use std::path::PathBuf;

use crate::setup::LogFormat;
use clap::{Args, Parser, Subcommand};
use nqueens_common::{Error, Plan, Strategy};

/// Count the solutions of the N-queens problem exactly.
#[derive(Debug, Parser)]
#[command(name = "nqueens", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The flags of the commands that run long and log: `serve`, `worker`, `count`, `loadgen`.
#[derive(Debug, Clone, Args)]
pub struct ProcessFlags {
    /// Log format: text lines, or one JSON object per line (levels by RUST_LOG).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Threads of the async runtime that serves gRPC, HTTP and the store (default: one per core, at
    /// least 2); searches run on threads of their own.
    #[arg(long, value_name = "N", value_parser = crate::worker::threads)]
    pub runtime_threads: Option<usize>,
}

/// The flag of the commands that search: `count`, `worker`, `bench`, `estimate`.
#[derive(Debug, Clone, Args)]
pub struct KernelFlag {
    /// Search kernel: `avx512-lists`, `avx2-lists`, `sse41-lists`, `neon-lists`, `avx512`, `avx2`, `avx2-nogather`,
    /// `sse41`, `neon` or `scalar` (default: the fastest this CPU runs, measured at
    /// start). A kernel the CPU cannot run is refused.
    #[arg(long, value_name = "NAME", value_parser = crate::worker::kernel)]
    pub kernel: Option<nqueens_common::kernel::Variant>,
}

impl Cli {
    /// The process flags of a command that has them.
    fn process(&self) -> Option<&ProcessFlags> {
        match &self.command {
            Command::Serve(a) => Some(&a.process),
            Command::Worker(a) => Some(&a.process),
            Command::Count(a) => Some(&a.process),
            Command::Loadgen(a) => Some(&a.process),
            _ => None,
        }
    }

    /// The kernel a searching command was told to use.
    fn kernel(&self) -> Option<nqueens_common::kernel::Variant> {
        match &self.command {
            Command::Worker(a) => a.kernel.kernel,
            Command::Count(a) => a.kernel.kernel,
            Command::Bench(a) => a.kernel.kernel,
            Command::Estimate(a) => a.kernel.kernel,
            _ => None,
        }
    }

    /// Whether the command prints output a pipe may cut short (every command but the long-running
    /// servers and workers, which log and must outlive any reader).
    pub fn prints_for_a_pipe(&self) -> bool {
        !matches!(
            self.command,
            Command::Serve(_) | Command::Worker(_) | Command::Loadgen(_)
        )
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Count all solutions and the unique ones (up to rotation and reflection), through an embedded
    /// coordinator and local workers over an on-disk store that resumes.
    #[command(
        after_long_help = "Examples:\n  nqueens count 16\n  nqueens count 18 --threads 4 --data ./n18\n  nqueens count 20 --gpu --json"
    )]
    Count(CountArgs),
    /// Show how the search space is split into sub-problems and jobs, without computing.
    #[command(
        after_long_help = "Examples:\n  nqueens plan 27\n  nqueens plan 20 --strategy mirror --depth 6 --json"
    )]
    Plan(PlanArgs),
    /// Estimate a run's search nodes and core-hours from a random sample of its jobs, before starting it.
    #[command(
        after_long_help = "Examples:\n  nqueens estimate 20 --sample 32\n  nqueens estimate 27 --split-rows 2 --seed 7\n  nqueens estimate 24 --gpu --json"
    )]
    Estimate(estimate::EstimateArgs),
    /// Time the kernel against the plain recursive mirror baseline, side by side.
    #[command(
        after_long_help = "Examples:\n  nqueens bench 16 17 --threads 1,2\n  nqueens bench 18 19 --gpu cuda:0\n  nqueens bench 19 --gpu cuda:0 --gpu-kernel flat/128/4,local/256/8"
    )]
    Bench(bench::BenchArgs),
    /// Run the coordinator: a gRPC server that leases jobs to workers and sums their results.
    #[command(
        after_long_help = "Examples:\n  nqueens serve\n  nqueens serve --listen 0.0.0.0:7447 --data data --token-file operator.token --tls-cert tls/server.pem --tls-key tls/server-key.pem --metrics-listen 0.0.0.0:9447"
    )]
    Serve(serve::ServeArgs),
    /// Create a run on a coordinator.
    #[command(
        after_long_help = "Examples:\n  nqueens submit 20\n  nqueens submit 27 --verify-fraction 0.05 --priority 10\n  nqueens submit 18 --reuse --json"
    )]
    Submit(remote::SubmitArgs),
    /// Show the runs of a coordinator (or with --jobs, its failed, disputed or verifying jobs).
    #[command(
        after_long_help = "Examples:\n  nqueens status\n  nqueens status --run 3 --watch\n  nqueens status --workers\n  nqueens status --run 3 --jobs failed --json"
    )]
    Status(status::StatusArgs),
    /// Cancel a run for good: it leases nothing more and records no more results; its total stays
    /// partial.
    #[command(after_long_help = "Examples:\n  nqueens cancel 3")]
    Cancel(control::RunArgs),
    /// Pause a run: it leases nothing until resumed (jobs out may finish and report).
    #[command(after_long_help = "Examples:\n  nqueens pause 3")]
    Pause(control::RunArgs),
    /// Resume a paused run.
    #[command(after_long_help = "Examples:\n  nqueens resume 3")]
    Resume(control::RunArgs),
    /// Set a run's priority: workers take jobs from the running run of the highest priority first.
    #[command(after_long_help = "Examples:\n  nqueens priority 3 10")]
    Priority(control::PriorityArgs),
    /// Put a run's failed jobs back to pending, while the coordinator serves (a stalled run runs again).
    #[command(after_long_help = "Examples:\n  nqueens retry 3")]
    Retry(control::RunArgs),
    /// Issue, revoke or list worker credentials: one token per worker, the identity every check knows
    /// it by.
    #[command(
        after_long_help = "Examples:\n  nqueens credential issue node-1 --out node-1.token\n  nqueens credential list\n  nqueens credential revoke node-1"
    )]
    Credential(credential::CredentialArgs),
    /// Load a coordinator with simulated workers (synthetic results, no search) and measure what it
    /// sustains: committed results per second and lease/report latency.
    #[command(
        after_long_help = "Examples:\n  nqueens loadgen --workers 1000 --rate 5000 --duration 20s\n  nqueens loadgen --coordinator https://host:7447 --tls-ca ca.pem --workers 100"
    )]
    Loadgen(loadgen::LoadgenArgs),
    /// Run a worker (the same as the `nqueens-worker` binary).
    #[command(
        after_long_help = "Examples:\n  nqueens worker\n  nqueens worker --name node-1 --coordinator https://coordinator.example:7447 --tls-ca ca.pem --token-file node-1.token\n  nqueens worker --gpu --run 3 --exit-when-idle"
    )]
    Worker(crate::worker::WorkerArgs),
    /// Write a store's runs and results as JSON lines (offline: the coordinator stopped).
    #[command(
        after_long_help = "Examples:\n  nqueens export --data data > backup.jsonl\n  nqueens export --data data --run 3 > run3.jsonl"
    )]
    Export(backup::ExportArgs),
    /// Build a store from an export or a ledger (results.jsonl), then audit it.
    #[command(after_long_help = "Examples:\n  nqueens import backup.jsonl --data restored")]
    Import(backup::ImportArgs),
    /// Check a store offline: totals against results, job states, the ledger against the store.
    #[command(after_long_help = "Examples:\n  nqueens audit --data data")]
    Audit(backup::AuditArgs),
    /// Write a finished run's certificate: its plan, totals, every job's counts and who computed them,
    /// and a root over the header and job lines (RFC 6962 Merkle, SHA-256) (offline: the coordinator stopped).
    #[command(after_long_help = "Examples:\n  nqueens certificate 3 --data data --out n20.cert")]
    Certificate(certificate::CertificateArgs),
    /// Check a certificate on its own (plan, order, sums, root), then recompute a sample of its jobs here.
    #[command(
        after_long_help = "Examples:\n  nqueens spot-check n20.cert --sample 50\n  nqueens spot-check n20.cert --sample 200 --threads 8 --seed 2026"
    )]
    SpotCheck(certificate::SpotCheckArgs),
    /// List the GPUs (CUDA and OpenCL devices) that `--gpu` can name, or say why a backend is missing.
    #[command(after_long_help = "Examples:\n  nqueens gpus")]
    Gpus,
    /// Print solutions: one of any size at once, or every solution of a small board (--all), as boards
    /// or JSON
    #[command(after_long_help = "Examples:\n  nqueens solve 8\n  nqueens solve 6 --all --json")]
    Solve(solve::SolveArgs),
    /// TLS material for the coordinator: `tls init DIR` writes a CA and a server certificate signed by it.
    #[command(
        after_long_help = "Examples:\n  nqueens tls init tls --host coordinator.example --host 10.0.0.5"
    )]
    Tls(tls::TlsArgs),
}

/// Board size and partition, shared by `count` and `plan`.
#[derive(Debug, Args)]
pub struct PartitionArgs {
    /// Board size, 1 to 32.
    pub n: u32,
    /// Partition strategy: d4 (8 symmetries, default) or mirror (left/right only).
    #[arg(long, default_value = "d4")]
    pub strategy: String,
    /// Job depth: rows of each job's prefix (mirror) or extra searched rows per job key (d4).
    #[arg(long)]
    pub depth: Option<u8>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl PartitionArgs {
    /// The checked plan these arguments describe.
    pub fn plan(&self) -> Result<Plan, Error> {
        let strategy: Strategy = self.strategy.parse()?;
        match self.depth {
            Some(d) => Plan::with_depth(self.n, strategy, d),
            None => Plan::new(self.n, strategy),
        }
    }
}

/// Arguments of `nqueens count`.
#[derive(Debug, Args)]
pub struct CountArgs {
    #[command(flatten)]
    pub partition: PartitionArgs,
    /// Compute threads (default: all cores).
    #[arg(long, value_parser = crate::worker::threads)]
    pub threads: Option<usize>,
    /// The store's directory (default: $NQUEENS_DATA, else $XDG_DATA_HOME/nqueens, else
    /// ~/.local/share/nqueens, else ./nqueens-data when HOME is unset too). Counting the same plan again
    /// resumes, or answers from the store.
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub gpu: crate::worker::GpuArgs,
    #[command(flatten)]
    pub kernel: KernelFlag,
    #[command(flatten)]
    pub process: ProcessFlags,
}

/// Arguments of `nqueens plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub partition: PartitionArgs,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    // The long-running commands log their work; the others speak through their output, and only
    // warnings and errors show.
    let level = match cli.command {
        Command::Serve(_) | Command::Worker(_) => "info",
        _ => "warn",
    };
    let format = cli.process().map_or(LogFormat::Text, |p| p.log_format);
    setup::init_logging(format, level);
    // The commands that write a data directory or a journal keep them to their owner (`tls init`
    // chooses each file's mode itself: the certificates are public).
    if matches!(
        cli.command,
        Command::Serve(_)
            | Command::Count(_)
            | Command::Worker(_)
            | Command::Import(_)
            | Command::Loadgen(_)
    ) {
        setup::private_files();
    }
    if let Some(variant) = cli.kernel() {
        nqueens_common::kernel::choose(variant)?;
    }
    if let Some(threads) = cli.process().and_then(|p| p.runtime_threads) {
        RUNTIME_THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
    }
    match cli.command {
        Command::Count(args) => count::run(&args),
        Command::Solve(args) => solve::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Gpus => {
            for line in nqueens_gpu::list() {
                println!("{line}");
            }
            Ok(())
        }
        Command::Estimate(args) => estimate::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Submit(args) => remote::submit(&args),
        Command::Status(args) => status::status(&args),
        Command::Cancel(args) => control::run(control::Action::Cancel, &args),
        Command::Pause(args) => control::run(control::Action::Pause, &args),
        Command::Resume(args) => control::run(control::Action::Resume, &args),
        Command::Priority(args) => control::priority(&args),
        Command::Retry(args) => credential::retry(&args),
        Command::Credential(args) => credential::run(&args),
        Command::Loadgen(args) => loadgen::run(&args),
        Command::Worker(args) => runtime()?.block_on(crate::worker::run(args)),
        Command::Export(args) => backup::export(&args),
        Command::Import(args) => backup::import(&args),
        Command::Audit(args) => backup::audit(&args),
        Command::Certificate(args) => certificate::write(&args),
        Command::SpotCheck(args) => certificate::spot_check(&args),
        Command::Tls(args) => tls::run(&args),
    }
}

/// The async runtime of the commands that talk gRPC, with `threads` worker threads if given (else
/// `--runtime-threads`, else one per core).
pub fn runtime_with(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    if let Some(t) = threads {
        RUNTIME_THREADS.store(t, std::sync::atomic::Ordering::Relaxed);
    }
    runtime()
}

/// The async runtime of the commands that talk gRPC.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(runtime_threads())
        .on_thread_start(block_sigpipe)
        .enable_all()
        .build()
}

/// Blocks SIGPIPE on the calling thread. The commands that print for a pipe restore its default action
/// (`nqueens status | head` ends quietly), but a socket the other end closed must then be an error on
/// the runtime's threads, not the end of the program: hyper's vectored writes raise SIGPIPE (only plain
/// sends pass MSG_NOSIGNAL), and `status` against an HTTP/1 port that hung up died silently with code 141
/// (found by `issue_40_a_client_at_the_http_port_is_told_it_is_not_the_coordinator`, 1 run in 3). A
/// signal a write raises goes to the thread that wrote: blocked here, the write fails with EPIPE.
fn block_sigpipe() {
    // SAFETY: a sigset_t initialised by sigemptyset, and a mask change of this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// `--runtime-threads`, once parsed (0: not given).
static RUNTIME_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Threads of the async runtime: `--runtime-threads`, else one per core (at least 2). Searches never run
/// on these threads (they have their own), so this sizes the network and store side only.
fn runtime_threads() -> usize {
    match RUNTIME_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
        n => n,
    }
}

/// Raises this process's limit of open files to the hard limit: a coordinator holds one connection per
/// worker, and the default soft limit (often 1024) is below a large fleet.
pub fn raise_open_files() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open files limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open files limit"),
    }
}

/// How an error ends the program on stderr: `error: ...` on one line, except a Ctrl-C the user asked for,
/// which says what is saved on a line of its own (after a progress bar that may hold the cursor).
pub fn message(e: &anyhow::Error) -> String {
    if e.downcast_ref::<count::Interrupted>().is_some() {
        format!("\n{e}")
    } else {
        format!("error: {}", chain(e))
    }
}

/// The error and its causes, each after a colon, but a cause the text already ends with (an error that
/// names its source at the end of its message, and keeps it as its source) once.
fn chain(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Exit code for an error: 2 for bad input (as for command-line syntax errors), 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    let bad_input = |e: &Error| {
        matches!(
            e,
            Error::NOutOfRange(_) | Error::UnknownStrategy(_) | Error::InvalidSetting(_)
        )
    };
    let refused = e
        .downcast_ref::<rpc::RpcError>()
        .is_some_and(|s| matches!(s.code, tonic::Code::InvalidArgument | tonic::Code::NotFound));
    if e.downcast_ref::<serve::Unguarded>().is_some()
        || e.downcast_ref::<serve::BadTokens>().is_some()
        || e.downcast_ref::<serve::Conflicting>().is_some()
    {
        // A usage error: the command line asks to serve other machines unguarded, or gives tokens
        // that cannot work together.
        return 2;
    }
    if e.downcast_ref::<count::Interrupted>().is_some() {
        // The shell's convention for a command ended by SIGINT.
        return 130;
    }
    match (
        e.downcast_ref::<Error>(),
        e.downcast_ref::<nqueens_coordinator::Error>(),
    ) {
        (Some(e), _) | (_, Some(nqueens_coordinator::Error::Input(e))) if bad_input(e) => 2,
        _ if refused => 2,
        _ => 1,
    }
}

/// The default number of compute threads: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod examples_tests {
    use clap::{CommandFactory, Parser};

    use super::Cli;

    /// Every subcommand's long help has examples, and every example parses as the command line it
    /// shows (a redirection is the shell's, not ours).
    #[test]
    fn every_subcommand_shows_examples_that_parse() {
        let cli = Cli::command();
        // The token files an example names exist here (flags that read them check their content).
        let dir = tempfile::tempdir().unwrap();
        let mut checked = 0;
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            let help = sub
                .get_after_long_help()
                .unwrap_or_else(|| panic!("`nqueens {}` has no examples", sub.get_name()))
                .to_string();
            let examples: Vec<&str> = help
                .strip_prefix("Examples:\n")
                .unwrap_or_else(|| panic!("{help}"))
                .lines()
                .map(str::trim)
                .collect();
            assert!(!examples.is_empty(), "{}", sub.get_name());
            for line in examples {
                let line = line.split('>').next().unwrap().trim();
                let words: Vec<String> = line
                    .split_whitespace()
                    .map(|w| {
                        if w.ends_with(".token") {
                            let path = dir.path().join(w);
                            std::fs::write(&path, "t0ken").unwrap();
                            path.display().to_string()
                        } else {
                            w.to_string()
                        }
                    })
                    .collect();
                assert_eq!(words[0], "nqueens", "{line}");
                assert_eq!(words[1], sub.get_name(), "{line}");
                if let Err(e) = Cli::try_parse_from(&words) {
                    panic!("{line}: {e}");
                }
                checked += 1;
            }
        }
        assert!(checked >= 25, "{checked} examples");
    }
}

#[cfg(test)]
mod message_tests {
    /// An error that names its source in its text and keeps it as its source prints it once; a
    /// context over it prints both.
    #[test]
    fn a_cause_the_text_already_says_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = anyhow::Error::from(nqueens_coordinator::Error::io("cannot create /x", io));
        assert_eq!(super::message(&e), "error: cannot create /x: denied");
        let e = e.context("starting");
        assert_eq!(
            super::message(&e),
            "error: starting: cannot create /x: denied"
        );
        // A cause the text says elsewhere than at its end is printed.
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = anyhow::Error::from(io).context("denied by the policy");
        assert_eq!(super::message(&e), "error: denied by the policy: denied");
    }
}
