//! `/v1/{files|prompts|conversations|applications}/…` and `/v1/metadata/…`
//! end to end: uploads and downloads, JSON documents, applications,
//! conditional requests, listings, limits, access.

use serde_json::{Value, json};

use crate::support::{Reply, Server, Setup, md5_hex};

const OWNER: &str = "owner-key";
const OTHER: &str = "other-key";
/// JSON resources above this are refused (kept small so the test is quick).
const MAX_SIZE: usize = 64 * 1024;
const MAX_FILE_SIZE: usize = 24 << 20;

struct Fixture {
    _setup: Setup,
    server: Server,
    http: reqwest::Client,
    bucket: String,
}

impl Fixture {
    async fn start() -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{OWNER}]\nproject = \"owner\"\nroles = [\"user\"]\n\
             [keys.{OTHER}]\nproject = \"other\"\nroles = [\"user\"]\n[resources]\nmax_size = {MAX_SIZE}\nmax_file_size = {MAX_FILE_SIZE}\n"
        ));
        let server = setup.start(Some(&config), &[]);
        let bucket = server.client().get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"]
            .as_str()
            .unwrap()
            .to_string();
        Self { _setup: setup, server, http: reqwest::Client::new(), bucket }
    }

    /// `/v1/<group>/<bucket>/<path>`.
    fn url(&self, group: &str, path: &str) -> String {
        format!("/v1/{group}/{}/{path}", self.bucket)
    }

    fn metadata(&self, group: &str, path: &str) -> String {
        format!("/v1/metadata/{group}/{}/{path}", self.bucket)
    }

    /// The canonical resource URL as responses and error messages show it.
    fn resource(&self, group: &str, path: &str) -> String {
        format!("{group}/{}/{path}", self.bucket)
    }

    fn request(&self, method: reqwest::Method, path: &str, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.server.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        send(self.request(reqwest::Method::GET, path, &with_owner(headers))).await
    }

    async fn delete(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        send(self.request(reqwest::Method::DELETE, path, &with_owner(headers))).await
    }

    /// PUT a raw body (JSON documents), as the owner unless `headers` says otherwise.
    async fn put_body(&self, path: &str, headers: &[(&str, &str)], body: impl Into<reqwest::Body>) -> Reply {
        send(self.request(reqwest::Method::PUT, path, &with_owner(headers)).body(body)).await
    }

    /// PUT one multipart file part.
    async fn put_file(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        content: Vec<u8>,
        content_type: Option<&str>,
    ) -> Reply {
        let mut part = reqwest::multipart::Part::bytes(content).file_name("upload.bin");
        if let Some(content_type) = content_type {
            part = part.mime_str(content_type).unwrap();
        }
        let form = reqwest::multipart::Form::new().part("attachment", part);
        send(self.request(reqwest::Method::PUT, path, &with_owner(headers)).multipart(form)).await
    }

    async fn put_text_file(&self, path: &str, text: &str) -> Reply {
        let reply = self.put_file(&self.url("files", path), &[], text.as_bytes().to_vec(), Some("text/plain")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply
    }
}

/// The owner's key first; a later `Api-Key` in `headers` replaces it.
fn with_owner<'a>(headers: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    if headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("api-key")) {
        headers.to_vec()
    } else {
        let mut all = vec![("Api-Key", OWNER)];
        all.extend_from_slice(headers);
        all
    }
}

async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body").to_vec();
    let body = String::from_utf8_lossy(&bytes).into_owned();
    Reply { status, headers, body, bytes }
}

fn names(listing: &Value) -> Vec<(String, String)> {
    listing["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {listing}"))
        .iter()
        .map(|i| (i["url"].as_str().unwrap().to_string(), i["nodeType"].as_str().unwrap().to_string()))
        .collect()
}

