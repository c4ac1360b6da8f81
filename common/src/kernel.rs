//! The search kernel: an iterative bitmask depth-first search that counts the completions of partial boards.
//!
//! Rows are searched top to bottom from the first empty row to the last; a pre-filled row in between is a
//! level with one allowed square. Columns and the two diagonal directions are `u32` masks shifted one step
//! per row; queens on rows below the current one become per-row forbidden squares before the search
//! starts. The lowest free square is taken with `x & x.wrapping_neg()`, and the last two rows are settled
//! by mask tests ([`last_two`]) instead of being searched.
//!
//! The loop is branch-free: each step places one queen, and where the search goes next (one level down,
//! or back to the deepest level that still has squares to try, kept as a bit mask of levels) is decided
//! by arithmetic, so the processor never has to guess the shape of the tree and no step is spent only
//! on backing up. Every variant of the architecture is compiled into every build and chosen at run time
//! ([`Variant`], by a short calibration). Two families run that search on vectors:
//!
//! - **Work lists by level** (`kernel/lists.rs`, the fastest on the Zen 4 measured): a vector holds
//!   open nodes of one level, taken from a list per level, and a step places the next queen of each;
//!   sixteen nodes with AVX-512 (`kernel/lists512.rs`), eight with AVX2 (`kernel/lists256.rs`), four
//!   with SSE4.1 (`kernel/lists128.rs`) or NEON (`kernel/lists_neon.rs`).
//! - **A search per lane** (`kernel/feed.rs`, the driver they share): each lane runs a search of its
//!   own at its own level; sixteen with AVX-512 (`kernel/avx512.rs`), eight with AVX2
//!   (`kernel/avx2.rs`), eight in two vectors with SSE4.1 (`kernel/sse41.rs`), four with NEON
//!   (`kernel/neon.rs`).
//!
//! Elsewhere, and in [`run_scalar`], [`LANES`] scalar searches are stepped in turn to give the processor
//! independent work to overlap. No allocation in the loop, no I/O, no error
//! path: problems are validated before they get here.

use crate::board::PartialBoard;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "aarch64", target_endian = "little")
))]
mod feed;
#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "aarch64", target_endian = "little")
))]
mod lists;
#[cfg(target_arch = "x86_64")]
mod lists128;
#[cfg(target_arch = "x86_64")]
mod lists256;
#[cfg(target_arch = "x86_64")]
mod lists512;
#[cfg(all(target_arch = "aarch64", target_endian = "little"))]
mod lists_neon;
#[cfg(all(target_arch = "aarch64", target_endian = "little"))]
mod neon;
pub mod seeds;
#[cfg(target_arch = "x86_64")]
mod sse41;

/// Independent searches the scalar lanes step side by side (see BENCHMARKS.md). [`run_scalar`] writes its
/// round out for five lanes, so changing this means changing that round too (it does not compile otherwise).
pub const LANES: usize = 5;

/// A partial board to complete, with squares the search must not use beyond those the queens attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    /// The pre-placed queens.
    pub board: PartialBoard,
    /// Per row, a mask of columns the search may not use on that row (partition constraints).
    pub forbid: [u32; 32],
}

impl Problem {
    /// A problem with no constraint beyond the board's queens.
    pub fn new(board: PartialBoard) -> Problem {
        Problem {
            board,
            forbid: [0; 32],
        }
    }

    /// The problems that place one more queen on the first empty row, in column order: together they
    /// have exactly the completions of `self`. A complete board is returned as it is.
    pub fn split(&self) -> Vec<Problem> {
        let Some(row) = self.board.empty_rows().next() else {
            return vec![*self];
        };
        (0..self.board.n())
            .filter(|&c| self.forbid[row as usize] & (1 << c) == 0)
            .filter_map(|c| {
                let mut board = self.board;
                board.try_place(row as u32, c as u32).ok()?;
                Some(Problem {
                    board,
                    forbid: self.forbid,
                })
            })
            .collect()
    }
}

impl From<PartialBoard> for Problem {
    fn from(board: PartialBoard) -> Problem {
        Problem::new(board)
    }
}

/// One search of a batch and the weight of each of its completions.
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    pub problem: Problem,
    pub weight: u64,
}

