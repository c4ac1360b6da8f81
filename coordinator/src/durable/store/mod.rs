//! The job store: runs, job states, results and totals in sled, in separate trees.
//!
//! - `runs`: run id -> [`RunMeta`]; `totals`: run id -> [`Tally`] (exact u128 sums);
//! - `result_groups`: run id ++ job key but its last number -> the counted results of those done jobs
//!   ([`ResultRecord`]s, compact, grouped: see [`groups`]); `jobs`: run id ++ job key -> [`JobRecord`]
//!   for the jobs neither pending nor done (verified jobs waiting for agreement, failed jobs). A job
//!   with neither is pending (store formats 1 to 4 kept one result per entry in a `results` tree, which
//!   the migration regroups and drops); `workers`: the numbers by which stored results name their
//!   workers ([`workers`]);
//! - `quarantine`: worker name -> [`Quarantine`] (workers that reported a result others disproved);
//!   `lifted`: the same, for quarantines the rule lifted because their deciders were disproved
//!   ([`lifts`]); `challenges`: a held checker's further contradictions of confirmed counts, disputed
//!   one at a time ([`challenges`]);
//! - `meta`: the next run id, the coordinator's epoch (drawn at random for a new store, then
//!   incremented at every open, so that lease ids of an earlier incarnation, or of a store this one
//!   replaced, are recognisable), the store's format version (and, while a migration is
//!   under way, the format it started from), and the lease secret (128 random bits made with the
//!   store, which authenticate lease ids across incarnations); and the spot checks each identity
//!   passed ([`passes`]).
//!
//! Every result record carries the seal its worker computed ([`nqueens_common::checksum`]); every read
//! that can reach a total checks it. Every other record carries a CRC-64 of its own (store format 6),
//! checked on every read.
//!
//! A job's pending list is never stored: it is the plan's deterministic job list minus the jobs with a
//! record, so the store grows with results, not with the size of the plan. Results are committed by
//! [`Store::commit`] in one transaction over all four trees; callers flush before acknowledging.

mod audit;
mod challenges;
mod changed;
mod commit;
mod control;
mod drawn;
mod epochs;
mod groups;
mod handbacks;
mod lifts;
mod passes;
mod roots;
mod take_back;
mod take_up;
pub use roots::StoredRoot;
pub(crate) mod records;
mod repair;
mod restore;
mod revoke;
mod revoked;
mod txn;
mod workers;

pub use audit::{AuditLine, Survey};
pub use changed::{Committed, Moved, Outcome, Revoked};
pub use commit::{Incoming, MAX_CANDIDATES};
pub use control::{Control, JobListing, ListedJob};
pub use drawn::{Drawn, Sides};
pub use handbacks::HandBack;
pub use lifts::Lifts;
pub use records::{
    check_quarantine, now_unix, same_run, taken_back, Checks, JobRecord, JobState, Phase,
    Quarantine, ResultRecord, RunMeta, RunOptions,
};
pub use revoke::Revocation;

use std::collections::HashMap;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nqueens_common::{JobKey, Plan, Tally};
use sled::transaction::{ConflictableTransactionError, Transactional};

use crate::error::{Error, Result};
use records::{decode, encode, job_key, run_key};

pub(crate) const NEXT_RUN: &[u8] = b"next_run";
const EPOCH: &[u8] = b"epoch";
const LEASE_SECRET: &[u8] = b"lease_secret";
const FORMAT: &[u8] = b"format";
/// Present while a migration is under way: the format it started from.
const UPGRADE: &[u8] = b"upgrade_from";
/// The tree of grouped results (store format 5).
const RESULT_GROUPS: &str = "result_groups";
/// The tree of single results of store formats 1 to 4 (the migration to 5 empties and drops it).
const LEGACY_RESULTS: &str = "results";

/// The store's format version (8: checked JSON records beside grouped, compact results that name their
/// kernel families; hand-backs a bit per lease id). Earlier versions, and how [`Store::open`] migrates
/// them: `docs/formats.md`.
pub const FORMAT_VERSION: u64 = 8;

