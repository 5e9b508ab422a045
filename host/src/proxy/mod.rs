//! Calls to applications (SPEC §8): one pooled HTTP client, the headers that
//! may cross, the per-request key on the way out, and the answer relayed as
//! it arrives.
//!
//! - Request headers: every client header passes except hop-by-hop ones
//!   (those listed and those the client's `Connection` header names),
//!   `Host`, `Content-Length` (recomputed), credentials — `Api-Key`,
//!   `Authorization` (unless the definition says `forward_auth_token` and
//!   it is a user's token), `Proxy-Authorization`, `Cookie`, and
//!   Anthropic's `X-Api-Key` — and the headers the host asserts to an
//!   application (`X-DIAL-*`, `X-UPSTREAM-*`, `traceparent`, `tracestate`):
//!   the application sees the caller's request but never the caller's
//!   secrets, and nothing a client could use to speak for the host. It gets
//!   its own key as `Api-Key`, the call's trace as `traceparent` (the span
//!   of its call when traces are on, with the trace's `tracestate`), and the
//!   host's own `X-DIAL-*` headers ([`UpstreamCall::asserted`]).
//! - Responses, of any status, are relayed with their headers — minus
//!   hop-by-hop ones and those an application must not set on the host's
//!   origin (`Set-Cookie`, `Strict-Transport-Security`, `Access-Control-*`,
//!   `Alt-Svc`), plus DIAL's `X-UPSTREAM-ATTEMPTS` and, on event streams,
//!   `X-Accel-Buffering: no` (so a buffering reverse proxy in front of the
//!   host passes events on as they come) — and their body streamed chunk by
//!   chunk: an SSE event reaches the client when the application sends it.
//!   The key's [`KeyLease`] rides with the body, so the key is revoked once
//!   the body has been relayed or the client went away.
//! - A chained call's answer ([`UpstreamCall::answer_links`]) is read for
//!   the attachments it carries as it passes ([`answers`]): each event of a
//!   stream when it is complete, a JSON answer whole (up to
//!   [`answers::MAX_SCANNED_ANSWER`]), and what they name is granted to the
//!   calling application's key before the client sees it.
//! - A connection failure is 502, an application silent for longer than
//!   `proxy.read_timeout_ms` is 504, each with a JSON `{"error": {"message"}}`
//!   that names no socket or resolver detail (those go to the log).
//! - Stored applications are called through a client that refuses internal
//!   destinations ([`destinations`]); configuration applications through
//!   one that does not.
//! - MCP: a 307/308 redirect to the same origin is followed with the same
//!   key, method and body; a redirect elsewhere is relayed to the client as
//!   it is, so the key never crosses origins.

pub mod answers;
pub mod attachments;
pub mod defaults;
pub mod destinations;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::value::RawValue;
use tracing::Instrument;

use crate::apps::Api;
use crate::config::{PerRequestKeyConfig, ProxyConfig};
use crate::keys::KeyLease;
use destinations::{DestinationRefused, Destinations, GuardedResolver};

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
    "traceparent",
    "tracestate",
];

/// Prefixes of request headers only the host may assert to an application
/// (DIAL Core strips or overwrites them too).
const HOST_ASSERTED_PREFIXES: &[&str] = &["x-dial-", "x-upstream-"];

/// Response headers that are about the application's connection, not the
/// answer, or that would let an application set state on the host's origin.
const NOT_RELAYED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "set-cookie",
    "strict-transport-security",
    "alt-svc",
];

/// Prefixes of response headers that are never relayed (CORS is the host's).
const NOT_RELAYED_PREFIXES: &[&str] = &["access-control-"];

/// Whether `name` is listed in `headers`' `Connection` header (hop-by-hop
/// by declaration).
fn named_in_connection(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|listed| listed.trim().eq_ignore_ascii_case(name))
}

/// The clients the host calls applications with, shared by every call.
pub struct Proxy {
    /// For configuration applications: any destination.
    client: reqwest::Client,
    /// For stored applications: internal destinations refused.
    guarded: reqwest::Client,
    destinations: Arc<Destinations>,
    max_request_bytes: u64,
    max_attachments: usize,
    max_definition_bytes: u64,
    read_timeout_ms: u64,
    key_ttl: Duration,
    max_chain_depth: usize,
    /// Large bodies are scanned for attachments on the blocking pool, one
    /// per CPU at a time.
    large_scans: Arc<tokio::sync::Semaphore>,
}

