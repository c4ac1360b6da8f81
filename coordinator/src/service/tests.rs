//! Unit tests of the coordinator's state machine in process (leases, heartbeats, expiry, reports, late
//! and duplicate results), on tokio's paused clock: no server, no network, no real sleeps.

use std::time::Duration;

use tokio::time::Instant;

use nqueens_common::checksum::seal;
use nqueens_common::{Job, JobKey, Strategy};

use super::grant::Granted;
use super::lease::Ask;
use super::report::Report;
use super::workers::Gpus;
use super::{Config, Coordinator, RunView};
use crate::durable::store::{Control, Outcome, Store};
use crate::error::Error;
use nqueens_common::names::MAX_GPU_SHAPES;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Q(8): the total every run of N = 8 must end with.
const Q8: u128 = 92;

fn coordinator() -> Coordinator {
    let config = Config {
        lease_timeout: TIMEOUT,
        max_attempts: 3,
        ..Config::default()
    };
    Coordinator::open(Store::temporary().unwrap(), config).unwrap()
}

/// A coordinator whose draw of who gives a verified job its second result admits every identity (a
/// wait of zero: `steer::Steer::admits`): for tests of other rules, whose many identities stop asking
/// while staying live and whose time (the results' wall clock) never reaches a period's end.
fn coordinator_admitting_all() -> Coordinator {
    let config = Config {
        lease_timeout: TIMEOUT,
        max_attempts: 3,
        ..admitting_all()
    };
    Coordinator::open(Store::temporary().unwrap(), config).unwrap()
}

/// The default configuration, but for a draw that admits every identity (see
/// [`coordinator_admitting_all`]): for tests that hand a verified job to a named identity.
fn admitting_all() -> Config {
    Config {
        family_wait: Duration::ZERO,
        ..Config::default()
    }
}

/// A run of N = 13, split two rows deep (hundreds of jobs), nothing verified.
async fn run_of_13(c: &Coordinator) -> RunView {
    c.create_run(13, Strategy::D4, Some(2), Some(0.0), 0, false)
        .await
        .unwrap()
}

async fn run_of_8(c: &Coordinator) -> String {
    c.create_run(8, Strategy::D4, None, Some(0.0), 0, false)
        .await
        .unwrap()
        .id()
}

/// A run of N = 8 that verifies every job.
async fn verified_run_of_8(c: &Coordinator) -> String {
    c.create_run(8, Strategy::D4, None, Some(1.0), 0, false)
        .await
        .unwrap()
        .id()
}

fn ask<'a>(worker: &'a str, capacity: u32) -> Ask<'a> {
    Ask {
        worker,
        name: worker,
        label: worker,
        credential: false,
        threads: 1,
        gpus: 0,
        gpu_kernels: &[],
        capacity,
        only: None,
    }
}

async fn lease(c: &Coordinator, worker: &str, capacity: u32) -> Vec<Granted> {
    c.lease(&ask(worker, capacity), Duration::ZERO)
        .await
        .unwrap()
        .leases
}

/// The honest, sealed report of a lease.
fn report(g: &Granted) -> Report {
    let result = Job::new(g.plan, g.key.clone()).unwrap().run();
    Report {
        lease: g.id,
        run: g.run.to_string(),
        n: u32::from(g.plan.n()),
        job: g.key.to_string(),
        seal: Some(seal(g.fingerprint, &g.key, &result)),
        result,
        tag: g.tag,
        device: None,
        family: None,
    }
}

/// A sealed report of a count that is wrong yet plausible: one class of eight solutions more on both
/// counts, as a fault in the search itself would give (a count that contradicts itself is refused
/// before any comparison: see `a_result_whose_counts_contradict_each_other_is_refused`).
fn lying(g: &Granted) -> Report {
    lying_by(g, 1)
}

/// [`lying`], the `k`th of lies that differ from one another: `k - 1` nodes more. (Not more solutions:
/// a job of few nodes has room for few, and a count past it is refused as implausible.)
fn lying_by(g: &Granted, k: u64) -> Report {
    let mut lie = report(g);
    lie.result.total += 8;
    lie.result.unique8 = lie.result.unique8.map(|u| u + 8);
    lie.result.nodes += k - 1;
    lie.seal = Some(seal(g.fingerprint, &g.key, &lie.result));
    lie
}

/// Reports every lease of `held` honestly as the worker credential `name`, each result held for a
/// check (`Pending`).
async fn reported_for_a_check(c: &Coordinator, name: &str, held: &[Granted]) {
    let outcomes = c
        .report_as(name, name, true, held.iter().map(report).collect())
        .await
        .unwrap();
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Pending),
        "{outcomes:?}"
    );
}

/// Reports every lease honestly as `worker`; returns the outcomes.
async fn report_all(c: &Coordinator, worker: &str, leases: &[Granted]) -> Vec<Outcome> {
    c.report(worker, worker, leases.iter().map(report).collect())
        .await
        .unwrap()
}

/// Reports every lease of `held` honestly as `worker`, each result stating kernel family `family`;
/// returns the outcomes.
async fn report_of_family(
    c: &Coordinator,
    worker: &str,
    held: &[Granted],
    family: nqueens_common::Family,
) -> Vec<Outcome> {
    let reports = held
        .iter()
        .map(|g| Report {
            family: Some(family),
            ..report(g)
        })
        .collect();
    c.report(worker, worker, reports).await.unwrap()
}

fn total(c: &Coordinator, run: &str) -> (u128, bool) {
    let view = c.run(run).unwrap();
    (view.tally.total, view.is_done())
}

#[tokio::test(start_paused = true)]
async fn a_lease_without_heartbeats_expires_after_the_timeout_and_its_job_goes_to_another_worker() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    assert!(!all.is_empty());
    assert!(lease(&c, "b", 4096).await.is_empty(), "every job is leased");

    tokio::time::advance(TIMEOUT - Duration::from_secs(1)).await;
    c.expire_leases().await;
    assert!(lease(&c, "b", 4096).await.is_empty(), "not expired yet");

    tokio::time::advance(Duration::from_secs(2)).await;
    c.expire_leases().await;
    let again = lease(&c, "b", 4096).await;
    assert_eq!(again.len(), all.len(), "every expired job is leased again");
    report_all(&c, "b", &again).await;
    assert_eq!(total(&c, &run), (Q8, true));
}

#[tokio::test(start_paused = true)]
async fn a_slow_worker_that_heartbeats_keeps_its_leases_past_the_timeout() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "slow", 4096).await;
    let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
    for _ in 0..10 {
        tokio::time::advance(TIMEOUT / 2).await;
        assert!(
            c.heartbeat("slow", &ids).unwrap().0.is_empty(),
            "all still its"
        );
        c.expire_leases().await;
    }
    assert!(
        lease(&c, "other", 4096).await.is_empty(),
        "nothing was re-leased"
    );
    report_all(&c, "slow", &held).await;
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A coordinator in memory whose leases live at most ten lease timeouts (`TIMEOUT`) from their issue.
fn holding_ten_timeouts() -> Coordinator {
    let config = Config {
        lease_timeout: TIMEOUT,
        max_lease_hold: TIMEOUT * 10,
        ..Config::default()
    };
    Coordinator::open(Store::temporary().unwrap(), config).unwrap()
}

/// Another worker leases the `jobs` jobs left of `run` (N = 8), every one, and reports them: the total
/// is exact.
async fn another_finishes(c: &Coordinator, run: &str, jobs: usize) {
    let again = lease(c, "other", 4096).await;
    assert_eq!(again.len(), jobs, "every job is leased again");
    report_all(c, "other", &again).await;
    assert_eq!(total(c, run), (Q8, true));
}

/// A worker credential that heartbeats its leases and never reports loses them at the longest hold
/// (`serve --max-lease-hold`): its jobs go to another worker and the run ends exact. Before, it held
/// them for as long as it liked, and the run never finished (found by a review, 2026-11-29). Its
/// late results, the same, change nothing.
#[tokio::test(start_paused = true)]
async fn a_credential_that_heartbeats_and_never_reports_loses_its_leases_at_the_longest_hold() {
    let c = holding_ten_timeouts();
    let run = run_of_8(&c).await;
    let held = lease_credential(&c, "hoarder", 4096).await;
    assert!(!held.is_empty());
    let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
    let hoarder = "hoarder";
    for _ in 0..19 {
        tokio::time::advance(TIMEOUT / 2).await;
        assert!(
            c.heartbeat(hoarder, &ids).unwrap().0.is_empty(),
            "still its"
        );
        c.expire_leases().await;
        assert!(lease(&c, "other", 4096).await.is_empty());
    }
    // The tenth timeout since the issue: heartbeats or not, they end, and the next one says so.
    tokio::time::advance(TIMEOUT / 2).await;
    c.expire_leases().await;
    assert_eq!(c.heartbeat(hoarder, &ids).unwrap().0.len(), ids.len());
    // The hoarder, asking first at the deadline, gets none of them back (a review found it took
    // them all again, for another hold).
    let back = lease_credential(&c, hoarder, 4096).await;
    assert!(
        back.iter().all(|b| held.iter().all(|g| g.key != b.key)),
        "{back:?}"
    );
    another_finishes(&c, &run, held.len()).await;
    let late = report_all(&c, hoarder, &held).await;
    assert!(late.iter().all(|o| *o == Outcome::Duplicate), "{late:?}");
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A worker credential that holds its leases past half the longest hold, then hands them back (or
/// falls silent so that they expire), is barred from their jobs for a hold, as when they run out the
/// hold: it cannot hand them back just before the hold ends and lease them again at once for another.
/// One that hands back early (a worker stopped and started again) gets them back. Before, only a lease
/// that ran out its whole hold barred its identity (found by a review, 2026-11-30: a hoarder kept its
/// jobs hold after hold whenever no other worker asked at the moment it handed them back).
#[tokio::test(start_paused = true)]
async fn a_credential_that_hands_back_late_in_its_hold_is_barred_from_those_jobs() {
    for silent in [false, true] {
        let c = holding_ten_timeouts();
        let run = run_of_8(&c).await;
        let hoarder = "hoarder";
        // Early: handed back, and leased again at once.
        let held = lease_credential(&c, hoarder, 4096).await;
        let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
        tokio::time::advance(TIMEOUT / 2).await;
        assert_eq!(
            c.release_as(hoarder, &ids, false, true).unwrap() as usize,
            ids.len()
        );
        let held = lease_credential(&c, hoarder, 4096).await;
        assert_eq!(held.len(), ids.len(), "an early hand-back is not barred");
        let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
        // Late: past half the hold (five timeouts), heartbeats until then.
        for _ in 0..11 {
            tokio::time::advance(TIMEOUT / 2).await;
            assert!(c.heartbeat(hoarder, &ids).unwrap().0.is_empty());
            c.expire_leases().await;
        }
        match silent {
            false => {
                assert_eq!(
                    c.release_as(hoarder, &ids, false, true).unwrap() as usize,
                    ids.len()
                )
            }
            true => {
                // The last heartbeat at 5.5 timeouts since the issue: it expires at 6.5.
                tokio::time::advance(TIMEOUT).await;
                c.expire_leases().await;
                assert_eq!(
                    c.heartbeat(hoarder, &ids).unwrap().0.len(),
                    ids.len(),
                    "expired"
                );
            }
        }
        let back = c
            .lease(
                &Ask {
                    capacity: 4096,
                    ..as_credential(hoarder)
                },
                Duration::ZERO,
            )
            .await
            .unwrap();
        assert!(
            back.leases
                .iter()
                .all(|b| held.iter().all(|g| g.key != b.key)),
            "silent {silent}: {back:?}"
        );
        // Barred for a hold, not for good: not idle (a worker told idle may exit, and a fleet of one
        // credential would leave the jobs to nobody).
        assert!(!back.idle, "silent {silent}: {back:?}");
        another_finishes(&c, &run, held.len()).await;
    }
}

/// A hoarder that hands its leases back before half their hold and leases them again at once keeps
/// the hold it began with: handed back again past half of it (eight timeouts after the first issue,
/// four after the second), it is barred. Before, each lease again began a hold of its own, so the
/// hoarder kept its jobs by handing them back just under half a hold, for as long as no other worker
/// asked at that moment (found by a review of the half-hold bar, 2026-11-30).
#[tokio::test(start_paused = true)]
async fn a_hoarder_that_hands_back_early_and_leases_again_keeps_its_first_hold() {
    let c = holding_ten_timeouts();
    let run = run_of_8(&c).await;
    let hoarder = "hoarder";
    let mut held = lease_credential(&c, hoarder, 4096).await;
    let jobs = held.len();
    for cycle in 0..2 {
        let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
        for _ in 0..8 {
            tokio::time::advance(TIMEOUT / 2).await;
            assert!(c.heartbeat(hoarder, &ids).unwrap().0.is_empty());
            c.expire_leases().await;
        }
        assert_eq!(
            c.release_as(hoarder, &ids, false, true).unwrap() as usize,
            jobs
        );
        held = lease_credential(&c, hoarder, 4096).await;
        match cycle {
            0 => assert_eq!(held.len(), jobs, "four timeouts: not barred"),
            _ => assert!(
                held.is_empty(),
                "eight timeouts since the first issue: {held:?}"
            ),
        }
    }
    another_finishes(&c, &run, jobs).await;
}

/// A fleet of one name whose lease ran out its hold gets the job back: the shared workers' token
/// (one identity, every one of its workers) and a lone worker under the operator's token. Only an
/// issued credential's hold bars it (found by a review, 2026-11-29: the first bar held every
/// identity's, so such a fleet left the job to nobody, told idle).
#[tokio::test(start_paused = true)]
async fn a_fleet_of_one_name_whose_lease_ran_out_its_hold_gets_its_job_back() {
    use crate::durable::credentials::SHARED_IDENTITY;
    for (name, credential) in [(SHARED_IDENTITY, true), ("node-1", false)] {
        let config = Config {
            lease_timeout: TIMEOUT,
            max_lease_hold: TIMEOUT * 2,
            ..Config::default()
        };
        let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
        let run = run_of_8(&c).await;
        let ask = Ask {
            credential,
            capacity: 4096,
            ..ask(name, 4096)
        };
        let held = c.lease(&ask, Duration::ZERO).await.unwrap().leases;
        assert!(!held.is_empty());
        let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
        for _ in 0..4 {
            tokio::time::advance(TIMEOUT / 2).await;
            c.heartbeat(name, &ids).unwrap();
            c.expire_leases().await;
        }
        let again = c.lease(&ask, Duration::ZERO).await.unwrap().leases;
        assert_eq!(again.len(), held.len(), "{name}: every job is its again");
        report_all(&c, name, &again).await;
        assert_eq!(total(&c, &run), (Q8, true));
    }
}

/// Leases up to `capacity` jobs to `first`, lets those leases expire, then leases them again to
/// `second`: both leases of each job, the first ended.
async fn leased_again(
    c: &Coordinator,
    first: &str,
    second: &str,
    capacity: u32,
) -> (Vec<Granted>, Vec<Granted>) {
    leased_again_by(c, lease, first, second, capacity).await
}

/// [`leased_again`] through `take` (worker credentials: [`lease_credential`]).
async fn leased_again_by<'a, F, Fut>(
    c: &'a Coordinator,
    take: F,
    first: &'a str,
    second: &'a str,
    capacity: u32,
) -> (Vec<Granted>, Vec<Granted>)
where
    F: Fn(&'a Coordinator, &'a str, u32) -> Fut,
    Fut: std::future::Future<Output = Vec<Granted>>,
{
    let held = take(c, first, capacity).await;
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    (held, take(c, second, capacity).await)
}

#[tokio::test(start_paused = true)]
async fn a_late_result_for_a_re_leased_job_counts_once_and_the_second_is_only_compared() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let (first, second) = leased_again(&c, "late", "fresh", 4096).await;
    assert_eq!(second.len(), first.len());

    // The expired lease's results arrive first: accepted, once.
    let outcomes = report_all(&c, "late", &first).await;
    assert!(
        outcomes.iter().all(|o| matches!(o, Outcome::Accepted)),
        "{outcomes:?}"
    );
    assert_eq!(total(&c, &run), (Q8, true));
    // The current lease's results are compared, never added.
    let outcomes = report_all(&c, "fresh", &second).await;
    assert!(
        outcomes.iter().all(|o| matches!(o, Outcome::Duplicate)),
        "{outcomes:?}"
    );
    assert_eq!(total(&c, &run), (Q8, true));
}

#[tokio::test(start_paused = true)]
async fn a_report_for_a_lease_never_issued_is_refused_and_changes_nothing() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    let mut forged = report(&held[0]);
    forged.lease += 1_000;
    let refused = c.report("a", "a", vec![forged]).await;
    assert!(
        matches!(refused, Err(Error::NotLeased { .. })),
        "{refused:?}"
    );
    let mut untagged = report(&held[0]);
    untagged.tag ^= 1;
    untagged.lease = held[0].id + (1 << 40);
    assert!(c.report("a", "a", vec![untagged]).await.is_err());
    assert_eq!(total(&c, &run), (0, false));
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
}

#[tokio::test(start_paused = true)]
async fn issue_18_the_worker_table_shows_what_a_workers_gpus_computed() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let kernels = ["flat/128/4".to_string()];
    let mut with_gpu = ask("a", 3);
    with_gpu.gpus = 1;
    with_gpu.gpu_kernels = &kernels;
    let held = c.lease(&with_gpu, Duration::ZERO).await.unwrap().leases;
    assert_eq!(held.len(), 3);
    // A device name that is not a short label is refused, with the whole batch: nothing is counted.
    // The refusal is of the request (marked so on the wire: the worker stops, keeping its results),
    // not of a result.
    for bad in ["", "cuda 0", "gpu\n0", &"x".repeat(65)] {
        let mut forged: Vec<Report> = held.iter().map(report).collect();
        forged[2].device = Some(bad.to_string());
        let refused = c.report("a", "a", forged).await;
        assert!(
            matches!(&refused, Err(Error::WholeRequest(why)) if matches!(**why, Error::Invalid(_))),
            "{bad:?}: {refused:?}"
        );
        let status = crate::wire::grpc::status(refused.unwrap_err());
        assert!(nqueens_proto::refuses_the_request(&status));
    }
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
    // Two results from a GPU, one from the CPU.
    let mut reports: Vec<Report> = held.iter().map(report).collect();
    reports[0].device = Some("cuda:0".to_string());
    reports[1].device = Some("opencl:1".to_string());
    let gpu_nodes = reports[0].result.nodes + reports[1].result.nodes;
    let nodes: u64 = reports.iter().map(|r| r.result.nodes).sum();
    c.report("a", "a", reports).await.unwrap();
    let a = c.workers().into_iter().find(|w| w.id == "a").unwrap();
    assert_eq!((a.jobs, a.nodes), (3, nodes));
    assert_eq!(
        a.gpus,
        Gpus {
            count: 1,
            jobs: 2,
            nodes: gpu_nodes
        }
    );
    // The kernel its GPU runs, as its lease request said (issue 39).
    assert_eq!(a.gpu_kernels, kernels);
    // More GPUs than any machine has is refused; so are more kernels, or one that is not a shape,
    // and nothing of the worker's description changes.
    let mut absurd = ask("a", 1);
    absurd.gpus = 257;
    assert!(matches!(
        c.lease(&absurd, Duration::ZERO).await,
        Err(Error::Invalid(_))
    ));
    let many = vec!["flat/64/4".to_string(); 257];
    let long = "f".repeat(nqueens_proto::MAX_GPU_KERNEL_LEN + 1);
    for bad in [
        &many[..],
        &["".into()],
        &["flat 128".into()],
        &["Flat/1\n".into()],
        &[long],
    ] {
        let mut forged = ask("a", 1);
        forged.gpu_kernels = bad;
        let refused = c.lease(&forged, Duration::ZERO).await;
        assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
    }
    let a = c.workers().into_iter().find(|w| w.id == "a").unwrap();
    assert_eq!(a.gpu_kernels, kernels);
    // A kernel list at its bounds is taken: 256 entries, 8 distinct shapes. Each shape is kept once,
    // in the order first named (a row stays small however many GPUs a worker says it has).
    let shapes: Vec<String> = (0..MAX_GPU_SHAPES)
        .map(|i| format!("coop/1024/256/{}", 32 - i))
        .collect();
    let most: Vec<String> = (0..256).map(|i| shapes[i % shapes.len()].clone()).collect();
    let mut full = ask("a", 1);
    full.gpus = 256;
    full.gpu_kernels = &most;
    c.lease(&full, Duration::ZERO).await.unwrap();
    let a = c.workers().into_iter().find(|w| w.id == "a").unwrap();
    assert_eq!(a.gpu_kernels, shapes);
    // One distinct shape more is refused, and the row keeps what it had.
    let mut nine = shapes.clone();
    nine.push("flat/32/1".to_string());
    let mut forged = ask("a", 1);
    forged.gpu_kernels = &nine;
    let refused = c.lease(&forged, Duration::ZERO).await;
    assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
    let a = c.workers().into_iter().find(|w| w.id == "a").unwrap();
    assert_eq!(a.gpu_kernels, shapes);
}

#[tokio::test(start_paused = true)]
async fn a_result_is_lease_checked_only_under_a_lease_issued_for_its_job() {
    let c = coordinator();
    run_of_8(&c).await;
    let held = lease(&c, "a", 2).await;
    let checked = |r: Report| c.validate("a", "a", false, &[r]).unwrap()[0].lease_checked;
    assert!(checked(report(&held[0])), "an open job under its lease");
    assert_eq!(
        report_all(&c, "a", &held[..1]).await,
        vec![Outcome::Accepted]
    );
    // Under a lease of another job it passes validation only because its job is done (it will only be
    // compared): the commit must know that no lease stands behind it.
    let mut borrowed = report(&held[0]);
    (borrowed.lease, borrowed.tag) = (held[1].id, held[1].tag);
    assert!(!checked(borrowed.clone()));
    assert!(
        c.validate("a", "a", false, &[report(&held[1]), borrowed])
            .is_ok(),
        "a done job's result needs no lease of its own"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wrong_count_under_a_valid_lease_fails_its_seal_and_is_not_counted() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    let mut bad = report(&held[0]);
    bad.result.total += 1;
    let refused = c.report("a", "a", vec![bad]).await;
    assert!(
        matches!(refused, Err(Error::Unsealed { .. })),
        "{refused:?}"
    );
    assert_eq!(total(&c, &run), (0, false));
}

/// A run whose every job is counted, with one wrong count whose counts still fit each other (eight
/// solutions more on both: what a fault in the search gives), nothing verified: its totals differ from
/// the published counts of N = 8, so it is `inconsistent`, never `done` (found by a review,
/// 2026-11-24, a later session: it ended done with total 100).
#[tokio::test(start_paused = true)]
async fn a_run_finished_with_a_count_off_the_published_one_is_inconsistent() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 64).await;
    let mut reports: Vec<Report> = held.iter().map(report).collect();
    reports[0] = lying(&held[0]);
    c.report("a", "a", reports).await.unwrap();
    let view = c.run(&run).unwrap();
    assert_eq!(view.tally.jobs, view.meta.jobs_total);
    assert_eq!(view.tally.total, Q8 + 8);
    assert_eq!(view.phase, crate::durable::store::Phase::Inconsistent);
    let why = view.meta.contradiction(&view.tally).unwrap();
    assert!(why.contains("published"), "{why}");
    assert_eq!(view.unique(), None, "no unique count shown as the answer");
    // `submit --reuse` (and `count`) return it: no new run is made behind a caller's back.
    let again = c
        .create_run(8, Strategy::D4, None, Some(0.0), 0, true)
        .await
        .unwrap();
    assert_eq!(again.id(), run);
}

/// Two CreateRuns with `reuse` at once (or a retry after a client's timeout while the first is still
/// writing) make one run: the second finds the first's (found by a review, 2026-11-24, a later
/// session: both looked before either wrote, and two runs of one plan doubled the compute).
#[tokio::test]
async fn creates_with_reuse_at_once_make_one_run() {
    let c = coordinator();
    let create = || c.create_run(10, Strategy::D4, None, Some(0.0), 0, true);
    let (a, b) = tokio::join!(create(), create());
    assert_eq!(a.unwrap().id(), b.unwrap().id());
    assert_eq!(c.runs().len(), 1);
    // The first caller gone once its write has begun: the retry still finds its run.
    let first = c.create_run(11, Strategy::D4, None, Some(0.0), 0, true);
    let retry = async {
        tokio::task::yield_now().await;
        c.create_run(11, Strategy::D4, None, Some(0.0), 0, true)
            .await
    };
    let (_, retried) = tokio::join!(tokio::time::timeout(Duration::from_millis(1), first), retry);
    retried.unwrap();
    assert_eq!(c.runs().len(), 2, "one run of each plan");
}

/// A lease counts only under the name it was issued to: a worker that got a verified job twice (its
/// first lease expired) cannot report one result as itself and the other under a new name to
/// confirm its own count (found by a review, 2026-11-24, a later session: the second report, matching
/// neither the first's name nor its lease, counted as a confirmation).
#[tokio::test(start_paused = true)]
async fn a_second_lease_of_a_job_confirms_nothing_under_another_name() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let first = lease(&c, "a", 1).await;
    // (Expired: a result under a lease handed back is refused outright.)
    tokio::time::advance(TIMEOUT + Duration::from_secs(1)).await;
    c.expire_leases().await;
    let again = lease(&c, "a", 4096).await;
    let second = again.iter().find(|g| g.key == first[0].key).unwrap();
    assert_ne!(second.id, first[0].id);
    assert_eq!(report_all(&c, "a", &first).await, vec![Outcome::Pending]);
    let borrowed = c.report("b", "b", vec![report(second)]).await;
    assert!(
        matches!(borrowed, Err(Error::NotLeased { .. })),
        "{borrowed:?}"
    );
    let view = c.run(&run).unwrap();
    assert_eq!(
        (view.tally.jobs, view.jobs_verifying),
        (0, 1),
        "not confirmed"
    );
}

/// A control that changes nothing (a second pause, the same priority, a second cancel) writes nothing:
/// the ledger does not grow (found by a review, 2026-11-24, a later session: each appended a run line
/// and an fsync, so a loop of them grew the ledger without bound).
#[tokio::test]
async fn a_control_that_changes_nothing_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = run_of_8(&c).await;
    let ledger = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    let len = || std::fs::metadata(&ledger).unwrap().len();
    c.control(&run, Control::Pause).await.unwrap();
    let paused = len();
    for change in [Control::Pause, Control::Priority(0)] {
        let view = c.control(&run, change).await.unwrap();
        assert!(view.meta.paused);
        assert_eq!(len(), paused, "{change:?}");
    }
    c.control(&run, Control::Priority(3)).await.unwrap();
    assert!(len() > paused, "a change is written");
    c.control(&run, Control::Cancel).await.unwrap();
    let cancelled = len();
    assert!(c
        .control(&run, Control::Cancel)
        .await
        .unwrap()
        .meta
        .is_cancelled());
    assert_eq!(len(), cancelled);
    assert!(matches!(
        c.control(&run, Control::Pause).await,
        Err(Error::RunCancelled(_))
    ));
}

/// A sealed result whose counts contradict each other (a total off by one: no search gives an odd
/// total in `d4`; or a unique count changed alone) is refused before anything is compared or stored,
/// and the job stays open. Before, such a result was committed: a job computed once counted it for
/// good, and a verified job disputed an honest worker's count over it.
#[tokio::test(start_paused = true)]
async fn a_result_whose_counts_contradict_each_other_is_refused() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    let mut odd = report(&held[0]);
    odd.result.total += 1;
    let mut unique = report(&held[0]);
    unique.result.unique8 = unique.result.unique8.map(|u| u + 8);
    for mut bad in [odd, unique] {
        bad.seal = Some(seal(held[0].fingerprint, &held[0].key, &bad.result));
        let refused = c.report("a", "a", vec![bad]).await;
        assert!(
            matches!(
                refused,
                Err(Error::Input(nqueens_common::Error::Implausible(_)))
            ),
            "{refused:?}"
        );
    }
    let view = c.run(&run).unwrap();
    assert_eq!((view.tally.jobs, view.jobs_disputed), (0, 0));
    // The job is still a's to report (its lease stands until it expires: the expiry, not the
    // refusal, charges the worker and the job), and its honest result counts.
    assert_eq!(
        report_all(&c, "a", &held).await,
        vec![Outcome::Pending],
        "verified: its first result waits for a second"
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_expired_under_one_worker_name_only_is_not_failed_whatever_the_attempts() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    for _ in 0..6 {
        // Leased while not benched for its strikes; either way its leases expire unreported.
        lease(&c, "flaky", 4096).await;
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    assert_eq!(c.run(&run).unwrap().jobs_failed, 0);
    let held = lease(&c, "honest", 4096).await;
    report_all(&c, "honest", &held).await;
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A coordinator over the store in `dir`, once the previous one has let go of it.
async fn reopened(dir: &std::path::Path) -> Coordinator {
    reopened_with(dir, Config::default()).await
}

/// [`reopened`] with `config`.
async fn reopened_with(dir: &std::path::Path, config: Config) -> Coordinator {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match Store::open(dir) {
            Ok(store) => return Coordinator::open(store, config).unwrap(),
            Err(Error::InUse(_)) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[tokio::test]
async fn after_a_restart_leases_walk_past_the_done_jobs_without_losing_one() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let view = run_of_13(&c).await;
    let run = view.id();
    let total = view.meta.jobs_total as usize;
    assert!(
        total > 2 * 256,
        "more jobs than two rounds of candidates: {total}"
    );
    // Everything but three jobs spread over the list is counted before the restart.
    let all = lease(&c, "a", 4096).await;
    assert_eq!(all.len(), total);
    let left = [0, total / 2, total - 1];
    let done: Vec<Granted> = all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !left.contains(i))
        .map(|(_, g)| g)
        .collect();
    report_all(&c, "a", &done).await;
    drop(c);

    let c = reopened(dir.path()).await;
    let mut rest = Vec::new();
    loop {
        let got = lease(&c, "b", 1).await;
        if got.is_empty() {
            break;
        }
        rest.extend(got);
    }
    assert_eq!(
        rest.len(),
        3,
        "exactly the three jobs left, one lease at a time"
    );
    report_all(&c, "b", &rest).await;
    let view = c.run(&run).unwrap();
    assert!(view.is_done());
    assert_eq!(view.tally.total, 73712, "Q(13)");
    let grant = c.lease(&ask("b", 1), Duration::ZERO).await.unwrap();
    assert!(grant.idle && grant.leases.is_empty());
}

/// Jobs handed back wait in the retry queue; a lease call takes from its front only what it wants
/// (not the whole queue, each key a store read), and keys looked at but not leased go to its back.
/// Every job handed back is leased again exactly once, and the count is exact.
#[tokio::test]
async fn jobs_handed_back_are_leased_again_a_few_at_a_time_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let view = run_of_13(&c).await;
    let run = view.id();
    let jobs = view.meta.jobs_total as usize;
    let all = lease(&c, "a", 4096).await;
    assert_eq!(all.len(), jobs);
    let ids: Vec<u64> = all.iter().map(|g| g.id).collect();
    assert_eq!(c.release("a", &ids, true).unwrap() as usize, jobs);
    let mut again: Vec<Granted> = Vec::new();
    loop {
        let got = lease(&c, "b", 3).await;
        if got.is_empty() {
            break;
        }
        assert!(got.len() <= 3);
        again.extend(got);
    }
    let mut keys: Vec<String> = again.iter().map(|g| g.key.to_string()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), jobs, "every job handed back, leased once");
    assert_eq!(again.len(), jobs);
    report_all(&c, "b", &again).await;
    assert_eq!(total(&c, &run), (73712, true), "Q(13)");
}

