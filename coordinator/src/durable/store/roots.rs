//! The certificate roots of finished runs, kept in the `meta` tree (key `root:` and the run id) so that
//! a coordinator's start need not read every result of every finished run again to show them. A root
//! is used only for the run as it was when computed (its finish time and total) and for the certificate
//! version this build writes; anything else, or a damaged record, is computed again.

use serde::{Deserialize, Serialize};

use super::records::{decode, encode};
use super::Store;
use crate::error::Result;

/// The record's version.
const VERSION: u32 = 1;

/// A finished run's certificate root, and what it was computed for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRoot {
    pub version: u32,
    pub run: u64,
    /// The run's finish time and total when the root was computed.
    pub finished_unix: Option<u64>,
    pub total: String,
    /// The certificate format version of the root.
    pub certificate: u32,
    /// 64 hex digits.
    pub root: String,
}

impl StoredRoot {
    /// The record of `root`, computed for run `run` finished at `finished_unix` with `total`.
    pub fn new(run: u64, finished_unix: Option<u64>, total: String, root: String) -> StoredRoot {
        StoredRoot {
            version: VERSION,
            run,
            finished_unix,
            total,
            certificate: nqueens_common::certificate::VERSION,
            root,
        }
    }

    /// Whether it is the root of run `run` as it stands now (finished at `finished_unix`, with
    /// `total`), in the certificate version this build writes.
    pub fn holds_for(&self, run: u64, finished_unix: Option<u64>, total: &str) -> bool {
        self.version == VERSION
            && self.run == run
            && self.finished_unix == finished_unix
            && self.total == total
            && self.certificate == nqueens_common::certificate::VERSION
    }
}

fn key(run: u64) -> Vec<u8> {
    let mut k = b"root:".to_vec();
    k.extend_from_slice(&run.to_be_bytes());
    k
}

impl Store {
    /// The certificate root kept for run `run`, if any. A damaged record is an error
    /// (`Error::Corrupt`): the caller computes the root again.
    pub fn certificate_root(&self, run: u64) -> Result<Option<StoredRoot>> {
        match self.meta.get(key(run))? {
            Some(bytes) => decode("certificate root", &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Forgets the root kept for run `run` (it lost a counted result: its next finish has another
    /// root, perhaps within the same second and with the same total). The caller flushes.
    pub fn forget_certificate_root(&self, run: u64) -> Result<()> {
        self.meta.remove(key(run))?;
        Ok(())
    }

    /// Keeps `root` (replacing the run's earlier one) and flushes.
    pub fn save_certificate_root(&self, root: &StoredRoot) -> Result<()> {
        self.meta.insert(key(root.run), encode(root))?;
        self.meta.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Kept and read back; it holds only for the run as it was; another run's, none kept, and a
    /// damaged record (every byte flipped in turn) are told apart.
    #[test]
    fn a_root_is_kept_for_the_run_as_it_was() {
        let store = Store::temporary().unwrap();
        assert_eq!(store.certificate_root(3).unwrap(), None);
        let root = StoredRoot::new(3, Some(100), "92".into(), "ab".repeat(32));
        store.save_certificate_root(&root).unwrap();
        let back = store.certificate_root(3).unwrap().unwrap();
        assert_eq!(back, root);
        assert!(back.holds_for(3, Some(100), "92"));
        assert!(!back.holds_for(4, Some(100), "92"));
        assert!(!back.holds_for(3, Some(101), "92"));
        assert!(!back.holds_for(3, Some(100), "93"));
        let older = StoredRoot {
            certificate: 1,
            ..root.clone()
        };
        assert!(!older.holds_for(3, Some(100), "92"));
        assert_eq!(store.certificate_root(4).unwrap(), None);
        store.forget_certificate_root(4).unwrap();
        assert!(
            store.certificate_root(3).unwrap().is_some(),
            "another run's kept"
        );
        store.forget_certificate_root(3).unwrap();
        assert_eq!(store.certificate_root(3).unwrap(), None);
        store.save_certificate_root(&root).unwrap();
        let good = store.meta.get(key(3)).unwrap().unwrap().to_vec();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            store.meta.insert(key(3), bad).unwrap();
            assert!(
                matches!(store.certificate_root(3), Err(Error::Corrupt(_))),
                "byte {i}"
            );
        }
    }
}
