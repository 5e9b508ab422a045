//! Handlers written in JavaScript (componentize-js, a SpiderMonkey engine in
//! a 12 MB component), loaded by a stock host from `handlers.dir`:
//! `examples/handlers/js-openapi-tools` (type `openapi-tool`, group `tools`)
//! served over HTTP and run by `dial-host handler test`/`inspect`, and
//! `tests/guests/js-misbehaving`, whose runaway loop and memory hog the
//! limits cut, and whose thrown `Error` is reported as the handler's crash,
//! with its message, while the host serves on.
//!
//! `scripts/test` installs the toolchain (`npm ci` in the example) and builds
//! both into `<target>/handler-js/`. A missing build skips with a note, and
//! fails under `CI=true`.

use std::path::{Path, PathBuf};

use crate::support::{Client, Reply, Server, Setup};

const ADMIN: &str = "admin-key";
const OWNER: &str = "owner-key";

const PETS: &str = r##"{
  "openapi": "3.1.0",
  "info": {"title": "Pet store", "version": "1.4.0"},
  "servers": [{"url": "https://pets.example.com/v1"}],
  "paths": {
    "/pets": {
      "get": {"operationId": "listPets", "responses": {"200": {"description": "The pets",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pets"}}}}}},
      "post": {"operationId": "createPet", "responses": {"201": {"description": "Created"}}}
    },
    "/pets/{petId}": {
      "get": {"operationId": "showPetById", "responses": {"200": {"description": "A pet",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}
    }
  },
  "components": {"schemas": {
    "Pet": {"type": "object", "properties": {"name": {"type": "string"}}},
    "Pets": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}
  }}
}"##;

/// A spec with three problems at once: an operation without an id, an id
/// used twice, and a reference to nothing.
const BROKEN: &str = r##"{
  "openapi": "3.0.3",
  "info": {"title": "Broken", "version": "1"},
  "paths": {
    "/a": {"get": {"operationId": "same", "responses": {}}, "post": {"responses": {}}},
    "/b/{id}": {"put": {"operationId": "same", "responses": {"200": {"description": "x",
      "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Missing"}}}}}}}
  }
}"##;

/// The component `scripts/test` built into `<target>/handler-js/<name>.wasm`,
/// or `None` after a note (a panic under `CI=true`).
fn component(name: &str) -> Option<PathBuf> {
    // CARGO_TARGET_TMPDIR is <target>/tmp.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("<target>/tmp");
    let wasm = target.join("handler-js").join(format!("{name}.wasm"));
    if wasm.is_file() {
        return Some(wasm);
    }
    let install = "run scripts/test, which installs componentize-js (npm ci in examples/handlers/js-openapi-tools) \
                   and builds the JavaScript handlers into <target>/handler-js";
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{} is not built, and CI=true forbids skipping its tests: {install}", wasm.display());
    }
    eprintln!("note: {} is not built; skipping this test. To run it: {install}", wasm.display());
    None
}

struct Fixture {
    _setup: Setup,
    server: Server,
    client: Client,
    bucket: String,
    group: &'static str,
}

