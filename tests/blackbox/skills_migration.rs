//! A team moving its skills from Anthropic's and OpenAI's hosted stores
//! (issue 40), with the official SDKs (`tests/clients/skills_migration.py`)
//! and DIAL's routes as the witness: the vendors' documented recipes work,
//! a retried mutation has the effect of one call, a grantee finds a shared
//! skill's id where DIAL clients look, every answer carries a request id
//! that the access log names, unknown routes answer in each API's shape,
//! and a version an API client made is never dropped silently.

use serde_json::{Value, json};

use futures_util::StreamExt;

use crate::skills_api::{Fixture, PROJECT_KEY};
use crate::support::{sample, scrape};
use crate::upstream::run_client_async;

const KEY: [(&str, &str); 1] = [("Api-Key", PROJECT_KEY)];

/// Runs `skills_migration.py SCENARIO`; panics with its report when a check in it failed.
async fn run(f: &Fixture, scenario: &str, key: &str, extra: &[&str]) -> Value {
    let mut args = vec![scenario, "--host", &f.server.url, "--key", key];
    args.extend_from_slice(extra);
    let out = run_client_async("skills_migration.py", &args).await;
    assert!(out.get("error").is_none(), "skills_migration.py {scenario} {extra:?}: {out}");
    out
}

/// PUTs a skill with one file, SKILL.md, through `/v2` at `skills/{bucket}/{folder}`.
async fn put_skill(f: &Fixture, bucket: &str, folder: &str, skill_md: &str, auth: &[(&str, &str)]) {
    let path = format!("/v2/skills/{bucket}/{folder}");
    let reply = f.client.put_files(&path, auth, &[("SKILL.md", skill_md.as_bytes())]).await;
    assert!((200..300).contains(&reply.status), "PUT {path}: {} {}", reply.status, reply.body);
}

/// Anthropic's documented delete (GA and beta), a rollback by deleting the
/// latest version, OpenAI deleting its default and then its last version
/// (today's main: the first delete of each was a 400).
#[tokio::test]
async fn the_vendors_documented_delete_and_rollback_recipes_work() {
    let Some(f) = Fixture::local().await else { return };
    let out = run(&f, "recipes", PROJECT_KEY, &[]).await;
    for gone in ["recipe-ga", "recipe-beta", "default-delete"] {
        assert_eq!(f.dial_status(&f.bucket, gone, &KEY).await, 404, "{gone} is deleted for DIAL: {out}");
    }
    let rollback = f.dial_versions(&f.bucket, "rollback", &KEY).await;
    assert_eq!(rollback.len(), 1, "the bad version is gone: {rollback:?}");
    let served = f.get(&format!("/v2/skills/{}/rollback/files/SKILL.md", f.bucket), &KEY).await;
    assert!(served.body.contains("Good."), "DIAL serves the good version again: {}", served.body);
}

/// A `/v2` skill whose folder is not its name takes versions under both,
/// and from the zip the SDK downloaded (today's main: every way a 400).
#[tokio::test]
async fn a_skill_whose_folder_is_not_its_name_takes_versions_through_the_sdks() {
    let Some(f) = Fixture::local().await else { return };
    let skill_md = "---\nname: react-best-practices\ndescription: Made through DIAL.\n---\n# R\n";
    put_skill(&f, &f.bucket, "react-best", skill_md, &KEY).await;
    run(&f, "renamed", PROJECT_KEY, &["--dial-name", "react-best", "--dial-title", "react-best-practices"]).await;
    let versions = f.dial_versions(&f.bucket, "react-best", &KEY).await;
    assert_eq!(versions.len(), 4, "the /v2 skill's versions: {versions:?}");
}

