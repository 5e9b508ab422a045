//! Version history (issue 14, SPEC §11) end to end: `GET /v2/versions/…`,
//! `?version=` on the ZIP and file reads, restore of a retained version with
//! `If-Match`, access (versions are as readable as their resource, restorable
//! only with WRITE), retention per host and per type with the sweep reclaiming
//! what it drops, and no other URL reaching a version's tree.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::sharing::Fixture;
use crate::support::{JwtUser as User, Reply, md5_hex, unzip};

/// Sweep every second with a one-second grace, so dropped versions go fast.
const FAST_SWEEP: &str = "[folders]\ngrace_seconds = 1\ngc_interval_seconds = 1\n";

fn skill_md(description: &str) -> String {
    format!("---\nname: s\ndescription: {description}\n---\n# s\n")
}

/// PUTs version `description` of Alice's skill `s` and returns its etag.
async fn put_version(f: &Fixture, user: &User, description: &str) -> String {
    let skill_md = skill_md(description);
    let files: [(&str, &[u8]); 2] = [("SKILL.md", skill_md.as_bytes()), ("notes.txt", description.as_bytes())];
    let reply = f.client.put_files(&format!("/v2/skills/{}/s", user.bucket), &user.auth(), &files).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.etag()
}

async fn versions(f: &Fixture, user: &User, bucket: &str, query: &str) -> Reply {
    f.get(user, &format!("/v2/versions/skills/{bucket}/s{query}")).await
}

fn listed(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["versions"].as_array().unwrap().clone()
}

async fn restore(f: &Fixture, user: &User, bucket: &str, version: &str, if_match: Option<&str>) -> Reply {
    let mut headers = user.auth().to_vec();
    headers.push(("Content-Type", "application/json"));
    if let Some(etag) = if_match {
        headers.push(("If-Match", etag));
    }
    // The resource in its listing form (`…/s/`), as a client copies it from `url`.
    let body = json!({"url": format!("skills/{bucket}/s/"), "version": version}).to_string();
    f.client.post("/v2/ops/skills/restore", &headers, &body).await
}

