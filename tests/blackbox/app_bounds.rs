//! What a call to an application can cost the host, and what its key can
//! still do (issue 38, items 2, 4, 5, 8 and 12): stored definitions are
//! parsed once for concurrent callers and kept within a byte bound, a grant
//! or a call with many links reads the access state once, an upload an
//! application started commits only while its key lives, a stored
//! application's id carries 128 bits of its URL, a project cannot share an
//! application's bucket, and an MCP refusal answers its request's id.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::support::{Client, Server, Setup, sample, scrape, store_operations};

const KEY: &str = "app-bounds-project-key";

/// An application the test plays: each call it gets hands the test its
/// per-request key and waits until the test lets it answer.
struct HeldApp {
    url: String,
    calls: mpsc::UnboundedReceiver<(String, oneshot::Sender<()>)>,
}

impl HeldApp {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (sender, calls) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let sender = sender.clone();
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut read = BufReader::new(read);
                    let (mut key, mut length) = (String::new(), 0usize);
                    loop {
                        let mut line = String::new();
                        if read.read_line(&mut line).await.unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        let (name, value) = line.split_once(':').unwrap_or_default();
                        match name.to_ascii_lowercase().as_str() {
                            "api-key" => key = value.trim().to_string(),
                            "content-length" => length = value.trim().parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = read.read_exact(&mut body).await;
                    let (answer, answered) = oneshot::channel();
                    if sender.send((key, answer)).is_err() {
                        return;
                    }
                    let _ = tokio::time::timeout(Duration::from_secs(60), answered).await;
                    let body = json!({"choices": [{"message": {"role": "assistant", "content": "done"}}]}).to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = write.write_all(format!("{head}{body}").as_bytes()).await;
                });
            }
        });
        Self { url, calls }
    }

    /// The next call's key, and what lets it answer.
    async fn next_call(&mut self) -> (String, oneshot::Sender<()>) {
        tokio::time::timeout(Duration::from_secs(30), self.calls.recv()).await.expect("no call came").unwrap()
    }
}

struct Fixture {
    _setup: Setup,
    server: Server,
    client: Client,
    app: HeldApp,
    /// The project's bucket.
    bucket: String,
}

impl Fixture {
    async fn start(extra: &str) -> Self {
        let app = HeldApp::start().await;
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"team\"\nroles = [\"user\"]\n\
             [proxy]\nallowed_destinations = [\"127.0.0.1\"]\n{extra}\n\
             [applications.app]\nendpoint = \"{}/chat/completions\"\n",
            app.url
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let bucket = client.get("/v1/bucket", &[("Api-Key", KEY)]).await.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, server, client, app, bucket }
    }

    /// Calls `deployment` in the background; the call lasts until the
    /// application is let answer.
    fn call(&self, deployment: &str, body: Value) -> tokio::task::JoinHandle<u16> {
        let (client, path) = (self.client.clone(), format!("/openai/deployments/{deployment}/chat/completions"));
        tokio::spawn(async move {
            let headers = [("Api-Key", KEY), ("Content-Type", "application/json")];
            client.post(&path, &headers, &body.to_string()).await.status
        })
    }

    /// Waits until `key` opens nothing any more.
    async fn until_revoked(&self, key: &str) {
        for _ in 0..100 {
            if self.client.get("/v1/bucket", &[("Api-Key", key)]).await.status == 401 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the key outlived its call");
    }
}

fn chat(content: &str) -> Value {
    json!({"messages": [{"role": "user", "content": content}]})
}

/// A multipart body of one file part, in two halves.
fn halves(file_name: &str, content: &[u8]) -> (String, Vec<u8>, Vec<u8>) {
    const BOUNDARY: &str = "held-upload-4f2a";
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend(format!("\r\n--{BOUNDARY}--\r\n").bytes());
    let second = body.split_off(body.len() / 2);
    (format!("multipart/form-data; boundary={BOUNDARY}"), body, second)
}

