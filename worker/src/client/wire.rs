//! The worker's [`Link`] over gRPC: the one file of the client that builds or reads prost types. It
//! turns the loop's requests into the coordinator's messages, its answers back, and sorts every failed
//! call by what the worker does about it ([`Kind`]).

use std::time::Duration;

use nqueens_proto as proto;
use nqueens_proto::{connect, strategy_from_wire, Client, Connection};
use tonic::{Code, Status};

use super::link::{Ask, Beat, CallError, Kind, Lease, Leased, Link, Outcome, RunInfo};
use crate::error::Result;
use crate::journal::Finished;

/// A coordinator reached over gRPC, as the worker `id` of the name `name`.
#[derive(Clone)]
pub struct Grpc {
    client: Client,
    id: String,
    name: String,
}

impl Grpc {
    /// The link to the coordinator `connection` names (connected at the first call).
    pub fn connect(connection: &Connection, id: String, name: String) -> Result<Grpc> {
        Ok(Grpc {
            client: connect(connection)?,
            id,
            name,
        })
    }
}

impl Link for Grpc {
    async fn lease(&mut self, ask: Ask) -> std::result::Result<Leased, CallError> {
        let reply = self
            .client
            .lease(proto::LeaseRequest {
                worker_id: self.id.clone(),
                worker_name: self.name.clone(),
                threads: ask.threads as u32,
                capacity: ask.capacity as u32,
                run: ask.run,
                wait_ms: ask.wait_ms,
                gpus: ask.gpus,
                gpu_kernels: ask.gpu_kernels,
            })
            .await
            .map_err(sorted)?
            .into_inner();
        Ok(Leased {
            leases: reply.leases.into_iter().map(lease_of).collect(),
            lease_timeout_ms: reply.lease_timeout_ms,
            retry_after_ms: reply.retry_after_ms,
            idle: reply.idle,
        })
    }

    async fn report(
        &mut self,
        batch: &[Finished],
    ) -> std::result::Result<Vec<Option<Outcome>>, CallError> {
        let results = batch
            .iter()
            .map(|f| proto::JobResult {
                lease_id: f.lease,
                run: f.run.clone(),
                n: f.n,
                job: f.job.clone(),
                total: f.total,
                unique8: f.unique8,
                nodes: f.nodes,
                seal: Some(f.seal),
                lease_tag: f.lease_tag,
                device: f.device.clone(),
                family: proto::Family::from(f.family).into(),
            })
            .collect();
        let reply = self
            .client
            .report(proto::ReportRequest {
                worker_id: self.id.clone(),
                worker_name: self.name.clone(),
                results,
                // Leases come from Lease calls (see docs/cluster.md on leases riding on reports).
                ..Default::default()
            })
            .await
            .map_err(sorted)?
            .into_inner();
        Ok(reply.outcomes.into_iter().map(outcome_of).collect())
    }

    async fn heartbeat(&mut self, ids: Vec<u64>) -> std::result::Result<Beat, CallError> {
        let reply = self
            .client
            .heartbeat(proto::HeartbeatRequest {
                worker_id: self.id.clone(),
                lease_ids: ids,
            })
            .await
            .map_err(sorted)?
            .into_inner();
        Ok(Beat {
            lost: reply.lost,
            cancelled: reply.cancelled,
            lease_timeout_ms: reply.lease_timeout_ms,
        })
    }

    async fn release(
        &mut self,
        ids: Vec<u64>,
        leaving: bool,
    ) -> std::result::Result<(), CallError> {
        self.client
            .release(proto::ReleaseRequest {
                worker_id: self.id.clone(),
                lease_ids: ids,
                leaving,
            })
            .await
            .map_err(sorted)?;
        Ok(())
    }

    async fn run(&mut self, run: String) -> std::result::Result<Option<RunInfo>, CallError> {
        match self.client.get_run(proto::GetRunRequest { run }).await {
            Ok(reply) => {
                let run = reply.into_inner();
                Ok(Some(RunInfo {
                    run: run.run,
                    n: run.n,
                    jobs_total: run.jobs_total,
                    fingerprint: run.plan_fingerprint,
                }))
            }
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(sorted(s)),
        }
    }
}

/// A lease as the worker holds it.
fn lease_of(lease: proto::JobLease) -> Lease {
    let plan = strategy_from_wire(lease.strategy).and_then(|strategy| {
        let depth = u8::try_from(lease.depth)
            .map_err(|_| nqueens_common::Error::InvalidSetting(format!("depth {}", lease.depth)))?;
        nqueens_common::Plan::with_depth(lease.n, strategy, depth)
    });
    Lease {
        id: lease.lease_id,
        tag: lease.lease_tag,
        run: lease.run,
        n: lease.n,
        plan,
        job: lease.job,
        fingerprint: lease.plan_fingerprint,
    }
}

