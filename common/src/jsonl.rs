//! Checksummed JSON lines: the one file format of the worker's journal and the coordinator's ledger, and
//! the only file I/O of this crate (both sides need it; neither depends on the other).
//!
//! A line is `{"v":2,"crc":"<16 hex digits>","entry":<JSON>}` (`"v":1` lines, of the previous version,
//! are read too): the CRC-64 (see [`crate::checksum`]) of
//! the entry's exact bytes. Reading sorts every line into one of four kinds, and says which:
//!
//! - verified: the checksum matches;
//! - legacy: a line of the format before checksums (a bare entry), which cannot be verified;
//! - damaged: a complete line (ending in a newline) that does not parse or whose checksum fails;
//!   never skipped in silence: the reader gets its number and why;
//! - torn: an incomplete last line (a crash in the middle of an append, never acknowledged); its offset
//!   is returned so that the writer can cut it off.
//!
//! Writers append through [`Appender`], which leaves no partial line behind when a write fails (a full
//! disk): it cuts the file back to its last good length. Whole files are replaced through
//! [`replace`]: a temporary file, fsync, rename, directory fsync, so a crash leaves the old file or the new
//! one, never a mix.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::checksum::checksum;

/// Version of the line format written. 2 has the framing of 1; its entries may take new shapes (the
/// ledger's compact results), so that a build that knows only 1 refuses such a line by its version.
pub const LINE_VERSION: u32 = 2;

/// The oldest line version read.
pub const OLDEST_LINE_VERSION: u32 = 1;

/// Longest line a reader accepts; a longer one is damage (no entry comes near it).
pub const MAX_LINE: usize = 1 << 20;

#[derive(Deserialize)]
struct Sealed<'a> {
    v: u32,
    crc: &'a str,
    #[serde(borrow)]
    entry: &'a serde_json::value::RawValue,
}

/// One line for `entry`, newline included.
pub fn encode<T: Serialize>(entry: &T) -> Vec<u8> {
    let body = serde_json::to_vec(entry).expect("entries serialize to JSON");
    let mut line = Vec::with_capacity(body.len() + 48);
    line.extend_from_slice(
        format!(
            "{{\"v\":{LINE_VERSION},\"crc\":\"{:016x}\",\"entry\":",
            checksum(&body)
        )
        .as_bytes(),
    );
    line.extend_from_slice(&body);
    line.extend_from_slice(b"}\n");
    line
}

/// A line that was read.
#[derive(Debug, Clone, PartialEq)]
pub enum Line<T> {
    /// Its checksum matched.
    Verified(T),
    /// Written before checksums existed: its content cannot be verified.
    Legacy(T),
}

/// A complete line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Its line number (from 1).
    pub line: u64,
    /// Its byte offset.
    pub offset: u64,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} (byte {}): {}",
            self.line, self.offset, self.reason
        )
    }
}

/// What reading a whole file found besides its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Damaged lines, in order: the first [`MAX_DAMAGE_KEPT`].
    pub damaged: Vec<Damage>,
    /// Damaged lines in all.
    pub damaged_lines: u64,
    /// The offset of a torn last line, if any.
    pub torn: Option<u64>,
    /// Lines of the legacy format.
    pub legacy: u64,
    /// Lines read in all (the torn one aside).
    pub lines: u64,
    /// Of the damaged lines, those whose checksum holds but whose entry this build cannot read: another
    /// (newer) build's kind of entry ([`scan`] counts them; [`scan_with`] leaves 0).
    pub unknown: u64,
}

/// Damaged lines a [`Scan`] keeps (the rest are counted only): a hostile file of damaged lines must not
/// take memory without bound.
pub const MAX_DAMAGE_KEPT: u64 = 1000;

/// Longest reason kept for a damaged line, in bytes (a reason may quote the line).
pub const MAX_REASON: usize = 256;

impl Scan {
    /// Notes a damaged line: kept among the first [`MAX_DAMAGE_KEPT`] (its reason cut to [`MAX_REASON`]
    /// bytes), counted always.
    pub fn damage(&mut self, mut d: Damage) {
        self.damaged_lines += 1;
        if (self.damaged.len() as u64) < MAX_DAMAGE_KEPT {
            if d.reason.len() > MAX_REASON {
                let mut end = MAX_REASON - 3;
                while !d.reason.is_char_boundary(end) {
                    end -= 1;
                }
                d.reason.truncate(end);
                d.reason.push_str("...");
            }
            self.damaged.push(d);
        }
    }
}

