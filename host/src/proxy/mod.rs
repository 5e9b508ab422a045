//! Calls to applications (SPEC §8): one pooled HTTP client, the headers that
//! may cross, the per-request key on the way out, and the answer relayed as
//! it arrives.
//!
//! - Request headers: every client header passes except hop-by-hop ones,
//!   `Host`, `Content-Length` (recomputed) and credentials — `Api-Key`,
//!   `Authorization`, `Proxy-Authorization`, `Cookie`, and Anthropic's
//!   `X-Api-Key` — so the application sees the caller's request but never
//!   the caller's secrets; it gets its own key as `Api-Key`.
//! - Responses, of any status, are relayed with their headers (hop-by-hop
//!   ones dropped) and their body streamed chunk by chunk: an SSE event
//!   reaches the client when the application sends it. The key's
//!   [`KeyLease`] rides with the body, so the key is revoked once the body
//!   has been relayed or the client went away.
//! - A connection failure is 502, an application silent for longer than
//!   `proxy.read_timeout_ms` is 504, each with a JSON `{"error": {"message"}}`.
//! - MCP: a 307/308 redirect to the same origin is followed with the same
//!   key, method and body; a redirect elsewhere is relayed to the client as
//!   it is, so the key never crosses origins.

pub mod attachments;

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::config::{PerRequestKeyConfig, ProxyConfig};
use crate::keys::KeyLease;

/// Same-origin redirects an MCP call follows before relaying the next one.
const MAX_REDIRECTS: usize = 5;

/// Request headers that never reach an application.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
    "api-key",
    "authorization",
    "cookie",
    "x-api-key",
];

/// Response headers that are about the application's connection, not the
/// answer.
const NOT_RELAYED: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];

/// The client the host calls applications with, shared by every call.
pub struct Proxy {
    client: reqwest::Client,
    max_request_bytes: u64,
    read_timeout_ms: u64,
    key_ttl: Duration,
}

/// One call to an application.
pub struct UpstreamCall {
    pub method: Method,
    pub url: url::Url,
    /// The client's headers (filtered here).
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The key handed to the application, if any.
    pub key: Option<KeyLease>,
    /// Follow same-origin 307/308 redirects (MCP).
    pub follow_redirects: bool,
}

/// Why an application could not be reached: rendered as DIAL's JSON error.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("The application could not be reached: {0}")]
    Connect(String),
    #[error("The application did not answer within {0} ms")]
    Timeout(u64),
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        let status = match self {
            Self::Connect(_) => StatusCode::BAD_GATEWAY,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        };
        let body = serde_json::json!({"error": {"message": self.to_string()}});
        (status, axum::Json(body)).into_response()
    }
}

impl Proxy {
    pub fn new(config: &ProxyConfig, keys: &PerRequestKeyConfig) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .read_timeout(Duration::from_millis(config.read_timeout_ms))
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .tcp_nodelay(true)
            // Redirects are the proxy's decision (same origin only, MCP only).
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            max_request_bytes: config.max_request_bytes,
            read_timeout_ms: config.read_timeout_ms,
            key_ttl: Duration::from_secs(keys.ttl_seconds),
        })
    }

    pub fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
    }

    pub fn key_ttl(&self) -> Duration {
        self.key_ttl
    }

    /// Sends the call and relays the answer as it arrives.
    pub async fn forward(&self, call: UpstreamCall) -> Result<Response, ProxyError> {
        let UpstreamCall { method, mut url, headers, body, key, follow_redirects } = call;
        let mut outgoing = HeaderMap::new();
        for (name, value) in &headers {
            if !NOT_FORWARDED.contains(&name.as_str()) {
                outgoing.append(name.clone(), value.clone());
            }
        }
        if let Some(value) = key.as_ref().and_then(|lease| HeaderValue::from_str(lease.key()).ok()) {
            outgoing.insert(HeaderName::from_static("api-key"), value);
        }
        let mut redirects = 0;
        let response = loop {
            let request = self.client.request(method.clone(), url.clone()).headers(outgoing.clone()).body(body.clone());
            let response = request.send().await.map_err(|error| self.error(&error))?;
            let status = response.status();
            let redirect = follow_redirects && matches!(status.as_u16(), 307 | 308) && redirects < MAX_REDIRECTS;
            let next = redirect
                .then(|| response.headers().get(header::LOCATION)?.to_str().ok().and_then(|l| url.join(l).ok()))
                .flatten()
                .filter(|next| next.origin() == url.origin());
            match next {
                Some(next) => {
                    url = next;
                    redirects += 1;
                }
                None => break response,
            }
        };
        Ok(relay(response, key))
    }

    /// Connecting failed (refused, unresolved, too slow to connect): 502;
    /// connected but silent for too long: 504.
    fn error(&self, error: &reqwest::Error) -> ProxyError {
        if error.is_timeout() && !error.is_connect() {
            return ProxyError::Timeout(self.read_timeout_ms);
        }
        // The innermost cause names what failed.
        let mut cause: &dyn std::error::Error = error;
        while let Some(source) = cause.source() {
            cause = source;
        }
        ProxyError::Connect(cause.to_string())
    }
}

/// The application's answer as the client gets it.
fn relay(response: reqwest::Response, key: Option<KeyLease>) -> Response {
    let status = response.status();
    let mut headers = HeaderMap::new();
    for (name, value) in response.headers() {
        if !NOT_RELAYED.contains(&name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    let body = response.bytes_stream().map(move |chunk| {
        // The lease lives as long as the body: dropped when the last chunk
        // has gone out, the upstream failed, or the client went away.
        let _lease = &key;
        chunk.map_err(std::io::Error::other)
    });
    let mut relayed = Response::new(Body::from_stream(body));
    *relayed.status_mut() = status;
    *relayed.headers_mut() = headers;
    relayed
}
