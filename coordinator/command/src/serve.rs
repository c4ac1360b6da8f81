//! `nqueens serve`: the coordinator as a long-running gRPC server over its on-disk store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::setup;
use clap::Args;
use tokio::net::TcpListener;

use nqueens_coordinator::durable::store::Store;
use nqueens_coordinator::service::{Config, RetryFailed};

/// Arguments of `nqueens serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub process: crate::ProcessFlags,
    /// Address to listen on (loopback by default; use 0.0.0.0:7447 to serve other machines).
    #[arg(long, default_value = "127.0.0.1:7447")]
    pub listen: SocketAddr,
    /// The store's directory (default: $NQUEENS_DATA, else $XDG_DATA_HOME/nqueens, else
    /// ~/.local/share/nqueens, else ./nqueens-data when HOME is unset too).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// How long a lease lives without a heartbeat, e.g. 60s, 5m (at least 100ms).
    #[arg(long, default_value = "60s", value_parser = crate::durations::lease_timeout)]
    pub lease_timeout: Duration,
    /// Longest a lease lives however many heartbeats it gets, e.g. 24h, 7days (1m to 365days): a
    /// worker that holds jobs and never reports loses them then, as if silent; a late result is still
    /// taken.
    #[arg(long, default_value = "24h", value_parser = crate::durations::max_lease_hold)]
    pub max_lease_hold: Duration,
    /// Expired leases after which a job fails (it stalls or kills every worker that takes it).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_attempts: u32,
    /// When the ledger has damaged lines and the store lacks results the ledger holds, rebuild from the
    /// ledger's intact lines (the jobs of damaged lines are computed again) instead of refusing to start.
    #[arg(long)]
    pub repair: bool,
    /// Put the failed jobs of every run back to pending before serving.
    #[arg(long)]
    pub retry_failed: bool,
    /// Let a quarantined worker (by name) lease again; repeatable.
    #[arg(long, value_name = "NAME")]
    pub release_quarantine: Vec<String>,
    /// Quarantine a worker (by name: a credential's identity) before serving, as one shown wrong: its
    /// results no other identity confirmed are taken back and computed again (a credential known
    /// stolen, a machine known faulty); repeatable. `--release-quarantine` lifts it.
    #[arg(long, value_name = "NAME")]
    pub quarantine: Vec<String>,
    /// Most report batches on their way to the store at once; more wait their turn (backpressure in
    /// front of the commit thread).
    #[arg(long, value_name = "N", default_value_t = nqueens_coordinator::service::MAX_IN_FLIGHT, value_parser = in_flight)]
    pub max_in_flight: usize,
    /// Most gRPC connections from one peer address at once (more are closed as they come); raise it
    /// for more worker processes than that behind one NAT address or proxy.
    #[arg(long, value_name = "N", default_value_t = nqueens_coordinator::wire::connections::MAX_PER_PEER, value_parser = per_peer)]
    pub max_connections_per_peer: usize,
    /// Interval of the progress log line, e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = crate::durations::progress_interval)]
    pub progress_interval: Duration,
    /// A shared bearer token that every RPC but health checks must carry (workers and clients pass
    /// it with --token or NQUEENS_TOKEN).
    #[arg(long, env = "NQUEENS_TOKEN", hide_env_values = true, value_parser = token)]
    pub token: Option<String>,
    /// A second token, for the workers of a cluster: calls made with it lease, report and read, but
    /// cannot create, cancel, pause, resume or reprioritise runs (PERMISSION_DENIED). Needs --token (the
    /// operator's), and must differ from it.
    #[arg(long, env = "NQUEENS_WORKER_TOKEN", hide_env_values = true, value_parser = token, value_name = "T")]
    pub worker_token: Option<String>,
    /// A file holding --token (one line): no token on the command line, where `ps` shows it.
    #[arg(long, env = "NQUEENS_TOKEN_FILE", hide_env_values = true, value_name = "PATH", conflicts_with = "token", value_parser = crate::connection::token_file)]
    pub token_file: Option<String>,
    /// A file holding --worker-token (one line).
    #[arg(long, env = "NQUEENS_WORKER_TOKEN_FILE", hide_env_values = true, value_name = "PATH", conflicts_with = "worker_token", value_parser = crate::connection::token_file)]
    pub worker_token_file: Option<String>,
    /// PEM certificate (chain) for TLS, e.g. DIR/server.pem from `nqueens tls init DIR`; with --tls-key,
    /// clients connect with https:// and --tls-ca.
    #[arg(
        long,
        env = "NQUEENS_TLS_CERT",
        hide_env_values = true,
        value_name = "PEM",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// With TLS, the CA whose client certificates name worker identities (DIR/ca.pem of `nqueens tls
    /// init DIR`; `nqueens tls worker DIR NAME` signs one): a worker may present one in place of a
    /// credential token; the identity must be issued (`nqueens credential issue NAME`) and not revoked.
    #[arg(
        long,
        env = "NQUEENS_TLS_CLIENT_CA",
        hide_env_values = true,
        value_name = "PEM",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// Listen beyond loopback without both a token and TLS (on a network you trust): anyone who can
    /// reach the port can then submit runs and report results.
    #[arg(long)]
    pub insecure: bool,
    /// Serve HTTP at this address: Prometheus metrics at /metrics and the status page at / (read-only,
    /// no token: keep it on a private network), e.g. 127.0.0.1:9100.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Serve the standard gRPC health service alone, in plaintext, at this address (for Kubernetes'
    /// `grpc:` probes): a port that no client filling the HTTP or gRPC listener takes from the probes.
    /// Service "liveness" answers SERVING while the process serves; "" and the coordinator's service
    /// NOT_SERVING while the store cannot be written.
    #[arg(long, value_name = "ADDR")]
    pub health_listen: Option<SocketAddr>,
    /// PEM private key of --tls-cert, e.g. DIR/server-key.pem.
    #[arg(
        long,
        env = "NQUEENS_TLS_KEY",
        hide_env_values = true,
        value_name = "PEM",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
}

