//! The probe listener that `serve` and `worker` open with `--health-listen`: the standard gRPC health
//! service alone, in plaintext, on a port of its own, so that a client filling the HTTP listener (metrics,
//! status page) or the gRPC port cannot make an orchestrator's probes fail. Kubernetes probes it with
//! `grpc:` probes (which speak no TLS: hence plaintext, and nothing else served there).

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic_health::server::HealthReporter;

/// Most connections one peer address holds at once on the probe port: a kubelet opens one per probe.
pub const MAX_PER_PEER: usize = 4;

/// Most streams one probe connection holds at once (a check, or a watch, at a time is what a prober
/// sends).
pub const MAX_STREAMS: u32 = 16;

/// Binds `addr` and serves `health`'s statuses there in the background until `shutdown` completes,
/// closing every connection then; returns the bound address (port 0 picks one).
pub async fn spawn(
    addr: SocketAddr,
    health: HealthReporter,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "health listening");
    let close = CancellationToken::new();
    let incoming =
        nqueens_coordinator::wire::connections::accept(listener, close.clone(), MAX_PER_PEER);
    let server = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(MAX_STREAMS))
        .add_service(nqueens_coordinator::wire::server::health_server(health))
        .serve_with_incoming(incoming);
    tokio::spawn(async move {
        // Dropped at shutdown: every connection still open (a health Watch) is closed with it.
        let _close = close.drop_guard();
        tokio::select! {
            served = server => {
                if let Err(e) = served {
                    tracing::error!(error = %e, "the health listener stopped");
                }
            }
            () = shutdown => {}
        }
    });
    Ok(bound)
}
