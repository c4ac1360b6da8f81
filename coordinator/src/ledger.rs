//! The results ledger: an append-only file of checksummed lines beside the store (`DATA/results.jsonl`),
//! with one line per run created and one per result counted, fsynced before any result in it is
//! acknowledged. It is a second, independent copy of everything acknowledged (sled 0.34 has open
//! corruption reports): at startup the store and the ledger are reconciled both ways
//! ([`crate::reconcile`]), `nqueens import` rebuilds a store from it (or from an export), and
//! `nqueens export` writes a store's runs and results as JSON lines.
//!
//! Runs and revocations are checksummed JSON lines ([`nqueens_common::jsonl`]): `{"kind":"run",
//! ...RunMeta}` and `{"kind":"revoked","run":R,"job":"3.7.1","worker":NAME,"record":{...}}` (a result
//! taken back from a quarantined worker; the result itself since ledger format 2, so that the quick
//! reconciliation can take it out of its digest). A result is a packed line since ledger format 3
//! ([`packed`]: binary, its worker a number defined once, about 50 bytes). Ledger
//! format 2 wrote a positional JSON array, `["r",R,"3.7.1",total,unique8,nodes,worker,worker_id,lease,
//! at_unix,seal]` (then `confirmed_by` when a verified job's result was confirmed), and format 1 the
//! tagged object `{"kind":"result","run":R,"job":"3.7.1", ...ResultRecord}`; both are still read, and
//! exports are written in the JSON form of format 2, readable with any JSON tool. A result may appear
//! twice (identical copies; readers keep one); a run's line appears again after each operator's control
//! (cancel, pause, resume, priority), and the last holds. Since ledger format 4 the ledger also carries
//! quarantines, `{"kind":"quarantine","worker":NAME,"reason":...,"at_unix":T}` (written with the commit
//! that disproves the worker, before its revocation lines), and their lifting,
//! `{"kind":"released","worker":NAME,"at_unix":T}` (`serve --release-quarantine`): a store rebuilt
//! from the ledger alone keeps its disproved workers out of service. An export ends with the store's
//! quarantines in the same form. Appends never leave a partial line behind: a
//! failed append is cut off, and its entries stay queued in memory and go first in the next append, so
//! nothing the store applied is missing from the ledger once an append succeeds.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use nqueens_common::jsonl::{self, Appender, Damage, Line};

mod packed;
use nqueens_common::{JobKey, JobResult};
pub use packed::{scan, Encoder};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{Quarantine, ResultRecord, RunMeta, Store};

/// The ledger's file name in the data directory.
pub const LEDGER_FILE: &str = "results.jsonl";

/// One line of the ledger (and of an export).
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A run, as created (or as an operator's control left it).
    Run(RunMeta),
    /// A counted result.
    Result {
        run: u64,
        job: String,
        record: ResultRecord,
    },
    /// A counted result taken back (its worker was quarantined): the job is pending again.
    Revoked {
        run: u64,
        job: String,
        worker: String,
        /// The result taken back (ledger format 2; absent from older lines), so that the quick
        /// reconciliation can take it out of its digest.
        record: Option<ResultRecord>,
    },
    /// A quarantined worker: a store restored from the file keeps it out of service.
    Quarantine(Quarantine),
    /// A quarantine lifted by the operator (ledger format 4 on): the worker may lease again.
    Released { worker: String, at_unix: u64 },
    /// An export's first line (export format 2 on): the file must end with its [`Entry::End`].
    Export { version: u32 },
    /// An export's last line: how many runs, results and quarantines precede it, so that a copy cut
    /// short at a line boundary is told from a whole one.
    End {
        runs: u64,
        results: u64,
        quarantines: u64,
    },
}

/// The export format [`Entry::Export`] names.
pub const EXPORT_FORMAT: u32 = 2;

