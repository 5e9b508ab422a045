//! Uploads under attack (issue 38, items 1, 3 and 6): a zip is judged by
//! the central directory the reader reads before a byte is inflated, an
//! entry cannot inflate past what it declared, a refused upload leaves no
//! byte in the store on any backend, and names that one file system would
//! see as one (case, Unicode normalisation) or a zip's duplicate entries
//! are refused instead of hiding each other.

use std::io::Write;
use std::sync::Arc;

use futures_util::TryStreamExt;
use object_store::ObjectStore;

use crate::services;
use crate::support::{Client, Reply, Server, Setup, files_below};

const KEY: &str = "uploads-key-0123456789";

/// Files of one upload: path and content.
type Files<'a> = Vec<(&'a str, &'a [u8])>;

fn skill_md(name: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: Uploads under attack.\n---\n# {name}\n").into_bytes()
}

/// A deflated zip of `entries`, with `comment`.
fn zip_of(entries: &[(&str, &[u8])], comment: Option<Vec<u8>>) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, content) in entries {
        zip.start_file(*name, options).unwrap();
        zip.write_all(content).unwrap();
    }
    if let Some(comment) = comment {
        zip.set_raw_comment(comment.into_boxed_slice()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// Sets what the central directory entry of `name` declares as its size.
fn declare_size(zip: &mut [u8], name: &str, size: u32) {
    let entry = zip
        .windows(4)
        .enumerate()
        .filter(|(_, window)| *window == b"PK\x01\x02")
        .map(|(at, _)| at)
        .find(|at| zip[at + 46..].starts_with(name.as_bytes()))
        .expect("the entry is in the directory");
    zip[entry + 24..entry + 28].copy_from_slice(&size.to_le_bytes());
}

/// Renames an entry in place (local header and directory): how a zip with
/// two entries of one name is made (the zip writer refuses to write one).
fn rename_entry(zip: &mut [u8], from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let at: Vec<usize> =
        zip.windows(from.len()).enumerate().filter(|(_, w)| *w == from.as_bytes()).map(|(at, _)| at).collect();
    assert_eq!(at.len(), 2, "the name is in the local header and the directory");
    for at in at {
        zip[at..at + to.len()].copy_from_slice(to.as_bytes());
    }
}

/// One multipart body: the zip as OpenAI's `files` part.
fn zip_upload(zip: Vec<u8>) -> (String, Vec<u8>) {
    const BOUNDARY: &str = "uploads-boundary-7d1c";
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"skill.zip\"\r\n\
         Content-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend(zip);
    body.extend(format!("\r\n--{BOUNDARY}--\r\n").bytes());
    (format!("multipart/form-data; boundary={BOUNDARY}"), body)
}

struct Fixture {
    setup: Setup,
    server: Server,
    client: Client,
    bucket: String,
}

impl Fixture {
    fn start(extra: &str) -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"uploads\"\nroles = [\"user\"]\n{extra}"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        Self { setup, server, client, bucket: String::new() }
    }

    async fn with_bucket(mut self) -> Self {
        let reply = self.client.get("/v1/bucket", &[("Api-Key", KEY)]).await;
        self.bucket = reply.json()["bucket"].as_str().unwrap().to_string();
        self
    }

    /// Bytes in the store (the local disk below the data directory).
    fn stored_bytes(&self) -> u64 {
        files_below(&self.setup.path().join("data")).iter().map(|file| file.metadata().map_or(0, |m| m.len())).sum()
    }

    async fn post_zip(&self, zip: Vec<u8>) -> Reply {
        let (content_type, body) = zip_upload(zip);
        let headers = [("Authorization", &*format!("Bearer {KEY}")), ("Content-Type", content_type.as_str())];
        self.client.send_raw("POST", "/openai/v1/skills", &headers, vec![body.into()]).await
    }
}

/// Items 1 and 3: every refusal a zip's directory or an entry's bytes
/// earn is a 4xx naming it, and leaves the store as it was — a 64 MiB bomb
/// in a 64 KiB request is refused before it is inflated.
#[tokio::test]
async fn a_zip_is_judged_by_its_directory_before_anything_is_inflated() {
    let f = Fixture::start("[handlers.types.skills]\nmax_total_bytes = 8388608\n").with_bucket().await;
    let zeros = vec![0u8; 64 << 20];
    let md = skill_md("s");
    let before = f.stored_bytes();
    let mut lying = zip_of(&[("s/SKILL.md", &md), ("s/zeros.bin", &zeros)], None);
    declare_size(&mut lying, "s/zeros.bin", 1000);
    let mut duplicate = zip_of(&[("s/SKILL.md", &md), ("s/a.md", b"1"), ("s/b.md", b"2")], None);
    rename_entry(&mut duplicate, "s/b.md", "s/a.md");
    let mut decoy = b"PK\x05\x06".to_vec();
    // One entry, its directory past the end: a reader that checks it turns to the real record.
    decoy.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0, 46, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff, 0, 0]);
    let many: Vec<(String, Vec<u8>)> = (0..6000).map(|n| (format!("s/e/{n}"), Vec::new())).collect();
    let many: Vec<(&str, &[u8])> = std::iter::once(("s/SKILL.md", md.as_slice()))
        .chain(many.iter().map(|(n, c)| (n.as_str(), c.as_slice())))
        .collect();
    let cases: [(&str, Vec<u8>, u16, &str); 6] = [
        (
            "two top folders after a bomb",
            zip_of(&[("s/SKILL.md", &md), ("s/zeros.bin", &zeros), ("t/x.md", b"x")], None),
            400,
            "two top-level folders",
        ),
        ("over the type's total", zip_of(&[("s/SKILL.md", &md), ("s/zeros.bin", &zeros)], None), 413, "8388608 bytes"),
        ("an entry lying about its size", lying, 400, "inflates past the 1000 bytes it declares"),
        ("a decoy end record", zip_of(&many, Some(decoy)), 400, "more than one end of central directory record"),
        ("a duplicate entry", duplicate, 400, "twice"),
        (
            "names one file system sees as one",
            zip_of(&[("s/SKILL.md", &md), ("s/skill.md", b"unreviewed")], None),
            400,
            "only in case or Unicode normalisation",
        ),
    ];
    for (what, zip, status, named) in cases {
        let reply = f.post_zip(zip).await;
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        let message = reply.json()["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains(named), "{what}: {message}");
        let left = f.stored_bytes().saturating_sub(before);
        assert!(left < 64 << 10, "{what}: the refused upload left {left} bytes in the store");
    }
    let listed = f.client.get("/openai/v1/skills", &[("Authorization", &format!("Bearer {KEY}"))]).await;
    assert_eq!(listed.json()["data"], serde_json::json!([]), "nothing was created");
}

