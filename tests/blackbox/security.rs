//! Seed 001 under attack (issue 22): an application, a key or a user must
//! never reach more than the originating user granted. Each test replays an
//! attack over real HTTP against the real binary, with a real mock
//! application that calls back into the host with the key it received.

use std::time::Duration;

use serde_json::{Value, json};

use crate::feed::Feed;
use crate::services;
use crate::support::{Client, JwtUser as User, Reply, Server, Setup};
use crate::upstream::MockApp;

const HS_SECRET: &str = "security-secret";

struct Fixture {
    setup: Setup,
    server: Server,
    mock: MockApp,
    alice: User,
    admin: User,
}

impl Fixture {
    /// A host whose config has the application `reader` (the mock app) and
    /// `extra` (TOML; `{app}` is replaced by the mock's URL). `None` without
    /// the Python clients (outside CI).
    async fn start(extra: &str) -> Option<Self> {
        let mock = MockApp::start(None)?;
        let setup = Setup::new();
        let app = mock.url();
        let audit = setup.path().join("audit.jsonl");
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\n[audit]\nfile = \"{}\"\n\
             [applications.reader]\nendpoint = \"{app}/chat/completions\"\n{}",
            audit.display(),
            extra.replace("{app}", &app)
        ));
        let server = setup.start(Some(&config), &[]);
        mock.set_host_url(&server.url).await;
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let admin = User::new(&client, HS_SECRET, "root", &["admin"]).await;
        Some(Self { setup, server, mock, alice, admin })
    }

    fn client(&self) -> Client {
        self.server.client()
    }

    /// A chat completion to `deployment` with `message` as the user's text and `extra` merged into the body.
    async fn chat(&self, auth: &[(&str, &str)], deployment: &str, message: &str, extra: Value) -> Reply {
        let mut body = json!({"model": deployment, "messages": [{"role": "user", "content": message}]});
        merge(&mut body, extra);
        let mut headers = auth.to_vec();
        headers.push(("Content-Type", "application/json"));
        let path = format!("/openai/deployments/{deployment}/chat/completions");
        self.client().post(&path, &headers, &body.to_string()).await
    }

    /// Starts a streaming call to `deployment` that the mock holds open, and
    /// returns the key the application received (alive until the call
    /// ends) and the call, which ends after [`MockApp::release`].
    async fn held_call(&self, auth: &[(&str, &str)], deployment: &str) -> (String, tokio::task::JoinHandle<Reply>) {
        let before = self.mock.last().await["chat_completions"]["api_key"].clone();
        let client = self.client();
        let mut headers: Vec<(String, String)> = auth.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        headers.push(("Content-Type".into(), "application/json".into()));
        let path = format!("/openai/deployments/{deployment}/chat/completions");
        let body = json!({"model": deployment, "stream": true, "messages": [{"role": "user", "content": "hold"}]});
        let call = tokio::spawn(async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            client.post(&path, &headers, &body.to_string()).await
        });
        for _ in 0..200 {
            let key = self.mock.last().await["chat_completions"]["api_key"].clone();
            if key.is_string() && key != before {
                return (key.as_str().unwrap().to_string(), call);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the held call never reached the application");
    }

    async fn key_status(&self, key: &str) -> u16 {
        self.client().get("/v1/bucket", &[("Api-Key", key)]).await.status
    }

    /// What the audit file holds, one event per line.
    fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.setup.path().join("audit.jsonl")).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    /// Admin-only public folder `public/reports/secret/` (rule FALSE) holding
    /// `report.txt`, beside the readable `files/public/reports/open.txt`.
    async fn public_reports(&self) {
        let client = self.client();
        let admin_bucket = &self.admin.bucket;
        for (path, content) in
            [(format!("files/{admin_bucket}/report.txt"), "secret"), ("files/public/reports/open.txt".into(), "open")]
        {
            let reply =
                client.put_files(&format!("/v1/{path}"), &self.admin.auth(), &[("f.txt", content.as_bytes())]).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
        let publication = json!({"name": "secret", "targetFolder": "public/reports/secret/",
            "resources": [{"action": "ADD", "sourceUrl": format!("files/{admin_bucket}/report.txt"),
                           "targetUrl": "files/public/reports/secret/report.txt"}],
            "rules": [{"function": "FALSE", "source": "roles"}]});
        let created = client.post("/v1/ops/publication/create", &self.admin.auth(), &publication.to_string()).await;
        assert_eq!(created.status, 200, "{}", created.body);
        let approve = json!({"url": created.json()["url"]}).to_string();
        assert_eq!(client.post("/v1/ops/publication/approve", &self.admin.auth(), &approve).await.status, 200);
        let alice = self.alice.auth();
        assert_eq!(client.get("/v1/files/public/reports/open.txt", &alice).await.status, 200);
        assert_eq!(client.get("/v1/files/public/reports/secret/report.txt", &alice).await.status, 403);
    }
}

