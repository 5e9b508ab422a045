//! Anthropic's and OpenAI's hosted skills APIs (SPEC §12) as their official
//! Python SDKs meet them (`tests/clients/skills_sdk.py`, one scenario per
//! run), with DIAL's own routes as the witness: a skill made through either
//! API is the v2 resource `skills/<caller's bucket>/<name>`, its files byte
//! for byte, its versions the resource's history, OpenAI's default version
//! what DIAL serves as current; ids are the same through both APIs, sharing
//! and restore are DIAL's, and a retried create makes one skill.

use serde_json::{Value, json};

use crate::services;
use crate::support::{Client, JwtUser as User, Reply, Server, Setup, unzip};
use crate::upstream::{clients_python, run_client_async};

const HS_SECRET: &str = "skills-api-secret";
pub(crate) const PROJECT_KEY: &str = "skills-api-project-key-0123";
const S3_BUCKET: &str = "skills-api";

/// A skill's files by their path inside the skill (no top folder), sorted.
type Files = Vec<(String, Vec<u8>)>;

/// Every byte value once: what a text-minded layer would mangle.
fn all_bytes() -> Vec<u8> {
    (0..=255u8).collect()
}

fn skill_md(name: &str, description: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n").into_bytes()
}

/// The first version of a test skill: a binary file and a nested one among ordinary ones.
fn first_version(name: &str) -> Files {
    let mut files = vec![
        ("SKILL.md".to_string(), skill_md(name, "First.")),
        ("scripts/run.py".to_string(), b"print('first')\n".to_vec()),
        ("scripts/lib/deep/x.py".to_string(), b"X = 1\n".to_vec()),
        ("data/all-bytes.bin".to_string(), all_bytes()),
    ];
    files.sort();
    files
}

/// The second version: another description, one file changed, one gone.
fn second_version(name: &str) -> Files {
    let mut files = vec![
        ("SKILL.md".to_string(), skill_md(name, "Second.")),
        ("scripts/run.py".to_string(), b"print('second')\n".to_vec()),
        ("data/all-bytes.bin".to_string(), all_bytes()),
    ];
    files.sort();
    files
}

/// The skill folders a scenario reads (`--dir`): `v1/NAME/…`, `v2/NAME/…` and
/// `dial/NAME/…`, each with the top folder the SDK recipes upload.
struct SkillDir {
    dir: tempfile::TempDir,
}