/// Bodies at least this large are scanned on the blocking pool.
const LARGE_BODY_BYTES: usize = 1 << 20;

/// Who chose an application's endpoint, and so which destinations it may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The operator (`[applications.<name>]`): any http(s) URL.
    Configured,
    /// A user (`applications/{bucket}/…`): no internal addresses.
    Stored,
}

/// One call to an application.
pub struct UpstreamCall {
    pub method: Method,
    pub url: url::Url,
    /// The client's headers (filtered here).
    pub headers: HeaderMap,
    /// The headers the host asserts to the application (`X-DIAL-*`), set
    /// after the client's are filtered, so a client's value never survives.
    pub asserted: HeaderMap,
    /// Pass the caller's `Authorization` on when it carries a user's token
    /// (a JWT: a bearer key is a credential of the host's, never passed on).
    pub forward_authorization: bool,
    /// Read the answer for attachments granted to the calling application.
    pub answer_links: Option<answers::AnswerLinks>,
    pub body: Bytes,
    /// The key handed to the application, if any.
    pub key: Option<KeyLease>,
    /// Follow same-origin 307/308 redirects (MCP).
    pub follow_redirects: bool,
    pub origin: Origin,
    /// The call's trace id (32 hex digits), sent as the host's `traceparent`.
    pub trace_id: String,
    /// The deployment id, for the log.
    pub deployment: String,
    /// The API called, for metrics (`chat_completions`, `responses`, `anthropic_messages`, `mcp`).
    pub interface: &'static str,
    /// The event that ends an event stream the application stopped feeding
    /// (in the caller's dialect), instead of a cut connection.
    pub stream_failure: Option<Bytes>,
}

/// Why an application could not be reached: rendered as DIAL's JSON error.
/// The message never carries socket or resolver details, which map the
/// host's network for whoever wrote the endpoint: [`ProxyError::detail`]
/// is for the log.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("The application could not be reached")]
    Connect(String),
    #[error("The application's endpoint is not allowed")]
    Refused(String),
    #[error("The application did not answer within {0} ms")]
    Timeout(u64),
}

impl ProxyError {
    /// What failed, for the log.
    pub fn detail(&self) -> String {
        match self {
            Self::Connect(detail) | Self::Refused(detail) => detail.clone(),
            Self::Timeout(ms) => format!("silent for {ms} ms"),
        }
    }
}

impl ProxyError {
    /// The metric status of a call that got no answer.
    fn label(&self) -> &'static str {
        match self {
            Self::Connect(_) => "connect_error",
            Self::Refused(_) => "refused",
            Self::Timeout(_) => "timeout",
        }
    }
}

