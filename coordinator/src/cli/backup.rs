//! `nqueens export`, `nqueens import` and `nqueens audit`: backups of a store as JSON lines (the ledger's
//! format), a store rebuilt from them, and the offline check of a store and its ledger. All three work on
//! a data directory whose coordinator is stopped (the store is locked while one runs; the ledger,
//! `DATA/results.jsonl`, can be copied at any time).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use nqueens_common::JobKey;
use serde::Serialize;

use crate::ledger::{self, Entry, LEDGER_FILE};
use crate::store::{JobState, ResultRecord, Store};

/// Results restored per transaction.
const RESTORE_BATCH: usize = 4096;

/// Arguments of `nqueens export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The store's directory (default: as for `serve`).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Only this run (default: every run).
    #[arg(long)]
    pub run: Option<u64>,
    /// Write to this file (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Arguments of `nqueens import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The directory of the store to build (new, or without runs of the same ids).
    #[arg(long)]
    pub data: PathBuf,
    /// An export, or a ledger (`results.jsonl`).
    pub file: PathBuf,
}

/// Arguments of `nqueens audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The store's directory (default: as for `serve`).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// One JSON object per run.
    #[arg(long)]
    pub json: bool,
}

fn data_dir(data: &Option<PathBuf>) -> PathBuf {
    data.clone()
        .unwrap_or_else(nqueens_worker::setup::default_data_dir)
}

/// Opens an existing store (never creates one).
fn open_existing(dir: &Path) -> anyhow::Result<Store> {
    if !dir.join("db").exists() {
        anyhow::bail!("{} holds no nqueens store", dir.display());
    }
    Ok(Store::open(dir)?)
}

/// Writes the export.
pub fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let store = open_existing(&data_dir(&args.data))?;
    if let Some(run) = args.run {
        if store.run(run)?.is_none() {
            anyhow::bail!("no run {run} in this store");
        }
    }
    let results = match &args.out {
        Some(path) => {
            let mut out = std::io::BufWriter::new(File::create(path)?);
            let n = ledger::export(&store, args.run, &mut out)?;
            out.into_inner()?.sync_all()?;
            n
        }
        None => ledger::export(&store, args.run, &mut std::io::stdout().lock())?,
    };
    eprintln!("exported {results} results");
    Ok(())
}

/// Rebuilds a store from an export or a ledger, then audits it.
pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data)?;
    let store = Store::open(&args.data)?;
    let mut pending: Vec<(JobKey, ResultRecord)> = Vec::new();
    let mut current: Option<u64> = None;
    let (mut runs, mut results) = (0u64, 0u64);
    let flush = |run: Option<u64>, pending: &mut Vec<(JobKey, ResultRecord)>| {
        let added = match run {
            Some(run) if !pending.is_empty() => store.restore_results(run, pending)?,
            _ => 0,
        };
        pending.clear();
        Ok::<_, crate::Error>(added)
    };
    let torn = ledger::read(File::open(&args.file)?, &args.file, |entry| {
        match entry {
            Entry::Run(meta) => {
                results += flush(current, &mut pending)?;
                store.restore_run(&meta)?;
                current = Some(meta.id);
                runs += 1;
            }
            Entry::Result { run, job, record } => {
                if current != Some(run) {
                    results += flush(current, &mut pending)?;
                    current = Some(run);
                }
                pending.push((job.parse()?, record));
                if pending.len() >= RESTORE_BATCH {
                    results += flush(current, &mut pending)?;
                }
            }
            Entry::Revoked { run, job, worker } => {
                results += flush(current, &mut pending)?;
                if store.restore_revocation(run, &job.parse()?, &worker)? {
                    results -= 1;
                }
            }
        }
        Ok(())
    })?;
    results += flush(current, &mut pending)?;
    if torn.is_some() {
        eprintln!("skipped a torn last line");
    }
    store.flush()?;
    let lines = store.audit()?;
    // The new store's own ledger starts as a copy of what it holds.
    drop(store);
    let store = Store::open(&args.data)?;
    crate::ledger::Ledger::open(&args.data.join(LEDGER_FILE), &store)?;
    eprintln!(
        "imported {runs} runs and {results} results into {}; audit passed for {} runs",
        args.data.display(),
        lines.len()
    );
    Ok(())
}

