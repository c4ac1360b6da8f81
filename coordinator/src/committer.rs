//! Group commit: one dedicated thread applies result batches to the store, each in its own transaction
//! (followed by the revocation of a worker the batch quarantined), appends the counted and revoked results
//! to the ledger (fsynced), then makes a whole group durable in the store with
//! one flush before answering any of them. Many workers reporting at once share both syncs; none is
//! acknowledged before its results are on disk twice.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::ledger::{Entry, Ledger};
use crate::store::{Committed, Incoming, RunMeta, Store};

/// Most batches sharing one flush.
const MAX_GROUP: usize = 256;

enum Request {
    /// A batch of results to commit.
    Results(Vec<Incoming>, oneshot::Sender<Result<Committed>>),
    /// A run just created, for the ledger.
    Run(RunMeta, oneshot::Sender<Result<()>>),
}

/// A handle to the commit thread; the thread ends when the last handle is dropped.
#[derive(Clone)]
pub struct Committer {
    tx: mpsc::Sender<Request>,
}

impl Committer {
    /// Starts the commit thread for `store` and its ledger (none for a temporary store).
    pub fn start(store: Store, mut ledger: Option<Ledger>) -> std::io::Result<Committer> {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("commit".into())
            .spawn(move || {
                let mut seq = 0;
                while let Ok(first) = rx.recv() {
                    let mut group = vec![first];
                    while group.len() < MAX_GROUP {
                        match rx.try_recv() {
                            Ok(r) => group.push(r),
                            Err(_) => break,
                        }
                    }
                    let mut entries = Vec::new();
                    let mut applied = Vec::new();
                    let mut runs = Vec::new();
                    for request in group {
                        match request {
                            Request::Results(batch, reply) => {
                                seq += 1;
                                let result = commit(&store, &batch, seq);
                                if let Ok(c) = &result {
                                    entries.extend(c.counted.iter().map(|(run, key, record)| {
                                        Entry::Result {
                                            run: *run,
                                            job: key.to_string(),
                                            record: record.clone(),
                                        }
                                    }));
                                    entries.extend(c.revoked.iter().map(|r| Entry::Revoked {
                                        run: r.run,
                                        job: r.key.to_string(),
                                        worker: r.record.worker.clone(),
                                    }));
                                }
                                applied.push((result, reply));
                            }
                            Request::Run(meta, reply) => {
                                entries.push(Entry::Run(meta));
                                runs.push(reply);
                            }
                        }
                    }
                    let logged = ledger.as_mut().map_or(Ok(()), |l| l.append(&entries));
                    let flushed = logged.and_then(|()| store.flush());
                    for (result, reply) in applied {
                        let result = match (&flushed, result) {
                            (Ok(()), r) => r,
                            (Err(e), _) => Err(Error::Durability(e.to_string())),
                        };
                        let _ = reply.send(result);
                    }
                    for reply in runs {
                        let _ = reply.send(
                            flushed
                                .as_ref()
                                .map(|_| ())
                                .map_err(|e| Error::Durability(e.to_string())),
                        );
                    }
                }
            })?;
        Ok(Committer { tx })
    }

    /// Commits a batch; returns once it is durable.
    pub async fn commit(&self, batch: Vec<Incoming>) -> Result<Committed> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Request::Results(batch, reply))
            .map_err(|_| Error::ShuttingDown)?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }

    /// Records a new run in the ledger; returns once it is durable.
    pub async fn created(&self, meta: RunMeta) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Request::Run(meta, reply))
            .map_err(|_| Error::ShuttingDown)?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }
}

/// Commits one batch and, for every worker it quarantined, revokes that worker's unconfirmed results.
fn commit(store: &Store, batch: &[Incoming], seq: u64) -> Result<Committed> {
    let mut committed = store.commit(batch)?;
    committed.seq = seq;
    for q in committed.quarantined.clone() {
        let r = store.revoke(&q.worker)?;
        committed.tallies.extend(r.tallies);
        committed.moved.extend(r.moved);
        committed.revoked.extend(r.revoked);
        committed.reopened.extend(r.reopened);
        // A run this very commit finished may have just been reopened.
        committed
            .finished
            .retain(|f| !committed.reopened.iter().any(|o| o.id == f.id));
    }
    Ok(committed)
}