fn merge(body: &mut Value, extra: Value) {
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
}

/// The mock application's report (its assistant text) from a chat completion.
fn report(reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.body);
    let text = reply.json()["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    serde_json::from_str(&text).unwrap()
}

fn callback_status(report: &Value, command: &str) -> u64 {
    report["callbacks"][command]["status"].as_u64().unwrap_or_else(|| panic!("no {command} callback: {report}"))
}

/// Item 1: a folder attachment or a folder dependency target is bounded by
/// what the user may read below it, at every use: under `public/` every
/// ancestor's rules must admit the user.
#[tokio::test]
async fn a_folder_grant_never_opens_what_the_public_rules_hide_from_the_user() {
    let declared = "{ kind = \"dial.resourceLink\", link_id = \"reports\", target = { path = \"files/public/reports/\" }, \
                    access = [\"READ\"], required = true }";
    let extra = format!(
        "[applications.deps-reader]\nendpoint = \"{{app}}/chat/completions\"\nresource_dependencies = [{declared}]\n"
    );
    let Some(f) = Fixture::start(&extra).await else { return };
    f.public_reports().await;
    let consent = f.client().post("/v1/consent/deps-reader/admin-consent", &f.admin.auth(), "{}").await;
    assert_eq!(consent.status, 200, "{}", consent.body);

    let reads = "read:files/public/reports/secret/report.txt read:files/public/reports/open.txt";
    let attachment = json!({"messages": [{"role": "user", "content": reads,
        "custom_content": {"attachments": [{"url": "files/public/reports/"}]}}]});
    for (deployment, extra) in [("reader", attachment), ("deps-reader", json!({}))] {
        let report = report(&f.chat(&f.alice.auth(), deployment, reads, extra).await);
        assert_eq!(callback_status(&report, "read:files/public/reports/open.txt"), 200, "{deployment}: {report}");
        assert_eq!(
            callback_status(&report, "read:files/public/reports/secret/report.txt"),
            403,
            "{deployment}: the key reached a file the user's public rules hide: {report}"
        );
    }
}

