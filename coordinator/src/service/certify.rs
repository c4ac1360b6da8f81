//! The root of a finished run's certificate: computed from the store in the background once the run
//! finishes, kept in the store, logged, and shown by `status`; a server's start takes up the kept roots
//! of the runs already finished (computing again only those it lacks, or that no longer hold).

use super::Coordinator;
use crate::durable::store::RunMeta;

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
            let total = tally.map(|t| t.total.to_string());
            let built = tokio::task::spawn_blocking(move || {
                // The root kept when the run finished, if it is still the run's: no result read.
                match (store.certificate_root(of.id), &total) {
                    (Ok(Some(kept)), Some(total)) if kept.holds_for(of.id, of.finished_unix, total) => {
                        return Ok((kept.root, total.clone()));
                    }
                    (Err(e), _) => {
                        tracing::warn!(run = of.id, error = %e, "the kept certificate root cannot be read: computing it again");
                    }
                    _ => {}
                }
                let header = crate::durable::certify::build(&store, &of, |_| Ok(()))?;
                let kept = crate::durable::store::StoredRoot::new(
                    of.id,
                    of.finished_unix,
                    header.total.clone(),
                    header.root.clone(),
                );
                if let Err(e) = store.save_certificate_root(&kept) {
                    tracing::warn!(run = of.id, error = %e, "cannot keep the certificate root: the next start computes it again");
                }
                Ok::<_, crate::error::Error>((header.root, header.total))
            })
            .await;
            let (root, root_total) = match built {
                Ok(Ok(built)) => built,
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
                && root_total == live.tally.total.to_string())
            {
                return;
            }
            tracing::info!(
                run = meta.id,
                root = %root,
                jobs = meta.jobs_total,
                record = meta.record,
                "certificate root of the finished run (`nqueens certificate` writes the file)"
            );
            live.root = Some(root);
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
