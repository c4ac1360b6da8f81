//! The worker's client: what a worker is told ([`config`]); what its loop asks of a coordinator, in the
//! worker's own types ([`link`]); that link over gRPC, the one file that reads or builds prost types
//! ([`wire`]); the loop itself, a state machine over the link ([`machine`]); and the check that this
//! build enumerates a lease's plan as the coordinator does ([`plan_check`]).

mod config;
mod link;
mod machine;
mod plan_check;
mod wire;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

pub use config::{GpuConfig, WorkerConfig, DEFAULT_GPU_BATCH, DEFAULT_GPU_TIMEOUT};
pub use machine::{Summary, MAX_RETRY_DELAY};
pub use nqueens_common::names::MAX_WORKER_NAME_LEN as MAX_NAME_LEN;

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::journal::Journal;

/// Runs a worker until `shutdown` is cancelled (then hands back, finishes and reports), or, with
/// `exit_when_idle`, until there is nothing left to lease.
pub async fn run(config: WorkerConfig, shutdown: CancellationToken) -> Result<Summary> {
    // Checked before anything else: a name the coordinator refuses would fail every request.
    if config.name.len() > MAX_NAME_LEN || !nqueens_common::names::valid_new_worker_id(&config.name)
    {
        return Err(Error::BadName(
            config.name.chars().take(MAX_NAME_LEN).collect(),
        ));
    }
    let journal = config.journal.as_deref().map(Journal::open).transpose()?;
    let devices = config.gpu.open(&config.metrics).await?;
    let id = worker_id(
        &config.name,
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    let link = wire::Grpc::connect(&config.connection, id.clone(), config.name.clone())?;
    tracing::info!(worker = %id, coordinator = %config.connection.coordinator, threads = config.threads, gpus = devices.len(), kernel = %nqueens_common::kernel::chosen(), cpu = ?crate::cpu::model(), "worker started");
    machine::run(config, link, journal, devices, shutdown).await
}

/// A worker process's id: its name, process id and start time (`-` and at most 10 digits, `-` and at most
/// 16 hex digits: the 28 characters [`MAX_NAME_LEN`] leaves).
fn worker_id(name: &str, pid: u32, started_ns: u64) -> String {
    format!("{name}-{pid}-{started_ns:x}")
}