/// Decodes one complete line (without its newline).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<Line<T>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    match serde_json::from_str::<Sealed>(text) {
        Ok(sealed) => {
            if !(OLDEST_LINE_VERSION..=LINE_VERSION).contains(&sealed.v) {
                return Err(format!(
                    "line format {} is not known to this build",
                    sealed.v
                ));
            }
            let body = sealed.entry.get();
            let want = format!("{:016x}", checksum(body.as_bytes()));
            if sealed.crc != want {
                return Err(format!(
                    "checksum mismatch (line says {}, content gives {want})",
                    sealed.crc.chars().take(16).collect::<String>()
                ));
            }
            serde_json::from_str(body)
                .map(Line::Verified)
                .map_err(|e| format!("checksummed but undecodable: {e}"))
        }
        Err(sealed_error) => match serde_json::from_str::<T>(text) {
            Ok(entry) if !text.contains("\"crc\"") => Ok(Line::Legacy(entry)),
            _ => Err(format!("undecodable: {sealed_error}")),
        },
    }
}

/// Whether `bytes` is a checksummed line whose checksum holds but whose entry is not a `T`: another
/// (newer) build's kind of entry. (The version number is outside the checksum: a line whose entry is a
/// `T` under an unknown version may be one whose version digit was damaged, and stays damage.)
pub fn foreign<T: DeserializeOwned>(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| serde_json::from_str::<Sealed>(text).ok())
        .is_some_and(|sealed| {
            let body = sealed.entry.get();
            sealed.crc == format!("{:016x}", checksum(body.as_bytes()))
                && serde_json::from_str::<T>(body).is_err()
        })
}

/// Skips the rest of a line, through its newline (or to the end of the file), a buffer at a time: an
/// endless line (a zeroed region has no newline) costs no memory. Returns the bytes skipped.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(skipped);
        }
        let (used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        reader.consume(used);
        skipped += used as u64;
        if done {
            return Ok(skipped);
        }
    }
}

/// Reads every line of `reader`, handing each entry to `each` with its line number.
pub fn scan<T: DeserializeOwned>(
    reader: impl Read,
    each: impl FnMut(u64, Line<T>),
) -> std::io::Result<Scan> {
    let mut unknown = 0;
    let mut scan = scan_with(
        reader,
        |bytes| {
            decode(bytes).map(Some).inspect_err(|_| {
                unknown += u64::from(foreign::<T>(bytes));
            })
        },
        each,
    )?;
    scan.unknown = unknown;
    Ok(scan)
}

/// [`scan`] with a decoder of its own for each complete line (without its newline): a file whose
/// lines are not all of this module's form (the ledger's packed results). The decoder may take a line
/// without giving an entry (`Ok(None)`: a line that only defines something later lines use); its
/// errors are damage, as those of [`decode`].
pub fn scan_with<T>(
    reader: impl Read,
    mut decode: impl FnMut(&[u8]) -> Result<Option<Line<T>>, String>,
    mut each: impl FnMut(u64, Line<T>),
) -> std::io::Result<Scan> {
    let mut reader = BufReader::new(reader);
    let mut scan = Scan::default();
    let mut buf = Vec::new();
    let mut offset = 0u64;
    loop {
        buf.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if read == 0 {
            return Ok(scan);
        }
        if buf.last() != Some(&b'\n') {
            if read > MAX_LINE {
                // An endless line: damage, and the rest of the file is read after its next newline.
                scan.lines += 1;
                let line = scan.lines;
                scan.damage(Damage {
                    line,
                    offset,
                    reason: format!("longer than {MAX_LINE} bytes"),
                });
                let more = skip_line(&mut reader)?;
                offset += read as u64 + more;
                continue;
            }
            scan.torn = Some(offset);
            return Ok(scan);
        }
        scan.lines += 1;
        match decode(&buf[..buf.len() - 1]) {
            Ok(Some(line)) => {
                if matches!(line, Line::Legacy(_)) {
                    scan.legacy += 1;
                }
                each(scan.lines, line);
            }
            Ok(None) => {}
            Err(reason) => {
                let line = scan.lines;
                scan.damage(Damage {
                    line,
                    offset,
                    reason,
                })
            }
        }
        offset += read as u64;
    }
}

