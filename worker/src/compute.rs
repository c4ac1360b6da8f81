//! The compute pool of a networked worker: dedicated OS threads that take leased jobs from a queue and
//! send each result back to the async client loop, so heartbeats and reports never wait behind the search.
//! A GPU gets a thread of its own that takes jobs a batch at a time, the batch sized to the device's speed
//! against a CPU thread's ([`crate::pace`]), and hands the next batch to its launch thread while the one
//! before still runs; a batch the device fails (or answers
//! implausibly) is computed on the CPU instead, and a device that fails three batches in a row, or one
//! launch that runs past its timeout (a hung driver), is given up for the CPU. Jobs still in the queue
//! have not started and can be taken back (to hand them back on shutdown).

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nqueens_common::{Job, JobResult};
use nqueens_gpu::Gpu;
use tokio::sync::mpsc::UnboundedSender;

use crate::metrics::Metrics;
use crate::pace::{self, Rate};

/// Batches a GPU may fail in a row before the worker stops using it.
const GPU_STRIKES: u32 = 3;

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
    /// A GPU's result and its label, once in.
    answer: Option<(JobResult, Source)>,
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

/// A CPU thread's computation of a job, given up (`None`) once the flag is set.
type CpuRun = fn(&Job, &std::sync::atomic::AtomicBool) -> Option<JobResult>;

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
        if let Some(r) = &own {
            shared
                .cpu_rate()
                .add(r.nodes, started.elapsed().as_secs_f64());
        }
        // Send the result and count the job finished under one lock: whoever has received the result
        // sees it no longer counted, and whoever reads `load` without it finds its result in the
        // channel (the client loop takes those in before it decides to stop).
        let mut q = shared.lock();
        let answer = match q.on_cpus.iter().position(|r| r.id == id) {
            Some(i) => q.on_cpus.swap_remove(i).answer,
            None => None,
        };
        let (result, source) = match (own, answer) {
            // Its own when it finished: a GPU's that came too is the same, or one of the two is wrong.
            (Some(own), answer) => {
                if let Some((gpu, device)) = answer.filter(|(gpu, _)| *gpu != own) {
                    tracing::error!(job = %task.job.key(), ?device, cpu = ?own, ?gpu, "a GPU and this CPU computed different results for one job: the CPU's is sent (the coordinator's checks decide)");
                }
                (own, None)
            }
            (None, Some(answer)) => answer,
            // Stopped with no answer: never (a stop comes with its answer); computed anew.
            (None, None) => (run_checked(&task.job), None),
        };
        let _ = results.send((task, result, source));
        q.running -= 1;
    }
}

