//! Packed ledger lines (ledger format 3): a counted result in about 50 bytes instead of the 180 of a
//! JSON line with a real worker's name and process id, so that an N = 28 ledger (23.4 million results)
//! stays near 1.1 GB.
//!
//! A packed line is the byte [`MARK`] (never the first byte of a JSON line), then, escaped so that it
//! holds no newline ([`escape`]), the version byte [`VERSION`], the low 32 bits of the CRC-64 of the
//! version byte and the payload (little-endian; version 3 checked the payload alone) and the payload:
//! one [`Packed`] in postcard. Two kinds:
//!
//! - `Worker`: defines a small number for a worker (its name and process id); the writer defines each
//!   worker before its first result in an incarnation, with a number no line of the file defined
//!   before (an incarnation goes on after the highest number its reading of the file found), so a
//!   damaged definition leaves its results undefined, never named after another worker;
//! - `Result`: a counted result whose worker is such a number, and whose seal is its 8 bytes.
//!
//! Runs, revocations and results without a seal stay JSON lines ([`jsonl`]); an export is all JSON.
//! A line that fails its check, an unknown version, an escape that means nothing, a number never
//! defined: damage, reported as any damaged line is, never guessed.

use std::collections::HashMap;
use std::io::Read;

use nqueens_common::checksum::checksum;
use nqueens_common::jsonl::{self, Line, Scan};
use nqueens_common::{Family, JobKey, JobResult};
use serde::{Deserialize, Serialize};

use super::Entry;
use crate::durable::store::ResultRecord;

/// The first byte of a packed line.
pub const MARK: u8 = 0x01;

/// The version of the packed line format this build writes: 3 (the ledger format that introduced
/// packed lines) with the kernel families of a result (2026-11-28).
pub const VERSION: u8 = 4;
/// The version before: its results name no kernel family ([`PackedV3`]); still read.
pub const VERSION_3: u8 = 3;

/// Escapes in a packed line: a newline is written `ESC 'n'`, an escape `ESC 'e'`.
const ESC: u8 = 0x1b;

/// A packed line's payload.
#[derive(Debug, Serialize, Deserialize)]
enum Packed {
    Worker {
        number: u32,
        name: String,
        id: String,
    },
    Result {
        run: u64,
        job: Vec<u8>,
        total: u64,
        unique8: Option<u64>,
        nodes: u64,
        worker: u32,
        lease: u64,
        at_unix: u64,
        seal: [u8; 8],
        confirmed_by: Vec<String>,
        families: Vec<Option<Family>>,
    },
}

/// A packed line's payload of [`VERSION_3`]: as [`Packed`], without kernel families.
#[derive(Debug, Serialize, Deserialize)]
enum PackedV3 {
    Worker {
        number: u32,
        name: String,
        id: String,
    },
    Result {
        run: u64,
        job: Vec<u8>,
        total: u64,
        unique8: Option<u64>,
        nodes: u64,
        worker: u32,
        lease: u64,
        at_unix: u64,
        seal: [u8; 8],
        confirmed_by: Vec<String>,
    },
}

impl From<PackedV3> for Packed {
    fn from(p: PackedV3) -> Packed {
        match p {
            PackedV3::Worker { number, name, id } => Packed::Worker { number, name, id },
            PackedV3::Result {
                run,
                job,
                total,
                unique8,
                nodes,
                worker,
                lease,
                at_unix,
                seal,
                confirmed_by,
            } => Packed::Result {
                run,
                job,
                total,
                unique8,
                nodes,
                worker,
                lease,
                at_unix,
                seal,
                confirmed_by,
                families: Vec::new(),
            },
        }
    }
}

/// Writes ledger lines: results with a seal packed, their workers numbered as they first appear;
/// everything else as JSON lines.
#[derive(Debug)]
pub struct Encoder {
    /// The first number this encoder gives.
    first: u32,
    workers: HashMap<(String, String), u32>,
}

impl Encoder {
    /// An encoder of the ledger's lines (results packed) for a file whose lines define worker numbers
    /// below `first` (0 for a new file).
    pub fn packed(first: u32) -> Encoder {
        Encoder {
            first,
            workers: HashMap::new(),
        }
    }

    /// The first number this encoder has not given (where an appender after its lines starts).
    pub fn next_number(&self) -> u32 {
        self.first.saturating_add(self.workers.len() as u32)
    }

