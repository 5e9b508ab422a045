//! Calling applications through the host (SPEC §8): the official OpenAI,
//! Anthropic and MCP clients against real mock upstreams that call back into
//! the host with the per-request key they received.

use serde_json::{Value, json};

use crate::support::{JwtUser as User, Server, Setup};
use crate::upstream::{McpServer, MockApp, run_client_async};

const HS_SECRET: &str = "deployments-secret";

struct Fixture {
    _setup: Setup,
    server: Server,
    mock: MockApp,
    mcp: McpServer,
    alice: User,
    bob: User,
}

impl Fixture {
    /// `None` when the Python clients are not installed (outside CI).
    async fn start() -> Option<Self> {
        let mock = MockApp::start(None)?;
        let mcp = McpServer::start(None)?;
        let (app, tools) = (mock.url(), mcp.url());
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let setup = Setup::new();
        let config = setup.config(&format!(
            r#"[encryption]
secret = "s"
[identity]
hs256_secret = "{HS_SECRET}"
[proxy]
allowed_destinations = ["127.0.0.1"]
[applications.echo]
endpoint = "{app}/chat/completions"
interfaces.responses.endpoint = "{app}/responses"
interfaces.anthropic_messages.endpoint = "{app}/v1/messages"
[applications.helper]
endpoint = "{app}/chat/completions"
[applications.admins-only]
endpoint = "{app}/chat/completions"
user_roles = ["admin"]
[applications.down]
endpoint = "http://127.0.0.1:{closed}/chat/completions"
[applications.tools]
mcp.endpoint = "{tools}/mcp"
[applications.tools-moved]
mcp.endpoint = "{tools}/old-mcp"
[applications.tools-elsewhere]
mcp.endpoint = "{tools}/elsewhere-mcp"
[applications.tools-keyless]
mcp.endpoint = "{tools}/mcp"
mcp.forward_per_request_key = false
"#
        ));
        let server = setup.start(Some(&config), &[]);
        mock.set_host_url(&server.url).await;
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let bob = User::new(&client, HS_SECRET, "bob", &["user"]).await;
        Some(Self { _setup: setup, server, mock, mcp, alice, bob })
    }

    fn openai(&self, deployment: &str) -> String {
        format!("{}/openai/deployments/{deployment}", self.server.url)
    }

    fn anthropic(&self, deployment: &str) -> String {
        format!("{}/anthropic/deployments/{deployment}", self.server.url)
    }

    fn mcp_url(&self, deployment: &str) -> String {
        format!("{}/v1/deployments/{deployment}/mcp", self.server.url)
    }

    /// The user's JWT, as an SDK's API key (the client scripts send it as
    /// `Authorization: Bearer` and `Api-Key`).
    fn token(user: &User) -> &str {
        user.token.strip_prefix("Bearer ").unwrap()
    }

    /// Whether a key still opens anything (a revoked key is 401).
    async fn key_status(&self, key: &str) -> u16 {
        self.server.client().get("/v1/bucket", &[("Api-Key", key)]).await.status
    }