/// `serve` asked to listen beyond loopback without both a token and TLS, and without `--insecure`.
#[derive(Debug)]
pub struct Unguarded {
    pub addr: SocketAddr,
    pub token: bool,
    pub tls: bool,
}

impl std::fmt::Display for Unguarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let missing = match (self.token, self.tls) {
            (false, false) => "a token and TLS",
            (false, true) => "a token",
            _ => "TLS",
        };
        write!(
            f,
            "refusing to listen on {} without {missing}: anyone who can reach it could submit runs and \
             report results. Create TLS material with `nqueens tls init DIR` and pass \
             --tls-cert DIR/server.pem --tls-key DIR/server-key.pem and --token T (or NQUEENS_TOKEN); \
             or listen on 127.0.0.1; or pass --insecure on a network you trust",
            self.addr
        )
    }
}

impl std::error::Error for Unguarded {}

/// `serve` was given flags that cannot work together (a usage error, exit code 2).
#[derive(Debug)]
pub struct Conflicting(&'static str);

impl std::fmt::Display for Conflicting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Conflicting {}

/// `serve` was given a worker token without the operator's, or the same token twice.
#[derive(Debug)]
pub struct BadTokens(&'static str);

impl std::fmt::Display for BadTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for BadTokens {}

/// Opens the store, audits it, and serves until SIGTERM or Ctrl-C.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    // The tokens read from files are the tokens.
    let args = &ServeArgs {
        token: args.token.clone().or_else(|| args.token_file.clone()),
        worker_token: args
            .worker_token
            .clone()
            .or_else(|| args.worker_token_file.clone()),
        ..args.clone()
    };
    match (&args.token, &args.worker_token) {
        (None, Some(_)) => return Err(BadTokens(
            "--worker-token (NQUEENS_WORKER_TOKEN) needs --token (NQUEENS_TOKEN), the operator's: \
                 without it no call could create or steer a run",
        )
        .into()),
        (None, _) if args.tls_client_ca.is_some() => return Err(BadTokens(
            "--tls-client-ca (NQUEENS_TLS_CLIENT_CA) needs --token (NQUEENS_TOKEN), the operator's: \
                 without it every caller without a certificate would be the operator",
        )
        .into()),
        (Some(operator), Some(worker)) if operator == worker => return Err(BadTokens(
            "--worker-token must differ from --token: a worker holding it could steer every run",
        )
        .into()),
        _ => {}
    }
    if args.max_lease_hold <= args.lease_timeout {
        return Err(Conflicting(
            "--max-lease-hold must be longer than --lease-timeout: every lease would end at the \
             hold, however its heartbeats came",
        )
        .into());
    }
    let guarded = args.token.is_some() && args.tls_cert.is_some();
    if !args.listen.ip().is_loopback() && !guarded && !args.insecure {
        return Err(Unguarded {
            addr: args.listen,
            token: args.token.is_some(),
            tls: args.tls_cert.is_some(),
        }
        .into());
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let read = |p: &PathBuf| {
                std::fs::read(p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))
            };
            let pem = read(cert)?;
            if let Some(warning) =
                crate::tls::check_validity(cert, &pem, std::time::SystemTime::now())?
            {
                tracing::warn!("{warning}");
            }
            Some(tonic::transport::Identity::from_pem(pem, read(key)?))
        }
        _ => None,
    };
    let client_ca = match &args.tls_client_ca {
        Some(path) => Some(tonic::transport::Certificate::from_pem(
            std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
        )),
        None => None,
    };
    if !args.listen.ip().is_loopback() && (args.token.is_none() || tls.is_none()) {
        tracing::warn!(
            addr = %args.listen,
            token = args.token.is_some(),
            tls = tls.is_some(),
            "listening beyond loopback without both a token and TLS (--insecure): anyone who can reach this port can submit runs and report results"
        );
    }
    super::raise_open_files();
    // A port taken by another process is found before the store is opened (or created).
    for (addr, flag) in [
        (Some(args.listen), "--listen"),
        (args.metrics_listen, "--metrics-listen"),
        (args.health_listen, "--health-listen"),
    ] {
        if let Some(addr) = addr {
            std::net::TcpListener::bind(addr).map_err(|e| {
                anyhow::anyhow!(
                    "cannot listen on {addr} ({flag}): {e}; is another coordinator running there?"
                )
            })?;
        }
    }
    let data = args.data.clone().unwrap_or_else(setup::default_data_dir);
    setup::private_dir(&data)?;
    let store = Store::open(&data)?;
    let config = Config {
        retry_failed: if args.retry_failed {
            RetryFailed::All
        } else {
            RetryFailed::None
        },
        lease_timeout: args.lease_timeout,
        max_lease_hold: args.max_lease_hold,
        max_attempts: args.max_attempts,
        repair: args.repair,
        max_in_flight: args.max_in_flight,
        // Given once, at the first open (store and ledger alike: a store rebuilt from the ledger
        // keeps the release).
        release: args.release_quarantine.clone(),
        distrust: args.quarantine.clone(),
        ..Config::default()
    };
    let options = nqueens_coordinator::wire::server::Options {
        progress_interval: args.progress_interval,
        token: args.token.clone(),
        worker_token: args.worker_token.clone(),
        tls,
        client_ca,
        per_peer: args.max_connections_per_peer,
        health: None,
        request_bytes: Default::default(),
    };
    super::runtime()?.block_on(async {
        let shutdown = setup::shutdown_on_signals();
        // The probe listener lives as long as the process: NOT_SERVING until the first server serves
        // (the startup audit first); across a reopen of the store "liveness" stays SERVING and "" is
        // NOT_SERVING; never a refused connection.
        let (health, probes) = match args.health_listen {
            Some(addr) => {
                let health = tonic_health::server::HealthReporter::new();
                health
                    .set_service_status(
                        nqueens_coordinator::wire::server::LIVENESS,
                        tonic_health::ServingStatus::NotServing,
                    )
                    .await;
                health
                    .set_service_status("", tonic_health::ServingStatus::NotServing)
                    .await;
                let bound =
                    crate::probe::spawn(addr, health.clone(), shutdown.clone().cancelled_owned())
                        .await
                        .map_err(|e| {
                            anyhow::anyhow!(
                                "cannot listen for health probes (--health-listen) on {addr}: {e}"
                            )
                        })?;
                (Some(health), Some(bound))
            }
            None => (None, None),
        };
        let (listen, metrics_listen, lease_timeout) =
            (args.listen, args.metrics_listen, args.lease_timeout);
        let (token, worker_token) = (args.token.is_some(), args.worker_token.is_some());
        let served = nqueens_coordinator::wire::incarnations::serve_reopening(
            &data,
            store,
            config,
            shutdown.clone(),
            |coordinator, incarnation| {
                let (options, health) = (options.clone(), health.clone());
                let data = data.clone();
                async move {
                    let listener = bind(listen).await?;
                    let http = match metrics_listen {
                        Some(addr) => Some(
                            crate::http::spawn(
                                addr,
                                nqueens_coordinator::wire::web::router(coordinator.clone()),
                                incarnation.clone().cancelled_owned(),
                            )
                            .await
                            .map_err(|e| {
                                anyhow::anyhow!(
                                    "cannot listen for HTTP (--metrics-listen) on {addr}: {e}"
                                )
                            })?,
                        ),
                        None => None,
                    };
                    let mut options = options;
                    options.health = health;
                    tracing::info!(
                        addr = %listener.local_addr()?,
                        http = %http.map_or("-".to_string(), |a| a.to_string()),
                        health = %probes.map_or("-".to_string(), |a| a.to_string()),
                        data = %data.display(),
                        lease_timeout = %humantime::format_duration(lease_timeout),
                        tls = options.tls.is_some(),
                        token,
                        worker_token,
                        "coordinator listening"
                    );
                    nqueens_coordinator::wire::server::serve(
                        listener,
                        coordinator,
                        options,
                        incarnation.cancelled_owned(),
                    )
                    .await?;
                    Ok::<(), anyhow::Error>(())
                }
            },
        )
        .await;
        served?;
        tracing::info!("coordinator stopped");
        Ok(())
    })
}

