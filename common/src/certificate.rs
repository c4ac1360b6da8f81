//! The certificate of a finished run: one file that commits to every job's counts, and its check.
//!
//! Line 1 is a JSON header (the plan, the totals, the identities, the Merkle root). Then one text line
//! per job, in the plan's order: `KEY TOTAL UNIQUE8 NODES BY FAMILIES`, with `-` for a strategy without
//! unique counts, `BY` the comma-separated indices into the header's `identities` of the workers that
//! computed the job (first the one whose result was kept, then those that confirmed it), and
//! `FAMILIES` the kernel family each of them stated, in the same order (`cpu-stack`, `cpu-lists`,
//! `gpu`, or `-` where none was stated; versions 1 and 2 have no such field). The lines'
//! root `L` is RFC 6962's Merkle tree hash with SHA-256 over the job lines' bytes (without the newline);
//! the certificate's root binds the header to it, as one more RFC 6962 node:
//! `SHA-256(0x01 ‖ SHA-256(0x00 ‖ H) ‖ L)`, with `H` the header's canonical text ([`header_text`]: the
//! plan, the totals, the record flag and the identities, one per line). Anyone can recompute both with
//! `sha256sum`-grade tools. The hash comes from `ring`, already in the build for TLS. Version 1 (the
//! first) had the lines' root alone as its root; version 2 had no `FAMILIES`; both are still read.

use std::io::BufRead;

use ring::digest::{Context, SHA256};
use serde::{Deserialize, Serialize};

use crate::family::Family;
use crate::job::{JobKey, JobResult};
use crate::partition::{KeyHash, Plan, Strategy, STEPS_PER_LISTED_JOB};
use crate::tally::Tally;

/// The `format` field of every certificate.
pub const FORMAT: &str = "nqueens-certificate";
/// The version this build writes (it reads this one, [`VERSION_NO_FAMILIES`] and
/// [`VERSION_LINES_ONLY`]).
pub const VERSION: u32 = 3;
/// The version before kernel families: job lines of five fields.
pub const VERSION_NO_FAMILIES: u32 = 2;
/// The first version: its root is the job lines' root alone (the header's identities and record flag
/// outside it).
pub const VERSION_LINES_ONLY: u32 = 1;
/// The Merkle tree: RFC 6962 with SHA-256.
pub const HASH: &str = "rfc6962-sha256";
/// The longest header line read (a run's identities are in it).
pub const MAX_HEADER: u64 = 16 << 20;
/// The longest job line read.
pub const MAX_LINE: u64 = 4096;
/// The most jobs a sample recomputes.
pub const MAX_SAMPLE: u64 = 1 << 20;

/// What a certificate says of its run, line 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The coordinator's run id.
    pub run: u64,
    pub n: u8,
    pub strategy: Strategy,
    pub depth: u8,
    /// The plan fingerprint (16 hex digits) and its number of jobs.
    pub fingerprint: String,
    pub jobs: u64,
    /// The run's totals (decimal: they may pass 64 bits).
    pub total: String,
    pub unique: Option<String>,
    pub nodes: String,
    /// Every worker identity the job lines name.
    pub identities: Vec<String>,
    /// The tree of `root`: [`HASH`].
    pub hash: String,
    /// The Merkle root over the job lines, 64 hex digits.
    pub root: String,
    /// When the run finished and when the certificate was written, seconds since the Unix epoch.
    pub finished_unix: Option<u64>,
    pub written_unix: u64,
    /// A record run: every job line names at least two identities, which agreed.
    #[serde(default)]
    pub record: bool,
    /// The jobs whose line names two kernel families (version 3; 0 before).
    #[serde(default)]
    pub two_families: u64,
}

/// Why a certificate is refused.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading the certificate: {0}")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {what}")]
    Line { line: u64, what: String },
    #[error("{0}")]
    Wrong(String),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 6962's Merkle tree hash, computed as leaves arrive: memory O(log leaves).
#[derive(Debug, Default)]
pub struct Merkle {
    /// Complete subtrees, largest first, each `(height, hash)`: a subtree of height h holds 2^h leaves.
    stack: Vec<(u32, [u8; 32])>,
    leaves: u64,
}

fn node(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut c = Context::new(&SHA256);
    c.update(&[1]);
    c.update(left);
    c.update(right);
    c.finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 has 32 bytes")
}

/// RFC 6962's hash of one leaf.
pub fn leaf(data: &[u8]) -> [u8; 32] {
    let mut c = Context::new(&SHA256);
    c.update(&[0]);
    c.update(data);
    c.finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 has 32 bytes")
}

impl Merkle {
    /// Adds the next leaf's data.
    pub fn push(&mut self, data: &[u8]) {
        let mut top = (0u32, leaf(data));
        while let Some(&(height, hash)) = self.stack.last() {
            if height != top.0 {
                break;
            }
            self.stack.pop();
            top = (height + 1, node(&hash, &top.1));
        }
        self.stack.push(top);
        self.leaves += 1;
    }

    /// Leaves pushed.
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// The root, as 64 hex digits (SHA-256 of nothing for no leaf).
    pub fn root(&self) -> String {
        hex(&self.root_bytes())
    }

    /// The root's bytes.
    pub fn root_bytes(&self) -> [u8; 32] {
        let mut subtrees = self.stack.iter().rev();
        let Some(&(_, mut acc)) = subtrees.next() else {
            return ring::digest::digest(&SHA256, b"")
                .as_ref()
                .try_into()
                .expect("SHA-256 has 32 bytes");
        };
        for (_, hash) in subtrees {
            acc = node(hash, &acc);
        }
        acc
    }
}

/// The header's canonical text, which the root of a version 2 or 3 certificate commits to: `KEY VALUE`
/// lines for the format, version, run, n, strategy, depth, fingerprint, jobs, total, unique (`-`
/// without), nodes, record (`0` or `1`) and, from version 3, two_families, then one `identity NAME`
/// line per identity in order, each line ended by a newline. The times and the root itself are outside it.
pub fn header_text(h: &Header) -> String {
    let mut text = String::new();
    let mut line = |key: &str, value: &dyn std::fmt::Display| {
        text.push_str(&format!("{key} {value}\n"));
    };
    line("format", &h.format);
    line("version", &h.version);
    line("run", &h.run);
    line("n", &h.n);
    line("strategy", &h.strategy);
    line("depth", &h.depth);
    line("fingerprint", &h.fingerprint);
    line("jobs", &h.jobs);
    line("total", &h.total);
    line("unique", &h.unique.as_deref().unwrap_or("-"));
    line("nodes", &h.nodes);
    line("record", &u8::from(h.record));
    if h.version >= VERSION {
        line("two_families", &h.two_families);
    }
    for name in &h.identities {
        line("identity", name);
    }
    text
}

/// The root of a certificate with header `h` whose job lines' root is `lines`: the lines' root alone
/// for version 1, bound to [`header_text`] for version 2.
pub fn bound_root(h: &Header, lines: &[u8; 32]) -> String {
    if h.version == VERSION_LINES_ONLY {
        return hex(lines);
    }
    hex(&node(&leaf(header_text(h).as_bytes()), lines))
}

/// A job's line: `KEY TOTAL UNIQUE8 NODES BY`, then ` FAMILIES` where `families` are given (one per
/// identity of `by`: version 3).
pub fn job_line(
    key: &JobKey,
    r: &JobResult,
    by: &[u32],
    families: Option<&[Option<Family>]>,
) -> String {
    let unique = r.unique8.map_or_else(|| "-".to_string(), |u| u.to_string());
    let by: Vec<String> = by.iter().map(u32::to_string).collect();
    let mut line = format!("{key} {} {unique} {} {}", r.total, r.nodes, by.join(","));
    if let Some(families) = families {
        let names: Vec<&str> = families
            .iter()
            .map(|f| f.map_or("-", Family::name))
            .collect();
        line.push(' ');
        line.push_str(&names.join(","));
    }
    line
}

