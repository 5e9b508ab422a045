//! DIAL applications and DIAL clients unchanged (issue 25): an application built with EPAM's
//! aidial-sdk, served on the loopback as configuration applications, and EPAM's aidial-client,
//! against the host as against DIAL Core — the headers and fields DIAL Core sends an application,
//! the definition's defaults and properties, the feature endpoints (rate, tokenize, truncate_prompt,
//! configuration), a two-application chain passing a generated file up, per-request permissions,
//! and the deployment, application and user routes parsed into aidial-client's models.

use serde_json::{Value, json};

use crate::support::{JwtUser as User, Server, Setup};
use crate::upstream::{DialSdkApp, run_dial_client};

const HS_SECRET: &str = "dial-sdk-secret";
const PROJECT_KEY: &str = "dial-sdk-project-key-01";

struct Fixture {
    _setup: Setup,
    server: Server,
    app: DialSdkApp,
    alice: User,
    bob: User,
}

impl Fixture {
    async fn start() -> Option<Self> {
        let app = DialSdkApp::start()?;
        let base = app.url();
        let deployment = |name: &str| format!("{base}/openai/deployments/{name}");
        // Properties too large for a header: the application asks the host for them.
        let big = "x".repeat(20_000);
        let setup = Setup::new();
        let config = setup.config(&format!(
            r#"[encryption]
secret = "s"
[identity]
hs256_secret = "{HS_SECRET}"
[keys.{PROJECT_KEY}]
project = "sdk-team"
roles = ["user"]
[proxy]
allowed_destinations = ["127.0.0.1"]
[applications.echo-sdk]
display_name = "Echo (aidial-sdk)"
description = "Reports what aidial-sdk parsed"
interfaces.chat_completions.base_url = "{base}"
forward_auth_token = true
application_type_schema_id = "https://schemas.example/echo"
application_properties = {{ mode = "brief", limits = {{ pages = 3 }} }}
defaults = {{ temperature = 0.25, custom_fields = {{ configuration = {{ mode = "brief" }} }} }}
features.rate_endpoint = "{echo}/rate"
features.tokenize_endpoint = "{echo}/tokenize"
features.truncate_prompt_endpoint = "{echo}/truncate_prompt"
features.configuration_endpoint = "{echo}/configuration"
features.tools_supported = true
features.skills_supported = true
[applications.echo-big]
interfaces.chat_completions.base_url = "{base}"
application_properties = {{ big = "{big}" }}
features.skillsSupported = true
[applications.embed]
interfaces.embeddings.base_url = "{base}"
[applications.maker]
interfaces.chat_completions.base_url = "{base}"
[applications.chainer]
interfaces.chat_completions.base_url = "{base}"
"#,
            echo = deployment("echo-sdk"),
        ));
        let server = setup.start(Some(&config), &[]);
        app.set_dial_url(&server.url).await;
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let bob = User::new(&client, HS_SECRET, "bob", &["user"]).await;
        Some(Self { _setup: setup, server, app, alice, bob })
    }

    fn token(user: &User) -> &str {
        user.token.strip_prefix("Bearer ").unwrap()
    }

    /// aidial-client as `user` (its token as `bearer_token`), running `scenario` with `args`.
    async fn dial_as(&self, user: &User, scenario: &str, args: &[&str]) -> Value {
        let mut all = vec!["--base-url", &self.server.url, "--bearer-token", Self::token(user), scenario];
        all.extend_from_slice(args);
        run_dial_client(&all).await
    }

    /// aidial-client with the project key (`api_key`).
    async fn dial_with_key(&self, scenario: &str, args: &[&str]) -> Value {
        let mut all = vec!["--base-url", &self.server.url, "--api-key", PROJECT_KEY, scenario];
        all.extend_from_slice(args);
        run_dial_client(&all).await
    }

