//! The worker's journal of unacknowledged results: every finished result is appended and fsynced before it
//! is reported, and acknowledgements are appended after the coordinator confirms. A worker that restarts
//! (or reconnects) re-sends what the journal still holds, so no finished job is lost to a crash or an
//! outage.
//!
//! The file is checksummed JSON lines ([`nqueens_common::jsonl`], shared with the coordinator's ledger),
//! locked against a second worker through a lock file beside it, and compacted by replacing it whole
//! (temporary file, fsync, rename), never by truncating it in place. Every result also carries its seal
//! from the moment it was computed: a line whose checksum fails, or a result whose seal fails, is reported
//! at error level and dropped (its job is computed again), never re-sent and never skipped in silence.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use nqueens_common::checksum::verify_seal;
use nqueens_common::jsonl::{self, Appender, Line};
use nqueens_common::{JobKey, JobResult};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A finished job's result as reported to the coordinator, with its seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub lease: u64,
    /// The lease's authentication tag, repeated in the report (absent from old-format lines, as are the
    /// fingerprint and the seal: such lines are recognised and dropped).
    #[serde(default)]
    pub lease_tag: u64,
    pub run: String,
    pub n: u32,
    /// The run's plan fingerprint (part of the seal).
    #[serde(default)]
    pub fingerprint: u64,
    pub job: String,
    pub total: u64,
    pub unique8: Option<u64>,
    pub nodes: u64,
    /// The result's seal ([`nqueens_common::checksum::seal`]), computed when the job finished.
    #[serde(default)]
    pub seal: u64,
    /// The GPU that computed it (`cuda:0`, `opencl:1`); absent for the CPU, and from lines written before
    /// GPUs were reported. Not sealed: it tells the coordinator's worker table where work was done,
    /// nothing that is counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The kernel family that computed it (absent from lines written before 2026-11-28). Not sealed:
    /// it steers the coordinator's second result to another family, nothing that is counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<nqueens_common::Family>,
}

impl Finished {
    /// The honest, sealed result of job `key` of `plan` under lease `lease` (tag `lease_tag`) of run
    /// `run`, computed here on one thread, from no device: what the tests journal as a worker would.
    /// (It enumerates the plan for its fingerprint: for small plans.)
    pub fn computed(
        plan: nqueens_common::Plan,
        key: &JobKey,
        lease: u64,
        lease_tag: u64,
        run: &str,
    ) -> nqueens_common::Result<Finished> {
        let result = plan.job(key)?.run();
        let fingerprint = plan.fingerprint().1;
        Ok(Finished {
            lease,
            lease_tag,
            run: run.to_string(),
            n: u32::from(plan.n()),
            fingerprint,
            job: key.to_string(),
            total: result.total,
            unique8: result.unique8,
            nodes: result.nodes,
            seal: nqueens_common::checksum::seal(fingerprint, key, &result),
            device: None,
            family: None,
        })
    }

    /// The counts it states.
    pub fn result(&self) -> JobResult {
        JobResult {
            total: self.total,
            unique8: self.unique8,
            nodes: self.nodes,
        }
    }

