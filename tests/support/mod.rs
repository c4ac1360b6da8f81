//! Helpers of the end-to-end tests: the `nqueens` binary as real processes (coordinator, workers), a
//! gRPC status probe, and the published reference counts.

#![allow(dead_code)]

pub mod tools;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use nqueens_proto as proto;

/// The published totals and unique counts (OEIS A000170, A002562) for N = 1..=27.
pub fn reference(n: u32) -> (u128, u128) {
    let table = include_str!("../../common/tests/data/solution-counts.tsv");
    table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|f| f[0] == n.to_string())
        .map(|f| (f[1].parse().unwrap(), f[2].parse().unwrap()))
        .expect("N in the reference table")
}

/// The `nqueens` binary.
pub fn nqueens() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nqueens"));
    // GPU calibrations are kept under the build's directory, never the user's.
    command.env("NQUEENS_CACHE", cache());
    command
}

/// The directory of GPU calibrations kept by the tests' commands, under the build's own directory.
fn cache() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpu-calibrations")
}

/// Runs a command to completion and returns its stdout, failing with its stderr if it did not succeed.
pub fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("run the command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A coordinator process (`nqueens serve`) with its log collected; killed when dropped.
pub struct Serve {
    child: Child,
    pub address: String,
    /// `host:port` of the HTTP listener (metrics, status page), when started with --metrics-listen.
    pub http: Option<String>,
    /// `host:port` of the probe listener, when started with --health-listen.
    pub health: Option<String>,
    pub log: Arc<Mutex<String>>,
}

/// The value of `field` in a log line, text (`field=value`) or JSON (`"field":"value"`).
pub fn log_field(line: &str, field: &str) -> Option<String> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        return v
            .get(field)
            .map(|f| f.as_str().map_or(f.to_string(), str::to_string));
    }
    let value = line.split(&format!(" {field}=")).nth(1)?;
    Some(value.split(' ').next()?.trim_matches('"').to_string())
}

impl Serve {
    /// Starts `nqueens serve` on `listen` over `data` and waits until it listens.
    pub fn start(data: &Path, listen: &str, lease_timeout: &str) -> Serve {
        Serve::start_with(data, listen, lease_timeout, &[])
    }

    /// The same, with more `serve` arguments.
    pub fn start_with(data: &Path, listen: &str, lease_timeout: &str, extra: &[&str]) -> Serve {
        Serve::spawn(nqueens(), data, listen, lease_timeout, extra)
    }

    /// The same through `program`: `nqueens()`, or a command that runs it elsewhere (in a network
    /// namespace: `ip netns exec NS nqueens`).
    pub fn spawn(
        mut program: Command,
        data: &Path,
        listen: &str,
        lease_timeout: &str,
        extra: &[&str],
    ) -> Serve {
        let mut child = program
            .args([
                "serve",
                "--listen",
                listen,
                "--lease-timeout",
                lease_timeout,
            ])
            .args(["--progress-interval", "1s"])
            .args(extra)
            .arg("--data")
            .arg(data)
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start nqueens serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("coordinator listening") {
                    let addr = log_field(&line, "addr").unwrap();
                    let http = log_field(&line, "http").filter(|h| h != "-");
                    let health = log_field(&line, "health").filter(|h| h != "-");
                    let _ = tx.send((addr, http, health));
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let (address, http, health) = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok((a, http, health)) => (format!("http://{a}"), http, health),
            Err(_) => panic!("coordinator did not start: {}", log.lock().unwrap()),
        };
        Serve {
            child,
            address,
            http,
            health,
            log,
        }
    }

    /// The `host:port` it listens on.
    pub fn listen(&self) -> &str {
        self.address.trim_start_matches("http://")
    }