/// What a batch of searches produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Completions found.
    pub count: u64,
    /// Sum of the completions' weights.
    pub weighted: u64,
    /// Queens placed by the searches (pre-filled rows inside the searched range included), leaves included.
    pub nodes: u64,
}

impl Totals {
    /// Adds one search of a unit of weight `weight`.
    pub fn add(&mut self, s: Search, weight: u64) {
        self.add_completions(s.count, weight);
        self.nodes = self.nodes.saturating_add(s.nodes);
    }

    /// Adds `count` completions of a unit of weight `weight`. The sums saturate at `u64::MAX`
    /// ([`Totals::saturated`]), never wrap.
    pub fn add_completions(&mut self, count: u64, weight: u64) {
        self.count = self.count.saturating_add(count);
        self.weighted = self.weighted.saturating_add(count.saturating_mul(weight));
    }

    /// Whether a sum reached `u64::MAX`, where it saturates: its true value is unknown.
    pub fn saturated(&self) -> bool {
        [self.count, self.weighted, self.nodes].contains(&u64::MAX)
    }
}

/// What one unweighted search produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Search {
    /// Number of completions.
    pub count: u64,
    /// Queens placed by the search.
    pub nodes: u64,
}

/// Counts the completions of a problem and the nodes of its search tree.
pub fn count(problem: &Problem) -> Search {
    let (units, placed) = units(problem, 1, 1);
    let t = run(units.into_iter());
    Search {
        count: t.count,
        nodes: t.nodes.saturating_add(placed),
    }
}

/// A problem as kernel units of weight `weight`, split `rows` rows deep (on its first empty rows; a
/// complete board stays as it is), and the queens those splits placed: they are nodes of the search tree
/// too.
pub fn units(problem: &Problem, weight: u64, rows: u8) -> (Vec<Unit>, u64) {
    let mut problems = vec![*problem];
    let mut placed = 0;
    for _ in 0..rows {
        let mut next = Vec::new();
        for p in &problems {
            let split = p.split();
            if p.board.empty_rows().next().is_some() {
                placed += split.len() as u64;
            }
            next.extend(split);
        }
        problems = next;
    }
    let units = problems
        .into_iter()
        .map(|problem| Unit { problem, weight })
        .collect();
    (units, placed)
}

/// Calls `visit` with every completion of a problem, and returns the count. A plain recursive bitmask
/// search for the few callers that need the boards (symmetric sub-problems, tests), not the batch path.
pub fn completions(problem: &Problem, visit: &mut dyn FnMut(&PartialBoard)) -> Search {
    let board = problem.board;
    let n = board.n();
    let full = full_mask(n);
    let (Some(first), Some(s)) = (board.empty_rows().next(), compile(problem, full)) else {
        visit(&board);
        return Search { count: 1, nodes: 0 };
    };
    struct Walk<'a> {
        s: &'a Setup,
        full: u32,
        first: u8,
        board: PartialBoard,
        visit: &'a mut dyn FnMut(&PartialBoard),
        nodes: u64,
    }
    fn go(w: &mut Walk<'_>, v: usize, c: u32, l: u32, r: u32) -> u64 {
        let mut f = !(c | l | r | w.s.forbid[v]) & w.full;
        let mut found = 0;
        while f != 0 {
            let bit = f & f.wrapping_neg();
            f ^= bit;
            w.nodes += 1;
            w.board
                .set_unchecked(w.first + v as u8, bit.trailing_zeros() as u8);
            if v + 1 == w.s.depth {
                (w.visit)(&w.board);
                found += 1;
            } else {
                found += go(w, v + 1, c | bit, (l | bit) << 1, (r | bit) >> 1);
            }
        }
        found
    }
    let mut walk = Walk {
        s: &s,
        full,
        first,
        board,
        visit,
        nodes: 0,
    };
    let count = go(&mut walk, 0, s.c0, s.l0, s.r0);
    Search {
        count,
        nodes: walk.nodes,
    }
}

/// A unit translated into masks.
struct Setup {
    /// Levels, one per row from the first empty row to the last.
    depth: usize,
    c0: u32,
    l0: u32,
    r0: u32,
    forbid: [u32; 33],
}

