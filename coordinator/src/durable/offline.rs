//! A stopped coordinator's data directory, offline: its check (`nqueens audit`, and `nqueens export`
//! before it writes a line: the store's totals against its results, no quarantine left half done, and
//! the ledger holding exactly the store's results; a directory that fails it may hold a count that the
//! coordinator's next start would correct, and is not audited, nor backed up, until then), and a store
//! rebuilt from an export (`nqueens import`).

use std::collections::HashMap;
use std::path::Path;

use crate::durable::ledger::{self, LedgerView, LEDGER_FILE};
use crate::error::{Error, Result};
use nqueens_common::JobKey;

use crate::durable::store::{AuditLine, ResultRecord, Store};

/// A data directory that passed the check.
#[derive(Debug)]
pub struct Checked {
    /// Per run, its totals as the sum of its results.
    pub lines: Vec<AuditLine>,
    /// Per run, its results in the ledger (the same as the store's).
    pub ledger_results: HashMap<u64, u64>,
    /// Whether the digests sufficed (both sides streamed, no result kept in memory); otherwise the
    /// ledger was read whole.
    pub quick: bool,
}

/// Checks the store of `dir` (opened by the caller) and its ledger; an error names the first thing wrong
/// and what repairs it.
pub fn check(store: &Store, dir: &Path) -> Result<Checked> {
    let path = dir.join(LEDGER_FILE);
    if !path.exists() {
        return Err(Error::Corrupt(format!(
            "{} has no ledger ({LEDGER_FILE}); start the coordinator once to write it from the store",
            dir.display()
        )));
    }
    // The start's quick comparison first (both sides streamed, no result kept in memory); the full,
    // result-by-result one only where the digests differ, to name what differs.
    let checked = match crate::durable::reconcile::digests_agree(store, &path)? {
        Some(agreed) => {
            same_quarantines(store, agreed.ledger.quarantined.keys())?;
            controls_agree(&agreed.runs, &agreed.ledger.runs)?;
            Checked {
                lines: agreed
                    .runs
                    .iter()
                    .zip(agreed.surveys)
                    .map(|(meta, survey)| store.audited(meta, survey))
                    .collect::<Result<_>>()?,
                ledger_results: agreed
                    .ledger
                    .digests
                    .iter()
                    .map(|(run, digest)| (*run, digest.results))
                    .collect(),
                quick: true,
            }
        }
        None => compare_in_full(store, &path)?,
    };
    // A quarantine's revocation that did not complete (a failed write, or a crash, in between) leaves
    // the liar's unconfirmed results counted, the totals, and the ledger, still agreeing with them.
    if let Some((worker, counted)) = store.unrevoked_quarantines()?.into_iter().next() {
        return Err(Error::Corrupt(format!(
            "the revocation of the quarantined worker {worker:?} did not complete: {counted} of its unconfirmed results are still counted, or open jobs still hold its results; start the coordinator once to take them back"
        )));
    }
    Ok(checked)
}

/// The store quarantines exactly the workers the ledger does (by name, in order): the ledger alone
/// rebuilds the store's quarantines, and releases.
fn same_quarantines<'a>(store: &Store, logged: impl Iterator<Item = &'a String>) -> Result<()> {
    let stored: Vec<String> = store.quarantined()?.into_iter().map(|q| q.worker).collect();
    let logged: Vec<&String> = logged.collect();
    if stored.iter().ne(logged.iter().copied()) {
        return Err(Error::Corrupt(format!(
            "the store quarantines {stored:?} and the ledger {logged:?}; start the coordinator to reconcile them"
        )));
    }
    Ok(())
}

/// Every run's controls (pause, priority, cancel) are the same in the store and in the ledger's last
/// line of the run.
fn controls_agree(
    stored: &[crate::durable::store::RunMeta],
    logged: &std::collections::BTreeMap<u64, crate::durable::store::RunMeta>,
) -> Result<()> {
    for meta in stored {
        if let Some(theirs) = logged.get(&meta.id) {
            if !ledger::same_controls(meta, theirs) {
                return Err(Error::Corrupt(format!(
                    "run {}: the store and the ledger hold different controls (paused {} and {}, cancelled {} and {}, priority {} and {}); start the coordinator to reconcile them",
                    meta.id,
                    meta.paused,
                    theirs.paused,
                    meta.is_cancelled(),
                    theirs.is_cancelled(),
                    meta.priority,
                    theirs.priority
                )));
            }
        }
    }
    Ok(())
}

/// The store's audit and the ledger read whole, compared run by run: an error names the first
/// difference.
fn compare_in_full(store: &Store, path: &Path) -> Result<Checked> {
    let lines = store.audit()?;
    // Both ways: every result of the store is in the ledger and every result of the ledger in the store.
    let view = LedgerView::read(path)?;
    if let Some(first) = view.damaged.first() {
        return Err(Error::Corrupt(format!(
            "the ledger has {} damaged lines (first: {first}); start the coordinator to repair it from the store",
            view.damaged_lines
        )));
    }
    let mut ledger_results = HashMap::new();
    for meta in store.runs()? {
        let Some(logged) = view.runs.get(&meta.id) else {
            return Err(Error::Corrupt(format!(
                "run {}: the store holds it but the ledger does not; start the coordinator to reconcile them",
                meta.id
            )));
        };
        if !ledger::same_run(&meta, logged) {
            return Err(Error::Corrupt(ledger::different_runs(&meta, logged, path)));
        }
        let diff = ledger::compare(store, &meta, &view)?;
        if !diff.is_empty() {
            return Err(Error::Corrupt(format!(
                "run {}: the store and the ledger disagree: {} results only in the store, {} only in the ledger, {} different, {} damaged in the store, {} in the ledger that the store took back since; start the coordinator to reconcile them",
                meta.id,
                diff.store_only.len(),
                diff.ledger_only.len(),
                diff.conflicting.len(),
                diff.damaged.len(),
                diff.superseded.len()
            )));
        }
        ledger_results.insert(meta.id, view.count(meta.id));
    }
    same_quarantines(store, view.quarantines.keys())?;
    controls_agree(&store.runs()?, &view.runs)?;
    if let Some(id) = view.runs.keys().find(|id| !ledger_results.contains_key(id)) {
        return Err(Error::Corrupt(format!(
            "run {id}: the ledger holds it but the store does not; start the coordinator to restore it"
        )));
    }
    Ok(Checked {
        lines,
        ledger_results,
        quick: false,
    })
}

