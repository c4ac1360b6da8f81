//! Fault injection end to end (issue 4), with real processes on 127.0.0.1: workers that report wrong
//! counts, stall or die mid-batch cannot corrupt a run that verifies half its jobs (the liar's unverified
//! counts are revoked once it is caught); a coordinator killed with SIGKILL twenty
//! times (once for several seconds) loses no acknowledged result and counts none twice.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use nqueens_coordinator::durable::store::Store;
use nqueens_proto::RunState;
use support::{
    poll, probe, reference, stdout_of, submit_with, wait, worker, worker_logging, Serve,
};

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn issue_4_wrong_stalled_and_dying_workers_cannot_corrupt_a_verified_run() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "1s");
    // Half the jobs are verified; the liar's wrong counts on the other half are counted at first, and
    // must be revoked once it is caught on a verified one. The liar runs alone until it has reported
    // most jobs: nobody else can hold a second copy yet, so it cannot be caught (and its counts revoked)
    // before it has reported plenty, whatever the timing.
    let run = submit_with(&serve.address, 14, "d4", &["--verify-fraction", "0.5"]);
    let mut liar = worker(
        &serve.address,
        dir.path(),
        "liar",
        &["--fault-wrong-every", "2"],
    );
    let early = poll(&serve.address, &run, LIMIT, |s| {
        s.jobs_done + s.jobs_verifying >= 40
    });
    assert!(early.jobs_done > 0 && early.jobs_verifying > 0, "{early:?}");
    // The staller and the crasher take second copies of verified jobs, and hold leases they never report.
    let mut staller = worker(
        &serve.address,
        dir.path(),
        "staller",
        &["--fault-stall-after", "2"],
    );
    let mut crasher = worker(
        &serve.address,
        dir.path(),
        "crasher",
        &["--fault-die-after", "2"],
    );
    let crashed = wait(&mut crasher, LIMIT, "crasher");
    assert_eq!(crashed.code(), Some(86), "the crasher died mid-batch");
    let mut a = worker(&serve.address, dir.path(), "a", &["--exit-when-idle"]);
    let mut b = worker(&serve.address, dir.path(), "b", &["--exit-when-idle"]);
    assert!(wait(&mut a, LIMIT, "a").success());
    assert!(wait(&mut b, LIMIT, "b").success());
    let refused = wait(&mut liar, LIMIT, "liar");
    assert!(
        !refused.success(),
        "a quarantined worker is refused and stops"
    );
    let _ = staller.kill();
    let _ = staller.wait();

    let done = probe(&serve.address, &run).unwrap();
    let (total, unique) = reference(14);
    assert_eq!(done.state, RunState::Done as i32, "{done:?}");
    assert_eq!(done.total, total.to_string());
    assert_eq!(done.unique, Some(unique.to_string()));
    assert_eq!((done.jobs_disputed, done.jobs_failed), (0, 0));

    let workers = String::from_utf8(stdout_of(support::nqueens().args([
        "status",
        "--workers",
        "--json",
        "--coordinator",
        &serve.address,
    ])))
    .unwrap();
    let quarantined: Vec<serde_json::Value> = workers
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|w| w["quarantined"] == true)
        .collect();
    assert_eq!(quarantined.len(), 1, "{workers}");
    assert_eq!(quarantined[0]["name"], "liar");
    let log = serve.log();
    assert!(log.contains("worker quarantined"), "{log}");
    let revoked: u64 = log
        .lines()
        .find(|l| l.contains("worker quarantined"))
        .and_then(|l| l.split("revoked=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        revoked > 0,
        "the liar's unverified results were revoked: {log}"
    );
    assert!(log.contains("disputed job"), "{log}");
    assert!(
        log.contains("lease expired"),
        "the staller's and crasher's leases expired: {log}"
    );
    eprintln!("liar quarantined, {revoked} of its counted results revoked; total exact");
    let liar_log = std::fs::read_to_string(dir.path().join("liar.log")).unwrap();
    assert!(liar_log.contains("quarantined"), "{liar_log}");
}

