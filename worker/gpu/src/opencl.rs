//! The OpenCL backend: the kernel built from source by the device's OpenCL driver (`opencl3`, the ICD
//! loader opened when first used). Any OpenCL 1.2 device runs it, PoCL's CPU device included.

use std::ptr;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::types::{cl_uint, cl_ulong, CL_BLOCKING};

use nqueens_common::kernel::seeds::SEED_WORDS;

use crate::{prelude, Backend, DeviceInfo, GpuError, Launch, Shape};

mod release;
use release::Quiet;

const BACKEND: &str = "OpenCL";

fn call<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> GpuError {
    GpuError::call(BACKEND, what)
}

/// Every OpenCL device, platform by platform, with whether it is a CPU device; or why there is none.
pub fn devices() -> Result<Vec<(Device, bool)>, String> {
    // ICD loaders and drivers are not all safe to enumerate from two threads at once (PoCL was seen
    // listing no device to one of two concurrent callers): one enumeration at a time per process.
    static ENUMERATE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ENUMERATE.lock().unwrap_or_else(|e| e.into_inner());
    let platforms = get_platforms().map_err(|e| {
        format!("OpenCL: no runtime (libOpenCL.so.1 and an installable client driver, e.g. Debian's pocl-opencl-icd): {e}")
    })?;
    let mut out = Vec::new();
    for p in platforms {
        let ids = p
            .get_devices(CL_DEVICE_TYPE_ALL)
            .map_err(|e| format!("OpenCL: cannot list the devices of a platform: {e}"))?;
        for id in ids {
            let d = Device::new(id);
            let cpu = d.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0);
            out.push((d, cpu));
        }
    }
    if out.is_empty() {
        return Err("OpenCL: the runtime lists no device".into());
    }
    Ok(out)
}

/// The `index`-th OpenCL device as calibrations are kept for it: its name, vendor, compute units and
/// driver version.
pub fn describe(index: usize) -> Result<String, GpuError> {
    let list = devices().map_err(GpuError::NoDevice)?;
    let Some((device, _)) = list.into_iter().nth(index) else {
        return Err(GpuError::NoDevice(format!(
            "OpenCL has no device {index} (`nqueens gpus` lists them)"
        )));
    };
    Ok(format!(
        "{} ({}), {} compute units, driver {}",
        device
            .name()
            .map_err(call("reading the device name"))?
            .trim(),
        device.vendor().map_err(call("reading the vendor"))?.trim(),
        device
            .max_compute_units()
            .map_err(call("reading the compute units"))?,
        device
            .driver_version()
            .map_err(call("reading the driver version"))?
            .trim()
    ))
}

/// One OpenCL device with the kernel built. (Fields drop in order: the kernel and the queue before the
/// context they were made in.)
pub struct OpenCl {
    info: DeviceInfo,
    kernel: Quiet<Kernel>,
    queue: Quiet<CommandQueue>,
    context: Quiet<Context>,
    groups: usize,
    /// Local memory per work-group the device has (the `shared` variant's stack must fit).
    local_max: u64,
}

impl OpenCl {
    /// Opens the `index`-th OpenCL device (in [`devices`] order) and builds the kernel for it, built for
    /// `shape`.
    pub fn open(index: usize, shape: Shape) -> Result<OpenCl, GpuError> {
        let list = devices().map_err(GpuError::NoDevice)?;
        let Some((device, _)) = list.into_iter().nth(index) else {
            return Err(GpuError::NoDevice(format!(
                "OpenCL has no device {index} (`nqueens gpus` lists them)"
            )));
        };
        let name = device.name().map_err(call("reading the device name"))?;
        let units = device
            .max_compute_units()
            .map_err(call("reading the compute units"))? as usize;
        let local_max = device
            .local_mem_size()
            .map_err(call("reading the local memory size"))?;
        if prelude::worst_stack_bytes(&shape) > local_max {
            return Err(GpuError::BadShape(format!(
                "{shape} needs up to {} bytes of local memory per work-group, the device has {local_max}",
                prelude::worst_stack_bytes(&shape)
            )));
        }
        let context =
            Quiet::new(Context::from_device(&device).map_err(call("creating a context"))?);
        #[allow(deprecated)]
        let queue = Quiet::new(
            CommandQueue::create_default(&context, 0).map_err(call("creating a queue"))?,
        );
        let program = Quiet::new(
            opencl3::program::Program::create_and_build_from_source(
                &context,
                &prelude::source(Backend::OpenCl, &shape),
                "",
            )
            .map_err(|log| GpuError::Compile {
                backend: BACKEND,
                log,
            })?,
        );
        let kernel = Quiet::new(
            Kernel::create(&program, prelude::ENTRY).map_err(call("finding the kernel"))?,
        );
        // Enough work-groups to keep every compute unit busy with several in flight.
        let groups = units.max(1) * 32;
        Ok(OpenCl {
            info: DeviceInfo {
                backend: Backend::OpenCl,
                index,
                name: format!("{} ({units} compute units)", name.trim()),
                threads: groups * shape.block as usize,
                shape,
            },
            context,
            queue,
            kernel,
            groups,
            local_max,
        })
    }

