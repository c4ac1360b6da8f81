//! `nqueens cancel`, `pause`, `resume` and `priority`: an operator's controls of a run on a running
//! coordinator, and `status --jobs`, the listing of a run's failed, disputed or verifying jobs.

use clap::{Args, ValueEnum};
use nqueens_proto as proto;
use serde::Serialize;

use crate::connection::ConnectionArgs;
use crate::remote::print;
use crate::rpc::{locate, rpc};

/// Arguments of `nqueens cancel`, `pause` and `resume`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The run's id (as `submit` and `status` print it).
    pub run: String,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Print the run as one JSON object instead of a line of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `nqueens priority`.
#[derive(Debug, Args)]
pub struct PriorityArgs {
    /// The run's id.
    pub run: String,
    /// The new priority: workers take jobs from the running run of the highest priority first (ties:
    /// the oldest); default of a new run 0, negative values allowed.
    #[arg(allow_negative_numbers = true)]
    pub priority: i32,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Print the run as one JSON object instead of a line of text.
    #[arg(long)]
    pub json: bool,
}

/// What an operator does to a run.
#[derive(Debug, Clone, Copy)]
pub enum Action {
    Cancel,
    Pause,
    Resume,
}

/// Cancels, pauses or resumes a run, then prints it.
pub fn run(action: Action, args: &RunArgs) -> anyhow::Result<()> {
    let status = super::runtime()?
        .block_on(async {
            let mut client = args.connection.connect()?;
            let req = proto::RunControlRequest {
                run: args.run.clone(),
            };
            let reply = match action {
                Action::Cancel => client.cancel_run(req).await,
                Action::Pause => client.pause_run(req).await,
                Action::Resume => client.resume_run(req).await,
            };
            anyhow::Ok(reply.map_err(rpc)?.into_inner())
        })
        .map_err(|e| locate(e, &args.connection.coordinator))?;
    print(&status.into(), args.json)
}

/// Sets a run's priority, then prints it.
pub fn priority(args: &PriorityArgs) -> anyhow::Result<()> {
    let status = super::runtime()?
        .block_on(async {
            let mut client = args.connection.connect()?;
            let req = proto::SetPriorityRequest {
                run: args.run.clone(),
                priority: args.priority,
            };
            anyhow::Ok(client.set_priority(req).await.map_err(rpc)?.into_inner())
        })
        .map_err(|e| locate(e, &args.connection.coordinator))?;
    print(&status.into(), args.json)
}

/// The job states `status --jobs` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JobsIn {
    /// Given up after too many attempts or too many disagreeing results.
    Failed,
    /// Verified jobs whose results disagree.
    Disputed,
    /// Verified jobs waiting for a worker of another identity.
    Verifying,
}

impl JobsIn {
    fn wire(self) -> proto::JobState {
        match self {
            JobsIn::Failed => proto::JobState::Failed,
            JobsIn::Disputed => proto::JobState::Disputed,
            JobsIn::Verifying => proto::JobState::Verifying,
        }
    }

    fn name(self) -> &'static str {
        match self {
            JobsIn::Failed => "failed",
            JobsIn::Disputed => "disputed",
            JobsIn::Verifying => "verifying",
        }
    }
}

/// One job as `status --jobs --json` prints it.
#[derive(Debug, Serialize)]
struct JobOutput<'a> {
    run: &'a str,
    job: &'a str,
    state: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    workers: &'a [String],
}

/// Lists the jobs of `run` (or of every run) in state `jobs`, at most `limit`, one per line; says on
/// stderr when there were more.
pub fn list_jobs(
    connection: &ConnectionArgs,
    run: Option<&str>,
    jobs: JobsIn,
    limit: u32,
    json: bool,
) -> anyhow::Result<()> {
    let listing = super::runtime()?
        .block_on(async {
            let mut client = connection.connect()?;
            let req = proto::ListJobsRequest {
                state: jobs.wire() as i32,
                run: run.map(str::to_string),
                limit,
            };
            anyhow::Ok(client.list_jobs(req).await.map_err(rpc)?.into_inner())
        })
        .map_err(|e| locate(e, &connection.coordinator))?;
    for j in &listing.jobs {
        let out = JobOutput {
            run: &j.run,
            job: &j.job,
            state: jobs.name(),
            reason: &j.reason,
            workers: &j.workers,
        };
        if json {
            println!("{}", serde_json::to_string(&out)?);
        } else {
            let mut line = format!("run {} job {} {}", out.run, out.job, out.state);
            if !out.workers.is_empty() {
                line += &format!(" (results from {})", out.workers.join(", "));
            }
            if !out.reason.is_empty() {
                line += &format!(": {}", out.reason);
            }
            println!("{line}");
        }
    }
    if listing.truncated {
        eprintln!(
            "truncated: only the first {} {} jobs are shown (--limit raises it, up to 10000; --run narrows it)",
            listing.jobs.len(),
            jobs.name()
        );
    } else if listing.jobs.is_empty() && !json {
        eprintln!("no {} jobs", jobs.name());
    }
    Ok(())
}
