//! The workers seen by this incarnation of the coordinator, by id, with their last contact. In memory only;
//! a worker is active while it was seen within one lease timeout.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The registry: worker id -> last contact.
#[derive(Debug, Default)]
pub struct Workers {
    last_seen: HashMap<String, Instant>,
}

impl Workers {
    /// Records a contact; returns true for a worker not seen before.
    pub fn seen(&mut self, id: &str, now: Instant) -> bool {
        match self.last_seen.get_mut(id) {
            Some(t) => {
                *t = now;
                false
            }
            None => {
                self.last_seen.insert(id.to_string(), now);
                true
            }
        }
    }

    /// Workers seen within `timeout`.
    pub fn active(&self, now: Instant, timeout: Duration) -> u32 {
        self.last_seen
            .values()
            .filter(|&&t| now - t <= timeout)
            .count() as u32
    }
}