impl Fixture {
    /// A server with `wasm` in its `handlers.dir`; `extra` is more `[handlers]` settings.
    async fn start(wasm: &Path, group: &'static str, extra: &str) -> Self {
        let setup = Setup::new();
        let dir = setup.path().join("handlers");
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(wasm, dir.join(wasm.file_name().unwrap())).unwrap();
        let config = setup.config(&format!(
            r#"
            [encryption]
            secret = "s"
            [keys.{ADMIN}]
            project = "ops"
            roles = ["admin"]
            [keys.{OWNER}]
            project = "owner"
            roles = ["user"]
            [handlers]
            dir = "{}"
            {extra}
            "#,
            dir.display()
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let bucket =
            client.get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, server, client, bucket, group }
    }

    fn url(&self, path: &str) -> String {
        format!("/v2/{}/{}/{path}", self.group, self.bucket)
    }

    async fn put(&self, path: &str, files: &[(&str, &[u8])]) -> Reply {
        self.client.put_files(&self.url(path), &[("Api-Key", OWNER)], files).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.client.get(path, &[("Api-Key", OWNER)]).await
    }
}

#[tokio::test]
async fn the_javascript_openapi_tool_example_serves_its_type() {
    let Some(wasm) = component("openapi-tools") else { return };
    let f = Fixture::start(&wasm, "tools", "").await;

    // Listed from its file, with the limits it asks for.
    let handlers = f.client.get("/v1/ops/handlers", &[("Api-Key", ADMIN)]).await.json();
    let tools = handlers.as_array().unwrap().iter().find(|h| h["group"] == "tools").expect("tools is listed");
    assert_eq!(tools["typeName"], "openapi-tool");
    assert_eq!(tools["displayName"], "OpenAPI tool");
    assert_eq!(tools["source"]["kind"], "file");
    assert_eq!(tools["limits"]["maxFiles"], 100);
    assert_eq!(tools["limits"]["maxFileBytes"], 4 << 20);

    // A valid tool: stored, the metadata the handler extracted, no warnings.
    let put = f.put("pets", &[("openapi.json", PETS.as_bytes()), ("README.md", b"# Pets\n")]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    assert_eq!(body["resourceType"], "OPENAPI_TOOL");
    assert_eq!(body["metadata"]["title"], "Pet store");
    assert_eq!(body["metadata"]["version"], "1.4.0");
    assert_eq!(body["metadata"]["openapi"], "3.1.0");
    assert_eq!(body["metadata"]["operations"], "3");
    assert_eq!(body["metadata"]["operationIds"], "listPets, createPet, showPetById");
    assert_eq!(body["metadata"]["server"], "https://pets.example.com/v1");
    assert!(body.get("warnings").is_none(), "{body}");
    let etag = put.etag();

    // The listing shows the cached metadata.
    let listing = f.get(&format!("/v2/metadata/tools/{}/", f.bucket)).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    let items = listing.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["resourceType"], "OPENAPI_TOOL");
    assert_eq!(items[0]["metadata"]["title"], "Pet store");
    assert_eq!(items[0]["metadata"]["operations"], "3");

    // An extra file: stored, with a warning naming it.
    let extra = f.put("pets-notes", &[("openapi.json", PETS.as_bytes()), ("notes.txt", b"x")]).await;
    assert_eq!(extra.status, 200, "{}", extra.body);
    let warnings = extra.json()["warnings"].clone();
    assert_eq!(warnings[0]["path"], "notes.txt", "{warnings}");
    assert!(warnings[0]["message"].as_str().unwrap().contains("not part of an OpenAPI tool"), "{warnings}");

    // Invalid tools: 400 naming the file and the JSON pointer, nothing stored.
    let broken = f.put("broken", &[("openapi.json", BROKEN.as_bytes())]).await;
    assert_eq!(broken.status, 400, "{}", broken.body);
    for expected in [
        "Invalid openapi-tool",
        "openapi.json: #/paths/~1a/post has no operationId",
        "#/paths/~1b~1{id}/put/operationId \"same\" is already used by #/paths/~1a/get",
        "#/paths/~1b~1{id}/put/responses/200/content/application~1json/schema/$ref \"#/components/schemas/Missing\" does not resolve",
    ] {
        assert!(broken.body.contains(expected), "expected {expected:?} in {}", broken.body);
    }
    assert_eq!(f.get(&f.url("broken")).await.status, 404);
    let not_json = f.put("not-json", &[("openapi.json", b"{\"openapi\": \"3.1.0\",}")]).await;
    assert_eq!(not_json.status, 400, "{}", not_json.body);
    assert!(not_json.body.contains("openapi.json: is not valid JSON: JSON.parse"), "{}", not_json.body);
    let swagger = br#"{"swagger": "2.0", "info": {"title": "Old"}, "paths": {}}"#;
    let old = f.put("old", &[("openapi.json", swagger)]).await;
    assert_eq!(old.status, 400, "{}", old.body);
    assert!(
        old.body.contains("#/openapi is missing") && old.body.contains("#/info/version is missing"),
        "{}",
        old.body
    );
    let nested = f.put("nested", &[("pets/openapi.json", PETS.as_bytes())]).await;
    assert_eq!(nested.status, 400, "{}", nested.body);
    assert!(nested.body.contains("found pets/openapi.json"), "{}", nested.body);

    // File mutations: the spec cannot be deleted; a README can be added; a
    // spec replaced by a broken one is refused and the tool is unchanged.
    let owner = [("Api-Key", OWNER)];
    let delete = f.client.delete(&f.url("pets/files/openapi.json"), &owner).await;
    assert_eq!(delete.status, 400, "{}", delete.body);
    assert!(delete.body.contains("openapi.json cannot be deleted"), "{}", delete.body);
    assert_eq!(f.get(&f.url("pets")).await.etag(), etag, "the tool is unchanged");
    let readme = f.client.put_files(&f.url("pets/files/README.md"), &owner, &[("README.md", b"# Pets, v2\n")]).await;
    assert_eq!(readme.status, 200, "{}", readme.body);
    let spec =
        f.client.put_files(&f.url("pets/files/openapi.json"), &owner, &[("openapi.json", BROKEN.as_bytes())]).await;
    assert_eq!(spec.status, 400, "{}", spec.body);
    assert!(spec.body.contains("has no operationId"), "{}", spec.body);
    let stored = f.get(&f.url("pets/files/openapi.json")).await;
    assert_eq!((stored.status, stored.body.as_str()), (200, PETS));
}

#[tokio::test]
async fn a_misbehaving_javascript_handler_is_cut_by_the_limits_and_the_host_serves_on() {
    let Some(wasm) = component("js-misbehaving") else { return };
    let f = Fixture::start(&wasm, "js-misbehaving", "").await;
    let fine = async |name: &str| {
        let put = f.put(name, &[("data.txt", b"fine")]).await;
        assert_eq!(put.status, 200, "{}", put.body);
        assert_eq!(put.json()["metadata"]["files"], "1");
    };
    fine("before").await;

    // A runaway loop: the CPU deadline stops it (400, the input's doing).
    let spin = f.put("spin", &[("loop", b"x")]).await;
    assert_eq!(spin.status, 400, "{}", spin.body);
    assert!(spin.body.contains("handler 'js-misbehaving@0.1.0' exceeded its CPU time limit"), "{}", spin.body);
    fine("after-loop").await;

    // A memory hog: the memory cap stops it.
    let hog = f.put("hog", &[("hog", b"x")]).await;
    assert_eq!(hog.status, 400, "{}", hog.body);
    assert!(hog.body.contains("handler 'js-misbehaving@0.1.0' exceeded its memory limit of 64 MiB"), "{}", hog.body);
    fine("after-hog").await;

    // A thrown Error is the handler's bug: 500 naming the handler and the
    // message (it used to be `400 Invalid js-misbehaving: `, no reason).
    let thrown = f.put("thrown", &[("throw", b"x")]).await;
    assert_eq!(thrown.status, 500, "{}", thrown.body);
    assert!(thrown.body.contains("handler 'js-misbehaving@0.1.0' crashed: check threw Error: the spec's servers[0].url is not a URL (thrown on purpose)"), "{}", thrown.body);
    assert_eq!(f.get(&f.url("thrown")).await.status, 404, "nothing is stored");
    let value = f.put("value", &[("throw-value", b"x")]).await;
    assert_eq!(value.status, 500, "{}", value.body);
    assert!(value.body.contains("crashed: check threw string a plain string thrown on purpose"), "{}", value.body);
    // The same from `validateFileMutation`, whose error is one problem.
    let mutation = f.client.put_files(&f.url("before/files/throw"), &[("Api-Key", OWNER)], &[("throw", b"x")]).await;
    assert_eq!(mutation.status, 500, "{}", mutation.body);
    assert!(
        mutation.body.contains("crashed: validateFileMutation threw Error: refusing to put throw by throwing"),
        "{}",
        mutation.body
    );
    fine("after-throw").await;

    // Every failure was logged against the handler.
    let logged = f.server.logged().join("\n");
    assert!(logged.contains("js-misbehaving@0.1.0"), "{logged}");
}

#[test]
fn dial_host_handler_test_and_inspect_run_the_javascript_example() {
    let Some(wasm) = component("openapi-tools") else { return };
    let setup = Setup::new();
    let valid = setup.path().join("pets");
    std::fs::create_dir(&valid).unwrap();
    std::fs::write(valid.join("openapi.json"), PETS).unwrap();
    let invalid = setup.path().join("broken");
    std::fs::create_dir(&invalid).unwrap();
    std::fs::write(invalid.join("openapi.json"), BROKEN).unwrap();
    let wasm = wasm.to_str().unwrap();

    // Three cold compilations of a 12 MB component: run them side by side.
    let (inspect, (passed, failed)) = std::thread::scope(|scope| {
        let inspect = scope.spawn(|| setup.run_for_code(&["handler", "inspect", wasm], &[]));
        let passed = scope.spawn(|| setup.run_for_code(&["handler", "test", "pets", wasm], &[]));
        let failed = setup.run_for_code(&["handler", "test", "broken", wasm], &[]);
        (inspect.join().unwrap(), (passed.join().unwrap(), failed))
    });

    let (code, stdout, stderr) = inspect;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for expected in ["dial:handler@1.x — implemented", "type:    openapi-tool", "group:   tools (routes /v2/tools/…)"]
    {
        assert!(stdout.contains(expected), "expected {expected:?} in {stdout}");
    }
    let (code, stdout, stderr) = passed;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("handler: openapi-tool@0.1.0 (tools)"), "{stdout}");
    assert!(stdout.contains("metadata title: Pet store") && stdout.contains("metadata operations: 3"), "{stdout}");
    assert!(stdout.contains("verdict: valid"), "{stdout}");
    let (code, stdout, stderr) = failed;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("#/paths/~1a/post has no operationId"), "{stdout}");
    assert!(stdout.contains("verdict: invalid"), "{stdout}");
}
