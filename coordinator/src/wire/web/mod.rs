//! The coordinator's HTTP listener (`serve --metrics-listen`): Prometheus metrics at `/metrics`, the
//! self-contained status page at `/` (served with the status of that moment embedded, so that it shows
//! the numbers at once), and the JSON it reads at `/api/status`. Read-only: nothing here changes the
//! store. Each is rendered at most every [`FRESH_FOR`] whatever the number of clients: rendering reads
//! every run, lease and worker under the lock that leases and reports take. A render is shared by
//! every answer that sends it, never copied per request (a status of 65,536 workers is megabytes).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use std::sync::Arc;

use axum::Router;
use serde::Serialize;

use crate::service::history::{unix_seconds, Point};
use crate::wire::grpc::{run_status, worker_status};
use crate::wire::status_json::{StatusOutput, WorkerOutput};
use crate::Coordinator;

/// The status page: HTML, CSS and script in one file, no external assets.
const PAGE: &str = include_str!("page.html");
/// Where the page takes the status it is served with (inside a `<script type="application/json">`).
const STATUS_SLOT: &str = "/*STATUS*/";

/// What `/api/status` answers.
#[derive(Debug, Serialize)]
pub struct PageStatus {
    pub now_unix: f64,
    pub runs: Vec<PageRun>,
    pub workers: Vec<WorkerOutput>,
}

/// A run as the page shows it: its status (as `status --json` prints it) and its history.
#[derive(Debug, Serialize)]
pub struct PageRun {
    #[serde(flatten)]
    pub status: StatusOutput,
    pub history: Vec<Point>,
}

/// How long a rendered status or metrics page is served again before it is rendered anew.
pub const FRESH_FOR: std::time::Duration = std::time::Duration::from_millis(250);

/// A text rendered at most every [`FRESH_FOR`]: the last one, and when it was made.
#[derive(Default)]
struct Fresh(std::sync::Mutex<Option<(tokio::time::Instant, Bytes)>>);

impl Fresh {
    /// The text, rendered by `render` if the last one is older than [`FRESH_FOR`] (callers meanwhile
    /// wait for it, and share it: a clone of it is a reference, not a copy).
    fn get(&self, render: impl FnOnce() -> String) -> Bytes {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, text)) = last.as_ref() {
            if at.elapsed() < FRESH_FOR {
                return text.clone();
            }
        }
        let text = Bytes::from(render());
        *last = Some((tokio::time::Instant::now(), text.clone()));
        text
    }
}

/// The routes' state.
#[derive(Clone)]
struct Web {
    coordinator: Coordinator,
    status: Arc<Fresh>,
    page: Arc<Fresh>,
    metrics: Arc<Fresh>,
}

/// The routes.
pub fn router(coordinator: Coordinator) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/status", get(status))
        .route("/metrics", get(metrics))
        .with_state(Web {
            coordinator,
            status: Arc::default(),
            page: Arc::default(),
            metrics: Arc::default(),
        })
}

/// The status as JSON, `<` escaped (see [`render_page`]).
fn status_json(web: &Web) -> Bytes {
    web.status.get(|| {
        serde_json::to_string(&page_status(&web.coordinator))
            .unwrap_or_else(|_| "null".to_string())
            .replace('<', "\\u003c")
    })
}

async fn page(State(web): State<Web>) -> Response {
    let page = web.page.get(|| {
        let json = status_json(&web);
        // The JSON was made from a String: its bytes are UTF-8.
        PAGE.replacen(STATUS_SLOT, &String::from_utf8_lossy(&json), 1)
    });
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        ],
        page,
    )
        .into_response()
}

/// The status page with `status` embedded as JSON. Every `<` in the JSON is escaped (`\u003c`, the same
/// string to JSON) so that no text in it, a worker's name included, can end the script element.
pub fn render_page(status: &PageStatus) -> String {
    let json = serde_json::to_string(status)
        .unwrap_or_else(|_| "null".to_string())
        .replace('<', "\\u003c");
    PAGE.replacen(STATUS_SLOT, &json, 1)
}

