//! Serving a coordinator: the gRPC service with standard health checking and server reflection on a bound
//! listener (optionally behind a token and TLS), plus the background tasks (lease expiry, the progress log)
//! that live as long as the server.

use std::future::Future;
use std::time::Duration;

use nqueens_proto::coordinator_server::CoordinatorServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use tonic_health::ServingStatus;

use crate::durable::storage_health;
use crate::service::progress;
use crate::service::Coordinator;
use crate::wire::auth::{OperatorOnly, RequireToken};
use crate::wire::connections;
use crate::wire::grpc::CoordinatorService;
use crate::wire::one_message::OneMessage;
use crate::wire::request_bytes::{self, RequestBytes};
use crate::wire::rpc_timer::RpcTimer;

/// Largest request the server decodes (a full report batch is far smaller).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Largest message the health service decodes: it answers callers with no token, and a check names
/// one service.
pub const MAX_HEALTH_MESSAGE_BYTES: usize = request_bytes::ANONYMOUS_MESSAGE;

/// The standard health service over `health`'s statuses, taking messages of at most
/// [`MAX_HEALTH_MESSAGE_BYTES`]: the coordinator's port and the probe ports (`--health-listen`) serve it.
pub fn health_server(health: HealthReporter) -> HealthServer<HealthService> {
    HealthServer::new(HealthService::from_health_reporter(health))
        .max_decoding_message_size(MAX_HEALTH_MESSAGE_BYTES)
}

/// The health service's name that answers SERVING for as long as the process serves, whatever its
/// store's state: what a liveness probe asks (a restart mends no full disk). The server as a whole
/// (`""`) and the coordinator's service are NOT_SERVING while the store cannot be written.
pub const LIVENESS: &str = "liveness";

/// How to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// Interval of the progress log line.
    pub progress_interval: Duration,
    /// The operator's bearer token: every RPC but health must carry it or the worker token (none of
    /// either: open).
    pub token: Option<String>,
    /// A bearer token for workers: it leases, reports and reads, but cannot create or steer runs.
    pub worker_token: Option<String>,
    /// The TLS certificate chain and key (PEM); none: plaintext.
    pub tls: Option<Identity>,
    /// With TLS, the CA whose client certificates name worker identities (`serve --tls-client-ca`):
    /// a client may present one (optional), and is then known by its subject's common name.
    pub client_ca: Option<Certificate>,
    /// Most connections from one peer address at once ([`connections::MAX_PER_PEER`] by default).
    pub per_peer: usize,
    /// The health statuses to keep: given, a probe listener elsewhere serves them too (`serve
    /// --health-listen`); none: this server's own.
    pub health: Option<HealthReporter>,
    /// Request bytes in flight per caller and in all, and the time a request's body has to arrive.
    pub request_bytes: request_bytes::Limits,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            progress_interval: Duration::from_secs(30),
            token: None,
            worker_token: None,
            tls: None,
            client_ca: None,
            per_peer: connections::MAX_PER_PEER,
            health: None,
            request_bytes: request_bytes::Limits::default(),
        }
    }
}

