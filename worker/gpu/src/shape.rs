//! A kernel variant and its launch shape: what a device is built and launched with, named on the command
//! line as `VARIANT/BLOCK/PER_THREAD` (for example `shared/128/8`).

use std::fmt;
use std::str::FromStr;

use crate::{Backend, GpuError};

/// The kernel variants of `search.cl`, one source for both backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Every level's four masks on a per-thread stack (local memory on CUDA).
    Local,
    /// The current level's masks in registers; per level only the squares left and the queen placed,
    /// in shared memory.
    Shared,
    /// [`Kernel::Shared`]'s loop with its two words per level on the per-thread stack.
    Compact,
    /// One node per pass of a loop with no inner branch, the stack of whole levels in shared memory.
    Flat,
    /// The threads of a block search one seed together from one list of entries in shared memory, a
    /// node each per step (a thread searches a subtree alone only where the list is full).
    Coop,
    /// [`Kernel::Flat`]'s loop, a lane taking its next seed inside it rather than waiting for the
    /// slowest lane of its warp.
    Stream,
}

impl Kernel {
    /// Every variant, in the order calibration tries them.
    pub const ALL: [Kernel; 6] = [
        Kernel::Local,
        Kernel::Shared,
        Kernel::Compact,
        Kernel::Flat,
        Kernel::Coop,
        Kernel::Stream,
    ];

    /// Its number in the source (`VARIANT`).
    pub fn index(self) -> u32 {
        match self {
            Kernel::Local => 0,
            Kernel::Shared => 1,
            Kernel::Compact => 2,
            Kernel::Flat => 3,
            Kernel::Coop => 4,
            Kernel::Stream => 5,
        }
    }

    /// Its name on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Local => "local",
            Kernel::Shared => "shared",
            Kernel::Compact => "compact",
            Kernel::Flat => "flat",
            Kernel::Coop => "coop",
            Kernel::Stream => "stream",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = GpuError;
    fn from_str(s: &str) -> Result<Kernel, GpuError> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| {
                GpuError::BadShape(format!(
                    "no kernel variant {s:?} (local, shared, compact, flat, coop, stream)"
                ))
            })
    }
}

/// Smallest and largest threads per block.
pub const BLOCKS: std::ops::RangeInclusive<u32> = 32..=1024;
/// Largest seeds per thread in a batch.
pub const MAX_PER_THREAD: u32 = 256;
/// Entries per thread of a `coop` block's shared list, unless the shape says otherwise.
pub const COOP_LIST: u32 = 8;
/// Most entries per thread of a `coop` block's shared list.
pub const MAX_COOP_LIST: u32 = 32;

/// What a device is built and launched with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    pub kernel: Kernel,
    /// Threads per block (work-items per work-group): a multiple of 32.
    pub block: u32,
    /// Seeds per device thread in a batch: more lets threads that finish early find more work (per
    /// block for [`Kernel::Coop`]).
    pub per_thread: u32,
    /// [`Kernel::Coop`]: entries per thread of the block's shared list (1 to [`MAX_COOP_LIST`]); 0 for
    /// the other variants.
    pub list: u32,
}

impl Shape {
    /// The shape a device of `backend` runs when nothing else is asked or calibrated.
    pub fn default_for(backend: Backend) -> Shape {
        Shape::new(
            Kernel::Local,
            match backend {
                Backend::Cuda => 256,
                Backend::OpenCl => 64,
            },
            8,
        )
    }

    /// `kernel` at `block` threads and `per_thread` seeds, with `coop`'s default list.
    pub fn new(kernel: Kernel, block: u32, per_thread: u32) -> Shape {
        Shape {
            kernel,
            block,
            per_thread,
            list: if kernel == Kernel::Coop { COOP_LIST } else { 0 },
        }
    }

    /// Refuses a shape no device can run.
    pub fn check(&self) -> Result<(), GpuError> {
        if !BLOCKS.contains(&self.block) || !self.block.is_multiple_of(32) {
            return Err(GpuError::BadShape(format!(
                "block {} must be a multiple of 32 from {} to {}",
                self.block,
                BLOCKS.start(),
                BLOCKS.end()
            )));
        }
        if !(1..=MAX_PER_THREAD).contains(&self.per_thread) {
            return Err(GpuError::BadShape(format!(
                "{} seeds per thread must be 1 to {MAX_PER_THREAD}",
                self.per_thread
            )));
        }
        match self.kernel {
            Kernel::Coop if !(1..=MAX_COOP_LIST).contains(&self.list) => {
                Err(GpuError::BadShape(format!(
                    "a coop list of {} entries per thread must be 1 to {MAX_COOP_LIST}",
                    self.list
                )))
            }
            Kernel::Coop => Ok(()),
            _ if self.list != 0 => Err(GpuError::BadShape(format!(
                "only coop takes a list size, not {}",
                self.kernel
            ))),
            _ => Ok(()),
        }
    }
}

