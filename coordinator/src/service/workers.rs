//! The workers seen by this incarnation of the coordinator, by id, with their name, threads and last
//! contact. In memory only; a worker is active while it was seen within one lease timeout.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// What the coordinator knows of one worker process.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    pub name: String,
    pub threads: u32,
    pub last_seen: Instant,
    /// Results of this worker counted into a run.
    pub accepted: u64,
}

/// The registry: worker id -> what is known of it.
#[derive(Debug, Default)]
pub struct Workers {
    seen: HashMap<String, WorkerInfo>,
}

impl Workers {
    /// Records a contact; returns true for a worker not seen before.
    pub fn seen(&mut self, id: &str, now: Instant) -> bool {
        match self.seen.get_mut(id) {
            Some(w) => {
                w.last_seen = now;
                false
            }
            None => {
                self.seen.insert(
                    id.to_string(),
                    WorkerInfo {
                        name: String::new(),
                        threads: 0,
                        last_seen: now,
                        accepted: 0,
                    },
                );
                true
            }
        }
    }

    /// Records what a worker says of itself (in its lease requests).
    pub fn describe(&mut self, id: &str, name: &str, threads: u32) {
        if let Some(w) = self.seen.get_mut(id) {
            if w.name != name {
                w.name = name.to_string();
            }
            w.threads = threads;
        }
    }

    /// Counts results of a worker that were accepted.
    pub fn accepted(&mut self, id: &str, n: u64) {
        if let Some(w) = self.seen.get_mut(id) {
            w.accepted += n;
        }
    }

    /// Workers seen within `timeout`.
    pub fn active(&self, now: Instant, timeout: Duration) -> u32 {
        self.seen
            .values()
            .filter(|w| now - w.last_seen <= timeout)
            .count() as u32
    }

    /// Every worker seen, by id.
    pub fn all(&self) -> impl Iterator<Item = (&String, &WorkerInfo)> {
        self.seen.iter()
    }
}
