//! The plan check: whether this build enumerates a lease's plan as the coordinator does. Its
//! fingerprint (the hash of the plan's job keys, in order) must be the lease's: a coordinator of another
//! version may cut the plan otherwise, and a key would then name other sub-problems; the seal would not
//! tell, since it is made with the lease's fingerprint.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;

use nqueens_common::{Job, JobKey, Plan};
use tokio_util::sync::CancellationToken;

use super::link::{Lease, Link};

/// Most jobs of a run made past the limits of creation that a worker enumerates to check its plan
/// ([`Plans::check`]): four times the limit of creation, whatever a coordinator's status says.
pub const MAX_STORED_JOBS: u64 = 4 * nqueens_common::partition::MAX_JOBS;

/// Why a lease's job is not computed.
#[derive(Debug)]
pub enum PlanCheck {
    /// Its plan could not be checked now: the lease is handed back, the worker goes on.
    Unchecked(String),
    /// It cannot be built, or its plan is not this build's: the worker stops.
    Other(nqueens_common::Error),
}

/// The plans checked so far: each one's fingerprint as this build enumerates it, or why it has none.
#[derive(Debug, Default)]
pub struct Plans {
    known: HashMap<Plan, Result<u64, String>>,
}

impl Plans {
    /// The job `lease` names, once its plan is known to be this build's (computed once per plan, a plan
    /// found different remembered too), on a blocking thread (about a second at N = 28) while
    /// `beating()` (heartbeats for the leases held) goes on; bounded as a run's creation is, and for a
    /// run an earlier build made past those bounds, within the job count the run records (the
    /// coordinator's status of it, at most [`MAX_STORED_JOBS`]). A plan that cannot be checked now is
    /// [`PlanCheck::Unchecked`], nothing remembered.
    pub async fn check<L: Link, B: Future<Output = Infallible>>(
        &mut self,
        lease: &Lease,
        link: &mut L,
        beating: &impl Fn() -> B,
        shutdown: &CancellationToken,
    ) -> Result<Job, PlanCheck> {
        let job = job_of(lease).map_err(PlanCheck::Other)?;
        let plan = job.plan();
        let ours = match self.known.get(&plan) {
            Some(known) => known.clone(),
            None => {
                let ours = fingerprint_of(plan, lease, link, beating, shutdown).await?;
                self.known.insert(plan, ours.clone());
                ours
            }
        };
        match ours {
            Ok(ours) if ours == lease.fingerprint => Ok(job),
            Ok(ours) => Err(PlanCheck::Other(nqueens_common::Error::InvalidSetting(format!(
                "its plan's fingerprint is {:#018x} at the coordinator and {ours:#018x} here: the two \
                 enumerate the plan's jobs differently, and a key would name other sub-problems",
                lease.fingerprint
            )))),
            Err(why) => Err(PlanCheck::Other(nqueens_common::Error::InvalidSetting(why))),
        }
    }
}

/// The fingerprint of `plan` (the lease's) as this build enumerates it, or why it has none; `Err`
/// where it cannot be known now.
async fn fingerprint_of<L: Link, B: Future<Output = Infallible>>(
    plan: Plan,
    lease: &Lease,
    link: &mut L,
    beating: &impl Fn() -> B,
    shutdown: &CancellationToken,
) -> Result<Result<u64, String>, PlanCheck> {
    let stopping = || PlanCheck::Unchecked("the worker is stopping".into());
    let within = beside(beating(), shutdown, move || {
        plan.fingerprint_within(nqueens_common::partition::MAX_JOBS)
    })
    .await
    .ok_or_else(stopping)?;
    let limit = match within {
        Ok((_, fingerprint)) => return Ok(Ok(fingerprint)),
        Err(limit) => limit,
    };
    // Past the limits of a run's creation: a run an earlier build made, which the coordinator still
    // resumes. Checked as it checks it, within the job count the run records.
    let run = match link.run(lease.run.clone()).await {
        Ok(Some(run)) => run,
        Ok(None) => {
            return Err(PlanCheck::Unchecked(format!(
                "{limit}; the run's job count, to check it within, could not be read: the coordinator knows no run {:?}",
                lease.run
            )))
        }
        Err(e) => {
            return Err(PlanCheck::Unchecked(format!(
                "{limit}; the run's job count, to check it within, could not be read: {}",
                e.message
            )))
        }
    };
    if (run.run.as_str(), run.n, run.fingerprint)
        != (lease.run.as_str(), lease.n, lease.fingerprint)
    {
        return Ok(Err(format!(
            "{limit}; and the coordinator's status of run {} is not of the lease's plan",
            lease.run
        )));
    }
    let jobs = run.jobs_total.min(MAX_STORED_JOBS);
    let stored = beside(beating(), shutdown, move || {
        plan.fingerprint_of_stored(jobs)
    })
    .await
    .ok_or_else(stopping)?;
    Ok(stored
        .map(|(_, fingerprint)| fingerprint)
        .map_err(|e| e.to_string()))
}

/// Runs `work` on a blocking thread while `beating` (heartbeats for the leases held) goes on; `None`
/// once `shutdown` is cancelled (the thread is left to end on its own).
async fn beside<T: Send + 'static>(
    beating: impl Future<Output = Infallible>,
    shutdown: &CancellationToken,
    work: impl FnOnce() -> nqueens_common::Result<T> + Send + 'static,
) -> Option<nqueens_common::Result<T>> {
    tokio::select! {
        done = tokio::task::spawn_blocking(work) => Some(done.unwrap_or_else(|e| {
            Err(nqueens_common::Error::InvalidSetting(format!(
                "the plan's fingerprint could not be computed: {e}"
            )))
        })),
        never = beating => match never {},
        _ = shutdown.cancelled() => None,
    }
}

/// The job a lease names, rebuilt from its plan and key.
pub fn job_of(lease: &Lease) -> nqueens_common::Result<Job> {
    let key: JobKey = lease.job.parse()?;
    lease.plan.clone()?.job(&key)
}
