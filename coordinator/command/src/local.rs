//! The embedded local mode behind `nqueens count`: a coordinator on a loopback port over the on-disk store,
//! and an in-process worker that talks to it over gRPC. It is the cluster's own code path, so a local
//! count resumes after any interruption exactly as a cluster run does.

use std::path::PathBuf;
use std::time::Duration;

use nqueens_common::Strategy;
use nqueens_worker::WorkerConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use nqueens_coordinator::durable::store::Store;
use nqueens_coordinator::error::Error;
use nqueens_coordinator::service::{plan_of, Config, Coordinator, RetryFailed, RunView};

/// What to count, where, and with how many threads.
#[derive(Debug, Clone)]
pub struct LocalCount {
    pub n: u32,
    pub strategy: Strategy,
    pub depth: Option<u32>,
    pub threads: usize,
    /// The store's directory.
    pub data: PathBuf,
    /// GPUs for the local worker (none by default).
    pub gpu: nqueens_worker::GpuConfig,
}

/// How a local count ended.
#[derive(Debug, Clone)]
pub struct LocalOutcome {
    /// The finished run.
    pub view: RunView,
    /// Jobs already done in the store when this invocation started.
    pub jobs_resumed: u64,
    /// Search nodes of the jobs the local worker's GPUs computed in this invocation.
    pub gpu_nodes: u128,
}

/// Why a local count did not finish.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The embedded coordinator failed (or refused the count).
    #[error(transparent)]
    Coordinator(#[from] Error),
    /// The in-process worker stopped.
    #[error("local worker")]
    Worker(#[source] nqueens_worker::Error),
    /// Jobs of the run failed: it cannot finish until they are tried again.
    #[error("local worker: {0} jobs failed (the log says why); run the same command again to retry them")]
    Stalled(u64),
    /// The in-process worker stopped before the run was done, saying nothing.
    #[error("local worker stopped before the run was done")]
    Stopped,
}

/// Counts through an embedded coordinator, resuming the store's run for the same plan if there is one.
/// `progress` sees the run after every change.
pub async fn count(
    opts: LocalCount,
    progress: impl Fn(&RunView),
) -> Result<LocalOutcome, LocalError> {
    let data = opts.data.clone();
    let store = tokio::task::spawn_blocking(move || {
        crate::setup::private_dir(&data)
            .map_err(|e| Error::io(format!("cannot create {}", data.display()), e))?;
        Store::open(&data)
    })
    .await
    .map_err(|_| Error::ShuttingDown)??;
    let plan = plan_of(opts.n, opts.strategy, opts.depth)?;
    // A local count has no operator to look into a failed job: its plan's are tried again (once the
    // start has mended the store; never a verified run's, which it refuses below).
    let config = Config {
        retry_failed: RetryFailed::Plan(plan),
        ..Config::default()
    };
    let coordinator = Coordinator::open(store, config)?;
    let view = coordinator
        .create_run(opts.n, opts.strategy, opts.depth, Some(0.0), 0, true)
        .await?;
    // The run of this plan may be one submitted to a coordinator on the same directory, verifying some of
    // its jobs: each needs two workers of different names, and a local count runs one. Refused before
    // anything is leased, saying what would finish it.
    if !view.is_done() && view.meta.verify_fraction > 0.0 {
        let id = view.id();
        return Err(LocalError::Coordinator(Error::Invalid(format!(
            "run {id} (N = {} {}) in {} verifies {}% of its jobs, each by two workers of different names, and `count` runs one: serve the directory (`nqueens serve --data {}`) with workers of two names to finish it, or cancel it there (`nqueens cancel {id}`) to count afresh",
            view.meta.n,
            view.meta.strategy,
            opts.data.display(),
            view.meta.verify_fraction * 100.0,
            opts.data.display(),
        ))));
    }
    // Counting is asking for the run to go on: a run paused by an earlier `serve` is resumed.
    let view = if view.meta.paused && !view.is_done() {
        coordinator
            .control(
                &view.id(),
                nqueens_coordinator::durable::store::Control::Resume,
            )
            .await?
    } else {
        view
    };
    let jobs_resumed = view.tally.jobs;
    if view.is_done() {
        return Ok(LocalOutcome {
            view,
            jobs_resumed,
            gpu_nodes: 0,
        });
    }
    if jobs_resumed > 0 {
        tracing::info!(
            run = view.meta.id,
            jobs_resumed,
            jobs_total = view.meta.jobs_total,
            "resuming"
        );
    }
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::io("cannot listen on loopback", e))?;
    let address = listener
        .local_addr()
        .map_err(|e| Error::io("the loopback listener has no address", e))?;
    let stop = CancellationToken::new();
    let server = tokio::spawn(nqueens_coordinator::wire::server::serve(
        listener,
        coordinator.clone(),
        nqueens_coordinator::wire::server::Options::default(),
        stop.clone().cancelled_owned(),
    ));
    let worker = tokio::spawn(nqueens_worker::run(
        WorkerConfig {
            connection: nqueens_proto::Connection::new(format!("http://{address}")),
            threads: opts.threads,
            name: "local".into(),
            journal: None,
            run: Some(view.id()),
            exit_when_idle: true,
            faults: Default::default(),
            progress_interval: std::time::Duration::from_secs(30),
            metrics: Default::default(),
            gpu: opts.gpu.clone(),
        },
        stop.clone(),
    ));
    let mut changes = coordinator.subscribe();
    let id = view.id();
    let view = loop {
        // Whether the worker is over, read before the run: a worker that ended after its last report
        // is then seen with the run as that report left it.
        let over = worker.is_finished();
        let view = coordinator.run(&id)?;
        progress(&view);
        if view.is_done() || view.is_stalled() || over {
            break view;
        }
        if coordinator.storage().reopen_requested() {
            stop.cancel();
            let _ = server.await;
            return Err(Error::Durability(
                "the store failed a write (see the log) and must be reopened; run the same command again to resume".into(),
            )
            .into());
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    };
    let worked = worker.await;
    stop.cancel();
    let _ = server.await;
    match worked {
        Ok(Ok(summary)) if view.is_done() => Ok(LocalOutcome {
            view,
            jobs_resumed,
            gpu_nodes: summary.gpu_nodes,
        }),
        _ if view.is_stalled() => Err(LocalError::Stalled(view.jobs_failed)),
        Ok(Err(e)) => Err(LocalError::Worker(e)),
        _ => Err(LocalError::Stopped),
    }
}
