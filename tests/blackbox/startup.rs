//! The embedded default, health, readiness, handler listing, logs.

use crate::support::Setup;

#[tokio::test]
async fn embedded_default_prints_working_keys_that_survive_a_restart() {
    let setup = Setup::new();
    let (admin, user, user_bucket) = {
        let server = setup.start(None, &[]);
        let admin = server.banner_value("admin key:").expect("banner shows an admin key");
        let user = server.banner_value("user key:").expect("banner shows a user key");
        assert!(server.banner.iter().any(|l| l.contains("curl -H 'Api-Key:")), "{:?}", server.banner);
        assert!(server.data_dir.join("generated.toml").exists());

        let client = server.client();
        let reply = client.get("/v1/bucket", &[("Api-Key", &user)]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let user_bucket = reply.json()["bucket"].as_str().unwrap().to_string();
        assert!(user_bucket.bytes().all(|b| b.is_ascii_alphanumeric()), "{user_bucket}");
        let admin_bucket = client.get("/v1/bucket", &[("Api-Key", &admin)]).await.json()["bucket"].clone();
        assert_ne!(admin_bucket.as_str().unwrap(), user_bucket);
        (admin, user, user_bucket)
    };

    let server = setup.start(None, &[]);
    assert_eq!(server.banner_value("admin key:").as_deref(), Some(admin.as_str()));
    let reply = server.client().get("/v1/bucket", &[("Api-Key", &user)]).await;
    assert_eq!(reply.json()["bucket"].as_str(), Some(user_bucket.as_str()), "bucket ids are stable across restarts");
}

#[tokio::test]
async fn health_and_readiness() {
    let setup = Setup::new();
    let server = setup.start(None, &[]);
    let client = server.client();
    let health = client.get("/health", &[]).await;
    assert_eq!((health.status, health.json()["status"].as_str()), (200, Some("ok")));
    let ready = client.get("/ready", &[]).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.json()["handlers"], 1);
}

#[tokio::test]
async fn readiness_fails_when_storage_is_gone() {
    let setup = Setup::new();
    let store = setup.path().join("store");
    let config = setup.config(&format!("[storage]\nurl = \"file://{}\"\n", store.display()));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    assert_eq!(client.get("/ready", &[]).await.status, 200);
    // A file where the store directory was: the probe now fails.
    std::fs::remove_dir_all(&store).unwrap();
    std::fs::write(&store, b"not a directory").unwrap();
    let ready = client.get("/ready", &[]).await;
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("storage"), "{}", ready.body);
    // Anyone may ask: the answer names no path of the host's.
    assert!(!ready.body.contains(setup.path().to_str().unwrap()), "{}", ready.body);
    assert!(!ready.body.contains('/'), "{}", ready.body);
}

#[tokio::test]
async fn admins_list_loaded_handlers_and_others_may_not() {
    let setup = Setup::new();
    let dir = setup.path().join("handlers");
    std::fs::create_dir(&dir).unwrap();
    let guests = std::path::Path::new(dial_host::handlers::GUEST_WASM_DIR);
    std::fs::copy(guests.join("misbehaving_guest.wasm"), dir.join("misbehaving.wasm")).unwrap();
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
        [handlers.types.skills]
        strict = true
        "#,
        dir.display()
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();

    let reply = client.get("/v1/ops/handlers", &[("Api-Key", "admin-secret")]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let list = reply.json();
    let groups: Vec<&str> = list.as_array().unwrap().iter().map(|h| h["group"].as_str().unwrap()).collect();
    assert_eq!(groups, ["misbehaving", "skills"]);
    let skills = &list[1];
    assert_eq!(skills["typeName"], "skill");
    assert_eq!(skills["source"]["kind"], "builtin");
    assert_eq!(skills["strict"], true);
    assert_eq!(skills["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(list[0]["source"]["kind"], "file");
    assert_eq!(list[0]["limits"]["maxFiles"], 10);

    let denied = client.get("/v1/ops/handlers", &[("Api-Key", "user-secret")]).await;
    assert_eq!(denied.status, 403);
    assert_eq!(denied.body, "You don't have an access to: /v1/ops/handlers");
    assert_eq!(client.get("/v1/ops/handlers", &[]).await.status, 401);
}

#[tokio::test]
async fn two_handlers_for_one_group_stop_the_start() {
    let setup = Setup::new();
    let dir = setup.path().join("handlers");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("my-skills.wasm"), dial_host::handlers::BUILTIN_SKILL_HANDLER).unwrap();
    let config = setup.config(&format!("[handlers]\ndir = \"{}\"\n", dir.display()));
    let (ok, _, stderr) = setup.run(&["serve", "--config", config.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(stderr.contains("group 'skills' is claimed by two handlers"), "{stderr}");
    assert!(stderr.contains("my-skills.wasm"), "{stderr}");
}

#[tokio::test]
async fn environment_overrides_the_file_and_json_logs_are_json() {
    let setup = Setup::new();
    let config = setup.config("[log]\nformat = \"text\"\n");
    let (ok, _, stderr) = setup.run(
        &["check-config", "--config", config.to_str().unwrap()],
        &[("DIAL_HOST_LOG__FORMAT", "json"), ("DIAL_HOST_LOG__FILTER", "debug")],
    );
    assert!(ok, "{stderr}");
    let log_lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!log_lines.is_empty(), "debug logging produced nothing");
    for line in log_lines {
        let value: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(value.get("level").is_some(), "{line}");
    }
}

#[tokio::test]
async fn responses_carry_cors_headers_and_plain_text_errors() {
    let setup = Setup::new();
    let server = setup.start(None, &[]);
    let reply = server.client().get("/v1/bucket", &[("Origin", "https://chat.example")]).await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.headers["access-control-allow-origin"], "*");
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert_eq!(reply.body, "At least API-KEY or Authorization header must be provided");
}

/// The generated secrets (admin key, bucket-id secret) are owner-only, and a
/// file found readable by others is tightened at start.
#[cfg(unix)]
#[tokio::test]
async fn generated_secrets_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let setup = Setup::new();
    let server = setup.start(None, &[]);
    let generated = server.data_dir.join("generated.toml");
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&generated), 0o600);
    assert_eq!(mode(&server.data_dir), 0o700);
    drop(server);

    std::fs::set_permissions(&generated, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _server = setup.start(None, &[]);
    assert_eq!(mode(&generated), 0o600);
}

