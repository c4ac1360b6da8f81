//! Request bytes in flight, bounded per worker credential and in all. Every call of a worker
//! credential costs [`PER_CALL`] bytes for as long as it lasts, and every byte of its body counts
//! too, from its arrival until its answer is sent whole (or dropped: a client that never reads its
//! answers holds them in the server's memory, and its calls stay counted meanwhile): against the
//! identity its token or certificate
//! proves, and against the workers' total. A call that would pass either bound, or whose body is not
//! whole within [`Limits::deadline`], is refused with RESOURCE_EXHAUSTED. So one credential that opens
//! many streams, or sends large bodies slowly, holds a bounded share of the coordinator's memory, and
//! other credentials' calls still pass. Each credential's first [`FLOOR`] bytes are its own, whatever
//! the total: heartbeats pass even when other credentials fill it. The operator's calls are not counted: the operator is trusted,
//! and must be able to revoke a credential that fills the total.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body::{Body, Frame};
use tokio::time::Sleep;
use tonic::Status;
use tower_service::Service;

use crate::durable::credentials::SHARED_IDENTITY;
use crate::wire::auth::Role;

/// What a call costs for as long as it lasts, besides its body's bytes: its stream, headers and
/// buffers on the server.
pub const PER_CALL: usize = 16 * 1024;

/// What each credential may hold whatever the workers' total: a heartbeat, a waiting lease call and
/// a hand-back of leases, so that credentials filling the total cannot make an honest worker's
/// leases expire (and strike it). Bytes past it count toward the total.
pub const FLOOR: usize = 4 * PER_CALL;

/// The bytes of a credential's `held` that count toward the workers' total.
fn past_floor(held: usize) -> usize {
    held.saturating_sub(FLOOR)
}

/// The largest message, as the server decodes it (`server::MAX_MESSAGE_BYTES`, checked by its tests).
pub(crate) const MESSAGE: usize = 4 * 1024 * 1024;

/// The bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes in flight of one issued credential (or client certificate) at once.
    pub per_caller: usize,
    /// Bytes in flight of the shared workers' token at once: one identity for many machines.
    pub shared: usize,
    /// Bytes in flight of every worker credential together.
    pub total: usize,
    /// Time a request's body has, from the call's start, to arrive whole.
    pub deadline: Duration,
}

impl Default for Limits {
    /// Four of the largest messages per credential (1,024 calls with small bodies), sixteen for the
    /// shared token, 64 in all (256 MiB); a body has 30 s. A report of 4,096 results is about 250 KB.
    fn default() -> Limits {
        Limits {
            per_caller: 4 * MESSAGE,
            shared: 16 * MESSAGE,
            total: 64 * MESSAGE,
            deadline: Duration::from_secs(30),
        }
    }
}

/// Calls at once of the gRPC health service on the main port, which answers callers with no token
/// (a `Watch` stream lasts as long as its client keeps it; a `Check` as long as its request arrives).
pub const ANONYMOUS_CALLS: usize = 256;

/// The largest request message of the service [`RequestBytes::wrap_anonymous`] counts: the health
/// service's (`server::MAX_HEALTH_MESSAGE_BYTES` is this).
pub const ANONYMOUS_MESSAGE: usize = 1024;

/// What [`RequestBytes::wrap_anonymous`] allows all callers together: [`ANONYMOUS_CALLS`] calls, each
/// with a request of [`ANONYMOUS_MESSAGE`] bytes (and its 5-byte gRPC frame header).
const ANONYMOUS_BYTES: usize = ANONYMOUS_CALLS * (PER_CALL + ANONYMOUS_MESSAGE + 5);

/// The bounds of the calls [`RequestBytes::wrap_anonymous`] counts: [`ANONYMOUS_CALLS`] at once, all
/// callers together (fewer with larger requests), a request whole within 10 s.
pub const ANONYMOUS: Limits = Limits {
    per_caller: ANONYMOUS_BYTES,
    shared: ANONYMOUS_BYTES,
    total: ANONYMOUS_BYTES,
    deadline: Duration::from_secs(10),
};

