//! A store written out as ledger lines: the ledger rewritten from the store, and `nqueens export`.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use nqueens_common::jsonl;

use super::{Encoder, Entry, Ledger, EXPORT_FORMAT};
use crate::durable::store::Store;
use crate::error::{Error, Result};

/// Replaces the ledger at `path` with an export of `store` (atomically: temporary file, fsync, rename)
/// and opens it for appending.
pub fn rewrite(path: &Path, store: &Store) -> Result<Ledger> {
    let tmp = path.with_extension("jsonl.rewrite");
    let io = |e: std::io::Error| Error::durable_io(tmp.display().to_string(), e);
    let written = (|| {
        let mut out = std::io::BufWriter::new(File::create(&tmp).map_err(io)?);
        let mut encoder = Encoder::packed(0);
        write_store(store, None, &mut out, |e| encoder.lines(e))?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        drop(file);
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok((len, encoder.next_number()))
    })();
    let (len, next_worker) = match written {
        Ok(len) => len,
        Err(e) => {
            // A full disk must not keep the half-written copy (it holds the space a retry needs).
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    jsonl::sync_dir(path).map_err(io)?;
    // The rewritten file numbered its workers from 0: the appender goes on after them.
    Ledger::open(path, len, next_worker)
}

/// Writes a store's runs (all, or one) and their counted results as JSON ledger lines (an export), then
/// its quarantined workers; returns how many results. Every result's seal is checked first: a damaged store is not exported.
pub fn export(store: &Store, only: Option<u64>, out: &mut impl Write) -> Result<u64> {
    let io = |e: std::io::Error| Error::durable_io("cannot write the export", e);
    let header = Entry::Export {
        version: EXPORT_FORMAT,
    };
    out.write_all(&jsonl::encode(&header)).map_err(io)?;
    let counts = write_store(store, only, out, jsonl::encode::<Entry>)?;
    let end = Entry::End {
        runs: counts.runs,
        results: counts.results,
        quarantines: counts.quarantines,
    };
    out.write_all(&jsonl::encode(&end)).map_err(io)?;
    out.flush().map_err(io)?;
    Ok(counts.results)
}

/// What [`write_store`] wrote.
struct Counts {
    runs: u64,
    results: u64,
    quarantines: u64,
}

/// [`export`], each entry written as `encode` gives it (packed results in a rewritten ledger).
fn write_store(
    store: &Store,
    only: Option<u64>,
    out: &mut impl Write,
    mut encode: impl FnMut(&Entry) -> Vec<u8>,
) -> Result<Counts> {
    let io = |e: std::io::Error| Error::durable_io("cannot write the export", e);
    let (mut runs, mut results, mut quarantines) = (0, 0, 0);
    for meta in store.runs()? {
        if only.is_some_and(|id| id != meta.id) {
            continue;
        }
        runs += 1;
        let run = meta.id;
        let fingerprint = meta.fingerprint_value()?;
        out.write_all(&encode(&Entry::Run(meta))).map_err(io)?;
        for item in store.results(run) {
            let (key, record) = item?;
            if !record.sealed(fingerprint, &key) {
                return Err(Error::Corrupt(format!(
                    "run {run} job {key}: the stored result fails its seal; start the coordinator (it repairs the store from the ledger) before exporting"
                )));
            }
            let entry = Entry::Result {
                run,
                job: key.to_string(),
                record,
            };
            out.write_all(&encode(&entry)).map_err(io)?;
            results += 1;
        }
    }
    // The quarantines last: a store restored from the file keeps those workers out of service.
    for q in store.quarantined()? {
        out.write_all(&encode(&Entry::Quarantine(q))).map_err(io)?;
        quarantines += 1;
    }
    out.flush().map_err(io)?;
    Ok(Counts {
        runs,
        results,
        quarantines,
    })
}