    async fn put_file(&self, user: &User, path: &str, content: &str) -> String {
        let url = format!("files/{}/{path}", user.bucket);
        let reply =
            self.server.client().put_files(&format!("/v1/{url}"), &user.auth(), &[("f.txt", content.as_bytes())]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        url
    }
}

/// The application's report, after the client succeeded.
fn report(result: &Value) -> &Value {
    assert!(result.get("error").is_none(), "aidial-client failed: {result}");
    &result["report"]
}

/// Items 1–3: the user's token (`forward_auth_token`), the definition's defaults filled in where
/// the client left a field unset, the application id and properties (header, or the host's
/// `GET /openai/applications/{id}` when too large), the deployment features — whatever the client
/// claims in those headers — streaming or not.
#[tokio::test]
async fn an_aidial_sdk_application_gets_what_dial_core_sends_it() {
    let Some(f) = Fixture::start().await else { return };
    let forged = ["--header", "X-DIAL-APPLICATION-ID=forged", "--header", "X-Client-Header=passes"];
    for stream in [false, true] {
        let mut args = vec!["--deployment", "echo-sdk", "--message", "hi"];
        args.extend_from_slice(&forged);
        if stream {
            args.push("--stream");
        }
        let result = f.dial_as(&f.alice, "chat", &args).await;
        let seen = report(&result);
        assert_eq!(seen["api_key_length"], 32, "a per-request key: {seen}");
        assert_eq!(seen["bearer_token"], Fixture::token(&f.alice), "forward_auth_token: the user's token");
        assert_eq!(seen["application_id"], "echo-sdk", "the host's id, not the client's: {seen}");
        let properties = json!({"mode": "brief", "limits": {"pages": 3}});
        assert_eq!((&seen["header_properties"], &seen["properties"]), (&properties, &properties), "{seen}");
        assert_eq!(seen["features"]["rate"], true, "{seen}");
        assert_eq!((&seen["features"]["tools"], &seen["features"]["chat_completion"]), (&json!(true), &json!(true)));
        assert_eq!(seen["temperature"], 0.25, "defaults fill what the client left unset: {seen}");
        assert_eq!(seen["configuration"], json!({"mode": "brief"}));
        assert_eq!(seen["client_header"], "passes");
    }
    // What the client sets stays; objects merge member by member.
    let args = [
        "--deployment",
        "echo-sdk",
        "--message",
        "hi",
        "--temperature",
        "0.9",
        "--configuration",
        r#"{"mode": "full"}"#,
    ];
    let seen = report(&f.dial_as(&f.alice, "chat", &args).await).clone();
    assert_eq!((&seen["temperature"], &seen["configuration"]), (&json!(0.9), &json!({"mode": "full"})), "{seen}");

    // A key is never passed on as a user's token, even sent as a bearer value.
    let keyed = ["--base-url", &f.server.url, "--bearer-token", PROJECT_KEY, "chat", "--deployment", "echo-sdk"];
    let seen = report(&run_dial_client(&keyed).await).clone();
    assert_eq!((&seen["api_key_length"], &seen["bearer_token"]), (&json!(32), &Value::Null), "{seen}");

    // No forward_auth_token: no token; properties too large for a header come from the host.
    let seen = report(&f.dial_as(&f.alice, "chat", &["--deployment", "echo-big", "--message", "hi"]).await).clone();
    assert_eq!((&seen["bearer_token"], &seen["header_properties"]), (&Value::Null, &Value::Null), "{seen}");
    assert_eq!(seen["properties"]["big"].as_str().map(str::len), Some(20_000), "{}", seen["properties"]);
    assert_eq!(seen["application_id"], "echo-big");

    // A stored application asks for its own definition with its key (DIAL Core's "app self").
    let definition = json!({"endpoint": format!("{}/openai/deployments/echo-big/chat/completions", f.app.url()),
                            "applicationProperties": {"big": "y".repeat(20_000)}});
    let stored = format!("/v1/applications/{}/sdk/echo-big", f.alice.bucket);
    let put = f.server.client().put_body(&stored, &f.alice.auth(), definition.to_string().as_bytes()).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let id = format!("applications/{}/sdk/echo-big", f.alice.bucket);
    let seen = report(&f.dial_as(&f.alice, "chat", &["--deployment", &id, "--message", "hi"]).await).clone();
    assert_eq!(seen["application_id"], id.as_str(), "{seen}");
    assert_eq!(seen["properties"]["big"].as_str().map(str::len), Some(20_000), "{}", seen["properties"]);
}

/// Item 4: DIAL's feature routes reach the endpoints aidial-sdk serves, each call with a key of its
/// own; an application without one accepts a rating and refuses the others.
#[tokio::test]
async fn rate_tokenize_truncate_prompt_and_configuration_reach_the_application() {
    let Some(f) = Fixture::start().await else { return };
    let f = &f;
    let call = |path: &'static str, body: Value| {
        let body = body.to_string();
        async move { f.dial_with_key("call", &["--path", path, "--body", &body]).await }
    };
    let rated = call("/v1/echo-sdk/rate", json!({"responseId": "chatcmpl-1", "rate": true})).await;
    assert_eq!(rated["status"], 200, "{rated}");
    assert_eq!(f.app.rates().await, json!([{"response_id": "chatcmpl-1", "rate": true, "api_key_length": 32}]));