    /// Whether its seal matches what it states.
    pub fn sealed(&self) -> bool {
        self.job
            .parse::<JobKey>()
            .is_ok_and(|key| verify_seal(self.fingerprint, &key, &self.result(), self.seal))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Entry {
    Result(Finished),
    Acked(Vec<u64>),
}

/// What opening a journal found wrong (each also logged at error level).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Damage {
    /// Lines that failed their checksum or did not parse.
    pub lines: u64,
    /// Results whose seal failed.
    pub seals: u64,
    /// Lines of the format before checksums (their results cannot be verified and are computed again).
    pub legacy: u64,
}

/// The journal file and what it holds unacknowledged, by lease id.
pub struct Journal {
    path: PathBuf,
    /// The file being appended to; `None` after a rewrite that failed (the file it had may be no longer
    /// at `path`), until a rewrite succeeds.
    file: Option<Appender>,
    /// Held for the journal's life: the lock against a second worker.
    _lock: File,
    pending: BTreeMap<u64, Finished>,
    damage: Damage,
}

impl Journal {
    /// Opens (or creates) the journal at `path`, takes its lock and replays it.
    pub fn open(path: &Path) -> Result<Journal> {
        let io = |e: std::io::Error| Error::Journal(path.to_path_buf(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut lock_name = path.file_name().unwrap_or_default().to_os_string();
        lock_name.push(".lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path.with_file_name(lock_name))
            .map_err(io)?;
        lock.try_lock()
            .map_err(|_| Error::JournalInUse(path.to_path_buf()))?;
        let mut pending = BTreeMap::new();
        let mut damage = Damage::default();
        let scan = match File::open(path) {
            Ok(file) => jsonl::scan(file, |number, line| match line {
                Line::Verified(Entry::Result(f)) if f.sealed() => {
                    pending.insert(f.lease, f);
                }
                Line::Verified(Entry::Result(f)) => {
                    damage.seals += 1;
                    tracing::error!(path = %path.display(), line = number, run = %f.run, job = %f.job, "journaled result fails its seal (damaged on disk); dropped, its job will be computed again");
                }
                Line::Verified(Entry::Acked(ids)) => ids.iter().for_each(|id| {
                    pending.remove(id);
                }),
                Line::Legacy(_) => {
                    damage.legacy += 1;
                    tracing::warn!(path = %path.display(), line = number, "journal line written before checksums: it cannot be verified, so it is dropped and its job computed again");
                }
            })
            .map_err(io)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => jsonl::Scan::default(),
            Err(e) => return Err(io(e)),
        };
        for d in &scan.damaged {
            tracing::error!(path = %path.display(), line = d.line, offset = d.offset, reason = %d.reason, "damaged journal line; dropped (an unacknowledged result in it will be computed again)");
        }
        // Lines another build wrote (their checksums hold, their format or kind is not this build's):
        // the journal is that build's to replay. Refused before the rewrite below could drop them.
        if scan.unknown > 0 {
            return Err(Error::JournalOfAnotherBuild(
                path.to_path_buf(),
                scan.unknown,
            ));
        }
        damage.lines = scan.damaged_lines;
        if let Some(offset) = scan.torn {
            // A crash mid-append: never fsynced, never reported.
            tracing::warn!(path = %path.display(), offset, "cutting a torn last line off the journal");
        }
        let file = rewrite(path, &pending)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file: Some(file),
            _lock: lock,
            pending,
            damage,
        })
    }

    /// What opening it found damaged.
    pub fn damage(&self) -> Damage {
        self.damage
    }
    /// Results finished but not acknowledged, oldest lease first.
    pub fn pending(&self) -> Vec<Finished> {
        self.pending.values().cloned().collect()
    }

    /// Appends finished results and fsyncs them.
    pub fn record(&mut self, results: &[Finished]) -> Result<()> {
        if results.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in results {
            buf.extend(jsonl::encode(&Entry::Result(r.clone())));
        }
        self.append(&buf)?;
        for r in results {
            self.pending.insert(r.lease, r.clone());
        }
        Ok(())
    }

    /// Records that the coordinator acknowledged these leases' results.
    pub fn ack(&mut self, leases: &[u64]) -> Result<()> {
        if leases.is_empty() {
            return Ok(());
        }
        for id in leases {
            self.pending.remove(id);
        }
        if self.pending.is_empty() || self.file.is_none() {
            // On failure the old file may or may not be at `path` any more (the rename may have been
            // done): appending to it could write to no file at all.
            self.file = None;
            self.file = Some(rewrite(&self.path, &self.pending)?);
            return Ok(());
        }
        self.append(&jsonl::encode(&Entry::Acked(leases.to_vec())))
    }

    fn append(&mut self, buf: &[u8]) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(Error::Journal(
                self.path.clone(),
                std::io::Error::other(
                    "the journal could not be rewritten, so nothing more is written to it",
                ),
            ));
        };
        file.append(buf)
            .map_err(|e| Error::Journal(self.path.clone(), e))
    }
}

