//! Estimating a run before starting it: a simple random sample of its jobs, drawn without replacement,
//! and the unbiased estimate of a population total (nodes, core-seconds, solutions) from it, with a
//! normal-approximation confidence interval that includes the finite-population correction; and the
//! two-stage form, where each sampled job's own total is estimated from a sample of its parts.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

/// An estimate of a total and its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Whether `x` lies inside the interval.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }

    /// The interval scaled by `k` (a change of unit).
    pub fn scaled(&self, k: f64) -> Interval {
        Interval {
            estimate: self.estimate * k,
            low: self.low * k,
            high: self.high * k,
        }
    }
}

/// `k` distinct indices of `0..population`, in increasing order, each set of `k` equally likely
/// (all of them when `k >= population`). Deterministic for a seed.
pub fn sample_indices(population: u64, k: u64, seed: u64) -> Vec<u64> {
    if k >= population {
        return (0..population).collect();
    }
    // Floyd's algorithm: k draws whatever the population's size.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut chosen = std::collections::BTreeSet::new();
    for j in population - k..population {
        let t = rng.random_range(0..=j);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    chosen.into_iter().collect()
}

/// The total over a population of `population` items estimated from the values of a simple random
/// sample of them (`population * mean`), with the interval `± z * population * s / sqrt(k) * fpc`. With
/// the whole population sampled the interval is the exact total. `z` = 1.96 gives 95 %.
pub fn population_total(population: u64, sample: &[f64], z: f64) -> Interval {
    total(population, sample, z, true)
}

/// The same from *estimated* unit totals (two-stage sampling: each sampled job's total estimated from
/// a sample of its parts). The interval is the usual "ultimate cluster" one, without the finite-
/// population correction and never exact: the spread of the estimated unit totals carries the
/// variance of both stages, and leaving out the correction errs on the wide side.
pub fn two_stage_total(population: u64, estimated_units: &[f64], z: f64) -> Interval {
    total(population, estimated_units, z, false)
}

fn total(population: u64, sample: &[f64], z: f64, exact_units: bool) -> Interval {
    let k = sample.len() as f64;
    let pop = population as f64;
    if sample.is_empty() {
        return Interval {
            estimate: f64::NAN,
            low: f64::NEG_INFINITY,
            high: f64::INFINITY,
        };
    }
    let mean = sample.iter().sum::<f64>() / k;
    let estimate = pop * mean;
    if exact_units && sample.len() as u64 >= population {
        return Interval {
            estimate,
            low: estimate,
            high: estimate,
        };
    }
    if sample.len() < 2 {
        return Interval {
            estimate,
            low: 0.0,
            high: f64::INFINITY,
        };
    }
    let var = sample.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1.0);
    let fpc = if exact_units {
        ((pop - k) / (pop - 1.0)).max(0.0).sqrt()
    } else {
        1.0
    };
    let half = z * pop * (var / k).sqrt() * fpc;
    Interval {
        estimate,
        low: (estimate - half).max(0.0),
        high: estimate + half,
    }
}

/// The two-sided normal quantile for a confidence level in (0, 1): 0.95 gives 1.96.
pub fn z_for(confidence: f64) -> f64 {
    // Acklam's rational approximation of the inverse normal CDF (relative error below 1.2e-9).
    let p = 1.0 - (1.0 - confidence) / 2.0;
    let a = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    let b = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    let c = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    let d = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
    };
    if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_distinct_sorted_and_deterministic() {
        let s = sample_indices(1_000, 50, 3);
        assert_eq!(s.len(), 50);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(s.iter().all(|&i| i < 1_000));
        assert_eq!(s, sample_indices(1_000, 50, 3));
        assert_ne!(s, sample_indices(1_000, 50, 4));
        assert_eq!(sample_indices(5, 9, 1), vec![0, 1, 2, 3, 4]);
        // Every index is drawn about equally often.
        let mut hits = [0u32; 10];
        for seed in 0..20_000 {
            for i in sample_indices(10, 3, seed) {
                hits[i as usize] += 1;
            }
        }
        assert!(
            hits.iter().all(|&h| (5_400..6_600).contains(&h)),
            "{hits:?}"
        );
    }

    #[test]
    fn normal_quantiles() {
        assert!((z_for(0.95) - 1.959_964).abs() < 1e-5);
        assert!((z_for(0.99) - 2.575_829).abs() < 1e-5);
        assert!((z_for(0.6827) - 1.0).abs() < 1e-3);
    }

    #[test]
    fn the_whole_population_gives_the_exact_total() {
        let all = [3.0, 5.0, 9.0];
        let i = population_total(3, &all, 1.96);
        assert_eq!((i.estimate, i.low, i.high), (17.0, 17.0, 17.0));
    }

    #[test]
    fn estimated_units_never_give_an_exact_total() {
        // Every job sampled, but each job's total itself estimated from parts: the interval keeps its
        // width, and it has no finite-population narrowing.
        let all = [3.0, 5.0, 9.0];
        let i = two_stage_total(3, &all, 1.96);
        assert_eq!(i.estimate, 17.0);
        assert!(i.low < 17.0 && i.high > 17.0, "{i:?}");
        let sampled = two_stage_total(300, &all, 1.96);
        let simple = population_total(300, &all, 1.96);
        assert_eq!(sampled.estimate, simple.estimate);
        assert!(sampled.high - sampled.low > simple.high - simple.low);
    }

    /// A skewed population like a run's jobs (a few jobs far larger than most): over many samples the
    /// 95 % interval holds the true total about 95 % of the time, and the estimate is unbiased.
    #[test]
    fn the_interval_covers_the_true_total_as_often_as_it_claims() {
        let population: Vec<f64> = (0..80u64)
            .map(|i| {
                let x = (i * 2_654_435_761 % 1_000) as f64 / 1_000.0;
                1e6 * (4.0 * x).exp()
            })
            .collect();
        let truth: f64 = population.iter().sum();
        let (trials, k) = (4_000, 24);
        let mut covered = 0;
        let mut mean_estimate = 0.0;
        for seed in 0..trials {
            let sample: Vec<f64> = sample_indices(80, k, seed)
                .into_iter()
                .map(|i| population[i as usize])
                .collect();
            let i = population_total(80, &sample, z_for(0.95));
            covered += i.contains(truth) as u32;
            mean_estimate += i.estimate / trials as f64;
        }
        let coverage = covered as f64 / trials as f64;
        assert!((0.91..0.98).contains(&coverage), "coverage {coverage}");
        assert!(
            (mean_estimate / truth - 1.0).abs() < 0.01,
            "{mean_estimate} vs {truth}"
        );
    }
}
