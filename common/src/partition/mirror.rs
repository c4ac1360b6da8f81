//! The `mirror` partition: every placement of the first `depth` rows whose first-row queen lies in the
//! left half (weight 2); for odd N a first-row queen in the middle column needs the second-row queen in
//! the left half (weight 2). One job per prefix.

use crate::board::{attacks, PartialBoard};
use crate::key::JobKey;
use crate::partition::walk::{Advance, Budget, Walk};
use crate::partition::SubProblem;
use crate::symmetry::SymmetrySet;

/// Smallest prefix depth: 2 rows, so that the odd-N middle column can be expressed as a partial board.
pub fn min_depth(n: u8) -> u8 {
    n.min(2)
}

/// Default prefix depth: deep enough for a few hundred jobs at N = 16, a few million at N = 27.
pub fn default_depth(n: u8) -> u8 {
    let d = match n {
        0..=11 => 2,
        12..=19 => 3,
        20..=24 => 4,
        _ => 5,
    };
    d.min(n)
}

/// Weight of a prefix, or 0 if the mirror leaves it out.
pub fn weight(n: u8, cols: &[u8]) -> u8 {
    let half = n / 2;
    match cols {
        [] => 0,
        [_] if n == 1 => 1,
        [c0, ..] if *c0 < half => 2,
        [c0, c1, ..] if n % 2 == 1 && *c0 == half && *c1 < half => 2,
        _ => 0,
    }
}

/// All sub-problems at `depth`, in lexicographic order of their columns, enumerated lazily.
pub fn subproblems(n: u8, depth: u8) -> impl Iterator<Item = SubProblem> {
    subproblems_within(n, depth, Budget::unlimited())
}

/// [`subproblems`], ending early once `budget` is spent.
pub fn subproblems_within(n: u8, depth: u8, budget: Budget) -> impl Iterator<Item = SubProblem> {
    walk(n, depth, budget).filter_map(move |cols| {
        let weight = weight(n, &cols);
        if weight == 0 {
            return None;
        }
        let mut board = PartialBoard::empty(n as u32).expect("checked n");
        for (r, &c) in cols.iter().enumerate() {
            board
                .try_place(r as u32, c as u32)
                .expect("non-attacking prefix");
        }
        Some(SubProblem {
            board,
            weight,
            stabiliser: SymmetrySet::TRIVIAL,
        })
    })
}

/// The prefixes of `depth` rows the mirror may keep, in lexicographic order; those of weight 0 (which
/// only depth 1 can give) are the caller's to skip.
pub fn walk(n: u8, depth: u8, budget: Budget) -> impl Iterator<Item = Vec<u8>> + Advance {
    let step = move |_: &(), cols: &[u8], c: u8| {
        let row = cols.len() as u8;
        if cols
            .iter()
            .enumerate()
            .any(|(r, &q)| attacks((r as u8, q), (row, c)))
        {
            return None;
        }
        // Prune prefixes the mirror leaves out as soon as their first rows decide it.
        if (row == 0 && c > n / 2) || (row == 1 && weight(n, &[cols[0], c]) == 0 && n > 1) {
            return None;
        }
        Some(())
    };
    Walk::within(n, depth, (), step, budget)
}

/// The job key of a prefix board.
pub fn key(board: &PartialBoard, depth: u8) -> JobKey {
    JobKey(
        (0..depth)
            .map(|r| board.col(r).expect("prefix rows are filled"))
            .collect(),
    )
}
