//! The worker's journal of unacknowledged results: every finished result is appended and fsynced before it
//! is reported, and acknowledgements are appended after the coordinator confirms. A worker that restarts
//! (or reconnects) re-sends what the journal still holds, so no finished job is lost to a crash or an
//! outage. The file is JSON lines, locked against a second worker, and emptied once nothing is pending.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A finished job's result as reported to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub lease: u64,
    pub run: String,
    pub n: u32,
    pub job: String,
    pub total: u64,
    pub unique8: Option<u64>,
    pub nodes: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Entry {
    Result(Finished),
    Acked(Vec<u64>),
}

/// The journal file and what it holds unacknowledged, by lease id.
pub struct Journal {
    path: PathBuf,
    file: File,
    pending: BTreeMap<u64, Finished>,
}

impl Journal {
    /// Opens (or creates) the journal at `path`, takes its lock and replays it.
    pub fn open(path: &Path) -> Result<Journal> {
        let io = |e: std::io::Error| Error::Journal(path.to_path_buf(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        file.try_lock()
            .map_err(|_| Error::JournalInUse(path.to_path_buf()))?;
        let mut pending = BTreeMap::new();
        for (i, line) in BufReader::new(&file).lines().enumerate() {
            let line = line.map_err(io)?;
            // A torn last line (a crash mid-append) was never acknowledged nor fsynced: skip it.
            match serde_json::from_str::<Entry>(&line) {
                Ok(Entry::Result(f)) => {
                    pending.insert(f.lease, f);
                }
                Ok(Entry::Acked(ids)) => ids.iter().for_each(|id| {
                    pending.remove(id);
                }),
                Err(e) => {
                    tracing::warn!(path = %path.display(), line = i + 1, error = %e, "skipping an unreadable journal line")
                }
            }
        }
        let mut journal = Journal {
            path: path.to_path_buf(),
            file,
            pending,
        };
        journal.compact()?;
        Ok(journal)
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
            serde_json::to_writer(&mut buf, &Entry::Result(r.clone())).expect("JSON");
            buf.push(b'\n');
            self.pending.insert(r.lease, r.clone());
        }
        self.append(&buf)
    }

    /// Records that the coordinator acknowledged these leases' results.
    pub fn ack(&mut self, leases: &[u64]) -> Result<()> {
        if leases.is_empty() {
            return Ok(());
        }
        for id in leases {
            self.pending.remove(id);
        }
        if self.pending.is_empty() {
            return self.compact();
        }
        let mut buf = serde_json::to_vec(&Entry::Acked(leases.to_vec())).expect("JSON");
        buf.push(b'\n');
        self.append(&buf)
    }

    fn append(&mut self, buf: &[u8]) -> Result<()> {
        let io = |e| Error::Journal(self.path.clone(), e);
        self.file.write_all(buf).map_err(io)?;
        self.file.sync_data().map_err(io)
    }

    /// Rewrites the file to hold only the pending results (empties it when none).
    fn compact(&mut self) -> Result<()> {
        let io = |e| Error::Journal(self.path.clone(), e);
        self.file.set_len(0).map_err(io)?;
        let results: Vec<Finished> = self.pending.values().cloned().collect();
        if results.is_empty() {
            return self.file.sync_data().map_err(io);
        }
        self.record(&results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(lease: u64) -> Finished {
        Finished {
            lease,
            run: "1".into(),
            n: 8,
            job: "0.2".into(),
            total: 8,
            unique8: Some(8),
            nodes: 10,
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
            .write_all(b"{\"result\":{\"lea")
            .unwrap();
        let mut j = Journal::open(&path).unwrap();
        assert_eq!(j.pending(), vec![finished(1), finished(3)]);
        j.ack(&[1, 3]).unwrap();
        assert!(j.pending().is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn a_second_worker_cannot_share_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.journal");
        let _first = Journal::open(&path).unwrap();
        assert!(matches!(Journal::open(&path), Err(Error::JournalInUse(_))));
    }
}