    /// Kills it with SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Stops it with SIGTERM and waits for a clean exit.
    pub fn stop(&mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = wait(&mut self.child, Duration::from_secs(30), "coordinator");
        assert!(status.success(), "coordinator exit: {status:?}");
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker process (`nqueens worker`), logging to `dir/NAME.log`.
pub fn worker(address: &str, dir: &Path, name: &str, extra: &[&str]) -> Child {
    worker_logging(address, dir, name, extra, "info")
}

/// A worker process logging at `rust_log` (a `RUST_LOG` filter) to `dir/NAME.log`.
pub fn worker_logging(
    address: &str,
    dir: &Path,
    name: &str,
    extra: &[&str],
    rust_log: &str,
) -> Child {
    worker_via(nqueens(), address, dir, name, extra, rust_log)
}

/// A worker process started through `program` (see [`Serve::spawn`]), logging to `dir/NAME.log`.
pub fn worker_via(
    mut program: Command,
    address: &str,
    dir: &Path,
    name: &str,
    extra: &[&str],
    rust_log: &str,
) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    program
        .args([
            "worker",
            "--coordinator",
            address,
            "--threads",
            "1",
            "--name",
            name,
        ])
        .arg("--journal")
        .arg(dir.join(format!("{name}.journal")))
        .args(extra)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start nqueens worker")
}

/// Waits for a process to exit, killing it and failing after `limit`.
pub fn wait(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Creates a run through `nqueens submit --json` (the coordinator's default verify fraction); returns
/// its id.
pub fn submit(address: &str, n: u32, strategy: &str) -> String {
    submit_with(address, n, strategy, &[])
}

/// Creates a run through `nqueens submit --json ARGS...`; returns its id.
pub fn submit_with(address: &str, n: u32, strategy: &str, extra: &[&str]) -> String {
    let out = stdout_of(
        nqueens()
            .args([
                "submit",
                &n.to_string(),
                "--strategy",
                strategy,
                "--json",
                "--coordinator",
                address,
            ])
            .args(extra),
    );
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["n"], n);
    assert_eq!(v["state"], "running");
    v["run"].as_str().unwrap().to_string()
}

/// `nqueens status --json` for every run.
pub fn status_json(address: &str) -> Vec<serde_json::Value> {
    let out = stdout_of(nqueens().args(["status", "--json", "--coordinator", address]));
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A run's status over gRPC; `None` while the coordinator is unreachable.
pub fn probe(address: &str, run: &str) -> Option<proto::RunStatus> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = nqueens_proto::connect(&nqueens_proto::Connection::new(address)).ok()?;
        let req = proto::GetRunRequest { run: run.into() };
        c.get_run(req).await.ok().map(|r| r.into_inner())
    })
}

/// Polls a run until `until` holds of its status, failing after `limit`.
pub fn poll(
    address: &str,
    run: &str,
    limit: Duration,
    until: impl Fn(&proto::RunStatus) -> bool,
) -> proto::RunStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = probe(address, run).filter(|s| until(s)) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} did not reach the awaited state within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An HTTP/1.1 GET on loopback through hyper's client: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let uri: http::Uri = format!("http://{addr}{path}").parse().expect("a URL");
        let response = tokio::time::timeout(Duration::from_secs(30), client.get(uri))
            .await
            .expect("an answer within 30 s")
            .expect("an HTTP response");
        let code = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the whole body")
            .to_bytes();
        (
            code,
            String::from_utf8(body.to_vec()).expect("a UTF-8 body"),
        )
    })
}

/// The DOM of `url` after headless Chromium ran its scripts for `budget_ms` of virtual time. Fails with
/// the install line when Chromium is missing: the test command needs it (`.ci/run` installs it).
pub fn chromium_dom(url: &str, profile: &Path, budget_ms: u32) -> String {
    let chromium = chromium();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--virtual-time-budget={budget_ms}"),
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The Chromium command of this machine.
fn chromium() -> &'static str {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("Chromium is needed for the status page test: apt-get install chromium")
}

/// Draws `url` in headless Chromium into the PNG file `out` (a tall window, so that the whole page shows).
pub fn chromium_screenshot(url: &str, profile: &Path, out: &Path) {
    let chromium = chromium();
    let status = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1000,1400",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", out.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        status.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
}

/// The text of the element with `id` in a dumped DOM (its first text, up to the next tag).
pub fn element_text(dom: &str, id: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let open_end = start + dom[start..].find('>')? + 1;
    let text_end = open_end + dom[open_end..].find('<')?;
    Some(dom[open_end..text_end].to_string())
}

/// The byte range of the first packed result line of a ledger (ledger format 3: the first packed line
/// defines a worker, the next one is that worker's result), its newline excluded.
pub fn first_packed_result(ledger: &[u8]) -> std::ops::Range<usize> {
    let mut lines = ledger
        .split_inclusive(|&b| b == b'\n')
        .scan(0, |at, line| {
            let start = *at;
            *at += line.len();
            Some((start, line))
        })
        .skip_while(|(_, line)| line.first() != Some(&0x01));
    let (start, line) = lines.nth(1).expect("a packed result line");
    assert_eq!(line.first(), Some(&0x01), "a packed line");
    start..start + line.len() - 1
}

/// `ledger` with one byte in the middle of its first packed result changed (never into a newline or
/// an escape): the line fails its check.
pub fn with_changed_result_byte(mut ledger: Vec<u8>) -> Vec<u8> {
    let line = first_packed_result(&ledger);
    let at = (line.start + line.end) / 2;
    let mut b = ledger[at].wrapping_add(1);
    while b == b'\n' || b == 0x1b {
        b = b.wrapping_add(1);
    }
    ledger[at] = b;
    ledger
}
