//! The `d4` partition: sub-problems are the canonical ring placements of [`super::ring`], and a job
//! is a *group* of them sharing the west and east sides, optionally split further by the queens of the
//! first few searched rows.
//!
//! Each ring is searched with its four queens pre-placed, in a frame where east is row 0 and west is row
//! N-1 (the anti-transpose of the board), from the row next to east down toward west, the smallest side.
//! The order matters: searching from the ring's most constraining end keeps the tree small, while the
//! same rings searched top to bottom in the board's own frame make a tree 1.2x larger. The group's
//! row restrictions (side queens at distance >= `w` from their corners) prune the job-key prefixes.
//! `BENCHMARKS.md` compares the tree sizes of the alternatives.

use crate::board::{attacks, Attacks, PartialBoard};
use crate::fixed::fixed_completions;
use crate::kernel::{Problem, Unit};
use crate::key::JobKey;
use crate::partition::ring::{self, Ring};
use crate::partition::walk::{Advance, Budget, Walk};
use crate::partition::SubProblem;
use crate::symmetry::Symmetry;

/// Default number of searched rows a job key fixes beyond its group, by N (see the module docs).
pub fn default_split(n: u8) -> u8 {
    match n {
        0..=20 => 0,
        21..=22 => 1,
        23..=24 => 2,
        25..=26 => 3,
        27..=30 => 4,
        // Split 4 has more than `MAX_JOBS` jobs from N = 31: 3 keeps them under it (2.8 and 3.4
        // million jobs at N = 31 and 32).
        _ => 3,
    }
}

/// The sub-problems: canonical ring placements in lexicographic order.
pub fn subproblems(n: u8) -> impl Iterator<Item = SubProblem> {
    ring::rings(n).map(|r| SubProblem {
        board: r.board,
        weight: r.weight(),
        stabiliser: r.stabiliser,
    })
}

/// One group: the fixed west and east sides, with everything its search needs.
#[derive(Debug, Clone)]
pub struct Group {
    n: u8,
    w: u8,
    e: u8,
    /// The search frame's pre-placed queens: east on row 0, west on row N-1.
    frame: PartialBoard,
    forbid: [u32; 32],
    /// The group's canonical rings, with the frame rows of their column-(N-1) and column-0 queens.
    rings: Vec<(u8, u8, Ring)>,
}

impl Group {
    /// The group of west side `w` and east side `e`, or `None` if no canonical ring has them.
    pub fn new(n: u8, w: u8, e: u8) -> Option<Group> {
        let m = n - 1;
        if w > m / 2 || e > m {
            return None;
        }
        // In the frame, north's queen (0, a) of the board lies at (m - a, m) and south's at (s, 0).
        let rings: Vec<(u8, u8, Ring)> = (0..n)
            .flat_map(|north| (0..n).map(move |south| (north, south)))
            .filter_map(|(north, south)| {
                Some((m - north, south, ring::canonical(n, [w, north, e, south])?))
            })
            .collect();
        if rings.is_empty() {
            return None;
        }
        let mut frame = PartialBoard::empty(n as u32).expect("valid n");
        frame.try_place(0, (m - e) as u32).ok()?;
        if n > 1 {
            frame.try_place(m as u32, w as u32).ok()?;
        }
        // Canonical means every side is at distance >= w from its corner: the side columns' queens lie
        // on rows w..=m-w.
        let mut forbid = [0u32; 32];
        for (r, f) in forbid.iter_mut().enumerate().take(n as usize) {
            if (r as u8) < w || (r as u8) > m - w {
                *f = 1 | 1 << m;
            }
            // With west in a corner (w = 0), the reflection in the anti-diagonal ties west with south;
            // the canonical side of the tie has north <= N-1-e: column N-1's queen on a row >= e.
            if w == 0 && (r as u8) < e {
                *f |= 1 << m;
            }
        }
        Some(Group {
            n,
            w,
            e,
            frame,
            forbid,
            rings,
        })
    }

