//! A worker's Prometheus metrics (jobs and nodes by device, nodes/s, in-flight work, RPC latencies), kept
//! whether or not they are served, and the windowed rate that both the metrics and the summary log line
//! show.

use std::sync::atomic::AtomicU64;

use nqueens_proto::metrics::{registered, RpcMetrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

/// The label of a per-device metric: `cpu`, or a GPU's backend and index (`cuda:0`, `opencl:1`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeviceLabel {
    pub device: String,
}

/// The label of a GPU's kernel series: the device and the kernel variant and shape it runs.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KernelLabel {
    pub device: String,
    pub shape: String,
}

/// The worker's metrics.
#[derive(Debug)]
pub struct Metrics {
    /// Per GPU, the kernel it runs (as a label), valued at its calibrated node rate (0 if given).
    gpu_kernel: Family<KernelLabel, Gauge<f64, AtomicU64>>,
    /// Per GPU, the jobs it takes per batch now (sized to its speed, see `pace`).
    gpu_batch: Family<DeviceLabel, Gauge>,
    registry: Registry,
    /// Jobs computed, by the device that computed them.
    jobs: Family<DeviceLabel, Counter>,
    /// Search nodes of those jobs, by device.
    nodes: Family<DeviceLabel, Counter>,
    pub accepted: Counter,
    pub nodes_per_second: Gauge<f64, AtomicU64>,
    pub running: Gauge,
    pub unreported: Gauge,
    pub threads: Gauge,
    /// GPUs in use (a device given up after repeated failures no longer counts).
    pub gpus: Gauge,
    /// Jobs a GPU computed (and the engine's checks accepted).
    pub gpu_jobs: Counter,
    /// GPU batches that failed or were answered implausibly (computed on the CPU instead).
    pub gpu_failures: Counter,
    /// Jobs a GPU took as backups: copies of jobs CPU threads were computing, once the worker expected
    /// no job soon.
    pub gpu_backups: Counter,
    /// Backups whose GPU result was the one sent (the CPU thread stopped first).
    pub gpu_backups_sent: Counter,
    pub rpc: RpcMetrics,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut r = Registry::with_prefix("nqueens_worker");
        let m = Metrics {
            jobs: registered(&mut r, "jobs", "Jobs computed, by device"),
            nodes: registered(&mut r, "nodes", "Search nodes visited, by device"),
            accepted: registered(&mut r, "accepted", "Results the coordinator counted as new"),
            nodes_per_second: registered(
                &mut r,
                "nodes_per_second",
                "Search nodes per second over the last summary interval",
            ),
            running: registered(&mut r, "running", "Jobs leased and not yet finished"),
            unreported: registered(
                &mut r,
                "unreported",
                "Finished results not yet acknowledged by the coordinator",
            ),
            threads: registered(&mut r, "threads", "Compute threads"),
            gpus: registered(&mut r, "gpus", "GPUs computing"),
            gpu_jobs: registered(&mut r, "gpu_jobs", "Jobs computed on a GPU"),
            gpu_failures: registered(
                &mut r,
                "gpu_failures",
                "GPU batches that failed or were answered implausibly, computed on the CPU instead",
            ),
            gpu_backups: registered(
                &mut r,
                "gpu_backups",
                "Jobs a GPU took as backups: copies of jobs CPU threads were computing, once the worker expected no job soon",
            ),
            gpu_backups_sent: registered(
                &mut r,
                "gpu_backups_sent",
                "Backups whose GPU result was the one sent (the CPU thread stopped first)",
            ),
            gpu_kernel: registered(
                &mut r,
                "gpu_kernel",
                "The kernel variant and shape each GPU runs, valued at its calibrated nodes per second (0: given by --gpu-kernel)",
            ),
            gpu_batch: registered(
                &mut r,
                "gpu_batch",
                "Jobs each GPU takes per batch now: those it computes while a CPU thread computes one, up to --gpu-batch",
            ),
            rpc: RpcMetrics::register(&mut r, "calls to the coordinator"),
            registry: r,
        };
        m.device("cpu");
        m
    }
}

impl Metrics {
    /// Exports a device's job and node series (at 0) before its first job: `cpu`, or a GPU's label.
    pub fn device(&self, device: &str) {
        let label = DeviceLabel {
            device: device.to_string(),
        };
        let _ = self.jobs.get_or_create(&label);
        let _ = self.nodes.get_or_create(&label);
    }

