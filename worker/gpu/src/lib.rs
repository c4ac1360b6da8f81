//! GPU searches: jobs expanded on the host into many independent seeds ([`nqueens_common::kernel::seeds`]),
//! searched one per device thread by one kernel source (`search.cl`) that is compiled at run time, by
//! NVRTC for CUDA devices and by the OpenCL driver elsewhere. Nothing GPU-related is needed to build:
//! both runtimes are opened when first used, and [`open`] says plainly what is missing.
//!
//! A device's answer is checked before it is used (every seed written, no more completions than nodes),
//! and the host adds exactly what the CPU kernel would have counted for the same units: a GPU worker
//! reports the same totals, unique counts and nodes as a CPU worker, so either can verify the other.

mod calibrate;
mod calibration;
pub mod cuda;
#[cfg(any(test, feature = "doubles"))]
pub mod doubles;
mod engine;
mod error;
pub mod kept;
pub mod opencl;
pub mod prelude;
mod split;
mod stream;

pub use calibrate::{calibrate, calibrate_kept, candidates};
pub use calibration::{Calibration, Trial};
pub use engine::{run_pipelined, Gpu, Started, IN_FLIGHT};
pub use error::GpuError;
pub use shape::{Kernel, Shape};
pub use split::{COVER, LAUNCHES};
pub use stream::{run_jobs, Answer, Split, Stream};

mod shape;

use std::fmt;

/// The two ways to reach a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Cuda,
    OpenCl,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Cuda => "cuda",
            Backend::OpenCl => "opencl",
        })
    }
}

/// An opened device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub backend: Backend,
    /// Index within its backend.
    pub index: usize,
    /// Model and size, for logs and the worker table.
    pub name: String,
    /// Threads the device runs at once: batches are sized from it.
    pub threads: usize,
    /// The kernel variant and launch shape it was built for.
    pub shape: Shape,
}

impl DeviceInfo {
    /// Its short name, as `--gpu` takes it and results and metrics carry it: `cuda:0`, `opencl:1`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.backend, self.index)
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} {} [{}]",
            self.backend, self.index, self.name, self.shape
        )
    }
}

/// A device with the kernel ready: one launch searches every seed of the tables.
pub trait Launch: Send {
    fn info(&self) -> &DeviceInfo;

    /// Runs the kernel over the tables (layouts in `search.cl`) and returns `(completions, nodes)` per
    /// seed, unchecked.
    fn launch(
        &mut self,
        seeds: &[u32],
        forbid: &[u32],
        tails: &[u32],
        full: u32,
    ) -> Result<Vec<u64>, GpuError>;

    /// Starts the same launch and returns while the device runs it, where the backend can (CUDA: on
    /// the next of its streams, so that one launch's last seeds overlap the next one's first); by
    /// default it runs to the end first.
    fn submit(
        &mut self,
        seeds: &[u32],
        forbid: &[u32],
        tails: &[u32],
        full: u32,
    ) -> Result<Pending, GpuError> {
        self.launch(seeds, forbid, tails, full).map(Pending::ready)
    }
}

/// A launch under way: [`Pending::wait`] gives its answer, unchecked.
pub struct Pending(Box<dyn FnOnce() -> Result<Vec<u64>, GpuError> + Send>);

impl Pending {
    /// A launch already answered.
    pub fn ready(answer: Vec<u64>) -> Pending {
        Pending(Box::new(move || Ok(answer)))
    }

    /// A launch whose answer `wait` fetches.
    pub fn later(wait: impl FnOnce() -> Result<Vec<u64>, GpuError> + Send + 'static) -> Pending {
        Pending(Box::new(wait))
    }

    /// Waits for the device and returns `(completions, nodes)` per seed.
    pub fn wait(self) -> Result<Vec<u64>, GpuError> {
        (self.0)()
    }
}

/// Why no device of either backend can be used here (for error messages).
pub fn missing() -> String {
    let mut why = Vec::new();
    match cuda::missing() {
        Some(m) => why.push(m),
        None => why.push(format!("CUDA: {} devices", cuda::count())),
    }
    match opencl::devices() {
        Err(m) => why.push(m),
        Ok(d) => why.push(format!(
            "OpenCL: {} devices ({} of them CPU devices, used only when named, e.g. opencl:0)",
            d.len(),
            d.iter().filter(|(_, cpu)| *cpu).count()
        )),
    }
    why.join("; ")
}