    /// The rows a job key's prefix fixes, in search order.
    fn prefix_rows(&self, split: u8) -> std::ops::Range<u8> {
        1..1 + split
    }

    /// Whether `col` is allowed on frame row `row` given the queens already on `board`.
    fn allowed(&self, board: &PartialBoard, row: u8, col: u8) -> bool {
        self.forbid[row as usize] & (1 << col) == 0
            && board.queens().all(|q| !attacks(q, (row, col)))
    }

    /// The search problem of the job with prefix `cols` (checked).
    pub fn problem(&self, cols: &[u8]) -> Option<Problem> {
        let mut board = self.frame;
        for (row, &c) in self.prefix_rows(cols.len() as u8).zip(cols) {
            if c >= self.n || !self.allowed(&board, row, c) {
                return None;
            }
            board.set_unchecked(row, c);
        }
        Some(Problem {
            board,
            forbid: self.forbid,
        })
    }

    /// Every valid prefix of `split` rows, in lexicographic order, enumerated lazily.
    pub fn into_prefixes(
        self,
        split: u8,
        budget: Budget,
    ) -> impl Iterator<Item = Vec<u8>> + Advance {
        let (n, forbid) = (self.n, self.forbid);
        // The walk keeps the attacked columns and diagonals as bit masks: one test per column tried
        // instead of a scan of the board (the same rule as `allowed`, checked in the tests).
        let mut root = Attacks::default();
        for (r, c) in self.frame.queens() {
            root = root.with(r, c);
        }
        let step = move |a: &Attacks, cols: &[u8], c: u8| {
            let row = 1 + cols.len() as u8;
            (forbid[row as usize] & (1 << c) == 0 && a.allows(row, c)).then(|| a.with(row, c))
        };
        Walk::within(n, split, root, step, budget)
    }

    /// The job with prefix `cols` as kernel units plus the settled part `(total, unique * 8, nodes)`.
    ///
    /// Each canonical ring of the group that fits the prefix is one sub-problem: its north and south
    /// queens are placed on the frame's side columns, and its completions count `weight` each. Those
    /// become the units (split one row further). A ring that a symmetry maps to itself adds, by
    /// Burnside, `weight` to `unique * 8` for every symmetry of its stabiliser that fixes a completion:
    /// the identity fixes each one (the kernel's weighted count, added by [`crate::job::Work::finish`]),
    /// and the others' fixed completions are counted here by a search of fixed boards alone
    /// ([`fixed_completions`]), with the queens that ring's split places as its nodes. So every
    /// completion's search runs on the kernel (a CPU's vectors or a GPU), and the settled part costs
    /// little (BENCHMARKS.md, "Symmetric rings on the kernel").
    pub fn work(&self, cols: &[u8]) -> Option<(Vec<Unit>, (u64, u64, u64))> {
        let base = self.problem(cols)?;
        let n = self.n;
        let mut units = Vec::new();
        let (mut unique8, mut nodes) = (0u64, 0u64);
        for (unit, ring) in self.fitting(base) {
            let weight = ring.weight() as u64;
            let children = unit.split();
            if ring.stabiliser.len() > 1 {
                // The completions of the search frame fixed by `g` in the board's frame: those fixed by
                // `g` conjugated by the anti-transpose (an involution) that maps one frame to the other.
                let a = Symmetry::AntiTranspose;
                let fixed: u64 = ring
                    .stabiliser
                    .iter()
                    .filter(|&g| g != Symmetry::Identity)
                    .map(|g| fixed_completions(&unit, &|s| a.apply(n, g.apply(n, a.apply(n, s)))))
                    .fold(0, u64::saturating_add);
                // Saturating, never wrapping: a sum at u64::MAX is refused by `Work::finish`.
                unique8 = unique8.saturating_add(weight.saturating_mul(fixed));
                // The nodes its whole search had when it was settled here (a job's nodes stay what
                // they were): beside the kernel's, the queen each child places on the split row, and
                // the pre-placed rows the search passed before the child's first empty row. A plain
                // ring's split counts neither.
                if let Some(split) = unit.board.empty_rows().next() {
                    for child in &children {
                        let passed = child.board.empty_rows().next().map_or(0, |r| r - split - 1);
                        nodes = nodes.saturating_add(1 + u64::from(passed));
                    }
                }
            }
            units.extend(children.into_iter().map(|problem| Unit { problem, weight }));
        }
        Some((units, (0, unique8, nodes)))
    }