/// Item 3: a zip whose decoy end record declares one entry while its real
/// directory holds 600 000 is refused without its directory being read:
/// the server's memory stays flat (the zip crate read it whole: +120 MiB).
#[tokio::test]
async fn a_huge_directory_behind_a_decoy_costs_no_memory() {
    let f = Fixture::start("").with_bucket().await;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for n in 0..600_000 {
        zip.start_file(format!("s/{n}"), stored).unwrap();
    }
    let mut decoy = b"PK\x05\x06".to_vec();
    // One entry, its directory past the end: a reader that checks it turns to the real record.
    decoy.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0, 46, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff, 0, 0]);
    zip.set_raw_comment(decoy.into_boxed_slice()).unwrap();
    let zip = zip.finish().unwrap().into_inner();
    let baseline = f.server.reset_peak_rss();
    let reply = f.post_zip(zip).await;
    let grown = f.server.peak_rss_kib().saturating_sub(baseline);
    eprintln!("a 600 000-entry directory behind a decoy: {} {}, peak RSS +{grown} KiB", reply.status, reply.body);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("more than one end of central directory record"), "{}", reply.body);
    assert!(grown < 48 << 10, "reading the upload grew the server by {grown} KiB");
}

/// Item 1: a refused upload's staged bytes are deleted before the answer,
/// not an hour later by the sweep — a whole PUT the handler refuses (with a
/// file large enough to be streamed), a file PUT over the type's total, and
/// a refused zip — on the local disk, S3 and Azure.
#[tokio::test]
async fn a_refused_upload_leaves_no_bytes_on_any_backend() {
    for backend in ["file", "s3", "azure"] {
        let emulator = match backend {
            "file" => None,
            cloud => match services::emulator(cloud) {
                Some(emulator) => Some(emulator),
                None => continue,
            },
        };
        let storage = match &emulator {
            Some(emulator) => {
                emulator.create("refused");
                emulator.storage_toml("refused")
            }
            None => String::new(),
        };
        let f = Fixture::start(&format!("{storage}[handlers.types.skills]\nmax_total_bytes = 4194304\n"))
            .with_bucket()
            .await;
        let objects = || async {
            let listed: Vec<String> = match &emulator {
                Some(emulator) => {
                    let store: Arc<dyn ObjectStore> =
                        dial_host::backends::open(&emulator.url("refused"), &emulator.storage_options()).unwrap();
                    store.list(None).map_ok(|meta| meta.location.to_string()).try_collect().await.unwrap()
                }
                None => files_below(&f.setup.path().join("data"))
                    .iter()
                    .map(|path| path.to_string_lossy().into_owned())
                    .collect(),
            };
            listed.into_iter().filter(|path| path.contains("/v/") || path.contains(".dial-host/gc")).collect::<Vec<_>>()
        };
        let key = [("Api-Key", KEY)];
        let url = format!("/v2/skills/{}/refused", f.bucket);
        let big = vec![7u8; 3 << 20];
        let no_skill_md: &[(&str, &[u8])] = &[("notes.md", b"no SKILL.md"), ("data/big.bin", &big)];
        let refused = f.client.put_files(&url, &key, no_skill_md).await;
        assert_eq!(refused.status, 400, "{backend}: {}", refused.body);
        assert_eq!(objects().await, Vec::<String>::new(), "{backend}: a refused PUT left bytes");

        let md = skill_md("refused");
        let made = f.client.put_files(&url, &key, &[("SKILL.md", &md), ("data/big.bin", &big)]).await;
        assert_eq!(made.status, 200, "{backend}: {}", made.body);
        // The committed upload's journal entry goes in the background.
        let mut committed = objects().await;
        for _ in 0..50 {
            if !committed.iter().any(|path| path.contains(".dial-host/gc")) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            committed = objects().await;
        }
        let over = f.client.put_files(&format!("{url}/files/data/more.bin"), &key, &[("more.bin", &big)]).await;
        assert_eq!(over.status, 413, "{backend}: {}", over.body);
        let zipped = f.post_zip(zip_of(&[("z/notes.md", &big)], None)).await;
        assert_eq!(zipped.status, 400, "{backend}: {}", zipped.body);
        assert_eq!(objects().await, committed, "{backend}: a refused file PUT or zip left bytes");
    }
}

