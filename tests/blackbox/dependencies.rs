//! Resource dependencies and consent (seed app-resource-dependencies, stories
//! S1–S9; SPEC §9 and "8–9 in detail"): declarations validated on every
//! writer, admin and user consent, resolution at every mint site and every
//! hop against the originating user's own reach, and the audit trail. Real
//! mock applications call back into the host with the key they received.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Client, JwtUser as User, Reply, Server, Setup, files_below};
use crate::upstream::{McpServer, MockApp, run_client_async};

const HS_SECRET: &str = "dependencies-secret";
/// A link id that must never appear in an audit line.
const LINK: &str = "private-link-id-7f3a";

/// One `resource_dependencies` record as a TOML inline table.
fn record(link: &str, path: &str, access: &[&str], required: bool) -> String {
    let access: Vec<String> = access.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "{{ kind = \"dial.resourceLink\", link_id = \"{link}\", target = {{ path = \"{path}\" }}, access = [{}], required = {required} }}",
        access.join(", ")
    )
}

/// One record as the applications API takes it (camelCase, as DIAL clients send).
fn json_record(link: &str, path: &str, access: &[&str], required: bool) -> Value {
    json!({"kind": "dial.resourceLink", "linkId": link, "target": {"path": path}, "access": access, "required": required})
}

struct Fixture {
    setup: Setup,
    server: Server,
    mock: MockApp,
    _mcp: McpServer,
    alice: User,
    bob: User,
    boss: User,
}

impl Fixture {
    /// `None` when the Python clients are not installed (outside CI).
    async fn start() -> Option<Self> {
        let mock = MockApp::start(None)?;
        let mcp = McpServer::start(None)?;
        let (app, tools) = (mock.url(), mcp.url());
        let notes = record(LINK, "files/{current-user}/notes/", &["read", "Write"], true);
        let optional_notes = record(LINK, "files/{current-user}/notes/", &["READ", "WRITE"], false);
        let generated = record("generated", "skills/{current-user}/generated/", &["READ", "WRITE"], true);
        // A skill named as listings name it (`…/pdf/`), and one beside it.
        let pdf = record("pdf", "skills/{current-user}/team/pdf/", &["READ"], true);
        // DIAL Core's own DECLARING_APP: the user's whole skills bucket.
        let all_skills = record("skills", "skills/{current-user}/", &["READ"], true);
        let public_files = record("public", "files/public/", &["READ"], false);
        let setup = Setup::new();
        let audit = setup.path().join("audit.jsonl");
        let config = setup.config(&format!(
            r#"[encryption]
secret = "s"
[identity]
hs256_secret = "{HS_SECRET}"
[proxy]
allowed_destinations = ["127.0.0.1"]
[audit]
file = "{audit}"
[applications.writer]
endpoint = "{app}/chat/completions"
interfaces.responses.endpoint = "{app}/responses"
interfaces.anthropic_messages.endpoint = "{app}/v1/messages"
resource_dependencies = [{notes}]
[applications.tools-writer]
mcp.endpoint = "{tools}/mcp"
resource_dependencies = [{notes}]
[applications.tools-keyless]
mcp.endpoint = "{tools}/mcp"
mcp.forward_per_request_key = false
resource_dependencies = [{notes}]
[applications.optional-writer]
endpoint = "{app}/chat/completions"
resource_dependencies = [{optional_notes}]
[applications.skill-creator]
endpoint = "{app}/chat/completions"
resource_dependencies = [{generated}]
[applications.skill-reader]
endpoint = "{app}/chat/completions"
resource_dependencies = [{pdf}]
[applications.bucket-reader]
endpoint = "{app}/chat/completions"
resource_dependencies = [{all_skills}, {public_files}]
[applications.plain]
endpoint = "{app}/chat/completions"
[applications.chainer]
endpoint = "{app}/chat/completions"
[applications.consenting]
endpoint = "{app}/chat/completions"
features.consent_required = true
"#,
            audit = audit.display()
        ));
        let server = setup.start(Some(&config), &[]);
        mock.set_host_url(&server.url).await;
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let bob = User::new(&client, HS_SECRET, "bob", &["user"]).await;
        let boss = User::new(&client, HS_SECRET, "boss", &["admin"]).await;
        Some(Self { setup, server, mock, _mcp: mcp, alice, bob, boss })
    }

    fn client(&self) -> Client {
        self.server.client()
    }

    fn audit_path(&self) -> PathBuf {
        self.setup.path().join("audit.jsonl")
    }

    fn token(user: &User) -> &str {
        user.token.strip_prefix("Bearer ").unwrap()
    }

    /// Calls `deployment` through `api` (`chat`, `responses`, `anthropic`)
    /// with the official SDK; the client's JSON result.
    async fn call_via(&self, api: &str, user: &User, deployment: &str, message: &str) -> Value {
        let (script, base, extra): (_, _, &[&str]) = match api {
            "chat" => ("openai_client.py", format!("{}/openai/deployments/{deployment}", self.server.url), &[]),
            "responses" => {
                ("openai_client.py", format!("{}/openai/deployments/{deployment}", self.server.url), &["--responses"])
            }
            "anthropic" => {
                ("anthropic_client.py", format!("{}/anthropic/deployments/{deployment}", self.server.url), &[])
            }
            other => panic!("no such api {other}"),
        };
        let mut args = vec!["--base-url", base.as_str(), "--api-key", Self::token(user), "--message", message];
        args.extend_from_slice(extra);
        run_client_async(script, &args).await
    }

