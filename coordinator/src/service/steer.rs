//! Who gives a verified job its second result. Where the fleet has a live worker of another kernel
//! family than the first result's, the job waits for it a while (a bug of one family cannot confirm
//! itself). And for a while after the first result, only a few of the identities that serve may give
//! it, drawn for that job with a secret of this incarnation ([`DRAWN`]): before, the next lease call
//! took it, so the first result's sender could have a partner ask at once and confirm its lie (found
//! by a review, 2026-12-01). Soft rules: they only order work, never decide a count; the family wait
//! ends after [`crate::service::Config::family_wait`], and the draw admits twice as many identities
//! each such period.

use std::collections::HashMap;
use std::hash::Hasher;
use std::time::Duration;

use nqueens_common::{FamilySet, JobKey};

use crate::durable::store::{JobRecord, JobState};

/// How many of the serving identities the draw admits to give a job its second result in the first
/// period after its first result; twice as many each later period. Where no more serve, it holds
/// nothing back.
pub const DRAWN: usize = 4;

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
    /// The asking identity.
    pub name: String,
    /// The secret of the draw (this incarnation's).
    pub secret: [u8; 16],
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
        (wait, secret): (Duration, [u8; 16]),
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
            name: name.to_string(),
            secret,
        }
    }

    /// Whether the job of `record` could wait at all: a verified job with one result (checked before
    /// any [`Steer`] is made).
    pub fn may_wait(record: &JobRecord) -> bool {
        record.state == JobState::Verifying && record.candidates.len() == 1
    }

    /// Steers nothing (tests of what else decides a lease).
    #[cfg(test)]
    pub fn none() -> Steer {
        Steer {
            own: FamilySet::default(),
            others: Vec::new(),
            wait: Duration::ZERO,
            now_unix: 0,
            name: String::new(),
            secret: [0; 16],
        }
    }

    /// Whether job `key` of run `run`, whose one result is `record`'s, waits for another identity
    /// than the asking one: for another family ([`Steer::waits`]), or for one the draw admits
    /// ([`Steer::admits`]).
    pub fn holds(&self, run: u64, key: &JobKey, record: &JobRecord) -> bool {
        Steer::may_wait(record) && (self.waits(record) || !self.admits(run, key, record))
    }

    /// Whether the draw admits the asking identity to give job `key` of run `run` its one result's
    /// second: always where at most [`DRAWN`] identities could (the asking one and the others serving,
    /// the first result's left out, and while the job is steered to another family, those of another
    /// family than its first result's alone), else with a chance of [`DRAWN`] over their number, doubled for
    /// each period of the wait since the first result (one stamped later than now, a clock stepped
    /// back, admits everyone). Drawn by a keyed hash of the job, the first result's lease and the
    /// identity: the same answer for each call, and none a worker can foresee.
    pub fn admits(&self, run: u64, key: &JobKey, record: &JobRecord) -> bool {
        let [first] = record.candidates.as_slice() else {
            return true;
        };
        let Some(age) = self.now_unix.checked_sub(first.at_unix) else {
            return true;
        };
        let periods = age.checked_div(self.wait.as_secs()).unwrap_or(u64::MAX);
        let steered = self.steered_from(record);
        let could = 1 + self
            .others
            .iter()
            .filter(|(name, f)| *name != first.worker && steered.is_none_or(|s| f.other_than(s)))
            .count();
        let admitted = match periods {
            p @ 0..32 => DRAWN << p,
            _ => usize::MAX,
        };
        if could <= admitted {
            return true;
        }
        let mut h = siphasher::sip::SipHasher24::new_with_key(&self.secret);
        h.write_u64(run);
        h.write_usize(key.0.len());
        h.write(&key.0);
        h.write_u64(first.lease);
        h.write_usize(self.name.len());
        h.write(self.name.as_bytes());
        // A share `admitted / could` of the hashes, in 128 bits.
        u128::from(h.finish()) * (could as u128) < (admitted as u128) << 64
    }

    /// Whether the job of `record` waits for a worker of another family than the asking one: it is
    /// steered away from its first result's family ([`Steer::steered_from`]), the asking identity's
    /// only one.
    pub fn waits(&self, record: &JobRecord) -> bool {
        self.steered_from(record)
            .is_some_and(|family| self.own.only(family))
    }

    /// The family a job is steered away from: its first result's, where it is a verified job with one
    /// result of a stated family, at least [`QUORUM`] serving identities other than the first result's
    /// compute another family, and the result is younger than the wait (one stamped later than now, a
    /// clock stepped back, is steered nowhere).
    fn steered_from(&self, record: &JobRecord) -> Option<nqueens_common::Family> {
        let (true, [first]) = (Steer::may_wait(record), record.candidates.as_slice()) else {
            return None;
        };
        let family = first.family()?;
        let young = self
            .now_unix
            .checked_sub(first.at_unix)
            .is_some_and(|age| age < self.wait.as_secs());
        let others = self
            .others
            .iter()
            .filter(|(name, f)| *name != first.worker && f.other_than(family))
            .count();
        (young && others >= QUORUM).then_some(family)
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
            name: "x".into(),
            secret: [9; 16],
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

    /// The draw of who may give a job its second result: with `could` identities serving beside the
    /// first result's, about [`DRAWN`] of them are admitted in the first period, twice as many each
    /// period after, each job its own; none of them held back where at most [`DRAWN`] could. A clock
    /// stepped back admits all. Another secret draws others.
    #[test]
    fn a_few_drawn_identities_may_give_a_second_result_then_twice_as_many_each_period() {
        let key = |i: u8| JobKey(vec![0, 1, i]);
        let serving = |count: usize| Steer {
            own: FamilySet::default(),
            others: (0..count)
                .map(|i| (format!("w{i}"), FamilySet::default()))
                .chain([("a".to_string(), FamilySet::default())])
                .collect(),
            wait: Duration::from_secs(300),
            now_unix: 1_000,
            name: String::new(),
            secret: [9; 16],
        };
        // Which of 1,000 identities (the asking one among them) the draw admits for job `i`.
        let admitted = |steer: &Steer, i: u8, at_unix: u64| -> Vec<usize> {
            let job = waiting(None, at_unix);
            (0..1000)
                .filter(|&n| {
                    let asking = Steer {
                        name: format!("w{n}"),
                        others: steer
                            .others
                            .iter()
                            .filter(|(o, _)| *o != format!("w{n}"))
                            .cloned()
                            .collect(),
                        ..steer.clone()
                    };
                    asking.admits(7, &key(i), &job)
                })
                .collect()
        };
        let fleet = serving(1000);
        let first = admitted(&fleet, 1, 900);
        assert!((1..=12).contains(&first.len()), "{first:?}");
        assert_eq!(admitted(&fleet, 1, 900), first, "the same for each call");
        assert_ne!(admitted(&fleet, 2, 900), first, "each job its own");
        let other = Steer {
            secret: [8; 16],
            ..fleet.clone()
        };
        assert_ne!(admitted(&other, 1, 900), first, "another secret, others");
        // One period later about twice as many, two later four times, and so on; a clock stepped
        // back admits all.
        let later = admitted(&fleet, 1, 600).len();
        assert!((3..=20).contains(&later), "{later}");
        assert!((10..=40).contains(&admitted(&fleet, 1, 300).len()));
        assert_eq!(admitted(&fleet, 1, 1_001).len(), 1000);
        // Where at most DRAWN identities could (the first result's own not counted), all may.
        let few = serving(DRAWN - 1);
        let job = waiting(None, 900);
        for n in 0..DRAWN - 1 {
            let asking = Steer {
                name: format!("w{n}"),
                ..few.clone()
            };
            assert!(asking.admits(7, &key(1), &job));
        }
        let one_more = serving(DRAWN);
        let held = (0..200u8)
            .filter(|&i| !one_more.admits(7, &key(i), &job))
            .count();
        assert!((10..=90).contains(&held), "{held} of 200 held back");
        // `holds`: a job with one result, not a dispute.
        let alone = Steer {
            name: "nobody".into(),
            ..fleet.clone()
        };
        let kept = (0..50u8).filter(|&i| alone.holds(7, &key(i), &job)).count();
        assert!(kept >= 40, "{kept} of 50");
        let mut disputed = job.clone();
        disputed.state = JobState::Disputed;
        assert!((0..50u8).all(|i| !alone.holds(7, &key(i), &disputed)));
        // While the job is steered to another family, the draw counts that family's identities
        // alone: of two others on lists beside a hundred on GPUs, a third on lists is always admitted
        // to a GPU result's check, and one on GPUs waits.
        let set = |f: Family| [f].into_iter().collect::<FamilySet>();
        let gpu = waiting(Some(Family::Gpu), 900);
        let mut others: Vec<(String, FamilySet)> = (0..100)
            .map(|i| (format!("g{i}"), set(Family::Gpu)))
            .collect();
        others.extend(
            [("l2", Family::CpuLists), ("l3", Family::CpuLists)]
                .map(|(n, f)| (n.to_string(), set(f))),
        );
        let lists = Steer {
            own: set(Family::CpuLists),
            others,
            name: "l1".into(),
            ..fleet.clone()
        };
        assert!((0..50u8).all(|i| !lists.holds(7, &key(i), &gpu)));
        let on_gpu = Steer {
            own: set(Family::Gpu),
            name: "g100".into(),
            ..lists.clone()
        };
        assert!((0..50u8).all(|i| on_gpu.holds(7, &key(i), &gpu)));
    }
}
