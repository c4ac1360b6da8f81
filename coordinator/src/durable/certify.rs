//! A finished run's certificate lines and header, read from the store in the plan's order (the format
//! is `nqueens_common::certificate`): what `nqueens certificate` writes, and the root the coordinator
//! logs and shows once a run finishes.

use nqueens_common::certificate::{Builder, Header};

use crate::durable::store::{now_unix, RunMeta, Store};
use crate::error::{Error, Result};

/// Whether `meta` may have a certificate: finished, and not cancelled.
pub fn check_finished(meta: &RunMeta) -> Result<()> {
    if meta.is_cancelled() {
        return Err(Error::Invalid(format!(
            "run {} was cancelled: its totals are partial and get no certificate",
            meta.id
        )));
    }
    if !meta.is_done() {
        return Err(Error::Invalid(format!(
            "run {} is not finished: a certificate is written for a run whose every job has a result",
            meta.id
        )));
    }
    Ok(())
}

/// Reads every result of the finished run `meta` in the plan's order, checks its seal (and, for a
/// record run, its confirmation by a second identity), hands each job line to `line`, and returns the
/// header. Ends early, with the error, once `line` fails.
pub fn build(
    store: &Store,
    meta: &RunMeta,
    mut line: impl FnMut(&str) -> std::io::Result<()>,
) -> Result<Header> {
    let refuse = |why: String| Error::Corrupt(format!("run {}: {why}", meta.id));
    check_finished(meta)?;
    let plan = meta.plan()?;
    let fingerprint = meta.fingerprint_value()?;
    let mut builder = Builder::new(plan.strategy());
    for key in plan.jobs() {
        let Some(record) = store.result(meta.id, &key)? else {
            return Err(refuse(format!(
                "job {key} has no result, though the run is finished; run `nqueens audit`"
            )));
        };
        if !record.sealed(fingerprint, &key) {
            return Err(refuse(format!(
                "the result of job {key} does not match its seal; run `nqueens audit`"
            )));
        }
        if meta.record && !record.confirmed_by.iter().any(|n| *n != record.worker) {
            return Err(refuse(format!(
                "a record run, but job {key} has no result confirmed by a second identity; run `nqueens audit`"
            )));
        }
        let by = std::iter::once(record.worker.as_str())
            .chain(record.confirmed_by.iter().map(String::as_str))
            .enumerate()
            .map(|(i, name)| (name, record.family_at(i)));
        let text = builder
            .line(&key, &record.result, by)
            .map_err(|e| refuse(e.to_string()))?;
        line(&text).map_err(|e| Error::io("writing the certificate", e))?;
    }
    let header = builder
        .header(
            meta.id,
            &plan,
            meta.fingerprint.clone(),
            meta.finished_unix,
            now_unix(),
            meta.record,
        )
        .map_err(|e| refuse(e.to_string()))?;
    if header.jobs != meta.jobs_total {
        return Err(refuse(format!(
            "{} jobs in the plan, {} recorded",
            header.jobs, meta.jobs_total
        )));
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use nqueens_common::{Plan, Strategy};

    use super::*;
    use crate::durable::store::tests::incoming_from;
    use crate::durable::store::{Control, RunOptions};

    /// A run not finished, or cancelled, gets no certificate; a record run's every line must hold a
    /// second identity's confirmation; a record run so confirmed gets one (killed the mutants that
    /// passed every run, and the record rule's, issue 42).
    #[test]
    fn only_a_finished_run_gets_a_certificate_and_a_record_needs_two_identities() {
        let store = Store::temporary().unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let (jobs, fingerprint) = plan.fingerprint();
        let record = RunOptions {
            verify_fraction: 1.0,
            record: true,
            ..RunOptions::default()
        };
        let run = store.insert_run(plan, jobs, fingerprint, record).unwrap();
        let refused = |meta: &RunMeta, why: &str| {
            let e = build(&store, meta, |_| Ok(())).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        };
        refused(&run, "not finished");
        let keys = plan.jobs().count();
        for name in ["a", "b"] {
            let batch: Vec<_> = (0..keys)
                .map(|i| incoming_from(run.id, &plan, i, name))
                .collect();
            store.commit(&batch).unwrap();
        }
        let done = store.runs().unwrap().remove(0);
        assert!(done.is_done());
        let header = build(&store, &done, |_| Ok(())).unwrap();
        assert_eq!(header.total, "92");
        // A result whose only confirmation names its own worker is no second identity.
        let key = plan.jobs().next().unwrap();
        let mut own = store.result(run.id, &key).unwrap().unwrap();
        own.confirmed_by = vec![own.worker.clone()];
        store.damage_result(run.id, &key, &own);
        refused(&done, "confirmed by a second identity");
        // A cancelled run: no certificate, whatever it holds.
        let plain = store.create_run(plan, 0.0).unwrap();
        let cancelled = store.control(plain.id, Control::Cancel).unwrap();
        refused(&cancelled, "cancelled");
    }

    /// Issue 38: each certificate line names the kernel family each identity stated (`-` for none),
    /// and the header counts the jobs computed by two families.
    #[test]
    fn certificate_lines_name_the_families_that_computed_each_job() {
        use nqueens_common::Family;
        let store = Store::temporary().unwrap();
        let plan = Plan::new(8, Strategy::D4).unwrap();
        let (jobs, fingerprint) = plan.fingerprint();
        let options = RunOptions {
            verify_fraction: 1.0,
            ..RunOptions::default()
        };
        let run = store.insert_run(plan, jobs, fingerprint, options).unwrap();
        let keys = plan.jobs().count();
        for (name, family) in [("a", Some(Family::Gpu)), ("b", Some(Family::CpuLists))] {
            let batch: Vec<_> = (0..keys)
                .map(|i| crate::durable::store::Incoming {
                    // b states no family for job 0.
                    family: family.filter(|_| !(i == 0 && name == "b")),
                    ..incoming_from(run.id, &plan, i, name)
                })
                .collect();
            store.commit(&batch).unwrap();
        }
        let done = store.runs().unwrap().remove(0);
        let mut lines = Vec::new();
        let header = build(&store, &done, |l| {
            lines.push(l.to_string());
            Ok(())
        })
        .unwrap();
        assert!(lines[0].ends_with(" 0,1 -,gpu"), "{}", lines[0]);
        assert!(lines[1].ends_with(" 0,1 cpu-lists,gpu"), "{}", lines[1]);
        assert_eq!(header.two_families, keys as u64 - 1);
        assert_eq!(header.identities, ["b", "a"]);
    }
}