    fn buffer<T>(&self, data: &[T], flags: u64) -> Result<Quiet<Buffer<T>>, GpuError> {
        // SAFETY: a plain device allocation of `data.len()` elements (at least one), no host pointer.
        let mut b = Quiet::new(
            unsafe {
                Buffer::<T>::create(&self.context, flags, data.len().max(1), ptr::null_mut())
            }
            .map_err(call("allocating a buffer"))?,
        );
        if !data.is_empty() {
            // SAFETY: blocking write of exactly `data.len()` elements into a buffer that holds them.
            unsafe {
                self.queue
                    .enqueue_write_buffer(&mut b, CL_BLOCKING, 0, data, &[])
            }
            .map_err(call("copying to the device"))?;
        }
        Ok(b)
    }
}

impl Launch for OpenCl {
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
        let n = seeds.len() / SEED_WORDS;
        let seeds_d = self.buffer::<cl_uint>(seeds, CL_MEM_READ_ONLY)?;
        let forbid_d = self.buffer::<cl_uint>(forbid, CL_MEM_READ_ONLY)?;
        let tails_d = self.buffer::<cl_uint>(tails, CL_MEM_READ_ONLY)?;
        let next_d = self.buffer::<cl_uint>(&[0], CL_MEM_READ_WRITE)?;
        // Poisoned: a seed the kernel never wrote is caught by the check.
        let out_d = self.buffer::<cl_ulong>(&vec![u64::MAX; 2 * n], CL_MEM_READ_WRITE)?;
        let shape = self.info.shape;
        let group = shape.block as usize;
        // Each seed a searcher: a thread, or a whole group (`coop`).
        let per_group = group / shape.threads_per_seed() as usize;
        let groups = self.groups.min(n.div_ceil(per_group.max(1))).max(1);
        // Only the variants with a stack of levels in shared memory need the batch's depth (a pass over
        // its seeds).
        let depth = if prelude::stack_words(&shape, 2) > prelude::stack_words(&shape, 1) {
            prelude::depth(seeds, tails)
        } else {
            1
        };
        let local = (4 * prelude::stack_words(&shape, depth) as usize * group).max(4);
        if local as u64 > self.local_max {
            return Err(GpuError::BadShape(format!(
                "{shape} needs {local} bytes of local memory per work-group for {depth} levels, the device has {}",
                self.local_max
            )));
        }
        let (n32, full) = (n as cl_uint, full as cl_uint);
        let (seeds_m, forbid_m, tails_m) = (seeds_d.get(), forbid_d.get(), tails_d.get());
        let (next_m, out_m) = (next_d.get(), out_d.get());
        // Each argument set on its own, its error returned (`ExecuteKernel` panics on one).
        // SAFETY: the arguments match the kernel's parameters in number, order and type (search.cl): a
        // buffer's handle or a 32-bit integer; each is read by the driver during the call.
        let kernel = &self.kernel;
        let set = || -> opencl3::Result<()> {
            unsafe {
                kernel.set_arg(0, &seeds_m)?;
                kernel.set_arg(1, &n32)?;
                kernel.set_arg(2, &forbid_m)?;
                kernel.set_arg(3, &tails_m)?;
                kernel.set_arg(4, &full)?;
                kernel.set_arg(5, &next_m)?;
                kernel.set_arg(6, &out_m)?;
                kernel.set_arg(7, &depth)?;
                kernel.set_arg_local_buffer(8, local)
            }
        };
        set().map_err(call("setting the kernel's arguments"))?;
        let (global, local) = ([groups * group], [group]);
        // SAFETY: one dimension, sizes read during the call; every table is as long as the indices the
        // kernel derives from `n` and the seeds (Batch checks), and the buffers outlive the wait below.
        let event = Quiet::new(
            unsafe {
                self.queue.enqueue_nd_range_kernel(
                    self.kernel.get(),
                    1,
                    ptr::null(),
                    global.as_ptr(),
                    local.as_ptr(),
                    &[],
                )
            }
            .map_err(call("launching the kernel"))?,
        );
        event.wait().map_err(call("running the kernel"))?;
        let mut out = vec![0u64; 2 * n];
        // SAFETY: blocking read of exactly the buffer's `2 * n` elements.
        unsafe {
            self.queue
                .enqueue_read_buffer(&out_d, CL_BLOCKING, 0, &mut out, &[])
        }
        .map_err(call("reading the answer"))?;
        Ok(out)
    }
}