/// Rebuilds `store` (new, or without runs of the same ids) from an export or a ledger read into `view`:
/// its runs, its results (checked against their run's plan, added with checked sums) and its quarantines,
/// each run's totals and state settled from its results (a run of no jobs is done), and every
/// quarantined worker's unconfirmed results taken back, as a coordinator's start does. Returns how many
/// results were new.
pub fn restore(store: &Store, view: &LedgerView) -> Result<u64> {
    vet(store, view)?;
    // Of a run the store holds already, a count the store took back since the file was written (its
    // open record lists it beside a different result, or its worker is quarantined in the store) is
    // not restored: the store's side stands, as at a start ([`ledger::compare`]'s `superseded`). Found
    // before the file's quarantines join the store's: those are the file's past, not the store's.
    let mut superseded: HashMap<u64, std::collections::HashSet<JobKey>> = HashMap::new();
    for meta in view.runs.values() {
        if store.run(meta.id)?.is_some() {
            let diff = ledger::compare(store, meta, view)?;
            if !diff.superseded.is_empty() {
                tracing::warn!(run = meta.id, results = diff.superseded.len(), first = %diff.superseded[0], "counts of the file that the store took back since it was written (disputed, or of a worker quarantined): not restored, the store's side kept");
            }
            superseded.insert(meta.id, diff.superseded.into_iter().collect());
        }
    }
    // The file's take-backs are noted (a ledger's lines; exports carry none): a still older file
    // imported into this store later brings none of those counts back.
    for (run, key, lease) in view.taken_back() {
        store.note_taken_back(*run, key, *lease)?;
    }
    // Quarantines first (each restore keeps one already stored): a restore cut short leaves no
    // disproved worker free to lease.
    for q in view.quarantines.values() {
        store.restore_quarantine(q)?;
    }
    let mut results = 0u64;
    for meta in view.runs.values() {
        let skipped = superseded.remove(&meta.id).unwrap_or_default();
        store.restore_run(meta)?;
        let batch: Vec<(JobKey, ResultRecord)> = view
            .results
            .get(&meta.id)
            .into_iter()
            .flatten()
            .filter(|(k, _)| !skipped.contains(*k))
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        results += store.restore_all_results(meta.id, &batch)?;
        let stored = store
            .run(meta.id)?
            .ok_or_else(|| Error::Corrupt(format!("run {} vanished", meta.id)))?;
        store.recount(&stored)?;
    }
    // A quarantine whose revocation never ran where the file was written (or results of the worker
    // this store held already).
    for q in store.quarantined()? {
        if store.revoke(&q.worker)?.incomplete {
            return Err(Error::Corrupt(format!(
                "results of the quarantined worker {:?} cannot all be read, so they cannot be taken back",
                q.worker
            )));
        }
    }
    store.flush()?;
    Ok(results)
}

