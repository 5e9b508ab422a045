//! Deployments as an SDK user and an operator meet them (issue 24): the
//! official `openai`, `anthropic` and `mcp` SDKs with nothing but a project
//! key, errors each SDK can read, answers a retry cannot change marked so,
//! a silent application's stream ended with an error event, DIAL's
//! deployment listings, and the access log, audit and metrics an operator
//! runs the host by.

use serde_json::{Value, json};

use crate::support::{JwtUser as User, Server, Setup};
use crate::upstream::{McpServer, MockApp, run_client_async};

const HS_SECRET: &str = "sdk-secret";
const PROJECT_KEY: &str = "sdk-project-key-0123";

struct Fixture {
    setup: Setup,
    server: Server,
    mock: MockApp,
    _mcp: McpServer,
    admin: User,
}

impl Fixture {
    async fn start(extra: &str) -> Option<Self> {
        let mock = MockApp::start(None)?;
        let mcp = McpServer::start(None)?;
        let (app, tools) = (mock.url(), mcp.url());
        let setup = Setup::new();
        let audit = setup.path().join("audit.jsonl");
        let config = setup.config(&format!(
            r#"[encryption]
secret = "s"
[identity]
hs256_secret = "{HS_SECRET}"
[keys.{PROJECT_KEY}]
project = "tools-team"
roles = ["user"]
[log]
format = "json"
[audit]
file = "{audit}"
[proxy]
allowed_destinations = ["127.0.0.1"]
{extra}
[applications.echo]
endpoint = "{app}/chat/completions"
display_name = "Echo"
description = "Answers with what it saw"
interfaces.responses.endpoint = "{app}/responses"
interfaces.anthropic_messages.endpoint = "{app}/v1/messages"
[applications.gated]
endpoint = "{app}/chat/completions"
interfaces.anthropic_messages.endpoint = "{app}/v1/messages"
features.consent_required = true
[applications.tools]
mcp.endpoint = "{tools}/mcp"
[applications.admins-only]
endpoint = "{app}/chat/completions"
user_roles = ["admin"]
"#,
            audit = audit.display()
        ));
        let server = setup.start(Some(&config), &[]);
        mock.set_host_url(&server.url).await;
        let admin = User::new(&server.client(), HS_SECRET, "root", &["admin"]).await;
        Some(Self { setup, server, mock, _mcp: mcp, admin })
    }

    fn openai(&self, deployment: &str) -> String {
        format!("{}/openai/deployments/{deployment}", self.server.url)
    }

    fn anthropic(&self, deployment: &str) -> String {
        format!("{}/anthropic/deployments/{deployment}", self.server.url)
    }

    /// The server's JSON log lines, once one of them satisfies `until`.
    fn log(&self, until: impl Fn(&Value) -> bool) -> Vec<Value> {
        let parse =
            |lines: &[String]| -> Vec<Value> { lines.iter().filter_map(|l| serde_json::from_str(l).ok()).collect() };
        parse(&self.server.logged_once(|lines| parse(lines).iter().any(&until)))
    }

    async fn metrics(&self) -> String {
        self.server.client().get("/metrics", &[]).await.body
    }
}

fn token(user: &User) -> &str {
    user.token.strip_prefix("Bearer ").unwrap()
}

/// Calls `deployment` with an SDK the way its README recipe does: base URL
/// and api key, nothing else.
async fn sdk(script: &str, base: &str, key: &str, message: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--base-url", base, "--api-key", key, "--message", message, "--key-only"];
    args.extend_from_slice(extra);
    run_client_async(script, &args).await
}

