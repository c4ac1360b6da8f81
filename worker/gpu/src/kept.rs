//! Calibrations kept on disk, so that a device is timed once per model, driver and kernel source, not
//! at every open. A file is one device model's choice, in JSON, versioned. What is read is checked: a
//! damaged file, a format this build does not read, or a choice that is not a candidate is refused and
//! the device calibrated again; a file written for another device, driver or build is calibrated over.
//! A kept choice is still run once on the calibration batch, its total checked, before it is used.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::calibration::SIZES;
use crate::{prelude, Backend, Calibration, Shape, Trial};

/// The version of the file's format.
pub const FORMAT: u32 = 1;

/// Largest file read: a choice with its trials is about 1 KB.
const MAX_BYTES: u64 = 64 * 1024;

/// Where calibrations are kept and whether a kept one is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keep {
    /// The directory of the files.
    pub dir: PathBuf,
    /// Use a kept calibration (else calibrate anew, and keep that).
    pub reuse: bool,
}

impl Keep {
    /// The usual directory, reused: `$NQUEENS_CACHE`, else `$XDG_CACHE_HOME/nqueens`, else
    /// `$HOME/.cache/nqueens`; `None` where none of them is set.
    pub fn usual() -> Option<Keep> {
        Keep::usual_in(|k| std::env::var_os(k))
    }

    /// [`Keep::usual`] with the environment `env`.
    fn usual_in(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<Keep> {
        let env = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = env("NQUEENS_CACHE")
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("nqueens")))
            .or_else(|| env("HOME").map(|h| h.join(".cache/nqueens")))?;
        Some(Keep { dir, reuse: true })
    }
}

/// The file as written.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: u32,
    /// The device model and driver it was measured on ([`crate::describe`]).
    device: String,
    /// What it was measured with: the build and the candidates' sources ([`build`]).
    build: String,
    chosen: String,
    n: u8,
    nodes: u64,
    trials: Vec<FileTrial>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTrial {
    shape: String,
    /// Device time of the batch, in milliseconds; absent if the candidate failed.
    ms: Option<f64>,
    error: Option<String>,
}

/// The file keeping the calibration of `device` (as [`crate::describe`] tells it) of `backend`, made
/// with `build`: each pair its own, so that two builds used in turn on one machine keep theirs.
pub fn path(dir: &Path, backend: Backend, device: &str, build: &str) -> PathBuf {
    dir.join(format!(
        "gpu-calibration-{backend}-{:016x}.json",
        digest(&[device, build]) as u64
    ))
}