/// The runs and workers now.
pub fn page_status(coordinator: &Coordinator) -> PageStatus {
    let runs = coordinator
        .runs()
        .iter()
        .map(|v| PageRun {
            status: run_status(v).into(),
            history: coordinator.history(v.meta.id),
        })
        .collect();
    let workers = coordinator
        .workers()
        .into_iter()
        .map(|w| worker_status(w).into())
        .collect();
    PageStatus {
        now_unix: unix_seconds(),
        runs,
        workers,
    }
}

async fn status(State(web): State<Web>) -> Response {
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_TYPE, "application/json"),
        ],
        status_json(&web),
    )
        .into_response()
}

async fn metrics(State(web): State<Web>) -> Response {
    let text = web.metrics.get(|| web.coordinator.render_metrics());
    (
        [(header::CONTENT_TYPE, nqueens_proto::metrics::OPENMETRICS)],
        text,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::store::Store;
    use crate::service::Config;
    use nqueens_common::Strategy;
    use tower_service::Service;

    /// The body `app` answers `path` with.
    async fn body_of(app: &Router, path: &str) -> Bytes {
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.clone().call(request).await.unwrap();
        axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .unwrap()
    }

    async fn get(coordinator: &Coordinator, path: &str) -> String {
        let mut app = router(coordinator.clone());
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.call(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .unwrap();
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// The JSON the page was served with.
    fn embedded(page: &str) -> serde_json::Value {
        let start = page
            .find(r#"id="status-data">"#)
            .expect("the status script element")
            + r#"id="status-data">"#.len();
        let len = page[start..].find("</script>").unwrap();
        serde_json::from_str(&page[start..start + len]).unwrap()
    }

    #[tokio::test]
    async fn the_page_is_served_with_the_status_of_that_moment() {
        let coordinator =
            Coordinator::open(Store::temporary().unwrap(), Config::default()).unwrap();
        let view = coordinator
            .create_run(9, Strategy::D4, None, Some(0.0), 0, false)
            .await
            .unwrap();
        let page = get(&coordinator, "/").await;
        assert!(!page.contains(STATUS_SLOT), "the slot is filled");
        assert!(
            !page.contains("loading") && !page.contains(">never<"),
            "{page}"
        );
        let status = embedded(&page);
        let run = &status["runs"][0];
        assert_eq!(run["run"], view.id());
        assert_eq!(run["n"], 9);
        assert_eq!(run["jobs_total"], view.meta.jobs_total);
        assert_eq!(run["jobs_done"], 0);
        assert_eq!(run["state"], "running");
        assert_eq!(run["total"], "0");
        assert!(status["now_unix"].as_f64().unwrap() > 0.0);
        // The chart has labelled axes.
        assert!(page.contains(r#""jobs/s")"#) && page.contains(r#""time (UTC)")"#));
    }

    /// A run whose only jobs left wait for a worker of a second identity says so on the page, with what
    /// to do (issue 40); while a lease is out it does not.
    #[tokio::test]
    async fn the_page_says_when_a_run_waits_for_a_second_identity() {
        use crate::service::{Ask, Report};
        let coordinator =
            Coordinator::open(Store::temporary().unwrap(), Config::default()).unwrap();
        let view = coordinator
            .create_run(8, Strategy::D4, None, Some(1.0), 0, false)
            .await
            .unwrap();
        let ask = Ask {
            worker: "one",
            name: "one",
            label: "one",
            credential: false,
            threads: 1,
            gpus: 0,
            gpu_kernels: &[],
            capacity: 4096,
            only: None,
        };
        let held = coordinator
            .lease(&ask, std::time::Duration::ZERO)
            .await
            .unwrap()
            .leases;
        let status = embedded(&get(&coordinator, "/").await);
        assert!(
            status["runs"][0].get("waiting_for").is_none(),
            "leases are out"
        );
        let reports = held
            .iter()
            .map(|g| {
                let result = nqueens_common::Job::new(g.plan, g.key.clone())
                    .unwrap()
                    .run();
                Report {
                    lease: g.id,
                    run: g.run.to_string(),
                    n: u32::from(g.plan.n()),
                    job: g.key.to_string(),
                    seal: Some(nqueens_common::checksum::seal(
                        g.fingerprint,
                        &g.key,
                        &result,
                    )),
                    result,
                    tag: g.tag,
                    device: None,
                    family: None,
                }
            })
            .collect();
        coordinator.report("one", "one", reports).await.unwrap();
        let page = get(&coordinator, "/").await;
        let run = &embedded(&page)["runs"][0];
        assert_eq!(run["run"], view.id());
        let waiting = run["waiting_for"].as_str().expect("the run waits");
        assert!(waiting.contains("nqueens credential issue"), "{waiting}");
        assert!(page.contains("r.waiting_for"), "the page shows it");
    }

    #[test]
    fn text_in_the_status_cannot_end_the_script_element() {
        let status = PageStatus {
            now_unix: 1.0,
            runs: Vec::new(),
            workers: vec![WorkerOutput {
                name: "</script><script>alert(1)</script>".into(),
                worker_id: "w-1".into(),
                threads: 1,
                accepted: 0,
                seen_seconds_ago: None,
                quarantined: false,
                reason: String::new(),
                jobs_done: 0,
                nodes: 0,
                nodes_per_second: 0.0,
                leases: 0,
                state: "idle".into(),
                gpus: 0,
                gpu_jobs: 0,
                gpu_nodes: 0,
                families: Vec::new(),
                gpu_kernels: Vec::new(),
            }],
        };
        let page = render_page(&status);
        assert!(!page.contains("</script><script>alert"));
        assert_eq!(
            embedded(&page)["workers"][0]["name"],
            "</script><script>alert(1)</script>"
        );
    }

    /// Pages are rendered at most every [`FRESH_FOR`]: clients looping on `/metrics` or `/api/status`
    /// cannot keep the lock that leases and reports take (found by a review, 2026-11-24, a later
    /// session: each request read every run, lease and worker under it).
    #[tokio::test(start_paused = true)]
    async fn pages_are_rendered_at_most_every_quarter_second() {
        let coordinator =
            Coordinator::open(Store::temporary().unwrap(), Config::default()).unwrap();
        let app = router(coordinator.clone());
        let fetch = |path: &'static str| {
            let app = app.clone();
            async move { String::from_utf8(body_of(&app, path).await.to_vec()).unwrap() }
        };
        let before = fetch("/metrics").await;
        let status = fetch("/api/status").await;
        coordinator
            .create_run(9, Strategy::D4, None, Some(0.0), 0, false)
            .await
            .unwrap();
        assert_eq!(fetch("/metrics").await, before, "the same render");
        assert_eq!(fetch("/api/status").await, status);
        tokio::time::advance(FRESH_FOR).await;
        assert_ne!(fetch("/metrics").await, before, "rendered anew");
        let fresh: serde_json::Value = serde_json::from_str(&fetch("/api/status").await).unwrap();
        assert_eq!(fresh["runs"].as_array().unwrap().len(), 1);
    }

    /// Every answer within [`FRESH_FOR`] sends the one render, shared, not a copy of it: before, each
    /// request copied the whole text (megabytes for a table of 65,536 workers), so many slow clients
    /// held as many copies (found by a review, 2026-11-30).
    #[tokio::test(start_paused = true)]
    async fn answers_share_one_render() {
        let coordinator =
            Coordinator::open(Store::temporary().unwrap(), Config::default()).unwrap();
        let app = router(coordinator.clone());
        let body = |path: &'static str| {
            let app = app.clone();
            async move { body_of(&app, path).await }
        };
        for path in ["/", "/api/status", "/metrics"] {
            let (a, b) = (body(path).await, body(path).await);
            assert!(!a.is_empty());
            assert_eq!(a.as_ptr(), b.as_ptr(), "{path}: copied per request");
        }
        let page = body("/").await;
        let page = String::from_utf8(page.to_vec()).unwrap();
        assert!(page.contains("\"runs\":[]"), "the status is embedded");
    }
}
