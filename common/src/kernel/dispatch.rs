//! Which kernel variant runs: the variants every build names ([`Variant`]), what this CPU runs, the
//! calibration that picks the fastest, the process's choice, and the dispatch to the variant's code.

#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512, lists128, lists256, lists512, sse41};
#[cfg(all(target_arch = "aarch64", target_endian = "little"))]
use super::{lists_neon, neon};
use super::{run_scalar, Problem, Totals, Unit};
use crate::board::PartialBoard;

/// One way to run the kernel. Every variant is named in every build, and each architecture compiles its
/// own (x86-64: the SSE4.1, AVX2 and AVX-512 ones; little-endian aarch64: NEON; all: the scalar lanes); which
/// ones a machine can run is found at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// [`super::LANES`] scalar searches stepped in turn: any CPU.
    Scalar,
    /// Four searches in the lanes of a 128-bit vector: little-endian aarch64 (NEON, part of every
    /// aarch64 CPU).
    Neon,
    /// Four searches in the lanes of a 128-bit vector: x86-64 with SSE4.1 (for CPUs without AVX2: Intel
    /// from Penryn to Ivy Bridge, AMD from Bulldozer to Steamroller).
    Sse41,
    /// Eight searches in the lanes of a 256-bit vector: x86-64 with AVX2, BMI1/2, POPCNT and LZCNT.
    Avx2,
    /// [`Variant::Avx2`] with the forbidden rows below each level kept in the search's stack instead of
    /// a table of their own (named when [`Variant::Avx2`] still used gathers, slow on AMD Zen 1 and 2).
    Avx2NoGather,
    /// Sixteen searches in the lanes of a 512-bit vector: x86-64 with AVX-512 F, BW, VL, DQ and CD,
    /// BMI1/2, POPCNT and LZCNT.
    Avx512,
    /// Four nodes of one level per step, from work lists by level (`kernel/lists.rs`): the features of
    /// [`Variant::Neon`].
    NeonLists,
    /// Four nodes of one level per step, from work lists by level (`kernel/lists.rs`): the features of
    /// [`Variant::Sse41`].
    Sse41Lists,
    /// Eight nodes of one level per step, from work lists by level (`kernel/lists.rs`): the features of
    /// [`Variant::Avx2`].
    Avx2Lists,
    /// Sixteen nodes of one level per step, from work lists by level (`kernel/lists.rs`): the features
    /// of [`Variant::Avx512`].
    Avx512Lists,
}

impl Variant {
    /// Every variant of this build: the scalar lanes, the search-per-lane kernels, then the work-list
    /// kernels, each family from the narrowest vectors to the widest.
    pub const ALL: [Variant; 10] = [
        Variant::Scalar,
        Variant::Neon,
        Variant::Sse41,
        Variant::Avx2NoGather,
        Variant::Avx2,
        Variant::Avx512,
        Variant::NeonLists,
        Variant::Sse41Lists,
        Variant::Avx2Lists,
        Variant::Avx512Lists,
    ];

    /// The name `--kernel` takes.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Scalar => "scalar",
            Variant::Neon => "neon",
            Variant::Sse41 => "sse41",
            Variant::Avx2 => "avx2",
            Variant::Avx2NoGather => "avx2-nogather",
            Variant::Avx512 => "avx512",
            Variant::NeonLists => "neon-lists",
            Variant::Sse41Lists => "sse41-lists",
            Variant::Avx2Lists => "avx2-lists",
            Variant::Avx512Lists => "avx512-lists",
        }
    }

    /// The variant called `name`.
    pub fn parse(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name.trim())
    }

    /// Whether this machine can run it (detected once by the standard library, then cached).
    pub fn supported(self) -> bool {
        match self {
            Variant::Scalar => true,
            // The kernel reads 64-bit pairs as two 32-bit halves, low half first: little-endian only.
            #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
            Variant::Neon | Variant::NeonLists => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(not(all(target_arch = "aarch64", target_endian = "little")))]
            Variant::Neon | Variant::NeonLists => false,
            #[cfg(target_arch = "x86_64")]
            Variant::Sse41 | Variant::Sse41Lists => std::arch::is_x86_feature_detected!("sse4.1"),
            #[cfg(target_arch = "x86_64")]
            Variant::Avx2 | Variant::Avx2NoGather | Variant::Avx2Lists => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("bmi1")
                    && std::arch::is_x86_feature_detected!("bmi2")
                    && std::arch::is_x86_feature_detected!("popcnt")
                    && std::arch::is_x86_feature_detected!("lzcnt")
            }
            #[cfg(target_arch = "x86_64")]
            Variant::Avx512 | Variant::Avx512Lists => {
                // What rustc lets `avx512f` code use besides (it implies AVX2, FMA and F16C), checked
                // too: a hypervisor may hide one of them while it shows AVX-512.
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512cd")
                    && std::arch::is_x86_feature_detected!("bmi1")
                    && std::arch::is_x86_feature_detected!("bmi2")
                    && std::arch::is_x86_feature_detected!("popcnt")
                    && std::arch::is_x86_feature_detected!("lzcnt")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Variant::Sse41
            | Variant::Sse41Lists
            | Variant::Avx2
            | Variant::Avx2NoGather
            | Variant::Avx2Lists
            | Variant::Avx512
            | Variant::Avx512Lists => false,
        }
    }

    /// The variants this machine can run, in the order of [`Variant::ALL`].
    pub fn available() -> Vec<Variant> {
        Variant::ALL.into_iter().filter(|v| v.supported()).collect()
    }

    /// The fastest variant this machine runs: measured once per process by [`calibrate`] where it runs
    /// more than one (which vector width wins depends on the CPU: AVX-512 on one that splits 512-bit
    /// operations in two may not beat AVX2), then kept.
    pub fn best() -> Variant {
        static BEST: std::sync::OnceLock<Variant> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            let available = Variant::available();
            match available.as_slice() {
                [only] => *only,
                _ => calibrate(&available).0,
            }
        })
    }
}

