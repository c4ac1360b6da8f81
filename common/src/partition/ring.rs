//! The `d4` partition's pre-placement: one queen on each outer line of the board (the outermost ring),
//! one placement per class under the 8 symmetries, weighted by the size of its class.
//!
//! A side is described in its own clockwise frame by `a` in `0..N`: north is row 0 read left to right,
//! east is column N-1 read top to bottom, south is row N-1 read right to left, west is column 0 read
//! bottom to top. A placement is `t = (west, north, east, south)`; the rotations are the cyclic shifts
//! of `t`, and a placement is kept when it is the lexicographically smallest of its 8 images.

use crate::board::{attacks, PartialBoard};
use crate::symmetry::{Symmetry, SymmetrySet};

/// A canonical ring placement: a sub-problem of the `d4` partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// The side positions `(west, north, east, south)`.
    pub t: [u8; 4],
    /// The ring's queens (3 or 4 of them; a corner queen sits on two sides).
    pub board: PartialBoard,
    /// The symmetries that map the placement to itself.
    pub stabiliser: SymmetrySet,
}

impl Ring {
    /// Size of the placement's class: `8 / |stabiliser|`.
    pub fn weight(&self) -> u8 {
        8 / self.stabiliser.len() as u8
    }
}

/// The square of side `side` (0 = west, 1 = north, 2 = east, 3 = south) at position `a`.
pub fn side_square(n: u8, side: usize, a: u8) -> (u8, u8) {
    let m = n - 1;
    match side {
        0 => (m - a, 0),
        1 => (0, a),
        2 => (a, m),
        _ => (m, m - a),
    }
}

/// The ring tuple of a board holding exactly one queen on each outer line.
pub fn ring_tuple(board: &PartialBoard) -> Option<[u8; 4]> {
    let n = board.n();
    let m = n - 1;
    let on = |pred: &dyn Fn(u8, u8) -> bool| {
        let mut it = board.queens().filter(|&(r, c)| pred(r, c));
        let first = it.next();
        first.filter(|_| it.next().is_none())
    };
    let (wr, _) = on(&|_, c| c == 0)?;
    let (_, nc) = on(&|r, _| r == 0)?;
    let (er, _) = on(&|_, c| c == m)?;
    let (_, sc) = on(&|r, _| r == m)?;
    Some([m - wr, nc, er, m - sc])
}

/// The ring board of tuple `t`, or `None` when its queens attack each other or its corners disagree.
pub fn ring_board(n: u8, t: [u8; 4]) -> Option<PartialBoard> {
    let m = n - 1;
    // A side whose queen sits at the end of its line shares that corner with the next side clockwise.
    for side in 0..4 {
        let next = (side + 1) % 4;
        if (t[side] == m) != (t[next] == 0) {
            return None;
        }
    }
    let mut board = PartialBoard::empty(n as u32).ok()?;
    let squares: Vec<(u8, u8)> = (0..4).map(|s| side_square(n, s, t[s])).collect();
    for (i, &a) in squares.iter().enumerate() {
        if squares[..i].iter().any(|&b| attacks(a, b)) {
            return None;
        }
        board.set_unchecked(a.0, a.1);
    }
    Some(board)
}

/// The 8 images of `t` under the symmetries of the square: the 4 rotations are the cyclic shifts of `t`,
/// the 4 reflections the cyclic shifts of `(c(w), c(s), c(e), c(n))` with `c(a) = N - 1 - a`.
pub fn images(n: u8, t: [u8; 4]) -> [[u8; 4]; 8] {
    let c = |a: u8| n - 1 - a;
    let r = [c(t[0]), c(t[3]), c(t[2]), c(t[1])];
    let mut out = [[0; 4]; 8];
    for k in 0..4 {
        out[k] = [t[k], t[(k + 1) % 4], t[(k + 2) % 4], t[(k + 3) % 4]];
        out[4 + k] = [r[k], r[(k + 1) % 4], r[(k + 2) % 4], r[(k + 3) % 4]];
    }
    out
}

/// The canonical ring placement of tuple `t`, or `None` if `t` is invalid or not the smallest of its class.
pub fn canonical(n: u8, t: [u8; 4]) -> Option<Ring> {
    let images = images(n, t);
    if images.iter().any(|image| *image < t) {
        return None;
    }
    let board = ring_board(n, t)?;
    let mut stabiliser = SymmetrySet::TRIVIAL;
    if images[1..].contains(&t) {
        // Rare: find which symmetries of the board fix it.
        stabiliser = SymmetrySet::default();
        for g in Symmetry::ALL {
            if g.apply_board(&board) == board {
                stabiliser.insert(g);
            }
        }
    }
    Some(Ring {
        t,
        board,
        stabiliser,
    })
}

/// All canonical ring placements of an `n` x `n` board, in lexicographic order of `t`.
pub fn rings(n: u8) -> impl Iterator<Item = Ring> {
    let m = n - 1;
    // The first side is the smallest of all 8 images' first sides, so it lies in the left half.
    (0..=m / 2).flat_map(move |w| {
        (0..=m).flat_map(move |a| {
            (0..=m).flat_map(move |b| (0..=m).filter_map(move |c| canonical(n, [w, a, b, c])))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tuple formula for the 8 images agrees with transforming the ring's queens.
    #[test]
    fn images_formula_matches_board_symmetries() {
        for n in [1u8, 4, 5, 8, 9] {
            let m = n - 1;
            for i in 0..(n as usize).pow(4) {
                let p = n as usize;
                let t = [
                    (i / (p * p * p)) as u8,
                    (i / (p * p) % p) as u8,
                    (i / p % p) as u8,
                    (i % p) as u8,
                ];
                let Some(board) = ring_board(n, t) else {
                    continue;
                };
                let mut from_boards: Vec<[u8; 4]> = Symmetry::ALL
                    .iter()
                    .map(|g| ring_tuple(&g.apply_board(&board)).unwrap())
                    .collect();
                let mut from_formula = images(n, t).to_vec();
                from_boards.sort();
                from_formula.sort();
                assert_eq!(from_boards, from_formula, "n={n} t={t:?} m={m}");
            }
        }
    }

    /// Summed over classes, the class sizes account for every valid ring placement exactly once.
    #[test]
    fn weights_cover_every_placement() {
        for n in 1u8..=10 {
            let p = n as usize;
            let all = (0..p.pow(4))
                .filter(|&i| {
                    let t = [
                        (i / (p * p * p)) as u8,
                        (i / (p * p) % p) as u8,
                        (i / p % p) as u8,
                        (i % p) as u8,
                    ];
                    ring_board(n, t).is_some()
                })
                .count();
            let weighted: usize = rings(n).map(|r| r.weight() as usize).sum();
            assert_eq!(weighted, all, "n={n}");
        }
    }
}