/// The refusal of a store written by a newer build (format `format`).
fn newer_format(format: u64) -> Error {
    Error::Corrupt(format!(
        "the store has format {format}, newer than this build's {FORMAT_VERSION}: run it with a newer nqueens"
    ))
}

/// Epochs fit the 24 bits a lease id gives them.
const EPOCH_LIMIT: u64 = 1 << 24;

/// The epoch of a store's next incarnation, after `last` (`None`: a new store). A new store's first is
/// drawn at random from 1 to 2^20: a store rebuilt from its ledger or an export starts anew, and its
/// lease ids must not repeat those of the store it replaces (workers may still hold and journal them).
/// Past 2^24 - 1 (16 million restarts) it wraps to 1.
fn next_epoch(last: Option<u64>) -> Result<u64> {
    match last {
        Some(e) if e < EPOCH_LIMIT - 1 => Ok(e + 1),
        Some(_) => Ok(1),
        None => {
            let mut bytes = [0u8; 4];
            getrandom::fill(&mut bytes).map_err(|e| {
                Error::Durability(format!("no randomness for the first epoch: {e}"))
            })?;
            Ok(1 + u64::from(u32::from_be_bytes(bytes) % (1 << 20)))
        }
    }
}

/// The coordinator's persistent state.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    runs: sled::Tree,
    jobs: sled::Tree,
    /// The `result_groups` tree.
    results: sled::Tree,
    /// Worker names by number.
    workers: sled::Tree,
    totals: sled::Tree,
    quarantine: sled::Tree,
    /// Quarantines the rule lifted ([`lifts`]).
    lifted: sled::Tree,
    /// Held checkers' further contradictions ([`challenges`]).
    challenges: sled::Tree,
    /// Leases handed back, a bit each ([`handbacks`]).
    handed_back_bits: sled::Tree,
    /// Counts a revocation took back ([`revoked`]).
    revoked_counts: sled::Tree,
    meta: sled::Tree,
    epoch: u64,
    lease_secret: [u8; 16],
    /// Where it lives on disk (`None`: a temporary store).
    dir: Option<PathBuf>,
}

/// sled's page cache (its default is 1 GiB): a record-size run's store is many times larger, and reads
/// at startup stream through it, so the cache bounds the coordinator's memory, not the store's size.
/// sled holds about twice this in practice: at 8 million results, a restart peaked at 822 MB resident
/// with 256 MiB and 436 MB with 64 MiB, as fast within noise, and commits as fast (BENCHMARKS.md).
pub const CACHE_BYTES: u64 = 64 << 20;

impl Store {
    /// Opens (or creates) the store in `dir` and starts a new epoch.
    pub fn open(dir: &Path) -> Result<Store> {
        let mut store = Store::with_db(open_db(dir)?)?;
        store.dir = Some(dir.to_path_buf());
        Ok(store)
    }

    /// [`Store::open`], waiting up to `wait` for the lock of a store just let go of in this process
    /// (sled's threads hold it a moment after the last handle is dropped); another holder past that
    /// is [`Error::InUse`].
    pub fn open_when_free(dir: &Path, wait: std::time::Duration) -> Result<Store> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            match Store::open(dir) {
                Err(Error::InUse(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                opened => return opened,
            }
        }
    }

    /// Opens the store in `dir` to look at it only (`nqueens audit`, `export`): no new epoch, no repair,
    /// no migration; a store of an earlier format (or one whose migration is unfinished) is refused,
    /// since bringing it up to date would keep the build that wrote it from reading it back.
    pub fn inspect(dir: &Path) -> Result<Store> {
        let db = open_db(dir)?;
        let meta = db.open_tree("meta")?;
        let format = read_u64(&meta, FORMAT)?;
        let upgrading = meta.get(UPGRADE)?.is_some();
        let empty = db.open_tree("runs")?.is_empty();
        match format {
            Some(FORMAT_VERSION) if !upgrading => {}
            None if empty => {}
            other => {
                let format = other.unwrap_or(1);
                let unfinished = if upgrading {
                    ", its migration unfinished"
                } else {
                    ""
                };
                return Err(Error::Corrupt(format!(
                    "the store has format {format}{unfinished} (this build reads format {FORMAT_VERSION}): start this build's coordinator on it once to bring it up to date (the build that wrote it cannot read it back then), or look at it with the build that wrote it"
                )));
            }
        }
        let epoch = read_u64(&meta, EPOCH)?.unwrap_or(0);
        // Only leases use the secret; a store that has none yet keeps none.
        let lease_secret = meta
            .get(LEASE_SECRET)?
            .and_then(|v| <[u8; 16]>::try_from(v.as_ref()).ok())
            .unwrap_or_default();
        let mut store = Store::with_trees(db, meta, epoch, lease_secret)?;
        store.dir = Some(dir.to_path_buf());
        Ok(store)
    }