/// The one caller the calls of [`RequestBytes::wrap_anonymous`] count against.
const ANONYMOUS_CALLER: &str = "callers with no token";

/// Who a request's bytes count against, besides the total: `None` for the operator (not counted).
type Caller = Option<Arc<str>>;

/// The caller of a request that passed the token check: its role's identity. A request with no role
/// counts as the shared identity, the least trusted there is.
fn caller_of(extensions: &http::Extensions) -> Caller {
    match extensions.get::<Role>() {
        Some(Role::Operator) => None,
        Some(Role::Worker(identity)) => Some(identity.clone()),
        None => Some(Arc::from(SHARED_IDENTITY)),
    }
}

/// The bytes held now, shared by every connection of one server.
#[derive(Clone, Debug)]
pub struct RequestBytes {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    limits: Limits,
    held: Mutex<Held>,
    /// When a refusal was last logged: at most one line a minute.
    warned: Mutex<Option<Instant>>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_caller: HashMap<Arc<str>, usize>,
}

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The caller would pass its share.
    Caller(usize),
    /// The workers together would pass the total.
    Total(usize),
    /// The body did not arrive whole within the deadline.
    Late(Duration),
}

impl RequestBytes {
    pub fn new(limits: Limits) -> RequestBytes {
        RequestBytes {
            state: Arc::new(State {
                limits,
                held: Mutex::new(Held::default()),
                warned: Mutex::new(None),
            }),
        }
    }

    /// `service`, its requests' bodies counted here.
    pub fn wrap<S>(&self, service: S) -> Counted<S> {
        Counted {
            inner: service,
            bytes: self.clone(),
            anonymous: false,
        }
    }

    /// `service`, which answers callers with no token, its calls all counted here against one caller
    /// whatever token they bear (use [`ANONYMOUS`]: a separate count, so that they take nothing from
    /// the workers').
    pub fn wrap_anonymous<S>(&self, service: S) -> Counted<S> {
        Counted {
            inner: service,
            bytes: self.clone(),
            anonymous: true,
        }
    }

    #[cfg(test)]
    /// The bytes `caller` holds now (0 for the operator, never counted).
    fn held_by(&self, caller: &str) -> usize {
        self.lock().by_caller.get(caller).copied().unwrap_or(0)
    }

    #[cfg(test)]
    /// The bytes the worker credentials together hold past their floors ([`FLOOR`]) now.
    fn held(&self) -> usize {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // The counts are plain numbers, whole after every step: a panic elsewhere left them usable.
        self.state.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn limit_of(&self, caller: &str) -> usize {
        if caller == SHARED_IDENTITY {
            self.state.limits.shared
        } else {
            self.state.limits.per_caller
        }
    }

    /// Counts `bytes` more against `caller` and, past its [`FLOOR`], the workers' total, if both stay
    /// within their bounds.
    fn take(&self, caller: &Arc<str>, bytes: usize) -> Result<(), Refusal> {
        let mut held = self.lock();
        let limit = self.limit_of(caller);
        let mine = held.by_caller.get(caller).copied().unwrap_or(0);
        if mine + bytes > limit {
            return Err(Refusal::Caller(limit));
        }
        let more = past_floor(mine + bytes) - past_floor(mine);
        if held.total + more > self.state.limits.total {
            return Err(Refusal::Total(self.state.limits.total));
        }
        held.by_caller.insert(caller.clone(), mine + bytes);
        held.total += more;
        Ok(())
    }

    /// Gives back `bytes` that `caller` held; a caller holding none is forgotten.
    fn give(&self, caller: &Arc<str>, bytes: usize) {
        let mut held = self.lock();
        let Some(mine) = held.by_caller.get(caller).copied() else {
            return;
        };
        let left = mine.saturating_sub(bytes);
        let less = past_floor(mine) - past_floor(left);
        held.total = held.total.saturating_sub(less);
        if left == 0 {
            held.by_caller.remove(caller);
        } else {
            held.by_caller.insert(caller.clone(), left);
        }
    }

    /// The refusal's status, logged at most once a minute.
    fn refuse(&self, caller: &str, why: Refusal) -> Status {
        let message = match why {
            Refusal::Caller(limit) => format!(
                "{:?} would hold more than {limit} bytes of calls in flight; try again when its calls are answered",
                crate::service::truncate(caller)
            ),
            Refusal::Total(limit) => format!(
                "the workers would hold more than {limit} bytes of calls in flight; try again shortly"
            ),
            Refusal::Late(deadline) => format!(
                "a call of {:?} did not send its request whole within {} s",
                crate::service::truncate(caller),
                deadline.as_secs_f64()
            ),
        };
        self.warn(&message);
        Status::resource_exhausted(message)
    }

    fn warn(&self, message: &str) {
        let mut warned = self.state.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
            tracing::warn!("request refused: {message}");
            *warned = Some(Instant::now());
        }
    }
}

