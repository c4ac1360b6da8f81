//! The client's tests over gRPC: a real server on loopback (the coordinator's fake, [`super::fake`], or
//! nothing at all) and the whole of [`super::run`].

use std::path::PathBuf;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use nqueens_common::Plan;
use nqueens_proto as proto;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::*;
use crate::faults::Faults;
use crate::journal::{Finished, Journal};
use crate::metrics::Metrics;
use crate::Connection;

#[tokio::test(start_paused = true)]
async fn issue_16_the_loop_rides_out_a_dead_coordinator_with_capped_retries_and_keeps_its_results()
{
    // Nothing listens there: every call fails at once.
    let address = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", probe.local_addr().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    // One finished, unacknowledged result from an earlier start.
    let (journal, finished, config) = journaled(dir.path(), address, "w");
    let metrics = config.metrics.clone();
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(run(config, shutdown.clone()));
    // Two minutes of (paused, auto-advancing) time without a coordinator.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(!worker.is_finished(), "a worker waits for its coordinator");
    // The journaled result is re-sent first: every attempt is a Report that fails.
    let tried = metrics.rpc.errors("Report");
    // 50 ms doubling to a 5-10 s cap: about two dozen attempts in two minutes (22 here), never a
    // busy loop, never silence. The lower bound leaves room for a connect timeout (5 s, in paused
    // time) taken by every attempt.
    assert!((4..=60).contains(&tried), "{tried} attempts in 120 s");
    shutdown.cancel();
    let summary = tokio::time::timeout(Duration::from_secs(60), worker)
        .await
        .expect("it stops on shutdown while disconnected")
        .unwrap()
        .unwrap();
    assert_eq!(summary, Summary::default());
    // The unacknowledged result is still journaled for the next start.
    assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
}

/// A journal holding one finished, unacknowledged result, and a worker configuration around it.
fn journaled(
    dir: &std::path::Path,
    address: String,
    name: &str,
) -> (PathBuf, Finished, WorkerConfig) {
    let journal = dir.join("w.journal");
    let plan = Plan::new(8, nqueens_common::Strategy::D4).unwrap();
    let key = plan.jobs().next().unwrap();
    let finished = Finished::computed(plan, &key, 7, 1, "1").unwrap();
    Journal::open(&journal)
        .unwrap()
        .record(std::slice::from_ref(&finished))
        .unwrap();
    let config = WorkerConfig {
        connection: Connection::new(address),
        threads: 1,
        name: name.into(),
        journal: Some(journal.clone()),
        run: None,
        exit_when_idle: false,
        faults: Faults::default(),
        progress_interval: Duration::from_secs(30),
        metrics: Arc::new(Metrics::default()),
        gpu: GpuConfig::default(),
    };
    (journal, finished, config)
}