#[tokio::test]
async fn versions_are_listed_newest_first_read_by_id_and_restored_as_a_new_commit() {
    let f = Fixture::start("").await;
    let a = f.alice.bucket.clone();
    let etags = [
        put_version(&f, &f.alice, "first").await,
        put_version(&f, &f.alice, "second").await,
        put_version(&f, &f.alice, "third").await,
    ];

    // Newest first, the current one marked, each with its etag, author and size.
    let all = listed(&versions(&f, &f.alice, &a, "").await);
    assert_eq!(all.len(), 3, "{all:?}");
    let listed_etags: Vec<&str> = all.iter().map(|v| v["etag"].as_str().unwrap()).collect();
    assert_eq!(listed_etags, [&etags[2], &etags[1], &etags[0]]);
    assert_eq!(all.iter().map(|v| v["current"].as_bool().unwrap()).collect::<Vec<_>>(), [true, false, false]);
    let created: Vec<i64> = all.iter().map(|v| v["createdAt"].as_i64().unwrap()).collect();
    assert!(created.windows(2).all(|pair| pair[0] >= pair[1]), "{created:?}");
    for (version, description) in all.iter().zip(["third", "second", "first"]) {
        assert_eq!(version["author"], "alice");
        assert_eq!(version["files"], 2);
        let bytes = skill_md(description).len() + description.len();
        assert_eq!(version["bytes"].as_u64().unwrap() as usize, bytes, "{version}");
    }
    let ids: Vec<String> = all.iter().map(|v| v["version"].as_str().unwrap().to_string()).collect();

    // Paged like listings.
    let first_page = versions(&f, &f.alice, &a, "?limit=2").await;
    let page = listed(&first_page);
    assert_eq!(page.len(), 2);
    let token = first_page.json()["nextToken"].as_str().expect("a next page").to_string();
    let second_page = versions(&f, &f.alice, &a, &format!("?limit=2&token={token}")).await;
    assert_eq!(listed(&second_page).len(), 1);
    assert_eq!(listed(&second_page)[0]["version"], ids[2].as_str());
    assert!(second_page.json().get("nextToken").is_none(), "{}", second_page.body);
    // The same query rules as listings: `limit=0` an empty page, no token.
    let none = versions(&f, &f.alice, &a, "?limit=0").await;
    assert_eq!((listed(&none).len(), none.json().get("nextToken").is_none()), (0, true), "{}", none.body);
    assert_eq!(versions(&f, &f.alice, &a, "?limit=1001").await.status, 400);
    let bad_token = versions(&f, &f.alice, &a, "?token=not-base58!").await;
    assert_eq!(bad_token.status, 400, "{}", bad_token.body);

    // A retained version reads as it was: the ZIP and one file, with their etags.
    let old = f.get(&f.alice, &format!("/v2/skills/{a}/s?version={}", ids[2])).await;
    assert_eq!(old.status, 200, "{}", old.body);
    assert_eq!(old.etag(), etags[0]);
    let files = unzip(&old.bytes);
    assert!(files.contains(&("notes.txt".to_string(), b"first".to_vec())), "{files:?}");
    let file = f.get(&f.alice, &format!("/v2/skills/{a}/s/files/notes.txt?version={}", ids[1])).await;
    assert_eq!((file.status, file.body.as_str()), (200, "second"));
    assert!(!file.etag().is_empty());
    let mut cached = f.alice.auth().to_vec();
    cached.push(("If-None-Match", &etags[0]));
    let not_modified = f.client.get(&format!("/v2/skills/{a}/s?version={}", ids[2]), &cached).await;
    assert_eq!(not_modified.status, 304);
    let current = f.get(&f.alice, &format!("/v2/skills/{a}/s/files/notes.txt")).await;
    assert_eq!(current.body, "third", "reading an old version changes nothing");

    // A retained version's files are listed as the current one's are, with their sizes and hashes (the
    // admin console's comparison of two versions); `version` on any other metadata is a 400 naming the
    // listing that takes it.
    let listing = f.get(&f.alice, &format!("/v2/metadata/skills/{a}/s/files/?recursive=true&version={}", ids[2])).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    let items = listing.json()["items"].as_array().unwrap().clone();
    let notes = items.iter().find(|item| item["name"] == "notes.txt").expect("notes.txt listed");
    assert_eq!(notes["contentLength"], "first".len());
    assert_eq!(notes["etag"], md5_hex(b"first"));
    let now = f.get(&f.alice, &format!("/v2/metadata/skills/{a}/s/files/?recursive=true")).await.json();
    let current_notes =
        now["items"].as_array().unwrap().iter().find(|item| item["name"] == "notes.txt").unwrap().clone();
    assert_eq!(current_notes["contentLength"], "third".len(), "without version, the current one's");
    let not_files = f.get(&f.alice, &format!("/v2/metadata/skills/{a}/s?version={}", ids[2])).await;
    assert_eq!(not_files.status, 400, "{}", not_files.body);
    assert!(not_files.body.contains(&format!("skills/{a}/s/files/?version=<id>")), "{}", not_files.body);

    // An unknown version is a 404 that names it; an empty one a 400.
    for path in [
        format!("/v2/skills/{a}/s?version=nope"),
        format!("/v2/skills/{a}/s/files/notes.txt?version=nope"),
        format!("/v2/metadata/skills/{a}/s/files/?version=nope"),
    ] {
        let reply = f.get(&f.alice, &path).await;
        assert_eq!(reply.status, 404, "{path}");
        assert!(reply.body.contains("Version nope not found"), "{}", reply.body);
    }
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/s?version=")).await.status, 400);

    // Restore: If-Match is checked against the current version; a stale one changes nothing.
    let stale = restore(&f, &f.alice, &a, &ids[2], Some(&etags[1])).await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    assert_eq!(listed(&versions(&f, &f.alice, &a, "").await).len(), 3, "nothing committed");
    let unknown = restore(&f, &f.alice, &a, "nope", None).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert!(unknown.body.contains("Version nope not found"), "{}", unknown.body);
    let restored = restore(&f, &f.alice, &a, &ids[2], Some(&etags[2])).await;
    assert_eq!(restored.status, 200, "{}", restored.body);
    assert_eq!(restored.etag(), etags[0], "the first version's files, so its aggregate etag");
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/s/files/notes.txt")).await.body, "first");
    let after = listed(&versions(&f, &f.alice, &a, "").await);
    assert_eq!(after.len(), 4, "a new commit on top: {after:?}");
    assert_ne!(after[0]["version"], ids[2].as_str(), "restore commits a new version id");
    assert_eq!((after[0]["current"].as_bool(), after[0]["etag"].as_str()), (Some(true), Some(etags[0].as_str())));
    // Naming the current version changes nothing.
    let current_id = after[0]["version"].as_str().unwrap().to_string();
    assert_eq!(restore(&f, &f.alice, &a, &current_id, None).await.status, 200);
    assert_eq!(listed(&versions(&f, &f.alice, &a, "").await).len(), 4);

    // A deleted resource has no versions to list or read.
    assert_eq!(f.client.delete(&format!("/v2/skills/{a}/s"), &f.alice.auth()).await.status, 200);
    assert_eq!(versions(&f, &f.alice, &a, "").await.status, 404);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/s?version={}", ids[1])).await.status, 404);
    assert_eq!(restore(&f, &f.alice, &a, &ids[1], None).await.status, 404);
}