/// Every device either backend lists, one line each (`cuda:0 NAME`, `opencl:1 NAME (CPU device)`), and
/// a line for each backend that cannot be used here, saying why.
pub fn list() -> Vec<String> {
    let mut out = Vec::new();
    match cuda::missing() {
        Some(why) => out.push(why),
        None => {
            for k in 0..cuda::count() {
                out.push(match cuda::name(k) {
                    Ok(name) => format!("cuda:{k} {name}"),
                    Err(e) => format!("cuda:{k} cannot be opened: {e}"),
                });
            }
        }
    }
    match opencl::devices() {
        Err(why) => out.push(why),
        Ok(list) => {
            for (k, (d, cpu)) in list.iter().enumerate() {
                let name = d
                    .name()
                    .unwrap_or_else(|e| format!("(name unreadable: {e})"));
                let cpu = if *cpu {
                    " (CPU device: used only when named)"
                } else {
                    ""
                };
                out.push(format!("opencl:{k} {}{cpu}", name.trim()));
            }
        }
    }
    out
}

/// Opens the devices `spec` names: `None`, `""` or `"all"` for every CUDA device, or failing that every
/// OpenCL device that is not a CPU; else a comma-separated list of `cuda:K`, `opencl:K` or `K` (the K-th
/// CUDA device, or OpenCL device where there is no CUDA). Each device is calibrated ([`calibrate`]): it
/// runs the fastest of its backend's [`candidates`] there, and logs the choice.
pub fn open(spec: Option<&str>) -> Result<Vec<Gpu>, GpuError> {
    open_shaped(spec, None)
}

/// [`open`], each device built for `shape` where one is given (else calibrated).
pub fn open_shaped(spec: Option<&str>, shape: Option<Shape>) -> Result<Vec<Gpu>, GpuError> {
    open_kept(spec, shape, None)
}

/// [`open_shaped`], a device with no shape given calibrated as `keep` keeps it ([`calibrate_kept`]).
pub fn open_kept(
    spec: Option<&str>,
    shape: Option<Shape>,
    keep: Option<&kept::Keep>,
) -> Result<Vec<Gpu>, GpuError> {
    let spec = spec.map(str::trim).unwrap_or("");
    let mut wanted = Vec::new();
    if spec.is_empty() || spec == "all" {
        let n = cuda::count();
        if n > 0 {
            wanted.extend((0..n).map(|k| (Backend::Cuda, k)));
        } else if let Ok(list) = opencl::devices() {
            wanted.extend(
                list.iter()
                    .enumerate()
                    .filter(|(_, (_, cpu))| !cpu)
                    .map(|(k, _)| (Backend::OpenCl, k)),
            );
        }
        if wanted.is_empty() {
            return Err(GpuError::NoDevice(missing()));
        }
    } else {
        for item in spec.split(',').map(str::trim) {
            let bad = || GpuError::BadSpec(spec.to_string());
            let (backend, k) = match item.split_once(':') {
                Some(("cuda", k)) => (Backend::Cuda, k),
                Some(("opencl", k)) => (Backend::OpenCl, k),
                Some(_) => return Err(bad()),
                None if cuda::count() > 0 => (Backend::Cuda, item),
                None => (Backend::OpenCl, item),
            };
            let k: usize = k.parse().map_err(|_| bad())?;
            if wanted.contains(&(backend, k)) {
                return Err(bad());
            }
            wanted.push((backend, k));
        }
    }
    wanted
        .into_iter()
        .map(|(backend, k)| {
            match shape {
                Some(shape) => Ok(Gpu::new(open_one(backend, k, shape)?)),
                None => {
                    let (gpu, c) = calibrate_kept(backend, k, &candidates(backend), keep)?;
                    tracing::info!(device = %format!("{backend}:{k}"), "GPU calibrated: {}", c.summary());
                    Ok(gpu)
                }
            }
        })
        .collect()
}

/// Device `k` of `backend` as calibrations are kept for it: its model and driver.
pub(crate) fn describe(backend: Backend, k: usize) -> Result<String, GpuError> {
    match backend {
        Backend::Cuda => cuda::describe(k),
        Backend::OpenCl => opencl::describe(k),
    }
}

/// Opens device `k` of `backend` built for `shape`.
pub(crate) fn open_one(
    backend: Backend,
    k: usize,
    shape: Shape,
) -> Result<Box<dyn Launch>, GpuError> {
    shape.check()?;
    Ok(match backend {
        Backend::Cuda => Box::new(cuda::Cuda::open(k, shape)?),
        Backend::OpenCl => Box::new(opencl::OpenCl::open(k, shape)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device list that names no device this build knows, a device twice, or an index that is not a
    /// number is refused before any device is opened (so without any GPU runtime too).
    #[test]
    fn bad_device_lists_are_refused_before_anything_is_opened() {
        for spec in [
            "foo:1",
            "opencl:x",
            "cuda:-1",
            "opencl:0,opencl:0",
            "opencl:0,",
            "cuda:0 cuda:1",
        ] {
            assert!(
                matches!(open(Some(spec)), Err(GpuError::BadSpec(_))),
                "{spec:?}"
            );
        }
    }
}