/// Board size of the calibration batch: 0.8 to 3 ms per vector variant on a Zen 4 (release build). A
/// batch of N = 11 split two rows deep (about 90 searches) measured the work-list variants 1.25x faster
/// than `avx512`, where real jobs (hundreds of searches each) run them 1.6x faster, and once in some
/// dozen starts picked `avx512`; N = 12 split three rows deep (some 800 searches) measures 1.5x.
const CALIBRATION_N: u32 = 12;
/// Rounds of the calibration; each variant keeps its fastest.
const CALIBRATION_ROUNDS: usize = 3;

/// Times each of `variants` on a small fixed batch (every search of N = [`CALIBRATION_N`] split three rows
/// deep, many more units than the widest vector has lanes), the variants alternating round by round, and
/// returns the fastest and each one's best time. About 55 ms in all on a Zen 4.
pub fn calibrate(variants: &[Variant]) -> (Variant, Vec<std::time::Duration>) {
    let board = PartialBoard::empty(CALIBRATION_N).expect("a valid board size");
    let batch: Vec<Unit> = Problem::new(board)
        .split()
        .iter()
        .flat_map(Problem::split)
        .flat_map(|p| p.split())
        .map(|problem| Unit { problem, weight: 1 })
        .collect();
    let mut best = vec![std::time::Duration::MAX; variants.len()];
    for _ in 0..CALIBRATION_ROUNDS {
        for (time, &variant) in best.iter_mut().zip(variants) {
            let start = std::time::Instant::now();
            std::hint::black_box(run_with(variant, batch.iter().copied()));
            *time = (*time).min(start.elapsed());
        }
    }
    let fastest = variants
        .iter()
        .zip(&best)
        .min_by_key(|(_, time)| **time)
        .map_or(Variant::Scalar, |(variant, _)| *variant);
    (fastest, best)
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The variant chosen for this process: 0 until [`choose`] or the first [`chosen`], then 1 + its index
/// in [`Variant::ALL`].
static CHOSEN: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

fn store(variant: Variant) {
    let index = Variant::ALL.iter().position(|v| *v == variant).unwrap_or(0);
    CHOSEN.store(index as u8 + 1, std::sync::atomic::Ordering::Relaxed);
}

/// Makes `variant` the one [`run`] uses in this process (`--kernel`), if the machine runs it.
pub fn choose(variant: Variant) -> Result<(), crate::Error> {
    if !variant.supported() {
        let have: Vec<&str> = Variant::available().iter().map(|v| v.name()).collect();
        return Err(crate::Error::InvalidSetting(format!(
            "kernel {variant} is not supported by this CPU (it runs: {})",
            have.join(", ")
        )));
    }
    store(variant);
    Ok(())
}

/// The variant [`run`] uses: the one chosen, else the best this machine runs ([`Variant::best`], measured
/// on the first call, then kept).
pub fn chosen() -> Variant {
    match CHOSEN.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {
            let best = Variant::best();
            store(best);
            best
        }
        k => Variant::ALL[(k as usize - 1).min(Variant::ALL.len() - 1)],
    }
}

/// Searches every unit (all of the same board size) and sums what they produced, with the [`chosen`]
/// variant.
///
/// # Panics
///
/// If the units are not all of one board size (a caller's slip, never input: a job's units are).
pub fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    run_with(chosen(), units)
}

