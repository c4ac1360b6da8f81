//! `nqueens submit`, and a run's status as text or JSON (what `submit`, `status` and the controls print).

use clap::Args;
use nqueens_proto as proto;

use super::PartitionArgs;
use crate::rpc::{locate, rpc};
use nqueens_coordinator::service::progress::format_eta;
use nqueens_coordinator::wire::status_json::StatusOutput;

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
    /// unseen, from 1 to 36.6 (the default): the run verifies at least about 1 / (e * E) of its jobs
    /// (E = 1: 31 %; 5: 7.1 %; the default: 1 %), and spot checks make as much of every credential's
    /// leases while it is open.
    #[arg(long, value_name = "E")]
    pub max_error: Option<f64>,
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
            ", record: {}/{} jobs with two independent results ({} of two kernel families)",
            s.jobs_confirmed, s.jobs_total, s.jobs_two_families
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
    let runs = crate::rpc::all_runs(client).await?;
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
