//! `nqueens export`, `nqueens import` and `nqueens audit`: backups of a store as JSON lines (the ledger's
//! format), a store rebuilt from them, and the offline check of a store and its ledger. All three work on
//! a data directory whose coordinator is stopped (the store is locked while one runs; the ledger,
//! `DATA/results.jsonl`, can be copied at any time).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use nqueens_coordinator::durable::ledger::{self, LedgerView, LEDGER_FILE};
use nqueens_coordinator::durable::offline;
use nqueens_coordinator::durable::store::{JobState, Store};

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
    /// Import results that nothing can verify (lines of the format before checksums, without a seal)
    /// instead of refusing the file.
    #[arg(long)]
    pub accept_unchecked: bool,
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

pub(crate) fn data_dir(data: &Option<PathBuf>) -> PathBuf {
    data.clone().unwrap_or_else(crate::setup::default_data_dir)
}

/// Opens an existing store to look at it (never creates one, nor changes it: see [`Store::inspect`]).
pub(crate) fn open_existing(dir: &Path) -> anyhow::Result<Store> {
    if !dir.join("db").exists() {
        anyhow::bail!("{} holds no nqueens store", dir.display());
    }
    Ok(Store::inspect(dir)?)
}

/// Writes the export, of a directory that passes the audit only ([`offline::check`]: a store that the
/// coordinator's next start would correct is not backed up as it is). A file at `--out` is replaced
/// whole once the export is complete and synced, never left partial.
pub fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let dir = data_dir(&args.data);
    let store = open_existing(&dir)?;
    if let Some(run) = args.run {
        if store.run(run)?.is_none() {
            anyhow::bail!("no run {run} in this store");
        }
    }
    offline::check(&store, &dir)
        .map_err(|e| anyhow::anyhow!("{e}; nothing exported (`nqueens audit` says the same)"))?;
    let results = match &args.out {
        Some(path) => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let failed =
                |e: std::io::Error| anyhow::anyhow!("cannot write {}: {e}", path.display());
            let partial = tempfile::NamedTempFile::new_in(parent).map_err(failed)?;
            let mut out = std::io::BufWriter::new(partial);
            let n = ledger::export(&store, args.run, &mut out)?;
            let partial = out.into_inner().map_err(|e| failed(e.into_error()))?;
            partial.as_file().sync_all().map_err(failed)?;
            partial.persist(path).map_err(|e| failed(e.error))?;
            nqueens_common::jsonl::sync_dir(path).map_err(failed)?;
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
    // A missing file reads as an empty ledger: named here instead of imported as nothing.
    std::fs::metadata(&args.file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.file.display()))?;
    // A ledger without its store is the only copy of its results: the store is rebuilt from it by
    // starting the coordinator, never replaced by an import's.
    if args.data.join(LEDGER_FILE).exists() && !args.data.join("db").exists() {
        anyhow::bail!(
            "{} holds a ledger ({LEDGER_FILE}) but no store: start the coordinator on it (`nqueens serve --data {}`) to rebuild the store from its ledger, or import into another directory",
            args.data.display(),
            args.data.display()
        );
    }
    let view = LedgerView::read(&args.file)?;
    if let Some(first) = view.damaged.first() {
        anyhow::bail!(
            "{} has {} damaged lines (first: {first}); nothing imported. Import a backup, or start a coordinator on the damaged ledger's own data directory (it repairs from the store)",
            args.file.display(),
            view.damaged_lines
        );
    }
    if view.runs.is_empty() && view.export_whole != Some(true) {
        anyhow::bail!("{} holds no run; nothing imported", args.file.display());
    }
    if view.unchecked > 0 && !args.accept_unchecked {
        anyhow::bail!(
            "{} has {} results in lines of the format before checksums and seals: nothing can show them intact, and a changed digit in one would be counted for good; nothing imported. Start a coordinator on the data directory that wrote them (it checks its ledger against its store), or pass --accept-unchecked to import them as they are",
            args.file.display(),
            view.unchecked
        );
    }
    if view.legacy > 0 {
        eprintln!(
            "{} lines are of the format before checksums ({} results without a seal, imported unchecked)",
            view.legacy, view.unchecked
        );
    }
    // The directory's ledger is rewritten from the store below: the two must agree first, or what the
    // ledger holds beyond the store (a crash between the ledger's fsync and the store's flush) is lost.
    // Checked on a store opened to look only: a refusal changes nothing (no epoch, no migration).
    let looked = args.data.join("db").exists();
    if looked {
        let existing = Store::inspect(&args.data)?;
        offline::check(&existing, &args.data).map_err(|e| {
            anyhow::anyhow!(
                "{} holds a store that fails its check ({e}); nothing imported. Start the coordinator on it once (`nqueens serve --data {}`) to reconcile store and ledger, then import",
                args.data.display(),
                args.data.display()
            )
        })?;
    }
    std::fs::create_dir_all(&args.data)?;
    let refused = |e: nqueens_coordinator::error::Error| anyhow::anyhow!("{e}; nothing imported");
    let (results, audited) = if looked {
        // sled lets go of its lock shortly after the look above is dropped: wait for it, not blame
        // another process.
        let store = Store::open_when_free(&args.data, std::time::Duration::from_secs(30))?;
        // Every refusal comes before the first write. A write failing half-way leaves what is
        // restored so far in the store alone: a coordinator's start copies it into the ledger, and the
        // same import, run again, completes it.
        offline::vet(&store, &view).map_err(refused)?;
        build(&store, &view, &args.data).map_err(|e| {
            anyhow::anyhow!(
                "the import stopped part-way ({e}): {} holds part of it. Start the coordinator on it once (`nqueens serve --data {}`), then run the same import again to complete it",
                args.data.display(),
                args.data.display()
            )
        })?
    } else {
        // A new store is built beside, in a directory of its own inside DATA, and moved into place
        // whole: an import refused, failed or killed part-way leaves no store that looks like one.
        let stage = tempfile::Builder::new()
            .prefix(".import-")
            .tempdir_in(&args.data)?;
        let built = {
            let store = Store::open(stage.path())?;
            build(&store, &view, stage.path()).map_err(refused)?
        };
        // Every file of sled's (`conf`, `blobs`, snapshots), then its `db`, then the ledger: were a
        // crash to stop the moves, a store without its `db` is none, and a store without its ledger
        // gets the ledger written from it at the coordinator's start.
        let mut moves: Vec<std::ffi::OsString> = std::fs::read_dir(stage.path())?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()?;
        let last = |name: &std::ffi::OsString| match name.to_str() {
            Some("db") => 1,
            Some(LEDGER_FILE) => 2,
            _ => 0,
        };
        moves.sort_by_key(last);
        for name in moves {
            std::fs::rename(stage.path().join(&name), args.data.join(&name)).map_err(|e| {
                anyhow::anyhow!(
                    "cannot move {} into {}: {e}",
                    stage.path().join(&name).display(),
                    args.data.display()
                )
            })?;
        }
        nqueens_common::jsonl::sync_dir(&args.data.join(LEDGER_FILE))?;
        built
    };
    if view.torn {
        eprintln!("skipped a torn last line");
    }
    eprintln!(
        "imported {} runs, {results} results and {} quarantined workers into {}; audit passed for {audited} runs",
        view.runs.len(),
        view.quarantines.len(),
        args.data.display(),
    );
    Ok(())
}