/// A zip with SKILL.md at its root — what `/v2` downloads — makes a skill
/// named by its frontmatter and a version of it (today's main: "two
/// top-level folders").
#[tokio::test]
async fn a_zip_with_skill_md_at_its_root_is_the_skills_folder() {
    let Some(f) = Fixture::local().await else { return };
    run(&f, "rooted", PROJECT_KEY, &[]).await;
    assert_eq!(f.dial_versions(&f.bucket, "rooted", &KEY).await.len(), 2);
    // What DIAL itself downloads goes back in as a version.
    let zip = f.get(&format!("/v2/skills/{}/rooted", f.bucket), &KEY).await;
    assert_eq!(zip.status, 200);
    let id = f.get("/openai/v1/skills", &KEY).await.json()["data"][0]["id"].as_str().unwrap().to_string();
    let boundary = "migration-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"rooted.zip\"\r\n\
         Content-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&zip.bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let headers = [KEY[0], ("Content-Type", content_type.as_str())];
    let again = f.client.post_bytes(&format!("/openai/v1/skills/{id}/versions"), &headers, &body).await;
    assert_eq!(again.status, 200, "{}", again.body);
}

/// Answers lost on the way back and the SDKs retrying: a version create
/// makes one version, a version delete, the delete of a skill's last
/// version and a skill delete succeed (today's main: two versions, and
/// NotFound for the deletes that had worked).
#[tokio::test]
async fn a_retried_mutation_has_the_effect_of_one_call() {
    let Some(f) = Fixture::local().await else { return };
    let out = run(&f, "retries", PROJECT_KEY, &[]).await;
    for api in ["anthropic", "openai"] {
        assert!(out[api].is_string(), "{out}");
        for gone in [format!("retried-{api}"), format!("retried-{api}-last")] {
            assert_eq!(f.dial_status(&f.bucket, &gone, &KEY).await, 404, "{api}: {gone} deleted");
        }
    }
}

/// Request ids on every answer, errors too, and in the access log (today's
/// main: none).
#[tokio::test]
async fn every_answer_carries_a_request_id_the_access_log_names() {
    let Some(f) = Fixture::local().await else { return };
    let out = run(&f, "request-ids", PROJECT_KEY, &[]).await;
    let id = out["anthropic_request_id"].as_str().unwrap_or_else(|| panic!("{out}"));
    let logged = f.server.logged();
    assert!(
        logged.iter().any(|line| line.contains("dial_host::access") && line.contains(id)),
        "the access log names the request id {id}: {logged:?}"
    );

    let reply = f.get("/v2/metadata/skills/", &KEY).await;
    let header = |name: &str| reply.headers.get(name).map(|value| value.to_str().unwrap().to_string());
    let headers = (header("x-request-id"), header("request-id"));
    assert!(headers.0.is_some() && headers.0 == headers.1, "a /v2 answer carries one request id twice: {headers:?}");
    let given = f.client.get("/health", &[("x-request-id", "gateway-abc.1")]).await;
    let kept = given.headers.get("x-request-id").map(|value| value.to_str().unwrap().to_string());
    assert_eq!(kept.as_deref(), Some("gateway-abc.1"), "a gateway's id is kept");
}

/// Unknown routes in each API's error shape (405 on a known path too), long
/// ids cut in 404s, and `default_version` as a number (today's main: plain
/// text, the id whole, a 400).
#[tokio::test]
async fn errors_speak_each_apis_shape() {
    let Some(f) = Fixture::local().await else { return };
    run(&f, "errors", PROJECT_KEY, &[]).await;

    let wrong_method = f.client.put_empty("/openai/v1/skills", &KEY).await;
    assert_eq!(wrong_method.status, 405, "{}", wrong_method.body);
    assert_eq!(wrong_method.json()["error"]["type"], "invalid_request_error", "{}", wrong_method.body);
    let unknown = f.client.get("/anthropic/v1/models", &KEY).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(
        unknown.json(),
        json!({"type": "error", "error": {"type": "not_found_error",
        "message": "No route GET /anthropic/v1/models: this host serves the skills API under /anthropic/v1/skills, \
                    nothing else of /anthropic/v1"}})
    );
}

