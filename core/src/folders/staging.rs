//! Bounded streaming of a new version's files into the store, before the
//! commit: limits counted as bytes arrive, small files written in the
//! background while the next one arrives, large ones streamed as multipart
//! uploads hashed alongside, and the commit [`Deadline`] checked per chunk.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use indexmap::IndexMap;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::io::AsyncWriteExt;

use super::error::FolderError;
use super::marker::FileRecord;
use super::markers;
use super::names::{FoldedNames, check_file_path, check_no_file_folder_clash};
use super::node::Node;
use super::policy::FolderLimits;
use crate::hashing::{DigestStream, Digests, digests_of};
use crate::keys::{KeyLapsed, WritingKey};
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

/// A rule the handler's metadata of a staged version must pass: `Err`
/// holds the 400's message.
pub type MetadataCheck = Box<dyn Fn(&IndexMap<String, String>) -> Result<(), String> + Send + Sync>;

/// Files being written for a new version, before the commit.
pub struct Staging {
    pub(super) node: Node,
    /// The version being written, until it is committed or discarded.
    pub(super) pending: Uncommitted,
    /// Every file added so far; a small file still being written has its
    /// size but no etag until [`Staging::flush`].
    pub(super) files: BTreeMap<String, FileRecord>,
    /// The names added so far as a case-insensitive file system sees them.
    pub(super) names: FoldedNames,
    pub(super) bytes_in_flight: usize,
    /// Whether the resource was live when staging began: which locks the
    /// commit takes first (it looks again under them).
    pub(super) existed: bool,
    pub(super) limits: FolderLimits,
    /// Past it the staged version may already be judged garbage by the
    /// sweep (or the key the upload came with has expired): nothing more
    /// is written and the commit is refused.
    pub(super) deadline: Deadline,
    pub(super) path_limits: PathLimits,
    pub(super) store: Arc<dyn ObjectStore>,
    /// A new label for the resource ([`ResourceMarker::display_name`](super::marker::ResourceMarker::display_name)).
    pub(super) display_name: Option<String>,
    /// What the handler's metadata must pass, or the commit is refused
    /// ([`Staging::check_metadata`]).
    pub(super) metadata_check: Option<MetadataCheck>,
    /// The per-request key the upload came with: the commit happens only
    /// while it lives ([`Staging::bind_to_key`]).
    pub(super) key: Option<WritingKey>,
}

impl Staging {
    /// The id the version gets when committed.
    pub fn version(&self) -> &str {
        &self.pending.version
    }

    /// Binds the upload to the per-request key it came with: it stops at
    /// the key's expiry, and commits only if the key still lives then.
    pub fn bind_to_key(&mut self, key: WritingKey) {
        self.deadline = self.deadline.bounded_by_key(key.expires_at());
        self.key = Some(key);
    }