/// Replaces the journal file with one holding only `pending` (empty when none) and opens it for appending.
fn rewrite(path: &Path, pending: &BTreeMap<u64, Finished>) -> Result<Appender> {
    let io = |e: std::io::Error| Error::Journal(path.to_path_buf(), e);
    let mut buf = Vec::new();
    for f in pending.values() {
        buf.extend(jsonl::encode(&Entry::Result(f.clone())));
    }
    jsonl::replace(path, &buf).map_err(io)?;
    Appender::open(path, buf.len() as u64).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn finished(lease: u64) -> Finished {
        let result = JobResult {
            total: 8 + lease,
            unique8: Some(8),
            nodes: 10,
        };
        let key: JobKey = "0.2".parse().unwrap();
        Finished {
            lease,
            lease_tag: 77,
            run: "1".into(),
            n: 8,
            fingerprint: 0xabc,
            job: key.to_string(),
            total: result.total,
            unique8: result.unique8,
            nodes: result.nodes,
            seal: nqueens_common::checksum::seal(0xabc, &key, &result),
            // Every other result from a GPU: the device survives the journal.
            device: (lease % 2 == 1).then(|| "cuda:0".to_string()),
            family: Some(if lease % 2 == 1 {
                nqueens_common::Family::Gpu
            } else {
                nqueens_common::Family::CpuLists
            }),
        }
    }

    #[test]
    fn unacknowledged_results_survive_a_restart_and_acknowledged_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        {
            let mut j = Journal::open(&path).unwrap();
            j.record(&[finished(1), finished(2), finished(3)]).unwrap();
            j.ack(&[2]).unwrap();
        }
        // A torn last line from a crash mid-append is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"v\":1,\"crc\":\"00")
            .unwrap();
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.pending(), vec![finished(1), finished(3)]);
        j.ack(&[1, 3]).unwrap();
        assert!(j.pending().is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    /// A journal holding a line whose checksum holds but whose entry this build cannot read (a newer
    /// build's kind of entry) is not opened: the worker stops naming it, and the file is left as it
    /// was, its results kept for the build that wrote it (found by a review, 2026-11-25: it was dropped
    /// as damage and the journal compacted without it, so a downgrade lost the newer build's
    /// unacknowledged results). A line whose version digit alone is damaged (the version is outside
    /// the checksum), or whose checksum fails, is damage: dropped, the rest of the journal kept.
    #[test]
    fn a_journal_of_a_newer_build_is_refused_and_left_as_it_was() {
        let kind = r#"{"later":[1,2]}"#;
        let newer_kind = format!(
            "{{\"v\":{},\"crc\":\"{:016x}\",\"entry\":{kind}}}\n",
            jsonl::LINE_VERSION,
            nqueens_common::checksum::checksum(kind.as_bytes())
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        let mut bytes = jsonl::encode(&Entry::Result(finished(1)));
        bytes.extend_from_slice(newer_kind.as_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let refused = Journal::open(&path).err().expect("refused");
        assert!(refused.to_string().contains("newer"), "{refused}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "left as it was");
        // The version digit flipped (2 to 3, 0 or 6), or one bit of the entry: damage, one line.
        let version = format!("\"v\":{}", jsonl::LINE_VERSION);
        for flipped in ["\"v\":3", "\"v\":0", "\"v\":6", "entry bit"] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("w.journal");
            let kept = jsonl::encode(&Entry::Result(finished(1)));
            let mut damaged = jsonl::encode(&Entry::Result(finished(2)));
            if flipped == "entry bit" {
                let at = damaged.len() - 5;
                damaged[at] ^= 1;
            } else {
                let text = String::from_utf8(damaged).unwrap();
                damaged = text.replacen(&version, flipped, 1).into_bytes();
            }
            std::fs::write(&path, [kept, damaged].concat()).unwrap();
            let j = Journal::open(&path).unwrap();
            assert_eq!(j.damage().lines, 1, "{flipped}");
            assert_eq!(j.pending(), vec![finished(1)], "{flipped}");
        }
    }

    #[test]
    fn a_result_journaled_before_devices_were_named_is_read_and_sent_again() {
        // The line exactly as the previous version wrote it: the same entry without a `device` key.
        let old = finished(5);
        assert!(old.device.is_some());
        let mut entry = serde_json::to_value(Entry::Result(old.clone())).unwrap();
        entry["result"].as_object_mut().unwrap().remove("device");
        entry["result"].as_object_mut().unwrap().remove("family");
        assert!(!entry.to_string().contains("device"));
        assert!(!entry.to_string().contains("family"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        std::fs::write(&path, jsonl::encode(&entry)).unwrap();
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.damage(), Damage::default());
        assert_eq!(
            j.pending(),
            vec![Finished {
                device: None,
                family: None,
                ..old
            }],
            "read whole, sealed, from the CPU"
        );
        assert!(j.pending()[0].sealed());
    }

    #[test]
    fn a_changed_digit_or_a_damaged_line_is_dropped_and_reported_never_resent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        {
            let mut j = Journal::open(&path).unwrap();
            j.record(&[finished(1), finished(2), finished(3)]).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Line 1: one digit of the count changes, and the line's checksum is recomputed to match (as a
        // bug in a writer would): only the result's seal can tell.
        let forged = lines[0].replace("\"total\":9", "\"total\":19");
        let body = &forged[forged.find("\"entry\":").unwrap() + 8..forged.len() - 1];
        let forged = jsonl::encode(&serde_json::from_str::<Entry>(body).unwrap());
        // Line 2: a flipped byte, so the line's own checksum fails.
        let flipped = lines[1].replace("\"nodes\":10", "\"nodes\":11");
        let mut damaged = String::from_utf8(forged).unwrap();
        damaged.push_str(&flipped);
        damaged.push('\n');
        damaged.push_str(lines[2]);
        damaged.push('\n');
        // A legacy line (the format before checksums) is not trusted either.
        damaged.push_str("{\"result\":{\"lease\":4,\"run\":\"1\",\"n\":8,\"job\":\"0.2\",\"total\":8,\"unique8\":8,\"nodes\":10}}\n");
        std::fs::write(&path, damaged).unwrap();
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.pending(), vec![finished(3)]);
        assert_eq!(
            j.damage(),
            Damage {
                lines: 1,
                seals: 1,
                legacy: 1
            }
        );
        drop(j);
        // Compaction replaced the file: it now holds the intact result only.
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.pending(), vec![finished(3)]);
        assert_eq!(j.damage(), Damage::default());
    }

    #[test]
    fn a_second_worker_cannot_share_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        let _first = Journal::open(&path).unwrap();
        assert!(matches!(Journal::open(&path), Err(Error::JournalInUse(_))));
    }

    /// A rewrite that fails (here the rename, onto a directory standing where the file was) leaves the
    /// journal refusing appends until a rewrite succeeds: before, later results were appended to the
    /// replaced file, unlinked, and reported as journaled while no file held them.
    #[test]
    fn after_a_failed_rewrite_nothing_is_appended_to_a_file_that_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        let mut journal = Journal::open(&path).unwrap();
        journal.record(&[finished(1)]).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), b"x").unwrap();
        assert!(
            journal.ack(&[1]).is_err(),
            "the rename onto a directory fails"
        );
        assert!(journal.record(&[finished(2)]).is_err());
        // Once the path is usable again, the next rewrite succeeds and appends work again.
        std::fs::remove_dir_all(&path).unwrap();
        journal.ack(&[2]).unwrap();
        journal.record(&[finished(3)]).unwrap();
        drop(journal);
        assert_eq!(Journal::open(&path).unwrap().pending(), vec![finished(3)]);
    }

    /// A journal in folders that do not exist yet is opened, the folders made (killed the mutant that
    /// made no folder, issue 42).
    #[test]
    fn a_journal_in_new_folders_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/w.journal");
        let mut journal = Journal::open(&path).unwrap();
        journal.record(&[finished(1)]).unwrap();
        drop(journal);
        assert_eq!(Journal::open(&path).unwrap().pending(), vec![finished(1)]);
    }

    /// A journal that cannot be read for another reason than its absence (here a symbolic link to
    /// itself) is refused, and left as it was: never taken for an empty journal and written over
    /// (killed the mutant that read every error as "not there", issue 42).
    #[cfg(unix)]
    #[test]
    fn a_journal_that_cannot_be_read_is_refused_not_taken_for_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        std::os::unix::fs::symlink(&path, &path).unwrap();
        assert!(Journal::open(&path).is_err());
        let link = std::fs::symlink_metadata(&path).unwrap();
        assert!(link.file_type().is_symlink(), "left as it was");
    }
}
