//! `nqueens submit` and `nqueens status`: clients of a running coordinator.

use clap::Args;
use nqueens_proto as proto;

use super::PartitionArgs;
use nqueens_coordinator::service::progress::format_eta;
use nqueens_coordinator::wire::status_json::{StatusOutput, WorkerOutput};

/// A call the coordinator refused or could not answer.
#[derive(Debug)]
pub struct RpcError {
    pub code: tonic::Code,
    pub message: String,
    /// The coordinator's address, once known.
    pub at: Option<String>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.at {
            Some(at) => write!(f, "coordinator at {at}: {} ({:?})", self.message, self.code)?,
            None => write!(f, "coordinator: {} ({:?})", self.message, self.code)?,
        }
        if let Some(hint) = self.hint() {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

impl RpcError {
    /// What to do about it, where the error says enough to tell.
    fn hint(&self) -> Option<&'static str> {
        let m = self.message.to_lowercase();
        let tls = self
            .at
            .as_deref()
            .is_some_and(|a| a.starts_with("https://"));
        if m.contains("https without tls") {
            Some("an https:// address needs --tls-ca PEM (the certificate the coordinator's chains to)")
        } else if m.contains("h2 protocol error")
            || m.contains("frame with invalid size")
            || m.contains("operation was canceled")
            || m.contains("http/1")
            // An HTTP/1 server (the coordinator's own HTTP port) hangs up on gRPC's opening bytes.
            || (!tls && (m.contains("broken pipe") || m.contains("stream closed") || m.contains("connection reset")))
        {
            Some("this address answers, but not as a coordinator's gRPC port: it may be the HTTP port (--metrics-listen; gRPC is --listen, 7447 by default), or a coordinator serving TLS (then use https:// and --tls-ca PEM)")
        } else if m.contains("connect error") || m.contains("connection refused") {
            Some(if tls {
                "is it running, and does its certificate match the host name and --tls-ca?"
            } else {
                "is `nqueens serve` running there? (it listens on 127.0.0.1:7447 by default; --coordinator URL picks another)"
            })
        } else if self.code == tonic::Code::Unauthenticated
            && !m.contains("revoked")
            && !m.contains("client certificate")
            && !m.contains("one identity")
        {
            // A refusal of the credential itself needs no hint about passing one.
            Some("pass the coordinator's token with --token or NQUEENS_TOKEN")
        } else {
            None
        }
    }
}

/// The error for a call the coordinator refused or could not answer.
pub fn rpc(s: tonic::Status) -> RpcError {
    // A transport error says little alone ("transport error"): its causes say what the other end was.
    let mut message = s.message().to_string();
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(&s);
    while let Some(e) = cause {
        let more = e.to_string();
        if !message.contains(&more) {
            message.push_str(": ");
            message.push_str(&more);
        }
        cause = e.source();
    }
    RpcError {
        code: s.code(),
        message,
        at: None,
    }
}

/// `e`, naming the coordinator's address if it is a call that failed.
pub fn locate(e: anyhow::Error, address: &str) -> anyhow::Error {
    match e.downcast::<RpcError>() {
        Ok(mut rpc) => {
            rpc.at = Some(address.to_string());
            rpc.into()
        }
        Err(e) => e,
    }
}

/// Arguments of `nqueens submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub partition: PartitionArgs,
    #[command(flatten)]
    pub connection: crate::connection::ConnectionArgs,
    /// Fraction of jobs (0 to 1) computed twice, by workers of different identities (worker
    /// credentials; default: the coordinator's, 0.01). The jobs checked are drawn with a secret of the
    /// coordinator; a run too small for its fraction to check any is warned of.
    #[arg(long)]
    pub verify_fraction: Option<f64>,
    /// Print the coordinator's existing run of the same N, strategy and depth, if it has one, instead
    /// of creating another (what batch scripts that may be resubmitted want).
    #[arg(long)]
    pub reuse: bool,
    /// The run's priority: workers take jobs from the running run of the highest priority first (ties:
    /// the oldest). `nqueens priority RUN P` changes it later.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// Record mode: every job computed by two worker credentials (`nqueens credential issue`), the run
    /// done only when every job holds two agreeing results; leased to credential holders only. About
    /// twice the computation of a plain run (`nqueens estimate --record` prices it).
    #[arg(long)]
    pub record: bool,
    /// The bound on the expected number of wrong results a lying worker credential gets counted
    /// unseen, from 1 to 36.6 (the default): while the run is open, spot checks make at least about
    /// 1 / (e * E) of every credential's leases (E = 1: 31 %; 5: 7.1 %; the default: 1 %).
    #[arg(long, value_name = "E")]
    pub max_error: Option<f64>,
}