/// The masks of a unit; `None` for a complete board.
fn compile(p: &Problem, full: u32) -> Option<Setup> {
    let board = &p.board;
    let (first, last) = (board.empty_rows().next()?, board.empty_rows().last()?);
    let mut s = Setup {
        depth: (last - first + 1) as usize,
        c0: 0,
        l0: 0,
        r0: 0,
        forbid: [0; 33],
    };
    for i in 0..s.depth {
        s.forbid[i] = p.forbid[first as usize + i] & full;
    }
    for (qr, qc) in board.queens() {
        let (qc, d) = (qc as u32, qr.abs_diff(first) as u32);
        if qr < first {
            s.c0 |= 1 << qc;
            s.l0 |= 1u32.checked_shl(qc + d).unwrap_or(0);
            s.r0 |= if qc >= d { 1 << (qc - d) } else { 0 };
            continue;
        }
        for i in 0..s.depth {
            let d = (first + i as u8).abs_diff(qr) as u32;
            let diag =
                1u32.checked_shl(qc + d).unwrap_or(0) | if qc >= d { 1 << (qc - d) } else { 0 };
            s.forbid[i] |= (1 << qc | diag) & full;
        }
    }
    // A pre-filled row inside the searched range is a level that allows its queen's square only.
    for (qr, qc) in board.queens().filter(|&(r, _)| r > first && r < last) {
        s.forbid[(qr - first) as usize] = full & !(1 << qc);
    }
    Some(s)
}

/// The last two rows of a search, settled without stepping: `f` is the free squares of the second-to-last
/// level (its masks `c`, `l`, `r`), `below` the forbidden squares of the last. Returns the completions
/// and the queens placed on the two rows.
///
/// The two rows have two free columns between them (every other row holds a queen), so `f` has at most
/// two squares; each is a completion when the last row keeps a square once it is placed.
#[inline(always)]
fn last_two(c: u32, l: u32, r: u32, f: u32, below: u32, full: u32) -> (u64, u64) {
    let g = !(c | l << 1 | r >> 1 | below) & full;
    let b1 = f & f.wrapping_neg();
    let b2 = f ^ b1;
    let fits = |b: u32| ((b != 0) & (g & !(b | b << 1 | b >> 1) != 0)) as u64;
    let leaves = fits(b1) + fits(b2);
    (leaves, f.count_ones() as u64 + leaves)
}

/// The stacks of `LANES` searches, one array per field so that each step touches few cache lines.
struct Lanes {
    full: u32,
    /// The third-to-last level of each lane's search: its steps settle the two rows below.
    tail: [usize; LANES],
    weight: [u64; LANES],
    c: [[u32; 34]; LANES],
    l: [[u32; 34]; LANES],
    r: [[u32; 34]; LANES],
    f: [[u32; 34]; LANES],
    forbid: [[u32; 34]; LANES],
}

impl Lanes {
    /// Loads a unit of at least three levels whose first level has free squares `f0`.
    fn load(&mut self, k: usize, s: &Setup, f0: u32, weight: u64) {
        self.tail[k] = s.depth - 3;
        self.weight[k] = weight;
        self.c[k][0] = s.c0;
        self.l[k][0] = s.l0;
        self.r[k][0] = s.r0;
        self.f[k][0] = f0;
        self.forbid[k][..33].copy_from_slice(&s.forbid);
    }

    /// One step of lane `k`: place the next queen of its current level and descend, or settle the two
    /// rows below when the level is the tail. `mask` holds a bit for every level with squares left to
    /// try; the current level is its highest bit, so a step never backs up on its own: a level that runs
    /// out drops from the mask and the next step continues at the deepest level that has squares left.
    /// The search is over when the mask is empty. The mask and counters live in the caller's locals so
    /// that they stay in registers.
    #[inline(always)]
    fn step(&mut self, k: usize, mask: &mut u32, count: &mut u64, nodes: &mut u64) {
        // Levels stay below 31 (boards have at most 32 rows); the masks only spare bounds checks.
        let v = (31 - mask.leading_zeros()) as usize & 31;
        let f = self.f[k][v];
        let bit = f & f.wrapping_neg();
        let rest = f ^ bit;
        self.f[k][v] = rest;
        let c = self.c[k][v] | bit;
        let l = (self.l[k][v] | bit) << 1;
        let r = (self.r[k][v] | bit) >> 1;
        let nf = !(c | l | r | self.forbid[k][v + 1]) & self.full;
        let tail = v == self.tail[k];
        debug_assert!(!tail || nf.count_ones() <= 2, "two free columns at most");
        let (leaves, placed) = last_two(c, l, r, nf, self.forbid[k][v + 2], self.full);
        let on_tail = (tail as u64).wrapping_neg();
        *count += leaves & on_tail;
        *nodes += 1 + (placed & on_tail);
        self.c[k][v + 1] = c;
        self.l[k][v + 1] = l;
        self.r[k][v + 1] = r;
        self.f[k][v + 1] = nf;
        let descend = (!tail & (nf != 0)) as u32;
        *mask = (*mask & !(((rest == 0) as u32) << v)) | descend << ((v + 1) & 31);
    }
}

