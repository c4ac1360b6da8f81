//! What a write changed, for the caller to apply in memory: jobs moved between states, counted results
//! taken back, and the whole effect of a commit ([`Committed`], with each result's [`Outcome`]). Made by
//! a commit (`commit.rs`), a take-up (`take_up.rs`) and a revocation (`revoke.rs`).

use std::collections::BTreeMap;

use nqueens_common::{JobKey, JobResult, Tally};

use super::records::{JobState, Quarantine, ResultRecord, RunMeta};

/// A job that changed state in a commit or a revocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub run: u64,
    pub key: JobKey,
    pub from: Option<JobState>,
    /// `None`: pending again.
    pub to: Option<JobState>,
}

/// A counted result taken back.
#[derive(Debug, Clone)]
pub struct Revoked {
    pub run: u64,
    pub key: JobKey,
    pub record: ResultRecord,
}

/// What happened to one incoming result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Counted (for a verified job: confirmed by a worker of another name, then counted).
    Accepted,
    /// Recorded for a verified job; counted once a worker of another name agrees.
    Pending,
    /// Recorded, but it disagrees with the job's other results: a further worker decides.
    Disputed,
    /// The job was done already (or this worker had reported it), with the same result.
    Duplicate,
    /// The job was done already (or this worker had reported it), with a different result (kept: `stored`).
    Mismatch { stored: JobResult },
    /// The job has failed; the result was not recorded.
    JobFailed,
    /// The job is disputed and its sender may not decide it (a worker credential with no record, under
    /// a lease other than one the coordinator gave it to decide): not recorded, not credited.
    NotKept,
}

impl Outcome {
    /// Its name in logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Pending => "pending",
            Outcome::Disputed => "disputed",
            Outcome::Duplicate => "duplicate",
            Outcome::Mismatch { .. } => "mismatch",
            Outcome::JobFailed => "job_failed",
            Outcome::NotKept => "not_kept",
        }
    }
}

/// The effect of one commit.
#[derive(Debug, Clone, Default)]
pub struct Committed {
    /// One per incoming result, in order.
    pub outcomes: Vec<Outcome>,
    /// The new totals of every run that accepted a result.
    pub tallies: BTreeMap<u64, Tally>,
    /// Runs whose last job this commit accepted.
    pub finished: Vec<RunMeta>,
    /// Jobs whose state changed.
    pub moved: Vec<Moved>,
    /// Workers this commit quarantined.
    pub quarantined: Vec<Quarantine>,
    /// The results this commit counted, as stored.
    pub counted: Vec<(u64, JobKey, ResultRecord)>,
    /// Results taken back because this commit quarantined their worker.
    pub revoked: Vec<Revoked>,
    /// Results counted by earlier commits that a different result under a lease of their job disputed
    /// in this one (taken back; their jobs are disputed).
    pub disputed: Vec<Revoked>,
    /// Runs that were done and are running again (they lost revoked results).
    pub reopened: Vec<RunMeta>,
    /// Quarantines lifted: held ones whose record run's dispute a majority decided for them (by the
    /// commit), and those every identity that decided them is quarantined now (by the commit thread:
    /// [`super::Store::apply_quarantine_rule`]).
    pub lifted: Vec<Quarantine>,
    /// Held checkers a decision for them left with nothing to hold them: not released (an identity
    /// they contradicted stands), no dispute of theirs open, nothing kept. Their holds have ended:
    /// the commit thread ends them in the same round (their revocation makes them whole and takes
    /// back what they contradicted that only those identities stand behind).
    pub hold_ended: Vec<String>,
    /// The whole records of held workers whose holds this round ended (set by the commit thread):
    /// they go to the ledger after the counts taken back, so that an append cut short leaves them
    /// held there, and the next start ends the holds again; a held record of the round itself stays
    /// in `quarantined`, before the take-backs. The live state shows them whole.
    pub made_whole: Vec<Quarantine>,
    /// The commit thread's sequence number: tallies of a later commit supersede earlier ones.
    pub seq: u64,
    /// Why a revocation this commit's quarantine started could not take back every result (set by the
    /// commit thread): the store is damaged until it is reopened and repaired.
    pub incomplete: Option<String>,
}

impl Committed {
    /// Whether the commit changed anything beside its outcomes: totals, job states, quarantines,
    /// counts, revocations, disputes, runs finished or reopened, lifts, or damage.
    pub fn has_effects(&self) -> bool {
        let untouched = [
            self.tallies.is_empty(),
            self.finished.is_empty(),
            self.moved.is_empty(),
            self.quarantined.is_empty(),
            self.counted.is_empty(),
            self.revoked.is_empty(),
            self.disputed.is_empty(),
            self.reopened.is_empty(),
            self.lifted.is_empty(),
            self.hold_ended.is_empty(),
            self.made_whole.is_empty(),
            self.incomplete.is_none(),
        ];
        untouched.contains(&false)
    }

    /// Splits the effect of one commit of several batches (of `lengths` results each, in order) into one
    /// per batch: each gets its own outcomes and the new totals; the first also gets every other effect, so
    /// that whoever applies the parts applies each effect once.
    pub fn split(mut self, lengths: &[usize]) -> Vec<Committed> {
        let outcomes = std::mem::take(&mut self.outcomes);
        let mut rest = outcomes.as_slice();
        let mut parts: Vec<Committed> = lengths
            .iter()
            .map(|&n| {
                let (mine, after) = rest.split_at(n.min(rest.len()));
                rest = after;
                Committed {
                    outcomes: mine.to_vec(),
                    tallies: self.tallies.clone(),
                    seq: self.seq,
                    ..Committed::default()
                }
            })
            .collect();
        if let Some(first) = parts.first_mut() {
            self.outcomes = std::mem::take(&mut first.outcomes);
            *first = self;
        }
        parts
    }
}