/// Where appended bytes go: a file, or in tests a writer that fails on purpose.
pub trait Sink: Write + Send {
    /// Makes what was written durable.
    fn sync(&mut self) -> std::io::Result<()>;
    /// Cuts the sink back to `len` bytes.
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
}

impl Sink for File {
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)
    }
}

/// An append-only file that never keeps a partial append: a write or fsync that fails is cut back off
/// (now, or before the next append if cutting fails too).
pub struct Appender {
    sink: Box<dyn Sink>,
    /// The length of the file's acknowledged content.
    len: u64,
    /// A failed append may have left bytes past `len`.
    dirty: bool,
}

impl Appender {
    /// Opens `path` for appending (creating it); `len` is the length of its good content, which the
    /// file is cut back to first (a torn last line goes).
    pub fn open(path: &Path, len: u64) -> std::io::Result<Appender> {
        let new = !path.exists();
        let file = OpenOptions::new().append(true).create(true).open(path)?;
        if new {
            // A new file's name is durable once its directory is synced: the appends' fsyncs cover
            // its content only.
            file.sync_all()?;
            sync_dir(path)?;
        }
        let mut appender = Appender::new(Box::new(file), len);
        appender.dirty = true;
        appender.repair()?;
        Ok(appender)
    }

    /// An appender over any sink whose good content is `len` bytes long.
    pub fn new(sink: Box<dyn Sink>, len: u64) -> Appender {
        Appender {
            sink,
            len,
            dirty: false,
        }
    }

    fn repair(&mut self) -> std::io::Result<()> {
        if self.dirty {
            self.sink.truncate(self.len)?;
            self.sink.sync()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Appends `bytes` (whole lines) and makes them durable; on failure nothing of them stays.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.repair()?;
        if bytes.is_empty() {
            return Ok(());
        }
        let written = self
            .sink
            .write_all(bytes)
            .and_then(|()| self.sink.flush())
            .and_then(|()| self.sink.sync());
        match written {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.dirty = true;
                // Best effort now; if it fails, the next append cuts first.
                let _ = self.repair();
                Err(e)
            }
        }
    }
}