/// Arguments of `nqueens status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub connection: crate::connection::ConnectionArgs,
    /// Only this run.
    #[arg(long)]
    pub run: Option<String>,
    /// One JSON object per run (with --workers: per worker), one per line.
    #[arg(long)]
    pub json: bool,
    /// List the workers (seen by this coordinator incarnation, and every quarantined one) instead.
    #[arg(long, conflicts_with = "watch")]
    pub workers: bool,
    /// List the jobs in this state instead (of --run, or of every run), one per line: failed,
    /// disputed or verifying.
    #[arg(long, value_enum, value_name = "STATE", conflicts_with_all = ["watch", "workers"])]
    pub jobs: Option<crate::control::JobsIn>,
    /// With --jobs: most jobs listed (1 to 10000); past it, the listing says it is truncated.
    #[arg(long, default_value_t = 1000, requires = "jobs", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
    /// Keep watching: on a terminal, a live view with a progress bar per run and the worker table;
    /// otherwise one line per run at each interval. Ends when every run shown is done, stalled or
    /// cancelled (or on Ctrl-C); while the coordinator is unreachable it says since when and keeps trying.
    #[arg(long)]
    pub watch: bool,
    /// How often --watch refreshes, e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, requires = "watch")]
    pub interval: std::time::Duration,
}

/// One run as a line of text (what `status` prints).
pub fn run_line(s: &StatusOutput) -> String {
    let unique = s
        .unique
        .as_deref()
        .map(|u| format!(", {u} unique"))
        .unwrap_or_default();
    let mut checks = format!(", {} verifying", s.jobs_verifying);
    if let Some(what) = s.waiting_for {
        // Only checks are left: they need a worker of another identity than the one that computed them.
        checks += &format!(" (waiting for {what})");
    }
    if s.record {
        // The evidence a record asks for: every counted job confirmed by a second credential.
        checks += &format!(
            ", record: {}/{} jobs with two independent results",
            s.jobs_confirmed, s.jobs_total
        );
    } else if s.jobs_confirmed > 0 {
        checks += &format!(", {} confirmed", s.jobs_confirmed);
    }
    if s.max_error_stated {
        checks += &format!(", max error {}", s.max_error);
    }
    if s.jobs_disputed > 0 {
        checks += &format!(", {} DISPUTED", s.jobs_disputed);
    }
    if s.jobs_failed > 0 {
        checks += &format!(", {} FAILED", s.jobs_failed);
    }
    let state = match s.priority {
        0 => s.state.to_string(),
        p => format!("{} (priority {p})", s.state),
    };
    format!(
        "run {}: N = {} {} {state}, {}/{} jobs ({:.2}%), total {}{unique}, {} leased{checks}, {} workers, {:.2} jobs/s, ETA {}",
        s.run,
        s.n,
        s.strategy,
        s.jobs_done,
        s.jobs_total,
        s.percent,
        s.total,
        s.jobs_leased,
        s.active_workers,
        s.jobs_per_second,
        if matches!(s.state, "done" | "cancelled" | "inconsistent") { "-".to_string() } else { format_eta(s.eta_seconds) },
    ) + &s.root.as_deref().map(|r| format!(", certificate root {r}")).unwrap_or_default()
}

/// Prints a run as `status` does: a line of text, or with `json` one JSON object.
pub fn print(s: &StatusOutput, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(s)?);
    } else {
        println!("{}", run_line(s));
    }
    Ok(())
}