/// Item 2: a stored application (anyone's endpoint) never reaches loopback,
/// private or link-local addresses unless the operator allows them; no
/// answer names a socket error.
#[tokio::test]
async fn stored_applications_cannot_reach_internal_addresses() {
    let Some(f) = Fixture::start("").await else { return };
    let port = f.mock.url().rsplit(':').next().unwrap().to_string();
    let alice = f.alice.auth();
    let targets = [
        ("loopback", json!({"endpoint": format!("http://127.0.0.1:{port}/chat/completions")})),
        ("by-name", json!({"endpoint": format!("http://localhost:{port}/chat/completions")})),
        ("mapped", json!({"endpoint": format!("http://[::ffff:127.0.0.1]:{port}/chat/completions")})),
        ("metadata", json!({"endpoint": "http://169.254.169.254/latest/meta-data"})),
        // Issue 38: NAT64's local-use prefix, 6to4 and Teredo reach IPv4 hosts too.
        ("nat64-local", json!({"endpoint": format!("http://[64:ff9b:1::7f00:1]:{port}/chat/completions")})),
        ("six-to-four", json!({"endpoint": format!("http://[2002:7f00:1::1]:{port}/chat/completions")})),
        (
            "teredo",
            json!({"endpoint": format!("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{port}/chat/completions")}),
        ),
        ("tools", json!({"mcp": {"endpoint": format!("http://127.0.0.1:{port}/mcp")}})),
    ];
    for (name, definition) in &targets {
        let url = format!("/v1/applications/{}/{name}", f.alice.bucket);
        assert_eq!(f.client().put_body(&url, &alice, definition.to_string().as_bytes()).await.status, 200);
    }
    for (name, _) in &targets[..targets.len() - 1] {
        let id = format!("applications/{}/{name}", f.alice.bucket);
        let reply = f.chat(&alice, &id, "appdata", json!({})).await;
        assert_eq!(reply.status, 502, "{name}: {}", reply.body);
        assert_eq!(reply.json()["error"]["message"], "The application's endpoint is not allowed", "{name}");
    }
    let mcp = format!("/v1/deployments/applications/{}/tools/mcp", f.alice.bucket);
    for reply in [f.client().get(&mcp, &alice).await, f.client().delete(&mcp, &alice).await] {
        assert_eq!(
            (reply.status, reply.json()["error"]["message"].as_str()),
            (502, Some("The application's endpoint is not allowed"))
        );
    }
    assert!(f.mock.last().await["chat_completions"].is_null(), "the application was never contacted");

    // Allowed by the operator: the same definitions work; a dead endpoint's
    // answer says so without socket details.
    let setup = Setup::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = setup.config(&format!(
        "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\n[proxy]\nallowed_destinations = [\"127.0.0.1\", \"localhost\"]\n\
         [applications.down]\nendpoint = \"http://127.0.0.1:{closed}/chat/completions\"\n"
    ));
    let server = setup.start(Some(&config), &[]);
    f.mock.set_host_url(&server.url).await;
    let client = server.client();
    let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
    let headers = [alice.auth()[0], ("Content-Type", "application/json")];
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    for (name, definition) in [
        ("loopback", targets[0].1.clone()),
        ("by-name", targets[1].1.clone()),
        ("dead", json!({"endpoint": format!("http://127.0.0.1:{closed}/x")})),
    ] {
        let url = format!("/v1/applications/{}/{name}", alice.bucket);
        assert_eq!(client.put_body(&url, &alice.auth(), definition.to_string().as_bytes()).await.status, 200);
        let reply = client
            .post(
                &format!("/openai/deployments/applications/{}/{name}/chat/completions", alice.bucket),
                &headers,
                &body,
            )
            .await;
        if name == "dead" {
            assert_eq!(reply.status, 502, "{}", reply.body);
            assert_eq!(reply.json()["error"]["message"], "The application could not be reached");
        } else {
            assert_eq!(reply.status, 200, "{name}: {}", reply.body);
        }
    }
    let down = client.post("/openai/deployments/down/chat/completions", &headers, &body).await;
    assert_eq!(
        (down.status, down.json()["error"]["message"].as_str()),
        (502, Some("The application could not be reached"))
    );
    for leak in ["refused", "os error", &closed.to_string()] {
        assert!(!down.body.contains(leak), "the answer maps the network: {}", down.body);
    }
    let cause = |line: &String| line.contains("deployment") && line.contains("refused");
    assert!(server.logged_once(|lines| lines.iter().any(cause)).iter().any(cause), "the log keeps the cause");
}

/// Item 3: an application never consents for its user (nor reads consents):
/// the user's and the admin's consent routes refuse per-request keys, and
/// the attempt is audited.
#[tokio::test]
async fn an_application_cannot_consent_for_its_user() {
    let Some(f) = Fixture::start(
        "[applications.gated]\nendpoint = \"{app}/chat/completions\"\nfeatures.consent_required = true\n",
    )
    .await
    else {
        return;
    };
    let (key, call) = f.held_call(&f.alice.auth(), "reader").await;
    let as_app = [("Api-Key", key.as_str())];
    let accept = json!({"consent": {"deployment": "gated"}}).to_string();
    let posted = f.client().post("/v1/consent/gated", &as_app, &accept).await;
    assert_eq!(posted.status, 403, "an app consented for its user: {}", posted.body);
    assert!(posted.body.contains("per-request key"), "{}", posted.body);
    assert_eq!(f.client().get("/v1/consent/gated", &as_app).await.status, 403);
    assert_eq!(f.client().post("/v1/consent/gated/admin-consent", &as_app, "{}").await.status, 403);
    f.mock.release().await;
    call.await.unwrap();

    let refused = f.chat(&f.alice.auth(), "gated", "hi", json!({})).await;
    assert_eq!(refused.status, 403, "the user never consented: {}", refused.body);
    let denied: Vec<Value> = f.audit().into_iter().filter(|event| event["outcome"] == "denied").collect();
    assert!(
        denied.iter().any(|event| event["event"] == "user_consent_grant"
            && event["app"] == "gated"
            && event["user"] == "alice"
            && event["source_deployment"] == "reader"),
        "{denied:?}"
    );
}

