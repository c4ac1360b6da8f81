//! What the store keeps, and how it is laid out: the records and the keys (big-endian run ids, so that a
//! tree's order is creation order). Run, job, totals and quarantine records are checked JSON (few, and
//! readable with any tool once the tag byte and CRC-64 before it are cut off; plain JSON up to store
//! format 5); a counted result, the one record whose size grows the store, is compact (a tag byte, then
//! postcard), grouped with its neighbours since store format 5 ([`super::groups`]); the single results
//! of formats 1 to 4 (compact or JSON) are read by the migration.

use nqueens_common::{Family, JobKey, JobResult, Plan, Strategy};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A run: one N, one partition, its job count and the fingerprint of its job list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The run's id (a counter, shown as decimal).
    pub id: u64,
    pub n: u8,
    pub strategy: Strategy,
    pub depth: u8,
    /// Number of jobs of the plan.
    pub jobs_total: u64,
    /// Hash of the plan's job keys in order: a build whose planner differs refuses to resume the run.
    pub fingerprint: String,
    /// Seconds since the Unix epoch.
    pub created_unix: u64,
    /// Set in the transaction that commits the last job.
    pub finished_unix: Option<u64>,
    /// The fraction of jobs computed twice, by workers of different names (0 to 1).
    #[serde(default)]
    pub verify_fraction: f64,
    /// Set by `nqueens pause` (cleared by `resume`): the run leases nothing, its leases out may finish.
    /// Absent from records of store format 2 (read as not paused).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// When the run was cancelled (seconds since the Unix epoch): it leases nothing more, refuses
    /// results, and its totals stay partial for good. Absent from records of store format 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_unix: Option<u64>,
    /// Workers take jobs from the running run of the highest priority first (ties: the oldest first).
    /// Absent from records of store format 2 (read as 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// How the run picks the jobs it verifies. Absent from the records of runs created before checks
    /// were keyed (read as [`Checks::Public`]: such a run goes on picking as it began).
    #[serde(default, skip_serializing_if = "Checks::is_public")]
    pub checks: Checks,
    /// Record mode (`submit --record`): every job computed by two identities that hold worker
    /// credentials, so that the run is done only when every job holds two agreeing independent results.
    /// Leased to credential holders only. Absent from the records of runs created before it (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record: bool,
    /// The bound on undetected wrong results the run states (`submit --max-error`): spot checks make at
    /// least `nqueens_common::bound::spot_rate_for` of it of every credential's leases while the run is open.
    /// Absent from the records of runs created before it, and of runs that state none (the default
    /// bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_error: Option<f64>,
}

/// What a new run asks for beside its plan.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunOptions {
    /// The fraction of jobs computed twice (0 to 1).
    pub verify_fraction: f64,
    pub priority: i32,
    /// Record mode (every job verified, leased to credential holders only).
    pub record: bool,
    /// The bound on undetected wrong results it states (none: the default).
    pub max_error: Option<f64>,
}

/// How a run picks the jobs it computes twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Checks {
    /// A public hash of the run id and the job key: anyone can tell which jobs are checked (runs of
    /// builds before keyed checks).
    #[default]
    Public,
    /// SipHash-2-4 of the run id and the job key under the store's secret: no worker can tell.
    Keyed,
}

impl Checks {
    fn is_public(&self) -> bool {
        *self == Checks::Public
    }
}

fn is_zero(p: &i32) -> bool {
    *p == 0
}

impl RunMeta {
    /// The plan of the run (checked again: a store is input too).
    pub fn plan(&self) -> Result<Plan> {
        Ok(Plan::with_depth(self.n as u32, self.strategy, self.depth)?)
    }

    /// The plan fingerprint as a number (it is stored as 16 hex digits).
    pub fn fingerprint_value(&self) -> Result<u64> {
        u64::from_str_radix(&self.fingerprint, 16).map_err(|_| {
            Error::Corrupt(format!(
                "run {}: fingerprint {:?} is not 16 hex digits",
                self.id, self.fingerprint
            ))
        })
    }

