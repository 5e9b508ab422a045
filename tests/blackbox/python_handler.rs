//! Handlers written in Python (issue 41): `examples/handlers/python-datasets`
//! and the misbehaving guest `tests/guests/python-misbehaving`, built with
//! componentize-py by `scripts/build-python-handlers` (as `scripts/test`
//! does), copied into `handlers.dir` and served by the real binary; and the
//! CLI's `handler inspect`/`test` on them, loading what the server compiled
//! from its cache.
//!
//! componentize-py comes from `<workspace>/.venv-componentize` (installed by
//! `scripts/test`), `$COMPONENTIZE_PY` or the PATH. Missing, the tests skip
//! with a note, except under `CI=true`, where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{Client, Reply, Server, Setup};

const ADMIN: &str = "admin-key";
const OWNER: &str = "owner-key";

const CARD: &str = r#"{
  "name": "support-tickets",
  "description": "Tickets the support team closed in 2026.",
  "license": "CC-BY-4.0",
  "columns": [
    {"name": "id", "type": "integer"},
    {"name": "text", "type": "string"},
    {"name": "tags", "type": "array", "required": false}
  ]
}
"#;
const TRAIN: &str = "{\"id\": 1, \"text\": \"Printer on fire\", \"tags\": [\"hardware\"]}\n\
                     {\"id\": 2, \"text\": \"Cannot log in\"}\n\
                     {\"id\": 3, \"text\": \"Refund\", \"tags\": []}\n";
const TEST: &str = "{\"id\": 4, \"text\": \"Slow pages\"}\n";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ sits in the workspace").to_path_buf()
}

/// componentize-py, or `None` after a note (a panic under `CI=true`).
fn componentize_py() -> Option<PathBuf> {
    let found = std::env::var_os("COMPONENTIZE_PY")
        .map(PathBuf::from)
        .or_else(|| Some(workspace().join(".venv-componentize/bin/componentize-py")).filter(|p| p.is_file()))
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|dir| dir.join("componentize-py"))
                .find(|path| path.is_file())
        });
    if found.is_none() {
        let install = "run scripts/test (it installs componentize-py into .venv-componentize), or: \
                       pip install componentize-py==0.25.1";
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("componentize-py is not installed, and CI=true forbids skipping its tests. Install it: {install}");
        }
        eprintln!("note: componentize-py is not installed; skipping this test. To run it: {install}");
    }
    found
}

/// The directory holding `datasets.wasm` and `python-misbehaving.wasm`,
/// built once per run (and only when their sources changed since the last).
fn components() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let componentize_py = componentize_py()?;
        // CARGO_TARGET_TMPDIR is <target>/tmp.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("<target>/tmp").join("wasm-examples/python");
        let output = Command::new(workspace().join("scripts/build-python-handlers"))
            .arg(&dir)
            .env("COMPONENTIZE_PY", componentize_py)
            .output()
            .expect("run scripts/build-python-handlers");
        assert!(
            output.status.success(),
            "building the Python handlers failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Some(dir)
    })
    .as_deref()
}

struct Fixture {
    setup: Setup,
    server: Server,
    client: Client,
    bucket: String,
}

impl Fixture {
    /// A server with the given components (file names in [`components`]) in
    /// its `handlers.dir`, plus extra `[handlers]` settings and environment.
    async fn start(components: &Path, wasm: &[&str], handlers: &str, env: &[(&str, &str)]) -> Self {
        let setup = Setup::new();
        let dir = setup.path().join("handlers");
        std::fs::create_dir(&dir).unwrap();
        for name in wasm {
            std::fs::copy(components.join(name), dir.join(name)).unwrap();
        }
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
            {handlers}
            "#,
            dir.display()
        ));
        let server = setup.start(Some(&config), env);
        let client = server.client();
        let bucket =
            client.get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"].as_str().unwrap().to_string();
        Self { setup, server, client, bucket }
    }

    fn url(&self, group: &str, path: &str) -> String {
        format!("/v2/{group}/{}/{path}", self.bucket)
    }

    async fn put(&self, path: &str, files: &[(&str, &[u8])]) -> Reply {
        self.client.put_files(&self.url("datasets", path), &[("Api-Key", OWNER)], files).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.client.get(path, &[("Api-Key", OWNER)]).await
    }
}

fn valid_dataset() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("dataset.json", CARD.as_bytes()),
        ("data/train.jsonl", TRAIN.as_bytes()),
        ("data/test.jsonl", TEST.as_bytes()),
        ("README.md", b"# Support tickets\n"),
    ]
}

