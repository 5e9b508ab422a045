//! `/v2/skills/…` end to end: whole resources, folders, single files,
//! listings, limits, conditional requests, delete/restore, access.

use std::collections::BTreeSet;

use futures_util::StreamExt;
use serde_json::{Value, json};

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

    // Files sent to a folder URL are refused, not dropped behind a 200; the
    // message names where they go, and nothing is created.
    let files_to_folder = f.put_skill("team/new/", &[("SKILL.md", &skill_md("new", "d"))], &[]).await;
    assert_eq!(files_to_folder.status, 400, "{}", files_to_folder.body);
    assert!(
        files_to_folder.body.ends_with(&format!("PUT the resource's files at skills/{}/team/new", f.bucket)),
        "{}",
        files_to_folder.body
    );
    assert_eq!(f.get(&f.metadata("team/new/")).await.status, 404);
    assert_eq!(f.get(&f.url("team/new")).await.status, 404);

    // A deep PUT creates the missing folders.
    assert_eq!(f.put_skill("team/deep/er/s", &[("SKILL.md", &skill_md("s", "d"))], &[]).await.status, 200);
    let root = f.get(&f.metadata("")).await.json();
    assert_eq!(names(&root), [("team".to_string(), "FOLDER".to_string())]);
    let deep = f.get(&f.metadata("team/deep/er/")).await.json();
    assert_eq!(names(&deep), [("s".to_string(), "ITEM".to_string())]);
    assert!(deep["items"][0]["url"].as_str().unwrap().ends_with("/team/deep/er/s/"), "{deep}");

    let not_empty = f.client.delete(&f.url("team/deep/er/"), &[("Api-Key", OWNER)]).await;
    assert_eq!((not_empty.status, not_empty.body.contains("not empty")), (409, true), "{}", not_empty.body);
    // `…/s/` deletes folders only: the resource's listing form is refused,
    // naming the URL that deletes it, and the resource stays.
    let folder_form = f.client.delete(&f.url("team/deep/er/s/"), &[("Api-Key", OWNER)]).await;
    assert_eq!(folder_form.status, 400, "{}", folder_form.body);
    assert!(folder_form.body.contains("is a resource, not a folder"), "{}", folder_form.body);
    assert!(folder_form.body.ends_with("/team/deep/er/s"), "{}", folder_form.body);
    assert_eq!(f.get(&f.url("team/deep/er/s")).await.status, 200);
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

/// `GET /v2/deleted/…/{folder}/` names the tombstones of a folder that can
/// still be restored — to its writers and admins, paged, until the grace
/// period ends — so an owner or an admin can undo a delete without knowing
/// the URL beforehand.
#[tokio::test]
async fn deleted_resources_are_listed_for_those_who_may_restore_them() {
    let f = Fixture::start(
        "[keys.admin-key]\nproject = \"ops\"\nroles = [\"admin\"]\n[folders]\ngrace_seconds = 3\ngc_interval_seconds = 60\n",
    )
    .await;
    let owner = [("Api-Key", OWNER)];
    for name in ["team/a", "team/b", "team/c", "r"] {
        let skill = skill_md(name.rsplit('/').next().unwrap(), "d");
        assert_eq!(f.put_skill(name, &[("SKILL.md", &skill), ("x.txt", b"x")], &[]).await.status, 200);
    }
    let etag_a = f.get(&f.url("team/a")).await.etag();
    for name in ["team/a", "team/c", "r"] {
        assert_eq!(f.client.delete(&f.url(name), &owner).await.status, 200);
    }
    let deleted = format!("/v2/deleted/skills/{}/team/", f.bucket);
    let listed = f.get(&deleted).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let items = listed.json()["items"].as_array().unwrap().clone();
    let urls: Vec<&str> = items.iter().map(|item| item["url"].as_str().unwrap()).collect();
    let bucket = &f.bucket;
    assert_eq!(
        urls,
        [format!("skills/{bucket}/team/a"), format!("skills/{bucket}/team/c")],
        "live ones are not listed"
    );
    let a = &items[0];
    assert_eq!(
        (a["name"].as_str(), a["etag"].as_str(), a["files"].as_u64()),
        (Some("a"), Some(etag_a.as_str()), Some(2))
    );
    assert_eq!(a["restorableUntil"].as_i64().unwrap() - a["deletedAt"].as_i64().unwrap(), 3000);
    assert_eq!(a["author"], "owner");
    // Paged as listings are.
    let first = f.get(&format!("{deleted}?limit=1")).await.json();
    assert_eq!(first["items"].as_array().unwrap().len(), 1);
    let token = first["nextToken"].as_str().expect("a token");
    let second = f.get(&format!("{deleted}?limit=1&token={token}")).await.json();
    assert_eq!(second["items"][0]["name"], "c");
    assert!(second.get("nextToken").is_none(), "{second}");
    // The bucket's root has its own.
    let root = f.get(&format!("/v2/deleted/skills/{bucket}/")).await.json();
    assert_eq!(root["items"].as_array().unwrap().len(), 1, "{root}");
    assert_eq!(root["items"][0]["name"], "r");
    // Who may see them: the folder's writers and admins, no one else.
    assert_eq!(f.client.get(&deleted, &[("Api-Key", OTHER)]).await.status, 403);
    assert_eq!(f.client.get(&deleted, &[("Api-Key", "admin-key")]).await.json()["items"], json!(items));
    // Bad requests say what is wrong.
    let resource = f.get(&format!("/v2/deleted/skills/{bucket}/team/a")).await;
    assert_eq!(resource.status, 400, "{}", resource.body);
    assert!(resource.body.contains("listed per folder"), "{}", resource.body);
    assert_eq!(f.get(&format!("/v2/deleted/nope/{bucket}/")).await.status, 404);
    assert_eq!(f.get(&format!("/v2/deleted/skills/{bucket}/missing/")).await.status, 404);
    // The URL listed is what restore takes; restored, it is no longer listed.
    let body = json!({"url": urls[0]}).to_string();
    assert_eq!(f.client.post("/v2/ops/skills/restore", &owner, &body).await.status, 200);
    let left = f.get(&deleted).await.json();
    assert_eq!(left["items"].as_array().unwrap().len(), 1, "{left}");
    // Past the grace period nothing can be restored, and nothing is offered.
    tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
    assert_eq!(f.get(&deleted).await.json()["items"], json!([]));
    let late = json!({"url": format!("skills/{bucket}/team/c")}).to_string();
    assert_eq!(f.client.post("/v2/ops/skills/restore", &owner, &late).await.status, 404);
}