#[tokio::test]
async fn issue_16_a_quarantine_whose_revocation_did_not_complete_is_completed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let jobs_before = crate::durable::store::tests::a_quarantine_not_revoked(dir.path())
        .tally(1)
        .unwrap()
        .jobs;
    assert_eq!(jobs_before, 4);
    let c = reopened(dir.path()).await;
    let view = c.run("1").unwrap();
    assert_eq!(
        view.tally.jobs, 2,
        "the liar's two unconfirmed results are taken back"
    );
    drop(c);
    let ledger = std::fs::read(dir.path().join(crate::durable::ledger::LEDGER_FILE)).unwrap();
    let ledger = String::from_utf8_lossy(&ledger);
    assert_eq!(ledger.matches("\"kind\":\"revoked\"").count(), 2);
    // Store and ledger agree afterwards (the quick path), and nothing more is taken back.
    let c = reopened(dir.path()).await;
    assert_eq!(c.run("1").unwrap().tally.jobs, 2);
}

#[tokio::test(start_paused = true)]
async fn issue_16_a_damaged_group_of_results_holds_back_its_jobs_not_the_run() {
    let c = coordinator();
    let view = c
        .create_run(10, Strategy::D4, None, Some(0.0), 0, false)
        .await
        .unwrap();
    let run = view.meta.id;
    let first = lease(&c, "a", 1).await;
    report_all(&c, "a", &first).await;
    let prefix = first[0].key.0[..first[0].key.0.len() - 1].to_vec();
    c.shared.store.damage_group(run, &first[0].key);
    // The jobs sharing the damaged entry cannot be told done or pending: they are not leased (until a
    // restart repairs the store); every other job still is.
    let rest = lease(&c, "a", 4096).await;
    assert!(!rest.is_empty());
    assert!(rest.iter().all(|g| !g.key.0.starts_with(&prefix)));
    let siblings = view
        .meta
        .plan()
        .unwrap()
        .jobs()
        .filter(|k| k.0.starts_with(&prefix))
        .count();
    assert_eq!(rest.len() + siblings, view.meta.jobs_total as usize);
    // Storage is degraded, so that `serve` reopens the store and the reconciliation repairs it.
    let why = c.storage().degraded().expect("degraded");
    assert!(why.contains("damaged"), "{why}");
}

#[tokio::test(start_paused = true)]
async fn issue_16_a_report_that_meets_a_damaged_group_is_refused_and_degrades_storage() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let first = lease(&c, "a", 1).await;
    report_all(&c, "a", &first).await;
    let id: u64 = run.parse().unwrap();
    c.shared.store.damage_group(id, &first[0].key);
    // The same result again: whether its job is done cannot be read.
    let refused = c.report("a", "a", first.iter().map(report).collect()).await;
    assert!(matches!(refused, Err(Error::Corrupt(_))), "{refused:?}");
    assert!(c.storage().degraded().is_some());
}

/// A report whose caller goes away while its batch is being committed (a worker killed, a connection
/// reset or a deadline passed: the server drops the handler) still has its effects applied in memory once
/// the commit is durable: the run it finishes shows as done now, not only after a restart.
#[tokio::test(start_paused = true)]
async fn a_report_dropped_while_its_batch_commits_still_has_its_effects_applied() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let leases = lease(&c, "gone", 4096).await;
    let mut report = Box::pin(c.report("gone", "gone", leases.iter().map(report).collect()));
    // One poll: the batch is checked and handed to the committer; then the caller is gone.
    let polled = tokio::time::timeout(Duration::ZERO, &mut report).await;
    assert!(polled.is_err(), "the commit was not awaited: {polled:?}");
    drop(report);
    let started = std::time::Instant::now();
    while total(&c, &run) != (Q8, true) && started.elapsed() < Duration::from_secs(10) {
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A lease of this incarnation is checked by its tag too: another worker that knows (or guesses) a live
/// lease's id, and seals a result itself, cannot report under it with a wrong tag; the lease's holder,
/// with the tag it was given, can.
#[tokio::test(start_paused = true)]
async fn a_report_under_a_live_lease_with_a_wrong_tag_is_refused_and_changes_nothing() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    for tag in [0, held[0].tag ^ 1] {
        let mut borrowed = report(&held[0]);
        borrowed.tag = tag;
        let refused = c.report("b", "b", vec![borrowed]).await;
        assert!(
            matches!(refused, Err(Error::NotLeased { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
    let outcomes = report_all(&c, "a", &held).await;
    assert_eq!(outcomes, vec![Outcome::Accepted]);
    assert_eq!(c.run(&run).unwrap().tally.jobs, 1);
}

/// A store whose quarantined worker still has a counted result that cannot be read (damage the repair
/// did not reach; a temporary store has no ledger to repair from) is refused at start, naming the
/// worker: it may hold a wrong count, and serving it could finish a run with it.
#[tokio::test(start_paused = true)]
async fn a_quarantine_that_cannot_be_completed_at_start_refuses_the_store() {
    let store = Store::temporary().unwrap();
    let [a, wrong, c] = crate::durable::store::tests::a_liar_with_a_damaged_result(&store);
    store.commit(&[a]).unwrap();
    store.commit(&[wrong]).unwrap();
    let decided = store.commit(&[c]).unwrap();
    assert_eq!(decided.quarantined.len(), 1);
    let refused = Coordinator::open(store, Config::default());
    match refused {
        Err(Error::Corrupt(why)) => assert!(why.contains("liar"), "{why}"),
        other => panic!("{:?}", other.map(|_| "opened")),
    }
}

/// A result sent again after it was counted (its acknowledgement lost, or sent on purpose, again and
/// again) proves no new work: it credits no nodes, jobs or GPU share to its worker or its run. A spot
/// check (a done job, leased again) did cost its worker the work, and is credited.
#[tokio::test(start_paused = true)]
async fn a_result_sent_again_credits_nothing_and_a_spot_check_does() {
    let (c, open) = confirmed_and_open().await;
    let on_gpu = |g: &Granted| Report {
        device: Some("cuda:0".to_string()),
        ..report(g)
    };
    let (mut sent, mut jobs, mut nodes) = (Vec::new(), 0, 0);
    // (Until a spot check passed and a job of the open run counted: the check may come first.)
    while c.state().spot.passed_by("careful") == 0 || c.run(&open).unwrap().tally.jobs == 0 {
        let got = c
            .lease(&as_credential("careful"), Duration::ZERO)
            .await
            .unwrap();
        assert!(jobs < 400 && !got.leases.is_empty(), "no spot check");
        let reports: Vec<Report> = got.leases.iter().map(on_gpu).collect();
        jobs += reports.len() as u64;
        nodes += reports.iter().map(|r| r.result.nodes).sum::<u64>();
        c.report("careful", "careful", reports.clone())
            .await
            .unwrap();
        sent.extend(reports);
    }
    let credited = |id: &str| {
        let w = c.workers().into_iter().find(|w| w.id == id).unwrap();
        (w.jobs, w.nodes, w.gpus.jobs, w.gpus.nodes)
    };
    // Every result, the spot check's included.
    assert_eq!(credited("careful"), (jobs, nodes, jobs, nodes));
    let share = c.run(&open).unwrap().gpu_share;
    assert_eq!(share, Some(1.0));
    // Sent again, ten times: nothing more.
    for _ in 0..10 {
        let outcomes = c.report("careful", "careful", sent.clone()).await.unwrap();
        assert!(outcomes.iter().all(|o| *o == Outcome::Duplicate));
    }
    assert_eq!(credited("careful"), (jobs, nodes, jobs, nodes));
    // Nor under another identity, which never held those leases.
    c.report("other", "other", sent.clone()).await.unwrap();
    assert_eq!(credited("other"), (0, 0, 0, 0));
    // A CPU copy would have lowered the run's GPU share: none was counted.
    let on_cpu: Vec<Report> = sent
        .iter()
        .map(|r| Report {
            device: None,
            ..r.clone()
        })
        .collect();
    c.report("cpu", "cpu", on_cpu).await.unwrap();
    assert_eq!(c.run(&open).unwrap().gpu_share, share);
}

/// A result that differs from a done job's stored one under no lease issued for the job (a mismatch,
/// logged at error level) credits no nodes: a worker cannot inflate its node rate, nor the run's GPU
/// share, with results that prove nothing.
#[tokio::test(start_paused = true)]
async fn a_mismatched_result_credits_no_nodes_to_its_worker_or_its_run() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    report_all(&c, "a", &held).await;
    let mut inflated = report(&held[0]);
    inflated.tag ^= 1;
    inflated.result.nodes = u64::MAX / 2;
    inflated.device = Some("cuda:0".to_string());
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    inflated.seal = Some(seal(plan.fingerprint().1, &held[0].key, &inflated.result));
    let outcomes = c.report("m", "m", vec![inflated]).await.unwrap();
    assert!(
        matches!(outcomes[..], [Outcome::Mismatch { .. }]),
        "{outcomes:?}"
    );
    let m = c.workers().into_iter().find(|w| w.id == "m").unwrap();
    assert_eq!((m.nodes, m.gpus.nodes), (0, 0));
    assert_eq!(
        c.run(&run).unwrap().gpu_share,
        Some(0.0),
        "a's CPU nodes only"
    );
}

/// Polls `call` until the store shows `written`, then drops it: the caller is gone. Returns false if
/// the call ended first (the commit thread wrote and answered between a look at the store and the next
/// poll, which a loaded machine allows): the caller tries the scenario again.
async fn drop_once_stored<F: std::future::Future>(call: F, written: impl Fn() -> bool) -> bool {
    let mut call = Box::pin(call);
    let started = std::time::Instant::now();
    while !written() {
        let polled = tokio::time::timeout(Duration::ZERO, &mut call).await;
        if polled.is_ok() {
            assert!(written(), "the call ended and nothing was stored");
            return false;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never stored");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(call);
    true
}

/// Waits (in real time, at most ten seconds) until `done`.
async fn until(done: impl Fn() -> bool) -> bool {
    let started = std::time::Instant::now();
    while !done() && started.elapsed() < Duration::from_secs(10) {
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

/// A cancel whose caller goes away once the store holds it (an operator's Ctrl-C, a deadline) still ends
/// the run in memory: no more leases, the live ones ended. Before, the run stayed cancelled in the store
/// and leasing in memory until a restart.
#[tokio::test(start_paused = true)]
async fn a_cancel_dropped_while_it_commits_still_ends_the_run_in_memory() {
    let (c, run) = 'dropped: {
        for _ in 0..10 {
            let c = coordinator();
            let run = run_of_8(&c).await;
            let id: u64 = run.parse().unwrap();
            let held = lease(&c, "a", 1).await;
            assert_eq!(held.len(), 1);
            let store = c.shared.store.clone();
            if drop_once_stored(
                c.control(&run, crate::durable::store::Control::Cancel),
                || store.run(id).unwrap().unwrap().is_cancelled(),
            )
            .await
            {
                break 'dropped (c, run);
            }
        }
        panic!("the call ended before its drop ten times over");
    };
    assert!(
        until(|| c.run(&run).unwrap().meta.is_cancelled()).await,
        "memory never took the cancel"
    );
    assert_eq!(c.run(&run).unwrap().jobs_leased, 0);
    assert!(lease(&c, "b", 16).await.is_empty());
}

/// A CreateRun whose caller goes away once the store holds the run still adds it to memory: it is
/// listed, leased and found by a retry with reuse (which would otherwise create a second run).
#[tokio::test(start_paused = true)]
async fn a_run_created_for_a_caller_gone_mid_commit_is_served() {
    let (c, store) = 'dropped: {
        for _ in 0..10 {
            let c = coordinator();
            let store = c.shared.store.clone();
            if drop_once_stored(
                c.create_run(8, Strategy::D4, None, Some(0.0), 0, true),
                || !store.runs().unwrap().is_empty(),
            )
            .await
            {
                break 'dropped (c, store);
            }
        }
        panic!("the call ended before its drop ten times over");
    };
    assert!(
        until(|| c.runs().len() == 1).await,
        "memory never took the run"
    );
    let again = c
        .create_run(8, Strategy::D4, None, Some(0.0), 0, true)
        .await
        .unwrap();
    assert_eq!(
        store.runs().unwrap().len(),
        1,
        "the retry created a second run"
    );
    assert_eq!(again.id(), c.runs()[0].id());
    assert!(!lease(&c, "a", 1).await.is_empty());
}

/// A reuse never returns a run verified less than asked: `submit --reuse --verify-fraction 0.5` over a
/// run of the same plan verifying none is refused, naming the run and both fractions, and creates
/// nothing. A run verified as much or more is returned, as is any run when no fraction is asked.
#[tokio::test(start_paused = true)]
async fn a_reuse_asking_for_more_verification_than_the_run_has_is_refused() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let refused = c
        .create_run(8, Strategy::D4, None, Some(0.5), 0, true)
        .await;
    match refused {
        Err(Error::Invalid(why)) => {
            assert!(why.contains(&format!("run {run}")), "{why}");
            assert!(
                why.contains("verifies 0% ") && why.contains("50% asked"),
                "{why}"
            );
        }
        other => panic!("{:?}", other.map(|v| v.id())),
    }
    assert_eq!(c.runs().len(), 1);
    for asked in [None, Some(0.0)] {
        let reused = c.create_run(8, Strategy::D4, None, asked, 0, true).await;
        assert_eq!(reused.unwrap().id(), run);
    }
    let verified = c
        .create_run(8, Strategy::D4, None, Some(0.5), 0, false)
        .await
        .unwrap();
    let reused = c
        .create_run(8, Strategy::D4, None, Some(0.25), 0, true)
        .await;
    assert_eq!(
        reused.unwrap().id(),
        verified.id(),
        "the newest, verified enough"
    );
    // A newer run verifying less does not hide the older one verified enough.
    let newer = c
        .create_run(8, Strategy::D4, None, Some(0.0), 0, false)
        .await
        .unwrap();
    let reused = c
        .create_run(8, Strategy::D4, None, Some(0.5), 0, true)
        .await;
    assert_eq!(reused.unwrap().id(), verified.id());
    let reused = c.create_run(8, Strategy::D4, None, None, 0, true).await;
    assert_eq!(
        reused.unwrap().id(),
        newer.id(),
        "no fraction asked: the newest"
    );
    assert_eq!(c.runs().len(), 3);
}

/// Runs N = 8, every job verified, with "liar" lying on its first job and "a" and "b" honest, until the
/// liar is quarantined; returns the run's id.
async fn a_liar_caught(c: &Coordinator) -> String {
    let run = verified_run_of_8(c).await;
    let leases = lease(c, "liar", 4096).await;
    let mut reports: Vec<Report> = leases.iter().map(report).collect();
    reports[0] = lying(&leases[0]);
    c.report("liar", "liar", reports).await.unwrap();
    for honest in ["a", "b"] {
        let leases = lease(c, honest, 4096).await;
        report_all(c, honest, &leases).await;
    }
    let err = c.lease(&ask("liar", 1), Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::Quarantined { .. }), "{err:?}");
    run
}

/// A quarantined worker's heartbeat is refused, and the leases it names go back in line at once.
/// Before, heartbeats went on extending them (a worker whose compute is slow, or a hung GPU launch,
/// reaches its next report or lease call late): its jobs waited for it (found by a review,
/// 2026-11-24, a later session).
#[tokio::test]
async fn a_quarantined_workers_heartbeat_is_refused_and_its_leases_freed() {
    let c = coordinator();
    verified_run_of_8(&c).await;
    let held = lease(&c, "liar", 4096).await;
    assert!(held.len() > 2);
    c.report("liar", "liar", vec![lying(&held[0])])
        .await
        .unwrap();
    for honest in ["a", "b"] {
        let got = lease(&c, honest, 4096).await;
        assert_eq!(
            got.len(),
            1,
            "only the disputed job: the liar holds the rest"
        );
        report_all(&c, honest, &got).await;
    }
    assert!(refused_as_quarantined(&c, "liar").await);
    let ids: Vec<u64> = held[1..].iter().map(|g| g.id).collect();
    let err = c.heartbeat("liar", &ids).unwrap_err();
    assert!(matches!(err, Error::Quarantined { .. }), "{err:?}");
    let freed = lease(&c, "a", 4096).await;
    assert_eq!(freed.len(), held.len() - 1, "its leases are free at once");
    // A process of the liar the coordinator never heard name itself (the worker table forgot it, or
    // a restart): known by its id. A worker whose name only begins like it is not refused.
    let err = c.heartbeat("liar-4242-18c0ffee", &[]).unwrap_err();
    assert!(matches!(err, Error::Quarantined { .. }), "{err:?}");
    assert!(c.heartbeat("liar-2-4242-18c0ffee", &[]).is_ok());
    assert!(c.heartbeat("liars-4242-18c0ffee", &[]).is_ok());
}

/// A lease call that waits does not wake itself with its own hand-backs: here "a" computed every
/// job of a verified run (they wait for another name) while "b" holds one, so "a" may lease nothing
/// yet is not idle. Before, each look handed the keys back, announced a change, woke the same call at
/// once, and it looked again, reading every waiting job's record, until its wait ran out (found by a
/// review, 2026-11-24, a later session).
#[tokio::test]
async fn a_waiting_lease_call_does_not_wake_itself() {
    let c = coordinator();
    verified_run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    assert_eq!(lease(&c, "b", 1).await.len(), 1);
    let changes = c.subscribe();
    let before = *changes.borrow();
    let grant = c
        .lease(&ask("a", 1), Duration::from_millis(300))
        .await
        .unwrap();
    assert!(grant.leases.is_empty() && !grant.idle);
    let announced = changes.borrow().wrapping_sub(before);
    assert!(
        announced <= 2,
        "{announced} changes announced while it waited"
    );
    // Two processes of "a" waiting at once do not wake each other either: the jobs "a" computed are
    // passed by, never taken out of the queue and handed back (found by a review, 2026-11-24, a later
    // session: the two woke each other in turn until their waits ran out).
    let before = *changes.borrow();
    let process = |id| Ask {
        worker: id,
        name: "a",
        label: "a",
        credential: false,
        threads: 1,
        gpus: 0,
        gpu_kernels: &[],
        capacity: 1,
        only: None,
    };
    let (one, two) = (process("a-1-1"), process("a-2-1"));
    let (first, second) = tokio::join!(
        c.lease(&one, Duration::from_millis(300)),
        c.lease(&two, Duration::from_millis(300))
    );
    assert!(first.unwrap().leases.is_empty() && second.unwrap().leases.is_empty());
    let announced = changes.borrow().wrapping_sub(before);
    assert!(
        announced <= 4,
        "{announced} changes announced while they waited"
    );
}

/// Whether `worker` is refused leases, as quarantined.
async fn refused_as_quarantined(c: &Coordinator, worker: &str) -> bool {
    matches!(
        c.lease(&ask(worker, 1), Duration::ZERO).await,
        Err(Error::Quarantined { .. })
    )
}

/// The ledger alone (its sled files lost) rebuilds a store that keeps the quarantine: before, the
/// quarantine lived in the store only, and a disproved worker could lease, and be counted, again.
#[tokio::test]
async fn a_quarantine_survives_a_store_rebuilt_from_the_ledger_alone() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = a_liar_caught(&c).await;
    let before = c.run(&run).unwrap().tally;
    drop(c);
    let rebuilt = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join(crate::durable::ledger::LEDGER_FILE),
        rebuilt.path().join(crate::durable::ledger::LEDGER_FILE),
    )
    .unwrap();
    let c = reopened(rebuilt.path()).await;
    assert_eq!(c.run(&run).unwrap().tally, before);
    assert!(refused_as_quarantined(&c, "liar").await);
    assert!(!refused_as_quarantined(&c, "a").await);
}

/// Opens the store in `dir` with `config`.
fn opened_with(dir: &std::path::Path, config: Config) -> crate::error::Result<Coordinator> {
    Store::open(dir).and_then(|store| Coordinator::open(store, config))
}

/// Copies the ledger of `dir` alone into a new directory (its sled files lost).
fn ledger_alone(dir: &std::path::Path) -> tempfile::TempDir {
    let rebuilt = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.join(crate::durable::ledger::LEDGER_FILE),
        rebuilt.path().join(crate::durable::ledger::LEDGER_FILE),
    )
    .unwrap();
    rebuilt
}

/// `serve --release-quarantine NAME` lifts the quarantine in store and ledger alike: a store rebuilt from
/// the ledger keeps the release. A name that is not quarantined is refused and changes nothing.
#[tokio::test]
async fn a_release_is_kept_by_a_store_rebuilt_from_the_ledger_and_an_unknown_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    a_liar_caught(&c).await;
    drop(c);
    let path = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    let before = std::fs::read(&path).unwrap();
    // One unknown name refuses the others too (the liar stays quarantined).
    let unknown = Config {
        release: vec!["liar".into(), "nobody".into()],
        ..Config::default()
    };
    let refused = loop {
        match opened_with(dir.path(), unknown.clone()) {
            Err(Error::InUse(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            other => break other,
        }
    };
    match refused {
        Err(Error::Invalid(why)) => assert!(why.contains("\"nobody\""), "{why}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("an unknown name was released"),
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the ledger unchanged"
    );
    let c = reopened(dir.path()).await;
    assert!(
        refused_as_quarantined(&c, "liar").await,
        "still quarantined"
    );
    drop(c);
    let release = Config {
        release: vec!["liar".into(), "liar".into()],
        ..Config::default()
    };
    let c = loop {
        match opened_with(dir.path(), release.clone()) {
            Err(Error::InUse(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            other => break other.unwrap(),
        }
    };
    assert!(!refused_as_quarantined(&c, "liar").await);
    drop(c);
    let rebuilt = ledger_alone(dir.path());
    let c = reopened(rebuilt.path()).await;
    assert!(
        !refused_as_quarantined(&c, "liar").await,
        "the release kept"
    );
}

/// A ledger of the previous version carries no quarantine: the first start writes the store's to it, so
/// that from then on the ledger alone rebuilds them.
#[tokio::test]
async fn a_quarantine_the_ledger_lacks_is_appended_to_it_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    a_liar_caught(&c).await;
    drop(c);
    // As the previous version wrote it: no quarantine line.
    let path = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    let quarantines = |bytes: &[u8]| {
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| {
                let kind = b"\"kind\":\"quarantine\"";
                l.windows(kind.len()).any(|w| w == kind)
            })
            .count()
    };
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(quarantines(&bytes), 1);
    let old: Vec<u8> = bytes
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| quarantines(l) == 0)
        .flatten()
        .copied()
        .collect();
    std::fs::write(&path, old).unwrap();
    assert!(refused_as_quarantined(&reopened(dir.path()).await, "liar").await);
    assert_eq!(quarantines(&std::fs::read(&path).unwrap()), 1, "appended");
    let rebuilt = ledger_alone(dir.path());
    assert!(refused_as_quarantined(&reopened(rebuilt.path()).await, "liar").await);
}

/// A verified job needs two workers' results: the same lease's report sent again under another name (a
/// worker restarted with a new `--name` over the same journal, or a replay) is one result, never its
/// own confirmation. Found by a review (2026-11-24): it was counted as confirmed.
#[tokio::test]
async fn a_report_sent_again_under_another_name_does_not_confirm_itself() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let leases = lease(&c, "a", 4096).await;
    let outcomes = report_all(&c, "a", &leases).await;
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Pending),
        "{outcomes:?}"
    );
    let again = c
        .report("b-1", "b", leases.iter().map(report).collect())
        .await;
    if let Ok(outcomes) = &again {
        assert!(
            outcomes.iter().all(|o| *o != Outcome::Accepted),
            "{outcomes:?}"
        );
    }
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "nothing counted");
    // Two workers of their own leases count every job, exactly.
    let leases = lease(&c, "b", 4096).await;
    report_all(&c, "b", &leases).await;
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A CreateRun whose caller goes away ends its plan's enumeration (seconds of a core at N = 32), and
/// enumerations run [`super::MAX_PLANNING`] at a time: before, each went on to the end after its caller
/// left, and any number ran at once. Found by a review, 2026-11-24.
#[tokio::test]
async fn an_abandoned_create_run_stops_enumerating_and_frees_its_place() {
    let c = coordinator();
    for _ in 0..super::MAX_PLANNING {
        // Split 4: 65 million jobs, more than a run may have: seconds of enumeration before the
        // refusal.
        let abandoned = c.create_run(32, Strategy::D4, Some(4), Some(0.0), 0, false);
        assert!(
            tokio::time::timeout(Duration::from_millis(200), abandoned)
                .await
                .is_err(),
            "N = 32 takes longer than that"
        );
    }
    // Every place was taken by an enumeration whose caller left: each ends at once and frees it (left
    // to run, they would hold the places for seconds more).
    let small = c.create_run(8, Strategy::D4, None, Some(0.0), 0, false);
    let view = tokio::time::timeout(Duration::from_millis(500), small)
        .await
        .expect("a place is free again")
        .unwrap();
    assert_eq!(view.meta.n, 8);
    assert_eq!(c.runs().len(), 1, "nothing of the abandoned runs");
}

/// A stored run whose plan takes for ever to enumerate (its depth damaged: mirror at N = 32 split 30
/// rows deep, against the 100 jobs it records) is refused at the start, within the enumeration's budget.
/// Before, the start enumerated its job list without end. Found by a review, 2026-11-24.
#[test]
fn a_stored_run_whose_plan_cannot_be_enumerated_is_refused_at_the_start() {
    let store = Store::temporary().unwrap();
    let plan = nqueens_common::Plan::with_depth(32, Strategy::Mirror, 30).unwrap();
    store
        .insert_run(plan, 100, 0, crate::durable::store::RunOptions::default())
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Coordinator::open(store, Config::default()).map(|_| ()));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Err(Error::Corrupt(why))) => assert!(why.contains("run 1"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// A crash in the round that decided a disputed job, with the ledger holding the deciding result but
/// neither the quarantine line logged after it nor the store's transaction (a power loss: an append's
/// pages persist in any order, and sled's flush runs beside the ledger's fsync). The start restores the
/// result from the ledger. Before, that dropped the job's record, and with it the disproved worker's
/// candidate: nobody was quarantined and the liar's unconfirmed results stayed counted. Now a candidate
/// that disagrees with a restored result quarantines its worker, as the commit did, and the start takes
/// the liar's results back. Found by a review, 2026-11-24.
#[tokio::test]
async fn a_result_restored_from_the_ledger_quarantines_the_worker_its_candidates_disprove() {
    let (dir, c) = restored_over_a_dispute(false).await;
    assert!(refused_as_quarantined(&c, "liar").await, "the liar is out");
    assert_eq!(
        c.run("1").unwrap().tally.jobs,
        2,
        "a's result and the decided one; the liar's two taken back"
    );
    let path = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    drop(c);
    let view = crate::durable::ledger::LedgerView::read(&path).unwrap();
    assert!(view.quarantines.contains_key("liar"), "logged as well");
}

/// The same, the liar's candidate damaged on disk (it fails its seal): damage is no evidence, and
/// quarantines nobody (as a commit drops such a candidate). Found by a review, 2026-11-24.
#[tokio::test]
async fn a_damaged_candidate_quarantines_nobody_when_a_result_is_restored() {
    let (_dir, c) = restored_over_a_dispute(true).await;
    assert!(!refused_as_quarantined(&c, "liar").await);
    assert!(!refused_as_quarantined(&c, "a").await);
}

/// A crash in the round that decided a disputed job (see the tests above), the liar's candidate
/// damaged if `damaged`: its directory and the coordinator started on it.
/// Copies the files of directory `from` (a closed store's) into `to`, recursively.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
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

async fn restored_over_a_dispute(damaged: bool) -> (tempfile::TempDir, Coordinator) {
    use crate::durable::store::tests::a_dispute_undecided;
    // Where it crashed: the store before the round. Where the round completed (a copy of it, with the
    // same secret and so the same verified jobs): the counted result that decided the job.
    let dir = tempfile::tempdir().unwrap();
    let (store, decider) = a_dispute_undecided(dir.path());
    assert_eq!(store.tally(1).unwrap().jobs, 3, "the liar's two and a's");
    drop(store);
    let whole = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), whole.path());
    let decided = Store::open_when_free(whole.path(), Duration::from_secs(30)).unwrap();
    assert_eq!(
        decided
            .commit(std::slice::from_ref(&decider))
            .unwrap()
            .quarantined
            .len(),
        1
    );
    let record = decided.result(1, &decider.key).unwrap().unwrap();
    drop(decided);
    // The ledger with the deciding result alone.
    let line = nqueens_common::jsonl::encode(&crate::durable::ledger::Entry::Result {
        run: 1,
        job: decider.key.to_string(),
        record,
    });
    let path = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    let mut ledger = std::fs::read(&path).unwrap();
    ledger.extend(line);
    std::fs::write(&path, ledger).unwrap();
    if damaged {
        let store = Store::open_when_free(dir.path(), Duration::from_secs(30)).unwrap();
        store.damage_candidate(1, &decider.key, "liar");
        store.flush().unwrap();
    }
    let c = reopened(dir.path()).await;
    (dir, c)
}

/// A worker's late result for a job another worker finished, different from the counted one and under
/// a lease issued for the job, disputes the count: the run is running again, the job is leased to a
/// third worker, and its decision quarantines the wrong worker and finishes the run exactly (found by a
/// review, 2026-11-24, a later session: the late result was logged as a mismatch and the run stayed
/// done with whatever the first result said).
#[tokio::test(start_paused = true)]
async fn a_late_different_result_reopens_the_run_and_a_third_worker_decides() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 64).await;
    // a's leases expire; "m" leases every job again, and a reports late: its results count.
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let again = lease(&c, "m", 64).await;
    assert_eq!(again.len(), held.len());
    report_all(&c, "a", &held).await;
    assert_eq!(total(&c, &run), (Q8, true));
    // m computed the first job one off (faulty memory, or a's count is the wrong one).
    let first = again.iter().find(|g| g.key == held[0].key).unwrap();
    let outcomes = c.report("m", "m", vec![lying(first)]).await.unwrap();
    assert_eq!(outcomes, vec![Outcome::Disputed]);
    let view = c.run(&run).unwrap();
    assert!(!view.is_done(), "running again");
    assert_eq!(view.jobs_disputed, 1);
    let first = Job::new(held[0].plan, held[0].key.clone()).unwrap().run();
    assert_eq!(view.tally.total, Q8 - u128::from(first.total));
    // Neither a nor m is given the job again; z is, and decides.
    assert!(lease(&c, "a", 4).await.is_empty());
    let decider = lease(&c, "z", 4).await;
    assert_eq!(decider.len(), 1);
    assert_eq!(decider[0].key, held[0].key);
    assert_eq!(report_all(&c, "z", &decider).await, vec![Outcome::Accepted]);
    assert_eq!(total(&c, &run), (Q8, true));
    assert!(matches!(
        c.lease(&ask("m", 1), Duration::ZERO).await,
        Err(Error::Quarantined { .. })
    ));
}

/// A run whose every job is counted but whose unique counts' Burnside sum is not a multiple of 8 holds
/// a wrong result somewhere: it is `inconsistent`, never `done` (found by a review, 2026-11-24, a later
/// session: the view dropped the error, and status, the page, the metrics and the batch scripts showed
/// the run done, its total as final).
#[tokio::test(start_paused = true)]
async fn a_run_whose_unique_counts_disagree_is_inconsistent_not_done() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 64).await;
    let mut reports: Vec<Report> = held.iter().map(report).collect();
    // A job with a symmetric ring, its unique count one step of its own off (each job's counts still
    // bound each other: `Job::check`), so that only the sum shows it.
    let (i, step) = held
        .iter()
        .zip(&reports)
        .enumerate()
        .find_map(|(i, (g, r))| {
            let [w, e, prefix @ ..] = g.key.0.as_slice() else {
                return None;
            };
            let h =
                nqueens_common::partition::d4::Group::new(8, *w, *e)?.largest_stabiliser(prefix)?;
            let u = r.result.unique8?;
            let step = 8 / u64::from(h);
            (h > 1 && u + step <= u64::from(h) * r.result.total).then_some((i, step))
        })
        .expect("N = 8 has a job of a symmetric ring with a solution");
    let wrong = &mut reports[i];
    wrong.result.unique8 = wrong.result.unique8.map(|u| u + step);
    wrong.seal = Some(seal(held[i].fingerprint, &held[i].key, &wrong.result));
    c.report("a", "a", reports).await.unwrap();
    let view = c.run(&run).unwrap();
    assert_eq!(view.tally.jobs, view.meta.jobs_total);
    assert_eq!(view.phase, crate::durable::store::Phase::Inconsistent);
    assert_eq!(view.unique(), None);
    let status = crate::wire::grpc::run_status(&view);
    assert_eq!(status.state, nqueens_proto::RunState::Inconsistent as i32);
    assert!(lease(&c, "b", 4).await.is_empty());
}

