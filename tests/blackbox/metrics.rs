//! `GET /metrics` (SPEC §10): scraped as Prometheus would, its numbers move
//! with the traffic — requests by route template, bytes, handler calls,
//! store operations, lock waits, the sweep and per-request keys — and no
//! series names a bucket or a path.

use std::time::{Duration, Instant};

use crate::support::{Client, Server, Setup, files_below, sample, scrape};
use crate::upstream::{MockApp, run_client_async};

const OWNER: &str = "metrics-owner-key";

fn skill_md(description: &str) -> Vec<u8> {
    format!("---\nname: s\ndescription: {description}\n---\n# s\n").into_bytes()
}

struct Fixture {
    _setup: Setup,
    server: Server,
    client: Client,
    bucket: String,
}

async fn start(extra: &str) -> Fixture {
    let setup = Setup::new();
    let config = setup.config(&format!(
        "[encryption]\nsecret = \"s\"\n[keys.{OWNER}]\nproject = \"owner\"\nroles = [\"user\"]\n\
         [folders]\ngrace_seconds = 1\ngc_interval_seconds = 1\n{extra}"
    ));
    let server = setup.start(Some(&config), &[]);
    let client = server.client();
    let bucket = client.get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"].as_str().unwrap().to_string();
    Fixture { _setup: setup, server, client, bucket }
}