/// A folder of many live resources and one tombstone: one page of `GET /v2/deleted/…` reads at most 1 000
/// markers, so the first page is empty and carries a token, and the next one finds the tombstone.
#[tokio::test]
async fn the_deleted_listing_reads_a_bounded_number_of_markers_per_page() {
    let f = Fixture::start("").await;
    let skill = skill_md("s", "d");
    let puts = futures_util::stream::iter(0..1000)
        .map(|index| {
            let (f, skill) = (&f, &skill);
            async move { f.put_skill(&format!("many/a{index:04}"), &[("SKILL.md", skill)], &[]).await.status }
        })
        .buffer_unordered(8)
        .collect::<Vec<u16>>()
        .await;
    assert!(puts.iter().all(|status| *status == 200));
    assert_eq!(f.put_skill("many/z", &[("SKILL.md", &skill)], &[]).await.status, 200);
    assert_eq!(f.client.delete(&f.url("many/z"), &[("Api-Key", OWNER)]).await.status, 200);
    let deleted = format!("/v2/deleted/skills/{}/many/", f.bucket);
    let first = f.get(&format!("{deleted}?limit=1")).await.json();
    assert_eq!(first["items"], json!([]), "{first}");
    let token = first["nextToken"].as_str().expect("a token to go on from");
    let second = f.get(&format!("{deleted}?limit=1&token={token}")).await.json();
    assert_eq!(second["items"][0]["name"], "z", "{second}");
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
    assert_eq!(tail, ["e", "sub", "f"], "nested folders are listed too");

    let files = f.get(&f.metadata("team/sub/f/files/")).await.json();
    assert_eq!(names(&files), [("SKILL.md".into(), "ITEM".into()), ("x".into(), "FOLDER".into())]);
    let deep = f.get(&format!("{}?recursive=true", f.metadata("team/sub/f/files"))).await.json();
    let deep: Vec<&str> = deep["items"].as_array().unwrap().iter().map(|i| i["url"].as_str().unwrap()).collect();
    assert!(deep[1].ends_with("/team/sub/f/files/x/y.txt"), "{deep:?}");
    // The query is read as DIAL reads the v1 one: the same bounds and message,
    // `limit=0` an empty page with no token, the metadata MIME on request.
    for bad in ["limit=1001", "limit=-1", "limit=x", "recursive=yes"] {
        let reply = f.get(&format!("{}?{bad}", f.metadata("team/"))).await;
        assert_eq!(reply.status, 400, "{bad}");
        assert_eq!(reply.body, "Bad query parameters. Limit must be in [0, 1000] range. Recursive must be true/false");
    }
    for recursive in ["false", "TRUE"] {
        let empty = f.get(&format!("{}?limit=0&recursive={recursive}", f.metadata("team/"))).await;
        assert_eq!(empty.status, 200, "{}", empty.body);
        assert_eq!((empty.json()["items"].clone(), empty.json().get("nextToken").cloned()), (json!([]), None));
    }
    let typed = f
        .client
        .get(&f.metadata("team/"), &[("Api-Key", OWNER), ("Accept", "application/vnd.dial.metadata+json")])
        .await;
    assert_eq!(typed.headers["content-type"], "application/vnd.dial.metadata+json");
    assert_eq!(f.get(&f.metadata("team/")).await.headers["content-type"], "application/json");
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

/// Paths that are absolute on Windows (where ZIPs get extracted) are refused
/// like other absolute paths, as are two files where one would be the
/// other's folder; nothing is stored.
#[tokio::test]
async fn drive_letters_and_file_folder_clashes_are_refused() {
    let f = Fixture::start("").await;
    let skill = skill_md("s", "d");
    for bad in ["C:/Users/me/run.bat", "c:run.bat"] {
        let reply = f.put_skill("s", &[("SKILL.md", &skill), (bad, b"x")], &[]).await;
        assert_eq!(reply.status, 400, "{bad}: {}", reply.body);
        assert!(reply.body.contains("drive letter"), "{}", reply.body);
    }
    let reply = f.put_skill("s", &[("SKILL.md", &skill), ("docs", b"x"), ("docs/a.md", b"y")], &[]).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(f.get(&f.url("s")).await.status, 404, "nothing stored");

    let put = f.put_skill("s", &[("SKILL.md", &skill), ("docs/a.md", b"y")], &[]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let single = |path: &str| format!("{}/files/{path}", f.url("s"));
    let form = || reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(b"z".to_vec()));
    for bad in ["docs", "docs/a.md/deeper", "D:/x.txt"] {
        let request = reqwest::Client::new()
            .put(format!("{}{}", f.server.url, single(bad)))
            .header("Api-Key", OWNER)
            .multipart(form());
        let reply = request.send().await.unwrap();
        assert_eq!(reply.status(), 400, "{bad}");
    }
    assert_eq!(f.get(&f.url("s")).await.etag(), put.etag(), "unchanged");
}

/// A whole PUT slower than the commit deadline (half the grace period) is
/// refused as too slow (408) — not blamed on the upload's content — and the
/// answer names no server path or internal location.
#[tokio::test]
async fn an_upload_slower_than_the_commit_deadline_is_a_clear_timeout() {
    let f = Fixture::start("[folders]\ngrace_seconds = 2\ngc_interval_seconds = 1\n").await;
    let skill = skill_md("slow", "d");
    let boundary = "dialhostboundary";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"SKILL.md\"\r\n\r\n{}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scripts/run.py\"\r\n\r\n",
        String::from_utf8(skill).unwrap()
    );
    let chunks: Vec<Vec<u8>> =
        vec![head.into_bytes(), b"print(1)\n".to_vec(), format!("\r\n--{boundary}--\r\n").into()];
    let slow = futures_util::stream::iter(chunks).then(|chunk| async move {
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        Ok::<_, std::io::Error>(chunk)
    });
    let reply = reqwest::Client::new()
        .put(format!("{}{}", f.server.url, f.url("slow")))
        .header("Api-Key", OWNER)
        .header("Content-Type", format!("multipart/form-data; boundary={boundary}"))
        .body(reqwest::Body::wrap_stream(slow))
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let body = reply.text().await.unwrap();
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("took longer than"), "{body}");
    let data_dir = f.server.data_dir.canonicalize().unwrap();
    for internal in [data_dir.to_str().unwrap(), "Keys/", "Users/", "/v/", "/store"] {
        assert!(!body.contains(internal), "the answer shows {internal}: {body}");
    }
    assert_eq!(f.get(&f.url("slow")).await.status, 404);
}

