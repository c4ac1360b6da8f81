//! The compute pool of a networked worker: dedicated OS threads that take leased jobs from a queue and
//! send each result back to the async client loop, so heartbeats and reports never wait behind the search.
//! Jobs still in the queue have not started and can be taken back (to hand them back on shutdown).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nqueens_common::{Job, JobResult};
use tokio::sync::mpsc::UnboundedSender;

/// A leased job and the lease it runs under.
#[derive(Debug, Clone)]
pub struct Task<L> {
    pub lease: L,
    pub job: Job,
}

struct Queue<L> {
    waiting: VecDeque<Task<L>>,
    running: usize,
    closed: bool,
}

struct Shared<L> {
    queue: Mutex<Queue<L>>,
    ready: Condvar,
}

impl<L> Shared<L> {
    fn lock(&self) -> MutexGuard<'_, Queue<L>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pool; dropping it lets running jobs finish, drops the queue and joins the threads.
pub struct ComputePool<L> {
    shared: Arc<Shared<L>>,
    threads: Vec<JoinHandle<()>>,
}

impl<L: Send + 'static> ComputePool<L> {
    /// Starts `threads` compute threads (at least one) that send `(task, result)` to `results`.
    pub fn new(threads: usize, results: UnboundedSender<(Task<L>, JobResult)>) -> ComputePool<L> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                waiting: VecDeque::new(),
                running: 0,
                closed: false,
            }),
            ready: Condvar::new(),
        });
        let threads = (0..threads.max(1))
            .map(|i| {
                let shared = shared.clone();
                let results = results.clone();
                std::thread::Builder::new()
                    .name(format!("compute-{i}"))
                    .spawn(move || compute(&shared, &results))
                    .expect("spawn a compute thread")
            })
            .collect();
        ComputePool { shared, threads }
    }

    /// Queues a job.
    pub fn submit(&self, task: Task<L>) {
        self.shared.lock().waiting.push_back(task);
        self.shared.ready.notify_one();
    }

    /// Jobs queued or running.
    pub fn load(&self) -> usize {
        let q = self.shared.lock();
        q.waiting.len() + q.running
    }

    /// Takes back every job that has not started.
    pub fn take_unstarted(&self) -> Vec<Task<L>> {
        self.shared.lock().waiting.drain(..).collect()
    }
}

fn compute<L>(shared: &Shared<L>, results: &UnboundedSender<(Task<L>, JobResult)>) {
    loop {
        let task = {
            let mut q = shared.lock();
            loop {
                if q.closed {
                    return;
                }
                if let Some(t) = q.waiting.pop_front() {
                    q.running += 1;
                    break t;
                }
                q = shared.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        let result = task.job.run();
        // Send the result and count the job finished under one lock: `load` never undercounts (a result
        // in transit is still load), and whoever has received the result sees it no longer counted.
        let mut q = shared.lock();
        let _ = results.send((task, result));
        q.running -= 1;
    }
}

impl<L> Drop for ComputePool<L> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nqueens_common::{Plan, Strategy};

    #[test]
    fn every_job_comes_back_once() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let pool = ComputePool::new(3, tx);
        let mut n = 0;
        for (i, key) in plan.jobs().enumerate() {
            pool.submit(Task {
                lease: i,
                job: plan.job(&key).unwrap(),
            });
            n += 1;
        }
        let mut seen = vec![false; n];
        let mut total = 0;
        for _ in 0..n {
            let (task, r) = rx.blocking_recv().unwrap();
            assert!(!seen[task.lease]);
            seen[task.lease] = true;
            total += r.total;
        }
        assert_eq!(total, 724);
        assert_eq!(pool.load(), 0);
    }
}