    async fn put_file(&self, user: &User, path: &str, content: &str) {
        let url = format!("/v1/files/{}/{path}", user.bucket);
        let reply = self.server.client().put_files(&url, &user.auth(), &[("doc.txt", content.as_bytes())]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}

/// The report the mock application answers with (its assistant text).
fn report(result: &Value) -> &Value {
    assert!(result.get("error").is_none(), "the client failed: {result}");
    &result["report"]
}

fn per_request_key(report: &Value) -> String {
    let key = report["api_key"].as_str().unwrap_or_else(|| panic!("no Api-Key reached the app: {report}"));
    assert_eq!(key.len(), 32, "{key}");
    key.to_string()
}

/// Each SDK, streaming or not, reaches its endpoint with a fresh key the
/// application sees instead of the caller's credentials; the key ends with
/// the call.
#[tokio::test]
async fn the_official_sdks_call_applications_with_a_fresh_key() {
    let Some(f) = Fixture::start().await else { return };
    let token = Fixture::token(&f.alice);
    let (openai, anthropic) = (f.openai("echo"), f.anthropic("echo"));
    let common = ["--api-key", token, "--header", "X-Test=passes", "--header", "Cookie=session=secret"];
    let mut keys = Vec::new();
    for (script, base, extra, path) in [
        ("openai_client.py", &openai, &[][..], "/chat/completions"),
        ("openai_client.py", &openai, &["--stream"][..], "/chat/completions"),
        ("openai_client.py", &openai, &["--responses"][..], "/responses"),
        ("openai_client.py", &openai, &["--responses", "--stream"][..], "/responses"),
        ("anthropic_client.py", &anthropic, &[][..], "/v1/messages"),
        ("anthropic_client.py", &anthropic, &["--stream"][..], "/v1/messages"),
    ] {
        let mut args = vec!["--base-url", base.as_str(), "--message", "hello"];
        args.extend_from_slice(&common);
        args.extend_from_slice(extra);
        let result = run_client_async(script, &args).await;
        let report = report(&result);
        assert_eq!(report["path"], path, "{script} {extra:?}: {report}");
        let key = per_request_key(report);
        assert_ne!(key, token);
        assert_eq!(report["authorization"], Value::Null, "the caller's token never reaches the app");
        assert_eq!(report["cookie"], Value::Null, "nor its cookies");
        assert_eq!(report["x_api_key"], Value::Null);
        assert_eq!(report["x_test"], "passes", "other headers pass");
        keys.push(key);
    }
    let distinct: std::collections::BTreeSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len(), "a fresh key per call");
    for key in &keys {
        assert_eq!(f.key_status(key).await, 401, "the key ended with its call");
    }
}

/// Streamed answers are relayed event by event: the client holds the first
/// chunk while the application has not finished (it waits to be released).
#[tokio::test]
async fn streamed_answers_reach_the_client_before_the_application_finishes() {
    let Some(f) = Fixture::start().await else { return };
    let token = Fixture::token(&f.alice);
    let release = format!("{}/release", f.mock.url());
    let (openai, anthropic) = (f.openai("echo"), f.anthropic("echo"));
    for (script, base, extra) in [
        ("openai_client.py", &openai, &[][..]),
        ("openai_client.py", &openai, &["--responses"][..]),
        ("anthropic_client.py", &anthropic, &[][..]),
    ] {
        let mut args = vec!["--base-url", base.as_str(), "--api-key", token, "--message", "hold", "--stream"];
        args.extend_from_slice(&["--release-url", release.as_str()]);
        args.extend_from_slice(extra);
        let result = run_client_async(script, &args).await;
        assert!(result.get("error").is_none(), "{script} {extra:?}: {result}");
        assert_eq!(result["first_before_release"], true, "{script} {extra:?}: the first event waited: {result}");
    }
}

/// While the user's request is open the application uses its key: it
/// writes its appdata, reads the attachment it was given, cannot touch the
/// rest of the user's bucket, and loses everything when the call ends.
#[tokio::test]
async fn an_application_calls_back_with_its_key() {
    let Some(f) = Fixture::start().await else { return };
    f.put_file(&f.alice, "reports/q1.txt", "quarter one").await;
    let attachment = format!("files/{}/reports/q1.txt", f.alice.bucket);
    let message = format!("appdata user-bucket read:{attachment}");
    let args = [
        "--base-url",
        &f.openai("echo"),
        "--api-key",
        Fixture::token(&f.alice),
        "--message",
        &message,
        "--attachment",
        &attachment,
    ];
    let result = run_client_async("openai_client.py", &args).await;
    let report = report(&result);
    let callbacks = &report["callbacks"];
    let appdata = &callbacks["appdata"];
    assert_eq!(appdata["status"], 200, "{report}");
    assert_eq!(appdata["appdata"], format!("{}/appdata/echo", f.alice.bucket), "{report}");
    assert_ne!(appdata["bucket"], f.alice.bucket.as_str(), "the app owns its own bucket, not the user's");
    assert_eq!((appdata["put_status"].clone(), appdata["get_status"].clone()), (json!(200), json!(200)), "{report}");
    assert_eq!(callbacks["user-bucket"]["put_status"], 403, "{report}");
    let read = &callbacks[format!("read:{attachment}")];
    assert_eq!((read["status"].clone(), read["body"].clone()), (json!(200), json!("quarter one")), "{report}");
    assert_eq!(report["attachments"], json!([attachment]));

    // The user sees what the app wrote; the key opens nothing any more.
    let written = format!("/v1/files/{}/appdata/echo/note.txt", f.alice.bucket);
    assert_eq!(f.server.client().get(&written, &f.alice.auth()).await.status, 200);
    let key = per_request_key(report);
    assert_eq!(f.key_status(&key).await, 401);
    let stolen = format!("/v1/files/{}/stolen.txt", f.alice.bucket);
    assert_eq!(f.server.client().get(&stolen, &f.alice.auth()).await.status, 404, "nothing was written there");
}

/// An attachment the caller cannot read fails the whole call with 403 before
/// the application is contacted.
#[tokio::test]
async fn an_unreadable_attachment_fails_the_call_before_the_upstream() {
    let Some(f) = Fixture::start().await else { return };
    f.put_file(&f.bob, "secret.txt", "bob's").await;
    let before = f.mock.last().await["chat_completions"].clone();
    let attachment = format!("files/{}/secret.txt", f.bob.bucket);
    let args = [
        "--base-url",
        &f.openai("echo"),
        "--api-key",
        Fixture::token(&f.alice),
        "--message",
        "hello",
        "--attachment",
        &attachment,
    ];
    let result = run_client_async("openai_client.py", &args).await;
    assert_eq!(result["status"], 403, "{result}");
    assert!(result["body"].to_string().contains("Access denied to the file"), "{result}");
    assert_eq!(f.mock.last().await["chat_completions"], before, "the application was never called");
}

/// An application calling another deployment with its key: the callee's key
/// carries the same originating user (its appdata is in Alice's bucket).
#[tokio::test]
async fn a_chained_call_carries_the_originating_user() {
    let Some(f) = Fixture::start().await else { return };
    let args = ["--base-url", &f.openai("echo"), "--api-key", Fixture::token(&f.alice), "--message", "chain:helper"];
    let result = run_client_async("openai_client.py", &args).await;
    let chained = &report(&result)["callbacks"]["chain:helper"];
    assert_eq!(chained["status"], 200, "{chained}");
    let callee = &chained["report"];
    assert_eq!(callee["callbacks"]["appdata"]["appdata"], format!("{}/appdata/helper", f.alice.bucket), "{callee}");
    let (caller_key, callee_key) = (per_request_key(report(&result)), per_request_key(callee));
    assert_ne!(caller_key, callee_key, "the callee gets a key of its own");
}

/// Deployment resolution and upstream failures, as clients see them.
#[tokio::test]
async fn deployments_resolve_and_failures_are_relayed() {
    let Some(f) = Fixture::start().await else { return };
    let client = f.server.client();
    let alice = f.alice.auth();
    let body = json!({"model": "x", "messages": [{"role": "user", "content": "status:503"}]}).to_string();
    let chat = |id: &str| format!("/openai/deployments/{id}/chat/completions");
    let as_json = [alice[0], ("Content-Type", "application/json")];
    // The application's own error status and body are relayed.
    let relayed = client.post(&chat("echo"), &as_json, &body).await;
    assert_eq!(relayed.status, 503, "{}", relayed.body);
    assert_eq!(relayed.json()["error"]["message"], "mock error 503");
    // An application nobody answers for: 502 with a JSON error.
    let down = client.post(&chat("down"), &as_json, &body).await;
    assert_eq!(down.status, 502, "{}", down.body);
    assert!(down.json()["error"]["message"].as_str().unwrap().contains("could not be reached"), "{}", down.body);
    // Unknown, not allowed, not JSON, not authenticated.
    assert_eq!(client.post(&chat("nope"), &as_json, &body).await.status, 404);
    assert_eq!(client.post(&chat("admins-only"), &as_json, &body).await.status, 403);
    assert_eq!(client.post(&chat("echo"), &alice, &body).await.status, 415);
    assert_eq!(client.post(&chat("echo"), &[("Content-Type", "application/json")], &body).await.status, 401);

    // A stored application: callable by whoever can read its definition.
    let definition = json!({"endpoint": format!("{}/chat/completions", f.mock.url()), "displayName": "Mine"});
    let stored = format!("/v1/applications/{}/mine", f.alice.bucket);
    assert_eq!(client.put_body(&stored, &alice, definition.to_string().as_bytes()).await.status, 200);
    let id = format!("applications/{}/mine", f.alice.bucket);
    let args = ["--base-url", &f.openai(&id), "--api-key", Fixture::token(&f.alice), "--message", "appdata"];
    let result = run_client_async("openai_client.py", &args).await;
    let appdata = report(&result)["callbacks"]["appdata"]["appdata"].as_str().unwrap().to_string();
    assert!(appdata.starts_with(&format!("{}/appdata/mine-", f.alice.bucket)), "{appdata}");
    let args = ["--base-url", &f.openai(&id), "--api-key", Fixture::token(&f.bob), "--message", "hello"];
    assert_eq!(run_client_async("openai_client.py", &args).await["status"], 403, "bob cannot read it");
}

/// The official MCP client through the host to a real MCP server: tools are
/// listed and called with a fresh key per request; a same-origin redirect
/// keeps the key, a redirect elsewhere is not followed, and a server that
/// is not to get keys gets none.
#[tokio::test]
async fn the_official_mcp_client_reaches_an_mcp_server_through_the_host() {
    let Some(f) = Fixture::start().await else { return };
    let token = Fixture::token(&f.alice);
    // The user's token as a bearer token, as MCP clients send it.
    let bearer = format!("Authorization=Bearer {token}");
    let mcp = |url: String| {
        let bearer = bearer.clone();
        async move { run_client_async("mcp_client.py", &["--url", &url, "--api-key", "", "--header", &bearer]).await }
    };
    for deployment in ["tools", "tools-moved"] {
        let result = mcp(f.mcp_url(deployment)).await;
        assert!(result.get("error").is_none(), "{deployment}: {result}");
        assert_eq!(result["tools"], json!(["add", "whoami", "write"]), "{deployment}: {result}");
        assert_eq!(result["add"], 5, "{deployment}: {result}");
        let key =
            result["whoami"].as_str().unwrap_or_else(|| panic!("{deployment}: no key reached the server: {result}"));
        assert_eq!(key.len(), 32, "{deployment}: {result}");
        assert_ne!(key, token);
        assert_eq!(f.key_status(key).await, 401, "{deployment}: the key ended with its request");
    }
    let elsewhere = mcp(f.mcp_url("tools-elsewhere")).await;
    assert_eq!(elsewhere["status"], 307, "a redirect to another origin is relayed, not followed: {elsewhere}");
    let keyless = mcp(f.mcp_url("tools-keyless")).await;
    assert!(keyless.get("error").is_none(), "{keyless}");
    assert_eq!(keyless["whoami"], Value::Null, "forward_per_request_key = false: no key");
    let _ = &f.mcp;
}
