//! Partial boards: queens pre-placed on some rows of an N x N board, at most one per row and column.

use crate::error::{check_n, Error, Result};

/// Marks a row of a [`PartialBoard`] that holds no queen.
pub const EMPTY: u8 = u8::MAX;

/// A set of non-attacking queens on an `n` x `n` board, stored as the column of each row's queen.
///
/// Boards are small `Copy` values (33 bytes) so that partitions can hand out millions of them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartialBoard {
    n: u8,
    cols: [u8; 32],
}

impl std::fmt::Debug for PartialBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PartialBoard(n={}, ", self.n)?;
        for r in 0..self.n {
            match self.col(r) {
                Some(c) => write!(f, "{c}")?,
                None => write!(f, ".")?,
            }
            if r + 1 < self.n {
                write!(f, ",")?;
            }
        }
        write!(f, ")")
    }
}

impl PartialBoard {
    /// An empty board of size `n` (checked to be in range).
    pub fn empty(n: u32) -> Result<Self> {
        let n = check_n(n)?;
        Ok(PartialBoard {
            n,
            cols: [EMPTY; 32],
        })
    }

    /// Builds a board from `(row, col)` queens, rejecting off-board, doubled or attacking queens.
    pub fn from_queens(n: u32, queens: &[(u32, u32)]) -> Result<Self> {
        let mut board = Self::empty(n)?;
        for &(row, col) in queens {
            board.try_place(row, col)?;
        }
        Ok(board)
    }

    /// Places a queen, rejecting it if it is off the board or attacks a queen already there.
    pub fn try_place(&mut self, row: u32, col: u32) -> Result<()> {
        let n = self.n;
        if row >= n as u32 || col >= n as u32 {
            return Err(Error::OffBoard { n, row, col });
        }
        let (row, col) = (row as u8, col as u8);
        if let Some((r, c)) = self.queens().find(|&(r, c)| attacks((r, c), (row, col))) {
            return Err(Error::Attack(r, c, row, col));
        }
        self.cols[row as usize] = col;
        Ok(())
    }

    /// Board size.
    pub fn n(&self) -> u8 {
        self.n
    }

    /// Column of the queen on `row`, if any.
    pub fn col(&self, row: u8) -> Option<u8> {
        match self.cols[row as usize] {
            EMPTY => None,
            c => Some(c),
        }
    }

    /// The queens as `(row, col)`, top to bottom.
    pub fn queens(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        (0..self.n).filter_map(move |r| self.col(r).map(|c| (r, c)))
    }

    /// Number of queens on the board.
    pub fn len(&self) -> usize {
        self.queens().count()
    }

    /// True when no queen is placed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bit mask of the columns that hold a queen.
    pub fn column_mask(&self) -> u32 {
        self.queens().fold(0, |m, (_, c)| m | 1 << c)
    }

    /// Rows without a queen, top to bottom.
    pub fn empty_rows(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.n).filter(move |&r| self.col(r).is_none())
    }

    /// Sets a row's queen without checks; for code that has already validated the placement.
    pub(crate) fn set_unchecked(&mut self, row: u8, col: u8) {
        self.cols[row as usize] = col;
    }
}

/// True when two distinct squares share a row, column or diagonal.
pub fn attacks(a: (u8, u8), b: (u8, u8)) -> bool {
    a != b && (a.0 == b.0 || a.1 == b.1 || a.0.abs_diff(b.0) == a.1.abs_diff(b.1))
}

/// The columns and diagonals attacked by the queens placed so far.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Attacks {
    cols: u32,
    /// Diagonals `row + col`.
    sums: u64,
    /// Diagonals `row - col + 31`.
    differences: u64,
}

impl Attacks {
    /// Whether a queen on `(row, col)` stands off every attacked line.
    pub(crate) fn allows(&self, row: u8, col: u8) -> bool {
        self.cols & (1 << col) == 0
            && self.sums & (1 << (row + col)) == 0
            && self.differences & (1 << (row + 31 - col)) == 0
    }

    /// These lines and those of a queen on `(row, col)`.
    pub(crate) fn with(self, row: u8, col: u8) -> Attacks {
        Attacks {
            cols: self.cols | 1 << col,
            sums: self.sums | 1 << (row + col),
            differences: self.differences | 1 << (row + 31 - col),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line stays attacked however many queens stand on it: `with` adds lines, never toggles them.
    #[test]
    fn attacked_lines_stay_attacked() {
        // Two queens on column 0, on the diagonal row + col = 2, on the diagonal row - col = 0.
        let a = Attacks::default().with(0, 0).with(5, 0);
        assert!(!a.allows(3, 0));
        let a = Attacks::default().with(0, 2).with(2, 0);
        assert!(!a.allows(1, 1));
        let a = Attacks::default().with(1, 1).with(4, 4);
        assert!(!a.allows(2, 2));
        assert!(a.allows(2, 3));
    }

    #[test]
    fn rejects_attacks_and_bad_sizes() {
        assert_eq!(PartialBoard::empty(0), Err(Error::NOutOfRange(0)));
        assert_eq!(PartialBoard::empty(33), Err(Error::NOutOfRange(33)));
        assert!(matches!(
            PartialBoard::from_queens(8, &[(0, 0), (1, 1)]),
            Err(Error::Attack(..))
        ));
        assert!(matches!(
            PartialBoard::from_queens(8, &[(0, 0), (3, 0)]),
            Err(Error::Attack(..))
        ));
        assert!(matches!(
            PartialBoard::from_queens(8, &[(0, 8)]),
            Err(Error::OffBoard { .. })
        ));
        let b = PartialBoard::from_queens(8, &[(0, 0), (1, 2)]).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b.column_mask(), 0b101);
        assert_eq!(b.empty_rows().count(), 6);
    }
}
