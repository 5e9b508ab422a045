//! OpenTelemetry traces over OTLP (SPEC §15): the binary exports to an
//! OTLP/HTTP receiver started here, which decodes each export with the
//! OpenTelemetry project's own protobuf types (`opentelemetry-proto`), and
//! the tests read the tree of spans: one per request, continuing the
//! caller's `traceparent`, with the store, Redis, handler and application
//! calls as its children, and the application handed the context of its
//! call's span, never the caller's header.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::json;

use crate::services;
use crate::support::{Server, Setup};

const KEY: &str = "traces-key";
/// The caller's trace and span (W3C `traceparent`).
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Exported {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    kind: i32,
    service: String,
    attributes: BTreeMap<String, String>,
}

/// An HTTP server on loopback, in this process; stopped on drop.
struct Local {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Local {
    async fn serve(app: axum::Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, task }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An OTLP/HTTP receiver on loopback keeping every span it was sent.
struct Receiver {
    server: Local,
    spans: Arc<Mutex<Vec<Exported>>>,
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(AnyValue::StringValue(text)) => text.clone(),
        Some(AnyValue::IntValue(number)) => number.to_string(),
        Some(AnyValue::BoolValue(flag)) => flag.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

impl Receiver {
    async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let kept = kept.clone();
                async move {
                    assert_eq!(headers["content-type"], "application/x-protobuf", "OTLP/HTTP with protobuf");
                    let export = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
                    let mut kept = kept.lock().unwrap();
                    for resource in export.resource_spans {
                        let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
                        let service = attributes
                            .iter()
                            .find(|kv| kv.key == "service.name")
                            .map(|kv| text(kv.value.as_ref()))
                            .unwrap_or_default();
                        for span in resource.scope_spans.into_iter().flat_map(|scope| scope.spans) {
                            kept.push(Exported {
                                name: span.name,
                                trace_id: hex(&span.trace_id),
                                span_id: hex(&span.span_id),
                                parent_span_id: hex(&span.parent_span_id),
                                kind: span.kind,
                                service: service.clone(),
                                attributes: span
                                    .attributes
                                    .iter()
                                    .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                                    .collect(),
                            });
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        ExportTraceServiceResponse::default().encode_to_vec(),
                    )
                }
            }),
        );
        Self { server: Local::serve(app).await, spans }
    }