impl SkillDir {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("temp dir") }
    }

    /// A skill with its first and second versions.
    fn versions(name: &str) -> Self {
        let dir = Self::new();
        dir.write("v1", name, &first_version(name));
        dir.write("v2", name, &second_version(name));
        dir
    }

    fn write(&self, slot: &str, name: &str, files: &Files) {
        for (path, content) in files {
            let path = self.dir.path().join(slot).join(name).join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    fn path(&self) -> &str {
        self.dir.path().to_str().expect("a UTF-8 temp path")
    }
}

/// A server with a project key and JWT users, on the local disk or on S3 (moto).
pub(crate) struct Fixture {
    _setup: Setup,
    pub(crate) server: Server,
    pub(crate) client: Client,
    /// The project key's bucket.
    pub(crate) bucket: String,
    _emulator: Option<services::Emulator>,
}

impl Fixture {
    /// On the local disk (`Setup`'s default store); `None` (a skip) without `.venv-clients`.
    pub(crate) async fn local() -> Option<Self> {
        clients_python()?;
        Some(Self::start(None).await)
    }

    /// On the local disk with `extra` TOML appended to the configuration.
    pub(crate) async fn local_with(extra: &str) -> Option<Self> {
        clients_python()?;
        Some(Self::start_with(None, extra).await)
    }

    /// On S3 (moto); `None` (a skip) without moto or `.venv-clients`, a panic under `CI=true`.
    pub(crate) async fn s3() -> Option<Self> {
        clients_python()?;
        let moto = services::emulator("s3")?;
        moto.create(S3_BUCKET);
        Some(Self::start(Some(moto)).await)
    }

    async fn start(emulator: Option<services::Emulator>) -> Self {
        Self::start_with(emulator, "").await
    }

    async fn start_with(emulator: Option<services::Emulator>, extra: &str) -> Self {
        let setup = Setup::new();
        let storage = emulator.as_ref().map(|moto| moto.storage_toml(S3_BUCKET)).unwrap_or_default();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\nroles_claim = \"roles\"\n\
             [keys.{PROJECT_KEY}]\nproject = \"skills-team\"\nroles = [\"user\"]\n{storage}\n{extra}"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let reply = client.get("/v1/bucket", &[("Api-Key", PROJECT_KEY)]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let bucket = reply.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, server, client, bucket, _emulator: emulator }
    }

    pub(crate) async fn user(&self, id: &str) -> User {
        User::new(&self.client, HS_SECRET, id, &["user"]).await
    }

    /// Runs `skills_sdk.py SCENARIO` with `key` as the SDKs' api key; panics
    /// with the script's report when a check in it failed.
    async fn run(&self, scenario: &str, key: &str, extra: &[&str]) -> Value {
        let mut args = vec![scenario, "--host", &self.server.url, "--key", key];
        args.extend_from_slice(extra);
        let out = run_client_async("skills_sdk.py", &args).await;
        assert!(out.get("error").is_none(), "skills_sdk.py {scenario} {extra:?}: {out}");
        out
    }

    pub(crate) async fn get(&self, path: &str, auth: &[(&str, &str)]) -> Reply {
        self.client.get(path, auth).await
    }

    /// The ZIP DIAL serves for `skills/{bucket}/{name}` (its current version), unzipped.
    pub(crate) async fn dial_files(&self, bucket: &str, name: &str, auth: &[(&str, &str)]) -> Files {
        let reply = self.get(&format!("/v2/skills/{bucket}/{name}"), auth).await;
        assert_eq!(reply.status, 200, "GET /v2/skills/{bucket}/{name}: {}", reply.body);
        unzip(&reply.bytes)
    }

    /// DIAL's version history of `skills/{bucket}/{name}`, newest first.
    pub(crate) async fn dial_versions(&self, bucket: &str, name: &str, auth: &[(&str, &str)]) -> Vec<Value> {
        let reply = self.get(&format!("/v2/versions/skills/{bucket}/{name}"), auth).await;
        assert_eq!(reply.status, 200, "GET /v2/versions/skills/{bucket}/{name}: {}", reply.body);
        let listing = reply.json();
        let versions = listing["versions"].as_array().or_else(|| listing["items"].as_array());
        versions.unwrap_or_else(|| panic!("no versions in {listing}")).clone()
    }

    /// Whether `skills/{bucket}/{name}` exists for DIAL.
    pub(crate) async fn dial_status(&self, bucket: &str, name: &str, auth: &[(&str, &str)]) -> u16 {
        self.get(&format!("/v2/skills/{bucket}/{name}"), auth).await.status
    }

    async fn restore(&self, bucket: &str, name: &str, auth: &[(&str, &str)]) -> Reply {
        let mut headers = auth.to_vec();
        headers.push(("Content-Type", "application/json"));
        let body = json!({"url": format!("skills/{bucket}/{name}")}).to_string();
        self.client.post("/v2/ops/skills/restore", &headers, &body).await
    }
}

const KEY: [(&str, &str); 1] = [("Api-Key", PROJECT_KEY)];

fn token(user: &User) -> &str {
    user.token.strip_prefix("Bearer ").unwrap()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("not a string: {value}"))
}

/// The number of versions DIAL marks current (one, whatever the APIs did).
fn currents(versions: &[Value]) -> usize {
    versions.iter().filter(|version| version["current"] == true).count()
}

