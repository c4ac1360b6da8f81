//! The 8 symmetries of the square (the dihedral group D4) acting on squares and partial boards.

use crate::board::PartialBoard;

/// One of the 8 symmetries of the square.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Symmetry {
    /// The identity.
    Identity,
    /// Rotation by 90 degrees clockwise.
    Rot90,
    /// Rotation by 180 degrees.
    Rot180,
    /// Rotation by 270 degrees clockwise.
    Rot270,
    /// Reflection in the vertical axis (left and right swap).
    FlipH,
    /// Reflection in the horizontal axis (top and bottom swap).
    FlipV,
    /// Reflection in the main diagonal (rows and columns swap).
    Transpose,
    /// Reflection in the anti-diagonal.
    AntiTranspose,
}

impl Symmetry {
    /// All 8 symmetries, identity first, then the rotations, then the reflections.
    pub const ALL: [Symmetry; 8] = [
        Symmetry::Identity,
        Symmetry::Rot90,
        Symmetry::Rot180,
        Symmetry::Rot270,
        Symmetry::FlipH,
        Symmetry::FlipV,
        Symmetry::Transpose,
        Symmetry::AntiTranspose,
    ];

    /// Index of this symmetry in [`Symmetry::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Image of square `(row, col)` on a board of size `n`.
    pub fn apply(self, n: u8, (r, c): (u8, u8)) -> (u8, u8) {
        let m = n - 1;
        match self {
            Symmetry::Identity => (r, c),
            Symmetry::Rot90 => (c, m - r),
            Symmetry::Rot180 => (m - r, m - c),
            Symmetry::Rot270 => (m - c, r),
            Symmetry::FlipH => (r, m - c),
            Symmetry::FlipV => (m - r, c),
            Symmetry::Transpose => (c, r),
            Symmetry::AntiTranspose => (m - c, m - r),
        }
    }

    /// Image of a partial board (queens stay non-attacking under any symmetry).
    pub fn apply_board(self, board: &PartialBoard) -> PartialBoard {
        let n = board.n();
        let mut out = PartialBoard::empty(n as u32).expect("same size as a valid board");
        for q in board.queens() {
            let (r, c) = self.apply(n, q);
            out.set_unchecked(r, c);
        }
        out
    }
}

/// A set of symmetries as a bit set over [`Symmetry::index`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SymmetrySet(pub u8);

impl SymmetrySet {
    /// The set holding only the identity.
    pub const TRIVIAL: SymmetrySet = SymmetrySet(1);

    /// Adds a symmetry.
    pub fn insert(&mut self, g: Symmetry) {
        self.0 |= 1 << g.index();
    }

    /// True when `g` is in the set.
    pub fn contains(self, g: Symmetry) -> bool {
        self.0 & (1 << g.index()) != 0
    }

    /// Number of symmetries in the set.
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// True for the empty set (never the stabiliser of a board).
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The symmetries in the set, in [`Symmetry::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Symmetry> {
        Symmetry::ALL.into_iter().filter(move |&g| self.contains(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_laws_hold_on_squares() {
        let n = 7;
        for g in Symmetry::ALL {
            for h in Symmetry::ALL {
                // The composition of two symmetries is a symmetry.
                let composed: Vec<_> = (0..n)
                    .flat_map(|r| (0..n).map(move |c| (r, c)))
                    .map(|s| h.apply(n, g.apply(n, s)))
                    .collect();
                let found = Symmetry::ALL.iter().any(|k| {
                    (0..n)
                        .flat_map(|r| (0..n).map(move |c| (r, c)))
                        .map(|s| k.apply(n, s))
                        .eq(composed.iter().copied())
                });
                assert!(found, "{g:?} then {h:?} is not in the group");
            }
        }
        for (r, c) in [(0, 0), (1, 3), (6, 2)] {
            assert_eq!(
                Symmetry::Rot90.apply(n, Symmetry::Rot270.apply(n, (r, c))),
                (r, c)
            );
            assert_eq!(
                Symmetry::Rot90.apply(n, Symmetry::Rot90.apply(n, (r, c))),
                Symmetry::Rot180.apply(n, (r, c))
            );
            for g in &Symmetry::ALL[4..] {
                assert_eq!(
                    g.apply(n, g.apply(n, (r, c))),
                    (r, c),
                    "{g:?} is an involution"
                );
            }
        }
    }
}

/// Tests written for the mutants `cargo mutants` left alive in this file (issue 42).
#[cfg(test)]
mod mutants_found {
    use super::*;

    #[test]
    fn a_set_knows_its_members_size_and_emptiness() {
        let mut s = SymmetrySet::default();
        assert!(s.is_empty());
        assert_eq!(s.len(), 0);
        s.insert(Symmetry::Rot180);
        s.insert(Symmetry::Transpose);
        assert!(!s.is_empty() && s.len() == 2);
        let members: Vec<Symmetry> = s.iter().collect();
        assert_eq!(members, [Symmetry::Rot180, Symmetry::Transpose]);
        for g in Symmetry::ALL {
            assert_eq!(
                s.contains(g),
                matches!(g, Symmetry::Rot180 | Symmetry::Transpose),
                "{g:?}"
            );
        }
        assert!(
            SymmetrySet::TRIVIAL.contains(Symmetry::Identity) && SymmetrySet::TRIVIAL.len() == 1
        );
    }
}
