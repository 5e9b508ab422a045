//! Every v2 operation. The pattern of each mutation:
//!
//! 1. check names and structure (nothing written yet);
//! 2. journal the versions that may become garbage ([`GcJournal`]);
//! 3. write new bytes under a fresh `v/<version>/` prefix nobody else uses;
//! 4. let the handler validate the new file set and build the metadata;
//! 5. under the lock, re-read the marker, check the conditions, and commit
//!    with a conditional write of the marker (the etag is the fencing token);
//! 6. publish the change event.
//!
//! A failure anywhere before step 5 leaves the old marker in place; the
//! journal lets the sweep remove what step 3 wrote.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use indexmap::IndexMap;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::Serialize;
use tokio::io::AsyncWriteExt;

use super::gc::GcJournal;
use super::layout::{NodePaths, VERSIONS_DIR, decode_part};
use super::marker::{
    FileRecord, FolderMarker, MarkerState, Md5Stream, RESOURCE_MARKER, ResourceMarker, SCHEMA_VERSION, VersionRecord,
    aggregate_etag, hex, md5_hex_of,
};
use super::names::{NameError, check_file_path, check_no_file_folder_clash, check_node_segments};
use crate::access::Shows;
use crate::buckets::BucketLocation;
use crate::config::{FoldersConfig, TypeSettings};
use crate::etag::{PreconditionFailed, Preconditions};
use crate::events::{EventAction, EventBus, ResourceEvent};
use crate::handlers::files::ReadFuture;
use crate::handlers::{
    Checked, FileEntry, FileSource, Handler, HandlerError, Mutation, Problem, ReadError, ResourceInfo,
};
use crate::locks::{LockError, LockGuard, LockService};
use crate::resource_url::{MAX_STORAGE_PATH_BYTES, ResourceUrl, UrlError};
use crate::storage::{PathLimitError, PathLimits};

/// Marker reads a listing keeps in flight.
const LISTING_READ_AHEAD: usize = 16;
/// Length of a version id ([`new_id`]).
const VERSION_ID_LEN: usize = 36;
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
/// Server-side copies one new version makes at once.
const COPIES_IN_FLIGHT: usize = 8;

/// Limits of one resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderLimits {
    pub max_file_bytes: u64,
    pub max_files: u32,
    pub max_total_bytes: u64,
}

impl FolderLimits {
    /// Host defaults, then what the handler asks for, then the per-type
    /// configuration (the operator has the last word).
    pub fn resolve(defaults: &FoldersConfig, handler: &Handler, settings: Option<&TypeSettings>) -> Self {
        let asked = &handler.description().limits;
        let configured = settings.cloned().unwrap_or_default();
        Self {
            max_file_bytes: configured.max_file_bytes.or(asked.max_file_bytes).unwrap_or(defaults.max_file_bytes),
            max_files: configured.max_files.or(asked.max_files).unwrap_or(defaults.max_files),
            max_total_bytes: configured.max_total_bytes.or(asked.max_total_bytes).unwrap_or(defaults.max_total_bytes),
        }
    }
}

/// Which earlier versions of a resource stay readable and restorable
/// (SPEC §11): the newest `keep_versions` (the current one counts), and every
/// version younger than `keep_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub keep_versions: u32,
    pub keep_ms: i64,
}

impl Retention {
    pub fn resolve(defaults: &FoldersConfig, settings: Option<&TypeSettings>) -> Self {
        let settings = settings.cloned().unwrap_or_default();
        let days = settings.keep_versions_days.unwrap_or(defaults.keep_versions_days);
        Self {
            keep_versions: settings.keep_versions.unwrap_or(defaults.keep_versions).max(1),
            // Negative or NaN: none (the cast saturates, NaN becomes 0).
            keep_ms: (days.max(0.0) * 86_400_000.0) as i64,
        }
    }