/// One job line read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLine {
    pub key: JobKey,
    pub result: JobResult,
    pub by: Vec<u32>,
    /// The kernel family of each identity of `by`, in order (version 3; `None` for versions 1 and 2).
    pub families: Option<Vec<Option<Family>>>,
}

impl JobLine {
    /// Its text, in the one form this format writes.
    pub fn text(&self) -> String {
        job_line(&self.key, &self.result, &self.by, self.families.as_deref())
    }

    /// Whether two different kernel families computed it.
    pub fn two_families(&self) -> bool {
        self.families
            .as_deref()
            .is_some_and(|f| Family::distinct(f) >= 2)
    }
}

/// Parses a job line (`identities` names in the header) of a certificate of `version`.
pub fn parse_job_line(line: &str, identities: usize, version: u32) -> Result<JobLine, String> {
    let fields: Vec<&str> = line.split(' ').collect();
    let want = if version >= VERSION { 6 } else { 5 };
    if fields.len() != want {
        return Err(format!(
            "{} fields where a job line has {want}",
            fields.len()
        ));
    }
    let [key, total, unique, nodes, by] = fields[..5] else {
        unreachable!("five fields checked")
    };
    let key: JobKey = key.parse().map_err(|e| format!("job key {key:?}: {e}"))?;
    let number = |what: &str, s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("{what} {s:?} is not a number"))
    };
    let unique8 = match unique {
        "-" => None,
        u => Some(number("unique8", u)?),
    };
    let mut ids = Vec::new();
    for b in by.split(',') {
        let i: u32 = b
            .parse()
            .map_err(|_| format!("identity {b:?} is not a number"))?;
        if i as usize >= identities {
            return Err(format!("identity {i}, where the header names {identities}"));
        }
        if ids.contains(&i) {
            return Err(format!("identity {i} twice"));
        }
        ids.push(i);
    }
    let families = match fields.get(5) {
        None => None,
        Some(names) => {
            let families = names
                .split(',')
                .map(|name| match name {
                    "-" => Ok(None),
                    name => Family::parse(name)
                        .map(Some)
                        .ok_or_else(|| format!("kernel family {name:?} is not known")),
                })
                .collect::<Result<Vec<_>, String>>()?;
            if families.len() != ids.len() {
                return Err(format!(
                    "{} kernel families for {} identities",
                    families.len(),
                    ids.len()
                ));
            }
            Some(families)
        }
    };
    Ok(JobLine {
        key,
        result: JobResult {
            total: number("total", total)?,
            unique8,
            nodes: number("nodes", nodes)?,
        },
        by: ids,
        families,
    })
}

/// Reads one line of at most `max` bytes (without its newline); `None` at the end.
fn read_line(r: &mut impl BufRead, max: u64, line: u64) -> Result<Option<String>, CertError> {
    let mut buf = Vec::new();
    let got = std::io::Read::take(&mut *r, max + 1).read_until(b'\n', &mut buf)?;
    if got == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if got as u64 > max {
        return Err(CertError::Line {
            line,
            what: format!("longer than {max} bytes"),
        });
    } else {
        return Err(CertError::Line {
            line,
            what: "the file ends inside this line (no newline): it is cut short".into(),
        });
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| CertError::Line {
            line,
            what: "not UTF-8".into(),
        })
}

/// The indices of the `k` jobs (of `jobs`) a sample drawn from `material` checks, in increasing order:
/// all of them when `k >= jobs`. The same material gives the same sample on every machine.
pub fn sample(material: &[u8], jobs: u64, k: u64) -> Vec<u64> {
    if k >= jobs {
        return (0..jobs).collect();
    }
    let mut picked = std::collections::BTreeSet::new();
    let mut counter = 0u64;
    while (picked.len() as u64) < k {
        let mut c = Context::new(&SHA256);
        c.update(b"nqueens spot-check sample\0");
        c.update(material);
        c.update(&counter.to_le_bytes());
        let d = c.finish();
        let x = u64::from_le_bytes(d.as_ref()[..8].try_into().expect("8 bytes"));
        // The bias of `%` is below jobs / 2^64: nothing at 2^25 jobs.
        picked.insert(x % jobs);
        counter += 1;
    }
    picked.into_iter().collect()
}

/// The material of a sample a reader draws with their own seed from the certificate of root `root`
/// (its 32 bytes): SHA-256 of "seed S" and the root. Bound to the file, so that one seed draws another
/// sample from every file. That alone does not stop a writer who guesses the seed (a small number, a
/// date): it can try roots (two hashes a try) until the sample misses its lies. Only a seed it cannot
/// guess does ([`seed_looks_random`]).
pub fn seed_material(seed: &str, root: &[u8]) -> Vec<u8> {
    let mut c = Context::new(&SHA256);
    c.update(format!("seed {seed}").as_bytes());
    c.update(root);
    c.finish().as_ref().to_vec()
}

/// Whether `seed` has the form of a seed drawn at random: 32 hex digits or more (128 bits, as
/// [`fresh_seed`] draws). A shorter seed, or one of other characters (a word, a date), may have been
/// guessed by a certificate's writer, who could then have tried roots until its sample missed a wrong
/// job: a sample drawn from it bounds faults, not the writer.
pub fn seed_looks_random(seed: &str) -> bool {
    seed.len() >= 32 && seed.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `text` with every control character escaped (`\u{1b}`, `\n`): what a refusal may quote from a
/// hostile file, so that terminal escapes in it cannot paint over the refusal.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A seed nobody could have guessed: 128 bits from the operating system's generator, in hex (what
/// `spot-check` draws from unless told otherwise, and prints so that the check can be repeated).
pub fn fresh_seed() -> Result<String, CertError> {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| CertError::Wrong("the system's random generator failed".into()))?;
    Ok(hex(&bytes))
}

/// The shortest job line any version writes (`K T U N B` and a newline: a one-character key, one digit
/// for each number, one identity), so that a file of `bytes` bytes holds at most `bytes / 10` jobs.
pub const MIN_JOB_LINE: u64 = 10;

/// The root's bytes, the material of a sample drawn from it.
pub fn root_material(root: &str) -> Result<Vec<u8>, CertError> {
    if root.len() != 64
        || !root
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err(CertError::Wrong(format!(
            "the header's root {root:?} is not 64 lowercase hex digits"
        )));
    }
    Ok((0..32)
        .map(|i| u8::from_str_radix(&root[2 * i..2 * i + 2], 16).expect("hex checked"))
        .collect())
}

/// The largest share of wrong jobs that a clean sample of `k` jobs drawn at random leaves plausible at
/// 95 %: the `p` with `(1 - p)^k = 0.05` (draws with replacement: an upper bound for a sample without).
pub fn wrong_share_bound(k: u64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    1.0 - 0.05f64.powf(1.0 / k as f64)
}

/// Builds a certificate's job lines, in the plan's order, and what its header says of them.
#[derive(Debug)]
pub struct Builder {
    merkle: Merkle,
    tally: Tally,
    identities: Vec<String>,
    index: std::collections::HashMap<String, u32>,
    two_families: u64,
}

impl Builder {
    /// For a run of `strategy`.
    pub fn new(strategy: Strategy) -> Builder {
        Builder {
            merkle: Merkle::default(),
            tally: Tally::new(strategy == Strategy::D4),
            identities: Vec::new(),
            index: Default::default(),
            two_families: 0,
        }
    }