    /// Waits for the spans of the trace whose root span `root` picks.
    async fn trace(&self, root: impl Fn(&Exported) -> bool) -> (Exported, Vec<Exported>) {
        for _ in 0..200 {
            let spans = self.spans.lock().unwrap().clone();
            if let Some(found) = spans.iter().find(|span| root(span)).cloned() {
                let tree = descendants(&spans, &found);
                return (found, tree);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no such span exported; got {:#?}", self.spans.lock().unwrap());
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every span below `root`, children before grandchildren.
fn descendants(spans: &[Exported], root: &Exported) -> Vec<Exported> {
    let mut found = Vec::new();
    let mut parents = vec![root.span_id.clone()];
    while let Some(parent) = parents.pop() {
        for span in spans.iter().filter(|span| span.parent_span_id == parent) {
            parents.push(span.span_id.clone());
            found.push(span.clone());
        }
    }
    found
}

/// An application on loopback answering chat completions, keeping the
/// `traceparent` of every call.
struct Application {
    server: Local,
    traceparents: Arc<Mutex<Vec<String>>>,
}

impl Application {
    async fn start() -> Self {
        let traceparents = Arc::new(Mutex::new(Vec::new()));
        let kept = traceparents.clone();
        let app = axum::Router::new().route(
            "/chat/completions",
            axum::routing::post(move |headers: HeaderMap| {
                let kept = kept.clone();
                async move {
                    for name in ["traceparent", "tracestate"] {
                        let sent = headers.get_all(name).iter().map(|v| format!("{name}: {}", v.to_str().unwrap()));
                        kept.lock().unwrap().extend(sent);
                    }
                    axum::Json(json!({
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "echo",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": "hi"}}]
                    }))
                }
            }),
        );
        Self { server: Local::serve(app).await, traceparents }
    }
}

struct Fixture {
    _setup: Setup,
    server: Server,
    receiver: Receiver,
    application: Application,
    _redis: services::Redis,
}

impl Fixture {
    async fn start() -> Option<Self> {
        let redis = services::redis()?;
        let receiver = Receiver::start().await;
        let application = Application::start().await;
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"traced\"\nroles = [\"user\"]\n\
             [redis]\nurl = \"{redis}\"\nkey_prefix = \"traces:\"\n\
             [telemetry]\notlp_endpoint = \"{otlp}\"\nservice_name = \"dial-host-under-test\"\n\
             [applications.echo]\nendpoint = \"{app}/chat/completions\"\n",
            redis = redis.url,
            otlp = receiver.server.url,
            app = application.server.url,
        ));
        // Export every 50 ms instead of every 5 s (the SDK reads OTEL_BSP_*).
        let server = setup.start(Some(&config), &[("OTEL_BSP_SCHEDULE_DELAY", "50")]);
        Some(Self { _setup: setup, server, receiver, application, _redis: redis })
    }
}

fn names(spans: &[Exported]) -> Vec<&str> {
    spans.iter().map(|span| span.name.as_str()).collect()
}

#[tokio::test]
async fn a_v2_put_is_one_trace_of_store_redis_and_handler_calls_continuing_the_callers() {
    let Some(fixture) = Fixture::start().await else { return };
    let client = fixture.server.client();
    let bucket = client.get("/v1/bucket", &[("Api-Key", KEY)]).await.json()["bucket"].as_str().unwrap().to_string();
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let skill = b"---\nname: pdf-tools\ndescription: Reads PDFs.\n---\n# pdf-tools\n";
    let put = client
        .put_files(
            &format!("/v2/skills/{bucket}/team/pdf-tools"),
            &[("Api-Key", KEY), ("traceparent", &traceparent)],
            &[("SKILL.md", skill), ("scripts/run.py", b"print(1)\n")],
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.body);

    let (root, tree) = fixture
        .receiver
        .trace(|span| span.kind == SpanKind::Server as i32 && span.attributes["http.request.method"] == "PUT")
        .await;
    assert_eq!(root.name, "PUT /v2/{*path}");
    assert_eq!((root.trace_id.as_str(), root.parent_span_id.as_str()), (CALLER_TRACE, CALLER_SPAN), "continued");
    assert_eq!(root.service, "dial-host-under-test");
    assert_eq!(root.attributes["http.response.status_code"], "200");
    assert_eq!(root.attributes["http.request.id"], put.headers["x-request-id"].to_str().unwrap());

    let children: Vec<&Exported> = tree.iter().filter(|span| span.parent_span_id == root.span_id).collect();
    let child_names: Vec<&str> = children.iter().map(|span| span.name.as_str()).collect();
    for wanted in ["store put", "handler check"] {
        assert!(child_names.contains(&wanted), "no {wanted:?} below the request: {child_names:?}");
    }
    assert!(child_names.iter().any(|name| name.starts_with("redis ")), "no Redis command: {child_names:?}");
    assert!(child_names.iter().any(|name| name.starts_with("store get") || *name == "store head"), "{child_names:?}");
    assert!(tree.iter().all(|span| span.trace_id == CALLER_TRACE), "one trace: {tree:#?}");
    assert!(tree.iter().all(|span| span.kind == SpanKind::Client as i32 || span.name.starts_with("handler")));
    let handler = children.iter().find(|span| span.name == "handler check").unwrap();
    assert!(handler.attributes["handler.type"].starts_with("skill@"), "{:?}", handler.attributes);
    // Only the attributes the host names: no thread ids or source locations.
    assert!(!handler.attributes.keys().any(|key| key.starts_with("thread.") || key.starts_with("code.")));
    // Traces name no resource: no path or bucket on any span.
    for span in std::iter::once(&root).chain(&tree) {
        for value in span.attributes.values() {
            assert!(!value.contains(&bucket) && !value.contains("pdf-tools"), "{span:?}");
        }
    }

    // A read is a trace of its own, a new root when the caller sends no (or
    // a malformed) traceparent.
    let get = client
        .get(
            &format!("/v2/skills/{bucket}/team/pdf-tools/files/SKILL.md"),
            &[("Api-Key", KEY), ("traceparent", "00-zz")],
        )
        .await;
    assert_eq!(get.status, 200);
    let id = get.headers["x-request-id"].to_str().unwrap().to_string();
    let (root, tree) = fixture.receiver.trace(|span| span.attributes.get("http.request.id") == Some(&id)).await;
    assert_eq!(root.parent_span_id, "", "a root span");
    assert_ne!(root.trace_id, CALLER_TRACE);
    assert!(names(&tree).iter().any(|name| name.starts_with("store ")), "{:?}", names(&tree));

    // Probes are not traced.
    assert_eq!(client.get("/health", &[]).await.status, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spans = fixture.receiver.spans.lock().unwrap().clone();
    assert!(!spans.iter().any(|span| span.name.contains("/health")), "{:?}", names(&spans));
    // Background work (lock renewals, the sweep) starts no trace: every
    // root is a request.
    let roots: Vec<&Exported> = spans.iter().filter(|span| span.parent_span_id.is_empty()).collect();
    assert!(roots.iter().all(|span| span.kind == SpanKind::Server as i32), "{roots:#?}");
}

#[tokio::test]
async fn a_deployment_call_hands_the_application_its_own_span_never_the_callers_header() {
    let Some(fixture) = Fixture::start().await else { return };
    let client = fixture.server.client();
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let body = json!({"messages": [{"role": "user", "content": "hello"}]}).to_string();
    let call = client
        .post(
            "/openai/deployments/echo/chat/completions",
            &[
                ("Api-Key", KEY),
                ("traceparent", &traceparent),
                ("tracestate", "caller=1"),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(call.status, 200, "{}", call.body);

    let (root, tree) = fixture
        .receiver
        .trace(|span| span.kind == SpanKind::Server as i32 && span.attributes["http.route"].contains("deployments"))
        .await;
    assert_eq!((root.trace_id.as_str(), root.parent_span_id.as_str()), (CALLER_TRACE, CALLER_SPAN));
    let upstream = tree
        .iter()
        .find(|span| span.name == "upstream chat_completions")
        .unwrap_or_else(|| panic!("no upstream span: {:?}", names(&tree)));
    assert_eq!(upstream.parent_span_id, root.span_id, "a child of the request");
    assert_eq!(upstream.kind, SpanKind::Client as i32);
    assert_eq!(upstream.attributes["dial.deployment"], "echo");
    assert_eq!(upstream.attributes["http.response.status_code"], "200");

    let sent = fixture.application.traceparents.lock().unwrap().clone();
    // The call's own span, in the caller's trace, with the trace's state.
    let own = format!("traceparent: 00-{CALLER_TRACE}-{}-01", upstream.span_id);
    assert_eq!(sent, vec![own, "tracestate: caller=1".to_string()]);
    assert_ne!(sent[0], format!("traceparent: {traceparent}"));
}

#[test]
fn an_endpoint_that_is_not_otlp_http_stops_the_start_naming_the_setting() {
    let setup = Setup::new();
    let config = setup.config("[telemetry]\notlp_endpoint = \"collector:4317\"\n");
    for command in ["serve", "check-config"] {
        let (ok, stdout, stderr) = setup.run(&[command, "--config", config.to_str().unwrap()], &[]);
        assert!(!ok, "{command}: {stdout}");
        assert!(stderr.contains("telemetry.otlp_endpoint must be an http:// or https:// URL"), "{command}: {stderr}");
    }
}