/// A unit that needs a search of at least three levels, ready for a lane.
struct Ready {
    setup: Setup,
    /// The free squares of its first level (not empty).
    f0: u32,
    weight: u64,
}

/// Takes units until one needs a lane; those of one or two rows, complete boards and units whose first
/// row is blocked are settled into `t` on the way. `None` when the units are over.
fn next_search(
    units: &mut impl Iterator<Item = Unit>,
    n: u8,
    full: u32,
    t: &mut Totals,
) -> Option<Ready> {
    for u in units {
        // A unit of another size would be searched with this size's masks: a wrong count, silently.
        // No caller mixes sizes (every batch is one job's, or `seeds` checks); a slip stops here.
        assert_eq!(u.problem.board.n(), n, "one board size per batch");
        match prepare(&u, full) {
            Ok(ready) => return Some(ready),
            Err(done) => t.add(done, u.weight),
        }
    }
    None
}

/// A unit ready for a search of at least three levels, or what it produced when it needs none (one or two
/// rows, a complete board, a first row with no free square).
fn prepare(u: &Unit, full: u32) -> std::result::Result<Ready, Search> {
    match compile(&u.problem, full) {
        Some(setup) => {
            let f0 = !(setup.c0 | setup.l0 | setup.r0 | setup.forbid[0]) & full;
            if setup.depth >= 3 && f0 != 0 {
                return Ok(Ready {
                    setup,
                    f0,
                    weight: u.weight,
                });
            }
            Err(match setup.depth {
                // One empty row: its free squares are the completions (and the nodes).
                1 => Search {
                    count: f0.count_ones() as u64,
                    nodes: f0.count_ones() as u64,
                },
                2 => {
                    let (count, nodes) =
                        last_two(setup.c0, setup.l0, setup.r0, f0, setup.forbid[1], full);
                    Search { count, nodes }
                }
                _ => Search::default(),
            })
        }
        None => Err(Search { count: 1, nodes: 0 }),
    }
}

/// The mask of a row of `n` squares.
fn full_mask(n: u8) -> u32 {
    if n == 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// One way to run the kernel. Every variant is named in every build, and each architecture compiles its
/// own (x86-64: the SSE4.1, AVX2 and AVX-512 ones; little-endian aarch64: NEON; all: the scalar lanes); which
/// ones a machine can run is found at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// [`LANES`] scalar searches stepped in turn: any CPU.
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

/// [`run`] on the scalar lanes, whatever the build: the reference the vector kernel is tested against.
/// On x86-64 with POPCNT (every CPU since 2008; the build itself targets the first x86-64 CPUs, which
/// count bits with a dozen operations) the same loop compiled for it runs.
pub fn run_scalar<I: Iterator<Item = Unit>>(units: I) -> Totals {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked just above).
        return unsafe { scalar_popcnt(units) };
    }
    scalar(units)
}

/// [`scalar`] compiled with POPCNT.
///
/// # Safety
///
/// The CPU must support POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn scalar_popcnt<I: Iterator<Item = Unit>>(units: I) -> Totals {
    scalar(units)
}

