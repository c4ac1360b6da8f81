//! The CUDA flavour of the kernel compiles: NVRTC turns the shared source into PTX for every
//! architecture we target and every variant, with the entry point we launch. No GPU is needed, only
//! NVRTC, which `.ci/run` installs (PyPI's `nvidia-cuda-nvrtc-cu12`); without it the test is reported
//! ignored, saying why, except under CI (`CI` set), where it runs and fails.

use nqueens_gpu::{cuda, prelude::ENTRY, Backend, Kernel, Shape};

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let missing = cuda::nvrtc_missing();
    let ignore = missing.is_some() && std::env::var_os("CI").is_none();
    if let (true, Some(why)) = (ignore, &missing) {
        eprintln!("ignored: {why}");
    }
    let trials =
        vec![
            libtest_mimic::Trial::test("kernel_compiles_to_ptx_for_turing_to_hopper", || {
                std::panic::catch_unwind(kernel_compiles_to_ptx_for_turing_to_hopper).map_err(|e| {
                    e.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                        .into()
                })
            })
            .with_ignored_flag(ignore),
        ];
    libtest_mimic::run(&args, trials).exit();
}

fn kernel_compiles_to_ptx_for_turing_to_hopper() {
    if let Some(why) = cuda::nvrtc_missing() {
        panic!("CI must compile the CUDA kernel: {why}");
    }
    for (cc, kernel) in [(7, 5), (8, 0), (8, 6), (9, 0)]
        .into_iter()
        .flat_map(|cc| Kernel::ALL.map(|k| (cc, k)))
    {
        let default = Shape::default_for(Backend::Cuda);
        let shape = Shape::new(kernel, default.block, default.per_thread);
        let ptx = cuda::compile(cc, &shape)
            .unwrap_or_else(|e| panic!("compute_{}{} {shape}: {e}", cc.0, cc.1));
        let text = ptx.to_src();
        assert!(
            text.contains(&format!(".target sm_{}{}", cc.0, cc.1)),
            "PTX for compute_{}{} names its target",
            cc.0,
            cc.1
        );
        assert!(
            text.contains(&format!(".entry {ENTRY}(")),
            "PTX has the entry point {ENTRY}"
        );
    }
}
