//! `nqueens certificate` (a finished run's certificate, written from a stopped coordinator's store) and
//! `nqueens spot-check` (a certificate checked on its own, then a sample of its jobs recomputed here).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

use nqueens_common::certificate::{self, CertError, Checked, Draw, JobLine};
use nqueens_coordinator::durable::offline;

use crate::backup::{data_dir, open_existing};

/// Arguments of `nqueens certificate`.
#[derive(Debug, Args)]
pub struct CertificateArgs {
    /// The finished run.
    pub run: u64,
    /// The store's directory (default: $NQUEENS_DATA, else $XDG_DATA_HOME/nqueens, else
    /// ~/.local/share/nqueens, else ./nqueens-data when HOME is unset too).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The file to write (replaced whole once complete, never left partial).
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `nqueens spot-check`.
#[derive(Debug, Args)]
pub struct SpotCheckArgs {
    /// A certificate written by `nqueens certificate`.
    pub file: PathBuf,
    /// Jobs to recompute (all of them when the run has fewer).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=certificate::MAX_SAMPLE))]
    pub sample: u64,
    /// Threads for the recomputation (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Draw the sample from this seed (and the file's root). Default: a fresh random seed, printed so
    /// that the same sample can be drawn again.
    #[arg(long, conflicts_with = "from_root")]
    pub seed: Option<String>,
    /// Draw the sample from the certificate's root alone: the same on every machine, to repeat a
    /// published check. The root is the writer's, who could have tried many: for your own bound, draw
    /// from a seed.
    #[arg(long)]
    pub from_root: bool,
    /// The root the coordinator published for the run (`status`, its log, the certificate command's
    /// output), in hex: a file with another root is refused before anything is recomputed. Without it,
    /// a file re-hashed after an edit is caught only if the sample lands on the edit.
    #[arg(long, value_name = "HEX")]
    pub expect_root: Option<String>,
}

/// Writes the certificate of a finished run: the store must pass the audit, the run be done, not
/// cancelled, and every result sealed.
pub fn write(args: &CertificateArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let dir = data_dir(&args.data);
    let store = open_existing(&dir)?;
    let Some(meta) = store.run(args.run)? else {
        anyhow::bail!("no run {} in {}", args.run, dir.display());
    };
    // Said before the audit reads the whole store.
    nqueens_coordinator::durable::certify::check_finished(&meta)?;
    offline::check(&store, &dir).map_err(|e| {
        anyhow::anyhow!("{e}; no certificate written (`nqueens audit` says the same)")
    })?;
    let path = &args.out;
    let failed = |e: std::io::Error| anyhow::anyhow!("cannot write {}: {e}", path.display());
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The job lines first, in a file of their own: the header, written first, sums them up.
    let lines = tempfile::tempfile_in(parent).map_err(failed)?;
    let mut lines = std::io::BufWriter::new(lines);
    let header = nqueens_coordinator::durable::certify::build(&store, &meta, |text| {
        writeln!(lines, "{text}")
    })?;
    let mut lines = lines.into_inner().map_err(|e| failed(e.into_error()))?;
    std::io::Seek::rewind(&mut lines).map_err(failed)?;
    let partial = tempfile::NamedTempFile::new_in(parent).map_err(failed)?;
    let mut out = std::io::BufWriter::new(partial);
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n").map_err(failed)?;
    std::io::copy(&mut lines, &mut out).map_err(failed)?;
    let partial = out.into_inner().map_err(|e| failed(e.into_error()))?;
    partial.as_file().sync_all().map_err(failed)?;
    let bytes = partial.as_file().metadata().map_err(failed)?.len();
    partial.persist(path).map_err(|e| failed(e.error))?;
    nqueens_common::jsonl::sync_dir(path).map_err(failed)?;
    tracing::info!(run = meta.id, root = %header.root, "certificate written");
    println!(
        "run {}: N = {} {}, {} jobs, total {}{}",
        meta.id,
        header.n,
        header.strategy,
        header.jobs,
        header.total,
        header
            .unique
            .as_ref()
            .map(|u| format!(", unique {u}"))
            .unwrap_or_default()
    );
    println!("root {} ({})", header.root, certificate::HASH);
    println!(
        "wrote {}: {bytes} bytes ({:.1} a job), {} identities, {} jobs of two kernel families, in {:.2} s",
        path.display(),
        bytes as f64 / header.jobs.max(1) as f64,
        header.identities.len(),
        header.two_families,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A sampled job whose recomputation differs from its line.
struct Differs {
    index: u64,
    line: JobLine,
    here: nqueens_common::JobResult,
}

/// Recomputes the sampled jobs on `threads` threads: those that differ.
fn recompute(checked: &Checked, threads: usize) -> anyhow::Result<Vec<Differs>> {
    let h = &checked.header;
    let plan = nqueens_common::Plan::with_depth(h.n.into(), h.strategy, h.depth)?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let all: Vec<anyhow::Result<Vec<Differs>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut differs = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((index, line)) = checked.sample.get(i) else {
                            return Ok(differs);
                        };
                        let here = plan.job(&line.key)?.run();
                        if here != line.result {
                            differs.push(Differs {
                                index: *index,
                                line: line.clone(),
                                here,
                            });
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a recomputing thread panicked")))
            })
            .collect()
    });
    let mut differs = Vec::new();
    for d in all {
        differs.extend(d?);
    }
    differs.sort_by_key(|d| d.index);
    Ok(differs)
}