/// Anthropic's GA API end to end: the scenario's checks, then DIAL's view
/// of what it left: the second version current and alone (the first was
/// deleted through the API), the defaulted-name skill there, none of the
/// refused uploads.
#[tokio::test]
async fn the_anthropic_sdk_creates_versions_lists_and_deletes_skills_dial_serves() {
    let Some(f) = Fixture::local().await else { return };
    let files = SkillDir::versions("my-skill");
    let out = f.run("anthropic", PROJECT_KEY, &["--dir", files.path()]).await;
    assert_eq!(out["name"], "my-skill", "{out}");
    assert_eq!(f.dial_files(&f.bucket, "my-skill", &KEY).await, second_version("my-skill"));
    let versions = f.dial_versions(&f.bucket, "my-skill", &KEY).await;
    assert_eq!((versions.len(), currents(&versions)), (1, 1), "the first version was deleted: {versions:?}");
    for name in ["defaulted", "newest"] {
        assert_eq!(f.dial_status(&f.bucket, name, &KEY).await, 200, "{name}");
    }
    for refused in ["flat", "named", "other", "two", "extra", "nomd", "bs", "renamed"] {
        assert_eq!(f.dial_status(&f.bucket, refused, &KEY).await, 404, "a refused upload left {refused}");
    }
}

/// The `skills-2025-10-02` beta header: the old shapes, versions by their
/// 16-digit number; DIAL sees the same history.
#[tokio::test]
async fn the_anthropic_beta_header_selects_the_beta_shapes_and_numbered_versions() {
    let Some(f) = Fixture::local().await else { return };
    let files = SkillDir::versions("beta-skill");
    let out = f.run("anthropic-beta", PROJECT_KEY, &["--dir", files.path()]).await;
    assert_eq!(out["name"], "beta-skill", "{out}");
    assert_eq!(f.dial_files(&f.bucket, "beta-skill", &KEY).await, second_version("beta-skill"));
    let versions = f.dial_versions(&f.bucket, "beta-skill", &KEY).await;
    assert_eq!((versions.len(), currents(&versions)), (1, 1), "{versions:?}");
}

/// OpenAI's API: versions 1, 2, 3 (the default moved to 3), the default
/// set back to 2, 3 deleted, 4 made, the default set to 1. DIAL then serves
/// version 1 as current and holds three versions; the deleted skill is gone.
async fn openai_versions_are_what_dial_serves(f: &Fixture) {
    let files = SkillDir::versions("my-skill");
    let out = f.run("openai", PROJECT_KEY, &["--dir", files.path()]).await;
    assert_eq!((&out["name"], &out["default_version"]), (&json!("my-skill"), &json!("1")), "{out}");
    assert_eq!(
        f.dial_files(&f.bucket, "my-skill", &KEY).await,
        first_version("my-skill"),
        "DIAL's current version is OpenAI's default (1), not its latest (4)"
    );
    let versions = f.dial_versions(&f.bucket, "my-skill", &KEY).await;
    assert_eq!((versions.len(), currents(&versions)), (3, 1), "versions 4, 2, 1 after 3 was deleted: {versions:?}");
    assert_eq!(f.dial_status(&f.bucket, "zipped", &KEY).await, 404, "deleted through the API");
}

#[tokio::test]
async fn the_openai_sdk_moves_the_default_version_and_dial_serves_the_default() {
    let Some(f) = Fixture::local().await else { return };
    openai_versions_are_what_dial_serves(&f).await;
}

