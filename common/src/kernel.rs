//! The search kernel: an iterative bitmask depth-first search that counts the completions of a partial board.
//!
//! The empty rows are searched top to bottom. Columns are a `u32` mask; the two diagonal directions are
//! `u64` windows wide enough that queens of pre-filled rows *below* the current row are in the masks from
//! the start and slide into view as the search descends. The lowest free square is taken with
//! `x & x.wrapping_neg()`, a child is pushed only if its row has a free square, and the last row is settled
//! by a mask test. No allocation, no I/O, no error path: problems are validated before they get here.

use crate::board::PartialBoard;

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
}

impl From<PartialBoard> for Problem {
    fn from(board: PartialBoard) -> Problem {
        Problem::new(board)
    }
}

/// What one search produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Search {
    /// Number of completions.
    pub count: u64,
    /// Queens placed by the search: every node of the search tree below the board, leaves included.
    pub nodes: u64,
}

/// Called at each completion with the search's state.
pub trait Leaf {
    /// Whether the search must record each level's placed column bit (for [`Path`]).
    const NEEDS_PATH: bool;
    /// A completion was found; `path` tells where the search placed its queens.
    fn leaf(&mut self, path: &Path<'_>);
}

/// The queens the search placed for one completion.
pub struct Path<'a> {
    rows: &'a [u8],
    bits: &'a [u32; 32],
    last: u32,
}

impl Path<'_> {
    /// The `(row, column)` of every queen the search placed, in search order.
    pub fn queens(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        let depth = self.rows.len();
        self.rows.iter().enumerate().map(move |(i, &r)| {
            let bit = if i + 1 == depth {
                self.last
            } else {
                self.bits[i]
            };
            (r, bit.trailing_zeros() as u8)
        })
    }

    /// The board completed by this path.
    pub fn complete(&self, board: &PartialBoard) -> PartialBoard {
        let mut full = *board;
        for (r, c) in self.queens() {
            full.set_unchecked(r, c);
        }
        full
    }
}

/// A leaf that only counts.
pub struct CountOnly;

impl Leaf for CountOnly {
    const NEEDS_PATH: bool = false;
    #[inline(always)]
    fn leaf(&mut self, _: &Path<'_>) {}
}

/// Counts the completions of a problem and the nodes of its search tree.
pub fn count(problem: &Problem) -> Search {
    search(problem, &mut CountOnly)
}

/// Searches a problem, calling `leaf` at every completion.
pub fn search<L: Leaf>(problem: &Problem, leaf: &mut L) -> Search {
    let board = &problem.board;
    let n = board.n();
    let full = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    let mut rows = [0u8; 32];
    let mut depth = 0;
    for r in board.empty_rows() {
        rows[depth] = r;
        depth += 1;
    }
    let rows = &rows[..depth];
    if depth == 0 {
        leaf.leaf(&Path {
            rows,
            bits: &[0; 32],
            last: 0,
        });
        return Search { count: 1, nodes: 0 };
    }
    // Diagonal windows as seen from the first empty row: `d1` bit c is column c (bits >= n are queens
    // further right that slide left as rows descend); `d2` bit c + 32 is column c.
    let r0 = rows[0] as u32;
    let (mut cols, mut d1, mut d2) = (0u32, 0u64, 0u64);
    for (r, c) in board.queens() {
        let (r, c) = (r as u32, c as u32);
        cols |= 1 << c;
        // Shift each diagonal to where it crosses row r0; those that left the board for good are dropped.
        if r > r0 {
            d1 |= 1u64 << (c + (r - r0));
            d2 |= 1u64 << (c + 32 - (r - r0));
        } else {
            if c >= r0 - r {
                d1 |= 1u64 << (c - (r0 - r));
            }
            d2 |= 1u64.checked_shl(c + 32 + (r0 - r)).unwrap_or(0);
        }
    }
    let mut forbid = [0u32; 32];
    let mut gap = [0u8; 32];
    for (i, &r) in rows.iter().enumerate() {
        forbid[i] = problem.forbid[r as usize];
        gap[i] = rows.get(i + 1).map_or(0, |&next| next - r);
    }
    let (count, nodes) = run(rows, full, cols, d1, d2, &forbid, &gap, leaf);
    Search { count, nodes }
}

/// The depth-first search proper over `rows.len() >= 1` levels; returns `(completions, nodes)`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn run<L: Leaf>(
    rows: &[u8],
    full: u32,
    cols0: u32,
    d1_0: u64,
    d2_0: u64,
    forbid: &[u32; 32],
    gap: &[u8; 32],
    leaf: &mut L,
) -> (u64, u64) {
    let free = |lvl: usize, cols: u32, d1: u64, d2: u64| {
        !(cols | d1 as u32 | (d2 >> 32) as u32 | forbid[lvl]) & full
    };
    let depth = rows.len();
    let mut bits = [0u32; 32];
    let f0 = free(0, cols0, d1_0, d2_0);
    if depth == 1 {
        if f0 != 0 {
            leaf.leaf(&Path {
                rows,
                bits: &bits,
                last: f0,
            });
        }
        return (f0.count_ones() as u64, f0.count_ones() as u64);
    }
    let last = depth - 1;
    let mut cols = [0u32; 32];
    let mut d1 = [0u64; 32];
    let mut d2 = [0u64; 32];
    let mut frees = [0u32; 32];
    let (mut count, mut nodes) = (0u64, f0.count_ones() as u64);
    cols[0] = cols0;
    d1[0] = d1_0;
    d2[0] = d2_0;
    frees[0] = f0;
    let mut lvl = 0usize;
    loop {
        let f = frees[lvl];
        if f == 0 {
            if lvl == 0 {
                break;
            }
            lvl -= 1;
            continue;
        }
        let bit = f & f.wrapping_neg();
        frees[lvl] = f ^ bit;
        if L::NEEDS_PATH {
            bits[lvl] = bit;
        }
        let g = gap[lvl];
        let c = cols[lvl] | bit;
        let a = (d1[lvl] | bit as u64) >> g;
        let b = (d2[lvl] | (bit as u64) << 32) << g;
        let nf = free(lvl + 1, c, a, b);
        if nf == 0 {
            continue;
        }
        if lvl + 1 == last {
            // One column is left, so `nf` has a single bit: a completion.
            count += 1;
            leaf.leaf(&Path {
                rows,
                bits: &bits,
                last: nf,
            });
            continue;
        }
        nodes += nf.count_ones() as u64;
        lvl += 1;
        cols[lvl] = c;
        d1[lvl] = a;
        d2[lvl] = b;
        frees[lvl] = nf;
    }
    (count, nodes + count)
}
