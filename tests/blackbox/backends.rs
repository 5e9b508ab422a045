//! The host on each cloud backend it is tested on, as an operator configures
//! it (the `[storage]` tables of docs/operations.md): a skill's round trip on
//! Azure (Azurite) and S3 (moto), and the start-up refusal of a store whose
//! conditional writes are off.

use crate::services;
use crate::support::{Setup, unzip};

const KEY: &str = "backend-key";

fn skill(description: &str) -> Vec<u8> {
    format!("---\nname: notes\ndescription: {description}\n---\n# notes\n").into_bytes()
}

/// Create-only, read back as a ZIP, 304 on its etag, a stale If-Match
/// refused, an update, a version listing and a delete, on one backend.
async fn a_skill_round_trips(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    emulator.create("round-trip");
    let setup = Setup::new();
    let config = setup.config(&format!(
        "[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n{}",
        emulator.storage_toml("round-trip")
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let key = [("Api-Key", KEY)];
    assert_eq!(client.get("/ready", &[]).await.status, 200);
    let bucket = client.get("/v1/bucket", &key).await.json()["bucket"].as_str().unwrap().to_string();
    let url = format!("/v2/skills/{bucket}/team/notes");
    let files: &[(&str, &[u8])] = &[("SKILL.md", &skill("First.")), ("data/a.bin", &[0, 1, 2, 255])];

    let put = client.put_files(&url, &[("Api-Key", KEY), ("If-None-Match", "*")], files).await;
    assert_eq!(put.status, 200, "{backend}: {}", put.body);
    let etag = put.etag();
    let zip = client.get(&url, &key).await;
    assert_eq!((zip.status, zip.etag()), (200, etag.clone()));
    let mut expected: Vec<(String, Vec<u8>)> = files.iter().map(|(p, c)| (p.to_string(), c.to_vec())).collect();
    expected.sort();
    assert_eq!(unzip(&zip.bytes), expected);
    let cached = client.get(&url, &[("Api-Key", KEY), ("If-None-Match", &etag)]).await;
    assert_eq!(cached.status, 304);
    let again = client.put_files(&url, &[("Api-Key", KEY), ("If-None-Match", "*")], files).await;
    assert_eq!(again.status, 412);
    let stale = client.put_files(&url, &[("Api-Key", KEY), ("If-Match", "\"0123\"")], &files[..1]).await;
    assert_eq!(stale.status, 412);
    let updated = client
        .put_files(&url, &[("Api-Key", KEY), ("If-Match", &format!("\"{etag}\""))], &[("SKILL.md", &skill("Second."))])
        .await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    let file = client.put_files(&format!("{url}/files/data/b.txt"), &key, &[("b.txt", b"b")]).await;
    assert_eq!(file.status, 200, "{}", file.body);
    let versions = client.get(&format!("/v2/versions/skills/{bucket}/team/notes"), &key).await;
    assert_eq!(versions.status, 200, "{}", versions.body);
    assert_eq!(versions.json()["versions"].as_array().unwrap().len(), 3, "{}", versions.body);
    let listing = client.get(&format!("/v2/metadata/skills/{bucket}/team/"), &key).await;
    assert_eq!(listing.json()["items"][0]["metadata"]["description"], "Second.");
    assert_eq!(client.delete(&url, &key).await.status, 200);
    assert_eq!(client.get(&url, &key).await.status, 404);
}

#[tokio::test]
async fn a_skill_round_trips_on_azure() {
    a_skill_round_trips("azure").await;
}

#[tokio::test]
async fn a_skill_round_trips_on_s3() {
    a_skill_round_trips("s3").await;
}

/// An S3-compatible store without conditional writes (object_store's
/// `conditional_put = "disabled"`, the setting for such stores) fences
/// nothing: the host refuses it, naming the problem and the way out, and
/// runs on it only when `storage.allow_unfenced` says so — loudly.
#[tokio::test]
async fn a_store_without_conditional_writes_is_refused_unless_allowed() {
    let Some(moto) = services::emulator("s3") else { return };
    moto.create("unfenced");
    let setup = Setup::new();
    let storage = moto.storage_toml("unfenced") + "conditional_put = \"disabled\"\n";
    let refused = setup.config(&format!("[encryption]\nsecret = \"s\"\n{storage}"));
    let (ok, _, stderr) = setup.run(&["check-config", "--config", refused.to_str().unwrap()], &[]);
    assert!(!ok, "started on an unfenced store: {stderr}");
    assert!(
        stderr.contains("does not do the conditional writes") && stderr.contains("storage.allow_unfenced"),
        "the refusal names the problem and the setting: {stderr}"
    );
    let allowed = setup.config(&format!(
        "[encryption]\nsecret = \"s\"\n{}",
        storage.replace("[storage.options]", "allow_unfenced = true\n[storage.options]")
    ));
    let (ok, _, stderr) = setup.run(&["check-config", "--config", allowed.to_str().unwrap()], &[]);
    assert!(ok, "allow_unfenced did not let it start: {stderr}");
    assert!(stderr.contains("does not fence commits"), "the risk is logged: {stderr}");
}
