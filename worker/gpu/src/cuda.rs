//! The CUDA backend: the kernel compiled by NVRTC for the device's architecture and run through the
//! driver API (`cudarc`, both libraries loaded when first used).

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use nqueens_common::kernel::seeds::SEED_WORDS;

use crate::{prelude, Backend, DeviceInfo, GpuError, Launch, Shape};

const BACKEND: &str = "CUDA";

fn call<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> GpuError {
    GpuError::call(BACKEND, what)
}

/// Why CUDA cannot be used here, or `None` if both libraries load.
pub fn missing() -> Option<String> {
    // SAFETY: each only tries to open the library by its usual names; nothing is called.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    let nvrtc = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    match (driver, nvrtc) {
        (true, true) => None,
        (false, _) => {
            Some("CUDA: the NVIDIA driver library (libcuda.so.1) is not installed".into())
        }
        (true, false) => nvrtc_missing(),
    }
}

/// Why the kernel cannot be compiled here (NVRTC not found), or `None`; no driver or device is needed.
pub fn nvrtc_missing() -> Option<String> {
    // SAFETY: only tries to open the library by its usual names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        None
    } else {
        Some(
            "CUDA: NVRTC (libnvrtc.so) is not found; install the CUDA toolkit's NVRTC or the PyPI \
              package nvidia-cuda-nvrtc-cu12 and add its lib folder to LD_LIBRARY_PATH"
                .into(),
        )
    }
}

/// Number of CUDA devices (0 when CUDA cannot be used).
pub fn count() -> usize {
    if missing().is_some() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
}

/// The name and compute capability of device `ordinal`.
pub fn name(ordinal: usize) -> Result<String, GpuError> {
    let ctx = CudaContext::new(ordinal).map_err(call("opening the device"))?;
    let name = ctx.name().map_err(call("reading the device name"))?;
    let cc = ctx
        .compute_capability()
        .map_err(call("reading the compute capability"))?;
    Ok(format!("{name} (compute {}.{})", cc.0, cc.1))
}

/// Device `ordinal` as calibrations are kept for it: its name, compute capability and multiprocessors,
/// the CUDA version of its driver, the driver's release where Linux tells it, and NVRTC's version.
pub fn describe(ordinal: usize) -> Result<String, GpuError> {
    if let Some(why) = missing() {
        return Err(GpuError::NoDevice(why));
    }
    if ordinal >= count() {
        return Err(GpuError::NoDevice(format!(
            "CUDA has no device {ordinal} (`nqueens gpus` lists them)"
        )));
    }
    let ctx = CudaContext::new(ordinal).map_err(call("opening the device"))?;
    let sms = ctx
        .attribute(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(call("reading the multiprocessor count"))?;
    let mut driver: std::ffi::c_int = 0;
    // SAFETY: the function takes a pointer to one int, which it writes; cudarc loads the library
    // (present: `missing` said so) before the call.
    let got = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
    if got != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(call("reading the driver version")(format!("{got:?}")));
    }
    let (mut major, mut minor): (std::ffi::c_int, std::ffi::c_int) = (0, 0);
    // SAFETY: as above, two ints written; NVRTC is present (`missing` said so).
    let got = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if got != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(call("reading NVRTC's version")(format!("{got:?}")));
    }
    let release = std::fs::read_to_string("/sys/module/nvidia/version")
        .map(|v| v.trim().chars().take(32).collect::<String>())
        .unwrap_or_else(|_| "unknown".into());
    Ok(format!(
        "{}, {sms} SMs, CUDA driver {}.{} (release {release}), NVRTC {major}.{minor}",
        name(ordinal)?,
        driver / 1000,
        driver % 1000 / 10
    ))
}

/// Compiles the kernel built for `shape` to PTX for compute capability `cc` (e.g. `(9, 0)`); no device
/// is needed.
pub fn compile(cc: (i32, i32), shape: &Shape) -> Result<Ptx, GpuError> {
    if let Some(why) = nvrtc_missing() {
        return Err(GpuError::NoDevice(why));
    }
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{}{}", cc.0, cc.1),
            "-default-device".into(),
        ],
        ..Default::default()
    };
    compile_ptx_with_opts(prelude::source(Backend::Cuda, shape), opts).map_err(|e| {
        GpuError::Compile {
            backend: BACKEND,
            log: e.to_string(),
        }
    })
}

/// One CUDA device with the kernel loaded.
pub struct Cuda {
    info: DeviceInfo,
    /// Launches alternate between these, so that two can be on the device at once.
    streams: [Arc<CudaStream>; 2],
    /// Launches started so far (the next one's stream).
    started: usize,
    function: CudaFunction,
    grid: u32,
    /// Shared memory per block the device allows (the `shared` variant's stack must fit).
    shared_max: u32,
}