impl Proxy {
    pub fn new(config: &ProxyConfig, keys: &PerRequestKeyConfig) -> Result<Self, anyhow::Error> {
        let destinations = Arc::new(Destinations::parse(&config.allowed_destinations).map_err(anyhow::Error::msg)?);
        let builder = || {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
                .read_timeout(Duration::from_millis(config.read_timeout_ms))
                .pool_max_idle_per_host(config.pool_max_idle_per_host)
                .tcp_nodelay(true)
                // Redirects are the proxy's decision (same origin only, MCP only).
                .redirect(reqwest::redirect::Policy::none())
        };
        let client = builder().build()?;
        // No HTTP proxy for stored applications: the connection must go to
        // the address the guard checked.
        let guarded = builder()
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver { destinations: destinations.clone() }))
            .build()?;
        Ok(Self {
            client,
            guarded,
            destinations,
            max_request_bytes: config.max_request_bytes,
            max_attachments: config.max_attachments,
            max_definition_bytes: config.max_definition_bytes,
            read_timeout_ms: config.read_timeout_ms,
            key_ttl: Duration::from_secs(keys.ttl_seconds),
            max_chain_depth: keys.max_chain_depth,
            large_scans: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            )),
        })
    }

    /// The resource links of a request body ([`attachments::collect`]): a
    /// large body is scanned on the blocking pool, after a permit, so a
    /// burst of large calls neither stalls the runtime's workers nor runs
    /// more scans than there are CPUs.
    pub async fn attachments(
        &self,
        api: Api,
        body: Bytes,
    ) -> Result<attachments::RequestLinks, attachments::CollectError> {
        let max = self.max_attachments;
        if body.len() < LARGE_BODY_BYTES {
            return attachments::collect(api, &body, max);
        }
        let permit = self.large_scans.clone().acquire_owned().await.expect("the semaphore is never closed");
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            attachments::collect(api, &body, max)
        })
        .await
        .expect("scanning a body for attachments panicked")
    }

    /// `body` with `defaults` merged in ([`defaults::merge`]); a large body
    /// on the blocking pool, as [`Proxy::attachments`] does.
    pub async fn with_defaults(&self, body: Bytes, defaults: &RawValue) -> Result<Bytes, serde_json::Error> {
        let merge = |body: Bytes, defaults: &RawValue| {
            defaults::merge(&body, defaults).map(|merged| merged.map_or(body, Bytes::from))
        };
        if body.len() < LARGE_BODY_BYTES {
            return merge(body, defaults);
        }
        let defaults = defaults.to_owned();
        let permit = self.large_scans.clone().acquire_owned().await.expect("the semaphore is never closed");
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            merge(body, &defaults)
        })
        .await
        .expect("merging defaults into a body panicked")
    }

    pub fn max_attachments(&self) -> usize {
        self.max_attachments
    }

    pub fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
    }

    /// The largest stored application definition a call reads and parses.
    pub fn max_definition_bytes(&self) -> u64 {
        self.max_definition_bytes
    }

    pub fn key_ttl(&self) -> Duration {
        self.key_ttl
    }

    pub fn max_chain_depth(&self) -> usize {
        self.max_chain_depth
    }

    pub fn read_timeout_ms(&self) -> u64 {
        self.read_timeout_ms
    }

    /// The headers the application gets: the client's, filtered (see the
    /// module docs), then the host's own.
    fn outgoing_headers(call: &UpstreamCall, key: Option<&KeyLease>) -> HeaderMap {
        let headers = &call.headers;
        let mut outgoing = HeaderMap::new();
        for (name, value) in headers {
            let name_text = name.as_str();
            let withheld = NOT_FORWARDED.contains(&name_text)
                || HOST_ASSERTED_PREFIXES.iter().any(|prefix| name_text.starts_with(prefix))
                || named_in_connection(headers, name_text);
            if !withheld {
                outgoing.append(name.clone(), value.clone());
            }
        }
        if call.forward_authorization
            && let Some(token) = headers.get(header::AUTHORIZATION).filter(|value| carries_user_token(value))
        {
            outgoing.insert(header::AUTHORIZATION, token.clone());
        }
        for (name, value) in &call.asserted {
            outgoing.insert(name.clone(), value.clone());
        }
        if let Some(value) = key.and_then(|lease| HeaderValue::from_str(lease.key()).ok()) {
            outgoing.insert(HeaderName::from_static("api-key"), value);
        }
        match crate::telemetry::trace_context() {
            Some(context) => outgoing.extend(context),
            None => {
                if let Some(value) = untraced_parent(&call.trace_id) {
                    outgoing.insert(HeaderName::from_static("traceparent"), value);
                }
            }
        }
        outgoing
    }

    /// Sends the call and relays the answer as it arrives.
    pub async fn forward(&self, call: UpstreamCall) -> Result<Response, ProxyError> {
        // Stored applications share one label: users choose their names.
        let label = match call.origin {
            Origin::Configured => call.deployment.clone(),
            Origin::Stored => "stored".to_string(),
        };
        let (interface, started) = (call.interface, std::time::Instant::now());
        // A child of the request's span; the application gets its context
        // as `traceparent` (`outgoing_headers`). It ends with the answer's
        // head: the body is relayed afterwards.
        let span = tracing::info_span!(
            target: crate::telemetry::TRACE_SPANS,
            "upstream",
            otel.name = %format!("upstream {interface}"),
            otel.kind = "client",
            dial.deployment = %label,
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let answered = self.send(call).instrument(span.clone()).await;
        let status = match &answered {
            Ok(response) => response.status().as_u16().to_string(),
            Err(error) => error.label().to_string(),
        };
        match &answered {
            Ok(response) => crate::telemetry::record_status(&span, response.status().as_u16()),
            Err(_) => {
                span.record("otel.status_code", "ERROR");
            }
        }
        crate::metrics::upstream_call(&label, interface, &status, started.elapsed());
        answered
    }

    async fn send(&self, call: UpstreamCall) -> Result<Response, ProxyError> {
        let outgoing = Self::outgoing_headers(&call, call.key.as_ref());
        let UpstreamCall {
            method,
            mut url,
            body,
            key,
            follow_redirects,
            origin,
            deployment,
            stream_failure,
            answer_links,
            ..
        } = call;
        let client = match origin {
            Origin::Configured => &self.client,
            Origin::Stored => &self.guarded,
        };
        let mut redirects = 0;
        let response = loop {
            if origin == Origin::Stored {
                self.destinations.check_url(&url).map_err(|refused| ProxyError::Refused(refused.to_string()))?;
            }
            let request = client.request(method.clone(), url.clone()).headers(outgoing.clone()).body(body.clone());
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
        let silence = Silence { deployment, read_timeout_ms: self.read_timeout_ms, event: stream_failure };
        Ok(relay(response, key, silence, answer_links))
    }

    /// Connecting failed (refused, unresolved, too slow to connect): 502;
    /// the guard refused every address: 502 saying so; connected but silent
    /// for too long: 504.
    fn error(&self, error: &reqwest::Error) -> ProxyError {
        if error.is_timeout() && !error.is_connect() {
            return ProxyError::Timeout(self.read_timeout_ms);
        }
        // The innermost cause names what failed.
        let mut cause: &dyn std::error::Error = error;
        loop {
            if let Some(refused) = cause.downcast_ref::<DestinationRefused>() {
                return ProxyError::Refused(refused.to_string());
            }
            match cause.source() {
                Some(source) => cause = source,
                None => return ProxyError::Connect(cause.to_string()),
            }
        }
    }
}

/// With traces off, the call's trace id and a new span id: the application
/// can still tie the calls of one chain together.
fn untraced_parent(trace_id: &str) -> Option<HeaderValue> {
    let mut span = [0u8; 8];
    rand::fill(&mut span);
    let span: String = span.iter().map(|b| format!("{b:02x}")).collect();
    HeaderValue::from_str(&format!("00-{trace_id}-{span}-01")).ok()
}

/// What to do when an application's answer stops mid-body.
struct Silence {
    deployment: String,
    read_timeout_ms: u64,
    /// The event that ends an event stream in the caller's dialect.
    event: Option<Bytes>,
}

/// Whether an `Authorization` value is a user's token (`Bearer` and a JWT:
/// three dot-separated parts), the only kind `forward_auth_token` passes on.
fn carries_user_token(value: &HeaderValue) -> bool {
    let Some(token) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
    else {
        return false;
    };
    let parts: Vec<&str> = token.trim().split('.').collect();
    parts.len() == 3 && parts.iter().all(|part| !part.is_empty())
}

/// The application's answer as the client gets it.
fn relay(
    response: reqwest::Response,
    key: Option<KeyLease>,
    silence: Silence,
    answer_links: Option<answers::AnswerLinks>,
) -> Response {
    let status = response.status();
    let mut headers = HeaderMap::new();
    for (name, value) in response.headers() {
        let text = name.as_str();
        let withheld = NOT_RELAYED.contains(&text)
            || NOT_RELAYED_PREFIXES.iter().any(|prefix| text.starts_with(prefix))
            || named_in_connection(response.headers(), text);
        if !withheld {
            headers.append(name.clone(), value.clone());
        }
    }
    let event_stream = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.to_ascii_lowercase().starts_with("text/event-stream"));
    // DIAL Core's: how many upstreams the answer took (the host calls one).
    headers.insert(HeaderName::from_static("x-upstream-attempts"), HeaderValue::from_static("1"));
    if event_stream {
        headers.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    }
    // Only a successful answer's attachments are the callee's results.
    let scan = answer_links.filter(|_| status.is_success()).map(|links| answers::Scan::new(links, event_stream));
    let relayed = answers::Relayed::new(Box::pin(response.bytes_stream()), scan, key);
    let body =
        futures_util::stream::unfold((relayed, silence, false), move |(mut relayed, silence, failed)| async move {
            if failed {
                return None;
            }
            match relayed.next().await? {
                Ok(chunk) => Some((Ok(chunk), (relayed, silence, false))),
                Err(error) => {
                    let timed_out = error.is_timeout();
                    tracing::warn!(
                        deployment = %silence.deployment,
                        %error,
                        timed_out,
                        read_timeout_ms = silence.read_timeout_ms,
                        "the application's answer stopped before its end"
                    );
                    // An event stream ends with the dialect's error event: the
                    // client learns why instead of reading a cut connection.
                    let item = match (&silence.event, event_stream) {
                        (Some(event), true) => Ok(event.clone()),
                        _ => Err(std::io::Error::other(error)),
                    };
                    Some((item, (relayed, silence, true)))
                }
            }
        });
    let mut relayed = Response::new(Body::from_stream(body));
    *relayed.status_mut() = status;
    *relayed.headers_mut() = headers;
    relayed
}
