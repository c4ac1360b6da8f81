//! The root of a finished run's certificate: computed from the store in the background once the run
//! finishes (and for the runs already finished when a server starts), logged, and kept for `status`.

use super::Coordinator;
use crate::store::RunMeta;

impl Coordinator {
    /// Computes the certificate root of the finished run `meta` on a blocking thread, logs it and keeps
    /// it for the run's status, unless the run was reopened meanwhile. Needs a Tokio runtime.
    pub(crate) fn certify(&self, meta: RunMeta) {
        let this = self.clone();
        // The totals the root is computed for: a run reopened and finished again meanwhile has others
        // (or the same totals from the same results).
        let tally = self.state().runs.get(&meta.id).map(|r| r.tally);
        tokio::spawn(async move {
            let store = this.shared.store.clone();
            let of = meta.clone();
            let built =
                tokio::task::spawn_blocking(move || crate::certify::build(&store, &of, |_| Ok(())))
                    .await;
            let header = match built {
                Ok(Ok(header)) => header,
                Ok(Err(e)) => {
                    tracing::warn!(run = meta.id, error = %e, "no certificate root for the finished run");
                    return;
                }
                Err(_) => return,
            };
            let mut state = this.state();
            let Some(live) = state.runs.get_mut(&meta.id) else {
                return;
            };
            // Reopened since (a result taken back): that root is not the run's any more.
            if !(live.meta.is_done()
                && live.meta.finished_unix == meta.finished_unix
                && Some(live.tally) == tally
                && header.total == live.tally.total.to_string())
            {
                return;
            }
            tracing::info!(
                run = meta.id,
                root = %header.root,
                jobs = header.jobs,
                identities = header.identities.len(),
                record = meta.record,
                "certificate root of the finished run (`nqueens certificate` writes the file)"
            );
            live.root = Some(header.root);
            drop(state);
            this.changed();
        });
    }

    /// [`Coordinator::certify`] for every run finished when this is called (a server's start).
    pub fn certify_finished(&self) {
        let done: Vec<RunMeta> = self
            .state()
            .runs
            .values()
            .filter(|r| r.meta.is_done() && !r.meta.is_cancelled() && r.root.is_none())
            .map(|r| r.meta.clone())
            .collect();
        for meta in done {
            self.certify(meta);
        }
    }
}
