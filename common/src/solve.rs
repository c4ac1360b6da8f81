//! Printing solutions, as the classic programs do: one solution of any size by an explicit construction
//! (checked), and every solution of a small board, optionally one per class of the 8 symmetries.
//!
//! A solution is a column list: `columns[r]` is the column of the queen on row `r`.

/// Largest N [`construct`] accepts (the check is linear; printing a board of this size is the limit).
pub const MAX_CONSTRUCT: usize = 100_000;

/// Largest N [`Solutions`] enumerates (the search keeps its rows in 32-bit masks).
pub const MAX_ENUMERATE: usize = 32;

/// Whether `columns` places N non-attacking queens, one per row (linear time).
pub fn is_solution(columns: &[usize]) -> bool {
    let n = columns.len();
    let mut cols = vec![false; n];
    let mut sums = vec![false; 2 * n];
    let mut differences = vec![false; 2 * n];
    columns.iter().enumerate().all(|(r, &c)| {
        c < n
            && !std::mem::replace(&mut cols[c], true)
            && !std::mem::replace(&mut sums[r + c], true)
            && !std::mem::replace(&mut differences[r + n - c], true)
    })
}

/// One solution for N = 1 or N >= 4 (none exists for 2 and 3), by the explicit construction of
/// Hoffman, Loessi and Moore (1969): the even columns, then the odd ones, with a fix-up for N mod 6 = 2
/// or 3. The result is checked before it is returned.
pub fn construct(n: usize) -> Option<Vec<usize>> {
    if n == 0 || n == 2 || n == 3 || n > MAX_CONSTRUCT {
        return None;
    }
    // 1-based, as the construction is usually written.
    let mut evens: Vec<usize> = (2..=n).step_by(2).collect();
    let mut odds: Vec<usize> = (1..=n).step_by(2).collect();
    match n % 6 {
        2 => {
            // Swap 1 and 3 and move 5 to the end.
            odds.retain(|&c| c != 1 && c != 3 && c != 5);
            odds.insert(0, 1);
            odds.insert(0, 3);
            odds.push(5);
        }
        3 => {
            // Move 2 to the end of the evens, and 1 and 3 to the end of the odds.
            evens.retain(|&c| c != 2);
            evens.push(2);
            odds.retain(|&c| c != 1 && c != 3);
            odds.push(1);
            odds.push(3);
        }
        _ => {}
    }
    let columns: Vec<usize> = evens.into_iter().chain(odds).map(|c| c - 1).collect();
    is_solution(&columns).then_some(columns)
}

/// The 8 images of a solution under the symmetries of the square.
pub fn images(columns: &[usize]) -> [Vec<usize>; 8] {
    let n = columns.len();
    // A quarter turn: the queen (r, c) goes to (c, n-1-r).
    let turn = |p: &[usize]| {
        let mut q = vec![0; n];
        for (r, &c) in p.iter().enumerate() {
            q[c] = n - 1 - r;
        }
        q
    };
    let mirror = |p: &[usize]| p.iter().map(|&c| n - 1 - c).collect::<Vec<_>>();
    let r0 = columns.to_vec();
    let r1 = turn(&r0);
    let r2 = turn(&r1);
    let r3 = turn(&r2);
    [
        mirror(&r0),
        mirror(&r1),
        mirror(&r2),
        mirror(&r3),
        r0,
        r1,
        r2,
        r3,
    ]
}

/// Whether `columns` is the representative of its symmetry class (the smallest of its 8 images).
pub fn is_canonical(columns: &[usize]) -> bool {
    images(columns)
        .iter()
        .all(|image| columns <= image.as_slice())
}

/// Every solution of an N x N board in lexicographic order of the column lists (N up to
/// [`MAX_ENUMERATE`]), by a bit-mask depth-first search without recursion.
pub struct Solutions {
    n: usize,
    all: u32,
    /// Per row placed: the column masks still to try on it.
    left: Vec<u32>,
    columns: Vec<usize>,
    /// Attacked columns and diagonals at each depth.
    stack: Vec<(u32, u32, u32)>,
    done: bool,
}

impl Solutions {
    /// The solutions of N (none for N = 0 or N over [`MAX_ENUMERATE`]).
    pub fn new(n: usize) -> Solutions {
        let ok = (1..=MAX_ENUMERATE).contains(&n);
        let all = if ok { ((1u64 << n) - 1) as u32 } else { 0 };
        Solutions {
            n,
            all,
            left: if ok { vec![all] } else { Vec::new() },
            columns: Vec::with_capacity(n),
            stack: vec![(0, 0, 0)],
            done: !ok,
        }
    }
}

impl Iterator for Solutions {
    type Item = Vec<usize>;

    fn next(&mut self) -> Option<Vec<usize>> {
        while !self.done {
            let depth = self.columns.len();
            let Some(free) = self.left.last_mut() else {
                self.done = true;
                break;
            };
            if *free == 0 {
                self.left.pop();
                self.stack.pop();
                if self.columns.pop().is_none() {
                    self.done = true;
                }
                continue;
            }
            // Lowest column first: lexicographic order.
            let bit = *free & free.wrapping_neg();
            *free &= !bit;
            let (cols, left_diagonals, right_diagonals) = self.stack[depth];
            self.columns.push(bit.trailing_zeros() as usize);
            if depth + 1 == self.n {
                let solution = self.columns.clone();
                self.columns.pop();
                return Some(solution);
            }
            let next = (
                cols | bit,
                (left_diagonals | bit) << 1,
                (right_diagonals | bit) >> 1,
            );
            self.stack.push(next);
            self.left.push(self.all & !(next.0 | next.1 | next.2));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_construction_is_a_solution_for_every_n_from_4_and_none_below() {
        assert_eq!(construct(1), Some(vec![0]));
        for n in [0, 2, 3] {
            assert_eq!(construct(n), None);
        }
        for n in 4..=2_000 {
            let s = construct(n).unwrap_or_else(|| panic!("N = {n}"));
            assert_eq!(s.len(), n);
            assert!(is_solution(&s), "N = {n}");
        }
        assert!(construct(MAX_CONSTRUCT).is_some());
    }

    #[test]
    fn the_check_refuses_every_kind_of_attack() {
        assert!(is_solution(&[1, 3, 0, 2]));
        assert!(!is_solution(&[1, 1, 3, 0]), "same column");
        assert!(!is_solution(&[0, 1, 3, 2]), "diagonal");
        assert!(!is_solution(&[3, 2, 0, 1]), "anti-diagonal");
        assert!(!is_solution(&[1, 3, 0, 4]), "off the board");
    }

    #[test]
    fn the_images_of_a_solution_are_solutions_and_form_its_class() {
        let s = vec![0, 4, 7, 5, 2, 6, 1, 3];
        let images = images(&s);
        assert!(images.iter().all(|i| is_solution(i)));
        assert!(images.contains(&s));
        let mut distinct = images.to_vec();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 8);
    }
}
