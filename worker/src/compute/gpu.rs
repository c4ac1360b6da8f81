//! A GPU's thread in the compute pool: batches sized to the device's speed handed to its launch thread
//! one after another, failed batches computed on the CPU, a hung or failing device given up, and backups
//! of the CPU threads' jobs when it has nothing else to do.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use nqueens_common::{Job, JobResult};
use tokio::sync::mpsc::UnboundedSender;

use super::launch::{launcher, wait, Said};
use super::{compute, for_the_cpus, run_checked, Backup, Device, Done, Shared, Source, Task};
use crate::metrics::Metrics;
use crate::pace;

/// Batches a GPU may fail in a row before the worker stops using it.
pub(super) const GPU_STRIKES: u32 = 3;

/// A GPU's thread: up to a batch of jobs at a time (the launch thread cuts it into launches, see
/// [`nqueens_gpu::Stream`]), each result checked by the engine; a failed batch is computed here on the
/// CPU, and after [`GPU_STRIKES`] failed batches in a row the thread goes on as a CPU thread. The
/// launches themselves run on a thread of their own ([`launcher`]), which says when it has started every
/// launch it was given: this thread then hands it the next batch, if the queue has one, so the device
/// runs on from one batch into the next (at most [`ahead`] batches handed over at once). A batch that
/// runs past the device's timeout (a hung driver) is given up, it and those behind it handed to the
/// CPU threads (never to another GPU), and this thread goes on as one of them, leaving the launcher
/// behind.
pub(super) fn gpu_compute<L>(
    shared: &Shared<L>,
    results: &UnboundedSender<Done<L>>,
    device: Device,
    index: usize,
) {
    let mut strikes = 0;
    let info = device.gpu.info().clone();
    // The jobs it takes at a time, kept in pace with a CPU thread.
    let mut pacer = pace::Pacer::new(device.batch);
    let mut batch = pacer.batch();
    // The name results carry; one the coordinator would refuse (none today) is left off them.
    let label = info.label();
    let label: Option<Arc<str>> = nqueens_common::names::valid_device(&label).then(|| label.into());
    let Some((launch, said)) = launcher(device.gpu) else {
        tracing::error!(device = %info, "cannot start the GPU's launch thread; computing on the CPU instead");
        given_up(shared, &device.metrics, &info.label(), batch, index);
        return compute(shared, results);
    };
    // Batches handed to the launch thread, oldest first, each with the size it was taken at.
    let mut handed: VecDeque<(Held<L>, usize)> = VecDeque::new();
    // Since when the oldest has been the device's (its answer is awaited from then), and whether the
    // wait has been warned of.
    let mut since = Instant::now();
    let mut warned = false;
    loop {
        // With nothing handed over: the next batch, or backups, waited for. (Otherwise the launch
        // thread asks for the next batch when it would start it: `Said::Started`, below.)
        if handed.is_empty() {
            let Some(held) = take(shared, batch, true) else {
                return;
            };
            (since, warned) = (Instant::now(), false);
            // A send that fails (the launch thread gone) is found by `wait` below; the batch goes to
            // the CPUs with the others.
            let _ = launch.send(Some(held.jobs()));
            // A backup batch is measured and decides nothing (`asked` 0): it is as large as the CPU
            // threads' jobs, not the batch.
            let asked = match &held {
                Held::Jobs(_) => batch,
                Held::Backups(b) => {
                    device.metrics.gpu_backups.inc_by(b.len() as u64);
                    0
                }
            };
            handed.push_back((held, asked));
        }
        let answer = match wait(
            &said,
            since,
            &mut warned,
            device.timeout,
            &info,
            handed[0].0.len(),
        ) {
            Some(Said::Started) => {
                // The launch thread waits for the reply: the next batch, or none.
                let tasks = match handed.len() < ahead(shared, batch) {
                    true => take(shared, batch, false),
                    false => None,
                };
                let _ = launch.send(tasks.as_ref().map(Held::jobs));
                handed.extend(tasks.map(|t| (t, batch)));
                continue;
            }
            Some(Said::Answer(a)) => Some(a),
            None => None,
        };
        let (held, asked) = handed.pop_front().expect("an answer is the oldest batch's");
        let seconds = since.elapsed().as_secs_f64();
        // An answer of another length than its batch (never seen: `Stream` answers every job) is a
        // failed batch, not results paired with the wrong jobs.
        let answer = answer.map(|a| {
            a.and_then(|r| match r.len() == held.len() {
                true => Ok(r),
                false => Err(nqueens_gpu::GpuError::BadAnswer(format!(
                    "{} results for a batch of {} jobs",
                    r.len(),
                    held.len()
                ))),
            })
        });
        let (computed, source) = match answer {
            Some(Ok(r)) => {
                strikes = 0;
                let nodes = r.iter().map(|r| r.nodes).fold(0u64, u64::saturating_add);
                let cpu = shared.cpu();
                // A batch taken before the size last changed is measured, and decides nothing.
                let next = match asked == batch {
                    true => pacer.after(r.len(), nodes, seconds, cpu),
                    false => {
                        pacer.measured(r.len(), nodes, seconds);
                        batch
                    }
                };
                if next != batch {
                    tracing::debug!(device = %info, batch = next, gpu_nodes_per_second = pacer.per_second(), cpu_thread = ?cpu, "GPU batch resized to the device's speed");
                    let batches = &shared.gpu_batches;
                    batches.fetch_add(next, std::sync::atomic::Ordering::Relaxed);
                    batches.fetch_sub(batch, std::sync::atomic::Ordering::Relaxed);
                    batch = next;
                    device.metrics.gpu_batch(&info.label(), batch);
                }
                (r, label.clone())
            }
            Some(Err(e)) => {
                strikes += 1;
                pacer.failed();
                device.metrics.gpu_failures.inc();
                tracing::warn!(device = %info, jobs = held.len(), strikes, error = %e, "GPU batch failed; computing it on the CPU");
                if strikes >= GPU_STRIKES {
                    tracing::error!(device = %info, "GPU failed {GPU_STRIKES} batches in a row; computing on the CPU instead");
                }
                match &held {
                    Held::Jobs(tasks) => {
                        (tasks.iter().map(|t| run_checked(&t.job)).collect(), None)
                    }
                    // The CPU threads are computing them.
                    Held::Backups(_) => (Vec::new(), None),
                }
            }
            // Hung, or its launch thread gone (`wait` said which): given up at once. Its batch, and
            // those behind it, go to the CPU threads (this one among them), never to another GPU.
            None => {
                device.metrics.gpu_failures.inc();
                handed.push_front((held, asked));
                break;
            }
        };
        match held {
            Held::Jobs(tasks) => {
                if source.is_some() {
                    device.metrics.gpu_jobs.inc_by(tasks.len() as u64);
                }
                let mut q = shared.lock();
                for (task, result) in tasks.into_iter().zip(computed) {
                    let _ = results.send((task, result, source.clone()));
                    q.running -= 1;
                }
            }
            // Counted by the CPU thread that sends it, if it does.
            Held::Backups(ids) => backed_up(shared, &ids, computed, &source, &device.metrics),
        }
        // The next batch is awaited from now: not from before a failed batch was computed here on the
        // CPU (which may take longer than the device's timeout).
        (since, warned) = (Instant::now(), false);
        if strikes >= GPU_STRIKES {
            break;
        }
    }
    // Given up. A batch still handed over is the CPUs' (whatever the device answers is not used); a
    // backup is theirs already. The launch thread ends once its sender is gone (a hung one when its
    // launch returns, if ever).
    for (held, _) in handed {
        if let Held::Jobs(tasks) = held {
            for_the_cpus(shared, tasks);
        }
    }
    given_up(shared, &device.metrics, &info.label(), batch, index);
    drop(launch);
    compute(shared, results)
}