/// [`run_checked`], given up (`None`) once `stop` is set.
fn run_checked_unless(job: &Job, stop: &std::sync::atomic::AtomicBool) -> Option<JobResult> {
    let result = job.run_unless(stop)?;
    match job.check(&result) {
        Ok(()) => Some(result),
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

/// A GPU's thread: up to a batch of jobs at a time (the launch thread cuts it into launches, see
/// [`nqueens_gpu::Stream`]), each result checked by the engine; a failed batch is computed here on the
/// CPU, and after [`GPU_STRIKES`] failed batches in a row the thread goes on as a CPU thread. The
/// launches themselves run on a thread of their own ([`launcher`]), which says when it has started every
/// launch it was given: this thread then hands it the next batch, if the queue has one, so the device
/// runs on from one batch into the next (at most [`ahead`] batches handed over at once). A batch that
/// runs past the device's timeout (a hung driver) is given up, it and those behind it handed to the
/// CPU threads (never to another GPU), and this thread goes on as one of them, leaving the launcher
/// behind.
fn gpu_compute<L>(
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
    // Whether the launch thread has started every launch it was given and was told no batch waited
    // then: one is handed over as soon as there is.
    let mut hungry = false;
    // Since when the oldest has been the device's (its answer is awaited from then), and whether the
    // wait has been warned of.
    let mut since = Instant::now();
    let mut warned = false;
    loop {
        let next = match handed.is_empty() {
            true => match take(shared, batch, true) {
                Some(held) => Some(held),
                None => return,
            },
            false if hungry && handed.len() < ahead(shared, batch) => take(shared, batch, false),
            false => None,
        };
        if let Some(held) = next {
            hungry = false;
            if handed.is_empty() {
                (since, warned) = (Instant::now(), false);
            }
            // A send that fails (the launch thread gone) is found by `wait` below; the batch goes to
            // the CPUs with the others.
            let _ = launch.send(Some(held.jobs()));
            handed.push_back((held, batch));
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
                hungry = tasks.is_none();
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
        let used = match held {
            Held::Jobs(tasks) => {
                let mut q = shared.lock();
                let used = tasks.len();
                for (task, result) in tasks.into_iter().zip(computed) {
                    let _ = results.send((task, result, source.clone()));
                    q.running -= 1;
                }
                used
            }
            Held::Backups(ids) => backed_up(shared, &ids, computed, &source),
        };
        if source.is_some() {
            device.metrics.gpu_jobs.inc_by(used as u64);
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
fn ahead<L>(shared: &Shared<L>, batch: usize) -> usize {
    match shared.cpus && batch <= 1 {
        true => 1,
        false => AHEAD,
    }
}

/// A batch a GPU's thread handed to its launch thread.
enum Held<L> {
    /// Jobs taken from the queue (counted running).
    Jobs(Vec<Task<L>>),
    /// Jobs CPU threads are computing, by their numbers ([`Running`]), and the jobs.
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
/// CPU threads are computing, else it waits for either. `None` when the pool is closed, or, not
/// blocking, when no job waits.
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
        let backups: Vec<(u64, Job)> = q
            .on_cpus
            .iter_mut()
            .filter(|r| r.for_gpus && !r.backed)
            .take(batch)
            .map(|r| {
                r.backed = true;
                (r.id, r.job.clone())
            })
            .collect();
        if !backups.is_empty() {
            return Some(Held::Backups(backups));
        }
        q = shared.ready.wait(q).unwrap_or_else(|e| e.into_inner());
    }
}

/// Hands a GPU's results for backups `ids` (empty: the batch failed) to the CPU threads computing
/// them, and tells those threads to stop; one a CPU thread has finished meanwhile is dropped. Returns
/// how many were used.
fn backed_up<L>(
    shared: &Shared<L>,
    ids: &[(u64, Job)],
    computed: Vec<JobResult>,
    source: &Source,
) -> usize {
    let mut q = shared.lock();
    let mut used = 0;
    for ((id, _), result) in ids.iter().zip(computed) {
        if let Some(r) = q
            .on_cpus
            .iter_mut()
            .find(|r| r.id == *id && r.answer.is_none())
        {
            r.answer = Some((result, source.clone()));
            r.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            used += 1;
        }
    }
    used
}

/// The jobs `device` takes at its first batch.
fn first_batch(device: &Device) -> usize {
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

/// What a launch thread says: every launch it was given has started (it waits for the reply, the next
/// batch or none), or the oldest batch's answer (its results, or why the device failed it).
enum Said {
    Started,
    Answer(nqueens_gpu::Answer),
}

/// What a GPU's thread sends its launch thread: a batch, or (to [`Said::Started`]) that none waits.
type Handed = Option<Vec<Job>>;

/// Starts a thread that owns `gpu` and runs each batch sent to it through one [`nqueens_gpu::Stream`],
/// answering each batch in order. Once every launch it holds has started (and again after each
/// answer) it says so and waits for the reply before it waits on the device: a batch of one launch
/// still starts while the one before runs. It ends when the sender is dropped and its batches are answered, or when what it says finds
/// nobody listening (after a launch given up for hung: whatever it computed then is not used). `None` if
/// no thread could be started.
fn launcher(mut gpu: Gpu) -> Option<(Sender<Handed>, Receiver<Said>)> {
    let (launch, batches) = std::sync::mpsc::channel::<Handed>();
    let (say, said) = std::sync::mpsc::channel::<Said>();
    let name = format!("gpu-launch-{}", gpu.info().label());
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let mut stream = nqueens_gpu::Stream::new(&mut gpu);
            // Whether `Started` was said since the last batch came or was answered.
            let mut told = false;
            loop {
                if stream.is_idle() {
                    match batches.recv() {
                        Ok(Some(jobs)) => stream.push(jobs, nqueens_gpu::Split::Paced),
                        Ok(None) => continue,
                        Err(_) => return,
                    }
                    told = false;
                }
                while let Ok(handed) = batches.try_recv() {
                    if let Some(jobs) = handed {
                        stream.push(jobs, nqueens_gpu::Split::Paced);
                        told = false;
                    }
                }
                if stream.fill() && !told {
                    told = true;
                    if say.send(Said::Started).is_err() {
                        return;
                    }
                    // The reply (a sender gone is found at the next `recv`).
                    if let Ok(Some(jobs)) = batches.recv() {
                        stream.push(jobs, nqueens_gpu::Split::Paced);
                        told = false;
                        continue;
                    }
                }
                stream.collect();
                while let Some(answer) = stream.answer() {
                    if say.send(Said::Answer(answer)).is_err() {
                        return;
                    }
                    // Its place may go to the next batch: asked for before the next wait on the
                    // device, if every launch held has started.
                    told = false;
                }
            }
        })
        .ok()?;
    Some((launch, said))
}

/// Waits for what the launch thread says, the oldest batch (of `jobs` jobs) being the device's since
/// `since`: at most until `timeout` after it, warning once (`warned`) when half of it has passed.
/// `None` (logged at error level) if the batch ran past `timeout` or the thread is gone.
fn wait(
    said: &Receiver<Said>,
    since: Instant,
    warned: &mut bool,
    timeout: Duration,
    info: &nqueens_gpu::DeviceInfo,
    jobs: usize,
) -> Option<Said> {
    let half = timeout / 2;
    loop {
        let (until, warn) = match *warned {
            false => (since + half, true),
            true => (since + timeout, false),
        };
        match said.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(said) => return Some(said),
            Err(RecvTimeoutError::Timeout) if warn => {
                *warned = true;
                tracing::warn!(device = %info, jobs, running = ?half, timeout = ?timeout, "GPU launch has run half of its timeout (--gpu-timeout)");
            }
            Err(RecvTimeoutError::Timeout) => {
                tracing::error!(device = %info, jobs, timeout = ?timeout, "GPU launch ran past its timeout (--gpu-timeout): the device is taken for hung; its batch, and from now on everything, goes to the CPU");
                return None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                tracing::error!(device = %info, jobs, "the GPU's launch thread is gone; its batch, and from now on everything, goes to the CPU");
                return None;
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use nqueens_common::{Plan, Strategy};

    /// Queues every job of `plan`, the lease of each its index; returns their keys.
    fn submit_all(pool: &ComputePool<usize>, plan: &Plan) -> Vec<nqueens_common::JobKey> {
        let keys: Vec<_> = plan.jobs().collect();
        for (i, key) in keys.iter().enumerate() {
            pool.submit(Task {
                lease: i,
                job: plan.job(key).unwrap(),
            });
        }
        keys
    }

    #[test]
    fn every_job_comes_back_once() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let pool = ComputePool::new(3, Vec::new(), tx);
        let n = submit_all(&pool, &plan).len();
        let mut seen = vec![false; n];
        let mut total = 0;
        for _ in 0..n {
            let (task, r, source) = rx.blocking_recv().unwrap();
            assert_eq!(source, None, "computed on the CPU");
            assert!(!seen[task.lease]);
            seen[task.lease] = true;
            total += r.total;
        }
        assert_eq!(total, 724);
        assert_eq!(pool.load(), 0);
    }

    /// A test double of a device: `before` runs at each launch, which then answers two words per seed,
    /// as asked, but no nodes: a count nobody may believe.
    struct Fake<F>(nqueens_gpu::DeviceInfo, F);

    impl<F: FnMut() + Send> nqueens_gpu::Launch for Fake<F> {
        fn info(&self) -> &nqueens_gpu::DeviceInfo {
            &self.0
        }
        fn launch(
            &mut self,
            seeds: &[u32],
            _: &[u32],
            _: &[u32],
            _: u32,
        ) -> Result<Vec<u64>, nqueens_gpu::GpuError> {
            (self.1)();
            Ok(vec![0; seeds.len() / 2])
        }
    }

    #[test]
    fn a_failing_gpu_falls_back_to_the_cpu_and_is_given_up() {
        // One device, then two in one pool: each is given up on its own, after its own failed batches.
        for devices in [1usize, 2] {
            let plan = Plan::new(10, Strategy::D4).unwrap();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let launches: Vec<Arc<std::sync::atomic::AtomicUsize>> = (0..devices)
                .map(|_| Arc::new(std::sync::atomic::AtomicUsize::new(0)))
                .collect();
            let metrics = Arc::new(Metrics::default());
            let pool_devices: Vec<Device> = launches
                .iter()
                .enumerate()
                .map(|(index, launched)| {
                    let info = nqueens_gpu::DeviceInfo {
                        backend: nqueens_gpu::Backend::OpenCl,
                        index,
                        name: "broken".into(),
                        threads: 4,
                        shape: nqueens_gpu::Shape::default_for(nqueens_gpu::Backend::OpenCl),
                    };
                    Device {
                        gpu: Gpu::new(Box::new(Fake(info, {
                            // Counts its launches.
                            let launched = launched.clone();
                            move || {
                                launched.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                        }))),
                        batch: 2,
                        metrics: metrics.clone(),
                        timeout: std::time::Duration::from_secs(60),
                    }
                })
                .collect();
            metrics.gpus.set(devices as i64);
            // No CPU thread: the GPUs' threads do everything.
            let pool = ComputePool::new(0, pool_devices, tx);
            let shape = nqueens_gpu::Shape::default_for(nqueens_gpu::Backend::OpenCl).to_string();
            assert_eq!(
                pool.gpu_kernels(),
                vec![shape; devices],
                "each device's shape"
            );
            let keys = submit_all(&pool, &plan);
            let mut total = 0;
            let mut credited = 0;
            for _ in 0..keys.len() {
                let (task, r, source) = rx.blocking_recv().unwrap();
                assert_eq!(r, task.job.run(), "job {}", task.job.key());
                // A batch the device failed is the CPU's. (A batch whose searches were all settled on
                // the host needs no launch, and succeeds on the GPU's thread: with two devices racing
                // for the queue, one may draw such a batch.)
                credited += source.is_some() as u64;
                total += r.total;
            }
            assert_eq!(total, 724, "every job counted exactly");
            let gpus_left = pool.gpus();
            let kernels_left = pool.gpu_kernels().len();
            let pool_batches = pool.gpu_batches();
            pool.join();
            let each: Vec<usize> = launches
                .iter()
                .map(|l| l.load(std::sync::atomic::Ordering::SeqCst))
                .collect();
            assert_eq!(metrics.gpu_jobs.get(), credited);
            // A batch is one job (a device starts at `pace::FIRST_BATCH`, and a failed batch measures
            // nothing), so one launch: every batch fails at its answer (those handed over behind the
            // last may have launched and not been answered).
            let launched = each.iter().sum::<usize>() as u64;
            let failures = metrics.gpu_failures.get();
            assert!(
                failures <= launched && launched <= 2 * failures,
                "every batch failed: {failures} failures, {launched} launches"
            );
            if devices == 1 {
                // One device takes the queue in order: its first three batches fail, and it is given
                // up (its thread goes on as a CPU thread).
                let strikes = GPU_STRIKES as usize;
                assert!(keys.len() > 2 * strikes);
                assert_eq!(
                    failures, GPU_STRIKES as u64,
                    "given up after {GPU_STRIKES} failed batches"
                );
                // One launch a batch; the batch handed over behind the third may have started too,
                // its answer unused.
                assert_eq!(each.len(), 1);
                assert!(
                    (strikes..=strikes + AHEAD - 1).contains(&each[0]),
                    "{each:?}"
                );
                assert_eq!(pool_batches, 0, "a device given up takes no batch");
                assert!(
                    metrics
                        .render()
                        .contains("nqueens_worker_gpu_batch{device=\"opencl:0\"} 0\n"),
                    "the metric shows no batch"
                );
                assert_eq!(credited, 0);
                assert_eq!(metrics.gpus.get(), 0);
                assert_eq!(gpus_left, 0, "the pool counts it given up");
                assert_eq!(kernels_left, 0, "its kernel is no longer listed (issue 39)");
            } else {
                // Two race for the queue (which gets how much is up to the scheduler): each fails
                // whatever it launches, and is given up after three failures in a row unless the
                // jobs run out first.
                assert!(each.iter().sum::<usize>() <= keys.len(), "{each:?}");
                assert!(failures <= 2 * GPU_STRIKES as u64, "{failures}");
                assert!((0..=devices as i64).contains(&metrics.gpus.get()));
                // (Read apart from `gpus_left`: a device given up between the two reads is in one only.)
                assert!(kernels_left <= devices, "{kernels_left}");
            }
        }
    }

    /// A batch handed to the CPU threads (a hung launch's) is taken by them first, never by a GPU's
    /// thread: a batch that hangs one device must not go on to hang the next. It still counts as load and
    /// is handed back with the other unstarted jobs.
    #[test]
    fn a_hung_batch_goes_to_the_cpus_only() {
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let keys: Vec<_> = plan.jobs().collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // The queue is driven by hand: the pool's own thread (a pool without devices has one) is ended
        // first, or it could take a job below before the test's thread (a flaky order).
        let mut pool: ComputePool<usize> = ComputePool::new(0, Vec::new(), tx.clone());
        pool.close();
        for t in std::mem::take(&mut pool.threads) {
            t.join().unwrap();
        }
        let task = |i: usize| Task {
            lease: i,
            job: plan.job(&keys[i]).unwrap(),
        };
        pool.shared.lock().running += 2;
        for_the_cpus(&pool.shared, vec![task(0), task(1)]);
        pool.submit(task(2));
        assert_eq!(pool.load(), 3);
        {
            let q = pool.shared.lock();
            let for_a_gpu: Vec<usize> = q.waiting.iter().map(|t| t.lease).collect();
            assert_eq!(for_a_gpu, [2], "a GPU's thread sees only the other job");
        }
        let handed_back: Vec<usize> = pool.take_unstarted().iter().map(|t| t.lease).collect();
        assert_eq!(handed_back, [0, 1, 2]);
        // A CPU thread takes the hung batch first.
        pool.shared.lock().closed = false;
        for_the_cpus(&pool.shared, {
            pool.shared.lock().running += 1;
            vec![task(0)]
        });
        pool.submit(task(1));
        let shared = pool.shared.clone();
        let worker = std::thread::spawn(move || compute(&shared, &tx));
        let (first, _, _) = rx.blocking_recv().unwrap();
        assert_eq!(first.lease, 0);
        let _ = rx.blocking_recv().unwrap();
        pool.close();
        worker.join().unwrap();
    }

    /// A launch that runs past the device's timeout is given up: its jobs are computed on the CPU and the
    /// device is used no more. Before, the worker waited for it for ever, heartbeating its leases, and the
    /// run stalled. The pool still joins: the hung launch is left behind, not waited for.
    #[test]
    fn a_launch_that_never_returns_is_given_up_for_the_cpu() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let metrics = Arc::new(Metrics::default());
        let info = nqueens_gpu::DeviceInfo {
            backend: nqueens_gpu::Backend::Cuda,
            index: 0,
            name: "hung".into(),
            threads: 4,
            shape: nqueens_gpu::Shape::default_for(nqueens_gpu::Backend::Cuda),
        };
        let device = Device {
            // Its launch never returns (a hung driver) until the test lets it go.
            gpu: Gpu::new(Box::new(Fake(info, move || {
                let _ = hold.recv();
            }))),
            batch: 2,
            metrics: metrics.clone(),
            timeout: std::time::Duration::from_millis(200),
        };
        metrics.gpus.set(1);
        // No CPU thread: the GPU's thread must take over.
        let pool = ComputePool::new(0, vec![device], tx);
        let keys = submit_all(&pool, &plan);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut total = 0;
        for _ in 0..keys.len() {
            let (task, r, source) = loop {
                match rx.try_recv() {
                    Ok(done) => break done,
                    Err(_) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(5))
                    }
                    Err(_) => panic!("jobs stuck behind a launch that never returns"),
                }
            };
            assert_eq!(source, None, "the CPU's");
            assert_eq!(r, task.job.run(), "job {}", task.job.key());
            total += r.total;
        }
        assert_eq!(total, 724, "every job counted exactly");
        assert_eq!(metrics.gpus.get(), 0, "the device given up");
        assert_eq!(metrics.gpu_failures.get(), 1);
        let (joined, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            pool.join();
            let _ = joined.send(());
        });
        assert!(
            done.recv_timeout(std::time::Duration::from_secs(10))
                .is_ok(),
            "the pool waited for the hung launch"
        );
        drop(release);
    }

    /// A device's next batch starts while the batch before it runs: with batches of one job (one
    /// launch each) and no CPU thread, two launches are under way at once, and every job comes back
    /// once, exact. Before, a GPU's thread handed over one batch at a time: the device finished each
    /// (its last launch alone) before the host began preparing the next.
    #[test]
    fn a_devices_next_batch_starts_while_the_one_before_runs() {
        use std::sync::atomic::Ordering::SeqCst;
        let plan = Plan::new(12, Strategy::D4).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let metrics = Arc::new(Metrics::default());
        let info = || nqueens_gpu::DeviceInfo {
            backend: nqueens_gpu::Backend::OpenCl,
            index: 0,
            name: "double".into(),
            threads: 64,
            shape: nqueens_gpu::Shape::default_for(nqueens_gpu::Backend::OpenCl),
        };
        let double = nqueens_gpu::doubles::Later::new(info());
        let (launches, most) = (double.launches.clone(), double.most.clone());
        let device = Device {
            gpu: Gpu::new(Box::new(double)),
            batch: 1,
            metrics: metrics.clone(),
            timeout: std::time::Duration::from_secs(600),
        };
        // No CPU thread: the device computes every job.
        let pool = ComputePool::new(0, vec![device], tx);
        let keys = submit_all(&pool, &plan);
        let mut seen = vec![false; keys.len()];
        let mut total = 0;
        for _ in 0..keys.len() {
            let (task, r, source) = rx.blocking_recv().unwrap();
            assert_eq!(source.as_deref(), Some("opencl:0"));
            assert!(!seen[task.lease], "job {} came back twice", task.lease);
            seen[task.lease] = true;
            assert_eq!(r, task.job.run(), "job {}", task.job.key());
            total += r.total;
        }
        assert_eq!(total, 14200);
        pool.join();
        assert_eq!(metrics.gpu_jobs.get(), keys.len() as u64);
        assert_eq!(metrics.gpu_failures.get(), 0);
        // Every job but those whose searches were all settled on the host took a launch of its own.
        assert!(launches.load(SeqCst) <= keys.len());
        assert_eq!(
            most.load(SeqCst),
            nqueens_gpu::IN_FLIGHT,
            "launches of two batches under way at once"
        );
        // Beside a CPU thread, a device that takes one job at a time (no faster than a core, or not
        // yet measured) holds one batch: the CPU threads may take every other job.
        for (threads, batch, most) in [(1, 1, 1), (1, 2, AHEAD), (0, 1, AHEAD), (2, 64, AHEAD)] {
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            let pool: ComputePool<usize> = ComputePool::new(threads, Vec::new(), tx);
            assert_eq!(
                ahead(&pool.shared, batch),
                most,
                "{threads} threads, batch {batch}"
            );
        }
    }

    /// A device whose first launch answers no nodes (refused at once), the others the true search after
    /// 50 ms.
    struct FirstRefused(nqueens_gpu::doubles::Later);

    impl nqueens_gpu::Launch for FirstRefused {
        fn info(&self) -> &nqueens_gpu::DeviceInfo {
            self.0.info()
        }
        fn launch(
            &mut self,
            s: &[u32],
            f: &[u32],
            t: &[u32],
            w: u32,
        ) -> Result<Vec<u64>, nqueens_gpu::GpuError> {
            self.submit(s, f, t, w)?.wait()
        }
        fn submit(
            &mut self,
            s: &[u32],
            f: &[u32],
            t: &[u32],
            w: u32,
        ) -> Result<nqueens_gpu::Pending, nqueens_gpu::GpuError> {
            if self
                .0
                .launches
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                == 0
            {
                return Ok(nqueens_gpu::Pending::ready(vec![0; s.len() / 2]));
            }
            self.0
                .launches
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            let p = self.0.submit(s, f, t, w)?;
            // A device's time: a wait for the answer finds none at first.
            Ok(nqueens_gpu::Pending::later(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                p.wait()
            }))
        }
    }

    /// A failed batch computed on the GPU's thread for longer than the device's timeout does not make
    /// the device look hung: the next batch is awaited from when the fallback is done. Before, it was
    /// awaited from the failed batch's answer, and a healthy device was given up (found by a review).
    #[test]
    fn a_long_fallback_on_the_cpu_is_not_a_hung_device() {
        let big = Plan::new(19, Strategy::D4).unwrap();
        let small = Plan::new(8, Strategy::D4).unwrap();
        let timeout = std::time::Duration::from_millis(300);
        let first = big.job(&big.jobs().next().unwrap()).unwrap();
        let started = std::time::Instant::now();
        let want = first.run();
        assert!(
            started.elapsed() > timeout,
            "the job computed on the CPU must outlast the timeout: {:?}",
            started.elapsed()
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let metrics = Arc::new(Metrics::default());
        let info = nqueens_gpu::DeviceInfo {
            backend: nqueens_gpu::Backend::OpenCl,
            index: 0,
            name: "double".into(),
            threads: 64,
            shape: nqueens_gpu::Shape::default_for(nqueens_gpu::Backend::OpenCl),
        };
        let device = Device {
            gpu: Gpu::new(Box::new(FirstRefused(nqueens_gpu::doubles::Later::new(
                info,
            )))),
            batch: 1,
            metrics: metrics.clone(),
            timeout,
        };
        metrics.gpus.set(1);
        // No CPU thread: the GPU's thread computes the refused batch itself.
        let pool = ComputePool::new(0, vec![device], tx);
        pool.submit(Task {
            lease: 0,
            job: first,
        });
        let keys: Vec<_> = small.jobs().collect();
        for (i, key) in keys.iter().enumerate() {
            pool.submit(Task {
                lease: i + 1,
                job: small.job(key).unwrap(),
            });
        }
        for _ in 0..=keys.len() {
            let (task, r, source) = rx.blocking_recv().unwrap();
            if task.lease == 0 {
                assert_eq!(r, want);
                assert_eq!(source, None, "the refused batch is the CPU's");
            } else {
                assert_eq!(r, task.job.run());
                assert_eq!(source.as_deref(), Some("opencl:0"), "job {}", task.lease);
            }
        }
        pool.join();
        assert_eq!(metrics.gpu_failures.get(), 1, "the refused batch only");
        assert_eq!(metrics.gpus.get(), 1, "the device is still used");
    }

    /// A CPU that never finishes a job by itself: it waits until told to stop (30 s at most, then
    /// computes it).
    fn a_cpu_that_waits(job: &Job, stop: &std::sync::atomic::AtomicBool) -> Option<JobResult> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if Instant::now() > deadline {
                return job.run_unless(stop);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// Lets [`a_cpu_that_waits_to_go`] finish.
    static GO: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// A CPU that computes a job once [`GO`] is set.
    fn a_cpu_that_waits_to_go(
        job: &Job,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Option<JobResult> {
        while !GO.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        job.run_unless(stop)
    }

    /// Lets [`Gated`]'s launches answer.
    static RELEASE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// A device whose launches answer the true search once [`RELEASE`] is set.
    struct Gated(nqueens_gpu::doubles::Later);

    impl nqueens_gpu::Launch for Gated {
        fn info(&self) -> &nqueens_gpu::DeviceInfo {
            self.0.info()
        }
        fn launch(
            &mut self,
            s: &[u32],
            f: &[u32],
            t: &[u32],
            w: u32,
        ) -> Result<Vec<u64>, nqueens_gpu::GpuError> {
            self.submit(s, f, t, w)?.wait()
        }
        fn submit(
            &mut self,
            s: &[u32],
            f: &[u32],
            t: &[u32],
            w: u32,
        ) -> Result<nqueens_gpu::Pending, nqueens_gpu::GpuError> {
            let p = self.0.submit(s, f, t, w)?;
            Ok(nqueens_gpu::Pending::later(move || {
                while !RELEASE.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                p.wait()
            }))
        }
    }

    /// A pool of one CPU thread computing with `cpu`, holding one job of N = 12 once its thread has
    /// taken it (a hung batch's, for the CPU threads only, if `hung`); then a GPU's thread started
    /// beside it (a `Later` device wrapped by `device`, 4 jobs a batch). Returns the pool, the job, the
    /// results, the GPU's thread and its metrics.
    #[allow(clippy::type_complexity)]
    fn a_cpu_on_a_job_then_a_gpu(
        hung: bool,
        cpu: CpuRun,
        device: impl FnOnce(nqueens_gpu::doubles::Later) -> Box<dyn nqueens_gpu::Launch>,
    ) -> (
        ComputePool<usize>,
        Job,
        tokio::sync::mpsc::UnboundedReceiver<Done<usize>>,
        JoinHandle<()>,
        Arc<Metrics>,
    ) {
        let plan = Plan::new(12, Strategy::D4).unwrap();
        let job = plan.job(&plan.jobs().next().unwrap()).unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let pool = ComputePool::with_cpu(1, Vec::new(), tx.clone(), cpu);
        let task = Task {
            lease: 7,
            job: job.clone(),
        };
        if hung {
            pool.shared.lock().running += 1;
            for_the_cpus(&pool.shared, vec![task]);
        } else {
            pool.submit(task);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while pool.shared.lock().on_cpus.is_empty() {
            assert!(
                Instant::now() < deadline,
                "the CPU thread never took the job"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let metrics = Arc::new(Metrics::default());
        let gpu = Device {
            gpu: Gpu::new(device(nqueens_gpu::doubles::Later::new(
                nqueens_gpu::DeviceInfo {
                    backend: nqueens_gpu::Backend::OpenCl,
                    index: 0,
                    name: "double".into(),
                    threads: 64,
                    shape: nqueens_gpu::Shape::default_for(nqueens_gpu::Backend::OpenCl),
                },
            ))),
            batch: 4,
            metrics: metrics.clone(),
            timeout: Duration::from_secs(600),
        };
        let shared = pool.shared.clone();
        let thread = std::thread::spawn(move || gpu_compute(&shared, &tx, gpu, 0));
        (pool, job, rx, thread, metrics)
    }

    /// A GPU with nothing to do computes the job a CPU thread is on (a backup); its result is sent
    /// once, by the CPU thread, which stops. Before, the device idled while the CPU threads finished
    /// the last jobs of a run, far slower than it.
    #[test]
    fn an_idle_gpu_computes_a_cpu_threads_job_and_the_first_result_is_sent_once() {
        let (pool, job, mut rx, gpu, metrics) =
            a_cpu_on_a_job_then_a_gpu(false, a_cpu_that_waits, |d| Box::new(d));
        let (task, r, source) = rx.blocking_recv().unwrap();
        assert_eq!(task.lease, 7);
        assert_eq!(r, job.run());
        assert_eq!(source.as_deref(), Some("opencl:0"), "the GPU's result");
        assert_eq!(metrics.gpu_jobs.get(), 1);
        pool.join();
        gpu.join().unwrap();
        assert!(rx.try_recv().is_err(), "one result");
    }

    /// A hung batch's job, for the CPU threads only, is never a GPU's backup: it could hang that
    /// device too.
    #[test]
    fn a_hung_batchs_job_is_no_backup() {
        let (pool, job, mut rx, gpu, metrics) =
            a_cpu_on_a_job_then_a_gpu(true, a_cpu_that_waits, |d| Box::new(d));
        std::thread::sleep(Duration::from_millis(300));
        let stop = {
            let q = pool.shared.lock();
            assert_eq!(q.on_cpus.len(), 1);
            assert!(!q.on_cpus[0].for_gpus && !q.on_cpus[0].backed);
            q.on_cpus[0].stop.clone()
        };
        assert_eq!(metrics.gpu_jobs.get(), 0);
        // Stopped with no answer (never, outside this test): the CPU computes it anew.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (task, r, source) = rx.blocking_recv().unwrap();
        assert_eq!((task.lease, source), (7, None));
        assert_eq!(r, job.run());
        pool.join();
        gpu.join().unwrap();
        assert!(rx.try_recv().is_err(), "one result");
    }

    /// A CPU thread that finishes before the GPU's backup sends its own result; the GPU's, later, is
    /// dropped: one result.
    #[test]
    fn a_cpu_thread_that_finishes_first_sends_its_own_result_once() {
        let (pool, job, mut rx, gpu, metrics) =
            a_cpu_on_a_job_then_a_gpu(false, a_cpu_that_waits_to_go, |d| Box::new(Gated(d)));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !pool.shared.lock().on_cpus.iter().all(|r| r.backed) {
            assert!(Instant::now() < deadline, "the GPU never took the backup");
            std::thread::sleep(Duration::from_millis(1));
        }
        GO.store(true, std::sync::atomic::Ordering::SeqCst);
        let (task, r, source) = rx.blocking_recv().unwrap();
        assert_eq!((task.lease, source), (7, None), "the CPU's result");
        assert_eq!(r, job.run());
        RELEASE.store(true, std::sync::atomic::Ordering::SeqCst);
        pool.join();
        gpu.join().unwrap();
        assert!(rx.try_recv().is_err(), "one result");
        assert_eq!(metrics.gpu_jobs.get(), 0, "the GPU's came too late");
    }

    #[test]
    fn a_gpu_computes_batches_exactly() {
        // PoCL's CPU device where installed (CI installs it); otherwise this says it was skipped.
        let open = || match nqueens_gpu::open(Some("opencl:0")) {
            Ok(mut g) => Some(g.remove(0)),
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("skipped: {e}");
                None
            }
            Err(e) => panic!("CI must run the GPU pool on PoCL: {e}"),
        };
        let plan = Plan::new(12, Strategy::D4).unwrap();
        // The device alone, then beside a CPU thread (its batch sized against that thread's rate).
        for threads in [0, 1] {
            let Some(gpu) = open() else { return };
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let metrics = Arc::new(Metrics::default());
            let device = Device {
                gpu,
                batch: 7,
                metrics: metrics.clone(),
                timeout: std::time::Duration::from_secs(600),
            };
            let pool = ComputePool::new(threads, vec![device], tx);
            assert_eq!(pool.gpu_batches(), pace::FIRST_BATCH);
            let keys = submit_all(&pool, &plan);
            let mut seen = vec![false; keys.len()];
            let mut total = 0;
            let mut on_the_gpu = 0;
            for _ in 0..keys.len() {
                let (task, r, source) = rx.blocking_recv().unwrap();
                match source.as_deref() {
                    Some("opencl:0") => on_the_gpu += 1,
                    None if threads > 0 => {}
                    other => panic!("computed on {other:?}"),
                }
                assert!(!seen[task.lease]);
                seen[task.lease] = true;
                assert_eq!(r, task.job.run(), "job {}", task.job.key());
                total += r.total;
            }
            assert_eq!(total, 14200);
            assert_eq!(pool.load(), 0);
            assert_eq!(metrics.gpu_jobs.get(), on_the_gpu);
            let batch = pool.gpu_batches();
            assert!(
                metrics.render().contains(&format!(
                    "nqueens_worker_gpu_batch{{device=\"opencl:0\"}} {batch}\n"
                )),
                "the metric shows the batch in force, {batch}: {}",
                metrics.render()
            );
            if threads == 0 {
                // No CPU thread to compare with: 1, 2, 4, then the bound.
                assert!(keys.len() > 1 + 2 + 4, "{}", keys.len());
                assert_eq!(batch, 7);
            } else {
                assert!((1..=7).contains(&batch), "{batch}");
            }
        }
    }
}
