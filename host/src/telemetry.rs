//! Logs and traces.
//!
//! Logs: `tracing` to stderr (stdout carries the start-up banner), as text
//! or JSON lines. Lines are written by a background thread
//! (`tracing-appender`): a request formats its access-log line and hands it
//! over instead of waiting for a `write` to stderr (measured: the
//! synchronous write cost a proxied call about 130 µs at p50). Nothing is
//! dropped: when the thread falls behind, loggers wait for it.
//!
//! Traces (SPEC §15): with `telemetry.otlp_endpoint` set, the spans of the
//! [`TRACE_SPANS`] target — one per request ([`request_span`]) with the
//! store, Redis, handler and application calls made for it as children;
//! background work (the sweep, lock renewals) is not traced —
//! become OpenTelemetry spans, exported over OTLP/HTTP by the SDK's batch
//! thread. A caller's `traceparent` is continued; an application called
//! gets the context of the span of its call ([`trace_context`]), never the
//! caller's header. The export queue holds at most 2048 spans (the SDK's
//! default, `OTEL_BSP_MAX_QUEUE_SIZE`; more are dropped, never waited for)
//! and one export may take [`EXPORT_TIMEOUT`]. Unset, no layer enables the
//! target and each such span costs one cached check (docs/benchmarks.md).

use std::time::Duration;

use axum::http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing::subscriber::Interest;
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{DynFilterFn, EnvFilter};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{LogConfig, LogFormat, TelemetryConfig};
pub use dial_handler_runtime::TRACE_SPANS;

/// The longest one export of spans may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// What keeps logs and traces flowing; keep it for the life of the process.
/// Dropping it flushes the queued log lines and exports the spans still
/// queued.
pub struct Telemetry {
    _logs: WorkerGuard,
    traces: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.traces.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("exporting the last spans failed: {error}");
        }
    }
}

/// Installs the global subscriber: logs by the configured filter (`RUST_LOG`
/// overrides it; trace spans are never logged), and the trace exporter when
/// `telemetry.otlp_endpoint` is set. A second call (tests) keeps the first
/// subscriber.
pub fn init(log: &LogConfig, telemetry: &TelemetryConfig) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(&log.filter))
        .add_directive(format!("{TRACE_SPANS}=off").parse()?);
    let (writer, guard) = NonBlockingBuilder::default().lossy(false).finish(std::io::stderr());
    let provider = match &telemetry.otlp_endpoint {
        Some(endpoint) => Some(tracer_provider(endpoint, &telemetry.service_name)?),
        None => None,
    };
    let result = match &provider {
        // Off: the filter is global, as cheap as logs alone (per-layer
        // filtering cost a request about 20 µs of CPU, measured).
        None => tracing_subscriber::registry().with(filter).with(log_layer(log.format, writer)).try_init(),
        Some(provider) => {
            // The spans of a request, never a store call or Redis command
            // made by background work (the sweep, lock renewals), which
            // would each start a trace of one span.
            let within_requests = DynFilterFn::new(|metadata, context| {
                metadata.target() == TRACE_SPANS && (metadata.name() == "request" || context.lookup_current().is_some())
            })
            .with_callsite_filter(|metadata| {
                if metadata.target() == TRACE_SPANS { Interest::sometimes() } else { Interest::never() }
            });
            // Only the attributes the spans name: no busy/idle times,
            // thread ids, source locations or `tracing` targets on each.
            let traces = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("dial-host"))
                .with_tracked_inactivity(false)
                .with_threads(false)
                .with_location(false)
                .with_target(false)
                .with_filter(within_requests);
            tracing_subscriber::registry()
                .with(log_layer(log.format, writer).with_filter(filter))
                .with(traces)
                .try_init()
        }
    };
    // A second init (tests) keeps the first subscriber.
    drop(result);
    Ok(Telemetry { _logs: guard, traces: provider })
}

/// Log lines to `writer`, as text or JSON.
fn log_layer<S>(format: LogFormat, writer: NonBlocking) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(writer).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer().json().flatten_event(true).with_writer(writer).boxed(),
    }
}

/// Where spans go: `<endpoint>/v1/traces`, unless the endpoint names that
/// path already. An error names the setting.
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    let url = url::Url::parse(endpoint)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
        .ok_or_else(|| {
        format!("telemetry.otlp_endpoint must be an http:// or https:// URL (OTLP/HTTP), not {endpoint:?}")
    })?;
    let base = url.as_str().trim_end_matches('/');
    Ok(if url.path().ends_with("/v1/traces") { base.to_string() } else { format!("{base}/v1/traces") })
}

fn tracer_provider(endpoint: &str, service_name: &str) -> anyhow::Result<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(traces_url(endpoint).map_err(anyhow::Error::msg)?)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let resource = Resource::builder().with_service_name(service_name.to_string()).build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// The span of one request, named by its method and route template,
/// continuing the caller's `traceparent` when it sent a valid one.
pub fn request_span(method: &str, route: &str, request_id: &str, headers: &HeaderMap) -> Span {
    let span = tracing::info_span!(
        target: TRACE_SPANS,
        "request",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = method,
        http.route = route,
        http.request.id = request_id,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let caller = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        // A context without a valid span (no or a malformed header) makes
        // this span a root.
        let _ = span.set_parent(caller);
    }
    span
}

/// Records the answer's status on a request's span; a 5xx marks it failed.
pub fn record_status(span: &Span, status: u16) {
    span.record("http.response.status_code", status);
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
}

/// The W3C trace context of the current span (`traceparent`, and
/// `tracestate` when the trace carries one), for a call the host makes (an
/// application's): `None` when traces are off.
pub fn trace_context() -> Option<HeaderMap> {
    let context = Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut headers = HeaderMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(&mut headers));
    Some(headers)
}

/// The current trace's id (32 lowercase hex digits), when traces are on.
pub fn trace_id() -> Option<String> {
    let context = Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| span_context.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn spans_go_to_the_collectors_traces_path() {
        assert_eq!(traces_url("http://collector:4318").unwrap(), "http://collector:4318/v1/traces");
        assert_eq!(traces_url("http://collector:4318/").unwrap(), "http://collector:4318/v1/traces");
        assert_eq!(traces_url("https://otel.example.com/otlp").unwrap(), "https://otel.example.com/otlp/v1/traces");
        assert_eq!(traces_url("http://collector:4318/v1/traces").unwrap(), "http://collector:4318/v1/traces");
        for bad in ["collector:4318", "grpc://collector:4317", "http://", ""] {
            let error = traces_url(bad).unwrap_err();
            assert!(error.contains("telemetry.otlp_endpoint"), "{bad}: {error}");
        }
    }
}