#[tokio::test]
async fn the_python_datasets_type_is_loaded_from_handlers_dir_and_serves_its_type() {
    let Some(components) = components() else { return };
    let f = Fixture::start(components, &["datasets.wasm"], "", &[]).await;

    // The admin listing shows the handler, from its file, with its limits.
    let handlers = f.client.get("/v1/ops/handlers", &[("Api-Key", ADMIN)]).await.json();
    let datasets = handlers
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["group"] == "datasets")
        .unwrap_or_else(|| panic!("datasets is not listed: {handlers}"));
    assert_eq!(datasets["typeName"], "dataset");
    assert_eq!(datasets["displayName"], "Dataset");
    assert_eq!(datasets["source"]["kind"], "file");
    assert_eq!(datasets["limits"]["maxFiles"], 1000);
    assert_eq!(datasets["limits"]["maxTotalBytes"], 1 << 20);

    // A valid dataset: stored, with the handler's metadata and no warnings.
    let put = f.put("support-tickets", &valid_dataset()).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    assert_eq!(body["resourceType"], "DATASET");
    assert_eq!(body["metadata"]["name"], "support-tickets");
    assert_eq!(body["metadata"]["license"], "CC-BY-4.0");
    assert_eq!(body["metadata"]["rows"], "4");
    assert_eq!(body["metadata"]["columns"], "id, text, tags");
    assert_eq!(body["metadata"]["files"], "2");
    assert!(body.get("warnings").is_none(), "{body}");
    let etag = put.etag();

    // The bucket root lists it with its cached metadata.
    let listing = f.get(&format!("/v2/metadata/datasets/{}/", f.bucket)).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    let listing = listing.json();
    let items = listing["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listing}");
    assert_eq!(items[0]["name"], "support-tickets");
    assert_eq!(items[0]["resourceType"], "DATASET");
    assert_eq!(items[0]["metadata"]["rows"], "4");
    assert_eq!(items[0]["metadata"]["description"], "Tickets the support team closed in 2026.");

    // Undeclared columns and a card naming another dataset are warnings:
    // stored, and said.
    let extra = "{\"id\": 1, \"text\": \"a\", \"lang\": \"en\"}\n";
    let warned = f.put("renamed", &[("dataset.json", CARD.as_bytes()), ("data/a.jsonl", extra.as_bytes())]).await;
    assert_eq!(warned.status, 200, "{}", warned.body);
    let warnings = warned.json()["warnings"].clone();
    assert_eq!(warnings[0]["path"], "data/a.jsonl", "{warnings}");
    assert!(warnings[0]["message"].as_str().unwrap().contains("line 1 has columns the card does not declare (lang)"));
    assert_eq!(warnings[1]["path"], "dataset.json", "{warnings}");
    assert!(warnings[1]["message"].as_str().unwrap().contains("stored as `renamed`"), "{warnings}");

    // Rows that break the card: 400 naming each file and line, nothing stored.
    let bad =
        "{\"id\": 5, \"text\": \"ok\"}\n{\"id\": \"six\", \"text\": \"x\"}\n{\"text\": \"no id\"}\nnot json\n[1, 2]\n";
    let invalid = f.put("broken", &[("dataset.json", CARD.as_bytes()), ("data/train.jsonl", bad.as_bytes())]).await;
    assert_eq!(invalid.status, 400, "{}", invalid.body);
    for expected in [
        "data/train.jsonl: line 2: `id` must be integer, not string",
        "data/train.jsonl: line 3 has no `id`, a required column",
        "data/train.jsonl: line 4 is not valid JSON: Expecting value at column 1",
        "data/train.jsonl: line 5 must be a JSON object, not array",
    ] {
        assert!(invalid.body.contains(expected), "{expected}: {}", invalid.body);
    }
    assert!(invalid.body.contains("dataset"), "the type is named: {}", invalid.body);
    assert_eq!(f.get(&f.url("datasets", "broken")).await.status, 404);

    // A card that is not JSON: its line and column; no card at all: said,
    // with the usual mistake (a zipped enclosing folder) pointed out.
    let card =
        f.put("no-card", &[("dataset.json", b"{\"name\": \"x\",\n  oops}"), ("data/a.jsonl", extra.as_bytes())]).await;
    assert_eq!(card.status, 400, "{}", card.body);
    assert!(
        card.body.contains("dataset.json is not valid JSON") && card.body.contains("line 2, column 3"),
        "{}",
        card.body
    );
    let nested =
        f.put("nested", &[("tickets/dataset.json", CARD.as_bytes()), ("tickets/data/a.jsonl", TEST.as_bytes())]).await;
    assert_eq!(nested.status, 400, "{}", nested.body);
    assert!(
        nested.body.contains("dataset.json is missing") && nested.body.contains("found tickets/dataset.json"),
        "{}",
        nested.body
    );

    // The card cannot be deleted on its own.
    let delete = f.client.delete(&f.url("datasets", "support-tickets/files/dataset.json"), &[("Api-Key", OWNER)]).await;
    assert_eq!(delete.status, 400, "{}", delete.body);
    assert!(delete.body.contains("dataset.json cannot be deleted"), "{}", delete.body);
    assert_eq!(f.get(&f.url("datasets", "support-tickets")).await.etag(), etag, "the dataset is unchanged");

    // A single-file PUT is checked as a whole: a bad new file is refused,
    // a good one updates the row count; a data file can be deleted.
    let single = |path: &str| f.url("datasets", &format!("support-tickets/files/{path}"));
    let refused = f
        .client
        .put_files(&single("data/more.jsonl"), &[("Api-Key", OWNER)], &[("more.jsonl", b"{\"id\": 9}\n")])
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("data/more.jsonl: line 1 has no `text`"), "{}", refused.body);
    let added =
        f.client.put_files(&single("data/more.jsonl"), &[("Api-Key", OWNER)], &[("more.jsonl", TEST.as_bytes())]).await;
    assert_eq!(added.status, 200, "{}", added.body);
    let removed = f.client.delete(&single("data/test.jsonl"), &[("Api-Key", OWNER)]).await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    let listing = f.get(&format!("/v2/metadata/datasets/{}/", f.bucket)).await.json();
    let item = listing["items"].as_array().unwrap().iter().find(|i| i["name"] == "support-tickets").unwrap().clone();
    assert_eq!(item["metadata"]["rows"], "4", "3 + 1 added − 1 deleted: {item}");
    assert_eq!(item["metadata"]["files"], "2", "{item}");
}

