//! `/v2/skills/…` end to end: whole resources, folders, single files,
//! listings, limits, conditional requests, delete/restore, access.

use serde_json::Value;

use crate::support::{Client, Server, Setup, unzip};

const OWNER: &str = "owner-key";
const OTHER: &str = "other-key";

fn skill_md(name: &str, description: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: {description}\nmetadata:\n  version: \"1.0\"\n---\n# {name}\n")
        .into_bytes()
}

struct Fixture {
    _setup: Setup,
    server: Server,
    client: Client,
    bucket: String,
}

impl Fixture {
    async fn start(extra: &str) -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{OWNER}]\nproject = \"owner\"\nroles = [\"user\"]\n[keys.{OTHER}]\nproject = \"other\"\nroles = [\"user\"]\n{extra}"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let bucket =
            client.get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, server, client, bucket }
    }

    fn url(&self, path: &str) -> String {
        format!("/v2/skills/{}/{path}", self.bucket)
    }

    fn metadata(&self, path: &str) -> String {
        format!("/v2/metadata/skills/{}/{path}", self.bucket)
    }

    async fn put_skill(&self, path: &str, files: &[(&str, &[u8])], headers: &[(&str, &str)]) -> crate::support::Reply {
        let mut all = vec![("Api-Key", OWNER)];
        all.extend_from_slice(headers);
        self.client.put_files(&self.url(path), &all, files).await
    }

    async fn get(&self, path: &str) -> crate::support::Reply {
        self.client.get(path, &[("Api-Key", OWNER)]).await
    }
}

fn names(listing: &Value) -> Vec<(String, String)> {
    listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_string(), i["nodeType"].as_str().unwrap().to_string()))
        .collect()
}