/// A reported result's outcome, `None` for one this build does not know (or none given).
fn outcome_of(wire: i32) -> Option<Outcome> {
    match proto::Outcome::try_from(wire).ok()? {
        proto::Outcome::Unspecified => None,
        proto::Outcome::Accepted => Some(Outcome::Accepted),
        proto::Outcome::Duplicate => Some(Outcome::Duplicate),
        proto::Outcome::Mismatch => Some(Outcome::Mismatch),
        proto::Outcome::Pending => Some(Outcome::Pending),
        proto::Outcome::Disputed => Some(Outcome::Disputed),
        proto::Outcome::JobFailed => Some(Outcome::JobFailed),
    }
}

/// A failed call, sorted by what the worker does about it.
fn sorted(s: Status) -> CallError {
    let kind = if refused(&s) {
        Kind::Refused {
            tls: tls_refusal(&s),
        }
    } else if transient(&s) {
        Kind::Transient
    } else if refuses_the_result(&s) {
        Kind::OfTheResult
    } else {
        Kind::Other
    };
    CallError {
        kind,
        code: format!("{:?}", s.code()),
        message: s.message().to_string(),
    }
}

/// Whether a failed call is worth retrying later (the coordinator is down, restarting or overloaded).
fn transient(s: &Status) -> bool {
    tls_refusal(s).is_none()
        && matches!(
            s.code(),
            Code::Unavailable
                | Code::Unknown
                | Code::DeadlineExceeded
                | Code::ResourceExhausted
                | Code::Aborted
                | Code::Cancelled
                | Code::Internal
        )
}

/// Whether the coordinator's refusal of a report of one result is about that result (a seal that fails,
/// a job it does not know, a lease that does not cover it, a run cancelled or done; a run it does not
/// know at all is the wrong coordinator, see the loop's report): the result is dropped, since it would
/// be refused forever, and its job is computed again. Any other refusal is about the request or the
/// server (a worker name, a batch size or a device name it refuses, or a message it cannot decode, each
/// marked as a refusal of the request; a service it does not offer behind a proxy): the worker stops
/// and keeps its journal.
fn refuses_the_result(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition
    ) && !nqueens_proto::refuses_the_request(s)
}

/// Whether the coordinator refuses this worker for good (quarantined, or a wrong token), or its
/// certificate cannot be trusted ([`tls_refusal`]): it stops.
fn refused(s: &Status) -> bool {
    matches!(s.code(), Code::PermissionDenied | Code::Unauthenticated) || tls_refusal(s).is_some()
}

/// A TLS handshake the worker cannot get past alone: the coordinator's certificate does not chain to
/// `--tls-ca`, is outside its validity dates, or names another host. What failed and what to fix, or
/// `None` (a refused or lost connection is retried as before).
fn tls_refusal(s: &Status) -> Option<String> {
    let mut text = s.message().to_string();
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(s);
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    let at = text.find("invalid peer certificate")?;
    let why = utc_times(text[at..].lines().next().unwrap_or_default());
    let fix = if ["Expired", "expired", "NotValidYet", "not valid yet"]
        .iter()
        .any(|w| why.contains(w))
    {
        "the coordinator's certificate is outside its validity dates: renew it on the coordinator \
         (`nqueens tls init DIR --force`) and check both machines' clocks"
    } else if why.contains("NotValidForName") || why.contains("not valid for name") {
        "--coordinator names a host the certificate was not made for: use one of its names, or add \
         this one on the coordinator (`nqueens tls init DIR --host NAME --force`)"
    } else {
        "the coordinator's certificate does not chain to --tls-ca: give the CA it was made with \
         (DIR/ca.pem of `nqueens tls init DIR` on the coordinator)"
    };
    Some(format!("TLS: {why}; {fix}"))
}