fn counts(r: &nqueens_common::JobResult) -> String {
    format!(
        "total {}, unique8 {}, nodes {}",
        r.total,
        r.unique8.map_or_else(|| "-".into(), |u| u.to_string()),
        r.nodes
    )
}

/// Checks a certificate on its own, recomputes a sample of its jobs, and says what a clean sample shows.
pub fn spot_check(args: &SpotCheckArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let file = std::fs::File::open(&args.file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.file.display()))?;
    // A regular file's size bounds the jobs its header may claim (a pipe's is not known).
    let bytes = file
        .metadata()
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len());
    let seed = match (&args.seed, args.from_root) {
        (Some(s), _) => Some(s.clone()),
        (None, true) => None,
        (None, false) => Some(certificate::fresh_seed()?),
    };
    let draw = match &seed {
        Some(s) => Draw::Seed(s.clone()),
        None => Draw::Root,
    };
    let checked = certificate::check_expecting(
        std::io::BufReader::new(file),
        bytes,
        args.sample,
        &draw,
        args.expect_root.as_deref(),
    )
    .map_err(|e| match e {
        CertError::Io(e) => anyhow::anyhow!("cannot read {}: {e}", args.file.display()),
        e => anyhow::anyhow!(
            "{} is refused: {}",
            args.file.display(),
            certificate::printable(&e.to_string())
        ),
    })?;
    let h = &checked.header;
    if args.expect_root.is_some() && h.version == certificate::VERSION_LINES_ONLY {
        // Version 1's root covers its job lines only.
        println!(
            "note: a certificate of version 1: the expected root covers its job lines, not its header's run number and identity names"
        );
    }
    let published = nqueens_common::reference::counts(h.n.into());
    let against = match published {
        Some((total, _)) if total.to_string() != h.total => anyhow::bail!(
            "{} is refused: its total {} is not the published count of N = {}, {total}",
            args.file.display(),
            h.total,
            h.n
        ),
        Some((_, unique)) if h.unique.as_ref().is_some_and(|u| *u != unique.to_string()) => {
            anyhow::bail!(
                "{} is refused: its unique count {} is not the published one of N = {}, {unique}",
                args.file.display(),
                h.unique.as_deref().unwrap_or_default(),
                h.n
            )
        }
        Some(_) => " (the published count)",
        None => " (no published count)",
    };
    let file_secs = started.elapsed().as_secs_f64();
    println!(
        "run {}: N = {} {} depth {}, {} jobs, fingerprint {}, total {}{against}{}",
        h.run,
        h.n,
        h.strategy,
        h.depth,
        h.jobs,
        h.fingerprint,
        h.total,
        h.unique
            .as_ref()
            .map(|u| format!(", unique {u}"))
            .unwrap_or_default()
    );
    if h.record {
        println!("record run: every job line names two identities or more");
    }
    if h.version >= certificate::VERSION {
        println!(
            "kernel families: {} of {} jobs computed by two (as their workers stated)",
            h.two_families, h.jobs
        );
    }
    println!(
        "file: every job of the plan in order, the sums equal the totals, root {} recomputed ({file_secs:.2} s)",
        h.root
    );
    let threads = args
        .threads
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let k = checked.sample.len() as u64;
    let from = match &seed {
        Some(s) => format!("from seed {s:?} (draw them again: --seed {s:?})"),
        None => "from the root".to_string(),
    };
    // The search ahead, as the certificate counts it (at N = 28 a job is trillions of nodes: the
    // reader sees the size of what was asked before waiting on it).
    let nodes: u128 = checked
        .sample
        .iter()
        .map(|(_, l)| u128::from(l.result.nodes))
        .sum();
    if k > 0 {
        // The seed first: a recomputation cut short (hours at N = 28) can be taken up again with it.
        eprintln!("recomputing {k} jobs {from} on {threads} threads: {nodes} nodes to search, as the certificate counts them");
    }
    let t = Instant::now();
    let differs = recompute(&checked, threads)?;
    let secs = t.elapsed().as_secs_f64();
    let keys: Vec<String> = checked
        .sample
        .iter()
        .map(|(_, l)| l.key.to_string())
        .collect();
    println!(
        "sample: {k} jobs {from}, recomputed on {threads} threads in {secs:.2} s: {}",
        keys.join(" ")
    );
    if let Some(d) = differs.first() {
        for d in &differs {
            eprintln!(
                "job {} (line {}): the certificate says {}; recomputed here: {}",
                d.line.key,
                d.index + 2,
                counts(&d.line.result),
                counts(&d.here)
            );
        }
        anyhow::bail!(
            "{} is refused: {} of the {k} jobs sampled differ from this machine's count (first: job {})",
            args.file.display(),
            differs.len(),
            d.line.key
        );
    }
    if k >= h.jobs {
        println!("every job recomputed: all agree");
    } else if k == 0 {
        println!("no job recomputed: the file's own checks passed");
    } else {
        println!(
            "all agree: a clean sample of {k} says at most {:.3} % of the jobs are wrong (95 % confidence)",
            100.0 * certificate::wrong_share_bound(k)
        );
        if seed.is_none() {
            // The root is the writer's: one who tried many roots could pick a sample that misses.
            println!(
                "that bound holds against faults; against the file's writer, draw your own sample: leave out --from-root"
            );
        } else if args
            .seed
            .as_deref()
            .is_some_and(|s| !certificate::seed_looks_random(s))
        {
            // A writer who guessed the seed could have tried roots until the sample missed.
            println!(
                "that bound holds against faults; against the file's writer only if it could not guess your seed: leave out --seed for a fresh one, or give one of 32 hex digits drawn at random"
            );
        }
    }
    Ok(())
}