#[tokio::test]
async fn a_skill_round_trips_as_a_zip_with_conditional_requests() {
    let f = Fixture::start("").await;
    let skill = skill_md("pdf-tools", "Work with PDFs.");
    let files: &[(&str, &[u8])] =
        &[("SKILL.md", &skill), ("scripts/run.sh", b"echo hi\n"), ("assets/logo.png", &[0x89, b'P', b'N', b'G'])];
    let put = f.put_skill("team/pdf-tools", files, &[("If-None-Match", "*")]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let etag = put.etag();
    assert_eq!(etag.len(), 32);
    let body = put.json();
    assert_eq!(body["nodeType"], "ITEM");
    assert_eq!(body["resourceType"], "SKILL");
    assert_eq!(body["metadata"]["name"], "pdf-tools");
    assert_eq!(body["metadata"]["version"], "1.0");

    let zip = f.get(&f.url("team/pdf-tools")).await;
    assert_eq!(zip.status, 200);
    assert_eq!(zip.etag(), etag);
    assert_eq!(zip.headers["content-type"], "application/zip");
    let mut expected: Vec<(String, Vec<u8>)> = files.iter().map(|(p, c)| (p.to_string(), c.to_vec())).collect();
    expected.sort();
    assert_eq!(unzip(&zip.bytes), expected, "same files, marker excluded");

    // The listing's URL form (trailing slash) reads the same resource.
    assert_eq!(f.get(&f.url("team/pdf-tools/")).await.etag(), etag);
    let cached = f.client.get(&f.url("team/pdf-tools"), &[("Api-Key", OWNER), ("If-None-Match", &etag)]).await;
    assert_eq!(cached.status, 304);

    // Create-only on an existing resource, stale If-Match, then a good one.
    let again = f.put_skill("team/pdf-tools", files, &[("If-None-Match", "*")]).await;
    assert_eq!((again.status, again.body.as_str()), (412, "Resource already exists"));
    let stale = f.put_skill("team/pdf-tools", &files[..1], &[("If-Match", "\"0123\"")]).await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    let update = f.put_skill("team/pdf-tools", &files[..1], &[("If-Match", &format!("\"{etag}\""))]).await;
    assert_eq!(update.status, 200, "{}", update.body);
    assert_ne!(update.etag(), etag);
    assert_eq!(unzip(&f.get(&f.url("team/pdf-tools")).await.bytes).len(), 1);

    // Identical content gives the identical aggregate etag.
    let same = f.put_skill("elsewhere/pdf-tools", &files[..1], &[]).await;
    assert_eq!(same.etag(), update.etag());
}

#[tokio::test]
async fn invalid_skills_are_rejected_and_leave_nothing() {
    let f = Fixture::start("").await;
    let no_skill_md = f.put_skill("broken", &[("README.md", b"hi")], &[]).await;
    assert_eq!(no_skill_md.status, 400);
    assert!(no_skill_md.body.contains("SKILL.md"), "{}", no_skill_md.body);
    let bad_yaml = f.put_skill("broken", &[("SKILL.md", b"---\nname: [unclosed\n---\n")], &[]).await;
    assert_eq!(bad_yaml.status, 400, "{}", bad_yaml.body);
    assert_eq!(f.get(&f.url("broken")).await.status, 404);
    assert_eq!(names(&f.get(&f.metadata("")).await.json()), Vec::<(String, String)>::new());

    let warned = f.put_skill("display", &[("SKILL.md", &skill_md("My Skill", "Shown as a display name."))], &[]).await;
    assert_eq!(warned.status, 200, "{}", warned.body);
    assert!(!warned.json()["warnings"].as_array().unwrap().is_empty());
    let listing = f.get(&f.metadata("")).await.json();
    assert!(!listing["items"][0]["warnings"].as_array().unwrap().is_empty(), "{listing}");
}

#[tokio::test]
async fn structure_and_reserved_names() {
    let f = Fixture::start("").await;
    let skill = skill_md("s", "d");
    let files: &[(&str, &[u8])] = &[("SKILL.md", &skill)];
    assert_eq!(f.put_skill("a/s", files, &[]).await.status, 200);

    let nested = f.put_skill("a/s/inner", files, &[]).await;
    assert_eq!(nested.status, 400, "{}", nested.body);
    assert!(nested.body.contains("inside the resource"), "{}", nested.body);
    let folder_over_resource = f.client.put_empty(&f.url("a/s/"), &[("Api-Key", OWNER)]).await;
    assert_eq!(folder_over_resource.status, 400, "{}", folder_over_resource.body);
    let resource_over_folder = f.put_skill("a", files, &[]).await;
    assert_eq!(resource_over_folder.status, 400, "{}", resource_over_folder.body);

    for reserved in ["files", "v", "x/v", "x/.dial-resource"] {
        let reply = f.put_skill(reserved, files, &[]).await;
        assert_eq!(reply.status, 400, "{reserved}: {}", reply.body);
    }
    // Everything before `files` is the resource: here a missing one.
    assert_eq!(f.put_skill("x/files/y", files, &[]).await.status, 404);
    for bad_path in ["../x", "v/x", "a//b", "a\\b"] {
        let reply = f.put_skill("ok", &[("SKILL.md", &skill), (bad_path, b"x")], &[]).await;
        assert_eq!(reply.status, 400, "{bad_path}: {}", reply.body);
    }
    let duplicate = f.put_skill("ok", &[("SKILL.md", &skill), ("SKILL.md", &skill)], &[]).await;
    assert_eq!(duplicate.status, 400);
    assert_eq!(f.get(&f.url("ok")).await.status, 404);
}

#[tokio::test]
async fn folders_are_created_listed_and_deleted_only_when_empty() {
    let f = Fixture::start("").await;
    let created = f.client.put_empty(&f.url("team/"), &[("Api-Key", OWNER)]).await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert!(!created.etag().is_empty());
    assert_eq!(f.client.put_empty(&f.url("team/"), &[("Api-Key", OWNER)]).await.status, 400);
    assert_eq!(f.get(&f.url("team/")).await.status, 400, "GET on a folder points to the listing");
    assert_eq!(f.get(&f.url("team")).await.status, 400);

    // A deep PUT creates the missing folders.
    assert_eq!(f.put_skill("team/deep/er/s", &[("SKILL.md", &skill_md("s", "d"))], &[]).await.status, 200);
    let root = f.get(&f.metadata("")).await.json();
    assert_eq!(names(&root), [("team".to_string(), "FOLDER".to_string())]);
    let deep = f.get(&f.metadata("team/deep/er/")).await.json();
    assert_eq!(names(&deep), [("s".to_string(), "ITEM".to_string())]);
    assert!(deep["items"][0]["url"].as_str().unwrap().ends_with("/team/deep/er/s/"), "{deep}");

    let not_empty = f.client.delete(&f.url("team/deep/er/"), &[("Api-Key", OWNER)]).await;
    assert_eq!((not_empty.status, not_empty.body.contains("not empty")), (409, true), "{}", not_empty.body);
    assert_eq!(f.client.delete(&f.url("team/deep/er/s"), &[("Api-Key", OWNER)]).await.status, 200);
    assert_eq!(f.client.delete(&f.url("team/deep/er/"), &[("Api-Key", OWNER)]).await.status, 200);
    // No cascade: the parent stays.
    assert_eq!(names(&f.get(&f.metadata("team/deep/")).await.json()), Vec::<(String, String)>::new());
    assert_eq!(f.client.delete(&f.url("team/nothing/"), &[("Api-Key", OWNER)]).await.status, 404);
}

#[tokio::test]
async fn delete_tombstones_and_restore_or_recreate() {
    let f = Fixture::start("").await;
    let files: &[(&str, &[u8])] = &[("SKILL.md", &skill_md("s", "first"))];
    let etag = f.put_skill("s", files, &[]).await.etag();
    assert_eq!(f.client.delete(&f.url("s"), &[("Api-Key", OWNER), ("If-Match", "\"nope\"")]).await.status, 412);
    assert_eq!(f.client.delete(&f.url("s"), &[("Api-Key", OWNER), ("If-Match", &etag)]).await.status, 200);
    assert_eq!(f.get(&f.url("s")).await.status, 404);
    assert_eq!(f.client.delete(&f.url("s"), &[("Api-Key", OWNER)]).await.status, 404);
    assert_eq!(
        names(&f.get(&f.metadata("")).await.json()),
        Vec::<(String, String)>::new(),
        "tombstones are not listed"
    );

    let body = format!("{{\"url\": \"skills/{}/s\"}}", f.bucket);
    let restored = f.client.post("/v2/ops/skills/restore", &[("Api-Key", OWNER)], &body).await;
    assert_eq!(restored.status, 200, "{}", restored.body);
    assert_eq!(restored.etag(), etag);
    assert_eq!(f.get(&f.url("s")).await.status, 200);
    assert_eq!(f.client.post("/v2/ops/skills/restore", &[("Api-Key", OWNER)], &body).await.status, 400);

    assert_eq!(f.client.delete(&f.url("s"), &[("Api-Key", OWNER)]).await.status, 200);
    let recreated = f.put_skill("s", &[("SKILL.md", &skill_md("s", "second"))], &[("If-None-Match", "*")]).await;
    assert_eq!(recreated.status, 200, "a tombstone counts as absent: {}", recreated.body);
    assert_eq!(f.get(&f.metadata("s")).await.json()["metadata"]["description"], "second");
}

#[tokio::test]
async fn single_files_are_copy_on_write_versions() {
    let f = Fixture::start("").await;
    let files: &[(&str, &[u8])] = &[("SKILL.md", &skill_md("s", "v1")), ("docs/a.md", b"# A\n")];
    let etag = f.put_skill("s", files, &[]).await.etag();

    let file = f.get(&f.url("s/files/docs/a.md")).await;
    assert_eq!((file.status, file.bytes.as_slice()), (200, &b"# A\n"[..]));
    assert!(file.headers["content-type"].to_str().unwrap().starts_with("text/markdown"));
    assert_eq!(f.get(&f.url("s/files/docs/missing.md")).await.status, 404);

    let put = f
        .client
        .put_files(&f.url("s/files/docs/b.md"), &[("Api-Key", OWNER), ("If-Match", &etag)], &[("b.md", b"# B\n")])
        .await;
    assert_eq!(put.status, 200, "{}", put.body);
    let etag2 = put.etag();
    assert_ne!(etag2, etag);
    let stale = f
        .client
        .put_files(&f.url("s/files/docs/c.md"), &[("Api-Key", OWNER), ("If-Match", &etag)], &[("c.md", b"x")])
        .await;
    assert_eq!(stale.status, 412);

    let edit = f
        .client
        .put_files(&f.url("s/files/SKILL.md"), &[("Api-Key", OWNER)], &[("SKILL.md", &skill_md("s", "v2"))])
        .await;
    assert_eq!(edit.status, 200, "{}", edit.body);
    assert_eq!(edit.json()["metadata"]["description"], "v2", "editing SKILL.md refreshes the metadata");
    let broken =
        f.client.put_files(&f.url("s/files/SKILL.md"), &[("Api-Key", OWNER)], &[("SKILL.md", b"no frontmatter")]).await;
    assert_eq!(broken.status, 400);

    let delete_skill_md = f.client.delete(&f.url("s/files/SKILL.md"), &[("Api-Key", OWNER)]).await;
    assert_eq!(delete_skill_md.status, 400);
    assert!(delete_skill_md.body.contains("cannot be deleted"), "{}", delete_skill_md.body);
    let deleted = f.client.delete(&f.url("s/files/docs/a.md"), &[("Api-Key", OWNER)]).await;
    assert_eq!(deleted.status, 200);
    assert_eq!(f.client.delete(&f.url("s/files/docs/a.md"), &[("Api-Key", OWNER)]).await.status, 404);

    let zip = unzip(&f.get(&f.url("s")).await.bytes);
    let paths: Vec<&str> = zip.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["SKILL.md", "docs/b.md"]);
}

