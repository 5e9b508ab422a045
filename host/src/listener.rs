//! The accept loop: every connection has a bound on what it can hold.
//!
//! `axum::serve` sets no hyper timer, so a client could keep a connection
//! (a file descriptor, buffers, a task) forever by sending half a request,
//! by idling on keep-alive, or by never reading a response. Here:
//!
//! - hyper's header-read timeout, with a tokio timer. hyper starts it when a
//!   connection begins waiting for a request head, so it also ends idle
//!   keep-alive connections;
//! - a write-stall timeout on the socket: a write that makes no progress for
//!   the idle timeout fails, and the connection (with the response stream it
//!   was sending) is dropped;
//! - the same bound on request bodies, while a handler waits for them;
//! - a connection limit: at the limit the connection idle longest (one
//!   with no request in progress and nothing left to read — idle
//!   keep-alive, or connected without a whole request head yet — for at
//!   least 100 ms) is closed to make room for the next, as nginx reuses idle
//!   keep-alive connections. Otherwise a flood of idle
//!   connections — each replaced as the header-read timeout reclaims it —
//!   would hold every slot and the listen backlog, and no new client would
//!   be served. When every connection has a request in progress, new ones
//!   wait in the kernel's listen backlog instead of failing with `Too many
//!   open files`;
//! - `TCP_NODELAY`: without it, the last small write of a streamed response
//!   waits for the client's delayed ACK (about 40 ms per request on a
//!   keep-alive connection);
//! - a response to a request whose body was not read to its end says
//!   `Connection: close`: hyper closes such a connection after the response,
//!   and a keep-alive client must not send its next request on it;
//! - a graceful stop that waits a bounded time for requests in flight.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::config::ServerConfig;

/// File descriptors left for everything but client connections: the
/// listener, stdio, the runtime's own, files the store opens, Redis.
const RESERVED_FILES: u64 = 64;
/// The connection limit when the open-files limit does not set one.
const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Pause after an accept error such as `EMFILE`: retrying at once would spin
/// while nothing has closed yet.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// Repeated warnings (limit reached, accept failing) are logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The bounds of every connection, from `[server]`.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// How long a stop waits for requests in flight (idle connections close at once).
    pub drain_timeout: Duration,
}

impl ConnectionLimits {
    /// The configured bounds; the connection limit lowered to what the
    /// process's open-files limit allows.
    pub fn from_config(config: &ServerConfig) -> Self {
        let open_files = open_files_limit();
        let max_connections = max_connections(config.max_connections, open_files);
        if let Some(configured) = config.max_connections
            && (configured as usize) > max_connections
        {
            tracing::warn!(
                configured,
                open_files,
                max_connections,
                "server.max_connections is above what the open-files limit allows; lowered"
            );
        }
        Self {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_seconds),
            idle_timeout: Duration::from_secs(config.idle_timeout_seconds),
            max_connections,
            drain_timeout: Duration::from_secs(config.stop_timeout_seconds),
        }
    }
}

/// `configured`, or the default, within what `open_files` allows: each
/// connection may hold its socket and a store file it streams from.
fn max_connections(configured: Option<u32>, open_files: Option<u64>) -> usize {
    let allowed = open_files.map(|limit| (limit.saturating_sub(RESERVED_FILES) / 2).max(1));
    let allowed = allowed.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    configured.map_or(DEFAULT_MAX_CONNECTIONS, |n| n as usize).min(allowed)
}

/// The soft `RLIMIT_NOFILE`; `None` when unlimited or unknown.
#[cfg(unix)]
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only into the struct it is given.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn open_files_limit() -> Option<u64> {
    None
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits up to
/// `drain_timeout` for requests in flight.
pub async fn serve(listener: TcpListener, app: Router, limits: ConnectionLimits, shutdown: impl Future<Output = ()>) {
    tracing::info!(
        max_connections = limits.max_connections,
        header_read_timeout_s = limits.header_read_timeout.as_secs(),
        idle_timeout_s = limits.idle_timeout.as_secs(),
        "accepting connections"
    );
    let app = bounded(app, limits.idle_timeout);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(OpenConnections::default());
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let (mut at_limit, mut accept_failing) = (Throttle::default(), Throttle::default());
    tokio::pin!(shutdown);
    loop {
        // Accepted before a slot is free: at the limit, this connection is
        // the one room is made for (one descriptor over the limit, within
        // the reserve), and while every slot has a request in progress the
        // next ones wait in the backlog.
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error, &mut accept_failing).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if at_limit.due() {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "connection limit reached: idle connections are closed to make room, new connections wait \
                         while every one has a request in progress (server.max_connections)"
                    );
                }
                tokio::select! {
                    slot = make_room(&open, &slots) => slot,
                    () = &mut shutdown => break,
                }
            }
        };
        let (id, state) = open.add();
        let service = tracked(TowerToHyperService::new(app.clone()), state.clone());
        let connection = graceful.watch(http.serve_connection(io(stream, limits.idle_timeout, state.clone()), service));
        let open = open.clone();
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                },
                // Closed to make room: dropping it closes the socket.
                () = state.close.notified() => tracing::debug!(%peer, "idle connection closed to make room"),
            }
            open.remove(id);
            drop(slot);
        });
    }
    // New connections are refused from here on; idle ones close at once.
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight after {} s; stopping anyway", limits.drain_timeout.as_secs());
    }
}