#[tokio::test]
async fn metrics_move_with_the_traffic_and_name_no_resource() {
    // Keeping one version makes the first one garbage the moment the second commits.
    let f = start("keep_versions = 1\n").await;
    let owner = [("Api-Key", OWNER)];
    let url = format!("/v2/skills/{}/reports/quarterly", f.bucket);
    let before = scrape(&f.client).await;
    let puts = |text: &str| {
        sample(text, "dial_host_http_requests_total", &[("route", "/v2/{*path}"), ("method", "PUT"), ("status", "200")])
    };

    // Two versions (the first becomes garbage for the sweep), a read, a miss, a refusal.
    let first = vec![b'x'; 4096];
    let files: [(&str, &[u8]); 2] = [("SKILL.md", &skill_md("first")), ("data.txt", &first)];
    assert_eq!(f.client.put_files(&url, &owner, &files).await.status, 200);
    assert_eq!(f.client.put_files(&url, &owner, &[("SKILL.md", &skill_md("second"))]).await.status, 200);
    let zip = f.client.get(&url, &owner).await;
    assert_eq!(zip.status, 200);
    assert_eq!(f.client.get(&format!("{url}-missing"), &owner).await.status, 404);
    assert_eq!(f.client.get(&url, &[]).await.status, 401);

    let after = scrape(&f.client).await;
    assert_eq!(puts(&after) - puts(&before), 2.0, "{after}");
    let get = |status: &str| {
        sample(
            &after,
            "dial_host_http_requests_total",
            &[("route", "/v2/{*path}"), ("method", "GET"), ("status", status)],
        )
    };
    assert_eq!((get("200"), get("404"), get("401")), (1.0, 1.0, 1.0), "{after}");
    let count = sample(&after, "dial_host_http_request_duration_seconds_count", &[("route", "/v2/{*path}")]);
    assert!(count >= 5.0, "{after}");
    let bytes_in = sample(&after, "dial_host_http_request_bytes_total", &[("route", "/v2/{*path}")]);
    assert!(bytes_in >= first.len() as f64, "the uploads' bytes: {bytes_in}");
    let bytes_out = sample(&after, "dial_host_http_response_bytes_total", &[("route", "/v2/{*path}")]);
    assert!(bytes_out >= zip.bytes.len() as f64, "the ZIP's bytes: {bytes_out}");

    let check = [("handler", "skill@0.1.0"), ("call", "check"), ("outcome", "ok")];
    assert!(sample(&after, "dial_host_handler_calls_total", &check) >= 2.0, "{after}");
    assert!(sample(&after, "dial_host_handler_call_duration_seconds_count", &check) >= 2.0, "{after}");
    let store_op = |operation: &str, outcome: &str| {
        sample(&after, "dial_host_store_operations_total", &[("operation", operation), ("outcome", outcome)])
    };
    assert!(store_op("put", "ok") >= 2.0 && store_op("get", "ok") >= 1.0, "{after}");
    assert!(store_op("get", "not_found") >= 1.0, "{after}");
    assert!(sample(&after, "dial_host_store_operation_duration_seconds_count", &[("operation", "put")]) >= 2.0);
    assert!(sample(&after, "dial_host_lock_wait_seconds_count", &[("backend", "in_process")]) >= 2.0, "{after}");

    // Route templates only: no bucket id, resource name or unmatched path.
    assert_eq!(f.client.get("/no/such/route/secret-name", &owner).await.status, 404);
    let text = scrape(&f.client).await;
    assert!(sample(&text, "dial_host_http_requests_total", &[("route", "unmatched"), ("status", "404")]) >= 1.0);
    for private in [f.bucket.as_str(), "quarterly", "secret-name", OWNER] {
        assert!(!text.contains(private), "{private} appears in /metrics");
    }

    // The sweep (grace 1 s, every second) reclaims the superseded version.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = scrape(&f.client).await;
        let objects = sample(&text, "dial_host_gc_objects_deleted_total", &[]);
        let bytes = sample(&text, "dial_host_gc_bytes_deleted_total", &[]);
        if objects >= 1.0 {
            assert!(bytes >= first.len() as f64, "the first version's data.txt: {bytes}");
            assert!(sample(&text, "dial_host_gc_sweeps_total", &[("outcome", "ok")]) >= 1.0);
            break;
        }
        assert!(Instant::now() < deadline, "no sweep deleted anything within 20 s:\n{text}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Deleted resources cost nothing once their grace period is over (issue
/// 23): the sweep leaves no object of them in the store, and a listing of a
/// folder where most resources were deleted makes as many store requests as
/// one of a folder that only ever held its live resources (the purged
/// markers used to stay, read on every listing).
#[tokio::test]
async fn deleted_resources_leave_nothing_and_cost_listings_nothing_once_swept() {
    const LIVE: usize = 4;
    const DELETED: usize = 36;
    let f = start("").await;
    let owner = [("Api-Key", OWNER)];
    let url = |path: &str| format!("/v2/skills/{}/{path}", f.bucket);
    let files: [(&str, &[u8]); 2] = [("SKILL.md", &skill_md("s")), ("data.txt", b"data")];
    for i in 0..LIVE {
        for folder in ["few", "many"] {
            assert_eq!(f.client.put_files(&url(&format!("{folder}/live-{i}")), &owner, &files).await.status, 200);
        }
    }
    for i in 0..DELETED {
        assert_eq!(f.client.put_files(&url(&format!("many/gone-{i}")), &owner, &files).await.status, 200);
        assert_eq!(f.client.delete(&url(&format!("many/gone-{i}")), &owner).await.status, 200);
    }

    // The sweep (grace 1 s, every second) removes every object of them.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left: Vec<_> = files_below(&f.server.data_dir)
            .into_iter()
            .filter(|path| path.to_string_lossy().contains("/gone-"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the sweep left {} objects of deleted resources: {left:?}", left.len());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // What a listing page asks the store (reads and listings: the sweep,
    // idle now, only lists its journal).
    let requests = |text: &str| {
        ["get", "head", "get_ranges", "list_with_delimiter"]
            .iter()
            .map(|operation| sample(text, "dial_host_store_operations_total", &[("operation", operation)]))
            .sum::<f64>()
    };
    let mut cost = Vec::new();
    for folder in ["few/", "many/"] {
        let before = scrape(&f.client).await;
        let listing = f.client.get(&format!("/v2/metadata/skills/{}/{folder}", f.bucket), &owner).await;
        assert_eq!(listing.status, 200, "{}", listing.body);
        assert_eq!(listing.json()["items"].as_array().unwrap().len(), LIVE, "{}", listing.body);
        cost.push(requests(&scrape(&f.client).await) - requests(&before));
    }
    assert!(
        cost[1] <= cost[0] + 2.0,
        "a listing of {LIVE} live resources beside {DELETED} deleted ones: {cost:?} requests"
    );
}

/// A call through a deployment mints a key: the counter moves, the gauge is
/// up while the call is open (the mock application holds its stream) and
/// back down once the answer has been relayed.
#[tokio::test]
async fn per_request_keys_are_counted_while_alive() {
    let Some(mock) = MockApp::start(None) else { return };
    let app = mock.url();
    let f = start(&format!("[applications.echo]\nendpoint = \"{app}/chat/completions\"\n")).await;
    mock.set_host_url(&f.server.url).await;
    let before = scrape(&f.client).await;
    let minted = |text: &str| sample(text, "dial_host_per_request_keys_minted_total", &[]);
    let alive = |text: &str| sample(text, "dial_host_per_request_keys_alive", &[]);
    assert_eq!(alive(&before), 0.0);

    let base = format!("{}/openai/deployments/echo", f.server.url);
    let args = ["--base-url", base.as_str(), "--api-key", OWNER, "--message", "appdata hold", "--stream"];
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(30);
        let during = loop {
            let text = scrape(&f.client).await;
            if alive(&text) >= 1.0 || Instant::now() > deadline {
                break text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        mock.release().await;
        during
    };
    let (result, during) = tokio::join!(run_client_async("openai_client.py", &args), watch);
    assert!(result.get("error").is_none(), "{result}");
    assert_eq!(alive(&during), 1.0, "while the call is open: {during}");
    assert_eq!(minted(&during) - minted(&before), 1.0, "{during}");

    // Revoked once the answer has been relayed.
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        let text = scrape(&f.client).await;
        if alive(&text) == 0.0 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(alive(&after), 0.0, "{after}");
    let chat = [("route", "/openai/deployments/{*rest}"), ("method", "POST"), ("status", "200")];
    assert_eq!(sample(&after, "dial_host_http_requests_total", &chat), 1.0, "{after}");
    // The application's callbacks with its key are requests too.
    assert!(sample(&after, "dial_host_http_requests_total", &[("route", "/v1/bucket")]) >= 2.0, "{after}");
}

/// A warm v1 listing reads no item that did not change: what it shows
/// comes from the store's listing and the metadata kept by location and
/// etag; a changed item (a new etag) is read again, on any instance.
#[tokio::test]
async fn a_warm_v1_listing_reads_only_what_changed() {
    const FILES: usize = 30;
    let f = start("").await;
    let owner = [("Api-Key", OWNER)];
    let file = |i: usize| format!("/v1/files/{}/docs/f{i:02}.txt", f.bucket);
    for i in 0..FILES {
        assert_eq!(f.client.put_files(&file(i), &owner, &[("f.txt", b"one")]).await.status, 200);
    }
    let reads = |text: &str| {
        ["get", "head", "get_ranges"]
            .iter()
            .map(|operation| sample(text, "dial_host_store_operations_total", &[("operation", operation)]))
            .sum::<f64>()
    };
    let listing = format!("/v1/metadata/files/{}/docs/", f.bucket);
    let mut cost = Vec::new();
    let mut etags = Vec::new();
    for changed in [0, 0, 3] {
        for i in 0..changed {
            assert_eq!(f.client.put_files(&file(i), &owner, &[("f.txt", b"two!")]).await.status, 200);
        }
        let before = scrape(&f.client).await;
        let listed = f.client.get(&listing, &owner).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
        let items = listed.json()["items"].as_array().unwrap().clone();
        assert_eq!(items.len(), FILES);
        // The new content is one byte longer: the listing shows its length.
        etags.push(items.iter().map(|item| item["contentLength"].as_u64().unwrap()).collect::<Vec<_>>());
        cost.push(reads(&scrape(&f.client).await) - reads(&before));
    }
    assert!(cost[0] >= FILES as f64, "a cold listing reads every item: {cost:?}");
    assert_eq!(cost[1], 0.0, "a warm listing of unchanged items reads nothing: {cost:?}");
    assert_eq!(cost[2], 3.0, "three changed items are read again, nothing else: {cost:?}");
    assert_eq!(etags[0], etags[1]);
    let changed: Vec<usize> = (0..FILES).filter(|i| etags[1][*i] != etags[2][*i]).collect();
    assert_eq!(changed, [0, 1, 2], "the listing shows the new versions at once");
}

/// A warm v2 listing reads no marker that did not change (issue 28): the
/// folder's two index listings say which changed; the one other read is
/// the access check's question whether the folder URL names a resource.
#[tokio::test]
async fn a_warm_v2_listing_reads_only_the_markers_that_changed() {
    const SKILLS: usize = 30;
    let f = start("").await;
    let owner = [("Api-Key", OWNER)];
    let skill = |i: usize| format!("/v2/skills/{}/docs/s{i:02}", f.bucket);
    let (one, two) = (skill_md("one"), skill_md("two"));
    for i in 0..SKILLS {
        assert_eq!(f.client.put_files(&skill(i), &owner, &[("SKILL.md", &one)]).await.status, 200);
    }
    let count = |text: &str, operations: &[&str]| {
        operations
            .iter()
            .map(|operation| sample(text, "dial_host_store_operations_total", &[("operation", operation)]))
            .sum::<f64>()
    };
    let listing = format!("/v2/metadata/skills/{}/docs/", f.bucket);
    let mut reads = Vec::new();
    let mut listings = Vec::new();
    let mut shown = Vec::new();
    for changed in [0, 0, 3] {
        for i in 0..changed {
            assert_eq!(f.client.put_files(&skill(i), &owner, &[("SKILL.md", &two)]).await.status, 200);
        }
        let before = scrape(&f.client).await;
        let listed = f.client.get(&listing, &owner).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
        let items = listed.json()["items"].as_array().unwrap().clone();
        assert_eq!(items.len(), SKILLS);
        shown.push(items.iter().map(|item| item["etag"].to_string()).collect::<Vec<_>>());
        let after = scrape(&f.client).await;
        reads.push(count(&after, &["get", "head", "get_ranges"]) - count(&before, &["get", "head", "get_ranges"]));
        listings
            .push(count(&after, &["list", "list_with_delimiter"]) - count(&before, &["list", "list_with_delimiter"]));
    }
    assert!(reads[0] >= SKILLS as f64, "a cold listing reads every marker: {reads:?}");
    assert_eq!(reads[1], 1.0, "a warm listing reads no marker, only whether docs/ is a resource: {reads:?}");
    assert_eq!(reads[2], 4.0, "three changed markers are read again, nothing else: {reads:?}");
    assert_eq!(listings, [2.0, 2.0, 2.0], "one listing of each index per page");
    let differ: Vec<usize> = (0..SKILLS).filter(|i| shown[1][*i] != shown[2][*i]).collect();
    assert_eq!(differ, [0, 1, 2], "the listing shows the new versions at once");
}

/// `permissions=true` costs one read of the access state per listing, not
/// one per item: a user's warm listing of a public folder of 20 prompts
/// reads the public rules three times — the access check of the folder, the
/// listing's filter, and once for every node's permissions — and nothing
/// per item.
#[tokio::test]
async fn permissions_on_a_listing_read_the_access_state_once() {
    const PROMPTS: usize = 20;
    let f = start("[keys.metrics-admin]\nproject = \"ops\"\nroles = [\"admin\"]\n").await;
    let admin = [("Api-Key", "metrics-admin")];
    for i in 0..PROMPTS {
        let put = f.client.put_body(&format!("/v1/prompts/public/team/p{i:02}"), &admin, b"{\"p\":1}").await;
        assert_eq!(put.status, 200, "{}", put.body);
    }
    let reads = |text: &str| {
        ["get", "head", "get_ranges"]
            .iter()
            .map(|operation| sample(text, "dial_host_store_operations_total", &[("operation", operation)]))
            .sum::<f64>()
    };
    let listing = "/v1/metadata/prompts/public/team/?permissions=true";
    let mut cost = Vec::new();
    for _ in 0..2 {
        let before = scrape(&f.client).await;
        let listed = f.client.get(listing, &[("Api-Key", OWNER)]).await;
        assert_eq!(listed.status, 200, "{}", listed.body);
        let body = listed.json();
        let items = body["items"].as_array().unwrap();
        assert_eq!(items.len(), PROMPTS);
        assert!(items.iter().all(|item| item["permissions"] == serde_json::json!(["READ"])), "{body}");
        assert_eq!(body["permissions"], serde_json::json!(["READ"]));
        cost.push(reads(&scrape(&f.client).await) - reads(&before));
    }
    assert!(cost[1] <= 3.0, "a warm listing reads the rules a fixed number of times, none per item: {cost:?}");
}