/// A grantee finds a shared skill's id in `share/list` and in the skill's
/// `/v2` metadata, and the SDKs take it (today's main: neither has it).
#[tokio::test]
async fn a_grantee_finds_the_id_of_a_shared_skill_where_dial_clients_look() {
    let Some(f) = Fixture::local().await else { return };
    let (alice, bob) = (f.user("alice").await, f.user("bob").await);
    put_skill(&f, &alice.bucket, "shared-id", "---\nname: shared-id\ndescription: Shared.\n---\n", &alice.auth()).await;

    let resources = json!([{"url": format!("skills/{}/shared-id", alice.bucket), "permissions": ["READ"]}]);
    let mut headers = alice.auth().to_vec();
    headers.push(("Content-Type", "application/json"));
    let body = json!({"invitationType": "link", "resources": resources}).to_string();
    let shared = f.client.post("/v1/ops/resource/share/create", &headers, &body).await;
    assert_eq!(shared.status, 200, "{}", shared.body);
    let link = shared.json()["invitationLink"].as_str().unwrap().to_string();
    assert_eq!(f.get(&format!("{link}?accept=true"), &bob.auth()).await.status, 200);

    let mut bob_json = bob.auth().to_vec();
    bob_json.push(("Content-Type", "application/json"));
    let list_body = json!({"resourceTypes": ["SKILL"], "with": "me"}).to_string();
    let listed = f.client.post("/v1/ops/resource/share/list", &bob_json, &list_body).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let entry = &listed.json()["resources"][0];
    let id = entry["skillId"].as_str().unwrap_or_else(|| panic!("no skillId in {entry}")).to_string();
    let metadata = f.get(&format!("/v2/metadata/skills/{}/shared-id/", alice.bucket), &bob.auth()).await;
    assert_eq!(metadata.json()["skillId"], id.as_str(), "{}", metadata.body);

    let token = bob.token.strip_prefix("Bearer ").unwrap();
    let seen = f.client.get(&format!("/openai/v1/skills/{id}"), &[("Authorization", &format!("Bearer {token}"))]).await;
    assert_eq!((seen.status, seen.json()["name"].clone()), (200, json!("shared-id")), "{}", seen.body);
}

/// With `keep_versions = 3`, a fourth version through either API is a 409
/// naming the setting, sent once; every version made still answers (today's
/// main: the oldest was dropped and its id answered 404).
#[tokio::test]
async fn a_version_an_api_client_made_is_never_dropped_silently() {
    let Some(f) = Fixture::local_with("[handlers.types.skills]\nkeep_versions = 3\n").await else { return };
    let out = run(&f, "retention", PROJECT_KEY, &[]).await;
    let versions = f.dial_versions(&f.bucket, "kept", &KEY).await;
    assert_eq!(versions.len(), 3, "three kept, none dropped: {versions:?} {out}");
}

/// The handler's warnings and the hosted services' rules reach SDK callers
/// in the create answers; with `skills_api.vendor_names = "refuse"` such a
/// skill is refused and nothing is made (today's main: silence, and the
/// setting unknown).
#[tokio::test]
async fn warnings_reach_sdk_callers_and_vendor_names_can_be_refused() {
    let Some(f) = Fixture::local().await else { return };
    run(&f, "warnings", PROJECT_KEY, &[]).await;
    let Some(strict) = Fixture::local_with("[skills_api]\nvendor_names = \"refuse\"\n").await else { return };
    run(&strict, "warnings", PROJECT_KEY, &["--refuse"]).await;
    assert_eq!(strict.dial_status(&strict.bucket, "claude-notes", &KEY).await, 404, "nothing made");
}

/// The store operations `/metrics` counted so far, of every kind.
async fn store_operations(f: &Fixture) -> f64 {
    sample(&scrape(&f.client).await, "dial_host_store_operations_total", &[])
}