#[tokio::test]
async fn listings_paginate_and_list_files() {
    let f = Fixture::start("").await;
    for name in ["a", "b", "c", "d", "e"] {
        assert_eq!(f.put_skill(&format!("team/{name}"), &[("SKILL.md", &skill_md(name, "d"))], &[]).await.status, 200);
    }
    assert_eq!(
        f.put_skill("team/sub/f", &[("SKILL.md", &skill_md("f", "d")), ("x/y.txt", b"y")], &[]).await.status,
        200
    );

    let first = f.get(&format!("{}?limit=2", f.metadata("team/"))).await.json();
    assert_eq!(names(&first), [("a".into(), "ITEM".into()), ("b".into(), "ITEM".into())]);
    let token = first["nextToken"].as_str().unwrap();
    let second = f.get(&format!("{}?limit=10&token={token}", f.metadata("team/"))).await.json();
    let rest: Vec<String> = names(&second).into_iter().map(|(n, _)| n).collect();
    assert_eq!(rest, ["c", "d", "e", "sub"]);
    assert!(second.get("nextToken").is_none());
    assert_eq!(second["items"][0]["metadata"]["name"], "c");

    let recursive = f.get(&format!("{}?recursive=true&limit=4", f.metadata("team/"))).await.json();
    assert_eq!(names(&recursive).len(), 4);
    let token = recursive["nextToken"].as_str().unwrap();
    let tail = f.get(&format!("{}?recursive=true&token={token}", f.metadata("team/"))).await.json();
    let tail: Vec<String> = names(&tail).into_iter().map(|(n, _)| n).collect();
    assert_eq!(tail, ["e", "f"]);

    let files = f.get(&f.metadata("team/sub/f/files/")).await.json();
    assert_eq!(names(&files), [("x".into(), "FOLDER".into()), ("SKILL.md".into(), "ITEM".into())]);
    let deep = f.get(&format!("{}?recursive=true", f.metadata("team/sub/f/files"))).await.json();
    let deep: Vec<&str> = deep["items"].as_array().unwrap().iter().map(|i| i["url"].as_str().unwrap()).collect();
    assert!(deep[1].ends_with("/team/sub/f/files/x/y.txt"), "{deep:?}");
    assert_eq!(f.get(&format!("{}?limit=1001", f.metadata("team/"))).await.status, 400);
    assert_eq!(f.get(&format!("{}?token=0OIl", f.metadata("team/"))).await.status, 400, "tokens are Base58");
    assert_eq!(f.get(&f.metadata("nowhere/")).await.status, 404);
}

