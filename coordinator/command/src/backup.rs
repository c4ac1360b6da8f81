//! `nqueens export`, `nqueens import` and `nqueens audit`: backups of a store as JSON lines (the ledger's
//! format), a store rebuilt from them, and the offline check of a store and its ledger. All three work on
//! a data directory whose coordinator is stopped (the store is locked while one runs; the ledger,
//! `DATA/results.jsonl`, can be copied at any time).

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use nqueens_common::JobKey;
use serde::Serialize;

use nqueens_coordinator::ledger::{self, LedgerView, LEDGER_FILE};
use nqueens_coordinator::store::{JobState, ResultRecord, Store};

/// Results restored per transaction.
const RESTORE_BATCH: usize = 4096;

/// Arguments of `nqueens export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The store's directory (default: $NQUEENS_DATA, else $XDG_DATA_HOME/nqueens, else
    /// ~/.local/share/nqueens, else ./nqueens-data when HOME is unset too).
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
    /// The store's directory (default: $NQUEENS_DATA, else $XDG_DATA_HOME/nqueens, else
    /// ~/.local/share/nqueens, else ./nqueens-data when HOME is unset too).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// One JSON object per run.
    #[arg(long)]
    pub json: bool,
}

fn data_dir(data: &Option<PathBuf>) -> PathBuf {
    data.clone().unwrap_or_else(crate::setup::default_data_dir)
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

/// Rebuilds a store from an export or a ledger, then audits it. Every line's checksum and every result's
/// seal is checked first: a file with damaged lines is refused, naming them, and nothing is imported.
pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    let view = LedgerView::read(&args.file)?;
    if let Some(first) = view.damaged.first() {
        anyhow::bail!(
            "{} has {} damaged lines (first: {first}); nothing imported. Import a backup, or start a coordinator on the damaged ledger's own data directory (it repairs from the store)",
            args.file.display(),
            view.damaged.len()
        );
    }
    if view.legacy > 0 {
        eprintln!(
            "{} lines are of the format before checksums: they cannot be verified",
            view.legacy
        );
    }
    std::fs::create_dir_all(&args.data)?;
    let store = Store::open(&args.data)?;
    let mut results = 0u64;
    for meta in view.runs.values() {
        store.restore_run(meta)?;
        let batch: Vec<(JobKey, ResultRecord)> = view.results[&meta.id]
            .iter()
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        for chunk in batch.chunks(RESTORE_BATCH) {
            results += store.restore_results(meta.id, chunk)?;
        }
    }
    if view.torn {
        eprintln!("skipped a torn last line");
    }
    store.flush()?;
    let lines = store.audit()?;
    // The new store's own ledger starts as a copy of what it holds.
    nqueens_coordinator::ledger::rewrite(&args.data.join(LEDGER_FILE), &store)?;
    eprintln!(
        "imported {} runs and {results} results into {}; audit passed for {} runs",
        view.runs.len(),
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
    /// Results of the run in the ledger (each agrees with the store's).
    ledger_results: u64,
}

/// Checks a store offline: totals against results, job states, and the ledger against the store.
pub fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let dir = data_dir(&args.data);
    let store = open_existing(&dir)?;
    let lines = store.audit()?;
    let path = dir.join(LEDGER_FILE);
    if !path.exists() {
        anyhow::bail!("{} has no ledger ({LEDGER_FILE})", dir.display());
    }
    // Both ways: every result of the store is in the ledger and every result of the ledger in the store.
    let view = LedgerView::read(&path)?;
    if let Some(first) = view.damaged.first() {
        anyhow::bail!(
            "the ledger has {} damaged lines (first: {first}); start the coordinator to repair it from the store",
            view.damaged.len()
        );
    }
    let mut agreed: HashMap<u64, u64> = HashMap::new();
    for meta in store.runs()? {
        if !view.runs.contains_key(&meta.id) {
            anyhow::bail!(
                "run {}: the store holds it but the ledger does not",
                meta.id
            );
        }
        let diff = ledger::compare(&store, &meta, &view)?;
        if !diff.is_empty() {
            anyhow::bail!(
                "run {}: the store and the ledger disagree: {} results only in the store, {} only in the ledger, {} different, {} damaged in the store; start the coordinator to reconcile them",
                meta.id,
                diff.store_only.len(),
                diff.ledger_only.len(),
                diff.conflicting.len(),
                diff.damaged.len()
            );
        }
        agreed.insert(meta.id, view.count(meta.id));
    }
    if let Some(id) = view.runs.keys().find(|id| !agreed.contains_key(id)) {
        anyhow::bail!("run {id}: the ledger holds it but the store does not; start the coordinator to restore it");
    }
    let mut out = std::io::stdout().lock();
    for line in lines {
        let meta = store
            .run(line.run)?
            .ok_or_else(|| anyhow::anyhow!("run {} vanished", line.run))?;
        let in_ledger = agreed.get(&line.run).copied().unwrap_or(0);
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
        };
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&report)?)?;
        } else {
            writeln!(
                out,
                "run {}: N = {} {} {}, {}/{} jobs, total {}{}: audit passed (totals = sum of {} sealed results; the ledger holds exactly the same {} results)",
                report.run,
                report.n,
                report.strategy,
                report.state,
                report.jobs_done,
                report.jobs_total,
                report.total,
                report.unique.as_deref().map(|u| format!(", {u} unique")).unwrap_or_default(),
                report.jobs_done,
                report.ledger_results
            )?;
        }
    }
    Ok(())
}
