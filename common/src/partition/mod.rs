//! Partition strategies: how the search space of one N is split into weighted partial boards
//! (sub-problems), and how sub-problems are grouped into jobs.

pub mod d4;
pub mod mirror;
pub mod ring;
pub mod walk;

use walk::{Advance, Budget};

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::board::PartialBoard;
use crate::error::{check_n, Error, Result};
use crate::key::JobKey;
use crate::symmetry::SymmetrySet;

/// Most jobs a plan may have. The job list is never stored, but every job done costs about 0.7 KiB in the
/// store and the ledger, and a coordinator enumerates the list at every start: 50 million jobs (twice the
/// default plan of N = 28) is about 35 GiB of results and a few seconds of enumeration. A deeper plan is
/// refused before it can exhaust the coordinator.
pub const MAX_JOBS: u64 = 50_000_000;

/// Enumeration steps (columns tried) that [`Plan::fingerprint_within`] allows per job found, beyond
/// [`MIN_STEPS`]. Useful plans take under 4 (measured in `common/tests/jobs.rs`); a depth that makes the
/// prefix search itself long (d4 split 29 at N = 32) runs out of steps and is refused, after about
/// [`MIN_STEPS`] steps (milliseconds), instead of being enumerated for minutes.
pub const STEPS_PER_JOB: u64 = 64;

/// Enumeration steps every plan may take whatever its job count.
pub const MIN_STEPS: u64 = 1 << 20;

/// Enumeration steps a stored run's plan may take per job it records when it resumes
/// ([`Plan::fingerprint_of_stored`]): far more than a useful plan takes (under 4), so that runs made
/// before the limits of run creation resume.
pub const RESUME_STEPS_PER_JOB: u64 = 4096;

/// Enumeration steps a list of a plan's keys pays per key ([`Plan::jobs_paid_per_key`]): what a stored
/// run's plan may take per job it records, and per job found.
pub const STEPS_PER_LISTED_JOB: u64 = RESUME_STEPS_PER_JOB + STEPS_PER_JOB;

/// A plan's fingerprint taken key by key ([`Plan::fingerprint`]): the number of jobs and a 64-bit
/// FNV-1a hash of their keys in order, each key's length first, so that two different key lists never
/// hash the same byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHash {
    hash: u64,
    jobs: u64,
}

impl Default for KeyHash {
    fn default() -> Self {
        KeyHash {
            hash: 0xcbf2_9ce4_8422_2325,
            jobs: 0,
        }
    }
}

impl KeyHash {
    /// Takes the next key.
    pub fn push(&mut self, key: &[u8]) {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        for &b in std::iter::once(&(key.len() as u8)).chain(key) {
            self.hash = (self.hash ^ b as u64).wrapping_mul(PRIME);
        }
        self.jobs += 1;
    }

    /// The keys taken so far.
    pub fn jobs(&self) -> u64 {
        self.jobs
    }

    /// The number of keys and their hash.
    pub fn finish(&self) -> (u64, u64) {
        (self.jobs, self.hash)
    }
}

/// How the search space is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// One queen on each outer line, one placement per class of the 8 symmetries (the default).
    #[default]
    D4,
    /// A prefix of rows, halved by the left/right mirror.
    Mirror,
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::D4 => "d4",
            Strategy::Mirror => "mirror",
        })
    }
}

impl FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Strategy> {
        match s {
            "d4" => Ok(Strategy::D4),
            "mirror" => Ok(Strategy::Mirror),
            other => Err(Error::UnknownStrategy(other.to_string())),
        }
    }
}

/// A weighted partial board: the run's total is the sum of `weight * completions` over sub-problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubProblem {
    /// The pre-placed queens.
    pub board: PartialBoard,
    /// How many boards of the full search space this one stands for.
    pub weight: u8,
    /// The symmetries mapping the sub-problem to itself (only meaningful for `d4`).
    pub stabiliser: SymmetrySet,
}

/// The partition of one N under one strategy: a checked, deterministic description of its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Plan {
    n: u8,
    strategy: Strategy,
    depth: u8,
}

/// What `plan` reports about a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Board size.
    pub n: u8,
    /// Strategy.
    pub strategy: Strategy,
    /// Number of sub-problems (weighted partial boards).
    pub subproblems: u64,
    /// Sub-problems by weight.
    pub by_weight: BTreeMap<u8, u64>,
    /// Number of jobs.
    pub jobs: u64,
    /// Rows each job pre-places beyond its group (mirror: the prefix depth; d4: the split depth).
    pub depth: u8,
}