/// The results a worker's debug log says the coordinator acknowledged: (run, job) -> total.
fn acknowledged(log: &str) -> HashMap<(String, String), u64> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == "result acknowledged")
        .map(|v| {
            assert!(
                matches!(
                    v["outcome"].as_str(),
                    Some("OUTCOME_ACCEPTED" | "OUTCOME_DUPLICATE")
                ),
                "{v}"
            );
            (
                (
                    v["run"].as_str().unwrap().to_string(),
                    v["job"].as_str().unwrap().to_string(),
                ),
                v["total"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn issue_4_a_coordinator_killed_twenty_times_loses_nothing_and_counts_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let mut serve = Serve::start(&data, "127.0.0.1:0", "2s");
    let listen = serve.listen().to_string();
    let address = serve.address.clone();
    // N = 19: long enough to outlast twenty kills on a fast machine (N = 18 took 6 s on two cores here,
    // and once ended after 19 kills, 2026-11-30).
    let run = submit_with(&address, 19, "d4", &["--verify-fraction", "0"]);
    let debug = "info,nqueens_worker=debug";
    let json = ["--log-format", "json", "--exit-when-idle"];
    let mut workers = [
        worker_logging(&address, dir.path(), "a", &json, debug),
        worker_logging(&address, dir.path(), "b", &json, debug),
    ];
    poll(&address, &run, LIMIT, |s| s.jobs_done >= 4);
    // Kill at pseudo-random moments (a fixed-seed generator, so that a failure can be replayed).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let mut kills = 0;
    let mut last_done = 0;
    while kills < 20 {
        std::thread::sleep(Duration::from_millis(150 + next(450)));
        serve.kill();
        kills += 1;
        // Once, the coordinator stays down for several seconds: workers keep computing, journal their
        // results and deliver them after it comes back.
        let down = if kills == 10 { 4_000 } else { next(300) };
        std::thread::sleep(Duration::from_millis(down));
        serve = Serve::start(&data, &listen, "2s");
        let now = poll(&address, &run, LIMIT, |_| true);
        assert!(now.jobs_done >= last_done, "progress went back: {now:?}");
        last_done = now.jobs_done;
        assert!(
            now.state != RunState::Done as i32 || kills >= 20,
            "the run ended after {kills} kills; it must outlast 20"
        );
    }
    for (i, w) in workers.iter_mut().enumerate() {
        assert!(wait(w, LIMIT, &format!("worker {i}")).success());
    }
    let done = probe(&address, &run).unwrap();
    let (total, unique) = reference(19);
    assert_eq!(done.state, RunState::Done as i32, "{done:?}");
    assert_eq!(done.total, total.to_string());
    assert_eq!(done.unique, Some(unique.to_string()));
    serve.stop();

    // Offline: the audit holds, and every result a worker saw acknowledged is in the store, unchanged.
    let store = Store::open(&data).unwrap();
    let audit = store.audit().unwrap();
    assert_eq!(audit[0].tally.total, total);
    assert_eq!(audit[0].tally.jobs, done.jobs_total);
    let mut acked = HashMap::new();
    let mut outage_seen = false;
    for name in ["a", "b"] {
        let log = std::fs::read_to_string(dir.path().join(format!("{name}.log"))).unwrap();
        outage_seen |= log.contains("coordinator reachable again");
        acked.extend(acknowledged(&log));
    }
    assert!(outage_seen, "the workers rode out the outages");
    assert!(
        acked.len() as u64 >= done.jobs_total / 2,
        "{} acknowledged",
        acked.len()
    );
    for ((r, job), t) in &acked {
        let key = job.parse().unwrap();
        let stored = store.result(r.parse().unwrap(), &key).unwrap();
        assert_eq!(stored.map(|s| s.result.total), Some(*t), "job {job}");
    }
    eprintln!(
        "{kills} SIGKILLs (one 4 s outage); {} jobs; {} acknowledged results checked against the store",
        done.jobs_total,
        acked.len()
    );
    drop(store);
    let out = stdout_of(support::nqueens().args(["audit", "--data"]).arg(&data));
    assert!(String::from_utf8_lossy(&out).contains("audit passed"));
}

/// A report slower than the lease timeout (a backlogged coordinator, a slow link; here the worker's
/// own switch delays every report by 1.5 s against a 1 s timeout) must not cost the worker its leases:
/// heartbeats go on while a report is under way. Before, they waited behind it, the leases expired,
/// the worker was struck for it and its jobs were handed to others. Found by a review, 2026-11-24.
/// Nothing is verified: one worker cannot check itself, and since checks are drawn with the store's
/// secret, the default fraction picked one of the 9 jobs about one run in 12 (it failed so, 2026-11-27).
#[test]
fn heartbeats_go_on_while_a_slow_report_is_under_way() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "1s");
    let run = support::submit_with(&serve.address, 7, "d4", &["--verify-fraction", "0"]);
    let mut w = worker(
        &serve.address,
        dir.path(),
        "slow",
        &["--exit-when-idle", "--fault-slow-report-ms", "1500"],
    );
    assert!(wait(&mut w, LIMIT, "slow worker").success());
    let done = probe(&serve.address, &run).unwrap();
    assert_eq!(done.state, RunState::Done as i32, "{done:?}");
    assert_eq!(done.total, reference(7).0.to_string());
    let log = serve.log();
    assert!(!log.contains("lease expired"), "{log}");
}
