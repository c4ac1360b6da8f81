//! Seeds: kernel units expanded, the largest first, into many small independent searches, laid out as flat
//! `u32` tables for a many-core device (a GPU) that searches one seed per thread.
//!
//! A seed is the state of one unit's search at some level `v`: the column and diagonal masks the level
//! receives (`c`, `l`, `r`) and the unit it belongs to. Its search tries every free square of level `v`
//! and everything below, exactly as [`run`](super::run) would from there, so the seeds of a unit together
//! have its completions and its nodes once the queens placed while expanding are added (they are counted
//! here, on the host). Units too shallow to need a device search are settled here too, by the same rules as
//! the CPU kernel, so `Batch::finish` of the device's answers equals [`run`](super::run) on the same units:
//! counts, weighted sums and nodes, bit for bit. [`Batch::search`] is the device's loop written in Rust,
//! the reference the device kernels are tested against.

use super::{full_mask, last_two, prepare, Totals, Unit};

/// Words of the forbid table per unit: one mask per level (boards have at most 32 rows).
pub const FORBID_STRIDE: usize = 32;

/// Words per seed in [`Batch::seeds`]: `c`, `l`, `r`, and `unit << 5 | level`.
pub const SEED_WORDS: usize = 4;

/// Units one batch may hold: the seed's last word keeps the unit index above five bits of level.
pub const MAX_UNITS: usize = 1 << 27;

/// `round(32 * log2(a))` for `a` in 0..=32, 0 for 0 (a level with no square left counts as one).
const LOG2_32NDS: [u8; 33] = [
    0, 0, 32, 51, 64, 74, 83, 90, 96, 101, 106, 111, 115, 118, 122, 125, 128, 131, 133, 136, 138,
    141, 143, 145, 147, 149, 150, 152, 154, 155, 157, 159, 160,
];

/// The largest [`Batch::size_estimate`]: 32 levels of 32 squares.
const MAX_ESTIMATE: u32 = 32 * 160 + 16 * 32;

/// Units of several groups (jobs), all of one board size, expanded into seeds.
#[derive(Debug, Clone)]
pub struct Batch {
    n: u8,
    full: u32,
    /// Per group, what the host settled: shallow units and the queens placed while expanding.
    settled: Vec<Totals>,
    unit_group: Vec<u32>,
    unit_weight: Vec<u64>,
    /// [`FORBID_STRIDE`] masks per unit: the squares each level may not use beyond the queens above.
    forbid: Vec<u32>,
    /// Per unit, its third-to-last level (the device settles the two rows below it without stepping).
    tails: Vec<u32>,
    /// [`SEED_WORDS`] words per seed.
    seeds: Vec<u32>,
}

impl Batch {
    /// An empty batch for boards of `n` rows.
    pub fn new(n: u8) -> Batch {
        Batch {
            n,
            full: full_mask(n),
            settled: Vec::new(),
            unit_group: Vec::new(),
            unit_weight: Vec::new(),
            forbid: Vec::new(),
            tails: Vec::new(),
            seeds: Vec::new(),
        }
    }

    /// Adds a group of units (one job's) and returns its index, or `None` (nothing added) if the batch
    /// cannot hold that many more units or a unit has another board size.
    pub fn push_group(&mut self, units: &[Unit]) -> Option<usize> {
        if self.unit_group.len() + units.len() > MAX_UNITS
            || units.iter().any(|u| u.problem.board.n() != self.n)
        {
            return None;
        }
        let g = self.settled.len();
        let mut settled = Totals::default();
        for u in units {
            match prepare(u, self.full) {
                Ok(ready) => {
                    let unit = self.unit_group.len() as u32;
                    self.unit_group.push(g as u32);
                    self.unit_weight.push(ready.weight);
                    self.forbid
                        .extend_from_slice(&ready.setup.forbid[..FORBID_STRIDE]);
                    self.tails.push(ready.setup.depth as u32 - 3);
                    let s = &ready.setup;
                    self.seeds.extend_from_slice(&[s.c0, s.l0, s.r0, unit << 5]);
                }
                Err(done) => settled.add(done, u.weight),
            }
        }
        self.settled.push(settled);
        Some(g)
    }

