//! Completions that a symmetry of the square maps to themselves, counted by a search that places a
//! queen's whole orbit at once: Burnside's count for a symmetric ring without visiting its other
//! completions.
//!
//! A board fixed by a symmetry `h` holds, with each queen, the queen's images under `h`, `h²`, and so
//! on. So the search takes the first empty row, tries each column there, and places the square's whole
//! orbit; a square of the orbit that clashes (a row already holding another column, a forbidden square,
//! an attacked one) rules the column out. Every fixed completion is found once: its queen on that row
//! decides the orbit. The tree is that of a board a fraction of the size (half the rows for a half turn,
//! a quarter for a quarter turn), so it costs little beside the plain search of the same problem, which
//! a kernel does.

use crate::board::{Attacks, PartialBoard};
use crate::kernel::Problem;

/// The completions of `problem` that `h` maps to themselves. `h` maps a square `(row, col)` of the
/// board to its image, and must be one of the 8 symmetries of the square (possibly conjugated by
/// another): its orbits have at most 8 squares. A completion is what the kernel counts: the pre-placed
/// queens, and on every empty row a queen off that row's forbidden columns, none attacking another.
pub fn fixed_completions(problem: &Problem, h: &dyn Fn((u8, u8)) -> (u8, u8)) -> u64 {
    let n = problem.board.n();
    let mut board = Board {
        queens: PartialBoard::empty(n as u32).expect("the size of a valid board"),
        attacks: Attacks::default(),
    };
    // The pre-placed queens stand whatever their rows' forbidden columns (as in the kernel).
    let none = [0u32; 32];
    for (r, c) in problem.board.queens() {
        if !board.place(r, c, &none) {
            return 0;
        }
    }
    // A fixed completion holds their images too.
    for (r, c) in problem.board.queens() {
        if !board.place_orbit((r, c), h, &problem.forbid) {
            return 0;
        }
    }
    board.count(h, &problem.forbid)
}

/// The queens placed so far, and the lines they attack.
#[derive(Clone, Copy)]
struct Board {
    queens: PartialBoard,
    attacks: Attacks,
}

impl Board {
    /// Places a queen on `(r, c)` unless it clashes: true if it stands there now (or stood already).
    fn place(&mut self, r: u8, c: u8, forbid: &[u32; 32]) -> bool {
        let n = self.queens.n();
        if r >= n || c >= n {
            return false;
        }
        if let Some(here) = self.queens.col(r) {
            return here == c;
        }
        if forbid[r as usize] & 1 << c != 0 || !self.attacks.allows(r, c) {
            return false;
        }
        self.queens.set_unchecked(r, c);
        self.attacks = self.attacks.with(r, c);
        true
    }

    /// Places `square` and its images under `h` until the orbit closes: false on the first clash, or if
    /// it does not close within 8 steps (no symmetry of the square).
    fn place_orbit(
        &mut self,
        square: (u8, u8),
        h: &dyn Fn((u8, u8)) -> (u8, u8),
        forbid: &[u32; 32],
    ) -> bool {
        let mut at = square;
        for _ in 0..8 {
            if !self.place(at.0, at.1, forbid) {
                return false;
            }
            at = h(at);
            if at == square {
                return true;
            }
        }
        false
    }