    /// The line of the next job, computed by the identities `by` (the kept result's first), each with
    /// the kernel family it stated. An identity named twice is written once (with its first family).
    pub fn line<'a>(
        &mut self,
        key: &JobKey,
        r: &JobResult,
        by: impl IntoIterator<Item = (&'a str, Option<Family>)>,
    ) -> Result<String, CertError> {
        let mut ids = Vec::new();
        let mut families = Vec::new();
        for (name, family) in by {
            let next = self.identities.len() as u32;
            let i = *self.index.entry(name.to_string()).or_insert(next);
            if i == next {
                self.identities.push(name.to_string());
            }
            if !ids.contains(&i) {
                ids.push(i);
                families.push(family);
            }
        }
        self.tally
            .add(r)
            .map_err(|e| CertError::Wrong(format!("job {key}: {e}")))?;
        self.two_families += u64::from(Family::distinct(&families) >= 2);
        let text = job_line(key, r, &ids, Some(&families));
        self.merkle.push(text.as_bytes());
        Ok(text)
    }

    /// The header of the lines given so far, for `plan` (its fingerprint as stored with the run).
    pub fn header(
        self,
        run: u64,
        plan: &Plan,
        fingerprint: String,
        finished_unix: Option<u64>,
        written_unix: u64,
        record: bool,
    ) -> Result<Header, CertError> {
        let mut header = Header {
            format: FORMAT.into(),
            version: VERSION,
            run,
            n: plan.n(),
            strategy: plan.strategy(),
            depth: plan.depth(),
            fingerprint,
            jobs: self.merkle.leaves(),
            total: self.tally.total.to_string(),
            unique: self
                .tally
                .unique()
                .map_err(|e| CertError::Wrong(e.to_string()))?
                .map(|u| u.to_string()),
            nodes: self.tally.nodes.to_string(),
            identities: self.identities,
            hash: HASH.into(),
            root: String::new(),
            finished_unix,
            written_unix,
            record,
            two_families: self.two_families,
        };
        header.root = bound_root(&header, &self.merkle.root_bytes());
        Ok(header)
    }
}

/// A certificate whose file checked out, with the sampled jobs' lines.
#[derive(Debug)]
pub struct Checked {
    pub header: Header,
    /// The jobs to recompute: their index in the plan and their line.
    pub sample: Vec<(u64, JobLine)>,
}

/// How the sample is drawn.
pub enum Draw {
    /// From the certificate's own root: the same sample on every machine, so that anyone can repeat a
    /// published check; but a writer who tried many roots could have chosen it.
    Root,
    /// From a reader's seed and the root ([`seed_material`]).
    Seed(String),
}

/// Checks a certificate on its own: its header, every job line against the plan re-enumerated (same
/// keys, same order, none missing or extra), the plan's job count and fingerprint, the sums against the
/// totals, and the root recomputed; returns it with the lines of `k` jobs drawn as `draw` says.
pub fn check(r: impl BufRead, k: u64, draw: &Draw) -> Result<Checked, CertError> {
    check_within(r, None, k, draw)
}

/// [`check`] of a file of `bytes` bytes, where known: a header claiming more jobs than the file can
/// hold lines for is refused before the plan is enumerated (a file of a few hundred bytes claiming
/// 50,000,000 jobs of a deep plan would otherwise take minutes).
pub fn check_within(
    r: impl BufRead,
    bytes: Option<u64>,
    k: u64,
    draw: &Draw,
) -> Result<Checked, CertError> {
    check_expecting(r, bytes, k, draw, None)
}