/// Failed jobs are put back after the start has mended the store, and only in the runs asked for: a
/// damaged job record in another run no longer refuses `count` and `serve --retry-failed` (they read
/// every job record before the start's repair), and `count` puts back only its own plan's failed jobs,
/// never a run it then refuses (found by a review, 2026-11-24, a later session).
#[test]
fn failed_jobs_are_retried_after_the_repair_and_only_where_asked() {
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    let other = nqueens_common::Plan::new(9, Strategy::D4).unwrap();
    for retry in [super::RetryFailed::Plan(plan), super::RetryFailed::All] {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs, key, their_key) = {
            let store = Store::open(dir.path()).unwrap();
            let ours = store.create_run(plan, 0.0).unwrap().id;
            let theirs = store.create_run(other, 1.0).unwrap().id;
            let key = plan.jobs().next().unwrap();
            let their_key = other.jobs().next().unwrap();
            store.fail_job(ours, &key, "test").unwrap();
            store.fail_job(theirs, &their_key, "test").unwrap();
            // A job waiting for its second result, its record then damaged.
            let waiting = other.jobs().nth(1).unwrap();
            store
                .commit(&[crate::durable::store::tests::incoming_from(
                    theirs, &other, 1, "a",
                )])
                .unwrap();
            store.flush().unwrap();
            crate::durable::ledger::rewrite(
                &dir.path().join(crate::durable::ledger::LEDGER_FILE),
                &store,
            )
            .unwrap();
            let k = crate::durable::store::records::job_key(theirs, &waiting);
            store.damage_record("jobs", &k, |j| j.replace("\"a\"", "\"b\""));
            (ours, theirs, key, their_key)
        };
        let store = Store::open_when_free(dir.path(), Duration::from_secs(30)).unwrap();
        let config = Config {
            retry_failed: retry,
            ..Config::default()
        };
        let c = Coordinator::open(store, config).expect("the start mends the damaged record first");
        let store = &c.shared.store;
        assert_eq!(store.job(ours, &key).unwrap(), None, "ours pending again");
        let theirs_now = store.job(theirs, &their_key).unwrap();
        if retry == super::RetryFailed::All {
            assert_eq!(theirs_now, None, "every run's");
        } else {
            assert_eq!(
                theirs_now.unwrap().state,
                crate::durable::store::JobState::Failed,
                "another plan's failure kept"
            );
        }
    }
}

/// Open runs (running, stalled or paused) are bounded: past `max_open_runs` a creation is refused with
/// a clear error and writes nothing; a cancelled or finished run frees its place; creations at once
/// never overshoot the bound; `reuse` still returns an existing run.
#[tokio::test]
async fn open_runs_are_bounded_and_a_closed_one_frees_its_place() {
    let config = Config {
        max_open_runs: 3,
        ..Config::default()
    };
    let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
    let create = |n: u32| c.create_run(n, Strategy::D4, None, Some(0.0), 0, false);
    let (a, b, d, e) = tokio::join!(create(8), create(9), create(10), create(11));
    let made: Vec<_> = [a, b, d, e].into_iter().filter_map(|r| r.ok()).collect();
    assert_eq!(made.len(), 3, "creations at once overshot the bound");
    assert_eq!(c.runs().len(), 3);
    let refused = create(12).await.unwrap_err();
    assert!(matches!(refused, Error::TooMany(_)), "{refused:?}");
    assert!(refused.to_string().contains("cancel"), "{refused}");
    assert_eq!(c.runs().len(), 3, "a refused creation wrote a run");
    // `reuse` of an open run's plan is no creation.
    let n = u32::from(made[0].meta.n);
    let again = c
        .create_run(n, Strategy::D4, None, Some(0.0), 0, true)
        .await
        .unwrap();
    assert_eq!(again.id(), made[0].id());
    // A cancelled run frees its place.
    c.control(&made[1].id(), Control::Cancel).await.unwrap();
    create(12).await.unwrap();
    assert!(matches!(create(13).await, Err(Error::TooMany(_))));
}

/// Waves of fresh identities that take every job and walk away fail no job: a worker with no result
/// counted cannot make a job fail, however many of them there are. Before, the expiries of any two
/// names failed a job (names were free), and the run stalled until a restart with --retry-failed.
#[tokio::test(start_paused = true)]
async fn walk_away_waves_of_fresh_identities_fail_no_job() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    for wave in 0..8 {
        let name = format!("walker-{wave}");
        assert!(!lease(&c, &name, 4096).await.is_empty());
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    assert_eq!(c.run(&run).unwrap().jobs_failed, 0);
    let held = lease(&c, "honest", 4096).await;
    report_all(&c, "honest", &held).await;
    assert_eq!(total(&c, &run), (Q8, true));
}

/// Identities whose only results are held for a check (a liar's made-up counts cost nothing) fail no
/// job by letting their leases expire: only a result counted makes an identity's expiries attempts.
/// (A review of 2026-11-30 found that the first form of the room fix, which grows a credential's
/// lease limit for a held result too, let such a result make its expiries count.)
#[tokio::test(start_paused = true)]
async fn identities_with_results_only_held_fail_no_job() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    // Each leases a job before either reports: two first results, both held.
    let (a, b) = (lease(&c, "a", 1).await, lease(&c, "b", 1).await);
    assert_ne!(a[0].key, b[0].key);
    assert_eq!(report_all(&c, "a", &a).await, vec![Outcome::Pending]);
    assert_eq!(report_all(&c, "b", &b).await, vec![Outcome::Pending]);
    for round in 0..12 {
        let name = if round % 2 == 0 { "a" } else { "b" };
        lease(&c, name, 4096).await;
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    assert_eq!(c.run(&run).unwrap().jobs_failed, 0);
}

/// A job that kills every credible worker that takes it still fails (two workers with results counted
/// let its leases expire, again and again), and the operator puts it back while serving: the stalled
/// run runs again and ends exact.
#[tokio::test(start_paused = true)]
async fn a_poison_job_still_fails_under_credible_workers_and_is_retried_while_serving() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    for name in ["a", "b"] {
        let one = lease(&c, name, 1).await;
        report_all(&c, name, &one).await;
    }
    let mut rounds = 0;
    while c.run(&run).unwrap().jobs_failed == 0 {
        rounds += 1;
        assert!(rounds < 60, "no job failed");
        let name = if rounds % 2 == 0 { "a" } else { "b" };
        lease(&c, name, 4096).await;
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    // Every job left fails in time: the run stalls.
    while c.run(&run).unwrap().phase != crate::durable::store::Phase::Stalled {
        rounds += 1;
        assert!(rounds < 200, "the run never stalled");
        let name = if rounds % 2 == 0 { "a" } else { "b" };
        lease(&c, name, 4096).await;
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    let failed = c.run(&run).unwrap().jobs_failed;
    let (retried, view) = c.retry_failed(&run).await.unwrap();
    assert_eq!(retried, failed);
    assert_eq!(view.jobs_failed, 0);
    assert_eq!(view.phase, crate::durable::store::Phase::Running);
    // Nothing more to retry; an unknown run is refused.
    assert_eq!(c.retry_failed(&run).await.unwrap().0, 0);
    assert!(matches!(
        c.retry_failed("99").await,
        Err(Error::UnknownRun(_))
    ));
    let held = lease(&c, "c", 4096).await;
    assert_eq!(held.len() as u64, retried);
    report_all(&c, "c", &held).await;
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A worker credential with no result counted holds at most `NEW_IDENTITY_LEASES` leases, however many
/// it asks for: it cannot take a whole run and sit on it. Each result counted lets it hold
/// `LEASES_PER_RESULT` more. Workers under the operator's token are not limited.
#[tokio::test(start_paused = true)]
async fn a_new_credential_cannot_take_a_whole_run() {
    use super::lease::{lease_limit, NEW_IDENTITY_LEASES};
    let c = coordinator();
    let view = run_of_13(&c).await;
    let total = view.meta.jobs_total;
    assert!(total > 2 * NEW_IDENTITY_LEASES, "{total} jobs");
    let as_credential = |capacity| Ask {
        worker: "node/1",
        name: "node",
        label: "node",
        credential: true,
        threads: 1,
        gpus: 0,
        gpu_kernels: &[],
        capacity,
        only: None,
    };
    let first = c.lease(&as_credential(4096), Duration::ZERO).await.unwrap();
    assert_eq!(first.leases.len() as u64, NEW_IDENTITY_LEASES);
    let more = c.lease(&as_credential(4096), Duration::ZERO).await.unwrap();
    assert!(more.leases.is_empty() && !more.idle, "full, not idle");
    c.report("node/1", "node", first.leases.iter().map(report).collect())
        .await
        .unwrap();
    let second = c.lease(&as_credential(4096), Duration::ZERO).await.unwrap();
    let left = total - NEW_IDENTITY_LEASES;
    assert_eq!(
        second.leases.len() as u64,
        left.min(lease_limit(NEW_IDENTITY_LEASES))
    );
    // The operator's workers are trusted: one takes whatever is left.
    let trusted = lease(&c, "operator-worker", 4096).await;
    assert_eq!(trusted.len() as u64, left - second.leases.len() as u64);
}

/// An Ask of one job at a time by the worker credential `name`.
fn as_credential(name: &str) -> Ask<'_> {
    Ask {
        worker: name,
        name,
        label: name,
        credential: true,
        threads: 1,
        gpus: 0,
        gpu_kernels: &[],
        capacity: 1,
        only: None,
    }
}

/// A coordinator whose run 1 (N = 8, every job verified) two honest credentials computed, all but one
/// job confirmed (ready to serve as spot checks, and still running: checks come from runs a worker may
/// lease from); and its run 2 (N = 13 split two rows deep, nothing verified, at a higher priority: its
/// jobs are leased first) to lease.
async fn confirmed_and_open() -> (Coordinator, String) {
    let c = coordinator();
    confirmed_run(&c).await;
    let open = urgent_run_of_13(&c).await;
    (c, open)
}

/// A run of N = 13 split two rows deep, nothing verified, at priority 1.
async fn urgent_run_of_13(c: &Coordinator) -> String {
    c.create_run(13, Strategy::D4, Some(2), Some(0.0), 1, false)
        .await
        .unwrap()
        .id()
}

/// A run of N = 8 on `c`, every job verified, that two honest credentials computed: all its jobs but
/// one confirmed, ready to serve as spot checks; the one left (the second result handed back) keeps the
/// run running.
async fn confirmed_run(c: &Coordinator) -> String {
    let confirmed = verified_run_of_8(c).await;
    for name in ["honest-a", "honest-b"] {
        let mut kept = None;
        loop {
            let got = c.lease(&as_credential(name), Duration::ZERO).await.unwrap();
            if got.leases.is_empty() {
                break;
            }
            if name == "honest-b" && kept.is_none() {
                kept = Some(got.leases[0].id);
                continue;
            }
            c.report(name, name, got.leases.iter().map(report).collect())
                .await
                .unwrap();
        }
        if let Some(id) = kept {
            c.release(name, &[id], false).unwrap();
        }
    }
    let view = c.run(&confirmed).unwrap();
    assert_eq!(view.phase, crate::durable::store::Phase::Running);
    assert_eq!(view.jobs_confirmed + 1, view.meta.jobs_total);
    confirmed
}

/// Workers under the operator's token are trusted: they get no spot checks, however many jobs they
/// lease beside a pool of confirmed ones (killed the mutant `&&` to `||` of the rule, issue 42).
#[tokio::test(start_paused = true)]
async fn the_operators_workers_get_no_spot_checks() {
    let (c, _open) = confirmed_and_open().await;
    for _ in 0..100 {
        let held = lease(&c, "operator-worker", 1).await;
        assert!(held.len() <= 1);
        report_all(&c, "operator-worker", &held).await;
    }
    assert_eq!(c.state().spot.passed_by("operator-worker"), 0);
}

/// Issue 37: the stated bound holds against the strongest liar, one that tells every check and second
/// result from a fresh job (a re-leased key stands out from its neighbours in the plan's list) and lies
/// on fresh first results only. Keyed verification is what meets those lies, at the run's fraction,
/// which a run bounded at 1 raises to 0.308. Here 300 such liars tell three lies each in runs of N = 11
/// bounded at 1; honest workers finish each run. The lies left standing (the total's excess over the
/// published count, 8 a lie) average what the bound's arithmetic says, 3 * 0.692^3 = 0.995, within
/// four standard deviations (0.33), and at most the bound plus that. Before, a run verified 1 %
/// whatever its bound, and nearly every such lie stood.
#[tokio::test(start_paused = true)]
async fn a_liar_that_lies_only_on_fresh_jobs_stays_within_the_stated_bound() {
    let c = coordinator_admitting_all();
    let trials = 300;
    let mut standing = 0u128;
    for t in 0..trials {
        let run = c
            .create_run_as(
                11,
                Strategy::D4,
                None,
                super::NewRun {
                    max_error: Some(1.0),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .id();
        let liar = format!("liar-{t}");
        let got = c
            .lease(
                &Ask {
                    capacity: 3,
                    only: Some(&run),
                    ..as_credential(&liar)
                },
                Duration::ZERO,
            )
            .await
            .unwrap();
        // A fresh run has nothing confirmed: every lease is a fresh job.
        assert_eq!(got.leases.len(), 3);
        let lies: Vec<Report> = got
            .leases
            .iter()
            .map(|g| {
                let lie = lying(g);
                let job = Job::new(g.plan, g.key.clone()).unwrap();
                assert!(job.check(&lie.result).is_ok(), "a plausible lie");
                lie
            })
            .collect();
        c.report(&liar, &liar, lies).await.unwrap();
        for _ in 0..20 {
            if c.run(&run).unwrap().is_done() {
                break;
            }
            for worker in ["op-a", "op-b"] {
                let held = lease(&c, worker, 4096).await;
                report_all(&c, worker, &held).await;
            }
        }
        let (total, done) = total(&c, &run);
        assert!(done, "trial {t}");
        standing += (total - 2680) / 8;
    }
    let mean = standing as f64 / trials as f64;
    let q = super::spot_rate_for(1.0);
    let expected = 3.0 * (1.0 - q).powi(3);
    let sd = 3.0 * ((1.0 - q).powi(3) * (1.0 - (1.0 - q).powi(3))).sqrt() / (trials as f64).sqrt();
    eprintln!("{mean} lies standing per liar; expected {expected}, bound 1");
    assert!(expected <= 1.0);
    assert!(
        (mean - expected).abs() < 4.0 * sd,
        "{mean}, {expected} +- {sd}"
    );
}

/// Spot checks come from the runs a worker may lease from now: never from a finished run, whose every
/// lease would be a check that a liar answers honestly. A credential leasing beside a finished run full
/// of confirmed jobs meets no check of it.
#[tokio::test(start_paused = true)]
async fn a_finished_run_lends_no_spot_checks() {
    let c = coordinator();
    let finished = verified_run_of_8(&c).await;
    for name in ["honest-a", "honest-b"] {
        loop {
            let got = c.lease(&as_credential(name), Duration::ZERO).await.unwrap();
            if got.leases.is_empty() {
                break;
            }
            c.report(name, name, got.leases.iter().map(report).collect())
                .await
                .unwrap();
        }
    }
    assert!(c.run(&finished).unwrap().is_done());
    run_of_13(&c).await;
    for _ in 0..100 {
        let got = c
            .lease(&as_credential("new"), Duration::ZERO)
            .await
            .unwrap();
        assert!(
            got.leases.iter().all(|g| g.run.to_string() != finished),
            "{:?}",
            got.leases
        );
        c.report("new", "new", got.leases.iter().map(report).collect())
            .await
            .unwrap();
    }
    assert_eq!(c.state().spot.passed_by("new"), 0);
}

/// Liars that lie on every job they get, leasing one at a time on a run that verifies nothing, meet
/// spot checks (confirmed jobs of another run) at the rate of a new identity, 0.2: each is caught
/// within 20 leases with odds 1 - 0.8^20 (98.8 %); here at least 52 of 60 (fewer has odds below 1 in a
/// million). Each one caught is quarantined and everything it had counted taken back. Before, with no
/// spot checks, a run that verifies nothing counted every lie. A check failed takes its confirmed count
/// back too (two that agreed may have agreed on a lie): an honest worker computes it again, so that the
/// pool of checks stays full as in a run with workers beside the liars.
#[tokio::test(start_paused = true)]
async fn liars_meet_spot_checks_at_a_new_identitys_rate() {
    let c = coordinator_admitting_all();
    let confirmed = confirmed_run(&c).await;
    let open = urgent_run_of_13(&c).await;
    let mut caught = 0;
    for i in 0..60 {
        let name = format!("liar-{i}");
        for _ in 0..20 {
            let got = c.lease(&as_credential(&name), Duration::ZERO).await;
            let Ok(got) = got else {
                break;
            };
            let checked: Vec<JobKey> = got
                .leases
                .iter()
                .filter(|g| g.plan.n() == 8)
                .map(|g| g.key.clone())
                .collect();
            // Lies wherever a lie passes the plausibility checks (a job no ring fits cannot be lied
            // about without being refused outright).
            let lies: Vec<Report> = got
                .leases
                .iter()
                .map(|g| {
                    let lie = lying(g);
                    let job = Job::new(g.plan, g.key.clone()).unwrap();
                    match job.check(&lie.result) {
                        Ok(()) => lie,
                        Err(_) => report(g),
                    }
                })
                .collect();
            c.report(&name, &name, lies).await.unwrap();
            if c.state().quarantined.contains_key(&name) {
                caught += 1;
                recount(&c, &confirmed, &format!("mender-{i}"), checked).await;
                break;
            }
        }
    }
    eprintln!("{caught} of 60 liars caught");
    assert!(caught >= 52, "{caught} of 60 liars caught");
    // What the uncaught ones counted is all that stands of the lies: the caught ones' are taken back.
    let view = c.run(&open).unwrap();
    assert!(view.tally.jobs <= (60 - caught) * 20, "{}", view.tally.jobs);
}

/// An honest credential `name` computes the jobs `keys` of run `run` (counts a liar's failed checks took
/// back), handing back every other job it is leased there.
async fn recount(c: &Coordinator, run: &str, name: &str, mut keys: Vec<JobKey>) {
    for _ in 0..20 {
        if keys.is_empty() {
            return;
        }
        let ask = Ask {
            only: Some(run),
            capacity: 8,
            ..as_credential(name)
        };
        let got = c.lease(&ask, Duration::ZERO).await.unwrap();
        let (mine, others): (Vec<Granted>, Vec<Granted>) =
            got.leases.into_iter().partition(|g| keys.contains(&g.key));
        keys.retain(|k| !mine.iter().any(|g| g.key == *k));
        c.report(name, name, mine.iter().map(report).collect())
            .await
            .unwrap();
        let ids: Vec<u64> = others.iter().map(|g| g.id).collect();
        c.release(name, &ids, false).unwrap();
    }
    panic!("{keys:?} were never leased to {name}");
}

/// An honest credential passes its spot checks, serves on, and is checked less as it passes.
#[tokio::test(start_paused = true)]
async fn an_honest_credential_passes_its_spot_checks_and_is_checked_less() {
    let (c, open) = confirmed_and_open().await;
    for _ in 0..400 {
        let got = c
            .lease(&as_credential("careful"), Duration::ZERO)
            .await
            .unwrap();
        if got.leases.is_empty() {
            break;
        }
        // A check takes the place of a job asked for, never one more (killed the mutant `-` to `+`).
        assert_eq!(got.leases.len(), 1);
        c.report(
            "careful",
            "careful",
            got.leases.iter().map(report).collect(),
        )
        .await
        .unwrap();
    }
    let passed = c.state().spot.passed_by("careful");
    assert!(passed >= 10, "{passed} checks passed");
    assert!(super::spot_check_rate(passed) < super::NEW_SPOT_RATE);
    assert!(c.state().quarantined.is_empty());
    assert!(c.run(&open).unwrap().tally.jobs > 300);
}

/// A dispute is decided only by a worker credential with a record (a result a second identity
/// confirmed, or a spot check passed): a new identity, perhaps the framer's accomplice, never gets the
/// disputed job; one with a record decides it, for the truth, and the framer is quarantined. Workers
/// under the operator's token are trusted to decide.
#[tokio::test(start_paused = true)]
async fn only_a_credential_with_a_record_decides_a_dispute() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    // "veteran" earns a record: a job "honest" confirms.
    let first = lease_credential(&c, "veteran", 1).await;
    c.report("veteran", "veteran", vec![report(&first[0])])
        .await
        .unwrap();
    let confirm = lease_credential(&c, "honest", 1).await;
    assert_eq!(confirm[0].key, first[0].key);
    c.report("honest", "honest", vec![report(&confirm[0])])
        .await
        .unwrap();
    assert_eq!(c.run(&run).unwrap().jobs_confirmed, 1);
    // "honest" computes a job; the framer disputes it with a lie.
    let target = lease_credential(&c, "honest", 1).await;
    c.report("honest", "honest", vec![report(&target[0])])
        .await
        .unwrap();
    let all = lease_credential(&c, "framer", 4096).await;
    let others: Vec<u64> = all
        .iter()
        .filter(|g| g.key != target[0].key)
        .map(|g| g.id)
        .collect();
    c.release("framer", &others, false).unwrap();
    let framed = all.iter().find(|g| g.key == target[0].key).unwrap();
    c.report("framer", "framer", vec![lying(framed)])
        .await
        .unwrap();
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 1);
    // A new identity gets every job but the disputed one.
    let accomplice = lease_credential(&c, "accomplice", 4096).await;
    assert!(!accomplice.is_empty());
    assert!(accomplice.iter().all(|g| g.key != target[0].key));
    // One whose record is a spot check passed (and nothing else) is offered it (issue 42: the
    // spot-check half of the rule had no test).
    c.state().spot.passed("checked");
    let offered = lease_credential(&c, "checked", 4096).await;
    assert!(
        offered.iter().any(|g| g.key == target[0].key),
        "{offered:?}"
    );
    let ids: Vec<u64> = offered.iter().map(|g| g.id).collect();
    c.release("checked", &ids, false).unwrap();
    // The veteran decides, for the truth.
    let decide = lease_credential(&c, "veteran", 4096).await;
    let judged = decide.iter().find(|g| g.key == target[0].key).unwrap();
    c.report("veteran", "veteran", vec![report(judged)])
        .await
        .unwrap();
    let view = c.run(&run).unwrap();
    assert_eq!(view.jobs_disputed, 0);
    assert!(c.state().quarantined.contains_key("framer"));
    assert!(!c.state().quarantined.contains_key("honest"));
}

/// Everything the credential `name` may lease now.
async fn lease_all_as(c: &Coordinator, name: &str) -> Vec<Granted> {
    lease_credential(c, name, 4096).await
}

/// The lease of job `key` for the credential `name`: everything it may lease is leased, that one kept,
/// the rest handed back.
async fn take(c: &Coordinator, name: &str, key: &nqueens_common::JobKey) -> Granted {
    let all = lease_all_as(c, name).await;
    let (mine, others): (Vec<Granted>, Vec<Granted>) = all.into_iter().partition(|g| &g.key == key);
    let ids: Vec<u64> = others.iter().map(|g| g.id).collect();
    c.release(name, &ids, false).unwrap();
    mine.into_iter()
        .next()
        .unwrap_or_else(|| panic!("{name} was not leased job {key}"))
}

/// Issue 37: a quarantine found wrong later is undone. Two credentials with a record (each confirmed
/// the other once) frame an honest worker: one disputes its result with a lie, the other decides the
/// dispute for the lie, and the honest worker is quarantined, naming both as its deciders. Each is then
/// caught lying by honest workers; once both are quarantined the honest worker's quarantine is lifted
/// (the store, the ledger and a restart agree), it leases again, and the run ends exact. A quarantine
/// whose deciders are not all disproved stays. Before, it stayed until an operator restarted the
/// coordinator with `--release-quarantine`.
#[tokio::test]
async fn a_quarantine_whose_deciders_are_all_disproved_is_lifted() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened_with(dir.path(), admitting_all()).await;
    let run = verified_run_of_8(&c).await;
    let keys: Vec<nqueens_common::JobKey> = {
        let all = lease(&c, "probe", 4096).await;
        c.release(
            "probe",
            &all.iter().map(|g| g.id).collect::<Vec<_>>(),
            false,
        )
        .unwrap();
        all.into_iter().map(|g| g.key).collect()
    };
    assert!(keys.len() >= 5, "{}", keys.len());
    let honest = |c: &Coordinator, name: &'static str, key: usize| {
        let (c, key) = (c.clone(), keys[key].clone());
        async move {
            let g = take(&c, name, &key).await;
            c.report(name, name, vec![report(&g)]).await.unwrap();
        }
    };
    let lie = |c: &Coordinator, name: &'static str, key: usize| {
        let (c, key) = (c.clone(), keys[key].clone());
        async move {
            let g = take(&c, name, &key).await;
            c.report(name, name, vec![lying(&g)]).await.unwrap();
        }
    };
    // Records: v and w confirm job 0, f and a job 1.
    honest(&c, "v", 0).await;
    honest(&c, "w", 0).await;
    honest(&c, "f", 1).await;
    honest(&c, "a", 1).await;
    // The frame: h computes job 2, f disputes it with a lie, a decides for the lie.
    honest(&c, "h", 2).await;
    lie(&c, "f", 2).await;
    lie(&c, "a", 2).await;
    let quarantines = |c: &Coordinator| {
        let mut q: Vec<String> = c.state().quarantined.keys().cloned().collect();
        q.sort();
        q
    };
    assert_eq!(quarantines(&c), ["h"]);
    let stored = c.shared.store.quarantined().unwrap();
    assert_eq!(stored[0].by, ["f", "a"], "{stored:?}");
    // f is caught on job 3: v computed it, w decides. h stays quarantined (a is not disproved yet).
    honest(&c, "v", 3).await;
    lie(&c, "f", 3).await;
    honest(&c, "w", 3).await;
    assert_eq!(quarantines(&c), ["f", "h"]);
    // a is caught on job 4: both of h's deciders are disproved, and h serves again.
    honest(&c, "v", 4).await;
    lie(&c, "a", 4).await;
    honest(&c, "w", 4).await;
    assert_eq!(quarantines(&c), ["a", "f"]);
    let stored: Vec<String> = c.shared.store.quarantined_names();
    assert_eq!(stored, ["a", "f"]);
    drop(c);
    // A restart (the ledger reconciled with the store) agrees; h leases and the run ends exact.
    let c = reopened_with(dir.path(), admitting_all()).await;
    assert_eq!(quarantines(&c), ["a", "f"]);
    for _ in 0..10 {
        for name in ["h", "v", "w"] {
            let held = lease_all_as(&c, name).await;
            c.report(name, name, held.iter().map(report).collect())
                .await
                .unwrap();
        }
    }
    assert_eq!(total(&c, &run), (92, true));
}

/// Issue 37: a lift the store holds no `released` line for is made at the start. The commit thread
/// lifts in the store, then writes the ledger's line; a process killed between the two leaves the
/// ledger's quarantine, which the start joins back into the store. Before the fix the worker then
/// stayed quarantined until another quarantine ran the rule; now the start lifts it, store and ledger
/// alike, and a second start agrees.
#[tokio::test]
async fn a_lift_whose_ledger_line_was_lost_is_made_at_the_start() {
    use crate::durable::store::tests::quarantined_by;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        // As a crash leaves it: the ledger (written by the start that follows from the store) holds
        // both quarantines, as it did before the commit thread lifted "framed" in the store.
        store
            .restore_quarantine(&quarantined_by("framed", &["liar"]))
            .unwrap();
        store
            .restore_quarantine(&quarantined_by("liar", &["honest"]))
            .unwrap();
        store.flush().unwrap();
    }
    let c = reopened(dir.path()).await;
    let names = |c: &Coordinator| {
        let mut q: Vec<String> = c.state().quarantined.keys().cloned().collect();
        q.sort();
        q
    };
    assert_eq!(names(&c), ["liar"]);
    drop(c);
    let ledger = std::fs::read(dir.path().join(crate::durable::ledger::LEDGER_FILE)).unwrap();
    let ledger = String::from_utf8_lossy(&ledger);
    assert_eq!(
        ledger
            .matches(r#""kind":"released","worker":"framed""#)
            .count(),
        1,
        "{ledger}"
    );
    let c = reopened(dir.path()).await;
    assert_eq!(names(&c), ["liar"]);
    let stored: Vec<String> = c.shared.store.quarantined_names();
    assert_eq!(stored, ["liar"]);
    let lifted: Vec<String> = c
        .shared
        .store
        .lifted()
        .unwrap()
        .into_iter()
        .map(|q| q.worker)
        .collect();
    assert_eq!(lifted, ["framed"]);
    drop(c);
    // The ledger's last word on "framed" a quarantine again (its release line lost to a crash, say):
    // the start restores it into the store beside its lifted record, and the rule decides the join:
    // lifted again, with a new release line.
    let path = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    let view = crate::durable::ledger::LedgerView::read(&path).unwrap();
    let mut ledger =
        crate::durable::ledger::Ledger::open(&path, view.len, view.next_worker).unwrap();
    ledger
        .append(&[crate::durable::ledger::Entry::Quarantine(quarantined_by(
            "framed",
            &["liar"],
        ))])
        .unwrap();
    drop(ledger);
    let c = reopened(dir.path()).await;
    assert_eq!(names(&c), ["liar"]);
    assert_eq!(c.shared.store.lifted().unwrap().len(), 1);
    drop(c);
    let ledger = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
    assert_eq!(
        ledger
            .matches(r#""kind":"released","worker":"framed""#)
            .count(),
        2,
        "{ledger}"
    );
}

/// Issue 37: an operator's release at the start comes before the quarantine rule. a was lifted because
/// its decider x is quarantined; a start that releases x takes a's lift's basis away, and a is
/// quarantined again at that very start (before, the rule ran first, and a served until the next
/// quarantine or start; found by a review, 2026-11-28).
#[tokio::test]
async fn a_release_of_a_decider_at_the_start_puts_back_what_it_had_lifted() {
    use crate::durable::store::tests::quarantined_by;
    let store = Store::temporary().unwrap();
    store
        .restore_quarantine(&quarantined_by("a", &["x"]))
        .unwrap();
    store
        .restore_quarantine(&quarantined_by("x", &["y"]))
        .unwrap();
    assert_eq!(store.apply_quarantine_rule().unwrap().lifted.len(), 1);
    let config = Config {
        release: vec!["x".into()],
        ..Config::default()
    };
    let c = Coordinator::open(store, config).unwrap();
    let mut names: Vec<String> = c.state().quarantined.keys().cloned().collect();
    names.sort();
    assert_eq!(names, ["a"]);
    assert!(c.shared.store.lifted().unwrap().is_empty());
}

/// Issue 37: a `--release-quarantine NAME` left in a deployment after the rule lifted NAME no longer
/// refuses the start (it did: "no quarantined worker is named"); the lifted record goes, so the rule
/// never puts it back. A lifted worker's record (its confirmed results before) decides nothing after a
/// start: it earns one again.
#[tokio::test]
async fn a_release_of_a_worker_the_rule_lifted_is_final_and_a_lifted_worker_has_no_record() {
    use crate::durable::store::tests::{incoming_from, quarantined_by};
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
        let run = store.create_run(plan, 1.0).unwrap();
        store
            .commit(&[incoming_from(run.id, &plan, 0, "w")])
            .unwrap();
        store
            .commit(&[incoming_from(run.id, &plan, 0, "v")])
            .unwrap();
        store
            .restore_quarantine(&quarantined_by("w", &["x"]))
            .unwrap();
        store
            .restore_quarantine(&quarantined_by("x", &["y"]))
            .unwrap();
        store.flush().unwrap();
    }
    let c = reopened(dir.path()).await;
    assert!(
        !c.state().quarantined.contains_key("w"),
        "lifted at the start"
    );
    assert!(c.state().confirmed.contains("v"));
    assert!(
        !c.state().confirmed.contains("w"),
        "no record from before its lift"
    );
    drop(c);
    let config = Config {
        release: vec!["w".into()],
        ..Config::default()
    };
    let c = reopened_with(dir.path(), config).await;
    assert!(
        c.shared.store.lifted().unwrap().is_empty(),
        "released for good"
    );
    assert!(!c.state().quarantined.contains_key("w"));
}

