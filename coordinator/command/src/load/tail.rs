//! The tail of a run beside the load: a second run none of whose jobs is free, and workers whose lease
//! calls wait on it (as a fleet's do at the end of a run, while the last jobs compute). Every change the
//! load makes wakes those calls, and each looks again: this measures what that costs the load.

use std::time::Duration;

use nqueens_proto as proto;
use nqueens_proto::Client;
use serde::Serialize;
use tokio::time::Instant;

use super::worker::result_of_job;
use super::LoadError;

/// What the waiting calls wait on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Tail {
    /// Every job of the run leased, by one holder that keeps its leases alive: a waiting call finds
    /// its queues empty.
    Leased,
    /// A verified run whose every job has its first result and waits for a second from another
    /// identity: a waiting call looks through the jobs held back for the identities drawn to confirm
    /// them, the slowest look there is.
    Verifying,
}

/// N of the tail's run, and its depth: 16,846 jobs (d4), a few more than a lease call looks at in a
/// retry queue.
pub const TAIL_N: u32 = 20;
const TAIL_DEPTH: u32 = 2;

/// The holder's name, and its process id.
const HOLDER: &str = "tail-holder";

/// How often the holder renews its leases (a lease lives 60 s by default).
const RENEW: Duration = Duration::from_secs(15);

/// Longest a waiting call may wait (`LeaseRequest.wait_ms`).
const WAIT_MS: u32 = 10_000;

/// The tail's run once prepared: its id and jobs, and the holder's leases to keep alive.
pub struct Prepared {
    pub run: String,
    pub jobs: u64,
    leases: Vec<u64>,
}

/// What the waiting calls saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Waited {
    /// Workers whose lease calls waited.
    pub waiters: usize,
    pub tail: Option<Tail>,
    /// Jobs of the tail's run.
    pub jobs: u64,
    /// Their lease calls answered (each waited until a job came free or `wait_ms` passed).
    pub calls: u64,
    /// Jobs they were leased (a verified job's second result, by an identity drawn for it).
    pub leased: u64,
    /// Failed calls, and the first one's error.
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Creates the tail's run and takes all its jobs out of reach: leased by the holder, and for
/// [`Tail::Verifying`], each given its first result.
pub async fn prepare(client: &mut Client, tail: Tail) -> Result<Prepared, LoadError> {
    let status = client
        .create_run(proto::CreateRunRequest {
            n: TAIL_N,
            strategy: proto::Strategy::D4.into(),
            depth: Some(TAIL_DEPTH),
            reuse: false,
            verify_fraction: Some(match tail {
                Tail::Leased => 0.0,
                Tail::Verifying => 1.0,
            }),
            priority: 0,
            record: false,
            max_error: None,
        })
        .await?
        .into_inner();
    let mut held = Vec::new();
    loop {
        let answer = client
            .lease(proto::LeaseRequest {
                worker_id: HOLDER.into(),
                worker_name: HOLDER.into(),
                threads: 1,
                capacity: proto::MAX_LEASE_CAPACITY,
                run: Some(status.run.clone()),
                wait_ms: 0,
                gpus: 0,
                gpu_kernels: Vec::new(),
            })
            .await?
            .into_inner();
        if answer.leases.is_empty() {
            break;
        }
        held.extend(answer.leases);
    }
    if held.len() as u64 != status.jobs_total {
        return Err(LoadError::Invalid(format!(
            "the tail's holder was leased {} of the run's {} jobs",
            held.len(),
            status.jobs_total
        )));
    }
    let mut leases: Vec<u64> = held.iter().map(|l| l.lease_id).collect();
    if tail == Tail::Verifying {
        for chunk in held.chunks(proto::MAX_LEASE_CAPACITY as usize) {
            let results = chunk
                .iter()
                .map(|l| result_of_job(l, TAIL_N, true))
                .collect();
            let answer = client
                .report(proto::ReportRequest {
                    worker_id: HOLDER.into(),
                    worker_name: HOLDER.into(),
                    results,
                    lease_capacity: 0,
                    threads: 1,
                    lease_run: None,
                    gpus: 0,
                    gpu_kernels: Vec::new(),
                })
                .await?
                .into_inner();
            let pending = answer
                .outcomes
                .iter()
                .filter(|&&o| o == i32::from(proto::Outcome::Pending))
                .count();
            if pending != chunk.len() {
                return Err(LoadError::Invalid(format!(
                    "{} of the tail's {} first results were not left waiting for a second",
                    chunk.len() - pending,
                    chunk.len()
                )));
            }
        }
        leases.clear();
    }
    Ok(Prepared {
        run: status.run,
        jobs: status.jobs_total,
        leases,
    })
}

/// Keeps the holder's leases alive until `until`.
pub async fn hold(
    mut client: Client,
    prepared: &Prepared,
    until: Instant,
) -> Result<(), LoadError> {
    if prepared.leases.is_empty() {
        return Ok(());
    }
    while Instant::now() < until {
        tokio::time::sleep(RENEW.min(until.saturating_duration_since(Instant::now()))).await;
        for ids in prepared.leases.chunks(proto::MAX_LEASE_IDS) {
            client
                .heartbeat(proto::HeartbeatRequest {
                    worker_id: HOLDER.into(),
                    lease_ids: ids.to_vec(),
                })
                .await?;
        }
    }
    Ok(())
}

/// One waiting worker, named `name`: asks for a job of `run`, waiting, again and again until it is
/// leased one (it keeps it, as busy computing it) or `until`.
pub async fn wait(mut client: Client, name: String, run: String, until: Instant) -> Waited {
    let mut w = Waited::default();
    while Instant::now() < until {
        let call = client.lease(proto::LeaseRequest {
            worker_id: name.clone(),
            worker_name: name.clone(),
            threads: 1,
            capacity: 1,
            run: Some(run.clone()),
            // Not past the load's end.
            wait_ms: u32::try_from(until.saturating_duration_since(Instant::now()).as_millis())
                .map_or(WAIT_MS, |left| left.min(WAIT_MS)),
            gpus: 0,
            gpu_kernels: Vec::new(),
        });
        match call.await {
            Ok(answer) => {
                let answer = answer.into_inner();
                w.calls += 1;
                w.leased += answer.leases.len() as u64;
                if !answer.leases.is_empty() {
                    // Busy with it for the rest of the load, as a worker is with a job of a large N.
                    break;
                }
                if answer.retry_after_ms > 0 {
                    let pause = Duration::from_millis(answer.retry_after_ms.into());
                    tokio::time::sleep(pause.min(until.saturating_duration_since(Instant::now())))
                        .await;
                }
            }
            Err(s) => {
                w.errors += 1;
                w.first_error
                    .get_or_insert_with(|| format!("{:?}: {}", s.code(), s.message()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    w
}
