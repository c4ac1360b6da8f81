//! Tests that need tools a developer's machine may lack: run where the tools are, reported *ignored*
//! with the reason and the install line elsewhere, and failed under CI (`CI` set), which must have them.

use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Failed, Trial};

/// A test that runs only where `tools` are on PATH (and, with `root`, as root); elsewhere it is
/// ignored, saying why, except under CI, where it fails.
pub fn needs(
    name: &'static str,
    tools: &[&str],
    root: bool,
    install: &'static str,
    test: fn() -> Result<(), Failed>,
) -> Trial {
    let mut missing: Vec<String> = tools
        .iter()
        .filter(|t| find_on_path(t).is_none())
        .map(|t| format!("`{t}`"))
        .collect();
    if root && !is_root() {
        missing.push("root".into());
    }
    if missing.is_empty() {
        return Trial::test(name, test);
    }
    let why = format!("needs {} (install: {install})", missing.join(", "));
    if std::env::var_os("CI").is_some() {
        return Trial::test(name, move || {
            Err(format!("{why} (CI must provide it)").into())
        });
    }
    eprintln!("{name}: ignored: {why}");
    Trial::test(name, test).with_ignored_flag(true)
}

/// The path of `tool` on PATH (or in /usr/sbin, /sbin), if it is there.
pub fn find_on_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}
