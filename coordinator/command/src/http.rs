//! The small HTTP listener both binaries open with `--metrics-listen`: axum routes served until shutdown,
//! and the response that carries metrics in the OpenMetrics text format.

use std::future::Future;
use std::net::SocketAddr;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;

use nqueens_proto::metrics::OPENMETRICS;

/// A metrics page as an HTTP response.
pub fn metrics_response(text: String) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response()
}

/// Binds `addr` and serves `router` on it in the background until `shutdown` completes; returns the
/// bound address (port 0 picks one).
pub async fn spawn(
    addr: SocketAddr,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "http listening");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, "http listener failed");
        }
    });
    Ok(bound)
}
