//! Bounded streaming of a new version's files into the store, before the
//! commit: limits counted as bytes arrive, small files written in the
//! background while the next one arrives, large ones streamed as multipart
//! uploads hashed alongside, and the commit [`Deadline`] checked per chunk.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::io::AsyncWriteExt;

use super::error::FolderError;
use super::marker::FileRecord;
use super::names::{check_file_path, check_no_file_folder_clash};
use super::node::Node;
use super::policy::FolderLimits;
use crate::hashing::{Md5Stream, md5_hex_of};
use crate::storage::PathLimits;

/// Buffer of one streamed upload before it becomes a multipart upload.
const UPLOAD_BUFFER_BYTES: usize = 8 << 20;
/// Parts of one multipart upload in flight at once (with the buffer above,
/// what a large file can hold in memory while the store catches up).
const UPLOAD_PARTS_IN_FLIGHT: usize = 4;
/// A file up to this size is read whole, then hashed and written in the
/// background while the next file arrives; a larger one is streamed.
const SMALL_FILE_BYTES: usize = 1 << 20;
/// Small files of one upload being written at once, and the bytes they may
/// hold: the memory an upload's overlap costs.
const WRITES_IN_FLIGHT: usize = 8;
const BYTES_IN_FLIGHT: usize = 8 << 20;

/// Files being written for a new version, before the commit.
pub struct Staging {
    pub(super) node: Node,
    pub(super) version: String,
    /// Every file added so far; a small file still being written has its
    /// size but no etag until [`Staging::flush`].
    pub(super) files: BTreeMap<String, FileRecord>,
    /// Small files being hashed and written: `(path, etag, bytes held)`.
    /// Dropping the staging aborts them (what they wrote is the sweep's).
    pub(super) writes: tokio::task::JoinSet<Result<(String, String, usize), FolderError>>,
    pub(super) bytes_in_flight: usize,
    /// Whether the resource was live when staging began: which locks the
    /// commit takes first (it looks again under them).
    pub(super) existed: bool,
    pub(super) limits: FolderLimits,
    /// Past it the staged version may already be judged garbage by the
    /// sweep: nothing more is written and the commit is refused.
    pub(super) deadline: Deadline,
    pub(super) path_limits: PathLimits,
    pub(super) store: Arc<dyn ObjectStore>,
    /// The journal entry naming this version as possible garbage.
    pub(super) journal_entry: Path,
    /// A new label for the resource ([`ResourceMarker::display_name`](super::marker::ResourceMarker::display_name)).
    pub(super) display_name: Option<String>,
    /// A metadata entry the handler must read from the files, or the
    /// commit is refused ([`Staging::require_metadata`]).
    pub(super) required_metadata: Option<(String, String)>,
}

impl Staging {
    /// The id the version gets when committed.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Labels the resource with this commit (Anthropic's `display_name`).
    pub fn set_display_name(&mut self, display_name: String) {
        self.display_name = Some(display_name);
    }

    /// Refuses the commit unless the handler reads `value` as the metadata
    /// `key` (the hosted skills APIs: the upload's top folder must be the
    /// `name` in SKILL.md, where a `/v2` PUT only warns).
    pub fn require_metadata(&mut self, key: &str, value: &str) {
        self.required_metadata = Some((key.to_string(), value.to_string()));
    }

    /// The aggregate etag of what is staged so far (after [`Staging::flush`]).
    pub fn etag(&self) -> String {
        super::marker::aggregate_etag(&self.files)
    }

    /// Adds one file to the new version, enforcing the limits as bytes
    /// arrive. A small file is read whole and then hashed and written in the
    /// background (at most [`WRITES_IN_FLIGHT`] files, [`BYTES_IN_FLIGHT`]
    /// bytes), so the next file's bytes arrive while it is stored; a larger
    /// one is streamed, hashed alongside its writes. On error the partial
    /// bytes stay for the sweep.
    pub async fn add_file<S, E>(&mut self, path: &str, mut body: S) -> Result<(), FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        check_file_path(path)?;
        self.node.check_file_location(path, &self.path_limits)?;
        if self.files.contains_key(path) {
            return Err(FolderError::BadRequest(format!("File '{path}' appears twice in the upload")));
        }
        check_no_file_folder_clash(self.files.keys(), path)?;
        if self.files.len() >= self.limits.max_files as usize {
            return Err(FolderError::TooManyFiles { limit: self.limits.max_files });
        }
        let already = self.files.values().map(|f| f.size).sum::<u64>();
        let counter = ByteCounter { path, limits: &self.limits, before: already, size: 0 };
        let (head, counter) = read_head(&mut body, counter, self.deadline).await?;
        let target = self.node.paths.file(&self.version, path);
        let chunks = match head {
            Head::Whole(chunks) => chunks,
            Head::Start(head) => {
                let record = write_streamed(&self.store, target, head, body, counter, self.deadline).await?;
                self.files.insert(path.to_string(), record);
                return Ok(());
            }
        };
        let size = counter.size;
        let held = size as usize;
        while self.writes.len() >= WRITES_IN_FLIGHT
            || (self.bytes_in_flight + held > BYTES_IN_FLIGHT && !self.writes.is_empty())
        {
            self.finish_one_write().await?;
        }
        // Nothing starts past the deadline: the sweep may own the version.
        self.deadline.check()?;
        self.bytes_in_flight += held;
        self.files.insert(path.to_string(), FileRecord { etag: String::new(), size });
        let (store, path) = (self.store.clone(), path.to_string());
        self.writes.spawn(async move {
            let hashed = chunks.clone();
            let hash = tokio::task::spawn_blocking(move || md5_hex_of(&hashed));
            let (etag, written) = tokio::join!(hash, store.put(&target, PutPayload::from_iter(chunks)));
            written?;
            let etag = etag.map_err(|error| FolderError::Storage(join_error(error)))?;
            Ok((path, etag, held))
        });
        Ok(())
    }

    /// Waits for one background write and records its etag.
    async fn finish_one_write(&mut self) -> Result<(), FolderError> {
        let Some(joined) = self.writes.join_next().await else { return Ok(()) };
        let (path, etag, held) = joined.map_err(|error| FolderError::Storage(join_error(error)))??;
        self.bytes_in_flight -= held;
        if let Some(record) = self.files.get_mut(&path) {
            record.etag = etag;
        }
        Ok(())
    }

    /// Waits until every file added so far is stored; the first failed
    /// write fails the upload. The commit starts with it.
    pub async fn flush(&mut self) -> Result<(), FolderError> {
        while !self.writes.is_empty() {
            self.finish_one_write().await?;
        }
        Ok(())
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }
}

