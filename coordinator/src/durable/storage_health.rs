//! Whether the coordinator can write its store. A commit that cannot be made durable (a full disk, an
//! I/O error) marks storage *degraded*: the health service says NOT_SERVING, Lease answers UNAVAILABLE
//! (no work is handed out whose results could not be kept), and a probe tries the disk every
//! [`PROBE_EVERY`] until a write and fsync succeed. Degraded is sticky (see below).
//!
//! sled keeps the first I/O error it meets and fails every later write with it, even once the disk has
//! room again, and a commit whose sync failed leaves this incarnation's memory behind the store: so once
//! the probe's file write succeeds, the store is always reopened. [`StorageHealth::request_reopen`] asks for that; `serve` answers by stopping
//! the server and opening the store again in the same process (the startup reconciliation with the
//! ledger included), and a local count stops with an error saying to run it again.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often a degraded coordinator tries its disk again.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// Bytes the probe writes and fsyncs (more than one ledger round of a busy coordinator needs).
const PROBE_BYTES: usize = 1 << 20;

/// The probe file's name in the data directory (removed after every probe).
pub const PROBE_FILE: &str = "storage-probe.tmp";

/// The storage state, shared by the commit threads, the handlers and the health reporter.
#[derive(Debug)]
pub struct StorageHealth {
    /// `Some(why)` while degraded.
    state: watch::Sender<Option<String>>,
    /// Cancelled when the store must be reopened.
    reopen: CancellationToken,
}

impl Default for StorageHealth {
    fn default() -> Self {
        StorageHealth {
            state: watch::channel(None).0,
            reopen: CancellationToken::new(),
        }
    }
}

impl StorageHealth {
    /// A write failed: storage is degraded (logged when it becomes so).
    pub fn failed(&self, why: &str) {
        let newly = self.state.send_if_modified(|s| {
            let newly = s.is_none();
            *s = Some(why.to_string());
            newly
        });
        if newly {
            tracing::error!(error = %why, "storage degraded: results cannot be made durable; not leasing jobs, health is NOT_SERVING, probing the disk every {}s", PROBE_EVERY.as_secs());
        }
    }

    /// Why storage is degraded, if it is.
    pub fn degraded(&self) -> Option<String> {
        self.state.borrow().clone()
    }

    /// The disk takes writes again but the store does not: it must be reopened (logged once).
    pub fn request_reopen(&self) {
        if !self.reopen.is_cancelled() {
            tracing::error!("the disk takes writes again, but the store keeps failing them: reopening it (and reconciling it with the ledger) to recover");
            self.reopen.cancel();
        }
    }

    /// Whether the store must be reopened.
    pub fn reopen_requested(&self) -> bool {
        self.reopen.is_cancelled()
    }

    /// Completes when the store must be reopened.
    pub fn reopen_wanted(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.reopen.clone().cancelled_owned()
    }

    /// A receiver that wakes up when storage becomes degraded or recovers.
    pub fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.state.subscribe()
    }
}

/// Writes, fsyncs and removes a probe file of [`PROBE_BYTES`] in `dir`: whether the disk takes writes.
pub fn probe(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(PROBE_FILE);
    let result = (|| {
        let mut file = std::fs::File::create(&path)?;
        file.write_all(&vec![0u8; PROBE_BYTES])?;
        file.sync_all()
    })();
    let removed = std::fs::remove_file(&path);
    result?;
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_stays_until_the_store_is_reopened_and_watchers_see_it() {
        let health = StorageHealth::default();
        let mut seen = health.subscribe();
        assert_eq!(health.degraded(), None);
        health.failed("No space left on device");
        health.failed("No space left on device (again)");
        assert!(seen.has_changed().unwrap());
        assert!(seen.borrow_and_update().is_some());
        assert_eq!(
            health.degraded().as_deref(),
            Some("No space left on device (again)")
        );
        assert!(!seen.has_changed().unwrap(), "no change, no wake-up");
        assert!(!health.reopen_requested());
        health.request_reopen();
        health.request_reopen();
        assert!(health.reopen_requested());
        assert!(health.degraded().is_some(), "degraded until reopened");
    }

    #[test]
    fn the_probe_leaves_nothing_behind_and_fails_where_it_cannot_write() {
        let dir = tempfile::tempdir().unwrap();
        probe(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(probe(&dir.path().join("missing")).is_err());
    }
}