/// One run's line of `audit --json`.
#[derive(Debug, Serialize)]
struct AuditOutput {
    run: u64,
    n: u8,
    strategy: String,
    state: String,
    jobs_done: u64,
    jobs_total: u64,
    jobs_failed: u64,
    total: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    unique: Option<String>,
    /// Results of the run in the ledger that agree with the store.
    ledger_results: u64,
    /// Results in the ledger the store lacks (never acknowledged: they are computed again).
    ledger_extra: u64,
}

/// Checks a store offline: totals against results, job states, and the ledger against the store.
pub fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let dir = data_dir(&args.data);
    let store = open_existing(&dir)?;
    let lines = store.audit()?;
    let path = dir.join(LEDGER_FILE);
    // The ledger's results as of its end: a later revocation takes an earlier result back.
    let mut logged: HashMap<(u64, JobKey), ResultRecord> = HashMap::new();
    let mut logged_runs: HashSet<u64> = HashSet::new();
    if !path.exists() {
        anyhow::bail!("{} has no ledger ({LEDGER_FILE})", dir.display());
    }
    ledger::read(File::open(&path)?, &path, |entry| {
        match entry {
            Entry::Run(meta) => {
                logged_runs.insert(meta.id);
            }
            Entry::Result { run, job, record } => {
                let key: JobKey = job.parse()?;
                if let Some(earlier) = logged.get(&(run, key.clone())) {
                    if earlier.result != record.result {
                        return Err(crate::Error::Corrupt(format!(
                            "run {run} job {job}: the ledger holds two different results ({:?} and {:?})",
                            earlier.result, record.result
                        )));
                    }
                }
                logged.insert((run, key), record);
            }
            Entry::Revoked { run, job, worker } => {
                let key: JobKey = job.parse()?;
                if logged
                    .get(&(run, key.clone()))
                    .is_some_and(|r| r.worker == worker)
                {
                    logged.remove(&(run, key));
                }
            }
        }
        Ok(())
    })?;
    // Per run: results the ledger and the store agree on, and results only the ledger holds.
    let mut agreed: HashMap<u64, u64> = HashMap::new();
    let mut extra: HashMap<u64, u64> = HashMap::new();
    for ((run, key), record) in logged {
        match store.result(run, &key)? {
            Some(stored) if stored.result == record.result => {
                *agreed.entry(run).or_insert(0) += 1;
            }
            Some(stored) => anyhow::bail!(
                "run {run} job {key}: the ledger says {:?}, the store {:?}",
                record.result,
                stored.result
            ),
            None => *extra.entry(run).or_insert(0) += 1,
        }
    }
    let mut out = std::io::stdout().lock();
    for line in lines {
        let meta = store
            .run(line.run)?
            .ok_or_else(|| anyhow::anyhow!("run {} vanished", line.run))?;
        let in_ledger = agreed.get(&line.run).copied().unwrap_or(0);
        if in_ledger != line.tally.jobs || !logged_runs.contains(&line.run) {
            anyhow::bail!(
                "run {}: the store holds {} results but the ledger only {in_ledger}{}",
                line.run,
                line.tally.jobs,
                if logged_runs.contains(&line.run) {
                    ""
                } else {
                    " and not the run"
                }
            );
        }
        let failed = store
            .job_states(line.run)?
            .get(&JobState::Failed)
            .copied()
            .unwrap_or(0);
        let report = AuditOutput {
            run: line.run,
            n: meta.n,
            strategy: meta.strategy.to_string(),
            state: meta.phase(line.tally.jobs, failed).to_string(),
            jobs_done: line.tally.jobs,
            jobs_total: meta.jobs_total,
            jobs_failed: failed,
            total: line.tally.total.to_string(),
            unique: meta
                .is_done()
                .then(|| line.tally.unique().ok().flatten())
                .flatten()
                .map(|u| u.to_string()),
            ledger_results: in_ledger,
            ledger_extra: extra.get(&line.run).copied().unwrap_or(0),
        };
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&report)?)?;
        } else {
            writeln!(
                out,
                "run {}: N = {} {} {}, {}/{} jobs, total {}{}: audit passed (totals = sum of {} results; ledger agrees{})",
                report.run,
                report.n,
                report.strategy,
                report.state,
                report.jobs_done,
                report.jobs_total,
                report.total,
                report.unique.as_deref().map(|u| format!(", {u} unique")).unwrap_or_default(),
                report.jobs_done,
                if report.ledger_extra > 0 {
                    format!("; it also holds {} unacknowledged results", report.ledger_extra)
                } else {
                    String::new()
                }
            )?;
        }
    }
    Ok(())
}