/// A server that answers every call UNIMPLEMENTED (a wrong address behind a proxy, another gRPC
/// service) refuses the worker's requests, not its results: the worker stops, naming the code, and
/// its journaled result stays for the next start. (It used to retry the batch result by result and
/// drop each one as refused.)
#[tokio::test]
async fn a_server_without_the_service_stops_the_worker_and_its_journal_keeps_its_results() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    // Only the health service: every call of the coordinator's service is UNIMPLEMENTED.
    let (_, health) = tonic_health::server::health_reporter();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let dir = tempfile::tempdir().unwrap();
    let (journal, finished, config) = journaled(dir.path(), address, "w");
    let stopped = tokio::time::timeout(
        Duration::from_secs(30),
        run(config, CancellationToken::new()),
    )
    .await
    .expect("the worker stops");
    match stopped {
        Err(Error::Refused(why)) => assert!(why.contains("Unimplemented"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
    server.abort();
}

/// A name the coordinator would refuse (empty, with a control character or a right-to-left override,
/// too long for the id built from it) stops the worker at once, before it opens its journal or calls
/// anyone.
#[tokio::test]
async fn a_name_the_coordinator_would_refuse_stops_the_worker_before_anything() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["", "a\nb", "a\u{202e}b", &"x".repeat(MAX_NAME_LEN + 1)] {
        let (journal, finished, config) = journaled(dir.path(), "http://127.0.0.1:9".into(), name);
        let stopped = tokio::time::timeout(
            Duration::from_secs(30),
            run(config, CancellationToken::new()),
        )
        .await
        .expect("the worker stops at once");
        assert!(
            matches!(stopped, Err(Error::BadName(_))),
            "{name:?}: {stopped:?}"
        );
        assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
    }
    let longest = "x".repeat(MAX_NAME_LEN);
    let id = worker_id(&longest, u32::MAX, u64::MAX);
    assert!(
        nqueens_common::names::valid_new_worker_id(&id),
        "the longest name makes a valid id"
    );
}

/// Runs a worker until it stops on its own (at most ten seconds).
async fn stops(config: WorkerConfig) -> Result<Summary> {
    tokio::time::timeout(
        Duration::from_secs(10),
        run(config, CancellationToken::new()),
    )
    .await
    .expect("the worker stops")
}

/// An OK answer to a report without one known outcome per result (a stub, a proxy, another
/// version) acknowledges nothing: the worker stops, its journal kept (found by a review, 2026-11-24,
/// a later session: the whole batch was dropped from the journal).
#[tokio::test]
async fn an_answer_without_an_outcome_per_result_acknowledges_nothing() {
    for outcomes in [vec![], vec![0], vec![99]] {
        let fake = fake::Fake {
            report: Box::new(move |_| {
                Ok(proto::ReportResponse {
                    outcomes: outcomes.clone(),
                    lease: None,
                })
            }),
            ..Default::default()
        };
        let (address, server) = fake.serve().await;
        let dir = tempfile::tempdir().unwrap();
        let (journal, finished, config) = journaled(dir.path(), address, "w");
        let stopped = stops(config).await;
        match stopped {
            Err(Error::Refused(why)) => assert!(why.contains("outcome"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
        server.abort();
    }
}

/// A journal that cannot be written when results are acknowledged stops the worker, naming the
/// journal (found by a review, 2026-11-24, a later session: the failure was taken for an
/// unreachable coordinator, and the worker sent the batch again every few seconds for as long as
/// the disk stayed full, leasing nothing and never stopping).
#[tokio::test]
async fn a_journal_that_cannot_be_written_stops_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let swap = dir.path().join("w.journal");
    let fake = fake::Fake {
        report: Box::new(move |r| {
            // The journal's file gives way to a directory: its rewrite on acknowledgement fails.
            let _ = std::fs::remove_file(&swap);
            let _ = std::fs::create_dir(&swap);
            let _ = std::fs::write(swap.join("x"), b"x");
            Ok(proto::ReportResponse {
                outcomes: vec![proto::Outcome::Accepted as i32; r.results.len()],
                lease: None,
            })
        }),
        ..Default::default()
    };
    let reports = fake.reports.clone();
    let (address, server) = fake.serve().await;
    let (_, _, config) = journaled(dir.path(), address, "w");
    let stopped = stops(config).await;
    assert!(matches!(stopped, Err(Error::Journal(..))), "{stopped:?}");
    assert_eq!(reports.load(SeqCst), 1, "not sent again and again");
    server.abort();
}

/// Leases of jobs this worker cannot build (a strategy of a newer coordinator) are handed back, and
/// the worker stops, saying why (found by a review, 2026-11-24, a later session: they were dropped
/// unreleased, and the worker asked for more at once, about a thousand calls a second, each taking
/// jobs of the run from every other worker until their leases expired).
#[tokio::test]
async fn leases_of_jobs_this_worker_cannot_build_are_handed_back_and_stop_it() {
    let fake = fake::Fake {
        lease: Box::new(|_| {
            Ok(proto::LeaseResponse {
                leases: vec![proto::JobLease {
                    lease_id: 9,
                    run: "1".into(),
                    n: 8,
                    strategy: 99,
                    depth: 2,
                    job: "0".into(),
                    plan_fingerprint: 1,
                    lease_tag: 1,
                }],
                lease_timeout_ms: 60_000,
                retry_after_ms: 0,
                idle: false,
            })
        }),
        ..Default::default()
    };
    let (leases, released) = (fake.leases.clone(), fake.released.clone());
    let (address, server) = fake.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let (_, _, config) = journaled(dir.path(), address, "w");
    let stopped = stops(config).await;
    match stopped {
        Err(Error::Refused(why)) => assert!(why.contains("cannot build"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(leases.load(SeqCst), 1);
    assert_eq!(released.load(SeqCst), 1, "handed back");
    server.abort();
}
/// A lease whose plan fingerprint is not this build's enumeration of its plan (a coordinator of
/// another version, whose job keys may mean other sub-problems) is handed back unstarted and the
/// worker stops, saying so; with the right fingerprint the same job is computed and reported (found
/// by a review, 2026-11-25: the fingerprint was only copied into the seal, never compared, and a job
/// of another enumeration was counted under its key).
#[tokio::test]
async fn a_lease_of_another_enumeration_of_its_plan_is_handed_back_and_stops_the_worker() {
    let plan = Plan::new(8, nqueens_common::Strategy::D4).unwrap();
    let key = plan.jobs().nth(1).unwrap();
    let right = plan.fingerprint().1;
    for (fingerprint, refused) in [(right ^ 1, true), (right, false)] {
        let job = key.to_string();
        let reported = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
        let fake = fake::Fake {
            lease: fake::lease_once(move |_| {
                vec![proto::JobLease {
                    lease_id: 9,
                    run: "1".into(),
                    n: 8,
                    strategy: proto::Strategy::D4 as i32,
                    depth: u32::from(plan.depth()),
                    job: job.clone(),
                    plan_fingerprint: fingerprint,
                    lease_tag: 1,
                }]
            }),
            report: fake::accept_noting(reported.clone()),
            ..Default::default()
        };
        let released = fake.released.clone();
        let (address, server) = fake.serve().await;
        let dir = tempfile::tempdir().unwrap();
        let (_, _, mut config) = journaled(dir.path(), address, "w");
        config.exit_when_idle = true;
        let stopped = stops(config).await;
        let reported = reported.lock().unwrap().clone();
        if refused {
            match stopped {
                Err(Error::Refused(why)) => assert!(why.contains("fingerprint"), "{why}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(released.load(SeqCst), 1, "handed back");
            assert!(!reported.contains(&9), "{reported:?}");
        } else {
            stopped.unwrap();
            assert!(reported.contains(&9), "{reported:?}");
        }
        server.abort();
    }
}
/// A lease reply is checked before anything is computed: a lease id given twice (in the reply, or
/// already held) is computed once, the second ignored (never handed back, which would release the
/// first); leases beyond the capacity asked are handed back at once (found by a review, 2026-11-25:
/// both were taken as given, a duplicate id overwrote the first in the worker's books, and a reply
/// of many thousands took every one).
#[tokio::test]
async fn a_lease_reply_with_a_repeated_id_or_more_than_asked_is_trimmed() {
    let plan = Plan::new(8, nqueens_common::Strategy::D4).unwrap();
    let fingerprint = plan.fingerprint().1;
    let keys: Vec<String> = plan.jobs().map(|k| k.to_string()).collect();
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let asked_in = asked.clone();
    let reported = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let lease = move |id: u64, k: usize| proto::JobLease {
        lease_id: id,
        run: "1".into(),
        n: 8,
        strategy: proto::Strategy::D4 as i32,
        depth: u32::from(plan.depth()),
        job: keys[k % keys.len()].clone(),
        plan_fingerprint: fingerprint,
        lease_tag: id,
    };
    let fake = fake::Fake {
        lease: fake::lease_once(move |r: &proto::LeaseRequest| {
            let capacity = r.capacity as usize;
            asked_in.store(capacity, SeqCst);
            let mut l = vec![lease(1, 0), lease(1, 1)];
            l.extend((0..capacity + 5).map(|i| lease(100 + i as u64, i + 2)));
            l
        }),
        report: fake::accept_noting(reported.clone()),
        ..Default::default()
    };
    let released = fake.released.clone();
    let (address, server) = fake.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let (_, journaled_result, mut config) = journaled(dir.path(), address, "w");
    config.exit_when_idle = true;
    stops(config).await.unwrap();
    let capacity = asked.load(SeqCst);
    assert!(capacity >= 1);
    let mut reported = reported.lock().unwrap().clone();
    reported.retain(|id| *id != journaled_result.lease);
    reported.sort();
    let mut expected: Vec<u64> = vec![1];
    expected.extend((0..capacity as u64 - 1).map(|i| 100 + i));
    assert_eq!(reported, expected, "capacity {capacity}");
    assert_eq!(
        released.load(SeqCst),
        6,
        "the leases beyond the capacity asked"
    );
    server.abort();
}
/// A lease of a run an earlier build created past today's limits of run creation (a split too deep
/// to create now, which the coordinator still resumes): the worker checks its plan within the job
/// count the run records (GetRun), computes it and reports it, rather than refusing it as a plan
/// it cannot build (found by a review of the plan check, 2026-11-25: every worker leased such a job
/// stopped, and the run could never finish).
#[tokio::test]
async fn a_lease_of_a_run_deeper_than_creation_allows_is_checked_and_computed() {
    let deep = Plan::with_depth(14, nqueens_common::Strategy::Mirror, 14).unwrap();
    assert!(deep
        .fingerprint_within(nqueens_common::partition::MAX_JOBS)
        .is_err());
    let (jobs, fingerprint) = deep.fingerprint();
    let key = deep.jobs().next().unwrap().to_string();
    // The run's recorded job count: the plan's (computed), one short (refused, the worker stops),
    // or unreadable now (handed back, the worker goes on).
    for recorded in [Some(jobs), Some(jobs - 1), None] {
        let reported = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
        let job = key.clone();
        let fake = fake::Fake {
            lease: fake::lease_once(move |_| {
                vec![proto::JobLease {
                    lease_id: 9,
                    run: "3".into(),
                    n: 14,
                    strategy: proto::Strategy::Mirror as i32,
                    depth: 14,
                    job: job.clone(),
                    plan_fingerprint: fingerprint,
                    lease_tag: 1,
                }]
            }),
            get_run: Box::new(move |r: &proto::GetRunRequest| {
                assert_eq!(r.run, "3");
                let jobs_total = recorded.ok_or_else(|| Status::unavailable("restarting"))?;
                Ok(proto::RunStatus {
                    run: "3".into(),
                    n: 14,
                    jobs_total,
                    plan_fingerprint: fingerprint,
                    ..Default::default()
                })
            }),
            report: fake::accept_noting(reported.clone()),
            ..Default::default()
        };
        let released = fake.released.clone();
        let (address, server) = fake.serve().await;
        let dir = tempfile::tempdir().unwrap();
        let (_, _, mut config) = journaled(dir.path(), address, "w");
        config.exit_when_idle = true;
        let stopped = stops(config).await;
        let reported = reported.lock().unwrap().clone();
        match recorded {
            Some(r) if r == jobs => {
                stopped.unwrap();
                assert!(reported.contains(&9), "{reported:?}");
            }
            // A run recording fewer jobs than its plan has: not the plan this worker enumerates.
            Some(_) => {
                assert!(matches!(stopped, Err(Error::Refused(_))), "{stopped:?}");
                assert!(!reported.contains(&9), "{reported:?}");
            }
            None => {
                stopped.unwrap();
                assert!(!reported.contains(&9), "{reported:?}");
                assert_eq!(released.load(SeqCst), 1, "handed back");
            }
        }
        server.abort();
    }
}