/// Item 1: `OpenAI(base_url=…, api_key=<project key>)` and
/// `Anthropic(base_url=…, api_key=<project key>)` just work.
#[tokio::test]
async fn the_sdks_work_with_a_project_key_alone() {
    let Some(f) = Fixture::start("").await else { return };
    for (script, base, extra) in [
        ("openai_client.py", f.openai("echo"), &[][..]),
        ("openai_client.py", f.openai("echo"), &["--responses"][..]),
        ("openai_client.py", f.openai("echo"), &["--stream"][..]),
        ("anthropic_client.py", f.anthropic("echo"), &[][..]),
        ("anthropic_client.py", f.anthropic("echo"), &["--stream"][..]),
    ] {
        let out = sdk(script, &base, PROJECT_KEY, "appdata", extra).await;
        assert!(out.get("error").is_none(), "{script} {extra:?}: {out}");
        let report = &out["report"];
        assert_eq!(report["api_key"].as_str().map(str::len), Some(32), "a per-request key reached the app: {report}");
        assert_eq!(report["authorization"], Value::Null, "the caller's credentials stay behind");
        assert_eq!(report["x_api_key"], Value::Null);
        assert_eq!(report["callbacks"]["appdata"]["put_status"], 200, "{report}");
    }
    // A wrong key is the SDK's authentication error, with the host's message.
    let out = sdk("openai_client.py", &f.openai("echo"), "not-a-key", "hi", &[]).await;
    assert_eq!((out["status"].as_u64(), out["type"].as_str()), (Some(401), Some("AuthenticationError")), "{out}");
    assert!(out["error"].as_str().unwrap().contains("Unknown api key"), "{out}");
}

/// Items 2 and 3: the host's own errors in each SDK's dialect, naming their
/// cause, and answers a retry cannot change marked `x-should-retry: false`.
#[tokio::test]
async fn host_errors_reach_each_sdk_readably_and_are_not_retried() {
    let Some(f) = Fixture::start("").await else { return };
    let user = token(&f.admin);
    // No consent: a permission error saying so, in both dialects.
    for (script, base) in [("openai_client.py", f.openai("gated")), ("anthropic_client.py", f.anthropic("gated"))] {
        let out = sdk(script, &base, user, "hi", &[]).await;
        assert_eq!((out["status"].as_u64(), out["type"].as_str()), (Some(403), Some("PermissionDeniedError")), "{out}");
        assert!(out["error"].as_str().unwrap().contains("didn't accept consent"), "{script}: {out}");
    }
    // A declaration changed since the admin consented: the message says so and who can fix it.
    let app = format!("{}/chat/completions", f.mock.url());
    let record = |path: &str| json!({"kind": "dial.resourceLink", "linkId": "n", "target": {"path": path}, "access": ["READ"], "required": true});
    let url = format!("/v1/applications/{}/declared", f.admin.bucket);
    let put = |path: &'static str| {
        let definition = json!({"endpoint": app, "resourceDependencies": [record(path)]}).to_string();
        let (client, auth, url) = (f.server.client(), f.admin.auth(), url.clone());
        async move { client.put_body(&url, &auth, definition.as_bytes()).await.status }
    };
    assert_eq!(put("files/{current-user}/notes/").await, 200);
    let id = format!("applications/{}/declared", f.admin.bucket);
    let consent = f.server.client().post(&format!("/v1/consent/{id}/admin-consent"), &f.admin.auth(), "{}").await;
    assert_eq!(consent.status, 200, "{}", consent.body);
    assert!(sdk("openai_client.py", &f.openai(&id), user, "hi", &[]).await.get("error").is_none());
    assert_eq!(put("files/{current-user}/other/").await, 200);
    let out = sdk("openai_client.py", &f.openai(&id), user, "hi", &[]).await;
    assert_eq!(out["status"].as_u64(), Some(403), "{out}");
    let message = out["error"].as_str().unwrap();
    assert!(message.contains("changed since an admin consented") && message.contains("admin-consent"), "{message}");

    // MCP: the SDK shows the host's message, not "Server returned an error response".
    let unknown = format!("{}/v1/deployments/nope/mcp", f.server.url);
    let out = run_client_async("mcp_client.py", &["--url", &unknown, "--api-key", PROJECT_KEY]).await;
    assert!(out["error"].as_str().unwrap().contains("Unknown application: nope"), "{out}");

    // A deployment without the API answers 503 as DIAL does, marked final:
    // an SDK allowed two retries sends one request.
    let counted = |metrics: &str| -> u64 {
        metrics
            .lines()
            .filter(|line| {
                line.starts_with("dial_host_http_requests_total{")
                    && line.contains("route=\"/openai/deployments/{*rest}\"")
                    && line.contains("status=\"503\"")
            })
            .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let before = counted(&f.metrics().await);
    let out = sdk("openai_client.py", &f.openai("tools"), PROJECT_KEY, "hi", &["--max-retries", "2"]).await;
    assert_eq!(out["status"].as_u64(), Some(503), "{out}");
    assert!(out["error"].as_str().unwrap().contains("has no chat completions endpoint"), "{out}");
    assert_eq!(counted(&f.metrics().await) - before, 1, "the SDK retried an answer marked final");
}

