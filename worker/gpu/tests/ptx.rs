//! The CUDA flavour of the kernel compiles: NVRTC turns the shared source into PTX for every
//! architecture we target, with the entry point we launch. No GPU is needed, only NVRTC, which `.ci/run`
//! installs (PyPI's `nvidia-cuda-nvrtc-cu12`); without it the test says it was skipped, except under CI
//! (`CI` set), where that is a failure.

use nqueens_gpu::{cuda, prelude::ENTRY, Backend, Kernel, Shape};

#[test]
fn kernel_compiles_to_ptx_for_turing_to_hopper() {
    if let Some(why) = cuda::nvrtc_missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must compile the CUDA kernel: {why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    for (cc, kernel) in [(7, 5), (8, 0), (8, 6), (9, 0)]
        .into_iter()
        .flat_map(|cc| Kernel::ALL.map(|k| (cc, k)))
    {
        let shape = Shape {
            kernel,
            ..Shape::default_for(Backend::Cuda)
        };
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
