//! The quick way store and ledger are found to agree at startup: an order-independent digest of each
//! run's results (a count and a sum of 128-bit SipHashes over run, job, counts, seal and worker), computed by
//! streaming the ledger and the store's results tree, in memory O(runs) instead of O(results). Equal
//! digests over intact, sealed results mean the two hold the same results; anything else (a damaged or
//! legacy line, a revocation line of the format before 2, a duplicate, a result one side lacks, a count
//! that differs) makes the digests differ or the ledger unfit for the quick path, and reconciliation
//! compares result by result.
//! A revocation line of ledger format 2 carries the result it takes back and is subtracted; older ones
//! make the ledger unfit. Quarantine and release lines (ledger format 4) give the set of workers
//! quarantined at the file's end, which must be the store's.

use std::collections::BTreeMap;
use std::fs::File;
use std::hash::Hasher;
use std::path::Path;

use nqueens_common::jsonl::Line;
use nqueens_common::JobKey;
use siphasher::sip128::{Hasher128, SipHasher13};

use crate::durable::ledger::{same_run, Entry};
use crate::durable::store::{Quarantine, ResultRecord, RunMeta};
use crate::error::{Error, Result};

/// The digest of one run's results.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunDigest {
    /// Results counted.
    pub results: u64,
    /// Wrapping sum of the results' hashes.
    pub sum: u128,
}

impl RunDigest {
    /// Adds one result.
    pub fn add(&mut self, run: u64, key: &JobKey, record: &ResultRecord) {
        self.results += 1;
        self.sum = self.sum.wrapping_add(hash(run, key, record));
    }

    /// Takes one result out (a revocation).
    pub fn remove(&mut self, run: u64, key: &JobKey, record: &ResultRecord) {
        self.results = self.results.wrapping_sub(1);
        self.sum = self.sum.wrapping_sub(hash(run, key, record));
    }
}

/// One result's hash: everything reconciliation compares (the job, its counts, its seal and its
/// worker).
fn hash(run: u64, key: &JobKey, record: &ResultRecord) -> u128 {
    let mut h = SipHasher13::new_with_keys(0x6e71_7565_656e_7321, 0x6c65_6467_6572_2131);
    h.write(&run.to_be_bytes());
    h.write(&(key.0.len() as u64).to_be_bytes());
    h.write(&key.0);
    let r = &record.result;
    h.write(&r.total.to_be_bytes());
    h.write(&r.unique8.map_or(u64::MAX, |u| u).to_be_bytes());
    h.write(&[u8::from(r.unique8.is_some())]);
    h.write(&r.nodes.to_be_bytes());
    h.write(&record.seal.unwrap_or(0).to_be_bytes());
    for text in [&record.worker, &record.worker_id] {
        h.write(&(text.len() as u64).to_be_bytes());
        h.write(text.as_bytes());
    }
    h.finish128().as_u128()
}

/// A ledger read for the quick path: its runs and per-run digests, or why it is not fit for it.
#[derive(Debug, Default)]
pub struct LedgerDigest {
    /// The runs, by id.
    pub runs: BTreeMap<u64, RunMeta>,
    /// The digest of each run's result lines.
    pub digests: BTreeMap<u64, RunDigest>,
    /// Why the quick path cannot be taken (a line that needs the full comparison), if any.
    pub unfit: Option<String>,
    /// The length of the file's good content (a torn last line excluded).
    pub len: u64,
    /// The first worker number no intact line defines (see [`crate::durable::ledger::LedgerView::next_worker`]).
    pub next_worker: u32,
    /// A torn last line was found (it is cut off when the ledger is opened for appending).
    pub torn: bool,
    /// The workers quarantined at the file's end, by name.
    pub quarantined: BTreeMap<String, Quarantine>,
}