/// Issues 37 and 38: a verified job's second result comes from another kernel family where the fleet
/// has one. Four workers, g and g2 on GPUs and l and l2 on CPU work lists, each report a first result
/// of their own jobs; then g2 is not leased g's waiting jobs (a GPU result waits for l or l2) but takes
/// l's and l2's, and l takes g's. With no wait configured, g2 takes g's at once, as before. (With l
/// alone on lists, nothing waits: `steer::QUORUM`.)
#[tokio::test]
async fn a_second_result_is_steered_to_another_kernel_family() {
    use nqueens_common::{Family, JobKey};
    async fn scenario(wait: Duration) -> (Vec<JobKey>, Vec<JobKey>, Vec<JobKey>, Coordinator) {
        let config = Config {
            lease_timeout: TIMEOUT,
            family_wait: wait,
            ..Config::default()
        };
        let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
        let run = c
            .create_run(10, Strategy::D4, None, Some(1.0), 0, false)
            .await
            .unwrap()
            .id();
        // Each leases fresh jobs before any reports (a job waiting for its second result is leased
        // before fresh ones).
        let g = lease(&c, "g", 3).await;
        let l = lease(&c, "l", 3).await;
        let l2 = lease(&c, "l2", 1).await;
        let g2 = lease(&c, "g2", 2).await;
        for (name, held, family) in [
            ("g", &g, Family::Gpu),
            ("l", &l, Family::CpuLists),
            ("l2", &l2, Family::CpuLists),
            ("g2", &g2, Family::Gpu),
        ] {
            let outcomes = report_of_family(&c, name, held, family).await;
            assert!(
                outcomes.iter().all(|o| *o == Outcome::Pending),
                "{outcomes:?}"
            );
        }
        let keys = |held: &[Granted]| held.iter().map(|g| g.key.clone()).collect::<Vec<JobKey>>();
        let (of_g, mut of_l) = (keys(&g), keys(&l));
        of_l.extend(keys(&l2));
        let held_by_g2 = lease(&c, "g2", 4096).await;
        let to_g2: Vec<JobKey> = held_by_g2.iter().map(|g| g.key.clone()).collect();
        assert!(
            of_l.iter().all(|k| to_g2.contains(k)),
            "l's and l2's first results wait for g2"
        );
        if wait > Duration::ZERO {
            // g2 computes all it holds; what is left for it is g's jobs, held for l: g2 is told to
            // wait, never that it is idle (an `--exit-when-idle` worker would leave for good).
            report_of_family(&c, "g2", &held_by_g2, Family::Gpu).await;
            let grant = c.lease(&ask("g2", 4096), Duration::ZERO).await.unwrap();
            assert!(grant.leases.is_empty(), "{:?}", grant.leases);
            assert!(
                !grant.idle,
                "jobs held for another family are g2's once the wait ends"
            );
        }
        let held = lease(&c, "l", 4096).await;
        let to_l: Vec<JobKey> = held.iter().map(|g| g.key.clone()).collect();
        let outcomes = report_of_family(&c, "l", &held, Family::CpuLists).await;
        // Every confirmation here crosses two families (l confirms GPU results, g2 l's): the run
        // counts them all, and the worker table names the families.
        let view = c.run(&run).unwrap();
        let two = outcomes.iter().filter(|o| **o == Outcome::Accepted).count() as u64;
        if wait > Duration::ZERO {
            assert!(two >= of_g.len() as u64, "{outcomes:?}");
        }
        assert!(view.jobs_confirmed >= two);
        assert_eq!(view.jobs_two_families, view.jobs_confirmed);
        let families = |name: &str| {
            let w = c.workers().into_iter().find(|w| w.name == name).unwrap();
            w.families.iter().collect::<Vec<Family>>()
        };
        assert_eq!(families("l"), [Family::CpuLists]);
        assert_eq!(families("g2"), [Family::Gpu]);
        (of_g, to_g2, to_l, c)
    }
    let (of_g, to_g2, to_l, c) = scenario(Duration::from_secs(3600)).await;
    assert!(
        of_g.iter().all(|k| !to_g2.contains(k)),
        "{of_g:?} {to_g2:?}"
    );
    assert!(of_g.iter().all(|k| to_l.contains(k)), "{of_g:?} {to_l:?}");
    assert!(
        c.run("1").unwrap().jobs_two_families >= 5,
        "g's 3 and g2's 2 at least"
    );
    let (of_g, to_g2, _, _) = scenario(Duration::ZERO).await;
    assert!(of_g.iter().all(|k| to_g2.contains(k)), "{of_g:?} {to_g2:?}");
}

/// A worker row that never leased (seen only through a report) counts as no identity in the steering
/// quorum. Before, its name was empty, and its stated families counted as a second identity's: one
/// credential, with a report from a second worker id, made the quorum alone, and every verified job
/// of the common family was held for it, its partner's lies among them (found by a review,
/// 2026-11-29).
#[tokio::test(start_paused = true)]
async fn a_row_seen_only_through_a_report_counts_in_no_steering_quorum() {
    use nqueens_common::{Family, JobKey};
    let config = Config {
        lease_timeout: TIMEOUT,
        family_wait: Duration::from_secs(3600),
        ..Config::default()
    };
    let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
    c.create_run(10, Strategy::D4, None, Some(1.0), 0, false)
        .await
        .unwrap();
    let l = lease(&c, "l", 3).await;
    let l2 = lease(&c, "l2", 1).await;
    let g = lease(&c, "g", 1).await;
    for (name, held, family) in [
        ("l", &l, Family::CpuLists),
        ("l2", &l2, Family::CpuLists),
        ("g", &g, Family::Gpu),
    ] {
        report_of_family(&c, name, held, family).await;
    }
    // g again, from another worker id that never leases, stating a GPU.
    let again = Report {
        family: Some(Family::Gpu),
        ..report(&g[0])
    };
    let outcomes = c.report("g-phantom", "g", vec![again]).await.unwrap();
    assert_eq!(outcomes, vec![Outcome::Duplicate]);
    // One GPU identity makes no quorum: l's first results go to l2 at once.
    let to_l2: Vec<JobKey> = lease(&c, "l2", 4096)
        .await
        .into_iter()
        .map(|g| g.key)
        .collect();
    assert!(l.iter().all(|g| to_l2.contains(&g.key)), "{to_l2:?}");
}

/// A worker that asks for one run's jobs (`worker --run`) gets spot checks of that run only: never a
/// lease of another run, which it would not take.
#[tokio::test(start_paused = true)]
async fn a_worker_of_one_run_gets_spot_checks_of_that_run_only() {
    let (c, open) = confirmed_and_open().await;
    let id: u64 = open.parse().unwrap();
    for _ in 0..40 {
        let got = c
            .lease(
                &Ask {
                    only: Some(&open),
                    ..as_credential("focused")
                },
                Duration::ZERO,
            )
            .await
            .unwrap();
        assert!(got.leases.iter().all(|g| g.run == id), "{:?}", got.leases);
        c.report(
            "focused",
            "focused",
            got.leases.iter().map(report).collect(),
        )
        .await
        .unwrap();
    }
}

/// A report of more than `MAX_BATCH` results is refused whole, before any is looked at; one of exactly
/// `MAX_BATCH` is taken, each result answered (killed the mutant `>` → `==` of issue 42).
#[tokio::test(start_paused = true)]
async fn a_report_past_the_batch_limit_is_refused_whole_and_one_at_it_is_taken() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    let one = report(&held[0]);
    let over = vec![one.clone(); super::report::MAX_BATCH + 1];
    let refused = c.report("a", "a", over).await;
    assert!(
        matches!(&refused, Err(Error::WholeRequest(why)) if why.to_string().contains("results in one report")),
        "{refused:?}"
    );
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
    let at = vec![one; super::report::MAX_BATCH];
    let outcomes = c.report("a", "a", at).await.unwrap();
    assert_eq!(outcomes.len(), super::report::MAX_BATCH);
    assert_eq!(
        c.run(&run).unwrap().tally.jobs,
        1,
        "counted once, the copies duplicates"
    );
}

/// A worker's row counts the results accepted as new apart from the jobs it computed (killed a mutant of
/// issue 42's pass): a result of a verified job waiting for its second is a job, not an acceptance; a
/// result sent again is neither (see `a_result_sent_again_credits_nothing_and_a_spot_check_does`).
#[tokio::test(start_paused = true)]
async fn a_workers_row_counts_acceptances_apart_from_reports() {
    let c = coordinator();
    run_of_8(&c).await;
    let held = lease(&c, "a", 3).await;
    assert_eq!(held.len(), 3);
    let outcomes = report_all(&c, "a", &held).await;
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Accepted),
        "{outcomes:?}"
    );
    c.report("a", "a", vec![report(&held[0])]).await.unwrap();
    let row = |c: &Coordinator| {
        let row = c.workers().into_iter().find(|w| w.name == "a").unwrap();
        (row.jobs, row.accepted)
    };
    assert_eq!(row(&c), (3, 3));
    let c = coordinator();
    verified_run_of_8(&c).await;
    let held = lease(&c, "a", 2).await;
    let outcomes = report_all(&c, "a", &held).await;
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Pending),
        "{outcomes:?}"
    );
    assert_eq!(row(&c), (2, 0));
}

/// The rate bound: nodes over the time since the lease, that time at least a millisecond.
#[test]
fn a_rate_no_device_reaches_is_implausible() {
    use super::report::{implausible, MAX_PLAUSIBLE_RATE};
    let max = MAX_PLAUSIBLE_RATE as u64;
    assert!(!implausible(max, Duration::from_secs(1)));
    assert!(implausible(max + 1, Duration::from_secs(1)));
    assert!(!implausible(max / 1000, Duration::ZERO));
    assert!(implausible(max / 1000 + 1, Duration::ZERO));
    assert!(!implausible(max * 3600, Duration::from_secs(3600)));
}

/// Issue 37: a result reported faster than any device searches (a made-up count, sent at once) is
/// verified by a second identity even in a run that verifies nothing, and is not counted alone; an
/// honest one beside it counts. A second identity's agreeing result then counts it.
#[tokio::test(start_paused = true)]
async fn a_result_at_a_rate_no_device_reaches_waits_for_a_second_identity() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "fast", 2).await;
    let mut made_up = report(&held[0]);
    made_up.result.nodes = 10_000_000_000;
    made_up.seal = Some(seal(held[0].fingerprint, &held[0].key, &made_up.result));
    let outcomes = c
        .report("fast", "fast", vec![made_up.clone(), report(&held[1])])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![Outcome::Pending, Outcome::Accepted]);
    let view = c.run(&run).unwrap();
    assert_eq!((view.tally.jobs, view.jobs_verifying), (1, 1));
    // Another identity computes it: the honest count disagrees with the made-up nodes, a third decides.
    let again = lease(&c, "b", 64).await;
    let mine = again
        .iter()
        .find(|g| g.key == held[0].key)
        .expect("leased again to another name");
    assert_eq!(
        c.report("b", "b", vec![report(mine)]).await.unwrap(),
        vec![Outcome::Disputed]
    );
}

/// A lease left to expire does not skip the rate check (found by a review, 2026-11-29): a made-up
/// result under it, sent as soon as it expired, is verified by a second identity as under a live one.
#[tokio::test(start_paused = true)]
async fn a_result_at_a_rate_no_device_reaches_under_an_expired_lease_waits_too() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "fast", 2).await;
    tokio::time::advance(TIMEOUT + Duration::from_secs(1)).await;
    c.expire_leases().await;
    assert_eq!(c.state().leases.count(1), 0, "expired");
    let mut made_up = report(&held[0]);
    made_up.result.nodes = 1 << 50;
    made_up.seal = Some(seal(held[0].fingerprint, &held[0].key, &made_up.result));
    let outcomes = c
        .report("fast", "fast", vec![made_up, report(&held[1])])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![Outcome::Pending, Outcome::Accepted]);
    let view = c.run(&run).unwrap();
    assert_eq!((view.tally.jobs, view.jobs_verifying), (1, 1));
}

