//! The gRPC server's connections, bounded: at most [`MAX_CONNECTIONS`] at once (more wait in the
//! listen backlog) and [`MAX_PER_PEER`] (by default) from one peer address (more are closed as they
//! come: one host, before any token is checked, cannot take every place), each closed after [`IDLE`] without a byte
//! from its peer (a live peer answers the server's HTTP/2 pings well within it), and every one closed
//! when the server is done with them, so that no stream left open (a `status --watch`, a health Watch)
//! keeps the coordinator, and its store, alive after the server stopped.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Most connections open at once.
pub const MAX_CONNECTIONS: usize = 8192;

/// A connection from which nothing was read for this long is closed.
pub const IDLE: Duration = Duration::from_secs(120);

/// How often the server pings each connection (HTTP/2 keepalive); well within [`IDLE`].
pub const KEEPALIVE: Duration = Duration::from_secs(30);

/// Most connections from one peer address at once, by default (`serve --max-connections-per-peer`).
/// A worker process holds one or two; 1024 leaves room for many behind one NAT address.
pub const MAX_PER_PEER: usize = 1024;

/// The connections accepted on `listener` (Nagle's algorithm off: replies are small and latency-bound),
/// each closed once `close` is cancelled. A place among [`MAX_CONNECTIONS`] is taken before each accept:
/// at the limit, new connections wait in the listen backlog. A peer address holding `per_peer` already
/// has its new ones closed at once.
pub fn accept(
    listener: TcpListener,
    close: CancellationToken,
    per_peer: usize,
) -> impl tokio_stream::Stream<Item = io::Result<Conn>> {
    let room = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let peers = Arc::new(Peers {
        limit: per_peer,
        open: Mutex::new(HashMap::new()),
    });
    let state = (listener, room, peers, close, None::<Instant>);
    futures_util::stream::unfold(
        state,
        |(listener, room, peers, close, mut warned)| async move {
            // At most one line a minute of each warning: a flood must not flood the log too.
            let mut warn = |what: &str, limit: usize| {
                if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(limit, "{what}");
                    warned = Some(Instant::now());
                }
            };
            let permit = match room.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    warn(
                        "gRPC listener at its connection limit: new connections wait",
                        MAX_CONNECTIONS,
                    );
                    room.clone().acquire_owned().await.ok()?
                }
            };
            let accepted = loop {
                match listener.accept().await {
                    Ok((io, addr)) => {
                        let Some(place) = Peers::enter(&peers, addr.ip()) else {
                            warn(
                            "a peer address at its connection limit (serve --max-connections-per-peer): its new connections are closed",
                            peers.limit,
                        );
                            continue;
                        };
                        if let Err(e) = io.set_nodelay(true) {
                            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                        }
                        break Ok(Conn {
                            io,
                            closed: Box::pin(close.clone().cancelled_owned()),
                            idle: Box::pin(tokio::time::sleep(IDLE)),
                            _permit: permit,
                            _place: place,
                        });
                    }
                    // Out of file descriptors, say: logged here (tonic, which accepts again, logs it
                    // only at trace level), and accepted again after a pause rather than at once.
                    Err(e) => {
                        tracing::warn!(error = %e, "gRPC listener cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        break Err(e);
                    }
                }
            };
            Some((accepted, (listener, room, peers, close, warned)))
        },
    )
}