    /// The store's directory (`None` for a temporary store).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// A store that lives in memory and a temporary directory (tests).
    pub fn temporary() -> Result<Store> {
        Store::with_db(sled::Config::new().temporary(true).open()?)
    }

    fn with_db(db: sled::Db) -> Result<Store> {
        let meta = db.open_tree("meta")?;
        // A newer build's store is refused before anything of it changes (its epoch, its trees).
        if let Some(format) = read_u64(&meta, FORMAT)? {
            if format > FORMAT_VERSION {
                return Err(newer_format(format));
            }
        }
        let epoch = next_epoch(read_u64(&meta, EPOCH)?)?;
        meta.insert(EPOCH, &epoch.to_be_bytes())?;
        let lease_secret = match meta.get(LEASE_SECRET)? {
            Some(v) => <[u8; 16]>::try_from(v.as_ref())
                .map_err(|_| Error::Corrupt("the lease secret is not 16 bytes".into()))?,
            None => {
                let mut secret = [0u8; 16];
                getrandom::fill(&mut secret).map_err(|e| {
                    Error::Durability(format!("no randomness for the lease secret: {e}"))
                })?;
                meta.insert(LEASE_SECRET, &secret)?;
                secret
            }
        };
        db.flush()?;
        let store = Store::with_trees(db, meta, epoch, lease_secret)?;
        store.put_epoch_start(epoch, now_unix())?;
        workers::repair_next(&store.workers)?;
        store.migrate()?;
        store.repair_next_run()?;
        Ok(store)
    }

    fn with_trees(
        db: sled::Db,
        meta: sled::Tree,
        epoch: u64,
        lease_secret: [u8; 16],
    ) -> Result<Store> {
        Ok(Store {
            runs: db.open_tree("runs")?,
            jobs: db.open_tree("jobs")?,
            results: db.open_tree(RESULT_GROUPS)?,
            workers: db.open_tree("workers")?,
            totals: db.open_tree("totals")?,
            quarantine: db.open_tree("quarantine")?,
            lifted: db.open_tree(lifts::LIFTED)?,
            challenges: db.open_tree(challenges::CHALLENGES)?,
            handed_back_bits: db.open_tree(handbacks::HANDED_BACK_BITS)?,
            revoked_counts: db.open_tree(revoked::TAKEN_BACK)?,
            meta,
            db,
            epoch,
            lease_secret,
            dir: None,
        })
    }

    /// The trees a change to results and totals touches, for one transaction: runs, jobs, result
    /// groups, workers, totals.
    fn result_trees(
        &self,
    ) -> (
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
    ) {
        (
            &self.runs,
            &self.jobs,
            &self.results,
            &self.workers,
            &self.totals,
        )
    }

    /// The trees a commit touches, for one transaction: those of [`Store::result_trees`], then the
    /// quarantines, the kept contradictions and the notes of counts taken back ([`revoked`]).
    #[allow(clippy::type_complexity)]
    fn commit_trees(
        &self,
    ) -> (
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
        &sled::Tree,
    ) {
        let (runs, jobs, results, workers, totals) = self.result_trees();
        (
            runs,
            jobs,
            results,
            workers,
            totals,
            &self.quarantine,
            &self.challenges,
            &self.revoked_counts,
        )
    }

