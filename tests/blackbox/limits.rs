//! Bounds on what one request can make the server hold: multipart part
//! headers (never buffered past 16 KiB) and large JSON documents (parsed
//! without a tree of the whole document). Each test reads the server's peak
//! resident set size (`VmHWM`) around the request.

use bytes::Bytes;
use serde_json::Value;

use crate::support::{Client, Server, Setup, md5_hex};

const OWNER: &str = "owner-key";
const BOUNDARY: &str = "bounded-test-boundary";
/// What an upload of many MiB may add to the server's peak memory when the
/// server reads only its first 16 KiB (and drains 4 MiB of the rest).
const REFUSED_UPLOAD_GROWTH_MIB: u64 = 16;

struct Fixture {
    _setup: Setup,
    server: Server,
    client: Client,
    bucket: String,
}

impl Fixture {
    /// A server with the default limits (64 MiB JSON documents).
    async fn start() -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{OWNER}]\nproject = \"owner\"\nroles = [\"user\"]\n"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let bucket =
            client.get("/v1/bucket", &[("Api-Key", OWNER)]).await.json()["bucket"].as_str().unwrap().to_string();
        Self { _setup: setup, server, client, bucket }
    }

    /// `/<api>/<group>/<bucket>/<path>`.
    fn url(&self, api_group: &str, path: &str) -> String {
        format!("/{api_group}/{}/{path}", self.bucket)
    }

    /// Sends a multipart body in `chunks` over a plain socket (the server
    /// answers a refused upload before reading it all); returns the reply
    /// and how many MiB the server's peak memory grew meanwhile.
    async fn put_multipart(&self, url: &str, chunks: Vec<Bytes>) -> (crate::support::Reply, u64) {
        let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
        let before = self.server.reset_peak_rss();
        let headers = [("Api-Key", OWNER), ("Content-Type", content_type.as_str())];
        let reply = self.client.send_raw("PUT", url, &headers, chunks).await;
        let growth = self.server.peak_rss_kib().saturating_sub(before) / 1024;
        (reply, growth)
    }
}

/// `prefix`, then `mib` MiB of `filler`: a body far larger than any buffer
/// the server may keep, without allocating it here.
fn endless(prefix: &str, filler: u8, mib: usize) -> Vec<Bytes> {
    let block = Bytes::from(vec![filler; 1 << 20]);
    std::iter::once(Bytes::from(prefix.to_string())).chain(std::iter::repeat_n(block, mib)).collect()
}

#[tokio::test]
async fn endless_part_headers_and_preambles_are_refused_in_bounded_memory() {
    let f = Fixture::start().await;
    let skill = b"---\nname: s\ndescription: d\n---\n# s\n";
    assert_eq!(
        f.client.put_files(&f.url("v2/skills", "s"), &[("Api-Key", OWNER)], &[("SKILL.md", skill)]).await.status,
        200
    );

    // One part header line that never ends, 64 MiB long.
    let header =
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.md\"\r\nX-Padding: ");
    for url in [f.url("v2/skills", "new"), f.url("v2/skills", "s/files/a.md"), f.url("v1/files", "a.md")] {
        let (reply, growth) = f.put_multipart(&url, endless(&header, b'h', 64)).await;
        eprintln!("{url}: the server's peak memory grew by {growth} MiB");
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (400, "Invalid multipart body: part headers exceed 16384 bytes"),
            "{url}"
        );
        assert!(growth < REFUSED_UPLOAD_GROWTH_MIB, "{url}: the server's peak memory grew by {growth} MiB");
        assert_eq!(f.client.get(&url, &[("Api-Key", OWNER)]).await.status, 404, "{url}: nothing stored");
    }

    // No boundary at all: multer alone would look for it to the end.
    let url = f.url("v1/files", "b.md");
    let (reply, growth) = f.put_multipart(&url, endless("", b'p', 64)).await;
    eprintln!("preamble: the server's peak memory grew by {growth} MiB");
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (400, "Invalid multipart body: no boundary in the first 16384 bytes")
    );
    assert!(growth < REFUSED_UPLOAD_GROWTH_MIB, "the server's peak memory grew by {growth} MiB");
}

