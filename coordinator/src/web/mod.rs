//! The coordinator's HTTP listener (`serve --metrics-listen`): Prometheus metrics at `/metrics`, the
//! self-contained status page at `/`, and the JSON it reads at `/api/status`. Read-only: nothing here
//! changes the store.

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::grpc::{run_status, worker_status};
use crate::history::{unix_seconds, Point};
use crate::status_json::{StatusOutput, WorkerOutput};
use crate::Coordinator;

/// The status page: HTML, CSS and script in one file, no external assets.
const PAGE: &str = include_str!("page.html");

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

/// The routes.
pub fn router(coordinator: Coordinator) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/status", get(status))
        .route("/metrics", get(metrics))
        .with_state(coordinator)
}

async fn page() -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(PAGE)).into_response()
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

async fn status(State(coordinator): State<Coordinator>) -> Response {
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(page_status(&coordinator)),
    )
        .into_response()
}

async fn metrics(State(coordinator): State<Coordinator>) -> Response {
    (
        [(header::CONTENT_TYPE, nqueens_proto::metrics::OPENMETRICS)],
        coordinator.render_metrics(),
    )
        .into_response()
}