/// Files of a skill are served `nosniff` and sandboxed, and HTML/SVG ones
/// as downloads, never rendered from the API's origin.
#[tokio::test]
async fn skill_files_are_never_rendered_as_pages() {
    let f = Fixture::start("").await;
    let skill = skill_md("s", "d");
    let script = b"<script>alert(1)</script>";
    let put = f.put_skill("s", &[("SKILL.md", &skill), ("a.html", script), ("b.svg", script)], &[]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    for (file, active) in [("a.html", true), ("b.svg", true), ("SKILL.md", false)] {
        let reply = f.get(&format!("{}/files/{file}", f.url("s"))).await;
        assert_eq!(reply.headers["x-content-type-options"], "nosniff", "{file}");
        assert_eq!(reply.headers["content-security-policy"], "sandbox", "{file}");
        let disposition = reply.headers["content-disposition"].to_str().unwrap();
        assert_eq!(disposition.starts_with("attachment"), active, "{file}: {disposition}");
    }
}

/// Names the local store cannot hold (over 239 bytes in a path segment as
/// stored, multi-byte characters counted as object_store writes them) and
/// file paths that push a resource past SPEC §2's 900 bytes are refused with
/// a 400 that says why — never a 500 — on every route that writes.
#[tokio::test]
async fn names_the_store_cannot_hold_are_a_clear_400() {
    let f = Fixture::start("").await;
    let skill = skill_md("s", "d");
    let long = "a".repeat(300);
    let cyrillic = "ф".repeat(130); // 260 bytes, 780 as stored
    let owner = [("Api-Key", OWNER)];
    let refused = |reply: &crate::support::Reply, what: &str| {
        assert_eq!(reply.status, 400, "{what}: {}", reply.body);
        assert!(reply.body.contains("per path segment") || reply.body.contains("too long"), "{what}: {}", reply.body);
    };
    for name in [&long, &cyrillic] {
        refused(&f.put_skill(name, &[("SKILL.md", &skill)], &[]).await, "resource name");
        refused(&f.client.put_empty(&f.url(&format!("{name}/")), &owner).await, "folder name");
        let file = format!("docs/{name}.md");
        refused(&f.put_skill("s", &[("SKILL.md", &skill), (file.as_str(), b"x")], &[]).await, "file name");
        let v1 = format!("/v1/prompts/{}/{name}", f.bucket);
        refused(&f.client.put_body(&v1, &owner, b"{}").await, "v1 prompt");
        let form = reqwest::multipart::Form::new()
            .part("file", reqwest::multipart::Part::bytes(b"x".to_vec()).file_name("x.txt"));
        let v1_file = reqwest::Client::new()
            .put(format!("{}/v1/files/{}/{name}", f.server.url, f.bucket))
            .header("Api-Key", OWNER)
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert_eq!(v1_file.status(), 400, "v1 file");
    }
    let put = f.put_skill("s", &[("SKILL.md", &skill)], &[]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let single = f.client.put_files(&format!("{}/files/{long}", f.url("s")), &owner, &[("x", b"x")]).await;
    refused(&single, "single file");
    // A path of short segments whose whole is over 900 bytes.
    let deep = vec!["d".repeat(200); 5].join("/");
    refused(&f.put_skill("s", &[("SKILL.md", &skill), (deep.as_str(), b"x")], &[]).await, "deep file path");
    assert_eq!(f.get(&f.url("s")).await.etag(), put.etag(), "nothing changed");

    // Long but within the limits: stored and listed.
    let fine = "b".repeat(200);
    assert_eq!(f.put_skill(&fine, &[("SKILL.md", &skill)], &[]).await.status, 200);
    let listing = f.get(&f.metadata("")).await.json();
    assert!(names(&listing).iter().any(|(name, _)| name == &fine), "{listing}");
}

/// On S3 too, SPEC §2's 900 bytes hold for the whole storage path of a file
/// inside a resource, version prefix included, on every route that writes
/// one — decided before anything is written. (S3 has no 239-byte segment
/// limit: a long segment within the 900 bytes is stored.)
#[tokio::test]
async fn file_paths_past_900_bytes_are_refused_on_s3_too() {
    let Some(moto) = crate::services::moto() else { return };
    moto.create_bucket("paths");
    let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
    let f = Fixture::start(&format!("[storage]\nurl = \"s3://paths\"\n[storage.options]\n{options}")).await;
    let skill = skill_md("s", "d");
    let owner = [("Api-Key", OWNER)];
    let put = f.put_skill("s", &[("SKILL.md", &skill)], &[]).await;
    assert_eq!(put.status, 200, "{}", put.body);

    let deep = vec!["d".repeat(200); 5].join("/");
    let refused = |reply: &crate::support::Reply, what: &str| {
        assert_eq!(reply.status, 400, "{what}: {}", reply.body);
        assert!(reply.body.contains("too long") && reply.body.contains("900"), "{what}: {}", reply.body);
    };
    refused(&f.put_skill("s", &[("SKILL.md", &skill), (deep.as_str(), b"x")], &[]).await, "whole PUT");
    refused(&f.put_skill("t", &[("SKILL.md", &skill), (deep.as_str(), b"x")], &[]).await, "whole PUT, new resource");
    let single = f.client.put_files(&format!("{}/files/{deep}", f.url("s")), &owner, &[("x", b"x")]).await;
    refused(&single, "single-file PUT");
    assert_eq!(f.get(&f.url("s")).await.etag(), put.etag(), "nothing changed");
    assert_eq!(f.get(&f.url("t")).await.status, 404, "nothing created");

    let long_segments = format!("{}/{}", "a".repeat(300), "b".repeat(300));
    let stored = f.put_skill("s", &[("SKILL.md", &skill), (long_segments.as_str(), b"x")], &[]).await;
    assert_eq!(stored.status, 200, "{}", stored.body);
    assert_eq!(f.get(&format!("{}/files/{long_segments}", f.url("s"))).await.body, "x");
}

/// DIAL's rules for file URLs, names, folder deletes and restores, as
/// clients rely on them.
#[tokio::test]
async fn file_urls_names_folder_deletes_and_restores_follow_dial() {
    let f = Fixture::start("[keys.admin-key]\nproject = \"ops\"\nroles = [\"admin\"]\n").await;
    let skill = skill_md("s", "d");
    let put = f.put_skill("s", &[("SKILL.md", &skill), ("data.txt", b"data")], &[]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let file = |path: &str| format!("{}/files/{path}", f.url("s"));
    let owner = [("Api-Key", OWNER)];

    // A trailing `/` names a folder of files: never the file of that name.
    assert_eq!(f.client.delete(&file("data.txt/"), &owner).await.status, 400);
    assert_eq!(f.client.put_files(&file("new.txt/"), &owner, &[("x", b"x")]).await.status, 400);
    assert_eq!(f.get(&file("data.txt/")).await.status, 400);
    assert_eq!(f.get(&file("data.txt")).await.body, "data", "still there");
    assert_eq!(f.get(&file("new.txt")).await.status, 404, "not created");

    // Names ending in `.` are refused in files as in resource names.
    assert_eq!(f.client.put_files(&file("x."), &owner, &[("x", b"x")]).await.status, 400);
    assert_eq!(f.put_skill("t", &[("SKILL.md", &skill), ("notes.", b"x")], &[]).await.status, 400);
    assert_eq!(f.get(&f.url("s")).await.etag(), put.etag());

    // DELETE of a folder honours If-Match with the etag its PUT answered.
    let folder = f.client.put_empty(&f.url("empty/"), &owner).await;
    assert_eq!(folder.status, 200);
    let wrong = f.client.delete(&f.url("empty/"), &[("Api-Key", OWNER), ("If-Match", "\"nope\"")]).await;
    assert_eq!(wrong.status, 412, "{}", wrong.body);
    assert_eq!(f.get(&f.metadata("empty/")).await.status, 200, "kept");
    let right = f.client.delete(&f.url("empty/"), &[("Api-Key", OWNER), ("If-Match", &folder.etag())]).await;
    assert_eq!(right.status, 200, "{}", right.body);

    // An admin may restore a deleted resource, as its owner may.
    assert_eq!(f.client.delete(&f.url("s"), &owner).await.status, 200);
    let body = serde_json::json!({"url": f.url("s").trim_start_matches("/v2/")}).to_string();
    let restored = f.client.post("/v2/ops/skills/restore", &[("Api-Key", "admin-key")], &body).await;
    assert_eq!(restored.status, 200, "{}", restored.body);
    assert_eq!(f.get(&f.url("s")).await.etag(), put.etag());
    assert_eq!(f.client.post("/v2/ops/skills/restore", &[("Api-Key", OTHER)], &body).await.status, 403);
}

/// A recursive listing holds every nested folder and resource (never files
/// or version trees), and its pages, whatever their size, add up to the
/// unpaged listing with each node once.
#[tokio::test]
async fn recursive_listings_hold_nested_folders_and_page_exactly() {
    let f = Fixture::start("").await;
    for path in ["tree/skill-a", "tree/sub/nested", "tree/sub/deeper/x", "tree/sub-b", "tree/z", "tree/b/c/d"] {
        let name = path.rsplit('/').next().unwrap();
        let reply = f.put_skill(path, &[("SKILL.md", &skill_md(name, "d")), ("docs/r.md", b"r")], &[]).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    }
    for extra in 0..5 {
        let path = format!("tree/m{extra}");
        assert_eq!(f.put_skill(&path, &[("SKILL.md", &skill_md("m", "d"))], &[]).await.status, 200);
    }
    let urls = |page: &Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|i| i["url"].as_str().unwrap().to_string()).collect()
    };
    let all = f.get(&format!("{}?recursive=true", f.metadata("tree/"))).await.json();
    let all = urls(&all);
    let relative: Vec<String> = all.iter().map(|u| u.split("/tree/").nth(1).unwrap().to_string()).collect();
    assert_eq!(
        relative,
        [
            "b/",
            "b/c/",
            "b/c/d/",
            "m0/",
            "m1/",
            "m2/",
            "m3/",
            "m4/",
            "skill-a/",
            "sub/",
            "sub/deeper/",
            "sub/deeper/x/",
            "sub/nested/",
            "sub-b/",
            "z/"
        ],
        "every folder and resource, in pre-order; no files, no version trees"
    );
    for limit in [1, 2, 3, 9, 14, 15, 16] {
        let mut paged = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = format!("{}?recursive=true&limit={limit}", f.metadata("tree/"));
            if let Some(token) = &token {
                url.push_str(&format!("&token={token}"));
            }
            let page = f.get(&url).await.json();
            paged.extend(urls(&page));
            match page.get("nextToken") {
                Some(next) => token = Some(next.as_str().unwrap().to_string()),
                None => break,
            }
            assert!(paged.len() <= all.len(), "limit {limit}: pages repeat: {paged:?}");
        }
        assert_eq!(paged, all, "limit {limit}");
    }
}

