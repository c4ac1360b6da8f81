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

/// `n` with its digits grouped by thousands, as the page shows it.
fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
    // A small run first, finished: the page folds it to one line, below the running one.
    let small = submit_with(&serve.address, 8, "d4", &["--verify-fraction", "0"]);
    let mut first = worker(
        &serve.address,
        dir.path(),
        "first",
        &["--run", &small, "--exit-when-idle"],
    );
    assert!(wait(&mut first, LIMIT, "first").success());
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
    // The running run first; the finished one folded after it, with its total, digits grouped.
    let (running_at, folded_at) = (
        dom.find(&format!("id=\"run-{run}\""))
            .expect("the running run"),
        dom.find(&format!("id=\"run-{small}-folded\""))
            .expect("the finished run, folded"),
    );
    assert!(running_at < folded_at, "{dom}");
    let folded = &dom[folded_at..];
    let folded = &folded[..folded.find("</summary>").unwrap()];
    assert!(
        !folded[..folded.find('>').unwrap()].contains(" open")
            && folded.contains(&format!("done, total {}", grouped(reference(8).0))),
        "{folded}"
    );
    assert_eq!(
        text(&dom, "percent"),
        Some(format!("{:.2}%", 100.0 * done as f64 / total as f64))
    );
    assert_eq!(
        text(&dom, "total"),
        Some(grouped(known["total"].as_str().unwrap().parse().unwrap()))
    );
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
    assert_eq!(text(&dom, "total"), Some(grouped(total16)));
    assert_eq!(text(&dom, "unique"), Some(grouped(unique16)));
    // A picture for people to look at (kept under the target directory; the note of issue 40 says
    // what it showed): the page as a browser draws it.
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    support::chromium_screenshot(&page, &dir.path().join("chromium-3"), &shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
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
