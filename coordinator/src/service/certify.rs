//! The root of a finished run's certificate: computed from the store in the background once the run
//! finishes, kept in the store, logged, and shown by `status`; a server's start takes up the kept roots
//! of the runs already finished (computing again only those it lacks, or that no longer hold).

use super::Coordinator;
use nqueens_common::Tally;

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
            if !still_the_runs(&live.meta, live.tally, &meta, tally, &root_total) {
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
            // (News to status watchers: a root frees no job.)
            this.progressed();
        });
    }

    /// [`Coordinator::certify`] for every run finished when this is called and showing no root yet (a
    /// server's start); returns the ids of the runs it started on.
    pub fn certify_finished(&self) -> Vec<u64> {
        let done: Vec<RunMeta> = self
            .state()
            .runs
            .values()
            .filter(|r| r.meta.is_done() && !r.meta.is_cancelled() && r.root.is_none())
            .map(|r| r.meta.clone())
            .collect();
        let ids = done.iter().map(|m| m.id).collect();
        for meta in done {
            self.certify(meta);
        }
        ids
    }
}

/// Whether a root computed for `meta` at the totals `tally` (its header's total `root_total`) is still
/// the run's, the run being `now` at the totals `now_tally`: a run reopened since (a result taken back)
/// or finished again has another root.
fn still_the_runs(
    now: &RunMeta,
    now_tally: Tally,
    meta: &RunMeta,
    tally: Option<Tally>,
    root_total: &str,
) -> bool {
    now.is_done()
        && now.finished_unix == meta.finished_unix
        && Some(now_tally) == tally
        && root_total == now_tally.total.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each condition alone keeps a root from a run it is no longer of (issue 42: the guards had no
    /// test, the race they guard being hard to time).
    #[test]
    fn a_root_is_the_runs_only_while_its_finish_and_totals_stand() {
        let store = crate::durable::store::Store::temporary().unwrap();
        let plan = nqueens_common::Plan::new(8, nqueens_common::Strategy::D4).unwrap();
        let finished = RunMeta {
            finished_unix: Some(100),
            ..store.create_run(plan, 0.0).unwrap()
        };
        let tally = Tally {
            total: 92,
            unique8: Some(96),
            nodes: 2000,
            jobs: 3,
        };
        let holds = |now: &RunMeta, now_tally: Tally, total: &str| {
            still_the_runs(now, now_tally, &finished, Some(tally), total)
        };
        assert!(holds(&finished, tally, "92"));
        // Reopened (not done), all else the same: the root computed when it was done is not its own.
        let reopened = RunMeta {
            finished_unix: None,
            ..finished.clone()
        };
        assert!(!still_the_runs(
            &reopened,
            tally,
            &reopened,
            Some(tally),
            "92"
        ));
        // Finished again at another time.
        let again = RunMeta {
            finished_unix: Some(101),
            ..finished.clone()
        };
        assert!(!holds(&again, tally, "92"));
        // Other totals (a result taken back and counted again otherwise), the same total.
        let other = Tally {
            unique8: Some(104),
            ..tally
        };
        assert!(!holds(&finished, other, "92"));
        // A root whose header names another total.
        assert!(!holds(&finished, tally, "93"));
        // No totals known when the root was asked for.
        assert!(!still_the_runs(&finished, tally, &finished, None, "92"));
    }
}
