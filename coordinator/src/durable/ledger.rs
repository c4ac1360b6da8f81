//! The results ledger (`DATA/results.jsonl`): an append-only file of checksummed lines beside the
//! store, a second, independent copy of every run, control, quarantine and counted or revoked result,
//! fsynced before any result in it is acknowledged. At startup store and ledger are reconciled both
//! ways ([`crate::durable::reconcile`]); `nqueens import` rebuilds a store from it, and `nqueens export` writes
//! a store in its JSON form. Sealed results are packed binary lines ([`packed`]), the rest checksummed
//! JSON lines ([`nqueens_common::jsonl`]); a failed append leaves no partial line. Each ledger
//! format's lines, and how older ones are read: `docs/formats.md`.

use std::path::{Path, PathBuf};

use nqueens_common::jsonl::{self, Appender};

mod compare;
mod entry;
mod packed;
mod view;
mod write;

pub use crate::durable::store::{same_run, taken_back};
pub use compare::{compare, compare_by, Difference};
pub use entry::{Entry, EXPORT_FORMAT};
#[cfg(test)]
pub(crate) use packed::newer_line;
pub use packed::{scan, Encoder};
pub use view::{different_runs, quarantine_line, same_controls, LedgerView, RevokedLine};
pub use write::{export, rewrite};

use crate::error::{Error, Result};

/// The ledger's file name in the data directory.
pub const LEDGER_FILE: &str = "results.jsonl";

/// The ledger file, open for appending.
pub struct Ledger {
    path: PathBuf,
    file: Appender,
    /// Packs results; numbers workers after the highest number the file defines.
    encoder: Encoder,
    /// Encoded entries whose append failed: they go first in the next one.
    backlog: Vec<u8>,
}

impl Ledger {
    /// Opens the ledger at `path` for appending after its first `len` good bytes (anything after them,
    /// a torn last line, is cut off), numbering workers from `next_worker` (the first number no line
    /// of the file defines, as its reading found: [`LedgerView::next_worker`]).
    pub fn open(path: &Path, len: u64, next_worker: u32) -> Result<Ledger> {
        let file = Appender::open(path, len)
            .map_err(|e| Error::durable_io(path.display().to_string(), e))?;
        Ok(Ledger {
            path: path.to_path_buf(),
            file,
            encoder: Encoder::packed(next_worker),
            backlog: Vec::new(),
        })
    }

    /// A ledger over any sink (tests inject failing ones).
    pub fn with_sink(path: &Path, sink: Box<dyn jsonl::Sink>, len: u64) -> Ledger {
        Ledger {
            path: path.to_path_buf(),
            file: Appender::new(sink, len),
            encoder: Encoder::packed(0),
            backlog: Vec::new(),
        }
    }

    /// Appends entries (after any left from a failed append) and makes them durable before returning.
    /// On failure nothing partial stays in the file and the entries stay queued for the next append
    /// (a worker's definition among them: it still comes before the results that use it).
    pub fn append(&mut self, entries: &[Entry]) -> Result<()> {
        for entry in entries {
            self.backlog.extend(self.encoder.lines(entry));
        }
        if self.backlog.is_empty() {
            return Ok(());
        }
        match self.file.append(&self.backlog) {
            Ok(()) => {
                self.backlog.clear();
                Ok(())
            }
            Err(e) => Err(Error::durable_io(self.path.display().to_string(), e)),
        }
    }

