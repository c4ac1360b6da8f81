//! Scale (issue 7): a record-size run (N = 27, its full job list) is created on a fresh coordinator and
//! leased from at once, and the load generator's simulated fleet gets exactly what it was told: every
//! result acknowledged is in the run, and stays there through a SIGKILL of the coordinator. The figures
//! themselves (results per second, latency) are a benchmark (coordinator/benches/loadgen.sh), not a test.

mod support;

use support::{nqueens, stdout_of, Serve};

fn loadgen(args: &[&str]) -> serde_json::Value {
    let out = stdout_of(nqueens().arg("loadgen").args(args).arg("--json"));
    serde_json::from_slice(&out).expect("one JSON object on stdout")
}

fn as_u64(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn issue_7_a_record_size_run_is_leased_from_at_once_by_a_simulated_fleet() {
    // An in-process coordinator on a fresh store: N = 27 with its full job list (17.5M jobs).
    let r = loadgen(&[
        "--n",
        "27",
        "--workers",
        "50",
        "--rate",
        "1000",
        "--warmup",
        "500ms",
        "--duration",
        "2s",
    ]);
    let plan: serde_json::Value =
        serde_json::from_slice(&stdout_of(nqueens().args(["plan", "27", "--json"]))).unwrap();
    assert_eq!(r["jobs_total"], plan["jobs"], "{r}");
    assert!(as_u64(&r["jobs_total"]) > 17_000_000, "{r}");
    assert_eq!(r["n"], 27);
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["lease_with_report"], false);
    assert!(as_u64(&r["lease"]["calls"]) > 0, "{r}");
    // Leasing started at once: in two seconds at 1,000 offered results/s, most of them were committed.
    let committed = as_u64(&r["committed"]);
    assert!(committed > 1000, "{r}");
    assert!(as_u64(&r["report"]["calls"]) >= committed / 2, "{r}");
    assert!(as_u64(&r["jobs_done"]) >= committed / 2, "{r}");
    assert!(as_u64(&r["store_bytes"]) > 0, "{r}");
}

#[test]
fn issue_7_what_the_load_generator_was_acknowledged_survives_a_sigkill_of_the_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let mut serve = Serve::start(&data, "127.0.0.1:0", "60s");
    // Unpaced, leasing with each report, on a run the fleet finishes and beyond.
    let r = loadgen(&[
        "--coordinator",
        &serve.address,
        "--n",
        "14",
        "--workers",
        "20",
        "--rate",
        "0",
        "--lease-with-report",
        "--warmup",
        "200ms",
        "--duration",
        "2s",
    ]);
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["lease_with_report"], true);
    let run = r["run"].as_str().unwrap().to_string();
    let jobs_done = as_u64(&r["jobs_done"]);
    assert!(jobs_done > 0, "{r}");
    // The load generator checked that the run holds exactly what it was acknowledged; a second client
    // agrees, and so does the store after a SIGKILL and a restart.
    let seen = |address: &str| {
        support::status_json(address)
            .into_iter()
            .find(|s| s["run"] == run.as_str())
            .expect("the load generator's run")
    };
    let before = seen(&serve.address);
    assert_eq!(as_u64(&before["jobs_done"]), jobs_done);
    assert_eq!(before["total"], r["total"]);
    serve.kill();
    let serve = Serve::start(&data, "127.0.0.1:0", "60s");
    let after = seen(&serve.address);
    assert_eq!(as_u64(&after["jobs_done"]), jobs_done);
    assert_eq!(after["total"], r["total"]);
}

#[test]
fn issue_7_bad_load_settings_exit_2() {
    for args in [
        &["--workers", "0"][..],
        &["--rate=-5"][..],
        &["--batch", "0"][..],
        &["--n", "40"][..],
    ] {
        let out = nqueens()
            .arg("loadgen")
            .args(args)
            .args(["--duration", "1s"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}