/// Item 6: within one resource, no two names may be one on a
/// case-insensitive, normalising file system — a reviewed `SKILL.md` and an
/// unreviewed `skill.md`, NFC and NFD `résumé.txt`, `Docs/` and `docs/` —
/// whether they come in one PUT, one at a time or through the skills APIs.
#[tokio::test]
async fn names_one_file_system_sees_as_one_are_refused() {
    let f = Fixture::start("").with_bucket().await;
    let key = [("Api-Key", KEY)];
    let md = skill_md("names");
    let url = format!("/v2/skills/{}/names", f.bucket);
    let clash = "only in case or Unicode normalisation";
    let cases: [(Files, &str); 3] = [
        (vec![("SKILL.md", &md), ("skill.md", &b"unreviewed"[..])], "case"),
        (
            vec![("SKILL.md", &md), ("r\u{e9}sum\u{e9}.txt", &b"nfc"[..]), ("re\u{301}sume\u{301}.txt", &b"nfd"[..])],
            "NFC/NFD",
        ),
        (vec![("SKILL.md", &md), ("Docs/a.md", &b"a"[..]), ("docs/b.md", &b"b"[..])], "folders"),
    ];
    for (files, what) in cases {
        let reply = f.client.put_files(&url, &key, &files).await;
        assert_eq!(reply.status, 400, "{what}: {}", reply.body);
        assert!(reply.body.contains(clash), "{what}: {}", reply.body);
    }
    let made = f.client.put_files(&url, &key, &[("SKILL.md", &md), ("docs/a.md", &b"a"[..])]).await;
    assert_eq!(made.status, 200, "{}", made.body);
    for file in ["Skill.md", "DOCS/b.md", "docs/A.md"] {
        let reply = f.client.put_files(&format!("{url}/files/{file}"), &key, &[("x", b"x")]).await;
        assert_eq!(reply.status, 400, "{file}: {}", reply.body);
        assert!(reply.body.contains(clash), "{file}: {}", reply.body);
    }
    let fine = f.client.put_files(&format!("{url}/files/docs/b.md"), &key, &[("x", b"x")]).await;
    assert_eq!(fine.status, 200, "a new name in a folder already there: {}", fine.body);
}

/// Item 1, the client's side: an upload whose client goes away mid-body has
/// the files it already wrote deleted at once, not a grace period later.
/// (A large file's unfinished multipart upload is no object: the local disk
/// reclaims it at start, cloud stores by their lifecycle rule.)
#[tokio::test]
async fn an_upload_whose_client_goes_away_leaves_no_bytes() {
    use tokio::io::AsyncWriteExt;
    let f = Fixture::start("").with_bucket().await;
    const BOUNDARY: &str = "cut-off-6b1e";
    let md = skill_md("cut");
    let mut head =
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"SKILL.md\"\r\n\r\n")
            .into_bytes();
    head.extend_from_slice(&md);
    for n in 0..3 {
        head.extend(
            format!(
                "\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes/{n}.md\"\r\n\r\n"
            )
            .bytes(),
        );
        head.extend_from_slice(&[b'n'; 4096]);
    }
    head.extend(
        format!("\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\r\n")
            .bytes(),
    );
    let request = format!(
        "PUT /v2/skills/{}/cut HTTP/1.1\r\nHost: x\r\nApi-Key: {KEY}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {}\r\n\r\n",
        f.bucket,
        head.len() + (8 << 20)
    );
    let mut socket = tokio::net::TcpStream::connect(f.server.address()).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    socket.write_all(&head).await.unwrap();
    socket.write_all(&vec![7u8; 3 << 20]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let written = |f: &Fixture| {
        files_below(&f.setup.path().join("data"))
            .into_iter()
            .map(|path| path.to_string_lossy().into_owned())
            .filter(|path| path.contains("/cut/v/") && !path.contains('#'))
            .collect::<Vec<_>>()
    };
    assert!(!written(&f).is_empty(), "the small files were written before the client went away");
    drop(socket);
    let mut left = written(&f);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        left = written(&f);
    }
    assert_eq!(left, Vec::<String>::new(), "a cut-off upload's files stayed");
}