/// A connection's phases, as the accept loop sees them. Only an idle one
/// may be closed to make room: one that waits for its client (its last read
/// found nothing) with no request in progress, for at least [`IDLE_GRACE`].
/// A connection just accepted, or with bytes to parse, is *reading* until it
/// has read all there is, so a client that sent its request with the
/// connection is never closed before the server has looked at it, however
/// busy the server is; the grace covers a request that follows its
/// connection by a moment.
const READING: u8 = 0;
const IDLE: u8 = 1;
const BUSY: u8 = 2;
const CLOSING: u8 = 3;

/// How long a connection is idle before it may be closed to make room.
const IDLE_GRACE: Duration = Duration::from_millis(100);

/// One open connection: its phase, when its idle period began, and the
/// signal that closes it.
struct ConnectionState {
    phase: AtomicU8,
    /// Where its idle period began in the order of all idle periods (a
    /// counter, so no two are equal: the oldest goes first).
    idle_since: AtomicU64,
    /// When its idle period began ([`clock_ms`]), for the grace.
    idle_at_ms: AtomicU64,
    close: tokio::sync::Notify,
}

impl ConnectionState {
    /// Its last read found no bytes: idle, unless a request is in progress.
    fn waiting_for_client(&self) {
        if self.phase.load(Ordering::Acquire) == READING {
            self.idle_since.store(IDLE_ORDER.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
            self.idle_at_ms.store(clock_ms(), Ordering::Relaxed);
            let _ = self.phase.compare_exchange(READING, IDLE, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Bytes arrived: reading them until the next read finds none.
    fn bytes_arrived(&self) {
        let _ = self.phase.compare_exchange(IDLE, READING, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The order in which connections became idle.
static IDLE_ORDER: AtomicU64 = AtomicU64::new(0);

/// Milliseconds on a monotonic clock.
fn clock_ms() -> u64 {
    static START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    START.elapsed().as_millis() as u64
}

/// Every open connection, for the accept loop to close the one idle longest
/// when it needs room.
#[derive(Default)]
struct OpenConnections {
    next_id: AtomicU64,
    states: std::sync::Mutex<HashMap<u64, Arc<ConnectionState>>>,
}

impl OpenConnections {
    fn add(&self) -> (u64, Arc<ConnectionState>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnectionState {
            phase: AtomicU8::new(READING),
            idle_since: AtomicU64::new(0),
            idle_at_ms: AtomicU64::new(0),
            close: tokio::sync::Notify::new(),
        });
        self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id, state.clone());
        (id, state)
    }

    fn remove(&self, id: u64) {
        self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
    }

    /// Closes the connection idle longest, if one has been idle for the
    /// grace at `now_ms`; whether one was. Idle to closing is one step (a
    /// compare-and-swap): a connection whose request or bytes arrive
    /// meanwhile keeps it (it is no longer idle, so the next look passes over
    /// it) and the next idlest goes.
    fn close_idlest(&self, now_ms: u64) -> bool {
        let grace = IDLE_GRACE.as_millis() as u64;
        let states = self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let idlest = states
                .values()
                .filter(|state| state.phase.load(Ordering::Acquire) == IDLE)
                .filter(|state| state.idle_at_ms.load(Ordering::Relaxed).saturating_add(grace) <= now_ms)
                .min_by_key(|state| state.idle_since.load(Ordering::Relaxed));
            let Some(state) = idlest else { return false };
            if state.phase.compare_exchange(IDLE, CLOSING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                state.close.notify_one();
                return true;
            }
        }
    }
}

/// A connection slot: the one the connection closed to make room gives back,
/// or the next one any connection gives back. While no connection has been
/// idle for the grace, it looks again every half grace.
async fn make_room(open: &OpenConnections, slots: &Arc<Semaphore>) -> tokio::sync::OwnedSemaphorePermit {
    loop {
        let closing = open.close_idlest(clock_ms());
        tokio::select! {
            slot = slots.clone().acquire_owned() => return slot.expect("the semaphore is never closed"),
            () = tokio::time::sleep(IDLE_GRACE / 2), if !closing => {}
        }
    }
}

/// A request in progress on a connection, from its head to the end of its
/// response (it rides on the response body, which hyper drops once sent).
struct Busy(Arc<ConnectionState>);

impl Busy {
    /// `None` once the connection is being closed to make room.
    fn begin(state: &Arc<ConnectionState>) -> Option<Self> {
        let mut phase = state.phase.load(Ordering::Acquire);
        while phase == READING || phase == IDLE {
            match state.phase.compare_exchange(phase, BUSY, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Self(state.clone())),
                Err(now) => phase = now,
            }
        }
        None
    }
}

impl Drop for Busy {
    /// The response is sent: the connection reads its next request (idle
    /// once nothing more has arrived).
    fn drop(&mut self) {
        let _ = self.0.phase.compare_exchange(BUSY, READING, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A connection's socket, telling its state whether its reads find bytes.
struct Watched<S> {
    inner: S,
    state: Arc<ConnectionState>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &read {
            Poll::Pending => self.state.waiting_for_client(),
            Poll::Ready(Ok(())) if buf.filled().len() > before => self.state.bytes_arrived(),
            Poll::Ready(_) => {}
        }
        read
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// `service` with each request marked as in progress on its connection; a
/// request whose head arrives on a connection being closed to make room is
/// answered 503 with `Connection: close` (it was idle when it was chosen).
fn tracked<S>(
    service: S,
    state: Arc<ConnectionState>,
) -> impl hyper::service::Service<
    Request<hyper::body::Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future = Pin<Box<dyn Future<Output = Result<Response, std::convert::Infallible>> + Send>>,
> + Clone
where
    S: hyper::service::Service<Request<hyper::body::Incoming>, Response = Response, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    hyper::service::service_fn(move |request| {
        let busy = Busy::begin(&state);
        let call = busy.is_some().then(|| service.call(request));
        let answer: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(async move {
            let (Some(busy), Some(call)) = (busy, call) else {
                let mut refused = Response::new(Body::from("The connection was closed to make room; retry"));
                *refused.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
                refused.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                return Ok(refused);
            };
            let response = call.await?;
            Ok(response.map(|body| Body::new(InProgress { inner: body, _busy: busy })))
        });
        answer
    })
}

/// A response body that keeps its request in progress until hyper drops it.
struct InProgress {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for InProgress {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket as hyper drives it: no Nagle delay, writes that stall for
/// `idle_timeout` fail with `TimedOut`, reads watched for the connection's
/// phase.
fn io(
    stream: TcpStream,
    idle_timeout: Duration,
    state: Arc<ConnectionState>,
) -> TokioIo<Watched<Pin<Box<TimeoutStream<TcpStream>>>>> {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "setting TCP_NODELAY failed");
    }
    // Only writes: hyper keeps a read pending for the whole of a response
    // (to notice the client leaving), so a read timeout would cut long
    // downloads. Reads are bounded by the header-read timeout and by the
    // request-body timeout instead.
    let mut stream = TimeoutStream::new(stream);
    stream.set_write_timeout(Some(idle_timeout));
    TokioIo::new(Watched { inner: Box::pin(stream), state })
}

/// The router with the per-request bounds: a request body that stalls for
/// `idle_timeout` fails the read, and a response to a request whose body was
/// not read to its end says `Connection: close`.
fn bounded(app: Router, idle_timeout: Duration) -> Router {
    // The body timeout inside: its wrapper does not report the end of a
    // body, which the close decision needs to see.
    app.layer(RequestBodyTimeoutLayer::new(idle_timeout)).layer(middleware::from_fn(close_unless_body_read))
}

/// A handler that answers before reading the whole request body (a refusal)
/// leaves bytes on the connection. What is left is read and dropped here,
/// within [`UNREAD_DRAIN_BYTES`] and [`UNREAD_DRAIN_TIME`], before the
/// response goes out: the client, which may still be sending, then reads the
/// answer instead of a reset (closing a socket with unread bytes resets it),
/// and the connection stays usable. Beyond those bounds hyper closes the
/// connection — it cannot tell where the next request starts — and the
/// response says `Connection: close`, so a keep-alive client does not send
/// its next request into a closed socket.
async fn close_unless_body_read(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let finished = Arc::new(AtomicBool::new(body.is_end_stream()));
    let left = Arc::new(std::sync::Mutex::new(None));
    let tracked = Tracked { inner: Some(body), finished: finished.clone(), left: left.clone() };
    let mut response = next.run(Request::from_parts(parts, Body::new(tracked))).await;
    if !finished.load(Ordering::Acquire) {
        let unread = left.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let drained = match unread {
            Some(body) => drain(body).await,
            None => false, // still held (a streaming response reads it): hyper decides
        };
        if !drained {
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    response
}

/// Most bytes of an unread request body read and dropped after the answer.
const UNREAD_DRAIN_BYTES: usize = 4 << 20;
/// Longest wait for them.
const UNREAD_DRAIN_TIME: Duration = Duration::from_secs(2);

/// Whether the body was read to its end within the bounds.
async fn drain(mut body: Body) -> bool {
    let mut left = UNREAD_DRAIN_BYTES;
    let reading = async {
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let Ok(frame) = frame else { return false };
            let size = frame.data_ref().map_or(0, Bytes::len);
            if size > left {
                return false;
            }
            left -= size;
        }
        true
    };
    tokio::time::timeout(UNREAD_DRAIN_TIME, reading).await.unwrap_or(false)
}

/// A request body that records when it has been read to its end, and
/// leaves what is unread to the middleware when the handler drops it.
struct Tracked {
    inner: Option<Body>,
    finished: Arc<AtomicBool>,
    left: Arc<std::sync::Mutex<Option<Body>>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.finished.load(Ordering::Acquire)
            && let Some(body) = self.inner.take()
        {
            *self.left.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(body);
        }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        let frame = ready!(Pin::new(&mut *inner).poll_frame(cx));
        // Readers may stop at the last byte of a sized body without asking
        // for the end, so the inner body's own end counts too.
        let ended = inner.is_end_stream();
        if frame.is_none() || (matches!(frame, Some(Ok(_))) && ended) {
            self.finished.store(true, Ordering::Release);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map_or_else(SizeHint::default, Body::size_hint)
    }
}

/// Connection errors are the client's business; anything else (`EMFILE`,
/// `ENFILE`, `ENOMEM`) means waiting for something to close.
async fn accept_failed(error: io::Error, throttle: &mut Throttle) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    ) {
        return;
    }
    if throttle.due() {
        tracing::error!(%error, "accepting a connection failed; retrying");
    }
    tokio::time::sleep(ACCEPT_RETRY).await;
}

/// Lets a repeated warning through at most once per [`WARN_EVERY`].
#[derive(Default)]
struct Throttle {
    last: Option<Instant>,
}

impl Throttle {
    fn due(&mut self) -> bool {
        let now = Instant::now();
        let due = self.last.is_none_or(|last| now.duration_since(last) >= WARN_EVERY);
        if due {
            self.last = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_follows_the_open_files_limit() {
        assert_eq!(max_connections(None, None), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(max_connections(Some(20), None), 20);
        // 1024 files: half of what is left after the reserve.
        assert_eq!(max_connections(None, Some(1024)), 480);
        assert_eq!(max_connections(Some(100), Some(1024)), 100);
        assert_eq!(max_connections(Some(5000), Some(1024)), 480);
        assert_eq!(max_connections(None, Some(10)), 1, "never zero");
    }

    #[test]
    fn making_room_closes_the_connection_idle_longest_and_never_one_reading_or_with_a_request_in_progress() {
        let open = OpenConnections::default();
        let phase = |state: &Arc<ConnectionState>| state.phase.load(Ordering::Acquire);
        let later = |ms: u64| clock_ms() + IDLE_GRACE.as_millis() as u64 + ms;
        let (_, oldest) = open.add();
        let (_, busy) = open.add();
        let (_, newer) = open.add();
        let (_, fresh) = open.add();
        assert!(!open.close_idlest(later(0)), "connections not yet read from are not idle");
        for state in [&oldest, &busy, &newer] {
            state.waiting_for_client();
        }
        assert!(!open.close_idlest(clock_ms()), "none has been idle for the grace yet");
        let request = Busy::begin(&busy).expect("an idle connection takes a request");

        assert!(open.close_idlest(later(0)));
        assert_eq!([phase(&oldest), phase(&busy), phase(&newer), phase(&fresh)], [CLOSING, BUSY, IDLE, READING]);
        assert!(Busy::begin(&oldest).is_none(), "a connection being closed takes no request");
        // Its response sent, the busy one reads again, and is idle from when
        // its read finds nothing: after the other one.
        drop(request);
        assert_eq!(phase(&busy), READING);
        busy.waiting_for_client();
        newer.bytes_arrived();
        newer.waiting_for_client();
        assert!(open.close_idlest(later(0)));
        assert_eq!([phase(&busy), phase(&newer)], [CLOSING, IDLE]);
        assert!(open.close_idlest(later(0)));
        assert!(!open.close_idlest(later(0)), "nothing idle is left");
        assert_eq!(phase(&fresh), READING);
    }

    #[test]
    fn warnings_are_throttled() {
        let mut throttle = Throttle::default();
        assert!(throttle.due());
        assert!(!throttle.due());
    }
}