    /// The history once `previous` (newest first: the version being
    /// superseded, then the marker's history) is no longer current, at
    /// `now`; and the versions to journal: those dropped, and those kept
    /// from now on for their age only (the sweep expires them).
    pub fn apply(&self, previous: Vec<VersionRecord>, now: i64) -> (Vec<VersionRecord>, Vec<String>) {
        let by_count = self.keep_versions as usize - 1;
        let mut kept = Vec::new();
        let mut journal = Vec::new();
        for (index, mut record) in previous.into_iter().enumerate() {
            if index < by_count {
                record.keep_until = None;
                kept.push(record);
                continue;
            }
            let until = record.created_at.saturating_add(self.keep_ms);
            if self.keep_ms > 0 && until > now {
                if record.keep_until.is_none() {
                    journal.push(record.version.clone());
                }
                record.keep_until = Some(until);
                kept.push(record);
            } else {
                journal.push(record.version);
            }
        }
        (kept, journal)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("Not found: {0}")]
    NotFound(String),
    /// A version id the resource does not keep (never had, or swept).
    #[error("Version {0} not found")]
    VersionNotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("Invalid {type_name}: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid { type_name: String, problems: Vec<Problem> },
    #[error("Too many files: the limit is {limit} per resource")]
    TooManyFiles { limit: u32 },
    #[error("{0}")]
    TooLarge(String),
    #[error(transparent)]
    Precondition(#[from] PreconditionFailed),
    #[error("Folder is not empty: {0}")]
    FolderNotEmpty(String),
    #[error("{0}")]
    Conflict(String),
    /// The request took longer than the commit deadline: nothing was stored.
    #[error("The upload took longer than {limit_seconds} s to commit; nothing was stored. Retry it (faster)")]
    TooSlow { limit_seconds: u64 },
    #[error(transparent)]
    Handler(#[from] HandlerError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("storage error: {0}")]
    Storage(#[from] object_store::Error),
}

impl From<UrlError> for FolderError {
    fn from(error: UrlError) -> Self {
        Self::BadRequest(error.to_string())
    }
}

impl From<PathLimitError> for FolderError {
    fn from(error: PathLimitError) -> Self {
        Self::BadRequest(error.to_string())
    }
}

impl From<NameError> for FolderError {
    fn from(error: NameError) -> Self {
        Self::BadRequest(error.to_string())
    }
}

/// A v2 node a request addresses: its URL, the bucket it lives in, and
/// where that puts it in the store.
#[derive(Debug, Clone)]
pub struct Node {
    pub url: ResourceUrl,
    pub location: BucketLocation,
    paths: NodePaths,
}

impl Node {
    /// Checks reserved names and the storage-path limit.
    pub fn new(url: ResourceUrl, location: BucketLocation) -> Result<Self, FolderError> {
        check_node_segments(url.segments())?;
        url.storage_path(&location.to_string())?;
        let paths = NodePaths::new(&url, &location);
        Ok(Self { url, location, paths })
    }

    pub fn paths(&self) -> &NodePaths {
        &self.paths
    }

    /// Where a file of this resource is stored must fit every storage limit:
    /// SPEC §2's 900 bytes for the whole (decoded) storage path, version
    /// prefix included, and what the backend holds per path segment.
    fn check_file_location(&self, path: &str, limits: &PathLimits) -> Result<(), FolderError> {
        let node_path = self.url.storage_path(&self.location.to_string())?;
        let file_path = format!("{node_path}/{VERSIONS_DIR}/{}/{path}", "0".repeat(VERSION_ID_LEN));
        if file_path.len() > MAX_STORAGE_PATH_BYTES {
            return Err(FolderError::BadRequest(format!(
                "File path '{path}' is too long: the resource's storage path with it exceeds max allowed size: \
                 {MAX_STORAGE_PATH_BYTES}"
            )));
        }
        Ok(limits.check(&self.paths.file(&"0".repeat(VERSION_ID_LEN), path))?)
    }

    /// The URL of this node as a resource (no trailing slash).
    fn item_url(&self) -> String {
        let mut url = self.url.to_string();
        if url.ends_with('/') && !self.url.is_bucket_root() {
            url.pop();
        }
        url
    }

    fn bucket_lock_key(&self) -> String {
        format!("bucket:{}{}", self.location, self.url.group())
    }

    fn resource_lock_key(&self) -> String {
        resource_lock_key(self.paths.base())
    }

    fn ancestors(&self) -> Vec<Node> {
        let mut ancestors = Vec::new();
        let mut current = self.url.parent();
        while let Some(url) = current {
            if url.is_bucket_root() {
                break;
            }
            current = url.parent();
            let paths = NodePaths::new(&url, &self.location);
            ancestors.push(Node { url, location: self.location.clone(), paths });
        }
        ancestors.reverse();
        ancestors
    }

    fn resource_info(&self) -> ResourceInfo {
        ResourceInfo { name: self.url.name().unwrap_or_default().to_string(), path: self.url.decoded_path() }
    }
}

/// A marker as read, with the token a conditional write needs.
struct ReadMarker<T> {
    marker: T,
    version: UpdateVersion,
}

/// Files being written for a new version, before the commit.
pub struct Staging {
    node: Node,
    version: String,
    /// Every file added so far; a small file still being written has its
    /// size but no etag until [`Staging::flush`].
    files: BTreeMap<String, FileRecord>,
    /// Small files being hashed and written: `(path, etag, bytes held)`.
    /// Dropping the staging aborts them (what they wrote is the sweep's).
    writes: tokio::task::JoinSet<Result<(String, String, usize), FolderError>>,
    bytes_in_flight: usize,
    /// Whether the resource was live when staging began: which locks the
    /// commit takes first (it looks again under them).
    existed: bool,
    limits: FolderLimits,
    /// Past it the staged version may already be judged garbage by the
    /// sweep: nothing more is written and the commit is refused.
    deadline: Deadline,
    path_limits: PathLimits,
    store: Arc<dyn ObjectStore>,
    /// The journal entry naming this version as possible garbage.
    journal_entry: Path,
}

impl Staging {
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
struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    fn starting_now(limit: Duration) -> Self {
        Self { at: Instant::now() + limit, limit }
    }

    fn check(&self) -> Result<(), FolderError> {
        if Instant::now() < self.at {
            Ok(())
        } else {
            Err(FolderError::TooSlow { limit_seconds: self.limit.as_secs().max(1) })
        }
    }
}

/// Counts a file's bytes against the per-file and per-resource limits.
struct ByteCounter<'a> {
    path: &'a str,
    limits: &'a FolderLimits,
    /// Bytes of the resource's earlier files.
    before: u64,
    size: u64,
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
async fn write_streamed<S, E>(
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

/// The result of a committed mutation.
#[derive(Debug, Clone)]
pub struct Committed {
    pub marker: ResourceMarker,
    pub created: bool,
}

/// One page of a listing (`listing_json` writes its nodes as DIAL does).
#[derive(Debug, Clone)]
pub struct Listing {
    pub items: Vec<ListedNode>,
    pub next_token: Option<String>,
}

/// A child found by a listing.
#[derive(Debug, Clone)]
pub enum ListedNode {
    Resource { url: ResourceUrl, marker: Box<ResourceMarker> },
    Folder { url: ResourceUrl, marker: FolderMarker },
    File { resource: ResourceUrl, path: String, record: FileRecord },
    FileDirectory { resource: ResourceUrl, path: String },
}

impl ListedNode {
    /// The URL access decisions are about: the resource's for its files.
    pub fn url(&self) -> &ResourceUrl {
        match self {
            Self::Resource { url, .. } | Self::Folder { url, .. } => url,
            Self::File { resource, .. } | Self::FileDirectory { resource, .. } => resource,
        }
    }
}

/// The folder engine: one per server, shared by all requests.
pub struct FolderEngine {
    store: Arc<dyn ObjectStore>,
    pub(super) locks: Arc<dyn LockService>,
    events: Arc<dyn EventBus>,
    journal: GcJournal,
    config: FoldersConfig,
    type_settings: BTreeMap<String, TypeSettings>,
    path_limits: PathLimits,
}

impl FolderEngine {
    pub fn new(
        store: Arc<dyn ObjectStore>,
        locks: Arc<dyn LockService>,
        events: Arc<dyn EventBus>,
        config: FoldersConfig,
        type_settings: BTreeMap<String, TypeSettings>,
    ) -> Self {
        let journal = GcJournal::new(store.clone());
        Self { store, locks, events, journal, config, type_settings, path_limits: PathLimits::default() }
    }

    /// What the store cannot hold (the local disk's name length), refused
    /// with a 400 before anything is written.
    pub fn with_path_limits(mut self, limits: PathLimits) -> Self {
        self.path_limits = limits;
        self
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn journal(&self) -> &GcJournal {
        &self.journal
    }

    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.config.grace_seconds)
    }

    /// A writer slower than this gives up before committing: the sweep may
    /// consider its version garbage after the full grace period.
    fn commit_deadline(&self) -> Deadline {
        Deadline::starting_now(self.grace() / 2)
    }

    pub fn limits(&self, handler: &Handler) -> FolderLimits {
        FolderLimits::resolve(&self.config, handler, self.type_settings.get(&handler.description().group))
    }

    pub fn retention(&self, handler: &Handler) -> Retention {
        Retention::resolve(&self.config, self.type_settings.get(&handler.description().group))
    }

    // ----- reads -------------------------------------------------------

    async fn read_resource_marker(&self, node: &Node) -> Result<Option<ReadMarker<ResourceMarker>>, FolderError> {
        read_json(&self.store, &node.paths.resource_marker()).await
    }

    async fn read_folder_marker(&self, node: &Node) -> Result<Option<ReadMarker<FolderMarker>>, FolderError> {
        read_json(&self.store, &node.paths.folder_marker()).await
    }

    /// Whether a DIAL folder exists at `node` (the bucket root always does).
    pub async fn folder_exists(&self, node: &Node) -> Result<bool, FolderError> {
        Ok(node.url.is_bucket_root() || self.read_folder_marker(node).await?.is_some())
    }

    /// The live (ready) marker of a resource.
    pub async fn live_marker(&self, node: &Node) -> Result<Option<ResourceMarker>, FolderError> {
        Ok(self.read_resource_marker(node).await?.map(|r| r.marker).filter(ResourceMarker::is_ready))
    }

    /// The URL access decisions about `node` use. A v2 resource is one
    /// item whatever form names it: listings show it as `…/x/`, and that
    /// form is checked (and shared) as `…/x`, so a grant on the item covers
    /// it and a grant on a folder `…/x/` never meets an item of that name.
    pub async fn access_url(&self, node: &Node) -> Result<ResourceUrl, FolderError> {
        if node.url.is_folder()
            && let Some(item) = node.url.as_item()
            && self.live_marker(node).await?.is_some()
        {
            return Ok(item);
        }
        Ok(node.url.clone())
    }

    /// The marker of the resource a whole-resource GET addresses; a folder
    /// there is a 400 (use the listing).
    /// Listings give resources a URL ending in `/`; that form reads the
    /// resource too.
    pub async fn resource_for_read(&self, node: &Node) -> Result<ResourceMarker, FolderError> {
        if node.url.is_bucket_root() {
            return Err(self.folder_read_error(node).await?);
        }
        match self.live_marker(node).await? {
            Some(marker) => Ok(marker),
            None => Err(self.folder_read_error(node).await?),
        }
    }

    async fn folder_read_error(&self, node: &Node) -> Result<FolderError, FolderError> {
        if node.url.is_bucket_root() || self.read_folder_marker(node).await?.is_some() {
            return Ok(FolderError::BadRequest(format!(
                "{} is a folder: list it with /v2/metadata/{}",
                node.url, node.url
            )));
        }
        Ok(FolderError::NotFound(node.url.to_string()))
    }

    /// The object holding one file of the current version.
    pub fn file_path(
        &self,
        node: &Node,
        marker: &ResourceMarker,
        path: &str,
    ) -> Result<(Path, FileRecord), FolderError> {
        let record = marker
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| FolderError::NotFound(format!("{}/files/{path}", node.item_url())))?;
        Ok((node.paths.file(&marker.current_version, path), record))
    }

    /// The marker of one version of a live resource, as it was when that
    /// version was current: the marker itself for the current version, the
    /// kept snapshot for a retained one. What the history does not name is
    /// 404, whatever is still in the store.
    pub async fn version_for_read(&self, node: &Node, version: &str) -> Result<ResourceMarker, FolderError> {
        let live = self.resource_for_read(node).await?;
        self.version_of(node, live, version).await
    }

    async fn version_of(
        &self,
        node: &Node,
        live: ResourceMarker,
        version: &str,
    ) -> Result<ResourceMarker, FolderError> {
        if live.current_version == version {
            return Ok(live);
        }
        let now = now_ms();
        if !live.history.iter().any(|record| record.version == version && record.visible_at(now)) {
            return Err(FolderError::VersionNotFound(version.to_string()));
        }
        let snapshot = read_json::<ResourceMarker>(&self.store, &node.paths.version(version).join(RESOURCE_MARKER))
            .await?
            .map(|read| read.marker)
            .filter(|snapshot| snapshot.current_version == version);
        snapshot.ok_or_else(|| FolderError::VersionNotFound(version.to_string()))
    }

    /// Makes a retained version current again as a new commit (a fresh
    /// version with its files copied server-side, checked by the handler
    /// like any write, `conditions` checked against the current version).
    /// Naming the current version changes nothing.
    pub async fn restore_version(
        &self,
        node: &Node,
        version: &str,
        handler: &Handler,
        author: Option<String>,
        conditions: &Preconditions,
    ) -> Result<ResourceMarker, FolderError> {
        let live = self.resource_for_read(node).await?;
        conditions.check_write(Some(&live.etag))?;
        if live.current_version == version {
            return Ok(live);
        }
        let source = self.version_of(node, live, version).await?;
        Ok(self.copy_version(node, &source, node, handler, author, conditions).await?.marker)
    }

    /// Moves the version `previous` holds out of current (a commit is about
    /// to replace it) and returns the history the new marker keeps: what
    /// `retention` drops or keeps for its age only is journaled, and a
    /// version that stays readable gets its manifest kept beside its files.
    /// A tombstone's versions all go (a re-create starts a new history).
    /// Runs before the marker write, so a crash after it leaves only
    /// journal entries and a snapshot the sweep settles.
    async fn supersede(
        &self,
        node: &Node,
        previous: Option<&ResourceMarker>,
        retention: Retention,
    ) -> Result<Vec<VersionRecord>, FolderError> {
        let Some(previous) = previous else { return Ok(Vec::new()) };
        let base = node.paths.base();
        let (history, journal) = if previous.is_ready() {
            let candidates = std::iter::once(previous.current_record()).chain(previous.history.iter().cloned());
            retention.apply(candidates.collect(), now_ms())
        } else {
            (Vec::new(), previous.referenced_versions().map(str::to_owned).collect())
        };
        let keeps_previous = history.first().is_some_and(|r| r.version == previous.current_version);
        let snapshot = async {
            if keeps_previous {
                let path = node.paths.version(&previous.current_version).join(RESOURCE_MARKER);
                self.store.put(&path, PutPayload::from(previous.version_snapshot())).await?;
            }
            Ok::<(), FolderError>(())
        };
        let journaled = futures_util::future::try_join_all(
            journal.iter().map(|version| async move { self.journal.record(base, Some(version)).await }),
        );
        tokio::try_join!(snapshot, journaled)?;
        Ok(history)
    }

    // ----- whole-resource writes --------------------------------------

    /// Starts a new version of `node`: journals it, then accepts files.
    pub async fn stage(
        &self,
        node: &Node,
        handler: &Handler,
        conditions: &Preconditions,
    ) -> Result<Staging, FolderError> {
        if node.url.is_folder() {
            return Err(FolderError::BadRequest(format!("Folder not allowed: {}", node.url)));
        }
        self.path_limits.check(&node.paths.resource_marker())?;
        // Fail fast on a create-only request that cannot succeed.
        let current = self.live_marker(node).await?;
        conditions.check_write(current.as_ref().map(|m| m.etag.as_str()))?;
        let version = new_id();
        let deadline = self.commit_deadline();
        let journal_entry = self.journal.record(node.paths.base(), Some(&version)).await?;
        Ok(Staging {
            journal_entry,
            existed: current.is_some(),
            node: node.clone(),
            version,
            files: BTreeMap::new(),
            writes: tokio::task::JoinSet::new(),
            bytes_in_flight: 0,
            limits: self.limits(handler),
            deadline,
            path_limits: self.path_limits,
            store: self.store.clone(),
        })
    }

    /// Validates a staged version and commits it as the resource's current one.
    pub async fn commit(
        &self,
        mut staging: Staging,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, FolderError> {
        staging.flush().await?;
        let node = staging.node.clone();
        // Past the deadline the sweep may have removed staged files: stop
        // before the handler reads them.
        staging.deadline.check()?;
        let (metadata, warnings) = self.check_with_handler(&node, &staging.version, &staging.files, handler).await?;
        // Creating is structural (bucket lock); replacing is a content update
        // (resource lock). Staging saw which one this is likely to be; if a
        // concurrent delete turned a replace into a create, take the
        // structural locks and look again.
        let mut structural = !staging.existed;
        let (marker, creating) = loop {
            staging.deadline.check()?;
            let locks = self.lock_for(&node, structural).await?;
            let existing = self.read_resource_marker(&node).await?;
            let live = existing.as_ref().filter(|r| r.marker.is_ready());
            if live.is_none() && !structural {
                structural = true;
                continue;
            }
            let creating = live.is_none();
            conditions.check_write(live.map(|r| r.marker.etag.as_str()))?;
            if creating {
                self.check_structure_for_create(&node).await?;
                self.vivify_ancestors(&node, author.as_deref()).await?;
            }
            let history = self.supersede(&node, existing.as_ref().map(|r| &r.marker), self.retention(handler)).await?;
            staging.deadline.check()?;
            // The structure checked above (no resource or folder in the way)
            // holds only while the bucket lock does.
            if creating {
                ensure_held(&locks)?;
            }
            let now = now_ms();
            let marker = ResourceMarker {
                type_name: handler.description().type_name.clone(),
                schema_version: SCHEMA_VERSION,
                state: MarkerState::Ready,
                current_version: staging.version.clone(),
                etag: aggregate_etag(&staging.files),
                created_at: live.map(|r| r.marker.created_at).unwrap_or(now),
                updated_at: now,
                author: live.and_then(|r| r.marker.author.clone()).or(author.clone()),
                deleted_at: None,
                purged_at: None,
                commit_id: new_id(),
                metadata: metadata.clone(),
                warnings: warnings.clone(),
                files: staging.files.clone(),
                committed_at: Some(now),
                committed_by: author.clone(),
                history,
            };
            match self.write_marker(&node, &marker, existing.map(|r| r.version)).await {
                Ok(()) => break (marker, creating),
                // Lost the compare-and-swap to a writer these locks do not
                // exclude (the sweep purging a tombstone, an instance that
                // shares no lock with this one, a lease that ran out): look
                // again, and write over what is there now if the conditions
                // hold there. A write without conditions is no
                // compare-and-swap: others writing is no reason to refuse it.
                Err(FolderError::Precondition(_)) => continue,
                Err(error) => return Err(error),
            }
        };
        self.journal.forget_staged(staging.journal_entry);
        let action = if creating { EventAction::Create } else { EventAction::Update };
        self.publish(action, &node, Some(&marker.etag)).await;
        Ok(Committed { marker, created: creating })
    }

    /// Copies the live version of `source` to `target` if `conditions` hold
    /// there: server-side copies into a new version, then the same
    /// validation and commit as a PUT, so `target` gets a fresh, valid
    /// marker with the same aggregate etag. Publication's hops and the
    /// copy/move operations use it.
    pub async fn copy_resource(
        &self,
        source: &Node,
        target: &Node,
        handler: &Handler,
        author: Option<String>,
        conditions: &Preconditions,
    ) -> Result<Committed, FolderError> {
        let marker = self.resource_for_read(source).await?;
        self.copy_version(source, &marker, target, handler, author, conditions).await
    }

    /// Copies the version `marker` describes (of `source`) into a new
    /// version of `target` and commits it there.
    async fn copy_version(
        &self,
        source: &Node,
        marker: &ResourceMarker,
        target: &Node,
        handler: &Handler,
        author: Option<String>,
        conditions: &Preconditions,
    ) -> Result<Committed, FolderError> {
        let mut staging = self.stage(target, handler, conditions).await?;
        // A version stays readable for the grace period after it stops being
        // referenced, even if the source changes meanwhile, so these copies
        // are consistent.
        let copies = marker
            .files
            .keys()
            .map(|path| (source.paths.file(&marker.current_version, path), target.paths.file(&staging.version, path)));
        self.copy_all(copies.collect()).await?;
        staging.files.extend(marker.files.clone());
        self.commit(staging, handler, conditions, author).await
    }

    /// Server-side copies, [`COPIES_IN_FLIGHT`] at a time.
    async fn copy_all(&self, copies: Vec<(Path, Path)>) -> Result<(), FolderError> {
        let store = self.store.clone();
        futures_util::stream::iter(copies)
            .map(move |(from, to)| {
                let store = store.clone();
                async move { store.copy(&from, &to).await }
            })
            .buffer_unordered(COPIES_IN_FLIGHT)
            .try_for_each(|()| async { Ok(()) })
            .await?;
        Ok(())
    }

    /// Runs the handler on a version's file set: the problems, or the
    /// marker metadata and the warnings to keep.
    async fn check_with_handler(
        &self,
        node: &Node,
        version: &str,
        files: &BTreeMap<String, FileRecord>,
        handler: &Handler,
    ) -> Result<(IndexMap<String, String>, Vec<Problem>), FolderError> {
        let entries: Vec<FileEntry> =
            files.iter().map(|(path, record)| FileEntry { path: path.clone(), size: record.size }).collect();
        let files = Arc::new(VersionFiles {
            store: self.store.clone(),
            paths: node.paths.clone(),
            version: version.to_string(),
            files: files.clone(),
            failure: std::sync::Mutex::new(None),
        });
        let source: Arc<dyn FileSource> = files.clone();
        let info = node.resource_info();
        let type_name = handler.description().type_name.clone();
        let checked = handler.check(&info, &entries, source).await;
        // A file the store failed to give is the host's failure, not a
        // problem of the upload, whatever the handler made of it.
        files.take_failure()?;
        match checked? {
            Checked::Valid { warnings, metadata } => Ok((metadata, warnings)),
            Checked::Invalid { problems } => Err(FolderError::Invalid { type_name, problems }),
        }
    }

    /// Tombstones a resource; the sweep removes its files after the grace
    /// period (until then it can be restored).
    pub async fn delete_resource(&self, node: &Node, conditions: &Preconditions) -> Result<(), FolderError> {
        let _locks = self.lock_for(node, true).await?;
        let existing = self.read_resource_marker(node).await?;
        let Some(current) = existing.filter(|r| r.marker.is_ready()) else {
            return Err(FolderError::NotFound(node.url.to_string()));
        };
        conditions.check_write(Some(&current.marker.etag))?;
        self.journal.record(node.paths.base(), None).await?;
        let mut tombstone = current.marker.clone();
        let now = now_ms();
        tombstone.state = MarkerState::Deleting;
        tombstone.deleted_at = Some(now);
        tombstone.updated_at = now;
        tombstone.commit_id = new_id();
        self.write_marker(node, &tombstone, Some(current.version)).await?;
        self.publish(EventAction::Delete, node, Some(&tombstone.etag)).await;
        Ok(())
    }

    /// Flips a tombstone back to ready within the grace window.
    pub async fn restore(&self, node: &Node) -> Result<ResourceMarker, FolderError> {
        let _locks = self.lock_for(node, true).await?;
        let Some(read) = self.read_resource_marker(node).await? else {
            return Err(FolderError::NotFound(node.url.to_string()));
        };
        if read.marker.is_ready() {
            return Err(FolderError::BadRequest(format!("{} is not deleted", node.url)));
        }
        let deleted_at = read.marker.deleted_at.unwrap_or(0);
        if read.marker.purged_at.is_some() || now_ms() - deleted_at > self.grace().as_millis() as i64 {
            return Err(FolderError::NotFound(format!("{} (the restore window has passed)", node.url)));
        }
        self.check_structure_for_create(node).await?;
        self.vivify_ancestors(node, None).await?;
        ensure_held(&_locks)?;
        let mut restored = read.marker.clone();
        restored.state = MarkerState::Ready;
        restored.deleted_at = None;
        restored.updated_at = now_ms();
        restored.commit_id = new_id();
        self.write_marker(node, &restored, Some(read.version)).await?;
        self.publish(EventAction::Create, node, Some(&restored.etag)).await;
        Ok(restored)
    }

    // ----- single-file writes -----------------------------------------

    /// Replaces or adds one file: a new version with the other files copied
    /// server-side.
    pub async fn put_file<S, E>(
        &self,
        node: &Node,
        path: &str,
        body: S,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        check_file_path(path)?;
        self.mutate_file(node, path, Mutation::Put, Some(body), handler, conditions, author).await
    }

    /// Removes one file (never `SKILL.md` for skills: the handler decides).
    pub async fn delete_file(
        &self,
        node: &Node,
        path: &str,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, FolderError> {
        self.mutate_file::<futures_util::stream::Empty<Result<Bytes, std::io::Error>>, std::io::Error>(
            node,
            path,
            Mutation::Delete,
            None,
            handler,
            conditions,
            author,
        )
        .await
    }

    /// A single-file change, optimistic like a whole PUT: the new content
    /// is streamed and the new version built (server-side copies of the
    /// other files, handler validation) without any lock. Only the re-read
    /// and the marker write happen under the resource lock — and, when
    /// another request committed meanwhile, the rebuild of the version on
    /// that one (copying only the files that differ), there, where no other
    /// committer can land first. So a change without conditions is never
    /// refused because others write at the same time (it is no
    /// compare-and-swap); with `If-Match`, the conditions are checked again
    /// on whatever it is rebuilt on. Where the lock is not shared (instances
    /// without Redis, a lease that ran out) the marker write can still lose;
    /// the change is then rebuilt again, until the commit deadline.
    #[allow(clippy::too_many_arguments)]
    async fn mutate_file<S, E>(
        &self,
        node: &Node,
        path: &str,
        op: Mutation,
        body: Option<S>,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, FolderError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let deadline = self.commit_deadline();
        let limits = self.limits(handler);
        // Fail fast on what cannot succeed; all of it is checked again at the commit.
        let mut based_on = self.live_read(node).await?;
        conditions.check_write(Some(&based_on.marker.etag))?;
        if op == Mutation::Delete && !based_on.marker.files.contains_key(path) {
            return Err(FolderError::NotFound(format!("{}/files/{path}", node.item_url())));
        }
        if op == Mutation::Put {
            node.check_file_location(path, &self.path_limits)?;
            check_no_file_folder_clash(based_on.marker.files.keys(), path)?;
        }
        if let Err(problem) = handler.validate_file_mutation(path, op).await? {
            let type_name = handler.description().type_name.clone();
            return Err(FolderError::Invalid { type_name, problems: vec![problem] });
        }
        // One new version, the upload streamed straight into it; a rebuild
        // changes it in place (it is nobody else's until the commit).
        let version = new_id();
        let journal_entry = self.journal.record(node.paths.base(), Some(&version)).await?;
        let uploaded = match body {
            Some(body) => {
                let others = based_on.marker.files.iter().filter(|(p, _)| p.as_str() != path).map(|(_, f)| f.size);
                let target = node.paths.file(&version, path);
                let counter = ByteCounter { path, limits: &limits, before: others.sum(), size: 0 };
                Some(write_streamed(&self.store, target, Vec::new(), body, counter, deadline).await?)
            }
            None => None,
        };
        let mut files =
            self.build_file_version(node, &based_on.marker, None, &version, path, uploaded.as_ref(), &limits).await?;
        deadline.check()?;
        let mut checked = self.check_with_handler(node, &version, &files, handler).await?;

        let _lock = self.locks.acquire(&node.resource_lock_key()).await?;
        loop {
            deadline.check()?;
            let current = self.live_read(node).await?;
            conditions.check_write(Some(&current.marker.etag))?;
            // Built on the version still current (a change of the marker that
            // keeps it, like the sweep expiring history, needs no rebuild).
            if current.marker.current_version != based_on.marker.current_version {
                if op == Mutation::Delete && !current.marker.files.contains_key(path) {
                    return Err(FolderError::NotFound(format!("{}/files/{path}", node.item_url())));
                }
                files = self
                    .build_file_version(node, &current.marker, Some(&files), &version, path, uploaded.as_ref(), &limits)
                    .await?;
                deadline.check()?;
                checked = self.check_with_handler(node, &version, &files, handler).await?;
                based_on = current;
                continue;
            }
            let history = self.supersede(node, Some(&current.marker), self.retention(handler)).await?;
            deadline.check()?;
            let now = now_ms();
            let (metadata, warnings) = checked.clone();
            let marker = ResourceMarker {
                current_version: version.clone(),
                etag: aggregate_etag(&files),
                updated_at: now,
                commit_id: new_id(),
                metadata,
                warnings,
                files: files.clone(),
                committed_at: Some(now),
                committed_by: author.clone(),
                history,
                ..current.marker.clone()
            };
            match self.write_marker(node, &marker, Some(current.version)).await {
                Ok(()) => {}
                // Lost to a committer this lock does not exclude: rebuild on
                // what it committed.
                Err(FolderError::Precondition(_)) => continue,
                Err(error) => return Err(error),
            }
            self.journal.forget_staged(journal_entry);
            self.publish(EventAction::Update, node, Some(&marker.etag)).await;
            return Ok(Committed { marker, created: false });
        }
    }

    /// The live marker of `node` with its conditional-write token; 404 when
    /// there is none.
    async fn live_read(&self, node: &Node) -> Result<ReadMarker<ResourceMarker>, FolderError> {
        self.read_resource_marker(node)
            .await?
            .filter(|r| r.marker.is_ready())
            .ok_or_else(|| FolderError::NotFound(node.url.to_string()))
    }

    /// Fills `version` with the files of `based_on` except `path`, plus the
    /// uploaded content (streamed into `version` already); checks the limits
    /// again, since the other files may have changed. `built` is what
    /// `version` holds from an earlier build on another version: only the
    /// files that differ are copied, and those `based_on` no longer has are
    /// removed first (one may be where a new directory goes).
    #[allow(clippy::too_many_arguments)]
    async fn build_file_version(
        &self,
        node: &Node,
        based_on: &ResourceMarker,
        built: Option<&BTreeMap<String, FileRecord>>,
        version: &str,
        path: &str,
        uploaded: Option<&FileRecord>,
        limits: &FolderLimits,
    ) -> Result<BTreeMap<String, FileRecord>, FolderError> {
        let mut files = based_on.files.clone();
        files.remove(path);
        if let Some(record) = uploaded {
            // Checked again: the version rebuilt on may hold new files.
            check_no_file_folder_clash(files.keys(), path)?;
            if files.len() >= limits.max_files as usize {
                return Err(FolderError::TooManyFiles { limit: limits.max_files });
            }
            let total = files.values().map(|f| f.size).sum::<u64>() + record.size;
            if total > limits.max_total_bytes {
                return Err(FolderError::TooLarge(format!(
                    "The resource exceeds the limit of {} bytes in total",
                    limits.max_total_bytes
                )));
            }
        }
        let has = |file: &str, record: &FileRecord| built.and_then(|built| built.get(file)) == Some(record);
        if let Some(built) = built {
            let stale = built.keys().filter(|file| file.as_str() != path && !files.contains_key(*file));
            let stale: Vec<Path> = stale.map(|file| node.paths.file(version, file)).collect();
            if !stale.is_empty() {
                crate::storage::delete_all(self.store.as_ref(), stale).await?;
            }
        }
        let copies = files
            .iter()
            .filter(|(file, record)| !has(file, record))
            .map(|(file, _)| (node.paths.file(&based_on.current_version, file), node.paths.file(version, file)));
        self.copy_all(copies.collect()).await?;
        if let Some(record) = uploaded {
            files.insert(path.to_string(), record.clone());
        }
        Ok(files)
    }

    // ----- folders ------------------------------------------------------

    /// Creates a DIAL folder (and any missing ancestors).
    pub async fn create_folder(&self, node: &Node, author: Option<String>) -> Result<FolderMarker, FolderError> {
        if node.url.is_bucket_root() {
            return Err(FolderError::BadRequest("The bucket root always exists".into()));
        }
        self.path_limits.check(&node.paths.folder_marker())?;
        let lock = self.locks.acquire(&node.bucket_lock_key()).await?;
        self.check_structure_for_create(node).await?;
        if self.read_folder_marker(node).await?.is_some() {
            return Err(FolderError::BadRequest(format!("Folder already exists: {}", node.url)));
        }
        self.vivify_ancestors(node, author.as_deref()).await?;
        lock.ensure_held()?;
        let marker = FolderMarker { schema_version: SCHEMA_VERSION, created_at: now_ms(), author };
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(&node.paths.folder_marker(), marker.to_json().into(), options).await {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(FolderError::BadRequest(format!("Folder already exists: {}", node.url)));
            }
            Err(error) => return Err(error.into()),
        }
        self.publish(EventAction::Create, node, None).await;
        Ok(marker)
    }

    /// Deletes an empty DIAL folder; never cascades. `If-Match` compares
    /// the folder's etag (the one its PUT answered).
    pub async fn delete_folder(&self, node: &Node, conditions: &Preconditions) -> Result<(), FolderError> {
        let _lock = self.locks.acquire(&node.bucket_lock_key()).await?;
        let marker = match node.url.is_bucket_root() {
            true => None,
            false => self.read_folder_marker(node).await?,
        };
        let Some(marker) = marker else {
            return Err(FolderError::NotFound(node.url.to_string()));
        };
        conditions.check_write(Some(&marker.marker.etag()))?;
        let listing = self.list_children(node, None, 1, &|_| true).await?;
        if !listing.items.is_empty() {
            return Err(FolderError::FolderNotEmpty(node.url.to_string()));
        }
        // "Empty" holds only while the bucket lock does, and the delete is
        // unconditional: never delete on a lease that may have run out.
        _lock.ensure_held()?;
        self.store.delete(&node.paths.folder_marker()).await?;
        self.publish(EventAction::Delete, node, None).await;
        Ok(())
    }

    /// No ancestor may be a resource, and the node may be neither a live
    /// resource nor a folder where the other is asked for.
    async fn check_structure_for_create(&self, node: &Node) -> Result<(), FolderError> {
        for ancestor in node.ancestors() {
            if self.live_marker(&ancestor).await?.is_some() {
                return Err(FolderError::BadRequest(format!(
                    "{} is inside the resource {}: resources cannot contain resources or folders",
                    node.url,
                    ancestor.item_url()
                )));
            }
        }
        if node.url.is_folder() {
            if self.live_marker(node).await?.is_some() {
                return Err(FolderError::BadRequest(format!("A resource already exists at {}", node.item_url())));
            }
        } else if self.read_folder_marker(node).await?.is_some() {
            return Err(FolderError::BadRequest(format!("A folder already exists at {}/", node.item_url())));
        }
        Ok(())
    }

    /// Missing ancestor folders are created (auto-vivify); emptiness is never
    /// cascaded back up on delete.
    async fn vivify_ancestors(&self, node: &Node, author: Option<&str>) -> Result<(), FolderError> {
        for ancestor in node.ancestors() {
            let marker =
                FolderMarker { schema_version: SCHEMA_VERSION, created_at: now_ms(), author: author.map(Into::into) };
            let options = PutOptions { mode: PutMode::Create, ..Default::default() };
            match self.store.put_opts(&ancestor.paths.folder_marker(), marker.to_json().into(), options).await {
                Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    // ----- listings -----------------------------------------------------

    /// Resources and folders directly in `node` (a folder or the bucket
    /// root), or everything below it with `recursive`. Reads one marker per
    /// child on the page; never looks inside a resource. Only nodes whose
    /// URL `shows` admits are counted and paged, so a page never ends on —
    /// and a token never names — something the caller may not see.
    pub async fn list(
        &self,
        node: &Node,
        recursive: bool,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, FolderError> {
        if !node.url.is_bucket_root() && self.read_folder_marker(node).await?.is_none() {
            return Err(FolderError::NotFound(node.url.to_string()));
        }
        if limit == 0 {
            // DIAL admits `limit=0`: an empty page with no token (there is
            // no last name to resume after), as the v1 listing answers it.
            return Ok(Listing { items: Vec::new(), next_token: None });
        }
        if recursive {
            self.list_recursive(node, token, limit, shows).await
        } else {
            self.list_children(node, token, limit, shows).await
        }
    }

    async fn list_children(
        &self,
        node: &Node,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, FolderError> {
        let mut names: Vec<String> = self
            .store
            .list_with_delimiter(Some(node.paths.base()))
            .await?
            .common_prefixes
            .iter()
            .filter_map(|prefix| prefix.parts().next_back().map(|part| decode_part(&part)))
            .collect();
        names.sort();
        let candidates: Vec<String> =
            names.into_iter().filter(|name| token.is_none_or(|t| name.as_str() > t)).collect();
        // Marker reads overlap (a few pages' worth of latency becomes one);
        // order is kept, and at most LISTING_READ_AHEAD reads run past the page.
        let mut classified = futures_util::stream::iter(candidates)
            .map(|name| async move { self.classify_child(node, &name).await })
            .buffered(LISTING_READ_AHEAD);
        let mut items = Vec::new();
        let mut next_token = None;
        while let Some(listed) = classified.next().await {
            let Some(listed) = listed?.filter(|listed| shows(listed.url())) else { continue };
            if items.len() == limit {
                next_token = Some(last_name(&items));
                break;
            }
            items.push(listed);
        }
        Ok(Listing { items, next_token })
    }

    async fn classify_child(&self, parent: &Node, name: &str) -> Result<Option<ListedNode>, FolderError> {
        let Ok(url) = parent.url.child(name, false) else { return Ok(None) };
        let child = Node { paths: parent.paths.child(name), url, location: parent.location.clone() };
        if let Some(marker) = self.live_marker(&child).await? {
            return Ok(Some(ListedNode::Resource { url: child.url, marker: Box::new(marker) }));
        }
        if let Some(read) = self.read_folder_marker(&child).await? {
            let url = parent.url.child(name, true)?;
            return Ok(Some(ListedNode::Folder { url, marker: read.marker }));
        }
        Ok(None)
    }

    /// Every folder and resource below `node` (never files or version
    /// trees), in pre-order by name: a folder, then everything in it, then
    /// its next sibling. That order is the order of relative paths compared
    /// segment by segment, so the token — the relative path of the last node
    /// returned — resumes exactly after it: pages together are the unpaged
    /// listing, each node once. Subtrees wholly before the token are not
    /// read at all; folders the caller may not see are not entered (public
    /// rules apply along ancestors, so nothing below them shows either).
    async fn list_recursive(
        &self,
        node: &Node,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, FolderError> {
        let after: Option<Vec<String>> = token.map(|t| t.split('/').map(str::to_owned).collect());
        let mut items = Vec::new();
        let mut last: Vec<String> = Vec::new();
        let root_children = self.list_children(node, None, usize::MAX, &|_| true).await?.items;
        // Each level: the folder's node, its relative path, its children left.
        let mut stack = vec![(node.clone(), Vec::<String>::new(), root_children.into_iter())];
        while let Some((folder, relative, children)) = stack.last_mut() {
            let Some(child) = children.next() else {
                stack.pop();
                continue;
            };
            let (name, is_folder) = match &child {
                ListedNode::Resource { url, .. } => (url.name().unwrap_or_default().to_string(), false),
                ListedNode::Folder { url, .. } => (url.name().unwrap_or_default().to_string(), true),
                _ => continue,
            };
            let mut path = relative.clone();
            path.push(name.clone());
            let done = after.as_ref().is_some_and(|after| path <= *after);
            let shown = shows(child.url());
            if !done && shown {
                if items.len() == limit {
                    return Ok(Listing { items, next_token: Some(last.join("/")) });
                }
                items.push(child);
                last.clone_from(&path);
            }
            // Enter a folder unless all of it comes before the token.
            let token_inside = after.as_ref().is_some_and(|after| after.starts_with(&path));
            if is_folder && shown && (!done || token_inside) {
                let subfolder = folder_child(folder, &name)?;
                let grandchildren = self.list_children(&subfolder, None, usize::MAX, &|_| true).await?.items;
                stack.push((subfolder, path, grandchildren.into_iter()));
            }
        }
        Ok(Listing { items, next_token: None })
    }

    /// Files of the current version under `dir` (the resource root when
    /// empty), from the marker's manifest, paged as every listing is: in the
    /// order of their keys — a file's path, a directory's path with its `/`
    /// (where its first file sorts) — after the key `token` names, at most
    /// `limit`, the last key returned as the next token.
    pub fn list_files(
        &self,
        node: &Node,
        marker: &ResourceMarker,
        dir: &str,
        recursive: bool,
        token: Option<&str>,
        limit: usize,
    ) -> Result<Listing, FolderError> {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        let exists =
            dir.is_empty() || marker.files.range(prefix.clone()..).next().is_some_and(|(p, _)| p.starts_with(&prefix));
        if !exists {
            return Err(FolderError::NotFound(format!("{}/files/{dir}/", node.item_url())));
        }
        let after = token.filter(|token| *token > prefix.as_str());
        let mut items = Vec::new();
        let mut last: Option<String> = None;
        let mut next_token = None;
        for (path, record) in marker.files.range(after.unwrap_or(&prefix).to_string()..) {
            let Some(rest) = path.strip_prefix(&prefix) else { break };
            let directory = rest.split_once('/').filter(|_| !recursive).map(|(subdir, _)| format!("{prefix}{subdir}"));
            let key = directory.as_ref().map_or_else(|| path.clone(), |directory| format!("{directory}/"));
            if after.is_some_and(|after| key.as_str() <= after) || last.as_ref() == Some(&key) {
                continue;
            }
            if items.len() == limit {
                next_token = last;
                break;
            }
            items.push(match directory {
                Some(path) => ListedNode::FileDirectory { resource: node.url.clone(), path },
                None => ListedNode::File { resource: node.url.clone(), path: path.clone(), record: record.clone() },
            });
            last = Some(key);
        }
        Ok(Listing { items, next_token })
    }

    // ----- plumbing -----------------------------------------------------

    /// Structural changes take the bucket lock, content changes the
    /// resource lock (always in that order).
    async fn lock_for(&self, node: &Node, structural: bool) -> Result<Vec<LockGuard>, FolderError> {
        let mut guards = Vec::new();
        if structural {
            guards.push(self.locks.acquire(&node.bucket_lock_key()).await?);
        }
        guards.push(self.locks.acquire(&node.resource_lock_key()).await?);
        Ok(guards)
    }

    /// The commit: a conditional write of the marker. On a lost race the
    /// marker is re-read: if it carries our commit id, the write landed.
    async fn write_marker(
        &self,
        node: &Node,
        marker: &ResourceMarker,
        expected: Option<UpdateVersion>,
    ) -> Result<(), FolderError> {
        let mode = match expected {
            Some(version) => PutMode::Update(version),
            None => PutMode::Create,
        };
        let path = node.paths.resource_marker();
        let payload = PutPayload::from(marker.to_json());
        match self.store.put_opts(&path, payload, PutOptions { mode, ..Default::default() }).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => {
                match self.read_resource_marker(node).await? {
                    Some(read) if read.marker.commit_id == marker.commit_id => Ok(()),
                    _ => Err(FolderError::Precondition(PreconditionFailed(format!(
                        "{} was changed by another request; re-read it and retry",
                        node.url
                    )))),
                }
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn publish(&self, action: EventAction, node: &Node, etag: Option<&str>) {
        let url = if node.url.is_folder() { node.url.to_string() } else { node.item_url() };
        self.events.publish(ResourceEvent::now(action, url, etag.map(Into::into))).await;
    }
}

/// Every guard of a step that relies on its locks must still be held.
fn ensure_held(guards: &[LockGuard]) -> Result<(), FolderError> {
    guards.iter().try_for_each(LockGuard::ensure_held).map_err(FolderError::from)
}

fn folder_child(folder: &Node, name: &str) -> Result<Node, FolderError> {
    let url = folder.url.child(name, true)?;
    Ok(Node { paths: folder.paths.child(name), url, location: folder.location.clone() })
}

fn last_name(items: &[ListedNode]) -> String {
    match items.last() {
        Some(ListedNode::Resource { url, .. } | ListedNode::Folder { url, .. }) => {
            url.name().unwrap_or_default().into()
        }
        _ => String::new(),
    }
}

/// Reads and parses a JSON marker with its conditional-write token.
async fn read_json<T: serde::de::DeserializeOwned>(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
) -> Result<Option<ReadMarker<T>>, FolderError> {
    let result = match store.get(path).await {
        Ok(result) => result,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
    let bytes = result.bytes().await?;
    let marker = serde_json::from_slice(&bytes).map_err(|e| {
        FolderError::Storage(object_store::Error::Generic { store: "marker", source: format!("{path}: {e}").into() })
    })?;
    Ok(Some(ReadMarker { marker, version }))
}

/// The files of one version, for a handler's `files.read`. A storage
/// failure is kept for the engine (which answers it as the host's error)
/// and reaches the guest without detail: store errors name internal paths.
struct VersionFiles {
    store: Arc<dyn ObjectStore>,
    paths: NodePaths,
    version: String,
    files: BTreeMap<String, FileRecord>,
    failure: std::sync::Mutex<Option<object_store::Error>>,
}

impl VersionFiles {
    fn take_failure(&self) -> Result<(), FolderError> {
        let failure = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        failure.map_or(Ok(()), |error| Err(FolderError::Storage(error)))
    }
}

impl FileSource for VersionFiles {
    fn read<'a>(&'a self, path: &'a str, offset: u64, len: u32) -> ReadFuture<'a> {
        Box::pin(async move {
            let record = self.files.get(path).ok_or(ReadError::NotFound)?;
            let end = offset.saturating_add(len as u64).min(record.size);
            if offset >= end {
                return Ok(Bytes::new());
            }
            match self.store.get_range(&self.paths.file(&self.version, path), offset..end).await {
                Ok(bytes) => Ok(bytes),
                Err(error) => {
                    *self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error);
                    Err(ReadError::Storage("the file could not be read".into()))
                }
            }
        })
    }
}

/// The lock every change of the marker at `base` holds.
pub(super) fn resource_lock_key(base: &Path) -> String {
    format!("resource:{base}")
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A random, sortable-enough, URL- and store-safe id.
pub fn new_id() -> String {
    let mut bytes = [0u8; 12];
    rand::fill(&mut bytes);
    format!("{:012x}{}", now_ms(), hex(&bytes))
}