/// Connections open per peer.
struct Peers {
    limit: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Peers {
    /// A place for a connection from `ip`, if its peer has fewer than the limit open.
    fn enter(peers: &Arc<Peers>, ip: IpAddr) -> Option<PeerPlace> {
        let peer = peer_of(ip);
        let mut open = peers.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(peer).or_insert(0);
        if *n >= peers.limit {
            return None;
        }
        *n += 1;
        Some(PeerPlace {
            peers: peers.clone(),
            peer,
        })
    }
}

/// The peer an address belongs to: the address itself (an IPv4 address mapped into IPv6 as that IPv4
/// address). Not a whole IPv6 /64: a cloud subnet is often one, with every machine of a fleet in it.
fn peer_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// A connection's place among its peer's; given back when dropped.
struct PeerPlace {
    peers: Arc<Peers>,
    peer: IpAddr,
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        let mut open = self.peers.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

/// One accepted connection.
pub struct Conn {
    io: TcpStream,
    /// Completes when every connection is to be closed.
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Completes after [`IDLE`] without a byte read.
    idle: Pin<Box<Sleep>>,
    /// This connection's place among [`MAX_CONNECTIONS`].
    _permit: OwnedSemaphorePermit,
    /// Its place among its peer's [`MAX_PER_PEER`].
    _place: PeerPlace,
}

impl Conn {
    /// Why the connection must end now, if it must (registering the task to be woken when it must).
    fn ended(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.closed.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server closed the connection",
            ));
        }
        if self.idle.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(
                io::ErrorKind::TimedOut,
                "nothing read from the peer for too long",
            ));
        }
        None
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(e) = self.ended(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.idle.as_mut().reset(Instant::now() + IDLE);
        }
        read
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.ended(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_stream::StreamExt;

    /// A connection that says nothing is closed after [`IDLE`]; one that talks is not; all are closed
    /// when told.
    #[tokio::test(start_paused = true)]
    async fn silent_connections_end_after_idle_and_all_when_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let close = CancellationToken::new();
        let mut incoming = Box::pin(accept(listener, close.clone(), MAX_PER_PEER));
        let _silent = TcpStream::connect(addr).await.unwrap();
        let mut silent = incoming.next().await.unwrap().unwrap();
        let mut talker = TcpStream::connect(addr).await.unwrap();
        let mut talking = incoming.next().await.unwrap().unwrap();
        let mut buf = [0u8; 8];
        for _ in 0..3 {
            talker.write_all(b"x").await.unwrap();
            assert_eq!(talking.read(&mut buf).await.unwrap(), 1);
            tokio::time::advance(IDLE / 2).await;
        }
        let e = silent.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        close.cancel();
        let e = talking.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted);
        let e = talking.write(b"y").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted);
    }

    /// One peer gets at most its limit of connections (more are closed as they come); a place it
    /// gives back is its again. Before, any client, before a token was checked, could take every
    /// place and keep it with the answers to the server's own pings (found by a review, 2026-11-24, a
    /// later session).
    #[tokio::test]
    async fn a_peer_gets_at_most_its_limit_of_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let close = CancellationToken::new();
        let mut incoming = Box::pin(accept(listener, close.clone(), 2));
        let _a = TcpStream::connect(addr).await.unwrap();
        let first = incoming.next().await.unwrap().unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let _second = incoming.next().await.unwrap().unwrap();
        // A third from the same peer is closed at once, as long as two are open.
        let next = tokio::spawn(async move {
            let conn = incoming.next().await;
            (conn.map(|c| c.is_ok()), incoming)
        });
        let mut third = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        let closed = tokio::time::timeout(Duration::from_secs(10), third.read(&mut buf))
            .await
            .expect("closed, not left waiting");
        assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
        assert!(!next.is_finished(), "nothing accepted while two are open");
        // A place given back is the peer's again.
        drop(first);
        let _fourth = TcpStream::connect(addr).await.unwrap();
        let (accepted, _incoming) = tokio::time::timeout(Duration::from_secs(10), next)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(accepted, Some(true));
        assert_eq!(
            peer_of("::ffff:10.0.0.1".parse().unwrap()),
            "10.0.0.1".parse::<IpAddr>().unwrap()
        );
        assert_ne!(
            peer_of("2001:db8::1:2".parse().unwrap()),
            peer_of("2001:db8::ff:3".parse().unwrap()),
            "two machines of one /64"
        );
    }
}
