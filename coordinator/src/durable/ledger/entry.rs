//! One line of the ledger or of an export ([`Entry`]), and its JSON forms: tagged objects, and the
//! positional array of a result (ledger format 2).

use nqueens_common::JobResult;
use serde::{Deserialize, Serialize};

use crate::durable::store::{Quarantine, ResultRecord, Revoked, RunMeta};

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

impl Entry {
    /// The line of a counted result taken back (its worker quarantined, or its count disputed).
    pub fn taken_back(r: &Revoked) -> Entry {
        Entry::Revoked {
            run: r.run,
            job: r.key.to_string(),
            worker: r.record.worker.clone(),
            record: Some(r.record.clone()),
        }
    }
}

/// The export format [`Entry::Export`] names.
pub const EXPORT_FORMAT: u32 = 2;

/// The tagged form of an entry: a JSON object with a `kind`. Runs and revocations are written so; results
/// were up to ledger format 1 (and are still read so).
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum Tagged {
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
            // worker, worker_id, lease, at_unix, seal]`, then `confirmed_by` when it is not empty, then
            // (since 2026-11-28) the kernel `families` when they are not empty (`confirmed_by` then
            // written even if empty).
            Entry::Result { run, job, record } => {
                let families = !record.families.is_empty();
                let confirmed = families || !record.confirmed_by.is_empty();
                let len = 11 + usize::from(confirmed) + usize::from(families);
                let mut seq = s.serialize_seq(Some(len))?;
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
                if families {
                    seq.serialize_element(&record.families)?;
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
        let families = seq.next_element()?.unwrap_or_default();
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
                families,
            },
        })
    }
}