    /// The fixed completions of this board.
    fn count(&self, h: &dyn Fn((u8, u8)) -> (u8, u8), forbid: &[u32; 32]) -> u64 {
        let Some(r) = self.queens.empty_rows().next() else {
            return 1;
        };
        // Every column is tried: `place` refuses the attacked and forbidden ones (the tree is small).
        let mut found = 0;
        for c in 0..self.queens.n() {
            let mut next = *self;
            if next.place_orbit((r, c), h, forbid) {
                found += next.count(h, forbid);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::completions;
    use crate::symmetry::Symmetry;

    /// Against every completion checked one by one: for each symmetry, on problems with a few queens
    /// and forbidden squares, N = 1 to 11.
    #[test]
    fn the_orbit_search_finds_exactly_the_fixed_completions() {
        let mut fixed_seen = [0u64; 8];
        for n in 1u8..=11 {
            let m = n - 1;
            // Problems: the empty board; one queen on the top row; a queen there and its half-turn
            // image; with and without forbidden squares.
            let mut problems = vec![Problem::new(PartialBoard::empty(n as u32).unwrap())];
            for c in 0..n {
                let mut one = PartialBoard::empty(n as u32).unwrap();
                one.try_place(0, c as u32).unwrap();
                problems.push(Problem::new(one));
                let mut two = one;
                if two.try_place(m as u32, (m - c) as u32).is_ok() {
                    // A column forbidden on every other row or so, a different one on each.
                    let mut forbid = [0u32; 32];
                    for (r, f) in forbid.iter_mut().enumerate().take(n as usize) {
                        if !(r + c as usize).is_multiple_of(3) {
                            *f = 1 << ((r * 5 + c as usize) % n as usize);
                        }
                    }
                    problems.push(Problem::new(two));
                    problems.push(Problem { board: two, forbid });
                    // The pre-placed queens' own squares forbidden too: they stand all the same.
                    forbid[0] |= 1 << c;
                    forbid[m as usize] |= 1 << (m - c);
                    problems.push(Problem { board: two, forbid });
                }
            }
            for p in &problems {
                for g in Symmetry::ALL {
                    let h = |s: (u8, u8)| g.apply(n, s);
                    let mut expected = 0;
                    completions(p, &mut |b| {
                        expected += u64::from(g.apply_board(b) == *b);
                    });
                    assert_eq!(fixed_completions(p, &h), expected, "N = {n}, {g:?}, {p:?}");
                    fixed_seen[g.index()] += expected;
                }
            }
        }
        // The cases that matter were met: boards fixed by each rotation.
        for g in [Symmetry::Rot90, Symmetry::Rot180, Symmetry::Rot270] {
            assert!(fixed_seen[g.index()] > 0, "no board fixed by {g:?}");
        }
    }

    /// Large boards, where the diagonals' bits reach 62 and a row's mask is all 32 bits: a solution
    /// of N = 30 that a half turn maps to itself, and one of N = 32, each with six middle rows left
    /// empty, against every completion checked one by one.
    #[test]
    fn the_orbit_search_holds_on_boards_of_30_and_32() {
        // N = 30: row i holds column 2i + 1, row 15 + i column 2i (a half turn maps each half to the
        // other). N = 32 (32 mod 6 = 2): the even columns, then the odd ones in the order 3, 1, 7, 9,
        // ..., 31, 5 (counted from 1).
        let thirty: Vec<u8> = (0..15)
            .map(|i| 2 * i + 1)
            .chain((0..15).map(|i| 2 * i))
            .collect();
        let odd: Vec<u8> = [3, 1]
            .into_iter()
            .chain((7..=31).step_by(2))
            .chain([5])
            .collect();
        let thirty_two: Vec<u8> = (1..=16).map(|k| 2 * k).chain(odd).map(|c| c - 1).collect();
        let mut fixed_by_half_turn = 0;
        for cols in [thirty, thirty_two] {
            let n = cols.len() as u8;
            let mut board = PartialBoard::empty(n as u32).unwrap();
            for (r, &c) in cols.iter().enumerate() {
                board.try_place(r as u32, c as u32).expect("a solution");
            }
            let mut open = PartialBoard::empty(n as u32).unwrap();
            for (r, &c) in cols.iter().enumerate() {
                if !(n / 2 - 3..n / 2 + 3).contains(&(r as u8)) {
                    open.try_place(r as u32, c as u32).unwrap();
                }
            }
            let p = Problem::new(open);
            for g in Symmetry::ALL {
                let mut expected = 0;
                completions(&p, &mut |b| {
                    expected += u64::from(g.apply_board(b) == *b);
                });
                assert_eq!(
                    fixed_completions(&p, &|s| g.apply(n, s)),
                    expected,
                    "N = {n}, {g:?}"
                );
                if g == Symmetry::Rot180 {
                    fixed_by_half_turn += expected;
                }
            }
        }
        assert!(
            fixed_by_half_turn > 0,
            "N = 30's solution is fixed by a half turn"
        );
    }

    /// A square off the board is never placed: a map that sends each queen to another row and a
    /// column past the board's edge fixes no completion.
    #[test]
    fn a_square_off_the_board_is_never_placed() {
        let n = 8u8;
        let p = Problem::new(PartialBoard::empty(n as u32).unwrap());
        // (r, c) and (7 - r, c + 8) swap: rows in range, columns past the edge.
        let off = |(r, c): (u8, u8)| {
            if c < n {
                (n - 1 - r, c + n)
            } else {
                (n - 1 - r, c - n)
            }
        };
        assert_eq!(fixed_completions(&p, &off), 0);
        // Rows past the edge, columns in range.
        let below = |(r, c): (u8, u8)| {
            if r < n {
                (r + n, (c + 3) % n)
            } else {
                (r - n, (c + 5) % n)
            }
        };
        assert_eq!(fixed_completions(&p, &below), 0);
    }

    /// A map whose orbits do not close within 8 steps is no symmetry of the square: such an orbit is
    /// never placed. The map cycles the 9 queens of a solution of N = 9 and fixes every other square, so
    /// without that bound it would fix the solution itself.
    #[test]
    fn an_orbit_longer_than_8_squares_is_never_placed() {
        let n = 9u8;
        let p = Problem::new(PartialBoard::empty(n as u32).unwrap());
        let mut solutions = Vec::new();
        completions(&p, &mut |b| solutions.push(*b));
        let cycle: Vec<(u8, u8)> = solutions[0].queens().collect();
        assert_eq!(cycle.len(), 9);
        let h = |s: (u8, u8)| match cycle.iter().position(|&q| q == s) {
            Some(i) => cycle[(i + 1) % cycle.len()],
            None => s,
        };
        // Fixed: the solutions with none of the cycle's squares (each square its own orbit).
        let avoiding = solutions
            .iter()
            .filter(|b| b.queens().all(|q| !cycle.contains(&q)))
            .count() as u64;
        assert!(avoiding < solutions.len() as u64);
        assert_eq!(fixed_completions(&p, &h), avoiding);
        // The identity fixes every completion: the 92 solutions of N = 8.
        let eight = Problem::new(PartialBoard::empty(8).unwrap());
        assert_eq!(fixed_completions(&eight, &|s| s), 92);
    }
}