/// `?permissions=true` adds the caller's effective permissions to the node
/// and to each item: everything for the owner, what was granted for others.
#[tokio::test]
async fn metadata_carries_permissions_when_asked() {
    let f = Fixture::start("").await;
    assert_eq!(f.put_skill("team/s", &[("SKILL.md", &skill_md("s", "d"))], &[]).await.status, 200);
    let share = serde_json::json!({"resources": [{"url": format!("skills/{}/team/", f.bucket)}]}).to_string();
    let created = f.client.post("/v1/ops/resource/share/create", &[("Api-Key", OWNER)], &share).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let link = created.json()["invitationLink"].as_str().unwrap().to_string();
    assert_eq!(f.client.get(&format!("{link}?accept=true"), &[("Api-Key", OTHER)]).await.status, 200);

    for (key, expected) in [(OWNER, serde_json::json!(["READ", "WRITE"])), (OTHER, serde_json::json!(["READ"]))] {
        let listing = f.client.get(&format!("{}?permissions=true", f.metadata("team/")), &[("Api-Key", key)]).await;
        let listing = listing.json();
        assert_eq!(listing["permissions"], expected, "{listing}");
        assert_eq!(listing["items"][0]["permissions"], expected, "{listing}");
        let item = f.client.get(&format!("{}?permissions=true", f.metadata("team/s")), &[("Api-Key", key)]).await;
        assert_eq!(item.json()["permissions"], expected);
        let files =
            f.client.get(&format!("{}?permissions=true", f.metadata("team/s/files/")), &[("Api-Key", key)]).await;
        assert_eq!(files.json()["items"][0]["permissions"], expected);
    }
    let plain = f.get(&f.metadata("team/")).await.json();
    assert!(plain.get("permissions").is_none(), "only when asked: {plain}");
}