/// Batches a GPU's thread hands its launch thread at most at once: the one the device runs and the
/// next, whose first launch the host prepares and starts while the last of the one before runs. (The
/// worker leases two batches per GPU.)
pub const AHEAD: usize = 2;

/// The batches a GPU's thread of `batch` jobs a batch may hand over at once: [`AHEAD`], but one while
/// it takes one job at a time beside CPU threads (a device no faster than a core, or one not yet
/// measured): a slow device holds no job a CPU thread could take.
pub(super) fn ahead<L>(shared: &Shared<L>, batch: usize) -> usize {
    match shared.cpus && batch <= 1 {
        true => 1,
        false => AHEAD,
    }
}

/// A batch a GPU's thread handed to its launch thread.
enum Held<L> {
    /// Jobs taken from the queue (counted running).
    Jobs(Vec<Task<L>>),
    /// Jobs CPU threads are computing, by their numbers ([`Running`](super::Running)), and the jobs.
    Backups(Vec<(u64, Job)>),
}

impl<L> Held<L> {
    fn len(&self) -> usize {
        match self {
            Held::Jobs(t) => t.len(),
            Held::Backups(b) => b.len(),
        }
    }

    /// The jobs, for the launch thread.
    fn jobs(&self) -> Vec<Job> {
        match self {
            Held::Jobs(t) => t.iter().map(|t| t.job.clone()).collect(),
            Held::Backups(b) => b.iter().map(|(_, j)| j.clone()).collect(),
        }
    }
}