/// One skill per upload form (Anthropic `files[]`, OpenAI `files[]`, OpenAI
/// one zip), each downloaded through both APIs by the script and through
/// DIAL here: the ZIP and the single-file route, byte for byte.
async fn uploads_round_trip_byte_for_byte(f: &Fixture) {
    for (api, as_zip, name) in
        [("anthropic", false, "via-anthropic"), ("openai", false, "via-openai"), ("openai", true, "via-openai-zip")]
    {
        let files = SkillDir::new();
        files.write("v1", name, &first_version(name));
        let mut args = vec!["--dir", files.path(), "--api", api];
        if as_zip {
            args.push("--as-zip");
        }
        let out = f.run("roundtrip", PROJECT_KEY, &args).await;
        assert_eq!(out["name"], name, "{out}");
        assert_eq!(f.dial_files(&f.bucket, name, &KEY).await, first_version(name), "{name}");
        for (path, content) in [("data/all-bytes.bin", all_bytes()), ("scripts/lib/deep/x.py", b"X = 1\n".to_vec())] {
            let file = f.get(&format!("/v2/skills/{}/{name}/files/{path}", f.bucket), &KEY).await;
            assert_eq!((file.status, file.bytes), (200, content), "{name}: {path}");
        }
        assert_eq!(f.dial_versions(&f.bucket, name, &KEY).await.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn a_skill_uploaded_through_either_api_downloads_byte_for_byte_through_all_three() {
    let Some(f) = Fixture::local().await else { return };
    uploads_round_trip_byte_for_byte(&f).await;
}

/// The round trip and the version scenario on S3 (moto).
#[tokio::test]
async fn on_s3_skills_round_trip_and_keep_their_versions_through_both_apis() {
    let Some(f) = Fixture::s3().await else { return };
    uploads_round_trip_byte_for_byte(&f).await;
    openai_versions_are_what_dial_serves(&f).await;
}

/// A skill deleted through either API is DIAL's tombstone: DIAL's restore
/// brings it back under the same id, with its files.
#[tokio::test]
async fn a_skill_deleted_through_an_api_is_restored_by_dial_under_the_same_id() {
    let Some(f) = Fixture::local().await else { return };
    for (api, name) in [("anthropic", "restored-a"), ("openai", "restored-o")] {
        let files = SkillDir::new();
        files.write("v1", name, &first_version(name));
        let created = f.run("roundtrip", PROJECT_KEY, &["--dir", files.path(), "--api", api]).await;
        let id = text(&created["skill_id"]);
        f.run("delete", PROJECT_KEY, &["--api", api, "--id", id]).await;
        assert_eq!(f.dial_status(&f.bucket, name, &KEY).await, 404, "{api}: deleted for DIAL too");
        let restored = f.restore(&f.bucket, name, &KEY).await;
        assert_eq!(restored.status, 200, "{api}: {}", restored.body);
        let seen = f.run("retrieve", PROJECT_KEY, &["--id", id]).await;
        assert_eq!((&seen["anthropic"]["id"], &seen["openai"]["id"]), (&json!(id), &json!(id)), "{api}: {seen}");
        assert_eq!(seen["anthropic"]["latest_version_id"], created["version_id"], "{api}: {seen}");
        assert_eq!(seen["openai"]["name"], name, "{seen}");
        assert_eq!(f.dial_files(&f.bucket, name, &KEY).await, first_version(name), "{api}");
    }
}

/// One skill through both APIs (same id; a version made through one is the
/// other's latest; the same version ids), and a skill PUT through `/v2`
/// listed and served by both.
#[tokio::test]
async fn one_skill_is_the_same_through_both_apis_and_dial() {
    let Some(f) = Fixture::local().await else { return };
    let files = SkillDir::versions("both");
    let dial = first_version("from-dial");
    files.write("dial", "from-dial", &dial);
    let parts: Vec<(&str, &[u8])> = dial.iter().map(|(path, content)| (path.as_str(), content.as_slice())).collect();
    let put = f.client.put_files(&format!("/v2/skills/{}/from-dial", f.bucket), &KEY, &parts).await;
    assert_eq!(put.status, 200, "{}", put.body);

    let out = f.run("cross", PROJECT_KEY, &["--dir", files.path(), "--dial-name", "from-dial"]).await;
    assert_eq!(out["name"], "both", "{out}");
    let versions = f.dial_versions(&f.bucket, "both", &KEY).await;
    assert_eq!((versions.len(), currents(&versions)), (3, 1), "one history under both APIs: {versions:?}");
    assert_eq!(out["versions"].as_array().map(Vec::len), Some(3), "{out}");
    assert_eq!(f.dial_files(&f.bucket, "from-dial", &KEY).await, dial, "reading through the APIs changed nothing");
    assert_eq!(f.dial_versions(&f.bucket, "from-dial", &KEY).await.len(), 1);
}

/// Alice's skill (made with her JWT as the SDK key), shared read-only with
/// Bob through a DIAL link invitation: Bob reads and downloads it by Alice's
/// id through both APIs, does not list it, may not add a version; Carol,
/// without the share, gets 404 for the same id.
#[tokio::test]
async fn a_shared_skill_is_read_by_the_grantee_and_hidden_from_others() {
    let Some(f) = Fixture::local().await else { return };
    let (alice, bob, carol) = (f.user("alice").await, f.user("bob").await, f.user("carol").await);
    let files = SkillDir::new();
    files.write("v1", "shared-skill", &first_version("shared-skill"));
    let created = f.run("roundtrip", token(&alice), &["--dir", files.path(), "--api", "anthropic"]).await;
    let id = text(&created["skill_id"]);
    assert_eq!(f.dial_files(&alice.bucket, "shared-skill", &alice.auth()).await, first_version("shared-skill"));

    let resources = json!([{"url": format!("skills/{}/shared-skill", alice.bucket), "permissions": ["READ"]}]);
    let mut headers = alice.auth().to_vec();
    headers.push(("Content-Type", "application/json"));
    let body = json!({"invitationType": "link", "resources": resources}).to_string();
    let shared = f.client.post("/v1/ops/resource/share/create", &headers, &body).await;
    assert_eq!(shared.status, 200, "{}", shared.body);
    let link = text(&shared.json()["invitationLink"]).to_string();
    let invitation = link.strip_prefix("/v1/invitations/").unwrap_or_else(|| panic!("{link}"));
    let accepted = f.get(&format!("/v1/invitations/{invitation}?accept=true"), &bob.auth()).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    assert_eq!(f.dial_status(&alice.bucket, "shared-skill", &bob.auth()).await, 200, "the share works for DIAL");
    assert_eq!(f.dial_status(&alice.bucket, "shared-skill", &carol.auth()).await, 403, "and only for Bob");

    f.run("shared-grantee", token(&bob), &["--dir", files.path(), "--id", id]).await;
    f.run("stranger", token(&carol), &["--id", id]).await;
    assert_eq!(f.dial_versions(&alice.bucket, "shared-skill", &alice.auth()).await.len(), 1, "Bob added no version");
}

/// A create whose answer is lost on the way back is sent again by the SDK
/// (max_retries=2): one skill results, with the first upload's content; a
/// create refused as a conflict is marked final and sent once.
#[tokio::test]
async fn a_create_whose_answer_was_lost_leaves_one_skill_and_a_conflict_is_sent_once() {
    let Some(f) = Fixture::local().await else { return };
    let out = f.run("retry", PROJECT_KEY, &[]).await;
    for api in ["anthropic", "openai"] {
        let name = format!("retried-{api}");
        assert!(out[api]["skill_id"].is_string(), "{out}");
        let skill_md = f.get(&format!("/v2/skills/{}/{name}/files/SKILL.md", f.bucket), &KEY).await;
        assert_eq!(skill_md.status, 200, "{name}: {}", skill_md.body);
        assert!(skill_md.body.contains("Sent twice."), "the conflicting create changed {name}: {}", skill_md.body);
        assert_eq!(f.dial_versions(&f.bucket, &name, &KEY).await.len(), 1, "{name}: one create, one version");
    }
}

/// One multipart body: `fields` as text parts, then `files` as `(part name, filename, bytes)`.
pub(crate) fn multipart(fields: &[(&str, &str)], files: &[(&str, &str, Vec<u8>)]) -> (String, Vec<u8>) {
    const BOUNDARY: &str = "skills-api-boundary-0123";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").bytes(),
        );
    }
    for (name, file_name, content) in files {
        body.extend(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\r\n"
            )
            .bytes(),
        );
        body.extend(content);
        body.extend(b"\r\n");
    }
    body.extend(format!("--{BOUNDARY}--\r\n").bytes());
    (format!("multipart/form-data; boundary={BOUNDARY}"), body)
}

