//! What traces cost (issue 43): the same requests against three servers in
//! one run, round-robin so drift hits each alike —
//!
//! - `before`: a build without spans (`BENCH_BASELINE_BINARY`, e.g. the
//!   release binary of the commit before them; the column is left out when
//!   unset),
//! - `off`: this build, `telemetry.otlp_endpoint` unset (the default),
//! - `on`: this build exporting every span over OTLP/HTTP to a receiver in
//!   this process that decodes nothing and answers 200.
//!
//! Requests, sequential on one keep-alive connection each: a whole PUT of a
//! small skill (store, handler and lock spans), a GET of one of its files,
//! and a chat completion through a configured application (an upstream in
//! this process). Reported per request: p50, p99 and the server's CPU time
//! (user + system from `/proc`), and each as a ratio to `off`.
//!
//! `cargo bench -p dial-host --bench traces` prints a Markdown table for
//! `docs/benchmarks.md`.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{API_KEY, ServerProcess, cpu_model, load_average, micros, nproc, percentile};

const COMMAND: &str = "cargo bench -p dial-host --bench traces";
const ROUNDS: usize = 5;
const PER_ROUND: usize = 200;
const WARMUP: usize = 50;

struct Variant {
    name: &'static str,
    server: ServerProcess,
    bucket: String,
    _dir: tempfile::TempDir,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    println!("## `{COMMAND}`");
    println!();
    println!("machine: {}, nproc {}, load average before: {}", cpu_model(), nproc(), load_average());
    println!();
    let upstream = start_upstream().await;
    let (receiver, exported_bytes) = start_receiver().await;
    let application = format!("[applications.echo]\nendpoint = \"{upstream}/chat/completions\"\n");
    let mut specs: Vec<(&'static str, PathBuf, String)> = Vec::new();
    if let Some(before) = std::env::var_os("BENCH_BASELINE_BINARY") {
        specs.push(("before", before.into(), application.clone()));
    }
    specs.push(("off", common::binary(), application.clone()));
    specs.push(("on", common::binary(), format!("{application}\n[telemetry]\notlp_endpoint = \"{receiver}\"\n")));
    let client = reqwest::Client::builder().tcp_nodelay(true).build().unwrap();
    let mut variants = Vec::new();
    for (name, binary, extra) in specs {
        let dir = tempfile::tempdir().unwrap();
        // At `info`, as in production: every request writes its access-log line.
        let server = ServerProcess::start_binary(&binary, dir.path(), &extra, "info");
        let bucket = server.bucket(&client).await;
        variants.push(Variant { name, server, bucket, _dir: dir });
    }

    println!("| request | server | p50 | p99 | CPU per request | p50 / off | CPU / off |");
    println!("|---|---|---|---|---|---|---|");
    for request in [Request::Put, Request::GetFile, Request::Chat] {
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
        let mut cpu: Vec<Duration> = vec![Duration::ZERO; variants.len()];
        for variant in &variants {
            request.prepare(&client, variant).await;
            for call in 0..WARMUP {
                request.send(&client, variant, call).await;
            }
        }
        for round in 0..ROUNDS {
            for (index, variant) in variants.iter().enumerate() {
                let cpu_before = cpu_time(variant.server.pid());
                for call in 0..PER_ROUND {
                    let started = Instant::now();
                    request.send(&client, variant, round * PER_ROUND + call).await;
                    times[index].push(started.elapsed());
                }
                cpu[index] += cpu_time(variant.server.pid()) - cpu_before;
            }
        }
        let calls = (ROUNDS * PER_ROUND) as u32;
        let off = variants.iter().position(|variant| variant.name == "off").unwrap();
        for times in &mut times {
            times.sort();
        }
        let (off_p50, off_cpu) = (percentile(&times[off], 0.5), cpu[off] / calls);
        for (index, variant) in variants.iter().enumerate() {
            let (p50, p99, per_call) =
                (percentile(&times[index], 0.5), percentile(&times[index], 0.99), cpu[index] / calls);
            println!(
                "| {} | {} | {} | {} | {} | {:.2} | {:.2} |",
                request.name(),
                variant.name,
                micros(p50),
                micros(p99),
                micros(per_call),
                p50.as_secs_f64() / off_p50.as_secs_f64(),
                per_call.as_secs_f64() / off_cpu.as_secs_f64(),
            );
        }
    }
    println!();
    println!(
        "{ROUNDS} rounds of {PER_ROUND} sequential requests per server after {WARMUP} warm-up ones, the servers in \
         turn each round; CPU = the server process's user + system time over the calls / calls. The `on` server \
         exported {} KiB of OTLP protobuf.",
        exported_bytes.load(Ordering::Relaxed) / 1024
    );
    println!("load average after: {}", load_average());
}

#[derive(Clone, Copy)]
enum Request {
    Put,
    GetFile,
    Chat,
}

const SKILL_MD: &str = "---\nname: bench-skill\ndescription: A skill for the traces bench.\n---\n# bench\n";

impl Request {
    fn name(self) -> &'static str {
        match self {
            Self::Put => "PUT a small skill (2 files)",
            Self::GetFile => "GET one file of a skill",
            Self::Chat => "chat completion through an application",
        }
    }

    async fn prepare(self, client: &reqwest::Client, variant: &Variant) {
        if let Self::GetFile = self {
            put(client, variant, "team/read-me").await;
        }
    }

    async fn send(self, client: &reqwest::Client, variant: &Variant, call: usize) {
        match self {
            Self::Put => put(client, variant, &format!("team/s{}", call % 50)).await,
            Self::GetFile => {
                let url = format!("{}/v2/skills/{}/team/read-me/files/SKILL.md", variant.server.url, variant.bucket);
                let reply = client.get(url).header("Api-Key", API_KEY).send().await.unwrap();
                assert_eq!(reply.status().as_u16(), 200);
                std::hint::black_box(reply.bytes().await.unwrap());
            }
            Self::Chat => {
                let url = format!("{}/openai/deployments/echo/chat/completions", variant.server.url);
                let body = serde_json::json!({"model": "bench", "messages": [{"role": "user", "content": "hi"}]});
                let reply = client.post(url).header("Api-Key", API_KEY).json(&body).send().await.unwrap();
                assert_eq!(reply.status().as_u16(), 200);
                std::hint::black_box(reply.bytes().await.unwrap());
            }
        }
    }
}

async fn put(client: &reqwest::Client, variant: &Variant, path: &str) {
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(SKILL_MD.as_bytes()).file_name("SKILL.md"))
        .part("file", reqwest::multipart::Part::bytes(&b"print(1)\n"[..]).file_name("scripts/run.py"));
    let url = format!("{}/v2/skills/{}/{path}", variant.server.url, variant.bucket);
    let reply = client.put(url).header("Api-Key", API_KEY).multipart(form).send().await.unwrap();
    assert_eq!(reply.status().as_u16(), 200, "{}", reply.text().await.unwrap());
}

/// User + system time of a process so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

/// A chat-completions application answering at once.
async fn start_upstream() -> String {
    let app = axum::Router::new().route(
        "/chat/completions",
        axum::routing::post(|| async {
            axum::Json(serde_json::json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "bench",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// An OTLP/HTTP receiver that counts what it is sent and answers 200.
async fn start_receiver() -> (String, Arc<AtomicU64>) {
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = bytes.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(body.len() as u64, Ordering::Relaxed);
                ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, bytes)
}