#[tokio::test]
async fn a_file_round_trips_with_its_content_type_and_etag() {
    let f = Fixture::start().await;
    let content = b"# Notes\nhello\n".to_vec();
    let etag = md5_hex(&content);
    let url = f.url("files", "docs/my%20notes.md");
    let put = f.put_file(&url, &[("If-None-Match", "*")], content.clone(), Some("text/markdown")).await;
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.etag(), etag);
    let body = put.json();
    assert_eq!(body["url"], f.resource("files", "docs/my%20notes.md"));
    assert_eq!(body["name"], "my notes.md");
    assert_eq!(body["parentPath"], "docs");
    assert_eq!(body["bucket"], f.bucket);
    assert_eq!(body["nodeType"], "ITEM");
    assert_eq!(body["resourceType"], "FILE");
    assert_eq!(body["contentLength"], content.len());
    assert_eq!(body["contentType"], "text/markdown");
    assert_eq!(body["etag"], etag);

    let get = f.get(&url, &[]).await;
    assert_eq!(get.status, 200);
    assert_eq!(get.bytes, content);
    assert_eq!(get.headers["content-type"], "text/markdown");
    assert_eq!(get.headers["content-length"], content.len().to_string().as_str());
    assert_eq!(get.etag(), etag);

    let metadata = f.get(&f.metadata("files", "docs/my%20notes.md"), &[]).await;
    assert_eq!(metadata.status, 200, "{}", metadata.body);
    assert_eq!(metadata.json()["etag"], etag);
    assert_eq!(metadata.json()["contentType"], "text/markdown");
    let created_at = metadata.json()["createdAt"].as_i64().unwrap();

    // Conditional requests.
    let cached = f.get(&url, &[("If-None-Match", &format!("\"{etag}\""))]).await;
    assert_eq!((cached.status, cached.etag()), (304, etag.clone()));
    assert_eq!(f.get(&url, &[("If-None-Match", "*")]).await.status, 304);
    assert_eq!(f.get(&url, &[("If-None-Match", "\"other\"")]).await.status, 200);
    let again = f.put_file(&url, &[("If-None-Match", "*")], b"x".to_vec(), None).await;
    assert_eq!((again.status, again.body.as_str()), (412, "Resource already exists"));
    let stale = f.put_file(&url, &[("If-Match", "\"0123\"")], b"x".to_vec(), None).await;
    assert_eq!(stale.status, 412);
    assert_eq!(stale.body, format!("If-match condition is failed for etag: {etag}"));
    let update = f.put_file(&url, &[("If-Match", &format!("\"{etag}\""))], b"v2".to_vec(), None).await;
    assert_eq!(update.status, 200, "{}", update.body);
    assert_eq!(update.etag(), md5_hex(b"v2"));
    assert_eq!(update.json()["contentType"], "application/octet-stream", "a part without a type");
    assert_eq!(update.json()["createdAt"], created_at, "createdAt survives updates");

    let stale_delete = f.delete(&url, &[("If-Match", &etag)]).await;
    assert_eq!(stale_delete.status, 412);
    assert_eq!(f.delete(&url, &[("If-Match", &md5_hex(b"v2"))]).await.status, 200);
    let gone = f.get(&url, &[]).await;
    assert_eq!((gone.status, gone.body), (404, format!("Not found: {}", f.resource("files", "docs/my%20notes.md"))));
    assert_eq!(f.delete(&url, &[]).await.status, 404);
}

#[tokio::test]
async fn a_file_of_several_mib_streams_through_a_multipart_upload() {
    let f = Fixture::start().await;
    // 20 MiB: past the 8 MiB upload buffer, so the store gets several parts.
    let mut content = Vec::with_capacity(20 << 20);
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    while content.len() < 20 << 20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        content.extend_from_slice(&state.to_le_bytes());
    }
    let url = f.url("files", "big/data.bin");
    let put = f.put_file(&url, &[], content.clone(), Some("application/x-test")).await;
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.etag(), md5_hex(&content));
    assert_eq!(put.json()["contentLength"], content.len());

    let get = f.get(&url, &[]).await;
    assert_eq!(get.status, 200);
    assert_eq!(get.headers["content-type"], "application/x-test");
    assert_eq!(get.etag(), md5_hex(&content));
    assert!(get.bytes == content, "the downloaded bytes differ");

    let listing = f.get(&f.metadata("files", "big/"), &[]).await.json();
    assert_eq!(names(&listing), [(f.resource("files", "big/data.bin"), "ITEM".to_string())]);
}