/// Issue 38: a record run takes results from worker credentials only, at validation as at lease time.
/// A process under the operator's token that states a credential's name and holds one of its leases
/// (an id and tag seen on that machine) had its report counted: the lease was issued to that name, and
/// a lease of an earlier incarnation is checked by its tag alone. Now the batch is refused whole,
/// nothing stored; the credential's own report of the same leases counts.
#[tokio::test(start_paused = true)]
async fn a_record_runs_result_from_a_caller_without_a_credential_is_refused() {
    let c = coordinator();
    // A record run verifies every job: a fraction below 1 is refused (killed the mutants `<` to
    // `==`, `>` and `<=` of that check, issue 42), and 1 is taken.
    for (fraction, taken) in [(0.5, false), (0.999, false), (1.0, true)] {
        let made = c
            .create_run_as(
                9,
                Strategy::D4,
                None,
                super::NewRun {
                    record: true,
                    verify_fraction: Some(fraction),
                    ..Default::default()
                },
            )
            .await;
        match (made, taken) {
            (Ok(view), true) => c
                .control(&view.id(), crate::durable::store::Control::Cancel)
                .await
                .map(|_| ())
                .unwrap(),
            (Err(e), false) => assert!(e.to_string().contains("verifies every job"), "{e}"),
            (other, _) => panic!("{fraction}: {other:?}"),
        }
    }
    let run = c
        .create_run_as(
            8,
            Strategy::D4,
            None,
            super::NewRun {
                record: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .id();
    let leased = lease_credential(&c, "node", 4).await;
    assert!(!leased.is_empty());
    let reports: Vec<Report> = leased.iter().map(report).collect();
    let refused = c.report("node", "node", reports.clone()).await.unwrap_err();
    assert!(
        matches!(&refused, Error::RecordOnly(r) if *r == run),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("worker credentials only"),
        "{refused}"
    );
    let view = c.run(&run).unwrap();
    assert_eq!((view.tally.jobs, view.jobs_verifying), (0, 0));
    // The shared workers' token is one identity for any number of machines: no part of a record.
    let shared = crate::durable::credentials::SHARED_IDENTITY;
    let refused = c
        .report_as("x", shared, true, reports.clone())
        .await
        .unwrap_err();
    assert!(matches!(&refused, Error::RecordOnly(_)), "{refused:?}");
    let none = c
        .lease(
            &Ask {
                capacity: 4,
                ..as_credential(shared)
            },
            Duration::ZERO,
        )
        .await
        .unwrap();
    assert!(none.leases.is_empty(), "{none:?}");
    let outcomes = c.report_as("node", "node", true, reports).await.unwrap();
    assert_eq!(outcomes.len(), leased.len());
    assert_eq!(c.run(&run).unwrap().jobs_verifying, leased.len() as u64);
}

/// Issue 37: the spot checks an identity passed survive a restart. Before, they were in memory only: a
/// restart checked every identity at the new-identity rate again, and a credential whose only record
/// was its passed checks lost its say in disputes. A damaged record costs the passes, never the start.
#[tokio::test]
async fn passed_spot_checks_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    confirmed_run(&c).await;
    urgent_run_of_13(&c).await;
    for _ in 0..200 {
        let got = c
            .lease(&as_credential("careful"), Duration::ZERO)
            .await
            .unwrap();
        c.report(
            "careful",
            "careful",
            got.leases.iter().map(report).collect(),
        )
        .await
        .unwrap();
    }
    let passed = c.state().spot.passed_by("careful");
    assert!(passed >= 5, "{passed} checks passed");
    c.save_spot_passes().await.unwrap();
    drop(c);
    let c = reopened(dir.path()).await;
    assert_eq!(c.state().spot.passed_by("careful"), passed);
    // Nothing changed since: nothing to save.
    assert!(c.state().spot.unsaved().is_none());
    drop(c);
    // A damaged record: the coordinator starts, every identity from none.
    {
        let store = loop {
            match Store::open(dir.path()) {
                Ok(store) => break store,
                Err(Error::InUse(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => panic!("{e}"),
            }
        };
        store.damage_record("meta", b"spot_passes", |j| j.replace("careful", "carefuX"));
        store.flush().unwrap();
    }
    let c = reopened(dir.path()).await;
    assert_eq!(c.state().spot.passed_by("careful"), 0);
}

/// The server's saving task writes the passes within [`crate::wire::server::SAVE_SPOT_PASSES_EVERY`] of a
/// change, and once more as it stops.
#[tokio::test(start_paused = true)]
async fn the_server_saves_spot_passes_now_and_then_and_as_it_stops() {
    let c = coordinator();
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(crate::wire::server::save_spot_passes(
        c.clone(),
        stop.clone(),
    ));
    c.state().spot.passed("a");
    tokio::time::sleep(crate::wire::server::SAVE_SPOT_PASSES_EVERY + Duration::from_millis(1))
        .await;
    let saved = |c: &Coordinator| c.shared.store.spot_passes().unwrap();
    // The blocking write, done while time is paused.
    for _ in 0..100 {
        if !saved(&c).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(saved(&c).get("a"), Some(&1));
    c.state().spot.passed("b");
    stop.cancel();
    task.await.unwrap();
    assert_eq!(saved(&c).get("b"), Some(&1));
}

/// Issue 37: a run that states a bound on undetected wrong results (`submit --max-error`) raises the
/// spot checks of every credential that may lease from it, a trusted one too, to `1 / (e * bound)`
/// while it is open: a credential at the floor rate (1 %) meets checks at 17 % of its leases beside a
/// run bounded at 2, and at 1 % when it asks only for a run that states none. Bounds out of range are
/// refused, and the run keeps its bound.
#[tokio::test(start_paused = true)]
async fn a_runs_stated_bound_raises_the_spot_checks_while_it_is_open() {
    let (c, plain) = confirmed_and_open().await;
    let confirmed = "1";
    for bad in [0.5, 40.0, f64::NAN] {
        let ask = super::NewRun {
            max_error: Some(bad),
            ..Default::default()
        };
        let e = c
            .create_run_as(12, Strategy::D4, None, ask)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{bad}: {e}");
    }
    let bounded = c
        .create_run_as(
            13,
            Strategy::Mirror,
            None,
            super::NewRun {
                max_error: Some(2.0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(bounded.meta.max_error, Some(2.0));
    // The bound rests on keyed verification (a liar may tell re-leased jobs from fresh ones and lie on
    // fresh ones only): a bounded run verifies at least the bound's rate, and a lower fraction asked
    // is refused.
    assert!((bounded.meta.verify_fraction - super::spot_rate_for(2.0)).abs() < 1e-12);
    let lower = c
        .create_run_as(
            12,
            Strategy::D4,
            None,
            super::NewRun {
                max_error: Some(2.0),
                verify_fraction: Some(0.1),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(lower.to_string().contains("verifies at least"), "{lower}");
    let at_default = c
        .create_run_as(
            11,
            Strategy::D4,
            None,
            super::NewRun {
                max_error: Some(super::default_max_error()),
                verify_fraction: Some(super::DEFAULT_VERIFY_FRACTION),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        at_default.meta.verify_fraction,
        super::DEFAULT_VERIFY_FRACTION
    );
    c.control(&at_default.id(), crate::durable::store::Control::Cancel)
        .await
        .unwrap();
    // A reuse returns a run bounded at least as tightly as asked, and refuses one bounded looser.
    let reuse = |max_error| super::NewRun {
        reuse: true,
        max_error: Some(max_error),
        ..Default::default()
    };
    let again = c
        .create_run_as(13, Strategy::Mirror, None, reuse(5.0))
        .await
        .unwrap();
    assert_eq!(again.id(), bounded.id());
    let tighter = c
        .create_run_as(13, Strategy::Mirror, None, reuse(1.5))
        .await
        .unwrap();
    assert_ne!(tighter.id(), bounded.id());
    c.control(&tighter.id(), crate::durable::store::Control::Cancel)
        .await
        .unwrap();
    assert_eq!(crate::wire::grpc::run_status(&bounded).max_error, Some(2.0));
    assert_eq!(c.run(&plain).unwrap().meta.max_error, None);
    c.state().spot.restore([("old".to_string(), 1000)]);
    let checks = |only: Option<&str>| {
        let c = c.clone();
        let only = only.map(str::to_string);
        async move {
            let mut spots = 0;
            for _ in 0..400 {
                let got = c
                    .lease(
                        &Ask {
                            only: only.as_deref(),
                            ..as_credential("old")
                        },
                        Duration::ZERO,
                    )
                    .await
                    .unwrap();
                spots += got
                    .leases
                    .iter()
                    .filter(|g| g.run.to_string() == confirmed)
                    .count();
                c.report("old", "old", got.leases.iter().map(report).collect())
                    .await
                    .unwrap();
            }
            spots
        }
    };
    let near_the_bound = checks(None).await;
    assert!(
        (40..120).contains(&near_the_bound),
        "{near_the_bound} of 400 at 0.168"
    );
    let plain_only = checks(Some(&plain)).await;
    assert!(plain_only < 20, "{plain_only} of 400 at 0.01");
}

/// Issue 38: a finished run's certificate root is kept in the store when computed, and a start takes
/// it up instead of reading every result again (about 23 million reads at N = 28); a kept root that no
/// longer holds (another finish time) is computed again. Shown here by a kept root changed on disk:
/// the start shows it as kept; made stale, the start computes the true one.
#[tokio::test]
async fn a_kept_certificate_root_spares_a_start_the_rereading() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = c
        .create_run(8, Strategy::D4, None, Some(0.0), 0, false)
        .await
        .unwrap()
        .id();
    let held = lease(&c, "w", 4096).await;
    report_all(&c, "w", &held).await;
    let root_of = |c: &Coordinator| c.run(&run).unwrap().root;
    let wait_root = |c: Coordinator| {
        let run = run.clone();
        async move {
            for _ in 0..500 {
                if let Some(root) = c.run(&run).unwrap().root {
                    return root;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("no root");
        }
    };
    let root = wait_root(c.clone()).await;
    let id: u64 = run.parse().unwrap();
    // A second run, running: never certified; the first, its root shown: not again.
    let running: u64 = c
        .create_run(8, Strategy::D4, None, Some(0.0), 0, false)
        .await
        .unwrap()
        .id()
        .parse()
        .unwrap();
    assert_eq!(c.certify_finished(), Vec::<u64>::new());
    let kept = c.shared.store.certificate_root(id).unwrap().unwrap();
    assert_eq!(kept.root, root);
    assert!(root_of(&c).is_some());
    // Changed on disk: the next start shows the kept one (no result read for it).
    let forged = "0".repeat(64);
    c.shared
        .store
        .save_certificate_root(&crate::durable::store::StoredRoot {
            root: forged.clone(),
            ..kept.clone()
        })
        .unwrap();
    drop(c);
    let c = reopened(dir.path()).await;
    assert_eq!(c.certify_finished(), vec![id], "not {running}: it runs");
    assert_eq!(wait_root(c.clone()).await, forged);
    // Kept for another finish (its root forged too): computed again, the true root.
    c.shared
        .store
        .save_certificate_root(&crate::durable::store::StoredRoot {
            finished_unix: Some(1),
            root: forged.clone(),
            ..kept
        })
        .unwrap();
    drop(c);
    let c = reopened(dir.path()).await;
    assert_eq!(c.certify_finished(), vec![id]);
    assert_eq!(wait_root(c.clone()).await, root);
}

/// A lease call that finds nothing free while a run is running waits for its whole wait, then answers
/// with nothing (issue 42: a deadline taken in the past answered at once, and the worker asked again and
/// again).
#[tokio::test]
async fn a_lease_call_with_nothing_free_waits_its_wait() {
    let c = coordinator();
    c.create_run(8, Strategy::D4, None, Some(0.0), 0, false)
        .await
        .unwrap();
    let all = lease(&c, "a", 4096).await;
    assert!(!all.is_empty());
    let since = std::time::Instant::now();
    let grant = c
        .lease(&ask("b", 1), Duration::from_millis(400))
        .await
        .unwrap();
    assert!(grant.leases.is_empty() && !grant.idle);
    assert!(
        since.elapsed() >= Duration::from_millis(350),
        "{:?}",
        since.elapsed()
    );
    // A call that leases, or learns that nothing is left for it, answers at once, whatever its wait.
    c.release("a", &[all[0].id], false).unwrap();
    let since = std::time::Instant::now();
    let grant = c.lease(&ask("b", 1), Duration::from_secs(5)).await.unwrap();
    assert_eq!(grant.leases.len(), 1);
    let idle = coordinator();
    let nothing = idle
        .lease(&ask("b", 1), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(nothing.idle && nothing.leases.is_empty());
    assert!(
        since.elapsed() < Duration::from_secs(2),
        "{:?}",
        since.elapsed()
    );
}

/// A credential's lease call fills the capacity it asks exactly, its spot checks taking the place of
/// jobs (issue 42: with a capacity of one, `leases - spots` and `leases + spots` could not be told
/// apart).
#[tokio::test(start_paused = true)]
async fn spot_checks_and_jobs_fill_the_capacity_asked_exactly() {
    let (c, _open) = confirmed_and_open().await;
    let mut spots = 0;
    for i in 0..10 {
        let name = format!("new-{i}");
        let got = c
            .lease(
                &Ask {
                    capacity: 8,
                    ..as_credential(&name)
                },
                Duration::ZERO,
            )
            .await
            .unwrap();
        assert_eq!(got.leases.len(), 8, "{name}");
        // The spot checks are the confirmed run's jobs (N = 8); the jobs, the open run's (N = 13).
        spots += got.leases.iter().filter(|g| g.plan.n() == 8).count();
    }
    assert!(spots > 0 && spots < 80, "{spots} spot checks");
}

/// A worker whose every job left is its own verified result, waiting for a second worker name, is told
/// it is idle; another name gets those jobs (issue 42: a mutant that never said idle survived the unit
/// tests).
#[tokio::test]
async fn a_worker_with_only_its_own_verified_jobs_left_is_idle() {
    let c = coordinator();
    c.create_run(8, Strategy::D4, None, Some(1.0), 0, false)
        .await
        .unwrap();
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    // While another call holds some of them as candidates (read from the store, not yet decided on),
    // they may come back: not idle.
    let taken = {
        let mut guard = c.state();
        let state = &mut *guard;
        let run = state.runs.values_mut().next().unwrap();
        let mut left = 1;
        run.take_candidates(
            &state.leases,
            &super::live::Asking::plain("c"),
            1,
            1,
            &mut left,
        )
    };
    let grant = c.lease(&ask("a", 1), Duration::ZERO).await.unwrap();
    assert!(grant.leases.is_empty() && !grant.idle, "{grant:?}");
    c.state().runs.values_mut().next().unwrap().put_back(taken);
    let grant = c.lease(&ask("a", 1), Duration::ZERO).await.unwrap();
    assert!(grant.leases.is_empty() && grant.idle, "{grant:?}");
    assert_eq!(lease(&c, "b", 4096).await.len(), all.len());
}

/// When to ask again: a worker benched for its strikes, while a run is running, when its bench ends;
/// any other empty-handed worker after an eighth of the lease timeout (at least 50 ms, at most 2 s);
/// and a lease wakes whoever watches the coordinator (issue 42: these survived the unit tests).
#[tokio::test(start_paused = true)]
async fn an_empty_handed_worker_is_told_when_to_ask_again() {
    let config = Config {
        lease_timeout: Duration::from_millis(800),
        max_attempts: 100,
        ..Config::default()
    };
    let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
    let mut changes = c.subscribe();
    changes.borrow_and_update();
    let run = run_of_8(&c).await;
    changes.borrow_and_update();
    let held = lease(&c, "a", 4096).await;
    assert!(!held.is_empty());
    assert!(changes.has_changed().unwrap(), "a lease is a change");
    let grant = c.lease(&ask("b", 1), Duration::ZERO).await.unwrap();
    assert!(grant.leases.is_empty());
    assert_eq!(grant.retry_after, Duration::from_millis(100));
    // "a" lets its leases expire until it is benched: told to come back when the bench ends.
    let mut benched = None;
    for _ in 0..8 {
        tokio::time::advance(Duration::from_secs(2)).await;
        c.expire_leases().await;
        let now = tokio::time::Instant::now();
        if let Some(left) = c.state().strikes.benched("a", now) {
            benched = Some(left);
            break;
        }
        lease(&c, "a", 4096).await;
    }
    let left = benched.expect("benched");
    let grant = c.lease(&ask("a", 1), Duration::ZERO).await.unwrap();
    assert!(grant.leases.is_empty());
    assert_eq!(grant.retry_after, left.max(Duration::from_millis(50)));
    assert!(
        grant.retry_after > Duration::from_millis(100),
        "the bench, not the usual wait: {:?}",
        grant.retry_after
    );
    // Nothing running (the run paused): the usual wait, bench or not.
    c.control(&run, Control::Pause).await.unwrap();
    let grant = c.lease(&ask("a", 1), Duration::ZERO).await.unwrap();
    assert_eq!(grant.retry_after, Duration::from_millis(100));
}

/// A hand-back is a change that wakes watchers and waiting lease calls; a release that hands nothing
/// back is none (issue 42: both survived the unit tests).
#[tokio::test]
async fn a_hand_back_is_a_change() {
    let c = coordinator();
    run_of_8(&c).await;
    let held = lease(&c, "a", 4096).await;
    let mut changes = c.subscribe();
    changes.borrow_and_update();
    assert_eq!(c.release("a", &[], false).unwrap(), 0);
    assert!(!changes.has_changed().unwrap(), "nothing handed back");
    assert_eq!(c.release("a", &[held[0].id], false).unwrap(), 1);
    assert!(changes.has_changed().unwrap());
}

/// A look that hands back a key another call looked for meanwhile announces it, though it leases
/// nothing: here a new credential, which may not decide a dispute, passes the disputed job by. With
/// no other look meanwhile it announces nothing (a call that looked before saw the job). A call that
/// waits does not wake itself with its own announcement and look again at once (issue 42: `wake_others
/// |= returned` → `&=` survived the unit tests; `==` → `!=` in the guard would spin here).
#[tokio::test]
async fn a_look_that_hands_a_disputed_job_back_announces_it_and_waits() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    let checks = lease(&c, "b", 4096).await;
    assert_eq!(checks.len(), all.len());
    let outcomes = c.report("b", "b", vec![lying(&checks[0])]).await.unwrap();
    assert_eq!(outcomes, vec![Outcome::Disputed]);
    let newcomer = Ask {
        credential: true,
        ..ask("n", 4)
    };
    let changes = c.subscribe();
    let before = *changes.borrow();
    let grant = c.lease(&newcomer, Duration::ZERO).await.unwrap();
    assert!(grant.leases.is_empty() && !grant.idle, "{grant:?}");
    assert_eq!(
        changes.borrow().wrapping_sub(before),
        0,
        "no look meanwhile"
    );
    // Another call looks at the run while the newcomer holds the disputed job.
    let other = c.clone();
    let id = c.run(&run).unwrap().meta.id;
    super::lease::MEANWHILE.set(Some(Box::new(move || {
        let mut guard = other.state();
        let state = &mut *guard;
        let live = state.runs.get_mut(&id).unwrap();
        let looked = live.take_candidates(
            &state.leases,
            &super::live::Asking::plain("other"),
            1,
            1,
            &mut 0,
        );
        live.put_back(looked);
    })));
    let before = *changes.borrow();
    let grant = c.lease(&newcomer, Duration::ZERO).await.unwrap();
    super::lease::MEANWHILE.set(None);
    assert!(grant.leases.is_empty() && !grant.idle, "{grant:?}");
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "handed back");
    // Another call in the middle of its pass over the run (between two rounds) meanwhile: news too,
    // since its later rounds look at the queue as it was when it began.
    let other = c.clone();
    super::lease::MEANWHILE.set(Some(Box::new(move || {
        other.state().runs.get_mut(&id).unwrap().begin_pass();
    })));
    let before = *changes.borrow();
    let grant = c.lease(&newcomer, Duration::ZERO).await.unwrap();
    super::lease::MEANWHILE.set(None);
    c.state().runs.get_mut(&id).unwrap().end_pass();
    assert!(grant.leases.is_empty() && !grant.idle, "{grant:?}");
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "a pass under way");
    let before = *changes.borrow();
    let grant = c
        .lease(&newcomer, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(grant.leases.is_empty() && !grant.idle, "{grant:?}");
    let announced = changes.borrow().wrapping_sub(before);
    assert!(
        announced <= 2,
        "{announced} changes announced while it waited"
    );
    // A worker with a record decides it.
    let decider = lease(&c, "z", 1).await;
    assert_eq!(decider[0].key, checks[0].key);
}

/// Two new credentials wait at once where the only job left is a dispute neither may decide (and a
/// lease still out): each look hands the disputed job back. A look announces that only when another
/// call looked at the run while the job was out of the queue; else the two woke each other, looked,
/// handed back and announced again, round after round, until their waits ended (found by a review,
/// 2026-11-30: thousands of rounds in 300 ms, each a store read under the state lock, for every pair
/// of such waiting calls).
#[tokio::test]
async fn two_waiting_calls_that_may_not_decide_a_dispute_do_not_wake_each_other() {
    let c = coordinator();
    verified_run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    let checks = lease(&c, "b", 4096).await;
    assert_eq!(checks.len(), all.len());
    let outcomes = c.report("b", "b", vec![lying(&checks[0])]).await.unwrap();
    assert_eq!(outcomes, vec![Outcome::Disputed]);
    let changes = c.subscribe();
    let before = *changes.borrow();
    let wait = Duration::from_millis(300);
    let (n1, n2) = (
        Ask {
            credential: true,
            ..ask("n1", 4)
        },
        Ask {
            credential: true,
            ..ask("n2", 4)
        },
    );
    let (one, two) = tokio::join!(c.lease(&n1, wait), c.lease(&n2, wait));
    for grant in [one.unwrap(), two.unwrap()] {
        assert!(grant.leases.is_empty() && !grant.idle, "{grant:?}");
    }
    let announced = changes.borrow().wrapping_sub(before);
    assert!(
        announced <= 4,
        "{announced} changes announced while two calls waited"
    );
    let decider = lease(&c, "z", 1).await;
    assert_eq!(decider[0].key, checks[0].key);
}

/// The looks of a waiting call that can take nothing (a new credential beside a dispute) through its
/// `wait`, woken every 10 ms meanwhile.
async fn looks_of_a_call_woken_every_10_ms(wait: Duration) -> u64 {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    let checks = lease(&c, "b", 4096).await;
    let outcomes = c.report("b", "b", vec![lying(&checks[0])]).await.unwrap();
    assert_eq!(outcomes, vec![Outcome::Disputed]);
    let id = c.run(&run).unwrap().meta.id;
    let looks = || c.state().runs[&id].looks();
    let before = looks();
    let newcomer = Ask {
        credential: true,
        ..ask("n", 4)
    };
    let waiting = c.lease(&newcomer, wait);
    let waking = async {
        for _ in 0..wait.as_millis() / 10 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.changed();
        }
    };
    let (grant, ()) = tokio::join!(waiting, waking);
    assert!(grant.unwrap().leases.is_empty());
    looks() - before
}

/// A waiting lease call looks again at most once every `MIN_LOOK_GAP`, however often it is woken:
/// here a hundred changes in one second wake a call that can take nothing (a new credential beside a
/// dispute), and it looks about four times.
#[tokio::test(start_paused = true)]
async fn a_waiting_call_looks_again_at_most_once_a_gap() {
    use super::lease::MIN_LOOK_GAP;
    let wait = Duration::from_secs(1);
    let most = 2 + (wait.as_millis() / MIN_LOOK_GAP.as_millis()) as u64;
    let looked = looks_of_a_call_woken_every_10_ms(wait).await;
    assert!(looked <= most, "{looked} looks in {wait:?}");
}

/// A waiting call's gap between two looks doubles after each look that found nothing, up to
/// `MAX_LOOK_GAP`: woken a hundred times a second through its 10 s wait, a call that can take nothing
/// looks about nine times (at 0, 0.25, 0.75, 1.75, 3.75, 5.75, 7.75 and 9.75 s, and at its end), not
/// forty. Before, each of a thousand waiting calls at the tail of a verified run looked four times a
/// second, and the coordinator committed a third less (`loadgen --waiters`).
#[tokio::test(start_paused = true)]
async fn a_waiting_calls_gap_doubles_after_each_look_that_found_nothing() {
    use super::lease::{MAX_LOOK_GAP, MIN_LOOK_GAP};
    assert!(MAX_LOOK_GAP > MIN_LOOK_GAP);
    let wait = Duration::from_secs(10);
    let looked = looks_of_a_call_woken_every_10_ms(wait).await;
    assert!((8..=10).contains(&looked), "{looked} looks in {wait:?}");
}

/// Keys chosen for a credential but cut by its room (other calls of it took leases meanwhile) go back
/// to the queue, and are news to a call that looked meanwhile.
#[tokio::test]
async fn chosen_keys_cut_by_room_are_news_to_a_look_meanwhile() {
    use super::lease::NEW_IDENTITY_LEASES;
    let c = coordinator();
    let id = run_of_13(&c).await.meta.id;
    let other = c.clone();
    super::lease::MEANWHILE.set(Some(Box::new(move || {
        let mut guard = other.state();
        let state = &mut *guard;
        let live = state.runs.get_mut(&id).unwrap();
        let keys: Vec<JobKey> = live.plan.jobs().collect();
        let now = tokio::time::Instant::now();
        for key in keys.iter().rev().take(NEW_IDENTITY_LEASES as usize) {
            state.leases.issue(id, key.clone(), "n/2", "n", now);
        }
        let looked = live.take_candidates(
            &state.leases,
            &super::live::Asking::plain("other"),
            1,
            1,
            &mut 0,
        );
        live.put_back(looked);
    })));
    let changes = c.subscribe();
    let before = *changes.borrow();
    let grant = c
        .lease(
            &Ask {
                credential: true,
                ..ask("n", 4)
            },
            Duration::ZERO,
        )
        .await
        .unwrap();
    super::lease::MEANWHILE.set(None);
    assert!(grant.leases.is_empty(), "{grant:?}");
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "handed back");
}

/// A copy of a counted result sent again changes nothing, and announces nothing: before, every commit
/// announced a change, so a credential that sent one counted result again in a loop woke every waiting
/// lease call (and progress stream) of every identity at each copy, each call a look at the queues
/// under the state lock (found by a review, 2026-11-30). The first delivery announces, and so does a
/// late copy that its lease delivers for the first time (its worker's work is credited).
#[tokio::test(start_paused = true)]
async fn a_result_sent_again_wakes_no_waiting_call() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let held = lease(&c, "a", 2).await;
    let changes = c.subscribe();
    let before = *changes.borrow();
    report_all(&c, "a", &held[..1]).await;
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "counted");
    for _ in 0..3 {
        let before = *changes.borrow();
        let again = c.report("a", "a", vec![report(&held[0])]).await.unwrap();
        assert_eq!(again, vec![Outcome::Duplicate]);
        assert_eq!(changes.borrow().wrapping_sub(before), 0, "sent again");
    }
    // a's lease of job 1 expires, b counts the job, and a's copy comes late: credited once.
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let of_b = lease(&c, "b", 64).await;
    let second = of_b.iter().find(|g| g.key == held[1].key).unwrap();
    report_all(&c, "b", std::slice::from_ref(second)).await;
    let before = *changes.borrow();
    let late = c.report("a", "a", vec![report(&held[1])]).await.unwrap();
    assert_eq!(late, vec![Outcome::Duplicate]);
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "credited");
    // A different count of a done job under no lease issued to its sender (a's lease, its tag
    // wrong): only compared, no news.
    let mut other = report(&held[0]);
    other.tag ^= 1;
    other.result.nodes += 1;
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    other.seal = Some(seal(plan.fingerprint().1, &held[0].key, &other.result));
    let before = *changes.borrow();
    let compared = c.report("m", "m", vec![other]).await.unwrap();
    assert!(
        matches!(compared[..], [Outcome::Mismatch { .. }]),
        "{compared:?}"
    );
    assert_eq!(changes.borrow().wrapping_sub(before), 0, "only compared");
    // A result for a job that failed meanwhile, under its sender's live lease: the lease ends (news,
    // though nothing is counted or credited).
    let failing = of_b.iter().find(|g| g.key != held[1].key).unwrap();
    let id = c.run(&run).unwrap().meta.id;
    c.shared.store.fail_job(id, &failing.key, "test").unwrap();
    let before = *changes.borrow();
    let failed = c.report("b", "b", vec![report(failing)]).await.unwrap();
    assert_eq!(failed, vec![Outcome::JobFailed]);
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "its lease ended");
}

/// After a restart the coordinator knows which jobs a worker computed only from their records: a
/// worker whose every job left is its own verified result looks once, hands them all back, and is
/// told it is idle, its own hand-backs not taken for jobs come back meanwhile (issue 42: `own_back +=
/// back` → `*=` and `at + own_back` → `-` survived the unit tests).
#[tokio::test]
async fn after_a_restart_a_worker_with_only_its_own_verified_jobs_left_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let c = opened_with(dir.path(), Config::default()).unwrap();
    verified_run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    drop(c);
    let c = reopened(dir.path()).await;
    let grant = c.lease(&ask("a", 1), Duration::ZERO).await.unwrap();
    assert!(grant.leases.is_empty() && grant.idle, "{grant:?}");
    assert_eq!(lease(&c, "b", 4096).await.len(), all.len());
}

/// A quarantined worker's heartbeat is refused and the leases it names are taken back at once, news
/// to a waiting lease call; one naming no lease it holds announces nothing (issue 42: the guard
/// `released > 0` survived the unit tests).
#[tokio::test]
async fn a_quarantined_workers_heartbeat_hands_its_leases_back_as_news() {
    let c = coordinator();
    run_of_8(&c).await;
    let held = lease(&c, "m", 4).await;
    let ids: Vec<u64> = held.iter().map(|g| g.id).collect();
    c.state()
        .quarantined
        .insert("m".to_string(), "a test".to_string());
    let changes = c.subscribe();
    let before = *changes.borrow();
    let refused = c.heartbeat("m", &ids);
    assert!(
        matches!(refused, Err(Error::Quarantined { .. })),
        "{refused:?}"
    );
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "taken back");
    let refused = c.heartbeat("m", &ids);
    assert!(
        matches!(refused, Err(Error::Quarantined { .. })),
        "{refused:?}"
    );
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "nothing taken");
    let others: Vec<_> = lease(&c, "b", 4096)
        .await
        .into_iter()
        .map(|g| g.key)
        .collect();
    assert!(held.iter().all(|g| others.contains(&g.key)));
}

/// A lease of a worker with a counted result that expires is an attempt: the job goes back in line
/// until its attempts are used up under two workers, then fails. A sweep that ends a lease announces
/// it; one that ends none announces nothing (issue 42: both guards survived the unit tests).
#[tokio::test(start_paused = true)]
async fn a_counted_workers_expiry_requeues_its_job_until_the_attempts_run_out() {
    let config = Config {
        lease_timeout: TIMEOUT,
        max_attempts: 2,
        ..Config::default()
    };
    let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
    let run = run_of_8(&c).await;
    for w in ["a", "b"] {
        let got = lease(&c, w, 1).await;
        assert_eq!(report_all(&c, w, &got).await, vec![Outcome::Accepted]);
    }
    let changes = c.subscribe();
    let before = *changes.borrow();
    c.expire_leases().await;
    assert_eq!(changes.borrow().wrapping_sub(before), 0, "nothing expired");
    let first = lease(&c, "a", 1).await;
    let before = *changes.borrow();
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    assert_eq!(changes.borrow().wrapping_sub(before), 1, "one expired");
    assert_eq!(c.run(&run).unwrap().jobs_failed, 0);
    let again = lease(&c, "b", 1).await;
    assert_eq!(again[0].key, first[0].key, "leased again");
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    assert_eq!(
        c.run(&run).unwrap().jobs_failed,
        1,
        "two attempts, two workers"
    );
}

/// A commit's confirmed jobs in memory: each counts among its run's confirmed jobs (and those of two
/// kernel families, where its results came from two) and joins the spot checks' pool if its search
/// had nodes; a confirmed job taken back (revoked or disputed) leaves all three; an unconfirmed one,
/// counted or taken back, changes none (issue 42: `nodes > 0` → `>=`, and the guards of the side
/// taken back, `!confirmed_by.is_empty()` and `distinct(families) >= 2`, survived).
#[tokio::test]
async fn confirmed_counts_and_the_pool_follow_what_a_commit_counted_and_took_back() {
    use crate::durable::store::{Committed, ResultRecord, Revoked};
    use nqueens_common::Family;
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let id = c.run(&run).unwrap().meta.id;
    let held = lease(&c, "a", 4).await;
    let record = |g: &Granted, by: &[&str], families: Vec<Option<Family>>, nodes| {
        let mut result = report(g).result;
        result.nodes = nodes;
        let record = ResultRecord {
            result,
            worker: "a".into(),
            worker_id: "a".into(),
            lease: g.id,
            at_unix: 1,
            confirmed_by: by.iter().map(|b| b.to_string()).collect(),
            seal: None,
            families,
        };
        (g.key.clone(), record)
    };
    let two = record(
        &held[0],
        &["b"],
        vec![Some(Family::Gpu), Some(Family::CpuLists)],
        9,
    );
    let one = record(&held[1], &["b"], vec![Some(Family::Gpu)], 9);
    let bare = record(&held[2], &["b"], vec![], 0);
    let alone = record(&held[3], &[], vec![], 9);
    let counted = |r: &(JobKey, ResultRecord)| (id, r.0.clone(), r.1.clone());
    let back = |r: &(JobKey, ResultRecord)| Revoked {
        run: id,
        key: r.0.clone(),
        record: r.1.clone(),
    };
    let state = |c: &Coordinator| {
        let v = c.run(&run).unwrap();
        let mut pooled = c.state().spot.pooled(id);
        pooled.sort();
        (v.jobs_confirmed, v.jobs_two_families, pooled)
    };
    let note = |committed: Committed| super::changes::note_confirmed(&mut c.state(), &committed);
    note(Committed {
        counted: [&two, &one, &bare, &alone].map(counted).to_vec(),
        ..Committed::default()
    });
    let mut pooled = vec![two.0.clone(), one.0.clone()];
    pooled.sort();
    assert_eq!(state(&c), (3, 1, pooled));
    note(Committed {
        disputed: vec![back(&one)],
        revoked: vec![back(&alone)],
        ..Committed::default()
    });
    assert_eq!(state(&c), (2, 1, vec![two.0.clone()]));
    note(Committed {
        revoked: vec![back(&two)],
        ..Committed::default()
    });
    assert_eq!(state(&c), (1, 0, vec![]));
}

/// A confirmed count that a later commit took back, that commit applied first (a round whose merged
/// transaction failed commits its batches one by one, and their tasks take the state lock in any
/// order), joins no spot checks' pool: a check of it would be leased beside the job's own lease, to
/// an identity never drawn for its dispute. It still counts among the run's confirmed jobs, the
/// later commit having taken it off. Before, it joined the pool (found by a review, 2026-12-01).
#[tokio::test]
async fn a_count_a_later_commit_took_back_first_joins_no_pool() {
    use crate::durable::store::{Committed, JobState, Moved, ResultRecord, Revoked};
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let id = c.run(&run).unwrap().meta.id;
    let held = lease(&c, "a", 3).await;
    let record = |g: &Granted| ResultRecord {
        result: report(g).result,
        worker: "a".into(),
        worker_id: "a".into(),
        lease: g.id,
        at_unix: 1,
        confirmed_by: vec!["b".into()],
        seal: None,
        families: Vec::new(),
    };
    let (taken, kept, before) = (record(&held[0]), record(&held[1]), record(&held[2]));
    assert!(taken.result.nodes > 0 && kept.result.nodes > 0);
    let (k0, k1, k2) = (
        held[0].key.clone(),
        held[1].key.clone(),
        held[2].key.clone(),
    );
    {
        let mut state = c.state();
        // (A count confirmed before: the take-back's tally of confirmed jobs is taken off it.)
        super::changes::note_confirmed(
            &mut state,
            &Committed {
                counted: vec![(id, k2.clone(), before)],
                ..Committed::default()
            },
        );
        let later = Committed {
            seq: 2,
            moved: vec![Moved {
                run: id,
                key: k0.clone(),
                from: Some(JobState::Done),
                to: Some(JobState::Disputed),
            }],
            disputed: vec![Revoked {
                run: id,
                key: k0.clone(),
                record: taken.clone(),
            }],
            ..Committed::default()
        };
        super::changes::apply(&mut state, &later);
        super::changes::note_confirmed(&mut state, &later);
        let earlier = Committed {
            seq: 1,
            counted: vec![(id, k0.clone(), taken), (id, k1.clone(), kept)],
            ..Committed::default()
        };
        super::changes::note_confirmed(&mut state, &earlier);
        let mut want = vec![k1, k2];
        want.sort();
        let mut pooled = state.spot.pooled(id);
        pooled.sort();
        assert_eq!(pooled, want);
    }
    assert_eq!(c.run(&run).unwrap().jobs_confirmed, 2);
}

/// Leases to the credential `name` one job at a time, computing each honestly, until it is given a
/// spot check (a job of `confirmed_and_open`'s confirmed run, N = 8); returns that lease.
async fn first_check(c: &Coordinator, name: &str) -> Granted {
    loop {
        let got = c.lease(&as_credential(name), Duration::ZERO).await.unwrap();
        let g = got.leases[0].clone();
        if g.plan.n() == 8 {
            return g;
        }
        c.report(name, name, vec![report(&g)]).await.unwrap();
    }
}

/// A spot check is passed only by the job it checks: a report under its lease of another done job's
/// stored counts (which any worker can send for free) neither passes it nor ends it. Before, the check
/// was settled by its lease id alone: a new identity passed it without computing, earned a record (and
/// with it disputes to decide), and learnt which of its leases were checks.
#[tokio::test(start_paused = true)]
async fn a_spot_check_is_not_passed_by_another_jobs_result() {
    let (c, _open) = confirmed_and_open().await;
    let spot = first_check(&c, "prober").await;
    assert_eq!(c.state().spot.passed_by("prober"), 0);
    // Another job of the checked run, done, reported with its true counts under the check's lease.
    let mut other = None;
    for key in spot.plan.jobs().filter(|k| *k != spot.key) {
        let mut r = report(&Granted {
            key: key.clone(),
            ..spot.clone()
        });
        r.lease = spot.id;
        r.tag = spot.tag;
        if let Ok(out) = c.report("prober", "prober", vec![r]).await {
            other = Some(out);
            break;
        }
    }
    assert_eq!(
        other,
        Some(vec![Outcome::Duplicate]),
        "a done job was reported"
    );
    assert_eq!(c.state().spot.passed_by("prober"), 0, "no check passed");
    assert!(
        c.state().leases.issued_at(spot.id).is_some(),
        "the check is still out"
    );
    // Its own job's result passes it.
    assert_eq!(
        c.report("prober", "prober", vec![report(&spot)])
            .await
            .unwrap(),
        vec![Outcome::Duplicate]
    );
    assert_eq!(c.state().spot.passed_by("prober"), 1);
}

/// Leases as the worker credential `name`, up to `capacity` jobs at once.
async fn lease_credential(c: &Coordinator, name: &str, capacity: u32) -> Vec<Granted> {
    c.lease(
        &Ask {
            capacity,
            ..as_credential(name)
        },
        Duration::ZERO,
    )
    .await
    .unwrap()
    .leases
}

/// Four leases the credential "hoarder" took and handed back at once, kept.
async fn handed_back_by_a_hoarder(c: &Coordinator) -> Vec<Granted> {
    let got = lease_credential(c, "hoarder", 4).await;
    assert_eq!(got.len(), 4);
    let ids: Vec<u64> = got.iter().map(|g| g.id).collect();
    assert_eq!(c.release("hoarder", &ids, false).unwrap(), 4);
    got
}

/// A lease handed back is over: a result under it is refused (its job not done), and it proves no
/// lease was issued. Before, a worker could lease, hand every lease back at once (no strike, no
/// attempt, and room for more leases), then report made-up counts under them: the check that a result
/// came faster than any device searches reads the active lease's age only, so the lies were counted
/// alone (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn a_result_under_a_lease_handed_back_is_refused() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let got = handed_back_by_a_hoarder(&c).await;
    for g in &got {
        let mut lie = lying(g);
        lie.result.nodes = 1 << 50;
        lie.seal = Some(seal(g.fingerprint, &g.key, &lie.result));
        let refused = c.report("hoarder", "hoarder", vec![lie]).await;
        assert!(
            matches!(refused, Err(Error::NotLeased { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "nothing counted");
    // An honest worker's late result under a lease that expired (not handed back) still counts.
    let slow = lease(&c, "slow", 1).await;
    tokio::time::advance(TIMEOUT + Duration::from_secs(1)).await;
    c.expire_leases().await;
    assert_eq!(
        c.report("slow", "slow", vec![report(&slow[0])])
            .await
            .unwrap(),
        vec![Outcome::Accepted]
    );
}

/// A tag kept from a lease handed back disputes nothing once another worker's count settles the job
/// (found by a review, 2026-11-29): the hand-back is forgotten with the job's leases, and the tag alone
/// used to pass as a lease issued for the job, so a hoarder could take honest counts back for free. A
/// result under a lease the table no longer remembers is only compared.
#[tokio::test(start_paused = true)]
async fn a_tag_kept_from_a_lease_handed_back_disputes_no_count() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let kept = handed_back_by_a_hoarder(&c).await;
    let honest = lease(&c, "h", 4096).await;
    report_all(&c, "h", &honest).await;
    assert_eq!(total(&c, &run), (Q8, true));
    let lies: Vec<Report> = kept.iter().map(lying).collect();
    let outcomes = c.report("hoarder", "hoarder", lies).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    assert_eq!(total(&c, &run), (Q8, true), "no count taken back");
    assert!(c.state().quarantined.is_empty(), "nobody framed");
}

/// A worker whose lease of a job ended unsettled (live when another worker's count settled the job, or
/// expired before it) may dispute that count: its lease is remembered as ended, and a different result
/// under it takes the unconfirmed count back for a third to decide. Here a liar's counts come first in
/// both orders (a review of this session's change found the expired lease forgotten, its honest result
/// only compared, the lie standing).
#[tokio::test(start_paused = true)]
async fn a_lease_ended_unsettled_when_its_job_was_counted_may_still_dispute() {
    // The honest worker's lease still live: the liar's expired first.
    let c = coordinator();
    let run = run_of_8(&c).await;
    let (first, second) = leased_again(&c, "late", "fresh", 4096).await;
    let lies: Vec<Report> = first.iter().map(lying).collect();
    c.report("late", "late", lies).await.unwrap();
    assert_ne!(total(&c, &run).0, Q8, "the lies counted");
    let outcomes = report_all(&c, "fresh", &second).await;
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Disputed),
        "{outcomes:?}"
    );
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "every lie taken back");

    // The honest worker's lease expired: the liar's is live.
    let c = coordinator();
    let run = run_of_8(&c).await;
    let (honest, held) = leased_again(&c, "slow", "liar", 4096).await;
    c.report("liar", "liar", held.iter().map(lying).collect())
        .await
        .unwrap();
    let outcomes = report_all(&c, "slow", &honest).await;
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Disputed),
        "{outcomes:?}"
    );
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "every lie taken back");
}

/// Copies of a result in one batch credit its work once: under a live lease, and under a lease its job
/// was counted under another's meanwhile (remembered, ended: the work was done, and is credited once).
/// A review of this session's change found 4,096 copies under one live lease credited 4,096 times.
#[tokio::test(start_paused = true)]
async fn copies_in_one_batch_credit_their_work_once() {
    let c = coordinator();
    run_of_8(&c).await;
    let held = lease(&c, "a", 1).await;
    let copies = vec![report(&held[0]); 10];
    let outcomes = c.report("a", "a", copies).await.unwrap();
    assert_eq!(outcomes[0], Outcome::Accepted);
    assert!(outcomes[1..].iter().all(|o| *o == Outcome::Duplicate));
    let row = |c: &Coordinator, id: &str| {
        let w = c.workers().into_iter().find(|w| w.id == id).unwrap();
        (w.jobs, w.nodes)
    };
    assert_eq!(row(&c, "a"), (1, report(&held[0]).result.nodes));

    let c = coordinator();
    run_of_8(&c).await;
    let (first, second) = leased_again(&c, "late", "fresh", 1).await;
    assert_eq!(second[0].key, first[0].key);
    report_all(&c, "late", &first).await;
    let copies = vec![report(&second[0]); 10];
    let outcomes = c.report("fresh", "fresh", copies.clone()).await.unwrap();
    assert!(outcomes.iter().all(|o| *o == Outcome::Duplicate));
    assert_eq!(row(&c, "fresh"), (1, report(&second[0]).result.nodes));
    c.report("fresh", "fresh", copies).await.unwrap();
    assert_eq!(row(&c, "fresh"), (1, report(&second[0]).result.nodes));
}

/// A credential's lease limit holds against calls made at once: 8 threads, each asking for the whole
/// limit, get it once between them. Before, each call measured its room under the lock, dropped it to
/// read the store, and issued all it had found: together they held several limits (found by a review,
/// 2026-11-29).
#[test]
fn a_credentials_lease_limit_holds_across_calls_at_once() {
    let limit = super::lease::lease_limit(0) as usize;
    let c = coordinator();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        c.create_run(16, Strategy::D4, Some(4), Some(0.0), 0, false)
            .await
            .unwrap()
    });
    let barrier = std::sync::Barrier::new(8);
    let held: usize = std::thread::scope(|s| {
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let (c, barrier) = (&c, &barrier);
                s.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    let worker = format!("hoarder/{i}");
                    let ask = Ask {
                        worker: &worker,
                        capacity: limit as u32,
                        ..as_credential("hoarder")
                    };
                    barrier.wait();
                    rt.block_on(c.lease(&ask, Duration::ZERO))
                        .map_or(0, |g| g.leases.len())
                })
            })
            .collect();
        calls.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert!(held <= limit, "{held} leases held, the limit is {limit}");
    assert_eq!(c.state().leases.held_by("hoarder") as usize, held);
}

/// A spot check handed back, or left to expire, is owed: the identity's next lease call gets the same
/// check first, so a liar that tells checks from fresh jobs (a job leased again) cannot dodge them by
/// handing them back (found by a review, 2026-11-29: a check handed back cost nothing).
#[tokio::test(start_paused = true)]
async fn a_spot_check_handed_back_is_owed() {
    let (c, _open) = confirmed_and_open().await;
    let check = first_check(&c, "dodger").await;
    assert_eq!(c.release("dodger", &[check.id], false).unwrap(), 1);
    let again = c
        .lease(&as_credential("dodger"), Duration::ZERO)
        .await
        .unwrap()
        .leases;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].run, &again[0].key), (check.run, &check.key));
    // Left to expire: owed again.
    tokio::time::advance(TIMEOUT + Duration::from_secs(1)).await;
    c.expire_leases().await;
    let owed = c
        .lease(&as_credential("dodger"), Duration::ZERO)
        .await
        .unwrap()
        .leases;
    assert_eq!((owed[0].run, &owed[0].key), (check.run, &check.key));
    // Answered, it is paid.
    c.report("dodger", "dodger", vec![report(&owed[0])])
        .await
        .unwrap();
    assert_eq!(c.state().spot.passed_by("dodger"), 1);
}

/// An owed check is not dropped by a lease call for another run (the check's run is not among the
/// runs it leases from there): it stays owed, and the next call that may lease from its run gets it.
/// Two checks handed back at once are both owed. Before, a call with `run` set to any other run took
/// the owed check off the books unleased, and only the last of two handed back together was owed
/// (found by a review, 2026-11-30).
#[tokio::test(start_paused = true)]
async fn an_owed_check_survives_a_call_for_another_run_and_every_one_is_owed() {
    let (c, open) = confirmed_and_open().await;
    let check = first_check(&c, "dodger").await;
    assert_eq!(c.release("dodger", &[check.id], false).unwrap(), 1);
    let elsewhere = c
        .lease(
            &Ask {
                only: Some(&open),
                ..as_credential("dodger")
            },
            Duration::ZERO,
        )
        .await
        .unwrap()
        .leases;
    assert!(elsewhere.iter().all(|g| g.plan.n() == 13), "{elsewhere:?}");
    for g in &elsewhere {
        c.report("dodger", "dodger", vec![report(g)]).await.unwrap();
    }
    let again = c
        .lease(&as_credential("dodger"), Duration::ZERO)
        .await
        .unwrap()
        .leases;
    assert_eq!((again[0].run, &again[0].key), (check.run, &check.key));
    // Two checks out, handed back together: both come back.
    let second = first_check(&c, "dodger").await;
    assert_ne!(second.key, check.key);
    assert_eq!(
        c.release("dodger", &[again[0].id, second.id], false)
            .unwrap(),
        2
    );
    let both = c
        .lease(
            &Ask {
                capacity: 2,
                ..as_credential("dodger")
            },
            Duration::ZERO,
        )
        .await
        .unwrap()
        .leases;
    let mut got: Vec<_> = both.iter().map(|g| g.key.clone()).collect();
    got.sort();
    let mut owed = vec![check.key.clone(), second.key.clone()];
    owed.sort();
    assert_eq!(got, owed);
}

/// Only a live lease's different result takes a confirmed count back. A liar that answered a spot check
/// honestly keeps the lease's tag, valid for good; reporting a different result under it later, the
/// check long over, gets it quarantined, and the confirmed count stays. Before, such kept tags let one
/// credential take back as many confirmed counts as it had tags, in one report (found by a review of
/// this session's change, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn a_kept_tag_takes_no_confirmed_count_back() {
    let (c, _open) = confirmed_and_open().await;
    let check = first_check(&c, "keeper").await;
    c.report("keeper", "keeper", vec![report(&check)])
        .await
        .unwrap();
    assert_eq!(c.state().spot.passed_by("keeper"), 1);
    let confirmed_run = c.run(&check.run.to_string()).unwrap();
    let outcomes = c
        .report("keeper", "keeper", vec![lying(&check)])
        .await
        .unwrap();
    assert!(
        matches!(outcomes[..], [Outcome::Mismatch { .. }]),
        "{outcomes:?}"
    );
    assert!(c.state().quarantined.contains_key("keeper"));
    let after = c.run(&check.run.to_string()).unwrap();
    assert_eq!(after.tally, confirmed_run.tally, "the count stays");
    assert_eq!(after.jobs_confirmed, confirmed_run.jobs_confirmed);
}

/// A lease call that could take nothing however long it waited (its credential holds all the leases
/// it may) answers at once: before, it waited, and every change in the coordinator ran it again under
/// the state lock (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn a_call_with_no_room_for_a_lease_does_not_wait() {
    use super::lease::{MAX_WAIT, NEW_IDENTITY_LEASES};
    let c = coordinator();
    run_of_13(&c).await;
    let mut full = as_credential("node");
    full.capacity = 4096;
    let first = c.lease(&full, Duration::ZERO).await.unwrap();
    assert_eq!(first.leases.len() as u64, NEW_IDENTITY_LEASES);
    let asked = Instant::now();
    let more = c.lease(&full, MAX_WAIT).await.unwrap();
    assert!(more.leases.is_empty() && !more.idle);
    assert_eq!(Instant::now() - asked, Duration::ZERO, "answered at once");
}

