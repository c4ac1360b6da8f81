//! What every vector kernel shares: feeding searches to the lanes of a vector and summing what they found.
//!
//! A vector kernel (`kernel/avx2.rs`, `kernel/avx512.rs`, `kernel/sse41.rs`, `kernel/neon.rs`) steps one search per lane. The
//! driver here gives each lane a search, runs the kernel's inner loop until a search is over (or the
//! counters are due a flush), adds up each lane's completions with its unit's weight, and gives the lane
//! the next search; the kernel supplies its inner loop and its own per-search tables.

use super::{full_mask, next_search, Ready, Setup, Totals, Unit};

/// Levels of a search's stack (a board has at most 32 rows).
pub(super) const LEVELS: usize = 32;

/// Each search's registers between runs of a kernel's inner loop, one element per lane.
pub(super) struct State<const S: usize> {
    pub c: [u32; S],
    pub l: [u32; S],
    pub r: [u32; S],
    /// The squares left to try on the current level.
    pub f: [u32; S],
    /// Current level.
    pub v: [u32; S],
    /// Levels with squares left (0: the search is over).
    pub m: [u32; S],
    /// The level whose steps settle the two rows below (`u32::MAX` for an idle lane).
    pub tail: [u32; S],
}

/// What a vector kernel of `S` lanes adds to the driver.
pub(super) trait Kernel<const S: usize> {
    /// Lane `lane` takes the search `ready` (its registers are already in the state): fill the kernel's
    /// own tables for it.
    fn start(&mut self, lane: usize, ready: &Ready);
    /// Steps the searches until one of those running is over, or the counters are due a flush. Returns
    /// each lane's completions and nodes over these steps.
    fn steps(&mut self, state: &mut State<S>, full: u32) -> ([u32; S], [u32; S]);
}

/// Searches every unit (all of the same board size) on `kernel`'s lanes and sums what they produced.
pub(super) fn drive<const S: usize, K: Kernel<S>>(
    kernel: &mut K,
    units: impl Iterator<Item = Unit>,
) -> Totals {
    let mut totals = Totals::default();
    let mut units = units.peekable();
    let Some(first) = units.peek() else {
        return totals;
    };
    let n = first.problem.board.n();
    let full = full_mask(n);
    let mut state = State {
        c: [0; S],
        l: [0; S],
        r: [0; S],
        f: [0; S],
        v: [0; S],
        m: [0; S],
        tail: [0; S],
    };
    let mut weight = [0u64; S];
    let mut count = [0u64; S];
    let mut load = |state: &mut State<S>,
                    kernel: &mut K,
                    weight: &mut [u64; S],
                    lane: usize,
                    totals: &mut Totals| {
        match next_search(&mut units, n, full, totals) {
            Some(ready) => {
                let setup = &ready.setup;
                (state.c[lane], state.l[lane], state.r[lane], state.f[lane]) =
                    (setup.c0, setup.l0, setup.r0, ready.f0);
                (state.v[lane], state.m[lane], state.tail[lane]) = (0, 1, setup.depth as u32 - 3);
                weight[lane] = ready.weight;
                kernel.start(lane, &ready);
            }
            None => (state.m[lane], state.tail[lane]) = (0, u32::MAX),
        }
    };
    for lane in 0..S {
        load(&mut state, kernel, &mut weight, lane, &mut totals);
    }
    loop {
        let live: [bool; S] = std::array::from_fn(|lane| state.m[lane] != 0);
        if !live.contains(&true) {
            break;
        }
        let (found, placed) = kernel.steps(&mut state, full);
        for lane in 0..S {
            count[lane] += found[lane] as u64;
            totals.nodes = totals.nodes.saturating_add(placed[lane] as u64);
            if live[lane] && state.m[lane] == 0 {
                totals.add_completions(count[lane], weight[lane]);
                count[lane] = 0;
                load(&mut state, kernel, &mut weight, lane, &mut totals);
            }
        }
    }
    totals
}

/// Writes a search's table of forbidden squares: for each level, those of the two rows below it as one
/// pair (the first row in the low half; rows past the last are empty), so that a step loads both at once.
pub(super) fn pairs(setup: &Setup, table: &mut [u64; LEVELS]) {
    let row = |level: usize| setup.forbid.get(level).map_or(0, |&row| row as u64);
    for (level, below) in table.iter_mut().enumerate() {
        *below = row(level + 1) | row(level + 2) << 32;
    }
}

/// Level masks on which a kernel's "highest set bit" is tested (tests only): for every top bit below 31,
/// the top alone and all ones below it (the masks a conversion that kept every bit would round up),
/// then a spread of others.
#[cfg(test)]
pub(super) fn level_masks() -> Vec<u32> {
    let mut masks: Vec<u32> = (0..31)
        .flat_map(|top| [1u32 << top, (2u32 << top) - 1])
        .collect();
    let mut x = 0x9e37_79b9u32;
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        masks.push((x >> 1).max(1));
    }
    masks
}