    /// The line (or lines: a worker's definition first) for `entry`.
    pub fn lines(&mut self, entry: &Entry) -> Vec<u8> {
        let Entry::Result { run, job, record } = entry else {
            return jsonl::encode(entry);
        };
        let (Some(seal), Ok(key)) = (record.seal, job.parse::<JobKey>()) else {
            return jsonl::encode(entry);
        };
        let mut out = Vec::with_capacity(64);
        let pair = (record.worker.clone(), record.worker_id.clone());
        // Past u32::MAX workers in one file (never), a number would repeat: write JSON instead.
        let Some(known) = self.first.checked_add(self.workers.len() as u32) else {
            return jsonl::encode(entry);
        };
        let number = *self.workers.entry(pair).or_insert_with(|| {
            out.extend(line(&Packed::Worker {
                number: known,
                name: record.worker.clone(),
                id: record.worker_id.clone(),
            }));
            known
        });
        out.extend(line(&Packed::Result {
            run: *run,
            job: key.0,
            total: record.result.total,
            unique8: record.result.unique8,
            nodes: record.result.nodes,
            worker: number,
            lease: record.lease,
            at_unix: record.at_unix,
            seal: seal.to_le_bytes(),
            confirmed_by: record.confirmed_by.clone(),
            families: record.families.clone(),
        }));
        out
    }
}

/// One packed line, newline included.
fn line(packed: &Packed) -> Vec<u8> {
    let payload = postcard::to_allocvec(packed).expect("ledger lines serialize to postcard");
    let mut framed = Vec::with_capacity(payload.len() + 5);
    framed.push(VERSION);
    framed.extend_from_slice(&check(VERSION, &payload).to_le_bytes());
    framed.extend_from_slice(&payload);
    let mut out = Vec::with_capacity(framed.len() + 4);
    out.push(MARK);
    escape(&framed, &mut out);
    out.push(b'\n');
    out
}

/// A line's check: the low 32 bits of the CRC-64 of its payload, for version 3; of its version byte
/// and payload from version 4, so that a version byte changed to another version is damage too.
fn check(version: u8, payload: &[u8]) -> u32 {
    if version == VERSION_3 {
        return checksum(payload) as u32;
    }
    let mut bytes = Vec::with_capacity(payload.len() + 1);
    bytes.push(version);
    bytes.extend_from_slice(payload);
    checksum(&bytes) as u32
}

fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        match b {
            b'\n' => out.extend_from_slice(&[ESC, b'n']),
            ESC => out.extend_from_slice(&[ESC, b'e']),
            b => out.push(b),
        }
    }
}

fn unescape(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut it = bytes.iter();
    while let Some(&b) = it.next() {
        if b != ESC {
            out.push(b);
            continue;
        }
        match it.next() {
            Some(b'n') => out.push(b'\n'),
            Some(b'e') => out.push(ESC),
            other => return Err(format!("a packed line with the escape {other:?}")),
        }
    }
    Ok(out)
}

/// Reads ledger lines: packed ones with the worker numbers defined so far, the rest as JSON lines.
#[derive(Debug, Default)]
pub struct Decoder {
    workers: HashMap<u32, (String, String)>,
    /// One more than the highest number defined so far (0: none).
    next: u32,
}

impl Decoder {
    /// One complete line (without its newline): an entry, nothing (a worker's definition), or why it
    /// is damaged.
    pub fn decode(&mut self, bytes: &[u8]) -> Result<Option<Line<Entry>>, String> {
        let Some((&MARK, escaped)) = bytes.split_first() else {
            return jsonl::decode(bytes).map(Some);
        };
        let framed = unescape(escaped)?;
        let Some((&version, rest)) = framed.split_first() else {
            return Err("an empty packed line".into());
        };
        if version != VERSION && version != VERSION_3 {
            return Err(format!(
                "packed line format {version} is not known to this build"
            ));
        }
        let (crc, payload) = rest
            .split_first_chunk::<4>()
            .ok_or("a packed line shorter than its check")?;
        if u32::from_le_bytes(*crc) != check(version, payload) {
            return Err("a packed line fails its check".into());
        }
        let (packed, trailing) = match version {
            VERSION_3 => postcard::take_from_bytes::<PackedV3>(payload).map(|(p, t)| (p.into(), t)),
            _ => postcard::take_from_bytes::<Packed>(payload),
        }
        .map_err(|e| format!("checked but undecodable packed line: {e}"))?;
        if !trailing.is_empty() {
            return Err(format!(
                "a packed line with {} bytes after its entry",
                trailing.len()
            ));
        }
        match packed {
            Packed::Worker { number, name, id } => {
                self.workers.insert(number, (name, id));
                self.next = self.next.max(number.saturating_add(1));
                Ok(None)
            }
            Packed::Result {
                run,
                job,
                total,
                unique8,
                nodes,
                worker,
                lease,
                at_unix,
                seal,
                confirmed_by,
                families,
            } => {
                let (name, id) = self
                    .workers
                    .get(&worker)
                    .ok_or_else(|| format!("a result of worker number {worker}, never defined"))?;
                Ok(Some(Line::Verified(Entry::Result {
                    run,
                    job: JobKey(job).to_string(),
                    record: ResultRecord {
                        result: JobResult {
                            total,
                            unique8,
                            nodes,
                        },
                        worker: name.clone(),
                        worker_id: id.clone(),
                        lease,
                        at_unix,
                        confirmed_by,
                        seal: Some(u64::from_le_bytes(seal)),
                        families,
                    },
                })))
            }
        }
    }
}

