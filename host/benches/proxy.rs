//! The latency the chat-completions proxy adds (issue: deployments), measured
//! against calling the same upstream directly in the same run.
//!
//! A minimal upstream (axum, in this process) answers a chat completion
//! whole, or as an SSE stream of a few events. The real `dial-host` binary is
//! configured with it as an application. 2 000 sequential calls on one
//! keep-alive connection go to the upstream directly, then 2 000 through
//! `POST /openai/deployments/bench/chat/completions` (each minting, granting
//! and revoking a per-request key), non-streaming (full response time) and
//! streaming (time to the first event). Reported: p50 and p99 of each, and
//! the difference at p50.
//!
//! Then resolution (issue: consent and resource dependencies): the same
//! whole-response call through an application declaring 100 consented
//! records (50 required READ+WRITE in the caller's own bucket, 50 optional
//! READ in `public`, each an access check), against the plain application.
//!
//! `cargo bench -p dial-host --bench proxy` prints a Markdown table for
//! `docs/benchmarks.md`.

mod common;

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use common::{API_KEY, ServerProcess, load_average, micros, nproc, percentile};
use futures_util::StreamExt;

const COMMAND: &str = "cargo bench -p dial-host --bench proxy";
const CALLS: usize = 2000;
const WARMUP: usize = 200;
const ADMIN_KEY: &str = "bench-admin";
const RECORDS: usize = 100;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    println!("## `{COMMAND}`");
    println!();
    println!("machine: nproc {}, load average before: {}", nproc(), load_average());
    println!();
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "[keys.{ADMIN_KEY}]\nproject = \"ops\"\nroles = [\"admin\"]\n\n\
         [applications.bench]\nendpoint = \"{upstream}/chat/completions\"\n\n\
         [applications.bench-deps]\nendpoint = \"{upstream}/chat/completions\"\nresource_dependencies = [{}]\n",
        declaration()
    );
    // At `info`, as in production: every call writes its access-log line.
    let server = ServerProcess::start_logging(
        dir.path(),
        &extra,
        &std::env::var("BENCH_LOG_FILTER").unwrap_or_else(|_| "info".into()),
    );
    let client = reqwest::Client::builder().tcp_nodelay(true).build().unwrap();
    let body = serde_json::json!({"model": "bench", "messages": [{"role": "user", "content": "hi"}]});
    let streaming =
        serde_json::json!({"model": "bench", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let direct = format!("{upstream}/chat/completions");
    let proxied = format!("{}/openai/deployments/bench/chat/completions", server.url);

    println!("| case | direct p50 | direct p99 | through the host p50 | through the host p99 | added at p50 |");
    println!("|---|---|---|---|---|---|");
    for (name, request, first_event) in
        [("chat completion, whole response", &body, false), ("streaming, time to first event", &streaming, true)]
    {
        let direct_times = time_calls(&client, &direct, request, first_event).await;
        let proxied_times = time_calls(&client, &proxied, request, first_event).await;
        let (d50, d99) = (percentile(&direct_times, 0.50), percentile(&direct_times, 0.99));
        let (p50, p99) = (percentile(&proxied_times, 0.50), percentile(&proxied_times, 0.99));
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            micros(d50),
            micros(d99),
            micros(p50),
            micros(p99),
            micros(p50.saturating_sub(d50))
        );
    }
    println!();
    println!("{CALLS} calls each after {WARMUP} warm-up calls, sequential, one keep-alive connection per target.");
    println!();

    let consent = format!("{}/v1/consent/bench-deps/admin-consent", server.url);
    let granted = client.post(&consent).header("Api-Key", ADMIN_KEY).send().await.unwrap();
    assert_eq!(granted.status().as_u16(), 200, "{}", granted.text().await.unwrap());
    let declaring = format!("{}/openai/deployments/bench-deps/chat/completions", server.url);
    let plain_times = time_calls(&client, &proxied, &body, false).await;
    let declaring_times = time_calls(&client, &declaring, &body, false).await;
    let (b50, b99) = (percentile(&plain_times, 0.50), percentile(&plain_times, 0.99));
    let (r50, r99) = (percentile(&declaring_times, 0.50), percentile(&declaring_times, 0.99));
    println!("| case | no declaration p50 | p99 | {RECORDS} records p50 | p99 | resolution at p50 | at p99 |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| chat completion through the host, whole response | {} | {} | {} | {} | {} | {} |",
        micros(b50),
        micros(b99),
        micros(r50),
        micros(r99),
        micros(r50.saturating_sub(b50)),
        micros(r99.saturating_sub(b99))
    );
    println!();
    println!("resolution = the difference between the two (same run, same connection); each call reads the");
    println!("consent record and checks the user's reach for every record.");
    println!("load average after: {}", load_average());
    drop(server);
}

/// Sorted durations of `CALLS` sequential calls after a warm-up: the whole
/// response, or (streaming) the first chunk of it.
async fn time_calls(client: &reqwest::Client, url: &str, body: &serde_json::Value, first_event: bool) -> Vec<Duration> {
    let mut times = Vec::with_capacity(CALLS);
    for round in 0..WARMUP + CALLS {
        let start = Instant::now();
        let response = client.post(url).header("Api-Key", API_KEY).json(body).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{url}");
        let elapsed = if first_event {
            let mut stream = response.bytes_stream();
            let first = stream.next().await.expect("an event").unwrap();
            assert!(first.starts_with(b"data: "), "{first:?}");
            let elapsed = start.elapsed();
            while stream.next().await.is_some() {}
            elapsed
        } else {
            std::hint::black_box(response.bytes().await.unwrap());
            start.elapsed()
        };
        if round >= WARMUP {
            times.push(elapsed);
        }
    }
    times.sort();
    times
}

/// A chat-completions upstream: a small JSON answer, or three SSE events.
async fn start_upstream() -> String {
    async fn chat(body: axum::body::Bytes) -> Response {
        let stream = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|b| b["stream"].as_bool());
        if stream == Some(true) {
            let events = [
                "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
                "{\"choices\":[{\"delta\":{\"content\":\"b\"}}]}",
                "[DONE]",
            ]
            .map(|event| Ok::<_, std::io::Error>(axum::body::Bytes::from(format!("data: {event}\n\n"))));
            return ([("content-type", "text/event-stream")], Body::from_stream(futures_util::stream::iter(events)))
                .into_response();
        }
        let answer = serde_json::json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]});
        axum::Json(answer).into_response()
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new().route("/chat/completions", post(chat));
    // Nagle off, as the host does, so neither path waits on delayed ACKs.
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service()).await.unwrap();
    });
    format!("http://{address}")
}

/// `RECORDS` records as TOML inline tables: half required READ+WRITE in the
/// caller's own bucket, half optional READ in `public`.
fn declaration() -> String {
    (0..RECORDS)
        .map(|i| {
            let (path, access, required) = if i % 2 == 0 {
                (format!("files/{{current-user}}/own-{i}/"), "\"READ\", \"WRITE\"", true)
            } else {
                (format!("files/public/library-{i}/"), "\"READ\"", false)
            };
            format!(
                "{{ kind = \"dial.resourceLink\", link_id = \"l{i}\", target = {{ path = \"{path}\" }}, \
                 access = [{access}], required = {required} }}"
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
