//! The workers seen by this incarnation of the coordinator: names, threads, last contact, jobs done.
//! In memory only; a worker is active while it was seen within one lease timeout.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// What the coordinator knows of one worker.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    threads: u32,
    last_seen: Instant,
    jobs_done: u64,
}

/// A worker as status shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    pub id: String,
    pub name: String,
    pub threads: u32,
    pub jobs_done: u64,
    pub seconds_since_seen: f64,
    pub active: bool,
}

/// The registry.
#[derive(Debug, Default)]
pub struct Workers {
    seen: HashMap<String, Seen>,
}

impl Workers {
    /// Records a lease request (which carries name and threads); returns true for a new worker.
    pub fn hello(&mut self, id: &str, name: &str, threads: u32, now: Instant) -> bool {
        match self.seen.get_mut(id) {
            Some(s) => {
                s.last_seen = now;
                s.threads = threads;
                false
            }
            None => {
                self.seen.insert(
                    id.to_string(),
                    Seen {
                        name: name.to_string(),
                        threads,
                        last_seen: now,
                        jobs_done: 0,
                    },
                );
                true
            }
        }
    }

    /// Records any other contact, and `jobs` accepted results.
    pub fn touch(&mut self, id: &str, jobs: u64, now: Instant) {
        if let Some(s) = self.seen.get_mut(id) {
            s.last_seen = now;
            s.jobs_done += jobs;
        }
    }

    /// Workers seen within `timeout`.
    pub fn active(&self, now: Instant, timeout: Duration) -> u32 {
        self.seen
            .values()
            .filter(|s| now - s.last_seen <= timeout)
            .count() as u32
    }

    /// Every worker, by id.
    pub fn views(&self, now: Instant, timeout: Duration) -> Vec<WorkerView> {
        let mut v: Vec<WorkerView> = self
            .seen
            .iter()
            .map(|(id, s)| WorkerView {
                id: id.clone(),
                name: s.name.clone(),
                threads: s.threads,
                jobs_done: s.jobs_done,
                seconds_since_seen: (now - s.last_seen).as_secs_f64(),
                active: now - s.last_seen <= timeout,
            })
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }
}