/// One call's bytes: given back when both its body and its answer are dropped. The operator's
/// (`caller` none) are not counted.
#[derive(Debug)]
struct Tab {
    bytes: RequestBytes,
    caller: Caller,
    held: AtomicUsize,
}

impl Tab {
    fn take(&self, bytes: usize) -> Result<(), Status> {
        let Some(caller) = &self.caller else {
            return Ok(());
        };
        match self.bytes.take(caller, bytes) {
            Ok(()) => {
                self.held.fetch_add(bytes, Ordering::Relaxed);
                Ok(())
            }
            Err(why) => Err(self.bytes.refuse(caller, why)),
        }
    }

    /// The refusal of a body that was not whole in time.
    fn late(&self) -> Status {
        let who = self.caller.as_deref().unwrap_or("the operator");
        self.bytes
            .refuse(who, Refusal::Late(self.bytes.state.limits.deadline))
    }
}

impl Drop for Tab {
    fn drop(&mut self) {
        if let Some(caller) = &self.caller {
            self.bytes.give(caller, *self.held.get_mut());
        }
    }
}

/// A service whose requests' bodies are counted (made by [`RequestBytes::wrap`]).
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    bytes: RequestBytes,
    /// Every call counted against [`ANONYMOUS_CALLER`] ([`RequestBytes::wrap_anonymous`]).
    anonymous: bool,
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Counted<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> Service<http::Request<B>> for Counted<S>
where
    S: Service<http::Request<CountedBody<B>>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<HeldBody<R>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let tab = Arc::new(Tab {
            bytes: self.bytes.clone(),
            caller: match self.anonymous {
                true => Some(Arc::from(ANONYMOUS_CALLER)),
                false => caller_of(req.extensions()),
            },
            held: AtomicUsize::new(0),
        });
        // The call's own cost first: a stream with no body costs memory too.
        if let Err(refused) = tab.take(PER_CALL) {
            return Box::pin(async move { Ok(refused.into_http().map(HeldBody::free)) });
        }
        let (parts, body) = req.into_parts();
        let body = CountedBody {
            inner: Box::pin(body),
            tab: tab.clone(),
            deadline: Box::pin(tokio::time::sleep(self.bytes.state.limits.deadline)),
            whole: false,
        };
        let call = self.inner.call(http::Request::from_parts(parts, body));
        // The call's bytes stay counted until its answer is sent whole, or dropped.
        Box::pin(async move {
            let answer = call.await;
            answer.map(|r| {
                r.map(|inner| HeldBody {
                    inner: Box::pin(inner),
                    tab: Some(tab),
                })
            })
        })
    }
}

/// An answer's body that keeps its call counted ([`Tab`]) until it has been sent whole, or dropped (a
/// client that never reads its answers holds them in the server's memory, in HTTP/2's send buffers).
pub struct HeldBody<R> {
    inner: Pin<Box<R>>,
    tab: Option<Arc<Tab>>,
}

impl<R> HeldBody<R> {
    /// A body that keeps nothing counted.
    fn free(inner: R) -> HeldBody<R> {
        HeldBody {
            inner: Box::pin(inner),
            tab: None,
        }
    }
}

impl<R: Default> Default for HeldBody<R> {
    fn default() -> Self {
        HeldBody::free(R::default())
    }
}