/// Serves `coordinator` on `listener` until `shutdown` completes. Tests and `main` share this: they
/// differ only in the listener, the options and the shutdown.
pub async fn serve(
    listener: TcpListener,
    coordinator: Coordinator,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let progress_interval = options.progress_interval;
    // A store stuck on a write error ends this server; the caller reopens it.
    let reopen = coordinator.storage().reopen_wanted();
    let stopping = coordinator.clone();
    let saver = coordinator.clone();
    let draining = CancellationToken::new();
    let close = CancellationToken::new();
    let draining_tx = draining.clone();
    let background = CancellationToken::new();
    let _stop_background = background.clone().drop_guard();
    tokio::spawn(expire_leases(coordinator.clone(), background.clone()));
    tokio::spawn(save_spot_passes(coordinator.clone(), background.clone()));
    coordinator.certify_finished();
    tokio::spawn(progress::log_every(
        coordinator.clone(),
        progress_interval,
        background.clone(),
    ));

    // Statuses kept by the caller outlive this server (a probe listener across a store reopen).
    let outlived = options.health.is_some();
    let health = options.health.clone().unwrap_or_default();
    let health_service = health_server(health.clone());
    health
        .set_serving::<CoordinatorServer<CoordinatorService>>()
        .await;
    health
        .set_service_status(LIVENESS, ServingStatus::Serving)
        .await;
    tokio::spawn(storage_watch(
        coordinator.clone(),
        health.clone(),
        background.clone(),
    ));
    // Reflection in both versions: grpcurl speaks v1, grpcio-reflection, Evans and Postman v1alpha.
    let reflection_builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(nqueens_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection = reflection_builder()
        .build_v1()
        .expect("the embedded descriptor sets are valid");
    let reflection_alpha = reflection_builder()
        .build_v1alpha()
        .expect("the embedded descriptor sets are valid");
    let auth = RequireToken::new(options.token.as_deref(), options.worker_token.as_deref())
        .with_credentials(coordinator.credentials().clone());
    // Counted after the token check, which names the caller.
    let bytes = RequestBytes::new(options.request_bytes);
    let coordinator_metrics = coordinator.metrics().clone();
    let service = CoordinatorServer::new(CoordinatorService::new(coordinator))
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(connections::KEEPALIVE))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(Some(MAX_STREAMS))
        .layer(RpcTimer::new(coordinator_metrics));
    if let Some(identity) = options.tls {
        let mut tls = ServerTlsConfig::new().identity(identity);
        if let Some(ca) = options.client_ca {
            tls = tls.client_ca_root(ca).client_auth_optional(true);
        }
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        // Health answers callers with no token: its calls (`Watch` streams too) have a bound of their
        // own, apart from the workers'.
        .add_service(
            RequestBytes::new(request_bytes::ANONYMOUS)
                .wrap_anonymous(OneMessage::new(health_service)),
        )
        .add_service(InterceptedService::new(
            reflection,
            OperatorOnly(auth.clone()),
        ))
        .add_service(InterceptedService::new(
            reflection_alpha,
            OperatorOnly(auth.clone()),
        ))
        // A call is answered once its one message is whole, whether or not its stream ends.
        .add_service(InterceptedService::new(
            bytes.wrap(OneMessage::new(service)),
            auth,
        ))
        .serve_with_incoming_shutdown(
            connections::accept(listener, close.clone(), options.per_peer),
            async move {
                tokio::select! {
                    _ = shutdown => {}
                    _ = reopen => {}
                }
                // In-flight requests are answered before the server stops: cut the long ones short.
                stopping.begin_shutdown();
                draining_tx.cancel();
            },
        );
    // Streams (WatchRun, health Watch) would hold a graceful shutdown open for ever: after
    // SHUTDOWN_GRACE the server is dropped, and every connection still open closed (each holds the
    // coordinator, and with it the store, which a reopen needs).
    let _close_connections = close.drop_guard();
    let served = tokio::select! {
        served = server => served,
        _ = async {
            draining.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!(grace_s = SHUTDOWN_GRACE.as_secs(), "connections still open after the shutdown grace; closing them");
            Ok(())
        }
    };
    // The statuses that outlive this server say that it stopped, until the next one serves ("liveness"
    // stays: the process lives on, reopening its store).
    background.cancel();
    if outlived {
        tokio::task::yield_now().await;
        health
            .set_service_status("", ServingStatus::NotServing)
            .await;
        health
            .set_not_serving::<CoordinatorServer<CoordinatorService>>()
            .await;
    }
    // The passes since the last save, before the store is let go (a cost only if it fails).
    if let Err(e) = saver.save_spot_passes().await {
        tracing::warn!(error = %e, "cannot save the spot-check passes at the server's end");
    }
    served
}

/// How long the server waits for a ping's answer before it closes the connection.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Most streams (calls) open at once on one connection.
pub const MAX_STREAMS: u32 = 1024;

/// How long a stopping server waits for open requests and streams before it drops them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Ends silent workers' leases, checking a few times per lease timeout.
async fn expire_leases(coordinator: Coordinator, stop: CancellationToken) {
    let every =
        (coordinator.lease_timeout() / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => coordinator.expire_leases().await,
            _ = stop.cancelled() => return,
        }
    }
}

/// How often the spot checks passed are saved, when they changed.
pub const SAVE_SPOT_PASSES_EVERY: Duration = Duration::from_secs(10);

/// Saves the spot checks each identity passed every [`SAVE_SPOT_PASSES_EVERY`] when they changed, and
/// once more when the server stops.
pub(crate) async fn save_spot_passes(coordinator: Coordinator, stop: CancellationToken) {
    let mut tick = tokio::time::interval(SAVE_SPOT_PASSES_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stopping = tokio::select! {
            _ = tick.tick() => false,
            _ = stop.cancelled() => true,
        };
        if let Err(e) = coordinator.save_spot_passes().await {
            tracing::warn!(error = %e, "cannot save the spot-check passes; trying again later");
        }
        if stopping {
            return;
        }
    }
}

/// Keeps the health service true to the storage state: NOT_SERVING (the server as a whole and the
/// coordinator service) while the store cannot be written, probing the disk every
/// [`storage_health::PROBE_EVERY`] until it can; SERVING again after.
async fn storage_watch(
    coordinator: Coordinator,
    health: tonic_health::server::HealthReporter,
    stop: CancellationToken,
) {
    let mut changes = coordinator.storage().subscribe();
    loop {
        let degraded = changes.borrow_and_update().is_some();
        let status = if degraded {
            ServingStatus::NotServing
        } else {
            ServingStatus::Serving
        };
        health.set_service_status("", status).await;
        health
            .set_service_status(
                <CoordinatorServer<CoordinatorService> as tonic::server::NamedService>::NAME,
                status,
            )
            .await;
        if degraded {
            tokio::select! {
                _ = tokio::time::sleep(storage_health::PROBE_EVERY) => {
                    // Does the disk take writes again? Then reopen: sled keeps its first I/O error,
                    // and a commit whose sync failed left this incarnation's memory behind the store.
                    let disk_ok = match coordinator.data_dir() {
                        Some(dir) => matches!(
                            tokio::task::spawn_blocking(move || storage_health::probe(&dir)).await,
                            Ok(Ok(()))
                        ),
                        None => coordinator.probe_storage().await.is_ok(),
                    };
                    if disk_ok {
                        coordinator.storage().request_reopen();
                    } else {
                        tracing::debug!("storage probe failed; still degraded");
                    }
                }
                _ = stop.cancelled() => return,
            }
        } else {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = stop.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte budget's idea of the largest message is the server's.
    #[test]
    fn the_byte_budget_knows_the_largest_message() {
        assert_eq!(request_bytes::MESSAGE, MAX_MESSAGE_BYTES);
    }
}