/// Up to `batch` jobs for a GPU: from the queue (counted running), else, when `block`, backups of jobs
/// CPU threads are computing once the worker expects no job soon (the queue's `dry`), else it waits
/// for either. `None` when the pool is closed, or, not blocking, when no job waits.
fn take<L>(shared: &Shared<L>, batch: usize, block: bool) -> Option<Held<L>> {
    let mut q = shared.lock();
    loop {
        if q.closed {
            return None;
        }
        if !q.waiting.is_empty() {
            let k = q.waiting.len().min(batch);
            q.running += k;
            return Some(Held::Jobs(q.waiting.drain(..k).collect()));
        }
        if !block {
            return None;
        }
        if q.dry {
            let backups: Vec<(u64, Job)> = q
                .on_cpus
                .iter_mut()
                .filter(|r| r.for_a_backup())
                .take(batch)
                .map(|r| {
                    r.backed = true;
                    (r.id, r.job.clone())
                })
                .collect();
            if !backups.is_empty() {
                return Some(Held::Backups(backups));
            }
        }
        q = shared.ready.wait(q).unwrap_or_else(|e| e.into_inner());
    }
}

/// Hands a GPU's results for backups `ids` (empty: the batch failed) to the CPU threads computing
/// them, and tells those threads to stop; one a CPU thread has finished meanwhile is dropped.
fn backed_up<L>(
    shared: &Shared<L>,
    ids: &[(u64, Job)],
    computed: Vec<JobResult>,
    source: &Source,
    metrics: &Arc<Metrics>,
) {
    let mut q = shared.lock();
    for ((id, _), result) in ids.iter().zip(computed) {
        if let Some(r) = q
            .on_cpus
            .iter_mut()
            .find(|r| r.id == *id && r.answer.is_none())
        {
            r.answer = Some(Backup {
                result,
                source: source.clone(),
                metrics: metrics.clone(),
            });
            r.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The jobs `device` takes at its first batch.
pub(super) fn first_batch(device: &Device) -> usize {
    pace::Pacer::new(device.batch).batch()
}

/// Counts a GPU given up (the `index`th opened), that took `batch` jobs at a time: its thread computes as
/// a CPU thread now.
fn given_up<L>(shared: &Shared<L>, metrics: &Metrics, label: &str, batch: usize, index: usize) {
    metrics.gpus.dec();
    if let Some((_, live)) = shared.shapes.get(index) {
        live.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    metrics.gpu_batch(label, 0);
    shared
        .gpus
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    shared
        .gpu_batches
        .fetch_sub(batch, std::sync::atomic::Ordering::Relaxed);
}
