//! The coordinator's gRPC service on a real server on 127.0.0.1:0: leasing and reporting, duplicate and
//! late reports, and bad input, which must get a clear error and change nothing stored (issue 3).

mod support;

use std::time::Duration;

use nqueens_common::checksum::seal;
use nqueens_common::{Plan, Strategy};
use nqueens_coordinator::durable::store::Store;
use nqueens_coordinator::wire::server::{serve, Options};
use nqueens_coordinator::{Config, Coordinator};
use nqueens_proto as proto;
use nqueens_proto::Client;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::Code;

use support::{create_verified, lease, lease_with_gpus, result_of, status};

struct Server {
    client: Client,
    /// The server's store (a second handle on the same sled database), to compare its contents.
    store: Store,
    address: String,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn start(lease_timeout: Duration) -> Server {
    start_with(lease_timeout, Options::default()).await
}

async fn start_with(lease_timeout: Duration, options: Options) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let handle = store.clone();
    let coordinator = Coordinator::open(
        store,
        Config {
            lease_timeout,
            max_attempts: 3,
            ..Config::default()
        },
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        coordinator,
        options,
        stop.clone().cancelled_owned(),
    ));
    Server {
        store: handle,
        client: nqueens_proto::connect(&nqueens_proto::Connection::new(&address)).unwrap(),
        address,
        stop,
        _dir: dir,
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves `coordinator` on a new loopback port until the returned token is cancelled: its address, the
/// token and the server's task.
async fn serving(
    coordinator: Coordinator,
) -> (
    String,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let server = tokio::spawn(serve(
        listener,
        coordinator,
        Options::default(),
        stop.clone().cancelled_owned(),
    ));
    (address, stop, server)
}

async fn create(c: &mut Client, n: u32) -> proto::RunStatus {
    create_verified(c, n, 0.0).await
}

/// `r` sealed again for what it now says (a lying worker seals its lie; seals guard against damage).
fn reseal(mut r: proto::JobResult, fingerprint: u64) -> proto::JobResult {
    let result = nqueens_common::JobResult {
        total: r.total,
        unique8: r.unique8,
        nodes: r.nodes,
    };
    r.seal = Some(seal(fingerprint, &r.job.parse().unwrap(), &result));
    r
}

async fn report(
    c: &mut Client,
    worker: &str,
    results: Vec<proto::JobResult>,
) -> Result<Vec<i32>, tonic::Status> {
    c.report(proto::ReportRequest {
        worker_id: worker.into(),
        worker_name: worker.into(),
        results,
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().outcomes)
}

/// Everything the store holds, in a canonical form: every run and counted result (as exported), the job
/// states of every run, and the quarantined workers.
fn contents(store: &Store) -> String {
    let mut out = Vec::new();
    nqueens_coordinator::durable::ledger::export(store, None, &mut out).unwrap();
    let mut text = String::from_utf8(out).unwrap();
    for run in store.runs().unwrap() {
        let mut states: Vec<_> = store.job_states(run.id).unwrap().into_iter().collect();
        states.sort_by_key(|(s, _)| format!("{s:?}"));
        text += &format!("{states:?}\n");
    }
    text + &format!("{:?}", store.quarantined().unwrap())
}

#[tokio::test]
async fn issue_18_results_name_their_gpu_and_the_worker_table_shows_its_share() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 8).await;
    let leases = lease_with_gpus(&mut s.client, "g", 3, 2).await;
    assert_eq!(leases.len(), 3);
    let mut results: Vec<proto::JobResult> = leases.iter().map(result_of).collect();
    // A device name the coordinator cannot take refuses the batch, as any bad input does.
    results[0].device = Some("cuda 0".into());
    let bad = report(&mut s.client, "g", results.clone())
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument, "{bad}");
    assert_eq!(status(&mut s.client, &run.run).await.jobs_done, 0);
    results[0].device = Some("cuda:0".into());
    results[1].device = Some("opencl:1".into());
    let outcomes = report(&mut s.client, "g", results.clone()).await.unwrap();
    assert_eq!(outcomes, vec![proto::Outcome::Accepted as i32; 3]);
    let workers = list_workers(&mut s.client).await;
    let g = workers.iter().find(|w| w.worker_id == "g").unwrap();
    assert_eq!((g.gpus, g.gpu_jobs, g.jobs_done), (2, 2, 3));
    assert_eq!(g.gpu_nodes, results[0].nodes + results[1].nodes);
    assert_eq!(g.nodes, g.gpu_nodes + results[2].nodes);
}

#[tokio::test]
async fn issue_3_duplicates_are_compared_never_added() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 8).await;
    let leases = lease(&mut s.client, "w1", 2).await;
    assert_eq!(leases.len(), 2);
    let good = result_of(&leases[0]);
    let accepted = proto::Outcome::Accepted as i32;
    assert_eq!(
        report(&mut s.client, "w1", vec![good.clone()])
            .await
            .unwrap(),
        vec![accepted]
    );
    let after_one = status(&mut s.client, &run.run).await;
    assert_eq!(after_one.jobs_done, 1);
    assert_eq!(after_one.total, good.total.to_string());

    let duplicate = report(&mut s.client, "w1", vec![good.clone(), good.clone()]).await;
    assert_eq!(
        duplicate.unwrap(),
        vec![proto::Outcome::Duplicate as i32; 2]
    );
    let wrong = reseal(
        proto::JobResult {
            total: good.total + 8,
            unique8: good.unique8.map(|u| u + 8),
            ..good.clone()
        },
        leases[0].plan_fingerprint,
    );
    // Under a tag that is not the job's lease's: compared, nothing changes.
    let forged = proto::JobResult {
        lease_tag: wrong.lease_tag ^ 1,
        ..wrong.clone()
    };
    let mismatch = report(&mut s.client, "w2", vec![forged]).await.unwrap();
    assert_eq!(mismatch, vec![proto::Outcome::Mismatch as i32]);
    let now = status(&mut s.client, &run.run).await;
    assert_eq!((now.jobs_done, now.total), (1, good.total.to_string()));
    // Under the job's lease and its tag, but from another identity (the tag names the one it was
    // issued to): compared, nothing changes. Before, one worker could dispute another's count with a
    // tag it was shown (found by a review, 2026-11-29). A dispute under a worker's own lease:
    // `a_lease_live_when_its_job_was_settled_may_still_dispute` (service tests).
    let mismatch = report(&mut s.client, "w2", vec![wrong]).await.unwrap();
    assert_eq!(mismatch, vec![proto::Outcome::Mismatch as i32]);
    let now = status(&mut s.client, &run.run).await;
    assert_eq!((now.jobs_done, now.jobs_disputed), (1, 0));
}

#[tokio::test]
async fn issue_7_a_report_leases_the_next_jobs_in_the_same_call() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 9).await;
    let first = lease(&mut s.client, "w1", 2).await;
    assert_eq!(first.len(), 2);
    let ask = |results, lease_capacity| proto::ReportRequest {
        worker_id: "w1".into(),
        worker_name: "w1".into(),
        results,
        lease_capacity,
        threads: 2,
        lease_run: Some(run.run.clone()),
        gpus: 1,
        gpu_kernels: vec!["coop/64/8/8".into()],
    };

    // A bad capacity is refused before anything is committed.
    let before = contents(&s.store);
    let refused = s
        .client
        .report(ask(vec![result_of(&first[0])], 5000))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(contents(&s.store), before);
    // So is one naming more distinct GPU kernels than a worker's row keeps.
    let mut nine = ask(vec![result_of(&first[0])], 3);
    nine.gpu_kernels = (0..9).map(|i| format!("flat/{i}")).collect();
    let refused = s.client.report(nine).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(contents(&s.store), before);

    let answer = s
        .client
        .report(ask(vec![result_of(&first[0])], 3))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.outcomes, vec![proto::Outcome::Accepted as i32]);
    let next = answer.lease.expect("leases with the report").leases;
    assert_eq!(next.len(), 3);
    // The worker table keeps what the leasing report said of its GPU (it once wiped the kernels).
    let w1 = list_workers(&mut s.client).await;
    let w1 = w1.iter().find(|w| w.worker_id == "w1").expect("w1 listed");
    assert_eq!(
        (w1.gpus, &w1.gpu_kernels[..]),
        (1, &["coop/64/8/8".to_string()][..])
    );
    let held: Vec<&str> = first.iter().chain(&next).map(|l| l.job.as_str()).collect();
    let distinct: std::collections::BTreeSet<&str> = held.iter().copied().collect();
    assert_eq!(distinct.len(), 5, "never a job leased twice: {held:?}");
    assert_eq!(status(&mut s.client, &run.run).await.jobs_leased, 4);

    // Reporting everything it holds, leasing all the rest, until the run is done: the count is exact.
    let mut holding = vec![first[1].clone()];
    holding.extend(next);
    let mut total: u128 = u128::from(result_of(&first[0]).total);
    while !holding.is_empty() {
        let results: Vec<_> = holding.iter().map(result_of).collect();
        total += results.iter().map(|r| u128::from(r.total)).sum::<u128>();
        let answer = s.client.report(ask(results, 4)).await.unwrap().into_inner();
        holding = answer.lease.map(|l| l.leases).unwrap_or_default();
    }
    let done = status(&mut s.client, &run.run).await;
    assert_eq!(done.state, proto::RunState::Done as i32);
    assert_eq!((done.total, total), ("352".to_string(), 352));
    // Without a capacity, a report leases nothing.
    let plain = s.client.report(ask(vec![], 0)).await.unwrap().into_inner();
    assert!(plain.lease.is_none());
}

