//! Storage torture and degenerate plans, end to end through the `nqueens` binary: a finished local count's
//! files (sled's, the ledger) are damaged in every way listed in RELIABILITY.md (bit flips, a changed
//! digit, truncation, zeroed pages, deleted files), then the count is run again on them. Every case must
//! end with the exact published total or a clear refusal to start: never a wrong total, never a silent
//! loss. Bounded: N = 12 (about a second a count), a fixed list of cases.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

const N: u32 = 12;

/// `nqueens count N --json --data DIR` (plus `extra`); its output.
fn count(data: &Path, extra: &[&str]) -> Output {
    support::nqueens()
        .args(["count", &N.to_string(), "--json", "--data"])
        .arg(data)
        .args(extra)
        .output()
        .expect("run nqueens")
}

/// The outcome of a count on a damaged store: `Ok(total)` or `Err(stderr)` for a refusal.
fn outcome(out: &Output) -> Result<(String, u64), String> {
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        Ok((
            v["total"].as_str().unwrap().to_string(),
            v["jobs_resumed"].as_u64().unwrap(),
        ))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

/// A finished count's data directory, copied fresh for each case.
struct Pristine {
    _dir: tempfile::TempDir,
    path: PathBuf,
    jobs: u64,
}

fn pristine() -> Pristine {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let out = count(&path, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"], support::reference(N).0.to_string());
    Pristine {
        _dir: dir,
        path,
        jobs: v["jobs"].as_u64().unwrap(),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs one case: copies the pristine store, damages it, counts again. Returns the outcome.
fn case(p: &Pristine, what: &str, damage: impl FnOnce(&Path)) -> Result<(String, u64), String> {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&p.path, &data);
    damage(&data);
    let result = outcome(&count(&data, &[]));
    eprintln!("{what}: {result:?}");
    let want = support::reference(N).0.to_string();
    match &result {
        Ok((total, _)) => assert_eq!(total, &want, "{what}: a wrong total"),
        Err(err) => assert!(
            err.contains("error"),
            "{what}: a refusal must say why: {err}"
        ),
    }
    if result.is_ok() {
        // Whatever was repaired, the store and the ledger now agree both ways.
        let audit = audit(&data);
        assert!(
            audit.status.success(),
            "{what}: audit after the repair: {}",
            String::from_utf8_lossy(&audit.stderr)
        );
    }
    result
}

fn ledger(data: &Path) -> PathBuf {
    data.join("results.jsonl")
}

fn edit_ledger(data: &Path, f: impl FnOnce(Vec<u8>) -> Vec<u8>) {
    let bytes = std::fs::read(ledger(data)).unwrap();
    std::fs::write(ledger(data), f(bytes)).unwrap();
}

/// `nqueens import --data TARGET FILE` (plus `extra`); its output.
fn import(target: &Path, file: &Path, extra: &[&str]) -> Output {
    support::nqueens()
        .args(["import", "--data"])
        .arg(target)
        .arg(file)
        .args(extra)
        .output()
        .unwrap()
}

/// `nqueens export --data DATA` (plus `extra`); its output.
fn export(data: &Path, extra: &[&str]) -> Output {
    support::nqueens()
        .args(["export", "--data"])
        .arg(data)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn issue_15_damaged_ledgers_are_repaired_from_the_store_and_never_counted() {
    let p = pristine();
    // One changed byte in a counted result: the line's check fails; the store holds the result.
    let r = case(&p, "changed byte in the ledger", |d| {
        edit_ledger(d, support::with_changed_result_byte)
    });
    assert_eq!(r.unwrap().1, p.jobs, "nothing lost: every job was resumed");
    // A torn last line, the ledger cut in the middle, or deleted: rewritten from the store.
    for (what, cut) in [("torn last line", 7usize), ("half the ledger", 0)] {
        let r = case(&p, what, |d| {
            edit_ledger(d, |t| {
                let keep = if cut > 0 { t.len() - cut } else { t.len() / 2 };
                t[..keep].to_vec()
            })
        });
        assert_eq!(r.unwrap().1, p.jobs, "{what}");
    }
    let r = case(&p, "ledger deleted", |d| {
        std::fs::remove_file(ledger(d)).unwrap()
    });
    assert_eq!(r.unwrap().1, p.jobs);
}

#[test]
fn issue_15_a_lost_or_damaged_sled_store_is_rebuilt_from_the_ledger_never_started_empty() {
    let p = pristine();
    let db = |d: &Path| d.join("db");
    let r = case(&p, "db deleted", |d| std::fs::remove_file(db(d)).unwrap());
    assert_eq!(r.unwrap().1, p.jobs, "every acknowledged result restored");
    let r = case(&p, "first 4 KiB of db zeroed", |d| {
        let mut bytes = std::fs::read(db(d)).unwrap();
        let end = bytes.len().min(4096);
        bytes[..end].fill(0);
        std::fs::write(db(d), bytes).unwrap();
    });
    if let Ok((_, resumed)) = r {
        assert_eq!(
            resumed, p.jobs,
            "zeroed db: every acknowledged result restored"
        );
    }
    // Single flipped bytes across the whole file: the exact total (repaired or recomputed) or a refusal.
    let len = std::fs::metadata(db(&p.path)).unwrap().len() as usize;
    for i in 1..=12 {
        let at = len * i / 13;
        let _ = case(&p, &format!("byte {at} of db flipped"), |d| {
            let mut bytes = std::fs::read(db(d)).unwrap();
            bytes[at] ^= 0x5a;
            std::fs::write(db(d), bytes).unwrap();
        });
    }
    // The store and the ledger both damaged: a refusal that names the repair, and the repair works.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&p.path, &data);
    std::fs::remove_file(db(&data)).unwrap();
    edit_ledger(&data, support::with_changed_result_byte);
    let err = outcome(&count(&data, &[])).unwrap_err();
    assert!(err.contains("--repair"), "{err}");
}

#[test]
fn issue_15_import_refuses_a_ledger_with_a_changed_byte() {
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ledger.jsonl");
    let bytes = std::fs::read(ledger(&p.path)).unwrap();
    std::fs::write(&file, support::with_changed_result_byte(bytes)).unwrap();
    let target = dir.path().join("imported");
    let out = import(&target, &file, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("damaged") && err.contains("nothing imported"),
        "{err}"
    );
}

#[test]
fn issue_15_n_2_and_3_finish_at_once_with_zero_under_both_strategies() {
    for n in ["2", "3"] {
        for strategy in ["d4", "mirror"] {
            let dir = tempfile::tempdir().unwrap();
            let out = support::nqueens()
                .args(["count", n, "--strategy", strategy, "--json", "--data"])
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "N = {n} {strategy}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["total"], "0", "N = {n} {strategy}");
            if strategy == "d4" {
                assert_eq!(v["unique"], "0", "N = {n}");
            }
            // The store is not blocked: another count on it works.
            let again = support::nqueens()
                .args(["count", "5", "--json", "--data"])
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(
                again.status.success(),
                "{}",
                String::from_utf8_lossy(&again.stderr)
            );
        }
    }
}

#[test]
fn issue_15_a_run_started_by_the_previous_format_finishes_exactly_after_the_upgrade() {
    let data = finished_after_upgrade("format1-n12", 11, |ledger| {
        assert!(
            !ledger.contains("\"crc\""),
            "the fixture is of the old format"
        )
    });
    // The ledger now has checked lines only: the run's JSON line and 34 packed results.
    let path = data.path().join("data/results.jsonl");
    let view = nqueens_coordinator::durable::ledger::LedgerView::read(&path).unwrap();
    assert_eq!((view.legacy, view.damaged.len()), (0, 0));
    assert_eq!(view.count(1), 34);
    let bytes = std::fs::read(&path).unwrap();
    let lines: Vec<&[u8]> = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert!(lines[0].starts_with(b"{\"v\":2,\"crc\":"));
    assert!(lines[1..].iter().all(|l| l[0] == 0x01), "packed results");
}

#[test]
fn issue_19_a_run_started_by_store_format_2_finishes_exactly_after_the_upgrade_to_format_3() {
    finished_after_upgrade("format2-n12", 11, |ledger| {
        assert!(
            !ledger.contains("\"priority\""),
            "the fixture is of format 2"
        )
    });
}

#[test]
fn issue_16_a_run_started_by_store_format_3_finishes_exactly_after_the_upgrade() {
    finished_with_a_verifying_half("format3-n12", "\"verify_fraction\":0.25");
}

#[test]
fn issue_16_a_run_started_by_store_format_4_finishes_exactly_after_the_upgrade_to_groups() {
    // Ledger format 2 (positional results) with the store format 4 beside it.
    finished_with_a_verifying_half("format4-n12", "[\"r\",1,\"0.1\",272,");
}

/// Finishes the half-done run of a fixture written as `format3-n12` was (see its README): 7 jobs counted
/// by the old build and 4 verified jobs holding its candidate (worker `old`); two workers of other names
/// confirm those and compute the rest. `marker` is in the fixture's ledger (it is the format said).
fn finished_with_a_verifying_half(name: &str, marker: &str) {
    let data = fixture(name);
    let ledger = std::fs::read_to_string(data.path().join("data/results.jsonl")).unwrap();
    assert!(ledger.contains(marker), "the {name} fixture");
    let serve = support::Serve::start(&data.path().join("data"), "127.0.0.1:0", "30s");
    assert!(
        serve.log().contains("store migrated"),
        "the migration is logged: {}",
        serve.log()
    );
    let before = support::probe(&serve.address, "1").expect("the run is served");
    assert_eq!((before.jobs_done, before.jobs_verifying), (7, 4));
    finished_by(serve, data.path(), &["a", "b"]);
    audited(&data.path().join("data"));
}

/// Workers `names` (logging in `dir`) finish run 1 on `serve`, which then stops; its total is Q(N).
fn finished_by(mut serve: support::Serve, dir: &Path, names: &[&str]) {
    let mut workers: Vec<_> = names
        .iter()
        .map(|name| support::worker(&serve.address, dir, name, &[]))
        .collect();
    let done = support::poll(&serve.address, "1", Duration::from_secs(120), |s| {
        s.jobs_done == s.jobs_total
    });
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    serve.stop();
    assert_eq!(done.total, support::reference(N).0.to_string());
}

/// A fresh copy of the data directory `tests/fixtures/NAME` (in `data/` of the returned directory).
fn fixture(name: &str) -> tempfile::TempDir {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    for file in ["db", "conf", "results.jsonl"] {
        std::fs::copy(fixture.join(file), data.join(file)).unwrap();
    }
    dir
}

/// A fresh copy of the data directory `tests/fixtures/NAME`, of store format `format`: `audit` refuses
/// it until a start (an earlier store format); a coordinator serves it, its start having migrated the
/// store. Returns the copy, its data directory and the coordinator.
fn migrated_at_start(name: &str, format: u64) -> (tempfile::TempDir, PathBuf, support::Serve) {
    let data = fixture(name);
    let path = data.path().join("data");
    let before = audit(&path);
    let err = String::from_utf8_lossy(&before.stderr);
    assert!(
        !before.status.success() && err.contains(&format!("format {format}")),
        "{err}"
    );
    let serve = support::Serve::start(&path, "127.0.0.1:0", "30s");
    assert!(serve.log().contains("store migrated"), "{}", serve.log());
    (data, path, serve)
}

/// `nqueens audit` on `data`.
fn audit(data: &Path) -> Output {
    support::nqueens()
        .args(["audit", "--data"])
        .arg(data)
        .output()
        .unwrap()
}

/// `nqueens audit` passes on `data`.
fn audited(data: &Path) {
    let audit = audit(data);
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stderr)
    );
}

/// Copies the data directory `tests/fixtures/NAME` (a ledger that `old` checks is of the old format),
/// finishes its N = 12 run with this build (`kept` of 34 jobs counted by the old build, kept), and
/// audits the result; returns the directory.
fn finished_after_upgrade(name: &str, kept: u64, old: impl Fn(&str)) -> tempfile::TempDir {
    let dir = fixture(name);
    let data = dir.path().join("data");
    old(&std::fs::read_to_string(data.join("results.jsonl")).unwrap());
    let out = count(&data, &[]);
    assert_eq!(
        outcome(&out),
        Ok((support::reference(N).0.to_string(), kept)),
        "the results counted by the old build are kept, the others computed"
    );
    audited(&data);
    dir
}

/// Backups are taken only of a directory that passes the audit, and never leave a partial file where a
/// good one was: an export of a store whose ledger disagrees with it (here the ledger's last result line cut
/// off) is refused, and the previous export at `--out` is kept whole. Found by a review
/// (2026-11-24): export read the store alone, after none of the start's repairs, and truncated `--out`
/// before writing.
#[test]
fn an_export_of_a_directory_that_fails_its_audit_is_refused_and_keeps_the_previous_backup() {
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&p.path, &data);
    let backup = dir.path().join("backup.jsonl");
    let out = export(&data, &["--out", backup.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let good = std::fs::read(&backup).unwrap();
    // The last line (a result's) cut off whole: the ledger is one result short of the store.
    edit_ledger(&data, |mut bytes| {
        let end = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap();
        bytes.truncate(end + 1);
        bytes
    });
    let out = export(&data, &["--out", backup.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("disagree"), "{err}");
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        good,
        "the previous backup kept whole"
    );
}

/// An import of a file that is not there is refused and creates nothing (it imported an empty ledger
/// and said "audit passed"); an import into a directory that holds a ledger but no store is refused
/// (it replaced that ledger, the only copy of its results, with the import's).
#[test]
fn an_import_of_a_missing_file_or_over_a_lone_ledger_is_refused() {
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("imported");
    let out = import(&target, &dir.path().join("typo.jsonl"), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("typo.jsonl"), "{err}");
    assert!(!target.exists(), "nothing created");
    let lone = dir.path().join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(ledger(&p.path), ledger(&lone)).unwrap();
    let before = std::fs::read(ledger(&lone)).unwrap();
    let backup = dir.path().join("backup.jsonl");
    std::fs::copy(ledger(&p.path), &backup).unwrap();
    let out = import(&lone, &backup, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ledger") && err.contains("serve"), "{err}");
    assert_eq!(std::fs::read(ledger(&lone)).unwrap(), before);
    assert!(!lone.join("db").exists(), "no store created");
}

/// A file of the format before checksums whose results carry no seal cannot be verified: a changed digit
/// in it would be counted for good. `import` refuses it unless told `--accept-unchecked` (it imported
/// it with a warning). Found by a review, 2026-11-24.
#[test]
fn an_import_of_unverifiable_lines_is_refused_unless_accepted() {
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let exported = export(&p.path, &[]);
    assert!(exported.status.success());
    let text = String::from_utf8(exported.stdout).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
    assert_eq!(
        lines.next().unwrap()["entry"]["kind"],
        "export",
        "the header"
    );
    let run = lines.next().unwrap()["entry"].clone();
    assert_eq!(run["kind"], "run");
    let first = lines.next().unwrap()["entry"].clone();
    let job = first[2].as_str().unwrap().to_string();
    // Old-format lines: no checksum, and a result without a seal (its total eight off, within the
    // bounds of a result, as an import holds every result to them; its unique count as the run's
    // strategy has one: a d4 result without one is refused even unchecked).
    let off = |i: usize, by: u64| first[i].as_u64().unwrap() + by;
    let result = serde_json::json!({
        "kind": "result", "run": run["id"], "job": job,
        "result": {"total": off(3, 8), "unique8": off(4, 8), "nodes": off(5, 1)},
        "worker": "old", "lease": 1, "at_unix": 0
    });
    let file = dir.path().join("old.jsonl");
    std::fs::write(&file, format!("{run}\n{result}\n")).unwrap();
    let target = dir.path().join("imported");
    let out = import(&target, &file, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--accept-unchecked") && err.contains("1 result"),
        "{err}"
    );
    assert!(!target.join("db").exists(), "nothing imported");
    let out = import(&target, &file, &["--accept-unchecked"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `import` into a directory holding a store and a ledger rewrote the ledger from the store without
/// reconciling the two first: what the ledger held beyond the store (here a quarantine, as a crash after
/// the ledger's fsync and before the store's flush leaves it) was lost for good. Found by a review,
/// 2026-11-24. Now such a directory is refused, naming the repair, and nothing changes.
#[test]
fn an_import_into_a_directory_whose_store_and_ledger_disagree_is_refused() {
    use nqueens_coordinator::durable::ledger::Entry;
    use nqueens_coordinator::durable::store::Quarantine;
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing");
    copy_dir(&p.path, &existing);
    let quarantine = |worker: &str| {
        nqueens_common::jsonl::encode(&Entry::Quarantine(Quarantine {
            worker: worker.into(),
            reason: "disproved".into(),
            at_unix: 1,
            by: Vec::new(),
            held: false,
            contradicted: Vec::new(),
        }))
    };
    let mut ahead = std::fs::read(ledger(&existing)).unwrap();
    ahead.extend(quarantine("liar"));
    std::fs::write(ledger(&existing), &ahead).unwrap();
    // A backup of another run (id 2: no clash with the directory's run 1) and a quarantine.
    let exported = export(&p.path, &[]).stdout;
    let mut meta = run_line(&exported);
    meta.id = 2;
    let mut other = nqueens_common::jsonl::encode(&Entry::Run(meta));
    other.extend(quarantine("other"));
    let backup = dir.path().join("backup.jsonl");
    std::fs::write(&backup, other).unwrap();
    let out = import(&existing, &backup, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("serve") && err.contains("liar"), "{err}");
    assert_eq!(std::fs::read(ledger(&existing)).unwrap(), ahead);
    assert!(!audit(&existing).status.success(), "the audit fails it too");
    // Into a directory whose store and ledger agree, the same backup imports beside its run.
    let agreeing = dir.path().join("agreeing");
    copy_dir(&p.path, &agreeing);
    let out = import(&agreeing, &backup, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    audited(&agreeing);
}

/// An export cut short at a line boundary (a copy interrupted, a disk full) lacks results, or its
/// quarantines (written last), with every line intact: it imported cleanly. Found by a review,
/// 2026-11-24. An export now begins with a header line and ends with a line counting what it holds;
/// a file with the header and without a matching end is refused, nothing imported.
#[test]
fn an_export_cut_short_at_a_line_boundary_is_refused() {
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let exported = export(&p.path, &[]);
    assert!(exported.status.success());
    let whole = exported.stdout;
    let file = dir.path().join("backup.jsonl");
    for cut in [1, 2] {
        let lines: Vec<&[u8]> = whole.split_inclusive(|&b| b == b'\n').collect();
        let short: Vec<u8> = lines[..lines.len() - cut].concat();
        std::fs::write(&file, &short).unwrap();
        let target = dir.path().join(format!("imported-{cut}"));
        let out = import(&target, &file, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "cut {cut}: {err}");
        assert!(err.contains("cut short"), "{err}");
        assert!(!target.join("db").exists(), "nothing imported");
    }
    std::fs::write(&file, &whole).unwrap();
    let out = import(&dir.path().join("whole"), &file, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The run of an export's first run line.
fn run_line(exported: &[u8]) -> nqueens_coordinator::durable::store::RunMeta {
    use nqueens_coordinator::durable::ledger::Entry;
    let run = exported
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .find(|v| v["entry"]["kind"] == "run")
        .unwrap();
    match serde_json::from_value::<Entry>(run["entry"].clone()).unwrap() {
        Entry::Run(meta) => meta,
        other => panic!("a run line: {other:?}"),
    }
}

/// An import into a new directory is built beside and moved into place whole: one refused after the
/// file was read (here a run line, intact, whose plan this build cannot make: N = 40) leaves no store
/// behind. Before, the store was created first and kept the runs restored before the refusal.
#[test]
fn an_import_refused_after_reading_leaves_no_store() {
    use nqueens_coordinator::durable::ledger::Entry;
    let p = pristine();
    let dir = tempfile::tempdir().unwrap();
    let exported = export(&p.path, &[]).stdout;
    // Of the format before export headers (no end line counting the runs), plus the forged run.
    let mut file: Vec<u8> = exported
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| {
            let text = String::from_utf8_lossy(l);
            !text.contains("\"kind\":\"export\"") && !text.contains("\"kind\":\"end\"")
        })
        .flatten()
        .copied()
        .collect();
    let mut meta = run_line(&exported);
    (meta.id, meta.n) = (2, 40);
    file.extend(nqueens_common::jsonl::encode(&Entry::Run(meta)));
    let backup = dir.path().join("backup.jsonl");
    std::fs::write(&backup, file).unwrap();
    let target = dir.path().join("imported");
    let out = import(&target, &backup, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("nothing imported"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&target)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A run started by the build before ledger format 4 (store format 5, ledger format 3; see the
/// fixture's README), with a worker quarantined and its results revoked: the ledger then carried no
/// quarantine. `audit` refuses the directory until a start (the store is of an earlier format, and
/// its quarantines differ from the ledger's); the first start migrates the store to format 6 and
/// appends the store's quarantine to the ledger, the quarantined worker is still refused, and two
/// workers finish the run with the exact total.
#[test]
fn a_run_started_before_ledger_format_4_finishes_exactly_keeping_its_quarantine() {
    let data = fixture("format5-n12");
    let path = data.path().join("data");
    let old = String::from_utf8_lossy(&std::fs::read(ledger(&path)).unwrap()).into_owned();
    assert!(
        old.contains("\"revoked\"") && !old.contains("quarantine"),
        "the fixture is of ledger format 3"
    );
    let before = audit(&path);
    let err = String::from_utf8_lossy(&before.stderr);
    assert!(
        !before.status.success() && err.contains("format 5"),
        "{err}"
    );
    let serve = support::Serve::start(&path, "127.0.0.1:0", "30s");
    let view = nqueens_coordinator::durable::ledger::LedgerView::read(&ledger(&path)).unwrap();
    assert!(view.damaged.is_empty(), "{:?}", view.damaged);
    assert_eq!(
        view.quarantines.keys().collect::<Vec<_>>(),
        ["liar"],
        "appended at the first start"
    );
    let start = support::probe(&serve.address, "1").expect("the run is served");
    assert_eq!((start.jobs_done, start.jobs_verifying), (6, 3));
    let mut liar = support::worker(&serve.address, data.path(), "liar", &[]);
    let refused = support::wait(&mut liar, Duration::from_secs(60), "liar");
    assert!(!refused.success(), "the quarantined worker is refused");
    finished_by(serve, data.path(), &["c", "d"]);
    audited(&path);
}

/// A run started by the build before kernel families (store format 6, ledger format 4; see the
/// fixture's README), its liar quarantined with its deciders: `audit` refuses the directory until a
/// start (an earlier store format); the first start migrates the store, the run is served as it
/// stood, the liar is still refused, and two workers finish it with the exact total. Its certificate
/// (version 3) names no family for the old build's results and this build's family for the new ones,
/// and checks out.
#[test]
fn a_run_started_before_kernel_families_finishes_exactly_and_its_certificate_checks() {
    let (data, path, serve) = migrated_at_start("format6-n12", 6);
    let start = support::probe(&serve.address, "1").expect("the run is served");
    assert_eq!(start.jobs_done, 14);
    let mut liar = support::worker(&serve.address, data.path(), "liar", &[]);
    let refused = support::wait(&mut liar, Duration::from_secs(60), "liar");
    assert!(!refused.success(), "the quarantined worker is refused");
    finished_by(serve, data.path(), &["d", "e"]);
    audited(&path);
    let file = data.path().join("n12.cert");
    let out = support::nqueens()
        .args(["certificate", "1", "--data"])
        .arg(&path)
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["version"], 3);
    let families: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(families.len(), 34);
    assert!(
        families.iter().any(|f| f.split(',').all(|x| x == "-")),
        "old results: {families:?}"
    );
    assert!(
        families.iter().any(|f| f.starts_with("cpu-")),
        "new results: {families:?}"
    );
    let check = support::nqueens()
        .args(["spot-check"])
        .arg(&file)
        .args(["--sample", "3", "--threads", "1"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// A run started by the build before hand-backs were bits (store format 7; see the fixture's README),
/// beside a finished run and a cancelled one whose worker handed a lease back: `audit` refuses the
/// directory until a start; the first start migrates the store, turning the one hand-back entry into
/// its bit and dropping the entries' tree; two workers finish run 1 with the exact total, and the
/// audit passes on all three runs.
#[test]
fn a_run_started_before_hand_backs_were_bits_finishes_exactly() {
    let (data, path, serve) = migrated_at_start("format7-n12", 7);
    let log = serve.log();
    assert!(log.contains("hand_backs_converted=1"), "{log}");
    let start = support::probe(&serve.address, "1").expect("the run is served");
    assert_eq!(start.jobs_done, 10);
    finished_by(serve, data.path(), &["c", "d"]);
    let after = audit(&path);
    let out = String::from_utf8_lossy(&after.stdout);
    assert!(after.status.success(), "{out}");
    for run in [
        "run 1: N = 12 d4 done",
        "run 2: N = 18 d4 done",
        "run 3: N = 20 d4 cancelled",
    ] {
        assert!(out.contains(run), "{out}");
    }
}

/// An export written by the build before export format 2 (no header or end line, the quarantine last;
/// see the fixture's README) imports whole with this build: the run, its results and the quarantine.
#[test]
fn an_export_of_the_previous_build_imports_with_its_quarantine() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/format5-n12/export-format1.jsonl");
    let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
    assert!(
        text.contains("\"quarantine\"") && !text.contains("\"export\""),
        "the fixture is of export format 1"
    );
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("imported");
    let out = import(&target, &file, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    audited(&target);
    let store = nqueens_coordinator::durable::store::Store::inspect(&target).unwrap();
    let quarantined: Vec<String> = store
        .quarantined()
        .unwrap()
        .into_iter()
        .map(|q| q.worker)
        .collect();
    assert_eq!(quarantined, ["liar"]);
    assert_eq!(store.tally(1).unwrap().jobs, 6);
}

/// A worker that held a lease across the upgrade to identity-bound lease tags (2026-11-29) journaled a
/// result under a tag the previous build made: the coordinator refuses it as not leased, the worker
/// drops it and goes on, and the run finishes exactly, the result counted once, from the job computed
/// again (the tag here is one the coordinator never issued, as a previous build's is now).
#[test]
fn a_result_under_a_previous_builds_lease_tag_is_dropped_and_the_run_finishes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let serve = support::Serve::start(&data, "127.0.0.1:0", "30s");
    let run = support::submit_with(&serve.address, N, "d4", &["--verify-fraction", "0"]);
    assert_eq!(run, "1");
    let plan = nqueens_common::Plan::new(N, nqueens_common::Strategy::D4).unwrap();
    let key = plan.jobs().next().unwrap();
    let old = nqueens_worker::journal::Finished::computed(plan, &key, (1 << 40) | 1, 0x5eed, &run)
        .unwrap();
    nqueens_worker::journal::Journal::open(&dir.path().join("w.journal"))
        .unwrap()
        .record(std::slice::from_ref(&old))
        .unwrap();
    finished_by(serve, dir.path(), &["w"]);
    let log = std::fs::read_to_string(dir.path().join("w.log")).unwrap();
    assert!(
        log.contains("refused a result") && log.contains("FailedPrecondition"),
        "{log}"
    );
    audited(&data);
}
