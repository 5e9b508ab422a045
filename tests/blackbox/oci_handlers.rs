//! Handler types pulled from an OCI registry (`handlers.types.<group>.source =
//! "oci://…@sha256:…"`): the prompt-library example published with
//! `dial-host handler push` to a real registry (Debian's docker-registry on
//! loopback), served by the real binary, through a digest mismatch, a reload
//! to new digests, and the registry going away.

use std::path::Path;

use sha2::Digest as _;

use crate::example_handler::{LIBRARY_TOML, REPLY, TRIAGE, prompt_library_wasm};
use crate::support::{Client, Server, Setup, shared_cache_dir};

const ADMIN: (&str, &str) = ("Api-Key", "admin-key");
const OWNER: (&str, &str) = ("Api-Key", "owner-key");
const GROUP: &str = "prompt-libraries";

/// The same component with one more custom section: another digest, the same code.
fn variant(wasm: &[u8], mark: &[u8]) -> Vec<u8> {
    let name = b"oci-test";
    let mut out = wasm.to_vec();
    out.push(0); // custom section id
    out.push((1 + name.len() + mark.len()) as u8);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(mark);
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `dial-host handler push FILE TARGET`; returns the printed pinned reference.
fn push(setup: &Setup, file: &Path, target: &str) -> String {
    let (ok, stdout, stderr) = setup.run(&["handler", "push", file.to_str().unwrap(), target], &[]);
    assert!(ok, "handler push failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("[handlers.types.{GROUP}]")), "the push prints the config to write: {stdout}");
    let reference = stdout.lines().find(|line| line.starts_with("oci://")).expect("the pinned reference").trim();
    assert!(reference.contains("@sha256:"), "{stdout}");
    reference.to_string()
}

fn config(setup: &Setup, source: &str) -> std::path::PathBuf {
    setup.config(&format!(
        r#"
        [encryption]
        secret = "s"
        [keys.admin-key]
        project = "ops"
        roles = ["admin"]
        [keys.owner-key]
        project = "owner"
        roles = ["user"]
        [handlers.types.{GROUP}]
        source = "{source}"
        "#
    ))
}

async fn bucket(client: &Client) -> String {
    client.get("/v1/bucket", &[OWNER]).await.json()["bucket"].as_str().unwrap().to_string()
}

/// A valid library is stored with the handler's metadata: the type serves.
async fn library_serves(client: &Client, name: &str) {
    let url = format!("/v2/{GROUP}/{}/{name}", bucket(client).await);
    let files: &[(&str, &[u8])] = &[
        ("library.toml", LIBRARY_TOML.as_bytes()),
        ("prompts/triage.md", TRIAGE.as_bytes()),
        ("prompts/reply.md", REPLY.as_bytes()),
    ];
    let put = client.put_files(&url, &[OWNER], files).await;
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.json()["metadata"]["prompts"], "2");
    let broken = client.put_files(&format!("{url}-broken"), &[OWNER], &[("library.toml", b"name = 1")]).await;
    assert_eq!(broken.status, 400, "the handler's rules apply: {}", broken.body);
}

/// The listing's entry for the group, if it serves.
async fn listed(client: &Client) -> Option<serde_json::Value> {
    let listing = client.get("/v1/ops/handlers", &[ADMIN]).await.json();
    listing.as_array().unwrap().iter().find(|h| h["group"] == GROUP).cloned()
}

async fn reload(client: &Client) -> (u16, serde_json::Value) {
    let reply = client.post("/v1/ops/handlers/reload", &[ADMIN], "").await;
    (reply.status, reply.json())
}

#[tokio::test]
async fn a_type_pulled_by_digest_serves_survives_the_registry_and_reloads_to_new_digests() {
    let Some(mut registry) = crate::services::oci_registry() else { return };
    let setup = Setup::new();
    let original = std::fs::read(prompt_library_wasm()).unwrap();
    let (v2, v3) = (variant(&original, b"2"), variant(&original, b"3"));
    for (name, bytes) in [("v2.wasm", &v2), ("v3.wasm", &v3)] {
        std::fs::write(setup.path().join(name), bytes).unwrap();
    }
    let repository = format!("oci://{}/handlers/prompt-library", registry.address);
    let v1_ref = push(&setup, prompt_library_wasm(), &format!("{repository}:v1"));
    let v2_ref = push(&setup, &setup.path().join("v2.wasm"), &format!("{repository}:v2"));
    let v3_ref = push(&setup, &setup.path().join("v3.wasm"), &format!("{repository}:v3"));

    // The registry's copy of v3's manifest is damaged (same length, one byte
    // changed): what it serves under that digest is no longer what the digest pins.
    let v3_hex = v3_ref.rsplit_once("sha256:").unwrap().1.to_string();
    let stored = registry.blob_path(&v3_hex);
    let manifest = std::fs::read_to_string(&stored).unwrap();
    assert!(manifest.contains("\"application/wasm\""), "{manifest}");
    std::fs::write(&stored, manifest.replace("\"application/wasm\"", "\"application/wasn\"")).unwrap();

    // Started on the damaged digest: the type is reported failed, the rest serves.
    let config_file = config(&setup, &v3_ref);
    let server: Server = setup.start(Some(&config_file), &[]);
    let client = server.client();
    let ready = client.get("/ready", &[]).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.json()["handlersFailed"], 1, "{}", ready.body);
    assert!(listed(&client).await.is_none(), "a digest mismatch is never served");
    let skills = client.get("/v1/ops/handlers", &[ADMIN]).await.json();
    assert!(skills.as_array().unwrap().iter().any(|h| h["group"] == "skills"), "the rest serves: {skills}");
    let (status, report) = reload(&client).await;
    assert_eq!(status, 422, "{report}");
    let failed = &report["failed"][0];
    assert_eq!(failed["source"], serde_json::json!({"kind": "oci", "path": v3_ref}), "{report}");
    assert!(failed["error"].as_str().unwrap().contains("digest"), "{report}");
    let cache = shared_cache_dir().join("oci");
    assert!(!cache.join(format!("sha256-{v3_hex}.wasm")).exists(), "nothing unverified is cached");

    // The configuration now pins v1: a reload pulls it, verifies it, caches it and serves it.
    config(&setup, &v1_ref);
    let (status, report) = reload(&client).await;
    assert_eq!(status, 200, "{report}");
    let entry = listed(&client).await.expect("prompt-libraries serves after the reload");
    assert_eq!(entry["source"], serde_json::json!({"kind": "oci", "path": v1_ref}));
    assert_eq!(entry["sha256"], sha256_hex(&original));
    let v1_hex = v1_ref.rsplit_once("sha256:").unwrap().1;
    assert_eq!(std::fs::read(cache.join(format!("sha256-{v1_hex}.wasm"))).unwrap(), original, "cached by digest");
    library_serves(&client, "support-prompts").await;
    assert!(client.get("/ready", &[]).await.json().get("handlersFailed").is_none());

    // A second version: change the pin, reload, the new component serves.
    config(&setup, &v2_ref);
    let (status, report) = reload(&client).await;
    assert_eq!(status, 200, "{report}");
    let change = report["serving"].as_array().unwrap().iter().find(|h| h["group"] == GROUP).unwrap().clone();
    assert_eq!(change["change"], "updated", "{report}");
    assert_eq!(listed(&client).await.unwrap()["sha256"], sha256_hex(&v2));
    library_serves(&client, "second").await;
    drop(server);

    // The registry goes away: a restart serves v2 from the cache.
    registry.stop();
    let server = setup.start(Some(&config_file), &[]);
    let client = server.client();
    assert_eq!(listed(&client).await.expect("served from the cache")["sha256"], sha256_hex(&v2));
    library_serves(&client, "after-outage").await;

    // A pin never pulled, with the registry away: reported failed (unreachable),
    // and the version serving keeps serving.
    config(&setup, &v3_ref);
    let (status, report) = reload(&client).await;
    assert_eq!(status, 422, "{report}");
    assert!(report["failed"][0]["error"].as_str().unwrap().contains("registry unreachable"), "{report}");
    assert_eq!(report["failed"][0]["stillServing"], "prompt-library@0.1.0", "{report}");
    library_serves(&client, "still").await;
}

#[tokio::test]
async fn a_tag_without_a_digest_is_refused_at_start_with_what_to_write() {
    let setup = Setup::new();
    let file = config(&setup, "oci://127.0.0.1:5000/handlers/prompt-library:v1");
    let path = file.to_str().unwrap();
    for command in [&["check-config", "--config", path][..], &["serve", "--config", path][..]] {
        let (ok, stdout, stderr) = setup.run(command, &[]);
        assert!(!ok, "{command:?} must refuse a tag: {stdout}");
        assert!(stderr.contains(&format!("handlers.types.{GROUP}.source")), "{command:?}: {stderr}");
        assert!(stderr.contains("names a tag"), "{stderr}");
        assert!(stderr.contains("oci://127.0.0.1:5000/handlers/prompt-library@sha256:<digest>"), "{stderr}");
    }
    let sha512 = config(&setup, "oci://127.0.0.1:5000/p@sha512:abcd");
    let (ok, _, stderr) = setup.run(&["check-config", "--config", sha512.to_str().unwrap()], &[]);
    assert!(!ok && stderr.contains("only sha256"), "{stderr}");
}
