//! End-to-end tests of the `nqueens` binary: real processes, real output, checked against the published
//! reference counts in `shared/reference/`.

use std::process::{Command, Output};

fn nqueens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nqueens"))
        .args(args)
        .output()
        .expect("run nqueens")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = nqueens(args);
    assert!(
        out.status.success(),
        "nqueens {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

#[test]
fn count_16_matches_the_reference_with_both_strategies() {
    let d4 = json(&["count", "16", "--json"]);
    assert_eq!(d4["n"], 16);
    assert_eq!(d4["strategy"], "d4");
    assert_eq!(d4["total"], "14772512");
    assert_eq!(d4["unique"], "1846955");
    assert!(d4["seconds"].as_f64().unwrap() > 0.0);
    let mirror = json(&[
        "count",
        "13",
        "--strategy",
        "mirror",
        "--threads",
        "2",
        "--json",
    ]);
    assert_eq!(mirror["total"], "73712");
    assert!(mirror.get("unique").is_none());
}

#[test]
fn plan_and_count_report_the_same_partition() {
    for strategy in ["d4", "mirror"] {
        let plan = json(&["plan", "12", "--strategy", strategy, "--json"]);
        let count = json(&["count", "12", "--strategy", strategy, "--json"]);
        assert_eq!(plan["subproblems"], count["subproblems"], "{strategy}");
        assert_eq!(plan["jobs"], count["jobs"], "{strategy}");
    }
}

#[test]
fn plan_27_and_28_are_sized_for_a_cluster() {
    for n in ["27", "28"] {
        let plan = json(&["plan", n, "--json"]);
        let jobs = plan["jobs"].as_u64().unwrap();
        assert!(
            (100_000..1_000_000_000).contains(&jobs),
            "N = {n}: {jobs} jobs"
        );
    }
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    for args in [
        &["count", "0"][..],
        &["count", "33"],
        &["plan", "40", "--json"],
        &["count", "8", "--strategy", "spiral"],
    ] {
        let out = nqueens(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn text_output_names_total_and_unique() {
    let out = nqueens(&["count", "8"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "N = 8: 92 solutions, 12 unique"
    );
}