    /// Checks a whole upload's file list before any of its bytes arrive
    /// (a zip's central directory), before any file is added: every path,
    /// the file count and the declared sizes against the type's limits, as
    /// [`Staging::add_file`] will check each again as its bytes arrive.
    pub fn check_plan<'p>(&self, plan: impl IntoIterator<Item = (&'p str, u64)>) -> Result<(), FolderError> {
        check_files(&self.node, &self.path_limits, &self.limits, plan)
    }

    /// A new file's path against the rules and the files already there.
    fn check_new_path(
        &self,
        files: &BTreeMap<String, FileRecord>,
        names: &mut FoldedNames,
        path: &str,
    ) -> Result<(), FolderError> {
        check_new_path(&self.node, &self.path_limits, &self.limits, files, names, path)
    }

    /// Gives the upload up: what it wrote is deleted now (and its journal
    /// entry with it) instead of waiting a grace period for the sweep.
    pub async fn discard(self) {
        self.pending.discard().await;
    }

    /// Labels the resource with this commit (Anthropic's `display_name`).
    pub fn set_display_name(&mut self, display_name: String) {
        self.display_name = Some(display_name);
    }

    /// Refuses the commit with the message `check` gives for the metadata
    /// the handler read from the files (the hosted skills APIs hold a skill
    /// to rules a `/v2` PUT only warns of).
    pub fn check_metadata(&mut self, check: MetadataCheck) {
        self.metadata_check = Some(check);
    }

    /// The aggregate etag of what is staged so far (after [`Staging::flush`]).
    pub fn etag(&self) -> String {
        super::marker::aggregate_etag(&self.files)
    }

    /// Adds one file to the new version, enforcing the limits as bytes
    /// arrive. A small file is read whole and then hashed and written in the
    /// background (at most [`WRITES_IN_FLIGHT`] files, [`BYTES_IN_FLIGHT`]
    /// bytes), so the next file's bytes arrive while it is stored; a larger
    /// one is streamed, hashed alongside its writes. On error the upload is
    /// to be given up ([`Staging::discard`]).
    pub async fn add_file<S, E>(&mut self, path: &str, body: S) -> Result<(), FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let added = self.add_one_file(path, body).await;
        if let Err(error) = &added {
            self.pending.failed_with(error);
        }
        added
    }

    async fn add_one_file<S, E>(&mut self, path: &str, mut body: S) -> Result<(), FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let mut names = std::mem::take(&mut self.names);
        let checked = self.check_new_path(&self.files, &mut names, path);
        self.names = names;
        checked?;
        let already = self.files.values().map(|f| f.size).sum::<u64>();
        let counter = ByteCounter { path, limits: &self.limits, before: already, size: 0 };
        let (head, counter) = read_head(&mut body, counter, self.deadline).await?;
        let target = self.node.paths.file(&self.pending.version, path);
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
        while self.pending.writes.len() >= WRITES_IN_FLIGHT
            || (self.bytes_in_flight + held > BYTES_IN_FLIGHT && !self.pending.writes.is_empty())
        {
            self.finish_one_write().await?;
        }
        // Nothing starts past the deadline: the sweep may own the version.
        self.deadline.check()?;
        self.bytes_in_flight += held;
        self.files.insert(path.to_string(), FileRecord { etag: String::new(), size, sha256: None });
        let (store, path) = (self.store.clone(), path.to_string());
        self.pending.writes.spawn(async move {
            let hashed = chunks.clone();
            let hash = tokio::task::spawn_blocking(move || digests_of(&hashed));
            let (digests, written) = tokio::join!(hash, store.put(&target, PutPayload::from_iter(chunks)));
            written?;
            let digests = digests.map_err(|error| FolderError::Storage(join_error(error)))?;
            Ok((path, digests, held))
        });
        Ok(())
    }

    /// Waits for one background write and records its etag.
    async fn finish_one_write(&mut self) -> Result<(), FolderError> {
        let Some(joined) = self.pending.writes.join_next().await else { return Ok(()) };
        let (path, digests, held) = joined.map_err(|error| FolderError::Storage(join_error(error)))??;
        self.bytes_in_flight -= held;
        if let Some(record) = self.files.get_mut(&path) {
            record.etag = digests.md5;
            record.sha256 = digests.sha256;
        }
        Ok(())
    }

    /// Waits until every file added so far is stored; the first failed
    /// write fails the upload. The commit starts with it.
    pub async fn flush(&mut self) -> Result<(), FolderError> {
        while !self.pending.writes.is_empty() {
            if let Err(error) = self.finish_one_write().await {
                self.pending.failed_with(&error);
                return Err(error);
            }
        }
        Ok(())
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }
}