/// Replaces the file at `path` with `bytes` atomically: written to a temporary file beside it, fsynced,
/// renamed over it, and the directory fsynced.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = sibling(path, "rewrite");
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_dir(path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Fsyncs the directory holding `path` (so that a rename or a new file in it is durable).
pub fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => File::open(dir)?.sync_all(),
        None => File::open(".")?.sync_all(),
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct E {
        a: u64,
    }

    fn read_all(bytes: &[u8]) -> (Vec<(u64, Line<E>)>, Scan) {
        let mut got = Vec::new();
        let scan = scan(bytes, |n, l| got.push((n, l))).unwrap();
        (got, scan)
    }

    #[test]
    fn lines_are_verified_legacy_damaged_or_torn_and_each_is_named() {
        let mut file = Vec::new();
        file.extend(encode(&E { a: 1 }));
        file.extend(b"{\"a\":2}\n");
        let mut flipped = encode(&E { a: 2_279_184 });
        let at = flipped.windows(3).position(|w| w == b"279").unwrap();
        flipped[at + 1] = b'8';
        file.extend(&flipped);
        file.extend(b"\xff\xfe garbage\n");
        file.extend(encode(&E { a: 4 }));
        file.extend(&encode(&E { a: 5 })[..10]);
        let (got, scan) = read_all(&file);
        assert_eq!(
            got,
            vec![
                (1, Line::Verified(E { a: 1 })),
                (2, Line::Legacy(E { a: 2 })),
                (5, Line::Verified(E { a: 4 })),
            ]
        );
        assert_eq!(scan.damaged.len(), 2);
        assert_eq!(scan.damaged[0].line, 3);
        assert!(
            scan.damaged[0].reason.contains("checksum mismatch"),
            "{}",
            scan.damaged[0]
        );
        assert_eq!(scan.damaged[1].line, 4);
        assert_eq!(scan.legacy, 1);
        assert_eq!(scan.torn, Some((file.len() - 10) as u64));
    }

    /// A file of damaged lines keeps the first [`MAX_DAMAGE_KEPT`] and counts the rest: memory stays
    /// bounded however many there are (found by a review, 2026-11-24, a later session: every one was
    /// kept, about 100 bytes a line, so a hostile file of newlines or garbage took gigabytes).
    #[test]
    fn damaged_lines_are_counted_past_the_ones_kept() {
        let lines = MAX_DAMAGE_KEPT as usize + 500;
        let file = b"garbage\n".repeat(lines);
        let (got, scan) = read_all(&file);
        assert!(got.is_empty());
        assert_eq!(scan.damaged.len(), MAX_DAMAGE_KEPT as usize);
        assert_eq!(scan.damaged_lines, lines as u64);
        assert_eq!(scan.damaged[0].line, 1);
        // Each reason is kept short, whatever the line quotes.
        let long = format!("{{\"v\":1,\"{}\":1}}\n", "x".repeat(100_000));
        let (_, scan) = read_all(long.as_bytes());
        assert_eq!(scan.damaged_lines, 1);
        assert!(
            scan.damaged[0].reason.len() <= MAX_REASON,
            "{}",
            scan.damaged[0].reason.len()
        );
    }

    #[test]
    fn a_line_with_a_checksum_is_never_read_as_legacy() {
        // A damaged sealed line whose remains happen to parse as an entry must not slip in as legacy.
        assert!(decode::<E>(br#"{"a":7,"crc":"0000000000000000"}"#).is_err());
    }

    /// Accepts `room` bytes, then fails like a full disk, keeping what it took.
    struct Full {
        data: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut data = self.data.lock().unwrap();
            let n = buf.len().min(self.room.saturating_sub(data.len()));
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "No space left on device",
                ));
            }
            data.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink for Full {
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.data.lock().unwrap().truncate(len as usize);
            Ok(())
        }
    }

    #[test]
    fn a_failed_append_leaves_no_partial_line_and_the_next_one_is_whole() {
        let data = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let first = encode(&E { a: 1 });
        let room = first.len() + 7;
        let sink = Full {
            data: data.clone(),
            room,
        };
        let mut appender = Appender::new(Box::new(sink), 0);
        appender.append(&first).unwrap();
        let second = encode(&E { a: 2 });
        assert!(appender.append(&second).is_err(), "the disk is full");
        assert_eq!(*data.lock().unwrap(), first, "the partial line was cut off");
        // Space returns (a smaller line fits): the next append starts on a clean line.
        let third = encode(&E { a: 3 });
        let mut appender = Appender::new(
            Box::new(Full {
                data: data.clone(),
                room: 1 << 20,
            }),
            appender.len,
        );
        appender.append(&third).unwrap();
        let (got, scan) = read_all(&data.lock().unwrap());
        assert_eq!(
            got,
            vec![
                (1, Line::Verified(E { a: 1 })),
                (2, Line::Verified(E { a: 3 }))
            ]
        );
        assert!(scan.damaged.is_empty() && scan.torn.is_none());
    }

    #[test]
    fn replace_swaps_the_whole_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        std::fs::write(&path, b"old\n").unwrap();
        replace(&path, &encode(&E { a: 9 })).unwrap();
        let (got, _) = read_all(&std::fs::read(&path).unwrap());
        assert_eq!(got, vec![(1, Line::Verified(E { a: 9 }))]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

#[cfg(test)]
mod endless {
    use super::*;

    /// `len` bytes of `fill` without a newline, then `rest`: produced as read, never held whole.
    struct Endless {
        left: u64,
        rest: std::io::Cursor<Vec<u8>>,
    }

    impl Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return self.rest.read(out);
            }
            let n = out.len().min(self.left as usize);
            out[..n].fill(0);
            self.left -= n as u64;
            Ok(n)
        }
    }

    /// A zeroed region with no newline (as a crash can leave in a file) is one damaged line, skipped a
    /// buffer at a time; the lines after it are read, at their offsets. Also to the end of the file.
    #[test]
    fn an_endless_line_is_damage_and_the_next_line_is_read() {
        #[derive(Debug, Serialize, Deserialize)]
        struct E {
            a: u64,
        }
        let long = 3 * MAX_LINE as u64 + 5;
        let mut rest = b"\n".to_vec();
        rest.extend(encode(&E { a: 7 }));
        let mut got = Vec::new();
        let reader = Endless {
            left: long,
            rest: std::io::Cursor::new(rest),
        };
        let found = scan(reader, |n, l: Line<E>| got.push((n, l))).unwrap();
        assert_eq!(found.damaged.len(), 1);
        assert_eq!((found.damaged[0].line, found.damaged[0].offset), (1, 0));
        assert!(
            matches!(got[..], [(2, Line::Verified(E { a: 7 }))]),
            "{got:?}"
        );
        assert_eq!(found.lines, 2);
        let reader = Endless {
            left: long,
            rest: std::io::Cursor::new(Vec::new()),
        };
        let found = scan(reader, |_, _: Line<E>| panic!("no entry")).unwrap();
        assert_eq!(found.damaged.len(), 1);
    }
}

