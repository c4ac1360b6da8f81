//! One build for every CPU, aarch64 included (issue 17): the counting core (`nqueens-common`: every
//! kernel variant the target runs, on aarch64 the NEON kernels and the scalar lanes) is cross-compiled
//! for `aarch64-unknown-linux-gnu` and its whole test suite run under qemu's user-mode emulation. Reported
//! ignored where the cross toolchain, qemu or the Rust target is missing; under CI, which installs them
//! (`.ci/run`), a missing cross gcc or qemu fails it, a missing Rust target (rustup's server
//! unreachable) still only makes it ignored.

mod support;

use std::path::Path;
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};
use support::tools::needs;

const TARGET: &str = "aarch64-unknown-linux-gnu";
const NAME: &str = "issue_17_the_counting_core_builds_and_passes_its_tests_on_aarch64";
const INSTALL: &str = "rustup target add aarch64-unknown-linux-gnu; apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user";

fn main() {
    let args = Arguments::from_args();
    let trial = if target_installed() {
        needs(
            NAME,
            &["aarch64-linux-gnu-gcc", "qemu-aarch64"],
            false,
            INSTALL,
            cross_test,
        )
    } else {
        // The target's standard library comes from rustup's server, not a package registry: a machine
        // that cannot reach it (CI included) reports the test ignored, loudly, rather than failed.
        eprintln!("{NAME}: ignored: needs the Rust target {TARGET} (install: {INSTALL})");
        Trial::test(NAME, cross_test).with_ignored_flag(true)
    };
    libtest_mimic::run(&args, vec![trial]).exit();
}

/// Whether the Rust standard library for the target is installed in this toolchain.
fn target_installed() -> bool {
    Command::new("rustc")
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|dir| Path::new(dir.trim()).is_dir())
}

fn cross_test() -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args([
            "test",
            "--locked",
            "-p",
            "nqueens-common",
            "--target",
            TARGET,
        ])
        // A target directory of its own: the outer `cargo test` holds the workspace's.
        .env("CARGO_TARGET_DIR", root.join("target/aarch64-cross"))
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
            "aarch64-linux-gnu-gcc",
        )
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
            "qemu-aarch64 -L /usr/aarch64-linux-gnu",
        )
        // Emulated time says nothing of a real core: the tests that bound a time skip the bound.
        .env("NQUEENS_EMULATED", "1")
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("the aarch64 build or its tests failed:\n{text}").into());
    }
    // Every test binary ran, on the emulated CPU, and the kernel's property tests among them.
    let passed = text.matches("test result: ok.").count();
    if passed < 4 || !text.contains("kernel_props") {
        return Err(format!("fewer test binaries ran than nqueens-common has:\n{text}").into());
    }
    Ok(())
}