    /// Whether entries wait for a successful append.
    pub fn behind(&self) -> bool {
        !self.backlog.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Write;

    use nqueens_common::jsonl::Line;
    use nqueens_common::{JobKey, JobResult, Plan, Strategy};

    use super::entry::Tagged;
    use crate::durable::store::{ResultRecord, RunMeta, Store};

    use super::*;
    use crate::durable::store::tests::incoming_from;

    fn count(path: &Path) -> (u64, u64) {
        let view = LedgerView::read(path).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        let results = view.runs.keys().map(|&r| view.count(r)).sum();
        (view.runs.len() as u64, results)
    }

    /// Takes `room` bytes in all, then fails like a full disk (keeping the part of a write that fit).
    struct Disk {
        file: File,
        room: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let len = self.file.metadata()?.len();
            let room = self.room.load(std::sync::atomic::Ordering::SeqCst);
            let n = (buf.len() as u64).min(room.saturating_sub(len)) as usize;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "No space left on device",
                ));
            }
            self.file.write(&buf[..n])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl jsonl::Sink for Disk {
        fn sync(&mut self) -> std::io::Result<()> {
            self.file.sync_data()
        }
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.file.set_len(len)
        }
    }

    #[test]
    fn a_full_disk_leaves_no_partial_line_and_nothing_applied_is_missing_once_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::temporary().unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let path = dir.path().join(LEDGER_FILE);
        let room = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1 << 20));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let mut ledger = Ledger::with_sink(
            &path,
            Box::new(Disk {
                file,
                room: room.clone(),
            }),
            0,
        );
        ledger.append(&[Entry::Run(run.clone())]).unwrap();
        let result = |i| {
            let inc = incoming_from(run.id, &plan, i, "w");
            let c = store.commit(&[inc]).unwrap();
            let (run, key, record) = c.counted[0].clone();
            Entry::Result {
                run,
                job: key.to_string(),
                record,
            }
        };
        // The disk fills in the middle of the second entry.
        let used = std::fs::metadata(&path).unwrap().len();
        room.store(used + 40, std::sync::atomic::Ordering::SeqCst);
        assert!(ledger.append(&[result(0)]).is_err());
        assert!(ledger.behind());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            used,
            "no partial line"
        );
        assert!(ledger.append(&[result(1)]).is_err());
        // Space returns: the next append writes what failed before, first, then the new entry.
        room.store(1 << 20, std::sync::atomic::Ordering::SeqCst);
        ledger.append(&[result(2)]).unwrap();
        assert!(!ledger.behind());
        assert_eq!(count(&path), (1, 3));
        let view = LedgerView::read(&path).unwrap();
        let meta = store.run(run.id).unwrap().unwrap();
        assert!(compare(&store, &meta, &view).unwrap().is_empty());
    }

    #[test]
    fn issue_16_results_are_compact_lines_and_tagged_ones_are_still_read() {
        let store = Store::temporary().unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let c = store
            .commit(&[incoming_from(run.id, &plan, 0, "w")])
            .unwrap();
        let (id, key, record) = c.counted[0].clone();
        let entry = Entry::Result {
            run: id,
            job: key.to_string(),
            record: record.clone(),
        };
        let line = jsonl::encode(&entry);
        let text = std::str::from_utf8(&line).unwrap();
        assert!(text.starts_with("{\"v\":2,"), "{text}");
        assert!(text.contains("\"entry\":[\"r\","), "{text}");
        let tagged = serde_json::to_vec(&Tagged::Result {
            run: id,
            job: key.to_string(),
            record: record.clone(),
        })
        .unwrap();
        assert!(line.len() * 3 < (tagged.len() + 41) * 2, "{text}");
        // Both shapes, and a version 1 line, read back to the same entry; a confirmed result keeps
        // its confirmations, and one with kernel families its families (with or without
        // confirmations).
        let confirmed = Entry::Result {
            run: id,
            job: key.to_string(),
            record: ResultRecord {
                confirmed_by: vec!["a".into(), "b".into()],
                ..record.clone()
            },
        };
        let families = Entry::Result {
            run: id,
            job: key.to_string(),
            record: ResultRecord {
                confirmed_by: vec!["a".into()],
                families: vec![None, Some(nqueens_common::Family::CpuLists)],
                ..record.clone()
            },
        };
        let alone = Entry::Result {
            run: id,
            job: key.to_string(),
            record: ResultRecord {
                families: vec![Some(nqueens_common::Family::Gpu)],
                ..record.clone()
            },
        };
        for e in [&entry, &confirmed, &families, &alone] {
            let back = jsonl::decode::<Entry>(&jsonl::encode(e)[..]).unwrap();
            assert_eq!(back, jsonl::Line::Verified(e.clone()));
        }
        let v1 = format!(
            "{{\"v\":1,\"crc\":\"{:016x}\",\"entry\":{}}}",
            nqueens_common::checksum::checksum(&tagged),
            std::str::from_utf8(&tagged).unwrap()
        );
        assert_eq!(
            jsonl::decode::<Entry>(v1.as_bytes()).unwrap(),
            jsonl::Line::Verified(entry.clone())
        );
        // Malformed compact entries are refused, whatever their checksum.
        for bad in [
            "[\"r\",1]",
            "[\"x\",1,\"0.1\",1,1,1,\"w\",\"w-1\",1,1,1]",
            "[\"r\",1,\"0.1\",1,1,1,\"w\",\"w-1\",1,1,1,[],7]",
            "[\"r\",1,\"0.1\",-1,1,1,\"w\",\"w-1\",1,1,1]",
            "[]",
        ] {
            let line = format!(
                "{{\"v\":2,\"crc\":\"{:016x}\",\"entry\":{bad}}}",
                nqueens_common::checksum::checksum(bad.as_bytes())
            );
            assert!(jsonl::decode::<Entry>(line.as_bytes()).is_err(), "{bad}");
        }
    }

    /// Result entries of workers named `names` (a real worker's process id beside each), counted in a
    /// fresh store: one per name, jobs 0, 1, ... in order.
    fn counted(names: &[&str]) -> (Store, RunMeta, Vec<Entry>) {
        let store = Store::temporary().unwrap();
        let plan = Plan::new(9, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let entries = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut inc = incoming_from(run.id, &plan, i, name);
                inc.worker = format!("{name}-12743-18ead09378def326");
                let (run, key, record) = store.commit(&[inc]).unwrap().counted[0].clone();
                Entry::Result {
                    run,
                    job: key.to_string(),
                    record,
                }
            })
            .collect();
        (store, run, entries)
    }

    #[test]
    fn issue_16_results_are_packed_lines_of_about_55_bytes_read_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEDGER_FILE);
        let (store, run, entries) = counted(&["node-a", "node-b", "node-a", "node-a"]);
        let mut ledger = Ledger::open(&path, 0, 0).unwrap();
        ledger.append(&[Entry::Run(run.clone())]).unwrap();
        let after_run = std::fs::metadata(&path).unwrap().len();
        ledger.append(&entries[..2]).unwrap();
        let with_definitions = std::fs::metadata(&path).unwrap().len();
        ledger.append(&entries[2..]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let per_result = (bytes.len() as u64 - with_definitions) / 2;
        assert!(per_result <= 60, "{per_result} bytes a result");
        assert!(
            with_definitions - after_run < 2 * per_result + 2 * 50,
            "two definitions, each once"
        );
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1 + 2 + 4);
        let view = LedgerView::read(&path).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        assert!(compare(&store, &run, &view).unwrap().is_empty());
        for e in &entries {
            let Entry::Result { job, record, .. } = e else {
                unreachable!()
            };
            let key: JobKey = job.parse().unwrap();
            assert_eq!(&view.results[&run.id][&key], record, "worker and all");
        }
        // The digest of the quick path reads them too.
        let digest = crate::durable::digest::LedgerDigest::read(&path).unwrap();
        assert_eq!(digest.unfit, None);
        assert_eq!(digest.digests[&run.id].results, 4);
        let (_, _, others) = counted(&["node-c"]);
        let Entry::Result { record, .. } = &others[0] else {
            unreachable!()
        };
        let moved = Entry::Result {
            run: run.id,
            job: plan_job(&run, 5),
            record: ResultRecord {
                worker: record.worker.clone(),
                worker_id: record.worker_id.clone(),
                ..sealed_for(&run, 5)
            },
        };
        // A later incarnation numbers its workers after the file's: each result keeps its own worker.
        let read = LedgerView::read(&path).unwrap();
        assert_eq!(read.next_worker, 2);
        let mut again = Ledger::open(&path, read.len, read.next_worker).unwrap();
        again.append(std::slice::from_ref(&moved)).unwrap();
        let view = LedgerView::read(&path).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        assert_eq!(view.next_worker, 3);
        let key: JobKey = plan_job(&run, 5).parse().unwrap();
        assert_eq!(view.results[&run.id][&key].worker, "node-c");
        let first: JobKey = plan_job(&run, 0).parse().unwrap();
        assert_eq!(view.results[&run.id][&first].worker, "node-a");
        // Its definition damaged, node-c's result is damage: never another worker's.
        let mut damaged = std::fs::read(&path).unwrap();
        let at = bytes.len() + 6;
        damaged[at] = if damaged[at] == b'a' { b'b' } else { b'a' };
        std::fs::write(&path, &damaged).unwrap();
        let view = LedgerView::read(&path).unwrap();
        assert_eq!(view.damaged.len(), 2, "{:?}", view.damaged);
        assert!(
            view.damaged[1].reason.contains("never defined"),
            "{:?}",
            view.damaged
        );
        assert!(!view.results[&run.id].contains_key(&key));
        // An export stays JSON.
        let mut export_bytes = Vec::new();
        export(&store, None, &mut export_bytes).unwrap();
        assert!(std::str::from_utf8(&export_bytes)
            .unwrap()
            .lines()
            .all(|l| l.starts_with("{\"v\":2,")));
    }

    fn plan_job(run: &RunMeta, i: usize) -> String {
        run.plan().unwrap().jobs().nth(i).unwrap().to_string()
    }

    /// A sealed result for job `i` of `run`.
    fn sealed_for(run: &RunMeta, i: usize) -> ResultRecord {
        let plan = run.plan().unwrap();
        let inc = incoming_from(run.id, &plan, i, "x");
        ResultRecord {
            result: inc.result,
            worker: "x".into(),
            worker_id: "x-1".into(),
            lease: inc.lease,
            at_unix: 1,
            confirmed_by: Vec::new(),
            seal: Some(inc.seal),
            families: Vec::new(),
        }
    }

    #[test]
    fn issue_16_packed_lines_escape_newlines_and_refuse_every_damage() {
        // Numbers made of newline and escape bytes: the line holds none, and reads back exactly.
        let tricky = Entry::Result {
            run: 10,
            job: "10.27.10".into(),
            record: ResultRecord {
                result: JobResult {
                    total: 0x0a0a_1b1b,
                    unique8: Some(0x1b0a),
                    nodes: 0x0a,
                },
                worker: "w\n\u{1b}".into(),
                worker_id: "w-\n".into(),
                lease: 0x0a1b_0a1b,
                at_unix: 0x0a0a,
                confirmed_by: vec!["\n".into()],
                seal: Some(0x0a1b_0a1b_0a1b_0a1b),
                families: vec![Some(nqueens_common::Family::Gpu), None],
            },
        };
        let lines = Encoder::packed(0).lines(&tricky);
        assert_eq!(lines.iter().filter(|&&b| b == b'\n').count(), 2);
        let read = |bytes: &[u8]| {
            let mut got = Vec::new();
            let (scan, _) = scan(bytes, |_, line| got.push(line)).unwrap();
            (got, scan)
        };
        let (got, found) = read(&lines);
        assert_eq!(got, vec![Line::Verified(tricky.clone())]);
        assert!(found.damaged.is_empty());
        // Every flipped bit of the result line (its worker defined before it) is damage: no entry.
        let split = lines.iter().position(|&b| b == b'\n').unwrap() + 1;
        for i in split..lines.len() - 1 {
            for bit in 0..8 {
                let mut flipped = lines.clone();
                flipped[i] ^= 1 << bit;
                let (got, found) = read(&flipped);
                assert!(got.is_empty(), "byte {i} bit {bit}: {got:?}");
                assert!(
                    !found.damaged.is_empty() || found.torn.is_some(),
                    "byte {i} bit {bit}"
                );
            }
        }
        // A result whose worker was never defined, a bad escape, an unknown version: damage.
        let undefined = &lines[split..];
        let (got, found) = read(undefined);
        assert!(got.is_empty());
        assert!(
            found.damaged[0].reason.contains("never defined"),
            "{found:?}"
        );
        let mut bad_escape = lines[..split].to_vec();
        bad_escape.extend_from_slice(&[packed::MARK, 0x1b, b'x', b'\n']);
        assert!(read(&bad_escape).1.damaged[0].reason.contains("escape"));
        let mut future = lines.clone();
        future[split + 1] = packed::VERSION + 1;
        assert!(read(&future).1.damaged[0].reason.contains("not known"));
        // Its version byte damaged, a line fails its check: damage, never a newer build's line. An
        // intact line of a later version, or a JSON entry of an unknown kind, is one.
        assert_eq!(read(&future).1.unknown, 0);
        assert_eq!(read(&newer_line(&lines[split + 2..])).1.unknown, 1);
        let kind = jsonl::encode(&serde_json::json!({"kind": "later"}));
        assert_eq!(read(&kind).1.unknown, 1);
        assert_eq!(read(&lines).1.unknown, 0);
        // A line of this version whose check holds but whose payload this build cannot decode (a kind
        // added without a new version), or with bytes after its entry: a newer build's. A result whose
        // worker was never defined decodes: damage.
        let line = packed::framed_line(packed::VERSION, &[0xff, 0xff, 0xff]);
        assert_eq!(read(&line).1.unknown, 1);
        assert_eq!(read(undefined).1.unknown, 0);
    }
}
