//! `nqueens solve`: prints solutions, as the classic programs do: one of any size at once (a checked
//! construction), or every solution of a small board (`--all`, `--limit K`), optionally one per class of
//! the 8 symmetries (`--unique`), as boards or JSON column lists.

use std::io::Write;

use clap::Args;
use nqueens_common::solve::{self, Solutions};

/// Arguments of `nqueens solve`.
#[derive(Debug, Args)]
pub struct SolveArgs {
    /// Board size: 1 or 4 up to 100000 for one solution; up to 32 with --all or --limit.
    pub n: usize,
    /// Print every solution (in lexicographic order of their column lists).
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
    /// Print the first K solutions.
    #[arg(long, value_name = "K")]
    pub limit: Option<u64>,
    /// With --all or --limit: one solution per class of the 8 symmetries (the smallest of its class).
    #[arg(long)]
    pub unique: bool,
    /// One JSON object per solution: {"columns":[0,4,7,5,2,6,1,3],"n":8} (column of each row, from 0).
    #[arg(long)]
    pub json: bool,
}

/// Runs `nqueens solve`.
pub fn run(args: &SolveArgs) -> anyhow::Result<()> {
    let n = args.n;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut print = |columns: &[usize]| -> std::io::Result<()> {
        if args.json {
            writeln!(out, "{}", serde_json::json!({ "n": n, "columns": columns }))
        } else {
            for &c in columns {
                let mut row = vec!["."; n];
                row[c] = "Q";
                writeln!(out, "{}", row.join(" "))?;
            }
            writeln!(out)
        }
    };
    if !args.all && args.limit.is_none() {
        if args.unique {
            anyhow::bail!("--unique goes with --all or --limit");
        }
        let Some(columns) = solve::construct(n) else {
            if n == 2 || n == 3 || n == 0 {
                anyhow::bail!("N = {n} has no solution");
            }
            anyhow::bail!(
                "N = {n} is too large to print: at most {}",
                solve::MAX_CONSTRUCT
            );
        };
        print(&columns)?;
        return Ok(());
    }
    if !(1..=solve::MAX_ENUMERATE).contains(&n) {
        anyhow::bail!(
            "--all and --limit enumerate N from 1 to {}",
            solve::MAX_ENUMERATE
        );
    }
    let limit = usize::try_from(args.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
    for columns in Solutions::new(n)
        .filter(|s| !args.unique || solve::is_canonical(s))
        .take(limit)
    {
        print(&columns)?;
    }
    out.flush()?;
    Ok(())
}