    async fn call(&self, user: &User, deployment: &str, message: &str) -> Value {
        self.call_via("chat", user, deployment, message).await
    }

    /// Calls the MCP deployment's `write` tool once per URL.
    async fn mcp_writes(&self, user: &User, deployment: &str, urls: &[&str]) -> Value {
        let endpoint = format!("{}/v1/deployments/{deployment}/mcp", self.server.url);
        let bearer = format!("Authorization=Bearer {}", Self::token(user));
        let mut args = vec!["--url", endpoint.as_str(), "--api-key", "", "--header", bearer.as_str()];
        for url in urls {
            args.extend_from_slice(&["--write", self.server.url.as_str(), url]);
        }
        run_client_async("mcp_client.py", &args).await
    }

    async fn post(&self, user: &User, path: &str, body: &Value) -> Reply {
        let mut headers = user.auth().to_vec();
        headers.push(("Content-Type", "application/json"));
        self.client().post(path, &headers, &body.to_string()).await
    }

    async fn grant(&self, deployment: &str) -> Reply {
        let reply = self.post(&self.boss, &format!("/v1/consent/{deployment}/admin-consent"), &json!({})).await;
        assert_eq!(reply.status, 200, "admin consent to {deployment}: {}", reply.body);
        reply
    }

    async fn admin_consent(&self, user: &User, deployment: &str) -> Reply {
        self.client().get(&format!("/v1/consent/{deployment}/admin-consent"), &user.auth()).await
    }

    async fn put_file(&self, user: &User, url: &str, content: &str) {
        let reply =
            self.client().put_files(&format!("/v1/{url}"), &user.auth(), &[("doc.txt", content.as_bytes())]).await;
        assert_eq!(reply.status, 200, "{url}: {}", reply.body);
    }

    /// Stores an application definition as `user` (`applications/public/…`
    /// for an admin's shared applications).
    async fn put_app(&self, user: &User, url: &str, definition: &Value) -> Reply {
        self.client().put_body(&format!("/v1/{url}"), &user.auth(), definition.to_string().as_bytes()).await
    }

    /// Shares `url` (of `owner`) with `grantee` with these permissions.
    async fn share(&self, owner: &User, grantee: &User, url: &str, permissions: &[&str]) {
        let body = json!({"invitationType": "link", "resources": [{"url": url, "permissions": permissions}]});
        let reply = self.post(owner, "/v1/ops/resource/share/create", &body).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let link = reply.json()["invitationLink"].as_str().unwrap().to_string();
        let accepted = self.client().get(&format!("{link}?accept=true"), &grantee.auth()).await;
        assert_eq!(accepted.status, 200, "{}", accepted.body);
    }
}

/// The report the mock application answers with.
fn report(result: &Value) -> &Value {
    assert!(result.get("error").is_none(), "the client failed: {result}");
    &result["report"]
}

/// The status a callback of the report got.
fn status(result: &Value, command: &str) -> u64 {
    let callback = &report(result)["callbacks"][command];
    callback["status"].as_u64().unwrap_or_else(|| panic!("no {command} in {result}"))
}

/// A refused call: the client's status and the error text.
fn refusal(result: &Value) -> (u64, String) {
    (
        result["status"].as_u64().unwrap_or_else(|| panic!("the call was not refused: {result}")),
        result["body"].to_string(),
    )
}

/// S4/S5: with admin consent, a required WRITE dependency opens exactly its
/// target to the application's key on every mint site: OpenAI chat and
/// responses, Anthropic messages and MCP.
#[tokio::test]
async fn a_consented_dependency_opens_its_target_and_nothing_else_on_every_mint_site() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    f.grant("writer").await;
    f.grant("tools-writer").await;
    for api in ["chat", "responses", "anthropic"] {
        let (inside, outside) = (format!("write:files/{a}/notes/{api}.txt"), format!("write:files/{a}/{api}.txt"));
        let result = f.call_via(api, &f.alice, "writer", &format!("{inside} {outside}")).await;
        assert_eq!(status(&result, &inside), 200, "{api}: {result}");
        assert_eq!(status(&result, &outside), 403, "{api}: {result}");
    }
    let (inside, outside) = (format!("files/{a}/notes/mcp.txt"), format!("files/{a}/mcp.txt"));
    let result = f.mcp_writes(&f.alice, "tools-writer", &[&inside, &outside]).await;
    assert!(result.get("error").is_none(), "{result}");
    assert_eq!(result["writes"], json!({&inside: 200, &outside: 403}), "{result}");

    // What the applications wrote is the user's; nothing landed outside.
    let client = f.client();
    for name in ["chat", "responses", "anthropic", "mcp"] {
        assert_eq!(client.get(&format!("/v1/files/{a}/notes/{name}.txt"), &f.alice.auth()).await.status, 200);
        assert_eq!(client.get(&format!("/v1/files/{a}/{name}.txt"), &f.alice.auth()).await.status, 404);
    }
}