/// What a calibration measured with: this build's version, and every candidate with the source the
/// device compiles for it. A change to the kernel, its prelude or the candidates calibrates again.
pub fn build(backend: Backend, candidates: &[Shape]) -> String {
    let mut parts = vec![env!("CARGO_PKG_VERSION").to_string()];
    for shape in candidates {
        parts.push(shape.to_string());
        parts.push(prelude::source(backend, shape));
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    format!("{} {:032x}", env!("CARGO_PKG_VERSION"), digest(&parts))
}

/// A 128-bit SipHash of `parts`, each with its length (not a secret: a name for what was measured).
fn digest(parts: &[&str]) -> u128 {
    use std::hash::Hasher;
    let mut h = siphasher::sip128::SipHasher13::new();
    for p in parts {
        h.write_u64(p.len() as u64);
        h.write(p.as_bytes());
    }
    siphasher::sip128::Hasher128::finish128(&h).as_u128()
}

/// Why a kept file is not used.
#[derive(Debug, PartialEq, Eq)]
pub enum Unused {
    /// There is none.
    Missing,
    /// It was measured on another device or driver, or with another build or candidates.
    Stale,
    /// It cannot be read, or what it says does not hold together.
    Refused(String),
}

/// The calibration kept in `file` for `device` and `build`, among `candidates`.
pub fn load(
    file: &Path,
    device: &str,
    build: &str,
    candidates: &[Shape],
) -> Result<Calibration, Unused> {
    let refused = |why: String| Unused::Refused(why);
    let mut text = String::new();
    match open_plain(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unused::Missing),
        Err(e) => return Err(refused(e.to_string())),
        Ok(f) => f
            .take(MAX_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| refused(e.to_string()))?,
    };
    if text.len() as u64 > MAX_BYTES {
        return Err(refused(format!("longer than {MAX_BYTES} bytes")));
    }
    let kept: File = serde_json::from_str(&text).map_err(|e| refused(e.to_string()))?;
    if kept.format != FORMAT {
        return Err(refused(format!(
            "format {}, this build reads {FORMAT}",
            kept.format
        )));
    }
    if kept.device != device || kept.build != build {
        return Err(Unused::Stale);
    }
    let shape = |s: &str| -> Result<Shape, Unused> {
        let shape: Shape = s
            .parse()
            .map_err(|e: crate::GpuError| refused(e.to_string()))?;
        if candidates.contains(&shape) {
            Ok(shape)
        } else {
            Err(refused(format!("{:?} is not a candidate", one_line(s))))
        }
    };
    let chosen = shape(&kept.chosen)?;
    if !SIZES.contains(&kept.n) {
        return Err(refused(format!("a batch of N = {}", kept.n)));
    }
    let mut trials = Vec::with_capacity(kept.trials.len());
    for t in &kept.trials {
        let outcome = match (t.ms, &t.error) {
            (Some(ms), None) if ms.is_finite() && (0.0..1e9).contains(&ms) => {
                Ok(Duration::from_secs_f64(ms / 1e3))
            }
            (None, Some(e)) => Err(one_line(e)),
            _ => {
                return Err(refused(format!(
                    "trial {:?} has no time and no error",
                    one_line(&t.shape)
                )))
            }
        };
        trials.push(Trial {
            shape: shape(&t.shape)?,
            outcome,
        });
    }
    if !trials
        .iter()
        .any(|t| t.shape == chosen && t.outcome.is_ok())
    {
        return Err(refused(format!("{chosen} was chosen but not timed")));
    }
    Ok(Calibration {
        n: kept.n,
        nodes: kept.nodes,
        trials,
        chosen,
        kept: Some(file.to_path_buf()),
    })
}

/// Opens `file` to read if it is a plain file: not a link (which could lead anywhere), nor a pipe or
/// a device (whose read could wait for ever).
fn open_plain(file: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let f = options.open(file)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a plain file"));
    }
    Ok(f)
}

