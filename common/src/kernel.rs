//! The search kernel: an iterative bitmask depth-first search that counts the completions of partial boards.
//!
//! Rows are searched top to bottom from the first empty row to the last; a pre-filled row in between is a
//! level with one allowed square. Columns and the two diagonal directions are `u32` masks shifted one step
//! per row; queens on rows below the current one become per-row forbidden squares before the search
//! starts. The lowest free square is taken with `x & x.wrapping_neg()` and the last row is settled by a
//! mask test.
//!
//! The loop is branch-free: each step either places a queen or backs up one level, decided by arithmetic,
//! so the processor never has to guess the shape of the tree. [`LANES`] independent searches are stepped
//! in turn to give it independent work to overlap. No allocation in the loop, no I/O, no error path:
//! problems are validated before they get here.

use crate::board::PartialBoard;

/// Independent searches stepped side by side (see BENCHMARKS.md).
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
    let split = problem.split();
    // The queens the split placed are nodes of the search tree too.
    let placed = if problem.board.empty_rows().next().is_some() {
        split.len() as u64
    } else {
        0
    };
    let t = run(split.into_iter().map(|p| Unit {
        problem: p,
        weight: 1,
    }));
    Search {
        count: t.count,
        nodes: t.nodes + placed,
    }
}

/// Calls `visit` with every completion of a problem, and returns the count. A plain recursive bitmask
/// search for the few callers that need the boards (symmetric sub-problems, tests), not the batch path.
pub fn completions(problem: &Problem, visit: &mut dyn FnMut(&PartialBoard)) -> Search {
    let board = problem.board;
    let n = board.n();
    let full = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
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

/// The stacks of `LANES` searches, one array per field so that each step touches few cache lines.
struct Lanes {
    full: u32,
    /// The second-to-last level of each lane's search.
    end: [usize; LANES],
    weight: [u64; LANES],
    c: [[u32; 33]; LANES],
    l: [[u32; 33]; LANES],
    r: [[u32; 33]; LANES],
    f: [[u32; 33]; LANES],
    forbid: [[u32; 33]; LANES],
}

impl Lanes {
    fn load(&mut self, k: usize, s: &Setup, weight: u64) {
        self.end[k] = s.depth - 2;
        self.weight[k] = weight;
        self.c[k][0] = s.c0;
        self.l[k][0] = s.l0;
        self.r[k][0] = s.r0;
        self.f[k][0] = !(s.c0 | s.l0 | s.r0 | s.forbid[0]) & self.full;
        self.forbid[k] = s.forbid;
    }

    /// One step of lane `k` at level `lvl`: place the next queen of that level, or back up one level.
    /// Returns false when the lane's search is over. The level and counters live in the caller's
    /// locals so that they stay in registers.
    #[inline(always)]
    fn step(&mut self, k: usize, lvl: &mut isize, count: &mut u64, nodes: &mut u64) -> bool {
        // Levels stay below 31 (boards have at most 32 rows); the mask only spares bounds checks.
        let v = *lvl as usize & 31;
        let f = self.f[k][v];
        let bit = f & f.wrapping_neg();
        self.f[k][v] = f ^ bit;
        let c = self.c[k][v] | bit;
        let l = (self.l[k][v] | bit) << 1;
        let r = (self.r[k][v] | bit) >> 1;
        let nf = !(c | l | r | self.forbid[k][v + 1]) & self.full;
        let has = f != 0;
        let end = v == self.end[k];
        // Below the second-to-last level one column is left: `nf` is the completion, if any.
        let leaf = (has & end & (nf != 0)) as u64;
        *count += leaf;
        *nodes += has as u64 + leaf;
        self.c[k][v + 1] = c;
        self.l[k][v + 1] = l;
        self.r[k][v + 1] = r;
        self.f[k][v + 1] = nf;
        *lvl += (has & (nf != 0) & !end) as isize - !has as isize;
        *lvl >= 0
    }
}

/// Searches every unit (all of the same board size) and sums what they produced.
pub fn run<I: Iterator<Item = Unit>>(units: I) -> Totals {
    let mut t = Totals::default();
    let mut units = units.peekable();
    let Some(first) = units.peek() else { return t };
    let n = first.problem.board.n();
    let full = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    let mut lanes = Box::new(Lanes {
        full,
        end: [0; LANES],
        weight: [0; LANES],
        c: [[0; 33]; LANES],
        l: [[0; 33]; LANES],
        r: [[0; 33]; LANES],
        f: [[0; 33]; LANES],
        forbid: [[0; 33]; LANES],
    });
    let (mut lvl, mut count, mut nodes) = ([-1isize; LANES], [0u64; LANES], 0u64);
    // Loads the next unit that needs a search into lane `k`; false when none is left.
    let mut refill = |lanes: &mut Lanes, k: usize, t: &mut Totals| -> bool {
        for u in units.by_ref() {
            debug_assert_eq!(u.problem.board.n(), n, "one board size per batch");
            let done = match compile(&u.problem, full) {
                Some(s) if s.depth >= 2 => {
                    lanes.load(k, &s, u.weight);
                    return true;
                }
                // One empty row: its free squares are the completions (and the nodes).
                Some(s) => {
                    let f = (!(s.c0 | s.l0 | s.r0 | s.forbid[0]) & full).count_ones() as u64;
                    Search { count: f, nodes: f }
                }
                None => Search { count: 1, nodes: 0 },
            };
            t.count += done.count;
            t.weighted += done.count * u.weight;
            t.nodes += done.nodes;
        }
        false
    };
    let mut live = 0;
    for (k, level) in lvl.iter_mut().enumerate() {
        if refill(&mut lanes, k, &mut t) {
            *level = 0;
            live += 1;
        }
    }
    let harvest = |lanes: &Lanes, k: usize, count: &mut u64, t: &mut Totals| {
        t.count += *count;
        t.weighted += *count * lanes.weight[k];
        *count = 0;
    };
    // All lanes busy: step them in turn (a fixed, unrolled round), then refill the lanes that are over.
    while live == LANES {
        let mut all = true;
        for k in 0..LANES {
            all &= lanes.step(k, &mut lvl[k], &mut count[k], &mut nodes);
        }
        if all {
            continue;
        }
        for k in 0..LANES {
            if lvl[k] < 0 {
                harvest(&lanes, k, &mut count[k], &mut t);
                if refill(&mut lanes, k, &mut t) {
                    lvl[k] = 0;
                } else {
                    live -= 1;
                }
            }
        }
    }
    // The tail: fewer units than lanes are left; finish each lane on its own.
    for k in 0..LANES {
        if lvl[k] >= 0 {
            while lanes.step(k, &mut lvl[k], &mut count[k], &mut nodes) {}
            harvest(&lanes, k, &mut count[k], &mut t);
        }
    }
    t.nodes += nodes;
    t
}