/// Creates a run on the coordinator and prints it.
pub fn submit(args: &SubmitArgs) -> anyhow::Result<()> {
    let plan = args.partition.plan()?;
    let status = super::runtime()?
        .block_on(async {
            let mut client = args.connection.connect()?;
            if !args.reuse {
                warn_if_submitted(&mut client, &plan).await?;
            }
            let req = proto::CreateRunRequest {
                n: plan.n() as u32,
                strategy: proto::Strategy::from(plan.strategy()) as i32,
                depth: Some(plan.depth() as u32),
                reuse: args.reuse,
                verify_fraction: args.verify_fraction,
                priority: args.priority,
                record: args.record,
                max_error: args.max_error,
            };
            anyhow::Ok(client.create_run(req).await.map_err(rpc)?.into_inner())
        })
        .map_err(|e| locate(e, &args.connection.coordinator))?;
    if args.max_error.is_some() && status.max_error.is_none() {
        // A coordinator older than the bound ignores the field and makes a run at the default.
        anyhow::bail!(
            "the coordinator made run {} without the bound asked (it predates --max-error): cancel it with `nqueens cancel {}` and upgrade the coordinator",
            status.run,
            status.run
        );
    }
    if args.record && !status.record {
        // A coordinator older than record mode ignores the field and makes a plain run.
        anyhow::bail!(
            "the coordinator made run {} as a plain run, not a record run (it predates record mode): cancel it with `nqueens cancel {}` and upgrade the coordinator",
            status.run,
            status.run
        );
    }
    if let Some(warning) = checks_warning(status.verify_fraction, status.jobs_total) {
        eprintln!("{warning}");
    }
    print(&status.into(), args.partition.json)
}

/// What `submit` says of a run's checks: that a run too small for its fraction likely checks no job
/// at all (a liar would go unseen), or that checks need workers of two identities.
fn checks_warning(fraction: f64, jobs: u64) -> Option<String> {
    if fraction <= 0.0 || jobs == 0 {
        return None;
    }
    let expected = fraction * jobs as f64;
    if expected < 3.0 {
        let enough = (3.0 / jobs as f64).min(1.0);
        return Some(format!(
            "warning: at --verify-fraction {fraction}, a run of {jobs} jobs checks about {expected:.1} of them (likely none): a wrong result would go unseen; submit with --verify-fraction {enough:.2} or more to check a few"
        ));
    }
    Some(format!(
        "note: about {expected:.0} of its {jobs} jobs are checked by a worker of a second identity: the run ends once workers of two credentials (`nqueens credential issue`) have worked on it"
    ))
}

/// What to do about an earlier run of the same plan: a finished one already has the count; another can
/// be reused or cancelled.
fn submitted_advice(run: &str, done: bool) -> String {
    if done {
        format!("Run {run} is done: `nqueens status {run}` shows its total")
    } else {
        format!("`--reuse` prints the existing run instead; `nqueens cancel {run}` cancels it")
    }
}

/// Warns on stderr about the coordinator's runs (not cancelled) of the same N, strategy and depth as
/// `plan`: a second one computes the same count again.
async fn warn_if_submitted(
    client: &mut nqueens_proto::Client,
    plan: &nqueens_common::Plan,
) -> anyhow::Result<()> {
    let runs = all_runs(client).await?;
    let strategy = proto::Strategy::from(plan.strategy()) as i32;
    for r in runs.into_iter().filter(|r| {
        r.n == plan.n() as u32
            && r.strategy == strategy
            && r.depth == plan.depth() as u32
            && r.state != proto::RunState::Cancelled as i32
    }) {
        let done = r.state == proto::RunState::Done as i32;
        let s = StatusOutput::from(r);
        eprintln!(
            "warning: the coordinator already has run {} of N = {} {} depth {} ({}, {}/{} jobs); creating another anyway. {}",
            s.run,
            s.n,
            s.strategy,
            s.depth,
            s.state,
            s.jobs_done,
            s.jobs_total,
            submitted_advice(&s.run, done)
        );
    }
    Ok(())
}

fn print_worker(w: proto::WorkerStatus, json: bool) -> anyhow::Result<()> {
    let w = WorkerOutput::from(w);
    if json {
        println!("{}", serde_json::to_string(&w)?);
    } else if w.quarantined {
        println!("worker {}: QUARANTINED: {}", w.name, w.reason);
    } else {
        println!("{}", super::watch::worker_row(&w));
    }
    Ok(())
}