/// A whole file set for `node` (a zip's plan, a version copied or made
/// current again) against the rules a file added one by one meets: paths,
/// names that clash, the count and the sizes.
pub(super) fn check_files<'p>(
    node: &Node,
    path_limits: &PathLimits,
    limits: &FolderLimits,
    files: impl IntoIterator<Item = (&'p str, u64)>,
) -> Result<(), FolderError> {
    let mut checked: BTreeMap<String, FileRecord> = BTreeMap::new();
    let mut names = FoldedNames::default();
    let mut total = 0u64;
    for (path, size) in files {
        check_new_path(node, path_limits, limits, &checked, &mut names, path)?;
        ByteCounter { path, limits, before: total, size: 0 }.check(size)?;
        total += size;
        checked.insert(path.to_string(), FileRecord { etag: String::new(), size, sha256: None });
    }
    Ok(())
}

fn check_new_path(
    node: &Node,
    path_limits: &PathLimits,
    limits: &FolderLimits,
    files: &BTreeMap<String, FileRecord>,
    names: &mut FoldedNames,
    path: &str,
) -> Result<(), FolderError> {
    check_file_path(path)?;
    node.check_file_location(path, path_limits)?;
    if files.contains_key(path) {
        return Err(FolderError::BadRequest(format!("File '{path}' appears twice in the upload")));
    }
    check_no_file_folder_clash(files.keys(), path)?;
    if files.len() >= limits.max_files as usize {
        return Err(FolderError::TooManyFiles { limit: limits.max_files });
    }
    Ok(names.add(path)?)
}

/// Small files of a staging being hashed and written: `(path, digests, bytes held)`.
pub(super) type Writes = tokio::task::JoinSet<Result<(String, Digests, usize), FolderError>>;

/// A new version's bytes until its commit: its id, the journal entry that
/// names it as possible garbage, and what becomes of its bytes if it is
/// never committed — deleted at once ([`Uncommitted::discard`], or in the
/// background when dropped: a client gone, a panic) rather than a grace
/// period later by the sweep. The journal entry goes with them only when
/// nothing can land there any more: every write was awaited and none failed
/// in the store (a store request cut off or failed may still complete
/// later, so then the entry stays and the sweep looks again). Once a marker
/// naming the version may have been written (a commit attempt whose
/// outcome is unknown) it is the sweep's alone, which deletes only what no
/// marker references.
pub(super) struct Uncommitted {
    store: Arc<dyn ObjectStore>,
    node: Node,
    pub(super) version: String,
    journal_entry: Path,
    fate: Fate,
    /// A store request of this version failed or was cut off: something
    /// may still land under it after a discard.
    uncertain: bool,
    /// Writes still running (a staging's small files): waited for before
    /// anything is deleted, so none lands after the delete.
    pub(super) writes: Writes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Nothing names the version: given up, its bytes are deleted.
    Discard,
    /// A marker write naming it was attempted with no clear outcome.
    LeftToSweep,
    /// Committed, or already discarded.
    Settled,
}

impl Uncommitted {
    pub(super) fn new(store: Arc<dyn ObjectStore>, node: Node, version: String, journal_entry: Path) -> Self {
        Self { store, node, version, journal_entry, fate: Fate::Discard, uncertain: false, writes: Writes::new() }
    }

    /// Notes that `error` ended the version's writing: a store failure may
    /// leave a request that completes later.
    pub(super) fn failed_with(&mut self, error: &FolderError) {
        self.uncertain |= matches!(error, FolderError::Storage(_));
    }

    /// A marker naming the version is about to be written: should the
    /// outcome be unknown, the bytes are the sweep's.
    pub(super) fn committing(&mut self) {
        self.fate = Fate::LeftToSweep;
    }

    /// The marker write was refused (a lost compare-and-swap): nothing
    /// names the version.
    pub(super) fn not_committed(&mut self) {
        self.fate = Fate::Discard;
    }

    /// The marker naming the version was written: its staging entry goes
    /// (see [`super::journal::GcJournal::forget_staged`]).
    pub(super) fn committed(&mut self, journal: &super::journal::GcJournal) {
        self.fate = Fate::Settled;
        journal.forget_staged(self.journal_entry.clone());
    }

