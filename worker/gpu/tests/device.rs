//! The real search kernel on a real OpenCL (or CUDA) device, every variant: the reference counts for
//! N = 1..14 under both strategies, and the CPU kernel's exact results (totals, unique counts, nodes) on
//! random jobs; and the calibration that picks among them.
//!
//! The device is `NQUEENS_TEST_GPU` (a `--gpu` list; default `opencl:0`, which in CI is PoCL's CPU
//! device, installed by `.ci/run`). Where it cannot be opened the tests are reported ignored, saying
//! why, except under CI (`CI` set), where they run and fail.

/// Runs each test as a libtest-mimic trial, ignored where the device cannot be opened (not under CI).
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let why =
        nqueens_gpu::open_shaped(Some(&spec()), Some(Shape::default_for(backend(&spec())))).err();
    let ignore = why.is_some() && std::env::var_os("CI").is_none();
    if let (true, Some(why)) = (ignore, &why) {
        eprintln!("ignored: no device {}: {why}", spec());
    }
    let trial = |name: &'static str, f: fn()| {
        libtest_mimic::Trial::test(name, move || {
            std::panic::catch_unwind(f).map_err(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
                    .into()
            })
        })
        .with_ignored_flag(ignore)
    };
    let trials = vec![
        trial(
            "reference_counts_n_1_to_14_both_strategies",
            reference_counts_n_1_to_14_both_strategies,
        ),
        trial(
            "random_jobs_match_the_cpu_kernel",
            random_jobs_match_the_cpu_kernel,
        ),
        trial(
            "calibration_keeps_the_fastest_candidate",
            calibration_keeps_the_fastest_candidate,
        ),
        trial(
            "a_kept_calibration_is_read_back_checked_and_refused_when_damaged",
            a_kept_calibration_is_read_back_checked_and_refused_when_damaged,
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

use nqueens_common::{reference, Job, Plan, Strategy, Tally};
use nqueens_gpu::{run_jobs, Gpu, Kernel, Shape};

fn spec() -> String {
    std::env::var("NQUEENS_TEST_GPU").unwrap_or_else(|_| "opencl:0".into())
}

/// The test device built for each kernel variant, at two launch shapes of the backend's block size
/// (one seed per thread, and the default), so that every variant and a block of another size runs.
fn devices() -> Vec<Gpu> {
    let Some(first) = device(None) else {
        return Vec::new();
    };
    let base = first.info().shape;
    let mut out = vec![first];
    for kernel in Kernel::ALL {
        for (block, per_thread) in [(base.block, 1), (base.block * 2, base.per_thread)] {
            let shape = Shape::new(kernel, block, per_thread);
            out.push(device(Some(shape)).expect("the device opened once"));
        }
    }
    // A `coop` list of one entry per thread: full at most steps, so that its threads search alone
    // whenever the list could overflow (a list of the default size never fills on these boards).
    let mut small = Shape::new(Kernel::Coop, base.block, base.per_thread);
    small.list = 1;
    out.push(device(Some(small)).expect("the device opened once"));
    out
}

fn device(shape: Option<Shape>) -> Option<Gpu> {
    let spec = spec();
    let shape = shape.or_else(|| Some(Shape::default_for(backend(&spec))));
    match nqueens_gpu::open_shaped(Some(&spec), shape) {
        Ok(mut g) => {
            let g = g.remove(0);
            eprintln!("device: {}", g.info());
            Some(g)
        }
        Err(e) => panic!("the GPU kernel must run on {spec} (PoCL under CI): {e}"),
    }
}

fn backend(spec: &str) -> nqueens_gpu::Backend {
    if spec.starts_with("cuda") {
        nqueens_gpu::Backend::Cuda
    } else {
        nqueens_gpu::Backend::OpenCl
    }
}

fn reference_counts_n_1_to_14_both_strategies() {
    for gpu in devices() {
        reference_counts(gpu);
    }
}

fn reference_counts(mut gpu: Gpu) {
    let shape = gpu.info().shape;
    for n in 1..=14 {
        let (total, unique) = reference::counts(n).expect("published");
        for strategy in [Strategy::D4, Strategy::Mirror] {
            let plan = Plan::new(n, strategy).unwrap();
            let jobs: Vec<Job> = plan.jobs().map(|k| plan.job(&k).unwrap()).collect();
            let results = run_jobs(&mut gpu, &jobs).unwrap();
            let mut tally = Tally::new(strategy == Strategy::D4);
            for r in &results {
                tally.add(r).unwrap();
            }
            assert_eq!(tally.total, total, "N = {n} {strategy} {shape}");
            if strategy == Strategy::D4 {
                assert_eq!(
                    tally.unique().unwrap(),
                    Some(unique),
                    "N = {n} unique {shape}"
                );
            }
            // The same results as the CPU, job by job, nodes included.
            for (job, r) in jobs.iter().zip(&results) {
                assert_eq!(
                    *r,
                    job.run(),
                    "N = {n} {strategy} {shape} job {}",
                    job.key()
                );
            }
        }
    }
    assert!(gpu.device_nodes > 0, "the device searched");
}

fn random_jobs_match_the_cpu_kernel() {
    for gpu in devices() {
        random_jobs(gpu);
    }
}

fn random_jobs(mut gpu: Gpu) {
    let shape = gpu.info().shape;
    // A small deterministic generator from a seed that changes from run to run (`NQUEENS_TEST_SEED`
    // repeats one): the seed is printed, so that a failure can be reproduced.
    let seed: u64 = std::env::var("NQUEENS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("random jobs from NQUEENS_TEST_SEED={seed}");
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (n, strategy, depth) in [
        (15, Strategy::D4, 1),
        (16, Strategy::D4, 2),
        (15, Strategy::Mirror, 4),
        (16, Strategy::Mirror, 5),
    ] {
        let plan = Plan::with_depth(n, strategy, depth).unwrap();
        let keys: Vec<_> = plan.jobs().collect();
        let jobs: Vec<Job> = (0..12)
            .map(|_| plan.job(&keys[next() as usize % keys.len()]).unwrap())
            .collect();
        let results = run_jobs(&mut gpu, &jobs).unwrap();
        for (job, r) in jobs.iter().zip(results) {
            assert_eq!(r, job.run(), "N = {n} {strategy} {shape} job {}", job.key());
        }
    }
}

/// Calibration times every candidate on the device, each on the same batch with its total checked, and
/// keeps the fastest, opened and built for that shape.
fn calibration_keeps_the_fastest_candidate() {
    let Some(gpu) = device(None) else { return };
    let (backend, index) = (gpu.info().backend, gpu.info().index);
    drop(gpu);
    let candidates = nqueens_gpu::candidates(backend);
    let (gpu, c) = nqueens_gpu::calibrate(backend, index, &candidates).unwrap();
    eprintln!("{}", c.summary());
    assert_eq!(c.trials.len(), candidates.len());
    let times: Vec<_> = c
        .trials
        .iter()
        .map(|t| {
            *t.outcome
                .as_ref()
                .unwrap_or_else(|e| panic!("{}: {e}", t.shape))
        })
        .collect();
    let fastest = c.trials[times.iter().enumerate().min_by_key(|(_, d)| **d).unwrap().0].shape;
    assert_eq!(c.chosen, fastest);
    assert_eq!(gpu.info().shape, fastest);
    assert_eq!(gpu.calibration.as_ref().unwrap().chosen, fastest);
    assert!((12..=18).contains(&c.n), "N = {}", c.n);
    assert!(c.nodes > 0 && c.rate() > 0.0);
    // A candidate that cannot run here is skipped, not chosen.
    let mut with_bad = vec![Shape::new(Kernel::Flat, 1024, 1)];
    with_bad.extend(candidates);
    match nqueens_gpu::calibrate(backend, index, &with_bad) {
        Ok((_, c)) => assert_ne!(c.chosen, with_bad[0], "{}", c.summary()),
        // The device refuses a block of 1024 outright (the first candidate opens the device).
        Err(e) => eprintln!("a block of 1024 is refused here: {e}"),
    }
}

/// A calibration kept in a directory is read back at the next open: the device runs the kept choice
/// (even one that was not the fastest, if the file says so), timed again there. A damaged file is
/// refused and the device calibrated again, the file written anew; `reuse: false` calibrates anew.
fn a_kept_calibration_is_read_back_checked_and_refused_when_damaged() {
    use nqueens_gpu::kept::Keep;
    let Some(gpu) = device(None) else { return };
    let (backend, index) = (gpu.info().backend, gpu.info().index);
    drop(gpu);
    let dir = std::env::temp_dir().join(format!("nqueens-kept-device-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let keep = Keep {
        dir: dir.clone(),
        reuse: true,
    };
    let candidates = [
        Shape::new(Kernel::Flat, 64, 8),
        Shape::new(Kernel::Local, 64, 8),
    ];
    let (_, first) = nqueens_gpu::calibrate_kept(backend, index, &candidates, Some(&keep)).unwrap();
    assert!(first.kept.is_none(), "{}", first.summary());
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = &files[0];

    // The kept choice is run: its nodes are measured again, whatever the file says.
    let text = std::fs::read_to_string(file).unwrap();
    let bogus = text.replace(&format!("\"nodes\": {}", first.nodes), "\"nodes\": 1");
    assert_ne!(bogus, text);
    // And its time, while the other candidate's is the file's.
    let mut value: serde_json::Value = serde_json::from_str(&bogus).unwrap();
    for t in value["trials"].as_array_mut().unwrap() {
        t["ms"] = serde_json::json!(99000.0);
    }
    let bogus = serde_json::to_string(&value).unwrap();
    std::fs::write(file, bogus).unwrap();
    let (gpu, again) =
        nqueens_gpu::calibrate_kept(backend, index, &candidates, Some(&keep)).unwrap();
    assert_eq!(
        again.kept.as_deref(),
        Some(file.as_path()),
        "{}",
        again.summary()
    );
    assert_eq!(again.chosen, first.chosen);
    assert_eq!(again.nodes, first.nodes, "the kept choice was not run");
    for t in &again.trials {
        let ms = t.outcome.as_ref().unwrap().as_secs_f64() * 1e3;
        assert_eq!(
            ms == 99000.0,
            t.shape != first.chosen,
            "{}",
            again.summary()
        );
    }
    assert_eq!(gpu.info().shape, first.chosen);
    assert_eq!(again.trials.len(), 2);
    assert!(again.summary().contains("kept in"), "{}", again.summary());

    // The file decides: the other candidate, chosen there, is what the device runs.
    let other = candidates
        .iter()
        .copied()
        .find(|s| *s != first.chosen)
        .unwrap();
    let edited = text.replace(
        &format!("\"chosen\": \"{}\"", first.chosen),
        &format!("\"chosen\": \"{other}\""),
    );
    assert_ne!(edited, text);
    std::fs::write(file, edited).unwrap();
    let (gpu, told) =
        nqueens_gpu::calibrate_kept(backend, index, &candidates, Some(&keep)).unwrap();
    assert_eq!((told.chosen, gpu.info().shape), (other, other));
    assert!(told.kept.is_some());

    // Damaged: calibrated again, and kept anew.
    std::fs::write(file, &text[..text.len() / 2]).unwrap();
    let (_, mended) =
        nqueens_gpu::calibrate_kept(backend, index, &candidates, Some(&keep)).unwrap();
    assert!(mended.kept.is_none(), "{}", mended.summary());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(written["chosen"], mended.chosen.to_string(), "{written}");

    // Not reused when told: measured anew, and kept.
    std::fs::remove_file(file).unwrap();
    let fresh = Keep {
        reuse: false,
        ..keep.clone()
    };
    let (_, anew) = nqueens_gpu::calibrate_kept(backend, index, &candidates, Some(&fresh)).unwrap();
    assert!(anew.kept.is_none());
    assert!(file.exists(), "a calibration measured anew was not kept");
    let (_, after) = nqueens_gpu::calibrate_kept(backend, index, &candidates, Some(&keep)).unwrap();
    assert_eq!(after.chosen, anew.chosen);
    assert!(after.kept.is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}