/// One identity waits for jobs in at most `MAX_WAITING` lease calls at once; a call beyond them answers
/// at once, empty, and its worker asks again after `retry_after`. Before, a credential could hold any
/// number of waiting calls, each run again under the state lock at every change (found by a review,
/// 2026-11-29).
#[tokio::test(start_paused = true)]
async fn an_identity_waits_in_a_bounded_number_of_calls() {
    use super::lease::MAX_WAIT;
    use super::waiting::MAX_WAITING;
    let c = coordinator();
    run_of_8(&c).await;
    // Every job in another worker's hands: nothing to lease, and the run not over.
    assert!(!lease(&c, "operator-worker", 4096).await.is_empty());
    let asked = Instant::now();
    let mut waiting = Vec::new();
    for _ in 0..MAX_WAITING {
        let c = c.clone();
        waiting.push(tokio::spawn(async move {
            c.lease(&as_credential("node"), MAX_WAIT).await.unwrap();
            Instant::now()
        }));
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let beyond = c.lease(&as_credential("node"), MAX_WAIT).await.unwrap();
    assert!(beyond.leases.is_empty() && !beyond.idle);
    assert_eq!(
        Instant::now() - asked,
        Duration::from_millis(1),
        "answered at once"
    );
    // Another identity still waits.
    let other = c
        .lease(&as_credential("other"), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(other.leases.is_empty());
    assert_eq!(
        Instant::now() - asked,
        Duration::from_millis(1001),
        "waited"
    );
    for call in waiting {
        assert!(call.await.unwrap() - asked >= MAX_WAIT, "waited");
    }
    // Their places are given back: the identity waits again.
    let again = Instant::now();
    c.lease(&as_credential("node"), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(Instant::now() - again, Duration::from_secs(1));
}

/// The events at warn level or above while installed on this thread: how many, and the sum of their
/// `results` fields.
#[derive(Clone, Default)]
pub(crate) struct Loud(pub(crate) std::sync::Arc<std::sync::Mutex<(usize, u64)>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Loud {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Results(u64);
        impl tracing::field::Visit for Results {
            fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
                if field.name() == "results" {
                    self.0 += value;
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        if *e.metadata().level() <= tracing::Level::WARN {
            let mut results = Results(0);
            e.record(&mut results);
            let mut seen = self.0.lock().unwrap();
            seen.0 += 1;
            seen.1 += results.0;
        }
    }
}

/// Results that differ from done jobs' counts under no lease issued for them prove nothing and cost
/// their sender nothing: a batch of them is logged in one line. Before, each was an error line written
/// under the state lock, 4,096 lines for one request (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn differing_results_under_no_lease_are_logged_once_per_batch() {
    use tracing_subscriber::layer::SubscriberExt;
    let c = coordinator();
    let run = run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    assert!(all.len() > 2, "{} jobs", all.len());
    report_all(&c, "a", &all).await;
    assert!(total(&c, &run).1);
    let lies: Vec<Report> = all
        .iter()
        .map(|g| Report {
            lease: 0,
            tag: 0,
            ..lying(g)
        })
        .collect();
    let loud = Loud::default();
    let logged = tracing_subscriber::registry().with(loud.clone());
    let outcomes = {
        let _installed = tracing::subscriber::set_default(logged);
        c.report("liar", "liar", lies).await.unwrap()
    };
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    assert_eq!(
        *loud.0.lock().unwrap(),
        (1, all.len() as u64),
        "one line, naming how many"
    );
    assert_eq!(total(&c, &run), (92, true), "nothing changed");
}

/// The lines of workers joining, leaving and returning logged while installed on this thread (and
/// the line that says an identity's stop).
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Lines {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        e.record(&mut message);
        let contact = ["worker joined", "worker left", "worker returned"].contains(&&*message.0)
            || message.0.starts_with("this identity's workers");
        if contact {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The lease sweep that finds no job to put back logs nothing.
#[tokio::test(start_paused = true)]
async fn a_sweep_with_nothing_to_put_back_says_nothing() {
    use tracing_subscriber::layer::SubscriberExt;
    let c = coordinator();
    run_of_8(&c).await;
    assert!(!lease(&c, "a", 4).await.is_empty());
    let loud = Loud::default();
    let logged = tracing_subscriber::registry().with(loud.clone());
    {
        let _installed = tracing::subscriber::set_default(logged);
        c.expire_leases().await;
    }
    assert_eq!(loud.0.lock().unwrap().0, 0);
    assert_eq!(c.shared.metrics.jobs_returned.get(), 0);
}

/// One credential making up a worker id per call, saying it leaves, then leasing under it, logs a
/// bounded number of lines a minute: before, each call wrote its line ("worker left", "worker
/// joined"), about a megabyte a second at full rate (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn made_up_worker_ids_log_a_bounded_number_of_lines() {
    use tracing_subscriber::layer::SubscriberExt;
    let c = coordinator();
    verified_run_of_8(&c).await;
    let lines = Lines::default();
    let logged = tracing_subscriber::registry().with(lines.clone());
    {
        let _installed = tracing::subscriber::set_default(logged);
        for k in 0..500 {
            let id = format!("m/x{k}");
            c.release_as(&id, &[], true, true).unwrap();
            c.lease(
                &Ask {
                    worker: &id,
                    ..as_credential("m")
                },
                Duration::ZERO,
            )
            .await
            .unwrap();
        }
    }
    let limit = super::contacts::LINES_PER_MINUTE as usize;
    let n = lines.0.swap(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        n,
        limit + 1,
        "each leave until the limit, then the line that says so"
    );
    let logged = tracing_subscriber::registry().with(lines.clone());
    let _installed = tracing::subscriber::set_default(logged);
    let count = || lines.0.swap(0, std::sync::atomic::Ordering::Relaxed);
    // Another identity's joins: its own budget.
    for k in 0..100 {
        let id = format!("j/x{k}");
        let ask = Ask {
            worker: &id,
            ..as_credential("j")
        };
        c.lease(&ask, Duration::ZERO).await.unwrap();
    }
    assert_eq!(count(), limit + 1, "joins");
    // A release that does not leave logs nothing and leaves its worker serving.
    c.release_as("n/1", &[], false, true).unwrap();
    assert!(!c.state().workers.gone("n/1"));
    assert_eq!(count(), 0);
    // Returns: by a lease call and by a heartbeat, each logged once; a known worker's heartbeat is
    // not a return.
    let r = Ask {
        worker: "r/1",
        ..as_credential("r")
    };
    c.lease(&r, Duration::ZERO).await.unwrap();
    assert_eq!(count(), 1, "joined");
    c.heartbeat("r/1", &[]).unwrap();
    assert_eq!(count(), 0, "known");
    for returned_by_lease in [true, false] {
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
        count();
        match returned_by_lease {
            true => {
                c.lease(&r, Duration::ZERO).await.unwrap();
            }
            false => {
                c.heartbeat("r/1", &[]).unwrap();
            }
        }
        assert_eq!(count(), 1, "returned, by a lease call: {returned_by_lease}");
    }
    // By a report: a worker lost while it computed, then reporting.
    let plain = run_of_8(&c).await;
    let w = Ask {
        worker: "w/1",
        capacity: 4,
        only: Some(&plain),
        ..as_credential("w")
    };
    let held: Vec<Granted> = c
        .lease(&w, Duration::ZERO)
        .await
        .unwrap()
        .leases
        .into_iter()
        .filter(|g| g.run.to_string() == plain)
        .collect();
    assert!(!held.is_empty());
    c.report_as("w/1", "w", true, vec![report(&held[0])])
        .await
        .unwrap();
    count();
    c.report_as("w/1", "w", true, vec![report(&held[0])])
        .await
        .unwrap();
    assert_eq!(count(), 0, "known");
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    count();
    c.report_as("w/1", "w", true, vec![report(&held[0])])
        .await
        .unwrap();
    assert_eq!(count(), 1, "returned, by a report");
}

/// A run's workers are those that hold its leases or delivered results it took: the same result sent
/// again under a thousand made-up worker ids adds none. Before, each id was a worker of the run for a
/// lease timeout, up to 65,536 per run, each walked by every view of it (found by a review,
/// 2026-11-29).
#[tokio::test(start_paused = true)]
async fn results_sent_again_under_made_up_ids_add_no_worker_to_the_run() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let all = lease(&c, "a", 4096).await;
    report_all(&c, "a", &all).await;
    assert_eq!(c.run(&run).unwrap().active_workers, 1);
    for i in 0..1000 {
        let id = format!("a/made-up-{i}");
        let outcomes = c.report(&id, "a", vec![report(&all[0])]).await.unwrap();
        assert_eq!(outcomes, [Outcome::Duplicate]);
    }
    assert_eq!(c.run(&run).unwrap().active_workers, 1);
}

/// A read sled itself refuses (a page failing its check, an I/O error) marks storage degraded, as a
/// damaged record does, so that the store is reopened and repaired; before, a lease call meeting it put
/// the job back first in line and failed, every later call the same, the coordinator still serving
/// (found by a review, 2026-11-29). Any other error marks nothing.
#[tokio::test(start_paused = true)]
async fn a_read_the_store_refuses_marks_storage_degraded() {
    let c = coordinator();
    c.note_damage(&Error::Invalid("a bad request".into()));
    assert_eq!(c.storage().degraded(), None);
    c.note_damage(&Error::Store(sled::Error::Io(std::io::Error::other(
        "Input/output error",
    ))));
    let why = c.storage().degraded().expect("degraded");
    assert!(why.contains("failed a read"), "{why}");
    let c = coordinator();
    c.note_damage(&Error::Store(sled::Error::Corruption { at: None, bt: () }));
    assert!(c.storage().degraded().is_some());
    let c = coordinator();
    c.note_damage(&Error::Corrupt("a record".into()));
    assert!(c.storage().degraded().is_some());
}

/// Asserts that opening the store of `dir` with `config` is refused as invalid (waiting for the store
/// of a coordinator just dropped to be free).
async fn refused_as_invalid(dir: &std::path::Path, config: Config) {
    let refused = loop {
        match opened_with(dir, config.clone()) {
            Err(Error::InUse(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            other => break other,
        }
    };
    assert!(
        matches!(refused, Err(Error::Invalid(_))),
        "{:?}",
        refused.err()
    );
}

/// The operator quarantines a credential known stolen (`serve --quarantine NAME`): at the open, its
/// results no other identity confirmed are taken back and its jobs computed again; those another
/// identity confirmed stand; it leases nothing more. The quarantine is in the ledger (a store rebuilt
/// from the ledger alone keeps it), stays through later opens without the flag, and only
/// `--release-quarantine` lifts it. A name both to quarantine and to release, or not a name, is refused
/// with nothing changed. Before, `credential revoke` refused its calls but kept everything it counted.
#[tokio::test]
async fn the_operator_quarantines_a_stolen_credential_at_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    // Run 1 verifies every job: "stolen" and "b" confirm each other's counts. Run 2 verifies
    // nothing: "stolen" counts alone.
    let confirmed = verified_run_of_8(&c).await;
    report_all(&c, "stolen", &lease(&c, "stolen", 4096).await).await;
    report_all(&c, "b", &lease(&c, "b", 4096).await).await;
    assert_eq!(total(&c, &confirmed), (Q8, true));
    let alone = run_of_8(&c).await;
    report_all(&c, "stolen", &lease(&c, "stolen", 4096).await).await;
    assert_eq!(total(&c, &alone), (Q8, true));
    drop(c);

    for bad in [
        Config {
            distrust: vec!["stolen".into()],
            release: vec!["stolen".into()],
            ..Config::default()
        },
        Config {
            distrust: vec!["".into()],
            ..Config::default()
        },
    ] {
        refused_as_invalid(dir.path(), bad).await;
    }
    let c = reopened(dir.path()).await;
    assert_eq!(total(&c, &alone), (Q8, true), "nothing changed");
    assert!(!refused_as_quarantined(&c, "stolen").await);
    drop(c);

    let distrusted = Config {
        distrust: vec!["stolen".into(), "stolen".into()],
        ..Config::default()
    };
    let c = reopened_with(dir.path(), distrusted.clone()).await;
    assert!(refused_as_quarantined(&c, "stolen").await);
    assert_eq!(total(&c, &confirmed), (Q8, true), "confirmed by b: stands");
    let view = c.run(&alone).unwrap();
    assert_eq!((view.tally.jobs, view.is_done()), (0, false), "taken back");
    assert_eq!(
        c.state().quarantined.get("stolen").map(String::as_str),
        Some(super::DISTRUSTED)
    );
    report_all(&c, "b", &lease(&c, "b", 4096).await).await;
    assert_eq!(total(&c, &alone), (Q8, true), "computed again");
    drop(c);
    // Given again: nothing more changes, the ledger included. Another name, beside a quarantine:
    // quarantined too (killed the mutant `==` → `!=` in the test of names already quarantined).
    let ledger = dir.path().join(crate::durable::ledger::LEDGER_FILE);
    let lines = || {
        std::fs::read(&ledger)
            .unwrap()
            .split(|&b| b == b'\n')
            .count()
    };
    let before = lines();
    let c = reopened_with(dir.path(), distrusted).await;
    assert_eq!(total(&c, &alone), (Q8, true));
    drop(c);
    assert_eq!(lines(), before, "no line written");
    let other = Config {
        distrust: vec!["other".into()],
        ..Config::default()
    };
    let c = reopened_with(dir.path(), other).await;
    assert!(refused_as_quarantined(&c, "other").await);
    assert!(refused_as_quarantined(&c, "stolen").await);
    drop(c);
    let c = reopened(dir.path()).await;
    assert!(refused_as_quarantined(&c, "stolen").await, "stays");
    drop(c);
    let rebuilt = ledger_alone(dir.path());
    let c = reopened(rebuilt.path()).await;
    assert!(refused_as_quarantined(&c, "stolen").await, "in the ledger");
    assert_eq!(total(&c, &alone), (Q8, true));
    drop(c);
    let released = Config {
        release: vec!["stolen".into()],
        ..Config::default()
    };
    let c = reopened_with(dir.path(), released).await;
    assert!(!refused_as_quarantined(&c, "stolen").await, "released");
}

/// `--quarantine` of a worker quarantined already by deciders drops its deciders (keeping its reason),
/// in the store and the ledger: the rule can no longer lift it (found by a review, 2026-11-29: it was
/// left as it was, and lifted once its deciders were disproved). A name that is not a worker name
/// refuses the start before a release given with it is made.
#[tokio::test]
async fn the_operators_quarantine_of_a_quarantined_worker_names_no_decider() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    a_liar_caught(&c).await;
    let before = c.shared.store.quarantined().unwrap();
    assert!(!before[0].by.is_empty(), "{before:?}");
    drop(c);
    let bad = Config {
        release: vec!["liar".into()],
        distrust: vec!["".into()],
        ..Config::default()
    };
    refused_as_invalid(dir.path(), bad).await;
    let config = Config {
        distrust: vec!["liar".into()],
        ..Config::default()
    };
    let c = reopened_with(dir.path(), config).await;
    assert!(
        refused_as_quarantined(&c, "liar").await,
        "the release was not made"
    );
    let after = c.shared.store.quarantined().unwrap();
    assert_eq!(after.len(), 1);
    assert!(after[0].by.is_empty(), "{after:?}");
    assert_eq!(after[0].reason, before[0].reason);
    drop(c);
    let rebuilt = ledger_alone(dir.path());
    let c = reopened(rebuilt.path()).await;
    assert!(c.shared.store.quarantined().unwrap()[0].by.is_empty());
}

/// Two colluding credentials confirm each other's lies on jobs an honest worker's expired leases
/// held. The honest worker's late results, under those leases (ended unsettled when the lies were
/// counted: remembered, one result each), take a confirmed count back (one per commit) for further
/// identities to decide; deciding it unravels every lie the two confirmed together. Before, only a live lease could: the late honest results were only compared, their sender
/// quarantined, and the run stayed done with a made-up total (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn a_lease_outlived_by_a_confirmed_lie_takes_the_count_back() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let slow = lease_credential(&c, "slow", 4096).await;
    assert!(!slow.is_empty());
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    for name in ["liar-1", "liar-2"] {
        loop {
            let got = lease_credential(&c, name, 4096).await;
            if got.is_empty() {
                break;
            }
            c.report(name, name, got.iter().map(lying).collect())
                .await
                .unwrap();
        }
    }
    let lied = c.run(&run).unwrap();
    assert!(
        lied.is_done() && lied.tally.total != Q8,
        "the lies confirmed"
    );
    assert_eq!(lied.jobs_confirmed, lied.meta.jobs_total);

    let outcomes = report_all(&c, "slow", &slow).await;
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    let after = c.run(&run).unwrap();
    assert!(!after.is_done(), "the run is open again");
    assert_eq!(
        after.tally.jobs + 1,
        lied.tally.jobs,
        "one count taken back: one identity takes back one per commit"
    );
    // Shown wrong by two that agreed, the honest worker waits in quarantine for a third to decide.
    assert!(c.state().quarantined.contains_key("slow"));
    // Each lease has delivered: lifted later, its worker takes nothing more back with it.
    assert!(slow.iter().all(|g| !c.state().leases.outlived(g.id)));
    // One dispute unravels the rest: the operator's worker decides it, both liars are shown wrong,
    // every count they confirmed together is taken back, and the honest worker is lifted.
    // (A verified run: two honest identities compute the jobs taken back.)
    for _ in 0..10 {
        for name in ["judge", "judge-2"] {
            let got = lease(&c, name, 4096).await;
            report_all(&c, name, &got).await;
        }
    }
    assert_eq!(total(&c, &run), (Q8, true));
    let quarantined = c.state().quarantined.clone();
    assert!(quarantined.contains_key("liar-1") && quarantined.contains_key("liar-2"));
    assert!(!quarantined.contains_key("slow"), "lifted");
}

/// A verified run of N = 8 whose jobs `slow` leased and let expire, then `liar-1` and `liar-2`
/// confirmed a lie on each but one: `liar-2` keeps that one's lease, so the run stays open and lends
/// spot checks of the others. Returns the run, `slow`'s leases, and the job kept.
async fn outlived_by_lies(c: &Coordinator) -> (String, Vec<Granted>, JobKey) {
    let (run, mut slow, kept) = outlived_by_lies_of(c, &["slow"]).await;
    (run, slow.remove(0), kept)
}

/// [`outlived_by_lies`], with each of `slow` in turn leasing every job and letting its leases expire.
async fn outlived_by_lies_of(
    c: &Coordinator,
    slow: &[&str],
) -> (String, Vec<Vec<Granted>>, JobKey) {
    let run = verified_run_of_8(c).await;
    let mut leased = Vec::new();
    for name in slow {
        let held = lease_credential(c, name, 4096).await;
        assert!(held.len() > 2);
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
        leased.push(held);
    }
    let slow = leased;
    let mut kept = None;
    for name in ["liar-1", "liar-2"] {
        loop {
            let mut got = lease_credential(c, name, 4096).await;
            if name == "liar-2" && kept.is_none() && !got.is_empty() {
                kept = Some(got.remove(0).key);
            }
            if got.is_empty() {
                break;
            }
            c.report(name, name, got.iter().map(lying).collect())
                .await
                .unwrap();
        }
    }
    let lied = c.run(&run).unwrap();
    assert!(!lied.is_done());
    assert_eq!(lied.jobs_confirmed + 1, lied.meta.jobs_total);
    (run, slow, kept.unwrap())
}

/// A result for a failed job, whatever lease id it names, ends no other identity's lease. Before, such
/// a result (let through unchecked: a failed job is settled, so it is only compared) marked the lease
/// it named as having delivered, and one kept past its job's count went: a colluder that named an
/// honest worker's ids (they are sequential) made its late result under them harmless, so the lie
/// that worker would have taken back stood, and the worker was quarantined by the two liars
/// (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn a_result_for_a_failed_job_ends_no_other_identitys_lease() {
    let c = coordinator();
    let (run, slow, _) = outlived_by_lies(&c).await;
    let counted = c.run(&run).unwrap().tally.jobs;
    let outlived: Vec<&Granted> = slow
        .iter()
        .filter(|g| c.state().leases.outlived(g.id))
        .collect();
    assert!(!outlived.is_empty());
    let other = run_of_8(&c).await;
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    let key = plan.jobs().next().unwrap();
    let id = c.run(&other).unwrap().meta.id;
    c.shared.store.fail_job(id, &key, "test").unwrap();
    let result = Job::new(plan, key.clone()).unwrap().run();
    let reports: Vec<Report> = outlived
        .iter()
        .map(|g| Report {
            lease: g.id,
            run: other.clone(),
            n: 8,
            job: key.to_string(),
            seal: Some(seal(plan.fingerprint().1, &key, &result)),
            result,
            tag: 0,
            device: None,
            family: None,
        })
        .collect();
    let outcomes = c.report("liar-1", "liar-1", reports).await.unwrap();
    assert!(
        outcomes.iter().all(|o| *o == Outcome::JobFailed),
        "{outcomes:?}"
    );
    for g in &outlived {
        assert_eq!(c.state().leases.issued_to(g.id), Some("slow"));
        assert!(c.state().leases.outlived(g.id), "still kept for its result");
    }
    // The honest worker's late result still takes a lie back.
    let back = c
        .report("slow", "slow", vec![report(outlived[0])])
        .await
        .unwrap();
    assert!(matches!(back[..], [Outcome::Mismatch { .. }]), "{back:?}");
    assert_eq!(c.run(&run).unwrap().tally.jobs + 1, counted, "taken back");
}

/// A commit's quarantine applied after a later commit's lift of the same worker (reports' tasks take
/// the lock in any order) is passed by: the worker, lifted in the store, is not kept out in memory
/// until a restart (found by a review, 2026-11-29).
#[tokio::test]
async fn a_lift_is_not_undone_by_the_older_quarantine_it_lifted() {
    let c = coordinator();
    let q = crate::durable::store::tests::quarantined_by("w", &["x"]);
    let quarantine = crate::durable::store::Committed {
        quarantined: vec![q.clone()],
        seq: 5,
        ..Default::default()
    };
    let lift = crate::durable::store::Committed {
        lifted: vec![q],
        seq: 6,
        ..Default::default()
    };
    super::changes::apply_quarantines(&mut c.state(), &lift);
    super::changes::apply_quarantines(&mut c.state(), &quarantine);
    assert!(!c.state().quarantined.contains_key("w"));
    // In order, both apply; so does a later quarantine.
    super::changes::apply_quarantines(
        &mut c.state(),
        &crate::durable::store::Committed {
            seq: 7,
            ..quarantine
        },
    );
    assert!(c.state().quarantined.contains_key("w"));
    super::changes::apply_quarantines(
        &mut c.state(),
        &crate::durable::store::Committed { seq: 7, ..lift },
    );
    assert!(
        !c.state().quarantined.contains_key("w"),
        "the same commit's lift comes after its quarantine"
    );
}

/// Ending a spot check ends that lease alone. Before, it forgot every ended lease of its job: a
/// third credential that handed back a check of a job two colluders had confirmed a lie on made the
/// coordinator forget the honest worker's lease kept past that count, and the honest late result then
/// only quarantined its sender, the lie standing (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn ending_a_spot_check_keeps_the_leases_its_job_outlived() {
    let c = coordinator();
    let (run, slow, kept) = outlived_by_lies(&c).await;
    let confirmed: Vec<&Granted> = slow.iter().filter(|g| g.key != kept).collect();
    assert!(confirmed.iter().all(|g| c.state().leases.outlived(g.id)));
    // Sweepers take checks and hand them back, or answer them with the lie (a pass).
    let mut checked = std::collections::HashSet::new();
    for i in 0..40 {
        let name = format!("sweeper-{i}");
        let got = lease_credential(&c, &name, 256).await;
        assert!(got.iter().all(|g| g.key != kept), "only checks are left");
        checked.extend(got.iter().map(|g| g.key.clone()));
        if i % 2 == 0 {
            let ids: Vec<u64> = got.iter().map(|g| g.id).collect();
            c.release(&name, &ids, false).unwrap();
        } else {
            c.report(&name, &name, got.iter().map(lying).collect())
                .await
                .unwrap();
        }
    }
    assert!(
        confirmed.iter().all(|g| checked.contains(&g.key)),
        "every confirmed job was checked"
    );
    assert!(
        confirmed.iter().all(|g| c.state().leases.outlived(g.id)),
        "the honest worker's leases are remembered"
    );
    let before = c.run(&run).unwrap();
    let outcomes = report_all(&c, "slow", &slow).await;
    assert!(
        outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    let after = c.run(&run).unwrap();
    assert_eq!(
        after.tally.jobs + 1,
        before.tally.jobs,
        "one count taken back"
    );
}

/// A spot check is answered only by its holder, under its lease: another identity's result under the
/// check's id (a partner told it) ends nothing and passes nothing. Before, it ended the check, which
/// the holder then no longer owed, and the stored count sent so earned the partner a pass, a say in
/// disputes (found by a review, 2026-11-29).
#[tokio::test(start_paused = true)]
async fn another_identitys_result_under_a_checks_id_answers_nothing() {
    let c = coordinator();
    outlived_by_lies(&c).await;
    let check = a_check_for(&c, "holder").await;
    let g = &check;
    // The stored count (the lie), then another, under the holder's check.
    for sent in [lying(g), report(g)] {
        let _ = c.report("partner", "partner", vec![sent]).await;
        assert!(c.state().leases.is_leased(g.run, &g.key), "still out");
        assert_eq!(c.state().spot.passed_by("partner"), 0);
    }
    // The holder answers it: passed.
    let answered = c.report("holder", "holder", vec![lying(g)]).await.unwrap();
    assert_eq!(answered, vec![Outcome::Duplicate]);
    assert!(!c.state().leases.is_leased(g.run, &g.key));
    assert_eq!(c.state().spot.passed_by("holder"), 1);
}

/// A spot check whose count is taken back meanwhile stays out for its holder (its heartbeats tell it
/// nothing), decides no dispute, and, handed back or let lapse, is owed to nobody: a drawn decider
/// decides. Before, its answer decided the dispute with no draw of deciders, and a check handed back
/// was owed and issued again for the disputed job: its holder held the job from every decider as
/// often as it liked (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_spot_check_whose_count_is_taken_back_decides_nothing_and_is_owed_to_nobody() {
    for end in ["answered", "handed back", "lapsed"] {
        let c = coordinator();
        let (run, slow, _) = outlived_by_lies_of(&c, &["slow", "slow-2"]).await;
        let g = a_check_for(&c, "holder").await;
        let of = |held: &[Granted]| held.iter().find(|s| s.key == g.key).unwrap().clone();
        // "slow" takes the liars' count back (quarantined, its result goes); "slow-2", with a
        // record, disputes the liars' candidate under its late lease.
        let outcomes = report_all(&c, "slow", &[of(&slow[0])]).await;
        assert!(
            matches!(outcomes[0], Outcome::Mismatch { .. }),
            "{outcomes:?}"
        );
        c.state().spot.passed("slow-2");
        let outcomes = report_all(&c, "slow-2", &[of(&slow[1])]).await;
        assert_eq!(outcomes, [Outcome::Disputed]);
        assert!(
            c.state().spot.is_out(g.id),
            "{end}: still out for its holder"
        );
        let (lost, _) = c.heartbeat("holder", &[g.id]).unwrap();
        assert!(lost.is_empty(), "{end}: its heartbeat tells nothing");
        c.state().spot.passed("holder");
        match end {
            "answered" => {
                let outcomes = report_all(&c, "holder", std::slice::from_ref(&g)).await;
                assert_eq!(
                    outcomes,
                    [Outcome::NotKept],
                    "drawn to check, not to decide"
                );
            }
            "handed back" => {
                c.release("holder", &[g.id], false).unwrap();
            }
            _ => {
                tokio::time::advance(TIMEOUT * 2).await;
                c.expire_leases().await;
            }
        }
        assert!(!c.state().spot.is_out(g.id), "{end}");
        assert!(!c.state().spot.owes("holder"), "{end}: owed to nobody");
        assert_eq!(c.run(&run).unwrap().jobs_disputed, 1, "{end}");
        c.state().spot.passed("decider");
        let decide = take(&c, "decider", &g.key).await;
        let outcomes = report_all(&c, "decider", &[decide]).await;
        assert_eq!(outcomes, [Outcome::Accepted], "{end}");
        assert_eq!(c.run(&run).unwrap().jobs_disputed, 0);
    }
}

/// A spot check out when its job's count is revoked (the identities that counted it quarantined) ends
/// with the revocation: out no more, owed to nobody, lost to its holder's heartbeat; the job is
/// computed again and the run ends exact. (The revocation's end of the check had no test: found by
/// the review of 2026-12-01.)
#[tokio::test(start_paused = true)]
async fn a_spot_check_whose_count_is_revoked_ends_and_is_owed_to_nobody() {
    let c = coordinator();
    let (run, slow, kept) = outlived_by_lies_of(&c, &["slow", "slow-2"]).await;
    let g = a_check_for(&c, "holder").await;
    // The liars' count of another job is taken back and decided against them: their other counts,
    // the check's among them, are revoked.
    let key = slow[0]
        .iter()
        .map(|s| s.key.clone())
        .find(|k| *k != g.key && *k != kept)
        .unwrap();
    let of = |held: &[Granted]| held.iter().find(|s| s.key == key).unwrap().clone();
    let outcomes = report_all(&c, "slow", &[of(&slow[0])]).await;
    assert!(
        matches!(outcomes[0], Outcome::Mismatch { .. }),
        "{outcomes:?}"
    );
    c.state().spot.passed("slow-2");
    assert_eq!(
        report_all(&c, "slow-2", &[of(&slow[1])]).await,
        [Outcome::Disputed]
    );
    assert!(c.state().spot.is_out(g.id));
    c.state().spot.passed("decider");
    let decide = take(&c, "decider", &key).await;
    assert_eq!(
        report_all(&c, "decider", &[decide]).await,
        [Outcome::Accepted]
    );
    assert!(c.state().quarantined.contains_key("liar-1"));
    assert!(!c.state().spot.is_out(g.id), "ended with its count");
    assert!(!c.state().spot.owes("holder"), "owed to nobody");
    let (lost, _) = c.heartbeat("holder", &[g.id]).unwrap();
    assert_eq!(lost, [g.id]);
    for name in ["h1", "h2"] {
        c.state().spot.passed(name);
    }
    for _ in 0..20 {
        for name in ["h1", "h2"] {
            let got = lease_credential(&c, name, 4096).await;
            report_all(&c, name, &got).await;
        }
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    assert_eq!(total(&c, &run), (Q8, true));
}

/// A spot check out when its job fails (six different results) ends with the failure: out no more,
/// owed to nobody, lost to its holder's heartbeat. (The failure's end of the check had no test: found
/// by the review of 2026-12-01.)
#[tokio::test(start_paused = true)]
async fn a_spot_check_whose_job_fails_meanwhile_ends_and_is_owed_to_nobody() {
    let c = coordinator();
    let slow = ["slow", "s2", "s3", "s4", "s5", "s6"];
    let (_, held, _) = outlived_by_lies_of(&c, &slow).await;
    let g = a_check_for(&c, "holder").await;
    // "slow" takes the liars' count back; the others, each with a record, add a result apiece under
    // their late leases (s2 the truth, the rest lies of their own), the sixth failing the job.
    for (i, (name, held)) in slow.iter().zip(&held).enumerate() {
        let late = held.iter().find(|s| s.key == g.key).unwrap();
        let sent = match i {
            0 | 1 => report(late),
            _ => lying_by(late, i as u64),
        };
        c.state().spot.passed(name);
        let outcomes = c.report(name, name, vec![sent]).await.unwrap();
        let want = match i {
            0 => "mismatch",
            5 => "failed",
            _ => "disputed",
        };
        let got = match outcomes[0] {
            Outcome::Mismatch { .. } => "mismatch",
            Outcome::JobFailed => "failed",
            Outcome::Disputed => "disputed",
            _ => "other",
        };
        assert_eq!(got, want, "{name}: {outcomes:?}");
        assert_eq!(c.state().spot.is_out(g.id), i < 5, "{name}");
    }
    assert!(!c.state().spot.owes("holder"), "owed to nobody");
    let (lost, _) = c.heartbeat("holder", &[g.id]).unwrap();
    assert_eq!(lost, [g.id]);
}

/// A spot check leased to the credential `name`, one lease call at a time: the other leases it gets
/// are handed back (checks are drawn at random, a fifth of a new identity's leases).
async fn a_check_for(c: &Coordinator, name: &str) -> Granted {
    for _ in 0..500 {
        let got = lease_credential(c, name, 1).await;
        let Some(g) = got.first() else {
            continue;
        };
        if c.state().spot.is_out(g.id) {
            return g.clone();
        }
        c.release(name, &[g.id], false).unwrap();
        tokio::time::advance(TIMEOUT).await;
    }
    panic!("{name} got no check in 500 leases");
}

/// A run cancelled ends its checks out and the checks owed of it, and no other run's.
#[tokio::test(start_paused = true)]
async fn a_cancelled_run_ends_its_spot_checks_and_no_other_runs() {
    let c = coordinator();
    let (run, _, _) = outlived_by_lies(&c).await;
    let other = run_of_8(&c).await;
    let owed = a_check_for(&c, "owing").await;
    c.release("owing", &[owed.id], false).unwrap();
    assert!(c.state().spot.owes("owing"));
    let out = a_check_for(&c, "holder").await;
    c.control(&other, Control::Cancel).await.unwrap();
    assert!(c.state().spot.owes("owing") && c.state().spot.is_out(out.id));
    c.control(&run, Control::Cancel).await.unwrap();
    assert!(!c.state().spot.owes("owing"));
    assert!(!c.state().spot.is_out(out.id));
}

/// A spot check out while its job's count is taken back leaves the job leasable once the check ends.
/// Before, a lease call that met the job while the check was out dropped it (leased), and the check's
/// end put nothing back: the job sat disputed in no queue, and the run never finished until a
/// restart (found by a review, 2026-11-29: one credential, sacrificed, could strand a job so).
#[tokio::test(start_paused = true)]
async fn a_job_taken_back_while_its_spot_check_is_out_is_leased_once_the_check_ends() {
    let c = coordinator();
    let (run, slow, _) = outlived_by_lies(&c).await;
    // Another credential holds a check; "slow" (honest, late) takes that job's count back.
    let check = a_check_for(&c, "holder").await;
    let old = slow.iter().find(|g| g.key == check.key).unwrap();
    let outcomes = report_all(&c, "slow", std::slice::from_ref(old)).await;
    assert!(
        matches!(outcomes[0], Outcome::Mismatch { .. }),
        "{outcomes:?}"
    );
    assert!(!c.run(&run).unwrap().is_done());
    // Meanwhile a judge's lease call meets the job, leased (the check): it is not offered.
    let meanwhile = lease(&c, "judge", 4096).await;
    assert!(meanwhile.iter().all(|g| g.key != check.key));
    report_all(&c, "judge", &meanwhile).await;
    // The check expires.
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let later = lease(&c, "judge", 4096).await;
    assert!(
        later.iter().any(|g| g.key == check.key),
        "the disputed job is offered once its check ended: {later:?}"
    );
}

/// After a restart, a tag kept from a lease handed back in the earlier incarnation proves no lease: a
/// result under it is refused while its job is open, and only compared once honest workers counted it
/// (nobody framed, no count taken back). Before, the lease table forgot the hand-back with the
/// restart, and the tag alone passed as a lease issued: a hoarder could report made-up counts under
/// it, unchecked for speed, or dispute honest counts for free (known since 2026-11-29).
#[tokio::test]
async fn after_a_restart_a_tag_kept_from_a_lease_handed_back_proves_no_lease() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = run_of_8(&c).await;
    let kept = handed_back_by_a_hoarder(&c).await;
    drop(c);
    let c = reopened(dir.path()).await;
    let lies = || kept.iter().map(lying).collect::<Vec<Report>>();
    let refused = c.report("hoarder", "hoarder", lies()).await;
    assert!(
        matches!(refused, Err(Error::NotLeased { .. })),
        "{refused:?}"
    );
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "nothing counted");
    let honest = lease(&c, "h", 4096).await;
    report_all(&c, "h", &honest).await;
    assert_eq!(total(&c, &run), (Q8, true));
    let outcomes = c.report("hoarder", "hoarder", lies()).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    assert_eq!(total(&c, &run), (Q8, true), "no count taken back");
    assert!(c.state().quarantined.is_empty(), "nobody framed");
}

