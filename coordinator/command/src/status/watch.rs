//! `nqueens status --watch`: on a terminal, a live view (a progress bar per run with rate and ETA, and
//! the worker table) redrawn at each interval; otherwise plain lines, one per run per interval. Ends when
//! every run shown is done, stalled or cancelled. A coordinator that becomes unreachable (stopped,
//! restarting, the network down) does not end it: it says since when, tries again with a capped backoff
//! ([`crate::outage`]), and goes on once the coordinator answers.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{fetch, StatusArgs};
use crate::outage::{is_outage, Outage};
use crate::remote::run_line;
use crate::rpc::RpcError;
use nqueens_coordinator::service::progress::format_eta;
use nqueens_coordinator::wire::status_json::{StatusOutput, WorkerOutput};

/// The worker table's header.
pub const WORKER_HEADER: &str =
    "worker               threads GPU share  state        jobs done     nodes/s  leases  kernels                     last seen";

/// One row of the worker table.
pub fn worker_row(w: &WorkerOutput) -> String {
    let mut name = w.name.clone();
    if name.chars().count() > 20 {
        name = name.chars().take(19).collect::<String>() + "~";
    }
    let mut kernels = w.kernels();
    if kernels.chars().count() > 26 {
        kernels = kernels.chars().take(25).collect::<String>() + "~";
    }
    format!(
        "{name:<20} {:>7} {:>9}  {:<11} {:>10} {:>11} {:>7}  {:<26}  {}",
        w.threads,
        w.gpu_share(),
        w.state,
        w.jobs_done,
        format!("{:.3e}", w.nodes_per_second),
        w.leases,
        kernels,
        w.seen_seconds_ago
            .map_or("-".to_string(), |s| format!("{}s ago", s.round())),
    )
}

/// A worker summary in one line: how many in each state.
pub fn workers_line(workers: &[WorkerOutput]) -> String {
    let mut by_state: Vec<(&str, usize)> = Vec::new();
    for w in workers {
        match by_state.iter_mut().find(|(s, _)| *s == w.state) {
            Some((_, n)) => *n += 1,
            None => by_state.push((&w.state, 1)),
        }
    }
    let parts: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!(
        "workers: {}",
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    )
}

/// Whether the watch is over: there are runs, and each is done, stalled or cancelled (a paused run may
/// be resumed).
fn finished(runs: &[StatusOutput]) -> bool {
    !runs.is_empty()
        && runs
            .iter()
            .all(|r| matches!(r.state, "done" | "stalled" | "cancelled" | "inconsistent"))
}

/// The live view's bars.
struct Live {
    multi: MultiProgress,
    runs: HashMap<String, ProgressBar>,
    header: ProgressBar,
    workers: Vec<ProgressBar>,
    /// The line above everything while the coordinator is unreachable.
    notice: Option<ProgressBar>,
}

impl Live {
    fn new() -> Live {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let header = multi.add(ProgressBar::new(0).with_style(text_style()));
        header.set_message(WORKER_HEADER);
        Live {
            multi,
            runs: HashMap::new(),
            header,
            workers: Vec::new(),
            notice: None,
        }
    }

    /// Shows `line` above the runs (the last view stays below it).
    fn unreachable(&mut self, line: &str) {
        let notice = self.notice.get_or_insert_with(|| {
            self.multi
                .insert(0, ProgressBar::new(0).with_style(text_style()))
        });
        notice.set_message(line.to_string());
    }

    /// Takes the unreachable line away.
    fn reachable(&mut self) {
        if let Some(notice) = self.notice.take() {
            notice.finish_and_clear();
            self.multi.remove(&notice);
        }
    }

    fn show(&mut self, runs: &[StatusOutput], workers: &[WorkerOutput]) {
        for r in runs {
            let bar = self.runs.entry(r.run.clone()).or_insert_with(|| {
                let style = ProgressStyle::with_template(
                    "{prefix:>8} [{bar:40.green/white}] {pos}/{len} jobs {msg}",
                )
                .expect("valid template")
                .progress_chars("=> ");
                let bar = self.multi.insert_before(
                    &self.header,
                    ProgressBar::new(r.jobs_total).with_style(style),
                );
                bar.set_prefix(format!("run {}", r.run));
                bar
            });
            bar.set_length(r.jobs_total);
            bar.set_position(r.jobs_done);
            bar.set_message(run_message(r));
        }
        while self.workers.len() < workers.len() {
            let row = self.multi.add(ProgressBar::new(0).with_style(text_style()));
            self.workers.push(row);
        }
        while self.workers.len() > workers.len() {
            if let Some(row) = self.workers.pop() {
                row.finish_and_clear();
                self.multi.remove(&row);
            }
        }
        for (row, w) in self.workers.iter().zip(workers) {
            row.set_message(worker_row(w));
        }
        self.header.tick();
    }

    fn finish(&self) {
        for bar in self.runs.values() {
            bar.finish();
        }
        self.header.finish();
        for row in &self.workers {
            row.finish();
        }
    }
}

fn text_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg}").expect("valid template")
}

/// The text beside a run's bar.
fn run_message(r: &StatusOutput) -> String {
    let mut msg = format!(
        "({:.2}%) N = {} {} {}, total {}",
        r.percent, r.n, r.strategy, r.state, r.total
    );
    if let Some(u) = &r.unique {
        msg += &format!(", {u} unique");
    }
    if r.state == "running" {
        msg += &format!(
            ", {:.2} jobs/s, ETA {}",
            r.jobs_per_second,
            format_eta(r.eta_seconds)
        );
    }
    if r.jobs_disputed > 0 {
        msg += &format!(", {} DISPUTED", r.jobs_disputed);
    }
    if r.jobs_failed > 0 {
        msg += &format!(", {} FAILED", r.jobs_failed);
    }
    msg
}