/// Item 4: a misspelt key in an application's table, a relative endpoint,
/// or an environment override naming an application the file lacks stops
/// the start, naming the problem.
#[tokio::test]
async fn application_tables_refuse_what_they_would_ignore() {
    let setup = Setup::new();
    for (table, named) in [
        ("endpoint = \"http://a/chat\"\nuser_role = [\"admin\"]", "user_role"),
        ("endpoint = \"http://a/chat\"\nresource_dependecies = []", "resource_dependecies"),
        ("endpoint = \"http://a/chat\"\nmcp.forward_key = false", "forward_key"),
        ("endpoint = \"/chat/completions\"", "absolute http(s) URL"),
    ] {
        let config = setup.config(&format!("[applications.chat-app]\n{table}\n"));
        let (ok, _, stderr) = setup.run(&["check-config", "--config", config.to_str().unwrap()], &[]);
        assert!(!ok && stderr.contains("chat-app") && stderr.contains(named), "{table}: {stderr}");
    }
    let config = setup.config("[applications.chat-app]\nendpoint = \"http://a/chat\"\nuser_roles = [\"admin\"]\n");
    let env = [("DIAL_HOST_APPLICATIONS__CHAT_APP__USER_ROLES", "[]")];
    let (ok, _, stderr) = setup.run(&["check-config", "--config", config.to_str().unwrap()], &env);
    assert!(!ok && stderr.contains("`chat_app`") && stderr.contains("`chat-app`"), "{stderr}");
    let (ok, _, stderr) = setup.run(&["check-config", "--config", config.to_str().unwrap()], &[]);
    assert!(ok, "{stderr}");
}

/// Items 5 and 6: a stored application's `user_roles` are enforced; a chain
/// of calls is bounded in depth, and a callee's key dies with its caller's.
#[tokio::test]
async fn stored_user_roles_hold_and_chains_are_bounded() {
    let extra = "[proxy]\nallowed_destinations = [\"127.0.0.1\"]\n[per_request_key]\nttl_seconds = 3\nmax_chain_depth = 2\n\
                 [applications.second]\nendpoint = \"{app}/chat/completions\"\n[applications.third]\nendpoint = \"{app}/chat/completions\"\n";
    let Some(f) = Fixture::start(extra).await else { return };
    let definition = json!({"endpoint": format!("{}/chat/completions", f.mock.url()), "userRoles": ["admin"]});
    let url = format!("/v1/applications/{}/admins-only", f.alice.bucket);
    assert_eq!(f.client().put_body(&url, &f.alice.auth(), definition.to_string().as_bytes()).await.status, 200);
    let id = format!("applications/{}/admins-only", f.alice.bucket);
    let refused = f.chat(&f.alice.auth(), &id, "hi", json!({})).await;
    assert_eq!(refused.status, 403, "user_roles ignored: {}", refused.body);
    assert!(refused.body.contains("Forbidden deployment"), "{}", refused.body);
    let alice_admin = User::new(&f.client(), HS_SECRET, "alice", &["user", "admin"]).await;
    assert_eq!(f.chat(&alice_admin.auth(), &id, "hi", json!({})).await.status, 200);

    // alice → reader (depth 1) → second (depth 2) → third: too deep.
    let started = std::time::Instant::now();
    let (first, first_call) = f.held_call(&f.alice.auth(), "reader").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (second, second_call) = f.held_call(&[("Api-Key", &first)], "second").await;
    let deeper = f.chat(&[("Api-Key", &second)], "third", "hi", json!({})).await;
    assert_eq!(deeper.status, 403, "{}", deeper.body);
    assert!(deeper.body.contains("max_chain_depth"), "{}", deeper.body);
    // The first key expires 3 s after it was minted; the second, minted
    // 1.5 s later, may not outlive it.
    tokio::time::sleep(Duration::from_millis(3600).saturating_sub(started.elapsed())).await;
    assert_eq!(f.key_status(&first).await, 401);
    assert_eq!(f.key_status(&second).await, 401, "a callee's key outlived its caller's");
    f.mock.release().await;
    let _ = tokio::join!(first_call, second_call);
}