    /// Whether this build's planner gives the job list the run records (its count and fingerprint),
    /// enumerated up to the count it records: bounded by it, since a damaged or altered depth could name
    /// a plan whose enumeration never ends. `Err` says how they differ.
    pub fn check_job_list(&self) -> std::result::Result<(), String> {
        let plan = self.plan().map_err(|e| e.to_string())?;
        let (jobs, hash) = plan.fingerprint_of_stored(self.jobs_total).map_err(|e| {
            format!(
                "its plan (N = {} {} depth {}) cannot be enumerated to the {} jobs it records: {e}",
                self.n, self.strategy, self.depth, self.jobs_total
            )
        })?;
        if jobs != self.jobs_total || format!("{hash:016x}") != self.fingerprint {
            return Err(format!(
                "it records {} jobs and fingerprint {}, where this build's plan of N = {} {} depth {} has {jobs} jobs, fingerprint {hash:016x}",
                self.jobs_total, self.fingerprint, self.n, self.strategy, self.depth
            ));
        }
        Ok(())
    }

    /// Whether every job has a result.
    pub fn is_done(&self) -> bool {
        self.finished_unix.is_some()
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled_unix.is_some()
    }

    /// Why the totals of this run, every job counted, cannot be right, if they cannot: the unique
    /// count's Burnside sum is not a multiple of 8; they differ from the published counts of N (N up
    /// to 27, `nqueens_common::reference`); or they break what every count of N obeys. For N >= 2 a
    /// class of solutions has 8, 4 or 2 members (2 only for a class the quarter turn fixes, which
    /// needs N mod 4 to be 0 or 1), so the total is even, a multiple of 4 where N mod 4 is 2 or 3, and
    /// `total <= 8 * unique <= 4 * total`.
    pub fn contradiction(&self, tally: &nqueens_common::Tally) -> Option<String> {
        let unique = match tally.unique() {
            Ok(u) => u,
            Err(e) => return Some(e.to_string()),
        };
        let total = tally.total;
        if let Some((known, known_unique)) = nqueens_common::reference::counts(u32::from(self.n)) {
            if total != known || unique.is_some_and(|u| u != known_unique) {
                return Some(format!(
                    "the counts (total {total}, unique {}) differ from the published ones of N = {} (total {known}, unique {known_unique})",
                    unique.map_or("-".to_string(), |u| u.to_string()),
                    self.n
                ));
            }
        }
        if self.n >= 2 {
            let step = if self.n % 4 >= 2 { 4 } else { 2 };
            if !total.is_multiple_of(step) {
                return Some(format!(
                    "total {total} is not a multiple of {step}, as every total of N = {} is",
                    self.n
                ));
            }
            if let Some(u) = unique {
                if u.checked_mul(8)
                    .is_none_or(|u8| total > u8 || u8 > total.saturating_mul(4))
                {
                    return Some(format!(
                        "total {total} and unique {u} break total <= 8 * unique <= 4 * total"
                    ));
                }
            }
        }
        None
    }

    /// Where the run stands, given its totals and how many of its jobs failed.
    pub fn phase(&self, tally: &nqueens_common::Tally, jobs_failed: u64) -> Phase {
        let jobs_done = tally.jobs;
        if self.is_done() {
            if self.contradiction(tally).is_some() {
                Phase::Inconsistent
            } else {
                Phase::Done
            }
        } else if self.is_cancelled() {
            Phase::Cancelled
        } else if self.paused {
            Phase::Paused
        } else if jobs_failed > 0 && jobs_done + jobs_failed >= self.jobs_total {
            Phase::Stalled
        } else {
            Phase::Running
        }
    }