/// Tests written for the mutants `cargo mutants` left alive in this file (issue 42).
#[cfg(test)]
mod mutants_found {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct E {
        a: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Other {
        b: String,
    }

    /// Offsets count every byte before a line: after a good line, an over-long line, a damaged line and
    /// a torn tail, each damage and the tail are named at their true offsets (the torn-tail offset
    /// decides how much of a ledger is kept).
    #[test]
    fn offsets_after_an_over_long_line_are_exact() {
        let good = encode(&E { a: 1 });
        let mut file = good.clone();
        let long_at = file.len() as u64;
        file.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        file.push(b'\n');
        let garbage_at = file.len() as u64;
        file.extend(b"garbage\n");
        let after_at = file.len() as u64;
        file.extend(encode(&E { a: 2 }));
        let torn_at = file.len() as u64;
        file.extend(&encode(&E { a: 3 })[..5]);
        let mut got = Vec::new();
        let found = scan(&file[..], |n, l: Line<E>| got.push((n, l))).unwrap();
        let at: Vec<(u64, u64)> = found.damaged.iter().map(|d| (d.line, d.offset)).collect();
        assert_eq!(at, [(2, long_at), (3, garbage_at)]);
        assert_eq!(
            got,
            [
                (1, Line::Verified(E { a: 1 })),
                (4, Line::Verified(E { a: 2 }))
            ]
        );
        assert_eq!(found.torn, Some(torn_at));
        assert_eq!((found.lines, found.damaged_lines), (4, 2));
        assert!(after_at < torn_at);
    }

    /// A line of exactly the longest length is read; one byte more is damage.
    #[test]
    fn the_longest_line_is_read_and_one_byte_more_is_damage() {
        // A legacy line (no seal) of exactly MAX_LINE bytes before its newline.
        let mut line = b"{\"a\":5".to_vec();
        line.extend(std::iter::repeat_n(b' ', MAX_LINE - line.len() - 1));
        line.push(b'}');
        assert_eq!(line.len(), MAX_LINE);
        let mut file = line.clone();
        file.push(b'\n');
        let mut got = Vec::new();
        let found = scan(&file[..], |_, l: Line<E>| got.push(l)).unwrap();
        assert_eq!(got, [Line::Legacy(E { a: 5 })]);
        assert!(found.damaged.is_empty());
        let mut longer = line;
        longer.insert(1, b' ');
        longer.push(b'\n');
        let found = scan(&longer[..], |_, _: Line<E>| panic!("no entry")).unwrap();
        assert_eq!(found.damaged_lines, 1);
        assert_eq!(found.torn, None);
    }

    /// A checksummed line of another build's kind of entry is counted as unknown; a line whose checksum
    /// fails is damage only; `scan_with` counts none.
    #[test]
    fn lines_of_another_kind_are_unknown_and_damage_is_not() {
        let mut file = encode(&Other { b: "newer".into() });
        let mut flipped = encode(&E { a: 12345 });
        let at = flipped.windows(3).position(|w| w == b"234").unwrap();
        flipped[at] = b'9';
        file.extend(&flipped);
        file.extend(encode(&E { a: 6 }));
        let mut got = Vec::new();
        let found = scan(&file[..], |_, l: Line<E>| got.push(l)).unwrap();
        assert_eq!(got, [Line::Verified(E { a: 6 })]);
        assert_eq!((found.damaged_lines, found.unknown), (2, 1));
        let found = scan_with(&file[..], |b| decode::<E>(b).map(Some), |_, _: Line<E>| {}).unwrap();
        assert_eq!((found.damaged_lines, found.unknown), (2, 0));
        assert!(foreign::<E>(&encode(&Other { b: "x".into() })[..]));
        assert!(!foreign::<E>(&encode(&E { a: 1 })[..]));
        assert!(!foreign::<E>(&flipped[..flipped.len() - 1]));
    }