/// Restores `view` into `store` (in `dir`), audits it and writes its ledger; returns how many results
/// were new and how many runs passed the audit.
fn build(
    store: &Store,
    view: &LedgerView,
    dir: &Path,
) -> nqueens_coordinator::error::Result<(u64, usize)> {
    let results = offline::restore(store, view)?;
    let lines = store.audit()?;
    // The store's own ledger starts as a copy of what it holds.
    ledger::rewrite(&dir.join(LEDGER_FILE), store)?;
    Ok((results, lines.len()))
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
    /// A record run (`submit --record`).
    record: bool,
    /// Counted results that a second identity confirmed.
    jobs_confirmed: u64,
    jobs_two_families: u64,
}

/// Checks a store offline: totals against results, job states, and the ledger against the store.
pub fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let dir = data_dir(&args.data);
    let store = open_existing(&dir)?;
    let offline::Checked {
        lines,
        ledger_results: agreed,
        ..
    } = offline::check(&store, &dir)?;
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
        let phase = meta.phase(&line.tally, failed);
        // A record run's evidence: every counted result confirmed by a second credential.
        if meta.record && line.confirmed < line.tally.jobs {
            anyhow::bail!(
                "run {} is a record run, but only {} of its {} counted results were confirmed by a second identity: its count is not a record's",
                meta.id,
                line.confirmed,
                line.tally.jobs
            );
        }
        let report = AuditOutput {
            run: line.run,
            n: meta.n,
            strategy: meta.strategy.to_string(),
            state: phase.to_string(),
            jobs_done: line.tally.jobs,
            jobs_total: meta.jobs_total,
            jobs_failed: failed,
            total: line.tally.total.to_string(),
            // Only a final count's (an inconsistent run's counts are not the answer).
            unique: (phase == nqueens_coordinator::durable::store::Phase::Done)
                .then(|| line.tally.unique().ok().flatten())
                .flatten()
                .map(|u| u.to_string()),
            ledger_results: in_ledger,
            record: meta.record,
            jobs_confirmed: line.confirmed,
            jobs_two_families: line.two_families,
        };
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&report)?)?;
        } else {
            writeln!(
                out,
                "run {}: N = {} {} {}, {}/{} jobs, total {}{}: audit passed (totals = sum of {} sealed results; the ledger holds exactly the same {} results){}",
                report.run,
                report.n,
                report.strategy,
                report.state,
                report.jobs_done,
                report.jobs_total,
                report.total,
                report.unique.as_deref().map(|u| format!(", {u} unique")).unwrap_or_default(),
                report.jobs_done,
                report.ledger_results,
                if report.record {
                    format!("; record run: each of the {} results confirmed by a second identity, {} of them by two kernel families", report.jobs_confirmed, report.jobs_two_families)
                } else {
                    String::new()
                }
            )?;
        }
    }
    Ok(())
}