    /// Whether a job is one of the run's verified jobs: a deterministic choice, the same in every
    /// incarnation, of a hash of the run id and the job key against the run's fraction. For a run of
    /// [`Checks::Keyed`] the hash is keyed with `secret` (the store's), so that no worker can predict
    /// which of its jobs are checked.
    pub fn verifies(&self, secret: &[u8; 16], key: &JobKey) -> bool {
        let fraction = self.verify_fraction;
        if fraction <= 0.0 {
            return false;
        }
        if fraction >= 1.0 {
            return true;
        }
        let hash = match self.checks {
            Checks::Public => {
                const PRIME: u64 = 0x0000_0100_0000_01b3;
                let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
                for &b in self.id.to_be_bytes().iter().chain(&key.0) {
                    hash = (hash ^ b as u64).wrapping_mul(PRIME);
                }
                // FNV's low bits mix poorly on short inputs: finish with a multiply-xorshift.
                hash ^= hash >> 33;
                hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
                hash ^= hash >> 33;
                hash
            }
            Checks::Keyed => {
                use std::hash::Hasher;
                let mut h = siphasher::sip::SipHasher24::new_with_key(secret);
                // Apart from the lease tags under the same secret: another domain.
                h.write(b"nqueens verify v1");
                h.write(&self.id.to_be_bytes());
                h.write(&[key.0.len() as u8]);
                h.write(&key.0);
                h.finish()
            }
        };
        (hash as f64) < fraction * u64::MAX as f64
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Jobs remain to be computed.
    Running,
    /// Every job is done: the totals are final.
    Done,
    /// Every job is done or failed, and some failed: nothing more can be leased until the failed jobs are
    /// retried.
    Stalled,
    /// Paused by an operator: nothing is leased until it is resumed.
    Paused,
    /// Cancelled by an operator: nothing more is leased or counted; the totals stay partial.
    Cancelled,
    /// Every job is counted, but the results contradict each other (the unique counts' Burnside sum is
    /// not a multiple of 8): some result is wrong, and the total is not to be trusted.
    Inconsistent,
}

impl Phase {
    /// Every phase, as `status` and the metrics name them.
    pub const ALL: [Phase; 6] = [
        Phase::Running,
        Phase::Done,
        Phase::Stalled,
        Phase::Paused,
        Phase::Cancelled,
        Phase::Inconsistent,
    ];

    /// Its name in `status`, the status page and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Done => "done",
            Phase::Stalled => "stalled",
            Phase::Paused => "paused",
            Phase::Cancelled => "cancelled",
            Phase::Inconsistent => "inconsistent",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of a job that left `pending` (a job without a record is pending).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Its result is counted in the run's totals.
    Done,
    /// A verified job with one result, waiting for a second from a worker of another name.
    Verifying,
    /// A verified job whose results disagree, waiting for a worker of another name to decide.
    Disputed,
    /// Gave up after too many attempts (see the record's reason); not counted, never leased again
    /// until they are retried (`nqueens retry RUN`, or a restart with `--retry-failed`).
    Failed,
}

impl JobState {
    /// Whether the job may still be leased (to a worker that has not computed it yet).
    pub fn is_open(self) -> bool {
        matches!(self, JobState::Verifying | JobState::Disputed)
    }
}

/// The reason an open record mended from a damaged one carries ([`JobRecord::reason`]): it says nothing
/// of the job's past (the ledger's comparison does not take it for evidence of a dispute or a
/// revocation), only that the job is computed again and verified.
pub const MENDED: &str = "its record was damaged on disk and mended: computed again, and verified";

/// A job's record in the `jobs` tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub state: JobState,
    /// Results of a verified job not counted yet (one per worker name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<ResultRecord>,
    /// Why the job failed (or, open, [`MENDED`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl JobRecord {
    /// The record of a job whose result is counted.
    pub fn done() -> JobRecord {
        JobRecord {
            state: JobState::Done,
            candidates: Vec::new(),
            reason: None,
        }
    }

    /// Whether a worker of this name has already given a result for the job (or confirmed one of its
    /// candidates: a count taken back from two that agreed).
    pub fn computed_by(&self, name: &str) -> bool {
        self.candidates.iter().any(|c| c.stands_behind(name))
    }
}

