//! The compute pool of a networked worker: dedicated OS threads that take leased jobs from a queue and
//! send each result back to the async client loop, so heartbeats and reports never wait behind the search.
//! A GPU gets a thread of its own that takes jobs a batch at a time, the batch sized to the device's speed
//! against a CPU thread's ([`crate::pace`]), and hands the next batch to its launch thread while the one
//! before still runs; a batch the device fails (or answers
//! implausibly) is computed on the CPU instead, and a device that fails three batches in a row, or one
//! launch that runs past its timeout (a hung driver), is given up for the CPU. Jobs still in the queue
//! have not started and can be taken back (to hand them back on shutdown).

mod gpu;
mod launch;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nqueens_common::{Job, JobResult};
use nqueens_gpu::Gpu;
use tokio::sync::mpsc::UnboundedSender;

use crate::metrics::Metrics;
use crate::pace::{self, Rate};
use gpu::{first_batch, gpu_compute};

/// A GPU of the pool, how many jobs it takes at a time at most, and where it counts what it does.
pub struct Device {
    pub gpu: Gpu,
    /// The most jobs it takes at a time (`--gpu-batch`); fewer while it is not that much faster than a
    /// CPU thread ([`pace::next_batch`]).
    pub batch: usize,
    pub metrics: Arc<Metrics>,
    /// How long a launch may run before the device is taken for hung ([`GpuConfig::timeout`]).
    ///
    /// [`GpuConfig::timeout`]: crate::GpuConfig::timeout
    pub timeout: Duration,
}

/// Where a job was computed: `None` for the CPU, else the GPU's label (`cuda:0`, `opencl:1`).
pub type Source = Option<Arc<str>>;

/// What the pool sends back for each job: the task, its result, and where it was computed.
pub type Done<L> = (Task<L>, JobResult, Source);

/// A leased job and the lease it runs under.
#[derive(Debug, Clone)]
pub struct Task<L> {
    pub lease: L,
    pub job: Job,
}

struct Queue<L> {
    waiting: VecDeque<Task<L>>,
    /// Jobs for the CPU threads only, taken before `waiting`: the batch of a launch given up for hung
    /// (another GPU must not take it: if the batch itself hangs a device, it would hang them all).
    cpu_only: VecDeque<Task<L>>,
    running: usize,
    closed: bool,
    /// The jobs CPU threads are computing, which an idle GPU may compute too ([`Running`]).
    on_cpus: Vec<Running>,
    /// The number the next of them gets.
    next_id: u64,
    /// The worker expects no job soon (the coordinator had none to lease at its last ask, could not be
    /// reached, or the worker is shutting down): a GPU with nothing to do may back up the CPU threads'
    /// jobs.
    dry: bool,
}

/// A job a CPU thread is computing. A GPU with nothing else to do computes it too (a backup): at the
/// end of a run the last jobs are the CPU threads', far slower than the device. The first result is
/// the one sent, once, by the CPU thread that holds the task: a GPU's result goes in `answer`, and
/// `stop` tells the CPU thread to give its search up.
struct Running {
    id: u64,
    job: Job,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// A GPU may compute it (not a hung batch's job: it would hang that GPU too).
    for_gpus: bool,
    /// A GPU has taken it.
    backed: bool,
    /// A GPU's result, once in.
    answer: Option<Backup>,
}

impl Running {
    /// A GPU may take it as a backup now: one may compute it, and none has taken it.
    fn for_a_backup(&self) -> bool {
        self.for_gpus && !self.backed
    }
}

/// A GPU's result for a job a CPU thread is computing.
struct Backup {
    result: JobResult,
    /// The GPU's label.
    source: Source,
    /// Where the GPU counts its jobs (counted only if this result is the one sent).
    metrics: Arc<Metrics>,
}

struct Shared<L> {
    queue: Mutex<Queue<L>>,
    ready: Condvar,
    /// GPUs not given up.
    gpus: std::sync::atomic::AtomicUsize,
    /// Each GPU's kernel shape, and whether it still computes (not given up).
    shapes: Vec<(String, std::sync::atomic::AtomicBool)>,
    /// The jobs those GPUs take per batch now, together.
    gpu_batches: std::sync::atomic::AtomicUsize,
    /// One CPU thread's node rate over its recent jobs.
    cpu_rate: Mutex<Rate>,
    /// Whether the pool has CPU threads (a GPU keeps pace with them, see [`pace::next_batch`]).
    cpus: bool,
    /// How a CPU thread computes a job ([`run_checked_unless`]; tests put a slower CPU in its place).
    cpu: CpuRun,
}

/// A CPU thread's computation of a job, given up (`Err`, with the nodes searched) once the flag is set.
type CpuRun = fn(&Job, &std::sync::atomic::AtomicBool) -> Result<JobResult, u64>;

