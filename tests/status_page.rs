//! The status page in headless Chromium (issue 5), against a live coordinator part-way through a count
//! and at its end. Chromium is a tool a developer's machine may lack: without it the test is reported
//! *ignored*, saying how to install it; under CI (`CI` set; `.ci/run` installs it) it fails instead.

mod support;

use std::time::Duration;

use libtest_mimic::{Arguments, Failed};
use support::tools::needs;
use support::{
    chromium_dom, element_text, nqueens, reference, stdout_of, submit_with, wait, worker, Serve,
};

const LIMIT: Duration = Duration::from_secs(180);

fn main() {
    let args = Arguments::from_args();
    let trials = vec![needs(
        "issue_5_the_status_page_shows_a_runs_progress_and_final_total_in_chromium",
        &["chromium"],
        false,
        "apt-get install chromium",
        status_page,
    )];
    libtest_mimic::run(&args, trials).exit();
}

/// `nqueens status --json --run RUN`.
fn status_of(address: &str, run: &str) -> serde_json::Value {
    let out =
        stdout_of(nqueens().args(["status", "--json", "--run", run, "--coordinator", address]));
    serde_json::from_slice(&out).unwrap()
}

fn status_page() -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    // After the first worker dies no job is done until the second starts (the dead worker's lease
    // expires meanwhile, which the page's checked numbers do not depend on).
    let serve = Serve::start_with(
        &dir.path().join("store"),
        "127.0.0.1:0",
        "2s",
        &["--metrics-listen", "127.0.0.1:0"],
    );
    let page = format!(
        "http://{}/",
        serve.http.as_deref().expect("an HTTP listener")
    );
    let run = submit_with(&serve.address, 16, "d4", &["--verify-fraction", "0"]);
    let mut dies = worker(
        &serve.address,
        dir.path(),
        "dies",
        &["--fault-die-after", "5"],
    );
    assert_eq!(wait(&mut dies, LIMIT, "dies").code(), Some(86));

    // Part-way: the page shows what the coordinator's store holds, as `status` prints it.
    let known = status_of(&serve.address, &run);
    let (done, total) = (
        known["jobs_done"].as_u64().unwrap(),
        known["jobs_total"].as_u64().unwrap(),
    );
    assert!(done >= 1 && done < total, "{known}");
    let dom = chromium_dom(&page, &dir.path().join("chromium-1"), 3_000);
    let text = |dom: &str, id: &str| element_text(dom, &format!("run-{run}-{id}"));
    assert_eq!(text(&dom, "state").as_deref(), Some("running"), "{dom}");
    assert_eq!(text(&dom, "jobs"), Some(format!("{done} / {total}")));
    assert_eq!(
        text(&dom, "percent"),
        Some(format!("{:.2}%", 100.0 * done as f64 / total as f64))
    );
    assert_eq!(text(&dom, "total").as_deref(), known["total"].as_str());
    assert_eq!(text(&dom, "unique"), None, "no unique count before the end");
    assert!(text(&dom, "eta").is_some_and(|e| e != "-"), "{dom}");
    assert!(dom.contains("data-worker=\"dies\""), "{dom}");
    assert_eq!(element_text(&dom, "error").as_deref(), Some(""), "{dom}");

    let mut rescuer = worker(&serve.address, dir.path(), "rescuer", &["--exit-when-idle"]);
    assert!(wait(&mut rescuer, LIMIT, "rescuer").success());
    let dom = chromium_dom(&page, &dir.path().join("chromium-2"), 3_000);
    let (total16, unique16) = reference(16);
    assert_eq!(text(&dom, "state").as_deref(), Some("done"), "{dom}");
    assert_eq!(text(&dom, "jobs"), Some(format!("{total} / {total}")));
    assert_eq!(text(&dom, "percent").as_deref(), Some("100.00%"));
    assert_eq!(text(&dom, "total"), Some(total16.to_string()));
    assert_eq!(text(&dom, "unique"), Some(unique16.to_string()));
    assert_eq!(text(&dom, "eta").as_deref(), Some("-"));
    let row = &dom[dom
        .find("data-worker=\"rescuer\"")
        .expect("the rescuer's row")..];
    assert!(
        row[..row.find("</tr>").unwrap()].contains(">left<"),
        "{row}"
    );
    Ok(())
}