/// A result as stored: counted (in the `result_groups` tree) or a candidate of a verified job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub result: JobResult,
    /// The name of the worker that computed it.
    pub worker: String,
    /// That worker process's id.
    #[serde(default)]
    pub worker_id: String,
    /// The lease it was reported under.
    pub lease: u64,
    /// When it was committed, in seconds since the Unix epoch.
    pub at_unix: u64,
    /// Workers (names) whose results agreed with it, for a verified job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmed_by: Vec<String>,
    /// The seal its worker computed over the plan fingerprint, the job key and the result (absent only
    /// in records of store format 1, which the migration seals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<u64>,
    /// The kernel families that computed it, as their workers stated them: `worker`'s first, then
    /// those of `confirmed_by`, in order ([`ResultRecord::families_of`]: none past the last known, so
    /// that a record without any, as every record of a build before 2026-11-28, holds none). Not
    /// sealed, never trusted for a count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<Option<Family>>,
}

impl ResultRecord {
    /// The `families` of a record from the families of its worker and its confirmers, in order: cut
    /// after the last known one.
    pub fn families_of(families: impl IntoIterator<Item = Option<Family>>) -> Vec<Option<Family>> {
        let mut all: Vec<Option<Family>> = families.into_iter().collect();
        while all.last() == Some(&None) {
            all.pop();
        }
        all
    }

    /// The family of its worker's result, if stated.
    pub fn family(&self) -> Option<Family> {
        self.families.first().copied().flatten()
    }

    /// The family of its `i`-th computer: 0 its worker, `i` its `i`-th confirmer (`confirmed_by[i - 1]`).
    pub fn family_at(&self, i: usize) -> Option<Family> {
        self.families.get(i).copied().flatten()
    }

    /// Adds `name`, of kernel family `family`, to those that confirmed this result (a decider seconding
    /// one side of a dispute): `families[i]` stays the family of `confirmed_by[i - 1]`.
    pub fn second(&mut self, name: &str, family: Option<Family>) {
        self.confirmed_by.push(name.to_string());
        let at = self.confirmed_by.len();
        let mut families = std::mem::take(&mut self.families);
        families.resize(at, None);
        families.push(family);
        self.families = ResultRecord::families_of(families);
    }

    /// Whether the identity `name` stands behind this result: its worker, or one that confirmed it.
    pub fn stands_behind(&self, name: &str) -> bool {
        self.worker == name || self.confirmed_by.iter().any(|c| c == name)
    }

    /// Takes confirmer `name` off this result (a quarantined identity's part in a candidate), with its
    /// family: `families[i]` is the family of `confirmed_by[i - 1]`.
    pub fn drop_confirmer(&mut self, name: &str) {
        if let Some(i) = self.confirmed_by.iter().position(|c| c == name) {
            self.confirmed_by.remove(i);
            if i + 1 < self.families.len() {
                self.families.remove(i + 1);
            }
            let families = std::mem::take(&mut self.families);
            self.families = ResultRecord::families_of(families);
        }
    }

    /// Puts its first confirmer in its worker's place (its worker quarantined), if it has one: the
    /// result stays, behind those who confirmed it. Returns whether it had one.
    pub fn handed_to_confirmer(&mut self) -> bool {
        if self.confirmed_by.is_empty() {
            return false;
        }
        self.worker = self.confirmed_by.remove(0);
        // (Its process id is not known: a confirmer's is not kept.)
        self.worker_id = String::new();
        let mut families = std::mem::take(&mut self.families);
        if !families.is_empty() {
            families.remove(0);
        }
        self.families = ResultRecord::families_of(families);
        true
    }

    /// The identities that stand behind this result: its worker, then its confirmers.
    pub fn identities(&self) -> impl Iterator<Item = String> + '_ {
        std::iter::once(self.worker.clone()).chain(self.confirmed_by.iter().cloned())
    }

    /// Whether the record's seal matches its result, for job `key` of a plan with `fingerprint`.
    pub fn sealed(&self, fingerprint: u64, key: &JobKey) -> bool {
        self.seal.is_some_and(|s| {
            nqueens_common::checksum::verify_seal(fingerprint, key, &self.result, s)
        })
    }
}