/// A hand-back into a chunk of the hand-back record damaged on disk is taken (its jobs leased again),
/// leaves the chunk as it is, and counts a damaged record in the store; after a restart the tags of
/// that chunk's leases are read as handed back, loudly: a result under one is refused while its job
/// is open (a recount, never a count).
#[tokio::test]
async fn a_hand_back_into_a_damaged_record_is_counted_and_its_tags_stay_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = run_of_8(&c).await;
    let kept = lease_credential(&c, "hoarder", 4).await;
    assert_eq!(kept.len(), 4);
    c.shared.store.damage_hand_backs_of(kept[0].id);
    let corrupt = "nqueens_corrupt_records_total{place=\"store\"} 1\n";
    assert!(!c.render_metrics().contains(corrupt));
    let ids: Vec<u64> = kept.iter().map(|g| g.id).collect();
    assert_eq!(c.release("hoarder", &ids, false).unwrap(), 4);
    assert!(
        c.render_metrics().contains(corrupt),
        "{}",
        c.render_metrics()
    );
    drop(c);
    let c = reopened(dir.path()).await;
    let refused = c
        .report("hoarder", "hoarder", kept.iter().map(lying).collect())
        .await;
    assert!(
        matches!(refused, Err(Error::NotLeased { .. })),
        "{refused:?}"
    );
    assert!(
        c.render_metrics().contains(corrupt),
        "{}",
        c.render_metrics()
    );
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "nothing counted");
}

/// After a restart, a lease of the earlier incarnation (its tag kept, not handed back) still carries
/// its worker's result for an open job, and that result meets the speed check: it was issued before
/// this incarnation began, so a rate no device reaches since then holds it for a second identity.
/// Before, an earlier lease had no issue time and skipped the check: a made-up count with any nodes
/// counted alone (found by a review, 2026-11-29).
#[tokio::test]
async fn after_a_restart_an_earlier_lease_counts_and_meets_the_speed_check() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = run_of_8(&c).await;
    let held = lease(&c, "straddler", 2).await;
    drop(c);
    let c = reopened(dir.path()).await;
    let mut made_up = report(&held[0]);
    made_up.result.nodes = 1 << 50;
    made_up.seal = Some(seal(held[0].fingerprint, &held[0].key, &made_up.result));
    let outcomes = c
        .report("straddler", "straddler", vec![made_up, report(&held[1])])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![Outcome::Pending, Outcome::Accepted]);
    let view = c.run(&run).unwrap();
    assert_eq!((view.tally.jobs, view.jobs_verifying), (1, 1));
}

/// After a restart, a lease of the earlier incarnation (not handed back) stands for a worker that
/// computed across the restart: a different result under it takes back a count two others confirmed
/// meanwhile, as a live lease's does, one per commit, its sender quarantined until the dispute is
/// decided. Before, it was only compared: an honest worker whose leases expired while colluders
/// confirmed lies, reporting after a restart, was framed and the lies stood (found by a review,
/// 2026-11-29). Its result for an open job counts as a candidate.
#[tokio::test]
async fn after_a_restart_an_earlier_lease_takes_back_one_confirmed_count() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = verified_run_of_8(&c).await;
    let held = lease_credential(&c, "slow", 4096).await;
    assert!(held.len() >= 2);
    drop(c);
    let c = reopened(dir.path()).await;
    let first = c
        .report_as("slow", "slow", true, vec![report(&held[0])])
        .await
        .unwrap();
    assert_eq!(first, vec![Outcome::Pending], "an open job's candidate");
    for name in ["a", "b"] {
        let got = lease(&c, name, 4096).await;
        report_all(&c, name, &got).await;
    }
    let confirmed = c.run(&run).unwrap();
    assert_eq!(confirmed.tally.total, Q8);
    assert!(confirmed.is_done());
    let lies: Vec<Report> = held[1..].iter().map(lying).collect();
    let outcomes = c.report_as("slow", "slow", true, lies).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    let after = c.run(&run).unwrap();
    assert_eq!(after.tally.jobs + 1, confirmed.tally.jobs, "one taken back");
    assert!(!after.is_done());
    assert!(c.state().quarantined.contains_key("slow"));
}

/// A credential's own result sent again under its own lease, the table having forgotten that lease
/// once its job was counted: compared (`ACCEPTED`) while the count stands and once a different result
/// under a live lease has taken it back to be decided. Before, it was refused while the job was
/// disputed (the job not settled): the answer told a count taken back from one standing, which the
/// wire hides by answering `disputed` as `ACCEPTED` (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_credential_cannot_tell_counted_from_taken_back_under_its_own_lease() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let (first, second) = leased_again_by(&c, lease_credential, "late", "fresh", 4096).await;
    assert_eq!(second.len(), first.len());
    let sent = || vec![report(&first[0])];
    let outcomes = c.report_as("late", "late", true, sent()).await.unwrap();
    assert_eq!(outcomes, [Outcome::Accepted]);
    let counted = c.report_as("late", "late", true, sent()).await;
    assert!(
        matches!(&counted, Ok(o) if o[..] == [Outcome::Duplicate]),
        "{counted:?}"
    );
    // A different result under a live lease of the job takes the count back.
    let live = second.iter().find(|g| g.key == first[0].key).unwrap();
    let outcomes = c
        .report_as("fresh", "fresh", true, vec![lying(live)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Disputed]);
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0, "taken back");
    let taken_back = c.report_as("late", "late", true, sent()).await;
    assert_eq!(
        format!("{taken_back:?}"),
        format!("{counted:?}"),
        "the answer tells a count taken back from one standing"
    );
}

/// Two colluding credentials cannot pick who gives a job its second result: the first result's
/// sender reports, and its partner asks at once for all it may hold, among 40 identities that serve.
/// It gets the jobs the draw admits it to, about a tenth. Before, the job went to the next lease call
/// from the front of the retry queue: the partner took every one and could confirm a lie on any job
/// its sender chose (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_partner_asking_at_once_gets_few_of_the_jobs_whose_first_result_waits() {
    let c = coordinator();
    let (run, mine) = first_results_among_forty(&c).await;
    let theirs = lease_credential(&c, "b", 4096).await;
    let got = of_jobs(&theirs, &mine);
    // (About 4 in 41 of them: 6 on average; 24 or more about once in 360 million.)
    assert!(got < 24, "{got} of 64 second results went to the partner");
    // The honest identities the draw admits get them.
    let checked = checked_by_the_forty(&c, &mine).await;
    assert!(checked + got > 32, "{checked} checked by the others");
    assert!(!total(&c, &run).1);
}

/// Colluding credentials cannot pick who decides a dispute: "a" lies on 64 jobs, the 40 honest
/// identities dispute them, and a's partner, with a record, asks at once for all it may hold. It gets
/// the disputes the draw of deciders admits it to, about a tenth; the honest identities decide the
/// rest. Before, every dispute went to the first identity with a record that asked: a partner asking
/// at once decided them all (in a record run, three colluders decided a dispute by being first to
/// three; found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_partner_asking_at_once_decides_few_of_the_disputes() {
    let c = coordinator();
    let (run, lies) = lies_among_forty(&c).await;
    // The forty check a's results: each disputed by the one that takes it.
    let mut disputed = Vec::new();
    for i in 0..40 {
        let name = format!("h{i}");
        // (The fresh jobs stay leased: h0 holds them all.)
        let all = lease_credential(&c, &name, 4096).await;
        let checks: Vec<Granted> = all
            .into_iter()
            .filter(|g| lies.iter().any(|l| l.key == g.key))
            .collect();
        let outcomes = c
            .report_as(&name, &name, true, checks.iter().map(report).collect())
            .await
            .unwrap();
        assert!(outcomes.iter().all(|o| *o == Outcome::Disputed));
        disputed.extend(checks);
    }
    assert!(disputed.len() > 48, "{} of 64 checked", disputed.len());
    assert_eq!(c.run(&run).unwrap().jobs_disputed, disputed.len() as u64);
    // Every identity has a record; the partner asks first.
    for i in 0..40 {
        c.state().spot.passed(&format!("h{i}"));
    }
    c.state().spot.passed("b");
    let theirs = lease_credential(&c, "b", 4096).await;
    let got = of_jobs(&theirs, &disputed);
    // (About 4 in 40 of them: 6 on average; 24 or more about once in 200 million.)
    assert!(
        got < 24,
        "{got} of {} disputes went to the partner",
        disputed.len()
    );
    // The forty decide the disputes they are drawn to, for the truth.
    let mut decided = 0;
    for i in 0..40 {
        let name = format!("h{i}");
        let theirs = lease_credential(&c, &name, 4096).await;
        let decide: Vec<Granted> = theirs
            .into_iter()
            .filter(|g| disputed.iter().any(|d| d.key == g.key))
            .collect();
        let outcomes = c
            .report_as(&name, &name, true, decide.iter().map(report).collect())
            .await
            .unwrap();
        // (Once a is shown wrong, its other lies go with its quarantine: the later answers of
        // their jobs confirm the honest side, or find it counted.)
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, Outcome::Accepted | Outcome::Duplicate)),
            "{outcomes:?}"
        );
        decided += outcomes.len();
    }
    assert!(decided + got > 40, "{decided} decided by the others");
    assert!(c.state().quarantined.contains_key("a"));
    let left = c.run(&run).unwrap().jobs_disputed as usize;
    assert!(left <= got, "{left} left disputed: the partner's alone");
}

/// A result under a lease drawn to confirm seconds no side once the job is disputed. "p", admitted to
/// check a's lie (few identities serve: the draw admits all), leases the job and lets the lease
/// expire; "h" takes it and disputes the lie; p's late result, agreeing with a, is not kept, and the
/// job stays disputed. Before, it seconded the lie and decided the dispute for it: h quarantined, the
/// lie counted, with no draw of deciders (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_late_result_drawn_to_confirm_seconds_no_side_of_a_dispute() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 1).await;
    let outcomes = c
        .report_as("a", "a", true, vec![lying(&first[0])])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Pending]);
    c.state().spot.passed("p");
    let kept = take(&c, "p", &first[0].key).await;
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let check = take(&c, "h", &first[0].key).await;
    let outcomes = c
        .report_as("h", "h", true, vec![report(&check)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Disputed]);
    let outcomes = c
        .report_as("p", "p", true, vec![lying(&kept)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::NotKept]);
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 1);
    assert!(!c.state().quarantined.contains_key("h"));
    // A decider drawn now decides it, for the truth.
    c.state().spot.passed("d");
    let decide = take(&c, "d", &first[0].key).await;
    c.report_as("d", "d", true, vec![report(&decide)])
        .await
        .unwrap();
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 0);
    assert!(c.state().quarantined.contains_key("a"));
    assert!(!c.state().quarantined.contains_key("h"));
}

/// A lease drawn for a dispute still decides it once the dispute has moved on. "d1" leases a's and
/// h's dispute and lets the lease lapse; "d2" adds a third result; d1's late result, agreeing with h,
/// decides it. (Its lease was issued for the dispute: a third result changes nothing of that.)
#[tokio::test(start_paused = true)]
async fn a_late_result_drawn_for_a_dispute_decides_it_after_a_third_result() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 1).await;
    c.report_as("a", "a", true, vec![lying(&first[0])])
        .await
        .unwrap();
    let key = &first[0].key;
    let check = take(&c, "h", key).await;
    let outcomes = c
        .report_as("h", "h", true, vec![report(&check)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Disputed]);
    for name in ["d1", "d2"] {
        c.state().spot.passed(name);
    }
    let late = take(&c, "d1", key).await;
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let third = take(&c, "d2", key).await;
    let mut other = lying(&third);
    other.result.total += 8;
    other.result.unique8 = other.result.unique8.map(|u| u + 8);
    other.seal = Some(seal(third.fingerprint, key, &other.result));
    let outcomes = c.report_as("d2", "d2", true, vec![other]).await.unwrap();
    assert_eq!(outcomes, [Outcome::Disputed]);
    let outcomes = c
        .report_as("d1", "d1", true, vec![report(&late)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Accepted]);
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 0);
    assert!(c.state().quarantined.contains_key("a"));
    assert!(c.state().quarantined.contains_key("d2"));
    assert!(!c.state().quarantined.contains_key("h"));
}

/// A lease drawn to confirm a job's first result confirms no other result the job comes to hold. "a"
/// lets a lease of a job lapse; "c" gives the job its true first result; "b", drawn to confirm it,
/// holds its lease; a disputes c's result with a lie under its lapsed lease; c is caught lying on
/// another job and quarantined, and its side goes (the job back to a's lie alone); b's lie, agreeing
/// with a, is not kept. Before, b's lease confirmed the lie it was never drawn for: counted, nobody
/// quarantined, for one sacrificed credential (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_lease_drawn_to_confirm_one_result_confirms_no_later_one() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let lapsed = lease_credential(&c, "a", 1).await.remove(0);
    let key = lapsed.key.clone();
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let first = take(&c, "c", &key).await;
    assert_eq!(report_all(&c, "c", &[first]).await, [Outcome::Pending]);
    let confirm = take(&c, "b", &key).await;
    let outcomes = c
        .report_as("a", "a", true, vec![lying(&lapsed)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Disputed]);
    // c lies first on another job; h disputes it; d decides against c.
    let other = lease_credential(&c, "c", 1).await.remove(0);
    c.report_as("c", "c", true, vec![lying(&other)])
        .await
        .unwrap();
    let check = take(&c, "h", &other.key).await;
    assert_eq!(report_all(&c, "h", &[check]).await, [Outcome::Disputed]);
    c.state().spot.passed("d");
    let decide = take(&c, "d", &other.key).await;
    assert_eq!(report_all(&c, "d", &[decide]).await, [Outcome::Accepted]);
    assert!(c.state().quarantined.contains_key("c"));
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 0, "a's lie alone");
    let outcomes = c
        .report_as("b", "b", true, vec![lying(&confirm)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::NotKept], "drawn to confirm c's result");
    assert_eq!(c.run(&run).unwrap().jobs_confirmed, 1, "d's count alone");
}

/// A lease drawn for one dispute of a job seconds no side of a later dispute of it. "d1", drawn for a's
/// and h's dispute of a job, lets its lease lapse; a is caught on another job, and its side goes (the
/// job back to h's result alone); "a2" disputes h's result with a lie; d1's late result, agreeing
/// with a2, is not kept. Before, its lease, drawn for the first dispute, seconded the lie of the second:
/// h framed and the lie counted, by two colluders and no draw for the second dispute (known since
/// 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_lease_drawn_for_one_dispute_seconds_no_side_of_a_later_one() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 2).await;
    assert_eq!(first.len(), 2);
    let outcomes = c
        .report_as("a", "a", true, first.iter().map(lying).collect())
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Pending, Outcome::Pending]);
    let (key, other) = (&first[0].key, &first[1].key);
    for k in [key, other] {
        let check = take(&c, "h", k).await;
        let outcomes = c
            .report_as("h", "h", true, vec![report(&check)])
            .await
            .unwrap();
        assert_eq!(outcomes, [Outcome::Disputed]);
    }
    for name in ["d1", "d"] {
        c.state().spot.passed(name);
    }
    let kept = take(&c, "d1", key).await;
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    // d decides the other job: a is caught, and its side of the first goes.
    let decide = take(&c, "d", other).await;
    let outcomes = c
        .report_as("d", "d", true, vec![report(&decide)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Accepted]);
    assert!(c.state().quarantined.contains_key("a"));
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 0, "h's result alone");
    let second = take(&c, "a2", key).await;
    let outcomes = c
        .report_as("a2", "a2", true, vec![lying(&second)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::Disputed]);
    let outcomes = c
        .report_as("d1", "d1", true, vec![lying(&kept)])
        .await
        .unwrap();
    assert_eq!(outcomes, [Outcome::NotKept], "drawn for the first dispute");
    assert!(!c.state().quarantined.contains_key("h"));
    assert_eq!(c.run(&run).unwrap().jobs_disputed, 1);
}

/// A verified run of N = 13 (hundreds of jobs), 40 identities "h0".."h39" serving (each holding one
/// job), and "a"'s lies on 64 jobs, each a first result waiting for a second: the run and a's leases.
async fn lies_among_forty(c: &Coordinator) -> (String, Vec<Granted>) {
    among_forty(c, lying).await
}

/// A verified run of N = 13 (hundreds of jobs), 40 identities "h0".."h39" serving (each holding one
/// job), and "a"'s first results of 64 jobs, waiting for a second: the run and a's leases.
async fn first_results_among_forty(c: &Coordinator) -> (String, Vec<Granted>) {
    among_forty(c, report).await
}

/// [`first_results_among_forty`], a's reports made by `sent`.
async fn among_forty(c: &Coordinator, sent: fn(&Granted) -> Report) -> (String, Vec<Granted>) {
    let run = c
        .create_run(13, Strategy::D4, Some(2), Some(1.0), 0, false)
        .await
        .unwrap()
        .id();
    for i in 0..40 {
        assert_eq!(lease_credential(c, &format!("h{i}"), 1).await.len(), 1);
    }
    let mine = lease_credential(c, "a", 64).await;
    assert_eq!(mine.len(), 64);
    let outcomes = c
        .report_as("a", "a", true, mine.iter().map(sent).collect())
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| *o == Outcome::Pending));
    (run, mine)
}

/// How many of `granted` are leases of the jobs of `of`.
fn of_jobs(granted: &[Granted], of: &[Granted]) -> usize {
    granted
        .iter()
        .filter(|g| of.iter().any(|m| m.key == g.key))
        .count()
}

/// How many of the jobs of `mine` the 40 identities of [`first_results_among_forty`] are leased
/// when each asks for all it may hold.
async fn checked_by_the_forty(c: &Coordinator, mine: &[Granted]) -> usize {
    let mut checked = 0;
    for i in 0..40 {
        let more = lease_credential(c, &format!("h{i}"), 4096).await;
        checked += of_jobs(&more, mine);
    }
    checked
}

/// A lease call of an identity the draw does not admit reads the records of the jobs held from it
/// once: its later calls pass them by unread, and it is not idle while they wait. Before, every call
/// read them all again: a run verifying every job among 1,000 identities spent two fifths of the
/// coordinator's time there (measured, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_call_reads_the_jobs_held_from_it_once() {
    use super::lease::READS;
    let c = coordinator();
    let (run, mine) = first_results_among_forty(&c).await;
    // b takes the rest of the list and the jobs the draw admits it to: the others are held from it.
    let got = of_jobs(&lease(&c, "b", 4096).await, &mine);
    assert!(got < 24, "{got} of 64");
    READS.set(0);
    let again = c.lease(&ask("b", 4096), Duration::ZERO).await.unwrap();
    assert!(again.leases.is_empty() && !again.idle, "{again:?}");
    assert_eq!(READS.get(), 0, "the held jobs were read again");
    // The honest identities the draw admits still get them, read once more.
    let checked = checked_by_the_forty(&c, &mine).await;
    assert!(checked + got > 32, "{checked} checked by the others");
    assert!(!total(&c, &run).1);
}

/// A job whose lease a copy ends goes back in line. One credential leased the jobs, let the leases
/// run out, leased them again, and reported under the first leases (each a first result, waiting
/// for a second); other calls passed the jobs by, leased; then it sent the same results under the
/// second leases: copies, which ended them. Before, nothing put the jobs back: open, in no queue and
/// never leased again, the run could not end before a restart (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_job_whose_lease_a_copy_ended_is_leased_again() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 4096).await;
    assert!(!first.is_empty());
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let second = lease_credential(&c, "a", 4096).await;
    assert_eq!(second.len(), first.len(), "its own again");
    let outcomes = c
        .report_as("a", "a", true, first.iter().map(report).collect())
        .await
        .unwrap();
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Pending),
        "{outcomes:?}"
    );
    // Another identity's call passes them by: leased.
    assert!(lease_credential(&c, "x", 4096).await.is_empty());
    let copies = c
        .report_as("a", "a", true, second.iter().map(report).collect())
        .await
        .unwrap();
    assert!(
        copies.iter().all(|o| *o == Outcome::Duplicate),
        "{copies:?}"
    );
    // Every job can be leased for its second result, and the run ends.
    finished_by_three(&c, &run).await;
}

/// A lease ended on a path that does not put its job back (none does now; any future one): the
/// lease sweep finds the job out of every queue with no lease holding it and puts it back, both a
/// job its lease took out of the queues and one a call passed by while leased. Before, such a job
/// sat open in no queue until a restart, and the run never ended.
#[tokio::test(start_paused = true)]
async fn a_job_whose_lease_ended_without_putting_it_back_is_leased_again() {
    let c = coordinator_admitting_all();
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 4096).await;
    assert!(!first.is_empty());
    // Half are passed by while leased: their first results wait for a second, and other calls drop
    // them from the retry queue.
    let (passed, taken) = first.split_at(first.len() / 2);
    reported_for_a_check(&c, "a", passed).await;
    let again = lease_credential(&c, "b", 4096).await;
    assert_eq!(again.len(), passed.len());
    assert!(
        lease_credential(&c, "x", 4096).await.is_empty(),
        "all leased"
    );
    // Every lease ends on no path that puts its job back.
    {
        let mut state = c.state();
        for g in taken.iter().chain(&again) {
            assert!(state.leases.close(g.id).is_some());
        }
    }
    assert!(
        lease_credential(&c, "x", 4096).await.is_empty(),
        "in no queue"
    );
    tokio::time::advance(TIMEOUT).await;
    c.expire_leases().await;
    let back = lease_credential(&c, "x", 4096).await;
    assert_eq!(back.len(), first.len(), "every one in line again");
    assert_eq!(c.shared.metrics.jobs_returned.get(), first.len() as u64);
    c.report_as("x", "x", true, back.iter().map(report).collect())
        .await
        .unwrap();
    finished_by_three(&c, &run).await;
}

/// A job put back by a copy that ended its lease is news to a waiting call: it is woken and leased
/// the job, not left to wait out its 10 s. (In real time: the commit thread is a thread of its own,
/// and paused time would run to the call's end while a report commits.)
#[tokio::test]
async fn a_job_a_copy_puts_back_wakes_a_waiting_call() {
    let timeout = Duration::from_millis(200);
    let config = Config {
        lease_timeout: timeout,
        ..Config::default()
    };
    let c = Coordinator::open(Store::temporary().unwrap(), config).unwrap();
    verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 4096).await;
    tokio::time::sleep(timeout * 2).await;
    c.expire_leases().await;
    let second = lease_credential(&c, "a", 4096).await;
    c.report_as("a", "a", true, first.iter().map(report).collect())
        .await
        .unwrap();
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move {
            c.lease(
                &Ask {
                    capacity: 1,
                    ..as_credential("x")
                },
                Duration::from_secs(10),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "every job leased");
    // (One lease kept: the run's last lease ending is news of its own.)
    let copies = second[1..].iter().map(report).collect();
    c.report_as("a", "a", true, copies).await.unwrap();
    let grant = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(grant.leases.len(), 1, "{grant:?}");
}

/// An accepted result whose job a later commit took back (applied first) ends its lease, and the
/// job goes back in line: a call that met it while leased dropped it.
#[tokio::test]
async fn a_job_taken_back_before_its_lease_delivered_goes_back_in_line() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let id = c.run(&run).unwrap().meta.id;
    let held = lease(&c, "a", 4096).await;
    let job = &held[0];
    // A later commit took the job's count back, applied before this one's: the job is put back.
    c.state().runs.get_mut(&id).unwrap().moved_by(
        &job.key,
        Some(crate::durable::store::JobState::Done),
        None,
        u64::MAX,
    );
    // Another call meets it, leased, and drops it.
    assert!(lease(&c, "b", 4096).await.is_empty());
    assert_eq!(c.state().runs[&id].retry_len(), 0);
    let outcomes = c.report("a", "a", vec![report(job)]).await.unwrap();
    assert_eq!(outcomes, [Outcome::Accepted]);
    assert!(!c.state().leases.is_leased(id, &job.key));
    assert_eq!(c.state().runs[&id].retry_len(), 1, "back in line");
}

/// Three fresh credentials, "x", "y" and "z", lease and report honestly, round after round, until
/// the run of N = 8 ends with its published total.
async fn finished_by_three(c: &Coordinator, run: &str) {
    for _ in 0..20 {
        for name in ["x", "y", "z"] {
            let got = lease_credential(c, name, 4096).await;
            c.report_as(name, name, true, got.iter().map(report).collect())
                .await
                .unwrap();
        }
    }
    assert_eq!(total(c, run), (Q8, true));
}

/// A job whose lease a result not kept ended goes back in line. One credential's late first results
/// (under leases it let run out) came while an honest identity held the jobs; other calls passed the
/// jobs by, leased; the honest results, under leases issued before the first, confirmed nothing
/// (not kept) and ended those leases. Before, the jobs stayed open in no queue (found by a review,
/// 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_job_whose_lease_a_result_not_kept_ended_is_leased_again() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 4096).await;
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let honest = lease_credential(&c, "h", 4096).await;
    assert_eq!(honest.len(), first.len());
    let outcomes = c
        .report_as("a", "a", true, first.iter().map(report).collect())
        .await
        .unwrap();
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Pending),
        "{outcomes:?}"
    );
    assert!(lease_credential(&c, "x", 4096).await.is_empty(), "leased");
    let not_kept = c
        .report_as("h", "h", true, honest.iter().map(report).collect())
        .await
        .unwrap();
    assert!(
        not_kept.iter().all(|o| *o == Outcome::NotKept),
        "{not_kept:?}"
    );
    finished_by_three(&c, &run).await;
}

/// A tag kept from a lease handed back, its job since confirmed by two others and forgotten by the
/// lease table, proves no lease: a different result under it is refused from a worker credential and
/// only compared from the operator's workers. It takes nothing back and quarantines nobody. (Until
/// 2026-12-01 the table's forgetting made it pass as issued, and it quarantined its sender: but a
/// refusal that hangs on the job's state tells a credential which of its results a check holds.)
#[tokio::test(start_paused = true)]
async fn a_handed_back_tag_against_a_confirmed_count_proves_nothing() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let kept = handed_back_by_a_hoarder(&c).await;
    for name in ["a", "b"] {
        let got = lease(&c, name, 4096).await;
        report_all(&c, name, &got).await;
    }
    assert_eq!(total(&c, &run), (Q8, true));
    let lies = || kept.iter().map(lying).collect::<Vec<Report>>();
    let refused = c.report_as("hoarder", "hoarder", true, lies()).await;
    assert!(
        matches!(refused, Err(Error::NotLeased { .. })),
        "{refused:?}"
    );
    let outcomes = c.report("hoarder", "hoarder", lies()).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Mismatch { .. })),
        "{outcomes:?}"
    );
    assert_eq!(total(&c, &run), (Q8, true));
    assert!(c.state().quarantined.is_empty(), "nobody quarantined");
}

