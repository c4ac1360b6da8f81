//! Which kernel family a verified job's second result should come from: where the fleet has a live
//! worker of another family than the first result's, the job waits for it a while (a bug of one
//! family cannot confirm itself). A soft rule: it only orders work, never decides a count, and a job
//! waits at most [`crate::service::Config::family_wait`].

use std::collections::HashMap;
use std::time::Duration;

use nqueens_common::FamilySet;

use crate::durable::store::{JobRecord, JobState};

/// Identities of another family that must serve before a job waits for one: with a single one, the
/// second result of every job held for it would go to that identity, which a colluder claiming a rare
/// family would take to confirm its partner's lies (found by a review, 2026-11-29). With two or more,
/// the check still goes to whichever of them asks first.
pub const QUORUM: usize = 2;

/// What one lease call knows of the kernel families around it.
#[derive(Debug, Clone)]
pub struct Steer {
    /// The families of the asking identity's live workers' results.
    pub own: FamilySet,
    /// Every other identity that serves (live, not quarantined), with its live workers' families.
    pub others: Vec<(String, FamilySet)>,
    /// How long a job waits for another family, from its first result.
    pub wait: Duration,
    /// Now, in seconds since the Unix epoch (the clock of the results' `at_unix`).
    pub now_unix: u64,
}

impl Steer {
    /// What the lease call of identity `name` at `now` knows: its live workers' families, and every
    /// other live identity's that is not quarantined. A pass over the worker table: made only when a
    /// job could wait ([`Steer::may_wait`]), never for a lease of fresh jobs.
    pub fn of(
        workers: &super::workers::Workers,
        quarantined: &HashMap<String, String>,
        name: &str,
        now: tokio::time::Instant,
        timeout: Duration,
        wait: Duration,
    ) -> Steer {
        let (own, others) = workers.families(name, now, timeout);
        Steer {
            own,
            others: others
                .into_iter()
                .filter(|(n, _)| !quarantined.contains_key(n))
                .collect(),
            wait,
            now_unix: crate::durable::store::now_unix(),
        }
    }

    /// Whether the job of `record` could wait for another family at all: a verified job with one
    /// result, of a stated family (checked before any [`Steer`] is made).
    pub fn may_wait(record: &JobRecord) -> bool {
        record.state == JobState::Verifying
            && matches!(record.candidates.as_slice(), [first] if first.family().is_some())
    }

    /// Steers nothing (tests of what else decides a lease).
    #[cfg(test)]
    pub fn none() -> Steer {
        Steer {
            own: FamilySet::default(),
            others: Vec::new(),
            wait: Duration::ZERO,
            now_unix: 0,
        }
    }

    /// Whether the job of `record` waits for a worker of another family than the asking one: it is a
    /// verified job with one result, of a stated family that is the asking identity's only one, at
    /// least [`QUORUM`] serving identities other than the first result's compute another family, and the
    /// result is younger than the wait (one stamped later than now, a clock stepped back, waits for
    /// nobody).
    pub fn waits(&self, record: &JobRecord) -> bool {
        let (true, [first]) = (Steer::may_wait(record), record.candidates.as_slice()) else {
            return false;
        };
        let Some(family) = first.family() else {
            return false;
        };
        let young = self
            .now_unix
            .checked_sub(first.at_unix)
            .is_some_and(|age| age < self.wait.as_secs());
        self.own.only(family)
            && young
            && self
                .others
                .iter()
                .filter(|(name, f)| *name != first.worker && f.other_than(family))
                .count()
                >= QUORUM
    }
}

#[cfg(test)]
mod tests {
    use nqueens_common::{Family, JobResult};

    use super::*;
    use crate::durable::store::ResultRecord;

    fn waiting(family: Option<Family>, at_unix: u64) -> JobRecord {
        JobRecord {
            state: JobState::Verifying,
            candidates: vec![ResultRecord {
                result: JobResult {
                    total: 8,
                    unique8: Some(8),
                    nodes: 9,
                },
                worker: "a".into(),
                worker_id: "a-1".into(),
                lease: 1,
                at_unix,
                confirmed_by: Vec::new(),
                seal: Some(1),
                families: ResultRecord::families_of([family]),
            }],
            reason: None,
        }
    }

    /// A job waits only for a worker of the first result's family alone, while another family serves,
    /// and only for the wait; anything else (a dispute, a result naming no family, a worker of two
    /// families or of none yet, no other family live) is leased as before.
    #[test]
    fn a_job_waits_for_another_family_only_while_one_serves_and_only_a_while() {
        use Family::*;
        let set = |f: &[Family]| f.iter().copied().collect::<FamilySet>();
        let steer = Steer {
            own: set(&[Gpu]),
            others: vec![
                ("b".into(), set(&[Gpu])),
                ("c".into(), set(&[CpuLists])),
                ("d".into(), set(&[CpuStack, Gpu])),
            ],
            wait: Duration::from_secs(300),
            now_unix: 1_000,
        };
        let job = waiting(Some(Gpu), 900);
        assert!(steer.waits(&job));
        // Its wait is over.
        assert!(!steer.waits(&waiting(Some(Gpu), 700)));
        assert!(steer.waits(&waiting(Some(Gpu), 701)));
        // The first result of another family, or of none stated.
        assert!(!steer.waits(&waiting(Some(CpuLists), 900)));
        assert!(!steer.waits(&waiting(None, 900)));
        // A result stamped later than now (a clock stepped back) waits for nobody.
        assert!(!steer.waits(&waiting(Some(Gpu), 1_001)));
        assert!(steer.waits(&waiting(Some(Gpu), 1_000)));
        // The asking identity computes two families, or none yet.
        for own in [set(&[Gpu, CpuStack]), set(&[])] {
            assert!(!Steer {
                own,
                ..steer.clone()
            }
            .waits(&job));
        }
        // No other family serves; only the first result's own identity ("a") computes one beside a
        // second; or a single identity does, which would get every check held for it (a colluder
        // claiming a rare family).
        for others in [
            vec![("b".to_string(), set(&[Gpu]))],
            vec![
                ("a".to_string(), set(&[CpuLists])),
                ("c".to_string(), set(&[CpuLists])),
            ],
            vec![("b".into(), set(&[Gpu])), ("c".into(), set(&[CpuLists]))],
        ] {
            assert!(!Steer {
                others,
                ..steer.clone()
            }
            .waits(&job));
        }
        // A dispute, or a job with two results, is never held back.
        let mut disputed = job.clone();
        disputed.state = JobState::Disputed;
        assert!(!steer.waits(&disputed));
        let mut two = job.clone();
        two.candidates.push(two.candidates[0].clone());
        assert!(!steer.waits(&two));
        assert!(!Steer::none().waits(&job));
    }
}