/// A worker taken out of service for a wrong result, in the `quarantine` tree (keyed by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantine {
    pub worker: String,
    pub reason: String,
    pub at_unix: u64,
    /// The identities whose agreeing result disproved the worker's (none: it contradicted itself, or
    /// a record of a build before 2026-11-28). Once every one of them is quarantined in turn, the
    /// quarantine is lifted ([`super::Store::apply_quarantine_rule`]). Absent from records that name none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// Held, not yet disproved (since 2026-11-29): in a record run, it contradicted a count that
    /// others confirmed, under a live lease, and the count was taken back for a dispute that has not
    /// been decided. It leases and counts nothing meanwhile, but what it counted in record runs stands
    /// (each such count has a second identity behind it), as do its results in their disputes, so that
    /// two colluders whose lie an honest check caught do not take the checker's work back with it. A
    /// decision against it (or any other quarantine of it) makes it whole; one for it lifts it by the
    /// rule. It is taken for whole once it stands behind no side of a dispute of a record run that is
    /// not cancelled (its job failed, or was put back): the store then lists it among the quarantines
    /// not yet revoked, and the next revocation of it (at the latest, the next start) takes its record
    /// counts back. A quarantine restored from a file (an export, a ledger ahead of the store) is
    /// restored held, and taken for whole by the revocation that follows: the file holds no open
    /// job's results. Absent from records that are not held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// While held (since 2026-12-01): the jobs whose confirmed counts it contradicted under live
    /// leases, `(run, job)`, its dispute's first, kept or not. Should its hold end undecided (its
    /// dispute's job failed, its run cancelled, or a store rebuilt from a file holds no dispute),
    /// each of these counts that only the identities of `by` stand behind (beside identities not
    /// trusted) is taken back with its record counts ([`super::Store::revoke`]): nothing showed
    /// which side was wrong. At most [`MAX_CONTRADICTED`]. Absent from records that are not held,
    /// and from records of builds before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradicted: Vec<(u64, JobKey)>,
}

/// The most jobs a quarantine lists as contradicted: one report's results (a held checker commits
/// nothing more), twice over.
pub const MAX_CONTRADICTED: usize = 8192;

impl Quarantine {
    /// Why the worker is quarantined, as status and logs show it: the reason, and whether it is held.
    pub fn shown_reason(&self) -> String {
        match self.held {
            true => format!(
                "{} (held until its dispute is decided: its record counts stand meanwhile)",
                self.reason
            ),
            false => self.reason.clone(),
        }
    }

    /// This quarantine joined with a `later` one of the same worker (a second disproof): the first
    /// reason and time, the deciders of both, for the worker stays shown wrong while any disproof
    /// stands, and held only if both are. One that names none (it contradicted itself, or a record of a build before) makes the
    /// join name none: never lifted by the rule.
    pub fn merged(mut self, later: Quarantine) -> Quarantine {
        // Held while every disproof of it is only a contradiction waiting for its dispute.
        self.held = self.held && later.held;
        // (Whole, nothing it contradicted is taken back for it: the list goes.)
        match self.held {
            true => {
                for job in later.contradicted {
                    if !self.contradicted.contains(&job)
                        && self.contradicted.len() < MAX_CONTRADICTED
                    {
                        self.contradicted.push(job);
                    }
                }
            }
            false => self.contradicted.clear(),
        }
        if self.by.is_empty() || later.by.is_empty() {
            self.by.clear();
            return self;
        }
        for name in later.by {
            if !self.by.contains(&name) {
                self.by.push(name);
            }
        }
        self
    }
}

/// The `runs` and `totals` key of a run.
pub fn run_key(run: u64) -> [u8; 8] {
    run.to_be_bytes()
}

/// The run id of a `runs` or `totals` key (`None`: not 8 bytes).
pub fn run_of_key(k: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(k).ok().map(u64::from_be_bytes)
}

/// The `jobs` key of a job (and the `results` key of formats 1 to 4): the run id, then the job key's
/// numbers. All keys of one run
/// have the same length, so a run's jobs are one contiguous, prefix-free range.
pub fn job_key(run: u64, key: &JobKey) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.0.len());
    k.extend_from_slice(&run.to_be_bytes());
    k.extend_from_slice(&key.0);
    k
}