    /// Makes the next run id greater than every run's (it may have been lost or damaged: a run created
    /// with an id in use would overwrite one); run at every open, before any run is created.
    fn repair_next_run(&self) -> Result<()> {
        let highest = self
            .runs
            .iter()
            .keys()
            .filter_map(|k| k.ok())
            .filter_map(|k| records::run_of_key(&k))
            .max();
        let Some(highest) = highest else {
            return Ok(());
        };
        let want = highest.saturating_add(1);
        let have = read_u64(&self.meta, NEXT_RUN).ok().flatten();
        if have.is_some_and(|h| h >= want) {
            return Ok(());
        }
        tracing::error!(have = ?have, set = want, place = "store", "the next run id was missing, damaged or behind a run's: set past the highest");
        self.meta.insert(NEXT_RUN, &want.to_be_bytes())?;
        Ok(())
    }

    /// The secret that authenticates this store's lease ids.
    pub fn lease_secret(&self) -> [u8; 16] {
        self.lease_secret
    }

    /// This incarnation's epoch (drawn at random for a new store, then one more at every open).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Creates a run for `plan`, durably, and returns it. `verify_fraction` of its jobs (0 to 1) are
    /// computed twice.
    pub fn create_run(&self, plan: Plan, verify_fraction: f64) -> Result<RunMeta> {
        self.create_run_cancellable(plan, verify_fraction, 0, Arc::default())
    }

    /// [`Store::create_run`] at `priority`, whose enumeration of the plan ends early once `cancel` is
    /// set.
    pub fn create_run_cancellable(
        &self,
        plan: Plan,
        verify_fraction: f64,
        priority: i32,
        cancel: Arc<AtomicBool>,
    ) -> Result<RunMeta> {
        check_verify_fraction(verify_fraction)?;
        let (jobs_total, fingerprint) =
            plan.fingerprint_cancellable(nqueens_common::partition::MAX_JOBS, [cancel])?;
        let options = RunOptions {
            verify_fraction,
            priority,
            ..RunOptions::default()
        };
        let meta = self.insert_run(plan, jobs_total, fingerprint, options)?;
        self.flush()?;
        Ok(meta)
    }

    /// Records a run of `plan`, whose job count and fingerprint the caller computed, without the flush
    /// (the committer makes it durable with its round). A `record` run verifies every job.
    pub fn insert_run(
        &self,
        plan: Plan,
        jobs_total: u64,
        fingerprint: u64,
        options: RunOptions,
    ) -> Result<RunMeta> {
        let RunOptions {
            verify_fraction,
            priority,
            record,
            max_error,
        } = options;
        check_verify_fraction(verify_fraction)?;
        if let Some(e) = max_error {
            nqueens_common::bound::check_max_error(e).map_err(Error::Invalid)?;
        }
        if record && verify_fraction < 1.0 {
            return Err(Error::Invalid(format!(
                "a record run verifies every job, not {verify_fraction}"
            )));
        }
        let strategy = plan.strategy();
        let with_unique = strategy == nqueens_common::Strategy::D4;
        let meta = (&self.meta, &self.runs, &self.totals).transaction(|(meta, runs, totals)| {
            let id = match meta.get(NEXT_RUN)? {
                Some(v) => u64::from_be_bytes(v.as_ref().try_into().map_err(|_| {
                    ConflictableTransactionError::Abort(Error::Corrupt("next_run".into()))
                })?),
                None => 1,
            };
            let next = id.checked_add(1).ok_or_else(|| {
                ConflictableTransactionError::Abort(Error::Corrupt("run ids exhausted".into()))
            })?;
            meta.insert(NEXT_RUN, &next.to_be_bytes())?;
            let run = RunMeta {
                id,
                n: plan.n(),
                strategy,
                depth: plan.depth(),
                jobs_total,
                fingerprint: format!("{fingerprint:016x}"),
                created_unix: now_unix(),
                // A plan without jobs (N = 2 and 3 have no solutions) is finished at once: its
                // totals, zero, are final. Left unfinished, it would wait forever for a last job.
                finished_unix: (jobs_total == 0).then(now_unix),
                verify_fraction,
                paused: false,
                cancelled_unix: None,
                priority,
                checks: Checks::Keyed,
                record,
                max_error,
            };
            runs.insert(&run_key(id), encode(&run))?;
            totals.insert(&run_key(id), encode(&Tally::new(with_unique)))?;
            Ok(run)
        })?;
        Ok(meta)
    }

