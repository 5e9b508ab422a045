//! `GET /openapi.json` (issue 14): served without credentials, valid OpenAPI
//! 3.1 by the standard validator (`openapi-spec-validator`), and true to the
//! running server method by method: every documented operation is routed,
//! and every method the server routes on a documented path is documented.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::sharing::{Fixture, HS_SECRET};
use crate::support::{Client, JwtUser as User, Reply, Setup};
use crate::upstream::{WORKSPACE, clients_python};

const METHODS: [&str; 4] = ["GET", "PUT", "POST", "DELETE"];

/// A documented path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{group}", "skills")
        .replace("{bucket}", "some-bucket")
        .replace("{path}", "team/s")
        .replace("{deployment}", "app")
        .replace("{id}", "invitation")
        .replace("{file}", "SKILL.md")
        .replace("{dir}", "scripts")
}

#[tokio::test]
async fn the_document_is_valid_openapi_and_matches_what_the_server_routes() {
    let setup = Setup::new();
    let server = setup.start(None, &[]);
    let client = server.client();

    let reply = client.get("/openapi.json", &[]).await;
    assert_eq!(reply.status, 200, "no credentials needed: {}", reply.body);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    let doc: Value = reply.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."), "{}", doc["openapi"]);

    // The standard validator accepts it.
    if let Some(python) = clients_python() {
        let file = setup.path().join("openapi.json");
        std::fs::write(&file, &reply.bytes).unwrap();
        let output = Command::new(python).args(["-m", "openapi_spec_validator"]).arg(&file).output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "openapi-spec-validator refused the document:\n{said}");
        assert!(said.contains("OK"), "{said}");
    }

    // Each documented path answers exactly its documented methods: the
    // others get 405 from the router, the documented ones never 405 nor
    // the fallback's "No route".
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 30, "{} paths", paths.len());
    for (path, item) in paths {
        let url = concrete(path);
        for method in METHODS {
            let documented = item.get(method.to_ascii_lowercase()).is_some();
            let reply = client.send_raw(method, &url, &[], Vec::new()).await;
            // The mint sites answer the fallback's "No route" in their callers' dialect (JSON).
            let routed =
                reply.status != 405 && !reply.body.starts_with("No route") && !reply.body.contains("\"No route: ");
            assert_eq!(
                routed, documented,
                "{method} {path} ({url}): documented {documented}, answered {} {}",
                reply.status, reply.body
            );
        }
    }
}

/// Requests sent through [`Recorder::call`], with what came back, for
/// `tests/clients/openapi_conformance.py` to check against the document.
struct Recorder<'a> {
    client: &'a Client,
    exchanges: Vec<Value>,
}

/// One request: the documented path template, the concrete URL, who sends
/// it, and its JSON body (multipart PUTs send `files` instead).
struct Call<'a> {
    method: &'a str,
    template: &'a str,
    url: String,
    user: &'a User,
    json: Option<Value>,
    files: &'a [(&'a str, &'a [u8])],
}

impl Recorder<'_> {
    async fn call(&mut self, call: Call<'_>) -> Reply {
        let auth = call.user.auth();
        let reply = match (call.method, &call.json) {
            ("PUT", None) => self.client.put_files(&call.url, &auth, call.files).await,
            ("PUT", Some(body)) => self.client.put_body(&call.url, &auth, body.to_string().as_bytes()).await,
            ("POST", body) => {
                let body = body.as_ref().map(Value::to_string).unwrap_or_default();
                self.client.post(&call.url, &auth, &body).await
            }
            ("DELETE", _) => self.client.delete(&call.url, &auth).await,
            _ => self.client.get(&call.url, &auth).await,
        };
        let content_type = reply.headers.get("content-type").map(|v| v.to_str().unwrap().to_string());
        let is_json = content_type.as_deref().is_some_and(|t| t.starts_with("application/json"));
        self.exchanges.push(json!({
            "method": call.method,
            "path": call.template,
            "status": reply.status,
            "contentType": content_type,
            "request": call.json,
            "response": if is_json { reply.json() } else { Value::Null },
        }));
        reply
    }
}

fn get<'a>(template: &'a str, url: String, user: &'a User) -> Call<'a> {
    Call { method: "GET", template, url, user, json: None, files: &[] }
}

fn post<'a>(template: &'a str, user: &'a User, json: Value) -> Call<'a> {
    Call { method: "POST", template, url: template.to_string(), user, json: Some(json), files: &[] }
}