/// The run id and job key of a `jobs` key (or a `result_groups` key: the run id and a group's prefix).
pub fn split_job_key(k: &[u8]) -> Result<(u64, JobKey)> {
    let (run, key) = k
        .split_first_chunk::<8>()
        .ok_or_else(|| Error::Corrupt(format!("job key of {} bytes", k.len())))?;
    Ok((u64::from_be_bytes(*run), JobKey(key.to_vec())))
}

/// The tag byte of a checked record (store format 6): the CRC-64 of the JSON that follows (8 bytes,
/// big-endian), then the JSON. A plain JSON record (formats 1 to 5) starts with `{`, never with it.
const CHECKED_V1: u8 = 2;

/// Decodes a stored run, job, totals or quarantine record: checked JSON whose checksum matches. A
/// record of the plain JSON of formats 1 to 5 is refused (the migration to format 6 checks every one;
/// see [`decode_plain`]), as is any record damaged on disk, whatever byte changed: a field's value, or
/// its name (which JSON alone would read as the field's default).
pub fn decode<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T> {
    let damaged = |why: &str| Error::Corrupt(format!("undecodable {what}: {why}"));
    match bytes.split_first() {
        Some((&CHECKED_V1, rest)) => {
            let (sum, json) = rest
                .split_first_chunk::<8>()
                .ok_or_else(|| damaged("the record is cut short"))?;
            if u64::from_be_bytes(*sum) != nqueens_common::checksum::checksum(json) {
                return Err(damaged("the record fails its checksum (damaged on disk)"));
            }
            decode_plain(what, json)
        }
        Some((b'{', _)) => Err(damaged(
            "a record without a checksum in a store of format 6 (damaged on disk)",
        )),
        Some((tag, _)) => Err(damaged(&format!("unknown record tag {tag}"))),
        None => Err(damaged("an empty record")),
    }
}

/// Decodes plain JSON: a record of store formats 1 to 5 (the migration), or the JSON of a checked one.
pub fn decode_plain<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt(format!("undecodable {what}: {e}")))
}

/// Encodes a run, job, totals or quarantine record: checked JSON ([`decode`]).
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    checked(&serde_json::to_vec(value).expect("records serialize to JSON"))
}

/// `json` as a checked record.
pub fn checked(json: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(9 + json.len());
    bytes.push(CHECKED_V1);
    bytes.extend_from_slice(&nqueens_common::checksum::checksum(json).to_be_bytes());
    bytes.extend_from_slice(json);
    bytes
}

/// Whether `bytes` is a checked record (intact or not).
pub fn is_checked(bytes: &[u8]) -> bool {
    bytes.first() == Some(&CHECKED_V1)
}

/// The tag byte of a compact result record (postcard of [`Compact`] follows). A JSON record starts
/// with `{`, never with it.
const COMPACT_V1: u8 = 1;

/// A result record's stored fields, in the compact encoding of store format 4 (one result per entry).
#[derive(Serialize, Deserialize)]
struct Compact {
    total: u64,
    unique8: Option<u64>,
    nodes: u64,
    worker: String,
    worker_id: String,
    lease: u64,
    at_unix: u64,
    confirmed_by: Vec<String>,
    seal: Option<u64>,
}

impl Compact {
    fn of(record: &ResultRecord) -> Compact {
        Compact {
            total: record.result.total,
            unique8: record.result.unique8,
            nodes: record.result.nodes,
            worker: record.worker.clone(),
            worker_id: record.worker_id.clone(),
            lease: record.lease,
            at_unix: record.at_unix,
            confirmed_by: record.confirmed_by.clone(),
            seal: record.seal,
        }
    }

    fn into_record(self) -> ResultRecord {
        ResultRecord {
            result: JobResult {
                total: self.total,
                unique8: self.unique8,
                nodes: self.nodes,
            },
            worker: self.worker,
            worker_id: self.worker_id,
            lease: self.lease,
            at_unix: self.at_unix,
            confirmed_by: self.confirmed_by,
            seal: self.seal,
            families: Vec::new(),
        }
    }
}