/// Without live admin consent: an optional record grants nothing (the call
/// goes through, the target stays closed); a required one fails the call
/// with 403 before the application is contacted, on every mint site. An MCP
/// server that gets no key cannot be given a required resource.
#[tokio::test]
async fn unconsented_dependencies_grant_nothing_and_required_ones_stop_the_call() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    let write = format!("write:files/{a}/notes/x.txt");
    let optional = f.call(&f.alice, "optional-writer", &write).await;
    assert_eq!(status(&optional, &write), 403, "{optional}");

    for api in ["chat", "responses", "anthropic"] {
        let before = f.mock.last().await;
        let refused = f.call_via(api, &f.alice, "writer", &write).await;
        let (code, body) = refusal(&refused);
        assert_eq!(code, 403, "{api}: {refused}");
        assert!(body.contains("Required resource dependency"), "{api}: {body}");
        assert!(body.contains("no admin has consented"), "{api}: {body}");
        assert_eq!(f.mock.last().await, before, "{api}: the application was never called");
    }
    let mcp = f.mcp_writes(&f.alice, "tools-writer", &[]).await;
    assert_eq!(mcp["status"], 403, "{mcp}");

    // Consent given, but the MCP server would get no key to use it with.
    f.grant("tools-keyless").await;
    let keyless = f.mcp_writes(&f.alice, "tools-keyless", &[]).await;
    assert_eq!(keyless["status"], 403, "forward_per_request_key = false with a required record: {keyless}");
    assert_eq!(f.client().get(&format!("/v1/files/{a}/notes/x.txt"), &f.alice.auth()).await.status, 404);
}

/// S5: one admin grant serves every user; `{current-user}` is each caller's
/// own bucket, never another's.
#[tokio::test]
async fn one_admin_grant_covers_every_user_each_in_their_own_bucket() {
    let Some(f) = Fixture::start().await else { return };
    let (a, b) = (&f.alice.bucket, &f.bob.bucket);
    f.grant("writer").await;
    let (own, others) = (format!("write:files/{a}/notes/a.txt"), format!("write:files/{b}/notes/from-alice.txt"));
    let alice = f.call(&f.alice, "writer", &format!("{own} {others}")).await;
    assert_eq!((status(&alice, &own), status(&alice, &others)), (200, 403), "{alice}");
    let (own, others) = (format!("write:files/{b}/notes/b.txt"), format!("write:files/{a}/notes/from-bob.txt"));
    let bob = f.call(&f.bob, "writer", &format!("{own} {others}")).await;
    assert_eq!((status(&bob, &own), status(&bob, &others)), (200, 403), "{bob}");
}