/// What the server answers is what the document says, body by body: a walk
/// through every resource kind, versions, copy and move, sharing,
/// publication, consent and handler administration (successes and errors), each
/// request and answer checked against the document's schemas by a standard
/// JSON Schema validator. (Deployments are proxied to applications; their
/// bodies are the APIs they mirror, documented as free-form objects.)
#[tokio::test]
async fn the_document_describes_the_bodies_the_server_reads_and_answers() {
    let Some(python) = clients_python() else { return };
    // An application asking for consent, with a declaration to consent to
    // (never called: consent is about it, not through it).
    let f = Fixture::start(
        r#"[applications.asking]
endpoint = "http://127.0.0.1:9/chat/completions"
features.consent_required = true
resource_dependencies = [{ kind = "dial.resourceLink", link_id = "notes", target = { path = "files/{current-user}/notes/" }, access = ["READ"], required = false }]
"#,
    )
    .await;
    let admin = User::new(&f.client, HS_SECRET, "root", &["admin"]).await;
    let (alice, bob) = (&f.alice, &f.bob);
    let a = alice.bucket.as_str();
    let mut r = Recorder { client: &f.client, exchanges: Vec::new() };
    let skill_md = b"---\nname: s\ndescription: Does s things.\n---\n# s\n";
    let skill: [(&str, &[u8]); 2] = [("SKILL.md", skill_md), ("scripts/run.py", b"print('hi')\n")];

    // The service and the caller's bucket.
    for template in ["/health", "/ready", "/v1/bucket"] {
        expect(r.call(get(template, template.to_string(), alice)).await, 200);
    }

    // v1: a file, a prompt, their metadata and folder listing, a 404.
    let file = Call {
        files: &[("a.txt", b"hello")],
        ..put("/v1/files/{bucket}/{path}", format!("/v1/files/{a}/d/a.txt"), alice)
    };
    expect(r.call(file).await, 200);
    let prompt = Call {
        json: Some(json!({"name": "p", "content": "Hi"})),
        ..put("/v1/prompts/{bucket}/{path}", format!("/v1/prompts/{a}/p"), alice)
    };
    expect(r.call(prompt).await, 200);
    expect(r.call(get("/v1/prompts/{bucket}/{path}", format!("/v1/prompts/{a}/p"), alice)).await, 200);
    let metadata = "/v1/metadata/{group}/{bucket}/{path}";
    for url in [
        format!("/v1/metadata/files/{a}/d/a.txt"),
        format!("/v1/metadata/files/{a}/d/"),
        format!("/v1/metadata/files/{a}/"),
    ] {
        expect(r.call(get(metadata, url, alice)).await, 200);
    }
    expect(r.call(get("/v1/files/{bucket}/{path}", format!("/v1/files/{a}/d/a.txt"), alice)).await, 200);
    expect(r.call(get("/v1/files/{bucket}/{path}", format!("/v1/files/{a}/none"), alice)).await, 404);
    let application = Call {
        json: Some(json!({"endpoint": "http://127.0.0.1:9/chat/completions", "displayName": "App"})),
        ..put("/v1/applications/{bucket}/{path}", format!("/v1/applications/{a}/app"), alice)
    };
    expect(r.call(application).await, 200);
    expect(r.call(get("/v1/applications/{bucket}/{path}", format!("/v1/applications/{a}/app"), alice)).await, 200);
    let delete = Call { method: "DELETE", ..get("/v1/prompts/{bucket}/{path}", format!("/v1/prompts/{a}/p"), alice) };
    expect(r.call(delete).await, 200);

    // v2: a skill, its listings, versions, restore, copy and move.
    let put_skill = |path: &str| Call {
        files: &skill,
        ..put("/v2/{group}/{bucket}/{path}", format!("/v2/skills/{a}/{path}"), alice)
    };
    expect(r.call(put_skill("team/s")).await, 200);
    expect(r.call(put_skill("team/s")).await, 200);
    let metadata = "/v2/metadata/{group}/{bucket}/{path}";
    for url in [
        format!("/v2/metadata/skills/{a}/team/?permissions=true"),
        format!("/v2/metadata/skills/{a}/team/s"),
        format!("/v2/metadata/skills/{a}/"),
    ] {
        expect(r.call(get(metadata, url, alice)).await, 200);
    }
    // A resource's files, each route as its own documented path.
    let files = "/v2/metadata/{group}/{bucket}/{path}/files";
    for url in [
        format!("/v2/metadata/skills/{a}/team/s/files/?permissions=true"),
        format!("/v2/metadata/skills/{a}/team/s/files?limit=1"),
    ] {
        expect(r.call(get(files, url, alice)).await, 200);
    }
    let directory = "/v2/metadata/{group}/{bucket}/{path}/files/{dir}";
    expect(r.call(get(directory, format!("/v2/metadata/skills/{a}/team/s/files/scripts"), alice)).await, 200);
    expect(r.call(get(directory, format!("/v2/metadata/skills/{a}/team/s/files/none/"), alice)).await, 404);
    let one_file = "/v2/{group}/{bucket}/{path}/files/{file}";
    let notes = || format!("/v2/skills/{a}/team/s/files/docs/notes.md");
    let file = Call { files: &[("notes.md", b"notes")], ..put(one_file, notes(), alice) };
    expect(r.call(file).await, 200);
    expect(r.call(get(one_file, notes(), alice)).await, 200);
    let delete = Call { method: "DELETE", ..get(one_file, notes(), alice) };
    expect(r.call(delete).await, 200);
    expect(r.call(get(one_file, notes(), alice)).await, 404);
    let versions =
        r.call(get("/v2/versions/{group}/{bucket}/{path}", format!("/v2/versions/skills/{a}/team/s"), alice)).await;
    let oldest = versions.json()["versions"][1]["version"].as_str().unwrap().to_string();
    let old_file = format!("/v2/skills/{a}/team/s/files/SKILL.md?version={oldest}");
    expect(r.call(get(one_file, old_file, alice)).await, 200);
    let restore = Call {
        url: "/v2/ops/skills/restore".into(),
        ..post("/v2/ops/{group}/restore", alice, json!({"url": format!("skills/{a}/team/s/"), "version": oldest}))
    };
    expect(r.call(restore).await, 200);
    let unknown = Call {
        url: "/v2/ops/skills/restore".into(),
        ..post("/v2/ops/{group}/restore", alice, json!({"url": format!("skills/{a}/team/s"), "version": "none"}))
    };
    expect(r.call(unknown).await, 404);
    let transfer = |source: &str, destination: &str| json!({"sourceUrl": source, "destinationUrl": destination, "overwrite": false});
    let copied =
        post("/v1/ops/resource/copy", alice, transfer(&format!("skills/{a}/team/s/"), &format!("skills/{a}/team/c/")));
    expect(r.call(copied).await, 200);
    let again =
        post("/v1/ops/resource/copy", alice, transfer(&format!("skills/{a}/team/s/"), &format!("skills/{a}/team/c/")));
    expect(r.call(again).await, 412);
    let moved =
        post("/v1/ops/resource/move", alice, transfer(&format!("files/{a}/d/a.txt"), &format!("files/{a}/d/b.txt")));
    expect(r.call(moved).await, 200);

    // Sharing: an invitation, accepted, listed both ways, copied, revoked.
    let share =
        json!({"invitationType": "link", "resources": [{"url": format!("skills/{a}/team/"), "permissions": ["READ"]}]});
    let invitation = r.call(post("/v1/ops/resource/share/create", alice, share)).await;
    assert_eq!(invitation.status, 200, "{}", invitation.body);
    let id = invitation.json()["invitationLink"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
    expect(r.call(get("/v1/invitations/{id}", format!("/v1/invitations/{id}"), bob)).await, 200);
    expect(r.call(get("/v1/invitations/{id}", format!("/v1/invitations/{id}?accept=true"), bob)).await, 200);
    expect(r.call(get("/v1/invitations", "/v1/invitations".into(), alice)).await, 200);
    for (user, with) in [(bob, "me"), (alice, "others")] {
        expect(r.call(post("/v1/ops/resource/share/list", user, json!({"with": with}))).await, 200);
    }
    let bobs = get("/v2/metadata/{group}/{bucket}/{path}", format!("/v2/metadata/skills/{a}/team/s"), bob);
    expect(r.call(bobs).await, 200);
    let copy = json!({"sourceUrl": format!("skills/{a}/team/s/"), "destinationUrl": format!("skills/{a}/team/c/")});
    expect(r.call(post("/v1/ops/resource/share/copy", alice, copy)).await, 200);
    let discard = json!({"resources": [{"url": format!("skills/{a}/team/")}]});
    expect(r.call(post("/v1/ops/resource/share/discard", bob, discard)).await, 200);
    let invitation_url = format!("/v1/invitations/{id}");
    expect(r.call(Call { method: "DELETE", ..get("/v1/invitations/{id}", invitation_url, alice) }).await, 200);
    let revoke = json!({"resources": [{"url": format!("skills/{a}/team/")}]});
    expect(r.call(post("/v1/ops/resource/share/revoke", alice, revoke)).await, 200);
    let bobs = get("/v2/metadata/{group}/{bucket}/{path}", format!("/v2/metadata/skills/{a}/team/s"), bob);
    expect(r.call(bobs).await, 403);

    // Publication: created, listed, read, approved; its rules listed.
    let publish = json!({
        "name": "tools",
        "targetFolder": "public/tools/",
        "resources": [{"action": "ADD", "sourceUrl": format!("skills/{a}/team/s/"), "targetUrl": "skills/public/tools/s/"}],
        "rules": [{"function": "EQUAL", "source": "roles", "targets": ["user"]}],
    });
    let created = r.call(post("/v1/ops/publication/create", alice, publish)).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let url = created.json()["url"].clone();
    assert_eq!(
        r.call(post("/v1/ops/publication/list", alice, json!({"url": format!("publications/{a}/")}))).await.status,
        200
    );
    expect(r.call(post("/v1/ops/publication/get", &admin, json!({"url": url}))).await, 200);
    expect(r.call(post("/v1/ops/publication/approve", &admin, json!({"url": url}))).await, 200);
    expect(r.call(post("/v1/ops/publication/rule/list", bob, json!({"url": "public/tools/"}))).await, 200);
    let public = get("/v2/metadata/{group}/{bucket}/{path}", "/v2/metadata/skills/public/tools/".into(), bob);
    expect(r.call(public).await, 200);
    let second = json!({
        "targetFolder": "public/tools/",
        "resources": [{"action": "ADD", "sourceUrl": format!("skills/{a}/team/c"), "targetUrl": "skills/public/tools/c"}],
    });
    let url =
        expect(r.call(post("/v1/ops/publication/create", alice, second.clone())).await, 200).json()["url"].clone();
    expect(r.call(post("/v1/ops/publication/reject", &admin, json!({"url": url, "comment": "not yet"}))).await, 200);
    let url = expect(r.call(post("/v1/ops/publication/create", alice, second)).await, 200).json()["url"].clone();
    expect(r.call(post("/v1/ops/publication/delete", alice, json!({"url": url}))).await, 200);

    // Consent: the user's, asked and given; the admin's, given and withdrawn.
    let (user, admin_consent) = ("/v1/consent/{deployment}", "/v1/consent/{deployment}/admin-consent");
    let asked = expect(r.call(get(user, "/v1/consent/asking".into(), alice)).await, 200);
    let document = asked.json()["consent"].clone();
    let accept = Call { url: "/v1/consent/asking".into(), ..post(user, alice, json!({"consent": document})) };
    expect(r.call(accept).await, 200);
    assert_eq!(expect(r.call(get(user, "/v1/consent/asking".into(), alice)).await, 200).json()["accepted"], true);
    let admin_url = || "/v1/consent/asking/admin-consent".to_string();
    expect(r.call(get(admin_consent, admin_url(), &admin)).await, 200);
    let grant = Call { url: admin_url(), json: None, ..post(admin_consent, &admin, json!(null)) };
    expect(r.call(grant).await, 200);
    assert_eq!(expect(r.call(get(admin_consent, admin_url(), &admin)).await, 200).json()["consented"], true);
    let withdraw = Call { method: "DELETE", ..get(admin_consent, admin_url(), &admin) };
    expect(r.call(withdraw).await, 200);
    expect(r.call(get(admin_consent, admin_url(), alice)).await, 403);

    // Handler administration, and a refusal.
    expect(r.call(get("/v1/ops/handlers", "/v1/ops/handlers".into(), &admin)).await, 200);
    expect(r.call(get("/v1/ops/handlers", "/v1/ops/handlers".into(), bob)).await, 403);
    let reload = Call { json: None, ..post("/v1/ops/handlers/reload", &admin, json!(null)) };
    expect(r.call(reload).await, 200);

    // Every exchange against the document the server serves.
    let doc = f.client.get("/openapi.json", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let (doc_file, exchanges_file) = (dir.path().join("openapi.json"), dir.path().join("exchanges.json"));
    std::fs::write(&doc_file, &doc.bytes).unwrap();
    std::fs::write(&exchanges_file, serde_json::to_vec_pretty(&r.exchanges).unwrap()).unwrap();
    let script = Path::new(WORKSPACE).join("tests/clients/openapi_conformance.py");
    let output = Command::new(python).arg(script).arg(&doc_file).arg(&exchanges_file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the server answered what its document does not say:\n{said}");
    assert!(said.contains(&format!("OK {} exchanges", r.exchanges.len())), "{said}");
}

/// `reply` has `status`, or the test fails showing what it has instead.
fn expect(reply: Reply, status: u16) -> Reply {
    assert_eq!(reply.status, status, "{}", reply.body);
    reply
}

fn put<'a>(template: &'a str, url: String, user: &'a User) -> Call<'a> {
    Call { method: "PUT", template, url, user, json: None, files: &[] }
}
