//! What the coordinator's end-to-end tests share: creating a run, leasing as a worker, a leased job's
//! true result as an honest worker reports it, and a run's status.

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
        family: 0,
    }
}

/// One run's status.
pub async fn status(c: &mut Client, run: &str) -> proto::RunStatus {
    c.get_run(proto::GetRunRequest { run: run.into() })
        .await
        .unwrap()
        .into_inner()
}

/// A d4 run of N = `n` that verifies `verify_fraction` of its jobs.
pub async fn create_verified(c: &mut Client, n: u32, verify_fraction: f64) -> proto::RunStatus {
    c.create_run(proto::CreateRunRequest {
        n,
        strategy: proto::Strategy::D4 as i32,
        depth: None,
        reuse: false,
        verify_fraction: Some(verify_fraction),
        priority: 0,
        record: false,
        max_error: None,
    })
    .await
    .unwrap()
    .into_inner()
}

/// Leases as a worker of one thread, named and identified `worker`.
pub async fn lease(c: &mut Client, worker: &str, capacity: u32) -> Vec<proto::JobLease> {
    lease_with_gpus(c, worker, capacity, 0).await
}

/// Leases as a worker of one thread and `gpus` GPUs.
pub async fn lease_with_gpus(
    c: &mut Client,
    worker: &str,
    capacity: u32,
    gpus: u32,
) -> Vec<proto::JobLease> {
    c.lease(proto::LeaseRequest {
        gpus,
        ..lease_request(worker, capacity)
    })
    .await
    .unwrap()
    .into_inner()
    .leases
}

/// A Lease request of one thread, no GPU, for `capacity` jobs of any run, answered at once.
pub fn lease_request(worker: &str, capacity: u32) -> proto::LeaseRequest {
    proto::LeaseRequest {
        worker_id: worker.into(),
        worker_name: worker.into(),
        threads: 1,
        capacity,
        run: None,
        wait_ms: 0,
        gpus: 0,
        gpu_kernels: Vec::new(),
    }
}
