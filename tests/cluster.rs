//! End-to-end cluster runs with real processes on 127.0.0.1: a coordinator (`nqueens serve`) and workers
//! (`nqueens worker`), with workers and the coordinator killed mid-run (issue 3). Every total is checked
//! against the published reference counts, and the store is audited at the end.

mod support;

use std::time::Duration;

use nqueens_coordinator::durable::store::Store;
use nqueens_proto::RunState;
use support::{poll, reference, status_json, submit, submit_with, wait, worker, Serve};

const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn issue_3_coordinator_and_two_workers_count_12_and_13_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "10s");
    let mut runs = Vec::new();
    for n in [12, 13] {
        for strategy in ["d4", "mirror"] {
            runs.push((n, strategy, submit(&serve.address, n, strategy)));
        }
    }
    let mut a = worker(&serve.address, dir.path(), "a", &["--exit-when-idle"]);
    let mut b = worker(&serve.address, dir.path(), "b", &["--exit-when-idle"]);
    assert!(wait(&mut a, LIMIT, "worker a").success());
    assert!(wait(&mut b, LIMIT, "worker b").success());

    let status = status_json(&serve.address);
    assert_eq!(status.len(), 4);
    for ((n, strategy, run), s) in runs.iter().zip(&status) {
        let (total, unique) = reference(*n);
        assert_eq!(s["run"], run.as_str());
        assert_eq!(s["state"], "done", "{s}");
        assert_eq!(s["strategy"], *strategy);
        assert_eq!(s["total"], total.to_string(), "N = {n} {strategy}");
        assert_eq!(s["jobs_done"], s["jobs_total"]);
        match *strategy {
            "d4" => assert_eq!(s["unique"], unique.to_string()),
            _ => assert!(s.get("unique").is_none()),
        }
    }
    let log = serve.log();
    assert_eq!(log.matches("run finished").count(), 4, "{log}");
    assert!(log.contains("worker joined"), "{log}");
}

#[test]
fn issue_3_a_killed_workers_jobs_are_leased_again_after_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "1s");
    // One worker name at the end: nothing could verify (a second name is needed), so no verification.
    let run = submit_with(&serve.address, 16, "d4", &["--verify-fraction", "0"]);
    // It hangs once its third job is computed, before reporting it, so that it holds that job's lease
    // when it is killed. (A plain worker holds one lease per thread and none between a report's answer
    // and its next lease: a kill landing there left nothing to expire, and the test failed one run in
    // eight, found 2026-11-28.)
    let mut doomed = worker(
        &serve.address,
        dir.path(),
        "doomed",
        &["--fault-stall-after", "3"],
    );
    // The status seen just before the kill shows the worker holding leases; by the time a later probe
    // runs on a loaded machine they may already have expired, so the check is made before the kill.
    let held = poll(&serve.address, &run, LIMIT, |s| {
        s.jobs_done >= 2 && s.jobs_leased > 0
    });
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    assert!(
        held.state != RunState::Done as i32 && held.jobs_done < held.jobs_total,
        "the run ended before the kill: {held:?}"
    );

    let mut rescuer = worker(&serve.address, dir.path(), "rescuer", &["--exit-when-idle"]);
    assert!(wait(&mut rescuer, LIMIT, "rescuer").success());
    let done = support::probe(&serve.address, &run).unwrap();
    let (total, unique) = reference(16);
    assert_eq!(done.state, RunState::Done as i32);
    assert_eq!(done.total, total.to_string());
    assert_eq!(done.unique, Some(unique.to_string()));
    let log = serve.log();
    assert!(log.contains("lease expired"), "{log}");
    // Its silence is logged once, by name (issue 5).
    let lost = log
        .lines()
        .filter(|l| l.contains("worker lost") && l.contains("name=doomed"))
        .count();
    assert_eq!(lost, 1, "{log}");
}