    /// The largest stabiliser among the group's canonical rings that fit the job with prefix `cols` (0
    /// when none fits, 1 when every one is plain), or `None` if `cols` is not a prefix of the group. It
    /// bounds what the job's result can be ([`crate::Job::check`]).
    ///
    /// The rings are tried from the largest stabiliser down, and the first that fits decides: a job of
    /// plain rings (almost every job) stops at its first plain ring that fits, instead of placing the
    /// side queens of all N^2 rings (a spot check of every line of an N = 28 certificate spends its time
    /// here).
    pub fn largest_stabiliser(&self, cols: &[u8]) -> Option<u32> {
        let base = self.problem(cols)?;
        let m = self.n - 1;
        for size in [8, 4, 2, 1] {
            let fits = self
                .rings
                .iter()
                .filter(|(_, _, ring)| ring.stabiliser.len() == size)
                .any(|(right, left, _)| {
                    let mut board = base.board;
                    board.try_place(*right as u32, m as u32).is_ok()
                        && board.try_place(*left as u32, 0).is_ok()
                });
            if fits {
                return Some(size);
            }
        }
        Some(0)
    }

    /// Whether a search of the job with prefix `cols` places a queen (`None` if `cols` is not a prefix
    /// of the group): a child of a fitting ring's split with a free square on its next empty row. The
    /// kernel counts that placement as a node, so a result of such a job with no node was not searched
    /// ([`crate::Job::check`]).
    pub fn places_a_queen(&self, cols: &[u8]) -> Option<bool> {
        let base = self.problem(cols)?;
        Some(self.fitting(base).any(|(unit, _)| {
            unit.split()
                .iter()
                .any(|child| child.board.empty_rows().next().is_some() && !child.split().is_empty())
        }))
    }

    /// How many of the group's canonical rings that fit the job with prefix `cols` leave at most one
    /// empty row once their side queens stand (`None` if `cols` is not a prefix of the group). Each such
    /// ring completes at most once, on the queen its split places (or on its side queens alone), and no
    /// node is searched for it: a plain ring's split counts none. Only a job split within 5 rows of N
    /// has any ([`crate::Job::check`] allows them beside its nodes).
    pub fn completing_without_nodes(&self, cols: &[u8]) -> Option<u32> {
        let base = self.problem(cols)?;
        Some(
            self.fitting(base)
                .filter(|(unit, _)| unit.board.empty_rows().nth(1).is_none())
                .count() as u32,
        )
    }

    /// [`Group::largest_stabiliser`] as the maximum over every fitting ring (its definition), for the
    /// tests.
    #[cfg(test)]
    fn largest_stabiliser_of_all(&self, cols: &[u8]) -> Option<u32> {
        let base = self.problem(cols)?;
        Some(
            self.fitting(base)
                .map(|(_, ring)| ring.stabiliser.len())
                .max()
                .unwrap_or(0),
        )
    }

    /// The group's west and east sides.
    pub fn sides(&self) -> (u8, u8) {
        (self.w, self.e)
    }