/// [`run`] with a given variant; one the machine cannot run falls back to the scalar lanes.
pub fn run_with<I: Iterator<Item = Unit>>(variant: Variant, units: I) -> Totals {
    match variant {
        #[cfg(target_arch = "x86_64")]
        Variant::Sse41 if variant.supported() => {
            // SAFETY: the CPU has SSE4.1 (checked just above).
            unsafe { sse41::run(units) }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Avx2 if variant.supported() => {
            // SAFETY: the CPU has every feature the vector kernel is compiled for (checked just above).
            unsafe { avx2::run::<true, _>(units) }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Avx2NoGather if variant.supported() => {
            // SAFETY: as for `Avx2`, the same features (checked just above).
            unsafe { avx2::run::<false, _>(units) }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Avx512 if variant.supported() => {
            // SAFETY: the CPU has every feature the AVX-512 kernel is compiled for (checked just above).
            unsafe { avx512::run(units) }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Sse41Lists if variant.supported() => {
            // SAFETY: the CPU has SSE4.1 (checked just above).
            unsafe { lists128::run(units) }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Avx2Lists if variant.supported() => {
            // SAFETY: as for `Avx2`, the same features (checked just above).
            unsafe { lists256::run(units) }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Avx512Lists if variant.supported() => {
            // SAFETY: as for `Avx512`, the same features (checked just above).
            unsafe { lists512::run(units) }
        }
        #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
        Variant::Neon if variant.supported() => {
            // SAFETY: the CPU has NEON (checked just above).
            unsafe { neon::run(units) }
        }
        #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
        Variant::NeonLists if variant.supported() => {
            // SAFETY: the CPU has NEON (checked just above).
            unsafe { lists_neon::run(units) }
        }
        _ => run_scalar(units),
    }
}

#[cfg(test)]
mod variant_tests {
    use crate::kernel::Variant;

    #[test]
    fn names_round_trip_and_the_best_variant_runs_here() {
        for v in Variant::ALL {
            assert_eq!(Variant::parse(v.name()), Some(v));
        }
        assert_eq!(Variant::parse("avx512"), Some(Variant::Avx512));
        assert_eq!(Variant::parse("avx1024"), None);
        assert!(Variant::Scalar.supported());
        assert!(Variant::best().supported());
        assert!(Variant::available().contains(&Variant::best()));
        #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
        {
            assert!(Variant::Neon.supported(), "every aarch64 CPU has NEON");
            assert!(matches!(
                Variant::best(),
                Variant::Scalar | Variant::Neon | Variant::NeonLists
            ));
        }
        #[cfg(not(any(
            target_arch = "x86_64",
            all(target_arch = "aarch64", target_endian = "little")
        )))]
        assert_eq!(Variant::best(), Variant::Scalar);
    }

    /// The scalar lanes as the build compiles them (no POPCNT on x86-64), beside [`crate::kernel::run_scalar`]
    /// (which takes the POPCNT copy where the CPU has it) and the plain recursive walk: one source, two
    /// compilations, the same totals and nodes.
    #[test]
    fn the_scalar_lanes_agree_with_and_without_popcnt() {
        let board = crate::PartialBoard::empty(10).unwrap();
        let units: Vec<crate::kernel::Unit> = crate::kernel::Problem::new(board)
            .split()
            .iter()
            .flat_map(crate::kernel::Problem::split)
            .enumerate()
            .map(|(i, problem)| crate::kernel::Unit {
                problem,
                weight: i as u64 % 3 + 1,
            })
            .collect();
        let mut walked = crate::kernel::Totals::default();
        for u in &units {
            walked.add(
                crate::kernel::completions(&u.problem, &mut |_| {}),
                u.weight,
            );
        }
        assert_eq!(crate::kernel::scalar(units.iter().copied()), walked);
        assert_eq!(crate::kernel::run_scalar(units.iter().copied()), walked);
        assert_eq!(walked.count, 724, "N = 10");
    }

    #[test]
    fn calibration_is_quick_and_keeps_the_fastest() {
        let available = Variant::available();
        let start = std::time::Instant::now();
        let (fastest, times) = crate::kernel::calibrate(&available);
        // About 55 ms on a 2-core Zen 4 (release); the bound leaves room for a loaded machine. Under
        // qemu (`tests/aarch64.rs` sets NQUEENS_EMULATED) time is the emulator's: no bound there.
        if std::env::var_os("NQUEENS_EMULATED").is_none() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(1),
                "{:?}",
                start.elapsed()
            );
        }
        assert!(available.contains(&fastest));
        let fastest_time = times[available.iter().position(|v| *v == fastest).unwrap()];
        assert!(times.iter().all(|t| *t >= fastest_time), "{times:?}");
        assert_eq!(Variant::best(), Variant::best(), "measured once, then kept");
    }
}
