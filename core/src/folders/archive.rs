//! The ZIP of a resource version, streamed.
//!
//! A task reads each file in ranges with async store calls and feeds a
//! streaming `ZipWriter` whose output collects in a small buffer; whole
//! chunks go to the HTTP body through a bounded channel. Nothing waits for
//! the client on a thread: a slow client parks the task at the channel,
//! memory stays at a few chunks plus two reads whatever the resource size,
//! and a client that goes away closes the channel, which ends the task.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::{Bytes, BytesMut};
use futures_util::{StreamExt, stream};
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use zip::CompressionMethod;
use zip::write::{SimpleFileOptions, StreamWriter, ZipWriter};

use super::layout::NodePaths;
pub use super::marker::ARCHIVE_FORMAT;
use super::marker::ResourceMarker;

/// Output is sent in chunks of this size…
const CHUNK_BYTES: usize = 64 << 10;
/// …with at most this many in flight.
const CHANNEL_CHUNKS: usize = 4;
/// Bytes read from the store at a time: few round trips (the local backend
/// streams in 8 KiB pieces otherwise), one read's worth of memory…
const READ_BYTES: u64 = 1 << 20;
/// …with the next read already under way while one is written: a read is a
/// round trip (on local disk, a hop to the blocking pool), which would
/// otherwise be paid in full for every small file.
const READ_AHEAD: usize = 2;
/// Deflating up to this much runs in the task; more (measured: 1.7 ms per
/// MiB of text, 17 ms per MiB of incompressible bytes) runs on the blocking
/// pool, which it leaves as soon as it is done: it never waits there for the
/// client. Stored entries cost only a CRC and a copy (40 µs per MiB), so they
/// are always written in the task.
const INLINE_DEFLATE_BYTES: usize = 16 << 10;

type Chunks = mpsc::Sender<Result<Bytes, io::Error>>;

/// The SHA-256 hex of the archive [`stream_zip`] serves for `marker`'s
/// current version (no top folder).
pub async fn archive_sha256(
    store: Arc<dyn ObjectStore>,
    paths: NodePaths,
    marker: ResourceMarker,
) -> io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut archive = stream_zip(store, paths, marker, None);
    while let Some(chunk) = archive.next().await {
        hasher.update(chunk?);
    }
    Ok(crate::hashing::hex(&hasher.finalize()))
}

/// A stream of ZIP bytes for the marker's current version (marker
/// excluded), each entry under `top/` when given (the hosted skills APIs'
/// archives have the skill's name as their one top folder).
pub fn stream_zip(
    store: Arc<dyn ObjectStore>,
    paths: NodePaths,
    marker: ResourceMarker,
    top: Option<String>,
) -> ReceiverStream<Result<Bytes, io::Error>> {
    let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        if let Err(error) = write_zip(store, paths, &marker, top.as_deref(), &sender).await {
            if sender.is_closed() {
                tracing::debug!(%error, "the client went away during a resource archive");
            } else {
                tracing::warn!(%error, "streaming a resource archive failed");
                // The body ends with an error, so the client sees a broken
                // transfer rather than a short archive.
                let _ = sender.send(Err(error)).await;
            }
        }
    });
    ReceiverStream::new(receiver)
}

async fn write_zip(
    store: Arc<dyn ObjectStore>,
    paths: NodePaths,
    marker: &ResourceMarker,
    top: Option<&str>,
    chunks: &Chunks,
) -> io::Result<()> {
    // Every range the archive needs, in order, read ahead of the writer
    // (built lazily from owned copies, so the task stays `'static`).
    let version = marker.current_version.clone();
    let ranges = marker.files.clone().into_iter().flat_map(move |(path, record)| {
        let object = paths.file(&version, &path);
        (0..record.size)
            .step_by(READ_BYTES as usize)
            .map(move |start| (object.clone(), start..(start + READ_BYTES).min(record.size)))
    });
    let mut reads = stream::iter(ranges)
        .map(move |(object, range)| {
            let store = store.clone();
            async move { store.get_range(&object, range).await }
        })
        .buffered(READ_AHEAD);
    let output = Output::default();
    let mut zip = ZipWriter::new_stream(output.clone());
    for (path, record) in &marker.files {
        let method = compression_for(path);
        let options =
            SimpleFileOptions::default().compression_method(method).large_file(record.size >= u32::MAX as u64);
        let entry = match top {
            Some(top) => format!("{top}/{path}"),
            None => path.clone(),
        };
        zip.start_file(entry, options).map_err(io::Error::other)?;
        for _ in 0..record.size.div_ceil(READ_BYTES) {
            let bytes = reads.next().await.expect("one read per range").map_err(io::Error::other)?;
            zip = write(zip, bytes, method).await?;
            output.send(chunks, false).await?;
        }
    }
    zip.finish().map_err(io::Error::other)?;
    output.send(chunks, true).await
}