/// When a mutation must be committed by: half the grace period after its
/// version was journaled, so the sweep (which waits the whole grace period)
/// never deletes a version that can still be committed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    pub(super) fn starting_now(limit: Duration) -> Self {
        Self { at: Instant::now() + limit, limit }
    }

    pub(super) fn check(&self) -> Result<(), FolderError> {
        if Instant::now() < self.at {
            Ok(())
        } else {
            Err(FolderError::TooSlow { limit_seconds: self.limit.as_secs().max(1) })
        }
    }
}

/// Counts a file's bytes against the per-file and per-resource limits.
pub(super) struct ByteCounter<'a> {
    pub(super) path: &'a str,
    pub(super) limits: &'a FolderLimits,
    /// Bytes of the resource's earlier files.
    pub(super) before: u64,
    pub(super) size: u64,
}

impl ByteCounter<'_> {
    fn count(&mut self, chunk: &Bytes) -> Result<(), FolderError> {
        self.size += chunk.len() as u64;
        if self.size > self.limits.max_file_bytes {
            return Err(FolderError::TooLarge(format!(
                "File '{}' exceeds the limit of {} bytes per file",
                self.path, self.limits.max_file_bytes
            )));
        }
        if self.before + self.size > self.limits.max_total_bytes {
            return Err(FolderError::TooLarge(format!(
                "The resource exceeds the limit of {} bytes in total",
                self.limits.max_total_bytes
            )));
        }
        Ok(())
    }
}

/// The first bytes of a file.
enum Head {
    /// The file ended within [`SMALL_FILE_BYTES`]: all of it.
    Whole(Vec<Bytes>),
    /// The file goes on; these chunks came first.
    Start(Vec<Bytes>),
}

/// Reads a body until it ends or passes [`SMALL_FILE_BYTES`], counting and
/// checking the deadline per chunk.
async fn read_head<'a, S, E>(
    body: &mut S,
    mut counter: ByteCounter<'a>,
    deadline: Deadline,
) -> Result<(Head, ByteCounter<'a>), FolderError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    deadline.check()?;
    let mut chunks = Vec::new();
    while counter.size <= SMALL_FILE_BYTES as u64 {
        let Some(chunk) = body.next().await else {
            return Ok((Head::Whole(chunks), counter));
        };
        let chunk = chunk.map_err(read_failed)?;
        deadline.check()?;
        counter.count(&chunk)?;
        chunks.push(chunk);
    }
    Ok((Head::Start(chunks), counter))
}

fn read_failed(error: impl std::fmt::Display) -> FolderError {
    FolderError::BadRequest(format!("Failed to read the upload: {error}"))
}

fn join_error(error: tokio::task::JoinError) -> object_store::Error {
    object_store::Error::Generic { store: "upload", source: Box::new(error) }
}

/// Streams a large file to `target`: the head already read, then the rest
/// of `body`, hashed alongside the writes. Enforces the byte limits and the
/// commit deadline while streaming, so nothing is written after the sweep
/// may have judged the version garbage.
pub(super) async fn write_streamed<S, E>(
    store: &Arc<dyn ObjectStore>,
    target: Path,
    head: Vec<Bytes>,
    mut body: S,
    mut counter: ByteCounter<'_>,
    deadline: Deadline,
) -> Result<FileRecord, FolderError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut writer = BufWriter::with_capacity(store.clone(), target, UPLOAD_BUFFER_BYTES)
        .with_max_concurrency(UPLOAD_PARTS_IN_FLIGHT);
    let mut hasher = Md5Stream::start();
    let streamed: Result<(), FolderError> = async {
        for chunk in head {
            hasher.update(chunk.clone()).await.map_err(FolderError::Storage)?;
            writer.put(chunk).await?;
        }
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(read_failed)?;
            deadline.check()?;
            counter.count(&chunk)?;
            hasher.update(chunk.clone()).await.map_err(FolderError::Storage)?;
            writer.put(chunk).await?;
        }
        Ok(())
    }
    .await;
    if let Err(error) = streamed {
        // Parts already uploaded are cancelled; anything else is the sweep's.
        let _ = writer.abort().await;
        return Err(error);
    }
    // After a failed shutdown the writer cannot be aborted; the journal
    // entry written before staging covers what it left.
    writer.shutdown().await.map_err(io_to_storage)?;
    deadline.check()?;
    Ok(FileRecord { etag: hasher.finish().await.map_err(FolderError::Storage)?, size: counter.size })
}

fn io_to_storage(error: std::io::Error) -> FolderError {
    FolderError::Storage(object_store::Error::Generic { store: "upload", source: Box::new(error) })
}