#[test]
fn issue_3_a_coordinator_killed_mid_run_resumes_and_counts_each_job_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let mut first = Serve::start(&data, "127.0.0.1:0", "2s");
    let listen = first.listen().to_string();
    let address = first.address.clone();
    let run = submit(&address, 17, "d4");
    let mut workers = [
        worker(&address, dir.path(), "a", &["--exit-when-idle"]),
        worker(&address, dir.path(), "b", &["--exit-when-idle"]),
    ];
    let before = poll(&address, &run, LIMIT, |s| s.jobs_done >= 8);
    first.kill();
    assert!(
        before.jobs_done < before.jobs_total,
        "the run ended before the kill"
    );
    // The workers keep computing and journal what they cannot report; then the coordinator comes back on
    // the same address and the same data.
    std::thread::sleep(Duration::from_millis(700));
    let mut second = Serve::start(&data, &listen, "2s");
    for (i, w) in workers.iter_mut().enumerate() {
        assert!(wait(w, LIMIT, &format!("worker {i}")).success());
    }
    let done = support::probe(&address, &run).unwrap();
    let (total, unique) = reference(17);
    assert_eq!(done.state, RunState::Done as i32, "{done:?}");
    assert_eq!(done.total, total.to_string());
    assert_eq!(done.unique, Some(unique.to_string()));
    assert!(second.log().contains("audit passed"), "{}", second.log());
    second.stop();

    // Offline: the stored totals equal the sum of the stored results, one result per job.
    let store = Store::open(&data).unwrap();
    let audit = store.audit().unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].tally.total, total);
    assert_eq!(audit[0].tally.jobs, done.jobs_total);
    let sum: u128 = store
        .results(1)
        .map(|r| r.unwrap().1.result.total as u128)
        .sum();
    assert_eq!(sum, total);
    assert_eq!(store.results(1).count() as u64, done.jobs_total);
}

#[test]
fn issue_3_a_worker_stopped_with_sigterm_reports_its_running_job_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "60s");
    // One worker name at the end: nothing could verify (a second name is needed), so no verification.
    let run = submit_with(&serve.address, 16, "d4", &["--verify-fraction", "0"]);
    let mut polite = worker(&serve.address, dir.path(), "polite", &[]);
    poll(&serve.address, &run, LIMIT, |s| s.jobs_done >= 2);
    std::process::Command::new("kill")
        .args(["-TERM", &polite.id().to_string()])
        .status()
        .unwrap();
    assert!(wait(&mut polite, LIMIT, "polite").success());
    // It held no lease when it left: nothing waits for a 60 s expiry, and its last job was counted.
    let after = support::probe(&serve.address, &run).unwrap();
    assert_eq!(after.jobs_leased, 0, "{after:?}");
    let log = std::fs::read_to_string(dir.path().join("polite.log")).unwrap();
    assert!(log.contains("shutting down"), "{log}");
    assert!(!log.contains("unacknowledged"), "{log}");

    let mut rest = worker(&serve.address, dir.path(), "rest", &["--exit-when-idle"]);
    assert!(wait(&mut rest, LIMIT, "rest").success());
    let done = support::probe(&serve.address, &run).unwrap();
    assert_eq!(done.total, reference(16).0.to_string());
    assert!(!serve.log().contains("lease expired"), "{}", serve.log());
}

#[test]
fn issue_4_a_cluster_runs_over_tls_with_a_token_and_workers_with_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, pem_key) = self_signed(dir.path(), "");
    let (cert, pem_key) = (cert.to_str().unwrap(), pem_key.to_str().unwrap());
    let serve = Serve::start_with(
        &dir.path().join("store"),
        "127.0.0.1:0",
        "10s",
        &[
            "--token",
            "t0ken",
            "--worker-token",
            "w0rker",
            "--tls-cert",
            cert,
            "--tls-key",
            pem_key,
        ],
    );
    let https = serve.address.replace("http://", "https://");
    let secure = ["--token", "t0ken", "--tls-ca", cert];
    // The workers' token cannot submit a run: refused, naming the operator's token, nothing created.
    let out = support::nqueens()
        .args(["submit", "12", "--coordinator", &https])
        .args(["--token", "w0rker", "--tls-ca", cert])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("operator's token"), "{err}");
    let out = support::nqueens()
        .args([
            "submit",
            "12",
            "--json",
            "--verify-fraction",
            "0",
            "--coordinator",
            &https,
        ])
        .args(secure)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the token, or without TLS, a client is refused and learns nothing.
    for args in [&["--tls-ca", cert][..], &["--token", "t0ken"]] {
        let address = if args.contains(&"--tls-ca") {
            &https
        } else {
            &serve.address
        };
        let out = support::nqueens()
            .args(["status", "--coordinator", address])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty());
    }
    let mut w = worker(
        &https,
        dir.path(),
        "w",
        &["--exit-when-idle", "--token", "w0rker", "--tls-ca", cert],
    );
    assert!(wait(&mut w, LIMIT, "worker").success());
    let out = support::nqueens()
        .args(["status", "--json", "--coordinator", &https])
        .args(secure)
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["state"], "done");
    assert_eq!(s["total"], reference(12).0.to_string());
}