#[tokio::test]
async fn limits_are_enforced_while_streaming() {
    let f =
        Fixture::start("[handlers.types.skills]\nmax_files = 3\nmax_total_bytes = 2000\nmax_file_bytes = 1500\n").await;
    let skill = skill_md("s", "d");
    let too_many: &[(&str, &[u8])] = &[("SKILL.md", &skill), ("a", b"1"), ("b", b"2"), ("c", b"3")];
    let reply = f.put_skill("s", too_many, &[]).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("Too many files"), "{}", reply.body);

    let big = vec![b'x'; 1600];
    let reply = f.put_skill("s", &[("SKILL.md", &skill), ("big.bin", &big)], &[]).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    let half = vec![b'x'; 1000];
    let reply = f.put_skill("s", &[("SKILL.md", &skill), ("a.bin", &half), ("b.bin", &half)], &[]).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(f.get(&f.url("s")).await.status, 404, "a rejected upload leaves nothing visible");
    // A refused upload far larger than the socket buffers: the client still
    // gets the 413, not a reset connection (the server drains what is left).
    let huge = vec![b'x'; 3 << 20];
    for _ in 0..3 {
        let reply = f.put_skill("s", &[("SKILL.md", &skill), ("huge.bin", &huge)], &[]).await;
        assert_eq!(reply.status, 413, "{}", reply.body);
    }

    let etag = f.put_skill("s", &[("SKILL.md", &skill)], &[]).await.etag();
    let reply = f.client.put_files(&f.url("s/files/big.bin"), &[("Api-Key", OWNER)], &[("big.bin", &big)]).await;
    assert_eq!(reply.status, 413);
    assert_eq!(f.get(&f.url("s")).await.etag(), etag, "the old version is untouched");
}