/// A zip of `entries` one-byte files under `top/`.
fn zip_with(top: &str, entries: usize) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(format!("{top}/SKILL.md"), zip::write::SimpleFileOptions::default()).unwrap();
    zip.write_all(&skill_md(top, "Many entries.")).unwrap();
    for n in 1..entries {
        zip.start_file(format!("{top}/e/{n}"), zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(b"x").unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// What a client can make one create cost is bounded before it is spent: at
/// most 16 text fields, and a zip whose directory declares more entries than
/// the type's files allow (4 per file + 1000) is refused before the
/// directory is read into memory. Both are final 400s in the API's shape,
/// and nothing is created.
#[tokio::test]
async fn uploads_are_bounded_in_fields_and_zip_entries_before_they_cost_memory() {
    let f = Fixture::start(None).await;
    let fields: Vec<(String, String)> = (0..17).map(|n| (format!("f{n}"), "x".to_string())).collect();
    let fields: Vec<(&str, &str)> = fields.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
    let md = ("files[]", "many-fields/SKILL.md", skill_md("many-fields", "Too many fields."));
    let (content_type, body) = multipart(&fields, &[md]);
    let headers = [KEY[0], ("Content-Type", content_type.as_str())];
    let reply = f.client.send_raw("POST", "/openai/v1/skills", &headers, vec![body.into()]).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("at most 16 form fields"), "{}", reply.body);
    assert_eq!(reply.headers.get("x-should-retry").unwrap(), "false");

    // The default type allows 1000 files: 5000 entries are the most a zip may declare.
    let (content_type, body) = multipart(&[], &[("files", "many.zip", zip_with("many", 5001))]);
    let headers = [KEY[0], ("Content-Type", content_type.as_str())];
    let reply = f.client.send_raw("POST", "/anthropic/v1/skills", &headers, vec![body.into()]).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()["error"]["type"], "invalid_request_error", "{}", reply.body);
    assert!(reply.body.contains("5001 entries") && reply.body.contains("at most 5000"), "{}", reply.body);

    let listed = f.get("/openai/v1/skills", &KEY).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["data"], json!([]), "nothing was created");
    for name in ["many-fields", "many"] {
        assert_eq!(f.dial_status(&f.bucket, name, &KEY).await, 404);
    }
}