#[tokio::test]
async fn prompts_and_conversations_are_json_whatever_the_content_type() {
    let f = Fixture::start().await;
    for (group, resource_type) in [("prompts", "PROMPT"), ("conversations", "CONVERSATION")] {
        let document = r#"{"id": "x", "messages": [ {"role": "user", "content": "hi"} ]}"#;
        let url = f.url(group, "folder/first");
        let put = f.put_body(&url, &[("Content-Type", "text/plain")], document).await;
        assert_eq!(put.status, 200, "{}", put.body);
        assert_eq!(put.etag(), md5_hex(document.as_bytes()));
        assert_eq!(put.json()["resourceType"], resource_type);
        assert!(put.json().get("contentType").is_none(), "only files have a content type");

        let get = f.get(&url, &[]).await;
        assert_eq!(get.status, 200);
        assert_eq!(get.body, document, "stored exactly as given");
        assert_eq!(get.headers["content-type"], "application/json");
        assert_eq!(get.etag(), md5_hex(document.as_bytes()));

        let invalid = f.put_body(&url, &[("Content-Type", "application/json")], "{not json").await;
        assert_eq!(invalid.status, 400);
        assert!(invalid.body.starts_with("Failed to parse json"), "{}", invalid.body);
        let empty = f.put_body(&url, &[], "").await;
        assert_eq!(empty.status, 400, "{}", empty.body);
        assert_eq!(f.get(&url, &[]).await.body, document, "failed writes change nothing");
    }

    let oversized = format!("{{\"text\": \"{}\"}}", "x".repeat(MAX_SIZE));
    let too_large = f.put_body(&f.url("prompts", "big"), &[], oversized.clone()).await;
    assert_eq!(too_large.status, 413);
    assert_eq!(too_large.body, format!("Resource size: {} exceeds max limit: {MAX_SIZE}", oversized.len()));
    assert_eq!(f.get(&f.url("prompts", "big"), &[]).await.status, 404);

    // Refused bodies far larger than the socket buffers still get their 413
    // (the server drains what is left instead of resetting the connection).
    let huge = format!("{{\"text\": \"{}\"}}", "x".repeat(3 << 20));
    for _ in 0..3 {
        assert_eq!(f.put_body(&f.url("prompts", "big"), &[], huge.clone()).await.status, 413);
    }
    let reply = f.put_file(&f.url("files", "big.bin"), &[], vec![b'x'; MAX_FILE_SIZE + (2 << 20)], None).await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(f.get(&f.url("files", "big.bin"), &[]).await.status, 404);
}