/// The listing of a skill's files as DIAL Core answers it (issue 23): the
/// `…/files/` folder (or the directory listed) as the top node, files and
/// directories below it in name order with their decoded `parentPath` from
/// the bucket root, `resourceType` on every node, no `null` fields, and
/// paged by `limit` and `token` like every listing.
#[tokio::test]
async fn a_skills_files_are_listed_and_paged_as_dial_core_lists_them() {
    let f = Fixture::start("").await;
    let files: &[(&str, &[u8])] = &[
        ("SKILL.md", &skill_md("pdf-tools", "d")),
        ("docs/a b.md", b"a"),
        ("docs/more/x.md", b"x"),
        ("run.py", b"print(1)"),
    ];
    assert_eq!(f.put_skill("team/pdf-tools", files, &[]).await.status, 200);
    let b = &f.bucket;
    let top = f.get(&f.metadata("team/pdf-tools/files")).await.json();
    let expected_top = json!({"name": "files", "parentPath": "team/pdf-tools", "bucket": b,
        "url": format!("skills/{b}/team/pdf-tools/files/"), "nodeType": "FOLDER", "resourceType": "SKILL"});
    let without_items = |node: &Value| {
        let mut node = node.clone();
        node.as_object_mut().unwrap().remove("items");
        node
    };
    assert_eq!(without_items(&top), expected_top, "{top}");
    assert_eq!(without_items(&f.get(&f.metadata("team/pdf-tools/files/")).await.json()), expected_top);
    assert_eq!(
        names(&top),
        [("SKILL.md", "ITEM"), ("docs", "FOLDER"), ("run.py", "ITEM")].map(|(n, t)| (n.into(), t.into()))
    );
    assert_eq!(
        top["items"][0],
        json!({"name": "SKILL.md", "parentPath": "team/pdf-tools/files", "bucket": b,
            "url": format!("skills/{b}/team/pdf-tools/files/SKILL.md"), "nodeType": "ITEM", "resourceType": "SKILL",
            "etag": top["items"][0]["etag"], "contentLength": files[0].1.len()})
    );
    assert_eq!(
        top["items"][1],
        json!({"name": "docs", "parentPath": "team/pdf-tools/files", "bucket": b,
            "url": format!("skills/{b}/team/pdf-tools/files/docs/"), "nodeType": "FOLDER", "resourceType": "SKILL"})
    );

    let docs = f.get(&f.metadata("team/pdf-tools/files/docs/")).await.json();
    assert_eq!((docs["name"].clone(), docs["parentPath"].clone()), (json!("docs"), json!("team/pdf-tools/files")));
    assert_eq!(docs["url"], format!("skills/{b}/team/pdf-tools/files/docs/"));
    assert_eq!(names(&docs), [("a b.md", "ITEM"), ("more", "FOLDER")].map(|(n, t)| (n.into(), t.into())));
    assert_eq!(docs["items"][0]["parentPath"], "team/pdf-tools/files/docs");
    assert_eq!(docs["items"][0]["url"], format!("skills/{b}/team/pdf-tools/files/docs/a%20b.md"));

    // Paged one at a time, directories and recursive listings alike: the
    // pages add up to the whole listing, each node once.
    for (query, whole) in [
        ("", &top),
        ("recursive=true&", &f.get(&format!("{}?recursive=true", f.metadata("team/pdf-tools/files"))).await.json()),
    ] {
        let mut paged = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page_url = match &token {
                None => format!("{}?{query}limit=1", f.metadata("team/pdf-tools/files")),
                Some(token) => format!("{}?{query}limit=1&token={token}", f.metadata("team/pdf-tools/files")),
            };
            let page = f.get(&page_url).await.json();
            assert!(page["items"].as_array().unwrap().len() <= 1, "{page}");
            paged.extend(page["items"].as_array().unwrap().iter().map(|item| item["url"].clone()));
            match page.get("nextToken") {
                Some(next) => token = Some(next.as_str().unwrap().to_string()),
                None => break,
            }
            assert!(paged.len() <= 10, "paging never ends: {paged:?}");
        }
        let all: Vec<Value> = whole["items"].as_array().unwrap().iter().map(|item| item["url"].clone()).collect();
        assert_eq!(paged, all, "{query}");
    }
    assert_eq!(
        names(&f.get(&format!("{}?recursive=true", f.metadata("team/pdf-tools/files"))).await.json()),
        [("SKILL.md", "ITEM"), ("a b.md", "ITEM"), ("x.md", "ITEM"), ("run.py", "ITEM")]
            .map(|(n, t)| (n.into(), t.into()))
    );

    // Every v2 node: `resourceType`, and no field written as `null`.
    let root = f.get(&f.metadata("")).await.json();
    assert_eq!(
        root,
        json!({"bucket": b, "url": format!("skills/{b}/"), "nodeType": "FOLDER", "resourceType": "SKILL",
        "items": [{"name": "team", "bucket": b, "url": format!("skills/{b}/team/"), "nodeType": "FOLDER",
            "resourceType": "SKILL", "createdAt": root["items"][0]["createdAt"]}]})
    );
    let folder = f.get(&f.metadata("team/")).await.json();
    assert_eq!(
        (folder["resourceType"].clone(), folder["items"][0]["resourceType"].clone()),
        (json!("SKILL"), json!("SKILL"))
    );
    fn no_nulls(value: &Value) -> bool {
        match value {
            Value::Null => false,
            Value::Array(items) => items.iter().all(no_nulls),
            Value::Object(fields) => fields.values().all(no_nulls),
            _ => true,
        }
    }
    for listed in [&top, &docs, &root, &folder] {
        assert!(no_nulls(listed), "{listed}");
    }
}

