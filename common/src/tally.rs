//! Exact run totals: `u128` sums of job results with checked additions, so that no overflow can go
//! unnoticed (a volunteer run for N = 26 once died of exactly that).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::JobResult;

/// The running sums of a run's job results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tally {
    /// Sum of the jobs' weighted totals.
    pub total: u128,
    /// Sum of the jobs' `unique8`, or `None` once a job without one was added.
    pub unique8: Option<u128>,
    /// Search nodes of all jobs.
    pub nodes: u128,
    /// Number of job results added.
    pub jobs: u64,
}

impl Tally {
    /// An empty tally for a strategy that does (`with_unique`) or does not count unique solutions.
    pub fn new(with_unique: bool) -> Tally {
        Tally {
            unique8: with_unique.then_some(0),
            ..Tally::default()
        }
    }

    /// Adds one job's result; on overflow nothing is changed and an error is returned.
    pub fn add(&mut self, r: &JobResult) -> Result<()> {
        let one = Tally {
            total: r.total as u128,
            unique8: r.unique8.map(u128::from),
            nodes: r.nodes as u128,
            jobs: 1,
        };
        self.merge(&one)
    }

    /// Adds another tally (for example one compute thread's), checked like [`Tally::add`].
    pub fn merge(&mut self, other: &Tally) -> Result<()> {
        let total = self
            .total
            .checked_add(other.total)
            .ok_or(Error::Overflow("total"))?;
        let unique8 = match (self.unique8, other.unique8) {
            (Some(u), Some(x)) => Some(u.checked_add(x).ok_or(Error::Overflow("unique"))?),
            _ => None,
        };
        let nodes = self
            .nodes
            .checked_add(other.nodes)
            .ok_or(Error::Overflow("nodes"))?;
        let jobs = self
            .jobs
            .checked_add(other.jobs)
            .ok_or(Error::Overflow("jobs"))?;
        *self = Tally {
            total,
            unique8,
            nodes,
            jobs,
        };
        Ok(())
    }

    /// Takes one job's result out again (a result revoked after its worker was found wrong); an error,
    /// changing nothing, if the tally does not hold that much.
    pub fn remove(&mut self, r: &JobResult) -> Result<()> {
        let gone = Error::Inconsistent("removing a result the tally does not hold".into());
        let total = self
            .total
            .checked_sub(r.total as u128)
            .ok_or(gone.clone())?;
        let unique8 = match (self.unique8, r.unique8) {
            (Some(u), Some(x)) => Some(u.checked_sub(x as u128).ok_or(gone.clone())?),
            (u, _) => u,
        };
        let nodes = self
            .nodes
            .checked_sub(r.nodes as u128)
            .ok_or(gone.clone())?;
        let jobs = self.jobs.checked_sub(1).ok_or(gone)?;
        *self = Tally {
            total,
            unique8,
            nodes,
            jobs,
        };
        Ok(())
    }

    /// The number of unique solutions; an error if the Burnside sum is not a multiple of 8, which means
    /// the results are incomplete or corrupted.
    pub fn unique(&self) -> Result<Option<u128>> {
        match self.unique8 {
            None => Ok(None),
            Some(u) if u % 8 == 0 => Ok(Some(u / 8)),
            Some(u) => Err(Error::Inconsistent(format!(
                "unique-count numerator {u} is not a multiple of 8"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_an_error_and_changes_nothing() {
        let mut t = Tally::new(true);
        t.total = u128::MAX - 1;
        let before = t;
        let r = JobResult {
            total: 5,
            unique8: Some(8),
            nodes: 1,
        };
        assert_eq!(t.add(&r), Err(Error::Overflow("total")));
        assert_eq!(t, before);
    }

    #[test]
    fn unique_needs_a_multiple_of_eight() {
        let mut t = Tally::new(true);
        t.add(&JobResult {
            total: 16,
            unique8: Some(12),
            nodes: 0,
        })
        .unwrap();
        assert!(t.unique().is_err());
        t.add(&JobResult {
            total: 8,
            unique8: Some(4),
            nodes: 0,
        })
        .unwrap();
        assert_eq!(t.unique().unwrap(), Some(2));
        t.add(&JobResult {
            total: 2,
            unique8: None,
            nodes: 0,
        })
        .unwrap();
        assert_eq!(t.unique().unwrap(), None);
    }
}

/// Tests written for the mutants `cargo mutants` left alive in this file (issue 42).
#[cfg(test)]
mod mutants_found {
    use super::*;

    fn r(total: u64, unique8: Option<u64>, nodes: u64) -> JobResult {
        JobResult {
            total,
            unique8,
            nodes,
        }
    }

    /// A result taken out leaves the tally as if it was never added; one the tally does not hold is an
    /// error that changes nothing (a revocation depends on both).
    #[test]
    fn a_result_taken_out_leaves_what_was_there_before() {
        let mut t = Tally::new(true);
        t.add(&r(10, Some(16), 100)).unwrap();
        let before = t;
        t.add(&r(4, Some(8), 30)).unwrap();
        t.remove(&r(4, Some(8), 30)).unwrap();
        assert_eq!(t, before);
        for more in [r(11, Some(0), 0), r(0, Some(17), 0), r(0, Some(0), 101)] {
            assert!(
                matches!(t.remove(&more), Err(Error::Inconsistent(_))),
                "{more:?}"
            );
            assert_eq!(t, before, "{more:?}");
        }
        // Every job taken out: no job left to take.
        t.remove(&r(10, Some(16), 100)).unwrap();
        assert_eq!(t, Tally::new(true));
        assert!(t.remove(&r(0, Some(0), 0)).is_err());
        assert_eq!(t, Tally::new(true));
        // A tally without unique counts keeps none.
        let mut m = Tally::new(false);
        m.add(&r(6, None, 2)).unwrap();
        m.remove(&r(6, None, 2)).unwrap();
        assert_eq!(m, Tally::new(false));
    }
}