/// Encodes a counted result in the compact form of store format 4 (one result per entry).
pub fn encode_result(record: &ResultRecord) -> Vec<u8> {
    let mut bytes = vec![COMPACT_V1];
    bytes.extend(
        postcard::to_allocvec(&Compact::of(record)).expect("results serialize to postcard"),
    );
    bytes
}

/// Decodes a stored result of store formats 1 to 4: the compact form, or JSON. Trailing bytes, an
/// unknown tag or a truncated record are damage.
pub fn decode_result(bytes: &[u8]) -> Result<ResultRecord> {
    match bytes.first() {
        Some(&COMPACT_V1) => {
            let damaged = |why: String| Error::Corrupt(format!("undecodable result: {why}"));
            let (c, rest) = postcard::take_from_bytes::<Compact>(&bytes[1..])
                .map_err(|e| damaged(e.to_string()))?;
            if !rest.is_empty() {
                return Err(damaged(format!("{} bytes after the record", rest.len())));
            }
            Ok(c.into_record())
        }
        Some(b'{') => decode_plain("result", bytes),
        Some(tag) => Err(Error::Corrupt(format!(
            "undecodable result: unknown record tag {tag}"
        ))),
        None => Err(Error::Corrupt("undecodable result: empty record".into())),
    }
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether a quarantine from a file can be restored: its worker's name is one the coordinator accepts.
pub fn check_quarantine(q: &Quarantine) -> Result<()> {
    if !nqueens_common::names::valid_worker_id(&q.worker) {
        return Err(Error::Invalid(format!(
            "a quarantine of a bad worker name {:?}",
            q.worker
        )));
    }
    if q.contradicted.len() > MAX_CONTRADICTED {
        return Err(Error::Invalid(format!(
            "a quarantine of {:?} listing {} jobs contradicted, more than {MAX_CONTRADICTED}",
            q.worker,
            q.contradicted.len()
        )));
    }
    Ok(())
}

/// Whether two records of a run describe the same run: created at the same second (run ids start at 1
/// in every store: another store's run of the same id and plan is another run), of the same plan,
/// verifying the same share of it (the fraction decides which jobs need a second result: a store
/// whose record lost it would count their results alone).
pub fn same_run(a: &RunMeta, b: &RunMeta) -> bool {
    (
        a.id,
        a.created_unix,
        a.n,
        a.strategy,
        a.depth,
        a.jobs_total,
        &a.fingerprint,
    ) == (
        b.id,
        b.created_unix,
        b.n,
        b.strategy,
        b.depth,
        b.jobs_total,
        &b.fingerprint,
    ) && same_fraction(a.verify_fraction, b.verify_fraction)
        && a.record == b.record
        && a.max_error.map(f64::to_bits) == b.max_error.map(f64::to_bits)
}

/// Whether two verify fractions are one, read back from two JSON copies (serde_json's float parsing
/// may differ in the last place from the number written; a damaged digit differs by far more).
fn same_fraction(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12
}

/// Whether a revocation line of `worker`'s result (`revoked`, where the line carries it) takes back
/// the result `held`: that very result (its worker, lease and counts), or any of the worker's for a
/// line of the format before it carried its result.
pub fn taken_back(held: &ResultRecord, worker: &str, revoked: Option<&ResultRecord>) -> bool {
    held.worker == worker
        && revoked.is_none_or(|r| r.lease == held.lease && r.result == held.result)
}

#[cfg(test)]
mod fraction_tests {
    use super::same_fraction;

    /// Two JSON copies of one fraction may differ in the last place; a damaged digit differs by far
    /// more, and is another fraction.
    #[test]
    fn fractions_are_one_within_the_last_place_only() {
        let f = 0.1f64;
        let next = f64::from_bits(f.to_bits() + 1);
        assert!(same_fraction(f, f) && same_fraction(f, next) && same_fraction(0.0, 0.0));
        assert!(
            !same_fraction(0.25, 0.05) && !same_fraction(0.01, 0.0) && !same_fraction(1.0, 0.9)
        );
        assert!(
            !same_fraction(1e-9, 0.0),
            "one job in a billion differs from none"
        );
    }
}