/// Writes `bytes` into the current entry: in the task when cheap, else on
/// the blocking pool.
async fn write(
    mut zip: ZipWriter<StreamWriter<Output>>,
    bytes: Bytes,
    method: CompressionMethod,
) -> io::Result<ZipWriter<StreamWriter<Output>>> {
    if method == CompressionMethod::Stored || bytes.len() <= INLINE_DEFLATE_BYTES {
        zip.write_all(&bytes)?;
        return Ok(zip);
    }
    tokio::task::spawn_blocking(move || zip.write_all(&bytes).map(|()| zip)).await.map_err(io::Error::other)?
}

/// Text compresses well and costs little CPU; other files (images, archives,
/// binaries) are mostly compressed already, so they are stored as they are.
fn compression_for(path: &str) -> CompressionMethod {
    const TEXT: &[&str] = &[
        "md", "markdown", "txt", "py", "sh", "bash", "js", "mjs", "ts", "json", "yaml", "yml", "toml", "html", "htm",
        "css", "csv", "tsv", "xml", "svg", "rs", "go", "java", "kt", "c", "h", "cpp", "hpp", "rb", "php", "sql", "ini",
        "cfg", "conf", "tex", "rst", "ipynb",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()) {
        Some(ext) if TEXT.contains(&ext.as_str()) => CompressionMethod::Deflated,
        None => CompressionMethod::Deflated, // README, LICENSE, Makefile…
        Some(_) => CompressionMethod::Stored,
    }
}

/// Where the ZIP writer's output collects until it is sent. Shared, because
/// the writer owns its end and moves to the blocking pool and back.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<BytesMut>>);