/// Binds `addr`, retrying for a few seconds while an earlier incarnation's listener is closing.
async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let mut tries = 0;
    loop {
        match TcpListener::bind(addr).await {
            Ok(listener) => return Ok(listener),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(anyhow::anyhow!("cannot listen on {addr}: {e}")),
        }
    }
}

/// Parses `--token`: [`nqueens_proto::valid_token`].
fn token(s: &str) -> Result<String, String> {
    if nqueens_proto::valid_token(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "must be 1 to {} characters of printable ASCII, with no space at either end (a token read from a file keeps its newline: strip it)",
            nqueens_proto::MAX_TOKEN_LEN
        ))
    }
}

/// Most report batches `--max-in-flight` may let through at once.
const MAX_IN_FLIGHT_LIMIT: usize = 65_536;

/// Parses `--max-in-flight`: 1 to [`MAX_IN_FLIGHT_LIMIT`] batches.
fn in_flight(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_IN_FLIGHT_LIMIT).contains(&n) => Ok(n),
        Ok(_) => Err(format!("must be 1 to {MAX_IN_FLIGHT_LIMIT}")),
        Err(_) => Err(format!("{s:?} is not a whole number of batches")),
    }
}

/// Parses `--max-connections-per-peer`: 1 to the listener's whole limit.
fn per_peer(s: &str) -> Result<usize, String> {
    let limit = nqueens_coordinator::wire::connections::MAX_CONNECTIONS;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=limit).contains(&n) => Ok(n),
        Ok(_) => Err(format!("must be 1 to {limit}")),
        Err(_) => Err(format!("{s:?} is not a whole number of connections")),
    }
}
