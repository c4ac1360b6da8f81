//! The kernel source and the prelude that makes it CUDA C++ or OpenCL C: one source, a few macros (the
//! way hashcat shares its kernels between the two).

use crate::Backend;

/// The search kernel, shared by every backend.
pub const SEARCH: &str = include_str!("search.cl");

/// Name of the kernel's entry point.
pub const ENTRY: &str = "nq_search";

const CUDA: &str = r#"
typedef unsigned int u32;
typedef unsigned long long u64;
#define KERNEL extern "C" __global__ void __launch_bounds__(256)
#define GLOBAL
#define RESTRICT __restrict__
#define ATOMIC_NEXT(p) atomicAdd((p), 1u)
#define POPCOUNT(x) __popc(x)
"#;

const OPENCL: &str = r#"
typedef uint u32;
typedef ulong u64;
#define KERNEL __kernel void
#define GLOBAL __global
#define RESTRICT restrict
#define ATOMIC_NEXT(p) atomic_inc(p)
#define POPCOUNT(x) popcount(x)
"#;

/// The complete source for `backend`.
pub fn source(backend: Backend) -> String {
    let prelude = match backend {
        Backend::Cuda => CUDA,
        Backend::OpenCl => OPENCL,
    };
    format!("{prelude}\n#line 1 \"search.cl\"\n{SEARCH}")
}