/// An upload whose body is sent in two halves: the first now, the second
/// when the returned sender is given `()`.
async fn held_upload(
    server: &Server,
    path: &str,
    key: &str,
    file_name: &str,
    content: &[u8],
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<(u16, String)>) {
    let (content_type, first, second) = halves(file_name, content);
    let (go, went) = oneshot::channel::<()>();
    let body = futures_util::stream::once(async move { Ok::<_, std::io::Error>(bytes::Bytes::from(first)) }).chain(
        futures_util::stream::once(async move {
            let _ = went.await;
            Ok::<_, std::io::Error>(bytes::Bytes::from(second))
        }),
    );
    let request = reqwest::Client::new()
        .put(format!("{}{path}", server.url))
        .header("Api-Key", key)
        .header("Content-Type", content_type)
        .body(reqwest::Body::wrap_stream(body));
    let upload = tokio::spawn(async move {
        let reply = request.send().await.expect("the upload was answered");
        (reply.status().as_u16(), reply.text().await.unwrap_or_default())
    });
    // The first half has reached the host.
    tokio::time::sleep(Duration::from_millis(300)).await;
    (go, upload)
}

/// Item 5: uploads an application starts with its key during its call and
/// finishes after the call ended — a whole v2 PUT, a v2 file PUT, a v1
/// file — are refused (401 naming the key) and store nothing; and an
/// upload slower than the key's life stops when the key expires, though
/// the call still runs.
#[tokio::test]
async fn an_upload_commits_only_while_the_key_it_came_with_lives() {
    let mut f = Fixture::start("[per_request_key]\nttl_seconds = 4\n").await;
    let user = [("Api-Key", KEY)];
    let appdata = format!("{}/appdata/app", f.bucket);
    let skill = b"---\nname: late\ndescription: Written after the call.\n---\n# late\n";
    let existing = format!("/v2/skills/{appdata}/kept");
    let made = f.client.put_files(&existing, &user, &[("SKILL.md", &skill[..])]).await;
    assert_eq!(made.status, 200, "{}", made.body);

    let call = f.call("app", chat("upload"));
    let (key, answer) = f.app.next_call().await;
    let uploads = [
        (format!("/v2/skills/{appdata}/late"), "SKILL.md"),
        (format!("{existing}/files/late.md"), "late.md"),
        (format!("/v1/files/{appdata}/late.txt"), "late.txt"),
    ];
    let mut held = Vec::new();
    for (path, file) in &uploads {
        held.push(held_upload(&f.server, path, &key, file, skill).await);
    }
    answer.send(()).unwrap();
    assert_eq!(call.await.unwrap(), 200);
    f.until_revoked(&key).await;
    for ((path, _), (go, upload)) in uploads.iter().zip(held) {
        go.send(()).unwrap();
        let (status, body) = upload.await.unwrap();
        assert_eq!(status, 401, "{path}: the upload committed after its key was revoked: {body}");
        assert!(body.contains("revoked or expired"), "{path}: {body}");
    }
    assert_eq!(f.client.get(&format!("/v2/skills/{appdata}/late"), &user).await.status, 404);
    assert_eq!(f.client.get(&format!("{existing}/files/late.md"), &user).await.status, 404);
    assert_eq!(f.client.get(&format!("/v1/files/{appdata}/late.txt"), &user).await.status, 404);

    // The key expires (4 s) while its call still runs: the upload stops there.
    let call = f.call("app", chat("slow upload"));
    let (key, answer) = f.app.next_call().await;
    let (go, upload) = held_upload(&f.server, &format!("/v1/files/{appdata}/slow.txt"), &key, "slow.txt", skill).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    go.send(()).unwrap();
    let (status, body) = upload.await.unwrap();
    assert_eq!(status, 401, "the upload outlived its key: {body}");
    answer.send(()).unwrap();
    let _ = call.await;
    assert_eq!(f.client.get(&format!("/v1/files/{appdata}/slow.txt"), &user).await.status, 404);
}