    /// Expands the seeds whose subtrees look largest first ([`Batch::size_estimate`]) until there are at
    /// least `target` (or none can be expanded: a seed at its unit's tail level stays whole), and orders
    /// them largest first. The queens placed count as nodes here.
    ///
    /// A device launch ends on its slowest seed. Expanding level by level left the seeds of a large unit
    /// as large as the unit (at N = 20, two jobs in a million seeds: the largest 60 times the mean, and
    /// the launch waited for it); splitting the largest first bounds them, and the order sends the
    /// largest out first, so that the small ones fill the launch's end (BENCHMARKS.md, "Seeds balanced
    /// by their size").
    pub fn expand(&mut self, target: usize) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: this CPU has POPCNT.
            return unsafe { self.expand_popcnt(target) };
        }
        self.expand_largest_first(target)
    }

    /// [`Batch::expand`] with the POPCNT instruction (about a quarter faster than without).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn expand_popcnt(&mut self, target: usize) {
        self.expand_largest_first(target)
    }

    #[inline(always)]
    fn expand_largest_first(&mut self, target: usize) {
        // Estimates only fall from parent to child, so one cursor walks the buckets down.
        let mut buckets: Vec<Vec<[u32; 4]>> = vec![Vec::new(); MAX_ESTIMATE as usize + 1];
        let mut len = 0usize;
        let mut top = 0usize;
        let mut children = Vec::with_capacity(32);
        for s in self.seeds.chunks_exact(SEED_WORDS) {
            let s = [s[0], s[1], s[2], s[3]];
            let e = self.size_estimate(&s) as usize;
            top = top.max(e);
            buckets[e].push(s);
            len += 1;
        }
        // Bucket 0 holds the seeds at their unit's tail, which cannot be expanded.
        while len < target {
            while top > 0 && buckets[top].is_empty() {
                top -= 1;
            }
            if top == 0 {
                break;
            }
            let Some([c, l, r, meta]) = buckets[top].pop() else {
                break;
            };
            len -= 1;
            self.split([c, l, r, meta], &mut children);
            for child in children.drain(..) {
                // Below the parent's (see size_estimate), so below the cursor.
                let e = self.size_estimate(&child) as usize;
                debug_assert!(
                    e < top,
                    "a child's estimate {e} is not below its parent's {top}"
                );
                buckets[e].push(child);
                len += 1;
            }
        }
        self.seeds.clear();
        self.seeds.reserve(len * SEED_WORDS);
        for b in buckets.iter().rev() {
            self.seeds.extend_from_slice(b.as_flattened());
        }
    }

    /// Expands seeds one level at a time, oldest first, until there are at least `target` (or none can be
    /// expanded). The order before [`Batch::expand`], kept as its comparison in the balance benchmark
    /// (`common/examples/seed_balance.rs`) and as a second expansion for the tests.
    pub fn expand_by_level(&mut self, target: usize) {
        let mut queue: std::collections::VecDeque<[u32; 4]> = self
            .seeds
            .chunks_exact(SEED_WORDS)
            .map(|s| [s[0], s[1], s[2], s[3]])
            .collect();
        // Seeds that cannot be expanded in a row: once every seed is one, expansion is over.
        let mut stuck = 0;
        let mut children = Vec::with_capacity(32);
        while queue.len() < target && stuck < queue.len() {
            let [c, l, r, meta] = queue.pop_front().expect("queue is not empty");
            let (unit, v) = ((meta >> 5) as usize, meta & 31);
            if v >= self.tails[unit] {
                queue.push_back([c, l, r, meta]);
                stuck += 1;
                continue;
            }
            stuck = 0;
            self.split([c, l, r, meta], &mut children);
            queue.extend(children.drain(..));
        }
        self.seeds = queue.into_iter().flatten().collect();
    }

    /// Places a queen on each free square of `seed`'s level, counting each as a node of its group, and
    /// appends to `children` those whose next level has a free square (the others end there).
    #[inline(always)]
    fn split(&mut self, [c, l, r, meta]: [u32; 4], children: &mut Vec<[u32; 4]>) {
        let (unit, v) = ((meta >> 5) as usize, (meta & 31) as usize);
        let forbid = &self.forbid[unit * FORBID_STRIDE..][..FORBID_STRIDE];
        let mut f = !(c | l | r | forbid[v]) & self.full;
        let group = self.unit_group[unit] as usize;
        while f != 0 {
            let bit = f & f.wrapping_neg();
            f ^= bit;
            self.settled[group].nodes = self.settled[group].nodes.saturating_add(1);
            let (nc, nl, nr) = (c | bit, (l | bit) << 1, (r | bit) >> 1);
            if !(nc | nl | nr | forbid[v + 1]) & self.full != 0 {
                children.push([nc, nl, nr, meta + 1]);
            }
        }
    }

    /// How large a seed's subtree looks, in 32nds of a bit: over its levels down to the last, the sum of
    /// `log2` of the squares each level has left after the seed's own queens (at least one), plus half a
    /// bit per level left above the tail; 0 for a seed at its unit's tail level, which is not expanded
    /// (or of another batch).
    /// Cheap (a popcount a level). At N = 18 (a million seeds) the log of the true subtree size follows
    /// it with a correlation of about 0.94 (`common/examples/seed_balance.rs` prints it), as about 0.51
    /// times the sum plus 0.26 bits per level left (a one-off fit): hence the half bit. A child's
    /// estimate is at least half a bit below its parent's: its levels are the parent's less one, each
    /// with no more squares left, and it has one level less above the tail.
    #[inline(always)]
    pub fn size_estimate(&self, seed: &[u32; 4]) -> u32 {
        let (unit, v) = ((seed[3] >> 5) as usize, (seed[3] & 31) as usize);
        // A seed of another batch (no such unit) is not expanded either.
        let Some(&tail) = self.tails.get(unit) else {
            return 0;
        };
        let tail = tail as usize;
        if v >= tail {
            return 0;
        }
        let levels = &self.forbid[unit * FORBID_STRIDE..][v..=tail + 2];
        let [c, mut l, mut r, _] = *seed;
        let mut sum = 0u32;
        for &forbid in levels {
            let left = !(c | l | r | forbid) & self.full;
            sum += u32::from(LOG2_32NDS[left.count_ones() as usize]);
            l <<= 1;
            r >>= 1;
        }
        sum + 16 * (tail - v) as u32
    }

    /// Board size.
    pub fn n(&self) -> u8 {
        self.n
    }

    /// The mask of a row.
    pub fn full(&self) -> u32 {
        self.full
    }

    /// Number of seeds.
    pub fn len(&self) -> usize {
        self.seeds.len() / SEED_WORDS
    }

    /// Whether there is no seed (everything was settled on the host).
    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
    }

    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.settled.len()
    }

    /// The seed table, [`SEED_WORDS`] words per seed.
    pub fn seeds(&self) -> &[u32] {
        &self.seeds
    }

    /// The forbid table, [`FORBID_STRIDE`] words per unit.
    pub fn forbid(&self) -> &[u32] {
        &self.forbid
    }

    /// Per unit, its tail level.
    pub fn tails(&self) -> &[u32] {
        &self.tails
    }

    /// The totals of every group, given the device's answer: `(completions, nodes)` of seed `i` at
    /// `out[2 * i]` and `out[2 * i + 1]`. `None` if `out` has the wrong length or its sums
    /// overflow (a faulty device: refused, never wrapped into a plausible count).
    pub fn finish(&self, out: &[u64]) -> Option<Vec<Totals>> {
        if out.len() != 2 * self.len() {
            return None;
        }
        let mut t = self.settled.clone();
        for (seed, o) in self.seeds.chunks_exact(SEED_WORDS).zip(out.chunks_exact(2)) {
            let unit = (seed[3] >> 5) as usize;
            let g = &mut t[self.unit_group[unit] as usize];
            g.count = g.count.checked_add(o[0])?;
            g.weighted = g
                .weighted
                .checked_add(o[0].checked_mul(self.unit_weight[unit])?)?;
            g.nodes = g.nodes.checked_add(o[1])?;
        }
        Some(t)
    }

    /// Searches seed `i` as the device does: `(completions, nodes)`. The loop is the device kernel's
    /// (`worker/gpu/src/search.cl`) line for line.
    pub fn search(&self, i: usize) -> (u64, u64) {
        search_seed(
            &self.seeds[i * SEED_WORDS..][..SEED_WORDS],
            &self.forbid,
            &self.tails,
            self.full,
        )
    }

    /// Every seed searched on the CPU with [`Batch::search`], in the device's output layout.
    pub fn search_all(&self) -> Vec<u64> {
        (0..self.len())
            .flat_map(|i| {
                let (c, n) = self.search(i);
                [c, n]
            })
            .collect()
    }
}

