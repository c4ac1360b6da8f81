//! Seeds: kernel units expanded breadth-first into many small independent searches, laid out as flat
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

    /// Expands seeds one level at a time, oldest first, until there are at least `target` (or none can be
    /// expanded: a seed at its unit's tail level stays whole). The queens placed count as nodes here.
    pub fn expand(&mut self, target: usize) {
        let mut queue: std::collections::VecDeque<[u32; 4]> = self
            .seeds
            .chunks_exact(SEED_WORDS)
            .map(|s| [s[0], s[1], s[2], s[3]])
            .collect();
        // Seeds that cannot be expanded in a row: once every seed is one, expansion is over.
        let mut stuck = 0;
        while queue.len() < target && stuck < queue.len() {
            let [c, l, r, meta] = queue.pop_front().expect("queue is not empty");
            let (unit, v) = ((meta >> 5) as usize, meta & 31);
            if v >= self.tails[unit] {
                queue.push_back([c, l, r, meta]);
                stuck += 1;
                continue;
            }
            stuck = 0;
            let forbid = &self.forbid[unit * FORBID_STRIDE..][..FORBID_STRIDE];
            let mut f = !(c | l | r | forbid[v as usize]) & self.full;
            let group = self.unit_group[unit] as usize;
            while f != 0 {
                let bit = f & f.wrapping_neg();
                f ^= bit;
                self.settled[group].nodes = self.settled[group].nodes.saturating_add(1);
                let (nc, nl, nr) = (c | bit, (l | bit) << 1, (r | bit) >> 1);
                let nf = !(nc | nl | nr | forbid[v as usize + 1]) & self.full;
                if nf != 0 {
                    queue.push_back([nc, nl, nr, meta + 1]);
                }
            }
        }
        self.seeds = queue.into_iter().flatten().collect();
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
            for target in [0, 1, 50, 5000, 1 << 20] {
                let mut batch = Batch::new(n as u8);
                let works: Vec<_> = jobs.iter().map(|j| j.work()).collect();
                for w in &works {
                    batch.push_group(&w.units).unwrap();
                }
                batch.expand(target);
                let totals = batch.finish(&batch.search_all()).unwrap();
                for ((job, work), t) in jobs.iter().zip(&works).zip(totals) {
                    assert_eq!(
                        work.finish(t).unwrap(),
                        job.run(),
                        "n={n} {strategy} target={target}"
                    );
                }
            }
        }
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
    /// within 64 bits) but whose job's total, with the part settled on the CPU (the symmetric rings of
    /// `d4`), passes 64 bits is refused. Before, `Work::finish` added it unchecked: a release build
    /// wrapped it into a small, plausible total, and the worker sealed and reported it. Found by a
    /// review, 2026-11-24.
    #[test]
    fn a_job_whose_device_total_and_settled_part_overflow_is_refused() {
        let (plan, work) = (8..=12)
            .flat_map(|n| {
                let plan = Plan::new(n, Strategy::D4).unwrap();
                plan.jobs()
                    .map(move |k| (plan, plan.job(&k).unwrap().work()))
                    .collect::<Vec<_>>()
            })
            .find(|(_, w)| w.base.total >= 8 && !w.units.is_empty())
            .expect("a d4 job with symmetric rings settled and searches left");
        let mut batch = Batch::new(plan.n());
        batch.push_group(&work.units).unwrap();
        let mut out = vec![0u64; 2 * batch.len()];
        for o in out.chunks_exact_mut(2) {
            o[1] = 1;
        }
        let first_unit = (batch.seeds[3] >> 5) as usize;
        let w = batch.unit_weight[first_unit];
        let x = (u64::MAX - work.base.total) / w + 1;
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
