//! The spot checks each identity passed, kept across restarts: one checked record under the `meta`
//! key `spot_passes`, written now and then by the coordinator (not in a commit: a pass lost to a crash
//! costs a check, never a count) and read at the start.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::records::{decode, encode};
use super::Store;
use crate::error::{Error, Result};

/// The `meta` key of the record.
const SPOT_PASSES: &[u8] = b"spot_passes";

/// The record's version.
const VERSION: u32 = 1;

/// The record as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Passes {
    version: u32,
    /// Checks passed, by identity.
    passed: BTreeMap<String, u64>,
}

impl Store {
    /// The spot checks each identity passed, as last saved (none saved: empty). A damaged record, or
    /// one of another version, is refused ([`Error::Corrupt`]): the caller starts from none.
    pub fn spot_passes(&self) -> Result<BTreeMap<String, u64>> {
        let Some(bytes) = self.meta.get(SPOT_PASSES)? else {
            return Ok(BTreeMap::new());
        };
        let passes: Passes = decode("spot-check passes", &bytes)?;
        if passes.version != VERSION {
            return Err(Error::Corrupt(format!(
                "spot-check passes of version {}, where this build reads {VERSION}",
                passes.version
            )));
        }
        Ok(passes.passed)
    }

    /// Saves the spot checks each identity passed, replacing what was saved, and flushes.
    pub fn save_spot_passes(&self, passed: BTreeMap<String, u64>) -> Result<()> {
        let record = encode(&Passes {
            version: VERSION,
            passed,
        });
        self.meta.insert(SPOT_PASSES, record)?;
        self.meta.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saved and read back; none saved reads as none; a flipped byte anywhere, or another version, is
    /// refused, never read as other counts.
    #[test]
    fn passes_round_trip_and_damage_is_refused() {
        let store = Store::temporary().unwrap();
        assert!(store.spot_passes().unwrap().is_empty());
        let passed = BTreeMap::from([("alice".to_string(), 12), ("bob".to_string(), 3)]);
        store.save_spot_passes(passed.clone()).unwrap();
        assert_eq!(store.spot_passes().unwrap(), passed);
        let good = store.meta.get(SPOT_PASSES).unwrap().unwrap().to_vec();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x04;
            store.meta.insert(SPOT_PASSES, bad).unwrap();
            assert!(
                matches!(store.spot_passes(), Err(Error::Corrupt(_))),
                "byte {i}"
            );
        }
        let other = super::super::records::checked(br#"{"version":2,"passed":{}}"#);
        store.meta.insert(SPOT_PASSES, other).unwrap();
        let e = store.spot_passes().unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");
    }
}