    /// Deletes what the version wrote, now, unless it may be committed.
    pub(super) async fn discard(mut self) {
        if let Some(discarding) = self.take_discard() {
            discarding.await;
        }
    }

    /// The deletion to run, if the version is to be discarded (once);
    /// `uncertain` keeps the journal entry for the sweep.
    fn take_discard(&mut self) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.fate != Fate::Discard {
            return None;
        }
        self.fate = Fate::Settled;
        let (store, node, version) = (self.store.clone(), self.node.clone(), self.version.clone());
        let entry = (!self.uncertain).then(|| self.journal_entry.clone());
        let mut writes = std::mem::take(&mut self.writes);
        Some(async move {
            while writes.join_next().await.is_some() {}
            if let Err(error) = delete_uncommitted(&store, &node, &version, entry.as_ref()).await {
                tracing::debug!(%error, version, "an uncommitted version is left for the sweep");
            }
        })
    }
}

impl Drop for Uncommitted {
    /// Dropped uncommitted (a client gone mid-upload, a panic): requests of
    /// the version's may have been cut off in flight, so its bytes go now
    /// and its journal entry stays for the sweep.
    fn drop(&mut self) {
        self.uncertain = true;
        let Some(discarding) = self.take_discard() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(discarding));
        }
    }
}

/// Deletes a version no marker names, then (when given) its journal entry.
async fn delete_uncommitted(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
    version: &str,
    journal_entry: Option<&Path>,
) -> Result<(), FolderError> {
    if let Some(read) = markers::read_resource_marker(store, node).await?
        && read.marker.referenced_versions().any(|referenced| referenced == version)
    {
        return Ok(());
    }
    let written: Vec<Path> =
        store.list(Some(&node.paths.version(version))).map_ok(|meta| meta.location).try_collect().await?;
    crate::storage::delete_all(store.as_ref(), written).await?;
    let Some(journal_entry) = journal_entry else { return Ok(()) };
    match store.delete(journal_entry).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// When a mutation must be committed by: half the grace period after its
/// version was journaled, so the sweep (which waits the whole grace period)
/// never deletes a version that can still be committed.
/// A write bound to a per-request key also stops when the key expires.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    at: Instant,
    limit: Duration,
    key_expires: Option<Instant>,
}

impl Deadline {
    pub(super) fn starting_now(limit: Duration) -> Self {
        Self { at: Instant::now() + limit, limit, key_expires: None }
    }

    /// Also ends when the key that expires at `expires_at` (epoch ms) does.
    pub(super) fn bounded_by_key(self, expires_at: i64) -> Self {
        let left = Duration::from_millis(u64::try_from(expires_at - crate::clock::now_ms()).unwrap_or(0));
        Self { key_expires: Some(Instant::now() + left), ..self }
    }

    pub(super) fn check(&self) -> Result<(), FolderError> {
        let now = Instant::now();
        if self.key_expires.is_some_and(|expires| now >= expires) {
            return Err(KeyLapsed::Ended.into());
        }
        if now < self.at { Ok(()) } else { Err(FolderError::TooSlow { limit_seconds: self.limit.as_secs().max(1) }) }
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
        self.check(self.size)
    }

    /// A file of `size` bytes against the limits.
    fn check(&self, size: u64) -> Result<(), FolderError> {
        if size > self.limits.max_file_bytes {
            return Err(FolderError::TooLarge(format!(
                "File '{}' exceeds the limit of {} bytes per file",
                self.path, self.limits.max_file_bytes
            )));
        }
        if self.before + size > self.limits.max_total_bytes {
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
    let mut hasher = DigestStream::md5_and_sha256();
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
    let digests = hasher.finish().await.map_err(FolderError::Storage)?;
    Ok(FileRecord { etag: digests.md5, size: counter.size, sha256: digests.sha256 })
}

fn io_to_storage(error: std::io::Error) -> FolderError {
    FolderError::Storage(object_store::Error::Generic { store: "upload", source: Box::new(error) })
}
