//! The gRPC server's connections, bounded: at most [`MAX_CONNECTIONS`] at once (more wait in the
//! listen backlog), each closed after [`IDLE`] without a byte from its peer (a live peer answers the
//! server's HTTP/2 pings well within it), and every one closed when the server is done with them, so
//! that no stream left open (a `status --watch`, a health Watch) keeps the coordinator, and its store,
//! alive after the server stopped.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
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

/// The connections accepted on `listener` (Nagle's algorithm off: replies are small and latency-bound),
/// each closed once `close` is cancelled. A place among [`MAX_CONNECTIONS`] is taken before each accept:
/// at the limit, new connections wait in the listen backlog.
pub fn accept(
    listener: TcpListener,
    close: CancellationToken,
) -> impl tokio_stream::Stream<Item = io::Result<Conn>> {
    let room = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let state = (listener, room, close, None::<Instant>);
    futures_util::stream::unfold(state, |(listener, room, close, mut warned)| async move {
        let permit = match room.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At most one line a minute: a flood must not flood the log too.
                if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(
                        limit = MAX_CONNECTIONS,
                        "gRPC listener at its connection limit: new connections wait"
                    );
                    warned = Some(Instant::now());
                }
                room.clone().acquire_owned().await.ok()?
            }
        };
        let accepted = listener.accept().await.map(|(io, _)| {
            if let Err(e) = io.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            Conn {
                io,
                closed: Box::pin(close.clone().cancelled_owned()),
                idle: Box::pin(tokio::time::sleep(IDLE)),
                _permit: permit,
            }
        });
        Some((accepted, (listener, room, close, warned)))
    })
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
        let mut incoming = Box::pin(accept(listener, close.clone()));
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
}