impl Shape {
    /// Threads that search one seed together: the whole block for [`Kernel::Coop`], else one.
    pub fn threads_per_seed(&self) -> u32 {
        match self.kernel {
            Kernel::Coop => self.block.max(1),
            _ => 1,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kernel, self.block, self.per_thread)?;
        if self.kernel == Kernel::Coop && self.list != COOP_LIST {
            write!(f, "/{}", self.list)?;
        }
        Ok(())
    }
}

impl FromStr for Shape {
    type Err = GpuError;
    /// `VARIANT`, `VARIANT/BLOCK` or `VARIANT/BLOCK/PER_THREAD`, and for `coop` `.../LIST`; what is left
    /// out is the CUDA default.
    fn from_str(s: &str) -> Result<Shape, GpuError> {
        let mut parts = s.trim().split('/');
        let kernel: Kernel = parts.next().unwrap_or("").parse()?;
        let default = Shape::default_for(Backend::Cuda);
        let mut shape = Shape::new(kernel, default.block, default.per_thread);
        let number = |p: &str| {
            p.trim()
                .parse::<u32>()
                .map_err(|_| GpuError::BadShape(format!("{p:?} in {s:?} is not a whole number")))
        };
        if let Some(b) = parts.next() {
            shape.block = number(b)?;
        }
        if let Some(p) = parts.next() {
            shape.per_thread = number(p)?;
        }
        if kernel == Kernel::Coop {
            if let Some(l) = parts.next() {
                shape.list = number(l)?;
            }
        }
        if parts.next().is_some() {
            return Err(GpuError::BadShape(format!(
                "{s:?}: expected VARIANT/BLOCK/PER_THREAD (coop: .../LIST)"
            )));
        }
        shape.check()?;
        Ok(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coop_block_searches_each_seed_together() {
        let coop: Shape = "coop/128/8".parse().unwrap();
        assert_eq!(coop.threads_per_seed(), 128);
        assert_eq!(coop.to_string(), "coop/128/8");
        assert_eq!(coop.list, COOP_LIST);
        // Its list's size: given, printed back where it is not the default, bounded.
        let small: Shape = "coop/64/8/1".parse().unwrap();
        assert_eq!((small.list, small.to_string().as_str()), (1, "coop/64/8/1"));
        assert_eq!(
            "coop/64/8/8".parse::<Shape>().unwrap().to_string(),
            "coop/64/8"
        );
        assert_eq!("coop/64/8/32".parse::<Shape>().unwrap().list, 32);
        for bad in [
            "coop/64/8/0",
            "coop/64/8/33",
            "coop/64/8/2/1",
            "flat/64/8/2",
        ] {
            assert!(bad.parse::<Shape>().is_err(), "{bad}");
        }
        let mut wrong = Shape::new(Kernel::Flat, 64, 8);
        wrong.list = 1;
        assert!(wrong.check().is_err());
        for other in ["local/128/8", "shared/128/8", "compact/128/8", "flat/128/8"] {
            assert_eq!(other.parse::<Shape>().unwrap().threads_per_seed(), 1);
        }
    }

    #[test]
    fn shapes_parse_and_print_back() {
        for s in [
            "local/256/8",
            "shared/128/16",
            "shared/1024/256",
            "local/32/1",
        ] {
            assert_eq!(s.parse::<Shape>().unwrap().to_string(), s);
        }
        assert_eq!(
            "shared".parse::<Shape>().unwrap().to_string(),
            "shared/256/8"
        );
        assert_eq!(
            "local/64".parse::<Shape>().unwrap().to_string(),
            "local/64/8"
        );
    }

    #[test]
    fn shapes_no_device_can_run_are_refused() {
        for s in [
            "",
            "warp",
            "local/0",
            "local/48",
            "local/2048",
            "local/256/0",
            "local/256/257",
            "local/256/8/1",
            "local/x",
            "shared/128/-1",
        ] {
            assert!(
                matches!(s.parse::<Shape>(), Err(GpuError::BadShape(_))),
                "{s:?}"
            );
        }
    }
}