/// The store operations of one `GET /openai/v1/skills?limit=1` (after one
/// list made the bucket's index whole).
async fn cost_of_a_first_page(f: &Fixture) -> f64 {
    let warm = f.get("/openai/v1/skills?limit=1", &KEY).await;
    assert_eq!(warm.status, 200, "{}", warm.body);
    let before = store_operations(f).await;
    let page = f.get("/openai/v1/skills?limit=1", &KEY).await;
    assert_eq!(page.json()["data"].as_array().map(Vec::len), Some(1), "{}", page.body);
    store_operations(f).await - before
}

/// `count` skills PUT through `/v2` (16 at a time), named `s-00000`, …; and
/// one with a name of 180 characters (its index entry holds a hash).
async fn seed(f: &Fixture, count: usize) {
    let long = "l".repeat(180);
    let names: Vec<String> = (0..count).map(|i| format!("s-{i:05}")).chain(std::iter::once(long)).collect();
    futures_util::stream::iter(names)
        .for_each_concurrent(16, |name| async move {
            // DIAL only warns of a name that is not the folder's.
            let title = if name.len() > 64 { "long-one" } else { name.as_str() };
            let skill_md = format!("---\nname: {title}\ndescription: Seeded.\n---\n");
            put_skill(f, &f.bucket, &name, &skill_md, &KEY).await;
        })
        .await;
}

/// 10 050 skills (and one with a long name) are every one listed through
/// both SDKs, in both orders — on a bucket made before the creation index
/// existed too (its index removed before the first list) — and a page
/// costs a few store operations, as on an empty bucket (today's main: 10 000
/// listed, and a page walked the whole bucket).
#[tokio::test]
async fn the_list_has_no_cap_and_a_page_costs_the_same_however_large_the_bucket() {
    let Some(small) = Fixture::local().await else { return };
    seed(&small, 2).await;
    let small = cost_of_a_first_page(&small).await;
    let Some(f) = Fixture::local().await else { return };
    seed(&f, 10_050).await;
    // As a store written before the index: its entries and completeness gone.
    if let Some(index) = find_dir(&f.server.data_dir, ".dial-created") {
        std::fs::remove_dir_all(index).unwrap();
    }
    let large = cost_of_a_first_page(&f).await;
    assert!(large <= small + 1.0 && large <= 6.0, "a page of 1: {large} store operations at 10 051, {small} at 3");
    let out = run(&f, "walk", PROJECT_KEY, &["--count", "10051"]).await;
    assert_eq!(out["listed"], 10_051, "{out}");
}

/// On S3, a `limit=1` page of a bucket with 300 empty folders and three
/// skills costs a few store operations (today's main: two listings per
/// folder), and listings ask S3 for the keys a page needs (`list_page`,
/// with `max-keys`).
#[tokio::test]
async fn on_s3_a_page_costs_a_few_store_operations_whatever_the_folders() {
    let Some(f) = Fixture::s3().await else { return };
    seed(&f, 2).await;
    let f = &f;
    futures_util::stream::iter(0..300)
        .for_each_concurrent(16, |i| async move {
            let reply = f.client.put_empty(&format!("/v2/skills/{}/empty-{i:03}/", f.bucket), &KEY).await;
            assert!((200..300).contains(&reply.status), "{}", reply.body);
        })
        .await;
    let cost = cost_of_a_first_page(f).await;
    assert!(cost <= 6.0, "a page of 1 with 300 folders: {cost} store operations");
    let listed = sample(&scrape(&f.client).await, "dial_host_store_operations_total", &[("operation", "list_page")]);
    assert!(listed >= 1.0, "listings went through the paged listing");
    let out = run(f, "walk", PROJECT_KEY, &["--count", "3"]).await;
    assert_eq!(out["listed"], 3, "{out}");
}

/// The first directory named `name` below `dir`.
fn find_dir(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        if entry.file_type().ok()?.is_dir() {
            if entry.file_name() == name {
                return Some(entry.path());
            }
            if let Some(found) = find_dir(&entry.path(), name) {
                return Some(found);
            }
        }
    }
    None
}