impl Plan {
    /// The plan for `n` with the strategy's default job depth.
    pub fn new(n: u32, strategy: Strategy) -> Result<Plan> {
        let n = check_n(n)?;
        let depth = match strategy {
            Strategy::Mirror => mirror::default_depth(n),
            Strategy::D4 => d4::default_split(n),
        };
        Ok(Plan { n, strategy, depth })
    }

    /// The plan with an explicit job depth (mirror: rows in the prefix; d4: inner rows per job key).
    pub fn with_depth(n: u32, strategy: Strategy, depth: u8) -> Result<Plan> {
        let n = check_n(n)?;
        let ok = match strategy {
            Strategy::Mirror => (mirror::min_depth(n)..=n).contains(&depth),
            Strategy::D4 => depth <= n.saturating_sub(3),
        };
        if !ok {
            return Err(Error::InvalidSetting(format!(
                "depth {depth} is not valid for {strategy} at N = {n}"
            )));
        }
        Ok(Plan { n, strategy, depth })
    }

    /// Board size.
    pub fn n(&self) -> u8 {
        self.n
    }

    /// Strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Job depth (see [`Plan::with_depth`]).
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// The sub-problems, in a deterministic order.
    pub fn subproblems(&self) -> Box<dyn Iterator<Item = SubProblem> + Send> {
        match self.strategy {
            Strategy::Mirror => Box::new(mirror::subproblems(self.n, self.depth)),
            Strategy::D4 => Box::new(d4::subproblems(self.n)),
        }
    }

    /// The jobs' keys, in a deterministic order (the same on every call and every machine).
    pub fn jobs(&self) -> Box<dyn Iterator<Item = JobKey> + Send> {
        self.jobs_within(Budget::unlimited())
    }

    /// [`Plan::jobs`], ending early once `budget` is spent.
    pub fn jobs_within(&self, budget: Budget) -> Box<dyn Iterator<Item = JobKey> + Send> {
        match self.strategy {
            Strategy::Mirror => {
                let depth = self.depth;
                Box::new(
                    mirror::subproblems_within(self.n, depth, budget)
                        .map(move |s| mirror::key(&s.board, depth)),
                )
            }
            Strategy::D4 => Box::new(d4::jobs_within(self.n, self.depth, budget)),
        }
    }

    /// The number of jobs and a 64-bit FNV-1a hash of their keys in order. Stored with a run, it lets a
    /// coordinator refuse to resume a run whose job list this build would enumerate differently.
    pub fn fingerprint(&self) -> (u64, u64) {
        self.fingerprint_with(u64::MAX, &Budget::unlimited())
            .expect("no plan has u64::MAX jobs")
    }

    /// [`Plan::fingerprint`], stopping as soon as the plan has more than `limit` jobs, or once
    /// enumerating it takes more than [`STEPS_PER_JOB`] search steps per job found (beyond
    /// [`MIN_STEPS`]); then an error naming the limit. The cost of a request for an absurd plan is
    /// bounded by the limit, not by the plan.
    pub fn fingerprint_within(&self, limit: u64) -> Result<(u64, u64)> {
        // Each job found earns the walk STEPS_PER_JOB more steps: a plan whose jobs are rare (a depth
        // so deep that reaching each takes a long search) runs dry after about MIN_STEPS steps.
        self.fingerprint_with(limit, &Budget::steps(MIN_STEPS))
    }

    /// [`Plan::fingerprint`] of a stored run that records `jobs` jobs, when it resumes: at most `jobs`
    /// jobs, and [`RESUME_STEPS_PER_JOB`] enumeration steps a recorded job (beyond [`MIN_STEPS`]),
    /// granted up front. A run that a build before the limits of run creation made (more than
    /// [`MAX_JOBS`] jobs, or a split deep enough to take more than [`STEPS_PER_JOB`] steps a job) still
    /// resumes; a damaged record (its depth changed into a plan whose enumeration never ends) is refused
    /// in a time bounded by the count it records.
    pub fn fingerprint_of_stored(&self, jobs: u64) -> Result<(u64, u64)> {
        let steps = jobs
            .saturating_mul(RESUME_STEPS_PER_JOB)
            .saturating_add(MIN_STEPS);
        self.fingerprint_with(jobs, &Budget::steps(steps))
    }