/// [`check_within`], the file refused unless its root is `expected` (the root its coordinator
/// published; any case, spaces around it ignored). Compared as soon as the header is read, before the
/// plan is enumerated: a hostile header claiming a deep plan of many jobs, its file padded to the size
/// those lines would take, costs nothing then. (The root the header states is checked against the
/// lines at the end, as always: a file that passes both has the published root.)
pub fn check_expecting(
    mut r: impl BufRead,
    bytes: Option<u64>,
    k: u64,
    draw: &Draw,
    expected: Option<&str>,
) -> Result<Checked, CertError> {
    let text = read_line(&mut r, MAX_HEADER, 1)?
        .ok_or_else(|| CertError::Wrong("the file is empty".into()))?;
    // The parser's message may quote the file (an unknown field's name): control characters escaped.
    let header: Header = serde_json::from_str(&text).map_err(|e| CertError::Line {
        line: 1,
        what: format!("not a certificate header: {}", printable(&e.to_string())),
    })?;
    if let Some(expected) = expected {
        if !header.root.eq_ignore_ascii_case(expected.trim()) {
            return Err(CertError::Wrong(format!(
                "its root {:?} is not the expected root {:?} (an edited file, or another run's)",
                printable(&header.root),
                printable(expected.trim())
            )));
        }
    }
    if header.format != FORMAT {
        return Err(CertError::Wrong(format!(
            "format {:?}, not {FORMAT:?}",
            header.format
        )));
    }
    if !(VERSION_LINES_ONLY..=VERSION).contains(&header.version) {
        return Err(CertError::Wrong(format!(
            "certificate version {}, where this build reads versions {VERSION_LINES_ONLY} to {VERSION}",
            header.version
        )));
    }
    if header.version < VERSION && header.two_families != 0 {
        return Err(CertError::Wrong(format!(
            "a version {} certificate counting jobs of two kernel families: that version names none",
            header.version
        )));
    }
    // Version 1's root left the header out: its record flag could be set by anyone.
    if header.version == VERSION_LINES_ONLY && header.record {
        return Err(CertError::Wrong(
            "a version 1 certificate claiming a record run: its root does not cover the header, so the claim cannot be checked; write it again with this build".into(),
        ));
    }
    if header.hash != HASH {
        return Err(CertError::Wrong(format!(
            "Merkle tree {:?}, where this build knows {HASH:?}",
            header.hash
        )));
    }
    if header.jobs > crate::partition::MAX_JOBS {
        return Err(CertError::Wrong(format!(
            "the header says {} jobs, more than a run may have ({})",
            header.jobs,
            crate::partition::MAX_JOBS
        )));
    }
    let mut names = std::collections::HashSet::new();
    for name in &header.identities {
        if name.is_empty()
            || name.len() > 256
            || name.chars().any(char::is_control)
            || !names.insert(name.as_str())
        {
            return Err(CertError::Wrong(format!(
                "the header's identity {name:?} is empty, over 256 bytes, holds a control character, or is named twice"
            )));
        }
    }
    if let Some(bytes) = bytes {
        let room = bytes.saturating_sub(text.len() as u64 + 1) / MIN_JOB_LINE;
        if header.jobs > room {
            return Err(CertError::Wrong(format!(
                "the header says {} jobs, where the file's {bytes} bytes hold at most {room} job lines",
                header.jobs
            )));
        }
    }
    let root = root_material(&header.root)?;
    let material = match draw {
        Draw::Root => root,
        Draw::Seed(s) => seed_material(s, &root),
    };
    let plan = Plan::with_depth(header.n.into(), header.strategy, header.depth)
        .map_err(|e| CertError::Wrong(format!("the header's plan: {e}")))?;
    // The plan is enumerated as the lines are read, its fingerprint taken key by key and compared at
    // the end: a file padded with lines that are not the plan's is refused at its first such line,
    // not after minutes of enumerating a deep plan its header names (found by a review, 2026-11-30).
    let jobs = header.jobs;
    // Each line pays for the enumeration of its job, before the plan is asked for it.
    let (mut keys, budget) = plan.jobs_paid_per_key();
    let too_deep = || {
        CertError::Wrong(format!(
            "the header's plan: N = {} {} depth {} takes more steps to enumerate than its job lines pay for ({STEPS_PER_LISTED_JOB} a line)",
            header.n, header.strategy, header.depth
        ))
    };
    let mut fingerprint = KeyHash::default();
    let wanted = sample(&material, jobs, k.min(MAX_SAMPLE));
    let mut wanted_iter = wanted.iter().peekable();
    let mut picked = Vec::with_capacity(wanted.len());
    let mut tally = Tally::new(header.strategy == Strategy::D4);
    let mut merkle = Merkle::default();
    let mut groups = crate::job::Groups::default();
    let mut index = 0u64;
    let mut two_families = 0u64;
    // Identities are numbered as the writer meets them, line by line: the next new one is this.
    let mut met = 0u32;
    loop {
        // Line 1 is the header.
        let line = index + 2;
        let Some(text) = read_line(&mut r, MAX_LINE, line)? else {
            break;
        };
        let bad = |what: String| CertError::Line { line, what };
        let job = parse_job_line(&text, header.identities.len(), header.version).map_err(bad)?;
        // One spelling per line (no `+12`, `012` or `3.07`): the root commits to one text.
        if job.text() != text {
            return Err(bad(
                "not in the one form this format writes (no signs, leading zeros or spaces)".into(),
            ));
        }
        budget.grant(STEPS_PER_LISTED_JOB);
        match keys.next() {
            Some(key) if key == job.key => fingerprint.push(&key.0),
            Some(key) => {
                return Err(bad(format!(
                    "job {}, where the plan's job {} is {key}: a line is missing, extra or out of order, or the header's plan (N, strategy, depth) is not the lines'",
                    job.key,
                    index + 1
                )))
            }
            None if budget.exhausted() => return Err(too_deep()),
            None => {
                return Err(bad(format!(
                    "job {} after the plan's last job: a line too many",
                    job.key
                )))
            }
        }
        if let Some(why) = job.result.shape_error(header.strategy) {
            return Err(bad(why));
        }
        // Counts no search of the job can give (the bounds its first rows force): refused before any
        // sample, whether or not the line is drawn.
        crate::Job::with_groups(plan, job.key.clone(), &mut groups)
            .and_then(|j| j.check(&job.result))
            .map_err(|e| bad(format!("counts no search gives: {e}")))?;
        for &i in &job.by {
            match i.cmp(&met) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => met += 1,
                std::cmp::Ordering::Greater => {
                    return Err(bad(format!(
                        "identity {i} named before identity {met}: the header lists identities in the order the lines first name them"
                    )))
                }
            }
        }
        if header.record && job.by.len() < 2 {
            return Err(bad(format!(
                "job {} names one identity, where a record run's every job has two",
                job.key
            )));
        }
        tally.add(&job.result).map_err(|e| bad(e.to_string()))?;
        two_families += u64::from(job.two_families());
        merkle.push(text.as_bytes());
        if wanted_iter.peek() == Some(&&index) {
            wanted_iter.next();
            picked.push((index, job));
        }
        index += 1;
    }
    // The plan's next job, if it has one: lines are missing.
    budget.grant(STEPS_PER_LISTED_JOB);
    let more = keys.next().is_some();
    if budget.exhausted() {
        return Err(too_deep());
    }
    let (enumerated, hash) = fingerprint.finish();
    if more || enumerated != jobs || format!("{hash:016x}") != header.fingerprint {
        let plan_says = match more {
            true => format!("more than {enumerated} jobs"),
            false => format!("{enumerated} jobs, fingerprint {hash:016x}"),
        };
        return Err(CertError::Wrong(format!(
            "the header says {jobs} jobs, fingerprint {:?}, and the file holds {index} job lines; the plan of N = {} {} depth {} has {plan_says}: lines are missing, or the header is not the plan's",
            header.fingerprint, header.n, header.strategy, header.depth
        )));
    }
    if let Some(name) = header.identities.get(met as usize) {
        return Err(CertError::Wrong(format!(
            "the header's identity {name:?} is named by no job line (a certificate lists only the identities that computed its jobs)"
        )));
    }
    let unique = tally
        .unique()
        .map_err(|e| CertError::Wrong(e.to_string()))?
        .map(|u| u.to_string());
    let said = |what: &str, sum: &str, header: &str| {
        CertError::Wrong(format!(
            "the job lines' {what} is {sum}, where the header says {header:?}"
        ))
    };
    if tally.total.to_string() != header.total {
        return Err(said("total", &tally.total.to_string(), &header.total));
    }
    if unique != header.unique {
        let show = |u: &Option<String>| u.clone().unwrap_or_else(|| "none".into());
        return Err(said("unique count", &show(&unique), &show(&header.unique)));
    }
    if tally.nodes.to_string() != header.nodes {
        return Err(said("nodes", &tally.nodes.to_string(), &header.nodes));
    }
    if two_families != header.two_families {
        return Err(said(
            "count of jobs of two kernel families",
            &two_families.to_string(),
            &header.two_families.to_string(),
        ));
    }
    let root = bound_root(&header, &merkle.root_bytes());
    if root != header.root {
        return Err(CertError::Wrong(format!(
            "the root of the header and job lines is {root}, where the header says {} (its Merkle root)",
            header.root
        )));
    }
    Ok(Checked {
        header,
        sample: picked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962's tree for 1 to 7 leaves, computed by its recursive definition, equals the streamed one.
    #[test]
    fn the_streamed_root_is_rfc_6962s() {
        fn mth(d: &[&[u8]]) -> [u8; 32] {
            match d.len() {
                0 => unreachable!(),
                1 => leaf(d[0]),
                n => {
                    let k = 1 << (usize::BITS - 1 - (n - 1).leading_zeros());
                    node(&mth(&d[..k]), &mth(&d[k..]))
                }
            }
        }
        let data: Vec<Vec<u8>> = (0..13u8).map(|i| vec![i; i as usize]).collect();
        for n in 1..=data.len() {
            let d: Vec<&[u8]> = data[..n].iter().map(Vec::as_slice).collect();
            let mut m = Merkle::default();
            for x in &d {
                m.push(x);
            }
            assert_eq!(m.root(), hex(&mth(&d)), "{n} leaves");
            assert_eq!(m.leaves(), n as u64);
        }
        // RFC 6962's empty tree: SHA-256 of nothing.
        assert_eq!(
            Merkle::default().root(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // A known leaf: SHA-256 of the byte 0.
        assert_eq!(
            hex(&leaf(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        // Trees of "a", "b" (and "c") computed apart, with Python's hashlib.
        let mut m = Merkle::default();
        m.push(b"a");
        m.push(b"b");
        assert_eq!(
            m.root(),
            "b137985ff484fb600db93107c77b0365c80d78f5b429ded0fd97361d077999eb"
        );
        m.push(b"c");
        assert_eq!(
            m.root(),
            "36642e73c2540ab121e3a6bf9545b0a24982cd830eb13d3cd19de3ce6c021ec1"
        );
    }

    #[test]
    fn samples_are_the_same_everywhere_distinct_and_in_range() {
        let a = sample(b"root", 1000, 50);
        assert_eq!(a, sample(b"root", 1000, 50));
        assert_ne!(a, sample(b"other", 1000, 50));
        assert_eq!(a.len(), 50);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && a[49] < 1000);
        assert_eq!(sample(b"x", 5, 9), vec![0, 1, 2, 3, 4]);
        // Fixed: a sample must not change between builds (other machines draw it too). Computed apart,
        // with Python's hashlib.
        assert_eq!(sample(b"root", 1000, 3), [379, 909, 977]);
    }

    #[test]
    fn the_bound_of_a_clean_sample() {
        assert_eq!(wrong_share_bound(0), 1.0);
        let b = wrong_share_bound(100);
        assert!((b - 0.0295).abs() < 0.0005, "{b}");
        assert!(wrong_share_bound(1000) < wrong_share_bound(100));
    }

    #[test]
    fn job_lines_round_trip_and_bad_ones_say_why() {
        let key: JobKey = "3.7.1".parse().unwrap();
        let r = JobResult {
            total: 12,
            unique8: Some(96),
            nodes: 345,
        };
        let text = job_line(&key, &r, &[2, 0], None);
        assert_eq!(text, "3.7.1 12 96 345 2,0");
        let back = parse_job_line(&text, 3, VERSION_NO_FAMILIES).unwrap();
        assert_eq!((&back.key, back.result, &back.by), (&key, r, &vec![2, 0]));
        assert_eq!(back.families, None);
        assert!(!back.two_families());
        let families = [Some(Family::Gpu), None];
        let text = job_line(&key, &r, &[2, 0], Some(&families));
        assert_eq!(text, "3.7.1 12 96 345 2,0 gpu,-");
        let back = parse_job_line(&text, 3, VERSION).unwrap();
        assert_eq!(back.families.as_deref(), Some(&families[..]));
        assert_eq!(back.text(), text);
        assert!(!back.two_families());
        let two = parse_job_line("3.7.1 12 96 345 2,0 gpu,cpu-lists", 3, VERSION).unwrap();
        assert!(two.two_families());
        for (bad, version, why) in [
            ("3.7.1 12 96 345", 2, "4 fields"),
            (
                "3.7.1 12 96 345 2,0 x",
                2,
                "6 fields where a job line has 5",
            ),
            ("3.7.1 12 96 345 2,0", 3, "5 fields where a job line has 6"),
            ("3.7.1 x 96 345 0", 2, "total"),
            ("3.7.1 12 96 -1 0", 2, "nodes"),
            ("3.7.1 12 96 345 3", 2, "identity 3"),
            ("3.7.1 12 96 345 1,1", 2, "twice"),
            ("3..1 12 96 345 0", 2, "job key"),
            ("3.7.1 12 96 345 2,0 gpu", 3, "1 kernel families for 2"),
            ("3.7.1 12 96 345 2 gpu,gpu", 3, "2 kernel families for 1"),
            ("3.7.1 12 96 345 2,0 gpu,cpu", 3, "\"cpu\" is not known"),
        ] {
            let e = parse_job_line(bad, 3, version).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    /// A certificate of every job of `plan`, computed here, as a file's text.
    fn certificate(plan: &Plan) -> String {
        certificate_as(plan, false)
    }

    /// The same, of a record run where `record`.
    fn certificate_as(plan: &Plan, record: bool) -> String {
        let mut b = Builder::new(plan.strategy());
        let mut lines = Vec::new();
        for (i, key) in plan.jobs().enumerate() {
            let r = plan.job(&key).unwrap().run();
            let by = if i % 2 == 0 {
                [
                    ("alice", Some(Family::CpuLists)),
                    ("bob", Some(Family::Gpu)),
                ]
            } else {
                [("bob", Some(Family::Gpu)), ("carol", None)]
            };
            lines.push(b.line(&key, &r, by).unwrap());
        }
        let (_, fp) = plan.fingerprint();
        let h = b
            .header(7, plan, format!("{fp:016x}"), Some(1), 2, record)
            .unwrap();
        let mut text = serde_json::to_string(&h).unwrap();
        text.push('\n');
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        text
    }

    fn refused(text: &str, why: &str) {
        let e = check(text.as_bytes(), 5, &Draw::Root)
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "wanted {why:?}, got {e}");
    }

    /// Written, checked clean with the published totals; every kind of damage is refused, naming it.
    #[test]
    fn a_certificate_round_trips_and_every_change_is_refused() {
        for strategy in [Strategy::D4, Strategy::Mirror] {
            let plan = Plan::new(10, strategy).unwrap();
            let text = certificate(&plan);
            let c = check(text.as_bytes(), 5, &Draw::Root).unwrap();
            assert_eq!(c.header.total, "724");
            assert_eq!(
                c.header.unique,
                (strategy == Strategy::D4).then(|| "92".to_string())
            );
            assert_eq!(c.header.identities, ["alice", "bob", "carol"]);
            assert_eq!(c.sample.len(), 5);
            for (i, job) in &c.sample {
                assert_eq!(plan.job(&job.key).unwrap().run(), job.result, "job {i}");
            }
            // The same sample from the same file; another from a reader's seed.
            let again = check(text.as_bytes(), 5, &Draw::Root).unwrap();
            let idx = |c: &Checked| c.sample.iter().map(|(i, _)| *i).collect::<Vec<_>>();
            assert_eq!(idx(&c), idx(&again));
            let seeded = check(text.as_bytes(), 5, &Draw::Seed("42".into())).unwrap();
            assert_ne!(idx(&c), idx(&seeded));

            let lines: Vec<&str> = text.lines().collect();
            let join = |ls: &[&str]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
            // One count changed, anywhere: the root (or the sums) give it away.
            for at in [1, lines.len() / 2, lines.len() - 1] {
                let mut f: Vec<String> = lines[at].split(' ').map(String::from).collect();
                f[3] = (f[3].parse::<u64>().unwrap() + 1).to_string();
                let changed = f.join(" ");
                let mut ls = lines.clone();
                ls[at] = &changed;
                refused(&join(&ls), "nodes is");
            }
            // A line dropped, one repeated, two swapped.
            let mut ls = lines.clone();
            ls.remove(3);
            refused(&join(&ls), "missing, extra or out of order");
            let mut ls = lines.clone();
            ls.pop();
            refused(&join(&ls), "lines are missing");
            let mut ls = lines.clone();
            ls.push(lines[1]);
            refused(&join(&ls), "a line too many");
            let mut ls = lines.clone();
            ls.swap(2, 3);
            refused(&join(&ls), "out of order");
            // The header's total, root, plan; a file cut short.
            refused(
                &text.replacen("\"total\":\"724\"", "\"total\":\"725\"", 1),
                "total is 724",
            );
            let h: Header = serde_json::from_str(lines[0]).unwrap();
            let other = format!("{}0", &h.root[..63]);
            let other = if other == h.root {
                format!("{}1", &h.root[..63])
            } else {
                other
            };
            refused(&text.replacen(&h.root, &other, 1), "Merkle root");
            // Another N: its plan's keys part from the lines' at the first that differs.
            refused(
                &text.replacen("\"n\":10", "\"n\":11", 1),
                "a line is missing, extra or out of order",
            );
            let fp = format!("\"fingerprint\":\"{}\"", h.fingerprint);
            refused(
                &text.replacen(&fp, "\"fingerprint\":\"0000000000000000\"", 1),
                "fingerprint \"0000",
            );
            refused(&text[..text.len() - 3], &format!("line {}: ", lines.len()));
            refused(&text[..text.len() - 3], "cut short");
            refused("", "empty");
            refused("{}\n", "not a certificate header");
            refused(
                &text.replacen("\"version\":3", "\"version\":4", 1),
                "version 4",
            );
            // The count of jobs of two kernel families, changed in the header alone.
            let two = format!("\"two_families\":{}", c.header.two_families);
            assert!(c.header.two_families > 0);
            refused(
                &text.replacen(&two, "\"two_families\":0", 1),
                "count of jobs of two kernel families is",
            );
        }
    }

    /// Lines up to the limit are read whole; one byte more is refused as too long; a last line without
    /// its newline is refused as cut short, whatever its length.
    #[test]
    fn lines_are_read_up_to_their_limit() {
        let read = |text: &str| read_line(&mut text.as_bytes(), 3, 7).map_err(|e| e.to_string());
        assert_eq!(read("abc\n").unwrap().as_deref(), Some("abc"));
        assert_eq!(read("ab\nxyz\n").unwrap().as_deref(), Some("ab"));
        assert_eq!(read("").unwrap(), None);
        let e = read("abcd\n").unwrap_err();
        assert!(
            e.contains("line 7") && e.contains("longer than 3 bytes"),
            "{e}"
        );
        for short in ["abc", "ab", "a"] {
            let e = read(short).unwrap_err();
            assert!(e.contains("cut short"), "{short:?}: {e}");
        }
        let e = read("abcd").unwrap_err();
        assert!(e.contains("longer than 3 bytes"), "{e}");
        assert!(read("\u{e9}\n").is_ok());
        let mut bad: &[u8] = &[0xff, b'\n'];
        assert!(read_line(&mut bad, 3, 1)
            .unwrap_err()
            .to_string()
            .contains("UTF-8"));
    }

    /// The material of a sample: the root's 32 bytes, or SHA-256 of "seed S" and the root's bytes
    /// (values computed apart, with Python's hashlib); a root that is not 64 lowercase hex digits is
    /// refused before anything. A seed's sample depends on the file: the same seed draws another
    /// sample from another root (before, SHA-256 of "seed 42" alone drew 798, 840 and 964 from every
    /// file, so a writer who guessed the seed knew where to tell the truth).
    #[test]
    fn sample_material_is_the_roots_bytes_or_the_seeds_hash() {
        let root = "ab".repeat(32);
        let bytes = root_material(&root).unwrap();
        assert_eq!(
            sample(&seed_material("42", &bytes), 1000, 3),
            [66, 129, 305]
        );
        assert_ne!(
            sample(&seed_material("42", &[0xcd; 32]), 1000, 3),
            [66, 129, 305]
        );
        assert_eq!(sample(&bytes, 1000, 3), [340, 466, 713]);
        for bad in [
            "AB".repeat(32),
            "ab".repeat(31),
            format!("{}g", "a".repeat(63)),
            String::new(),
        ] {
            let e = root_material(&bad).unwrap_err().to_string();
            assert!(e.contains("64 lowercase hex digits"), "{bad:?}: {e}");
        }
        // A certificate's sample from its root is the sample of the root's bytes.
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let c = check(text.as_bytes(), 4, &Draw::Root).unwrap();
        let idx: Vec<u64> = c.sample.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            idx,
            sample(&root_material(&c.header.root).unwrap(), c.header.jobs, 4)
        );
        let s = check(text.as_bytes(), 4, &Draw::Seed("42".into())).unwrap();
        let idx: Vec<u64> = s.sample.iter().map(|(i, _)| *i).collect();
        let root = root_material(&c.header.root).unwrap();
        assert_eq!(idx, sample(&seed_material("42", &root), c.header.jobs, 4));
        let upper = text.replacen(&c.header.root, &c.header.root.to_uppercase(), 1);
        refused(&upper, "64 lowercase hex digits");
    }

    /// A refusal names the line, counted from 1 with the header as line 1; a record certificate needs
    /// two identities on every line.
    #[test]
    fn refusals_name_the_line_and_a_record_needs_two_identities() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let lines: Vec<&str> = text.lines().collect();
        let join = |ls: &[&str]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
        let mut ls = lines.clone();
        ls.swap(4, 5);
        refused(&join(&ls), "line 5: ");
        let mut ls = lines.clone();
        let bad = format!("{} x", lines[7]);
        ls[7] = &bad;
        refused(&join(&ls), "line 8: ");
        // Every line of this file names two identities: as a record, it passes.
        let record = certificate_as(&plan, true);
        assert!(
            check(record.as_bytes(), 1, &Draw::Root)
                .unwrap()
                .header
                .record
        );
        // One line naming one identity: refused as a record (the root is not reached).
        let mut ls: Vec<String> = record.lines().map(String::from).collect();
        let mut f: Vec<String> = ls[3].split(' ').map(String::from).collect();
        for field in &mut f[4..] {
            *field = field.split(',').next().unwrap().to_string();
        }
        ls[3] = f.join(" ");
        let one = ls.iter().map(|l| format!("{l}\n")).collect::<String>();
        refused(&one, "line 4: ");
        refused(&one, "names one identity");
    }

    /// One spelling per job line; identities named once each; a header claiming more jobs than a run
    /// may have is refused before the plan is walked (found by a review of this stop).
    #[test]
    fn lines_in_another_spelling_repeated_identities_and_absurd_job_counts_are_refused() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let lines: Vec<&str> = text.lines().collect();
        let join = |ls: &[&str]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
        let f: Vec<&str> = lines[3].split(' ').collect();
        for respelled in [
            format!("{} +{} {} {} {} {}", f[0], f[1], f[2], f[3], f[4], f[5]),
            format!("{} 0{} {} {} {} {}", f[0], f[1], f[2], f[3], f[4], f[5]),
        ] {
            let mut ls = lines.clone();
            ls[3] = &respelled;
            refused(&join(&ls), "line 4: not in the one form");
        }
        let h: Header = serde_json::from_str(lines[0]).unwrap();
        let mut twice = h.clone();
        twice.identities[2] = twice.identities[0].clone();
        let header = serde_json::to_string(&twice).unwrap();
        let mut ls = lines.clone();
        ls[0] = &header;
        refused(&join(&ls), "named twice");
        let mut absurd = h.clone();
        absurd.jobs = u64::MAX;
        let header = serde_json::to_string(&absurd).unwrap();
        let mut ls = lines.clone();
        ls[0] = &header;
        refused(&join(&ls), "more than a run may have");
        // Each identity fault alone, and the edges: an identity of 256 bytes and a header of the most
        // jobs a run may have pass those checks and fail later ones (issue 42: the `||` joins and both
        // `>` survived).
        let with = |change: &dyn Fn(&mut Header)| {
            let mut changed = h.clone();
            change(&mut changed);
            let header = serde_json::to_string(&changed).unwrap();
            let mut ls = lines.clone();
            ls[0] = &header;
            join(&ls)
        };
        for bad in [String::new(), "x".repeat(257), "a\nb".into()] {
            refused(
                &with(&|c: &mut Header| c.identities[1] = bad.clone()),
                "holds a control character, or is named twice",
            );
        }
        refused(
            &with(&|c: &mut Header| c.identities[1] = "x".repeat(256)),
            "the root of the header and job lines",
        );
        refused(
            &with(&|c: &mut Header| c.jobs = crate::partition::MAX_JOBS),
            "the plan of N = 10",
        );
    }

    /// Version 2: the root binds the header (identities, record flag, plan, totals) to the job lines. A
    /// header changed alone (an identity renamed, the record flag set, the run id) no longer passes: in
    /// version 1 each did, the root covering the lines only. A version 1 file is still read.
    #[test]
    fn the_root_binds_the_header_and_version_1_is_still_read() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let lines: Vec<&str> = text.lines().collect();
        let h: Header = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(h.version, VERSION);
        let with_header = |h: &Header| {
            let mut ls = lines.clone();
            let header = serde_json::to_string(h).unwrap();
            ls[0] = &header;
            ls.iter().map(|l| format!("{l}\n")).collect::<String>()
        };
        let mut renamed = h.clone();
        renamed.identities[1] = "mallory".into();
        let mut record = h.clone();
        record.record = true;
        let mut run = h.clone();
        run.run = 8;
        for changed in [renamed, record, run] {
            refused(
                &with_header(&changed),
                "the root of the header and job lines",
            );
        }
        // The same lines without their kernel families under a version 1 header: its root is the
        // lines' root alone.
        let old: Vec<String> = lines[1..]
            .iter()
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
            .collect();
        let lines: Vec<&str> = std::iter::once(lines[0])
            .chain(old.iter().map(String::as_str))
            .collect();
        let with_header = |h: &Header| {
            let mut ls = lines.clone();
            let header = serde_json::to_string(h).unwrap();
            ls[0] = &header;
            ls.iter().map(|l| format!("{l}\n")).collect::<String>()
        };
        let mut merkle = Merkle::default();
        for l in &lines[1..] {
            merkle.push(l.as_bytes());
        }
        let mut v1 = h.clone();
        v1.version = VERSION_LINES_ONLY;
        v1.root = merkle.root();
        // A version before 3 counting jobs of two families: refused (it names none).
        refused(&with_header(&v1), "counting jobs of two kernel families");
        v1.two_families = 0;
        assert_ne!(v1.root, h.root);
        let c = check(with_header(&v1).as_bytes(), 3, &Draw::Root).unwrap();
        assert_eq!(c.header.version, 1);
        // Relabelled as version 1 to claim a record the root would not cover: refused.
        let v1_record = Header {
            record: true,
            ..v1.clone()
        };
        refused(
            &with_header(&v1_record),
            "version 1 certificate claiming a record run",
        );
        // Under version 2 the lines' root alone is refused; the bound root is read.
        let mut v2 = h.clone();
        v2.version = VERSION_NO_FAMILIES;
        v2.two_families = 0;
        v2.root = merkle.root();
        refused(&with_header(&v2), "the root of the header and job lines");
        v2.root = bound_root(&v2, &merkle.root_bytes());
        let c = check(with_header(&v2).as_bytes(), 3, &Draw::Root).unwrap();
        assert!(c.sample.iter().all(|(_, l)| l.families.is_none()));
    }

    /// The header's text and the bound root, computed apart with Python's hashlib:
    /// `sha256(b"\x01" + sha256(b"\x00" + H).digest() + L)` with `L` the root of the lines "a", "b".
    #[test]
    fn the_bound_root_is_one_more_rfc_6962_node() {
        let h = Header {
            format: FORMAT.into(),
            version: VERSION_NO_FAMILIES,
            run: 7,
            n: 4,
            strategy: Strategy::D4,
            depth: 1,
            fingerprint: "00000000000000ff".into(),
            jobs: 2,
            total: "2".into(),
            unique: Some("1".into()),
            nodes: "9".into(),
            identities: vec!["alice".into(), "bob".into()],
            hash: HASH.into(),
            root: String::new(),
            finished_unix: None,
            written_unix: 0,
            record: true,
            two_families: 0,
        };
        assert_eq!(
            header_text(&h),
            "format nqueens-certificate\nversion 2\nrun 7\nn 4\nstrategy d4\ndepth 1\n\
             fingerprint 00000000000000ff\njobs 2\ntotal 2\nunique 1\nnodes 9\nrecord 1\n\
             identity alice\nidentity bob\n"
        );
        let mut m = Merkle::default();
        m.push(b"a");
        m.push(b"b");
        assert_eq!(
            bound_root(&h, &m.root_bytes()),
            "b65f81d08c7a28a8646f210f6003a61416d48a65bc4d55e26357b686762a3abc"
        );
        // Version 3 binds its count of jobs of two kernel families too (the same hashlib sum over
        // the text below).
        let h3 = Header {
            version: VERSION,
            two_families: 1,
            ..h
        };
        assert_eq!(
            header_text(&h3),
            "format nqueens-certificate\nversion 3\nrun 7\nn 4\nstrategy d4\ndepth 1\n\
             fingerprint 00000000000000ff\njobs 2\ntotal 2\nunique 1\nnodes 9\nrecord 1\n\
             two_families 1\nidentity alice\nidentity bob\n"
        );
        assert_eq!(
            bound_root(&h3, &m.root_bytes()),
            "58b5d8e535429b70d9691767ea774c9b2cff4608597fd272626b058c71e88c8e"
        );
    }

    /// A line whose counts no search of its job gives (here a unique count below the total), made
    /// consistent with the header's sums and root, is refused by the file check, naming the line,
    /// whether or not the sample would draw it.
    #[test]
    fn a_line_no_search_gives_is_refused_before_the_sample() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let mut b = Builder::new(plan.strategy());
        let mut lines = Vec::new();
        let mut forged = None;
        for (i, key) in plan.jobs().enumerate() {
            let mut r = plan.job(&key).unwrap().run();
            // The first job of plain rings with solutions: its unique count made 8 less than its
            // total (the sums stay multiples of 8).
            if forged.is_none() && r.total >= 8 && r.unique8 == Some(r.total) {
                r.unique8 = Some(r.total - 8);
                forged = Some(i);
            }
            lines.push(b.line(&key, &r, [("alice", None), ("bob", None)]).unwrap());
        }
        let line = forged.expect("a job of plain rings") + 2;
        let (_, fp) = plan.fingerprint();
        let h = b
            .header(7, &plan, format!("{fp:016x}"), None, 2, false)
            .unwrap();
        let text = std::iter::once(serde_json::to_string(&h).unwrap())
            .chain(lines)
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        refused(&text, &format!("line {line}: counts no search gives"));
    }

    /// `text` with its header changed by `edit` and its root computed again (a writer's forgery).
    fn rerooted(text: &str, edit: impl FnOnce(&mut Header)) -> String {
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let mut h: Header = serde_json::from_str(&lines[0]).unwrap();
        edit(&mut h);
        let mut m = Merkle::default();
        for l in &lines[1..] {
            m.push(l.as_bytes());
        }
        h.root = bound_root(&h, &m.root_bytes());
        lines[0] = serde_json::to_string(&h).unwrap();
        lines.join("\n") + "\n"
    }

    /// What a writer could vary to re-roll a root drawn from, or to list a name that computed nothing:
    /// an identity no line names, identities listed out of the order the lines first name them. Each
    /// is refused, the root made to match. Before, both passed (found by a review, 2026-11-29).
    #[test]
    fn identities_are_those_the_lines_name_in_the_order_they_name_them() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        check(text.as_bytes(), 5, &Draw::Root).unwrap();
        let unused = rerooted(&text, |h| h.identities.push("Famous Lab".into()));
        refused(&unused, "\"Famous Lab\" is named by no job line");
        // Two identities swapped in the header, and every line's indices with them.
        let mut swapped: Vec<String> = text.lines().map(String::from).collect();
        for line in &mut swapped[1..] {
            let mut f: Vec<String> = line.split(' ').map(String::from).collect();
            f[4] = f[4]
                .split(',')
                .map(|i| match i {
                    "0" => "1",
                    "1" => "0",
                    other => other,
                })
                .collect::<Vec<_>>()
                .join(",");
            *line = f.join(" ");
        }
        let swapped = rerooted(&(swapped.join("\n") + "\n"), |h| h.identities.swap(0, 1));
        refused(&swapped, "identity 1 named before identity 0");
    }

    /// A header claiming more jobs than its file holds lines for is refused at once, before the plan
    /// is enumerated: a 400-byte file claiming 50,000,000 jobs of a deep plan took minutes (found by a
    /// review, 2026-11-29). A true file of its own size passes.
    #[test]
    fn a_header_claiming_more_jobs_than_its_file_holds_is_refused_at_once() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let size = Some(text.len() as u64);
        check_within(text.as_bytes(), size, 5, &Draw::Root).unwrap();
        let mut h: Header = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        h.n = 32;
        h.depth = 29;
        h.jobs = 50_000_000;
        let hostile = serde_json::to_string(&h).unwrap() + "\n";
        let started = std::time::Instant::now();
        let e = check_within(
            hostile.as_bytes(),
            Some(hostile.len() as u64),
            5,
            &Draw::Root,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("hold at most 0 job lines"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // A size one byte short of the header, its newline and the shortest lines claimed: refused
        // by the count.
        let lines = text.lines().count() as u64 - 1;
        let e = check_within(
            text.as_bytes(),
            Some(text.lines().next().unwrap().len() as u64 + lines * MIN_JOB_LINE),
            5,
            &Draw::Root,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!("hold at most {} job lines", lines - 1)),
            "{e}"
        );
        // One byte more, and the lines claimed fit: the bound passes it (the lines are longer).
        check_within(
            text.as_bytes(),
            Some(text.lines().next().unwrap().len() as u64 + 1 + lines * MIN_JOB_LINE),
            5,
            &Draw::Root,
        )
        .unwrap();
    }

    /// With the published root, a file whose header states another is refused as soon as its header is
    /// read: a 400-byte header claiming 50,000,000 jobs of a deep plan, its file said to be 600 MB (the
    /// padding its lines would need), is refused at once. Before, the root was compared once the
    /// whole file was checked, after the plan's enumeration (minutes; found by a review, 2026-11-30).
    /// The true file passes with its root in capitals and spaces around it.
    #[test]
    fn a_file_of_another_root_is_refused_before_its_plan_is_enumerated() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let mut h: Header = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let published = h.root.clone();
        let padded = Some(600_000_000);
        let expected = format!(" {} ", published.to_uppercase());
        check_expecting(text.as_bytes(), None, 5, &Draw::Root, Some(&expected)).unwrap();
        h.n = 32;
        h.depth = 29;
        h.jobs = 50_000_000;
        h.root = "00".repeat(32);
        let hostile = serde_json::to_string(&h).unwrap() + "\n";
        let started = std::time::Instant::now();
        let e = check_expecting(hostile.as_bytes(), padded, 5, &Draw::Root, Some(&published))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not the expected root"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // Its real root's file, with one line changed and the header's root left: refused at the end.
        let mut lines: Vec<&str> = text.lines().collect();
        let changed = lines[3].replacen(' ', " 9", 1);
        lines[3] = &changed;
        let edited = lines.join("\n") + "\n";
        let e = check_expecting(edited.as_bytes(), None, 0, &Draw::Root, Some(&published))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("is not the expected root"), "{e}");
    }

    /// N = 10's certificate, its header claiming 50,000,000 jobs of d4 at `n` split `depth`, cut to
    /// its first `cut` lines and said to be 600 MB: the refusal of its check, and how long it took.
    fn claiming_a_deep_plan(n: u8, depth: u8, cut: usize) -> (String, std::time::Duration) {
        let text = certificate(&Plan::new(10, Strategy::D4).unwrap());
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let mut h: Header = serde_json::from_str(&lines[0]).unwrap();
        (h.n, h.depth, h.jobs) = (n, depth, 50_000_000);
        lines[0] = serde_json::to_string(&h).unwrap();
        let file = lines[..cut].join("\n") + "\n";
        let started = std::time::Instant::now();
        let e = check_within(file.as_bytes(), Some(600_000_000), 5, &Draw::Root)
            .unwrap_err()
            .to_string();
        (e, started.elapsed())
    }

    /// Without an expected root, a file padded to the size its header's plan needs is refused at its
    /// first line that is not the plan's, its plan enumerated only that far: a header claiming
    /// 50,000,000 jobs of d4 at N = 28 one row deeper than its default, followed by lines of another
    /// plan. Before, the plan was enumerated for its fingerprint before the first line was read, up to
    /// its 50,000,001st job: this test took 1.8 s then (2 cores, Intel Xeon family 6 model 167), where
    /// it allows 0.25 s (found by a review, 2026-11-30).
    #[test]
    fn a_padded_file_is_refused_at_its_first_line_not_after_its_plans_enumeration() {
        let depth = Plan::new(28, Strategy::D4).unwrap().depth() + 1;
        let (e, took) = claiming_a_deep_plan(28, depth, 5);
        assert!(e.contains("line 2: job "), "{e}");
        assert!(e.contains("out of order"), "{e}");
        assert!(took < std::time::Duration::from_millis(250), "{took:?}");
    }

    /// A header naming a plan too deep to enumerate is refused once its lines' budget is spent, whether
    /// its lines end first or not, in a time bounded by its lines, whatever job count it claims (found
    /// by a review of the first version, which granted the claimed count's budget up front: minutes).
    #[test]
    fn a_plan_too_deep_for_its_job_count_is_refused() {
        // What a line pays, as docs/verification.md states it: a stored run's job and one found.
        assert_eq!(STEPS_PER_LISTED_JOB, 4160);
        // d4 at N = 32 split 29: its prefixes take far more steps to reach than a job pays for. With
        // one job line, or none.
        for cut in [1, 2] {
            let (e, took) = claiming_a_deep_plan(32, 29, cut);
            assert!(
                e.contains("takes more steps to enumerate"),
                "{cut} lines: {e}"
            );
            assert!(took < std::time::Duration::from_millis(250), "{took:?}");
        }
    }

    /// Only a seed of a random seed's form (32 hex digits or more) is taken as unguessable.
    #[test]
    fn a_seed_looks_random_only_with_128_bits_of_hex() {
        assert!(seed_looks_random(&fresh_seed().unwrap()));
        assert!(seed_looks_random(&"aB3".repeat(11)));
        for guessable in [
            "7",
            "42",
            "2026-11-30",
            &"f".repeat(31),
            &"g".repeat(32),
            "",
        ] {
            assert!(!seed_looks_random(guessable), "{guessable}");
        }
    }

    /// The header's own strings reach a refusal quoted, never raw: a total holding terminal escapes
    /// (which could paint a false "all agree" over the refusal) shows as `\u{1b}`.
    #[test]
    fn a_refusal_quotes_the_headers_strings() {
        let plan = Plan::new(10, Strategy::D4).unwrap();
        let text = certificate(&plan);
        let painted = rerooted(&text, |h| {
            h.total = "724\n\u{1b}[1A\u{1b}[2Kall agree".into();
        });
        let e = check(painted.as_bytes(), 5, &Draw::Root)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e:?}");
        assert!(e.contains("\\u{1b}"), "{e}");
        let fingerprint = rerooted(&text, |h| h.fingerprint = "\u{1b}[8m".into());
        let e = check(fingerprint.as_bytes(), 5, &Draw::Root)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\u{1b}'), "{e:?}");
        // The parser's own messages quote the file too: an unknown field, a strategy not known.
        let (first, rest) = text.split_once('\n').unwrap();
        for header in [
            first.replacen('{', "{\"\\u001b[8m\":0,", 1),
            first.replacen(
                "\"strategy\":\"d4\"",
                "\"strategy\":\"\\u001b[2Kall agree\"",
                1,
            ),
        ] {
            assert_ne!(header, first);
            let e = check(format!("{header}\n{rest}").as_bytes(), 5, &Draw::Root)
                .unwrap_err()
                .to_string();
            assert!(!e.contains('\u{1b}') && e.contains("\\u{1b}"), "{e:?}");
        }
    }

    /// A fresh seed is 128 bits in lowercase hex, and another each time.
    #[test]
    fn fresh_seeds_are_128_bits_and_differ() {
        let a = fresh_seed().unwrap();
        let b = fresh_seed().unwrap();
        assert_eq!(a.len(), 32, "{a}");
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{a}"
        );
        assert_ne!(a, b);
    }
}