/// The runs (one, or all) and the workers, as the coordinator sees them now.
pub async fn fetch(
    client: &mut nqueens_proto::Client,
    run: Option<&str>,
) -> anyhow::Result<(Vec<proto::RunStatus>, Vec<proto::WorkerStatus>)> {
    let workers = match all_workers(client).await {
        Ok(workers) => workers,
        // A worker credential reads runs but lists no workers: its runs are shown without them.
        Err(e)
            if e.downcast_ref::<RpcError>()
                .is_some_and(|r| r.code == tonic::Code::PermissionDenied) =>
        {
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let runs = match run {
        Some(run) => vec![client
            .get_run(proto::GetRunRequest {
                run: run.to_string(),
            })
            .await
            .map_err(rpc)?
            .into_inner()],
        None => all_runs(client).await?,
    };
    Ok((runs, workers))
}

/// Every worker the coordinator shows, in (name, id) order, a page of ListWorkers at a time.
pub async fn all_workers(
    client: &mut nqueens_proto::Client,
) -> anyhow::Result<Vec<proto::WorkerStatus>> {
    let page = async |(after_name, after_id): (String, String)| {
        let asked = proto::ListWorkersRequest {
            after_name,
            after_id,
            limit: 0,
        };
        let page = client.list_workers(asked).await.map_err(rpc)?.into_inner();
        Ok((page.workers, page.more))
    };
    every_page("workers", page, |w: &proto::WorkerStatus| {
        Some((w.name.clone(), w.worker_id.clone()))
    })
    .await
}

/// Every run of the coordinator, in id order, a page of ListRuns at a time.
pub async fn all_runs(client: &mut nqueens_proto::Client) -> anyhow::Result<Vec<proto::RunStatus>> {
    let page = async |after: u64| {
        let asked = proto::ListRunsRequest { after, limit: 0 };
        let page = client.list_runs(asked).await.map_err(rpc)?.into_inner();
        Ok((page.runs, page.more))
    };
    every_page("runs", page, |r: &proto::RunStatus| r.run.parse().ok()).await
}

/// Every entry of a paged listing: `page(after)` answers the entries after the cursor `after` (the
/// default cursor: from the start) and whether more follow; `cursor` names an entry's place. A listing
/// that announces more but does not move past its cursor is refused, not asked again for ever.
async fn every_page<T, C: Default + Clone + PartialOrd + std::fmt::Debug>(
    what: &str,
    mut page: impl AsyncFnMut(C) -> anyhow::Result<(Vec<T>, bool)>,
    cursor: impl Fn(&T) -> Option<C>,
) -> anyhow::Result<Vec<T>> {
    let mut all = Vec::new();
    let mut after = C::default();
    loop {
        let (entries, more) = page(after.clone()).await?;
        let next = entries.last().map(&cursor);
        all.extend(entries);
        match (more, next) {
            (false, _) => return Ok(all),
            (true, Some(Some(next))) if next > after => after = next,
            _ => anyhow::bail!(
                "the coordinator's list of {what} does not go on: a page after {after:?} announces more but ends where it began"
            ),
        }
    }
}

/// Prints the status of one or every run (or the workers), and the quarantined workers; with --watch,
/// keeps printing.
pub fn status(args: &StatusArgs) -> anyhow::Result<()> {
    if let Some(jobs) = args.jobs {
        return crate::control::list_jobs(
            &args.connection,
            args.run.as_deref(),
            jobs,
            args.limit,
            args.json,
        );
    }
    let runtime = super::runtime()?;
    if args.watch {
        return runtime.block_on(super::watch::watch(args));
    }
    let (runs, workers) = runtime
        .block_on(async {
            let mut client = args.connection.connect()?;
            fetch(&mut client, args.run.as_deref()).await
        })
        .map_err(|e| locate(e, &args.connection.coordinator))?;
    if args.workers {
        if !args.json {
            println!("{}", super::watch::WORKER_HEADER);
        }
        // The table first, then why each quarantined worker is.
        let (quarantined, others): (Vec<_>, Vec<_>) = workers
            .into_iter()
            .partition(|w| w.quarantined && !args.json);
        for w in others.into_iter().chain(quarantined) {
            print_worker(w, args.json)?;
        }
        return Ok(());
    }
    if runs.is_empty() && !args.json {
        println!(
            "no runs on {} yet (nqueens submit N creates one)",
            args.connection.coordinator
        );
    }
    for run in runs {
        print(&run.into(), args.json)?;
    }
    if !args.json {
        for w in workers.into_iter().filter(|w| w.quarantined) {
            print_worker(w, false)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::checks_warning;

    #[test]
    fn submit_warns_of_a_run_too_small_for_its_fraction() {
        let small = checks_warning(0.01, 79).unwrap();
        assert!(
            small.starts_with("warning:") && small.contains("0.04"),
            "{small}"
        );
        let big = checks_warning(0.01, 10_000).unwrap();
        assert!(
            big.starts_with("note:") && big.contains("about 100 of its 10000"),
            "{big}"
        );
        assert_eq!(checks_warning(0.0, 79), None);
    }

    use super::every_page;

    /// A listing of `entries` served `size` at a time; `stuck` makes every page after the first
    /// answer the first page again.
    async fn list(entries: u64, size: usize, stuck: bool) -> anyhow::Result<Vec<u64>> {
        let all: Vec<u64> = (1..=entries).collect();
        let mut asked = 0;
        let page = async |after: u64| {
            asked += 1;
            let from = if stuck { 0 } else { after as usize };
            let page: Vec<u64> = all.iter().skip(from).take(size).copied().collect();
            let more = from + page.len() < all.len();
            Ok((page, more))
        };
        every_page("numbers", page, |n: &u64| Some(*n)).await
    }

    #[tokio::test]
    async fn every_page_is_joined_in_order() {
        assert_eq!(
            list(10, 3, false).await.unwrap(),
            (1..=10).collect::<Vec<_>>()
        );
        assert_eq!(list(0, 3, false).await.unwrap(), Vec::<u64>::new());
        assert_eq!(
            list(6, 3, false).await.unwrap(),
            (1..=6).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn a_listing_that_does_not_move_on_is_refused() {
        let refused = list(10, 3, true).await.unwrap_err().to_string();
        assert!(refused.contains("does not go on"), "{refused}");
        // A page that is empty yet announces more.
        let empty = every_page(
            "numbers",
            async |_: u64| Ok((Vec::<u64>::new(), true)),
            |n| Some(*n),
        );
        assert!(empty.await.is_err());
        // An entry whose place cannot be read.
        let unreadable = every_page(
            "numbers",
            async |_: u64| Ok((vec![7u64], true)),
            |_| None::<u64>,
        );
        assert!(unreadable.await.is_err());
    }
}

#[cfg(test)]
mod advice_tests {
    use super::{run_line, submitted_advice, StatusOutput};

    /// A run whose only jobs left wait for a check by a second credential says so, and what to do; one
    /// with work still leased does not (issue 40).
    #[test]
    fn a_run_waiting_for_a_second_credential_says_what_to_do() {
        let mut r = nqueens_proto::RunStatus {
            run: "2".into(),
            n: 12,
            jobs_total: 34,
            jobs_done: 33,
            jobs_verifying: 1,
            state: nqueens_proto::RunState::Running as i32,
            ..Default::default()
        };
        let line = run_line(&StatusOutput::from(r.clone()));
        assert!(
            line.contains("waiting for a worker of another credential")
                && line.contains("nqueens credential issue"),
            "{line}"
        );
        r.jobs_leased = 1;
        r.jobs_done = 32;
        let line = run_line(&StatusOutput::from(r));
        assert!(!line.contains("waiting for"), "{line}");
    }

    #[test]
    fn a_finished_run_is_not_offered_for_cancelling() {
        let done = submitted_advice("2", true);
        assert!(
            done.contains("is done") && !done.contains("cancel"),
            "{done}"
        );
        let running = submitted_advice("2", false);
        assert!(
            running.contains("nqueens cancel 2") && running.contains("--reuse"),
            "{running}"
        );
    }
}
