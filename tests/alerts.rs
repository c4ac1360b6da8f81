//! The Prometheus alert rules shipped in `deploy/prometheus/alerts.yml` (issue 19): valid for
//! `promtool check rules` (reported ignored where promtool is missing, failed under CI), and asking only
//! for metrics a live coordinator serves (or that Prometheus and node_exporter provide).

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};
use support::tools::needs;
use support::{http_get, submit_with, Serve};

/// Names the rules may use that the coordinator does not serve: Prometheus's own `up`, and
/// node_exporter's filesystem metrics.
const EXTERNAL: [&str; 4] = [
    "up",
    "node_filesystem_avail_bytes",
    "node_filesystem_size_bytes",
    "node_filesystem_readonly",
];

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        needs(
            "issue_19_alert_rules_pass_promtool_check_rules",
            &["promtool"],
            false,
            "apt-get install prometheus",
            promtool_check,
        ),
        needs(
            "alert_rules_fire_on_their_series_only",
            &["promtool"],
            false,
            "apt-get install prometheus",
            promtool_test,
        ),
        Trial::test(
            "issue_19_alert_rules_ask_only_for_metrics_the_coordinator_serves",
            served_names,
        ),
        Trial::test(
            "metric_names_are_told_from_functions_labels_and_keywords",
            names_parse,
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn rules() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/alerts.yml")
}

fn promtool_check() -> Result<(), Failed> {
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules())
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("promtool check rules failed:\n{text}").into());
    }
    if !text.contains("SUCCESS: 9 rules found") {
        return Err(format!("expected the 9 rules:\n{text}").into());
    }
    Ok(())
}

/// `promtool test rules` over `deploy/prometheus/alerts.test.yml`: the rules fire on the series they
/// are for, and only on those (a paused or cancelled run is not stalled; an inconsistent run alerts).
fn promtool_test() -> Result<(), Failed> {
    let tests = rules().with_file_name("alerts.test.yml");
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&tests)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "promtool test rules failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

/// The expressions of the rules (one line each).
fn exprs(yaml: &str) -> Vec<String> {
    yaml.lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .map(|e| e.trim().to_string())
        .collect()
}

/// The metric names in an expression: identifiers followed by `{`, or standing alone, that are not
/// PromQL keywords, functions, label names or strings.
fn metric_names(expr: &str) -> Vec<String> {
    const NOT_METRICS: [&str; 4] = ["and", "or", "unless", "bool"];
    const LABEL_LISTS: [&str; 6] = [
        "on",
        "ignoring",
        "by",
        "without",
        "group_left",
        "group_right",
    ];
    let mut names = Vec::new();
    let mut rest = expr;
    let mut in_labels = false;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            let end = rest[1..].find('"').map_or(rest.len(), |i| i + 2);
            rest = &rest[end..];
        } else if c == '{' || c == '}' {
            in_labels = c == '{';
            rest = &rest[1..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            let after = rest[end..].trim_start();
            let called = after.starts_with('(');
            if !in_labels && !called && !NOT_METRICS.contains(&word) {
                names.push(word.to_string());
            }
            rest = &rest[end..];
            if called && LABEL_LISTS.contains(&word) {
                // `on(run)`: label names, not metrics.
                let close = rest.find(')').map_or(rest.len(), |i| i + 1);
                rest = &rest[close..];
            }
        } else if c == '[' {
            // A range: [30m].
            let end = rest.find(']').map_or(rest.len(), |i| i + 1);
            rest = &rest[end..];
        } else {
            rest = &rest[c.len_utf8()..];
        }
    }
    names
}

fn served_names() -> Result<(), Failed> {
    let yaml = std::fs::read_to_string(rules())?;
    let exprs = exprs(&yaml);
    let alerts = yaml
        .lines()
        .filter(|l| l.trim().starts_with("- alert:"))
        .count();
    if alerts < 6 || exprs.len() != alerts {
        return Err(format!("{alerts} alerts but {} one-line exprs", exprs.len()).into());
    }
    let dir = tempfile::tempdir()?;
    let serve = Serve::start_with(
        &dir.path().join("store"),
        "127.0.0.1:0",
        "10s",
        &["--metrics-listen", "127.0.0.1:0"],
    );
    // A run, so that the per-run families have samples.
    submit_with(&serve.address, 8, "d4", &["--verify-fraction", "0"]);
    let (code, metrics) = http_get(serve.http.as_deref().ok_or("no HTTP listener")?, "/metrics");
    if code != 200 {
        return Err(format!("/metrics answered {code}").into());
    }
    let served: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut wanted = BTreeSet::new();
    for expr in &exprs {
        let names = metric_names(expr);
        if names.is_empty() {
            return Err(format!("no metric in {expr}").into());
        }
        wanted.extend(names);
    }
    for name in &wanted {
        if !served.contains(name.as_str()) && !EXTERNAL.contains(&name.as_str()) {
            return Err(format!(
                "the rules ask for {name}, which the coordinator does not serve (served: {served:?})"
            )
            .into());
        }
    }
    for must in [
        "nqueens_jobs",
        "nqueens_workers",
        "nqueens_store_degraded",
        "nqueens_run_state",
    ] {
        if !wanted.contains(must) {
            return Err(format!("no rule uses {must}").into());
        }
    }
    if served.contains("nqueens_store_degraded") && !metrics.contains("nqueens_store_degraded 0") {
        return Err(format!("a healthy store reads as degraded:\n{metrics}").into());
    }
    Ok(())
}

fn names_parse() -> Result<(), Failed> {
    let got = metric_names(
        r#"changes(nqueens_jobs{state="done"}[30m]) == 0 and on(run) nqueens_run_done == 0"#,
    );
    if got != ["nqueens_jobs", "nqueens_run_done"] {
        return Err(format!("{got:?}").into());
    }
    let got = metric_names(r#"up{job="nqueens-coordinator"} == 0"#);
    if got != ["up"] {
        return Err(format!("{got:?}").into());
    }
    Ok(())
}
