//! Counts against the published tables (OEIS A000170 and A002562, copied from `shared/reference/` into
//! `tests/data/`), under both strategies, and the two strategies against each other.

use nqueens_common::{Plan, Strategy, Tally};

fn reference() -> Vec<(u32, u128, u128)> {
    include_str!("data/solution-counts.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

fn count(n: u32, strategy: Strategy, depth: Option<u8>) -> Tally {
    let plan = match depth {
        Some(d) => Plan::with_depth(n, strategy, d).unwrap(),
        None => Plan::new(n, strategy).unwrap(),
    };
    let mut tally = Tally::new(strategy == Strategy::D4);
    for key in plan.jobs() {
        tally.add(&plan.job(&key).unwrap().run()).unwrap();
    }
    tally
}

#[test]
fn totals_and_unique_counts_for_n_1_to_15() {
    let table = reference();
    assert_eq!(table.len(), 27, "the reference table lists N = 1..27");
    for &(n, total, unique) in table.iter().filter(|r| r.0 <= 15) {
        let d4 = count(n, Strategy::D4, None);
        assert_eq!(d4.total, total, "d4 total, N = {n}");
        assert_eq!(d4.unique().unwrap(), Some(unique), "d4 unique, N = {n}");
        let mirror = count(n, Strategy::Mirror, None);
        assert_eq!(mirror.total, total, "mirror total, N = {n}");
        assert_eq!(mirror.unique().unwrap(), None);
    }
}

#[test]
fn job_depth_changes_the_split_not_the_count() {
    for n in [8u32, 11, 12] {
        let base = count(n, Strategy::D4, Some(0));
        // Depth 4 is the default from N = 27 (depths 1 to 3 from N = 21): each is checked here against
        // the unsplit count, up to the deepest split the plan allows.
        let deepest = (1..=6u8)
            .take_while(|&d| Plan::with_depth(n, Strategy::D4, d).is_ok())
            .last()
            .unwrap_or(0);
        assert!(n < 12 || deepest >= 4, "N = {n}: depth 4 untested");
        eprintln!("N = {n}: depths 1 to {deepest}");
        for depth in 1..=deepest {
            let split = count(n, Strategy::D4, Some(depth));
            assert_eq!(
                (split.total, split.unique8),
                (base.total, base.unique8),
                "d4 N = {n} depth {depth}"
            );
        }
        let shallow = count(n, Strategy::Mirror, Some(2));
        for depth in 3..=5 {
            assert_eq!(
                count(n, Strategy::Mirror, Some(depth)).total,
                shallow.total,
                "mirror N = {n} depth {depth}"
            );
        }
    }
}

#[test]
fn the_two_strategies_agree_and_d4_searches_fewer_nodes() {
    for n in [12u32, 14] {
        let d4 = count(n, Strategy::D4, None);
        let mirror = count(n, Strategy::Mirror, None);
        assert_eq!(d4.total, mirror.total);
        assert!(
            d4.nodes * 2 < mirror.nodes,
            "N = {n}: d4 {} nodes, mirror {}",
            d4.nodes,
            mirror.nodes
        );
    }
}

/// A mirror job is handed to the kernel split two rows below its prefix (so that its searches fill the
/// widest vector); the queens placed by those splits are nodes of its tree too. Each job's nodes must be
/// the plain recursive walk's over its prefix board, whatever the split, at every depth (prefixes that
/// leave two rows, one, or none included).
#[test]
fn mirror_jobs_count_every_node_of_their_sub_problems() {
    use nqueens_common::kernel::{completions, Problem};
    use nqueens_common::PartialBoard;
    for n in 1u32..=11 {
        let deepest = if n <= 9 { n } else { 4 };
        for depth in 1..=deepest as u8 {
            let Ok(plan) = Plan::with_depth(n, Strategy::Mirror, depth) else {
                continue;
            };
            for key in plan.jobs() {
                let queens: Vec<(u32, u32)> = key
                    .0
                    .iter()
                    .enumerate()
                    .map(|(row, &col)| (row as u32, col as u32))
                    .collect();
                let board = PartialBoard::from_queens(n, &queens).unwrap();
                let walked = completions(&Problem::new(board), &mut |_| {}).nodes;
                let job = plan.job(&key).unwrap().run();
                assert_eq!(job.nodes, walked, "N = {n} depth {depth} job {key}");
            }
        }
    }
}

/// The d4 sub-problems are the orbits of ring placements under the 8 symmetries, counted here
/// independently: every valid ring board is mapped to the smallest tuple among its transformed boards.
#[test]
fn d4_sub_problems_are_the_orbits_of_ring_placements() {
    use nqueens_common::partition::ring;
    use nqueens_common::Symmetry;
    use std::collections::{BTreeMap, BTreeSet};
    for n in 4u8..=9 {
        let p = n as usize;
        let mut orbits: BTreeMap<[u8; 4], BTreeSet<[u8; 4]>> = BTreeMap::new();
        for i in 0..p.pow(4) {
            let t = [
                (i / (p * p * p)) as u8,
                (i / (p * p) % p) as u8,
                (i / p % p) as u8,
                (i % p) as u8,
            ];
            let Some(board) = ring::ring_board(n, t) else {
                continue;
            };
            let images: BTreeSet<[u8; 4]> = Symmetry::ALL
                .iter()
                .map(|g| ring::ring_tuple(&g.apply_board(&board)).unwrap())
                .collect();
            orbits.insert(*images.first().unwrap(), images);
        }
        let mut by_weight = BTreeMap::new();
        for members in orbits.values() {
            *by_weight.entry(members.len() as u8).or_insert(0u64) += 1;
        }
        let summary = Plan::new(n as u32, Strategy::D4)
            .unwrap()
            .summary()
            .unwrap();
        assert_eq!(summary.subproblems, orbits.len() as u64, "N = {n}");
        assert_eq!(summary.by_weight, by_weight, "N = {n}");
    }
}

#[test]
fn every_solution_is_printed_once_and_one_per_class_with_unique() {
    use nqueens_common::solve::{is_canonical, is_solution, Solutions};
    for (n, total, unique) in reference().into_iter().filter(|r| r.0 <= 10) {
        let all: Vec<Vec<usize>> = Solutions::new(n as usize).collect();
        assert_eq!(all.len() as u128, total, "N = {n}");
        assert!(all.iter().all(|s| is_solution(s)), "N = {n}");
        assert!(
            all.windows(2).all(|w| w[0] < w[1]),
            "sorted and distinct, N = {n}"
        );
        let classes = all.iter().filter(|s| is_canonical(s)).count();
        assert_eq!(classes as u128, unique, "N = {n}");
    }
}

/// Every kernel variant this CPU runs, not only the one chosen at run time, on every job of every N
/// from 1 to 14 under both strategies: the published totals (and unique counts), and job by job the
/// scalar kernel's exact results, nodes included. Before, the variants not chosen ran only on random
/// boards of N = 5 to 12 and a few boards of N = 32 (found by a review, 2026-11-24, a later session).
#[test]
fn every_variant_counts_every_job_of_n_1_to_14() {
    use nqueens_common::kernel::{self, Variant};
    let table = reference();
    for variant in Variant::available() {
        for &(n, total, unique) in table.iter().filter(|r| r.0 <= 14) {
            for strategy in [Strategy::D4, Strategy::Mirror] {
                let plan = Plan::new(n, strategy).unwrap();
                let mut tally = Tally::new(strategy == Strategy::D4);
                for key in plan.jobs() {
                    let work = plan.job(&key).unwrap().work();
                    let units = || work.units.iter().copied();
                    let result = work.finish(kernel::run_with(variant, units())).unwrap();
                    let scalar = work.finish(kernel::run_scalar(units())).unwrap();
                    assert_eq!(result, scalar, "{variant}, N = {n} {strategy} job {key}");
                    tally.add(&result).unwrap();
                }
                assert_eq!(tally.total, total, "{variant}, N = {n} {strategy}");
                if strategy == Strategy::D4 {
                    assert_eq!(tally.unique().unwrap(), Some(unique), "{variant}, N = {n}");
                }
            }
        }
    }
}