/// Every refusal a restore can meet, before it writes anything: a refused import changes nothing
/// stored (before, the file's quarantines and the runs before the one refused stayed in the store).
/// What a restore can still meet after this is a failing write, and a restore done again completes it.
pub fn vet(store: &Store, view: &LedgerView) -> Result<()> {
    for q in view.quarantines.values() {
        crate::durable::store::check_quarantine(q)?;
    }
    for meta in view.runs.values() {
        store.check_restore_run(meta)?;
        let results = || view.results.get(&meta.id).into_iter().flatten();
        store.check_restore_results(meta, results())?;
        store.check_as_reported(meta, results())?;
    }
    if let Some(run) = view.results.keys().find(|r| !view.runs.contains_key(r)) {
        return Err(Error::Invalid(format!(
            "results of run {run}, which the file does not define"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::store::tests::a_quarantine_not_revoked;

    /// An export of `store`, written to `dir/backup.jsonl` and read back.
    fn exported(store: &Store, dir: &Path) -> LedgerView {
        let mut export = Vec::new();
        ledger::export(store, None, &mut export).unwrap();
        let file = dir.join("backup.jsonl");
        std::fs::write(&file, &export).unwrap();
        let view = LedgerView::read(&file).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        view
    }

    /// A new store restored from an export of `store` written to `dir`: its directory, the store and
    /// how many results were restored.
    fn restored_from_an_export(store: &Store, dir: &Path) -> (tempfile::TempDir, Store, u64) {
        let view = exported(store, dir);
        let target = tempfile::tempdir().unwrap();
        let restored = Store::open(target.path()).unwrap();
        let results = restore(&restored, &view).unwrap();
        (target, restored, results)
    }

    /// Found by a review (2026-11-24): `audit` passed such a directory and `export` wrote the liar's
    /// results out, and an import of that export (which carries no quarantine) counted them for good.
    #[test]
    fn a_quarantine_left_unrevoked_fails_the_check_naming_the_worker() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        match check(&store, dir.path()) {
            Err(Error::Corrupt(why)) => {
                assert!(
                    why.contains("\"liar\"") && why.contains("2 of its unconfirmed"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        // Once the revocation has run (as the coordinator's start does), the directory passes.
        let revoked = store.revoke("liar").unwrap();
        assert_eq!(revoked.revoked.len(), 2);
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        let checked = check(&store, dir.path()).unwrap();
        assert!(checked.quick, "streamed, the ledger not read whole");
        assert_eq!(checked.lines[0].tally.jobs, 2);
        assert_eq!(checked.ledger_results[&checked.lines[0].run], 2);
    }

    /// An export carries the store's quarantines, and a store restored from it keeps them: the worker
    /// disproved in the old store is still out of service in the new one, where before it could lease
    /// (and be counted) again.
    #[test]
    fn a_store_restored_from_an_export_keeps_its_quarantines() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        store.flush().unwrap();
        let (_target, restored, results) = restored_from_an_export(&store, dir.path());
        assert_eq!(results, 2);
        let names: Vec<String> = restored.quarantined_names();
        assert_eq!(names, ["liar"]);
        assert_eq!(
            restored.quarantined().unwrap(),
            store.quarantined().unwrap()
        );
        assert!(restored.unrevoked_quarantines().unwrap().is_empty());
        assert_eq!(restored.audit().unwrap()[0].tally.jobs, 2);
    }

    /// An export of a store whose checker is held (its dispute open, a second pair's lie kept)
    /// imports with the checker made whole and, beside its record counts, the counts only the
    /// identities it contradicted stand behind taken back: the export holds neither the dispute nor
    /// what was kept. Before, the lie of the second pair was counted in the new store.
    #[test]
    fn an_import_takes_back_what_a_held_checker_contradicted() {
        let (store, _, run, _, _, j2) =
            crate::durable::store::tests::a_check_of_two_lies(["a", "b"], ["x", "y"]);
        let dir = tempfile::tempdir().unwrap();
        let (_target, restored, _) = restored_from_an_export(&store, dir.path());
        assert!(restored.result(run.id, &j2.key).unwrap().is_none());
        let h = restored
            .quarantined()
            .unwrap()
            .into_iter()
            .find(|q| q.worker == "h");
        assert!(h.is_some_and(|q| !q.held));
        assert!(restored.unrevoked_quarantines().unwrap().is_empty());
        assert_eq!(restored.audit().unwrap()[0].tally.jobs, 0);
    }

    /// A run line with an id no store hands out (0, or the largest, whose next id would overflow) is
    /// damage when the file is read: `import` refuses the whole file before restoring anything (it
    /// restored the runs before it, then failed).
    #[test]
    fn a_run_id_out_of_range_is_damage_on_reading() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        let mut export = Vec::new();
        ledger::export(&store, None, &mut export).unwrap();
        let run = store.runs().unwrap().remove(0);
        for id in [u64::MAX, 0] {
            let mut file = export.clone();
            file.extend(nqueens_common::jsonl::encode(&ledger::Entry::Run(
                crate::durable::store::RunMeta { id, ..run.clone() },
            )));
            let path = dir.path().join("forged.jsonl");
            std::fs::write(&path, &file).unwrap();
            let view = LedgerView::read(&path).unwrap();
            assert_eq!(view.damaged.len(), 1, "id {id}");
            assert!(
                view.damaged[0].reason.contains("out of range"),
                "{:?}",
                view.damaged
            );
        }
    }

    /// A changed byte in an export's quarantine line fails the line's checksum: the line is damage (an
    /// import refuses the whole file), never a quarantine of another worker or none.
    #[test]
    fn a_damaged_quarantine_line_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        let mut export = Vec::new();
        ledger::export(&store, None, &mut export).unwrap();
        let at = export
            .windows(b"\"liar\"".len())
            .rposition(|w| w == b"\"liar\"")
            .unwrap();
        assert!(
            export[..at].ends_with(b"\"worker\":"),
            "the quarantine line's name"
        );
        export[at + 1] = b'm';
        let path = dir.path().join("damaged.jsonl");
        std::fs::write(&path, &export).unwrap();
        let view = LedgerView::read(&path).unwrap();
        // The quarantine line, then the end line, which counts a quarantine no longer there.
        assert_eq!(view.damaged.len(), 3, "{:?}", view.damaged);
        assert!(view.damaged[1].reason.contains("cut short or altered"));
        assert!(view.damaged[2].reason.contains("cut short"));
        // Named as the line after the last (issue 42: `last_line + 1` → `*` survived).
        let lines = export.iter().filter(|b| **b == b'\n').count() as u64;
        assert_eq!(view.damaged[2].line, lines + 1);
        assert!(view.quarantines.is_empty());
    }

    /// An export copied in as the ledger (a natural restore step) has its quarantines kept in the store,
    /// and in the ledger (which carries quarantines since ledger format 4): the next start takes the
    /// quick path again.
    #[test]
    fn an_export_copied_in_as_the_ledger_keeps_its_quarantines() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        let mut export = Vec::new();
        ledger::export(&store, None, &mut export).unwrap();
        std::fs::write(dir.path().join(LEDGER_FILE), &export).unwrap();
        assert!(store.release_quarantine("liar").unwrap());
        let (_, repairs, _) =
            crate::durable::reconcile::reconcile(&store, &dir.path().join(LEDGER_FILE), false)
                .unwrap();
        assert_eq!(repairs.quarantines_restored, 1);
        assert_eq!(store.quarantined().unwrap().len(), 1);
        let view = LedgerView::read(&dir.path().join(LEDGER_FILE)).unwrap();
        assert!(view.quarantines.contains_key("liar") && view.damaged.is_empty());
        let (_, repairs, audit) =
            crate::durable::reconcile::reconcile(&store, &dir.path().join(LEDGER_FILE), false)
                .unwrap();
        assert_eq!(repairs, crate::durable::reconcile::Repairs::default());
        assert!(audit.is_some(), "the quick path");
    }

    /// A ledger that disagrees with the store (here it still holds the liar's results the store gave
    /// back: counts the store took back since, by the revocation's notes) fails the check, as does a
    /// directory without a ledger.
    #[test]
    fn a_ledger_that_disagrees_with_the_store_or_none_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        store.flush().unwrap();
        match check(&store, dir.path()) {
            Err(Error::Corrupt(why)) => {
                assert!(
                    why.contains("disagree")
                        && why.contains("2 in the ledger that the store took back since"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(dir.path().join(LEDGER_FILE)).unwrap();
        match check(&store, dir.path()) {
            Err(Error::Corrupt(why)) => assert!(why.contains("no ledger"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    /// A store whose run record lost its verify fraction (damaged on disk before store format 6 gave
    /// it a checksum) fails the check against the ledger's intact run line (found by a review, 2026-11-24,
    /// a later session).
    #[test]
    fn a_verify_fraction_damaged_in_the_store_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = nqueens_common::Plan::new(8, nqueens_common::Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.5).unwrap().id;
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        store.rewrite_run_record(run, |r| {
            r.replace("\"verify_fraction\"", "\"verify_fractiom\"")
        });
        match check(&store, dir.path()) {
            Err(Error::Corrupt(why)) => assert!(why.contains("different runs"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    /// A ledger that quarantines other workers than the store fails the check: the ledger alone would
    /// not rebuild the store's quarantines (or a release).
    #[test]
    fn a_ledger_without_the_stores_quarantine_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        assert!(store.release_quarantine("liar").unwrap());
        match check(&store, dir.path()) {
            Err(Error::Corrupt(why)) => assert!(why.contains("\"liar\""), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    /// A run of no jobs (N = 2 or 3: done as created) exports and imports done: the import failed its
    /// audit ("0 of 0 jobs done but the run is not marked done"), leaving a half-built store. Found by a
    /// review, 2026-11-24.
    #[test]
    fn a_run_of_no_jobs_is_restored_done() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = nqueens_common::Plan::new(3, nqueens_common::Strategy::D4).unwrap();
        assert!(store.create_run(plan, 0.0).unwrap().is_done());
        let (_target, restored, _) = restored_from_an_export(&store, dir.path());
        assert!(restored.runs().unwrap()[0].is_done());
        restored.audit().unwrap();
    }

    /// A file holding a quarantine whose revocation never ran (the liar's unconfirmed results still
    /// among its result lines) is restored with the revocation completed, as a start would: the import
    /// said "audit passed" with the liar's results counted. Found by a review, 2026-11-24.
    #[test]
    fn a_restore_completes_the_revocation_of_its_quarantines() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        assert_eq!(store.tally(1).unwrap().jobs, 4);
        let (_target, restored, _) = restored_from_an_export(&store, dir.path());
        assert!(restored.unrevoked_quarantines().unwrap().is_empty());
        assert_eq!(
            restored.tally(1).unwrap().jobs,
            2,
            "the liar's two taken back"
        );
        restored.audit().unwrap();
    }

    /// Two exports joined (`cat a b`), the second cut short at a line boundary: its header opens an
    /// export that must end too, so the cut is damage (found by a second review, 2026-11-24: the first
    /// export's end line let the second pass).
    #[test]
    fn a_second_export_cut_short_after_a_whole_one_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        let mut export = Vec::new();
        ledger::export(&store, None, &mut export).unwrap();
        let lines: Vec<&[u8]> = export.split_inclusive(|&b| b == b'\n').collect();
        let mut joined = export.clone();
        joined.extend(lines[..lines.len() - 1].concat());
        let path = dir.path().join("joined.jsonl");
        std::fs::write(&path, &joined).unwrap();
        let view = LedgerView::read(&path).unwrap();
        assert!(
            view.damaged.iter().any(|d| d.reason.contains("cut short")),
            "{:?}",
            view.damaged
        );
        export.extend(export.clone());
        std::fs::write(&path, &export).unwrap();
        assert!(
            LedgerView::read(&path).unwrap().damaged.is_empty(),
            "two whole ones"
        );
    }

    /// An export of the version before export format 2 (no header, no end line) still imports whole,
    /// quarantines included.
    #[test]
    fn an_export_of_format_1_imports() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        let mut export = Vec::new();
        ledger::export(&store, None, &mut export).unwrap();
        let lines: Vec<&[u8]> = export.split_inclusive(|&b| b == b'\n').collect();
        let framed = |l: &[u8]| {
            let text = String::from_utf8_lossy(l);
            text.contains("\"kind\":\"export\"") || text.contains("\"kind\":\"end\"")
        };
        assert_eq!(lines.iter().filter(|l| framed(l)).count(), 2);
        let old: Vec<u8> = lines
            .into_iter()
            .filter(|l| !framed(l))
            .flatten()
            .copied()
            .collect();
        let path = dir.path().join("format-1.jsonl");
        std::fs::write(&path, &old).unwrap();
        let view = LedgerView::read(&path).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        assert_eq!(view.export_whole, None);
        let target = tempfile::tempdir().unwrap();
        let restored = Store::open(target.path()).unwrap();
        assert_eq!(restore(&restored, &view).unwrap(), 2);
        assert_eq!(
            restored.quarantined().unwrap(),
            store.quarantined().unwrap()
        );
        restored.audit().unwrap();
    }

    /// Everything a store holds that an import may change: its export (runs, results, quarantines) and
    /// each run's job states.
    fn contents(store: &Store) -> String {
        let mut out = Vec::new();
        ledger::export(store, None, &mut out).unwrap();
        let mut text = String::from_utf8(out).unwrap();
        for run in store.runs().unwrap() {
            let mut states: Vec<_> = store.job_states(run.id).unwrap().into_iter().collect();
            states.sort_by_key(|(s, _)| format!("{s:?}"));
            text += &format!("{states:?}\n");
        }
        text
    }

    /// A restore that is refused changes nothing: here the file's run 1 is another run than the store's
    /// run 1. Before, the file's quarantines were written first, so a refused import left a worker of
    /// the file quarantined in the store (and, past a first run that fitted, that run restored).
    #[test]
    fn a_refused_restore_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        let view = exported(&store, dir.path());
        let target = tempfile::tempdir().unwrap();
        let other = Store::open(target.path()).unwrap();
        let plan = nqueens_common::Plan::new(6, nqueens_common::Strategy::Mirror).unwrap();
        other.create_run(plan, 0.0).unwrap();
        let before = contents(&other);
        let refused = restore(&other, &view);
        assert!(other.quarantined().unwrap().is_empty());
        assert_eq!(contents(&other), before);
        match refused {
            Err(Error::Invalid(why)) => {
                assert!(
                    why.contains("run 1") && why.contains("another run"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    /// A result the file holds for a job outside its run's plan (a line forged with a valid checksum) is
    /// refused before anything is written: before, the file's quarantines and the run were restored,
    /// then the batch failed, leaving a half-built store.
    #[test]
    fn a_result_outside_the_plan_is_refused_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        let mut view = exported(&store, dir.path());
        let results = view.results.get_mut(&1).unwrap();
        let (key, record) = results
            .iter()
            .next()
            .map(|(k, r)| (k.clone(), r.clone()))
            .unwrap();
        let mut outside = key.clone();
        outside.0[0] = 200;
        results.insert(outside, record);
        let target = tempfile::tempdir().unwrap();
        let restored = Store::open(target.path()).unwrap();
        assert!(restore(&restored, &view).is_err());
        assert!(restored.runs().unwrap().is_empty());
        assert!(restored.quarantined().unwrap().is_empty());
    }

    /// A file's result that no report could have been (a total past the bounds of its nodes, an
    /// identity with a control character) or, in a record run, a count one identity stands behind,
    /// each sealed anew (a seal is a CRC anyone computes), is refused before anything is written.
    /// Before, a file's result was held to its seal and shape alone: the import counted it (found by
    /// a review, 2026-12-01).
    #[test]
    fn a_forged_result_is_refused_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        let fingerprint = exported(&store, dir.path()).runs[&1]
            .fingerprint_value()
            .unwrap();
        let forged = |change: &dyn Fn(&mut LedgerView, &mut ResultRecord)| {
            let mut view = exported(&store, dir.path());
            let (key, mut record) = view.results[&1]
                .iter()
                .next()
                .map(|(k, r)| (k.clone(), r.clone()))
                .unwrap();
            change(&mut view, &mut record);
            record.seal = Some(nqueens_common::checksum::seal(
                fingerprint,
                &key,
                &record.result,
            ));
            view.results.get_mut(&1).unwrap().insert(key, record);
            let target = tempfile::tempdir().unwrap();
            let restored = Store::open(target.path()).unwrap();
            let refused = restore(&restored, &view);
            assert!(restored.runs().unwrap().is_empty());
            assert!(restored.quarantined().unwrap().is_empty());
            match refused {
                Err(Error::Corrupt(why)) => why,
                other => panic!("{other:?}"),
            }
        };
        let why = forged(&|_, r| r.result.total += 1_000_000_000);
        assert!(
            why.contains("not imported") && why.contains("nodes"),
            "{why}"
        );
        let why = forged(&|_, r| r.worker = "a\u{7}b".into());
        assert!(why.contains("never takes"), "{why}");
        let why = forged(&|_, r| r.confirmed_by = vec!["c\nd".into()]);
        assert!(why.contains("never takes"), "{why}");
        let why = forged(&|v, r| {
            v.runs.get_mut(&1).unwrap().record = true;
            r.confirmed_by.clear();
        });
        assert!(why.contains("second identity"), "{why}");
        // Unforged, it imports.
        let target = tempfile::tempdir().unwrap();
        let view = exported(&store, dir.path());
        restore(&Store::open(target.path()).unwrap(), &view).unwrap();
    }

    /// A restore cut short (a crash, a full disk) is completed by the same restore again: a run the store
    /// already holds as the file has it is kept, and its results already there are skipped. Before, the
    /// second import was refused ("run 1 exists already"), and the half-restored run could not be
    /// completed from the file.
    #[test]
    fn a_restore_again_completes_a_restore_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let store = a_quarantine_not_revoked(dir.path());
        store.revoke("liar").unwrap();
        store.flush().unwrap();
        let (target, restored, results) = restored_from_an_export(&store, dir.path());
        assert_eq!(results, 2);
        let whole = contents(&restored);
        let view = LedgerView::read(&dir.path().join("backup.jsonl")).unwrap();
        // Cut short: one of the run's results is missing from the store.
        let (key, _) = restored.results(1).next().unwrap().unwrap();
        let mut partial = LedgerView::read(&dir.path().join("backup.jsonl")).unwrap();
        partial.results.get_mut(&1).unwrap().remove(&key);
        let half = tempfile::tempdir().unwrap();
        let half_store = Store::open(half.path()).unwrap();
        assert_eq!(restore(&half_store, &partial).unwrap(), 1);
        assert_eq!(restore(&half_store, &view).unwrap(), 1);
        assert_eq!(contents(&half_store), whole);
        assert_eq!(restore(&restored, &view).unwrap(), 0, "again: nothing new");
        assert_eq!(contents(&restored), whole);
        drop(target);
    }

    /// An export imported into the directory it came from, after a later result disputed one of its
    /// counts: the store's dispute stands, the export's count is not restored, and nobody is
    /// quarantined. Before, the import counted the disputed result again (a wrong total, for good) and
    /// quarantined the worker whose different result had disputed it (found by a review, 2026-11-30).
    /// The same for a count whose worker the store has quarantined since.
    #[test]
    fn an_import_does_not_restore_a_count_the_store_took_back_since_its_export() {
        use crate::durable::store::tests::{by, incoming_from};
        use crate::durable::store::Outcome;
        use nqueens_common::{Plan, Strategy};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let job = incoming_from(run.id, &plan, 0, "x");
        store.commit(&[by(&plan, "x", job.clone(), 8)]).unwrap();
        let old = exported(&store, dir.path());
        assert_eq!(
            store.commit(&[by(&plan, "y", job, 0)]).unwrap().outcomes,
            vec![Outcome::Disputed]
        );
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        assert_eq!(restore(&store, &old).unwrap(), 0);
        assert!(store.quarantined().unwrap().is_empty());
        assert_eq!(store.tally(run.id).unwrap().jobs, 0);
        check(&store, dir.path()).unwrap();
        // Its worker quarantined since (the job pending again, no record of it): x's count is not
        // restored, the revocation having noted it (before, it was restored, then taken back again
        // by the quarantine's revocation, which every import completes).
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let job = incoming_from(run.id, &plan, 0, "x");
        store.commit(&[by(&plan, "x", job.clone(), 8)]).unwrap();
        let old = exported(&store, dir.path());
        quarantined_and_revoked(&store, "x");
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        assert_eq!(restore(&store, &old).unwrap(), 0);
        assert_eq!(store.tally(run.id).unwrap().jobs, 0);
        let names: Vec<String> = store.quarantined_names();
        assert_eq!(names, ["x"]);
        check(&store, dir.path()).unwrap();
    }

    /// An export imported into the directory it came from, after the store took one of its record
    /// counts back (z's, confirmed by y; y quarantined: one trusted identity left behind it) and another
    /// worker's different result came for the job: the store's side stands, the export's count is not
    /// restored, and the later worker is not quarantined by it. Before, the count was restored (the
    /// job's record did not list it, and its own worker was not quarantined), its restore quarantined
    /// x for disagreeing, and the final revocation took it back again: x, honest or not, quarantined
    /// for good by an old file (found by a review, 2026-12-01).
    #[test]
    fn an_import_does_not_restore_a_record_count_taken_back_for_its_confirmer() {
        use crate::durable::store::tests::{another_record_run, by, incoming_from};
        use crate::durable::store::{JobState, Outcome};
        use nqueens_common::{Plan, Strategy};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = another_record_run(&store, plan);
        let job = incoming_from(run.id, &plan, 0, "y");
        let first = store.commit(&[by(&plan, "y", job.clone(), 8)]).unwrap();
        assert_eq!(first.outcomes, vec![Outcome::Pending]);
        let second = store.commit(&[by(&plan, "z", job.clone(), 8)]).unwrap();
        assert_eq!(second.outcomes, vec![Outcome::Accepted]);
        let old = exported(&store, dir.path());
        let counted = store.result(run.id, &job.key).unwrap().unwrap();
        assert_eq!(
            (counted.worker.as_str(), &counted.confirmed_by[..]),
            ("z", &["y".to_string()][..])
        );
        quarantined_and_revoked(&store, "y");
        assert_eq!(store.tally(run.id).unwrap().jobs, 0, "one identity left");
        let later = store.commit(&[by(&plan, "x", job.clone(), 0)]).unwrap();
        assert_eq!(later.outcomes, vec![Outcome::Pending]);
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        assert_eq!(restore(&store, &old).unwrap(), 0);
        let names: Vec<String> = store.quarantined_names();
        assert_eq!(names, ["y"], "x is not quarantined by the old count");
        assert_eq!(store.tally(run.id).unwrap().jobs, 0);
        let record = store.job(run.id, &job.key).unwrap().unwrap();
        assert_eq!(record.state, JobState::Verifying);
        assert!(record.computed_by("x"));
        check(&store, dir.path()).unwrap();
        // Counted since by x and w, differently: the store's count stands, the import skips the
        // file's. (Before, it was refused whole, "two different results".)
        let counted = store.commit(&[by(&plan, "w", job.clone(), 0)]).unwrap();
        assert_eq!(counted.outcomes, vec![Outcome::Accepted]);
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        assert_eq!(restore(&store, &old).unwrap(), 0);
        assert_eq!(store.result(run.id, &job.key).unwrap().unwrap().worker, "w");
        assert_eq!(store.quarantined_names(), ["y"]);
        check(&store, dir.path()).unwrap();
    }

    /// An export imported into the directory it came from, after a held checker's undecided end took
    /// back a lie it had contradicted (the checker made whole, the lie's job pending: no record of
    /// it): the lie is not restored. Before, nothing in the store showed the job had held it, the
    /// import counted it again, and the final revocation (of a whole checker, listing nothing) left
    /// it counted: the record run's lie stood, for good (found by a review, 2026-12-01). Nor is the
    /// checker's own record count, which its quarantine took back.
    #[test]
    fn an_import_does_not_restore_a_lie_a_held_checkers_undecided_end_took_back() {
        use crate::durable::store::tests::a_check_of_two_lies_in;
        use nqueens_common::{Plan, Strategy};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let (run, j1, j2) = a_check_of_two_lies_in(&store, plan);
        let old = exported(&store, dir.path());
        assert!(
            old.results[&run].contains_key(&j2.key),
            "the kept lie, counted"
        );
        store.fail_job(run, &j1.key, "test").unwrap();
        store.revoke("h").unwrap();
        assert!(store.result(run, &j2.key).unwrap().is_none());
        assert!(store.job(run, &j2.key).unwrap().is_none(), "pending");
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        let jobs = store.tally(run).unwrap().jobs;
        assert_eq!(restore(&store, &old).unwrap(), 0);
        assert!(
            store.result(run, &j2.key).unwrap().is_none(),
            "the lie is not restored"
        );
        assert_eq!(store.tally(run).unwrap().jobs, jobs);
        check(&store, dir.path()).unwrap();
    }

    /// An export imported into the directory it came from, after one of its record counts (x's lie,
    /// y's confirmation) was taken back into a dispute by h's different result (h held), the job
    /// failed (its leases left to expire; h made whole) and the operator retried it (pending, no
    /// record): the lie is not restored. Before, a dispute's take-back left no note, the retry dropped
    /// its record, and the import counted the lie again, for good (found by a review, 2026-12-01).
    #[test]
    fn an_import_does_not_restore_a_count_whose_dispute_failed_and_was_retried() {
        use crate::durable::store::tests::{another_record_run, by, incoming_from};
        use crate::durable::store::Outcome;
        use nqueens_common::{Plan, Strategy};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = another_record_run(&store, plan);
        let job = incoming_from(run.id, &plan, 0, "x");
        for (name, want) in [("x", Outcome::Pending), ("y", Outcome::Accepted)] {
            let out = store.commit(&[by(&plan, name, job.clone(), 8)]).unwrap();
            assert_eq!(out.outcomes, vec![want], "{name}");
        }
        let old = exported(&store, dir.path());
        let disputed = store.commit(&[by(&plan, "h", job.clone(), 0)]).unwrap();
        assert_eq!(disputed.disputed.len(), 1, "the count taken back");
        store.fail_job(run.id, &job.key, "test").unwrap();
        store.revoke("h").unwrap();
        assert_eq!(
            store.retry_failed_of(run.id).unwrap(),
            vec![job.key.clone()]
        );
        assert!(store.job(run.id, &job.key).unwrap().is_none(), "pending");
        store.flush().unwrap();
        ledger::rewrite(&dir.path().join(LEDGER_FILE), &store).unwrap();
        check(&store, dir.path()).unwrap();
        assert_eq!(restore(&store, &old).unwrap(), 0);
        assert!(
            store.result(run.id, &job.key).unwrap().is_none(),
            "the lie is not restored"
        );
        check(&store, dir.path()).unwrap();
    }

    /// Against the store's notes, an older file's count (x's, taken back since) is superseded
    /// whatever the store holds for its job now: a different count of x's own (x released and
    /// counting anew), the same count of another's, or a count damaged on disk. Before the notes,
    /// the first was a conflict (the start and the import refused), the second took the store's copy
    /// for damaged, and the third restored x's count in the damaged one's place.
    #[test]
    fn an_older_files_count_the_store_took_back_is_superseded_whatever_stands_now() {
        use crate::durable::store::tests::{by, incoming_from};
        use nqueens_common::{Plan, Strategy};
        let taken_back = |now: &dyn Fn(&Store, &Plan, &crate::durable::store::Incoming)| {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let plan = Plan::new(8, Strategy::D4).unwrap();
            let run = store.create_run(plan, 0.0).unwrap();
            let job = incoming_from(run.id, &plan, 0, "x");
            store.commit(&[by(&plan, "x", job.clone(), 8)]).unwrap();
            let old = exported(&store, dir.path());
            quarantined_and_revoked(&store, "x");
            now(&store, &plan, &job);
            let meta = store.run(run.id).unwrap().unwrap();
            let diff = ledger::compare(&store, &meta, &old).unwrap();
            assert_eq!(diff.superseded, std::slice::from_ref(&job.key), "{diff:?}");
            assert!(
                diff.conflicting.is_empty() && diff.ledger_only.is_empty(),
                "{diff:?}"
            );
            diff
        };
        let anew = |store: &Store, plan: &Plan, job: &crate::durable::store::Incoming| {
            assert!(store.release_quarantine("x").unwrap());
            let mut again = by(plan, "x", job.clone(), 0);
            again.lease += 1;
            store.commit(&[again]).unwrap();
        };
        assert!(taken_back(&anew).damaged.is_empty());
        let another = |store: &Store, plan: &Plan, job: &crate::durable::store::Incoming| {
            assert!(store.release_quarantine("x").unwrap());
            store.commit(&[by(plan, "y", job.clone(), 8)]).unwrap();
        };
        assert!(taken_back(&another).damaged.is_empty());
        let damaged = |store: &Store, plan: &Plan, job: &crate::durable::store::Incoming| {
            store.commit(&[by(plan, "y", job.clone(), 0)]).unwrap();
            let mut record = store.result(job.run, &job.key).unwrap().unwrap();
            record.result.total += 1;
            store.damage_result(job.run, &job.key, &record);
        };
        assert_eq!(taken_back(&damaged).damaged.len(), 1);
    }

    /// An import of a ledger notes its take-back lines: an older export imported after it brings
    /// none of those counts back. (Exports carry none.)
    #[test]
    fn an_import_of_a_ledger_notes_its_take_backs() {
        use crate::durable::ledger::{Entry, Ledger};
        use crate::durable::store::tests::{by, incoming_from};
        use nqueens_common::{Plan, Strategy};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 0.0).unwrap();
        let job = incoming_from(run.id, &plan, 0, "x");
        store.commit(&[by(&plan, "x", job.clone(), 8)]).unwrap();
        let old = exported(&store, dir.path());
        let path = dir.path().join(LEDGER_FILE);
        ledger::rewrite(&path, &store).unwrap();
        let record = store.result(run.id, &job.key).unwrap().unwrap();
        let view = LedgerView::read(&path).unwrap();
        let mut appended = Ledger::open(&path, view.len, view.next_worker).unwrap();
        appended
            .append(&[Entry::Revoked {
                run: run.id,
                job: job.key.to_string(),
                worker: "x".into(),
                record: Some(record.clone()),
            }])
            .unwrap();
        drop(appended);
        let view = LedgerView::read(&path).unwrap();
        assert!(view.damaged.is_empty(), "{:?}", view.damaged);
        let target = tempfile::tempdir().unwrap();
        let fresh = Store::open(target.path()).unwrap();
        restore(&fresh, &view).unwrap();
        assert!(fresh
            .was_taken_back(run.id, &job.key, record.lease)
            .unwrap());
        assert_eq!(restore(&fresh, &old).unwrap(), 0);
        assert!(fresh.result(run.id, &job.key).unwrap().is_none());
    }

    /// The file's own quarantines are its past, not the store's: an import into a directory behind
    /// the file (y's result held there for a check; in the file, x's result confirmed it, counted as
    /// x's, then x quarantined, the confirmed count kept) restores the confirmed count. Before, the file's quarantine was
    /// joined first and made the store's open record look like a count the store took back: the job
    /// was computed again (found by a review, 2026-11-30).
    #[test]
    fn an_import_judges_what_the_store_took_back_by_the_stores_own_quarantines() {
        use crate::durable::store::tests::{by, incoming_from};
        use crate::durable::store::Outcome;
        use nqueens_common::{Plan, Strategy};
        let (behind, ahead) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let (run, job) = {
            let store = Store::open(ahead.path()).unwrap();
            let run = store.create_run(plan, 1.0).unwrap();
            let job = incoming_from(run.id, &plan, 0, "y");
            let held = store.commit(&[by(&plan, "y", job.clone(), 0)]).unwrap();
            assert_eq!(held.outcomes, vec![Outcome::Pending]);
            store.flush().unwrap();
            (run.id, job)
        };
        let copy = |from: &Path, to: &Path| {
            for entry in walk(from) {
                let rel = entry.strip_prefix(from).unwrap();
                let dest = to.join(rel);
                if entry.is_dir() {
                    std::fs::create_dir_all(&dest).unwrap();
                } else {
                    std::fs::copy(&entry, &dest).unwrap();
                }
            }
        };
        copy(ahead.path(), behind.path());
        let store =
            Store::open_when_free(ahead.path(), std::time::Duration::from_secs(30)).unwrap();
        let confirmed = store.commit(&[by(&plan, "x", job.clone(), 0)]).unwrap();
        assert_eq!(confirmed.outcomes, vec![Outcome::Accepted]);
        assert_eq!(store.result(run, &job.key).unwrap().unwrap().worker, "x");
        quarantined_and_revoked(&store, "x");
        assert_eq!(store.tally(run).unwrap().jobs, 1, "confirmed by y: kept");
        let file = exported(&store, ahead.path());
        let older =
            Store::open_when_free(behind.path(), std::time::Duration::from_secs(30)).unwrap();
        assert_eq!(older.tally(run).unwrap().jobs, 0);
        restore(&older, &file).unwrap();
        assert_eq!(older.tally(run).unwrap().jobs, 1);
    }

    /// Quarantines `worker` in `store` (shown wrong elsewhere) and takes its unconfirmed counts back.
    fn quarantined_and_revoked(store: &Store, worker: &str) {
        store
            .restore_quarantine(&crate::durable::store::Quarantine {
                worker: worker.into(),
                reason: "disproved elsewhere".into(),
                at_unix: 1,
                by: vec!["z".into()],
                held: false,
                contradicted: Vec::new(),
            })
            .unwrap();
        store.revoke(worker).unwrap();
    }

    /// Every path under `dir`, parents before children.
    fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.clone());
            if path.is_dir() {
                out.extend(walk(&path));
            }
        }
        out
    }
}