/// Item 4: a grant asking more than the key may take is refused before any
/// URL is looked at (20 000 URLs: no store read), and the URLs of one
/// grant — like the attachments of one call — are decided on one read of
/// the access state (999 public URLs: one read of the rules, not 999).
#[tokio::test]
async fn grants_and_attachments_read_the_access_state_once() {
    let mut f = Fixture::start("").await;
    let call = f.call("app", chat("grant"));
    let (key, answer) = f.app.next_call().await;
    let grant = |count: usize| {
        let urls: Vec<Value> = (0..count)
            .map(|n| json!({"url": format!("files/public/shared/{n}.txt"), "permissions": ["READ"]}))
            .collect();
        json!({"receiver": "app", "resourcePermissions": urls}).to_string()
    };
    let reads = |text: &str| store_operations(text, &["get", "head", "get_opts"]);
    let path = "/v1/ops/resource/per-request-permissions/grant";
    let headers = [("Api-Key", key.as_str()), ("Content-Type", "application/json")];

    let before = scrape(&f.client).await;
    let refused = f.client.post(path, &headers, &grant(20_000)).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("changes one key may take"), "{}", refused.body);
    let cost = reads(&scrape(&f.client).await) - reads(&before);
    assert!(cost <= 2.0, "a grant refused for its size read the store {cost} times");

    let before = scrape(&f.client).await;
    let granted = f.client.post(path, &headers, &grant(999)).await;
    assert_eq!(granted.status, 200, "{}", granted.body);
    let cost = reads(&scrape(&f.client).await) - reads(&before);
    assert!(cost <= 5.0, "a grant of 999 public URLs read the store {cost} times");
    answer.send(()).unwrap();
    let _ = call.await;

    let attachments: Vec<Value> =
        (0..999).map(|n| json!({"url": format!("files/public/shared/{n}.txt"), "type": "text/plain"})).collect();
    let message =
        json!({"messages": [{"role": "user", "content": "x", "custom_content": {"attachments": attachments}}]});
    let before = scrape(&f.client).await;
    let call = f.call("app", message);
    let (_, answer) = f.app.next_call().await;
    let cost = reads(&scrape(&f.client).await) - reads(&before);
    answer.send(()).unwrap();
    assert_eq!(call.await.unwrap(), 200);
    assert!(cost <= 5.0, "a call with 999 public attachments read the store {cost} times");
}

/// A stored application's definition of `bytes` (its properties padded).
fn definition(endpoint: &str, bytes: usize) -> String {
    json!({"endpoint": endpoint, "application_properties": {"padding": "x".repeat(bytes)}}).to_string()
}