#[tokio::test]
async fn applications_take_camel_case_and_are_stored_in_snake_case() {
    // (`resourceDependencies`, which only admins may declare, round-trips in dependencies.rs.)
    let f = Fixture::start().await;
    let url = f.url("applications", "my-app");
    let definition = json!({
        "displayName": "My App",
        "displayVersion": "1.0",
        "iconUrl": "https://example.com/icon.png",
        "description": "does things",
        "endpoint": "http://app.local/chat/completions",
        "inputAttachmentTypes": ["image/png"],
        "features": {"systemPromptSupported": true, "consentRequired": false},
        "mcp": {"endpoint": "http://app.local/mcp", "forwardPerRequestKey": false},
        "defaults": {"maxTokens": 100},
    });
    let put = f.put_body(&url, &[("Content-Type", "text/plain")], definition.to_string()).await;
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.json()["resourceType"], "APPLICATION");

    let get = f.get(&url, &[]).await;
    assert_eq!(get.status, 200);
    assert_eq!(get.etag(), put.etag());
    assert_eq!(get.etag(), md5_hex(&get.bytes), "the etag is the MD5 of what is stored");
    assert_eq!(
        get.json(),
        json!({
            "display_name": "My App",
            "display_version": "1.0",
            "icon_url": "https://example.com/icon.png",
            "description": "does things",
            "endpoint": "http://app.local/chat/completions",
            "input_attachment_types": ["image/png"],
            "features": {"system_prompt_supported": true, "consent_required": false},
            "mcp": {"endpoint": "http://app.local/mcp", "forward_per_request_key": false},
            "defaults": {"maxTokens": 100},
        })
    );

    for (invalid, expected) in [
        (json!({"displayName": "no endpoint"}), "application endpoint, interfaces or mcp must be provided"),
        (json!(["not", "an", "object"]), "the definition must be a JSON object"),
        (json!({"endpoint": 42}), "endpoint must be a string"),
        (json!({"mcp": {"transport": "http"}}), "mcp.endpoint must be provided"),
    ] {
        let reply = f.put_body(&f.url("applications", "bad"), &[], invalid.to_string()).await;
        assert_eq!(reply.status, 400, "{invalid}: {}", reply.body);
        assert!(reply.body.starts_with("Invalid application: "), "{}", reply.body);
        assert!(reply.body.contains(expected), "{}", reply.body);
    }
    let interfaces = json!({"interfaces": {"responses": {"endpoint": "http://app.local/responses"}}});
    assert_eq!(f.put_body(&f.url("applications", "responses-only"), &[], interfaces.to_string()).await.status, 200);
}

#[tokio::test]
async fn listings_with_folders_recursion_and_pages() {
    let f = Fixture::start().await;
    for path in ["a/1.txt", "a/2.txt", "a/b/3.txt", "a/b/c/4.txt", "top.txt", "z/5.txt"] {
        f.put_text_file(path, path).await;
    }

    let root = f.get(&f.metadata("files", ""), &[]).await;
    assert_eq!(root.status, 200, "{}", root.body);
    let root = root.json();
    assert_eq!(root["nodeType"], "FOLDER");
    assert_eq!(root["resourceType"], "FILE");
    assert_eq!(root["url"], f.resource("files", ""));
    assert!(root.get("nextToken").is_none());
    assert_eq!(
        names(&root),
        [
            (f.resource("files", "a/"), "FOLDER".into()),
            (f.resource("files", "top.txt"), "ITEM".into()),
            (f.resource("files", "z/"), "FOLDER".into()),
        ]
    );
    let folder = &root["items"][0];
    assert_eq!(folder["name"], "a");
    assert!(folder["items"].is_null());
    let item = &root["items"][1];
    assert_eq!(item["contentType"], "text/plain");
    assert_eq!(item["contentLength"], "top.txt".len());
    assert!(item["createdAt"].as_i64().unwrap() > 0 && item["updatedAt"].as_i64().unwrap() > 0);
    assert!(item.get("etag").is_none(), "listings carry no etag");

    let nested = f.get(&f.metadata("files", "a/b/"), &[]).await.json();
    assert_eq!(nested["name"], "b");
    assert_eq!(nested["parentPath"], "a");
    assert_eq!(
        names(&nested),
        [(f.resource("files", "a/b/3.txt"), "ITEM".into()), (f.resource("files", "a/b/c/"), "FOLDER".into())]
    );
    assert_eq!(nested["items"][0]["parentPath"], "a/b");

    let recursive = f.get(&format!("{}?recursive=true", f.metadata("files", "a/")), &[]).await.json();
    let expected: Vec<(String, String)> = ["a/1.txt", "a/2.txt", "a/b/3.txt", "a/b/c/4.txt"]
        .iter()
        .map(|p| (f.resource("files", p), "ITEM".to_string()))
        .collect();
    assert_eq!(names(&recursive), expected);

    // Pages of one, following nextToken, recursive and not.
    for (query, count) in [("recursive=true&", 6), ("", 3)] {
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..10 {
            let page_url = match &token {
                Some(token) => format!("{}?{query}limit=1&token={token}", f.metadata("files", "")),
                None => format!("{}?{query}limit=1", f.metadata("files", "")),
            };
            let page = f.get(&page_url, &[]).await;
            assert_eq!(page.status, 200, "{}", page.body);
            let page = page.json();
            assert!(page["items"].as_array().unwrap().len() <= 1);
            seen.extend(names(&page));
            match page["nextToken"].as_str() {
                Some(next) => token = Some(next.to_string()),
                None => break,
            }
        }
        assert_eq!(seen.len(), count, "{seen:?}");
        let mut unique = seen.clone();
        unique.dedup();
        assert_eq!(unique, seen, "pages do not repeat");
    }

    let bad_limit = f.get(&format!("{}?limit=1001", f.metadata("files", "")), &[]).await;
    assert_eq!(bad_limit.status, 400);
    assert!(bad_limit.body.contains("Limit must be in [0, 1000] range"), "{}", bad_limit.body);
    assert_eq!(f.get(&format!("{}?limit=1000", f.metadata("files", "")), &[]).await.status, 200);
    assert_eq!(f.get(&format!("{}?recursive=maybe", f.metadata("files", "")), &[]).await.status, 400);

    // Empty bucket root: 200 and no items; missing folder or item: 404.
    let prompts = f.get(&f.metadata("prompts", ""), &[]).await;
    assert_eq!(prompts.status, 200);
    assert_eq!(prompts.json()["items"], json!([]));
    let missing = f.get(&f.metadata("files", "nothing/"), &[]).await;
    assert_eq!((missing.status, missing.body), (404, format!("Not found: {}", f.resource("files", "nothing/"))));
    assert_eq!(f.get(&f.metadata("files", "a/missing.txt"), &[]).await.status, 404);

    // A folder disappears with its last item.
    assert_eq!(f.delete(&f.url("files", "z/5.txt"), &[]).await.status, 200);
    assert_eq!(f.get(&f.metadata("files", "z/"), &[]).await.status, 404);
    let root = f.get(&f.metadata("files", ""), &[]).await.json();
    assert_eq!(names(&root).len(), 2, "{root}");

    let typed = f.get(&f.metadata("files", ""), &[("Accept", "application/vnd.dial.metadata+json")]).await;
    assert_eq!(typed.headers["content-type"], "application/vnd.dial.metadata+json");
}

