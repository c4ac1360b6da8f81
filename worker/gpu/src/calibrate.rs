//! Calibration: every candidate kernel variant and launch shape timed on the device itself, on one fixed
//! batch (every job of one board size, its total checked against the published count), the fastest kept.
//! Devices differ too much (an H100, a laptop GPU, PoCL on a CPU) for one shape to suit them all.

use std::time::Duration;

use nqueens_common::{reference, Job, Plan, Strategy, Tally};

use crate::calibration::{Calibration, Trial, SIZES};
use crate::kept::{self, Keep, Unused};
use crate::stream::run_split;
use crate::{describe, open_one, Backend, Gpu, GpuError, Kernel, Shape};

/// Device time per launch that times a candidate well enough.
const ENOUGH: Duration = Duration::from_millis(100);

/// The shapes calibration tries on a device of `backend`, the backend's default first.
pub fn candidates(backend: Backend) -> Vec<Shape> {
    let shape = Shape::new;
    let mut list = vec![Shape::default_for(backend)];
    match backend {
        Backend::Cuda => list.extend([
            shape(Kernel::Compact, 256, 8),
            shape(Kernel::Shared, 64, 8),
            shape(Kernel::Shared, 256, 8),
            shape(Kernel::Flat, 64, 4),
            shape(Kernel::Flat, 128, 4),
            shape(Kernel::Flat, 256, 4),
            shape(Kernel::Flat, 128, 8),
            shape(Kernel::Coop, 128, 8),
            shape(Kernel::Coop, 256, 4),
            shape(Kernel::Stream, 128, 4),
            shape(Kernel::Stream, 256, 4),
            shape(Kernel::Stream, 128, 8),
        ]),
        Backend::OpenCl => list.extend([
            shape(Kernel::Shared, 64, 8),
            shape(Kernel::Compact, 64, 8),
            shape(Kernel::Flat, 64, 8),
            shape(Kernel::Coop, 64, 8),
            shape(Kernel::Stream, 64, 8),
        ]),
    }
    list
}

/// Every job of N's d4 plan.
fn jobs(n: u8) -> Result<Vec<Job>, GpuError> {
    let plan = Plan::new(n.into(), Strategy::D4).map_err(|e| GpuError::TooLarge(e.to_string()))?;
    plan.jobs()
        .map(|k| plan.job(&k).map_err(|e| GpuError::TooLarge(e.to_string())))
        .collect()
}

/// Searches `jobs` (every job of `n`) on `gpu` and checks the total: the device time of the launch.
fn time(gpu: &mut Gpu, n: u8, jobs: &[Job]) -> Result<Duration, GpuError> {
    let results = run_split(gpu, jobs, crate::Split::Fixed(1))?;
    let mut tally = Tally::new(true);
    for r in &results {
        tally
            .add(r)
            .map_err(|e| GpuError::BadAnswer(e.to_string()))?;
    }
    match reference::counts(n.into()) {
        Some((total, _)) if total != tally.total => Err(GpuError::BadAnswer(format!(
            "N = {n}: {} solutions, the published count is {total}",
            tally.total
        ))),
        _ => Ok(gpu.last_launch),
    }
}

/// Opens the device built for `shape` and finds the calibration batch: every job of the smallest N in
/// [`SIZES`] whose launch takes [`ENOUGH`] (after a warm-up launch).
fn size_batch(
    backend: Backend,
    index: usize,
    shape: Shape,
) -> Result<(Gpu, u8, Vec<Job>), GpuError> {
    let mut gpu = Gpu::new(open_one(backend, index, shape)?);
    let mut batch = (*SIZES.start(), jobs(*SIZES.start())?);
    time(&mut gpu, batch.0, &batch.1)?; // warm-up: module load, first allocations
    for n in SIZES {
        batch = (n, jobs(n)?);
        if time(&mut gpu, n, &batch.1)? >= ENOUGH {
            break;
        }
    }
    Ok((gpu, batch.0, batch.1))
}