    let tokens =
        call("/v1/deployments/echo-sdk/tokenize", json!({"inputs": [{"type": "string", "value": "a b c"}]})).await;
    assert_eq!(
        (&tokens["status"], &tokens["body"]),
        (&json!(200), &json!({"outputs": [{"status": "success", "token_count": 3}]}))
    );
    let messages = json!([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]);
    let truncated = call("/v1/deployments/echo-sdk/truncate_prompt", json!({"inputs": [{"messages": messages}]})).await;
    assert_eq!(
        truncated["body"],
        json!({"outputs": [{"status": "success", "discarded_messages": [0]}]}),
        "{truncated}"
    );

    let schema = f.dial_with_key("configuration", &["--deployment", "echo-sdk"]).await;
    assert_eq!(schema["schema"]["properties"]["mode"]["enum"], json!(["brief", "full"]), "{schema}");
    assert_eq!(schema["schema"]["api_key_length"], 32);

    // An application without the endpoints: a rating is accepted and goes nowhere, the others are refused.
    assert_eq!(call("/v1/maker/rate", json!({"responseId": "r", "rate": false})).await["status"], 200);
    let refused = call("/v1/deployments/maker/tokenize", json!({"inputs": []})).await;
    assert_eq!(refused["status"], 403, "{refused}");
    assert!(refused["body"]["error"]["message"].as_str().unwrap().contains("no tokenize endpoint"), "{refused}");
    assert_eq!(f.app.rates().await.as_array().unwrap().len(), 1, "nothing reached the app for maker");
}