    /// [`Plan::fingerprint_within`], ended early (with [`Error::Cancelled`]) once any flag of `cancel`
    /// is set.
    pub fn fingerprint_cancellable(
        &self,
        limit: u64,
        cancel: impl IntoIterator<Item = Arc<AtomicBool>>,
    ) -> Result<(u64, u64)> {
        let budget = cancel
            .into_iter()
            .fold(Budget::steps(MIN_STEPS), Budget::cancelled_by);
        self.fingerprint_with(limit, &budget)
    }

    /// The plan's jobs for a reader that checks a list of keys one by one against them ([`KeyHash`]),
    /// and their budget: [`MIN_STEPS`] enumeration steps, to which the reader grants
    /// [`STEPS_PER_LISTED_JOB`] for each key its list holds before it asks for the next job (and once
    /// more before it asks whether the plan ends). The enumeration then costs what the list pays for:
    /// a hostile list (a header claiming a deep plan of many jobs) is refused in a time bounded by its
    /// length, not by the plan. The budget is exhausted when the enumeration stopped short of the
    /// plan's end: the plan is too deep for the list.
    pub fn jobs_paid_per_key(&self) -> (Box<dyn Iterator<Item = JobKey> + Send>, Budget) {
        let budget = Budget::steps(MIN_STEPS);
        (self.jobs_within(budget.clone()), budget)
    }

    fn fingerprint_with(&self, limit: u64, budget: &Budget) -> Result<(u64, u64)> {
        let mut hash = KeyHash::default();
        let mut over = false;
        let mut visit = |key: &[u8]| {
            if hash.jobs() == limit {
                over = true;
                return false;
            }
            hash.push(key);
            budget.grant(STEPS_PER_JOB);
            true
        };
        match self.strategy {
            Strategy::Mirror => {
                let n = self.n;
                let mut walk = mirror::walk(n, self.depth, budget.clone());
                while let Some(cols) = walk.advance() {
                    if mirror::weight(n, cols) > 0 && !visit(cols) {
                        break;
                    }
                }
            }
            Strategy::D4 => d4::visit_keys(self.n, self.depth, budget, visit),
        }
        if budget.cancelled() {
            return Err(Error::Cancelled("enumerating the plan's jobs"));
        }
        if over {
            return Err(Error::InvalidSetting(format!(
                "{} at N = {} with depth {} has more than {limit} jobs, the most a run may have; use a smaller depth",
                self.strategy, self.n, self.depth
            )));
        }
        if budget.exhausted() {
            return Err(Error::InvalidSetting(format!(
                "{} at N = {} with depth {} is too deep: its job list takes more than {STEPS_PER_JOB} search steps per job to enumerate; use a smaller depth",
                self.strategy, self.n, self.depth
            )));
        }
        Ok(hash.finish())
    }

    /// Counts sub-problems and jobs without computing anything; a plan over the bounds of a run's
    /// creation ([`Plan::fingerprint_within`] at [`MAX_JOBS`]) is refused first, before a walk of its
    /// tree could take hours.
    pub fn summary(&self) -> Result<Summary> {
        // The walk that bounds the plan counts its jobs too.
        let (jobs, _) = self.fingerprint_within(MAX_JOBS)?;
        let mut by_weight = BTreeMap::new();
        let mut subproblems = 0;
        for s in self.subproblems() {
            *by_weight.entry(s.weight).or_insert(0) += 1;
            subproblems += 1;
        }
        Ok(Summary {
            n: self.n,
            strategy: self.strategy,
            subproblems,
            by_weight,
            jobs,
            depth: self.depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprint is FNV-1a over each key's length and bytes, as stored runs recorded it: values
    /// computed apart (with Python), so that a changed hash cannot pass unseen.
    #[test]
    fn keys_hash_as_stored_runs_recorded_them() {
        let mut h = KeyHash::default();
        assert_eq!(h.finish(), (0, 0xcbf2_9ce4_8422_2325));
        h.push(&[0, 2, 5]);
        assert_eq!(h.finish(), (1, 0xed19_5387_f3fe_051b));
        h.push(&[1, 3]);
        assert_eq!(h.finish(), (2, 0x3239_6e31_0148_50d7));
        assert_eq!(h.jobs(), 2);
    }

    /// A plan's fingerprint within a limit of jobs: refused past it, the same as without one within it.
    #[test]
    fn a_fingerprint_within_a_limit_stops_past_it() {
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let (jobs, hash) = plan.fingerprint();
        assert!(jobs > 1);
        assert_eq!(plan.fingerprint_within(jobs).unwrap(), (jobs, hash));
        let e = plan.fingerprint_within(jobs - 1).unwrap_err().to_string();
        assert!(e.contains(&format!("more than {} jobs", jobs - 1)), "{e}");
    }
}
