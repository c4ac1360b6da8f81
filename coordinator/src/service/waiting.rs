//! Places for lease calls that wait for a job to come free, counted per identity: each waiting call
//! runs again under the state lock at every change, so one credential may not hold them by the
//! thousand. A call beyond its identity's places answers at once, empty, and its worker asks again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Most lease calls of one identity that wait at once. A worker process waits in one; the shared
/// token's machines are one identity, and those beyond this ask again every `retry_after` instead.
pub const MAX_WAITING: usize = 32;

/// The waiting calls, by identity.
#[derive(Debug, Default, Clone)]
pub struct Waiting(Arc<Mutex<HashMap<String, usize>>>);

/// A waiting call's place, given back when dropped.
#[derive(Debug)]
pub struct Place {
    waiting: Waiting,
    name: String,
}

impl Waiting {
    /// A place for a call of identity `name`; `None` when it holds [`MAX_WAITING`] already.
    pub fn take(&self, name: &str) -> Option<Place> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let held = map.entry(name.to_string()).or_default();
        if *held >= MAX_WAITING {
            return None;
        }
        *held += 1;
        Some(Place {
            waiting: self.clone(),
            name: name.to_string(),
        })
    }

    /// How many calls of `name` wait now.
    #[cfg(test)]
    fn held(&self, name: &str) -> usize {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(name).copied().unwrap_or(0)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut map = self
            .waiting
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = map.get_mut(&self.name) {
            *held -= 1;
            if *held == 0 {
                map.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places are per identity, at most [`MAX_WAITING`] each, and given back when dropped (the map
    /// keeps no identity that waits in none).
    #[test]
    fn places_are_bounded_per_identity_and_given_back() {
        let w = Waiting::default();
        let held: Vec<Place> = (0..MAX_WAITING).map(|_| w.take("a").unwrap()).collect();
        assert!(w.take("a").is_none());
        let other = w.take("b").unwrap();
        assert_eq!((w.held("a"), w.held("b")), (MAX_WAITING, 1));
        drop(held);
        assert_eq!(w.held("a"), 0);
        assert!(w.take("a").is_some());
        drop(other);
        assert!(w.0.lock().unwrap().is_empty(), "nothing kept");
    }
}