/// A compiled-handler cache entry the host did not write (altered code here)
/// is never loaded: the host starts, recompiles, rewrites the entry and
/// serves skills — on this start and every later one.
#[tokio::test]
async fn a_tampered_handler_cache_entry_is_recompiled_not_run() {
    let setup = Setup::new();
    let cache = setup.path().join("private-cache");
    let env = [("DIAL_HOST_HANDLERS__CACHE_DIR", cache.to_str().unwrap())];
    drop(setup.start(None, &env));
    let entry = walk(&cache).into_iter().find(|p| p.extension().is_some_and(|e| e == "cwasm")).expect("an entry");
    let genuine = std::fs::read(&entry).unwrap();
    let mut altered = genuine.clone();
    let middle = altered.len() / 2;
    for (i, byte) in altered[middle..middle + 8192].iter_mut().enumerate() {
        *byte = if i % 2 == 0 { 0x0f } else { 0x0b }; // ud2
    }
    std::fs::write(&entry, &altered).unwrap();

    for _ in 0..2 {
        let server = setup.start(None, &env);
        let key = server.banner_value("user key:").unwrap();
        let client = server.client();
        let bucket =
            client.get("/v1/bucket", &[("Api-Key", &key)]).await.json()["bucket"].as_str().unwrap().to_string();
        let skill: &[u8] = b"---\nname: s\ndescription: d\n---\n";
        let put =
            client.put_files(&format!("/v2/skills/{bucket}/s"), &[("Api-Key", &key)], &[("SKILL.md", skill)]).await;
        assert_eq!(put.status, 200, "{}", put.body);
        assert_eq!(std::fs::read(&entry).unwrap(), genuine, "the entry holds the host's own artifact again");
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { found.extend(walk(&path)) } else { found.push(path) }
    }
    found
}

/// Files a crashed process left half-written in the local store (object
/// store writes go to `<name>#<n>` first) are removed at the next start;
/// nothing else is touched.
#[tokio::test]
async fn files_left_half_written_by_a_crash_are_reclaimed_at_start() {
    let setup = Setup::new();
    let store = setup.path().join("data/store");
    let leftovers = [
        store.join("Keys/user/skills/s/v/0001/SKILL.md#1"),
        store.join(".dial-host/gc/0001-abc.json#2"),
        store.join("Keys/user/prompts/p#1"),
    ];
    let kept = [store.join("Keys/user/prompts/keep"), store.join("Keys/user/files/report#draft")];
    for file in leftovers.iter().chain(&kept) {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, b"partial").unwrap();
    }
    let _server = setup.start(None, &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while leftovers.iter().any(|file| file.exists()) {
        assert!(std::time::Instant::now() < deadline, "leftovers still there: {leftovers:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for file in &kept {
        assert!(file.exists(), "{} was removed", file.display());
    }
}