/// Item 2, on the defaults: forty concurrent first calls to a 3.5 MiB
/// stored definition read and parse it once (the review saw +728 MiB for
/// forty calls to 15 MiB); parsed definitions are kept within
/// `proxy.definition_cache_mib` (64), whatever their number; one over
/// `proxy.max_definition_bytes` (4 MiB) is refused, named, unparsed.
#[tokio::test]
async fn stored_definitions_are_parsed_once_and_kept_within_their_bound() {
    let f = Fixture::start("").await;
    let user = [("Api-Key", KEY)];
    // Refused at connect: the calls cost what resolving them costs.
    let closed = "http://127.0.0.1:9/chat/completions";
    let size = 7 << 19;
    let big = format!("/v1/applications/{}/big-0", f.bucket);
    assert_eq!(f.client.put_body(&big, &user, definition(closed, size).as_bytes()).await.status, 200);
    let baseline = f.server.reset_peak_rss();
    let calls: Vec<_> = (0..40).map(|_| f.call(&format!("applications/{}/big-0", f.bucket), chat("x"))).collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), 502);
    }
    let grown = f.server.peak_rss_kib().saturating_sub(baseline);
    eprintln!("40 concurrent first calls to a 3.5 MiB definition: peak RSS +{grown} KiB");
    assert!(grown < 64 << 10, "40 concurrent calls to a 3.5 MiB definition grew the server by {grown} KiB");

    for n in 1..12 {
        let copy = format!("/v1/applications/{}/big-{n}", f.bucket);
        assert_eq!(f.client.put_body(&copy, &user, definition(closed, size).as_bytes()).await.status, 200);
        assert_eq!(f.call(&format!("applications/{}/big-{n}", f.bucket), chat("x")).await.unwrap(), 502);
    }
    let kept = sample(&scrape(&f.client).await, "dial_host_definition_cache_bytes", &[]);
    assert!(kept > 0.0 && kept <= f64::from(64u32 << 20), "twelve 3.5 MiB definitions parsed hold {kept} bytes");

    let huge = format!("/v1/applications/{}/huge", f.bucket);
    assert_eq!(f.client.put_body(&huge, &user, definition(closed, 5 << 20).as_bytes()).await.status, 200);
    let reply = f
        .client
        .post(
            &format!("/openai/deployments/applications/{}/huge/chat/completions", f.bucket),
            &[("Api-Key", KEY), ("Content-Type", "application/json")],
            &chat("x").to_string(),
        )
        .await;
    assert_eq!(reply.status, 500, "{}", reply.body);
    assert!(reply.body.contains("proxy.max_definition_bytes"), "{}", reply.body);
}

/// Item 8: a stored application's own bucket and appdata folder are named
/// by 128 bits of its URL's hash (a second preimage of 48 was hours of GPU
/// time), and a project key cannot be named like an application.
#[tokio::test]
async fn application_ids_cannot_be_taken() {
    let mut f = Fixture::start("").await;
    let stored = format!("/v1/applications/{}/team/bot", f.bucket);
    let definition = json!({"endpoint": format!("{}/chat/completions", f.app.url)}).to_string();
    assert_eq!(f.client.put_body(&stored, &[("Api-Key", KEY)], definition.as_bytes()).await.status, 200);
    let call = f.call(&format!("applications/{}/team/bot", f.bucket), chat("x"));
    let (key, answer) = f.app.next_call().await;
    let bucket = f.client.get("/v1/bucket", &[("Api-Key", &key)]).await.json();
    answer.send(()).unwrap();
    assert_eq!(call.await.unwrap(), 200);
    let appdata = bucket["appdata"].as_str().unwrap();
    let id = appdata.rsplit('/').next().unwrap();
    let digest = id.strip_prefix("bot-").unwrap_or_else(|| panic!("{appdata}"));
    assert!(digest.len() == 32 && digest.bytes().all(|b| b.is_ascii_hexdigit()), "{appdata}");

    for (project, named) in [("app", "configured application app"), ("bot-0123456789ab", "stored application's id")] {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.k1]\nproject = \"{project}\"\n\
             [applications.app]\nendpoint = \"http://127.0.0.1:9/chat\"\n"
        ));
        let (ok, _, stderr) = setup.run(&["check-config", "--config", config.to_str().unwrap()], &[]);
        assert!(!ok, "{project}: a project sharing an application's bucket was accepted");
        assert!(stderr.contains(named), "{project}: {stderr}");
    }
}

/// Item 12: an MCP request refused for its credentials answers with a
/// JSON-RPC error carrying the request's own id.
#[tokio::test]
async fn an_mcp_refusal_answers_the_requests_id() {
    let f = Fixture::start("").await;
    let request = json!({"jsonrpc": "2.0", "id": "call-7", "method": "tools/list"}).to_string();
    for headers in [vec![], vec![("Api-Key", "no-such-key")]] {
        let mut headers = headers;
        headers.push(("Content-Type", "application/json"));
        let reply = f.client.post("/v1/deployments/app/mcp", &headers, &request).await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert_eq!(reply.json()["id"], "call-7", "{}", reply.body);
        assert_eq!(reply.json()["jsonrpc"], "2.0");
    }
}