/// Searches one seed (its [`SEED_WORDS`] words) over a batch's tables as the device does:
/// `(completions, nodes)`. The loop is the device kernel's (`worker/gpu/src/search.cl`) line for line.
/// The tables must be a [`Batch`]'s (the seed's unit and levels index them).
pub fn search_seed(s: &[u32], forbid: &[u32], tails: &[u32], full: u32) -> (u64, u64) {
    let (unit, v0) = ((s[3] >> 5) as usize, (s[3] & 31) as usize);
    let forbid = &forbid[unit * FORBID_STRIDE..][..FORBID_STRIDE];
    let tail = tails[unit] as usize;
    let (mut cs, mut ls, mut rs, mut fs) = ([0u32; 32], [0u32; 32], [0u32; 32], [0u32; 32]);
    let (mut count, mut nodes) = (0u64, 0u64);
    let mut v = v0;
    cs[v] = s[0];
    ls[v] = s[1];
    rs[v] = s[2];
    fs[v] = !(s[0] | s[1] | s[2] | forbid[v]) & full;
    loop {
        let f = fs[v];
        if f == 0 {
            if v == v0 {
                break;
            }
            v -= 1;
            continue;
        }
        let bit = f & f.wrapping_neg();
        fs[v] = f ^ bit;
        let c = cs[v] | bit;
        let l = (ls[v] | bit) << 1;
        let r = (rs[v] | bit) >> 1;
        let nf = !(c | l | r | forbid[v + 1]) & full;
        nodes += 1;
        if v == tail {
            let (leaves, placed) = last_two(c, l, r, nf, forbid[v + 2], full);
            count += leaves;
            nodes += placed;
        } else if nf != 0 {
            v += 1;
            cs[v] = c;
            ls[v] = l;
            rs[v] = r;
            fs[v] = nf;
        }
    }
    (count, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Plan, Strategy};

    /// A batch holding every job of `plan`, one group each.
    fn every_job_of(plan: &Plan) -> Batch {
        let mut batch = Batch::new(plan.n());
        for k in plan.jobs() {
            batch
                .push_group(&plan.job(&k).unwrap().work().units)
                .unwrap();
        }
        batch
    }

    /// The device's loop, fed by any expansion, gives what the CPU kernel gives: per job, bit for bit.
    #[test]
    fn seeds_search_like_the_kernel() {
        for (n, strategy) in [
            (9, Strategy::D4),
            (11, Strategy::D4),
            (12, Strategy::Mirror),
        ] {
            let plan = Plan::new(n, strategy).unwrap();
            let jobs: Vec<_> = plan.jobs().map(|k| plan.job(&k).unwrap()).collect();
            for (target, by_level) in [0, 1, 50, 5000, 1 << 20]
                .into_iter()
                .flat_map(|t| [(t, false), (t, true)])
            {
                let mut batch = Batch::new(n as u8);
                let works: Vec<_> = jobs.iter().map(|j| j.work()).collect();
                for w in &works {
                    batch.push_group(&w.units).unwrap();
                }
                if by_level {
                    batch.expand_by_level(target);
                } else {
                    batch.expand(target);
                }
                let totals = batch.finish(&batch.search_all()).unwrap();
                for ((job, work), t) in jobs.iter().zip(&works).zip(totals) {
                    assert_eq!(
                        work.finish(t).unwrap(),
                        job.run(),
                        "n={n} {strategy} target={target} by_level={by_level}"
                    );
                }
            }
        }
    }

    /// `expand` reaches its target, orders the seeds by their estimates, largest first, and a child's
    /// estimate is below its parent's (the cursor over the buckets relies on it); a seed of no unit of
    /// the batch has estimate 0 (never expanded) rather than a panic.
    #[test]
    fn expand_orders_seeds_largest_first_and_estimates_fall_from_parent_to_child() {
        let plan = Plan::new(13, Strategy::D4).unwrap();
        for target in [10, 3000, 40_000] {
            let mut batch = every_job_of(&plan);
            batch.expand(target);
            assert!(batch.len() >= target, "{} < {target}", batch.len());
            let seeds: Vec<[u32; 4]> = batch
                .seeds()
                .chunks_exact(SEED_WORDS)
                .map(|s| [s[0], s[1], s[2], s[3]])
                .collect();
            // Every seed has a free square at its level: the device's answer for a seed must have a
            // node at least, and a dead end pushed as a seed would be refused (found by cargo-mutants:
            // `split` could push dead ends unseen, their answers being zero).
            for s in &seeds {
                let (unit, v) = ((s[3] >> 5) as usize, (s[3] & 31) as usize);
                let f = !(s[0] | s[1] | s[2] | batch.forbid[unit * FORBID_STRIDE + v]) & batch.full;
                assert_ne!(f, 0, "a seed with no free square: {s:?}");
            }
            let estimates: Vec<u32> = seeds.iter().map(|s| batch.size_estimate(s)).collect();
            assert!(
                estimates.windows(2).all(|w| w[0] >= w[1]),
                "target {target}"
            );
            let mut children = Vec::new();
            let mut checked = 0;
            let mut scratch = batch.clone();
            for s in &seeds {
                scratch.split(*s, &mut children);
                for child in children.drain(..) {
                    assert!(batch.size_estimate(&child) < batch.size_estimate(s));
                    checked += 1;
                }
            }
            assert!(checked > target, "{checked} children checked");
            let stranger = [seeds[0][0], seeds[0][1], seeds[0][2], u32::MAX];
            assert_eq!(batch.size_estimate(&stranger), 0);
        }
        // A seed at its unit's tail is never split: estimate 0.
        let mut batch = every_job_of(&plan);
        batch.expand(usize::MAX);
        assert!(batch
            .seeds()
            .chunks_exact(SEED_WORDS)
            .all(|s| batch.size_estimate(&[s[0], s[1], s[2], s[3]]) == 0));
    }

    /// `expand` stops as soon as the batch holds its target: a batch already there is only reordered,
    /// nothing split and no node counted; an empty batch stays empty whatever the target (found by
    /// cargo-mutants: `<` for `<=` in the loop's test, and the cursor's floor, survived the tests above).
    #[test]
    fn expand_stops_at_its_target_and_an_empty_batch_stays_empty() {
        let plan = Plan::new(12, Strategy::D4).unwrap();
        let batch = every_job_of(&plan);
        let mut again = batch.clone();
        again.expand(batch.len());
        assert_eq!(again.len(), batch.len());
        assert_eq!(again.settled, batch.settled);
        let sorted = |b: &Batch| {
            let mut v: Vec<&[u32]> = b.seeds().chunks_exact(SEED_WORDS).collect();
            v.sort_unstable();
            v.into_iter().flatten().copied().collect::<Vec<u32>>()
        };
        assert_eq!(sorted(&again), sorted(&batch));
        let mut once = batch.clone();
        once.expand(batch.len() + 1);
        assert!(once.len() > batch.len());
        assert_ne!(once.settled, batch.settled);
        let mut empty = Batch::new(12);
        for target in [0, 1, 1 << 20] {
            empty.expand(target);
            assert!(empty.is_empty());
        }
    }

    /// Largest first, the largest seed of two jobs expanded for a model device of 4,096 threads is a
    /// smaller multiple of the mean and of a thread's share than level by level (at N = 15, jobs 20 and
    /// 21: 5.0 against 18.1 times the mean, 0.41 against 1.49 times the share).
    #[test]
    fn expanding_the_largest_first_evens_the_seeds() {
        let plan = Plan::new(15, Strategy::D4).unwrap();
        let spread = |by_level: bool| {
            let mut batch = Batch::new(15);
            for k in plan.jobs().skip(20).take(2) {
                batch
                    .push_group(&plan.job(&k).unwrap().work().units)
                    .unwrap();
            }
            if by_level {
                batch.expand_by_level(50_000);
            } else {
                batch.expand(50_000);
            }
            let out = batch.search_all();
            let b = crate::kernel::balance::Balance::of(&out, 4096);
            let largest = out.chunks_exact(2).map(|o| o[1]).max().unwrap();
            (largest as f64 * b.seeds as f64 / b.nodes as f64, b)
        };
        let ((even, new), (uneven, old)) = (spread(false), spread(true));
        assert!(
            even < uneven / 3.0,
            "largest/mean {even:.1} against {uneven:.1}"
        );
        assert!(
            new.largest_share < old.largest_share / 3.0,
            "{new} against {old}"
        );
    }

    /// The table of logarithms is `round(32 * log2(a))`.
    #[test]
    fn log2_table() {
        for (a, &x) in LOG2_32NDS.iter().enumerate().skip(1) {
            assert_eq!(x as f64, (32.0 * (a as f64).log2()).round(), "{a}");
        }
        assert_eq!(LOG2_32NDS[0], 0);
    }

    #[test]
    fn wrong_answer_length_is_refused() {
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let mut batch = every_job_of(&plan);
        assert!(!batch.is_empty());
        assert!(batch.finish(&[]).is_none());
        let other = Plan::new(9, Strategy::D4).unwrap();
        let key = other.jobs().next().unwrap();
        assert!(batch
            .push_group(&other.job(&key).unwrap().work().units)
            .is_none());
    }

    /// A device answer whose sums overflow (a faulty device: each seed's pair can pass the plausibility
    /// check on its own) is refused, never wrapped into a plausible count.
    #[test]
    fn an_answer_whose_sums_overflow_is_refused() {
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let mut batch = every_job_of(&plan);
        batch.expand(1 << 20);
        assert!(batch.len() >= 2);
        let honest = batch.search_all();
        assert!(batch.finish(&honest).is_some());
        let huge = vec![u64::MAX - 1; honest.len()];
        assert!(batch.finish(&huge).is_none());
    }

    /// A device answer that passes every check of its own (each seed's pair plausible, the batch's sums
    /// within 64 bits) but whose job's unique count, with the part settled on the CPU (the completions
    /// of `d4`'s symmetric rings that a symmetry fixes), passes 64 bits is refused. Before, `Work::finish`
    /// added it unchecked: a release build wrapped it into a small, plausible count, and the worker
    /// sealed and reported it. Found by a review, 2026-11-24.
    #[test]
    fn a_job_whose_device_total_and_settled_part_overflow_is_refused() {
        let (plan, work) = (8..=12)
            .flat_map(|n| {
                let plan = Plan::new(n, Strategy::D4).unwrap();
                plan.jobs()
                    .map(move |k| (plan, plan.job(&k).unwrap().work()))
                    .collect::<Vec<_>>()
            })
            .find(|(_, w)| w.base.unique8.unwrap_or(0) >= 8 && !w.units.is_empty())
            .expect("a d4 job with fixed completions settled and searches left");
        let settled = work.base.unique8.unwrap();
        let mut batch = Batch::new(plan.n());
        batch.push_group(&work.units).unwrap();
        let mut out = vec![0u64; 2 * batch.len()];
        for o in out.chunks_exact_mut(2) {
            o[1] = 1;
        }
        let first_unit = (batch.seeds[3] >> 5) as usize;
        let w = batch.unit_weight[first_unit];
        let x = (u64::MAX - settled) / w + 1;
        (out[0], out[1]) = (x, x);
        let totals = batch.finish(&out).expect("within 64 bits for the batch");
        assert_eq!(work.finish(totals[0]), None);
    }

    /// The part settled on the CPU saturates as the kernels' sums do (found by a review, 2026-11-24, a
    /// later session: its sums were unchecked, wrapping in a release build): a settled sum at u64::MAX
    /// is unknown, and the job's result is refused, whatever the searches add.
    #[test]
    fn a_saturated_settled_part_is_refused() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let mut work = plan.job(&plan.jobs().next().unwrap()).unwrap().work();
        assert!(work.finish(crate::kernel::Totals::default()).is_some());
        for field in 0..3 {
            let mut saturated = work.clone();
            match field {
                0 => saturated.base.total = u64::MAX,
                1 => saturated.base.nodes = u64::MAX,
                _ => saturated.base.unique8 = Some(u64::MAX),
            }
            assert_eq!(saturated.finish(crate::kernel::Totals::default()), None);
        }
        work.base.total = u64::MAX - 1;
        assert!(work.finish(crate::kernel::Totals::default()).is_some());
    }
}
