//! Request metrics, the access log and the request's trace span
//! ([`telemetry::request_span`]), as one middleware on the router: by
//! route template (`MatchedPath`, e.g. `/v2/{*path}`; `unmatched` for the
//! fallback), method and status; time to the response head; body bytes in
//! and out as they flow. The access log is one `info` line per request on
//! the target `dial_host::access` with the same fields and the deployment
//! a mint site called ([`Deployment`]) — never a URL, query string, key or
//! token — and the request's id, which every answer carries as
//! `x-request-id` (OpenAI's SDK reads it) and `request-id` (Anthropic's):
//! the one a gateway in front sent as `x-request-id`, or a new one.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use metrics::{Counter, counter, histogram};

use tracing::Instrument;

use crate::metrics::{HTTP_BYTES_IN, HTTP_BYTES_OUT, HTTP_DURATION, HTTP_REQUESTS};
use crate::telemetry;

/// The deployment id a mint site answered for, as a response extension:
/// the access log names it.
#[derive(Debug, Clone)]
pub struct Deployment(pub String);

/// The target of the access log.
pub const ACCESS_LOG: &str = "dial_host::access";

/// `axum::middleware::from_fn(metrics::http::track)`, layered on the router
/// (so `MatchedPath` is known).
pub async fn track(request: Request, next: Next) -> Response {
    let request_id = request_id(request.headers());
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_string();
    let method = method_label(request.method());
    let started = Instant::now();
    let bytes_in = counter!(HTTP_BYTES_IN, "route" => route.clone());
    let span = match route.as_str() {
        // Probes answer every few seconds and call nothing: not traced.
        "/health" | "/ready" => tracing::Span::none(),
        _ => telemetry::request_span(method, &route, request_id.to_str().unwrap_or_default(), request.headers()),
    };
    let request = request.map(|body| Body::new(Counted { inner: body, bytes: bytes_in }));
    let mut response = next.run(request).instrument(span.clone()).await;
    telemetry::record_status(&span, response.status().as_u16());
    for name in [X_REQUEST_ID, REQUEST_ID] {
        response.headers_mut().insert(name, request_id.clone());
    }
    let took = started.elapsed();
    let status = response.status().as_u16().to_string();
    let deployment = response.extensions().get::<Deployment>().map(|d| d.0.as_str());
    tracing::info!(
        target: ACCESS_LOG,
        method,
        route = route.as_str(),
        status = response.status().as_u16(),
        duration_ms = took.as_secs_f64() * 1000.0,
        deployment,
        request_id = request_id.to_str().unwrap_or_default(),
        "request"
    );
    histogram!(HTTP_DURATION, "route" => route.clone(), "method" => method).record(took.as_secs_f64());
    counter!(HTTP_REQUESTS, "route" => route.clone(), "method" => method, "status" => status).increment(1);
    let bytes_out = counter!(HTTP_BYTES_OUT, "route" => route);
    response.map(|body| Body::new(Counted { inner: body, bytes: bytes_out }))
}

/// The request id headers every answer carries.
pub const X_REQUEST_ID: &str = "x-request-id";
pub const REQUEST_ID: &str = "request-id";
/// The longest request id taken from a gateway.
const MAX_REQUEST_ID: usize = 128;

/// The `x-request-id` a gateway sent, if it is a short token of letters,
/// digits and `-_.:`; else `req_<new id>`.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    let sent = headers.get(X_REQUEST_ID).filter(|value| {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID
            && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || b"-_.:".contains(byte))
    });
    sent.cloned().unwrap_or_else(|| {
        HeaderValue::from_str(&format!("req_{}", crate::clock::new_id())).expect("hex is a header value")
    })
}

/// Methods by name; anything else is `other` (clients choose methods).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// A body that adds the size of each data frame to a counter as it passes;
/// everything else (end of stream, size hint) is the inner body's.
struct Counted {
    inner: Body,
    bytes: Counter,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            self.bytes.increment(data.len() as u64);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