/// Items 7 and 12: a subscription made with a key ends when the key is
/// revoked, one made with a JWT at its `exp`; watched URLs count once, each
/// event costs one access decision, and a caller holds a bounded number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_feed_lives_no_longer_than_its_credential() {
    let Some(f) = Fixture::start("[feed]\nheartbeat_seconds = 1\nmax_subscriptions_per_caller = 2\n").await else {
        return;
    };
    let (key, call) = f.held_call(&f.alice.auth(), "reader").await;
    let appdata = f.client().get("/v1/bucket", &[("Api-Key", key.as_str())]).await.json()["appdata"]
        .as_str()
        .unwrap()
        .to_string();
    let mut by_key = Feed::start(&f.server.url, &[("Api-Key", &key)], &[format!("files/{appdata}/")]).await;
    f.mock.release().await;
    call.await.unwrap();
    assert_eq!(f.key_status(&key).await, 401);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !by_key.ended && tokio::time::Instant::now() < deadline {
        by_key.next(Duration::from_secs(2)).await;
    }
    assert!(by_key.ended, "the subscription outlived the key it was made with");

    use jsonwebtoken::{EncodingKey, Header, encode};
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3;
    let claims = json!({"sub": "alice", "roles": ["user"], "exp": exp});
    let token = format!(
        "Bearer {}",
        encode(&Header::default(), &claims, &EncodingKey::from_secret(HS_SECRET.as_bytes()).unwrap()).unwrap()
    );
    let mine = format!("files/{}/", f.alice.bucket);
    let mut by_token = Feed::start(&f.server.url, &[("Authorization", &token)], std::slice::from_ref(&mine)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !by_token.ended && tokio::time::Instant::now() < deadline {
        by_token.next(Duration::from_secs(2)).await;
    }
    assert!(by_token.ended, "the subscription outlived the token's exp");

    // The same URL a hundred times is one watch; a third subscription is 429.
    let alice = f.alice.auth();
    let hundred: Vec<String> = (0..100).map(|_| mine.clone()).collect();
    let mut first = Feed::start(&f.server.url, &alice, &hundred).await;
    let _second = Feed::start(&f.server.url, &alice, std::slice::from_ref(&mine)).await;
    let third = Feed::open(&f.server.url, &alice, std::slice::from_ref(&mine)).await;
    assert_eq!(third.status(), 429);
    let put = f.client().put_files(&format!("/v1/files/{}/a.txt", f.alice.bucket), &alice, &[("a.txt", b"a")]).await;
    assert_eq!(put.status, 200);
    let event = first.event(Duration::from_secs(10)).await.expect("the change reaches the subscriber");
    assert_eq!(event["url"], format!("files/{}/a.txt", f.alice.bucket));
    assert!(first.event(Duration::from_secs(2)).await.is_none(), "one event, not one per repeated URL");
}

/// Item 8: with Redis, a stop revokes the keys of the calls it cuts off
/// before it exits, and a killed instance's keys lapse within one lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_die_with_their_instance() {
    let Some(redis) = services::redis() else { return };
    let Some(mock) = MockApp::start(None) else { return };
    let app = mock.url();
    let store = tempfile::tempdir().unwrap();
    let setups = [Setup::new(), Setup::new(), Setup::new()];
    let start = |setup: &Setup| {
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\n[storage]\nurl = \"file://{}\"\n\
             [redis]\nurl = \"{}\"\nkey_prefix = \"keys-die:\"\n[per_request_key]\nlease_seconds = 2\n\
             [server]\nstop_timeout_seconds = 1\n[applications.reader]\nendpoint = \"{app}/chat/completions\"\n",
            store.path().display(),
            redis.url
        ));
        setup.start(Some(&config), &[])
    };
    let (mut stopped, mut killed, witness) = (start(&setups[0]), start(&setups[1]), start(&setups[2]));
    let client = witness.client();
    let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
    let status = |key: String| {
        let client = witness.client();
        async move { client.get("/v1/bucket", &[("Api-Key", &key)]).await.status }
    };

    let mut keys = Vec::new();
    for server in [&stopped, &killed] {
        mock.set_host_url(&server.url).await;
        let before = mock.last().await["chat_completions"]["api_key"].clone();
        let (url, token) = (server.url.clone(), alice.token.clone());
        tokio::spawn(async move {
            let body = json!({"model": "reader", "stream": true, "messages": [{"role": "user", "content": "hold"}]});
            let response = reqwest::Client::new()
                .post(format!("{url}/openai/deployments/reader/chat/completions"))
                .header("Authorization", token)
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .send()
                .await;
            // Held until the instance goes away.
            if let Ok(response) = response {
                let _ = response.bytes().await;
            }
        });
        let key = loop {
            let key = mock.last().await["chat_completions"]["api_key"].clone();
            if key.is_string() && key != before {
                break key.as_str().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(status(key.clone()).await, 200, "a key works on every instance");
        keys.push(key);
    }
    // Lives on while its call does, past several leases (renewed).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(status(keys[1].clone()).await, 200, "renewed while the call lives");

    let exit = stopped.terminate(Duration::from_secs(15)).expect("the stop is bounded");
    assert!(exit.success(), "{exit}");
    assert_eq!(status(keys[0].clone()).await, 401, "a graceful stop left the key of a call it cut off alive");

    let pid = killed.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    let killed_at = std::time::Instant::now();
    let deadline = killed_at + Duration::from_secs(10);
    while status(keys[1].clone()).await == 200 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status(keys[1].clone()).await, 401, "a killed instance's key lived past its lease");
    eprintln!("a SIGKILLed instance's key lived {:?} after the kill (lease 2 s)", killed_at.elapsed());
    let _ = killed.is_running();
    mock.release().await;
}