/// S6: the admin-consent record is a snapshot of the declaration; a changed
/// declaration makes it stale (GET tri-state) and the calls that need it
/// fail until the admin grants again; a cosmetic change does not. Stored
/// (API-written) applications round-trip the declaration in snake_case.
#[tokio::test]
async fn a_changed_declaration_is_stale_until_the_admin_grants_again() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    let url = "applications/public/notes-app";
    let endpoint = format!("{}/chat/completions", f.mock.url());
    let declared = |path: &str, name: &str| {
        json!({"endpoint": endpoint, "displayName": name,
               "resourceDependencies": [json_record(LINK, path, &["write", "Read"], true)]})
    };
    assert_eq!(f.put_app(&f.boss, url, &declared("files/{current-user}/notes/", "Notes")).await.status, 200);
    let stored = f.client().get(&format!("/v1/{url}"), &f.boss.auth()).await.json();
    assert_eq!(
        stored["resource_dependencies"],
        json!([{"access": ["WRITE", "READ"], "kind": "dial.resourceLink", "link_id": LINK, "required": true,
                "target": {"path": "files/{current-user}/notes/"}}]),
        "{stored}"
    );
    assert!(stored.get("resourceDependencies").is_none(), "{stored}");

    let write = format!("write:files/{a}/notes/x.txt");
    assert_eq!(f.admin_consent(&f.boss, url).await.json(), json!({"consented": false}));
    assert_eq!(refusal(&f.call(&f.alice, url, &write).await).0, 403);

    let granted = f.grant(url).await.json();
    let consent = f.admin_consent(&f.boss, url).await.json();
    assert_eq!((consent["consented"].clone(), consent["stale"].clone()), (json!(true), json!(false)), "{consent}");
    assert_eq!(consent["grantedBy"], "boss");
    assert!(consent["grantedAt"].as_u64().unwrap() > 1_700_000_000_000, "epoch milliseconds: {consent}");
    // The declaration as approved: the target as declared, placeholder kept.
    assert_eq!(
        consent["consent"],
        json!({"resources": [{"url": "files/{current-user}/notes/", "access": ["READ", "WRITE"], "linkId": LINK,
                              "required": true}]})
    );
    assert_eq!(granted["consent"], consent["consent"]);
    assert_eq!(status(&f.call(&f.alice, url, &write).await, &write), 200);

    // A new display name is not a declaration change.
    assert_eq!(f.put_app(&f.boss, url, &declared("files/{current-user}/notes/", "Renamed")).await.status, 200);
    assert_eq!(f.admin_consent(&f.boss, url).await.json()["consented"], true);

    // A new target is: stale, provenance kept, calls refused.
    assert_eq!(f.put_app(&f.boss, url, &declared("files/{current-user}/drafts/", "Renamed")).await.status, 200);
    let stale = f.admin_consent(&f.boss, url).await.json();
    assert_eq!((stale["consented"].clone(), stale["stale"].clone()), (json!(false), json!(true)), "{stale}");
    assert_eq!((stale["grantedBy"].clone(), stale["consent"].clone()), ("boss".into(), consent["consent"].clone()));
    let drafts = format!("write:files/{a}/drafts/x.txt");
    assert_eq!(refusal(&f.call(&f.alice, url, &drafts).await).0, 403);
    // `?declaration=true` (the admin console's stale diff) adds today's declaration, in the approved form.
    let path = format!("/v1/consent/{url}/admin-consent?declaration=true");
    let with_declaration = f.client().get(&path, &f.boss.auth()).await.json();
    assert_eq!(with_declaration["consent"], consent["consent"], "{with_declaration}");
    assert_eq!(
        with_declaration["declaration"],
        json!({"resources": [{"url": "files/{current-user}/drafts/", "access": ["READ", "WRITE"], "linkId": LINK,
                              "required": true}]})
    );
    assert!(stale.get("declaration").is_none(), "DIAL's shape without the parameter: {stale}");
    let bad = f.client().get(&format!("/v1/consent/{url}/admin-consent?declaration=maybe"), &f.boss.auth()).await;
    assert_eq!((bad.status, bad.body.as_str()), (400, "declaration must be true or false"));
    let as_user = f.client().get(&path, &f.alice.auth()).await;
    assert_eq!(as_user.status, 403, "{}", as_user.body);
    // A grant naming the declaration it reviewed is refused when the application declares something else
    // by now (the console sends what it showed), and grants nothing.
    let grant_path = format!("/v1/consent/{url}/admin-consent");
    let reviewed_before = f.post(&f.boss, &grant_path, &json!({"declaration": consent["consent"]})).await;
    assert_eq!(reviewed_before.status, 412, "{}", reviewed_before.body);
    assert!(reviewed_before.body.contains("changed since the one reviewed"), "{}", reviewed_before.body);
    assert_eq!(f.admin_consent(&f.boss, url).await.json()["stale"], true, "nothing granted");
    let malformed = f.post(&f.boss, &grant_path, &json!({"declaration": {"resources": "all"}})).await;
    assert_eq!(malformed.status, 400, "{}", malformed.body);

    f.grant(url).await;
    assert_eq!(status(&f.call(&f.alice, url, &drafts).await, &drafts), 200);

    // Withdrawn: refused again on the next call.
    let withdraw = f.client().delete(&format!("/v1/consent/{url}/admin-consent"), &f.boss.auth()).await;
    assert_eq!(withdraw.status, 200, "{}", withdraw.body);
    assert_eq!(f.admin_consent(&f.boss, url).await.json(), json!({"consented": false}));
    assert_eq!(refusal(&f.call(&f.alice, url, &drafts).await).0, 403);
    assert_eq!(f.client().delete(&format!("/v1/consent/{url}/admin-consent"), &f.boss.auth()).await.status, 404);
}

