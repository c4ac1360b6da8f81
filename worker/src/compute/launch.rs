//! A GPU's launch thread: it owns the device and runs the batches handed to it as one stream of
//! launches, saying when it would take the next batch and answering each in order; and the GPU thread's
//! wait for what it says, bounded by the device's timeout.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use nqueens_common::Job;
use nqueens_gpu::Gpu;

/// What a launch thread says: every launch it was given has started (it waits for the reply, the next
/// batch or none), or the oldest batch's answer (its results, or why the device failed it).
pub(super) enum Said {
    Started,
    Answer(nqueens_gpu::Answer),
}

/// What a GPU's thread sends its launch thread: a batch, or (to [`Said::Started`]) that none waits.
type Handed = Option<Vec<Job>>;

/// Starts a thread that owns `gpu` and runs each batch sent to it through one [`nqueens_gpu::Stream`],
/// answering each batch in order. Once every launch it holds has started (and again after each
/// answer) it says so and waits for the reply before it waits on the device: a batch of one launch
/// still starts while the one before runs. It ends when the sender is dropped and its batches are
/// answered, or when what it says finds nobody listening (after a launch given up for hung: whatever
/// it computed then is not used). `None` if no thread could be started.
pub(super) fn launcher(mut gpu: Gpu) -> Option<(Sender<Handed>, Receiver<Said>)> {
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
pub(super) fn wait(
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