/// Reads every line of a ledger (packed or JSON), handing each entry to `each` with its line number;
/// returns what the scan found and the first worker number no intact line defines (where an encoder
/// appending to the file starts).
pub fn scan(reader: impl Read, each: impl FnMut(u64, Line<Entry>)) -> std::io::Result<(Scan, u32)> {
    let mut decoder = Decoder::default();
    let mut unknown = 0;
    let mut scan = jsonl::scan_with(
        reader,
        |bytes| {
            decoder
                .decode(bytes)
                .inspect_err(|_| unknown += u64::from(newer(bytes)))
        },
        each,
    )?;
    scan.unknown = unknown;
    Ok((scan, decoder.next))
}

/// A packed line of the version after this build's, intact, whose payload is `payload` (for tests: a
/// newer build's line).
#[cfg(test)]
pub(crate) fn newer_line(payload: &[u8]) -> Vec<u8> {
    framed_line(VERSION + 1, payload)
}

/// An intact packed line of `version` whose payload is `payload`, newline included (for tests: the
/// payload need not decode).
#[cfg(test)]
pub(crate) fn framed_line(version: u8, payload: &[u8]) -> Vec<u8> {
    let mut framed = vec![version];
    framed.extend_from_slice(&check(version, payload).to_le_bytes());
    framed.extend_from_slice(payload);
    let mut line = vec![MARK];
    escape(&framed, &mut line);
    line.push(b'\n');
    line
}