/// EPAM's own DIAL client, `aidial-client`, lists skills and their files,
/// pages through them and reads them (issue 23: it parses every answer into
/// its models, which require `resourceType` on every node).
#[tokio::test]
async fn epams_dial_client_lists_and_reads_skills() {
    let Some(python) = crate::upstream::dial_sdk_python() else { return };
    let f = Fixture::start("").await;
    let skill = skill_md("pdf-tools", "Work with PDFs.");
    let files: &[(&str, &[u8])] =
        &[("SKILL.md", &skill), ("docs/guide.md", b"# Guide\n"), ("docs/more/x.md", b"x"), ("run.py", b"print(1)\n")];
    assert_eq!(f.put_skill("team/pdf-tools", files, &[]).await.status, 200);
    assert_eq!(f.put_skill("team/sub/other", &[("SKILL.md", &skill_md("other", "d"))], &[]).await.status, 200);
    let base = f.server.url.clone();
    let args = ["--base-url", &base, "--api-key", OWNER, "--folder", "team", "--skill", "pdf-tools", "--dir", "docs"]
        .map(String::from);
    let result = tokio::task::spawn_blocking(move || {
        crate::upstream::run_client_with(
            &python,
            "aidial_skills.py",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    })
    .await
    .unwrap();
    assert!(result.get("error").is_none(), "aidial-client could not use the answers: {result}");
    let b = &f.bucket;
    let listed = |key: &str| -> Vec<(String, String)> {
        let items = result[key]["items"].as_array().unwrap_or_else(|| panic!("{key}: {result}"));
        items.iter().map(|i| (i["name"].as_str().unwrap().into(), i["nodeType"].as_str().unwrap().into())).collect()
    };
    let pairs = |expected: &[(&str, &str)]| -> Vec<(String, String)> {
        expected.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
    };
    assert_eq!(listed("root"), pairs(&[("team", "FOLDER")]));
    assert_eq!(listed("folder"), pairs(&[("pdf-tools", "ITEM"), ("sub", "FOLDER")]));
    assert_eq!(listed("recursive"), pairs(&[("pdf-tools", "ITEM"), ("sub", "FOLDER"), ("other", "ITEM")]));
    assert_eq!(result["files"]["url"], format!("skills/{b}/team/pdf-tools/files/"));
    assert_eq!(listed("files"), pairs(&[("SKILL.md", "ITEM"), ("docs", "FOLDER"), ("run.py", "ITEM")]));
    assert_eq!(listed("dir"), pairs(&[("guide.md", "ITEM"), ("more", "FOLDER")]));
    assert_eq!(result["dir"]["items"][0]["parentPath"], "team/pdf-tools/files/docs");
    assert_eq!(
        listed("deep"),
        pairs(&[("SKILL.md", "ITEM"), ("guide.md", "ITEM"), ("x.md", "ITEM"), ("run.py", "ITEM")])
    );
    assert_eq!(result["paged"], json!(["SKILL.md", "docs", "run.py"]));
    for key in ["root", "folder", "recursive", "files", "dir", "deep"] {
        assert_eq!(result[key]["resourceType"], "SKILL", "{key}: {result}");
        assert!(result[key]["items"].as_array().unwrap().iter().all(|item| item["resourceType"] == "SKILL"), "{key}");
    }
    assert_eq!(result["skill_md"], String::from_utf8(skill).unwrap());
    assert!(result["zip_bytes"].as_u64().unwrap() > 0, "{result}");
}

/// `clients` unconditional single-file PUTs, each of its own file, into one
/// skill at once (issue 23): none asked for a precondition, so none is
/// refused because the others write — every one answers 200 and every file
/// is in the final version.
async fn concurrent_file_puts_all_land(f: &Fixture, clients: usize) {
    let skill = format!("race-{clients}");
    assert_eq!(f.put_skill(&skill, &[("SKILL.md", &skill_md(&skill, "d"))], &[]).await.status, 200);
    let puts = (0..clients).map(|i| {
        let url = f.url(&format!("{skill}/files/part-{i}.txt"));
        async move { f.client.put_files(&url, &[("Api-Key", OWNER)], &[("x", format!("{i}").as_bytes())]).await }
    });
    let replies = futures_util::future::join_all(puts).await;
    let refused: Vec<String> =
        replies.iter().filter(|r| r.status != 200).map(|r| format!("{} {}", r.status, r.body)).collect();
    assert!(refused.is_empty(), "{} of {clients} refused: {refused:?}", refused.len());
    let listing = f.get(&format!("{}?limit=1000", f.metadata(&format!("{skill}/files/")))).await.json();
    let mut stored: Vec<String> =
        listing["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_string()).collect();
    stored.sort();
    let mut expected: Vec<String> = (0..clients).map(|i| format!("part-{i}.txt")).collect();
    expected.push("SKILL.md".into());
    expected.sort();
    assert_eq!(stored, expected);
    for i in [0, clients - 1] {
        assert_eq!(f.get(&f.url(&format!("{skill}/files/part-{i}.txt"))).await.body, i.to_string());
    }
}

#[tokio::test]
async fn concurrent_unconditional_file_puts_all_land_on_local_disk() {
    let f = Fixture::start("").await;
    for clients in [16, 64] {
        concurrent_file_puts_all_land(&f, clients).await;
    }
}

#[tokio::test]
async fn concurrent_unconditional_file_puts_all_land_on_s3() {
    let Some(moto) = crate::services::moto() else { return };
    moto.create_bucket("file-puts");
    let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
    let f = Fixture::start(&format!("[storage]\nurl = \"s3://file-puts\"\n[storage.options]\n{options}")).await;
    for clients in [16, 64] {
        concurrent_file_puts_all_land(&f, clients).await;
    }
}

/// Eight whole PUTs racing eight single-file PUTs on one skill, none with a
/// condition: all answer 200, and the history is a chain of commits — each
/// whole PUT a version of exactly its files, each single-file PUT the
/// version before it plus its file — so the skill ends as one whole
/// version plus the single files committed after it.
#[tokio::test]
async fn whole_and_single_file_puts_racing_end_in_one_whole_version_plus_later_files() {
    let f = &Fixture::start("[folders]\nkeep_versions = 100\n").await;
    let skill_md = skill_md("mixed", "d");
    assert_eq!(f.put_skill("mixed", &[("SKILL.md", &skill_md)], &[]).await.status, 200);
    let wholes = (0..8).map(|i| {
        let name = format!("whole-{i}.txt");
        let skill_md = skill_md.clone();
        async move {
            let files: [(&str, &[u8]); 2] = [("SKILL.md", &skill_md), (&name, b"w")];
            f.put_skill("mixed", &files, &[]).await
        }
    });
    let singles = (0..8).map(|i| {
        let url = f.url(&format!("mixed/files/single-{i}.txt"));
        async move { f.client.put_files(&url, &[("Api-Key", OWNER)], &[("x", b"s")]).await }
    });
    let (wholes, singles) =
        tokio::join!(futures_util::future::join_all(wholes), futures_util::future::join_all(singles));
    for reply in wholes.iter().chain(&singles) {
        assert_eq!(reply.status, 200, "{}", reply.body);
    }

    // Oldest first: the first version, then one per PUT.
    let versions = f.get(&format!("/v2/versions/skills/{}/mixed", f.bucket)).await.json();
    let mut versions: Vec<String> =
        versions["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap().to_string()).collect();
    versions.reverse();
    assert_eq!(versions.len(), 17, "{versions:?}");
    let mut previous: Option<BTreeSet<String>> = None;
    let (mut wholes_seen, mut singles_seen) = (BTreeSet::new(), BTreeSet::new());
    for version in &versions {
        let zip = f.get(&format!("{}?version={version}", f.url("mixed"))).await;
        let files: BTreeSet<String> = unzip(&zip.bytes).into_iter().map(|(name, _)| name).collect();
        if let Some(previous) = &previous {
            let added: Vec<&String> = files.difference(previous).collect();
            match added.as_slice() {
                // A single-file PUT: the version before it plus its file.
                [single] if single.starts_with("single-") && files.is_superset(previous) => {
                    assert!(singles_seen.insert((*single).clone()), "{single} committed twice");
                }
                // A whole PUT: exactly its own files, whatever came before.
                _ => {
                    let whole: Vec<&String> = files.iter().filter(|name| *name != "SKILL.md").collect();
                    assert!(whole.len() == 1 && whole[0].starts_with("whole-"), "{previous:?} → {files:?}");
                    assert!(wholes_seen.insert(whole[0].clone()), "{} committed twice", whole[0]);
                }
            }
        }
        previous = Some(files);
    }
    assert_eq!((wholes_seen.len(), singles_seen.len()), (8, 8));
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

/// Real skills nest values under `metadata`: accepted with a warning (and
/// cached as compact JSON, in the handler's order) unless the type is
/// strict; a rejected upload lists every problem at once, worded to fit.
#[tokio::test]
async fn nested_metadata_warns_and_rejections_report_everything() {
    let skill = b"---\nname: nested\ndescription: d\nlicense: MIT\nmetadata:\n  version: \"2.0\"\n  requires:\n    bins: [jq]\n  author: me\nextra: 1\n---\n";
    let f = Fixture::start("").await;
    let put = f.put_skill("nested", &[("SKILL.md", skill)], &[]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    let warnings: Vec<&str> =
        body["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap()).collect();
    assert!(warnings.iter().any(|w| w.contains("'metadata.requires' is a mapping")), "{warnings:?}");
    assert_eq!(body["metadata"]["metadata.requires"], r#"{"bins":["jq"]}"#);
    // The handler's order, not alphabetical: name, description, version, license, then metadata.*.
    let keys: Vec<&String> = body["metadata"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["name", "description", "version", "license", "metadata.requires", "metadata.author"]);
    let listed = f.get(&f.metadata("")).await.json();
    let keys: Vec<&String> = listed["items"][0]["metadata"].as_object().unwrap().keys().collect();
    assert_eq!(keys[..3], ["name", "description", "version"], "listings keep the order too");

    let strict = Fixture::start("[handlers.types.skills]\nstrict = true\n").await;
    let refused = strict.put_skill("nested", &[("SKILL.md", skill)], &[]).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("'metadata.requires' is a mapping"), "{}", refused.body);
    assert!(refused.body.contains("Unknown top-level field 'extra'"), "{}", refused.body);
    assert!(!refused.body.contains("It is kept") && !refused.body.contains("are accepted"), "{}", refused.body);
    // A hard error no longer hides the rest.
    let broken = b"---\nname: nested\ndescription: 5\nextra: 1\n---\n";
    let refused = f.put_skill("nested", &[("SKILL.md", broken)], &[]).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("'description' must be a string"), "{}", refused.body);
    assert!(refused.body.contains("Unknown top-level field 'extra'"), "every problem at once: {}", refused.body);
}
