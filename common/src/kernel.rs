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
pub mod balance;
mod dispatch;
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

pub use dispatch::{calibrate, choose, chosen, run, run_with, Variant};

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