/// Whether a complete line this build cannot read (without its newline) is intact, and so a newer
/// build's: a packed line whose check holds (every version keeps the framing: mark, version byte, the
/// low 32 bits of the CRC-64 of the version byte and the payload) and that is of a version past
/// [`VERSION`], or of a known version with a payload this build cannot decode (a kind of entry added
/// without a new version); or a JSON line whose checksum holds and whose entry this build does not
/// know. A line whose version byte was damaged fails its check: damage, as before; so is an intact
/// result whose worker's definition was damaged (it decodes).
fn newer(bytes: &[u8]) -> bool {
    let Some((&MARK, escaped)) = bytes.split_first() else {
        return jsonl::foreign::<Entry>(bytes);
    };
    let Ok(framed) = unescape(escaped) else {
        return false;
    };
    let Some((&version, rest)) = framed.split_first() else {
        return false;
    };
    let Some((crc, payload)) = rest.split_first_chunk::<4>() else {
        return false;
    };
    if u32::from_le_bytes(*crc) != check(version, payload) {
        return false;
    }
    let whole = |taken: Option<&[u8]>| !taken.is_some_and(<[u8]>::is_empty);
    match version {
        VERSION => whole(
            postcard::take_from_bytes::<Packed>(payload)
                .ok()
                .map(|(_, t)| t),
        ),
        VERSION_3 => whole(
            postcard::take_from_bytes::<PackedV3>(payload)
                .ok()
                .map(|(_, t)| t),
        ),
        v => v > VERSION,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn result() -> impl Strategy<Value = Entry> {
        (
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 1..8),
            (any::<u64>(), any::<Option<u64>>(), any::<u64>()),
            ("[a-z\n\x1b]{1,12}", "[a-z0-9\n\x1b-]{0,40}"),
            (any::<u64>(), any::<u64>(), any::<u64>()),
            proptest::collection::vec("[a-z]{1,6}", 0..3),
            proptest::collection::vec(proptest::option::of(0usize..3), 0..3),
        )
            .prop_map(
                |(
                    run,
                    job,
                    (total, unique8, nodes),
                    (worker, worker_id),
                    (lease, at, seal),
                    confirmed_by,
                    families,
                )| {
                    Entry::Result {
                        run,
                        job: JobKey(job).to_string(),
                        record: ResultRecord {
                            result: JobResult {
                                total,
                                unique8,
                                nodes,
                            },
                            worker,
                            worker_id,
                            lease,
                            at_unix: at,
                            confirmed_by,
                            seal: Some(seal),
                            families: ResultRecord::families_of(
                                families.into_iter().map(|f| f.map(|i| Family::ALL[i])),
                            ),
                        },
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn packed_lines_round_trip_hold_no_newline_inside_and_refuse_a_changed_byte(
            entries in proptest::collection::vec(result(), 1..6),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let mut encoder = Encoder::packed(7);
            let bytes: Vec<u8> = entries.iter().flat_map(|e| encoder.lines(e)).collect();
            let mut got = Vec::new();
            let (found, next) = scan(&bytes[..], |_, line| got.push(line)).unwrap();
            prop_assert!(found.damaged.is_empty());
            prop_assert_eq!(next, encoder.next_number());
            let want: Vec<_> = entries.iter().cloned().map(Line::Verified).collect();
            prop_assert_eq!(got, want);
            // One changed byte: that line is damage (or two, if it became a newline), and no entry
            // read differs from one written.
            let mut changed = bytes.clone();
            let i = at.index(changed.len());
            changed[i] ^= flip;
            let mut read = Vec::new();
            let (found, _) = scan(&changed[..], |_, line| read.push(line)).unwrap();
            prop_assert!(!found.damaged.is_empty() || found.torn.is_some());
            for line in read {
                let Line::Verified(e) = line else { unreachable!() };
                prop_assert!(entries.contains(&e), "{:?}", e);
            }
        }

        #[test]
        fn any_line_decodes_or_is_refused_without_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut decoder = Decoder::default();
            let mut packed = vec![MARK];
            packed.extend_from_slice(&bytes);
            let _ = decoder.decode(&packed);
            for version in [VERSION_3, VERSION] {
                let mut framed = vec![version];
                framed.extend_from_slice(&check(version, &bytes).to_le_bytes());
                framed.extend_from_slice(&bytes);
                let mut line = vec![MARK];
                escape(&framed, &mut line);
                let _ = decoder.decode(&line);
            }
        }
    }

    /// Lines of the packed format before kernel families (version 3) are read, their results naming
    /// none; an unknown version is damage.
    #[test]
    fn lines_of_the_version_before_families_are_read() {
        let v3 = |p: &PackedV3| {
            let payload = postcard::to_allocvec(p).unwrap();
            let mut framed = vec![VERSION_3];
            framed.extend_from_slice(&(checksum(&payload) as u32).to_le_bytes());
            framed.extend_from_slice(&payload);
            let mut line = vec![MARK];
            escape(&framed, &mut line);
            line
        };
        let mut decoder = Decoder::default();
        let worker = PackedV3::Worker {
            number: 0,
            name: "a".into(),
            id: "a-1".into(),
        };
        assert!(decoder.decode(&v3(&worker)).unwrap().is_none());
        let result = PackedV3::Result {
            run: 1,
            job: vec![0, 2],
            total: 4,
            unique8: Some(8),
            nodes: 10,
            worker: 0,
            lease: 5,
            at_unix: 6,
            seal: [7; 8],
            confirmed_by: vec!["b".into()],
        };
        let Some(Line::Verified(Entry::Result { run, job, record })) =
            decoder.decode(&v3(&result)).unwrap()
        else {
            panic!("not a result")
        };
        assert_eq!((run, job.as_str()), (1, "0.2"));
        assert_eq!(
            (record.worker.as_str(), record.worker_id.as_str()),
            ("a", "a-1")
        );
        assert_eq!(record.confirmed_by, ["b"]);
        assert!(record.families.is_empty());
        let mut unknown = v3(&result);
        unknown[1] = VERSION + 1;
        assert!(decoder.decode(&unknown).unwrap_err().contains("not known"));
    }
}
