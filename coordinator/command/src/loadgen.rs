//! `nqueens loadgen`: offers a simulated fleet's load to a coordinator (by default one started in this
//! process on a fresh store, served over loopback gRPC like any other) and prints what it sustained.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::load::{self as loadgen, Latency, Load, LoadReport};
use nqueens_coordinator::durable::store::Store;
use nqueens_coordinator::service::{Config, Coordinator};

/// Arguments of `nqueens loadgen`.
#[derive(Debug, Args)]
pub struct LoadgenArgs {
    #[command(flatten)]
    pub process: crate::ProcessFlags,
    /// Simulated workers, each on its own connection (all from this host: a coordinator given with
    /// --coordinator takes as many from one address as its --max-connections-per-peer).
    #[arg(long, default_value_t = 1000)]
    pub workers: usize,
    /// Results per second offered over all workers (0.001 to 1e9); 0: every worker as fast as it is
    /// answered.
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
    /// Jobs per lease request (and results per report) of each simulated worker.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Lease the next job with each report (`ReportRequest.lease_capacity`) instead of with a Lease call
    /// of its own, as workers do.
    #[arg(long)]
    pub lease_with_report: bool,
    /// Time measured, e.g. 20s.
    #[arg(long, default_value = "20s", value_parser = crate::durations::load_time)]
    pub duration: Duration,
    /// Time to connect and settle before measuring.
    #[arg(long, default_value = "3s", value_parser = crate::durations::load_time)]
    pub warmup: Duration,
    /// N of the run the jobs come from (d4; a new run is created for the load).
    #[arg(long, default_value_t = 27)]
    pub n: u32,
    /// Fraction of the run's jobs reported by two workers, as in a real run (with --reuse, the existing
    /// run keeps its own).
    #[arg(long, default_value_t = 0.01)]
    pub verify_fraction: f64,
    /// Load this coordinator (e.g. http://127.0.0.1:7447) instead of one started in this process.
    #[arg(long)]
    pub coordinator: Option<String>,
    /// The coordinator's bearer token, if it requires one.
    #[arg(long, env = "NQUEENS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// With --coordinator: a file holding the simulated workers' token (a worker credential, as
    /// `nqueens credential issue --out` writes it); the run is still created with --token.
    #[arg(long, value_name = "PATH", requires = "coordinator", value_parser = crate::connection::token_file)]
    pub worker_token_file: Option<String>,
    /// PEM file of the CA certificate the coordinator's TLS certificate chains to (DIR/ca.pem from
    /// `nqueens tls init DIR`), for an https:// --coordinator.
    #[arg(long, value_name = "PEM", requires = "coordinator")]
    pub tls_ca: Option<PathBuf>,
    /// Store directory of the in-process coordinator (default: a fresh temporary one, removed after).
    #[arg(long, conflicts_with = "coordinator")]
    pub data: Option<PathBuf>,
    /// Load the coordinator's existing run of the same N instead of creating one (with --data, each
    /// load fills the same run further: see coordinator/benches/store-at-scale.sh).
    #[arg(long)]
    pub reuse: bool,
    /// Workers (beyond --workers, each on its own connection) whose lease calls wait meanwhile on a
    /// second run none of whose jobs is free, as a fleet's do at the end of a run: what their looks
    /// cost the load.
    #[arg(long, default_value_t = 0)]
    pub waiters: usize,
    /// What keeps the waiters' run from them: its jobs leased, or verified jobs each waiting for a
    /// second result from an identity drawn for it.
    #[arg(long, value_enum, default_value_t = loadgen::Tail::Leased)]
    pub tail: loadgen::Tail,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What `loadgen` prints.
#[derive(Debug, Serialize)]
struct Output {
    #[serde(flatten)]
    report: LoadReport,
    /// The in-process coordinator's store on disk after the load (sled and the ledger).
    store_bytes: Option<u64>,
}

/// Offers the load and prints the measurement.
pub fn run(args: &LoadgenArgs) -> anyhow::Result<()> {
    nqueens_common::error::check_n(args.n)?;
    super::raise_open_files();
    let load = Load {
        workers: args.workers,
        rate: (args.rate != 0.0).then_some(args.rate),
        batch: args.batch,
        with_report: args.lease_with_report,
        warmup: args.warmup,
        duration: args.duration,
        n: args.n,
        verify_fraction: args.verify_fraction,
        reuse: args.reuse,
        worker_token: args.worker_token_file.clone(),
        waiters: args.waiters,
        tail: args.tail,
    };
    load.check()
        .map_err(|e| nqueens_common::Error::InvalidSetting(e.to_string()))?;
    let output = super::runtime()?.block_on(async {
        match &args.coordinator {
            Some(address) => {
                let connection = nqueens_proto::Connection {
                    coordinator: address.clone(),
                    token: args.token.clone(),
                    tls_ca: args.tls_ca.clone(),
                    client_cert: None,
                };
                let report = loadgen::run(&connection, &load).await?;
                Ok::<_, anyhow::Error>(Output {
                    report,
                    store_bytes: None,
                })
            }
            None => {
                let temporary = tempfile::tempdir()?;
                let dir = args.data.clone().unwrap_or(temporary.path().to_path_buf());
                let report = embedded(&dir, &load).await?;
                Ok(Output {
                    report,
                    store_bytes: Some(disk_usage(&dir)?),
                })
            }
        }
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&output)?);
    } else {
        print_text(&output);
    }
    Ok(())
}