    /// A damage reason is cut to [`MAX_REASON`] bytes at a character boundary, ending in `...`; only the
    /// first [`MAX_DAMAGE_KEPT`] are kept, all are counted.
    #[test]
    fn damage_reasons_are_cut_to_size_and_only_so_many_kept() {
        let mut scan = Scan::default();
        // Multi-byte characters across the cut.
        scan.damage(Damage {
            line: 1,
            offset: 0,
            reason: "é".repeat(MAX_REASON),
        });
        let r = &scan.damaged[0].reason;
        assert!(
            r.len() <= MAX_REASON && r.len() >= MAX_REASON - 4,
            "{}",
            r.len()
        );
        assert!(r.ends_with("...") && r.starts_with("éé"), "{r}");
        scan.damage(Damage {
            line: 2,
            offset: 9,
            reason: "x".repeat(MAX_REASON),
        });
        assert_eq!(
            scan.damaged[1].reason,
            "x".repeat(MAX_REASON),
            "a reason of the limit is kept whole"
        );
        for i in 0..MAX_DAMAGE_KEPT + 5 {
            scan.damage(Damage {
                line: 3 + i,
                offset: 0,
                reason: "short".into(),
            });
        }
        assert_eq!(scan.damaged.len() as u64, MAX_DAMAGE_KEPT);
        assert_eq!(scan.damaged_lines, MAX_DAMAGE_KEPT + 7);
    }

    /// A damage names its line, byte and reason.
    #[test]
    fn a_damage_reads_as_line_byte_and_reason() {
        let d = Damage {
            line: 7,
            offset: 1234,
            reason: "undecodable".into(),
        };
        assert_eq!(d.to_string(), "line 7 (byte 1234): undecodable");
    }

    /// A last line of exactly the longest length without its newline is a torn tail (kept for the next
    /// append to cut), not damage.
    #[test]
    fn a_torn_tail_of_the_longest_length_is_torn_not_damage() {
        let mut file = encode(&E { a: 1 });
        let at = file.len() as u64;
        file.extend(std::iter::repeat_n(b'y', MAX_LINE));
        let found = scan(&file[..], |_, _: Line<E>| {}).unwrap();
        assert_eq!(found.torn, Some(at));
        assert_eq!(found.damaged_lines, 0);
    }

    /// A decoder given to `scan_with` sees each line without its newline.
    #[test]
    fn a_decoder_sees_lines_without_their_newline() {
        let mut file = encode(&E { a: 1 });
        file.extend(b"raw\n");
        let mut seen = Vec::new();
        scan_with(
            &file[..],
            |b| {
                seen.push(b.to_vec());
                Ok(None::<Line<E>>)
            },
            |_, _| {},
        )
        .unwrap();
        assert_eq!(seen.len(), 2);
        assert!(seen.iter().all(|b| !b.ends_with(b"\n")), "{seen:?}");
        assert_eq!(seen[1], b"raw");
    }

    /// The directory of a bare file name is the current one: syncing it works.
    #[test]
    fn a_bare_file_names_directory_is_the_current_one() {
        sync_dir(Path::new("a-bare-name")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        sync_dir(&dir.path().join("f")).unwrap();
        assert!(sync_dir(&dir.path().join("missing").join("f")).is_err());
    }

    /// A real file's `truncate` cuts it (the appender relies on it to take back a failed append).
    #[test]
    fn a_files_truncate_cuts_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = File::create(dir.path().join("f")).unwrap();
        f.write_all(b"0123456789").unwrap();
        Sink::truncate(&mut f, 4).unwrap();
        Sink::sync(&mut f).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"0123");
    }
}