/// Item 4: an application that goes silent mid-stream: the stream ends with
/// the dialect's error event, and the log names the deployment.
#[tokio::test]
async fn a_silent_application_ends_the_stream_with_an_error_event() {
    let Some(f) = Fixture::start("read_timeout_ms = 1500").await else { return };
    for (script, base) in [("openai_client.py", f.openai("echo")), ("anthropic_client.py", f.anthropic("echo"))] {
        // `hold` without a release: the first delta arrives, then nothing.
        let out = sdk(script, &base, PROJECT_KEY, "hold", &["--stream", "--timeout", "30"]).await;
        let message =
            out["error"].as_str().unwrap_or_else(|| panic!("{script}: the stream ended as if complete: {out}"));
        assert!(message.contains("stopped answering"), "{script}: {out}");
    }
    let is_stop = |line: &String| line.contains("the application's answer stopped before its end");
    let lines = f.server.logged_once(|lines| lines.iter().filter(|line| is_stop(line)).count() == 2);
    let stopped: Vec<Value> =
        lines.iter().filter(|line| is_stop(line)).map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(stopped.len(), 2, "{stopped:?}");
    assert!(stopped.iter().all(|line| line["deployment"] == "echo"), "{stopped:?}");
}

/// Item 5: DIAL's listings of what the caller may call, and the operator's
/// view of what is configured.
#[tokio::test]
async fn deployments_are_listed_as_dial_lists_them() {
    let Some(f) = Fixture::start("").await else { return };
    let client = f.server.client();
    let key = [("Api-Key", PROJECT_KEY)];
    let listed = client.get("/openai/deployments", &key).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed = listed.json();
    assert_eq!(listed["object"], "list");
    let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["echo", "gated", "tools"], "admins-only is not the user's to call");
    let echo = &listed["data"][0];
    assert_eq!(
        (&echo["object"], &echo["model"], &echo["display_name"]),
        (&json!("deployment"), &json!("echo"), &json!("Echo"))
    );
    assert!(echo["created_at"].is_i64() && echo["features"].is_object() && echo["defaults"].is_object(), "{echo}");
    assert_eq!(listed["data"][1]["features"]["consent_required"], true);

    let admin = client.get("/openai/applications", &f.admin.auth()).await.json();
    let ids: Vec<&str> = admin["data"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["admins-only", "echo", "gated", "tools"]);
    assert_eq!(
        (&admin["data"][1]["object"], &admin["data"][1]["application"]),
        (&json!("application"), &json!("echo"))
    );

    let one = client.get("/openai/deployments/echo", &key).await;
    assert_eq!((one.status, one.json()["id"].as_str()), (200, Some("echo")));
    let hidden = client.get("/openai/applications/admins-only", &key).await;
    assert_eq!((hidden.status, hidden.json()["error"]["type"].as_str()), (403, Some("permission_error")));
    assert_eq!(client.get("/openai/deployments/nope", &key).await.json()["error"]["type"], "not_found_error");

    let (ok, stdout, stderr) = f.setup.run(&["check-config", "--config", "dial.toml"], &[]);
    assert!(ok, "{stderr}");
    for name in ["echo", "gated", "tools", "admins-only"] {
        assert!(stdout.contains(&format!("application: {name} (")), "{name} missing from:\n{stdout}");
    }
    assert!(
        f.server.banner.iter().any(|line| line.contains("application: echo (chat completions, responses")),
        "{:?}",
        f.server.banner
    );
}