/// The tagged form of an entry: a JSON object with a `kind`. Runs and revocations are written so; results
/// were up to ledger format 1 (and are still read so).
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Tagged {
    Run(RunMeta),
    Result {
        run: u64,
        job: String,
        #[serde(flatten)]
        record: ResultRecord,
    },
    Revoked {
        run: u64,
        job: String,
        worker: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record: Option<ResultRecord>,
    },
    Quarantine(Quarantine),
    Released {
        worker: String,
        at_unix: u64,
    },
    Export {
        version: u32,
    },
    End {
        runs: u64,
        results: u64,
        quarantines: u64,
    },
}

/// The first element of a compact result entry.
const COMPACT_RESULT: &str = "r";

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        match self {
            // Ledger format 2: a result is a positional array, `["r", run, job, total, unique8, nodes,
            // worker, worker_id, lease, at_unix, seal]`, then `confirmed_by` when it is not empty.
            Entry::Result { run, job, record } => {
                let confirmed = !record.confirmed_by.is_empty();
                let mut seq = s.serialize_seq(Some(11 + usize::from(confirmed)))?;
                seq.serialize_element(COMPACT_RESULT)?;
                seq.serialize_element(run)?;
                seq.serialize_element(job)?;
                seq.serialize_element(&record.result.total)?;
                seq.serialize_element(&record.result.unique8)?;
                seq.serialize_element(&record.result.nodes)?;
                seq.serialize_element(&record.worker)?;
                seq.serialize_element(&record.worker_id)?;
                seq.serialize_element(&record.lease)?;
                seq.serialize_element(&record.at_unix)?;
                seq.serialize_element(&record.seal)?;
                if confirmed {
                    seq.serialize_element(&record.confirmed_by)?;
                }
                seq.end()
            }
            Entry::Run(meta) => Tagged::Run(meta.clone()).serialize(s),
            Entry::Revoked {
                run,
                job,
                worker,
                record,
            } => Tagged::Revoked {
                run: *run,
                job: job.clone(),
                worker: worker.clone(),
                record: record.clone(),
            }
            .serialize(s),
            Entry::Quarantine(q) => Tagged::Quarantine(q.clone()).serialize(s),
            Entry::Released { worker, at_unix } => Tagged::Released {
                worker: worker.clone(),
                at_unix: *at_unix,
            }
            .serialize(s),
            Entry::Export { version } => Tagged::Export { version: *version }.serialize(s),
            Entry::End {
                runs,
                results,
                quarantines,
            } => Tagged::End {
                runs: *runs,
                results: *results,
                quarantines: *quarantines,
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Entry, D::Error> {
        d.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> serde::de::Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ledger entry: an object with a kind, or a compact result array")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        map: A,
    ) -> std::result::Result<Entry, A::Error> {
        let tagged = Tagged::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(match tagged {
            Tagged::Run(meta) => Entry::Run(meta),
            Tagged::Result { run, job, record } => Entry::Result { run, job, record },
            Tagged::Revoked {
                run,
                job,
                worker,
                record,
            } => Entry::Revoked {
                run,
                job,
                worker,
                record,
            },
            Tagged::Quarantine(q) => Entry::Quarantine(q),
            Tagged::Released { worker, at_unix } => Entry::Released { worker, at_unix },
            Tagged::Export { version } => Entry::Export { version },
            Tagged::End {
                runs,
                results,
                quarantines,
            } => Entry::End {
                runs,
                results,
                quarantines,
            },
        })
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Entry, A::Error> {
        use serde::de::Error as _;
        fn next<'de, T: Deserialize<'de>, A: serde::de::SeqAccess<'de>>(
            seq: &mut A,
            what: &'static str,
        ) -> std::result::Result<T, A::Error> {
            seq.next_element()?
                .ok_or_else(|| A::Error::custom(format!("compact result without its {what}")))
        }
        let tag: String = next(&mut seq, "tag")?;
        if tag != COMPACT_RESULT {
            return Err(A::Error::custom(format!("unknown compact entry {tag:?}")));
        }
        let run = next(&mut seq, "run")?;
        let job = next(&mut seq, "job")?;
        let result = JobResult {
            total: next(&mut seq, "total")?,
            unique8: next(&mut seq, "unique8")?,
            nodes: next(&mut seq, "nodes")?,
        };
        let worker = next(&mut seq, "worker")?;
        let worker_id = next(&mut seq, "worker_id")?;
        let lease = next(&mut seq, "lease")?;
        let at_unix = next(&mut seq, "at_unix")?;
        let seal = next(&mut seq, "seal")?;
        let confirmed_by = seq.next_element()?.unwrap_or_default();
        if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            return Err(A::Error::custom("compact result with extra elements"));
        }
        Ok(Entry::Result {
            run,
            job,
            record: ResultRecord {
                result,
                worker,
                worker_id,
                lease,
                at_unix,
                confirmed_by,
                seal,
            },
        })
    }
}

