//! What a worker is told: its coordinator, threads, name, journal, GPUs; and the GPUs opened from it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nqueens_proto::Connection;

use crate::compute::Device;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::metrics::Metrics;

/// What a worker needs to know.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// How to reach the coordinator.
    pub connection: Connection,
    /// Compute threads.
    pub threads: usize,
    /// A human name, shown in status and logs.
    pub name: String,
    /// Where to journal unacknowledged results (none: results in flight are lost on a crash and
    /// simply recomputed after their leases expire).
    pub journal: Option<PathBuf>,
    /// Only lease jobs of this run.
    pub run: Option<String>,
    /// Stop once there is nothing to lease and nothing in flight.
    pub exit_when_idle: bool,
    /// Faults to inject (tests only; none by default).
    pub faults: Faults,
    /// Interval of the summary log line.
    pub progress_interval: Duration,
    /// Where the worker counts what it does (served by `--metrics-listen`).
    pub metrics: Arc<Metrics>,
    /// GPUs to compute on besides the CPU threads (none by default).
    pub gpu: GpuConfig,
}

/// The GPUs a worker computes on.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    /// The devices, as `--gpu` takes them (`all`, `cuda:0`, `opencl:1,cuda:0`, ...); `None`: CPU only.
    pub devices: Option<String>,
    /// Jobs per launch.
    pub batch: usize,
    /// How long one launch may run before the device is taken for hung: its jobs are then computed on
    /// the CPU and the device is used no more (a hung driver would otherwise hold its leases, heartbeated,
    /// for ever).
    pub timeout: Duration,
    /// The kernel variant and launch shape every device runs; `None`: each device is calibrated.
    pub shape: Option<nqueens_gpu::Shape>,
    /// Where calibrations are kept, and whether a kept one is used; `None`: every open calibrates.
    pub keep: Option<nqueens_gpu::kept::Keep>,
}

impl Default for GpuConfig {
    /// No GPU.
    fn default() -> GpuConfig {
        GpuConfig {
            devices: None,
            batch: DEFAULT_GPU_BATCH,
            timeout: DEFAULT_GPU_TIMEOUT,
            shape: None,
            keep: None,
        }
    }
}

/// Jobs per GPU launch unless told otherwise: the engine splits them into enough seeds to fill the
/// device, so this only needs to cover the launch overhead and the tail of a batch.
pub const DEFAULT_GPU_BATCH: usize = 64;

/// How long one GPU launch may run unless told otherwise (`--gpu-timeout`): a hung device costs an hour,
/// not the run. A launch takes about its batch's CPU time divided by the device's speed-up over a core;
/// jobs larger than that allows need a longer timeout, and the worker warns when a launch has run half
/// of it.
pub const DEFAULT_GPU_TIMEOUT: Duration = Duration::from_secs(3600);

impl GpuConfig {
    /// Opens the configured GPUs (compiling the kernel for each), on a blocking thread.
    pub async fn open(&self, metrics: &Arc<Metrics>) -> Result<Vec<Device>> {
        let Some(spec) = self.devices.clone() else {
            return Ok(Vec::new());
        };
        let (batch, timeout, shape) = (self.batch.max(1), self.timeout, self.shape);
        let keep = self.keep.clone();
        let gpus = tokio::task::spawn_blocking(move || {
            nqueens_gpu::open_kept(Some(&spec), shape, keep.as_ref())
        })
        .await
        .map_err(|e| Error::Gpu(nqueens_gpu::GpuError::NoDevice(e.to_string())))??;
        for g in &gpus {
            tracing::info!(device = %g.info(), threads = g.info().threads, most_jobs_per_batch = batch, "GPU ready");
            metrics.device(&g.info().label());
            let rate = g.calibration.as_ref().map_or(0.0, |c| c.rate());
            metrics.gpu_kernel(&g.info().label(), &g.info().shape.to_string(), rate);
        }
        Ok(gpus
            .into_iter()
            .map(|gpu| Device {
                gpu,
                batch,
                metrics: metrics.clone(),
                timeout,
            })
            .collect())
    }
}