#[tokio::test]
async fn other_users_folders_and_bad_urls_are_refused() {
    let f = Fixture::start().await;
    f.put_text_file("private.txt", "mine").await;
    f.put_body(&f.url("prompts", "p"), &[], "{}").await;

    let other = [("Api-Key", OTHER)];
    let denied = |reply: &Reply, url: &str| {
        assert_eq!(reply.status, 403, "{url}: {}", reply.body);
        assert_eq!(reply.body, format!("You don't have an access to: {url}"));
    };
    denied(&f.get(&f.url("files", "private.txt"), &other).await, &f.resource("files", "private.txt"));
    denied(&f.get(&f.metadata("files", "private.txt"), &other).await, &f.resource("files", "private.txt"));
    denied(&f.get(&f.metadata("files", ""), &other).await, &f.resource("files", ""));
    denied(&f.put_body(&f.url("prompts", "p"), &other, "{}").await, &f.resource("prompts", "p"));
    denied(
        &f.put_file(&f.url("files", "private.txt"), &other, b"theirs".to_vec(), None).await,
        &f.resource("files", "private.txt"),
    );
    denied(&f.delete(&f.url("files", "private.txt"), &other).await, &f.resource("files", "private.txt"));
    assert_eq!(f.get(&f.url("files", "private.txt"), &[]).await.body, "mine", "untouched");

    let folder_put = f.put_body(&f.url("prompts", "folder/"), &[], "{}").await;
    assert_eq!(
        (folder_put.status, folder_put.body),
        (400, format!("Folder not allowed: {}", f.resource("prompts", "folder/")))
    );
    let folder_file = f.put_file(&f.url("files", "dir/"), &[], b"x".to_vec(), None).await;
    assert_eq!(folder_file.status, 400);
    assert!(folder_file.body.starts_with("Folder not allowed"), "{}", folder_file.body);

    assert_eq!(f.get(&f.url("files", "a//b"), &[]).await.status, 400);
    assert_eq!(f.put_body(&f.url("prompts", "name."), &[], "{}").await.status, 400);
    let forged = f.get("/v1/files/forgedBucket123/x", &[]).await;
    assert_eq!(forged.status, 400, "{}", forged.body);
    let not_multipart = f.put_body(&f.url("files", "raw.txt"), &[], "raw bytes").await;
    assert_eq!(not_multipart.status, 400, "{}", not_multipart.body);
    assert_eq!(f.get(&f.metadata("skills", "x"), &[]).await.status, 404, "not a v1 group");
    let unauthenticated = send(f.http.get(format!("{}{}", f.server.url, f.url("files", "private.txt")))).await;
    assert_eq!(unauthenticated.status, 401);
}