    /// The group's rings that fit the job of search problem `base`, each with its sub-problem: its
    /// north and south queens placed on the frame's side columns.
    fn fitting(&self, base: Problem) -> impl Iterator<Item = (Problem, &Ring)> + '_ {
        let m = self.n - 1;
        self.rings.iter().filter_map(move |(right, left, ring)| {
            let mut board = base.board;
            // A side queen may already stand there (a corner or the prefix); a clash rules the ring out.
            if board.try_place(*right as u32, m as u32).is_err()
                || board.try_place(*left as u32, 0).is_err()
            {
                return None;
            }
            Some((
                Problem {
                    board,
                    forbid: base.forbid,
                },
                ring,
            ))
        })
    }
}

/// All groups of `n`, in lexicographic order of `(w, e)`.
pub fn groups(n: u8) -> impl Iterator<Item = Group> {
    let m = n - 1;
    (0..=m / 2).flat_map(move |w| (0..n).filter_map(move |e| Group::new(n, w, e)))
}

/// All job keys of `n` at split depth `split`: `[w, e, prefix columns...]`.
pub fn jobs(n: u8, split: u8) -> impl Iterator<Item = JobKey> {
    jobs_within(n, split, Budget::unlimited())
}

/// Calls `f` with every job key of `n` at split `split` in order, without allocating one; stops when `f`
/// says so or once `budget` is spent.
pub fn visit_keys(n: u8, split: u8, budget: &Budget, mut f: impl FnMut(&[u8]) -> bool) {
    let mut key = [0u8; 34];
    for g in groups(n) {
        key[0] = g.w;
        key[1] = g.e;
        let mut prefixes = g.into_prefixes(split, budget.clone());
        while let Some(p) = prefixes.advance() {
            key[2..2 + p.len()].copy_from_slice(p);
            if !f(&key[..2 + p.len()]) {
                return;
            }
        }
        if budget.exhausted() {
            return;
        }
    }
}