#[tokio::test]
async fn issue_3_and_4_bad_input_gets_a_clear_error_and_changes_nothing_stored() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 9).await;
    let leases = lease(&mut s.client, "w1", 3).await;
    let first = result_of(&leases[0]);
    report(&mut s.client, "w1", vec![first.clone()])
        .await
        .unwrap();
    let before = status(&mut s.client, &run.run).await;
    let stored_before = contents(&s.store);
    let second = result_of(&leases[1]);

    let bad: Vec<(&str, proto::JobResult, Code)> = vec![
        (
            "unknown run",
            proto::JobResult {
                run: "999".into(),
                ..second.clone()
            },
            Code::NotFound,
        ),
        (
            "run id not a number",
            proto::JobResult {
                run: "x".repeat(5000),
                ..second.clone()
            },
            Code::NotFound,
        ),
        (
            "N = 0",
            proto::JobResult {
                n: 0,
                ..second.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "N = 33",
            proto::JobResult {
                n: 33,
                ..second.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "N of another run",
            proto::JobResult {
                n: 10,
                ..second.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "unknown job",
            proto::JobResult {
                job: "9.9.9".into(),
                ..second.clone()
            },
            Code::NotFound,
        ),
        (
            "malformed job",
            proto::JobResult {
                job: "a.b".into(),
                ..second.clone()
            },
            Code::NotFound,
        ),
        (
            "empty job",
            proto::JobResult {
                job: String::new(),
                ..second.clone()
            },
            Code::NotFound,
        ),
        (
            "no unique count",
            proto::JobResult {
                unique8: None,
                ..second.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "lease of another job",
            proto::JobResult {
                lease_id: leases[2].lease_id,
                ..second.clone()
            },
            Code::FailedPrecondition,
        ),
        (
            "lease never issued",
            proto::JobResult {
                lease_id: 12345,
                ..second.clone()
            },
            Code::FailedPrecondition,
        ),
    ];
    for (what, result, code) in bad {
        // The good result travels in the same batch: a batch is accepted whole or not at all.
        let err = report(&mut s.client, "w1", vec![second.clone(), result])
            .await
            .unwrap_err();
        assert_eq!(err.code(), code, "{what}: {}", err.message());
        assert!(!err.message().is_empty(), "{what}");
        // A refusal for a result's sake: the worker drops that result.
        assert!(!nqueens_proto::refuses_the_request(&err), "{what}");
    }
    // Refusals of the request itself carry the mark over the wire (the worker stops on them).
    let empty_worker = report(&mut s.client, "", vec![second.clone()])
        .await
        .unwrap_err();
    assert_eq!(empty_worker.code(), Code::InvalidArgument);
    assert!(nqueens_proto::refuses_the_request(&empty_worker));
    let too_many = report(&mut s.client, "w1", vec![second.clone(); 5000])
        .await
        .unwrap_err();
    assert_eq!(too_many.code(), Code::InvalidArgument);
    assert!(nqueens_proto::refuses_the_request(&too_many));
    let bad_device = proto::JobResult {
        device: Some("cuda 0".into()),
        ..second.clone()
    };
    let bad_device = report(&mut s.client, "w1", vec![bad_device])
        .await
        .unwrap_err();
    assert_eq!(bad_device.code(), Code::InvalidArgument);
    assert!(nqueens_proto::refuses_the_request(&bad_device));

    for (capacity, worker) in [(0, "w1"), (1_000_000, "w1"), (1, "")] {
        let err = s
            .client
            .lease(proto::LeaseRequest {
                worker_id: worker.into(),
                worker_name: "w".into(),
                threads: 1,
                capacity,
                run: None,
                wait_ms: 0,
                gpus: 0,
                gpu_kernels: Vec::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "capacity {capacity}");
    }
    let unknown_run_lease = s
        .client
        .lease(proto::LeaseRequest {
            worker_id: "w1".into(),
            worker_name: "w".into(),
            threads: 1,
            capacity: 1,
            run: Some("77".into()),
            wait_ms: 0,
            gpus: 0,
            gpu_kernels: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown_run_lease.code(), Code::NotFound);
    for (n, strategy, verify_fraction) in [
        (0, 1, None),
        (33, 1, None),
        (8, 9, None),
        (8, 1, Some(-0.1)),
        (8, 1, Some(1.5)),
        (8, 1, Some(f64::NAN)),
    ] {
        let err = s
            .client
            .create_run(proto::CreateRunRequest {
                n,
                strategy,
                depth: None,
                reuse: false,
                verify_fraction,
                priority: 0,
                record: false,
                max_error: None,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "N = {n}");
    }
    let err = s
        .client
        .get_run(proto::GetRunRequest { run: "42".into() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // A message over the size limit is refused before it is decoded.
    let huge = proto::JobResult {
        job: "1.".repeat(3 << 20),
        ..second.clone()
    };
    let err = report(&mut s.client, "w1", vec![huge]).await.unwrap_err();
    assert!(
        matches!(err.code(), Code::OutOfRange | Code::ResourceExhausted),
        "{err:?}"
    );

    // Nothing changed: the same stored contents, the same runs, the same progress, the same total.
    assert_eq!(contents(&s.store), stored_before);
    let runs = s
        .client
        .list_runs(proto::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .runs;
    assert_eq!(runs.len(), 1);
    let after = status(&mut s.client, &run.run).await;
    assert_eq!(
        (after.jobs_done, &after.total, &after.nodes),
        (before.jobs_done, &before.total, &before.nodes)
    );
    // And the good result is still welcome.
    let ok = report(&mut s.client, "w1", vec![second]).await.unwrap();
    assert_eq!(ok, vec![proto::Outcome::Accepted as i32]);
}

#[tokio::test]
async fn issue_3_a_late_report_for_an_expired_lease_is_counted_once() {
    let mut s = start(Duration::from_millis(200)).await;
    let run = create(&mut s.client, 6).await;
    let all = run.jobs_total as u32;
    let slow = lease(&mut s.client, "slow", all).await;
    assert_eq!(slow.len(), all as usize);
    assert!(lease(&mut s.client, "fast", all).await.is_empty());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let fast = lease(&mut s.client, "fast", all).await;
    assert_eq!(
        fast.len(),
        all as usize,
        "every expired lease is leased again"
    );
    let late: Vec<_> = slow.iter().map(result_of).collect();
    let accepted = report(&mut s.client, "slow", late).await.unwrap();
    assert!(accepted
        .iter()
        .all(|&o| o == proto::Outcome::Accepted as i32));
    let on_time: Vec<_> = fast.iter().map(result_of).collect();
    let dup = report(&mut s.client, "fast", on_time).await.unwrap();
    assert!(dup.iter().all(|&o| o == proto::Outcome::Duplicate as i32));
    let done = status(&mut s.client, &run.run).await;
    assert_eq!(done.state, proto::RunState::Done as i32);
    assert_eq!(done.total, "4");
    assert_eq!(done.unique.as_deref(), Some("1"));
}

/// Hands back `ids` as the worker `worker`: how many were handed back.
async fn release(c: &mut Client, worker: &str, ids: Vec<u64>) -> u32 {
    c.release(proto::ReleaseRequest {
        worker_id: worker.into(),
        lease_ids: ids,
        leaving: false,
    })
    .await
    .unwrap()
    .into_inner()
    .released
}

#[tokio::test]
async fn a_hand_back_over_the_wire_frees_its_jobs_and_only_its_holder_may_hand_back() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 8).await;
    let all = run.jobs_total as u32;
    let held = lease(&mut s.client, "a", all).await;
    assert_eq!(held.len(), all as usize);
    assert!(lease(&mut s.client, "b", all).await.is_empty());
    // Another worker cannot hand back a's leases, nor can anyone hand back a lease never issued.
    let two: Vec<u64> = held[..2].iter().map(|l| l.lease_id).collect();
    assert_eq!(release(&mut s.client, "b", two.clone()).await, 0);
    assert!(lease(&mut s.client, "b", all).await.is_empty());
    let never = held.iter().map(|l| l.lease_id).max().unwrap() + 1000;
    assert_eq!(release(&mut s.client, "a", vec![never]).await, 0);
    assert!(lease(&mut s.client, "b", all).await.is_empty());
    // a hands back two: exactly their jobs are leased again, to b.
    assert_eq!(release(&mut s.client, "a", two.clone()).await, 2);
    let mut freed: Vec<String> = lease(&mut s.client, "b", all)
        .await
        .into_iter()
        .map(|l| l.job)
        .collect();
    freed.sort();
    let mut expected: Vec<String> = held[..2].iter().map(|l| l.job.clone()).collect();
    expected.sort();
    assert_eq!(freed, expected);
    // Handing them back again frees nothing more.
    assert_eq!(release(&mut s.client, "a", two).await, 0);
    assert!(lease(&mut s.client, "c", all).await.is_empty());
}

#[tokio::test]
async fn issue_3_heartbeats_keep_leases_and_health_is_served() {
    let mut s = start(Duration::from_millis(300)).await;
    create(&mut s.client, 7).await;
    let held = lease(&mut s.client, "w1", 1).await;
    let ids = vec![held[0].lease_id];
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let hb = s
            .client
            .heartbeat(proto::HeartbeatRequest {
                worker_id: "w1".into(),
                lease_ids: ids.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(hb.lost.is_empty(), "a heartbeating worker keeps its lease");
    }
    // Another worker gets other jobs, never the held one.
    let others = lease(&mut s.client, "w2", 1000).await;
    assert!(others.iter().all(|l| l.job != held[0].job));

    let channel = plain_channel(&s).await;
    assert_serving(channel).await;
}

/// The health service answers anyone, with no token: a request to it of more than
/// `MAX_HEALTH_MESSAGE_BYTES` is refused before it is read whole. Before, a caller with no token could
/// make the server buffer 4 MiB per stream (found by a review, 2026-11-29).
#[tokio::test]
async fn the_health_service_takes_small_messages_only() {
    use nqueens_coordinator::wire::server::MAX_HEALTH_MESSAGE_BYTES;
    let s = start(Duration::from_secs(60)).await;
    let channel = plain_channel(&s).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let ask = |len: usize| tonic_health::pb::HealthCheckRequest {
        service: "x".repeat(len),
    };
    let refused = health
        .check(ask(MAX_HEALTH_MESSAGE_BYTES + 1))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
    // A name that fits is looked up (and not known).
    let unknown = health
        .check(ask(MAX_HEALTH_MESSAGE_BYTES - 8))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown:?}");
    assert_serving(channel).await;
}

/// The health service on the main port answers callers with no token, within a bound of its own:
/// `ANONYMOUS_CALLS` calls or `Watch` streams at once (a few more with empty requests). One more is
/// refused (RESOURCE_EXHAUSTED) while
/// the workers' calls pass; once a stream closes, a call passes again. Before, a client with no token
/// could hold 1,024 `Watch` streams on each of its connections, counted nowhere (found by a review,
/// 2026-11-30).
#[tokio::test]
async fn health_streams_with_no_token_are_bounded_apart_from_the_workers() {
    use nqueens_coordinator::wire::request_bytes::ANONYMOUS_CALLS;
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let mut s = start(Duration::from_secs(60)).await;
    let channel = plain_channel(&s).await;
    let mut health = HealthClient::new(channel.clone());
    let ask = || HealthCheckRequest {
        service: String::new(),
    };
    let mut streams = Vec::new();
    let refused = loop {
        let mut watch = match health.watch(ask()).await {
            Ok(w) => w.into_inner(),
            Err(refused) => break refused,
        };
        // Its first status arrives: the stream is open on the server.
        assert!(watch.message().await.unwrap().is_some());
        streams.push(watch);
        assert!(streams.len() <= 2 * ANONYMOUS_CALLS, "never refused");
    };
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    // Room for ANONYMOUS_CALLS calls with the largest health request: a few more with empty ones.
    assert!(
        (ANONYMOUS_CALLS..ANONYMOUS_CALLS + 20).contains(&streams.len()),
        "{} streams",
        streams.len()
    );
    let refused = health.check(ask()).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    create(&mut s.client, 8).await;
    drop(streams.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match health.check(ask()).await {
            Ok(_) => break,
            Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                assert!(tokio::time::Instant::now() < deadline, "{e:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}

#[tokio::test]
async fn issue_3_watch_streams_progress_until_the_run_is_done() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 8).await;
    let mut watch = s
        .client
        .watch_run(proto::WatchRunRequest {
            run: run.run.clone(),
            interval_ms: 10,
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(
        (first.jobs_done, first.state),
        (0, proto::RunState::Running as i32)
    );
    let leases = lease(&mut s.client, "w1", 1000).await;
    for l in &leases {
        report(&mut s.client, "w1", vec![result_of(l)])
            .await
            .unwrap();
    }
    let mut last = first;
    while let Some(next) = watch.message().await.unwrap() {
        assert!(next.jobs_done >= last.jobs_done, "progress never goes back");
        last = next;
    }
    assert_eq!(last.state, proto::RunState::Done as i32);
    assert_eq!(
        (last.total.as_str(), last.unique.as_deref()),
        ("92", Some("12"))
    );
    let unknown = s
        .client
        .watch_run(proto::WatchRunRequest {
            run: "5".into(),
            interval_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

/// Watch streams are bounded, all clients together: one past the limit is refused, and a stream its
/// client closes frees its place (found by a review, 2026-11-24, a later session: any number of
/// streams, each building a run's view under the state lock every 10 ms, could stall leases and
/// reports).
#[tokio::test]
async fn watch_streams_are_bounded_and_a_closed_one_frees_its_place() {
    use nqueens_coordinator::wire::grpc::MAX_WATCHERS;
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 8).await;
    let ask = || proto::WatchRunRequest {
        run: run.run.clone(),
        interval_ms: 1,
    };
    let mut open = Vec::new();
    for _ in 0..MAX_WATCHERS {
        let mut w = s.client.watch_run(ask()).await.unwrap().into_inner();
        w.message().await.unwrap().unwrap();
        open.push(w);
    }
    let refused = s.client.watch_run(ask()).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    drop(open.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match s.client.watch_run(ask()).await {
            Ok(_) => break,
            Err(e)
                if e.code() == Code::ResourceExhausted && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}

async fn list_workers(c: &mut Client) -> Vec<proto::WorkerStatus> {
    c.list_workers(proto::ListWorkersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .workers
}

#[tokio::test]
async fn issue_4_a_verified_job_needs_two_workers_and_a_wrong_one_is_quarantined() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create_verified(&mut s.client, 8, 1.0).await;
    assert_eq!(run.verify_fraction, 1.0);
    let outcome = |o: proto::Outcome| o as i32;

    let first = lease(&mut s.client, "a", 1).await;
    let honest = result_of(&first[0]);
    let got = report(&mut s.client, "a", vec![honest.clone()])
        .await
        .unwrap();
    assert_eq!(got, vec![outcome(proto::Outcome::Pending)]);
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(
        (st.jobs_done, st.jobs_verifying, st.total.as_str()),
        (0, 1, "0")
    );
    // The same worker never gets the job again; another worker gets it first.
    let again = lease(&mut s.client, "a", 1).await;
    assert_ne!(again[0].job, first[0].job);
    let liar_lease = lease(&mut s.client, "liar", 1).await;
    assert_eq!(liar_lease[0].job, first[0].job);
    let mut lie = result_of(&liar_lease[0]);
    // One class of eight more on both counts: a lie whose counts still fit each other (one that does
    // not is refused before any comparison).
    lie.total += 8;
    lie.unique8 = lie.unique8.map(|u| u + 8);
    let lie = reseal(lie, liar_lease[0].plan_fingerprint);
    let got = report(&mut s.client, "liar", vec![lie]).await.unwrap();
    assert_eq!(got, vec![outcome(proto::Outcome::Disputed)]);
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(
        (st.jobs_done, st.jobs_disputed, st.total.as_str()),
        (0, 1, "0")
    );

    // A third worker decides: the liar is quarantined, the agreeing result counted.
    let judge = lease(&mut s.client, "c", 1).await;
    assert_eq!(judge[0].job, first[0].job);
    let got = report(&mut s.client, "c", vec![result_of(&judge[0])])
        .await
        .unwrap();
    assert_eq!(got, vec![outcome(proto::Outcome::Accepted)]);
    let st = status(&mut s.client, &run.run).await;
    assert_eq!((st.jobs_done, st.jobs_disputed), (1, 0));
    assert_eq!(st.total, honest.total.to_string());
    let refused = s
        .client
        .lease(proto::LeaseRequest {
            worker_id: "liar".into(),
            worker_name: "liar".into(),
            threads: 1,
            capacity: 1,
            run: None,
            wait_ms: 0,
            gpus: 0,
            gpu_kernels: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        refused.message().contains("quarantined"),
        "{}",
        refused.message()
    );
    let refused = report(&mut s.client, "liar", vec![honest.clone()])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let workers = list_workers(&mut s.client).await;
    let liar = workers.iter().find(|w| w.name == "liar").unwrap();
    assert!(
        liar.quarantined && liar.reason.contains(&first[0].job),
        "{liar:?}"
    );
    assert!(workers
        .iter()
        .filter(|w| w.name != "liar")
        .all(|w| !w.quarantined));

    // Two honest workers finish the run: every job computed twice, the total exact.
    report(&mut s.client, "a", vec![result_of(&again[0])])
        .await
        .unwrap();
    for round in 0..200 {
        let who = ["c", "a"][round % 2];
        for l in lease(&mut s.client, who, 1).await {
            report(&mut s.client, who, vec![result_of(&l)])
                .await
                .unwrap();
        }
        if status(&mut s.client, &run.run).await.state == proto::RunState::Done as i32 {
            break;
        }
    }
    let done = status(&mut s.client, &run.run).await;
    assert_eq!(done.state, proto::RunState::Done as i32);
    assert_eq!(
        (done.total.as_str(), done.unique.as_deref()),
        ("92", Some("12"))
    );
    assert_eq!(done.jobs_done, done.jobs_total);
}

#[tokio::test]
async fn issue_4_a_poison_job_fails_after_its_attempts_and_the_run_stalls() {
    let mut s = start(Duration::from_millis(150)).await;
    let run = create(&mut s.client, 7).await;
    // Each worker takes the poison job and another, and reports the other at once: only the expiries
    // of workers with a result counted are attempts (walk-away identities fail no job).
    let first = lease(&mut s.client, "w1", 2).await;
    let poison = first[0].job.clone();
    report(&mut s.client, "w1", vec![result_of(&first[1])])
        .await
        .unwrap();
    // Every lease of the poison job expires without a result: each of its workers dies on it (a job
    // fails only for expiries under different workers; see issue 15's test below for one worker).
    let mut attempts = 1;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if status(&mut s.client, &run.run).await.jobs_failed == 1 {
            break;
        }
        let name = format!("w{}", attempts + 1);
        let got = lease(&mut s.client, &name, 2).await;
        if got.iter().any(|l| l.job == poison) {
            attempts += 1;
        }
        let others: Vec<_> = got
            .iter()
            .filter(|l| l.job != poison)
            .map(result_of)
            .collect();
        if !others.is_empty() {
            report(&mut s.client, &name, others).await.unwrap();
        }
    }
    assert_eq!(
        attempts, 3,
        "failed after --max-attempts (3) expired leases"
    );
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(st.jobs_failed, 1);
    // The rest of the run completes; then it stalls instead of waiting forever.
    for _ in 0..100 {
        let got = lease(&mut s.client, "w", 8).await;
        assert!(
            got.iter().all(|l| l.job != poison),
            "a failed job is never leased"
        );
        if got.is_empty() {
            break;
        }
        report(&mut s.client, "w", got.iter().map(result_of).collect())
            .await
            .unwrap();
    }
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(st.state, proto::RunState::Stalled as i32);
    assert_eq!(st.jobs_done + 1, st.jobs_total);
    let idle = s
        .client
        .lease(proto::LeaseRequest {
            worker_id: "w".into(),
            worker_name: "w".into(),
            threads: 1,
            capacity: 1,
            run: None,
            wait_ms: 0,
            gpus: 0,
            gpu_kernels: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(idle.idle && idle.leases.is_empty());
}

#[tokio::test]
async fn issue_4_a_token_guards_every_rpc_but_health_and_tls_carries_it() {
    let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, key.cert.pem()).unwrap();
    let options = Options {
        token: Some("s3cret".into()),
        tls: Some(tonic::transport::Identity::from_pem(
            key.cert.pem(),
            key.signing_key.serialize_pem(),
        )),
        ..Options::default()
    };
    let s = start_with(Duration::from_secs(60), options).await;
    let https = s.address.replace("http://", "https://");
    let client = |token: Option<&str>| {
        nqueens_proto::connect(&nqueens_proto::Connection {
            coordinator: https.clone(),
            token: token.map(Into::into),
            tls_ca: Some(ca.clone()),
            client_cert: None,
        })
        .unwrap()
    };
    let mut good = client(Some("s3cret"));
    let run = good
        .create_run(proto::CreateRunRequest {
            n: 6,
            strategy: proto::Strategy::D4 as i32,
            depth: None,
            reuse: false,
            verify_fraction: Some(0.0),
            priority: 0,
            record: false,
            max_error: None,
        })
        .await
        .unwrap()
        .into_inner();
    for token in [None, Some("wrong"), Some("s3cret ")] {
        let mut bad = client(token);
        let codes = [
            bad.list_runs(proto::ListRunsRequest::default())
                .await
                .map(|_| ()),
            bad.get_run(proto::GetRunRequest {
                run: run.run.clone(),
            })
            .await
            .map(|_| ()),
            bad.create_run(proto::CreateRunRequest {
                n: 8,
                strategy: 1,
                depth: None,
                reuse: false,
                verify_fraction: None,
                priority: 0,
                record: false,
                max_error: None,
            })
            .await
            .map(|_| ()),
            bad.lease(proto::LeaseRequest {
                worker_id: "x".into(),
                worker_name: "x".into(),
                threads: 1,
                capacity: 1,
                run: None,
                wait_ms: 0,
                gpus: 0,
                gpu_kernels: Vec::new(),
            })
            .await
            .map(|_| ()),
            bad.report(proto::ReportRequest {
                worker_id: "x".into(),
                worker_name: "x".into(),
                ..Default::default()
            })
            .await
            .map(|_| ()),
            bad.cancel_run(proto::RunControlRequest {
                run: run.run.clone(),
            })
            .await
            .map(|_| ()),
            bad.pause_run(proto::RunControlRequest {
                run: run.run.clone(),
            })
            .await
            .map(|_| ()),
            bad.resume_run(proto::RunControlRequest {
                run: run.run.clone(),
            })
            .await
            .map(|_| ()),
            bad.set_priority(proto::SetPriorityRequest {
                run: run.run.clone(),
                priority: 3,
            })
            .await
            .map(|_| ()),
            bad.list_jobs(proto::ListJobsRequest {
                state: proto::JobState::Failed as i32,
                run: None,
                limit: 0,
            })
            .await
            .map(|_| ()),
        ];
        for c in codes {
            assert_eq!(c.unwrap_err().code(), Code::Unauthenticated, "{token:?}");
        }
    }
    // Nothing the refused calls asked for happened.
    let runs = good
        .list_runs(proto::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .runs;
    assert_eq!(runs.len(), 1);
    assert!(lease(&mut good, "w", 100).await.len() as u64 == run.jobs_total);

    // Plaintext to the TLS port gets nowhere.
    let mut plain = nqueens_proto::connect(&nqueens_proto::Connection {
        coordinator: s.address.clone(),
        token: Some("s3cret".into()),
        tls_ca: None,
        client_cert: None,
    })
    .unwrap();
    assert!(plain
        .list_runs(proto::ListRunsRequest::default())
        .await
        .is_err());

    // Health checks need no token.
    let channel = Channel::from_shared(https.clone())
        .unwrap()
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(key.cert.pem())),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    assert_serving(channel).await;
}

/// A channel to `s` with no token.
async fn plain_channel(s: &Server) -> Channel {
    Channel::from_shared(s.address.clone())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Checks, without a token, that the coordinator service reports SERVING over `channel`.
async fn assert_serving(channel: Channel) {
    let reply = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: "nqueens.v1.Coordinator".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        reply.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

#[tokio::test]
async fn issue_15_one_worker_letting_every_lease_expire_is_benched_and_fails_no_job() {
    let mut s = start(Duration::from_millis(150)).await;
    let run = create(&mut s.client, 8).await;
    // Five waves of "lease everything, never report" from one worker id (max_attempts is 3).
    let mut waves = 0;
    let mut bench = 0;
    for _ in 0..400 {
        if waves == 5 {
            break;
        }
        let reply = s
            .client
            .lease(proto::LeaseRequest {
                worker_id: "greedy".into(),
                worker_name: "greedy".into(),
                threads: 1,
                capacity: 4096,
                run: None,
                wait_ms: 0,
                gpus: 0,
                gpu_kernels: Vec::new(),
            })
            .await
            .unwrap()
            .into_inner();
        if reply.leases.is_empty() {
            bench = bench.max(reply.retry_after_ms);
        } else {
            waves += 1;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(st.jobs_failed, 0, "one worker cannot fail a run's jobs");
    assert_eq!(st.state, proto::RunState::Running as i32);
    assert_eq!(waves, 5);
    // Benched after three strikes (for the lease timeout, then twice that), and told so.
    assert!(bench > 100, "told when to come back: {bench} ms");
    // An honest worker finishes the run exactly.
    for _ in 0..200 {
        let got = lease(&mut s.client, "honest", 16).await;
        if got.is_empty() {
            if status(&mut s.client, &run.run).await.state == proto::RunState::Done as i32 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        report(&mut s.client, "honest", got.iter().map(result_of).collect())
            .await
            .unwrap();
    }
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(st.state, proto::RunState::Done as i32);
    assert_eq!(st.total, "92");
}

/// A codec that sends its bytes as the request body, whatever they are.
struct RawCodec<U>(std::marker::PhantomData<U>);

struct RawEncoder;

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Vec<u8>,
        buf: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        prost::bytes::BufMut::put_slice(buf, &item);
        Ok(())
    }
}

impl<U: prost::Message + Default + nqueens_proto::bounds::Bounds + Send + 'static>
    tonic::codec::Codec for RawCodec<U>
{
    type Encode = Vec<u8>;
    type Decode = U;
    type Encoder = RawEncoder;
    type Decoder = nqueens_proto::codec::StrictDecoder<U>;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        nqueens_proto::codec::StrictCodec::<U, U>::default().decoder()
    }
}

/// Sends `body` as it is to `method` of the coordinator at `address`; returns its refusal.
async fn refusal_of_raw(address: &str, method: &str, body: Vec<u8>) -> tonic::Status {
    let channel = Channel::from_shared(address.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = format!("/nqueens.v1.Coordinator/{method}");
    grpc.unary(
        tonic::Request::new(body),
        tonic::codegen::http::uri::PathAndQuery::try_from(path).unwrap(),
        RawCodec::<proto::ReportResponse>(std::marker::PhantomData),
    )
    .await
    .unwrap_err()
}

#[tokio::test]
async fn issue_15_an_undecodable_request_is_invalid_argument_and_changes_nothing() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 6).await;
    let stored_before = contents(&s.store);
    for (method, body) in [
        ("Report", vec![0xff, 0xff, 0xff]),
        ("Report", vec![0x0a, 0x40, 0x01]),
        (
            "Lease",
            vec![
                0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
            ],
        ),
    ] {
        let err = refusal_of_raw(&s.address, method, body.clone()).await;
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{method} {body:?}: {err:?}"
        );
        assert!(err.message().contains("undecodable"), "{err:?}");
        // Marked, over the wire, as a refusal of the request: a worker stops on it, keeping its
        // results, rather than drop them.
        assert!(nqueens_proto::refuses_the_request(&err), "{err:?}");
    }
    assert_eq!(contents(&s.store), stored_before);
    let after = status(&mut s.client, &run.run).await;
    assert_eq!(after.jobs_done, 0);
}

/// A report of two million empty results fits in 4 MiB (2 bytes each on the wire) but would take
/// hundreds of MB decoded: it is refused before decoding, and changes nothing. Found by a review,
/// 2026-11-24 (it was decoded whole, twice over, before the batch size was checked).
#[tokio::test]
async fn a_message_of_millions_of_empty_entries_is_refused_before_decoding() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 6).await;
    let stored_before = contents(&s.store);
    let entries = std::iter::repeat_n([0x12u8, 0x00], 2_000_000).flatten();
    // Plain, and behind an empty group of an unknown field (prost skips it; the count must not).
    for prefix in [&[][..], &[0x7b, 0x7c]] {
        let body: Vec<u8> = prefix.iter().copied().chain(entries.clone()).collect();
        let err = refusal_of_raw(&s.address, "Report", body).await;
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains("fields"), "{err:?}");
    }
    assert_eq!(contents(&s.store), stored_before);
    assert_eq!(status(&mut s.client, &run.run).await.jobs_done, 0);
}

/// A request past its kind's bounds is refused before it is decoded: a report of more entries than
/// the results and kernel shapes a report may hold (each 2 bytes on the wire, about 150 decoded), a
/// heartbeat or release of more bytes than 16,384 lease ids take (a packed id takes 1 byte on the
/// wire and 8 decoded). Before, each was decoded whole (up to 65,536 entries, or 4 MiB of ids as
/// 32 MB) and then refused by its handler (found by a review, 2026-11-30).
#[tokio::test]
async fn a_request_past_its_kinds_bounds_is_refused_before_decoding() {
    use nqueens_proto::bounds::Bounds;
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 6).await;
    let stored_before = contents(&s.store);
    let fields = proto::ReportRequest::FIELDS + 1;
    let empties: Vec<u8> = std::iter::repeat_n([0x12u8, 0x00], fields)
        .flatten()
        .collect();
    let err = refusal_of_raw(&s.address, "Report", empties).await;
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("ReportRequest of more than"),
        "{err:?}"
    );
    assert!(nqueens_proto::refuses_the_request(&err), "{err:?}");
    // A packed list of ids of 1 byte each, more bytes than a heartbeat or release may have.
    let ids = proto::HeartbeatRequest::BYTES;
    let mut packed = vec![0x12u8];
    prost::encoding::encode_varint(ids as u64, &mut packed);
    packed.resize(packed.len() + ids, 1);
    for method in ["Heartbeat", "Release"] {
        let err = refusal_of_raw(&s.address, method, packed.clone()).await;
        assert_eq!(err.code(), Code::InvalidArgument, "{method}: {err:?}");
        assert!(err.message().contains("bytes, more than its"), "{err:?}");
    }
    assert_eq!(contents(&s.store), stored_before);
    assert_eq!(status(&mut s.client, &run.run).await.jobs_done, 0);
}

#[tokio::test]
async fn issue_15_after_a_restart_only_an_authentic_earlier_lease_counts() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        lease_timeout: Duration::from_secs(60),
        max_attempts: 3,
        ..Config::default()
    };
    // One incarnation hands out leases and stops before any result arrives.
    let incarnation = |config: Config| {
        let coordinator = Coordinator::open(Store::open(dir.path()).unwrap(), config).unwrap();
        async move {
            let (address, stop, server) = serving(coordinator).await;
            let client = nqueens_proto::connect(&nqueens_proto::Connection::new(&address)).unwrap();
            (client, stop, server)
        }
    };
    let (mut client, stop, server) = incarnation(config.clone()).await;
    let run = create(&mut client, 8).await;
    let leased = lease(&mut client, "w", 4).await;
    assert_eq!(leased.len(), 4);
    stop.cancel();
    server.await.unwrap().unwrap();
    drop(client);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let (mut client, stop, _server) = incarnation(config).await;
    // A forged id of the earlier epoch, with no tag or another lease's tag: refused, nothing counted.
    let mut forged = result_of(&leased[0]);
    forged.lease_tag = 0;
    let err = report(&mut client, "w", vec![forged]).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let mut borrowed = result_of(&leased[1]);
    borrowed.lease_tag = leased[2].lease_tag;
    let err = report(&mut client, "w", vec![borrowed]).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    // An earlier lease's id and tag for another job (a count eight solutions high, its counts fitting
    // each other, for a job never leased).
    let plan = Plan::new(8, Strategy::D4).unwrap();
    let (other, right) = plan
        .jobs()
        .map(|k| (k.to_string(), plan.job(&k).unwrap().run()))
        .find(|(k, r)| r.total > 0 && leased.iter().all(|l| &l.job != k))
        .unwrap();
    let mut stolen = result_of(&leased[3]);
    stolen.job = other.clone();
    (stolen.total, stolen.unique8, stolen.nodes) =
        (right.total + 8, right.unique8.map(|u| u + 8), right.nodes);
    let stolen = reseal(stolen, leased[3].plan_fingerprint);
    let err = report(&mut client, "w", vec![stolen]).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    // Another identity under an earlier lease and its tag, both authentic: not its lease (the tag names
    // the identity it was issued to). Before, a colluder could report, and so confirm, under the lease
    // of another identity of the earlier incarnation (found by a review, 2026-11-29).
    let err = report(&mut client, "colluder", vec![result_of(&leased[0])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(status(&mut client, &run.run).await.jobs_done, 0);
    // The authentic results of the earlier leases count, once.
    let honest: Vec<_> = leased.iter().map(result_of).collect();
    let outcomes = report(&mut client, "w", honest.clone()).await.unwrap();
    assert!(outcomes
        .iter()
        .all(|o| *o == proto::Outcome::Accepted as i32));
    report(&mut client, "w", honest).await.unwrap();
    assert_eq!(status(&mut client, &run.run).await.jobs_done, 4);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_shutdown_cuts_the_enumeration_of_a_huge_plan_short() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator =
        Coordinator::open(Store::open(dir.path()).unwrap(), Config::default()).unwrap();
    let (address, stop, server) = serving(coordinator).await;
    let mut client = nqueens_proto::connect(&nqueens_proto::Connection::new(&address)).unwrap();
    // d4 split 14 at N = 32: seconds of enumeration before it is refused for its size.
    let creating = tokio::spawn(async move {
        client
            .create_run(proto::CreateRunRequest {
                n: 32,
                strategy: proto::Strategy::D4 as i32,
                depth: Some(14),
                reuse: false,
                verify_fraction: None,
                priority: 0,
                record: false,
                max_error: None,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    stop.cancel();
    server.await.unwrap().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "the server took {:?} to stop",
        asked.elapsed()
    );
    let err = creating.await.unwrap().unwrap_err();
    assert!(
        matches!(
            err.code(),
            Code::Unavailable | Code::Cancelled | Code::Unknown
        ),
        "{err:?}"
    );
    // Nothing was created (the store is free once the coordinator's threads have let go of it).
    let mut store = Store::open(dir.path());
    for _ in 0..100 {
        if store.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        store = Store::open(dir.path());
    }
    assert!(store.unwrap().runs().unwrap().is_empty());
}

#[tokio::test]
async fn issue_19_reflection_answers_in_v1_and_v1alpha() {
    use tonic_reflection::pb::{v1, v1alpha};
    let s = start(Duration::from_secs(60)).await;
    let channel = plain_channel(&s).await;
    let want = "nqueens.v1.Coordinator".to_string();
    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(channel.clone());
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers = alpha
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().unwrap();
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("{answer:?}");
    };
    assert!(list.service.iter().any(|s| s.name == want), "{list:?}");
    let mut current = v1::server_reflection_client::ServerReflectionClient::new(channel);
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut answers = current
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().unwrap();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("{answer:?}");
    };
    assert!(list.service.iter().any(|s| s.name == want), "{list:?}");
}

#[tokio::test]
async fn issue_19_a_worker_left_only_its_own_jobs_to_verify_is_idle() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create_verified(&mut s.client, 6, 1.0).await;
    let ask = |name: &str| proto::LeaseRequest {
        worker_id: name.into(),
        worker_name: name.into(),
        threads: 1,
        capacity: 64,
        run: None,
        wait_ms: 0,
        gpus: 0,
        gpu_kernels: Vec::new(),
    };
    let first = s.client.lease(ask("solo")).await.unwrap().into_inner();
    assert!(!first.idle && first.leases.len() as u64 == run.jobs_total);
    report(
        &mut s.client,
        "solo",
        first.leases.iter().map(result_of).collect(),
    )
    .await
    .unwrap();
    // Every job now waits for a second worker name: nothing is for "solo" any more.
    let again = s.client.lease(ask("solo")).await.unwrap().into_inner();
    assert!(again.leases.is_empty());
    assert!(again.idle, "--exit-when-idle must let it go");
    let st = status(&mut s.client, &run.run).await;
    assert_eq!(st.state, proto::RunState::Running as i32);
    // Another name gets the jobs, and is not idle.
    let other = s.client.lease(ask("other")).await.unwrap().into_inner();
    assert!(!other.idle && other.leases.len() as u64 == run.jobs_total);
    // While "other" holds them, "solo" is not idle: a lease that expires could come back to it.
    let solo = s.client.lease(ask("solo")).await.unwrap().into_inner();
    assert!(!solo.idle);
}

/// A coordinator over the store in `dir`, serving on a loopback port: its client, and how to stop it.
async fn incarnation_at(
    dir: &std::path::Path,
) -> (
    Client,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
) {
    // The previous incarnation lets go of the store once its last connection and its commit thread end.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let store = loop {
        match Store::open(dir) {
            Err(nqueens_coordinator::error::Error::InUse(_))
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => break other.unwrap(),
        }
    };
    let coordinator = Coordinator::open(store, Config::default()).unwrap();
    let (address, stop, server) = serving(coordinator).await;
    let client = nqueens_proto::connect(&nqueens_proto::Connection::new(&address)).unwrap();
    (client, stop, server)
}

async fn lease_of(c: &mut Client, worker: &str, capacity: u32, run: &str) -> Vec<proto::JobLease> {
    c.lease(proto::LeaseRequest {
        worker_id: worker.into(),
        worker_name: worker.into(),
        threads: 1,
        capacity,
        run: Some(run.into()),
        wait_ms: 0,
        gpus: 0,
        gpu_kernels: Vec::new(),
    })
    .await
    .unwrap()
    .into_inner()
    .leases
}

#[tokio::test]
async fn issue_19_a_run_counts_only_the_workers_on_it() {
    let mut s = start(Duration::from_secs(60)).await;
    let busy = create(&mut s.client, 8).await;
    let idle = create(&mut s.client, 9).await;
    let a = lease_of(&mut s.client, "a", 2, &busy.run).await;
    lease_of(&mut s.client, "b", 2, &busy.run).await;
    assert_eq!(status(&mut s.client, &busy.run).await.active_workers, 2);
    assert_eq!(
        status(&mut s.client, &idle.run).await.active_workers,
        0,
        "two workers connected, none on this run"
    );
    // A worker that reported for the run and holds nothing of it still counts (within a lease timeout).
    report(&mut s.client, "a", a.iter().map(result_of).collect())
        .await
        .unwrap();
    assert_eq!(status(&mut s.client, &busy.run).await.active_workers, 2);
    assert_eq!(status(&mut s.client, &idle.run).await.active_workers, 0);
}

#[tokio::test]
async fn issue_19_a_workers_jobs_done_survive_a_coordinator_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut client, stop, server) = incarnation_at(dir.path()).await;
    let run = create(&mut client, 8).await;
    let leased = lease(&mut client, "w", 4).await;
    report(&mut client, "w", leased.iter().map(result_of).collect())
        .await
        .unwrap();
    stop.cancel();
    server.await.unwrap().unwrap();
    drop(client);

    // The same worker process goes on with the next incarnation.
    let (mut client, stop, _server) = incarnation_at(dir.path()).await;
    let more = lease(&mut client, "w", 3).await;
    report(&mut client, "w", more.iter().map(result_of).collect())
        .await
        .unwrap();
    assert_eq!(status(&mut client, &run.run).await.jobs_done, 7);
    let w = list_workers(&mut client).await;
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].jobs_done, 7, "4 before the restart and 3 after: {w:?}");
    stop.cancel();
}

fn control(run: &str) -> proto::RunControlRequest {
    proto::RunControlRequest { run: run.into() }
}

async fn heartbeat(c: &mut Client, worker: &str, ids: Vec<u64>) -> proto::HeartbeatResponse {
    c.heartbeat(proto::HeartbeatRequest {
        worker_id: worker.into(),
        lease_ids: ids,
    })
    .await
    .unwrap()
    .into_inner()
}

/// A coordinator over the store in `dir` (once no other process holds it), served on loopback; stopped
/// with the token. Also a second handle on its store.
async fn incarnation(dir: &std::path::Path) -> (Client, CancellationToken, Store) {
    let store = loop {
        match Store::open(dir) {
            Ok(store) => break store,
            // The previous incarnation is still letting go of it.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let handle = store.clone();
    let coordinator = Coordinator::open(store, Config::default()).unwrap();
    let (address, stop, _server) = serving(coordinator).await;
    let client = nqueens_proto::connect(&nqueens_proto::Connection::new(&address)).unwrap();
    (client, stop, handle)
}

#[tokio::test]
async fn issue_19_a_cancelled_run_leases_nothing_keeps_its_results_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut c, stop, store) = incarnation(dir.path()).await;
    let run = create(&mut c, 8).await;
    let paused = create(&mut c, 7).await;
    let leased = lease(&mut c, "w", 2).await;
    assert_eq!(leased.len(), 2);
    assert!(
        leased.iter().all(|l| l.run == run.run),
        "the oldest run first"
    );
    let counted = report(&mut c, "w", vec![result_of(&leased[0])])
        .await
        .unwrap();
    assert_eq!(counted, vec![proto::Outcome::Accepted as i32]);
    assert!(heartbeat(&mut c, "w", vec![leased[1].lease_id])
        .await
        .lost
        .is_empty());

    let cancelled = c.cancel_run(control(&run.run)).await.unwrap().into_inner();
    assert_eq!(cancelled.state, proto::RunState::Cancelled as i32);
    assert!(cancelled.cancelled_unix.is_some());
    assert_eq!(cancelled.jobs_done, 1);
    assert_eq!(cancelled.jobs_leased, 0, "its leases ended");
    let partial = cancelled.total.clone();
    assert_eq!(
        partial,
        result_of(&leased[0]).total.to_string(),
        "what was counted stays"
    );
    // The worker learns that its lease is gone because the run was cancelled.
    let beat = heartbeat(&mut c, "w", vec![leased[1].lease_id]).await;
    assert_eq!(beat.lost, vec![leased[1].lease_id]);
    assert_eq!(beat.cancelled, vec![leased[1].lease_id]);
    // A result for it is refused for good, and changes nothing stored.
    let before = contents(&store);
    let refused = report(&mut c, "w", vec![result_of(&leased[1])])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains("cancelled"),
        "{}",
        refused.message()
    );
    assert_eq!(contents(&store), before);
    // Nothing more is leased from it: the other run's jobs come instead.
    let next = lease(&mut c, "w", 1000).await;
    assert!(!next.is_empty() && next.iter().all(|l| l.run == paused.run));
    let st = status(&mut c, &run.run).await;
    assert_eq!(
        (st.state, st.jobs_done, st.total.as_str()),
        (proto::RunState::Cancelled as i32, 1, partial.as_str())
    );
    assert!(
        st.unique.is_none(),
        "a cancelled run's total is never final"
    );
    // Cancelling again changes nothing; no other control applies to it.
    let again = c.cancel_run(control(&run.run)).await.unwrap().into_inner();
    assert_eq!(again.cancelled_unix, cancelled.cancelled_unix);
    for refused in [
        c.pause_run(control(&run.run)).await.unwrap_err(),
        c.resume_run(control(&run.run)).await.unwrap_err(),
        c.set_priority(proto::SetPriorityRequest {
            run: run.run.clone(),
            priority: 1,
        })
        .await
        .unwrap_err(),
    ] {
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    }
    // The other run, paused, and re-prioritised: persisted too.
    release(&mut c, "w", next.iter().map(|l| l.lease_id).collect()).await;
    c.set_priority(proto::SetPriorityRequest {
        run: paused.run.clone(),
        priority: -4,
    })
    .await
    .unwrap();
    let p = c
        .pause_run(control(&paused.run))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((p.state, p.priority), (proto::RunState::Paused as i32, -4));
    // The ledger holds the controls too (the last line of a run holds): a store rebuilt from it alone
    // keeps the run cancelled, the other paused at its priority.
    let ledger = nqueens_coordinator::durable::ledger::LedgerView::read(
        &dir.path()
            .join(nqueens_coordinator::durable::ledger::LEDGER_FILE),
    )
    .unwrap();
    let id = |r: &str| r.parse::<u64>().unwrap();
    assert!(ledger.runs[&id(&run.run)].is_cancelled());
    let logged = &ledger.runs[&id(&paused.run)];
    assert!(logged.paused && !logged.is_cancelled());
    assert_eq!(logged.priority, -4);
    stop.cancel();
    drop((c, store));

    let (mut c, stop, _store) = incarnation(dir.path()).await;
    let st = status(&mut c, &run.run).await;
    assert_eq!(
        (st.state, st.jobs_done, st.total.as_str()),
        (proto::RunState::Cancelled as i32, 1, partial.as_str())
    );
    assert_eq!(st.cancelled_unix, cancelled.cancelled_unix);
    let p = status(&mut c, &paused.run).await;
    assert_eq!((p.state, p.priority), (proto::RunState::Paused as i32, -4));
    let nothing = c
        .lease(proto::LeaseRequest {
            worker_id: "w2".into(),
            worker_name: "w2".into(),
            threads: 1,
            capacity: 16,
            run: None,
            wait_ms: 0,
            gpus: 0,
            gpu_kernels: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        nothing.leases.is_empty() && nothing.idle,
        "a cancelled and a paused run lease nothing"
    );
    // A resubmission with --reuse does not get the cancelled run back.
    let fresh = c
        .create_run(proto::CreateRunRequest {
            n: 8,
            strategy: proto::Strategy::D4 as i32,
            depth: Some(run.depth),
            reuse: true,
            verify_fraction: Some(0.0),
            priority: 0,
            record: false,
            max_error: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(fresh.run, run.run);
    assert_eq!(fresh.state, proto::RunState::Running as i32);
    stop.cancel();
}

#[tokio::test]
async fn issue_19_a_paused_run_leases_nothing_but_counts_the_results_of_its_leases_until_resumed() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create(&mut s.client, 8).await;
    let out = lease(&mut s.client, "w", 1).await;
    let p = s
        .client
        .pause_run(control(&run.run))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p.state, proto::RunState::Paused as i32);
    assert_eq!(p.eta_seconds, None);
    assert!(lease(&mut s.client, "w", 8).await.is_empty());
    // The lease out finishes and reports normally.
    let outcomes = report(&mut s.client, "w", vec![result_of(&out[0])])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![proto::Outcome::Accepted as i32]);
    assert_eq!(status(&mut s.client, &run.run).await.jobs_done, 1);
    // Pausing twice is pausing once; resuming leases again.
    s.client.pause_run(control(&run.run)).await.unwrap();
    let r = s
        .client
        .resume_run(control(&run.run))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.state, proto::RunState::Running as i32);
    assert_eq!(lease(&mut s.client, "w", 1).await.len(), 1);
}

#[tokio::test]
async fn issue_19_workers_lease_from_the_highest_priority_run_first_and_bad_controls_change_nothing(
) {
    let mut s = start(Duration::from_secs(60)).await;
    let low = create(&mut s.client, 8).await;
    let high = s
        .client
        .create_run(proto::CreateRunRequest {
            n: 8,
            strategy: proto::Strategy::D4 as i32,
            depth: None,
            reuse: false,
            verify_fraction: Some(0.0),
            priority: 5,
            record: false,
            max_error: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(high.priority, 5);
    let later = create(&mut s.client, 8).await;
    assert!(lease(&mut s.client, "w", 2)
        .await
        .iter()
        .all(|l| l.run == high.run));
    let raised = s
        .client
        .set_priority(proto::SetPriorityRequest {
            run: later.run.clone(),
            priority: 9,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(raised.priority, 9);
    assert!(lease(&mut s.client, "w", 2)
        .await
        .iter()
        .all(|l| l.run == later.run));
    // Equal priorities: the oldest first, as without priorities.
    s.client
        .set_priority(proto::SetPriorityRequest {
            run: low.run.clone(),
            priority: 9,
        })
        .await
        .unwrap();
    assert!(lease(&mut s.client, "w", 2)
        .await
        .iter()
        .all(|l| l.run == low.run));

    let before = contents(&s.store);
    for (refused, code) in [
        (
            s.client.cancel_run(control("99")).await.unwrap_err(),
            Code::NotFound,
        ),
        (
            s.client.pause_run(control("")).await.unwrap_err(),
            Code::NotFound,
        ),
        (
            s.client
                .resume_run(control("x".repeat(10_000).as_str()))
                .await
                .unwrap_err(),
            Code::NotFound,
        ),
        (
            s.client
                .set_priority(proto::SetPriorityRequest {
                    run: "-1".into(),
                    priority: 1,
                })
                .await
                .unwrap_err(),
            Code::NotFound,
        ),
        (
            s.client
                .list_jobs(proto::ListJobsRequest {
                    state: proto::JobState::Unspecified as i32,
                    run: None,
                    limit: 0,
                })
                .await
                .unwrap_err(),
            Code::InvalidArgument,
        ),
        (
            s.client
                .list_jobs(proto::ListJobsRequest {
                    state: 77,
                    run: None,
                    limit: 0,
                })
                .await
                .unwrap_err(),
            Code::InvalidArgument,
        ),
        (
            s.client
                .list_jobs(proto::ListJobsRequest {
                    state: proto::JobState::Failed as i32,
                    run: None,
                    limit: 10_001,
                })
                .await
                .unwrap_err(),
            Code::InvalidArgument,
        ),
        (
            s.client
                .list_jobs(proto::ListJobsRequest {
                    state: proto::JobState::Failed as i32,
                    run: Some("12".into()),
                    limit: 0,
                })
                .await
                .unwrap_err(),
            Code::NotFound,
        ),
    ] {
        assert_eq!(refused.code(), code, "{refused:?}");
        assert!(refused.message().len() < 300, "{}", refused.message());
    }
    assert_eq!(
        contents(&s.store),
        before,
        "bad input changes nothing stored"
    );
}

#[tokio::test]
async fn issue_19_list_jobs_names_the_verifying_jobs_and_says_when_it_is_truncated() {
    let mut s = start(Duration::from_secs(60)).await;
    let run = create_verified(&mut s.client, 6, 1.0).await;
    let other = create(&mut s.client, 6).await;
    let leased = lease(&mut s.client, "a", 64).await;
    let mine: Vec<_> = leased.iter().filter(|l| l.run == run.run).collect();
    assert!(mine.len() >= 2, "{}", mine.len());
    report(
        &mut s.client,
        "a",
        mine.iter().map(|l| result_of(l)).collect(),
    )
    .await
    .unwrap();
    let list = |run: Option<&str>, state: proto::JobState, limit: u32| proto::ListJobsRequest {
        state: state as i32,
        run: run.map(Into::into),
        limit,
    };
    let all = s
        .client
        .list_jobs(list(Some(&run.run), proto::JobState::Verifying, 0))
        .await
        .unwrap()
        .into_inner();
    assert!(!all.truncated);
    let mut expected: Vec<&str> = mine.iter().map(|l| l.job.as_str()).collect();
    let mut got: Vec<&str> = all.jobs.iter().map(|j| j.job.as_str()).collect();
    expected.sort();
    got.sort();
    assert_eq!(got, expected);
    assert!(all.jobs.iter().all(|j| j.run == run.run
        && j.workers == ["a"]
        && j.state == proto::JobState::Verifying as i32));
    let cut = s
        .client
        .list_jobs(list(None, proto::JobState::Verifying, 1))
        .await
        .unwrap()
        .into_inner();
    assert!(cut.truncated && cut.jobs.len() == 1);
    let none = s
        .client
        .list_jobs(list(Some(&other.run), proto::JobState::Failed, 0))
        .await
        .unwrap()
        .into_inner();
    assert!(none.jobs.is_empty() && !none.truncated);
}

/// A stopped server lets go of its coordinator, and so of its store, whatever streams were open on it:
/// before, a `status --watch` (WatchRun) or a health Watch kept its connection, and with it the store,
/// after the server stopped, so that `serve` could not reopen its store after a storage failure and
/// exited. Found by a review (2026-11-24).
#[tokio::test]
async fn a_stopped_server_lets_go_of_its_store_though_streams_were_open() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator =
        Coordinator::open(Store::open(dir.path()).unwrap(), Config::default()).unwrap();
    let (address, stop, served) = serving(coordinator).await;
    let mut client = nqueens_proto::connect(&nqueens_proto::Connection::new(&address)).unwrap();
    let run = create(&mut client, 14).await;
    let mut watch = client
        .watch_run(proto::WatchRunRequest {
            run: run.run.clone(),
            interval_ms: 3_600_000,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(watch.message().await.unwrap().is_some());
    let channel = Channel::from_shared(address.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel)
        .watch(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(health.message().await.unwrap().is_some());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    // The streams are still held open by this client: the store must be free all the same.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match Store::open(dir.path()) {
            Ok(_) => break,
            Err(nqueens_coordinator::error::Error::InUse(_))
                if std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("the store is still held: {e}"),
        }
    }
    drop((watch, health));
}

/// ListRuns answers a page at a time, in id order: at most `limit` runs, `more` set while runs of
/// greater ids remain, `after` going on past the last one listed. Before, every run went into one reply,
/// whose size grew without bound with the runs a coordinator kept (past the clients' 4 MiB, no client
/// could list them at all). A request without either field gets the first page: all of these runs.
#[tokio::test]
async fn runs_are_listed_a_page_at_a_time() {
    let mut s = start(Duration::from_secs(60)).await;
    let mut ids = Vec::new();
    for n in 4..9 {
        ids.push(create(&mut s.client, n).await.run);
    }
    let list = |after: u64, limit: u32| proto::ListRunsRequest { after, limit };
    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let page = s
            .client
            .list_runs(list(after, 2))
            .await
            .unwrap()
            .into_inner();
        assert!(page.runs.len() <= 2);
        paged.extend(page.runs.iter().map(|r| r.run.clone()));
        if !page.more {
            break;
        }
        after = page.runs.last().unwrap().run.parse().unwrap();
    }
    assert_eq!(paged, ids);
    let whole = s
        .client
        .list_runs(proto::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(!whole.more);
    let all: Vec<String> = whole.runs.into_iter().map(|r| r.run).collect();
    assert_eq!(all, ids);
    let last = s
        .client
        .list_runs(list(ids[3].parse().unwrap(), 0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((last.runs.len(), last.more), (1, false));
}

/// ListWorkers answers a page at a time in (name, id) order, as ListRuns does: every worker exactly once
/// over the pages, `more` set while any is left. Before, every worker went into one reply, whose size
/// grew with the worker ids callers made up (each Lease with a new id is a new worker for an hour).
#[tokio::test]
async fn workers_are_listed_a_page_at_a_time() {
    let mut s = start(Duration::from_secs(60)).await;
    create(&mut s.client, 8).await;
    let names = ["w1", "w2", "w3", "w4", "w5"];
    for name in names {
        lease(&mut s.client, name, 1).await;
    }
    let mut paged = Vec::new();
    let (mut after_name, mut after_id) = (String::new(), String::new());
    loop {
        let asked = proto::ListWorkersRequest {
            after_name,
            after_id,
            limit: 2,
        };
        let page = s.client.list_workers(asked).await.unwrap().into_inner();
        assert!(page.workers.len() <= 2);
        paged.extend(page.workers.iter().map(|w| w.name.clone()));
        if !page.more {
            break;
        }
        let last = page.workers.last().unwrap();
        (after_name, after_id) = (last.name.clone(), last.worker_id.clone());
    }
    assert_eq!(paged, names);
    let whole: Vec<String> = list_workers(&mut s.client)
        .await
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(whole, names);
}

/// A worker token (`serve --worker-token`) leases, heartbeats, reports and reads runs' plans, but
/// cannot create or steer runs: those calls get PERMISSION_DENIED and change nothing stored. The operator token does
/// everything; any other token nothing.
#[tokio::test]
async fn a_worker_token_computes_and_reads_but_cannot_create_or_steer_runs() {
    let s = start_with(
        Duration::from_secs(60),
        Options {
            token: Some("operator".into()),
            worker_token: Some("worker".into()),
            ..Options::default()
        },
    )
    .await;
    let client = |token: &str| {
        nqueens_proto::connect(&nqueens_proto::Connection {
            coordinator: s.address.clone(),
            token: Some(token.into()),
            tls_ca: None,
            client_cert: None,
        })
        .unwrap()
    };
    let mut operator = client("operator");
    let mut worker = client("worker");
    let run = create(&mut operator, 6).await;
    let before = contents(&s.store);

    // Every call that creates or steers a run is the operator's.
    let denied = [
        worker
            .create_run(proto::CreateRunRequest {
                n: 8,
                strategy: proto::Strategy::D4 as i32,
                depth: None,
                reuse: true,
                verify_fraction: None,
                priority: 0,
                record: false,
                max_error: None,
            })
            .await
            .map(|_| ()),
        worker.cancel_run(control(&run.run)).await.map(|_| ()),
        worker.pause_run(control(&run.run)).await.map(|_| ()),
        worker.resume_run(control(&run.run)).await.map(|_| ()),
        worker
            .set_priority(proto::SetPriorityRequest {
                run: run.run.clone(),
                priority: 9,
            })
            .await
            .map(|_| ()),
    ];
    for (i, d) in denied.into_iter().enumerate() {
        let e = d.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "call {i}: {e:?}");
        assert!(e.message().contains("operator"), "{}", e.message());
    }
    assert_eq!(
        contents(&s.store),
        before,
        "a denied call changed the store"
    );

    // A wrong token is still unauthenticated, not merely denied.
    let mut stranger = client("workerx");
    let e = stranger.cancel_run(control(&run.run)).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);

    // The worker token reads and computes the run to the end.
    assert_eq!(
        worker
            .list_runs(proto::ListRunsRequest::default())
            .await
            .unwrap()
            .into_inner()
            .runs
            .len(),
        1
    );
    // Which jobs wait for a check, and who the other workers are, are the operator's to know.
    let e = worker
        .list_jobs(proto::ListJobsRequest {
            state: proto::JobState::Failed as i32,
            run: None,
            limit: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let leases = lease(&mut worker, "w", 1000).await;
    assert_eq!(leases.len() as u64, run.jobs_total);
    heartbeat(
        &mut worker,
        "w",
        leases.iter().map(|l| l.lease_id).collect(),
    )
    .await;
    let results = leases.iter().map(result_of).collect();
    report(&mut worker, "w", results).await.unwrap();
    // A worker reads the plan and the state, not the counts (`adversary.rs`).
    let done = status(&mut worker, &run.run).await;
    assert_eq!(done.state, proto::RunState::Done as i32);
    assert_eq!(done.total, "");
    assert_eq!(status(&mut operator, &run.run).await.total, "4");
    let e = worker
        .list_workers(proto::ListWorkersRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let listed = list_workers(&mut operator).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].label.as_str()),
        ("workers-token", "w"),
        "the shared token is one identity; the name is a label"
    );

    // The operator token steers runs.
    let second = create(&mut operator, 7).await;
    operator.pause_run(control(&second.run)).await.unwrap();
    operator.cancel_run(control(&second.run)).await.unwrap();
}
