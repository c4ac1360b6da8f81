//! What the coordinator's end-to-end tests share: a leased job's true result, as an honest worker
//! reports it, and a run's status.

use nqueens_common::checksum::seal;
use nqueens_common::{JobKey, Plan, Strategy};
use nqueens_proto as proto;
use nqueens_proto::Client;

/// The true, sealed result of a leased job (d4), as an honest worker reports it.
pub fn result_of(l: &proto::JobLease) -> proto::JobResult {
    let plan = Plan::with_depth(l.n, Strategy::D4, l.depth as u8).unwrap();
    let key: JobKey = l.job.parse().unwrap();
    let r = plan.job(&key).unwrap().run();
    proto::JobResult {
        lease_id: l.lease_id,
        run: l.run.clone(),
        n: l.n,
        job: l.job.clone(),
        total: r.total,
        unique8: r.unique8,
        nodes: r.nodes,
        seal: Some(seal(l.plan_fingerprint, &key, &r)),
        lease_tag: l.lease_tag,
        device: None,
    }
}

/// One run's status.
pub async fn status(c: &mut Client, run: &str) -> proto::RunStatus {
    c.get_run(proto::GetRunRequest { run: run.into() })
        .await
        .unwrap()
        .into_inner()
}