/// `handler inspect` and `handler test` with the server's configuration
/// load the component the server compiled from its cache instead of
/// compiling it again (11–13 s for an 18 MB Python component), and say so.
#[tokio::test]
async fn the_cli_loads_the_python_handler_the_server_compiled_from_its_cache() {
    let Some(components) = components() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("handler-cache");
    let cache_env = cache.display().to_string();
    let env = [("DIAL_HOST_HANDLERS__CACHE_DIR", cache_env.as_str())];
    let mut f = Fixture::start(components, &["datasets.wasm"], "", &env).await;
    // The server compiled it into the empty cache.
    let sha256 = {
        use sha2::Digest;
        let wasm = std::fs::read(components.join("datasets.wasm")).unwrap();
        sha2::Sha256::digest(&wasm).iter().map(|byte| format!("{byte:02x}")).collect::<String>()
    };
    let cached: Vec<PathBuf> = crate::support::files_below(&cache)
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|name| name == format!("{sha256}.cwasm").as_str()))
        .collect();
    assert_eq!(cached.len(), 1, "the server cached the component: {:?}", crate::support::files_below(&cache));
    f.server.terminate(std::time::Duration::from_secs(20));

    let config = f.setup.path().join("dial.toml");
    let config = config.to_str().unwrap();
    let wasm = f.setup.path().join("handlers/datasets.wasm");
    let wasm = wasm.to_str().unwrap();
    let (ok, stdout, stderr) = f.setup.run(&["handler", "inspect", "--config", config, wasm], &env);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("type:    dataset") && stdout.contains("group:   datasets"), "{stdout}");
    let from_cache = format!("cache:   loaded from {}", cached[0].parent().unwrap().display());
    assert!(stdout.contains(&from_cache), "expected `{from_cache}`:\n{stdout}");

    // `handler test` on a valid and an invalid local folder, from the cache too.
    let folder = f.setup.path().join("support-tickets");
    for (path, content) in valid_dataset() {
        std::fs::create_dir_all(folder.join(path).parent().unwrap()).unwrap();
        std::fs::write(folder.join(path), content).unwrap();
    }
    let folder = folder.to_str().unwrap();
    let (code, stdout, stderr) = f.setup.run_for_code(&["handler", "test", "--config", config, folder, wasm], &env);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(&from_cache), "{stdout}");
    assert!(stdout.contains("metadata rows: 4") && stdout.contains("verdict: valid"), "{stdout}");
    std::fs::write(Path::new(folder).join("data/test.jsonl"), "{\"id\": 4}\n").unwrap();
    let (code, stdout, _) = f.setup.run_for_code(&["handler", "test", "--config", config, folder, wasm], &env);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("error data/test.jsonl: line 1 has no `text`, a required column"), "{stdout}");

    // Without the server's secret there is no cache to trust: compiled, said.
    let (ok, stdout, stderr) = f.setup.run(&["handler", "inspect", wasm], &env);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("cache:   compiled now, not cached"), "{stdout}");
}