impl<L> Shared<L> {
    fn lock(&self) -> MutexGuard<'_, Queue<L>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cpu_rate(&self) -> MutexGuard<'_, Rate> {
        self.cpu_rate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a GPU keeps pace with: a CPU thread's rate, if it has one.
    fn cpu(&self) -> pace::Cpu {
        match self.cpu_rate().per_second() {
            Some(r) => pace::Cpu::Rate(r),
            None if self.cpus => pace::Cpu::Unmeasured,
            None => pace::Cpu::Absent,
        }
    }
}

/// The pool; dropping it drops the queue and lets running jobs finish on their own ([`ComputePool::join`]
/// waits for them).
pub struct ComputePool<L> {
    shared: Arc<Shared<L>>,
    threads: Vec<JoinHandle<()>>,
}

impl<L: Send + 'static> ComputePool<L> {
    /// Starts `threads` CPU compute threads and one thread per GPU in `devices` (at least one thread in
    /// all) that send `(task, result)` to `results`.
    pub fn new(
        threads: usize,
        devices: Vec<Device>,
        results: UnboundedSender<Done<L>>,
    ) -> ComputePool<L> {
        Self::with_cpu(threads, devices, results, run_checked_unless)
    }

    /// [`ComputePool::new`], its CPU threads computing with `cpu`.
    fn with_cpu(
        threads: usize,
        devices: Vec<Device>,
        results: UnboundedSender<Done<L>>,
        cpu: CpuRun,
    ) -> ComputePool<L> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                waiting: VecDeque::new(),
                cpu_only: VecDeque::new(),
                running: 0,
                closed: false,
                on_cpus: Vec::new(),
                next_id: 0,
                dry: false,
            }),
            ready: Condvar::new(),
            gpus: std::sync::atomic::AtomicUsize::new(devices.len()),
            shapes: devices
                .iter()
                .map(|d| {
                    let shape = d.gpu.info().shape.to_string();
                    (shape, std::sync::atomic::AtomicBool::new(true))
                })
                .collect(),
            gpu_batches: std::sync::atomic::AtomicUsize::new(devices.iter().map(first_batch).sum()),
            cpu_rate: Mutex::new(Rate::default()),
            cpus: threads > 0,
            cpu,
        });
        let cpus = if devices.is_empty() {
            threads.max(1)
        } else {
            threads
        };
        let mut handles: Vec<JoinHandle<()>> = (0..cpus)
            .map(|i| {
                let shared = shared.clone();
                let results = results.clone();
                std::thread::Builder::new()
                    .name(format!("compute-{i}"))
                    .spawn(move || compute(&shared, &results))
                    .expect("spawn a compute thread")
            })
            .collect();
        for (i, device) in devices.into_iter().enumerate() {
            // Shown from the start (before the thread runs, which may be after the jobs are done).
            device
                .metrics
                .gpu_batch(&device.gpu.info().label(), first_batch(&device));
            let shared = shared.clone();
            let results = results.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("gpu-{i}"))
                    .spawn(move || gpu_compute(&shared, &results, device, i))
                    .expect("spawn a GPU thread"),
            );
        }
        ComputePool {
            shared,
            threads: handles,
        }
    }

    /// Queues a job.
    pub fn submit(&self, task: Task<L>) {
        self.shared.lock().waiting.push_back(task);
        self.shared.ready.notify_one();
    }

    /// GPUs computing: those opened, less those given up (failed batches in a row, or a hung launch).
    pub fn gpus(&self) -> usize {
        self.shared.gpus.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The kernel shape of each GPU computing (those given up left out), in the order opened.
    pub fn gpu_kernels(&self) -> Vec<String> {
        self.shared
            .shapes
            .iter()
            .filter(|(_, live)| live.load(std::sync::atomic::Ordering::Relaxed))
            .map(|(shape, _)| shape.clone())
            .collect()
    }

    /// The jobs the GPUs computing take per batch now, together (each sized to its device's speed).
    pub fn gpu_batches(&self) -> usize {
        self.shared
            .gpu_batches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Says whether the worker expects no job soon (`dry`: the coordinator had none to lease at its last
    /// ask, could not be reached, or the worker is shutting down). While jobs come, no GPU backs up a
    /// CPU thread's job: the next jobs are on their way, and a backup would stop a CPU thread's search
    /// for nothing. Wakes the GPUs waiting for jobs.
    pub fn set_dry(&self, dry: bool) {
        self.shared.lock().dry = dry;
        self.shared.ready.notify_all();
    }

    /// Whether the worker expects no job soon ([`ComputePool::set_dry`]).
    #[cfg(test)]
    pub(crate) fn is_dry(&self) -> bool {
        self.shared.lock().dry
    }

    /// Jobs queued or running.
    pub fn load(&self) -> usize {
        let q = self.shared.lock();
        q.waiting.len() + q.cpu_only.len() + q.running
    }

    /// Takes back every job that has not started.
    pub fn take_unstarted(&self) -> Vec<Task<L>> {
        let mut q = self.shared.lock();
        let mut taken: Vec<Task<L>> = q.cpu_only.drain(..).collect();
        taken.extend(q.waiting.drain(..));
        taken
    }

    /// Takes back the jobs that have not started and whose lease `unwanted` picks.
    pub fn take_unstarted_if(&self, unwanted: impl Fn(&L) -> bool) -> Vec<Task<L>> {
        let mut q = self.shared.lock();
        let (mut taken, kept): (VecDeque<_>, VecDeque<_>) =
            q.cpu_only.drain(..).partition(|t| unwanted(&t.lease));
        q.cpu_only = kept;
        let (more, kept): (VecDeque<_>, VecDeque<_>) =
            q.waiting.drain(..).partition(|t| unwanted(&t.lease));
        q.waiting = kept;
        taken.extend(more);
        taken.into()
    }
}

fn compute<L>(shared: &Shared<L>, results: &UnboundedSender<Done<L>>) {
    loop {
        let (task, id, stop) = {
            let mut q = shared.lock();
            let (task, for_gpus) = loop {
                if q.closed {
                    return;
                }
                if let Some(t) = q.cpu_only.pop_front() {
                    break (t, false);
                }
                if let Some(t) = q.waiting.pop_front() {
                    break (t, true);
                }
                q = shared.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            };
            q.running += 1;
            let id = q.next_id;
            q.next_id += 1;
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            q.on_cpus.push(Running {
                id,
                job: task.job.clone(),
                stop: stop.clone(),
                for_gpus,
                backed: false,
                answer: None,
            });
            (task, id, stop)
        };
        // An idle GPU may take it as a backup.
        shared.ready.notify_all();
        let started = Instant::now();
        let own = (shared.cpu)(&task.job, &stop);
        // A stopped search's nodes measure this thread's speed too (a GPU that backs up every job
        // must not leave the CPU's rate unmeasured for ever).
        let nodes = own.as_ref().map_or_else(|n| *n, |r| r.nodes);
        shared
            .cpu_rate()
            .add(nodes, started.elapsed().as_secs_f64());
        // Its entry leaves the list first: no GPU's answer comes for it after this.
        let answer = {
            let mut q = shared.lock();
            match q.on_cpus.iter().position(|r| r.id == id) {
                Some(i) => q.on_cpus.swap_remove(i).answer,
                None => None,
            }
        };
        let (result, source) = match (own, answer) {
            // Its own when it finished: a GPU's that came too is the same, or one of the two is wrong.
            (Ok(own), answer) => {
                if let Some(gpu) = answer.filter(|a| a.result != own) {
                    tracing::error!(job = %task.job.key(), device = ?gpu.source, cpu = ?own, gpu = ?gpu.result, "a GPU and this CPU computed different results for one job: the CPU's is sent (the coordinator's checks decide)");
                }
                (own, None)
            }
            (Err(_), Some(gpu)) => {
                gpu.metrics.gpu_jobs.inc();
                gpu.metrics.gpu_backups_sent.inc();
                (gpu.result, gpu.source)
            }
            // Stopped with no answer: never (a stop comes with its answer); computed anew.
            (Err(_), None) => (run_checked(&task.job), None),
        };
        // Send the result and count the job finished under one lock: whoever has received the result
        // sees it no longer counted, and whoever reads `load` without it finds its result in the
        // channel (the client loop takes those in before it decides to stop).
        let mut q = shared.lock();
        let _ = results.send((task, result, source));
        q.running -= 1;
    }
}

/// [`run_checked`], given up (`Err`, with the nodes searched) once `stop` is set.
fn run_checked_unless(job: &Job, stop: &std::sync::atomic::AtomicBool) -> Result<JobResult, u64> {
    let result = job.run_unless(stop)?;
    match job.check(&result) {
        Ok(()) => Ok(result),
        Err(why) => {
            tracing::error!(job = %job.key(), error = %why, "a computed result fails its bounds (a fault of this machine?): computing the job again");
            job.run_unless(stop)
        }
    }
}

/// Computes `job` on this thread's CPU. A result whose counts contradict each other (a fault of this
/// machine) is computed once more and sent as it comes then; the coordinator refuses it if it is still
/// wrong.
fn run_checked(job: &Job) -> nqueens_common::JobResult {
    let result = job.run();
    match job.check(&result) {
        Ok(()) => result,
        Err(why) => {
            tracing::error!(job = %job.key(), error = %why, "a computed result fails its bounds (a fault of this machine?): computing the job again");
            job.run()
        }
    }
}

/// Hands `tasks`, taken from the queue and not computed, to the CPU threads: ahead of every other job,
/// and out of every GPU's reach.
fn for_the_cpus<L>(shared: &Shared<L>, tasks: Vec<Task<L>>) {
    {
        let mut q = shared.lock();
        q.running -= tasks.len();
        q.cpu_only.extend(tasks);
    }
    shared.ready.notify_all();
}

impl<L> ComputePool<L> {
    /// Closes the pool and waits until its threads end (a running job finishes first: minutes, at worst;
    /// a GPU's thread waiting on a hung launch, up to its timeout).
    /// Blocking: call it on a blocking thread (`spawn_blocking`), never on a runtime thread.
    pub fn join(mut self) {
        self.close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
    }
}

impl<L> Drop for ComputePool<L> {
    /// Closes the queue without waiting: the threads finish the job in hand and end by themselves, so a
    /// pool dropped on a runtime thread (say, by an error) never holds that thread for a search.
    fn drop(&mut self) {
        self.close();
    }
}
