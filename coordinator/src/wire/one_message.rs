//! One request message per call: a call's body ends as soon as its one gRPC message is whole, so
//! that its handler runs at once, whether or not the client ends its stream. Without it, the server
//! waits for the stream's end with the message decoded (tonic reads a unary call's trailers after its
//! message): a client that never ends its streams holds decoded messages, many times their bytes on
//! the wire, until the request deadline. Bytes that come with the message's last are refused; later
//! ones are never read (the stream is dropped once answered).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tonic::Status;
use tower_service::Service;

/// A service whose calls each take one request message (every method of the coordinator's service
/// and of the health service; not server reflection, whose requests are a stream).
#[derive(Clone, Debug)]
pub struct OneMessage<S> {
    inner: S,
}

impl<S> OneMessage<S> {
    pub fn new(inner: S) -> OneMessage<S> {
        OneMessage { inner }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for OneMessage<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for OneMessage<S>
where
    S: Service<http::Request<OneMessageBody<B>>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        self.inner.call(req.map(|body| OneMessageBody {
            inner: Box::pin(body),
            framing: Framing::default(),
            ended: false,
        }))
    }
}

/// Where a body stands within its one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// The message's 5-byte header (a compression flag, its length), `seen` bytes of it so far.
    Header { header: [u8; 5], seen: usize },
    /// The message itself, `left` bytes of it still to come.
    Message { left: u32 },
    /// The message is whole.
    Whole,
}

impl Default for Framing {
    fn default() -> Framing {
        Framing::Header {
            header: [0; 5],
            seen: 0,
        }
    }
}

/// What a body's next bytes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The message is not whole yet.
    More,
    /// The message is whole, with these bytes' last.
    Whole,
    /// Bytes came past the message's end.
    Past,
}

impl Framing {
    /// Takes `data`, the body's next bytes.
    fn take(&mut self, mut data: &[u8]) -> Step {
        loop {
            match self {
                Framing::Header { header, seen } => {
                    let k = (header.len() - *seen).min(data.len());
                    header[*seen..*seen + k].copy_from_slice(&data[..k]);
                    *seen += k;
                    data = &data[k..];
                    if *seen < header.len() {
                        return Step::More;
                    }
                    let left = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
                    *self = match left {
                        0 => Framing::Whole,
                        left => Framing::Message { left },
                    };
                }
                Framing::Message { left } => {
                    let k = data.len().min(*left as usize);
                    *left -= k as u32;
                    data = &data[k..];
                    if *left > 0 {
                        return Step::More;
                    }
                    *self = Framing::Whole;
                }
                Framing::Whole if data.is_empty() => return Step::Whole,
                Framing::Whole => return Step::Past,
            }
        }
    }
}

/// A request's body that ends once its one message is whole (made by [`OneMessage`]).
pub struct OneMessageBody<B> {
    inner: Pin<Box<B>>,
    framing: Framing,
    /// The message was passed on whole: the body has ended, whatever the client does next.
    ended: bool,
}

