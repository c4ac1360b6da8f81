//! Group commit: one dedicated thread applies result batches to the store, each in its own transaction,
//! then makes a whole group durable with one flush before answering any of them. Many workers reporting
//! at once share a flush; none is acknowledged before its results are on disk.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::store::{Committed, Incoming, Store};

/// Most batches sharing one flush.
const MAX_GROUP: usize = 256;

type Request = (Vec<Incoming>, oneshot::Sender<Result<Committed>>);

/// A handle to the commit thread; the thread ends when the last handle is dropped.
#[derive(Clone)]
pub struct Committer {
    tx: mpsc::Sender<Request>,
}

impl Committer {
    /// Starts the commit thread for `store`.
    pub fn start(store: Store) -> std::io::Result<Committer> {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("commit".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut group = vec![first];
                    while group.len() < MAX_GROUP {
                        match rx.try_recv() {
                            Ok(r) => group.push(r),
                            Err(_) => break,
                        }
                    }
                    let applied: Vec<_> = group
                        .into_iter()
                        .map(|(batch, reply)| (store.commit(&batch), reply))
                        .collect();
                    let flushed = store.flush();
                    for (result, reply) in applied {
                        let result = match (&flushed, result) {
                            (Ok(()), r) => r,
                            (Err(e), _) => Err(Error::Durability(e.to_string())),
                        };
                        let _ = reply.send(result);
                    }
                }
            })?;
        Ok(Committer { tx })
    }

    /// Commits a batch; returns once it is durable.
    pub async fn commit(&self, batch: Vec<Incoming>) -> Result<Committed> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((batch, reply))
            .map_err(|_| Error::ShuttingDown)?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }
}