/// Item 6: embeddings and legacy completions for the applications that serve them; an embeddings
/// attachment is granted to the key like a chat attachment (and refused when the caller cannot read it).
#[tokio::test]
async fn completions_and_embeddings_reach_the_applications_that_serve_them() {
    let Some(f) = Fixture::start().await else { return };
    let f = &f;
    let mine = f.put_file(&f.alice, "doc.txt", "alice's").await;
    let theirs = f.put_file(&f.bob, "doc.txt", "bob's").await;
    let embed = |url: String| {
        let body = json!({"input": ["one two"], "custom_input": [{"type": "text/plain", "url": url}]}).to_string();
        async move {
            f.dial_as(&f.alice, "call", &["--path", "/openai/deployments/embed/embeddings", "--body", &body]).await
        }
    };
    let embedded = embed(mine).await;
    assert_eq!(embedded["status"], 200, "{embedded}");
    assert_eq!(embedded["body"]["data"][0]["embedding"], json!([2.0, 32.0, 200.0]), "read with the key: {embedded}");
    let refused = embed(theirs).await;
    assert_eq!(refused["status"], 403, "{refused}");

    let body = json!({"prompt": "complete me"}).to_string();
    let completed =
        f.dial_with_key("call", &["--path", "/openai/deployments/echo-sdk/completions", "--body", &body]).await;
    assert_eq!(completed["status"], 200, "{completed}");
    let text: Value = serde_json::from_str(completed["body"]["choices"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, json!({"api_key_length": 32, "prompt": "complete me"}));
}

/// Item 7: application A (chainer) calls B (maker), which answers with a file it wrote into its
/// appdata; A's key reads it — from a JSON answer and from a stream — and passes it up to the user.
#[tokio::test]
async fn a_two_application_chain_passes_a_generated_file_up() {
    let Some(f) = Fixture::start().await else { return };
    let result = f.dial_as(&f.alice, "chat", &["--deployment", "chainer", "--message", "chain chain-stream"]).await;
    let seen = report(&result);
    for command in ["chain", "chain-stream"] {
        let outcome = &seen[command];
        let url = outcome["urls"][0].as_str().unwrap_or_else(|| panic!("{command}: no attachment: {seen}"));
        assert!(url.starts_with(&format!("files/{}/appdata/maker/made-", f.alice.bucket)), "{url}");
        assert_eq!(outcome["reads"][0], json!({"status": 200, "body": "made by the maker application"}), "{command}");
    }
    // Passed up: the user gets the files as attachments (their own appdata), another user cannot read them.
    let passed = result["attachments"].as_array().unwrap();
    assert_eq!(passed.len(), 2, "{result}");
    for url in passed {
        let path = format!("/v1/{}", url.as_str().unwrap());
        assert_eq!(f.server.client().get(&path, &f.alice.auth()).await.status, 200);
        assert_eq!(f.server.client().get(&path, &f.bob.auth()).await.status, 403);
    }
}

/// Item 6: per-request permissions — an application passes a file it was given on to the application
/// it calls (aidial-client's `resource_permissions.grant`), only what it holds, only with its key.
#[tokio::test]
async fn per_request_permissions_pass_a_file_on_to_a_called_application() {
    let Some(f) = Fixture::start().await else { return };
    let f = &f;
    let doc = f.put_file(&f.alice, "reports/q3.txt", "quarter three").await;
    let secret = f.put_file(&f.bob, "secret.txt", "bob's").await;
    let chain = |message: String| {
        let doc = doc.clone();
        async move {
            f.dial_as(&f.alice, "chat", &["--deployment", "chainer", "--message", &message, "--attachment", &doc]).await
        }
    };
    let passed = chain("pass".into()).await;
    let read = &report(&passed)["pass"]["echo"]["reads"][&doc];
    assert_eq!(read["status"], 403, "nothing granted, nothing read: {passed}");
    let granted = chain("grant".into()).await;
    let outcome = &report(&granted)["grant"];
    assert_eq!(outcome["grant"], 200, "{granted}");
    assert_eq!(outcome["echo"]["reads"][&doc], json!({"status": 200, "body": "quarter three"}), "{granted}");
    let foreign = chain(format!("grant-foreign:{secret}")).await;
    assert_eq!(report(&foreign)["grant-foreign"]["status"], 403, "only what the key holds: {foreign}");

    // Only a per-request key may grant.
    let body = json!({"receiver": "echo-sdk", "resourcePermissions": [{"url": doc, "permissions": ["READ"]}]});
    let body = body.to_string();
    let direct =
        f.dial_with_key("call", &["--path", "/v1/ops/resource/per-request-permissions/grant", "--body", &body]).await;
    assert_eq!(direct["status"], 403, "{direct}");
    assert!(direct["body"].as_str().unwrap().contains("only permitted by per request API key"), "{direct}");
}

/// Item 6: the deployment, application and user routes aidial-client calls, parsed into its
/// models: the listings (reused), one deployment, one application with its properties, the
/// names, and who the caller is.
#[tokio::test]
async fn aidial_client_parses_deployments_applications_and_user_info() {
    let Some(f) = Fixture::start().await else { return };
    let listed = f.dial_with_key("listings", &["--deployment", "echo-sdk"]).await;
    assert!(listed.get("error").is_none(), "aidial-client could not parse an answer: {listed}");
    let ids = |list: &Value| -> Vec<String> {
        list.as_array().unwrap().iter().map(|item| item["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&listed["deployments"]), ["chainer", "echo-big", "echo-sdk", "embed", "maker"]);
    assert_eq!(ids(&listed["applications"]), ids(&listed["deployments"]));
    let deployment = &listed["deployment"];
    assert_eq!((&deployment["model"], &deployment["display_name"]), (&json!("echo-sdk"), &json!("Echo (aidial-sdk)")));
    assert_eq!(deployment["features"]["configuration"], true, "{deployment}");
    assert_eq!(deployment["defaults"]["temperature"], 0.25);
    let application = &listed["application"];
    assert_eq!(application["application_properties"], json!({"mode": "brief", "limits": {"pages": 3}}));
    assert_eq!(application["application_type_schema_id"], "https://schemas.example/echo");
    assert_eq!(listed["names"][0], json!({"id": "chainer", "object": "application"}));
    assert_eq!(listed["model_names"], json!([]), "the host serves no models");
    assert_eq!(listed["user"], json!({"roles": ["user"], "project": "sdk-team"}));

    let as_alice = f.dial_as(&f.alice, "listings", &["--deployment", "echo-sdk"]).await;
    let user = &as_alice["user"];
    assert_eq!((&user["roles"], &user["userClaims"]["sub"]), (&json!(["user"]), &json!("alice")), "{as_alice}");
}

/// Items 8 and 1: DIAL's response headers on a deployment's answer; a stored definition never gets
/// the user's token, and fields the host would ignore are refused by name on PUT.
#[tokio::test]
async fn answers_carry_dials_headers_and_stored_definitions_refuse_what_the_host_ignores() {
    let Some(f) = Fixture::start().await else { return };
    let client = f.server.client();
    let headers = [("Api-Key", PROJECT_KEY), ("Content-Type", "application/json")];
    let body = |stream: bool| json!({"messages": [{"role": "user", "content": "hi"}], "stream": stream}).to_string();
    let path = "/openai/deployments/echo-sdk/chat/completions";
    let whole = client.post(path, &headers, &body(false)).await;
    assert_eq!((whole.status, whole.headers.get("x-upstream-attempts").map(|v| v.to_str().unwrap())), (200, Some("1")));
    assert!(whole.headers.get("x-accel-buffering").is_none(), "only on event streams");
    let streamed = client.post(path, &headers, &body(true)).await;
    assert!(streamed.headers["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert_eq!(streamed.headers["x-accel-buffering"], "no");
    assert_eq!(streamed.headers["x-upstream-attempts"], "1");

    let stored = format!("/v1/applications/{}/mine", f.alice.bucket);
    for (definition, named) in [
        (
            json!({"endpoint": "http://127.0.0.1:9/chat", "forwardAuthToken": true}),
            "forward_auth_token: true is honoured for configuration applications only",
        ),
        (
            json!({"endpoint": "http://127.0.0.1:9/chat", "function": {"runtime": "python3.11"}}),
            "function is not supported by this host",
        ),
        (
            json!({"endpoint": "http://127.0.0.1:9/chat", "features": {"addonsSupported": true}}),
            "features.addons_supported is not supported",
        ),
        (
            json!({"interfaces": {"chatCompletions": {"baseUrl": "http://a", "mode": "translator"}}}),
            "interfaces.chat_completions.mode is not supported",
        ),
    ] {
        let reply = client.put_body(&stored, &f.alice.auth(), definition.to_string().as_bytes()).await;
        assert_eq!(reply.status, 400, "{definition}: {}", reply.body);
        assert!(reply.body.contains(named), "{definition}: {}", reply.body);
    }
}

/// A skill for the per-message test: `SKILL.md` only.
fn skill_md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: Picked for one message.\n---\n# {name}\n")
}

/// Issue 39, item 1 (DIAL Core #1956, #1976): the skills a user picks for a message
/// (`custom_content.skills`, as DIAL Chat sends them) reach an aidial-sdk application, which reads
/// each with its key — the ZIP, one file, the metadata — a public one without any grant, and cannot
/// read a skill it was not given. A URL that is no skill is a 400, a skill the user cannot read a
/// 403 before the application is called, a skill without a url a 400. `features.skills_supported`
/// (config `skillsSupported` too) shows in the listings aidial-client parses.
#[tokio::test]
async fn skills_picked_for_a_message_reach_the_application_with_its_key() {
    let Some(f) = Fixture::start().await else { return };
    let client = f.server.client();
    let boss = User::new(&client, HS_SECRET, "boss", &["admin"]).await;
    let put_skill = |user: &User, bucket: &str, name: &str| {
        let (client, url, token) = (client.clone(), format!("/v2/skills/{bucket}/{name}"), user.token.clone());
        let content = skill_md(name.rsplit('/').next().unwrap());
        async move {
            let auth = [("Authorization", token.as_str())];
            let reply = client.put_files(&url, &auth, &[("SKILL.md", content.as_bytes())]).await;
            assert_eq!(reply.status, 200, "{url}: {}", reply.body);
        }
    };
    put_skill(&f.alice, &f.alice.bucket, "picked").await;
    put_skill(&f.alice, &f.alice.bucket, "other").await;
    put_skill(&f.bob, &f.bob.bucket, "secret").await;
    put_skill(&boss, "public", "team/shared").await;
    let picked = format!("skills/{}/picked", f.alice.bucket);
    let other = format!("skills/{}/other", f.alice.bucket);
    let public = "skills/public/team/shared".to_string();

    let message = format!("skills read-skill:{other}");
    let result = f
        .dial_as(
            &f.alice,
            "chat",
            &["--deployment", "echo-sdk", "--message", &message, "--skill", &picked, "--skill", &public],
        )
        .await;
    let report = report(&result);
    let served = client.get(&format!("/v2/{picked}"), &f.alice.auth()).await;
    let served_sha256 = {
        use sha2::Digest;
        sha2::Sha256::digest(&served.bytes).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let read = &report["skills"][&picked];
    assert_eq!(
        (&read["zip"], &read["skill_md"], &read["metadata"]),
        (&json!(200), &json!(200), &json!(200)),
        "{report}"
    );
    assert_eq!(read["zip_sha256"], served_sha256, "the ZIP the application read is the one served");
    assert_eq!((&read["skill_md_text"], &read["name"]), (&json!(skill_md("picked")), &json!("picked")), "{report}");
    let shared = &report["skills"][&public];
    assert_eq!((&shared["zip"], &shared["name"]), (&json!(200), &json!("shared")), "a public skill: {report}");
    assert_eq!(report["unpicked"][&other]["zip"], 403, "a skill the message did not pick: {report}");

    let chat = |skills: Value| {
        let body = json!({"messages": [{"role": "user", "content": "skills", "custom_content": {"skills": skills}}]});
        let body = body.to_string();
        let f = &f;
        async move {
            f.dial_as(&f.alice, "call", &["--path", "/openai/deployments/echo-sdk/chat/completions", "--body", &body])
                .await
        }
    };
    let secret = format!("skills/{}/secret", f.bob.bucket);
    let file = f.put_file(&f.alice, "doc.txt", "not a skill").await;
    for (skills, status, named) in [
        (json!([{"url": secret}]), 403, "Access denied to the skill"),
        (json!([{"url": file}]), 400, "is not a SKILL resource"),
        (json!([{"url": format!("skills/{}/missing", f.alice.bucket)}]), 400, "is not a SKILL resource"),
        (json!([{"title": "no url"}]), 400, "has no url"),
        (json!([{"url": " "}]), 400, "has no url"),
    ] {
        let refused = chat(skills.clone()).await;
        assert_eq!(refused["status"], status, "{skills}: {refused}");
        assert!(refused["body"].to_string().contains(named), "{skills}: {refused}");
    }

    for listing in ["/openai/deployments", "/openai/applications"] {
        let listed = client.get(listing, &f.alice.auth()).await.json();
        let features = |id: &str| {
            let item = listed["data"].as_array().unwrap().iter().find(|d| d["id"] == id).unwrap();
            item["features"]["skills_supported"].clone()
        };
        assert_eq!(
            (features("echo-sdk"), features("echo-big"), features("embed")),
            (json!(true), json!(true), json!(false)),
            "{listing}: {listed}"
        );
    }
    let one = client.get("/openai/deployments/echo-sdk", &f.alice.auth()).await.json();
    assert_eq!(one["features"]["skills_supported"], true, "{one}");
}