#[tokio::test]
async fn a_part_has_at_most_32_headers() {
    let f = Fixture::start().await;
    let with_headers = |count: usize| {
        let mut part = format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n");
        for index in 1..count {
            part.push_str(&format!("X-Header-{index}: value\r\n"));
        }
        vec![Bytes::from(format!("{part}\r\nhello\r\n--{BOUNDARY}--\r\n"))]
    };
    for url in [f.url("v1/files", "a.txt"), f.url("v2/skills", "s")] {
        let (reply, _) = f.put_multipart(&url, with_headers(33)).await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (400, "Invalid multipart body: a part has more than 32 headers")
        );
    }
    let (reply, _) = f.put_multipart(&f.url("v1/files", "a.txt"), with_headers(32)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(f.client.get(&f.url("v1/files", "a.txt"), &[("Api-Key", OWNER)]).await.body, "hello");
}

/// About `size` bytes of application definition: camelCase and snake_case
/// fields, and an `applicationProperties` map of many small entries, in
/// descending key order (the stored form sorts them) — the shape whose
/// parse tree costs the most per byte of input.
fn large_application(size: usize) -> (String, usize) {
    // Each entry is about 34 bytes.
    let count = size / 34;
    let entries: Vec<String> =
        (0..count).rev().map(|index| format!("\"key{index:07}\":[{index},1,2,3,4,5,6]")).collect();
    let document = format!(
        "{{\"displayName\":\"Large\",\"endpoint\":\"http://app.local/chat\",\"icon_url\":\"http://app.local/icon\",\
          \"features\":{{\"toolsSupported\":true}},\"applicationProperties\":{{{}}}}}",
        entries.join(",")
    );
    (document, count)
}

#[tokio::test]
async fn a_large_application_is_normalized_in_bounded_memory() {
    let f = Fixture::start().await;
    let (document, entries) = large_application(60 << 20);
    let size_mib = document.len() as u64 >> 20;
    let url = f.url("v1/applications", "large");
    let before = f.server.reset_peak_rss();
    let put = f.client.put_body(&url, &[("Api-Key", OWNER)], document.as_bytes()).await;
    let growth = f.server.peak_rss_kib().saturating_sub(before) / 1024;
    assert_eq!(put.status, 200, "{}", put.body);
    eprintln!("a {size_mib} MiB application: the server's peak memory grew by {growth} MiB");
    // Measured: 3.7 times the document (the body, the stored form, and the
    // properties' 1.9 million members at about 48 bytes each); a
    // serde_json::Value of it took 14 times.
    assert!(growth < 5 * size_mib, "a {size_mib} MiB application: the server's peak memory grew by {growth} MiB");

    let get = f.client.get(&url, &[("Api-Key", OWNER)]).await;
    assert_eq!(get.status, 200);
    assert_eq!(get.etag(), put.etag());
    assert_eq!(get.etag(), md5_hex(&get.bytes));
    let stored: Value = get.json();
    assert_eq!(stored["display_name"], "Large", "camelCase converted");
    assert_eq!(stored["icon_url"], "http://app.local/icon", "snake_case kept");
    assert_eq!(stored["features"], serde_json::json!({"tools_supported": true}));
    let properties = stored["application_properties"].as_object().expect("the properties map");
    assert_eq!(properties.len(), entries);
    assert_eq!(properties["key0000042"], serde_json::json!([42, 1, 2, 3, 4, 5, 6]));
    let keys: Vec<&String> = properties.keys().take(2).collect();
    assert_eq!(keys, ["key0000000", "key0000001"]);
    assert!(
        get.body.starts_with("{\"application_properties\":{\"key0000000\":[0,1,2,3,4,5,6],"),
        "stored sorted and compact"
    );
}