/// A self-signed certificate for 127.0.0.1 and its key, written to `DIR/PREFIXcert.pem` and
/// `DIR/PREFIXkey.pem`.
fn self_signed(dir: &std::path::Path, prefix: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, pem_key) = (
        dir.join(format!("{prefix}cert.pem")),
        dir.join(format!("{prefix}key.pem")),
    );
    std::fs::write(&cert, key.cert.pem()).unwrap();
    std::fs::write(&pem_key, key.signing_key.serialize_pem()).unwrap();
    (cert, pem_key)
}

/// `nqueens tls init DIR`, checked: it succeeds and says which file goes where.
fn tls_init(dir: &std::path::Path) -> String {
    let out = support::nqueens()
        .args(["tls", "init"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn issue_19_tls_init_makes_a_certificate_that_clients_and_loadgen_accept() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let tls = dir.path().join("tls");
    let said = tls_init(&tls);
    let file = |name: &str| tls.join(name).to_str().unwrap().to_string();
    let (ca, cert, key) = (file("ca.pem"), file("server.pem"), file("server-key.pem"));
    assert!(
        said.contains(&format!("--tls-cert {cert} --tls-key {key}")),
        "{said}"
    );
    assert!(said.contains(&format!("--tls-ca {ca}")), "{said}");
    assert!(said.contains("https://"), "{said}");
    for (name, mode) in [
        ("ca.pem", 0o644),
        ("ca-key.pem", 0o600),
        ("server.pem", 0o644),
        ("server-key.pem", 0o600),
    ] {
        let meta = std::fs::metadata(tls.join(name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{name}");
    }

    // The coordinator serves the certificate; a client that trusts the CA gets in (rustls checks the
    // chain, the host 127.0.0.1 and that the server certificate is no CA).
    let serve = Serve::start_with(
        &dir.path().join("store"),
        "127.0.0.1:0",
        "10s",
        &["--token", "t0ken", "--tls-cert", &cert, "--tls-key", &key],
    );
    let https = serve.address.replace("http://", "https://");
    let status = |extra: &[&str]| {
        support::nqueens()
            .args(["status", "--coordinator", &https, "--token", "t0ken"])
            .args(extra)
            .env_remove("NQUEENS_TLS_CA")
            .output()
            .unwrap()
    };
    let out = status(&["--tls-ca", &ca]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the CA the client says what it needs.
    let out = status(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-ca"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // The load generator reaches the same coordinator through the same CA.
    let out = support::nqueens()
        .args(["loadgen", "--coordinator", &https, "--token", "t0ken"])
        .args(["--tls-ca", &ca])
        .args(["--n", "12", "--workers", "2", "--rate", "0"])
        .args(["--warmup", "200ms", "--duration", "1s", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // (N = 12 has few jobs: the fleet may finish them during the warm-up.)
    assert_eq!(r["errors"], 0, "{r}");
    assert!(r["jobs_done"].as_u64() > Some(0), "{r}");
}

#[test]
fn issue_19_tls_init_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    tls_init(dir.path());
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    let names = ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"];
    let before: Vec<Vec<u8>> = names.iter().map(|n| read(n)).collect();

    let out = support::nqueens()
        .args(["tls", "init"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already exist") && err.contains("--force"),
        "{err}"
    );
    let after: Vec<Vec<u8>> = names.iter().map(|n| read(n)).collect();
    assert_eq!(before, after, "a refused tls init changed files");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);

    // --force makes a new CA and certificate, for the hosts given.
    let out = support::nqueens()
        .args([
            "tls",
            "init",
            "--force",
            "--host",
            "coordinator.example",
            "--host",
            "10.0.0.1",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("https://coordinator.example:7447"), "{said}");
    assert_ne!(read("ca.pem"), before[0]);
    assert_ne!(read("server-key.pem"), before[3]);
}

/// `nqueens ARGS... --json --coordinator ADDRESS`, parsed.
fn json_of(address: &str, args: &[&str]) -> serde_json::Value {
    let out = support::stdout_of(support::nqueens().args(args).args([
        "--json",
        "--coordinator",
        address,
    ]));
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn issue_19_runs_are_cancelled_paused_resumed_and_prioritised_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "60s");
    let address = serve.address.as_str();
    let first = submit_with(address, 14, "d4", &["--verify-fraction", "0"]);
    // The same plan again: a warning naming the run and what to do, and a second run all the same.
    let again = support::nqueens()
        .args([
            "submit",
            "14",
            "--verify-fraction",
            "0",
            "--json",
            "--coordinator",
            address,
        ])
        .output()
        .unwrap();
    assert!(again.status.success());
    let warning = String::from_utf8_lossy(&again.stderr);
    assert!(
        warning.contains(&format!("already has run {first}"))
            && warning.contains("--reuse")
            && warning.contains(&format!("nqueens cancel {first}")),
        "{warning}"
    );
    let second: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let second = second["run"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    let urgent = json_of(
        address,
        &["submit", "13", "--verify-fraction", "0", "--priority", "7"],
    );
    assert_eq!(urgent["priority"], 7);
    // Every job of this one is computed once, then waits for a second worker name.
    let verified = submit_with(address, 8, "d4", &["--verify-fraction", "1"]);

    assert_eq!(json_of(address, &["pause", &first])["state"], "paused");
    assert_eq!(
        json_of(address, &["priority", &second, "-3"])["priority"],
        -3
    );
    let cancelled = json_of(address, &["cancel", &second]);
    assert_eq!(cancelled["state"], "cancelled");
    let resumed =
        support::stdout_of(support::nqueens().args(["resume", &first, "--coordinator", address]));
    assert!(String::from_utf8_lossy(&resumed).contains(&format!("run {first}: N = 14 d4 running")));
    let unknown = support::nqueens()
        .args(["cancel", "999", "--coordinator", address])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown run"));

    let mut w = worker(address, dir.path(), "solo", &["--exit-when-idle"]);
    assert!(wait(&mut w, LIMIT, "worker").success());
    let runs = status_json(address);
    let by_id = |id: &str| runs.iter().find(|r| r["run"] == id).unwrap().clone();
    let (total14, _) = reference(14);
    let (total13, _) = reference(13);
    assert_eq!(by_id(&first)["state"], "done");
    assert_eq!(by_id(&first)["total"], total14.to_string());
    assert_eq!(
        by_id(urgent["run"].as_str().unwrap())["total"],
        total13.to_string()
    );
    let gone = by_id(&second);
    assert_eq!(
        (gone["state"].as_str(), gone["jobs_done"].as_u64()),
        (Some("cancelled"), Some(0))
    );
    // The highest priority went first.
    let log = std::fs::read_to_string(dir.path().join("solo.log")).unwrap();
    let first_lease = serve
        .log()
        .lines()
        .find(|l| l.contains("run finished"))
        .map(|l| support::log_field(l, "run"))
        .unwrap();
    assert_eq!(first_lease.as_deref(), urgent["run"].as_str(), "{log}");

    // The verified run's jobs, listed by key: all of them, then a truncated listing.
    let jobs_total = by_id(&verified)["jobs_total"].as_u64().unwrap();
    let listing = support::stdout_of(support::nqueens().args([
        "status",
        "--jobs",
        "verifying",
        "--run",
        &verified,
        "--coordinator",
        address,
    ]));
    let lines: Vec<String> = String::from_utf8(listing)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len() as u64, jobs_total, "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(&format!("run {verified} job "))
                && l.contains("verifying (results from solo)")),
        "{lines:?}"
    );
    let cut = support::nqueens()
        .args([
            "status",
            "--jobs",
            "verifying",
            "--limit",
            "2",
            "--json",
            "--coordinator",
            address,
        ])
        .output()
        .unwrap();
    assert!(cut.status.success());
    let cut_lines: Vec<serde_json::Value> = String::from_utf8(cut.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cut_lines.len(), 2);
    assert_eq!(cut_lines[0]["state"], "verifying");
    assert!(String::from_utf8_lossy(&cut.stderr).contains("truncated"));
    let failed = support::stdout_of(support::nqueens().args([
        "status",
        "--jobs",
        "failed",
        "--coordinator",
        address,
    ]));
    assert!(failed.is_empty());
    let bad = support::nqueens()
        .args(["status", "--jobs", "done", "--coordinator", address])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// A worker whose journal holds a result of a run its coordinator does not know (another coordinator
/// behind the same address, a data directory restored from an older backup) stops, naming the run, and
/// keeps the result journaled: it dropped it as refused, although the right coordinator would count
/// it. Found by a review, 2026-11-24.
#[test]
fn a_result_for_a_run_the_coordinator_does_not_know_stays_journaled_and_the_worker_stops() {
    a_foreign_result_stays_journaled("41", None);
}

/// The same where the coordinator has a run of that id, of another N (run ids start at 1 in every
/// store): the worker dropped the result, refused, though it belongs to another coordinator's run 1.
/// Found by a review, 2026-11-24.
#[test]
fn a_result_for_another_coordinators_run_of_the_same_id_stays_journaled() {
    a_foreign_result_stays_journaled("1", Some(9));
}

/// The same where the coordinator's run of that id has the same N and another plan (mirror, where the
/// result is of d4): the worker compared N only. Found by a review, 2026-11-24.
#[test]
fn a_result_for_another_coordinators_run_of_the_same_n_and_another_plan_stays_journaled() {
    a_foreign_result_stays_journaled_beside("1", Some((8, "mirror")));
}

/// A journaled N = 8 d4 result of run `run`, with a coordinator holding a run of N = `coordinator_n`
/// (if any): the worker stops, naming the run, and the result stays journaled.
fn a_foreign_result_stays_journaled(run: &str, coordinator_n: Option<u32>) {
    a_foreign_result_stays_journaled_beside(run, coordinator_n.map(|n| (n, "d4")));
}

/// [`a_foreign_result_stays_journaled`] with the coordinator's run of N and strategy `coordinator`.
fn a_foreign_result_stays_journaled_beside(run: &str, coordinator: Option<(u32, &str)>) {
    use nqueens_common::{Plan, Strategy};
    use nqueens_worker::journal::{Finished, Journal};
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("store"), "127.0.0.1:0", "10s");
    if let Some((n, strategy)) = coordinator {
        assert_eq!(support::submit(&serve.address, n, strategy), run);
    }
    let plan = Plan::new(8, Strategy::D4).unwrap();
    let key = plan.jobs().next().unwrap();
    let finished = Finished::computed(plan, &key, 7, 1, run).unwrap();
    let journal = dir.path().join("w.journal");
    Journal::open(&journal)
        .unwrap()
        .record(std::slice::from_ref(&finished))
        .unwrap();
    let mut w = worker(&serve.address, dir.path(), "w", &["--exit-when-idle"]);
    let status = wait(&mut w, LIMIT, "worker");
    let log = std::fs::read_to_string(dir.path().join("w.log")).unwrap();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(&format!("run {run:?}")) || log.contains(&format!("run {run}")),
        "{log}"
    );
    assert_eq!(Journal::open(&journal).unwrap().pending(), vec![finished]);
}

/// The README's cluster quick start, pasted as written into a shell on loopback (issue 40): the block is
/// read from README.md itself, with the coordinator's host name replaced by `localhost` and its port by a
/// free one. `serve` and the workers, which stay in front on their own machines, run in the background
/// here; `status --watch` must end by itself, its last run line `done` with the exact total.
#[test]
fn issue_40_the_readmes_cluster_quick_start_works_when_pasted() {
    let readme = include_str!("../README.md");
    let section = &readme[readme
        .find("\n## A cluster in")
        .expect("the README has its quick start")..];
    let open = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let block = &section[open..open + section[open..].find("```").expect("closed")];
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut script = String::from("set -eu\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n");
    let mut commands = 0;
    for line in block.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The environment the operator's shell keeps is not a command.
        commands += usize::from(!line.starts_with("export "));
        let line = line
            .replace("coordinator.example", "localhost")
            .replace("7447", &port);
        if line.starts_with("nqueens serve") {
            script += &format!(
                "{line} > serve.log 2>&1 &\n\
                 for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done\n"
            );
        } else if line.starts_with("nqueens worker") {
            script += &format!("{line} >> workers.log 2>&1 &\n");
        } else {
            script += &line;
            script += "\n";
        }
    }
    assert!(
        commands <= 9,
        "the quick start has {commands} commands, the README says nine"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut child = bash_in(dir.path(), &script);
    let status = wait(&mut child, Duration::from_secs(180), "the quick start");
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let logs = ["serve.log", "workers.log"]
        .map(|f| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default());
    assert!(
        status.success(),
        "{script}\nstdout:\n{stdout}\nstderr:\n{stderr}\n{}\n{}",
        logs[0],
        logs[1]
    );
    let last = stdout
        .lines()
        .rfind(|l| l.starts_with("run "))
        .unwrap_or_default();
    assert!(
        last.contains(" done,") && last.contains(&format!("total {}", reference(16).0)),
        "{stdout}"
    );
}

/// TLS failures a worker cannot get past alone stop it with one line that names what to fix, as a
/// wrong token does: a coordinator certificate that does not chain to `--tls-ca`, and an address
/// naming a host the certificate was not made for. Before, the worker retried for ever, warning
/// `coordinator unreachable ... BadSignature` (issue 40).
#[test]
fn issue_40_a_worker_stops_on_a_certificate_it_cannot_trust_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, pem_key) = self_signed(dir.path(), "");
    let (wrong, _) = self_signed(dir.path(), "other-");
    let serve = Serve::start_with(
        &dir.path().join("store"),
        "127.0.0.1:0",
        "10s",
        &[
            "--token",
            "t0ken",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            pem_key.to_str().unwrap(),
        ],
    );
    let https = serve.address.replace("http://", "https://");
    let by_name = https.replace("127.0.0.1", "localhost");
    for (address, ca, fix) in [
        (&https, &wrong, "--tls-ca"),
        (&by_name, &cert, "--coordinator"),
    ] {
        let mut w = support::nqueens()
            .args(["worker", "--coordinator", address, "--token", "t0ken"])
            .arg("--tls-ca")
            .arg(ca)
            .arg("--journal")
            .arg(dir.path().join("w.journal"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait(
            &mut w,
            LIMIT,
            "a worker facing a certificate it cannot trust",
        );
        let mut err = String::new();
        std::io::Read::read_to_string(&mut w.stderr.take().unwrap(), &mut err).unwrap();
        assert!(!status.success(), "{err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: cannot trust the coordinator: TLS: invalid peer certificate")
                && last.contains(fix),
            "{err}"
        );
    }
}

/// `serve` refuses a certificate that has expired, naming the date in UTC and how to renew it; and it
/// finds a port in use before it opens (or creates) the store (issue 40).
#[test]
fn issue_40_serve_refuses_an_expired_certificate_and_a_busy_port_before_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let out = support::nqueens()
        .args(["serve", "--listen", "127.0.0.1:0", "--token", "t0ken"])
        .arg("--data")
        .arg(dir.path().join("expired-store"))
        .arg("--tls-cert")
        .arg(&cert_path)
        .arg("--tls-key")
        .arg(&key_path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("expired on 2021-01-01T00:00:00Z") && err.contains("tls init"),
        "{err}"
    );
    assert!(!dir.path().join("expired-store").exists(), "{err}");
    // A port another process holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let started = std::time::Instant::now();
    let out = support::nqueens()
        .args(["serve", "--listen", &addr])
        .arg("--data")
        .arg(dir.path().join("busy-store"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("cannot listen on {addr} (--listen)")),
        "{err}"
    );
    assert!(!dir.path().join("busy-store").exists(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Issue 38, end to end with real processes: a record run of N = 13 on a coordinator with an operator
/// token, computed by two workers of two credentials and a third worker under the operator's token
/// (which gets none of it). The run ends done with every job confirmed by a second credential; the
/// stopped coordinator's store passes the audit as a record; its certificate names two identities on
/// every line and passes a spot check of every job, from another directory.
#[test]
fn issue_38_a_record_run_is_audited_certified_and_spot_checked() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = format!(
        r#"set -eu
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > operator.token)
nqueens serve --listen 127.0.0.1:{port} --data data --token-file operator.token > serve.log 2>&1 &
serve=$!
for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done
export NQUEENS_COORDINATOR=http://127.0.0.1:{port} NQUEENS_TOKEN_FILE=operator.token
nqueens credential issue node-1 --out node-1.token
nqueens credential issue node-2 --out node-2.token
nqueens submit 13 --record > submit.txt
nqueens worker --name operator-side --threads 1 > op.log 2>&1 &
nqueens worker --name node-1 --threads 1 --token-file node-1.token > w1.log 2>&1 &
nqueens worker --name node-2 --threads 1 --token-file node-2.token > w2.log 2>&1 &
nqueens status --watch --interval 250ms > watch.txt
for i in $(seq 100); do nqueens status --run 1 > status.txt; grep -q 'certificate root' status.txt && break; sleep 0.1; done
nqueens status --workers --json > workers.json
kill $(jobs -p); wait $serve || true
nqueens audit --data data > audit.txt
nqueens certificate 1 --data data --out n13.cert > cert.txt
mkdir clean; cp n13.cert clean/; cd clean
NQUEENS_DATA=/nonexistent nqueens spot-check n13.cert --sample 1000 > ../spot.txt
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let logs = run_script(
        dir.path(),
        &script,
        "the record run",
        &[
            "serve.log",
            "w1.log",
            "w2.log",
            "op.log",
            "watch.txt",
            "status.txt",
            "audit.txt",
            "cert.txt",
            "spot.txt",
        ],
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    let all = || logs.clone();
    let (total, unique) = reference(13);
    let st = read("status.txt");
    assert!(
        st.contains(" done,")
            && st.contains(&format!("total {total}"))
            && st.contains("record: 39/39 jobs with two independent results"),
        "{}",
        all()
    );
    // The operator's token's worker computed nothing of it.
    let workers = read("workers.json");
    let op = workers
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|w| w["name"] == "operator-side")
        .unwrap_or_else(|| panic!("the operator-side worker asked for jobs: {workers}"));
    assert_eq!(op["jobs_done"], 0, "{workers}");
    assert!(
        read("audit.txt")
            .contains("record run: each of the 39 results confirmed by a second identity"),
        "{}",
        all()
    );
    let cert = std::fs::read_to_string(dir.path().join("n13.cert")).unwrap();
    let header: serde_json::Value = serde_json::from_str(cert.lines().next().unwrap()).unwrap();
    assert_eq!(header["record"], true);
    assert_eq!(header["total"], total.to_string());
    assert_eq!(header["unique"], unique.to_string());
    assert!(
        cert.lines()
            .skip(1)
            .all(|l| l.rsplit(' ').next().unwrap().contains(',')),
        "{cert}"
    );
    // The root the coordinator computed when the run finished is the certificate's.
    let root = header["root"].as_str().unwrap();
    assert!(
        st.contains(&format!("certificate root {root}")),
        "{}",
        all()
    );
    assert!(read("serve.log").contains(root), "{}", all());
    let spot = read("spot.txt");
    assert!(
        spot.contains("record run") && spot.contains("every job recomputed: all agree"),
        "{}",
        all()
    );
}

/// Issue 37: workers known by client certificates signed by the `tls init` CA, end to end with real
/// processes: `tls worker` signs one per identity (refusing a second of the same name and a name that
/// is no identity); `serve --tls-client-ca` takes them; two workers with nothing but their certificate
/// (no token) finish a run that verifies every job, as two identities; a revoked identity's
/// certificate is refused at once.
#[test]
fn issue_37_workers_known_by_their_client_certificates() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = format!(
        r#"set -eu
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > operator.token)
nqueens tls init tls --host 127.0.0.1 > init.txt
nqueens tls worker tls node-1 > node-1.txt
nqueens tls worker tls node-2 > node-2.txt
if nqueens tls worker tls node-1 2> twice.txt; then exit 1; fi
if nqueens tls worker tls 'no/identity' 2> bad.txt; then exit 1; fi
stat -c %a tls/workers/node-1-key.pem > key-mode.txt
nqueens serve --listen 127.0.0.1:{port} --data data --token-file operator.token \
  --tls-cert tls/server.pem --tls-key tls/server-key.pem --tls-client-ca tls/ca.pem > serve.log 2>&1 &
serve=$!
for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done
export NQUEENS_COORDINATOR=https://127.0.0.1:{port} NQUEENS_TLS_CA=tls/ca.pem
op() {{ NQUEENS_TOKEN_FILE=operator.token nqueens "$@"; }}
op credential issue node-1 > /dev/null
op credential issue node-2 > /dev/null
op submit 10 --verify-fraction 1 > submit.txt
nqueens worker --name a --threads 1 --client-cert tls/workers/node-1.pem --client-key tls/workers/node-1-key.pem > w1.log 2>&1 &
nqueens worker --name b --threads 1 --client-cert tls/workers/node-2.pem --client-key tls/workers/node-2-key.pem > w2.log 2>&1 &
op status --watch --interval 250ms > watch.txt
op status --run 1 > status.txt
op status --workers --json > workers.json
op credential revoke node-2 > /dev/null
if nqueens status --client-cert tls/workers/node-2.pem --client-key tls/workers/node-2-key.pem 2> revoked.txt; then exit 1; fi
nqueens status --run 1 --client-cert tls/workers/node-1.pem --client-key tls/workers/node-1-key.pem > node-1-status.txt
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let logs = run_script(
        dir.path(),
        &script,
        "the certificate run",
        &[
            "serve.log",
            "w1.log",
            "w2.log",
            "watch.txt",
            "status.txt",
            "twice.txt",
            "bad.txt",
            "revoked.txt",
        ],
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    let all = || logs.clone();
    assert!(read("twice.txt").contains("already exist"), "{}", all());
    assert!(
        read("bad.txt").contains("not a worker identity"),
        "{}",
        all()
    );
    assert_eq!(read("key-mode.txt").trim(), "600");
    let (total, _) = reference(10);
    let st = read("status.txt");
    assert!(
        st.contains(" done,") && st.contains(&format!("total {total}")),
        "{}",
        all()
    );
    // Two identities, each known by its certificate's name, did the work.
    let workers: Vec<serde_json::Value> = read("workers.json")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for name in ["node-1", "node-2"] {
        let w = workers
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("no worker {name}: {workers:?}"));
        assert!(
            w["worker_id"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{name}/")),
            "{w}"
        );
        assert!(w["jobs_done"].as_u64().unwrap() > 0, "{w}");
    }
    let revoked = read("revoked.txt");
    assert!(
        revoked.contains("revoked") && !revoked.contains("--token"),
        "{}",
        all()
    );
    assert!(read("node-1-status.txt").contains("run 1:"), "{}", all());
}

/// Runs `script` in bash in `dir` ([`bash_in`]) for at most three minutes (`what` names it) and asserts
/// that it succeeded; a failure shows its output and the files `logs` of `dir`. Returns those files'
/// text, for the messages of later assertions.
fn run_script(dir: &std::path::Path, script: &str, what: &str, logs: &[&str]) -> String {
    let mut child = bash_in(dir, script);
    let status = wait(&mut child, Duration::from_secs(180), what);
    let out = child.wait_with_output().unwrap();
    let all = logs
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            format!("--- {f}\n{text}")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        status.success(),
        "{}\n{}\n{all}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    all
}

/// Starts `script` in bash in `dir`, the built binaries first on PATH, a default data directory in
/// `dir`, and no coordinator, token or CA from this environment; its output piped.
fn bash_in(dir: &std::path::Path, script: &str) -> std::process::Child {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_nqueens"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env("NQUEENS_DATA", dir.join("default-data"))
        .env_remove("NQUEENS_TOKEN")
        .env_remove("NQUEENS_TOKEN_FILE")
        .env_remove("NQUEENS_COORDINATOR")
        .env_remove("NQUEENS_TLS_CA")
        .env_remove("NQUEENS_CLIENT_CERT")
        .env_remove("NQUEENS_CLIENT_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}