impl Output {
    fn buffer(&self) -> MutexGuard<'_, BytesMut> {
        // Nothing can panic while the lock is held; a poisoned buffer is still bytes.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends what has collected in whole chunks (everything when `all`),
    /// waiting for room in the channel; fails when the client has gone.
    async fn send(&self, chunks: &Chunks, all: bool) -> io::Result<()> {
        loop {
            let chunk = {
                let mut buffer = self.buffer();
                if buffer.len() >= CHUNK_BYTES {
                    buffer.split_to(CHUNK_BYTES).freeze()
                } else if all && !buffer.is_empty() {
                    buffer.split().freeze()
                } else {
                    return Ok(());
                }
            };
            chunks
                .send(Ok(chunk))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        }
    }
}

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// Shared with the black-box tests and the benchmarks.
#[cfg(test)]
#[path = "../../../tests/random_bytes.rs"]
mod random_bytes;

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Duration;

    use object_store::PutPayload;
    use object_store::memory::InMemory;

    use super::random_bytes::random_bytes;
    use super::*;
    use crate::buckets::BucketLocation;
    use crate::resource_url::{Intent, ResourceUrl};

    /// Stores `files` as version `v1` of a resource; its paths and marker.
    async fn resource(store: &Arc<dyn ObjectStore>, files: &[(&str, Vec<u8>)]) -> (NodePaths, ResourceMarker) {
        let url = ResourceUrl::parse("skills/bucket1/s", Intent::Read).unwrap();
        let paths = NodePaths::new(&url, &BucketLocation::User("u".into()));
        let mut records = serde_json::Map::new();
        for (path, content) in files {
            store.put(&paths.file("v1", path), PutPayload::from(content.clone())).await.unwrap();
            records.insert(path.to_string(), serde_json::json!({"etag": "e", "size": content.len()}));
        }
        let marker = serde_json::from_value(serde_json::json!({
            "type": "skill", "schemaVersion": 1, "state": "ready", "currentVersion": "v1", "etag": "e",
            "createdAt": 0, "updatedAt": 0, "commitId": "c", "files": records,
        }))
        .unwrap();
        (paths, marker)
    }

    #[tokio::test]
    async fn the_archive_holds_every_file_and_comes_in_bounded_chunks() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let text = b"# Notes\nSome text that deflates well.\n".repeat(8000);
        let files = [
            ("SKILL.md", b"---\nname: s\n---\n".to_vec()),
            ("docs/long.md", text),                       // deflated on the blocking pool
            ("data.bin", random_bytes(1, (5 << 20) / 2)), // stored, in three reads
        ];
        let (paths, marker) = resource(&store, &files).await;
        let chunks: Vec<Bytes> =
            stream_zip(store, paths, marker, None).map(|chunk| chunk.unwrap()).collect::<Vec<_>>().await;
        assert!(chunks.iter().all(|chunk| chunk.len() <= CHUNK_BYTES));
        let bytes: Vec<u8> = chunks.concat();
        let mut archive = zip::ZipArchive::new(io::Cursor::new(bytes)).unwrap();
        assert_eq!(archive.len(), files.len());
        for (path, content) in &files {
            let mut entry = archive.by_name(path).unwrap();
            assert_eq!(entry.compression(), compression_for(path), "{path}");
            let mut read = Vec::new();
            entry.read_to_end(&mut read).unwrap();
            assert!(read == *content, "{path}");
        }
    }

    #[tokio::test]
    async fn a_client_going_away_ends_the_work() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (paths, marker) = resource(&store, &[("data.bin", random_bytes(1, 16 << 20))]).await;
        let mut stream = stream_zip(store.clone(), paths, marker, None);
        assert!(stream.next().await.unwrap().is_ok());
        drop(stream);
        // The producing task lets go of the store once it notices.
        let released = tokio::time::timeout(Duration::from_secs(30), async {
            while Arc::strong_count(&store) > 1 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        assert!(released.await.is_ok(), "the archive task still runs after its client left");
    }

    #[test]
    fn text_is_deflated_and_binaries_stored() {
        assert_eq!(compression_for("SKILL.md"), CompressionMethod::Deflated);
        assert_eq!(compression_for("scripts/run.py"), CompressionMethod::Deflated);
        assert_eq!(compression_for("LICENSE"), CompressionMethod::Deflated);
        assert_eq!(compression_for("assets/logo.PNG"), CompressionMethod::Stored);
        assert_eq!(compression_for("data.v1/blob"), CompressionMethod::Deflated);
        assert_eq!(compression_for("model.bin"), CompressionMethod::Stored);
    }

    /// The archive of a fixed version is the same bytes today as when
    /// [`ARCHIVE_FORMAT`] was set: digests kept with versions vouch for what
    /// is served. A dependency upgrade that changes them fails here: raise
    /// `ARCHIVE_FORMAT` (kept digests are then computed anew) and this value.
    #[tokio::test]
    async fn an_archive_is_the_same_bytes_as_its_format_says() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let text = "The same words, again and again. ".repeat(2048).into_bytes();
        let files = [
            ("SKILL.md", b"---\nname: s\ndescription: d\n---\n# s\n".to_vec()),
            ("docs/long.md", text),
            ("assets/logo.png", (0..=255u8).cycle().take(70_000).collect()),
        ];
        let (paths, marker) = resource(&store, &files).await;
        let sha256 = archive_sha256(store.clone(), paths.clone(), marker.clone()).await.unwrap();
        assert_eq!(sha256, archive_sha256(store, paths, marker).await.unwrap(), "the same bytes on every GET");
        assert_eq!(
            (ARCHIVE_FORMAT, sha256.as_str()),
            (1, "ea95648561b4a2ecdd641e9d2b0a8e7be181ef0072e5c3a76b8f20bad1ef3e3a"),
            "the archive bytes changed: raise ARCHIVE_FORMAT and set the new digest here"
        );
    }
}