impl<B> Body for OneMessageBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let frame = match self.inner.as_mut().poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => {
                self.ended = true;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            let step = self.framing.take(data);
            match step {
                Step::More => {}
                Step::Whole => self.ended = true,
                Step::Past => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(nqueens_proto::refusing_the_request(
                        Status::invalid_argument(
                            "a call takes one request message, and bytes came after it",
                        ),
                    )
                    .into())));
                }
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut frame = vec![0u8];
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(message);
        frame
    }

    #[test]
    fn a_message_is_whole_at_its_last_byte_however_its_bytes_are_split() {
        let bytes = framed(&[1, 2, 3, 4, 5, 6, 7]);
        for split in 0..=bytes.len() {
            let mut f = Framing::default();
            let (a, b) = bytes.split_at(split);
            let first = f.take(a);
            let second = f.take(b);
            if split == bytes.len() {
                assert_eq!((first, second), (Step::Whole, Step::Whole), "split {split}");
            } else {
                assert_eq!((first, second), (Step::More, Step::Whole), "split {split}");
            }
        }
        // One byte at a time.
        let mut f = Framing::default();
        let steps: Vec<Step> = bytes.iter().map(|b| f.take(&[*b])).collect();
        assert!(steps[..bytes.len() - 1].iter().all(|s| *s == Step::More));
        assert_eq!(steps.last(), Some(&Step::Whole));
    }

    #[test]
    fn an_empty_message_is_whole_at_its_header() {
        let mut f = Framing::default();
        assert_eq!(f.take(&[0, 0, 0, 0]), Step::More);
        assert_eq!(f.take(&[0]), Step::Whole);
        assert_eq!(f.take(&[]), Step::Whole);
    }

    #[test]
    fn bytes_past_the_message_are_found_in_the_same_data_or_later() {
        let mut two = framed(&[9; 3]);
        two.extend_from_slice(&framed(&[9; 3]));
        assert_eq!(Framing::default().take(&two), Step::Past);
        let mut f = Framing::default();
        assert_eq!(f.take(&framed(&[9; 3])), Step::Whole);
        assert_eq!(f.take(&[0]), Step::Past);
        // A length of 2^32 - 1 is waited for, never wrapped.
        let mut f = Framing::default();
        assert_eq!(f.take(&[0, 0xff, 0xff, 0xff, 0xff, 1, 2]), Step::More);
        assert_eq!(f, Framing::Message { left: u32::MAX - 2 });
    }

    /// A service that collects its request's body.
    #[derive(Clone)]
    struct Collect;

    type Stream = http_body_util::StreamBody<
        tokio_stream::wrappers::ReceiverStream<Result<Frame<Bytes>, std::convert::Infallible>>,
    >;

    impl Service<http::Request<OneMessageBody<Stream>>> for Collect {
        type Response = Result<Bytes, String>;
        type Error = std::convert::Infallible;
        type Future =
            Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<OneMessageBody<Stream>>) -> Self::Future {
            use http_body_util::BodyExt;
            Box::pin(async move {
                Ok(match req.into_body().collect().await {
                    Ok(body) => Ok(body.to_bytes()),
                    Err(e) => Err(e.to_string()),
                })
            })
        }
    }

    /// A body of `frames`, kept open (never ended) while the returned sender lives.
    async fn open_body(
        frames: Vec<Vec<u8>>,
    ) -> (
        Stream,
        tokio::sync::mpsc::Sender<Result<Frame<Bytes>, std::convert::Infallible>>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        for f in frames {
            tx.send(Ok(Frame::data(Bytes::from(f)))).await.unwrap();
        }
        (
            http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
            tx,
        )
    }

    #[tokio::test]
    async fn a_body_ends_with_its_message_though_its_stream_stays_open() {
        let message = framed(b"hello");
        let (body, _open) = open_body(vec![message[..3].to_vec(), message[3..].to_vec()]).await;
        let mut svc = OneMessage::new(Collect);
        let got = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            svc.call(http::Request::new(body)),
        )
        .await
        .expect("the body did not end with its message")
        .unwrap();
        assert_eq!(got.unwrap(), Bytes::from(message));

        let mut two = framed(b"a");
        two.extend_from_slice(&framed(b"b"));
        let (body, _open) = open_body(vec![two]).await;
        let refused = svc.call(http::Request::new(body)).await.unwrap();
        assert!(
            refused.unwrap_err().contains("one request message"),
            "bytes past the message were passed on"
        );
    }

    /// Every method of the services served behind [`OneMessage`] takes one request message: a method
    /// whose client streams its requests, added later, would be cut off after its first.
    #[test]
    fn no_method_served_behind_it_streams_its_requests() {
        use prost::Message;
        let mut methods = 0;
        for set in [
            nqueens_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
        ] {
            let set = prost_types::FileDescriptorSet::decode(set).unwrap();
            for service in set.file.iter().flat_map(|f| &f.service) {
                for method in &service.method {
                    methods += 1;
                    assert!(
                        !method.client_streaming(),
                        "{}.{} streams its requests",
                        service.name(),
                        method.name()
                    );
                }
            }
        }
        assert!(methods >= 20, "{methods} methods");
    }

    #[test]
    fn an_ended_body_says_so() {
        let body = OneMessageBody {
            inner: Box::pin(http_body_util::Full::new(Bytes::new())),
            framing: Framing::default(),
            ended: false,
        };
        assert!(!body.is_end_stream());
        let ended = OneMessageBody {
            ended: true,
            ..body
        };
        assert!(ended.is_end_stream());
    }
}