/// S2/S7: every writer validates; a bad declaration is refused whole with
/// every issue named and nothing stored; users may not declare unless the
/// host allows it; a definition without the section is stored byte for byte.
#[tokio::test]
async fn declarations_are_validated_on_every_writer() {
    let Some(f) = Fixture::start().await else { return };
    let endpoint = format!("{}/chat/completions", f.mock.url());
    let bad = json!({"endpoint": endpoint, "resourceDependencies": [
        json_record("a", "files/{current-user}/notes/", &["READ", "SHARE"], false),
        json_record("a", "system/x/y", &[], true),
        json_record("b", "files/x/{current-user}/y", &["READ"], false),
        json_record("c", "files/{current-user}/a/%2E%2E/b", &["READ"], false),
        json_record("d", "files", &["READ"], false),
    ]});
    let url = "applications/public/bad";
    let reply = f.put_app(&f.boss, url, &bad).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.starts_with("Invalid resource dependencies: "), "{}", reply.body);
    for issue in [
        "'SHARE' is not READ or WRITE",
        "'a' is declared twice",
        "type 'system'",
        "access must not be empty",
        "placeholder outside the bucket",
        "a . or .. segment",
        "target 'files' must be {type}/{bucket}/{path…}",
    ] {
        assert!(reply.body.contains(issue), "{issue:?} missing: {}", reply.body);
    }
    assert_eq!(reply.body.matches("; ").count(), 6, "seven issues, one message: {}", reply.body);
    assert_eq!(f.client().get(&format!("/v1/{url}"), &f.boss.auth()).await.status, 404, "nothing stored");

    // A user-authored application may not declare, whatever its destination
    // (here also a folder of Bob's that Alice may write to).
    let (a, b) = (&f.alice.bucket, &f.bob.bucket);
    f.share(&f.bob, &f.alice, &format!("applications/{b}/shared/"), &["READ", "WRITE"]).await;
    let declaring = json!({"endpoint": endpoint,
        "resourceDependencies": [json_record("l", "files/{current-user}/notes/", &["READ"], false)]});
    for url in [format!("applications/{a}/mine"), format!("applications/{b}/shared/mine")] {
        let reply = f.put_app(&f.alice, &url, &declaring).await;
        assert_eq!(reply.status, 403, "{url}: {}", reply.body);
        assert!(reply.body.contains("allow_user_resource_dependencies"), "{}", reply.body);
        assert_eq!(f.client().get(&format!("/v1/{url}"), &f.alice.auth()).await.status, 404, "nothing stored");
    }
    // Without the section a definition is stored as before the feature: the
    // stored (snake_case, compact) form round-trips byte for byte.
    let sent = format!(r#"{{"endpoint": "{endpoint}",  "displayName": "Mine", "features": {{"rateEndpoint": null}}}}"#);
    let stored = format!(r#"{{"display_name":"Mine","endpoint":"{endpoint}","features":{{"rate_endpoint":null}}}}"#);
    let url = format!("/v1/applications/{a}/mine");
    for body in [&sent, &stored] {
        assert_eq!(f.client().put_body(&url, &f.alice.auth(), body.as_bytes()).await.status, 200);
        assert_eq!(f.client().get(&url, &f.alice.auth()).await.body, stored, "{body}");
    }

    // A configuration application is validated at load: the start stops, naming it.
    let setup = Setup::new();
    let broken = record("l", "files/{current-user}/x/../y", &["READ"], true);
    let config = setup
        .config(&format!("[applications.broken-app]\nendpoint = \"{endpoint}\"\nresource_dependencies = [{broken}]\n"));
    for command in ["check-config", "serve"] {
        let (ok, _, stderr) = setup.run(&[command, "--config", config.to_str().unwrap()], &[]);
        assert!(!ok, "{command} accepted an invalid declaration");
        assert!(stderr.contains("broken-app"), "{command}: {stderr}");
        assert!(stderr.contains("Invalid resource dependencies: "), "{command}: {stderr}");
    }
}

/// With `access.allow_user_resource_dependencies` users may declare; with no
/// admin role configured nobody may decide admin consent (fail closed).
#[tokio::test]
async fn user_declarations_when_allowed_and_admin_consent_fails_closed() {
    let Some(mock) = MockApp::start(None) else { return };
    let setup = Setup::new();
    let endpoint = format!("{}/chat/completions", mock.url());
    let notes = record("l", "files/{current-user}/notes/", &["READ"], false);
    let config = setup.config(&format!(
        "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\n[access]\nadmin_roles = []\n\
         allow_user_resource_dependencies = true\n[applications.declared]\nendpoint = \"{endpoint}\"\n\
         resource_dependencies = [{notes}]\n"
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
    let boss = User::new(&client, HS_SECRET, "boss", &["admin"]).await;
    let definition = json!({"endpoint": endpoint,
        "resourceDependencies": [json_record("l", "files/{current-user}/notes/", &["read"], false)]});
    let url = format!("/v1/applications/{}/mine", alice.bucket);
    let reply = client.put_body(&url, &alice.auth(), definition.to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(client.get(&url, &alice.auth()).await.json()["resource_dependencies"][0]["access"], json!(["READ"]));
    let headers = [boss.auth()[0], ("Content-Type", "application/json")];
    let refused = client.post("/v1/consent/declared/admin-consent", &headers, "{}").await;
    assert_eq!(refused.status, 403, "no admin role configured: nobody is an admin: {}", refused.body);
}

/// S3: admin consent is decided by explicit admins only, about known
/// deployments that declare something; its record lives where no resource
/// route reaches.
#[tokio::test]
async fn admin_consent_is_for_admins_and_its_record_is_out_of_reach() {
    let Some(f) = Fixture::start().await else { return };
    let alice_post = f.post(&f.alice, "/v1/consent/writer/admin-consent", &json!({})).await;
    assert_eq!(alice_post.status, 403, "{}", alice_post.body);
    assert_eq!(f.admin_consent(&f.alice, "writer").await.status, 403);
    assert_eq!(f.client().delete("/v1/consent/writer/admin-consent", &f.alice.auth()).await.status, 403);
    assert_eq!(f.post(&f.boss, "/v1/consent/nope/admin-consent", &json!({})).await.status, 404);
    let nothing = f.post(&f.boss, "/v1/consent/plain/admin-consent", &json!({})).await;
    assert_eq!(nothing.status, 400, "{}", nothing.body);
    assert!(nothing.body.contains("declares no resource dependencies"), "{}", nothing.body);

    f.grant("writer").await;
    let records: Vec<PathBuf> = files_below(&f.setup.path().join("data"))
        .into_iter()
        .filter(|path| std::fs::read_to_string(path).is_ok_and(|text| text.contains("grantedBy")))
        .collect();
    assert_eq!(records.len(), 1, "one record: {records:?}");
    let name = records[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(records[0].display().to_string().contains("system"), "{records:?}");

    // No bucket, group or path of the resource routes addresses it, for anybody.
    let stem = name.trim_end_matches(".json");
    let attempts = [
        format!("/v1/files/system/consent/admin/{name}"),
        format!("/v1/prompts/system/consent/admin/{stem}"),
        "/v1/metadata/files/system/".to_string(),
        "/v1/metadata/files/system/consent/admin/".to_string(),
        format!("/v2/skills/system/consent/admin/{stem}"),
        "/v2/metadata/skills/system/".to_string(),
        format!("/v1/files/public/../system/consent/admin/{name}"),
        format!("/v1/files/{}/../../system/consent/admin/{name}", f.boss.bucket),
    ];
    for user in [&f.boss, &f.alice] {
        for path in &attempts {
            let reply = f.client().get(path, &user.auth()).await;
            assert!(reply.status >= 400, "{path}: {} {}", reply.status, reply.body);
            assert!(!reply.body.contains("grantedBy"), "{path}: {}", reply.body);
        }
        let listing = f.client().get("/v1/metadata/files/public/?recursive=true", &user.auth()).await;
        assert!(!listing.body.contains("grantedBy") && !listing.body.contains(&name), "{}", listing.body);
    }
}

/// DIAL's user consent: an application that asks for it is refused until
/// the user accepts, per user.
#[tokio::test]
async fn user_consent_is_asked_before_the_first_call() {
    let Some(f) = Fixture::start().await else { return };
    let refused = f.call(&f.alice, "consenting", "hello").await;
    let (code, body) = refusal(&refused);
    assert_eq!(code, 403, "{refused}");
    assert!(body.contains("User didn't accept consent to call the deployment: consenting"), "{body}");
    let asked = f.client().get("/v1/consent/consenting", &f.alice.auth()).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    assert_eq!(asked.json()["accepted"], false, "{}", asked.body);
    assert_eq!(asked.json()["consent"]["deployments"]["consenting"]["consentRequired"], true, "{}", asked.body);

    // Accepting something other than the document asked for accepts nothing.
    let other = json!({"consent": {"deployments": {"plain": {"consentRequired": true}}}});
    assert_eq!(f.post(&f.alice, "/v1/consent/consenting", &other).await.status, 200);
    assert_eq!(f.client().get("/v1/consent/consenting", &f.alice.auth()).await.json()["accepted"], false);
    assert_eq!(refusal(&f.call(&f.alice, "consenting", "hello").await).0, 403);
    let missing = f.post(&f.alice, "/v1/consent/consenting", &json!({})).await;
    assert_eq!((missing.status, missing.body.as_str()), (400, "User consent is missed"));
    let accept = f.post(&f.alice, "/v1/consent/consenting", &json!({"consent": asked.json()["consent"]})).await;
    assert_eq!(accept.status, 200, "{}", accept.body);
    // As DIAL: accepted, and no document to review any more.
    assert_eq!(f.client().get("/v1/consent/consenting", &f.alice.auth()).await.json(), json!({"accepted": true}));
    assert!(report(&f.call(&f.alice, "consenting", "hello").await).is_object());

    // Bob has not accepted; an application that does not ask needs nothing.
    assert_eq!(refusal(&f.call(&f.bob, "consenting", "hello").await).0, 403);
    assert_eq!(f.client().get("/v1/consent/plain", &f.bob.auth()).await.json()["accepted"], true);
    assert_eq!(f.client().get("/v1/consent/nope", &f.bob.auth()).await.status, 404);
}

/// S9, the skill-creator flow: an application writes a whole skill into the
/// user's `skills/{current-user}/generated/` folder through `/v2`, and the
/// user finds it there; elsewhere in the user's skills it is refused.
#[tokio::test]
async fn an_application_creates_a_skill_in_the_users_folder() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    f.grant("skill-creator").await;
    let (inside, outside) =
        (format!("skill:skills/{a}/generated/meeting-notes"), format!("skill:skills/{a}/mine/meeting-notes"));
    let result = f.call(&f.alice, "skill-creator", &format!("{inside} {outside}")).await;
    assert_eq!(status(&result, &inside), 200, "{result}");
    assert_eq!(status(&result, &outside), 403, "{result}");
    let skill =
        f.client().get(&format!("/v2/skills/{a}/generated/meeting-notes/files/SKILL.md"), &f.alice.auth()).await;
    assert_eq!(skill.status, 200, "{}", skill.body);
    assert!(skill.body.contains("name: meeting-notes"), "{}", skill.body);
    let listing = f.client().get(&format!("/v2/metadata/skills/{a}/generated/"), &f.alice.auth()).await;
    assert!(listing.body.contains("meeting-notes"), "{}", listing.body);
}

/// A skill declared in its listing form (`skills/{current-user}/team/pdf/`,
/// the `url` listings give it) is granted as the skill: the application
/// reads its files, and not those of the skill beside it.
#[tokio::test]
async fn a_skill_declared_by_its_listing_url_is_granted_as_the_skill() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    let client = f.client();
    for name in ["pdf", "other"] {
        let skill_md = format!("---\nname: {name}\ndescription: Does {name} things.\n---\n# {name}\n");
        let files: [(&str, &[u8]); 1] = [("SKILL.md", skill_md.as_bytes())];
        let put = client.put_files(&format!("/v2/skills/{a}/team/{name}"), &f.alice.auth(), &files).await;
        assert_eq!(put.status, 200, "{}", put.body);
    }
    f.grant("skill-reader").await;
    let (declared, beside) = (
        format!("read-skill-file:skills/{a}/team/pdf/files/SKILL.md"),
        format!("read-skill-file:skills/{a}/team/other/files/SKILL.md"),
    );
    let result = f.call(&f.alice, "skill-reader", &format!("{declared} {beside}")).await;
    assert_eq!(status(&result, &declared), 200, "{result}");
    assert_eq!(status(&result, &beside), 403, "{result}");
}

/// A whole bucket is a target like any folder (DIAL Core's DECLARING_APP
/// declares `skills/{current-user}/`, its validator tests `files/public/`):
/// such a definition loads from the configuration and is stored by the
/// applications API, and the grant on the bucket covers everything in it —
/// the calling user's bucket, never another's.
#[tokio::test]
async fn a_whole_bucket_is_declared_and_granted_like_any_folder() {
    let Some(f) = Fixture::start().await else { return };
    let (a, b) = (&f.alice.bucket, &f.bob.bucket);
    let client = f.client();
    for (user, bucket) in [(&f.alice, a), (&f.bob, b)] {
        let skill_md = "---\nname: deep\ndescription: Deep in the bucket.\n---\n# deep\n";
        let files: [(&str, &[u8]); 1] = [("SKILL.md", skill_md.as_bytes())];
        let put = client.put_files(&format!("/v2/skills/{bucket}/any/where/deep"), &user.auth(), &files).await;
        assert_eq!(put.status, 200, "{}", put.body);
    }
    f.put_file(&f.boss, "files/public/library/doc.txt", "public doc").await;
    // Stored through the API as well, by an admin.
    let stored = json!({"endpoint": format!("{}/chat/completions", f.mock.url()), "resourceDependencies": [
        json_record("skills", "skills/{current-user}/", &["READ"], true),
        json_record("public", "files/public/", &["READ"], false),
    ]});
    let reply = f.put_app(&f.boss, "applications/public/bucket-app", &stored).await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    for deployment in ["bucket-reader", "applications/public/bucket-app"] {
        f.grant(deployment).await;
        let (own, others, public) = (
            format!("read-skill-file:skills/{a}/any/where/deep/files/SKILL.md"),
            format!("read-skill-file:skills/{b}/any/where/deep/files/SKILL.md"),
            "read:files/public/library/doc.txt".to_string(),
        );
        let result = f.call(&f.alice, deployment, &format!("{own} {others} {public}")).await;
        assert_eq!(
            [status(&result, &own), status(&result, &others), status(&result, &public)],
            [200, 403, 200],
            "{deployment}: {result}"
        );
    }
}

/// S4: a grant is declared ∩ what the user can do alone, decided fresh on
/// every call: a share given later opens the target, READ-only gives READ
/// only, a revoke closes it on the next call; a public target never becomes
/// writable.
#[tokio::test]
async fn a_grant_never_exceeds_what_the_user_can_do_alone() {
    let Some(f) = Fixture::start().await else { return };
    let b = &f.bob.bucket;
    f.put_file(&f.bob, &format!("files/{b}/team/plan.txt"), "bob's plan").await;
    f.put_file(&f.boss, "files/public/library/doc.txt", "public doc").await;
    let url = "applications/public/team-app";
    let definition = json!({"endpoint": format!("{}/chat/completions", f.mock.url()), "resourceDependencies": [
        json_record("team", &format!("files/{b}/team/"), &["READ", "WRITE"], false),
        json_record("library", "files/public/library/", &["READ", "WRITE"], false),
    ]});
    assert_eq!(f.put_app(&f.boss, url, &definition).await.status, 200);
    f.grant(url).await;

    let read_team = format!("read:files/{b}/team/plan.txt");
    let write_team = format!("write:files/{b}/team/by-app.txt");
    let (read_public, write_public) =
        ("read:files/public/library/doc.txt".to_string(), "write:files/public/library/by-app.txt".to_string());
    let message = format!("{read_team} {write_team} {read_public} {write_public}");
    let outcome =
        |result: &Value| [&read_team, &write_team, &read_public, &write_public].map(|command| status(result, command));
    assert_eq!(outcome(&f.call(&f.alice, url, &message).await), [403, 403, 200, 403], "nothing shared yet");
    f.share(&f.bob, &f.alice, &format!("files/{b}/team/"), &["READ"]).await;
    assert_eq!(outcome(&f.call(&f.alice, url, &message).await), [200, 403, 200, 403], "READ shared: READ only");
    f.share(&f.bob, &f.alice, &format!("files/{b}/team/"), &["READ", "WRITE"]).await;
    assert_eq!(outcome(&f.call(&f.alice, url, &message).await), [200, 200, 200, 403], "READ and WRITE shared");
    let revoke = json!({"resources": [{"url": format!("files/{b}/team/")}]});
    assert_eq!(f.post(&f.bob, "/v1/ops/resource/share/revoke", &revoke).await.status, 200);
    assert_eq!(outcome(&f.call(&f.alice, url, &message).await), [403, 403, 200, 403], "revoked: closed again");
    // Bob, whose folder it is, gets it all through the same declaration.
    assert_eq!(outcome(&f.call(&f.bob, url, &message).await), [200, 200, 200, 403]);
}

/// S8: every hop resolves the callee's own declaration against the
/// originating user; what the calling application's key holds never
/// satisfies the callee's reach check.
#[tokio::test]
async fn a_callee_never_inherits_the_callers_reach() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    // The calling application's own bucket, which its key may write.
    let probe = f.call(&f.alice, "chainer", "appdata").await;
    let chainer = report(&probe)["callbacks"]["appdata"]["bucket"].as_str().unwrap().to_string();
    let endpoint = format!("{}/chat/completions", f.mock.url());
    let callee = json!({"endpoint": endpoint, "resourceDependencies": [
        json_record("theirs", &format!("files/{chainer}/out/"), &["WRITE"], false),
        json_record("notes", "files/{current-user}/notes/", &["WRITE"], false),
    ]});
    let strict = json!({"endpoint": endpoint, "resourceDependencies": [
        json_record("theirs", &format!("files/{chainer}/out/"), &["WRITE"], true),
    ]});
    assert_eq!(f.put_app(&f.boss, "applications/public/callee", &callee).await.status, 200);
    assert_eq!(f.put_app(&f.boss, "applications/public/strict-callee", &strict).await.status, 200);
    f.grant("applications/public/callee").await;
    f.grant("applications/public/strict-callee").await;

    let (caller_write, callee_write, callee_notes) = (
        format!("write:files/{chainer}/out/by-caller.txt"),
        format!("write:files/{chainer}/out/by-callee.txt"),
        format!("write:files/{a}/notes/by-callee.txt"),
    );
    let chain = format!("chain:applications/public/callee|{callee_write}|{callee_notes}");
    let strict_chain = "chain:applications/public/strict-callee|appdata".to_string();
    let result = f.call(&f.alice, "chainer", &format!("{caller_write} {chain} {strict_chain}")).await;
    assert_eq!(status(&result, &caller_write), 200, "the caller's key writes its own bucket: {result}");
    let hop = &report(&result)["callbacks"][&chain];
    assert_eq!(hop["status"], 200, "{hop}");
    let callee_report = &hop["report"]["callbacks"];
    assert_eq!(callee_report[&callee_write]["status"], 403, "the caller's reach is not the callee's: {hop}");
    assert_eq!(callee_report[&callee_notes]["status"], 200, "the originating user's own folder: {hop}");
    let strict_hop = &report(&result)["callbacks"][&strict_chain];
    assert_eq!(strict_hop["status"], 403, "a required record the user cannot reach stops the hop: {strict_hop}");
}

/// The audit trail: one JSON line per event with the SPEC's fields, never a
/// link id, a key or a token.
#[tokio::test]
async fn audit_events_name_targets_and_never_secrets() {
    let Some(f) = Fixture::start().await else { return };
    let a = &f.alice.bucket;
    f.grant("writer").await;
    let write = format!("write:files/{a}/notes/x.txt");
    let granted = f.call(&f.alice, "writer", &write).await;
    let key = report(&granted)["api_key"].as_str().unwrap().to_string();
    f.call(&f.alice, "optional-writer", &write).await;
    let withdraw = f.client().delete("/v1/consent/writer/admin-consent", &f.boss.auth()).await;
    assert_eq!(withdraw.status, 200, "{}", withdraw.body);
    assert_eq!(refusal(&f.call(&f.alice, "writer", &write).await).0, 403);

    let text = std::fs::read_to_string(f.audit_path()).expect("the audit file");
    for secret in [LINK, key.as_str(), Fixture::token(&f.alice), Fixture::token(&f.boss)] {
        assert!(!text.contains(secret), "{secret} leaked into the audit file:\n{text}");
    }
    let events: Vec<Value> =
        text.lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    let of = |kind: &str| events.iter().filter(|e| e["event"] == kind).cloned().collect::<Vec<_>>();
    let target = json!([format!("files/{a}/notes/")]);

    let grant = &of("admin_consent_grant")[0];
    assert_eq!((grant["app"].clone(), grant["user"].clone()), (json!("writer"), json!("boss")), "{grant}");
    assert_eq!(grant["targets"], json!(["files/{current-user}/notes/"]), "{grant}");
    assert_eq!(of("admin_consent_withdraw")[0]["app"], "writer");

    let granted = &of("resource_dependency_grant")[0];
    assert_eq!((granted["app"].clone(), granted["targets"].clone()), (json!("writer"), target.clone()), "{granted}");
    assert_eq!((granted["user"].clone(), granted["source_deployment"].clone()), (json!("alice"), json!("root")));
    assert_eq!(granted["outcome"], "granted READ+WRITE", "{granted}");
    assert!(!granted["trace_id"].as_str().unwrap().is_empty());

    let denials = of("resource_dependency_denial");
    let optional = denials.iter().find(|e| e["app"] == "optional-writer").expect("the optional record's denial");
    assert!(optional["reason"].as_str().unwrap().contains("no admin has consented"), "{optional}");
    assert_eq!(optional["targets"], target);
    let failed = &of("resource_dependency_runtime_fail")[0];
    assert_eq!(
        (failed["app"].clone(), failed["outcome"].clone()),
        (json!("writer"), json!("call refused")),
        "{failed}"
    );
    for event in &events {
        for field in ["event", "app", "targets", "user", "outcome"] {
            assert!(event.get(field).is_some(), "{field} missing: {event}");
        }
    }
}