/// Keeps `calibration` of `device` and `build` in `file`: written whole to a temporary file beside it,
/// then renamed over it, so that a reader sees the old file or the new one.
pub fn save(
    file: &Path,
    device: &str,
    build: &str,
    calibration: &Calibration,
) -> std::io::Result<()> {
    let kept = File {
        format: FORMAT,
        device: device.to_string(),
        build: build.to_string(),
        chosen: calibration.chosen.to_string(),
        n: calibration.n,
        nodes: calibration.nodes,
        trials: calibration
            .trials
            .iter()
            .map(|t| FileTrial {
                shape: t.shape.to_string(),
                ms: t.outcome.as_ref().ok().map(|d| d.as_secs_f64() * 1e3),
                error: t.outcome.as_ref().err().map(|e| one_line(e)),
            })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&kept).map_err(std::io::Error::other)?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // A name no other writer uses, created new (never through a link left there), the owner's alone.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let temporary = file.with_extension(format!("json.{}.{nanos}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    // Only a file this call created is removed if what follows fails.
    let mut f = options.open(&temporary)?;
    let written = std::io::Write::write_all(&mut f, text.as_bytes())
        .and_then(|()| std::fs::rename(&temporary, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// `text` as one line of printable text, at most 200 characters: what a file holds is logged.
fn one_line(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kernel;

    fn candidates() -> Vec<Shape> {
        vec![
            Shape::new(Kernel::Flat, 64, 8),
            Shape::new(Kernel::Shared, 64, 8),
        ]
    }

    fn measured() -> Calibration {
        Calibration {
            n: 14,
            nodes: 27_000_000,
            trials: vec![
                Trial {
                    shape: candidates()[0],
                    outcome: Ok(Duration::from_micros(12_500)),
                },
                Trial {
                    shape: candidates()[1],
                    outcome: Err("too little local memory".into()),
                },
            ],
            chosen: candidates()[0],
            kept: None,
        }
    }

    /// A fresh directory, the build of [`candidates`] and the file of device "dev" there.
    fn fixture() -> (PathBuf, String, PathBuf) {
        let dir = temp();
        let build = build(Backend::OpenCl, &candidates());
        let file = path(&dir, Backend::OpenCl, "dev", &build);
        (dir, build, file)
    }

    fn temp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nqueens-kept-{}-{:x}",
            std::process::id(),
            digest(&[&format!("{:?}", std::thread::current().id())])
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// Every candidate failed with a long compiler log: what is saved is read back (each error cut to
    /// one line of 200 characters), and a file of exactly the largest size read is read.
    #[test]
    fn long_errors_are_saved_short_and_the_largest_file_is_read() {
        let dir = temp();
        let many: Vec<Shape> = (1..=14).map(|p| Shape::new(Kernel::Flat, 64, p)).collect();
        let build = build(Backend::OpenCl, &many);
        let file = path(&dir, Backend::OpenCl, "dev", &build);
        let mut c = measured();
        c.chosen = many[0];
        c.trials = many
            .iter()
            .map(|&shape| Trial {
                shape,
                outcome: Err(format!("line\n{}", "e".repeat(5000))),
            })
            .collect();
        c.trials[0].outcome = Ok(Duration::from_millis(3));
        save(&file, "dev", &build, &c).unwrap();
        let size = std::fs::metadata(&file).unwrap().len();
        assert!((2_000..MAX_BYTES).contains(&size), "{size} bytes");
        let back = load(&file, "dev", &build, &many).unwrap();
        assert_eq!(back.trials.len(), 14);
        let e = back.trials[1].outcome.clone().unwrap_err();
        assert_eq!(e.len(), 200);
        assert!(e.starts_with("lineeee"), "{e}");
        // Padded to exactly the largest size read: still read.
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str(&" ".repeat(MAX_BYTES as usize - text.len()));
        std::fs::write(&file, &text).unwrap();
        assert!(load(&file, "dev", &build, &many).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_kept_calibration_reads_back_as_written() {
        let (dir, build, file) = fixture();
        assert_eq!(
            load(&file, "dev", &build, &candidates()).unwrap_err(),
            Unused::Missing
        );
        save(&file, "dev", &build, &measured()).unwrap();
        let back = load(&file, "dev", &build, &candidates()).unwrap();
        assert_eq!(back.chosen, measured().chosen);
        assert_eq!((back.n, back.nodes), (14, 27_000_000));
        assert_eq!(back.kept.as_deref(), Some(file.as_path()));
        assert_eq!(back.trials.len(), 2);
        assert_eq!(back.trials[0].outcome, Ok(Duration::from_micros(12_500)));
        assert_eq!(
            back.trials[1].outcome,
            Err("too little local memory".to_string())
        );
        // No temporary file is left.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_device_driver_build_or_candidate_list_is_stale() {
        let (dir, build, file) = fixture();
        save(&file, "dev", &build, &measured()).unwrap();
        assert_eq!(
            load(&file, "dev, another driver", &build, &candidates()).unwrap_err(),
            Unused::Stale
        );
        let fewer = &candidates()[..1];
        assert_ne!(super::build(Backend::OpenCl, fewer), build);
        assert_ne!(super::build(Backend::Cuda, &candidates()), build);
        assert_eq!(
            load(&file, "dev", &super::build(Backend::OpenCl, fewer), fewer).unwrap_err(),
            Unused::Stale
        );
        // Devices, and builds, have files of their own.
        assert_ne!(path(&dir, Backend::OpenCl, "other", &build), file);
        assert_ne!(path(&dir, Backend::Cuda, "dev", &build), file);
        assert_ne!(path(&dir, Backend::OpenCl, "dev", "another build"), file);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_or_inconsistent_file_is_refused() {
        let (dir, build, file) = fixture();
        save(&file, "dev", &build, &measured()).unwrap();
        let good = std::fs::read_to_string(&file).unwrap();
        let edits: Vec<(String, &str)> = vec![
            (good.replace("\"format\": 1", "\"format\": 2"), "format 2"),
            (
                good.replace("\"chosen\": \"flat/64/8\"", "\"chosen\": \"local/256/8\""),
                "not a candidate",
            ),
            (
                good.replace("\"chosen\": \"flat/64/8\"", "\"chosen\": \"shared/64/8\""),
                "not timed",
            ),
            (
                good.replace("\"chosen\": \"flat/64/8\"", "\"chosen\": \"warp/64\""),
                "no kernel variant",
            ),
            (good.replace("\"n\": 14", "\"n\": 30"), "N = 30"),
            (good.replace("\"n\": 14", "\"n\": 300"), "u8"),
            (good.replace("12.5", "-1.0"), "no time"),
            (
                good.replace("\"nodes\"", "\"extra\": 1, \"nodes\""),
                "unknown field",
            ),
            (good[..good.len() / 2].to_string(), "EOF"),
            ("x".repeat(MAX_BYTES as usize + 1), "longer than"),
        ];
        for (text, why) in edits {
            std::fs::write(&file, &text).unwrap();
            match load(&file, "dev", &build, &candidates()) {
                Err(Unused::Refused(e)) => assert!(e.contains(why), "{why}: {e}"),
                other => panic!("{why}: {other:?}"),
            }
        }
        // Every byte flipped: refused or stale, never a choice that is not a timed candidate.
        let bytes = good.as_bytes();
        for i in 0..bytes.len() {
            let mut flipped = bytes.to_vec();
            flipped[i] ^= 0x20;
            std::fs::write(&file, &flipped).unwrap();
            if let Ok(c) = load(&file, "dev", &build, &candidates()) {
                assert!(candidates().contains(&c.chosen));
                assert!(c
                    .trials
                    .iter()
                    .any(|t| t.shape == c.chosen && t.outcome.is_ok()));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn links_and_pipes_are_not_read() {
        let (dir, build, file) = fixture();
        let elsewhere = dir.join("elsewhere.json");
        save(&elsewhere, "dev", &build, &measured()).unwrap();
        assert!(load(&elsewhere, "dev", &build, &candidates()).is_ok());
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert!(
            matches!(
                load(&file, "dev", &build, &candidates()),
                Err(Unused::Refused(_))
            ),
            "a link was followed"
        );
        std::fs::remove_file(&file).unwrap();
        let c = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the pipe.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Read with nothing writing: it would wait for ever.
        match load(&file, "dev", &build, &candidates()) {
            Err(Unused::Refused(why)) => assert!(why.contains("not a plain file"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A save over the pipe replaces it with a file.
        save(&file, "dev", &build, &measured()).unwrap();
        assert!(load(&file, "dev", &build, &candidates()).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_usual_place_follows_the_environment() {
        let usual = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Keep::usual_in(|k| {
                vars.iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v.into())
            })
            .map(|k| k.dir)
        };
        let all = [
            ("NQUEENS_CACHE", "/a"),
            ("XDG_CACHE_HOME", "/b"),
            ("HOME", "/c"),
        ];
        assert_eq!(usual(&all), Some(PathBuf::from("/a")));
        assert_eq!(usual(&all[1..]), Some(PathBuf::from("/b/nqueens")));
        assert_eq!(usual(&all[2..]), Some(PathBuf::from("/c/.cache/nqueens")));
        assert_eq!(
            usual(&[("NQUEENS_CACHE", ""), ("HOME", "/c")]),
            Some(PathBuf::from("/c/.cache/nqueens"))
        );
        assert_eq!(usual(&[]), None);
    }
}