/// The scalar lanes' loop (see [`run_scalar`]).
#[inline(always)]
fn scalar<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut t = Totals::default();
    let mut units = units.peekable();
    let Some(first) = units.peek() else { return t };
    let n = first.problem.board.n();
    let full = full_mask(n);
    let mut lanes = Box::new(Lanes {
        full,
        tail: [0; LANES],
        weight: [0; LANES],
        c: [[0; 34]; LANES],
        l: [[0; 34]; LANES],
        r: [[0; 34]; LANES],
        f: [[0; 34]; LANES],
        forbid: [[0; 34]; LANES],
    });
    let (mut mask, mut count, mut nodes) = ([0u32; LANES], [0u64; LANES], 0u64);
    // Loads the next unit that needs a search into lane `k` and returns its level mask; 0 when none is
    // left. Units of one or two rows, and units whose first row is blocked, are settled here.
    let mut refill = |lanes: &mut Lanes, k: usize, t: &mut Totals| -> u32 {
        match next_search(&mut units, n, full, t) {
            Some(ready) => {
                lanes.load(k, &ready.setup, ready.f0, ready.weight);
                // The search starts at level 0, which has squares to try.
                1
            }
            None => 0,
        }
    };
    let mut live = 0;
    for (k, m) in mask.iter_mut().enumerate() {
        *m = refill(&mut lanes, k, &mut t);
        live += (*m != 0) as usize;
    }
    let harvest = |lanes: &Lanes, k: usize, count: &mut u64, t: &mut Totals| {
        t.add_completions(*count, lanes.weight[k]);
        *count = 0;
    };
    // All lanes busy: step them in turn (an unrolled round over locals, so that the masks and counters
    // stay in registers), then refill the lanes that are over.
    while live == LANES {
        let [mut m0, mut m1, mut m2, mut m3, mut m4] = mask;
        let [mut n0, mut n1, mut n2, mut n3, mut n4] = count;
        loop {
            lanes.step(0, &mut m0, &mut n0, &mut nodes);
            lanes.step(1, &mut m1, &mut n1, &mut nodes);
            lanes.step(2, &mut m2, &mut n2, &mut nodes);
            lanes.step(3, &mut m3, &mut n3, &mut nodes);
            lanes.step(4, &mut m4, &mut n4, &mut nodes);
            if (m0 == 0) | (m1 == 0) | (m2 == 0) | (m3 == 0) | (m4 == 0) {
                break;
            }
        }
        mask = [m0, m1, m2, m3, m4];
        count = [n0, n1, n2, n3, n4];
        for k in 0..LANES {
            if mask[k] == 0 {
                harvest(&lanes, k, &mut count[k], &mut t);
                mask[k] = refill(&mut lanes, k, &mut t);
                live -= (mask[k] == 0) as usize;
            }
        }
    }
    // The tail: fewer units than lanes are left; finish each lane on its own.
    for k in 0..LANES {
        while mask[k] != 0 {
            lanes.step(k, &mut mask[k], &mut count[k], &mut nodes);
        }
        harvest(&lanes, k, &mut count[k], &mut t);
    }
    t.nodes = t.nodes.saturating_add(nodes);
    t
}

#[cfg(test)]
mod variant_tests {
    use super::Variant;

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

    /// The scalar lanes as the build compiles them (no POPCNT on x86-64), beside [`super::run_scalar`]
    /// (which takes the POPCNT copy where the CPU has it) and the plain recursive walk: one source, two
    /// compilations, the same totals and nodes.
    #[test]
    fn the_scalar_lanes_agree_with_and_without_popcnt() {
        let board = crate::PartialBoard::empty(10).unwrap();
        let units: Vec<super::Unit> = super::Problem::new(board)
            .split()
            .iter()
            .flat_map(super::Problem::split)
            .enumerate()
            .map(|(i, problem)| super::Unit {
                problem,
                weight: i as u64 % 3 + 1,
            })
            .collect();
        let mut walked = super::Totals::default();
        for u in &units {
            walked.add(super::completions(&u.problem, &mut |_| {}), u.weight);
        }
        assert_eq!(super::scalar(units.iter().copied()), walked);
        assert_eq!(super::run_scalar(units.iter().copied()), walked);
        assert_eq!(walked.count, 724, "N = 10");
    }

    #[test]
    fn calibration_is_quick_and_keeps_the_fastest() {
        let available = Variant::available();
        let start = std::time::Instant::now();
        let (fastest, times) = super::calibrate(&available);
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
