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
            .chain(record.confirmed_by.iter().map(String::as_str));
        let text = builder
            .line(&key, &record.result, by)
            .map_err(|e| refuse(e.to_string()))?;
        line(&text).map_err(|e| Error::Io(format!("writing the certificate: {e}")))?;
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