/// Serves a coordinator over `dir` on a loopback port, loads it, and stops it.
async fn embedded(dir: &Path, load: &Load) -> anyhow::Result<LoadReport> {
    std::fs::create_dir_all(dir)?;
    let coordinator = Coordinator::open(Store::open(dir)?, Config::default())?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let stop = CancellationToken::new();
    let server = tokio::spawn(nqueens_coordinator::wire::server::serve(
        listener,
        coordinator,
        // Every simulated worker comes from this one address.
        nqueens_coordinator::wire::server::Options {
            per_peer: nqueens_coordinator::wire::connections::MAX_CONNECTIONS,
            ..Default::default()
        },
        stop.clone().cancelled_owned(),
    ));
    let connection = nqueens_proto::Connection::new(format!("http://{address}"));
    let report = loadgen::run(&connection, load).await;
    stop.cancel();
    server.await??;
    Ok(report?)
}

/// Bytes a directory's files take on disk.
fn disk_usage(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        bytes += if meta.is_dir() {
            disk_usage(&entry.path())?
        } else {
            meta.blocks() * 512
        };
    }
    Ok(bytes)
}

fn print_text(o: &Output) {
    let r = &o.report;
    let offered = r.offered_per_second.map_or("unpaced".to_string(), |x| {
        format!("{x:.0} results/s offered")
    });
    let leasing = if r.lease_with_report {
        "leases ride on reports"
    } else {
        "separate lease calls"
    };
    println!(
        "loadgen: {} workers, batch {}, {leasing}, {offered}, {:.0} s measured, run {} (N = {})",
        r.workers, r.batch, r.seconds, r.run, r.n
    );
    println!(
        "committed: {} results in the window, {:.0} results/s (durable when acknowledged)",
        r.committed, r.committed_per_second
    );
    let line = |what: &str, l: &Latency| {
        if l.calls == 0 {
            println!("{what} latency: no calls in the measured window");
            return;
        }
        println!(
            "{what} latency: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms ({} calls)",
            l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms, l.calls
        );
    };
    line("lease ", &r.lease);
    line("report", &r.report);
    match &r.first_error {
        Some(e) => println!("errors: {} failed calls (retried); first: {e}", r.errors),
        None => println!("errors: none"),
    }
    println!(
        "check: the run holds exactly the {} jobs acknowledged as done (total {})",
        r.jobs_done, r.total
    );
    if let Some(w) = &r.waited {
        println!(
            "waiting: {} workers waited on a run of {} jobs ({}): {} calls answered, {} jobs leased, {} errors",
            w.waiters,
            w.jobs,
            match w.tail {
                Some(loadgen::Tail::Verifying) => "each waiting for a second result",
                _ => "all leased",
            },
            w.calls,
            w.leased,
            w.errors
        );
        if let Some(e) = &w.first_error {
            println!("waiting: first error: {e}");
        }
    }
    if let Some(bytes) = o.store_bytes {
        println!(
            "store: {:.1} MiB on disk, {:.0} bytes per done job",
            bytes as f64 / (1024.0 * 1024.0),
            bytes as f64 / r.jobs_done.max(1) as f64
        );
    }
}