/// Items 6 to 8: one access-log line per request (never a key, token or
/// query string), audit events as structured, stamped fields, and upstream
/// calls counted per configured deployment (stored ones under `stored`).
#[tokio::test]
async fn operators_get_an_access_log_structured_audit_and_per_deployment_metrics() {
    let Some(f) = Fixture::start("").await else { return };
    let body = json!({"model": "echo", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let headers = [("Authorization", "Bearer sdk-project-key-0123"), ("Content-Type", "application/json")];
    let path = "/openai/deployments/echo/chat/completions?secret-query=1";
    assert_eq!(f.server.client().post(path, &headers, &body).await.status, 200);
    let definition = json!({"endpoint": format!("{}/chat/completions", f.mock.url())}).to_string();
    let stored = format!("/v1/applications/{}/mine", f.admin.bucket);
    assert_eq!(f.server.client().put_body(&stored, &f.admin.auth(), definition.as_bytes()).await.status, 200);
    let id = format!("applications/{}/mine", f.admin.bucket);
    assert!(sdk("openai_client.py", &f.openai(&id), token(&f.admin), "hi", &[]).await.get("error").is_none());
    let record = json!({"kind": "dial.resourceLink", "linkId": "n", "target": {"path": "files/{current-user}/n/"}, "access": ["READ"]});
    let declared = json!({"endpoint": "http://127.0.0.1:9/x", "resourceDependencies": [record]}).to_string();
    let url = format!("/v1/applications/{}/declared", f.admin.bucket);
    assert_eq!(f.server.client().put_body(&url, &f.admin.auth(), declared.as_bytes()).await.status, 200);
    let consent = format!("/v1/consent/applications/{}/declared/admin-consent", f.admin.bucket);
    assert_eq!(f.server.client().post(&consent, &f.admin.auth(), "{}").await.status, 200);

    let log = f.log(|line| line["event"] == "admin_consent_grant");
    let access: Vec<&Value> = log.iter().filter(|line| line["target"] == "dial_host::access").collect();
    let call = access
        .iter()
        .find(|line| line["route"] == "/openai/deployments/{*rest}" && line["deployment"] == "echo")
        .unwrap_or_else(|| panic!("no access line for the call: {access:?}"));
    assert_eq!((&call["method"], &call["status"], &call["level"]), (&json!("POST"), &json!(200), &json!("INFO")));
    assert!(call["duration_ms"].as_f64().unwrap() > 0.0, "{call}");
    assert!(access.iter().any(|line| line["route"] == "/v1/applications/{*path}" && line["status"] == 200));
    let everything = f.server.logged().join("\n");
    for secret in [PROJECT_KEY, token(&f.admin), "secret-query"] {
        assert!(!everything.contains(secret), "the log holds {secret}");
    }

    let granted = log.iter().find(|line| line["event"] == "admin_consent_grant").expect("a structured audit event");
    assert_eq!((&granted["target"], &granted["user"]), (&json!("DIAL_RESOURCE_DEPS_AUDIT"), &json!("root")));
    // One `timestamp` key: the log line's own; the event's time is `event_time_ms`.
    assert!(granted["timestamp"].is_string(), "{granted}");
    assert!(granted["event_time_ms"].as_i64().unwrap() > 1_700_000_000_000, "{granted}");
    let file = std::fs::read_to_string(f.setup.path().join("audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(file.lines().last().unwrap()).unwrap();
    assert_eq!(line["event"], "admin_consent_grant");
    assert!(line["timestamp"].as_i64().unwrap() > 1_700_000_000_000, "{line}");

    let metrics = f.metrics().await;
    for series in [
        "dial_host_upstream_calls_total{deployment=\"echo\",interface=\"chat_completions\",status=\"200\"} 1",
        "dial_host_upstream_calls_total{deployment=\"stored\",interface=\"chat_completions\",status=\"200\"} 1",
    ] {
        assert!(metrics.lines().any(|line| line == series), "{series} missing");
    }
    assert!(metrics.contains(
        "dial_host_upstream_call_duration_seconds_bucket{deployment=\"echo\",interface=\"chat_completions\""
    ));
    assert!(!metrics.contains(&f.admin.bucket), "no bucket id becomes a label");
}
