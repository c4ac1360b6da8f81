//! The kernel source and the prelude that makes it CUDA C++ or OpenCL C: one source, a few macros (the
//! way hashcat shares its kernels between the two), and the variant and block size it is built for.

use crate::{Backend, Shape};

/// The search kernel, shared by every backend.
pub const SEARCH: &str = include_str!("search.cl");

/// Name of the kernel's entry point.
pub const ENTRY: &str = "nq_search";

const CUDA: &str = r#"
typedef unsigned int u32;
typedef unsigned long long u64;
#define KERNEL extern "C" __global__ void __launch_bounds__(BLOCK)
#define GLOBAL
#define RESTRICT __restrict__
#define ATOMIC_NEXT(p) atomicAdd((p), 1u)
#define POPCOUNT(x) __popc(x)
#define LOCAL_ID threadIdx.x
#define LOCAL_SIZE blockDim.x
#define LOCAL_PTR
#define STACK_PARAM
#define SHARED_STACK extern __shared__ __align__(16) u32 nq_stack[];
#define U32X4 uint4
#define MAKE_U32X4(a, b, c, d) make_uint4((a), (b), (c), (d))
#define BARRIER __syncthreads()
#define LOCAL_ATOMIC_INC(p) atomicAdd((p), 1u)
"#;

const OPENCL: &str = r#"
typedef uint u32;
typedef ulong u64;
#define KERNEL __kernel __attribute__((reqd_work_group_size(BLOCK, 1, 1))) void
#define GLOBAL __global
#define RESTRICT restrict
#define ATOMIC_NEXT(p) atomic_inc(p)
#define POPCOUNT(x) popcount(x)
#define LOCAL_ID ((u32)get_local_id(0))
#define LOCAL_SIZE ((u32)get_local_size(0))
#define LOCAL_PTR __local
#define STACK_PARAM , __local u32 *nq_stack
#define SHARED_STACK
#define U32X4 uint4
#define MAKE_U32X4(a, b, c, d) ((uint4)((a), (b), (c), (d)))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define LOCAL_ATOMIC_INC(p) atomic_inc(p)
"#;

/// The complete source for `backend`, built for `shape`'s variant and block size.
pub fn source(backend: Backend, shape: &Shape) -> String {
    let prelude = match backend {
        Backend::Cuda => CUDA,
        Backend::OpenCl => OPENCL,
    };
    format!(
        "#define VARIANT {}\n#define BLOCK {}\n#define COOP_ENTRIES {}u\n#define COOP_ALONE {COOP_ALONE}\n{prelude}\n#line 1 \"search.cl\"\n{SEARCH}",
        shape.kernel.index(),
        shape.block,
        shape.list
    )
}

/// Levels of a subtree that a thread of a `coop` block searches alone, below an entry of the list.
pub const COOP_ALONE: u32 = 2;

/// Words of shared memory a thread of `shape` needs for seeds that hold `depth` levels (none: its stack
/// is per thread). `coop`'s do not depend on the depth: its list's entries (4 words each), two 64-bit
/// sums and two words towards the block's two control words and its 32 forbidden squares (a block has
/// at least 32 threads).
pub fn stack_words(shape: &Shape, depth: u32) -> u32 {
    match shape.kernel {
        crate::Kernel::Local | crate::Kernel::Compact => 0,
        crate::Kernel::Shared => 2 * depth,
        // The stack of levels, then the seed's rows of forbidden squares (from the row below its level
        // to the tail's second row below: depth + 1 at most).
        crate::Kernel::Flat | crate::Kernel::Stream => 4 * depth + depth + 1,
        crate::Kernel::Coop => 4 * shape.list + 4 + 2,
    }
}

/// Bytes of shared memory a block of `shape` needs for the deepest seeds any board has (32 levels): a
/// device that cannot give them refuses the shape when it opens, so that no launch fails on a larger N.
pub fn worst_stack_bytes(shape: &Shape) -> u64 {
    4 * u64::from(stack_words(shape, 32)) * u64::from(shape.block)
}

/// The deepest stack any seed of a batch needs: `tail - level + 1` levels (at least one).
pub fn depth(seeds: &[u32], tails: &[u32]) -> u32 {
    use nqueens_common::kernel::seeds::SEED_WORDS;
    seeds
        .chunks_exact(SEED_WORDS)
        .map(|s| {
            let tail = tails.get((s[3] >> 5) as usize).copied().unwrap_or(0);
            (tail + 1).saturating_sub(s[3] & 31)
        })
        .max()
        .unwrap_or(0)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kernel;

    #[test]
    fn a_batch_needs_the_deepest_of_its_seeds_levels() {
        // Seeds of units 0 and 1 (tails 10 and 12) at levels 4 and 3: 7 and 10 levels.
        let seeds = [0, 0, 0, 4, 0, 0, 0, (1 << 5) | 3];
        assert_eq!(depth(&seeds, &[10, 12]), 10);
        assert_eq!(depth(&[], &[]), 1);
        // A seed at its tail still holds one level.
        assert_eq!(depth(&[0, 0, 0, 12], &[12]), 1);
    }

    #[test]
    fn only_the_shared_memory_variants_take_shared_memory() {
        let shape = |kernel| Shape::new(kernel, 128, 4);
        assert_eq!(worst_stack_bytes(&shape(Kernel::Local)), 0);
        assert_eq!(worst_stack_bytes(&shape(Kernel::Compact)), 0);
        assert_eq!(worst_stack_bytes(&shape(Kernel::Shared)), 2 * 4 * 32 * 128);
        assert_eq!(
            worst_stack_bytes(&shape(Kernel::Flat)),
            4 * (4 * 32 + 33) * 128
        );
        assert_eq!(
            worst_stack_bytes(&shape(Kernel::Stream)),
            4 * (4 * 32 + 33) * 128
        );
        assert_eq!(
            worst_stack_bytes(&shape(Kernel::Coop)),
            4 * (4 * crate::shape::COOP_LIST + 6) as u64 * 128
        );
    }

    #[test]
    fn the_source_names_its_variant_and_block() {
        let src = source(Backend::Cuda, &"flat/128/4".parse().unwrap());
        assert!(
            src.starts_with(
                "#define VARIANT 3\n#define BLOCK 128\n#define COOP_ENTRIES 0u\n#define COOP_ALONE 2\n"
            ),
            "{src}"
        );
        let src = source(Backend::OpenCl, &"coop/64/8/2".parse().unwrap());
        assert!(
            src.starts_with("#define VARIANT 4\n#define BLOCK 64\n#define COOP_ENTRIES 2u\n"),
            "{src}"
        );
    }
}