/// A loop of leases handed back is bounded: each hand-back is written to the store, so a worker
/// credential hands back at most twice as many leases as it may hold within one lease timeout (a
/// worker may stop, start and stop again). Beyond that a hand-back is refused: the lease stays its
/// own, and the credential can lease no more. A new window starts afresh. The operator's workers
/// are not counted.
#[tokio::test(start_paused = true)]
async fn a_credential_hands_back_at_most_twice_what_it_may_hold_within_a_timeout() {
    use super::lease::NEW_IDENTITY_LEASES;
    let c = coordinator();
    run_of_13(&c).await;
    let take = |credential: bool| {
        let c = c.clone();
        async move {
            let name = if credential {
                "churner"
            } else {
                "operator-worker"
            };
            let ask = Ask {
                capacity: 4096,
                credential,
                ..as_credential(name)
            };
            let got = c.lease(&ask, Duration::ZERO).await.unwrap().leases;
            got.iter().map(|g| g.id).collect::<Vec<u64>>()
        }
    };
    let back = |ids: Vec<u64>| u64::from(c.release_as("churner", &ids, false, true).unwrap());
    let allowance = 2 * NEW_IDENTITY_LEASES;
    // 156 back, 100 kept; then 156 more leased, and all 256 held back: 412 of 512.
    let first = take(true).await;
    assert_eq!(first.len() as u64, NEW_IDENTITY_LEASES);
    assert_eq!(back(first[..156].to_vec()), 156);
    let mut held = first[156..].to_vec();
    held.extend(take(true).await);
    assert_eq!(held.len() as u64, NEW_IDENTITY_LEASES);
    assert_eq!(back(held), NEW_IDENTITY_LEASES);
    // 256 more leased: only the 100 left of the allowance go back; 156 stay its own.
    let third = take(true).await;
    assert_eq!(third.len() as u64, NEW_IDENTITY_LEASES);
    assert_eq!(
        back(third.clone()),
        allowance - 412,
        "the rest of the allowance"
    );
    assert_eq!(back(third.clone()), 0, "refused: kept");
    let kept: Vec<u64> = third[100..].to_vec();
    assert_eq!(take(true).await.len(), 100, "it holds the 156 refused");
    // Per identity: another credential hands back freely meanwhile.
    let other = lease_credential(&c, "other", 4096).await;
    assert_eq!(other.len() as u64, NEW_IDENTITY_LEASES);
    let ids: Vec<u64> = other.iter().map(|g| g.id).collect();
    assert_eq!(
        c.release_as("other", &ids, false, true).unwrap(),
        NEW_IDENTITY_LEASES as u32
    );
    // A new window: the refused leases go back.
    tokio::time::advance(TIMEOUT / 2).await;
    c.heartbeat("churner", &kept).unwrap();
    tokio::time::advance(TIMEOUT / 2).await;
    assert_eq!(back(kept), 156, "a new window");
    // The operator's workers (no credential) are not counted.
    for _ in 0..4 {
        let ids = take(false).await;
        assert!(!ids.is_empty());
        let back = c.release_as("operator-worker", &ids, false, false).unwrap();
        assert_eq!(back as usize, ids.len());
    }
}

/// A coordinator over a store with two record runs of N = 8, `kept` and `disputed`: "h" and "p"
/// counted job 3 of `kept` (and "q" and "r" job 4), "a" and "b" a lie on job 1 of `disputed`, which
/// "h" contradicted under a live lease: "h" is held by that dispute. Returns the coordinator and the
/// two runs' ids.
async fn a_held_checker(dir: &std::path::Path, config: Config) -> (Coordinator, String, String) {
    use crate::durable::store::tests::{a_check_across, another_record_run, counted_by_two};
    let (kept, disputed) = {
        let store = Store::open(dir).unwrap();
        let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
        let kept = another_record_run(&store, plan).id;
        let disputed = another_record_run(&store, plan).id;
        let (_, _, check) = a_check_across(
            &store,
            &plan,
            [kept, disputed],
            ["h", "p", "a", "b"],
            [3, 1],
        );
        assert!(check.quarantined[0].held);
        let job = crate::durable::store::tests::incoming_from(kept, &plan, 4, "q");
        counted_by_two(&store, &plan, &job, ["q", "r"], 0);
        store.flush().unwrap();
        crate::durable::ledger::rewrite(&dir.join(crate::durable::ledger::LEDGER_FILE), &store)
            .unwrap();
        (kept.to_string(), disputed.to_string())
    };
    let c = reopened_with(dir, config).await;
    assert_eq!(c.run(&kept).unwrap().tally.jobs, 2);
    assert!(c.state().quarantined["h"].contains("held"));
    (c, kept, disputed)
}

/// A held checker whose one batch contradicted the lies of two colluding pairs, the first dispute
/// decided for it: across a restart it stays held, its record counts standing, and the second lie's
/// dispute is leased and decided through the service, which releases it. Before, the second lie stood
/// and the restart made the checker whole (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_checker_of_two_pairs_lies_is_released_once_both_are_decided() {
    use crate::durable::store::tests::{by, counted_by_two, decided_by_two, incoming_from};
    let dir = tempfile::tempdir().unwrap();
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    let (run, j2) = {
        let store = Store::open(dir.path()).unwrap();
        let run = crate::durable::store::tests::another_record_run(&store, plan).id;
        let job = |i: usize| incoming_from(run, &plan, i, "h");
        counted_by_two(&store, &plan, &job(3), ["h", "p"], 0);
        counted_by_two(&store, &plan, &job(4), ["q", "r"], 0);
        counted_by_two(&store, &plan, &job(1), ["a", "b"], 8);
        counted_by_two(&store, &plan, &job(2), ["x", "y"], 8);
        let check = store
            .commit(&[by(&plan, "h", job(1), 0), by(&plan, "h", job(2), 0)])
            .unwrap();
        assert_eq!(check.disputed.len(), 1);
        let decided = decided_by_two(&store, &plan, &job(1));
        assert_eq!(decided.disputed.len(), 1, "the second lie disputed");
        store.flush().unwrap();
        crate::durable::ledger::rewrite(
            &dir.path().join(crate::durable::ledger::LEDGER_FILE),
            &store,
        )
        .unwrap();
        (run.to_string(), job(2).key)
    };
    let c = reopened(dir.path()).await;
    assert!(c.state().quarantined["h"].contains("held"), "still held");
    assert_eq!(c.run(&run).unwrap().tally.jobs, 3, "h's count stands");
    for (name, want) in [("p", Outcome::Disputed), ("q", Outcome::Accepted)] {
        let got = lease_credential(&c, name, 4096).await;
        let mine: Vec<&Granted> = got.iter().filter(|g| g.key == j2).collect();
        assert_eq!(mine.len(), 1, "{name}");
        let outcomes = c
            .report_as(name, name, true, vec![report(mine[0])])
            .await
            .unwrap();
        assert_eq!(outcomes, [want], "{name}");
        let ids: Vec<u64> = got.iter().filter(|g| g.key != j2).map(|g| g.id).collect();
        c.release(name, &ids, false).unwrap();
    }
    assert!(!c.state().quarantined.contains_key("h"), "released");
    assert!(c.state().quarantined.contains_key("x"));
    assert_eq!(c.run(&run).unwrap().tally.jobs, 4);
}

/// A store rebuilt from the ledger alone while a checker was held, its first dispute open and a
/// second pair's lie kept: the ledger holds neither, so the start makes the checker whole and takes
/// back, with its record counts, each listed count only identities it contradicted stand behind. Before,
/// the quarantine was restored whole with nothing else, and the second pair's lie was counted in a
/// run that could end done with it (the last stop's known limit).
#[tokio::test]
async fn a_store_rebuilt_from_the_ledger_takes_back_what_a_held_checker_contradicted() {
    let dir = tempfile::tempdir().unwrap();
    let (_, run, _, _) = two_lies_logged(dir.path());
    let rebuilt = ledger_alone(dir.path());
    let c = reopened(rebuilt.path()).await;
    q_and_r_alone_h_whole(&c, run);
    assert!(c.shared.store.unrevoked_quarantines().unwrap().is_empty());
    // The ledger holds it whole now: a store rebuilt from it again takes nothing more back.
    let path = rebuilt.path().join(crate::durable::ledger::LEDGER_FILE);
    let view = crate::durable::ledger::LedgerView::read(&path).unwrap();
    assert!(!view.quarantines["h"].held);
}

/// A waiting checker whose kept count's dispute failed before a stop (here in the store, directly):
/// the start's take-up passes it over, nothing holds the checker any more (z, an identity it
/// contradicted, stands), and the same start ends its hold: whole, its record count taken back.
/// Before, it stayed held with no dispute for the whole session (found by a review, 2026-12-01).
#[tokio::test]
async fn a_start_whose_take_up_leaves_a_checker_nothing_to_hold_it_ends_its_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (run, mine) = {
        let store = Store::open(dir.path()).unwrap();
        let fixture = crate::durable::store::tests::a_checker_waiting_on_z_in(&store);
        let (run, mine, j2) = fixture;
        store.fail_job(run, &j2.key, "test").unwrap();
        store.flush().unwrap();
        crate::durable::ledger::rewrite(
            &dir.path().join(crate::durable::ledger::LEDGER_FILE),
            &store,
        )
        .unwrap();
        (run, mine)
    };
    let c = reopened(dir.path()).await;
    assert!(!c.state().quarantined["h"].contains("held"));
    assert!(c.shared.store.result(run, &mine.key).unwrap().is_none());
    assert!(c.shared.store.unrevoked_quarantines().unwrap().is_empty());
}

/// A hold that ended in the store (the second pair's lie taken back), its ledger lines lost in a
/// crash: the ledger holds the checker held and the lie counted. The start restores the count from
/// the ledger, holds the checker again, and its revocation takes the lie back once more. Before (a
/// review of the change, 2026-12-01), the ledger's count came back and stood for good: the store's
/// whole record never ended a hold again.
#[tokio::test]
async fn a_hold_ended_in_the_store_alone_takes_back_again_what_the_ledger_restores() {
    let dir = tempfile::tempdir().unwrap();
    let run = {
        let (store, run, j1, j2) = two_lies_logged(dir.path());
        store.fail_job(run, &j1.key, "test").unwrap();
        let revoked = store.revoke("h").unwrap().revoked;
        assert!(revoked.iter().any(|r| r.key == j2.key));
        store.flush().unwrap();
        run
    };
    let c = reopened(dir.path()).await;
    q_and_r_alone_h_whole(&c, run);
}

/// In `dir`, the store of [`crate::durable::store::tests::a_check_of_two_lies_in`] (h held, x and
/// y's lie on job 2 kept), its ledger written from it: the store, the run's id, jobs 1 and 2.
fn two_lies_logged(
    dir: &std::path::Path,
) -> (
    Store,
    u64,
    crate::durable::store::Incoming,
    crate::durable::store::Incoming,
) {
    let store = Store::open(dir).unwrap();
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    let (run, j1, j2) = crate::durable::store::tests::a_check_of_two_lies_in(&store, plan);
    crate::durable::ledger::rewrite(&dir.join(crate::durable::ledger::LEDGER_FILE), &store)
        .unwrap();
    (store, run, j1, j2)
}

/// Run `run` of [`two_lies_logged`] counts q and r's job 4 alone, and h is whole.
fn q_and_r_alone_h_whole(c: &Coordinator, run: u64) {
    let plan = nqueens_common::Plan::new(8, Strategy::D4).unwrap();
    let truth = crate::durable::store::tests::incoming_from(run, &plan, 4, "t")
        .result
        .total;
    let tally = c.run(&run.to_string()).unwrap().tally;
    assert_eq!(tally.jobs, 1, "q and r's count alone");
    assert_eq!(tally.total, u128::from(truth));
    assert!(!c.state().quarantined["h"].contains("held"));
}

/// A cancel of the record run whose dispute holds a worker takes that worker's record counts in other
/// runs back at once, in the live runs as in the store, and shows its quarantine whole. Before, they
/// stood until the next start (`audit` and `export` refused the store meanwhile).
#[tokio::test]
async fn a_cancel_that_ends_a_held_workers_dispute_takes_its_counts_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (c, kept, disputed) = a_held_checker(dir.path(), Config::default()).await;
    c.control(&disputed, Control::Cancel).await.unwrap();
    assert_eq!(
        c.run(&kept).unwrap().tally.jobs,
        1,
        "the count of h and p went"
    );
    assert!(!c.state().quarantined["h"].contains("held"));
    assert!(c.shared.store.unrevoked_quarantines().unwrap().is_empty());
}

/// So does the failure of its disputed job by expired leases (under two identities that may decide
/// it).
#[tokio::test(start_paused = true)]
async fn a_disputed_job_failed_by_expired_leases_takes_a_held_workers_counts_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        lease_timeout: TIMEOUT,
        max_attempts: 2,
        ..Config::default()
    };
    let (c, kept, disputed) = a_held_checker(dir.path(), config).await;
    let lied = nqueens_common::Plan::new(8, Strategy::D4)
        .unwrap()
        .jobs()
        .nth(1)
        .unwrap();
    // A plain run, for a result of each decider counted in this incarnation: only then are its
    // expired leases attempts.
    let plain = run_of_8(&c).await;
    for name in ["p", "q"] {
        let held = lease_credential(&c, name, 4096).await;
        assert!(
            held.iter()
                .any(|g| g.run.to_string() == disputed && g.key == lied),
            "{name}"
        );
        let one = held.iter().find(|g| g.run.to_string() == plain).unwrap();
        let outcomes = c
            .report_as(name, name, true, vec![report(one)])
            .await
            .unwrap();
        assert_eq!(outcomes, [Outcome::Accepted]);
        tokio::time::advance(TIMEOUT * 2).await;
        c.expire_leases().await;
    }
    assert!(c.run(&disputed).unwrap().jobs_failed > 0);
    assert_eq!(
        c.run(&kept).unwrap().tally.jobs,
        1,
        "the count of h and p went"
    );
    assert!(!c.state().quarantined["h"].contains("held"));
    assert!(c.shared.store.unrevoked_quarantines().unwrap().is_empty());
}

/// A credential cannot tell whether a result of its own is held for a check or counted by sending it
/// again under a lease never issued: refused either way. Before, it was refused while the job waited
/// for its check, and compared (answered `ACCEPTED` on the wire) once the job was counted, so a
/// credential could watch for the check of a lie (found by a review, 2026-11-29). A late result under
/// a lease that was issued (its tag holds) is still compared once its job is done.
#[tokio::test(start_paused = true)]
async fn a_credential_cannot_tell_held_from_counted_under_a_made_up_lease() {
    let c = coordinator();
    let run = verified_run_of_8(&c).await;
    let mine = lease_credential(&c, "a", 4096).await;
    reported_for_a_check(&c, "a", &mine).await;
    let made_up = |g: &Granted| Report {
        lease: 999_999,
        tag: 0,
        ..report(g)
    };
    let probe = |c: &Coordinator| {
        let c = c.clone();
        let sent = made_up(&mine[0]);
        async move { c.report_as("a", "a", true, vec![sent]).await }
    };
    let held = probe(&c).await;
    assert!(matches!(held, Err(Error::NotLeased { .. })), "{held:?}");
    // Another identity confirms every job: the run is done.
    let theirs = lease_credential(&c, "b", 4096).await;
    assert_eq!(theirs.len(), mine.len());
    c.report_as("b", "b", true, theirs.iter().map(report).collect())
        .await
        .unwrap();
    assert!(total(&c, &run).1, "done");
    let counted = probe(&c).await;
    assert!(
        matches!(counted, Err(Error::NotLeased { .. })),
        "{counted:?}: the answer tells counted from held"
    );
    // Under its own lease (issued, its tag holds), the same result is compared.
    assert_eq!(
        c.report_as("a", "a", true, vec![report(&mine[0])])
            .await
            .unwrap(),
        vec![Outcome::Duplicate]
    );
}

/// The same probe under a lease the credential handed back, its job since leased to it again and
/// reported: refused whether the job waits for its check or is counted, in this incarnation and
/// after a restart, whatever the result and whatever follows it in its batch. Before, it was refused
/// while the job waited and compared (answered `ACCEPTED`) once counted, since the lease table
/// forgets a hand-back once its job is counted and an earlier incarnation's hand-back was only
/// compared (found by a review, 2026-11-30). A first fix compared a different result against a
/// count it stood behind (to quarantine it): then a batch of that result and a made-up lease was
/// refused at its first result while the job waited and at its second once counted (found by the
/// next review).
#[tokio::test(start_paused = true)]
async fn a_credential_cannot_tell_held_from_counted_under_a_lease_it_handed_back() {
    let dir = tempfile::tempdir().unwrap();
    let c = reopened(dir.path()).await;
    let run = verified_run_of_8(&c).await;
    let first = lease_credential(&c, "a", 4096).await;
    let ids: Vec<u64> = first.iter().map(|g| g.id).collect();
    assert_eq!(
        c.release_as("a", &ids, false, true).unwrap() as usize,
        ids.len()
    );
    let mut mine: Vec<Granted> = Vec::new();
    loop {
        let got = lease_credential(&c, "a", 4096).await;
        if got.is_empty() {
            break;
        }
        mine.extend(got);
    }
    assert_eq!(mine.len(), first.len(), "every job leased to it again");
    reported_for_a_check(&c, "a", &mine).await;
    // Its own result again, a different one, and a different one followed by a result under a
    // made-up lease: each answer, as the wire words it.
    let made_up = Report {
        lease: 999_999,
        tag: 0,
        ..report(&mine[1])
    };
    let probes = |c: &Coordinator, g: &Granted| {
        let (c, g, made_up) = (c.clone(), g.clone(), made_up.clone());
        async move {
            let mut answers = Vec::new();
            for sent in [
                vec![report(&g)],
                vec![lying(&g)],
                vec![lying(&g), made_up.clone()],
            ] {
                let answer = c.report_as("a", "a", true, sent).await;
                assert!(
                    matches!(answer, Err(Error::NotLeased { lease, .. }) if lease == g.id),
                    "{answer:?}"
                );
                answers.push(format!("{answer:?}"));
            }
            answers
        }
    };
    let held = [probes(&c, &first[0]).await, probes(&c, &first[1]).await];
    // Another identity confirms the first job: counted.
    let theirs = lease_credential(&c, "b", 4096).await;
    assert_eq!(theirs.len(), mine.len());
    let (one, rest): (Vec<Granted>, Vec<Granted>) =
        theirs.into_iter().partition(|g| g.key == first[0].key);
    c.report_as("b", "b", true, one.iter().map(report).collect())
        .await
        .unwrap();
    assert_eq!(c.run(&run).unwrap().tally.jobs, 1, "counted");
    assert_eq!(
        probes(&c, &first[0]).await,
        held[0],
        "the answers tell counted from held"
    );
    // After a restart: held, then counted under the earlier incarnation's leases.
    drop(c);
    let c = reopened(dir.path()).await;
    assert_eq!(probes(&c, &first[1]).await, held[1], "held after a restart");
    // (b's leases of the earlier incarnation confirm nothing: it leases the jobs anew.)
    let outcomes = c
        .report_as("b", "b", true, rest.iter().map(report).collect())
        .await
        .unwrap();
    assert!(
        outcomes.iter().all(|o| *o == Outcome::NotKept),
        "{outcomes:?}"
    );
    loop {
        let again = lease_credential(&c, "b", 4096).await;
        if again.is_empty() {
            break;
        }
        c.report_as("b", "b", true, again.iter().map(report).collect())
            .await
            .unwrap();
    }
    assert!(total(&c, &run).1, "done");
    assert_eq!(
        probes(&c, &first[1]).await,
        held[1],
        "after a restart, the answers tell counted from held"
    );
    // Nothing changed: the count stands, nobody quarantined.
    assert_eq!(total(&c, &run), (Q8, true));
    assert!(c.state().quarantined.is_empty());
}

/// The room a credential gets after a report does not tell a result held for a check from one counted:
/// both grow its lease limit. Before, only a counted result did (4 leases more): a credential holding
/// its limit reported one result and leased again in the same call, and got 5 jobs where it was
/// counted, 1 where it was held (found by a review, 2026-11-30).
#[tokio::test(start_paused = true)]
async fn the_room_after_a_report_does_not_tell_held_from_counted() {
    let mut regranted = Vec::new();
    for fraction in [0.0, 1.0] {
        let c = coordinator();
        c.create_run(13, Strategy::D4, Some(2), Some(fraction), 0, false)
            .await
            .unwrap();
        let mine = lease_credential(&c, "a", 4096).await;
        assert_eq!(mine.len() as u64, super::lease::lease_limit(0));
        let outcomes = c
            .report_as("a", "a", true, vec![report(&mine[0])])
            .await
            .unwrap();
        let expected = if fraction == 0.0 {
            Outcome::Accepted
        } else {
            Outcome::Pending
        };
        assert_eq!(outcomes, vec![expected]);
        regranted.push(lease_credential(&c, "a", 4096).await.len());
    }
    assert_eq!(
        regranted[0], regranted[1],
        "room after a counted result, after a held one"
    );
}

/// A task's panic is resumed where its handle is awaited (a report's validation, a commit run to the
/// end), never turned into an error that hides it; a task cancelled (the runtime shutting down) is
/// `ShuttingDown`.
#[tokio::test]
async fn a_tasks_panic_is_resumed_and_a_cancelled_task_is_shutting_down() {
    let panicked = tokio::task::spawn_blocking(|| -> u32 { panic!("in validation") }).await;
    let resumed =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| super::joined(panicked)));
    let payload = resumed.expect_err("the panic is resumed");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"in validation"));
    let waiting = tokio::spawn(std::future::pending::<u32>());
    waiting.abort();
    assert!(matches!(
        super::joined(waiting.await),
        Err(Error::ShuttingDown)
    ));
    assert_eq!(super::joined(tokio::spawn(async { 7 }).await).unwrap(), 7);
}

/// A result that only counts its job is news to status watchers, not to waiting lease calls: at the
/// tail of a run thousands of calls wait, and each looked at the queues again at every count
/// (measured with `loadgen --waiters`: 1,000 waiting calls halved what the coordinator committed).
/// The run's last count (it finishes) wakes them, and so does a verified job's first result, whose
/// job waits in the queue for a second. (Real time: a paused clock would run out the wait while a
/// commit is written.)
#[tokio::test]
async fn a_result_that_only_counts_its_job_wakes_no_waiting_call() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let id = c.run(&run).unwrap().meta.id;
    let held = lease(&c, "a", 4096).await;
    assert!(held.len() > 4, "{}", held.len());
    let looks = |c: &Coordinator| c.state().runs[&id].looks();
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move { c.lease(&ask("b", 1), Duration::from_secs(10)).await })
    };
    // a's look, then the waiting call's.
    for _ in 0..200 {
        if looks(&c) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (news, progress) = (c.subscribe_lease_news(), c.subscribe());
    let (n0, p0, l0) = (*news.borrow(), *progress.borrow(), looks(&c));
    assert_eq!(l0, 2, "a's look, then the waiting call's");
    // Three counts, each past the gap between two looks of a waiting call, then all but the last.
    let last = held.len() - 1;
    for g in held[..3].chunks(1).chain([&held[3..last]]) {
        report_all(&c, "a", g).await;
        tokio::time::sleep(super::lease::MIN_LOOK_GAP + Duration::from_millis(20)).await;
    }
    assert_eq!(news.borrow().wrapping_sub(n0), 0, "only counted");
    assert_eq!(
        progress.borrow().wrapping_sub(p0),
        4,
        "each count is progress"
    );
    assert_eq!(looks(&c), l0, "the waiting call did not look again");
    assert!(!waiting.is_finished());
    // The last count finishes the run: the waiting call is told at once.
    report_all(&c, "a", &held[last..]).await;
    assert_eq!(news.borrow().wrapping_sub(n0), 1, "finished");
    let grant = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert!(grant.leases.is_empty() && grant.idle, "{grant:?}");
    // A verified job's first result puts it back for a second: news.
    verified_run_of_8(&c).await;
    let first = lease(&c, "a", 1).await;
    let n1 = *news.borrow();
    assert_eq!(report_all(&c, "a", &first).await, vec![Outcome::Pending]);
    assert_eq!(news.borrow().wrapping_sub(n1), 1, "waits for a second");
}

/// A count that leaves a run stalled (its other jobs failed) is news to a waiting call: the run leases
/// nothing more, and the call is told idle at once. (Found by a review of the rule that a result that
/// only counts its job wakes no waiting call, 2026-12-01: it waited out its 10 s.)
#[tokio::test]
async fn a_count_that_stalls_a_run_wakes_a_waiting_call() {
    let c = coordinator();
    let run = run_of_8(&c).await;
    let id = c.run(&run).unwrap().meta.id;
    let held = lease(&c, "a", 4096).await;
    // One job failed meanwhile (its leases expired under workers enough), as the store and the live
    // run record it.
    let failed = &held[0];
    c.shared.store.fail_job(id, &failed.key, "test").unwrap();
    c.state().runs.get_mut(&id).unwrap().moved_by(
        &failed.key,
        None,
        Some(crate::durable::store::JobState::Failed),
        u64::MAX,
    );
    report_all(&c, "a", &held[1..held.len() - 1]).await;
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move { c.lease(&ask("b", 1), Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    report_all(&c, "a", &held[held.len() - 1..]).await;
    assert_eq!(
        c.run(&run).unwrap().phase,
        crate::durable::store::Phase::Stalled
    );
    let grant = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert!(grant.leases.is_empty() && grant.idle, "{grant:?}");
}

/// A partner's copy of a lie under a lease issued before the job held its first result confirms
/// nothing: not one that expired meanwhile, nor, after a restart, one of the earlier incarnation.
/// Before, either counted the lie without the draw of confirmers: b leased the jobs and let its
/// leases lapse, a leased them and reported a lie, and b's copy under its old lease was accepted
/// (found by a review, 2026-12-01). The job waits for an identity the draw admits, and an honest
/// one disputes the lie.
#[tokio::test(start_paused = true)]
async fn a_copy_of_a_lie_under_a_lease_from_before_the_first_result_confirms_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config {
        lease_timeout: TIMEOUT,
        ..Config::default()
    };
    let c = reopened_with(dir.path(), config()).await;
    let run = verified_run_of_8(&c).await;
    let of_b = lease_credential(&c, "b", 4096).await;
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    let of_a = lease_credential(&c, "a", 4096).await;
    assert_eq!(of_a.len(), of_b.len());
    let old = |g: &Granted| of_b.iter().find(|b| b.key == g.key).unwrap().clone();
    let lies = c
        .report_as("a", "a", true, of_a[..2].iter().map(lying).collect())
        .await
        .unwrap();
    assert_eq!(lies, vec![Outcome::Pending; 2]);
    let copy = c
        .report_as("b", "b", true, vec![lying(&old(&of_a[0]))])
        .await
        .unwrap();
    assert_eq!(copy, vec![Outcome::NotKept], "under an expired lease");
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
    // After a restart, under a lease of the earlier incarnation.
    drop(c);
    let c = reopened_with(dir.path(), config()).await;
    let copy = c
        .report_as("b", "b", true, vec![lying(&old(&of_a[1]))])
        .await
        .unwrap();
    assert_eq!(
        copy,
        vec![Outcome::NotKept],
        "under an earlier incarnation's lease"
    );
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
    // An honest identity leased the job now disputes the lie.
    let honest = lease_credential(&c, "h", 4096).await;
    let of_h = honest.iter().find(|g| g.key == of_a[0].key).unwrap();
    let outcomes = c
        .report_as("h", "h", true, vec![report(of_h)])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![Outcome::Disputed]);
}

/// a leases `job` anew and reports a lie, the job's first result; b's copy under its lease `old`,
/// of before the job went back to pending, confirms nothing.
async fn a_lie_copied_under_an_old_lease_confirms_nothing(
    c: &Coordinator,
    job: &Granted,
    old: &Granted,
) {
    let of_a = lease_credential(c, "a", 4096).await;
    let fresh = of_a
        .iter()
        .find(|g| g.key == job.key)
        .expect("a leased the job");
    let lie = c
        .report_as("a", "a", true, vec![lying(fresh)])
        .await
        .unwrap();
    assert_eq!(lie, vec![Outcome::Pending]);
    let copy = c.report_as("b", "b", true, vec![lying(old)]).await;
    assert!(
        !matches!(copy.as_deref(), Ok([Outcome::Accepted])),
        "{copy:?}"
    );
}

/// A coordinator over `dir` whose leases time out after [`TIMEOUT`], with a run of N = 8 that
/// verifies every job: the coordinator, the run's name and its id.
async fn verified_with_timeout(dir: &std::path::Path) -> (Coordinator, String, u64) {
    let config = Config {
        lease_timeout: TIMEOUT,
        ..Config::default()
    };
    let c = reopened_with(dir, config).await;
    let run = verified_run_of_8(&c).await;
    let id = c.run(&run).unwrap().meta.id;
    (c, run, id)
}

/// A lease issued while its job held a result, then let lapse, confirms nothing once the job's
/// results are gone: the job failed, the operator retried it, and the copy of the liar's new first
/// result came under the old lease. Before, the lease kept its mark across the retry, and two
/// colluders counted a lie without the draw of confirmers (found by a review, 2026-12-01).
#[tokio::test(start_paused = true)]
async fn a_lease_from_before_a_retry_confirms_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (c, run, id) = verified_with_timeout(dir.path()).await;
    let of_h = lease_credential(&c, "h", 4096).await;
    let job = of_h[0].clone();
    let first = c
        .report_as("h", "h", true, vec![report(&job)])
        .await
        .unwrap();
    assert_eq!(first, vec![Outcome::Pending]);
    // b leases it for its second result (the draw admits everyone in a cluster this small), and lets
    // the lease lapse.
    let of_b = lease_credential(&c, "b", 4096).await;
    let old = of_b
        .iter()
        .find(|g| g.key == job.key)
        .expect("b leased the job")
        .clone();
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    // The job fails (its leases expired under workers enough, say), and the operator retries it.
    c.shared.store.fail_job(id, &job.key, "test").unwrap();
    c.state().runs.get_mut(&id).unwrap().moved_by(
        &job.key,
        Some(crate::durable::store::JobState::Verifying),
        Some(crate::durable::store::JobState::Failed),
        u64::MAX,
    );
    let (retried, _) = c.retry_failed(&run).await.unwrap();
    assert_eq!(retried, 1);
    // a leases it anew: its lie is the job's first result now.
    // b's copy under its lease of before the retry confirms nothing.
    a_lie_copied_under_an_old_lease_confirms_nothing(&c, &job, &old).await;
    assert_eq!(c.run(&run).unwrap().tally.jobs, 0);
    let record = c.shared.store.job(id, &job.key).unwrap().unwrap();
    assert_eq!(record.candidates.len(), 1, "{record:?}");
}

/// So does a lease of a job whose one result was taken back with its worker's quarantine (the job
/// pending again): the copy of a liar's new first result under it counts nothing.
#[tokio::test(start_paused = true)]
async fn a_lease_from_before_a_revocation_confirms_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (c, run, id) = verified_with_timeout(dir.path()).await;
    let of_q = lease_credential(&c, "q", 4096).await;
    let (job, other) = (of_q[0].clone(), of_q[1].clone());
    let firsts = c
        .report_as("q", "q", true, vec![report(&job), report(&other)])
        .await
        .unwrap();
    assert_eq!(firsts, vec![Outcome::Pending; 2]);
    // b leases both for their second results, and lets the leases lapse.
    let of_b = lease_credential(&c, "b", 4096).await;
    let old = of_b
        .iter()
        .find(|g| g.key == job.key)
        .expect("b leased the job")
        .clone();
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    // h confirms q's other result; then q contradicts it: q is quarantined, and its one result of
    // the job is taken back (pending again).
    let of_h = lease_credential(&c, "h", 4096).await;
    let second = of_h.iter().find(|g| g.key == other.key).unwrap();
    let confirmed = c
        .report_as("h", "h", true, vec![report(second)])
        .await
        .unwrap();
    assert_eq!(confirmed, vec![Outcome::Accepted]);
    let own = c
        .report_as("q", "q", true, vec![lying(&other)])
        .await
        .unwrap();
    assert!(matches!(own[..], [Outcome::Mismatch { .. }]), "{own:?}");
    assert_eq!(c.shared.store.job(id, &job.key).unwrap(), None, "pending");
    tokio::time::advance(TIMEOUT * 2).await;
    c.expire_leases().await;
    // a leases it anew: its lie is the job's first result now; b's copy under its old lease
    // confirms nothing.
    a_lie_copied_under_an_old_lease_confirms_nothing(&c, &job, &old).await;
    assert_eq!(c.run(&run).unwrap().tally.jobs, 1, "the other job alone");
}
