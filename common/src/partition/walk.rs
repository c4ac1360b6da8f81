//! Lazy depth-first enumeration of column prefixes: the job lists of both strategies are walked one
//! prefix at a time, so that counting or hashing a plan's jobs takes memory bounded by its depth, never
//! by its size (an absurd plan is refused after `MAX_JOBS` steps, not after exhausting memory).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A bound on the steps (columns tried) of one or more walks; unlimited by default. The cost of
/// enumerating a deep plan is not bounded by its job count alone (a deep prefix can take a long search
/// to reach), so a request for an unknown plan is bounded in steps as well.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    left: Option<Arc<AtomicU64>>,
    /// Set by someone else to end every walk using this budget (a coordinator shutting down, a caller
    /// gone): any one of them ends it.
    cancel: Vec<Arc<AtomicBool>>,
}

impl Budget {
    /// No bound.
    pub fn unlimited() -> Self {
        Budget::default()
    }

    /// At most `steps` steps, shared by every walk given a clone of it.
    pub fn steps(steps: u64) -> Self {
        Budget {
            left: Some(Arc::new(AtomicU64::new(steps))),
            cancel: Vec::new(),
        }
    }

    /// This budget, also ended as soon as `cancel` is set (as well as any flag given before).
    pub fn cancelled_by(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.cancel.push(cancel);
        self
    }

    /// Whether the walks were cancelled.
    pub fn cancelled(&self) -> bool {
        self.cancel.iter().any(|c| c.load(Ordering::Relaxed))
    }

    /// Takes one step; false once the budget is spent or cancelled.
    fn take(&self) -> bool {
        if self.cancelled() {
            return false;
        }
        match &self.left {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                .is_ok(),
        }
    }

    /// Adds `steps` to a bounded budget (a walk that keeps finding what it looks for earns more).
    pub fn grant(&self, steps: u64) {
        if let Some(left) = &self.left {
            let _ = left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l.saturating_add(steps))
            });
        }
    }

    /// Steps left, or `None` when unlimited.
    pub fn left(&self) -> Option<u64> {
        self.left.as_ref().map(|left| left.load(Ordering::Relaxed))
    }

    /// Whether a walk stopped because the budget was spent.
    pub fn exhausted(&self) -> bool {
        matches!(&self.left, Some(left) if left.load(Ordering::Relaxed) == 0)
    }
}

/// Every sequence of `depth` columns below `n` that `step` accepts, in lexicographic order.
///
/// `step(state, cols, c)` is asked whether column `c` may follow the prefix `cols` (whose state is
/// `state`: the state reached after placing `cols`) and returns the state after it, or `None`.
pub struct Walk<S, F> {
    n: u8,
    depth: u8,
    step: F,
    /// Frame `i`: the state after `cols[..i]` and the next column to try on row `i`.
    stack: Vec<(S, u8)>,
    cols: Vec<u8>,
    /// Depth 0 has exactly one (empty) prefix.
    empty_pending: bool,
    /// `cols` ends with the leaf last returned.
    at_leaf: bool,
    budget: Budget,
}

impl<S, F> Walk<S, F>
where
    F: FnMut(&S, &[u8], u8) -> Option<S>,
{
    /// The walk from `root`, the state of the empty prefix.
    pub fn new(n: u8, depth: u8, root: S, step: F) -> Self {
        Self::within(n, depth, root, step, Budget::unlimited())
    }

    /// Like [`Walk::new`], ending early (a shorter list) once `budget` is spent: check
    /// [`Budget::exhausted`] afterwards.
    pub fn within(n: u8, depth: u8, root: S, step: F, budget: Budget) -> Self {
        Walk {
            n,
            depth,
            step,
            stack: if depth == 0 {
                Vec::new()
            } else {
                vec![(root, 0)]
            },
            cols: Vec::with_capacity(depth as usize),
            empty_pending: depth == 0,
            at_leaf: false,
            budget,
        }
    }
}

/// Stepping a walk without allocating: the next prefix, borrowed until the next call.
pub trait Advance {
    /// The next prefix, or `None` at the end (or when the budget is spent).
    fn advance(&mut self) -> Option<&[u8]>;
}

impl<S, F> Advance for Walk<S, F>
where
    F: FnMut(&S, &[u8], u8) -> Option<S>,
{
    fn advance(&mut self) -> Option<&[u8]> {
        if self.empty_pending {
            self.empty_pending = false;
            return Some(&[]);
        }
        if self.at_leaf {
            self.at_leaf = false;
            self.cols.pop();
        }
        loop {
            let (state, next) = self.stack.last_mut()?;
            if *next >= self.n {
                self.stack.pop();
                self.cols.pop();
                continue;
            }
            if !self.budget.take() {
                self.stack.clear();
                return None;
            }
            let c = *next;
            *next += 1;
            if let Some(after) = (self.step)(state, &self.cols, c) {
                self.cols.push(c);
                if self.cols.len() == self.depth as usize {
                    self.at_leaf = true;
                    return Some(&self.cols);
                }
                self.stack.push((after, 0));
            }
        }
    }
}

impl<S, F> Iterator for Walk<S, F>
where
    F: FnMut(&S, &[u8], u8) -> Option<S>,
{
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        self.advance().map(<[u8]>::to_vec)
    }
}

#[cfg(test)]
mod tests {
    use super::{Budget, Walk};

    /// The recursive enumeration the walk replaces, for comparison.
    fn recursive(
        n: u8,
        depth: u8,
        cols: &mut Vec<u8>,
        ok: &dyn Fn(&[u8], u8) -> bool,
        out: &mut Vec<Vec<u8>>,
    ) {
        if cols.len() == depth as usize {
            out.push(cols.clone());
            return;
        }
        for c in 0..n {
            if ok(cols, c) {
                cols.push(c);
                recursive(n, depth, cols, ok, out);
                cols.pop();
            }
        }
    }

    #[test]
    fn the_walk_yields_what_the_recursion_does_in_the_same_order() {
        let ok = |cols: &[u8], c: u8| {
            let row = cols.len() as i32;
            cols.iter()
                .enumerate()
                .all(|(r, &q)| q != c && (row - r as i32).abs() != (c as i32 - q as i32).abs())
        };
        for n in 0..=8u8 {
            for depth in 0..=n {
                let mut want = Vec::new();
                recursive(n, depth, &mut Vec::new(), &ok, &mut want);
                let got: Vec<Vec<u8>> = Walk::new(n, depth, (), |_: &(), cols: &[u8], c| {
                    ok(cols, c).then_some(())
                })
                .collect();
                assert_eq!(got, want, "n = {n}, depth = {depth}");
            }
        }
        // The 8-queens count comes out of a full-depth walk.
        let full = Walk::new(8, 8, (), |_: &(), cols: &[u8], c| ok(cols, c).then_some(())).count();
        assert_eq!(full, 92);
    }

    #[test]
    fn a_spent_budget_ends_the_walk_and_says_so() {
        let all = |_: &(), _: &[u8], _: u8| Some(());
        let budget = Budget::steps(10);
        let got = Walk::within(4, 2, (), all, budget.clone()).count();
        assert!(budget.exhausted());
        assert!(got < 16, "{got}");
        let budget = Budget::steps(1_000);
        assert_eq!(Walk::within(4, 2, (), all, budget.clone()).count(), 16);
        assert!(!budget.exhausted());
    }
}
