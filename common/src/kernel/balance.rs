//! The balance of a GPU launch: how evenly its seeds' nodes fell on the device's lanes, read from the
//! device's answer.

/// Lanes that step together on a GPU (a warp of an NVIDIA device).
pub const WARP: usize = 32;

/// How evenly a device's launches fell on its lanes, read from their answers (the nodes of each seed),
/// as the `bench --gpu` rows report it. A launch ends on its slowest seed. Where the lanes of a warp take
/// consecutive seeds, search one each and wait for the warp's slowest (`flat`, `local`, `shared`,
/// `compact`), the warp fill is the share of their steps that searched a node.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Balance {
    /// Launches measured.
    pub launches: u64,
    /// Seeds searched.
    pub seeds: u64,
    /// Nodes searched.
    pub nodes: u64,
    /// Lane steps the warps took: per [`WARP`] consecutive seeds, [`WARP`] times the largest's nodes.
    pub lane_steps: u64,
    /// The largest seed of any launch over that launch's nodes per searcher (a thread of the launch's
    /// grid, or a block for `coop`): above 1, one seed outlasts the even share of a searcher.
    pub largest_share: f64,
}

impl Balance {
    /// The balance of one launch's answer `out` (`(completions, nodes)` per seed) on a device with
    /// `searchers` searching at once (threads, or blocks where a block searches a seed together).
    pub fn of(out: &[u64], searchers: usize) -> Balance {
        fn nodes(c: &[u64]) -> impl Iterator<Item = u64> + '_ {
            c.chunks_exact(2).map(|o| o[1])
        }
        let total = nodes(out).fold(0u64, u64::saturating_add);
        let lane_steps = out
            .chunks(2 * WARP)
            .map(|w| nodes(w).max().unwrap_or(0).saturating_mul(WARP as u64))
            .fold(0u64, u64::saturating_add);
        let largest = nodes(out).max().unwrap_or(0);
        let share = total as f64 / searchers.max(1) as f64;
        Balance {
            launches: 1,
            seeds: (out.len() / 2) as u64,
            nodes: total,
            lane_steps,
            largest_share: if total == 0 {
                0.0
            } else {
                largest as f64 / share
            },
        }
    }

    /// Adds another launch's (or device's) balance.
    pub fn add(&mut self, other: &Balance) {
        self.launches += other.launches;
        self.seeds = self.seeds.saturating_add(other.seeds);
        self.nodes = self.nodes.saturating_add(other.nodes);
        self.lane_steps = self.lane_steps.saturating_add(other.lane_steps);
        self.largest_share = self.largest_share.max(other.largest_share);
    }

    /// The share of the warps' lane steps that searched a node (1: no lane ever waited for another).
    pub fn warp_fill(&self) -> f64 {
        if self.lane_steps == 0 {
            return 0.0;
        }
        self.nodes as f64 / self.lane_steps as f64
    }
}

impl std::fmt::Display for Balance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warp fill {:.0} %, largest seed {:.2}x a searcher's share ({} launches, {} seeds)",
            100.0 * self.warp_fill(),
            self.largest_share,
            self.launches,
            self.seeds
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Balance: the lanes of each warp wait for its largest seed; the largest seed is measured against
    /// a searcher's even share of the launch.
    #[test]
    fn balance_of_an_answer() {
        // 64 seeds: a first warp of 1-node seeds but one of 33, a second warp all of 2 nodes.
        let mut out = vec![0u64; 128];
        for (i, o) in out.chunks_exact_mut(2).enumerate() {
            o[1] = if i < 32 { 1 } else { 2 };
        }
        out[1] = 33;
        let b = Balance::of(&out, 8);
        let nodes = 33 + 31 + 64;
        assert_eq!((b.launches, b.seeds, b.nodes), (1, 64, nodes));
        assert_eq!(b.lane_steps, 32 * 33 + 32 * 2);
        assert!((b.warp_fill() - nodes as f64 / (32.0 * 35.0)).abs() < 1e-12);
        assert!((b.largest_share - 33.0 / (nodes as f64 / 8.0)).abs() < 1e-12);
        let mut sum = Balance::of(&out[64..], 8);
        assert!((sum.warp_fill() - 1.0).abs() < 1e-12);
        sum.add(&b);
        assert_eq!((sum.launches, sum.seeds, sum.nodes), (2, 96, nodes + 64));
        assert_eq!(sum.lane_steps, b.lane_steps + 64);
        assert_eq!(sum.largest_share, b.largest_share);
        assert_eq!(Balance::of(&[], 16).warp_fill(), 0.0);
        assert_eq!(Balance::of(&[], 16).largest_share, 0.0);
        assert!(
            b.to_string().starts_with(
                "warp fill 11 %, largest seed 2.06x a searcher's share (1 launches, 64 seeds)"
            ),
            "{b}"
        );
    }
}