/// Watches until every run shown is done, stalled or cancelled (or the process is interrupted, or its output
/// closed: `status --watch | head` ends quietly).
pub async fn watch(args: &StatusArgs) -> anyhow::Result<()> {
    match follow(args).await {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        other => other,
    }
}

async fn follow(args: &StatusArgs) -> anyhow::Result<()> {
    let mut client = args.connection.connect()?;
    let mut live = (std::io::stdout().is_terminal() && !args.json).then(Live::new);
    let interval = args.interval.max(std::time::Duration::from_millis(50));
    // Set while the coordinator, reached once, does not answer.
    let mut outage: Option<Outage> = None;
    let mut reached = false;
    let mut wait = None;
    loop {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let (runs, workers) = match fetch(&mut client, args.run.as_deref()).await {
            Ok(fetched) => fetched,
            // A coordinator never reached is more likely a wrong address than an outage: that ends the
            // watch at once, with the error.
            Err(e)
                if reached
                    && e.downcast_ref::<RpcError>()
                        .is_some_and(|r| is_outage(r.code)) =>
            {
                let o = outage.get_or_insert_with(|| Outage::begin(interval));
                let line = o.line(tokio::time::Instant::now());
                wait = Some(o.backoff());
                match live.as_mut() {
                    Some(live) => live.unreachable(&line),
                    // JSON lines stay JSON: the notice goes to stderr.
                    None if args.json => eprintln!("{line}"),
                    None => {
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "{line}")?;
                        out.flush()?;
                    }
                }
                // A fresh channel: the next try connects anew.
                client = args.connection.connect()?;
                continue;
            }
            Err(e) => return Err(e),
        };
        reached = true;
        wait = Some(interval);
        if outage.take().is_some() {
            if let Some(live) = live.as_mut() {
                live.reachable();
            }
        }
        let runs: Vec<StatusOutput> = runs.into_iter().map(Into::into).collect();
        let workers: Vec<WorkerOutput> = workers.into_iter().map(Into::into).collect();
        let mut out = std::io::stdout().lock();
        match live.as_mut() {
            Some(live) => live.show(&runs, &workers),
            None if args.json => {
                for r in &runs {
                    writeln!(out, "{}", serde_json::to_string(r)?)?;
                }
            }
            None => {
                for r in &runs {
                    writeln!(out, "{}", run_line(r))?;
                }
                writeln!(out, "{}", workers_line(&workers))?;
            }
        }
        out.flush()?;
        drop(out);
        if finished(&runs) {
            if let Some(live) = &live {
                live.finish();
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(name: &str, state: &str) -> WorkerOutput {
        WorkerOutput {
            name: name.into(),
            worker_id: format!("{name}-1"),
            threads: 8,
            accepted: 10,
            seen_seconds_ago: Some(1.4),
            quarantined: false,
            reason: String::new(),
            jobs_done: 12,
            nodes: 1_000,
            nodes_per_second: 1.5e9,
            leases: 8,
            state: state.into(),
            gpus: 0,
            gpu_jobs: 0,
            gpu_nodes: 0,
            families: vec!["cpu-lists".into(), "gpu".into()],
            gpu_kernels: Vec::new(),
        }
    }

    #[test]
    fn worker_rows_line_up_under_the_header() {
        let row = worker_row(&worker("a-very-long-host-name-indeed", "working"));
        assert_eq!(
            row.len(),
            WORKER_HEADER.len() - "last seen".len() + "1s ago".len()
        );
        assert!(row.starts_with("a-very-long-host-na~"), "{row}");
        assert!(row.contains("1.500e9"), "{row}");
        let kernels = WORKER_HEADER.find("kernels").unwrap();
        assert_eq!(&row[kernels..kernels + 10], "lists,gpu ", "{row}");
        let header_state = WORKER_HEADER.find("state").unwrap();
        assert_eq!(&row[header_state..header_state + 7], "working");
        let share_ends = WORKER_HEADER.find("GPU share").unwrap() + "GPU share".len();
        assert_eq!(&row[share_ends - 1..share_ends], "-", "{row}");
        let mut gpu = worker("g", "working");
        (gpu.gpus, gpu.gpu_jobs, gpu.gpu_nodes) = (2, 5, 870);
        let row = worker_row(&gpu);
        assert_eq!(
            &row[share_ends - "2: 87%".len()..share_ends],
            "2: 87%",
            "{row}"
        );
        // The shapes its GPUs run, each once, after the families; a long list cut to the column.
        gpu.gpu_kernels = vec!["flat/128/4".into(), "flat/128/4".into()];
        let row = worker_row(&gpu);
        assert_eq!(
            &row[kernels..kernels + 28],
            "lists,gpu flat/128/4        ",
            "{row}"
        );
        gpu.gpu_kernels = vec![
            "flat/128/4".into(),
            "coop/128/8/4".into(),
            "shared/64/8".into(),
        ];
        let row = worker_row(&gpu);
        assert_eq!(
            &row[kernels..kernels + 28],
            "lists,gpu flat/128/4,coop~  ",
            "{row}"
        );
        assert_eq!(
            row.len(),
            WORKER_HEADER.len() - "last seen".len() + "1s ago".len()
        );
    }

    #[test]
    fn the_worker_summary_counts_states() {
        let ws = [
            worker("a", "working"),
            worker("b", "lost"),
            worker("c", "working"),
        ];
        assert_eq!(workers_line(&ws), "workers: 2 working, 1 lost");
        assert_eq!(workers_line(&[]), "workers: none");
    }
}
