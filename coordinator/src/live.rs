//! A run as the coordinator holds it in memory: its stored metadata and totals, where it is in its job
//! list, the jobs to lease again, and its recent completion rate (for the ETA).

use std::collections::VecDeque;
use std::time::Duration;

use nqueens_common::{JobKey, Plan, Tally};
use tokio::time::Instant;

use crate::error::Result;
use crate::leases::Leases;
use crate::store::{RunMeta, Store};

/// How far back the rate looks.
const RATE_WINDOW: Duration = Duration::from_secs(300);

/// One run in memory.
pub struct LiveRun {
    pub meta: RunMeta,
    pub plan: Plan,
    /// Equal to the stored totals (updated after every commit).
    pub tally: Tally,
    /// The rest of the plan's job list not yet handed out in this incarnation (`None`: exhausted).
    cursor: Option<Box<dyn Iterator<Item = JobKey> + Send>>,
    /// Jobs whose lease ended (expired or released) without a result.
    retry: VecDeque<JobKey>,
    /// `(when, jobs done, total)` samples, oldest first.
    samples: VecDeque<(Instant, u64, u128)>,
}

impl LiveRun {
    /// A run as loaded from the store.
    pub fn new(meta: RunMeta, tally: Tally, now: Instant) -> Result<LiveRun> {
        let plan = meta.plan()?;
        let cursor = (!meta.is_done()).then(|| plan.jobs());
        Ok(LiveRun {
            samples: VecDeque::from([(now, tally.jobs, tally.total)]),
            meta,
            plan,
            tally,
            cursor,
            retry: VecDeque::new(),
        })
    }

    /// The next job to lease: first the jobs handed back, then the plan's list, skipping jobs that are
    /// done or leased.
    pub fn next_job(&mut self, store: &Store, leases: &Leases) -> Result<Option<JobKey>> {
        let run = self.meta.id;
        while let Some(key) = self.retry.pop_front() {
            if !leases.is_leased(run, &key) && !store.is_settled(run, &key)? {
                return Ok(Some(key));
            }
        }
        while let Some(cursor) = self.cursor.as_mut() {
            match cursor.next() {
                Some(key) if store.is_settled(run, &key)? => continue,
                Some(key) => return Ok(Some(key)),
                None => self.cursor = None,
            }
        }
        Ok(None)
    }

    /// Puts a job whose lease ended back in line.
    pub fn requeue(&mut self, key: JobKey) {
        if !self.meta.is_done() {
            self.retry.push_back(key);
        }
    }

    /// Takes the totals of a commit (ignoring an older one that arrives after a newer one).
    pub fn update(&mut self, tally: Tally, now: Instant) {
        if tally.jobs < self.tally.jobs {
            return;
        }
        self.tally = tally;
        self.samples.push_back((now, tally.jobs, tally.total));
        while self.samples.len() > 2
            && self
                .samples
                .front()
                .is_some_and(|s| now - s.0 > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Marks the run finished: nothing more to lease.
    pub fn finish(&mut self, meta: RunMeta) {
        self.meta = meta;
        self.cursor = None;
        self.retry.clear();
    }

    /// Jobs and solutions per second over the recent window, as of `now`.
    pub fn rates(&self, now: Instant) -> (f64, f64) {
        let Some(first) = self.samples.front() else {
            return (0.0, 0.0);
        };
        let secs = (now - first.0).as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0);
        }
        (
            (self.tally.jobs - first.1) as f64 / secs,
            (self.tally.total - first.2) as f64 / secs,
        )
    }

    /// Seconds left at the recent rate; `None` before any rate is known, `Some(0)` once done.
    pub fn eta(&self, now: Instant) -> Option<f64> {
        if self.meta.is_done() {
            return Some(0.0);
        }
        let (jobs_per_s, _) = self.rates(now);
        (jobs_per_s > 0.0).then(|| (self.meta.jobs_total - self.tally.jobs) as f64 / jobs_per_s)
    }
}
