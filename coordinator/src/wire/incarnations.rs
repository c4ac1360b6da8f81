//! A coordinator's lifetime over one data directory: incarnation after incarnation. Each opens a
//! [`Coordinator`] over the store and serves it; when the store asks to be reopened (a write failed,
//! see `durable::storage_health`), that incarnation stops, lets the store go, and the next opens it
//! again, mended by the start's reconciliation. `nqueens serve` runs this; so can an embedder.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::durable::storage_health::PROBE_EVERY;
use crate::durable::store::Store;
use crate::error::{Error, Result};
use crate::service::{Config, Coordinator};

/// Serves incarnations over `store` (opened from `data`) until `shutdown` is cancelled or an
/// incarnation ends without asking for a reopen. `serve(coordinator, incarnation)` serves one, and
/// returns when its store asks to be reopened ([`crate::wire::server::serve`] does) or `shutdown` is
/// cancelled; `incarnation` is cancelled once it returns (its listeners end with it). The
/// quarantines `config.release` names are released by the first incarnation only. A reopen that
/// fails (it may need space) is tried again every [`PROBE_EVERY`]; damage the start cannot repair
/// stops the loop, naming it.
pub async fn serve_reopening<S, F, E>(
    data: &Path,
    store: Store,
    mut config: Config,
    shutdown: CancellationToken,
    mut serve: S,
) -> std::result::Result<(), E>
where
    S: FnMut(Coordinator, CancellationToken) -> F,
    F: Future<Output = std::result::Result<(), E>>,
    E: From<Error>,
{
    let mut store = Some(store);
    let mut reopened = false;
    loop {
        let store = match store.take() {
            Some(store) => store,
            None => match reopen(data, &shutdown).await? {
                Some(store) => store,
                None => break,
            },
        };
        let coordinator = match Coordinator::open(store, config.clone()) {
            Ok(coordinator) => coordinator,
            // After a storage failure the reopen may itself need space (the ledger is rewritten
            // from the store): stay down and try again rather than exit. Damage the startup
            // cannot repair is no such case: the coordinator stops, naming it.
            Err(e) if reopened && !shutdown.is_cancelled() && !matches!(e, Error::Corrupt(_)) => {
                tracing::error!(error = %e, "cannot reopen the store yet; trying again in 2 s");
                tokio::select! {
                    _ = tokio::time::sleep(PROBE_EVERY) => continue,
                    _ = shutdown.cancelled() => break,
                }
            }
            Err(e) => return Err(e.into()),
        };
        config.release.clear();
        config.distrust.clear();
        // This incarnation's listeners end with it (a reopen starts new ones on the same ports).
        let incarnation = shutdown.child_token();
        let served = serve(coordinator.clone(), incarnation.clone()).await;
        incarnation.cancel();
        served?;
        if shutdown.is_cancelled() || !coordinator.storage().reopen_requested() {
            break;
        }
        tracing::warn!(data = %data.display(), "coordinator stopped to reopen its store");
        reopened = true;
    }
    Ok(())
}

/// Opens the store again after its last incarnation let go of it (its threads end shortly after the
/// server stops): retried for up to a minute while the store is still held. `None`: `shutdown` was
/// cancelled meanwhile.
async fn reopen(data: &Path, shutdown: &CancellationToken) -> Result<Option<Store>> {
    let mut tries = 0;
    loop {
        if shutdown.is_cancelled() {
            return Ok(None);
        }
        let dir = data.to_path_buf();
        match tokio::task::spawn_blocking(move || Store::open(&dir))
            .await
            .map_err(|e| Error::io("reopening the store", std::io::Error::other(e)))?
        {
            Ok(store) => return Ok(Some(store)),
            Err(e) if tries < 600 => {
                tracing::debug!(error = %e, "store not free yet");
                tries += 1;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = shutdown.cancelled() => return Ok(None),
                }
            }
            Err(e) => return Err(e),
        }
    }
}