#[tokio::test]
async fn versions_are_as_readable_as_their_resource_and_restorable_only_with_write() {
    let f = Fixture::start("").await;
    let a = f.alice.bucket.clone();
    let first = put_version(&f, &f.alice, "first").await;
    put_version(&f, &f.alice, "second").await;
    let ids: Vec<String> = listed(&versions(&f, &f.alice, &a, "").await)
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect();
    let old_zip = format!("/v2/skills/{a}/s?version={}", ids[1]);

    // Nobody else sees them before a share.
    for user in [&f.bob, &f.carol] {
        assert_eq!(versions(&f, user, &a, "").await.status, 403);
        assert_eq!(f.get(user, &old_zip).await.status, 403);
        assert_eq!(restore(&f, user, &a, &ids[1], None).await.status, 403);
    }

    // Bob with READ lists and reads them, but may not restore one.
    let body =
        json!({"invitationType": "link", "resources": [{"url": format!("skills/{a}/s"), "permissions": ["READ"]}]});
    let link = f.post(&f.alice, "/v1/ops/resource/share/create", body).await.json()["invitationLink"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(f.get(&f.bob, &format!("{link}?accept=true")).await.status, 200);
    assert_eq!(listed(&versions(&f, &f.bob, &a, "").await).len(), 2);
    let read = f.get(&f.bob, &old_zip).await;
    assert_eq!((read.status, read.etag()), (200, first.clone()));
    let refused = restore(&f, &f.bob, &a, &ids[1], None).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/s/files/notes.txt")).await.body, "second", "unchanged");
    assert_eq!(versions(&f, &f.carol, &a, "").await.status, 403, "the share is Bob's");

    // A version's tree is reachable by no other URL.
    let id = &ids[1];
    for path in [
        format!("/v2/skills/{a}/s/v/{id}"),
        format!("/v2/skills/{a}/s/v/{id}/notes.txt"),
        format!("/v2/metadata/skills/{a}/s/v/"),
        format!("/v2/metadata/skills/{a}/s/v/{id}/"),
        format!("/v2/versions/skills/{a}/s/v/{id}"),
        format!("/v2/skills/{a}/s/files/v/{id}/notes.txt"),
    ] {
        let reply = f.get(&f.alice, &path).await;
        assert!(matches!(reply.status, 400 | 404), "{path}: {} {}", reply.status, reply.body);
        assert!(!reply.body.contains("first"), "{path} leaks the version: {}", reply.body);
    }
    let write = f.client.put_files(&format!("/v2/skills/{a}/s/v/{id}"), &f.alice.auth(), &[("SKILL.md", b"x")]).await;
    assert_eq!(write.status, 400, "{}", write.body);
    assert!(write.body.contains("reserved"), "{}", write.body);
    let file = format!("/v2/skills/{a}/s/files/v/{id}/SKILL.md");
    let write = f.client.put_files(&file, &f.alice.auth(), &[("f", b"x")]).await;
    assert_eq!(write.status, 400, "{}", write.body);
    // Nor through the operations that take a URL in their body.
    let tree = format!("skills/{a}/s/v/{id}");
    let by_body = [
        ("/v1/ops/resource/copy", json!({"sourceUrl": tree, "destinationUrl": format!("skills/{a}/t")})),
        ("/v1/ops/resource/move", json!({"sourceUrl": format!("{tree}/"), "destinationUrl": format!("skills/{a}/t/")})),
        (
            "/v1/ops/resource/share/create",
            json!({"invitationType": "link", "resources": [{"url": format!("{tree}/")}]}),
        ),
        ("/v1/ops/resource/subscribe", json!({"resources": [{"url": format!("{tree}/")}]})),
        ("/v2/ops/skills/restore", json!({"url": tree})),
        (
            "/v1/ops/publication/create",
            json!({"targetFolder": "public/x/", "resources": [{"action": "ADD", "sourceUrl": tree, "targetUrl": "skills/public/x/s"}]}),
        ),
    ];
    for (route, body) in by_body {
        let reply = f.post(&f.alice, route, body).await;
        assert_eq!(reply.status, 400, "{route}: {}", reply.body);
        assert!(reply.body.contains("reserved"), "{route}: {}", reply.body);
    }
    let versions_of_a_file = f.get(&f.alice, &format!("/v2/versions/skills/{a}/s/files/notes.txt")).await;
    assert_eq!(versions_of_a_file.status, 400, "{}", versions_of_a_file.body);
}

/// The version directories of Alice's skill `s` on the local store.
fn version_dirs(data: &Path) -> Vec<String> {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if path.ends_with("skills/s/v") {
                found.extend(std::fs::read_dir(&path).unwrap().flatten().map(|e| e.file_name().into_string().unwrap()));
            } else {
                walk(&path, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(data, &mut found);
    found.sort();
    found
}

#[tokio::test]
async fn retention_per_type_keeps_exactly_its_versions_and_the_sweep_reclaims_the_rest() {
    // The host keeps five; skills override it with two.
    let f =
        Fixture::start(&format!("{FAST_SWEEP}keep_versions = 5\n[handlers.types.skills]\nkeep_versions = 2\n")).await;
    let a = f.alice.bucket.clone();
    let mut ids = Vec::new();
    for description in ["one", "two", "three", "four"] {
        put_version(&f, &f.alice, description).await;
        ids.push(listed(&versions(&f, &f.alice, &a, "").await)[0]["version"].as_str().unwrap().to_string());
    }
    let kept: Vec<String> =
        listed(&versions(&f, &f.alice, &a, "").await).iter().map(|v| v["version"].as_str().unwrap().into()).collect();
    assert_eq!(kept, [ids[3].clone(), ids[2].clone()]);
    for dropped in &ids[..2] {
        let reply = f.get(&f.alice, &format!("/v2/skills/{a}/s?version={dropped}")).await;
        assert_eq!(reply.status, 404, "dropped at once: {}", reply.body);
        assert!(reply.body.contains(&format!("Version {dropped} not found")), "{}", reply.body);
    }

    // The sweep deletes the dropped versions' trees and keeps the retained ones.
    let data = f.data_dir();
    let mut expected = vec![ids[2].clone(), ids[3].clone()];
    expected.sort();
    let deadline = Instant::now() + Duration::from_secs(20);
    while version_dirs(&data) != expected {
        assert!(Instant::now() < deadline, "left on disk: {:?}, expected {expected:?}", version_dirs(&data));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let old = f.get(&f.alice, &format!("/v2/skills/{a}/s/files/notes.txt?version={}", ids[2])).await;
    assert_eq!((old.status, old.body.as_str()), (200, "three"), "retained versions stay whole");
}