impl<R: Body> Body for HeldBody<R> {
    type Data = R::Data;
    type Error = R::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let frame = self.inner.as_mut().poll_frame(cx);
        if let Poll::Ready(None) = frame {
            // Sent whole: the call's bytes come back now.
            self.tab = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request's body whose bytes are counted as they arrive.
pub struct CountedBody<B> {
    inner: Pin<Box<B>>,
    tab: Arc<Tab>,
    deadline: Pin<Box<Sleep>>,
    /// The body has ended: the deadline no longer applies.
    whole: bool,
}

impl<B: Body> Body for CountedBody<B>
where
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if !self.whole && self.deadline.as_mut().poll(cx).is_ready() {
            self.whole = true;
            return Poll::Ready(Some(Err(self.tab.late().into())));
        }
        let frame = match self.inner.as_mut().poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => {
                self.whole = true;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            let n = bytes::Buf::remaining(data);
            if let Err(refused) = self.tab.take(n) {
                self.whole = true;
                return Poll::Ready(Some(Err(refused.into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            per_caller: FLOOR + 100,
            shared: FLOOR + 300,
            total: 500,
            deadline: Duration::from_secs(1),
        }
    }

    fn caller(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn a_caller_takes_up_to_its_share_and_no_byte_more() {
        let b = RequestBytes::new(limits());
        assert_eq!(b.take(&caller("a"), FLOOR + 60), Ok(()));
        assert_eq!(b.take(&caller("a"), 40), Ok(()));
        assert_eq!(b.take(&caller("a"), 1), Err(Refusal::Caller(FLOOR + 100)));
        assert_eq!(b.held_by("a"), FLOOR + 100);
        // Another credential is not touched by a's.
        assert_eq!(b.take(&caller("b"), FLOOR + 100), Ok(()));
        assert_eq!(b.held(), 200, "the bytes past each floor");
        b.give(&caller("a"), 60);
        assert_eq!(b.take(&caller("a"), 60), Ok(()));
        assert_eq!(b.take(&caller("a"), 1), Err(Refusal::Caller(FLOOR + 100)));
    }

    #[test]
    fn the_shared_token_has_its_own_larger_share() {
        let b = RequestBytes::new(limits());
        let shared = caller(SHARED_IDENTITY);
        assert_eq!(b.take(&shared, FLOOR + 300), Ok(()));
        assert_eq!(b.take(&shared, 1), Err(Refusal::Caller(FLOOR + 300)));
    }

    #[test]
    fn the_total_bounds_the_workers_together_past_their_floors() {
        let b = RequestBytes::new(limits());
        for name in ["a", "b", "c", "d", "e"] {
            assert_eq!(b.take(&caller(name), FLOOR + 100), Ok(()));
        }
        assert_eq!(b.held(), 500);
        // Past its floor, a sixth credential is refused; a refused take holds nothing.
        assert_eq!(b.take(&caller("f"), FLOOR + 1), Err(Refusal::Total(500)));
        assert_eq!(b.held_by("f"), 0);
        // Within its floor it passes, the total full: its heartbeats are not refused.
        assert_eq!(b.take(&caller("f"), FLOOR), Ok(()));
        assert_eq!(b.take(&caller("f"), 1), Err(Refusal::Total(500)));
        assert_eq!(b.held(), 500);
        // What a gives back past its floor is room for f.
        b.give(&caller("a"), 30);
        assert_eq!(b.held(), 470);
        assert_eq!(b.take(&caller("f"), 30), Ok(()));
        assert_eq!(b.take(&caller("f"), 1), Err(Refusal::Total(500)));
        // Bytes given back within the floor free none of the total.
        b.give(&caller("a"), 70);
        assert_eq!(b.held(), 430);
        b.give(&caller("a"), FLOOR);
        assert_eq!(b.held(), 430);
        assert_eq!(b.held_by("a"), 0);
    }

    /// With the total full, an honest credential still waits for a lease, heartbeats the 256 leases a
    /// new identity may hold (an id is at most 10 bytes on the wire) and hands them back, at once.
    #[test]
    fn the_floor_holds_a_waiting_lease_call_a_heartbeat_and_a_hand_back() {
        let limits = Limits::default();
        let b = RequestBytes::new(limits);
        let mut k = 0;
        while b
            .take(&caller(&format!("filler{k}")), limits.per_caller)
            .is_ok()
        {
            k += 1;
        }
        let room = limits.total - b.held();
        b.take(&caller("last filler"), FLOOR + room).unwrap();
        assert_eq!(b.held(), limits.total);
        assert!(
            b.take(&caller("late"), FLOOR + 1).is_err(),
            "the total is full"
        );
        let honest = caller("honest");
        for call in [100, 256 * 10 + 100, 256 * 10 + 100] {
            assert_eq!(b.take(&honest, PER_CALL + call), Ok(()));
        }
    }

    #[test]
    fn the_operator_is_not_counted_even_with_the_total_full() {
        let b = RequestBytes::new(limits());
        for name in ["a", "b", "c", "d", "e"] {
            b.take(&caller(name), FLOOR + 100).unwrap();
        }
        let operator = Tab {
            bytes: b.clone(),
            caller: None,
            held: AtomicUsize::new(0),
        };
        assert!(operator.take(1 << 30).is_ok());
        assert_eq!(b.held(), 500);
        drop(operator);
        assert_eq!(b.held(), 500);
    }

    #[test]
    fn a_caller_holding_nothing_is_forgotten() {
        let b = RequestBytes::new(limits());
        b.take(&caller("a"), 10).unwrap();
        b.take(&caller("a"), 5).unwrap();
        b.give(&caller("a"), 10);
        assert_eq!(b.lock().by_caller.len(), 1);
        b.give(&caller("a"), 5);
        assert!(b.lock().by_caller.is_empty());
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_calls_bytes_come_back_when_its_tab_is_dropped() {
        let b = RequestBytes::new(limits());
        let tab = Tab {
            bytes: b.clone(),
            caller: Some(caller("a")),
            held: AtomicUsize::new(0),
        };
        tab.take(FLOOR + 70).unwrap();
        let refused = tab.take(31).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("\"a\""), "{refused:?}");
        assert_eq!(b.held_by("a"), FLOOR + 70);
        assert_eq!(b.held(), 70);
        let late = tab.late();
        assert_eq!(late.code(), tonic::Code::ResourceExhausted);
        assert!(late.message().contains("within 1 s"), "{late:?}");
        drop(tab);
        assert_eq!(b.held_by("a"), 0);
        assert_eq!(b.held(), 0);
    }

    /// A service that answers each request with its body.
    #[derive(Clone)]
    struct Echo;

    type Full = http_body_util::Full<bytes::Bytes>;

    impl Service<http::Request<CountedBody<Full>>> for Echo {
        type Response = http::Response<Full>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<CountedBody<Full>>) -> Self::Future {
            use http_body_util::BodyExt;
            Box::pin(async move {
                let body = req.into_body().collect().await.unwrap().to_bytes();
                Ok(http::Response::new(Full::new(body)))
            })
        }
    }

    /// A call stays counted until its answer has been sent whole, or dropped: before, its bytes came
    /// back as soon as its handler answered, so a client that never read its answers (each up to
    /// 164 KiB, a heartbeat's list of lost leases) could hold them in the server's memory on every
    /// stream of every connection, counted nowhere (found by a review, 2026-11-30).
    #[tokio::test]
    async fn a_call_stays_counted_until_its_answer_is_sent() {
        use http_body_util::BodyExt;
        let b = RequestBytes::new(limits());
        let mut svc = b.wrap(Echo);
        let request = |caller: &str| {
            let mut req =
                http::Request::new(http_body_util::Full::new(bytes::Bytes::from(vec![7u8; 50])));
            req.extensions_mut().insert(Role::Worker(Arc::from(caller)));
            req
        };
        let answered = svc.call(request("a")).await.unwrap();
        assert_eq!(b.held_by("a"), PER_CALL + 50, "answered, not yet sent");
        let mut body = answered.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap().len(), 50);
        assert_eq!(
            b.held_by("a"),
            PER_CALL + 50,
            "a frame sent, the end not yet"
        );
        assert!(body.frame().await.is_none());
        assert_eq!(b.held_by("a"), 0, "sent whole");
        // An answer dropped unsent gives its bytes back too.
        let unsent = svc.call(request("a")).await.unwrap();
        assert_eq!(b.held_by("a"), PER_CALL + 50);
        drop(unsent);
        assert_eq!(b.held_by("a"), 0);
    }

    /// An answer's body tells what its inner body tells of its end and its size (HTTP/2 frames the
    /// answer by them).
    #[test]
    fn a_held_body_passes_on_its_end_and_size() {
        let full = HeldBody::free(Full::new(bytes::Bytes::from_static(b"abc")));
        assert!(!full.is_end_stream());
        assert_eq!(full.size_hint().exact(), Some(3));
        let empty = HeldBody::free(Full::new(bytes::Bytes::new()));
        assert!(empty.is_end_stream());
        assert_eq!(empty.size_hint().exact(), Some(0));
    }

    /// A service for callers with no token counts every call against one caller, the operator's too,
    /// up to its calls at once; its count is its own.
    #[tokio::test]
    async fn anonymous_calls_are_counted_together_up_to_their_bound() {
        let workers = RequestBytes::new(limits());
        let b = RequestBytes::new(ANONYMOUS);
        let mut svc = b.wrap_anonymous(Echo);
        let request = |role: Option<Role>| {
            let mut req = http::Request::new(Full::new(bytes::Bytes::new()));
            if let Some(role) = role {
                req.extensions_mut().insert(role);
            }
            req
        };
        let mut held = Vec::new();
        for i in 0..ANONYMOUS_CALLS {
            let role = match i % 3 {
                0 => None,
                1 => Some(Role::Operator),
                _ => Some(Role::Worker(Arc::from("w"))),
            };
            let answer = svc.call(request(role)).await.unwrap();
            assert_eq!(answer.headers().get("grpc-status"), None, "call {i}");
            held.push(answer);
        }
        assert_eq!(b.held_by(ANONYMOUS_CALLER), ANONYMOUS_CALLS * PER_CALL);
        assert_eq!(b.held_by("w"), 0);
        assert_eq!(workers.held(), 0, "nothing of the workers' count");
        // Room is left for requests of the largest health message, one each, and no more calls.
        let room = ANONYMOUS_BYTES - ANONYMOUS_CALLS * PER_CALL;
        assert_eq!(room, ANONYMOUS_CALLS * 1029);
        b.take(&caller(ANONYMOUS_CALLER), room).unwrap();
        let refused = svc.call(request(Some(Role::Operator))).await.unwrap();
        assert_eq!(
            refused.headers().get("grpc-status").unwrap(),
            &(tonic::Code::ResourceExhausted as i32).to_string()
        );
        b.give(&caller(ANONYMOUS_CALLER), room);
        held.pop();
        let again = svc.call(request(None)).await.unwrap();
        assert_eq!(again.headers().get("grpc-status"), None);
    }

    /// A flood of refusals is one warn line a minute.
    #[test]
    fn refusals_are_logged_once_a_minute() {
        use tracing_subscriber::layer::SubscriberExt;
        let b = RequestBytes::new(limits());
        let loud = crate::service::tests::Loud::default();
        let _installed =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(loud.clone()));
        for _ in 0..3 {
            let refused = b.refuse("a", Refusal::Total(500));
            assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
            assert!(refused.message().contains("500 bytes"), "{refused:?}");
        }
        assert_eq!(loud.0.lock().unwrap().0, 1);
        // A minute later, one more.
        let long_ago = Instant::now().checked_sub(Duration::from_secs(61)).unwrap();
        *b.state.warned.lock().unwrap() = Some(long_ago);
        b.refuse("a", Refusal::Caller(100));
        assert_eq!(loud.0.lock().unwrap().0, 2);
    }

    #[test]
    fn the_role_names_the_caller() {
        let mut e = http::Extensions::new();
        assert_eq!(caller_of(&e).as_deref(), Some(SHARED_IDENTITY));
        e.insert(Role::Operator);
        assert_eq!(caller_of(&e), None);
        e.insert(Role::Worker(Arc::from("w1")));
        assert_eq!(caller_of(&e).as_deref(), Some("w1"));
    }
}
