//! Hot reload: `POST /v1/ops/handlers/reload` swaps the components of
//! `handlers.dir` into a running server; what fails to load never replaces
//! what is serving.

use std::path::Path;

use crate::support::Setup;

const ADMIN: (&str, &str) = ("Api-Key", "admin-secret");
const USER: (&str, &str) = ("Api-Key", "user-secret");

fn guest(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(dial_host::handlers::GUEST_WASM_DIR).join(format!("{name}.wasm"))).unwrap()
}

/// The same component with one more custom section: a new hash, same code.
fn rebuilt(mut wasm: Vec<u8>) -> Vec<u8> {
    let name = b"rebuild";
    let payload = b"2";
    wasm.push(0); // custom section id
    wasm.push((1 + name.len() + payload.len()) as u8);
    wasm.push(name.len() as u8);
    wasm.extend_from_slice(name);
    wasm.extend_from_slice(payload);
    wasm
}

#[tokio::test]
async fn reload_loads_updates_keeps_and_removes_handlers() {
    let setup = Setup::new();
    let dir = setup.path().join("handlers");
    std::fs::create_dir(&dir).unwrap();
    let config = setup.config(&format!(
        r#"
        [keys.admin-secret]
        project = "ops"
        roles = ["admin"]
        [keys.user-secret]
        project = "alpha"
        roles = ["user"]
        [handlers]
        dir = "{}"
        "#,
        dir.display()
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let bucket = client.get("/v1/bucket", &[USER]).await.json()["bucket"].as_str().unwrap().to_string();
    let note = format!("/v2/notes/{bucket}/shopping");
    let put_note = |body: &'static str| {
        let (client, note) = (&client, &note);
        async move { client.put_files(note, &[USER], &[("NOTE.txt", body.as_bytes())]).await.status }
    };

    assert_eq!(client.post("/v1/ops/handlers/reload", &[USER], "").await.status, 403);
    assert_eq!(put_note("milk").await, 404, "no handler serves 'notes' yet");

    // A new file is loaded.
    std::fs::write(dir.join("notes.wasm"), guest("handler_1_0")).unwrap();
    let reply = client.post("/v1/ops/handlers/reload", &[ADMIN], "").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let report = reply.json();
    let serving = report["serving"].as_array().unwrap();
    let notes = serving.iter().find(|h| h["group"] == "notes").unwrap();
    assert_eq!(notes["change"], "loaded");
    assert_eq!(notes["handlerVersion"], "1.0.0");
    // The listing's shape: `{"kind": "file", "path": …}`.
    assert_eq!(notes["source"]["kind"], "file");
    assert!(notes["source"]["path"].as_str().unwrap().ends_with("notes.wasm"));
    let first_hash = notes["sha256"].as_str().unwrap().to_string();
    assert_eq!(serving.iter().find(|h| h["group"] == "skills").unwrap()["change"], "unchanged");
    assert_eq!(put_note("milk").await, 200);

    // A changed file replaces the old version.
    std::fs::write(dir.join("notes.wasm"), rebuilt(guest("handler_1_0"))).unwrap();
    let report = client.post("/v1/ops/handlers/reload", &[ADMIN], "").await.json();
    let notes = report["serving"].as_array().unwrap().iter().find(|h| h["group"] == "notes").unwrap().clone();
    assert_eq!(notes["change"], "updated");
    assert_ne!(notes["sha256"], first_hash.as_str());
    let listed = client.get("/v1/ops/handlers", &[ADMIN]).await.json();
    let listed = listed.as_array().unwrap().iter().find(|h| h["group"] == "notes").unwrap().clone();
    assert_eq!(listed["sha256"], notes["sha256"]);

    // A broken file, and a file claiming a served group, leave what serves.
    std::fs::write(dir.join("notes.wasm"), b"\0asm broken").unwrap();
    std::fs::write(dir.join("z-skills.wasm"), dial_host::handlers::BUILTIN_SKILL_HANDLER).unwrap();
    let reply = client.post("/v1/ops/handlers/reload", &[ADMIN], "").await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    let report = reply.json();
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{report}");
    assert!(failed[0]["source"]["path"].as_str().unwrap().ends_with("notes.wasm"));
    assert!(failed[0]["error"].as_str().unwrap().contains("not a valid WebAssembly component"), "{report}");
    assert_eq!(failed[0]["stillServing"], "note@1.0.0");
    assert!(failed[1]["error"].as_str().unwrap().contains("group 'skills' is already claimed by built-in"), "{report}");
    assert_eq!(failed[1]["stillServing"], serde_json::Value::Null);
    assert_eq!(put_note("eggs").await, 200, "the previous notes handler still serves");
    let listed = client.get("/v1/ops/handlers", &[ADMIN]).await.json();
    let skills = listed.as_array().unwrap().iter().find(|h| h["group"] == "skills").unwrap().clone();
    assert_eq!(skills["source"]["kind"], "builtin");

    // Files that leave the directory take their type with them.
    std::fs::remove_file(dir.join("notes.wasm")).unwrap();
    std::fs::remove_file(dir.join("z-skills.wasm")).unwrap();
    let reply = client.post("/v1/ops/handlers/reload", &[ADMIN], "").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["removed"], serde_json::json!(["notes"]));
    assert_eq!(put_note("milk").await, 404);

    // A directory that cannot be read any more: 422 with the reason, and
    // every type keeps serving.
    std::fs::write(dir.join("notes.wasm"), guest("handler_1_0")).unwrap();
    assert_eq!(client.post("/v1/ops/handlers/reload", &[ADMIN], "").await.status, 200);
    std::fs::remove_dir_all(&dir).unwrap();
    let reply = client.post("/v1/ops/handlers/reload", &[ADMIN], "").await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    let report = reply.json();
    assert!(report["failed"][0]["error"].as_str().unwrap().contains("cannot read handlers directory"), "{report}");
    assert_eq!(report["serving"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(put_note("still").await, 200, "the types keep serving");
}