/// Item 9: a move deletes the source only if it is still what was copied: a
/// PUT acknowledged while the copy streamed is never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_never_deletes_a_write_that_landed_while_it_copied() {
    let setup = Setup::new();
    let config = setup.config(&format!("[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\n"));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
    let source = format!("files/{}/big.bin", alice.bucket);
    let big = crate::random_bytes::random_bytes(9, 192 << 20);
    assert_eq!(client.put_files(&format!("/v1/{source}"), &alice.auth(), &[("big.bin", &big)]).await.status, 200);
    drop(big);

    let request =
        json!({"sourceUrl": source, "destinationUrl": format!("files/{}/moved.bin", alice.bucket)}).to_string();
    let moving = {
        let (client, auth) = (server.client(), alice.token.clone());
        tokio::spawn(async move {
            client.post("/v1/ops/resource/move", &[("Authorization", auth.as_str())], &request).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let written =
        client.put_files(&format!("/v1/{source}"), &alice.auth(), &[("big.bin", b"written during the move")]).await;
    assert_eq!(written.status, 200, "{}", written.body);
    let moved = moving.await.unwrap();
    // 200 would mean the move deleted the source after the write landed
    // (or finished before it, which 192 MiB to copy rules out).
    assert_eq!(moved.status, 409, "{}", moved.body);
    let kept = client.get(&format!("/v1/{source}"), &alice.auth()).await;
    assert_eq!((kept.status, kept.body.as_str()), (200, "written during the move"), "an acknowledged write was lost");
}

/// Items 10 and 11: attachments are bounded and de-duplicated before any
/// check; a call body is inspected without a tree of it, and a stored
/// definition is read once per etag — memory stays bounded under load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_cannot_exhaust_the_host_through_calls() {
    let Some(f) =
        Fixture::start("[proxy]\nallowed_destinations = [\"127.0.0.1\"]\nmax_request_bytes = 20971520\n").await
    else {
        return;
    };
    let alice = f.alice.auth();
    let attachments = |urls: Vec<String>| {
        let list: Vec<Value> = urls.into_iter().map(|url| json!({"url": url})).collect();
        json!({"messages": [{"role": "user", "content": "hi", "custom_content": {"attachments": list}}]})
    };
    let distinct = (0..1001).map(|i| format!("files/{}/f{i}.txt", f.alice.bucket)).collect();
    let refused = f.chat(&alice, "reader", "hi", attachments(distinct)).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("at most 1000 attachments"), "{}", refused.body);
    let put = f.client().put_files(&format!("/v1/files/{}/f.txt", f.alice.bucket), &alice, &[("f.txt", b"f")]).await;
    assert_eq!(put.status, 200);
    let repeated = (0..5000).map(|_| format!("files/{}/f.txt", f.alice.bucket)).collect();
    let report = report(&f.chat(&alice, "reader", "hi", attachments(repeated)).await);
    assert_eq!(report["attachments"].as_array().unwrap().len(), 5000, "forwarded as sent");

    // Six 16 MiB bodies of small messages at once.
    let message = json!({"role": "user", "content": "x"}).to_string();
    let count = (16 << 20) / (message.len() + 1);
    let body = format!("{{\"model\":\"reader\",\"messages\":[{}]}}", vec![message; count].join(","));
    let before = f.server.reset_peak_rss();
    let calls = (0..6).map(|_| {
        let (client, body) = (f.client(), body.clone());
        let auth = f.alice.token.clone();
        async move {
            let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
            client.post("/openai/deployments/reader/chat/completions", &headers, &body).await.status
        }
    });
    let statuses = futures_util::future::join_all(calls).await;
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    let grown = f.server.peak_rss_kib().saturating_sub(before) / 1024;
    eprintln!("six 16 MiB calls: peak RSS +{grown} MiB");
    assert!(grown < 400, "six 16 MiB calls took {grown} MiB");

    // Forty calls to an application whose definition is 15 MiB: over
    // `proxy.max_definition_bytes` (4 MiB), refused unparsed.
    let definition =
        json!({"endpoint": format!("{}/chat/completions", f.mock.url()), "description": "d".repeat(15 << 20)});
    let url = format!("/v1/applications/{}/large", f.alice.bucket);
    assert_eq!(f.client().put_body(&url, &alice, definition.to_string().as_bytes()).await.status, 200);
    let id = format!("applications/{}/large", f.alice.bucket);
    let before = f.server.reset_peak_rss();
    let calls = (0..40).map(|_| f.chat(&alice, &id, "hi", json!({})));
    let replies = futures_util::future::join_all(calls).await;
    for reply in &replies {
        assert_eq!(reply.status, 500, "{}", reply.body);
        assert!(reply.body.contains("proxy.max_definition_bytes"), "{}", reply.body);
    }
    let grown = f.server.peak_rss_kib().saturating_sub(before) / 1024;
    eprintln!("forty calls to a 15 MiB definition: peak RSS +{grown} MiB");
    assert!(grown < 100, "forty calls to a 15 MiB definition took {grown} MiB");
}