    /// Every run, oldest first.
    pub fn runs(&self) -> Result<Vec<RunMeta>> {
        self.runs
            .iter()
            .values()
            .map(|v| decode("run", &v?))
            .collect()
    }

    /// The runs whose records can be read, each under its own id; one damaged on disk is passed by
    /// (the start's mending, [`Store::mend_records`], deals with it).
    pub fn readable_runs(&self) -> Result<Vec<RunMeta>> {
        let mut runs = Vec::new();
        for kv in self.runs.iter() {
            let (k, v) = kv?;
            if let Ok(meta) = decode::<RunMeta>("run", &v) {
                if k.as_ref() == run_key(meta.id) {
                    runs.push(meta);
                }
            }
        }
        Ok(runs)
    }

    /// One run, if it exists.
    pub fn run(&self, id: u64) -> Result<Option<RunMeta>> {
        self.runs
            .get(run_key(id))?
            .map(|v| decode("run", &v))
            .transpose()
    }

    /// A run's stored totals.
    pub fn tally(&self, run: u64) -> Result<Tally> {
        let v = self
            .totals
            .get(run_key(run))?
            .ok_or_else(|| Error::Corrupt(format!("run {run} has no totals")))?;
        decode("totals", &v)
    }

    /// Whether a job is settled for good: done or failed.
    pub fn is_settled(&self, run: u64, key: &JobKey) -> Result<bool> {
        Ok(self
            .job(run, key)?
            .is_some_and(|r| matches!(r.state, JobState::Done | JobState::Failed)))
    }

    /// A job's record (`None`: pending). A done job has its result and no record of its own (store
    /// format 4); it is given as a `done` record.
    pub fn job(&self, run: u64, key: &JobKey) -> Result<Option<JobRecord>> {
        let k = job_key(run, key);
        // The record first: a commit that confirms a verified job drops its record and writes its
        // result at once, so read in this order a job being confirmed meanwhile is seen open or done,
        // never pending.
        if let Some(v) = self.jobs.get(&k)? {
            return Ok(Some(decode("job", &v)?));
        }
        Ok(groups::contains(&self.results, run, key)?.then(JobRecord::done))
    }

    /// How many of a run's jobs are in each open or failed state (done jobs are counted by the run's
    /// totals, pending jobs not at all).
    pub fn job_states(&self, run: u64) -> Result<HashMap<JobState, u64>> {
        let mut counts = HashMap::new();
        for kv in self.jobs.scan_prefix(run_key(run)) {
            let (_, v) = kv?;
            let record: JobRecord = decode("job", &v)?;
            *counts.entry(record.state).or_insert(0) += 1;
        }
        Ok(counts)
    }

    /// Puts every failed job of the runs `which` picks back to pending (their recorded results are
    /// dropped); returns how many. Durable on return.
    pub fn retry_failed(&self, which: impl Fn(&RunMeta) -> bool) -> Result<u64> {
        let runs: std::collections::HashSet<u64> = self
            .runs()?
            .into_iter()
            .filter(|m| which(m))
            .map(|m| m.id)
            .collect();
        let mut n = 0;
        for kv in self.jobs.iter() {
            let (k, v) = kv?;
            if !runs.contains(&records::split_job_key(&k)?.0) {
                continue;
            }
            let record: JobRecord = decode("job", &v)?;
            if record.state == JobState::Failed {
                self.jobs.remove(k)?;
                n += 1;
            }
        }
        self.flush()?;
        Ok(n)
    }