/// [`jobs`], ending early once `budget` is spent.
pub fn jobs_within(n: u8, split: u8, budget: Budget) -> impl Iterator<Item = JobKey> {
    groups(n).flat_map(move |g| {
        let (w, e) = (g.w, g.e);
        g.into_prefixes(split, budget.clone()).map(move |p| {
            let mut key = vec![w, e];
            key.extend(p);
            JobKey(key)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rings that may complete with no node searched: none in a job split more than 5 rows short of
    /// N; in the deeper ones, at least every unit the job's work leaves complete (each such unit a
    /// completion no node found). N = 13's job `0.2.5.2.8.3.11.9.1.6.4` has two (found by a review,
    /// 2026-11-29).
    #[test]
    fn rings_that_complete_without_nodes_are_counted() {
        let group = Group::new(13, 0, 2).unwrap();
        assert_eq!(
            group.completing_without_nodes(&[5, 2, 8, 3, 11, 9, 1, 6, 4]),
            Some(2)
        );
        let (mut deep, mut complete) = (0, 0);
        for n in 4..=11u8 {
            for split in 0..=n - 3 {
                for key in jobs(n, split) {
                    let [w, e, prefix @ ..] = key.0.as_slice() else {
                        panic!("{key}")
                    };
                    let group = Group::new(n, *w, *e).unwrap();
                    let free = group.completing_without_nodes(prefix).unwrap();
                    if split + 5 < n {
                        assert_eq!(free, 0, "N = {n} {key}");
                        continue;
                    }
                    let (units, _) = group.work(prefix).unwrap();
                    let done = units
                        .iter()
                        .filter(|u| u.problem.board.empty_rows().next().is_none())
                        .count() as u32;
                    assert!(done <= free, "N = {n} {key}: {done} > {free}");
                    deep += u64::from(free);
                    complete += u64::from(done);
                }
            }
        }
        assert!(complete > 0 && deep > complete, "{complete} of {deep}");
    }

    /// The largest stabiliser found from the largest down equals its definition, the maximum over every
    /// fitting ring, for every job of N = 1 to 12 split 0 to 3 rows deep.
    #[test]
    fn the_largest_stabiliser_found_first_is_the_maximum() {
        let mut seen = [0u64; 9];
        for n in 1..=12u8 {
            for split in 0..=3u8 {
                for key in jobs(n, split) {
                    let [w, e, prefix @ ..] = key.0.as_slice() else {
                        panic!("{key}")
                    };
                    let group = Group::new(n, *w, *e).unwrap();
                    let fast = group.largest_stabiliser(prefix);
                    assert_eq!(
                        fast,
                        group.largest_stabiliser_of_all(prefix),
                        "N = {n} {key}"
                    );
                    seen[fast.unwrap() as usize] += 1;
                }
            }
        }
        // Every size occurs, so every branch was compared.
        for size in [1, 2, 4, 8] {
            assert!(
                seen[size] > 0,
                "no job of largest stabiliser {size}: {seen:?}"
            );
        }
    }

    /// The settled part as it was before the symmetric rings went to the kernel: each symmetric ring
    /// searched whole here, every completion checked against its stabiliser. The oracle of the test
    /// below.
    fn work_checking_each_completion(
        group: &Group,
        cols: &[u8],
    ) -> Option<(Vec<Unit>, (u64, u64, u64))> {
        let base = group.problem(cols)?;
        let mut plain = Vec::new();
        let (mut total, mut unique8, mut nodes) = (0u64, 0u64, 0u64);
        for (unit, ring) in group.fitting(base) {
            let weight = ring.weight() as u64;
            if ring.stabiliser.len() > 1 {
                let mut fixed = 0;
                let found = crate::kernel::completions(&unit, &mut |board| {
                    let board = Symmetry::AntiTranspose.apply_board(board);
                    fixed += ring
                        .stabiliser
                        .iter()
                        .filter(|g| g.apply_board(&board) == board)
                        .count() as u64;
                });
                total += weight * found.count;
                unique8 += weight * fixed;
                nodes += found.nodes;
            } else {
                plain.extend(
                    unit.split()
                        .into_iter()
                        .map(|problem| Unit { problem, weight }),
                );
            }
        }
        Some((plain, (total, unique8, nodes)))
    }

    /// A job's result, its units searched by the kernel: `(total, unique * 8, nodes)`.
    fn finish(work: (Vec<Unit>, (u64, u64, u64))) -> (u64, u64, u64) {
        let (units, (total, unique8, nodes)) = work;
        let t = crate::kernel::run(units.into_iter());
        (total + t.weighted, unique8 + t.weighted, nodes + t.nodes)
    }

    /// The symmetric rings on the kernel give every job the result it had when they were searched
    /// whole on the host, completion by completion: total, unique * 8 and nodes, for every job of
    /// N = 1 to 17 unsplit, to 14 split 1 or 2 rows deep, to 12 split 3 or 4 (rings fixed by a half
    /// turn, a quarter turn and every symmetry among them).
    #[test]
    fn symmetric_rings_on_the_kernel_give_each_job_the_result_it_had() {
        let mut symmetric = [0u64; 9];
        for n in 1..=17u8 {
            for split in 0..=4u8 {
                // Deeper splits on smaller boards: prefixes whose images land on other prefix rows.
                if (n > 14 && split > 0) || (n > 12 && split > 2) {
                    continue;
                }
                for key in jobs(n, split) {
                    let [w, e, prefix @ ..] = key.0.as_slice() else {
                        panic!("{key}")
                    };
                    let group = Group::new(n, *w, *e).unwrap();
                    let now = finish(group.work(prefix).unwrap());
                    let before = finish(work_checking_each_completion(&group, prefix).unwrap());
                    assert_eq!(now, before, "N = {n} {key}");
                    let size = group.largest_stabiliser(prefix).unwrap();
                    if size > 1 && now.0 > 0 {
                        symmetric[size as usize] += 1;
                    }
                }
            }
        }
        // Jobs with completions on rings of every stabiliser size were compared.
        for size in [2, 4, 8] {
            assert!(
                symmetric[size] > 0,
                "no job of stabiliser {size} with completions: {symmetric:?}"
            );
        }
    }
}