/// Opens device `index` of `backend` once per candidate, times each on the same batch, and returns the
/// fastest, opened, with what was measured. A candidate that fails (too little shared memory, a wrong
/// answer) is skipped; if every one fails, the first's error is returned.
pub fn calibrate(
    backend: Backend,
    index: usize,
    candidates: &[Shape],
) -> Result<(Gpu, Calibration), GpuError> {
    if candidates.is_empty() {
        return Err(GpuError::BadShape("no candidate shape to calibrate".into()));
    }
    // The batch: grown on the first candidate that runs here until a launch takes long enough to time.
    let mut sized = None;
    let mut first_error = None;
    for (k, &shape) in candidates.iter().enumerate() {
        match size_batch(backend, index, shape) {
            Ok((gpu, n, jobs)) => {
                sized = Some((k, gpu, n, jobs));
                break;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let Some((sizer, gpu, n, jobs)) = sized else {
        return Err(first_error.expect("a candidate failed"));
    };
    let mut warm = Some(gpu);
    let mut trials = Vec::with_capacity(candidates.len());
    let mut best: Option<(Duration, Gpu)> = None;
    let mut nodes = 0;
    for (k, &shape) in candidates.iter().enumerate() {
        let opened = match warm.take() {
            Some(g) if k == sizer => Ok(g),
            other => {
                warm = other;
                open_one(backend, index, shape).map(Gpu::new)
            }
        };
        let outcome = opened.and_then(|mut g| {
            let before = g.device_nodes;
            let d = time(&mut g, n, &jobs)?;
            nodes = g.device_nodes - before;
            Ok((d, g))
        });
        match outcome {
            Ok((d, g)) => {
                trials.push(Trial {
                    shape,
                    outcome: Ok(d),
                });
                if best.as_ref().is_none_or(|(b, _)| d < *b) {
                    best = Some((d, g));
                }
            }
            Err(e) => {
                trials.push(Trial {
                    shape,
                    outcome: Err(e.to_string()),
                });
                first_error.get_or_insert(e);
            }
        }
    }
    match best {
        Some((_, mut g)) => {
            let chosen = g.info().shape;
            let calibration = Calibration {
                n,
                nodes,
                trials,
                chosen,
                kept: None,
            };
            g.calibration = Some(calibration.clone());
            Ok((g, calibration))
        }
        None => Err(first_error.unwrap_or_else(|| GpuError::BadShape("no candidate ran".into()))),
    }
}

/// [`calibrate`], or the calibration `keep` kept for this device model, driver and kernel source: its
/// choice is opened and runs its batch (a warm-up launch and a timed one, the total checked) instead of
/// every candidate. A calibration
/// measured here is kept for the next open. A kept file that is refused, or whose choice fails its
/// check, is logged and the device calibrated again; a file that cannot be written is logged.
pub fn calibrate_kept(
    backend: Backend,
    index: usize,
    candidates: &[Shape],
    keep: Option<&Keep>,
) -> Result<(Gpu, Calibration), GpuError> {
    let Some(keep) = keep else {
        return calibrate(backend, index, candidates);
    };
    let device = match describe(backend, index) {
        Ok(device) => device,
        // No such device: nothing to calibrate.
        Err(e @ GpuError::NoDevice(_)) => return Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell the GPU's model and driver: calibrating, and keeping nothing");
            return calibrate(backend, index, candidates);
        }
    };
    let build = kept::build(backend, candidates);
    let file = kept::path(&keep.dir, backend, &device, &build);
    if keep.reuse {
        match kept::load(&file, &device, &build, candidates) {
            Ok(k) => match check_kept(backend, index, k) {
                Ok(done) => return Ok(done),
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "the kept GPU calibration's choice failed its check: calibrating again")
                }
            },
            Err(Unused::Missing) => {}
            Err(Unused::Stale) => {
                tracing::info!(file = %file.display(), "the kept GPU calibration is of another device, driver or build: calibrating again")
            }
            Err(Unused::Refused(why)) => {
                tracing::warn!(file = %file.display(), %why, "the kept GPU calibration is refused: calibrating again")
            }
        }
    }
    let (gpu, calibration) = calibrate(backend, index, candidates)?;
    if let Err(e) = kept::save(&file, &device, &build, &calibration) {
        tracing::warn!(file = %file.display(), error = %e, "cannot keep the GPU calibration: the next open calibrates again");
    }
    Ok((gpu, calibration))
}

/// Opens the device built for a kept calibration's choice and searches the kept batch with it, its
/// total checked: the calibration, its choice timed anew.
fn check_kept(
    backend: Backend,
    index: usize,
    mut calibration: Calibration,
) -> Result<(Gpu, Calibration), GpuError> {
    let mut gpu = Gpu::new(open_one(backend, index, calibration.chosen)?);
    let jobs = jobs(calibration.n)?;
    time(&mut gpu, calibration.n, &jobs)?; // warm-up, as calibration's
    let before = gpu.device_nodes;
    let d = time(&mut gpu, calibration.n, &jobs)?;
    calibration.nodes = gpu.device_nodes - before;
    for t in &mut calibration.trials {
        if t.shape == calibration.chosen {
            t.outcome = Ok(d);
        }
    }
    gpu.calibration = Some(calibration.clone());
    Ok((gpu, calibration))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_tries_every_variant_its_default_first() {
        for backend in [Backend::Cuda, Backend::OpenCl] {
            let list = candidates(backend);
            assert_eq!(list[0], Shape::default_for(backend));
            for k in Kernel::ALL {
                assert!(list.iter().any(|s| s.kernel == k), "{backend} {k}");
            }
            for s in &list {
                s.check().unwrap();
            }
        }
    }
}