/// Items 13 and 14: hop-by-hop headers a client names are not forwarded,
/// headers only the host may assert are the host's, and an application
/// cannot set cookies, HSTS or CORS on the host's origin.
#[tokio::test]
async fn headers_cross_only_as_the_host_asserts_them() {
    let Some(f) = Fixture::start("").await else { return };
    let body = json!({"model": "reader", "messages": [{"role": "user", "content": "set-headers"}]}).to_string();
    let headers = [
        ("Authorization", f.alice.token.as_str()),
        ("Content-Type", "application/json"),
        ("Connection", "x-hop-secret"),
        ("X-Hop-Secret", "hop"),
        ("X-DIAL-APPLICATION-PROPERTIES", "{\"injected\": true}"),
        ("X-DIAL-APPLICATION-ID", "injected"),
        ("X-DIAL-DEPLOYMENT-FEATURES", "{\"injected\": true}"),
        ("traceparent", "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"),
        ("tracestate", "injected=1"),
        ("X-Conversation-Id", "passes"),
    ];
    let chunks = vec![bytes::Bytes::from(body)];
    let reply = f.client().send_raw("POST", "/openai/deployments/reader/chat/completions", &headers, chunks).await;
    let seen = &report(&reply)["headers"];
    for withheld in ["x-hop-secret", "x-dial-application-properties", "x-dial-application-id", "tracestate"] {
        assert!(seen.get(withheld).is_none(), "{withheld} reached the application: {seen}");
    }
    // The features header is the host's own, whatever the client sent.
    let features: serde_json::Value =
        serde_json::from_str(seen["x-dial-deployment-features"].as_str().expect("the host's features")).unwrap();
    assert_eq!((features.get("injected"), &features["chat_completion"]), (None, &json!(true)), "{features}");
    assert_eq!(seen["x-conversation-id"], "passes");
    let traceparent = seen["traceparent"].as_str().expect("the host's own traceparent");
    assert!(
        traceparent.starts_with("00-") && !traceparent.contains("0123456789abcdef0123456789abcdef"),
        "{traceparent}"
    );
    for name in ["set-cookie", "strict-transport-security", "access-control-allow-credentials", "alt-svc"] {
        assert!(reply.headers.get(name).is_none(), "{name} relayed onto the host's origin");
    }
    assert_ne!(
        reply.headers.get("access-control-allow-origin").map(|v| v.to_str().unwrap()),
        Some("https://evil.example")
    );
    assert_eq!(reply.headers["x-mock-kept"], "yes");
}