#[tokio::test]
async fn other_users_get_403_everywhere_and_forged_buckets_400() {
    let f = Fixture::start("").await;
    assert_eq!(f.put_skill("s", &[("SKILL.md", &skill_md("s", "d"))], &[]).await.status, 200);
    let other = [("Api-Key", OTHER)];
    for path in [f.url("s"), f.url("s/files/SKILL.md"), f.metadata(""), f.metadata("s/files/"), f.url("s/")] {
        assert_eq!(f.client.get(&path, &other).await.status, 403, "GET {path}");
    }
    assert_eq!(f.client.put_files(&f.url("s"), &other, &[("SKILL.md", b"x")]).await.status, 403);
    assert_eq!(f.client.put_empty(&f.url("dir/"), &other).await.status, 403);
    assert_eq!(f.client.delete(&f.url("s"), &other).await.status, 403);
    assert_eq!(f.client.delete(&f.url("s/files/SKILL.md"), &other).await.status, 403);
    let restore = format!("{{\"url\": \"skills/{}/s\"}}", f.bucket);
    assert_eq!(f.client.post("/v2/ops/skills/restore", &other, &restore).await.status, 403);

    let forged = f.client.get(&format!("/v2/skills/{}x/s", f.bucket), &[("Api-Key", OWNER)]).await;
    assert_eq!(forged.status, 400, "{}", forged.body);
    assert!(forged.body.contains("invalid bucket"), "{}", forged.body);
    assert_eq!(f.client.get(&format!("/v2/unknown/{}/s", f.bucket), &[("Api-Key", OWNER)]).await.status, 404);
    drop(f.server);
}

#[tokio::test]
async fn a_single_file_put_is_exactly_one_part() {
    let f = Fixture::start("").await;
    let files: &[(&str, &[u8])] = &[("SKILL.md", &skill_md("s", "d")), ("a.md", b"# A\n")];
    let etag = f.put_skill("s", files, &[]).await.etag();
    let url = f.url("s/files/a.md");

    let two = f.client.put_files(&url, &[("Api-Key", OWNER)], &[("a.md", b"new A"), ("b.md", b"B")]).await;
    assert_eq!((two.status, two.body.as_str()), (400, "Exactly one file part is required"));
    // No parts: only the closing delimiter.
    let headers = [("Api-Key", OWNER), ("Content-Type", "multipart/form-data; boundary=B")];
    let none = f.client.send_raw("PUT", &url, &headers, vec![bytes::Bytes::from("--B--\r\n")]).await;
    assert_eq!((none.status, none.body.as_str()), (400, "Exactly one file part is required"));

    assert_eq!(f.get(&f.url("s")).await.etag(), etag, "nothing changed");
    assert_eq!(f.get(&url).await.bytes, b"# A\n");
    assert_eq!(f.get(&f.url("s/files/b.md")).await.status, 404);
}