    /// Records the kernel variant and shape GPU `device` runs, and its calibrated rate (0 if given).
    pub fn gpu_kernel(&self, device: &str, shape: &str, rate: f64) {
        self.gpu_kernel
            .get_or_create(&KernelLabel {
                device: device.to_string(),
                shape: shape.to_string(),
            })
            .set(rate);
    }

    /// Records the jobs GPU `device` takes per batch now.
    pub fn gpu_batch(&self, device: &str, jobs: usize) {
        self.gpu_batch
            .get_or_create(&DeviceLabel {
                device: device.to_string(),
            })
            .set(jobs.try_into().unwrap_or(i64::MAX));
    }

    /// Counts a computed job of `nodes` nodes on `device` (`None`: the CPU).
    pub fn computed(&self, device: Option<&str>, nodes: u64) {
        let label = DeviceLabel {
            device: device.unwrap_or("cpu").to_string(),
        };
        self.jobs.get_or_create(&label).inc();
        self.nodes.get_or_create(&label).inc_by(nodes);
    }

    /// The metrics in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// A rate over the time since the previous reading: per-interval figures for the summary line.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    since: Instant,
    jobs: u64,
    nodes: u128,
}

/// What happened in one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub jobs: u64,
    pub nodes_per_second: f64,
}

impl Window {
    pub fn start(now: Instant, jobs: u64, nodes: u128) -> Window {
        Window {
            since: now,
            jobs,
            nodes,
        }
    }

    /// The rates since the window started, and a new window from `now`.
    pub fn roll(&mut self, now: Instant, jobs: u64, nodes: u128) -> Rates {
        let secs = (now - self.since).as_secs_f64();
        let rates = Rates {
            jobs: jobs - self.jobs,
            nodes_per_second: if secs > 0.0 {
                (nodes - self.nodes) as f64 / secs
            } else {
                0.0
            },
        };
        *self = Window::start(now, jobs, nodes);
        rates
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_window_measures_what_happened_since_it_started() {
        let t0 = Instant::now();
        let mut w = Window::start(t0, 10, 1_000);
        let r = w.roll(t0 + Duration::from_secs(4), 14, 9_000);
        assert_eq!(r.jobs, 4);
        assert_eq!(r.nodes_per_second, 2_000.0);
        let r = w.roll(t0 + Duration::from_secs(6), 14, 9_000);
        assert_eq!(
            r,
            Rates {
                jobs: 0,
                nodes_per_second: 0.0
            }
        );
    }

    #[test]
    fn a_gpus_kernel_and_calibrated_rate_are_a_series() {
        let m = Metrics::default();
        m.gpu_kernel("cuda:0", "flat/128/4", 1.5e11);
        let text = m.render();
        assert!(
            text.contains(
                "nqueens_worker_gpu_kernel{device=\"cuda:0\",shape=\"flat/128/4\"} 150000000000"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_gpus_batch_size_is_a_series() {
        let m = Metrics::default();
        m.gpu_batch("opencl:0", 12);
        m.gpu_batch("opencl:0", 3);
        let text = m.render();
        assert!(
            text.contains("nqueens_worker_gpu_batch{device=\"opencl:0\"} 3\n"),
            "{text}"
        );
    }

    #[test]
    fn rendered_metrics_name_every_family() {
        let m = Metrics::default();
        assert!(
            m.render()
                .contains("nqueens_worker_jobs_total{device=\"cpu\"} 0"),
            "the CPU's series is there before its first job"
        );
        for _ in 0..3 {
            m.computed(None, 10);
        }
        m.computed(Some("cuda:0"), 1_000);
        m.rpc.observe("Report", Duration::from_millis(2), true);
        m.rpc.observe("Lease", Duration::from_millis(2), false);
        let text = m.render();
        for name in [
            "nqueens_worker_jobs_total{device=\"cpu\"} 3",
            "nqueens_worker_nodes_total{device=\"cpu\"} 30",
            "nqueens_worker_jobs_total{device=\"cuda:0\"} 1",
            "nqueens_worker_nodes_total{device=\"cuda:0\"} 1000",
            "nqueens_worker_nodes_per_second",
            "nqueens_worker_rpc_seconds_bucket{le=\"0.00025\",method=\"Report\"}",
            "nqueens_worker_rpc_errors_total{method=\"Lease\"} 1",
            "nqueens_worker_gpu_backups_total 0",
            "nqueens_worker_gpu_backups_sent_total 0",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
