//! The worker's command line, shared by `nqueens-worker` and `nqueens worker`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use nqueens_worker::{FaultArgs, GpuConfig, Metrics, WorkerConfig};

use crate::connection::ConnectionArgs;
use crate::{http, setup};

/// Pull jobs from an nqueens coordinator, compute them on all cores, report the counts.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub kernel: crate::KernelFlag,
    #[command(flatten)]
    pub process: crate::ProcessFlags,
    #[command(flatten)]
    pub connection: ConnectionArgs,
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
    #[arg(long, default_value = "30s", value_parser = crate::durations::progress_interval)]
    pub progress_interval: Duration,
    /// Serve Prometheus metrics over HTTP at this address (e.g. 0.0.0.0:9101), path /metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Serve the standard gRPC health service alone, in plaintext, at this address (for Kubernetes'
    /// `grpc:` probes): "" and "liveness" answer SERVING while the worker runs.
    #[arg(long, value_name = "ADDR")]
    pub health_listen: Option<SocketAddr>,
    #[command(flatten)]
    pub gpu: GpuArgs,
    #[command(flatten)]
    pub faults: FaultArgs,
}

/// The GPU flags of `nqueens worker` and `nqueens count`.
#[derive(Debug, Clone, Args)]
pub struct GpuArgs {
    /// Also compute on GPUs: `--gpu` alone for every GPU found (CUDA devices, else OpenCL GPUs), or a
    /// list such as `cuda:0`, `cuda:0,cuda:1`, `opencl:2` (an OpenCL CPU device such as PoCL only when
    /// named). The worker refuses to start if a device asked for cannot be opened.
    #[arg(long, value_name = "DEVICES", num_args = 0..=1, default_missing_value = "all")]
    pub gpu: Option<String>,
    /// The most jobs a GPU takes at a time: each batch holds what the device computes while a CPU
    /// thread computes one job, from 1 up to this.
    #[arg(long, value_name = "JOBS", default_value_t = nqueens_worker::DEFAULT_GPU_BATCH, value_parser = batch)]
    pub gpu_batch: usize,
    /// How long one GPU launch may run before the device is taken for hung: its batch, and from then on
    /// everything, is computed on the CPU (1s to 30d; e.g. 90m).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = gpu_timeout)]
    pub gpu_timeout: Duration,
    /// The GPU kernel variant and launch shape, `VARIANT[/BLOCK[/PER_THREAD]]` (variants: local, shared,
    /// compact, flat, coop, stream; e.g. `flat/128/4`; coop takes `/LIST` too, its list's entries per thread).
    /// Default: each device times the candidates when it opens and keeps the fastest (logged, and in
    /// the `gpu_kernel` metric).
    #[arg(long, value_name = "SHAPE", value_parser = gpu_kernel)]
    pub gpu_kernel: Option<nqueens_gpu::Shape>,
    /// Calibrate each device anew, though a calibration is kept for its model, driver and kernel
    /// source, and keep the new one. Calibrations are kept in $NQUEENS_CACHE, else $XDG_CACHE_HOME/nqueens, else
    /// $HOME/.cache/nqueens.
    #[arg(long, conflicts_with = "gpu_kernel")]
    pub gpu_recalibrate: bool,
}

/// Where device calibrations are kept (`Keep::usual`), reused unless `recalibrate`.
pub fn keep(recalibrate: bool) -> Option<nqueens_gpu::kept::Keep> {
    nqueens_gpu::kept::Keep::usual().map(|k| nqueens_gpu::kept::Keep {
        reuse: !recalibrate,
        ..k
    })
}

/// Parses `--gpu-kernel`.
pub fn gpu_kernel(s: &str) -> Result<nqueens_gpu::Shape, String> {
    s.parse().map_err(|e: nqueens_gpu::GpuError| e.to_string())
}

impl GpuArgs {
    /// The worker's GPU configuration.
    pub fn config(&self) -> GpuConfig {
        GpuConfig {
            devices: self.gpu.clone(),
            batch: self.gpu_batch,
            timeout: self.gpu_timeout,
            shape: self.gpu_kernel,
            keep: keep(self.gpu_recalibrate),
        }
    }

    /// CPU compute threads: as given, else every core, or one fewer (at least one) when GPUs are used:
    /// a GPU's thread prepares its batches on the CPU.
    pub fn threads(&self, given: Option<usize>) -> usize {
        given.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            if self.gpu.is_some() {
                cores.saturating_sub(1).max(1)
            } else {
                cores
            }
        })
    }
}

fn batch(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        Ok(_) => Err("must be 1 to 1024".into()),
        Err(_) => Err(format!("{s:?} is not a whole number of jobs")),
    }
}

fn gpu_timeout(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| format!("{s:?}: {e}"))?;
    if (Duration::from_secs(1)..=Duration::from_secs(30 * 86_400)).contains(&d) {
        Ok(d)
    } else {
        Err("must be 1s to 30d".into())
    }
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
        http::spawn(addr, router, std::future::pending())
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot listen for HTTP (--metrics-listen) on {addr}: {e}")
            })?;
    }
    if let Some(addr) = args.health_listen {
        let health = tonic_health::server::HealthReporter::new();
        health
            .set_service_status(
                nqueens_coordinator::wire::server::LIVENESS,
                tonic_health::ServingStatus::Serving,
            )
            .await;
        // It serves until the process exits.
        crate::probe::spawn(addr, health, std::future::pending())
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot listen for health probes (--health-listen) on {addr}: {e}")
            })?;
    }
    let config =
        WorkerConfig {
            connection: args.connection.connection(),
            threads: args.gpu.threads(args.threads).max(1),
            journal: Some(args.journal.unwrap_or_else(|| {
                setup::default_data_dir().join(format!("worker-{name}.journal"))
            })),
            name,
            run: args.run,
            exit_when_idle: args.exit_when_idle,
            faults: args.faults.faults(),
            progress_interval: args.progress_interval,
            metrics,
            gpu: args.gpu.config(),
        };
    nqueens_worker::run(config, shutdown).await?;
    Ok(())
}

/// Most threads a thread count may ask for.
pub const MAX_THREADS: usize = 4096;

/// Parses a thread count: a whole number from 1 (0 is an error, never read as one) to [`MAX_THREADS`].
pub fn threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) if n > MAX_THREADS => Err(format!("must be at most {MAX_THREADS}")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number of threads")),
    }
}

/// Parses a kernel name (`--kernel`): one of this build's variants that this CPU runs.
pub fn kernel(s: &str) -> Result<nqueens_common::kernel::Variant, String> {
    use nqueens_common::kernel::Variant;
    let names = || {
        Variant::ALL
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let variant =
        Variant::parse(s).ok_or_else(|| format!("{s:?} is not a kernel (kernels: {})", names()))?;
    if !variant.supported() {
        return Err(format!("kernel {variant} is not supported by this CPU"));
    }
    Ok(variant)
}
