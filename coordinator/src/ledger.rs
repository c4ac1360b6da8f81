//! The results ledger: an append-only JSON-lines file beside the store (`DATA/results.jsonl`) with one
//! line per run created and one per result counted, fsynced before any result in it is acknowledged. It is
//! a second, independent copy of everything acknowledged (sled 0.34 has open corruption reports): `nqueens
//! import` rebuilds a store from it, and `nqueens export` writes the same format from a store.
//!
//! A line is `{"kind":"run", ...RunMeta}`, `{"kind":"result","run":R,"job":"3.7.1", ...ResultRecord}` or
//! `{"kind":"revoked","run":R,"job":"3.7.1","worker":NAME}` (a result taken back from a quarantined worker). A
//! result may appear twice (acknowledged, then lost by the store in a crash before its flush, then reported
//! again); the copies are identical and readers keep one.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{ResultRecord, RunMeta, Store};

/// The ledger's file name in the data directory.
pub const LEDGER_FILE: &str = "results.jsonl";

/// One line of the ledger (and of an export).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Entry {
    /// A run, as created.
    Run(RunMeta),
    /// A counted result.
    Result {
        run: u64,
        job: String,
        #[serde(flatten)]
        record: ResultRecord,
    },
    /// A counted result taken back (its worker was quarantined): the job is pending again.
    Revoked {
        run: u64,
        job: String,
        worker: String,
    },
}

/// Reads entries from JSON lines; `path` names the source in errors. A torn last line (a crash
/// mid-append, never acknowledged) is skipped and its offset returned, so that a writer can cut it off.
pub fn read(
    reader: impl std::io::Read,
    path: &Path,
    mut each: impl FnMut(Entry) -> Result<()>,
) -> Result<Option<u64>> {
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    let mut offset = 0u64;
    let mut number = 0;
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", path.display())))?;
        if read == 0 {
            return Ok(None);
        }
        number += 1;
        match serde_json::from_str::<Entry>(&line) {
            Ok(entry) => each(entry)?,
            Err(_) if !line.ends_with('\n') => return Ok(Some(offset)),
            Err(e) => {
                return Err(Error::Corrupt(format!(
                    "{} line {number}: {e}",
                    path.display()
                )))
            }
        }
        offset += read as u64;
    }
}

/// The ledger file, open for appending.
pub struct Ledger {
    path: PathBuf,
    file: BufWriter<File>,
}

impl Ledger {
    /// Opens (or creates) the ledger at `path` and checks it against `store`: a ledger that lacks a run
    /// or holds fewer results of a run than the store (the store was flushed before the ledger in a
    /// crash) is rewritten from the store.
    pub fn open(path: &Path, store: &Store) -> Result<Ledger> {
        let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", path.display()));
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        let mut runs = BTreeMap::<u64, u64>::new();
        let torn = read(&mut file, path, |entry| {
            match entry {
                Entry::Run(meta) => {
                    runs.entry(meta.id).or_insert(0);
                }
                Entry::Result { run, .. } => *runs.entry(run).or_insert(0) += 1,
                Entry::Revoked { run, .. } => {
                    let n = runs.entry(run).or_insert(0);
                    *n = n.saturating_sub(1);
                }
            }
            Ok(())
        })?;
        if let Some(offset) = torn {
            tracing::warn!(path = %path.display(), offset, "cutting a torn last line off the ledger");
            file.set_len(offset).map_err(io)?;
        }
        let mut complete = true;
        for meta in store.runs()? {
            let stored = store.tally(meta.id)?.jobs;
            let logged = runs.get(&meta.id).copied();
            if logged.is_none_or(|n| n < stored) {
                tracing::warn!(
                    run = meta.id,
                    stored,
                    logged = logged.unwrap_or(0),
                    "the ledger lacks results the store holds; rewriting it from the store"
                );
                complete = false;
            }
        }
        if !complete {
            let tmp = path.with_extension("jsonl.rewrite");
            let mut out = BufWriter::new(File::create(&tmp).map_err(io)?);
            export(store, None, &mut out)?;
            let out = out.into_inner().map_err(|e| io(e.into_error()))?;
            out.sync_all().map_err(io)?;
            std::fs::rename(&tmp, path).map_err(io)?;
            if let Some(dir) = path.parent() {
                File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
            }
            file = OpenOptions::new().append(true).open(path).map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok(Ledger {
            path: path.to_path_buf(),
            file: BufWriter::new(file),
        })
    }

    /// Appends entries and makes them durable (fsync) before returning.
    pub fn append(&mut self, entries: &[Entry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", self.path.display()));
        for entry in entries {
            serde_json::to_writer(&mut self.file, entry)
                .map_err(|e| Error::Durability(e.to_string()))?;
            self.file.write_all(b"\n").map_err(io)?;
        }
        self.file.flush().map_err(io)?;
        self.file.get_ref().sync_data().map_err(io)
    }
}

/// Writes a store's runs (all, or one) and their counted results as ledger lines; returns how many
/// results.
pub fn export(store: &Store, only: Option<u64>, out: &mut impl Write) -> Result<u64> {
    let io = |e: std::io::Error| Error::Invalid(format!("cannot write the export: {e}"));
    let mut results = 0;
    for meta in store.runs()? {
        if only.is_some_and(|id| id != meta.id) {
            continue;
        }
        let run = meta.id;
        serde_json::to_writer(&mut *out, &Entry::Run(meta)).map_err(|e| io(e.into()))?;
        out.write_all(b"\n").map_err(io)?;
        for item in store.results(run) {
            let (key, record) = item?;
            let entry = Entry::Result {
                run,
                job: key.to_string(),
                record,
            };
            serde_json::to_writer(&mut *out, &entry).map_err(|e| io(e.into()))?;
            out.write_all(b"\n").map_err(io)?;
            results += 1;
        }
    }
    out.flush().map_err(io)?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use nqueens_common::{Plan, Strategy};

    use super::*;
    use crate::store::Incoming;

    fn count(path: &Path) -> (u64, u64) {
        let (mut runs, mut results) = (0, 0);
        read(File::open(path).unwrap(), path, |e| {
            match e {
                Entry::Run(_) => runs += 1,
                Entry::Result { .. } => results += 1,
                Entry::Revoked { .. } => results -= 1,
            }
            Ok(())
        })
        .unwrap();
        (runs, results)
    }

    #[test]
    fn a_ledger_behind_its_store_is_rewritten_and_a_torn_line_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let batch: Vec<Incoming> = plan
            .jobs()
            .take(3)
            .map(|key| Incoming {
                run: run.id,
                result: plan.job(&key).unwrap().run(),
                key,
                worker: "w-1".into(),
                name: "w".into(),
                lease: 1,
            })
            .collect();
        store.commit(&batch).unwrap();
        let path = dir.path().join(LEDGER_FILE);
        std::fs::write(&path, "{\"kind\":\"run\",\"id\":1,\"n\":8,\"str").unwrap();
        let mut ledger = Ledger::open(&path, &store).unwrap();
        assert_eq!(count(&path), (1, 3), "rewritten from the store");
        ledger.append(&[Entry::Run(run.clone())]).unwrap();
        assert_eq!(count(&path), (2, 3));
        // A torn append is cut off at the next open; nothing else is lost.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"kind\":\"result\",\"run\":1,\"jo");
        std::fs::write(&path, &text).unwrap();
        drop(ledger);
        Ledger::open(&path, &store).unwrap();
        assert_eq!(count(&path), (2, 3));
    }
}