impl LedgerDigest {
    /// Streams the ledger at `path` (absent: empty), checking every line's checksum and every result's
    /// seal as [`crate::durable::ledger::LedgerView::read`] does, but keeping no result in memory.
    pub fn read(path: &Path) -> Result<LedgerDigest> {
        let io = |e: std::io::Error| Error::durable_io(path.display().to_string(), e);
        let mut out = LedgerDigest::default();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(e)),
        };
        let size = file.metadata().map_err(io)?.len();
        let (scan, next_worker) = crate::durable::ledger::scan(file, |number, line| {
            if out.unfit.is_some() {
                return;
            }
            let why = match line {
                Line::Verified(entry) => out.apply(entry).err(),
                Line::Legacy(_) => Some("a line of the format before checksums".to_string()),
            };
            if let Some(why) = why {
                out.unfit = Some(format!("line {number}: {why}"));
            }
        })
        .map_err(io)?;
        if out.unfit.is_none() && (!scan.damaged.is_empty() || scan.legacy > 0) {
            out.unfit = Some(format!(
                "{} damaged and {} legacy lines",
                scan.damaged_lines, scan.legacy
            ));
        }
        out.len = scan.torn.unwrap_or(size);
        out.torn = scan.torn.is_some();
        out.next_worker = next_worker;
        Ok(out)
    }

    /// The key of a result line of run `run` (a `what`), once its run is known and its seal holds.
    fn sealed(
        &self,
        run: u64,
        job: &str,
        record: &ResultRecord,
        what: &str,
    ) -> std::result::Result<JobKey, String> {
        let key: JobKey = job.parse().map_err(|_| format!("bad job key {job:?}"))?;
        let meta = self
            .runs
            .get(&run)
            .ok_or_else(|| format!("{what} of run {run} before the run"))?;
        let fingerprint = meta.fingerprint_value().map_err(|e| e.to_string())?;
        if !record.sealed(fingerprint, &key) {
            return Err(format!("run {run} job {job}: the {what} fails its seal"));
        }
        Ok(key)
    }

    fn apply(&mut self, entry: Entry) -> std::result::Result<(), String> {
        match entry {
            Entry::Run(meta) => {
                meta.fingerprint_value().map_err(|e| e.to_string())?;
                match self.runs.get(&meta.id) {
                    Some(known) if !same_run(known, &meta) => {
                        return Err(format!("run {} appears with two plans", meta.id))
                    }
                    // A later line of the same run carries an operator's control: the last one holds.
                    Some(_) => {
                        self.runs.insert(meta.id, meta);
                    }
                    None => {
                        self.digests.entry(meta.id).or_default();
                        self.runs.insert(meta.id, meta);
                    }
                }
            }
            Entry::Result { run, job, record } => {
                // Not checked against the plan here (the costliest part of a full read): a key that is
                // not one of the plan's jobs cannot be in the store, whose keys were checked as they were
                // committed, so the digests differ and the full comparison names it.
                let key = self.sealed(run, &job, &record, "result")?;
                // The full read's rule (`LedgerView`): a d4 result without its unique count, or a
                // mirror one with one, is damage.
                if let Some(why) = self
                    .runs
                    .get(&run)
                    .and_then(|meta| record.result.shape_error(meta.strategy))
                {
                    return Err(format!("run {run} job {job}: {why}"));
                }
                self.digests.entry(run).or_default().add(run, &key, &record);
            }
            // A revocation that carries its result (ledger format 2) takes it out of the digest:
            // the result's line came earlier, so the two cancel. One that does not (an older line),
            // or one whose result never was in the ledger, makes the digests differ: the full
            // comparison then decides.
            Entry::Revoked {
                run,
                job,
                record: Some(record),
                ..
            } => {
                let key = self.sealed(run, &job, &record, "revoked result")?;
                self.digests
                    .entry(run)
                    .or_default()
                    .remove(run, &key, &record);
            }
            Entry::Revoked { run, job, .. } => {
                return Err(format!(
                    "run {run} job {job}: a revocation of the format before format 2"
                ));
            }
            line @ (Entry::Quarantine(_) | Entry::Released { .. }) => {
                crate::durable::ledger::quarantine_line(&mut self.quarantined, line)?;
            }
            // An export copied in as the ledger: its framing says nothing of the results.
            Entry::Export { .. } | Entry::End { .. } => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nqueens_common::JobResult;

    use super::*;

    fn record(total: u64) -> ResultRecord {
        ResultRecord {
            result: JobResult {
                total,
                unique8: Some(total),
                nodes: 7,
            },
            worker: "w".into(),
            worker_id: "w-1".into(),
            lease: 1,
            at_unix: 0,
            confirmed_by: Vec::new(),
            families: Vec::new(),
            seal: Some(42),
        }
    }

    #[test]
    fn the_digest_ignores_order_and_sees_every_field_that_is_compared() {
        let (a, b) = (
            "1.2".parse::<JobKey>().unwrap(),
            "1.3".parse::<JobKey>().unwrap(),
        );
        let mut one = RunDigest::default();
        one.add(1, &a, &record(5));
        one.add(1, &b, &record(6));
        let mut two = RunDigest::default();
        two.add(1, &b, &record(6));
        two.add(1, &a, &record(5));
        assert_eq!(one, two);
        let mut other = RunDigest::default();
        other.add(1, &a, &record(5));
        other.add(1, &b, &record(7));
        assert_ne!(one, other, "a count");
        let mut moved = RunDigest::default();
        moved.add(1, &a, &record(6));
        moved.add(1, &b, &record(5));
        assert_ne!(one, moved, "counts swapped between jobs");
        let mut resealed = RunDigest::default();
        resealed.add(1, &a, &record(5));
        resealed.add(
            1,
            &b,
            &ResultRecord {
                seal: Some(43),
                ..record(6)
            },
        );
        assert_ne!(one, resealed, "a seal");
        let mut elsewhere = RunDigest::default();
        elsewhere.add(2, &a, &record(5));
        elsewhere.add(2, &b, &record(6));
        assert_ne!(one, elsewhere, "another run");
    }
}