/// Everything a ledger (or an export) holds once read and checked: its runs, its results as of its end
/// (revocations applied, copies kept once), and what could not be trusted.
#[derive(Debug, Default)]
pub struct LedgerView {
    pub runs: BTreeMap<u64, RunMeta>,
    pub results: BTreeMap<u64, BTreeMap<JobKey, ResultRecord>>,
    /// Damaged lines and records: the line, and why (each is logged at error level by the reader).
    pub damaged: Vec<Damage>,
    /// Lines of the format before checksums (their results were sealed on reading; see [`LedgerView::read`]).
    pub legacy: u64,
    /// Results of such lines that carried no seal either: nothing in the file can show them intact.
    pub unchecked: u64,
    /// Results taken back by revocation lines.
    pub revoked: u64,
    /// Those revocations, in order: run, job and the worker whose result was taken back.
    pub revocations: Vec<(u64, JobKey, String)>,
    /// The length of the file's good content (a torn last line excluded).
    pub len: u64,
    /// A torn last line was found.
    pub torn: bool,
    /// The first worker number no intact line defines (see [`packed`]).
    pub next_worker: u32,
    /// The workers quarantined as of the file's end (quarantine lines, less those released after), by
    /// name.
    pub quarantines: BTreeMap<String, Quarantine>,
    /// For an export of format 2 on (a file with the header line): whether its end line was found,
    /// counting exactly what precedes it. `Some(false)`: the export was cut short. `None`: not such an
    /// export (a ledger, or an export of an earlier version).
    pub export_whole: Option<bool>,
}