    /// Puts the failed jobs of run `run` back to pending (their recorded results are dropped); returns
    /// their keys. Not flushed: the committer makes it durable with its round.
    pub fn retry_failed_of(&self, run: u64) -> Result<Vec<JobKey>> {
        let mut keys = Vec::new();
        for kv in self.jobs.scan_prefix(run_key(run)) {
            let (k, v) = kv?;
            let record: JobRecord = decode("job", &v)?;
            if record.state == JobState::Failed {
                // Removed only if unchanged since it was read (no other writer: the committer alone).
                if self
                    .jobs
                    .compare_and_swap(&k, Some(&v), None as Option<&[u8]>)?
                    .is_ok()
                {
                    keys.push(records::split_job_key(&k)?.1);
                }
            }
        }
        Ok(keys)
    }

    /// The quarantined workers, by name.
    pub fn quarantined(&self) -> Result<Vec<Quarantine>> {
        self.quarantine
            .iter()
            .values()
            .map(|v| decode("quarantine", &v?))
            .collect()
    }

    /// The names of the quarantined workers, their records readable or not (a start mends a damaged
    /// record and keeps its worker quarantined).
    pub fn quarantine_keys(&self) -> Result<std::collections::HashSet<String>> {
        self.quarantine
            .iter()
            .keys()
            .map(|k| Ok(String::from_utf8_lossy(&k?).into_owned()))
            .collect()
    }

    /// Lets a quarantined worker lease again; returns whether it was quarantined. Durable on return.
    /// An operator's release is final: the worker's record goes, and the rule never puts it back; so
    /// do the contradictions kept for it ([`challenges`]).
    pub fn release_quarantine(&self, name: &str) -> Result<bool> {
        self.lifted.remove(name.as_bytes())?;
        self.challenges.remove(name.as_bytes())?;
        let released = self.quarantine.remove(name.as_bytes())?.is_some();
        self.flush()?;
        Ok(released)
    }

    /// Stores the quarantine `q` as it is (the operator's: `serve --quarantine`), replacing any record
    /// of its worker, and forgets a lift the rule made of it: no rule lifts a quarantine that names no
    /// decider. Durable on return.
    pub fn put_quarantine(&self, q: &Quarantine) -> Result<()> {
        records::check_quarantine(q)?;
        self.lifted.remove(q.worker.as_bytes())?;
        if !q.held {
            // Whole, it takes nothing up ([`challenges`]).
            self.challenges.remove(q.worker.as_bytes())?;
        }
        self.quarantine.insert(q.worker.as_bytes(), encode(q))?;
        self.flush()
    }

    /// A job's accepted result, if any.
    pub fn result(&self, run: u64, key: &JobKey) -> Result<Option<ResultRecord>> {
        groups::get(&self.results, &self.workers, run, key)
    }

    /// A run's accepted results, in key order.
    pub fn results(&self, run: u64) -> impl Iterator<Item = Result<(JobKey, ResultRecord)>> {
        self.results_raw(run)
            .map(|item| item.and_then(|(key, record)| Ok((key, record?))))
    }

    /// Makes everything written so far durable (fsync).
    pub fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

/// A run's verify fraction must lie in 0 to 1.
pub fn check_verify_fraction(verify_fraction: f64) -> Result<()> {
    if (0.0..=1.0).contains(&verify_fraction) {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "verify fraction {verify_fraction} is out of range: 0 to 1"
        )))
    }
}

/// Opens sled in `dir`; another process holding it is [`Error::InUse`].
fn open_db(dir: &Path) -> Result<sled::Db> {
    sled::Config::new()
        .path(dir)
        .cache_capacity(CACHE_BYTES)
        .open()
        .map_err(|e| match e {
            sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
                Error::InUse(dir.display().to_string())
            }
            other => Error::Store(other),
        })
}

fn read_u64(tree: &sled::Tree, key: &[u8]) -> Result<Option<u64>> {
    tree.get(key)?
        .map(|v| {
            v.as_ref().try_into().map(u64::from_be_bytes).map_err(|_| {
                Error::Corrupt(format!("{} is not a u64", String::from_utf8_lossy(key)))
            })
        })
        .transpose()
}

#[cfg(test)]
pub(crate) mod tests;