/// `s` with the Unix times rustls writes (`verification time 1795000000 (UNIX)`) as UTC dates.
fn utc_times(s: &str) -> String {
    s.replace(" (UNIX)", "")
        .split(' ')
        .map(|word| {
            let digits = word.trim_end_matches([',', ')', ';']);
            match digits.parse::<u64>() {
                Ok(secs) if (9..=11).contains(&digits.len()) => {
                    let t = std::time::UNIX_EPOCH + Duration::from_secs(secs);
                    word.replacen(digits, &humantime::format_rfc3339_seconds(t).to_string(), 1)
                }
                _ => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// A TLS failure no retry mends stops the worker with what to fix and dates in UTC; a refused or
    /// lost connection is still retried.
    #[test]
    fn certificate_failures_stop_the_worker_naming_the_flag() {
        let expired = Status::unavailable(
            "transport error: invalid peer certificate: certificate expired: verification time 1795000000 (UNIX), but certificate is not valid after 1609459200 (185540800 seconds ago)",
        );
        let why = tls_refusal(&expired).unwrap();
        assert!(
            why.contains("2026-11-18T") && why.contains("2021-01-01T00:00:00Z"),
            "{why}"
        );
        assert!(
            why.contains("tls init DIR --force") && !why.contains("(UNIX)"),
            "{why}"
        );
        assert!(refused(&expired) && !transient(&expired));
        let name = Status::unavailable(
            "invalid peer certificate: certificate not valid for name \"localhost\"; certificate is only valid for IpAddress(127.0.0.1)",
        );
        assert!(tls_refusal(&name)
            .unwrap()
            .contains("--coordinator names a host"));
        let ca = Status::unavailable("invalid peer certificate: BadSignature");
        assert!(tls_refusal(&ca)
            .unwrap()
            .contains("does not chain to --tls-ca"));
        assert!(matches!(sorted(ca).stop(), Error::Tls(_)));
        let lost = Status::unavailable("tcp connect error: Connection refused");
        assert!(tls_refusal(&lost).is_none() && transient(&lost) && !refused(&lost));
        assert!(sorted(lost).transient());
    }

    #[test]
    fn a_refusal_of_the_request_is_not_one_of_the_result() {
        // A result refused (its seal, its lease, its job): dropped, computed again.
        assert!(refuses_the_result(&Status::invalid_argument("seal")));
        assert!(refuses_the_result(&Status::failed_precondition(
            "not leased"
        )));
        assert_eq!(sorted(Status::not_found("job")).kind, Kind::OfTheResult);
        // The request refused whole (a device name, a batch size, an undecodable message): before, the
        // worker took it for its results', dropped them one by one, and computed them again for ever
        // where the refusal was its own (found by a review, 2026-11-24, a later session).
        let whole = nqueens_proto::refusing_the_request(Status::invalid_argument("device"));
        assert!(!refuses_the_result(&whole));
        assert!(
            !transient(&whole) && !refused(&whole),
            "it stops the worker"
        );
        let sorted = sorted(whole);
        assert_eq!(sorted.kind, Kind::Other);
        assert!(
            matches!(sorted.stop(), Error::Refused(why) if why == "InvalidArgument: device"),
            "the code and the message"
        );
        assert!(super::sorted(Status::permission_denied("quarantined")).refused());
    }

    /// Every outcome of the wire is one of the worker's, and an unknown or unset one is none.
    #[test]
    fn outcomes_are_read_and_unknown_ones_are_none() {
        assert_eq!(outcome_of(0), None);
        assert_eq!(outcome_of(99), None);
        assert_eq!(
            outcome_of(proto::Outcome::Accepted as i32),
            Some(Outcome::Accepted)
        );
        assert_eq!(
            outcome_of(proto::Outcome::Mismatch as i32),
            Some(Outcome::Mismatch)
        );
        assert_eq!(
            outcome_of(proto::Outcome::JobFailed as i32),
            Some(Outcome::JobFailed)
        );
        // Named in the log as the protocol names them.
        for wire in 1..=6 {
            let outcome = outcome_of(wire).unwrap();
            assert_eq!(
                outcome.name(),
                proto::Outcome::try_from(wire).unwrap().as_str_name()
            );
        }
    }

    /// A lease's plan is built from its strategy and depth, or names why this build cannot build it.
    #[test]
    fn a_lease_names_its_plan_or_why_there_is_none() {
        let wire = |strategy: i32, depth: u32| proto::JobLease {
            lease_id: 9,
            run: "1".into(),
            n: 8,
            strategy,
            depth,
            job: "0".into(),
            plan_fingerprint: 1,
            lease_tag: 2,
        };
        let lease = lease_of(wire(proto::Strategy::Mirror as i32, 2));
        assert_eq!(
            lease.plan,
            Ok(nqueens_common::Plan::with_depth(8, nqueens_common::Strategy::Mirror, 2).unwrap())
        );
        assert_eq!((lease.id, lease.tag, lease.fingerprint), (9, 2, 1));
        assert!(lease_of(wire(99, 2)).plan.is_err());
        let why = lease_of(wire(proto::Strategy::D4 as i32, 300))
            .plan
            .unwrap_err()
            .to_string();
        assert_eq!(why, "invalid partition setting: depth 300", "said once");
    }
}