impl Cuda {
    /// Opens device `ordinal` and compiles the kernel for it, built for `shape`.
    pub fn open(ordinal: usize, shape: Shape) -> Result<Cuda, GpuError> {
        if let Some(why) = missing() {
            return Err(GpuError::NoDevice(why));
        }
        let ctx = CudaContext::new(ordinal).map_err(call("opening the device"))?;
        let name = ctx.name().map_err(call("reading the device name"))?;
        let cc = ctx
            .compute_capability()
            .map_err(call("reading the compute capability"))?;
        let sms = ctx
            .attribute(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(call("reading the multiprocessor count"))? as u32;
        let per_sm = ctx
            .attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
            .map_err(call("reading the threads per multiprocessor"))? as u32;
        let shared_max = ctx
            .attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(call("reading the shared memory size"))? as u32;
        if prelude::worst_stack_bytes(&shape) > u64::from(shared_max) {
            return Err(GpuError::BadShape(format!(
                "{shape} needs up to {} bytes of shared memory per block, the device has {shared_max}",
                prelude::worst_stack_bytes(&shape)
            )));
        }
        let ptx = compile(cc, &shape)?;
        let module = ctx.load_module(ptx).map_err(call("loading the kernel"))?;
        let function = module
            .load_function(prelude::ENTRY)
            .map_err(call("finding the kernel"))?;
        if shared_max > 48 * 1024 {
            // Above 48 KiB of dynamic shared memory a kernel must opt in.
            function
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_max as i32,
                )
                .map_err(call("allowing the shared memory"))?;
        }
        let grid = sms.max(1) * (per_sm / shape.block).max(1);
        Ok(Cuda {
            info: DeviceInfo {
                backend: Backend::Cuda,
                index: ordinal,
                name: format!("{name} (compute {}.{}, {sms} SMs)", cc.0, cc.1),
                threads: (grid * shape.block) as usize,
                shape,
            },
            streams: [
                ctx.new_stream().map_err(call("creating a stream"))?,
                ctx.new_stream().map_err(call("creating a stream"))?,
            ],
            started: 0,
            function,
            grid,
            shared_max,
        })
    }
}

impl Launch for Cuda {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn launch(
        &mut self,
        seeds: &[u32],
        forbid: &[u32],
        tails: &[u32],
        full: u32,
    ) -> Result<Vec<u64>, GpuError> {
        self.submit(seeds, forbid, tails, full)?.wait()
    }

    fn submit(
        &mut self,
        seeds: &[u32],
        forbid: &[u32],
        tails: &[u32],
        full: u32,
    ) -> Result<crate::Pending, GpuError> {
        let n = (seeds.len() / SEED_WORDS) as u32;
        let s = self.streams[self.started % self.streams.len()].clone();
        self.started += 1;
        let seeds_d = s.clone_htod(seeds).map_err(call("copying the seeds"))?;
        let forbid_d = s.clone_htod(forbid).map_err(call("copying the tables"))?;
        let tails_d = s.clone_htod(tails).map_err(call("copying the tables"))?;
        let next_d = s.alloc_zeros::<u32>(1).map_err(call("allocating"))?;
        // Zeros: a seed the kernel never wrote has no nodes, which the check refuses.
        let mut out_d = s
            .alloc_zeros::<u64>(2 * n as usize)
            .map_err(call("allocating the answer"))?;
        let shape = self.info.shape;
        // Only the variants with a stack of levels in shared memory need the batch's depth (a pass over
        // its seeds).
        let depth = if prelude::stack_words(&shape, 2) > prelude::stack_words(&shape, 1) {
            prelude::depth(seeds, tails)
        } else {
            1
        };
        let shared = 4 * prelude::stack_words(&shape, depth) * shape.block;
        if shared > self.shared_max {
            return Err(GpuError::BadShape(format!(
                "{shape} needs {shared} bytes of shared memory per block for {depth} levels, the device has {}",
                self.shared_max
            )));
        }
        let cfg = LaunchConfig {
            // Each seed a searcher: a thread, or a whole block (`coop`).
            grid_dim: (
                self.grid
                    .min(n.div_ceil((shape.block / shape.threads_per_seed()).max(1)))
                    .max(1),
                1,
                1,
            ),
            block_dim: (shape.block, 1, 1),
            shared_mem_bytes: shared,
        };
        let mut b = s.launch_builder(&self.function);
        b.arg(&seeds_d)
            .arg(&n)
            .arg(&forbid_d)
            .arg(&tails_d)
            .arg(&full)
            .arg(&next_d)
            .arg(&mut out_d)
            .arg(&depth);
        // SAFETY: the arguments match the kernel's parameters in number, order and type (search.cl), and
        // every table is as long as the indices the kernel derives from `n` and the seeds (Batch checks).
        unsafe { b.launch(cfg) }.map_err(call("launching the kernel"))?;
        Ok(crate::Pending::later(move || {
            let out = s.clone_dtoh(&out_d).map_err(call("running the kernel"))?;
            s.synchronize().map_err(call("running the kernel"))?;
            // The tables live until the kernel that reads them is done.
            drop((seeds_d, forbid_d, tails_d, next_d, out_d));
            Ok(out)
        }))
    }
}