/// On the local store an item cannot hold another item (a file is not a
/// directory): 409 naming the item in the way, as for a folder in the way —
/// never a 500 — on every v1 group and for large (multipart) files too.
#[tokio::test]
async fn an_item_below_an_item_is_a_conflict_not_a_server_error() {
    let f = Fixture::start().await;
    let prompt = f.put_body(&f.url("prompts", "a"), &[], r#"{"content": "x"}"#).await;
    assert_eq!(prompt.status, 200, "{}", prompt.body);
    let below = f.put_body(&f.url("prompts", "a/child"), &[], r#"{"content": "y"}"#).await;
    assert_eq!(below.status, 409, "{}", below.body);
    assert!(below.body.contains(&f.resource("prompts", "a")), "{}", below.body);
    let deeper = f.put_body(&f.url("prompts", "a/b/c"), &[], r#"{"content": "y"}"#).await;
    assert_eq!(deeper.status, 409, "{}", deeper.body);

    f.put_text_file("notes.txt", "x").await;
    let small = f.put_file(&f.url("files", "notes.txt/inner.txt"), &[], b"y".to_vec(), None).await;
    assert_eq!(small.status, 409, "{}", small.body);
    let large = f.put_file(&f.url("files", "notes.txt/big.bin"), &[], vec![7; 9 << 20], None).await;
    assert_eq!(large.status, 409, "{}", large.body);
    assert_eq!(f.get(&f.url("prompts", "a"), &[]).await.status, 200, "the item in the way is untouched");
}

/// An `If-Match` that is not ASCII still is a condition: it matches no etag,
/// so the write is refused instead of going ahead unconditionally.
#[tokio::test]
async fn a_non_ascii_if_match_fails_the_precondition() {
    let f = Fixture::start().await;
    let url = f.url("prompts", "p");
    let put = f.put_body(&url, &[], r#"{"v": 1}"#).await;
    assert_eq!(put.status, 200);
    let value = reqwest::header::HeaderValue::from_bytes(b"\"caf\xe9\"").unwrap();
    let request = f.request(reqwest::Method::PUT, &url, &[("Api-Key", OWNER)]).header("If-Match", value.clone());
    let reply = send(request.body(r#"{"v": 2}"#)).await;
    assert_eq!(reply.status, 412, "{}", reply.body);
    let delete = send(f.request(reqwest::Method::DELETE, &url, &[("Api-Key", OWNER)]).header("If-Match", value)).await;
    assert_eq!(delete.status, 412, "{}", delete.body);
    assert_eq!(f.get(&url, &[]).await.body, r#"{"v": 1}"#);
}

/// Uploaded bytes are never rendered as a page of the API's origin: every
/// file is `nosniff` and sandboxed, and active types (HTML, SVG) download.
#[tokio::test]
async fn served_files_are_never_rendered_as_pages() {
    let f = Fixture::start().await;
    for (name, content_type, active) in
        [("page.html", "text/html", true), ("logo.svg", "image/svg+xml", true), ("notes.txt", "text/plain", false)]
    {
        let url = f.url("files", name);
        let put = f.put_file(&url, &[], b"<script>alert(1)</script>".to_vec(), Some(content_type)).await;
        assert_eq!(put.status, 200, "{}", put.body);
        let get = f.get(&url, &[]).await;
        assert_eq!(get.headers["x-content-type-options"], "nosniff", "{name}");
        assert_eq!(get.headers["content-security-policy"], "sandbox", "{name}");
        let disposition = get.headers["content-disposition"].to_str().unwrap();
        assert_eq!(disposition.starts_with("attachment"), active, "{name}: {disposition}");
    }
}

#[tokio::test]
async fn a_file_upload_is_exactly_one_file_part() {
    let f = Fixture::start().await;
    let url = f.url("files", "one.txt");
    let etag = f.put_text_file("one.txt", "first").await.etag();
    let file = |name: &str, text: &str| reqwest::multipart::Part::text(text.to_string()).file_name(name.to_string());
    let put =
        |form: reqwest::multipart::Form| send(f.request(reqwest::Method::PUT, &url, &with_owner(&[])).multipart(form));

    let two_files =
        reqwest::multipart::Form::new().part("a", file("a.txt", "second")).part("b", file("b.txt", "third"));
    let reply = put(two_files).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Exactly one file part is required"));
    let kept = f.get(&url, &[]).await;
    assert_eq!((kept.body.as_str(), kept.etag()), ("first", etag.clone()), "the first file is not stored alone");

    let no_file = reqwest::multipart::Form::new().text("note", "not a file");
    let reply = put(no_file).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Exactly one file part is required"));

    // Form fields (parts without a filename) are ignored wherever they are, as in DIAL.
    let with_fields =
        reqwest::multipart::Form::new().text("before", "x").part("file", file("a.txt", "second")).text("after", "y");
    let reply = put(with_fields).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(f.get(&url, &[]).await.body, "second");

    let created = f.url("files", "two.txt");
    let two_files = reqwest::multipart::Form::new().part("a", file("a.txt", "a")).part("b", file("b.txt", "b"));
    let reply = send(f.request(reqwest::Method::PUT, &created, &with_owner(&[])).multipart(two_files)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(f.get(&created, &[]).await.status, 404);
}

#[tokio::test]
async fn json_documents_must_be_utf8() {
    let f = Fixture::start().await;
    for (group, body) in [
        ("prompts", &b"{\"id\": \"\xff\xfe\"}"[..]),
        ("conversations", &b"{\"id\": \"\xff\xfe\"}"[..]),
        ("applications", &b"{\"endpoint\": \"http://a\", \"description\": \"\xc3\"}"[..]),
    ] {
        let url = f.url(group, "not-utf8");
        let reply = f.put_body(&url, &[("Content-Type", "application/json")], body.to_vec()).await;
        assert_eq!(reply.status, 400, "{group}: {}", reply.body);
        assert!(reply.body.starts_with("Failed to parse json: "), "{group}: {}", reply.body);
        assert!(reply.body.contains("UTF-8"), "{group}: {}", reply.body);
        assert_eq!(f.get(&url, &[]).await.status, 404, "{group}: nothing stored");
    }
}

/// `?permissions=true` adds the caller's permissions to the node and its
/// items; a listing below an item (which the local store cannot hold) is 404.
#[tokio::test]
async fn metadata_carries_permissions_and_nothing_lists_below_an_item() {
    let f = Fixture::start().await;
    f.put_text_file("docs/a.txt", "a").await;
    let listing = f.get(&format!("{}?permissions=true", f.metadata("files", "docs/")), &[]).await.json();
    assert_eq!(listing["permissions"], json!(["READ", "WRITE"]), "{listing}");
    assert_eq!(listing["items"][0]["permissions"], json!(["READ", "WRITE"]), "{listing}");
    let item = f.get(&format!("{}?permissions=true", f.metadata("files", "docs/a.txt")), &[]).await.json();
    assert_eq!(item["permissions"], json!(["READ", "WRITE"]));
    assert!(f.get(&f.metadata("files", "docs/"), &[]).await.json().get("permissions").is_none());
    let below = f.get(&f.metadata("files", "docs/a.txt/"), &[]).await;
    assert_eq!(below.status, 404, "{}", below.body);
}