impl LedgerView {
    /// Reads a ledger or an export; `path` names it in errors and logs. Every line's checksum and every
    /// result's seal is checked; what fails is listed in `damaged`, never used. Lines of the format
    /// before checksums (a ledger of the previous version) cannot be checked: their results are sealed
    /// as read, and the caller cross-checks them against the store.
    pub fn read(path: &Path) -> Result<LedgerView> {
        let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", path.display()));
        let mut view = LedgerView::default();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(view),
            Err(e) => return Err(io(e)),
        };
        let size = file.metadata().map_err(io)?.len();
        let mut extra = Vec::new();
        let mut last_line = 0;
        let (scan, next_worker) = scan(file, |number, line| {
            last_line = number;
            let (entry, verified) = match line {
                Line::Verified(e) => (e, true),
                Line::Legacy(e) => (e, false),
            };
            if let Err(reason) = view.apply(entry, verified) {
                extra.push(Damage {
                    line: number,
                    offset: 0,
                    reason,
                });
            }
        })
        .map_err(io)?;
        view.next_worker = next_worker;
        view.damaged = scan.damaged;
        view.damaged.extend(extra);
        // An export whose end line is missing lacks what came after the cut, every line intact.
        if view.export_whole == Some(false) {
            view.damaged.push(Damage {
                line: last_line + 1,
                offset: size,
                reason: "an export cut short: its end line, counting what it holds, is missing (a copy interrupted, a full disk)".into(),
            });
        }
        view.damaged.sort_by_key(|d| d.line);
        view.legacy = scan.legacy;
        view.torn = scan.torn.is_some();
        view.len = scan.torn.unwrap_or(size);
        for d in &view.damaged {
            tracing::error!(path = %path.display(), line = d.line, reason = %d.reason, place = "ledger", "damaged ledger line: not used");
        }
        Ok(view)
    }

    fn apply(&mut self, entry: Entry, verified: bool) -> std::result::Result<(), String> {
        match entry {
            Entry::Run(meta) => {
                // Ids are handed out from 1, and the next one must exist: refused here, as damage,
                // before anything is restored from the file.
                if meta.id == 0 || meta.id == u64::MAX {
                    return Err(format!("run id {} is out of range", meta.id));
                }
                meta.fingerprint_value().map_err(|e| e.to_string())?;
                if let Some(known) = self.runs.get(&meta.id) {
                    if !same_plan(known, &meta) {
                        return Err(format!(
                            "run {} appears twice with different plans",
                            meta.id
                        ));
                    }
                    // A later line of the same run carries an operator's control (cancel, pause,
                    // priority): the last one holds.
                    self.runs.insert(meta.id, meta);
                    return Ok(());
                }
                self.results.entry(meta.id).or_default();
                self.runs.insert(meta.id, meta);
            }
            Entry::Result {
                run,
                job,
                mut record,
            } => {
                let key: JobKey = job.parse().map_err(|_| format!("bad job key {job:?}"))?;
                let meta = self
                    .runs
                    .get(&run)
                    .ok_or_else(|| format!("result of run {run} before the run"))?;
                meta.plan()
                    .and_then(|p| Ok(p.job(&key)?))
                    .map_err(|e| format!("run {run} job {job}: {e}"))?;
                let fingerprint = meta.fingerprint_value().map_err(|e| e.to_string())?;
                if !verified && record.seal.is_none() {
                    self.unchecked += 1;
                    record.seal = Some(nqueens_common::checksum::seal(
                        fingerprint,
                        &key,
                        &record.result,
                    ));
                }
                if !record.sealed(fingerprint, &key) {
                    return Err(format!("run {run} job {job}: the result fails its seal"));
                }
                let results = self.results.entry(run).or_default();
                if let Some(earlier) = results.get(&key) {
                    if earlier.result != record.result {
                        return Err(format!(
                            "run {run} job {job}: a second, different result ({:?}, earlier {:?})",
                            record.result, earlier.result
                        ));
                    }
                    return Ok(());
                }
                results.insert(key, record);
            }
            Entry::Revoked {
                run, job, worker, ..
            } => {
                let key: JobKey = job.parse().map_err(|_| format!("bad job key {job:?}"))?;
                let results = self.results.entry(run).or_default();
                if results.get(&key).is_some_and(|r| r.worker == worker) {
                    results.remove(&key);
                    self.revoked += 1;
                    self.revocations.push((run, key, worker));
                }
            }
            Entry::Quarantine(q) => {
                if !nqueens_proto::valid_worker_id(&q.worker) {
                    return Err(format!("a quarantine of a bad worker name {:?}", q.worker));
                }
                self.quarantines.insert(q.worker.clone(), q);
            }
            Entry::Released { worker, .. } => {
                if !nqueens_proto::valid_worker_id(&worker) {
                    return Err(format!("a release of a bad worker name {worker:?}"));
                }
                self.quarantines.remove(&worker);
            }
            Entry::Export { version } => {
                if version != EXPORT_FORMAT {
                    return Err(format!(
                        "an export of format {version}, not {EXPORT_FORMAT}"
                    ));
                }
                // Every header opens an export that must end (two files joined: the second's too).
                self.export_whole = Some(false);
            }
            Entry::End {
                runs,
                results,
                quarantines,
            } => {
                let held = (
                    self.runs.len() as u64,
                    self.results.values().map(|r| r.len() as u64).sum::<u64>(),
                    self.quarantines.len() as u64,
                );
                if held != (runs, results, quarantines) {
                    return Err(format!(
                        "the export's end counts {runs} runs, {results} results and {quarantines} quarantines, but {} runs, {} results and {} quarantines precede it: it was cut short or altered",
                        held.0, held.1, held.2
                    ));
                }
                self.export_whole = Some(true);
            }
        }
        Ok(())
    }

    /// Number of results it holds for `run`.
    pub fn count(&self, run: u64) -> u64 {
        self.results.get(&run).map_or(0, |r| r.len() as u64)
    }
}