/// A list's cursor is the id a page ended with, also of a skill or version
/// deleted since; anything else is a 400 naming it, not an empty page.
#[tokio::test]
async fn a_cursor_that_names_no_skill_or_version_is_refused() {
    let f = Fixture::start(None).await;
    for path in ["/openai/v1/skills?after=garbage", "/anthropic/v1/skills?page=garbage"] {
        let reply = f.get(path, &KEY).await;
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
        assert!(reply.body.contains("\\\"garbage\\\" is no page of this list"), "{path}: {}", reply.body);
    }
    let files = [("cursor/SKILL.md", skill_md("cursor", "Cursors."))];
    let (content_type, body) = multipart(&[], &files.map(|(name, content)| ("files[]", name, content)));
    let headers = [KEY[0], ("Content-Type", content_type.as_str())];
    let created = f.client.send_raw("POST", "/openai/v1/skills", &headers, vec![body.into()]).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let id = text(&created.json()["id"]).to_string();
    let reply = f.get(&format!("/openai/v1/skills/{id}/versions?after=3"), &KEY).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    // A deleted skill's id still pages: what comes after it.
    let gone = format!("{}_1", id.rsplit_once('_').unwrap().0);
    let reply = f.get(&format!("/openai/v1/skills?after={gone}"), &KEY).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["data"], json!([]), "nothing was made before 1970");
}