/// A Python handler that loops or hoards memory is stopped by the CPU
/// deadline and the memory cap (400, naming the handler), one that raises
/// is a crash (500, with its exception); the host serves on.
#[tokio::test]
async fn runaway_python_handlers_are_cut_by_the_limits_while_the_host_serves_on() {
    let Some(components) = components() else { return };
    let mut f = Fixture::start(components, &["datasets.wasm", "python-misbehaving.wasm"], "", &[]).await;
    let owner = [("Api-Key", OWNER)];
    let misbehave = |trigger: &'static str| {
        let url = f.url("python-misbehaving", trigger);
        let client = f.client.clone();
        async move { client.put_files(&url, &owner, &[(trigger, b"x"), ("other.txt", b"y")]).await }
    };

    let looped = misbehave("loop").await;
    assert_eq!(looped.status, 400, "{}", looped.body);
    assert!(
        looped.body.contains("handler 'python-misbehaving@0.1.0' exceeded its CPU time limit of 200 ms"),
        "{}",
        looped.body
    );
    let hog = misbehave("hog").await;
    assert_eq!(hog.status, 400, "{}", hog.body);
    assert!(
        hog.body.contains("handler 'python-misbehaving@0.1.0' exceeded its memory limit of 64 MiB"),
        "{}",
        hog.body
    );
    let raised = misbehave("raise").await;
    assert_eq!(raised.status, 500, "{}", raised.body);
    assert!(raised.body.contains("handler 'python-misbehaving@0.1.0' crashed"), "{}", raised.body);
    assert!(raised.body.contains("misbehaving Python handler raised on purpose"), "{}", raised.body);
    for trigger in ["loop", "hog", "raise"] {
        assert_eq!(f.get(&f.url("python-misbehaving", trigger)).await.status, 404, "{trigger} left nothing");
    }

    // The host serves on: the same handler, and the datasets type.
    assert!(f.server.is_running());
    let fine = f.client.put_files(&f.url("python-misbehaving", "fine"), &owner, &[("a.txt", b"x")]).await;
    assert_eq!(fine.status, 200, "{}", fine.body);
    let put = f.put("support-tickets", &valid_dataset()).await;
    assert_eq!(put.status, 200, "{}", put.body);

    // `handler test` reports the limit as a handler failure (exit 2).
    let folder = f.setup.path().join("loop");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("loop"), "x").unwrap();
    let wasm = components.join("python-misbehaving.wasm");
    let (code, stdout, stderr) =
        f.setup.run_for_code(&["handler", "test", folder.to_str().unwrap(), wasm.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stdout.contains("exceeded its CPU time limit"), "{stdout}");
}

/// The example's own unit tests (`test_app.py`): its rules run natively in
/// CPython against the generated bindings and an in-memory `files.read`, as
/// its README says.
#[test]
fn the_datasets_rules_pass_their_python_unit_tests() {
    let Some(componentize_py) = componentize_py() else { return };
    let bindings = tempfile::tempdir().unwrap();
    let generated = Command::new(&componentize_py)
        .arg("-d")
        .arg(workspace().join("wit"))
        .args(["-w", "handler", "bindings"])
        .arg(bindings.path())
        .output()
        .expect("run componentize-py bindings");
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    // The venv's own Python (3.11+) when componentize-py lives in one.
    let python = Some(componentize_py.with_file_name("python")).filter(|p| p.is_file()).unwrap_or("python3".into());
    let output = Command::new(python)
        .args(["-m", "unittest", "-v", "test_app"])
        .current_dir(workspace().join("examples/handlers/python-datasets"))
        .env("PYTHONPATH", bindings.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3 -m unittest");
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    assert!(report.contains("Ran 8 tests"), "{report}");
}

/// The instance pool holds as many Python instances as calls may run at
/// once: a CPython component instantiates 14 core modules where a Rust one
/// has 3, and a pool sized for Rust guests ran out after 9 concurrent calls.
#[tokio::test]
async fn as_many_python_checks_run_at_once_as_the_host_allows() {
    let Some(components) = components() else { return };
    // max_concurrent_calls is 32 by default. Each check parses 5 000 rows
    // (tens of milliseconds), yielding every millisecond: the 24 calls
    // hold their instances at the same time.
    let f = Fixture::start(components, &["datasets.wasm"], "", &[]).await;
    let rows: String = (0..5000).map(|i| format!("{{\"id\": {i}, \"text\": \"ticket {i}\"}}\n")).collect();
    let rows: &'static [u8] = Box::leak(rows.into_bytes().into_boxed_slice());
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..24 {
        let (client, url) = (f.client.clone(), f.url("datasets", &format!("tickets-{i}")));
        let files: [(&str, &[u8]); 2] = [("dataset.json", CARD.as_bytes()), ("data/rows.jsonl", rows)];
        puts.spawn(async move { client.put_files(&url, &[("Api-Key", OWNER)], &files).await });
    }
    while let Some(put) = puts.join_next().await {
        let put = put.unwrap();
        assert_eq!(put.status, 200, "{}", put.body);
    }
    let listing = f.get(&format!("/v2/metadata/datasets/{}/", f.bucket)).await.json();
    assert_eq!(listing["items"].as_array().unwrap().len(), 24, "{listing}");
}