/// Whether two records of a run describe the same plan.
pub fn same_plan(a: &RunMeta, b: &RunMeta) -> bool {
    (a.id, a.n, a.strategy, a.depth, a.jobs_total, &a.fingerprint)
        == (b.id, b.n, b.strategy, b.depth, b.jobs_total, &b.fingerprint)
}

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
            .map_err(|e| Error::Durability(format!("{}: {e}", path.display())))?;
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
            Err(e) => Err(Error::Durability(format!("{}: {e}", self.path.display()))),
        }
    }

    /// Whether entries wait for a successful append.
    pub fn behind(&self) -> bool {
        !self.backlog.is_empty()
    }
}

/// Replaces the ledger at `path` with an export of `store` (atomically: temporary file, fsync, rename)
/// and opens it for appending.
pub fn rewrite(path: &Path, store: &Store) -> Result<Ledger> {
    let tmp = path.with_extension("jsonl.rewrite");
    let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", tmp.display()));
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
    let io = |e: std::io::Error| Error::Durability(format!("cannot write the export: {e}"));
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
    let io = |e: std::io::Error| Error::Durability(format!("cannot write the export: {e}"));
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

/// Per run, the results only one side holds (used by `audit` and startup reconciliation).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Results the store holds and the ledger lacks.
    pub store_only: Vec<JobKey>,
    /// Results the ledger holds and the store lacks (or holds damaged).
    pub ledger_only: Vec<JobKey>,
    /// Results both hold, with different counts.
    pub conflicting: Vec<JobKey>,
    /// Results in the store that fail their seal, cannot be read (a group is named by its prefix), or
    /// credit the ledger's counts to another worker.
    pub damaged: Vec<JobKey>,
}

impl Difference {
    /// Whether both sides agree.
    pub fn is_empty(&self) -> bool {
        self.store_only.is_empty()
            && self.ledger_only.is_empty()
            && self.conflicting.is_empty()
            && self.damaged.is_empty()
    }
}

/// Compares one run's results in the store with the ledger's.
pub fn compare(store: &Store, meta: &RunMeta, view: &LedgerView) -> Result<Difference> {
    let fingerprint = meta.fingerprint_value()?;
    let empty = BTreeMap::new();
    let logged = view.results.get(&meta.id).unwrap_or(&empty);
    let mut seen: HashMap<&JobKey, ()> = HashMap::with_capacity(logged.len());
    let mut diff = Difference::default();
    for item in store.results_raw(meta.id) {
        let (key, record) = item?;
        let intact = record.as_ref().is_ok_and(|r| r.sealed(fingerprint, &key));
        let theirs = logged.get_key_value(&key);
        if let Some((k, _)) = theirs {
            seen.insert(k, ());
        }
        match (intact, theirs) {
            (false, Some(_)) => {
                diff.damaged.push(key.clone());
                diff.ledger_only.push(key);
            }
            (false, None) => diff.damaged.push(key),
            (true, None) => diff.store_only.push(key),
            (true, Some((_, l))) => match record {
                Ok(r) if r.result != l.result => diff.conflicting.push(key),
                // The same counts credited to another worker: the ledger's lines are checked, so the
                // store's copy is the damaged one (quarantines go by worker).
                Ok(r) if (&r.worker, &r.worker_id) != (&l.worker, &l.worker_id) => {
                    diff.damaged.push(key.clone());
                    diff.ledger_only.push(key);
                }
                _ => {}
            },
        }
    }
    for key in logged.keys() {
        if !seen.contains_key(key) {
            diff.ledger_only.push(key.clone());
        }
    }
    Ok(diff)
}

#[cfg(test)]
mod tests {
    use nqueens_common::{Plan, Strategy};

    use super::*;
    use crate::store::tests::incoming_from;

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
        // its confirmations.
        let confirmed = Entry::Result {
            run: id,
            job: key.to_string(),
            record: ResultRecord {
                confirmed_by: vec!["a".into(), "b".into()],
                ..record.clone()
            },
        };
        for e in [&entry, &confirmed] {
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
        let digest = crate::digest::LedgerDigest::read(&path).unwrap();
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
    }
}
