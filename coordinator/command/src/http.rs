//! The small HTTP listener both binaries open with `--metrics-listen`: axum routes served by hyper until
//! shutdown (a header timeout, a bound on connections, every connection dropped at shutdown), and the
//! response that carries metrics in the OpenMetrics text format.

use std::future::Future;
use std::net::SocketAddr;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;

use nqueens_proto::metrics::OPENMETRICS;

/// How long a client has to send a request's headers; a connection that takes longer is closed.
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A metrics page as an HTTP response.
pub fn metrics_response(text: String) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response()
}

/// Most connections the listener holds at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 64;

/// Most connections one peer address holds at once (a browser opens six; Prometheus and a probe one
/// each): one client cannot take the listener from the others.
pub const MAX_PER_PEER: usize = 8;

/// Longest a connection is kept, whatever its client does (one that asks and never reads the answer):
/// a scraper keeping its connection alive opens another.
pub const CONNECTION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(60);

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
    tokio::spawn(serve(listener, router, shutdown));
    Ok(bound)
}

/// Accepts connections until `shutdown`, each served by hyper with a [`HEADER_TIMEOUT`] for at most
/// [`CONNECTION_LIFETIME`], at most [`MAX_CONNECTIONS`] at once. At shutdown every connection still open is dropped, and with it its hold
/// on the router's state (the coordinator, and so its store): a stalled client cannot keep a store from
/// being reopened.
async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut connections = tokio::task::JoinSet::new();
    let peers = Peers::default();
    let mut warned: Option<tokio::time::Instant> = None;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok((stream, peer)) => (stream, peer),
                    Err(e) => {
                        // Out of file descriptors, say: a moment before the next try.
                        tracing::warn!(error = %e, "http listener cannot accept a connection");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if connections.len() >= MAX_CONNECTIONS {
                    // At most one line a minute: a flood must not flood the log too.
                    if warned.is_none_or(|at| at.elapsed() > std::time::Duration::from_secs(60)) {
                        tracing::warn!(limit = MAX_CONNECTIONS, "http listener at its connection limit: closing new connections");
                        warned = Some(tokio::time::Instant::now());
                    }
                    continue;
                }
                let Some(place) = peers.take(peer.ip()) else {
                    tracing::debug!(peer = %peer.ip(), limit = MAX_PER_PEER, "http peer at its connection limit: closing its new connection");
                    continue;
                };
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                connections.spawn(async move {
                    let _place = place;
                    let served = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                    match tokio::time::timeout(CONNECTION_LIFETIME, served).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::debug!(error = %e, "http connection ended"),
                        Err(_) => tracing::debug!("http connection closed at the end of its lifetime"),
                    }
                });
            }
        }
    }
    connections.shutdown().await;
}

/// Connections held by each peer address.
#[derive(Clone, Default)]
struct Peers(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>);

/// One connection's place among its peer's, given back when dropped.
struct Place(Peers, std::net::IpAddr);

impl Peers {
    /// A place for one more connection of `ip`, unless it holds [`MAX_PER_PEER`] already.
    fn take(&self, ip: std::net::IpAddr) -> Option<Place> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= MAX_PER_PEER {
            return None;
        }
        *n += 1;
        Some(Place(self.clone(), ip))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A router whose handler holds `held` (as the status page holds the coordinator, and so its store).
    fn holding(held: Arc<()>) -> Router {
        Router::new().route(
            "/",
            axum::routing::get(move || {
                let _held = held.clone();
                async { "ok" }
            }),
        )
    }

    /// A client that sends half a request and then nothing (or simply stays connected) must not keep the
    /// router alive once the listener is told to stop: it held the coordinator, so a store reopen in
    /// place failed ("in use") and `serve` exited. Found by a review, 2026-11-24.
    #[tokio::test]
    async fn a_stalled_client_does_not_outlive_the_shutdown() {
        let held = Arc::new(());
        let stop = tokio_util::sync::CancellationToken::new();
        let addr = spawn(
            "127.0.0.1:0".parse().unwrap(),
            holding(held.clone()),
            stop.clone().cancelled_owned(),
        )
        .await
        .unwrap();
        // One full request, to show the listener serves.
        let mut ok = tokio::net::TcpStream::connect(addr).await.unwrap();
        ok.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        ok.read_to_string(&mut answer).await.unwrap();
        assert!(answer.ends_with("ok"), "{answer}");
        let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
        stalled.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let _idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        stop.cancel();
        let weak = Arc::downgrade(&held);
        drop(held);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while weak.upgrade().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the router is still held by a stalled connection"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// A connection to `addr` from the loopback address 127.0.0.`host`.
    async fn from(host: u8, addr: SocketAddr) -> tokio::net::TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::from(([127, 0, 0, host], 0)))
            .unwrap();
        socket.connect(addr).await.unwrap()
    }

    /// Whether the listener closed `stream` (at once: within two seconds).
    async fn closed(stream: &mut tokio::net::TcpStream) -> bool {
        let mut byte = [0u8; 1];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(2), stream.read(&mut byte)).await;
        matches!(read, Ok(Ok(0)) | Ok(Err(_)))
    }

    /// One peer holds at most [`MAX_PER_PEER`] connections: a client holding that many idle (or a
    /// pod looping on requests) leaves the listener to the others, the kubelet's probe and Prometheus
    /// among them (found by a review, 2026-11-24, a later session: any one peer could hold all 64 and
    /// get the coordinator restarted by its liveness probe). Past the whole limit, connections are
    /// closed at once; a client that opens a connection and sends nothing is closed after the header
    /// timeout: a few sockets cannot pin the listener for ever.
    #[tokio::test]
    async fn a_silent_client_is_closed_after_the_header_timeout() {
        let stop = tokio_util::sync::CancellationToken::new();
        let addr = spawn(
            "127.0.0.1:0".parse().unwrap(),
            holding(Arc::new(())),
            stop.clone().cancelled_owned(),
        )
        .await
        .unwrap();
        let mut held = Vec::new();
        for _ in 0..MAX_PER_PEER {
            held.push(from(1, addr).await);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut extra = from(1, addr).await;
        assert!(closed(&mut extra).await, "one peer past its limit");
        let mut other = from(2, addr).await;
        other
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        other.read_to_string(&mut answer).await.unwrap();
        assert!(answer.ends_with("ok"), "another peer is served: {answer}");
        // The whole limit, over many peers.
        let peers = MAX_CONNECTIONS / MAX_PER_PEER;
        for host in 2..=peers as u8 {
            for _ in 0..MAX_PER_PEER {
                held.push(from(host, addr).await);
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut past = from(peers as u8 + 1, addr).await;
        assert!(
            closed(&mut past).await,
            "a connection past the limit is still open"
        );
        let mut byte = [0u8; 1];
        let mut silent = held.pop().unwrap();
        let closed = tokio::time::timeout(
            HEADER_TIMEOUT + std::time::Duration::from_secs(5),
            silent.read(&mut byte),
        )
        .await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "still open after the header timeout: {closed:?}"
        );
        stop.cancel();
    }
}