/// Anthropic's `display_name` is the resource's, not its path's: a DIAL move
/// takes it along (the skill gets a new id, as documented).
#[tokio::test]
async fn a_moved_skill_keeps_its_display_name() {
    let f = Fixture::start(None).await;
    let files = [("files[]", "labelled/SKILL.md", skill_md("labelled", "Labelled."))];
    let (content_type, body) = multipart(&[("display_name", "A Label")], &files);
    let headers = [KEY[0], ("Content-Type", content_type.as_str())];
    let created = f.client.send_raw("POST", "/anthropic/v1/skills", &headers, vec![body.into()]).await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert_eq!(created.json()["display_name"], "A Label");
    let bucket = &f.bucket;
    let request = json!({"sourceUrl": format!("skills/{bucket}/labelled"), "destinationUrl": format!("skills/{bucket}/team/labelled")});
    let moved = f
        .client
        .post("/v1/ops/resource/move", &[KEY[0], ("Content-Type", "application/json")], &request.to_string())
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let listed = f.get("/anthropic/v1/skills", &KEY).await.json();
    let data = listed["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{listed}");
    assert_eq!(data[0]["display_name"], "A Label");
    assert_ne!(data[0]["id"], created.json()["id"], "a move gives a new id");
}

/// Issue 38, item 7: OpenAI's `default_version` makes a retained version
/// current only if the type accepts it today, as a restore of it would: once
/// the operator made skills strict, a version with a warning stays retained
/// (400 naming the problem) instead of serving again.
#[tokio::test]
async fn a_default_version_the_type_refuses_now_is_not_made_current() {
    let setup = Setup::new();
    let base =
        format!("[encryption]\nsecret = \"s\"\n[keys.{PROJECT_KEY}]\nproject = \"skills-team\"\nroles = [\"user\"]\n");
    let server = setup.start(Some(&setup.config(&base)), &[]);
    let client = server.client();
    let post = |path: String,
                fields: &'static [(&'static str, &'static str)],
                files: Vec<(&'static str, &'static str, Vec<u8>)>| {
        let client = client.clone();
        async move {
            let (content_type, body) = multipart(fields, &files);
            let headers = [KEY[0], ("Content-Type", content_type.as_str())];
            client.send_raw("POST", &path, &headers, vec![body.into()]).await
        }
    };
    let loose = b"---\nname: loose\ndescription: First.\nextra-key: kept as a warning\n---\n# loose\n".to_vec();
    let created = post("/openai/v1/skills".into(), &[], vec![("files[]", "loose/SKILL.md", loose)]).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let id = text(&created.json()["id"]).to_string();
    let clean = skill_md("loose", "Second.");
    let default = &[("default", "true")];
    let second =
        post(format!("/openai/v1/skills/{id}/versions"), default, vec![("files[]", "loose/SKILL.md", clean)]).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let skill = client.get(&format!("/openai/v1/skills/{id}"), &KEY).await.json();
    assert_eq!(skill["default_version"], "2", "{skill}");
    drop(server);

    let strict = setup.config(&format!("{base}[handlers.types.skills]\nstrict = true\n"));
    let server = setup.start(Some(&strict), &[]);
    let client = server.client();
    let headers = [KEY[0], ("Content-Type", "application/json")];
    let update = client.post(&format!("/openai/v1/skills/{id}"), &headers, r#"{"default_version": "1"}"#).await;
    assert_eq!(update.status, 400, "a version the type refuses now became current: {}", update.body);
    assert!(update.body.contains("extra-key"), "the problem is named: {}", update.body);
    let skill = client.get(&format!("/openai/v1/skills/{id}"), &KEY).await.json();
    assert_eq!(skill["default_version"], "2", "{skill}");
}
