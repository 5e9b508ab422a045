//! [`BlobService`]: every v1 read, write, delete and listing.
//!
//! **Writes.** The content is staged first — in memory up to the upload
//! buffer, beyond that as a multipart upload that is not yet completed (and
//! so not visible). Then, under the resource lock, the item is re-read, the
//! `If-Match` / `If-None-Match` conditions are checked against its etag, and
//! the object is written in one step with the metadata trailer appended:
//!
//! - staged in memory: one `put` with `PutMode::Create` when the item is
//!   absent and `PutMode::Update(<version read>)` when it exists, so two
//!   writers — on any number of instances — cannot both win, even if a lock
//!   lease is lost; a lost race is re-read and re-checked;
//! - staged as a multipart upload (files over the upload buffer): the
//!   completion is the commit. Stores cannot complete a multipart upload
//!   conditionally, so here the resource lock alone orders writers (as in
//!   DIAL Core, which checks the conditions before the body and again at the
//!   commit).
//!
//! Either way the object appears whole or not at all: a crash leaves the old
//! item (and at most an unfinished multipart upload, which the store's own
//! clean-up or `abort` removes).
//!
//! **Reads** fetch the trailer with one suffix read, then the content range,
//! pinned to the same object version with `if_match`, so content and
//! metadata always belong together.
//!
//! **Folders** are implicit. A directory-backed store (the local filesystem)
//! keeps empty directories after deletes, so there a listed folder is shown
//! only if something is stored below it.

use std::fmt::Display;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, BoxStream};
use futures_util::{Stream, StreamExt, TryStreamExt};
use md5::{Digest, Md5};
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions,
    PutPayload, UpdateVersion, WriteMultipart,
};
use percent_encoding::percent_decode_str;
use serde_json::value::RawValue;
use tokio::sync::Semaphore;

use super::application::normalize_application;
use super::trailer::{self, FOOTER_LEN, ItemMeta, TAIL_PROBE, Tail};
use super::{BlobError, BlobGroup, BlobTarget};
use crate::access::Shows;
use crate::dependencies::DeclarationPolicy;
use crate::etag::Preconditions;
use crate::events::{EventAction, EventBus, ResourceEvent};
use crate::folders::engine::now_ms;
use crate::folders::marker::{Md5Stream, hex};
use crate::listing_cache::{DEFAULT_LISTING_CACHE_ENTRIES, EtagCache};
use crate::locks::LockService;
use crate::resource_url::ResourceUrl;
use crate::storage::PathLimits;

/// Trailer reads a listing keeps in flight.
const LISTING_READ_AHEAD: usize = 16;
/// An upload larger than this becomes a multipart upload (S3 parts must be
/// at least 5 MiB).
const UPLOAD_BUFFER_BYTES: usize = 8 << 20;
/// Parts of one multipart upload in flight at once.
const MAX_PARTS_IN_FLIGHT: usize = 4;
/// How often a write or read retries after losing a race to another writer.
const MAX_ATTEMPTS: usize = 4;
/// Longest content type kept for a file.
const MAX_CONTENT_TYPE_BYTES: usize = 256;
/// Content type of a file part that names none.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";
/// Content type of JSON resources.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// A JSON body at least this large waits for a parse permit (see
/// `BlobService::large_parses`); smaller ones parse at once.
const LARGE_JSON_BYTES: usize = 1 << 20;

/// Size limits of v1 resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobLimits {
    /// Largest JSON resource (prompt, conversation, application), in bytes.
    pub max_size: u64,
    /// Largest uploaded file, in bytes.
    pub max_file_size: u64,
}

/// The result of a committed write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub meta: ItemMeta,
    pub created: bool,
}

/// What a GET gets.
pub enum Download {
    /// `If-None-Match` matched the current etag: 304.
    NotModified(ItemMeta),
    /// The content, streamed from the store.
    Content { meta: ItemMeta, body: BoxStream<'static, object_store::Result<Bytes>> },
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub items: Vec<Listed>,
    /// Opaque; pass back as `token` for the next page.
    pub next_token: Option<String>,
}

/// A node found by a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    Item { url: ResourceUrl, meta: ItemMeta },
    Folder { url: ResourceUrl },
}

impl Listed {
    pub fn url(&self) -> &ResourceUrl {
        match self {
            Self::Item { url, .. } | Self::Folder { url } => url,
        }
    }
}

/// An item as stored: its metadata and the object's version.
struct Stored {
    meta: ItemMeta,
    object: ObjectMeta,
}

impl Stored {
    fn version(&self) -> UpdateVersion {
        UpdateVersion { e_tag: self.object.e_tag.clone(), version: self.object.version.clone() }
    }
}

/// Content ready to be committed.
struct Staged {
    body: StagedBody,
    etag: String,
    size: u64,
    content_type: String,
}

enum StagedBody {
    Memory(Vec<Bytes>),
    /// Parts uploaded, not completed.
    Multipart(WriteMultipart),
}

/// A child found by a non-recursive listing, before its trailer is read.
enum Entry {
    Item(ObjectMeta),
    Folder(Path),
}

/// The v1 blob service: one per server, shared by all requests.
pub struct BlobService {
    store: Arc<dyn ObjectStore>,
    locks: Arc<dyn LockService>,
    events: Arc<dyn EventBus>,
    limits: BlobLimits,
    /// Whether the store keeps empty directories (the local filesystem).
    keeps_empty_dirs: bool,
    upload_buffer: usize,
    path_limits: PathLimits,
    /// Parses of large JSON bodies running at once: one per CPU. Parsing
    /// is CPU work, so more would not finish sooner; each also holds up to
    /// twice the body beside it (the stored form, an object's members), and
    /// bounding them keeps concurrent large PUTs from multiplying that.
    large_parses: Arc<Semaphore>,
    /// Item metadata listings have read, by location and etag: a warm
    /// listing reads no trailer that did not change.
    listed: EtagCache<ItemMeta>,
}

impl BlobService {
    pub fn new(
        store: Arc<dyn ObjectStore>,
        locks: Arc<dyn LockService>,
        events: Arc<dyn EventBus>,
        limits: BlobLimits,
        keeps_empty_dirs: bool,
    ) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            store,
            locks,
            events,
            limits,
            keeps_empty_dirs,
            upload_buffer: UPLOAD_BUFFER_BYTES,
            large_parses: Arc::new(Semaphore::new(cpus)),
            path_limits: PathLimits::default(),
            listed: EtagCache::new(DEFAULT_LISTING_CACHE_ENTRIES),
        }
    }

    /// Listings keep the metadata of at most `entries` items (0: none).
    pub fn with_listing_cache(mut self, entries: usize) -> Self {
        self.listed = EtagCache::new(entries);
        self
    }

    /// What the store cannot hold (the local disk's name length), refused
    /// with a 400 before anything is written.
    pub fn with_path_limits(mut self, limits: PathLimits) -> Self {
        self.path_limits = limits;
        self
    }

    /// Uploads above `bytes` go multipart (tests use small values; S3 needs
    /// at least 5 MiB).
    pub fn with_upload_buffer(mut self, bytes: usize) -> Self {
        self.upload_buffer = bytes.max(1);
        self
    }

    pub fn limits(&self) -> BlobLimits {
        self.limits
    }

    // ----- reads -------------------------------------------------------

    /// The metadata of an item.
    pub async fn metadata(&self, target: &BlobTarget) -> Result<ItemMeta, BlobError> {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        let stored = self.read_stored(target.path()).await?;
        stored.map(|s| s.meta).ok_or_else(|| BlobError::NotFound(target.url.to_string()))
    }

    /// Whether an item exists; for a folder, whether anything is stored below
    /// it (the bucket root always exists).
    pub async fn exists(&self, target: &BlobTarget) -> Result<bool, BlobError> {
        if target.url.is_bucket_root() {
            return Ok(true);
        }
        if target.url.is_folder() {
            return self.has_items(target.path()).await;
        }
        match self.store.head(target.path()).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// An item's content (or 304 when `If-None-Match` matches; 412 when
    /// `If-Match` does not).
    pub async fn download(&self, target: &BlobTarget, conditions: &Preconditions) -> Result<Download, BlobError> {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        for _ in 0..MAX_ATTEMPTS {
            let stored =
                self.read_stored(target.path()).await?.ok_or_else(|| BlobError::NotFound(target.url.to_string()))?;
            if conditions.not_modified(&stored.meta.etag) {
                return Ok(Download::NotModified(stored.meta));
            }
            let if_match = Preconditions { if_match: conditions.if_match.clone(), if_none_match: None };
            if_match.check_write(Some(&stored.meta.etag))?;
            let length = stored.meta.content_length;
            if length == 0 {
                return Ok(Download::Content { meta: stored.meta, body: stream::empty().boxed() });
            }
            // Pinned to the version whose trailer was read.
            let options = GetOptions {
                range: Some((0..length).into()),
                if_match: stored.object.e_tag.clone(),
                ..Default::default()
            };
            match self.store.get_opts(target.path(), options).await {
                Ok(result) => return Ok(Download::Content { meta: stored.meta, body: result.into_stream() }),
                // Replaced or deleted since the trailer was read: look again.
                Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(BlobError::Conflict(format!("{} keeps changing while being read; retry", target.url)))
    }

    // ----- writes ------------------------------------------------------

    /// Stores a JSON resource (prompt, conversation, application) read from
    /// `body`: at most `max_size` bytes, must be UTF-8 JSON whatever the
    /// request's content type; applications are normalised and validated.
    /// `policy`: what the writer may declare in an application's
    /// `resource_dependencies`.
    #[allow(clippy::too_many_arguments)]
    pub async fn put_json<S, E>(
        &self,
        target: &BlobTarget,
        body: S,
        declared_length: Option<u64>,
        conditions: &Preconditions,
        author: Option<String>,
        policy: &DeclarationPolicy,
    ) -> Result<Committed, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        if !target.group().is_json() {
            return Err(BlobError::BadRequest(format!("{} is not a JSON resource", target.url)));
        }
        self.path_limits.check(target.path()).map_err(|e| BlobError::BadRequest(e.to_string()))?;
        let bytes = read_limited(body, declared_length, self.limits.max_size).await?;
        let content = self.check_json(target.group(), bytes, policy.clone()).await?;
        let staged = Staged {
            etag: hex(&Md5::digest(&content)),
            size: content.len() as u64,
            content_type: JSON_CONTENT_TYPE.into(),
            body: StagedBody::Memory(vec![content]),
        };
        self.commit(target, staged, conditions, author).await
    }

    /// The content to store for a JSON body: checked (and for applications,
    /// normalised) on a blocking thread, since a large body takes a while;
    /// a large one first waits for a permit of [`Self::large_parses`].
    async fn check_json(&self, group: BlobGroup, body: Bytes, policy: DeclarationPolicy) -> Result<Bytes, BlobError> {
        let permit = match body.len() >= LARGE_JSON_BYTES {
            true => Some(self.large_parses.clone().acquire_owned().await.expect("the semaphore is never closed")),
            false => None,
        };
        tokio::task::spawn_blocking(move || {
            // Held by the parse, not the request: a client that goes away
            // does not free the permit of a parse still running.
            let _permit = permit;
            json_content(group, body, &policy)
        })
        .await
        .expect("checking a JSON body panicked")
    }

    /// Stores a file streamed from `body` (at most `max_file_size` bytes),
    /// hashing while streaming; never holds more than the upload buffer.
    pub async fn put_file<S, E>(
        &self,
        target: &BlobTarget,
        body: S,
        content_type: Option<&str>,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        if target.group() != BlobGroup::Files {
            return Err(BlobError::BadRequest(format!("{} is not a file", target.url)));
        }
        self.path_limits.check(target.path()).map_err(|e| BlobError::BadRequest(e.to_string()))?;
        let content_type = check_content_type(content_type)?;
        // Fail fast on a condition that cannot hold; checked again at the commit.
        let current = self.read_stored(target.path()).await?;
        conditions.check_write(current.as_ref().map(|c| c.meta.etag.as_str()))?;
        let staged = self.stage_stream(target, body, content_type).await?;
        self.commit(target, staged, conditions, author).await
    }

    /// Deletes an item (conditions checked under the lock) and returns what
    /// it was. Callers that keep state about items (sharing) clean up after.
    pub async fn delete(&self, target: &BlobTarget, conditions: &Preconditions) -> Result<ItemMeta, BlobError> {
        if target.url.is_folder() {
            return Err(BlobError::FolderNotAllowed(target.url.to_string()));
        }
        let lock = self.locks.acquire(&target.lock_key()).await?;
        let stored =
            self.read_stored(target.path()).await?.ok_or_else(|| BlobError::NotFound(target.url.to_string()))?;
        conditions.check_write(Some(&stored.meta.etag))?;
        // The delete is unconditional: the conditions just checked hold only
        // while the lock does.
        lock.ensure_held()?;
        match self.store.delete(target.path()).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        self.publish(EventAction::Delete, target, None).await;
        Ok(stored.meta)
    }

    /// Streams `body` into memory up to the upload buffer, into a multipart
    /// upload beyond it; counts, limits and hashes on the way.
    async fn stage_stream<S, E>(
        &self,
        target: &BlobTarget,
        mut body: S,
        content_type: String,
    ) -> Result<Staged, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        let max = self.limits.max_file_size;
        let mut hasher = Md5Stream::start();
        let mut size = 0u64;
        let mut buffered: Vec<Bytes> = Vec::new();
        let mut buffered_len = 0usize;
        let mut upload: Option<WriteMultipart> = None;
        let streamed: Result<(), BlobError> = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| BlobError::BadRequest(format!("Failed to read the upload: {e}")))?;
                size += chunk.len() as u64;
                if size > max {
                    return Err(BlobError::UploadTooLarge { max });
                }
                hasher.update(chunk.clone()).await?;
                match upload.as_mut() {
                    Some(writer) => {
                        writer.wait_for_capacity(MAX_PARTS_IN_FLIGHT).await?;
                        writer.put(chunk);
                    }
                    None => {
                        buffered_len += chunk.len();
                        buffered.push(chunk);
                        if buffered_len > self.upload_buffer {
                            let started = match self
                                .store
                                .put_multipart_opts(target.path(), PutMultipartOptions::default())
                                .await
                            {
                                Ok(started) => started,
                                Err(error) if self.keeps_empty_dirs => {
                                    return Err(self.item_in_the_way(target).await?.unwrap_or(error.into()));
                                }
                                Err(error) => return Err(error.into()),
                            };
                            let mut writer = WriteMultipart::new_with_chunk_size(started, self.upload_buffer);
                            for chunk in buffered.drain(..) {
                                writer.put(chunk);
                            }
                            upload = Some(writer);
                        }
                    }
                }
            }
            // Parts in flight finish outside the lock; only the last one and
            // the completion happen under it.
            if let Some(writer) = upload.as_mut() {
                writer.wait_for_capacity(1).await?;
            }
            Ok(())
        }
        .await;
        if let Err(error) = streamed {
            if let Some(writer) = upload {
                let _ = writer.abort().await;
            }
            return Err(error);
        }
        let body = match upload {
            Some(writer) => StagedBody::Multipart(writer),
            None => StagedBody::Memory(buffered),
        };
        Ok(Staged { body, etag: hasher.finish().await?, size, content_type })
    }

    /// The commit: under the resource lock, re-read, check the conditions,
    /// write content ‖ trailer in one step.
    async fn commit(
        &self,
        target: &BlobTarget,
        staged: Staged,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, BlobError> {
        let Staged { body, etag, size, content_type } = staged;
        let meta_for = |current: Option<&Stored>| {
            let now = now_ms();
            ItemMeta {
                etag: etag.clone(),
                content_length: size,
                content_type: content_type.clone(),
                created_at: current.map_or(now, |c| c.meta.created_at),
                updated_at: now,
                author: current.and_then(|c| c.meta.author.clone()).or_else(|| author.clone()),
            }
        };
        match body {
            StagedBody::Memory(chunks) => {
                let _lock = self.locks.acquire(&target.lock_key()).await?;
                for _ in 0..MAX_ATTEMPTS {
                    let current = self.read_stored(target.path()).await?;
                    conditions.check_write(current.as_ref().map(|c| c.meta.etag.as_str()))?;
                    let meta = meta_for(current.as_ref());
                    let payload: PutPayload =
                        chunks.iter().cloned().chain(std::iter::once(trailer::encode(&meta))).collect();
                    let mode = current.as_ref().map_or(PutMode::Create, |c| PutMode::Update(c.version()));
                    match self.put_conditionally(target.path(), payload, mode).await {
                        Ok(()) => return Ok(self.committed(target, meta, current.is_none()).await),
                        // A directory-backed store cannot hold an item where a folder is.
                        Err(object_store::Error::AlreadyExists { .. })
                            if current.is_none() && self.has_items(target.path()).await? =>
                        {
                            return Err(folder_in_the_way(target));
                        }
                        // …nor an item below an item.
                        Err(error) if current.is_none() && self.keeps_empty_dirs => {
                            return Err(self.item_in_the_way(target).await?.unwrap_or(error.into()));
                        }
                        // Another writer got in between: re-read and re-check.
                        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
                Err(BlobError::Conflict(format!("{} was changed by other requests meanwhile; retry", target.url)))
            }
            StagedBody::Multipart(mut writer) => {
                let checked: Result<_, BlobError> = async {
                    let lock = self.locks.acquire(&target.lock_key()).await?;
                    let current = self.read_stored(target.path()).await?;
                    conditions.check_write(current.as_ref().map(|c| c.meta.etag.as_str()))?;
                    if self.keeps_empty_dirs && current.is_none() && self.has_items(target.path()).await? {
                        return Err(folder_in_the_way(target));
                    }
                    Ok((lock, current))
                }
                .await;
                let (_lock, current) = match checked {
                    Ok(checked) => checked,
                    Err(error) => {
                        let _ = writer.abort().await;
                        return Err(error);
                    }
                };
                let meta = meta_for(current.as_ref());
                writer.put(trailer::encode(&meta));
                // A completion cannot be conditional: the lock alone orders
                // writers here, so it must still be held.
                if let Err(error) = _lock.ensure_held() {
                    let _ = writer.abort().await;
                    return Err(error.into());
                }
                writer.finish().await?;
                Ok(self.committed(target, meta, current.is_none()).await)
            }
        }
    }

    /// A conditional put; a store without compare-and-swap (not one opened
    /// by `storage::open`) falls back to an overwrite under the lock.
    async fn put_conditionally(&self, path: &Path, payload: PutPayload, mode: PutMode) -> object_store::Result<()> {
        let update = matches!(mode, PutMode::Update(_));
        match self.store.put_opts(path, payload.clone(), PutOptions { mode, ..Default::default() }).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotImplemented { .. }) if update => {
                self.store.put_opts(path, payload, PutOptions::default()).await.map(|_| ())
            }
            Err(error) => Err(error),
        }
    }

    async fn committed(&self, target: &BlobTarget, meta: ItemMeta, created: bool) -> Committed {
        let action = if created { EventAction::Create } else { EventAction::Update };
        self.publish(action, target, Some(&meta.etag)).await;
        Committed { meta, created }
    }

    async fn publish(&self, action: EventAction, target: &BlobTarget, etag: Option<&str>) {
        self.events.publish(ResourceEvent::now(action, target.url.to_string(), etag.map(Into::into))).await;
    }

    // ----- trailers ----------------------------------------------------

    /// An item as stored, or `None` when there is no object.
    async fn read_stored(&self, path: &Path) -> Result<Option<Stored>, BlobError> {
        let options = GetOptions { range: Some(GetRange::Suffix(TAIL_PROBE)), ..Default::default() };
        let result = match self.store.get_opts(path, options).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            // Azure has no suffix ranges: learn the size first.
            Err(object_store::Error::NotSupported { .. }) => {
                return match self.store.head(path).await {
                    Ok(object) => self.read_stored_at(&object).await,
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(error) => Err(error.into()),
                };
            }
            Err(error) => return Err(error.into()),
        };
        let object = result.meta.clone();
        let tail = result.bytes().await?;
        self.finish_read(object, &tail).await.map(Some)
    }

    /// An item whose size is known (from a listing or a `head`), pinned to
    /// that version: a `Precondition` error means it changed since.
    async fn read_stored_at(&self, object: &ObjectMeta) -> Result<Option<Stored>, BlobError> {
        if object.size < FOOTER_LEN {
            let reason = trailer::TrailerError::TooShort(object.size);
            return Err(BlobError::Corrupt { path: object.location.to_string(), reason });
        }
        let start = object.size.saturating_sub(TAIL_PROBE);
        let options = GetOptions {
            range: Some((start..object.size).into()),
            if_match: object.e_tag.clone(),
            ..Default::default()
        };
        match self.store.get_opts(&object.location, options).await {
            Ok(result) => {
                let object = result.meta.clone();
                let tail = result.bytes().await?;
                self.finish_read(object, &tail).await.map(Some)
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn finish_read(&self, object: ObjectMeta, tail: &[u8]) -> Result<Stored, BlobError> {
        let corrupt = |reason| BlobError::Corrupt { path: object.location.to_string(), reason };
        let meta = match trailer::parse_tail(tail, object.size).map_err(corrupt)? {
            Tail::Complete(meta) => meta,
            Tail::NeedRange(range) => {
                let options =
                    GetOptions { range: Some(range.into()), if_match: object.e_tag.clone(), ..Default::default() };
                let json = self.store.get_opts(&object.location, options).await?.bytes().await?;
                trailer::decode_meta(&json, object.size).map_err(corrupt)?
            }
        };
        Ok(Stored { meta, object })
    }

    /// A listed object's item, or `None` when it is gone or not an item.
    /// A listed item's metadata: from the listing cache when this version
    /// was read before, else read from its trailer (and kept).
    async fn read_listed(&self, object: &ObjectMeta) -> Result<Option<ItemMeta>, BlobError> {
        if let Some(meta) = self.listed.get(object) {
            return Ok(Some(meta));
        }
        let read = match self.read_stored_at(object).await {
            Ok(Some(stored)) => {
                // Pinned to the listed version by If-Match: keep it under that etag.
                self.listed.insert(object, stored.meta.clone());
                Ok(Some(stored))
            }
            // Rewritten since it was listed: read the current version.
            Err(BlobError::Storage(object_store::Error::Precondition { .. })) => {
                self.read_stored(&object.location).await
            }
            other => other,
        };
        match read {
            Err(BlobError::Corrupt { path, reason }) => {
                tracing::debug!(%path, %reason, "skipping an object that is not a v1 item");
                Ok(None)
            }
            other => other.map(|stored| stored.map(|stored| stored.meta)),
        }
    }

    // ----- listings ----------------------------------------------------

    /// The children of a folder (items and folders), or with `recursive`
    /// every item below it; `limit` per page, `token` from the previous page.
    /// The bucket root always lists (maybe empty); an empty folder is 404.
    /// Only nodes whose URL `shows` admits are counted and paged, so a page
    /// never ends on — and a token never names — something the caller may
    /// not see.
    pub async fn list(
        &self,
        folder: &BlobTarget,
        recursive: bool,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        if !folder.url.is_folder() {
            return Err(BlobError::BadRequest(format!("Not a folder: {}", folder.url)));
        }
        self.path_limits.check(folder.path()).map_err(|e| BlobError::BadRequest(e.to_string()))?;
        let after = token.map(decode_token).transpose()?;
        let listing = match self.list_page(folder, recursive, after.as_deref(), limit, shows).await {
            // A directory-backed store cannot list below an item: nothing is there.
            Err(BlobError::Storage(_)) if self.keeps_empty_dirs && self.item_in_the_way(folder).await?.is_some() => {
                return Err(BlobError::NotFound(folder.url.to_string()));
            }
            listing => listing?,
        };
        if listing.items.is_empty()
            && after.is_none()
            && !folder.url.is_bucket_root()
            && !self.has_items(folder.path()).await?
        {
            return Err(BlobError::NotFound(folder.url.to_string()));
        }
        Ok(listing)
    }

    async fn list_page(
        &self,
        folder: &BlobTarget,
        recursive: bool,
        after: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        Ok(if limit == 0 {
            Listing::default()
        } else if recursive {
            self.list_recursive(folder, after, limit, shows).await?
        } else {
            self.list_children(folder, after, limit, shows).await?
        })
    }

    /// Sort keys are the stored (encoded) names, folders with a trailing `/`
    /// — the order an object store lists keys in.
    async fn list_children(
        &self,
        folder: &BlobTarget,
        after: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        let listed = self.store.list_with_delimiter(Some(folder.path())).await?;
        let mut entries: Vec<(String, Entry)> = Vec::new();
        for object in listed.objects {
            if object.size < FOOTER_LEN || object.location == *folder.path() {
                continue;
            }
            if let Some(name) = object.location.filename().map(str::to_owned) {
                entries.push((name, Entry::Item(object)));
            }
        }
        for prefix in listed.common_prefixes {
            if let Some(name) = prefix.filename().map(str::to_owned) {
                entries.push((format!("{name}/"), Entry::Folder(prefix)));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.retain(|(key, _)| after.is_none_or(|after| key.as_str() > after));
        let resolved = stream::iter(entries)
            .map(|(key, entry)| async move { (key, self.resolve_child(folder, entry).await) })
            .buffered(LISTING_READ_AHEAD);
        page(resolved, limit, shows).await
    }

    async fn resolve_child(&self, folder: &BlobTarget, entry: Entry) -> Result<Option<Listed>, BlobError> {
        match entry {
            Entry::Item(object) => {
                let name = decode_name(object.location.filename().unwrap_or_default());
                let Ok(url) = folder.url.child(&name, false) else { return Ok(None) };
                Ok(self.read_listed(&object).await?.map(|meta| Listed::Item { url, meta }))
            }
            Entry::Folder(prefix) => {
                let name = decode_name(prefix.filename().unwrap_or_default());
                let Ok(url) = folder.url.child(&name, true) else { return Ok(None) };
                if self.keeps_empty_dirs && !self.has_items(&prefix).await? {
                    return Ok(None);
                }
                Ok(Some(Listed::Folder { url }))
            }
        }
    }

    /// Every item below the folder, in key order; the key is the path
    /// relative to the folder.
    async fn list_recursive(
        &self,
        folder: &BlobTarget,
        after: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        let base = folder.path();
        let listed = match after {
            Some(after) => {
                let offset = Path::parse(format!("{base}/{after}"))
                    .map_err(|_| BlobError::BadRequest("Invalid token".into()))?;
                self.store.list_with_offset(Some(base), &offset)
            }
            None => self.store.list(Some(base)),
        };
        let mut objects: Vec<(String, ObjectMeta)> = listed
            .try_filter_map(|object| {
                let key = relative_key(base, &object.location);
                futures_util::future::ready(Ok(key.map(|key| (key, object))))
            })
            .try_collect()
            .await?;
        objects.retain(|(key, object)| object.size >= FOOTER_LEN && after.is_none_or(|after| key.as_str() > after));
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        let resolved = stream::iter(objects)
            .map(|(key, object)| async move {
                let url = match descendant_url(&folder.url, &key) {
                    Some(url) => url,
                    None => return (key, Ok(None)),
                };
                let item = self.read_listed(&object).await.map(|meta| meta.map(|meta| Listed::Item { url, meta }));
                (key, item)
            })
            .buffered(LISTING_READ_AHEAD);
        page(resolved, limit, shows).await
    }

    /// Whether any object (that could be an item) is stored below `prefix`.
    async fn has_items(&self, prefix: &Path) -> Result<bool, BlobError> {
        let mut objects = self.store.list(Some(prefix));
        while let Some(object) = objects.next().await {
            if object?.size >= FOOTER_LEN {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl BlobService {
    /// On a directory-backed store, the item above `target` that makes it
    /// impossible to store (a file cannot hold files), as a 409 like a
    /// folder in the way; `None` when no ancestor is an item.
    async fn item_in_the_way(&self, target: &BlobTarget) -> Result<Option<BlobError>, BlobError> {
        let mut ancestor = target.url.parent();
        while let Some(folder) = ancestor {
            let Some(item) = folder.as_item() else { break };
            let above = BlobTarget::new(item, target.location.clone())?;
            match self.store.head(above.path()).await {
                Ok(_) => {
                    return Ok(Some(BlobError::Conflict(format!(
                        "An item already exists at {}: it cannot hold {}",
                        above.url, target.url
                    ))));
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
            ancestor = folder.parent();
        }
        Ok(None)
    }
}

/// Only a directory-backed store (the local filesystem) refuses an item
/// named like an existing folder; object stores hold both.
fn folder_in_the_way(target: &BlobTarget) -> BlobError {
    BlobError::Conflict(format!("A folder already exists at {}/", target.url))
}

/// Takes up to `limit` nodes; the token is the key of the last one taken,
/// given only when another node follows.
async fn page<S>(mut resolved: S, limit: usize, shows: &Shows<'_>) -> Result<Listing, BlobError>
where
    S: Stream<Item = (String, Result<Option<Listed>, BlobError>)> + Unpin,
{
    let mut items = Vec::new();
    let mut last_key: Option<String> = None;
    let mut next_token = None;
    while let Some((key, listed)) = resolved.next().await {
        let Some(listed) = listed?.filter(|listed| shows(listed.url())) else { continue };
        if items.len() == limit {
            next_token = last_key.take().map(|key| encode_token(&key));
            break;
        }
        items.push(listed);
        last_key = Some(key);
    }
    Ok(Listing { items, next_token })
}

/// Tokens are opaque to clients: Base58 of the last key returned, so they
/// need no escaping in a query string.
fn encode_token(key: &str) -> String {
    bs58::encode(key.as_bytes()).into_string()
}

fn decode_token(token: &str) -> Result<String, BlobError> {
    let invalid = || BlobError::BadRequest(format!("Invalid token: {token}"));
    let bytes = bs58::decode(token).into_vec().map_err(|_| invalid())?;
    String::from_utf8(bytes).map_err(|_| invalid())
}

fn decode_name(encoded: &str) -> String {
    percent_decode_str(encoded).decode_utf8_lossy().into_owned()
}

/// `a/b%2Fc` of `<base>/a/b%2Fc` (the stored, encoded form).
fn relative_key(base: &Path, location: &Path) -> Option<String> {
    let rest = location.as_ref().strip_prefix(base.as_ref())?.strip_prefix('/')?;
    (!rest.is_empty()).then(|| rest.to_string())
}

/// The item URL of a relative key below `folder`.
fn descendant_url(folder: &ResourceUrl, key: &str) -> Option<ResourceUrl> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut url = folder.clone();
    for (index, part) in parts.iter().enumerate() {
        url = url.child(&decode_name(part), index + 1 < parts.len()).ok()?;
    }
    Some(url)
}

/// Reads a body of at most `max` bytes; 413 with DIAL's message otherwise.
async fn read_limited<S, E>(mut body: S, declared: Option<u64>, max: u64) -> Result<Bytes, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Display,
{
    if let Some(size) = declared.filter(|size| *size > max) {
        drain(body, size).await;
        return Err(BlobError::ResourceTooLarge { size, max });
    }
    let mut bytes = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| BlobError::BadRequest(format!("Failed to read the request body: {e}")))?;
        let size = (bytes.len() + chunk.len()) as u64;
        if size > max {
            drain(body, size).await;
            return Err(BlobError::ResourceTooLarge { size, max });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.freeze())
}

/// Most bytes of a refused body read and dropped so the client can finish
/// sending and then read the 413; beyond it the connection is closed
/// (and the client may see a reset instead of the status).
const MAX_DRAIN_BYTES: u64 = 4 << 20;

/// Reads and drops what is left of a refused body, up to [`MAX_DRAIN_BYTES`].
async fn drain<S, E>(mut body: S, size_hint: u64)
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    if size_hint > MAX_DRAIN_BYTES {
        return;
    }
    let mut drained = 0u64;
    while let Some(Ok(chunk)) = body.next().await {
        drained += chunk.len() as u64;
        if drained > MAX_DRAIN_BYTES {
            return;
        }
    }
}

/// A JSON body as stored: prompts and conversations as sent, applications
/// in their normalised form. UTF-8 is checked first and whole: the parser
/// skips over the strings of a document it does not build, unchecked.
fn json_content(group: BlobGroup, body: Bytes, policy: &DeclarationPolicy) -> Result<Bytes, BlobError> {
    let text = std::str::from_utf8(&body).map_err(|error| {
        BlobError::BadRequest(format!(
            "Failed to parse json: the body is not valid UTF-8 (byte {})",
            error.valid_up_to()
        ))
    })?;
    match group {
        BlobGroup::Applications => {
            let definition: &RawValue = parse_json(text)?;
            Ok(Bytes::from(normalize_application(definition, policy)?))
        }
        _ => {
            let _: serde::de::IgnoredAny = parse_json(text)?;
            Ok(body)
        }
    }
}

fn parse_json<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Result<T, BlobError> {
    serde_json::from_str(text).map_err(|e| BlobError::BadRequest(format!("Failed to parse json: {e}")))
}

/// A file part's content type, kept as given when it is a plausible one.
fn check_content_type(content_type: Option<&str>) -> Result<String, BlobError> {
    let Some(value) = content_type.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_CONTENT_TYPE.into());
    };
    let printable = value.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
    if !printable || value.len() > MAX_CONTENT_TYPE_BYTES || !value.contains('/') {
        return Err(BlobError::BadRequest(format!("Invalid content type: {value}")));
    }
    Ok(value.into())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::buckets::BucketLocation;
    use crate::config::LockConfig;
    use crate::etag::EtagMatch;
    use crate::resource_url::Intent;

    const LIMITS: BlobLimits = BlobLimits { max_size: 1 << 20, max_file_size: 1 << 20 };

    async fn service(store: Arc<dyn ObjectStore>, keeps_empty_dirs: bool) -> BlobService {
        let locks = crate::locks::from_config(None, &LockConfig::default(), "t:");
        let events = crate::events::from_config(None, "t:").await.unwrap();
        BlobService::new(store, locks, events, LIMITS, keeps_empty_dirs).with_upload_buffer(64)
    }

    fn memory() -> Arc<dyn ObjectStore> {
        crate::storage::open("memory://", &BTreeMap::new()).unwrap()
    }

    fn target(raw: &str) -> BlobTarget {
        let intent = if raw.ends_with('/') { Intent::Read } else { Intent::Write };
        BlobTarget::new(ResourceUrl::parse(raw, intent).unwrap(), BucketLocation::User("u".into())).unwrap()
    }

    fn chunks(parts: &[&[u8]]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin + use<> {
        stream::iter(parts.iter().map(|p| Ok(Bytes::copy_from_slice(p))).collect::<Vec<_>>())
    }

    fn none() -> Preconditions {
        Preconditions::default()
    }

    fn if_none_match_any() -> Preconditions {
        Preconditions { if_match: None, if_none_match: Some(EtagMatch::Any) }
    }

    async fn content(service: &BlobService, target: &BlobTarget) -> Vec<u8> {
        match service.download(target, &none()).await.unwrap() {
            Download::Content { body, .. } => body.map_ok(|b| b.to_vec()).try_concat().await.unwrap(),
            Download::NotModified(_) => panic!("not modified"),
        }
    }

    async fn put_text(service: &BlobService, raw: &str, text: &str) -> Committed {
        service.put_file(&target(raw), chunks(&[text.as_bytes()]), Some("text/plain"), &none(), None).await.unwrap()
    }

    #[tokio::test]
    async fn small_and_multipart_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let local = crate::storage::open(&format!("file://{}", dir.path().display()), &BTreeMap::new()).unwrap();
        for store in [memory(), local] {
            round_trip(&service(store, false).await).await;
        }
    }

    async fn round_trip(service: &BlobService) {
        let small = target("files/b/small.txt");
        let committed =
            service.put_file(&small, chunks(&[b"hel", b"lo"]), Some("text/plain"), &none(), None).await.unwrap();
        assert!(committed.created);
        assert_eq!(committed.meta.etag, hex(&Md5::digest(b"hello")));
        assert_eq!(committed.meta.content_length, 5);
        assert_eq!(content(service, &small).await, b"hello");

        // Over the (test-sized) upload buffer: a multipart upload.
        let big: Vec<u8> = (0..1000u32).flat_map(|i| i.to_be_bytes()).collect();
        let pieces: Vec<&[u8]> = big.chunks(37).collect();
        let large = target("files/b/large.bin");
        let committed = service.put_file(&large, chunks(&pieces), None, &none(), None).await.unwrap();
        assert_eq!(committed.meta.etag, hex(&Md5::digest(&big)));
        assert_eq!(committed.meta.content_type, DEFAULT_CONTENT_TYPE);
        assert_eq!(content(service, &large).await, big);
        assert_eq!(service.metadata(&large).await.unwrap(), committed.meta);

        // A multipart upload that fails its condition at the commit, or runs
        // over the limit, leaves the item as it was.
        let again = service.put_file(&large, chunks(&pieces), None, &if_none_match_any(), None).await;
        assert!(matches!(again, Err(BlobError::Precondition(_))));
        let too_big = vec![7u8; LIMITS.max_file_size as usize + 1];
        let over_pieces: Vec<&[u8]> = too_big.chunks(4096).collect();
        let over = service.put_file(&large, chunks(&over_pieces), None, &none(), None).await;
        assert!(matches!(over, Err(BlobError::UploadTooLarge { .. })));
        assert_eq!(content(service, &large).await, big);
        let listed = service.list(&target("files/b/"), false, None, 10, &|_| true).await.unwrap();
        assert_eq!(listed.items.len(), 2, "no staging leftovers are listed: {listed:?}");
    }

    #[tokio::test]
    async fn conditions_and_created_at() {
        let service = service(memory(), false).await;
        let item = target("files/b/x");
        let first = put_text(&service, "files/b/x", "one").await;
        let again = service.put_file(&item, chunks(&[b"two"]), None, &if_none_match_any(), None).await;
        assert!(matches!(again, Err(BlobError::Precondition(_))));
        let stale = Preconditions { if_match: Some(EtagMatch::Tags(vec!["nope".into()])), if_none_match: None };
        let update = service.put_file(&item, chunks(&[b"two"]), None, &stale, None).await;
        assert!(matches!(update, Err(BlobError::Precondition(_))));
        let fresh =
            Preconditions { if_match: Some(EtagMatch::Tags(vec![first.meta.etag.clone()])), if_none_match: None };
        let second = service.put_file(&item, chunks(&[b"two"]), None, &fresh, None).await.unwrap();
        assert!(!second.created);
        assert_eq!(second.meta.created_at, first.meta.created_at);
        assert!(second.meta.updated_at >= first.meta.updated_at);

        let cached = Preconditions { if_match: None, if_none_match: Some(EtagMatch::Tags(vec![second.meta.etag])) };
        assert!(matches!(service.download(&item, &cached).await.unwrap(), Download::NotModified(_)));

        assert!(matches!(service.delete(&item, &stale).await, Err(BlobError::Precondition(_))));
        service.delete(&item, &none()).await.unwrap();
        assert!(matches!(service.delete(&item, &none()).await, Err(BlobError::NotFound(_))));
        assert!(!service.exists(&item).await.unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_creators_get_exactly_one_winner() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        for store in [memory(), crate::storage::open(&url, &BTreeMap::new()).unwrap()] {
            let service = Arc::new(service(store, false).await);
            let mut writers = tokio::task::JoinSet::new();
            for i in 0..8 {
                let service = service.clone();
                writers.spawn(async move {
                    let body = chunks(&[format!("w{i}").as_bytes()]);
                    service.put_file(&target("files/b/race"), body, None, &if_none_match_any(), None).await
                });
            }
            let (mut won, mut lost) = (0, 0);
            while let Some(result) = writers.join_next().await {
                match result.unwrap() {
                    Ok(_) => won += 1,
                    Err(BlobError::Precondition(_)) => lost += 1,
                    Err(other) => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!((won, lost), (1, 7));
        }
    }

    #[tokio::test]
    async fn json_resources_are_checked_and_limited() {
        let service = service(memory(), false).await;
        let prompt = target("prompts/b/p");
        let body = br#"{"content": "hi"}"#;
        let committed = service
            .put_json(&prompt, chunks(&[body]), None, &none(), None, &DeclarationPolicy::default())
            .await
            .unwrap();
        assert_eq!(committed.meta.content_type, JSON_CONTENT_TYPE);
        assert_eq!(content(&service, &prompt).await, body, "stored as given");

        let invalid =
            service.put_json(&prompt, chunks(&[b"{nope"]), None, &none(), None, &DeclarationPolicy::default()).await;
        assert!(matches!(invalid, Err(BlobError::BadRequest(m)) if m.starts_with("Failed to parse json")));
        // Inside a string, where a parser that builds nothing does not look.
        let unstored = target("prompts/b/q");
        let not_utf8 = service
            .put_json(
                &unstored,
                chunks(&[b"{\"id\": \"\xff\xfe\"}"]),
                None,
                &none(),
                None,
                &DeclarationPolicy::default(),
            )
            .await;
        let message = "Failed to parse json: the body is not valid UTF-8 (byte 8)";
        assert!(matches!(not_utf8, Err(BlobError::BadRequest(m)) if m == message));
        assert!(!service.exists(&unstored).await.unwrap());
        let declared = service
            .put_json(
                &prompt,
                chunks(&[b"{}"]),
                Some(LIMITS.max_size + 1),
                &none(),
                None,
                &DeclarationPolicy::default(),
            )
            .await;
        assert!(matches!(declared, Err(BlobError::ResourceTooLarge { size, .. }) if size == LIMITS.max_size + 1));
        let huge = vec![b' '; LIMITS.max_size as usize + 1];
        let streamed =
            service.put_json(&prompt, chunks(&[&huge]), None, &none(), None, &DeclarationPolicy::default()).await;
        assert!(matches!(streamed, Err(BlobError::ResourceTooLarge { .. })));

        let app = target("applications/b/app");
        let committed = service
            .put_json(
                &app,
                chunks(&[br#"{"endpoint":"http://a","displayName":"A"}"#]),
                None,
                &none(),
                None,
                &DeclarationPolicy::default(),
            )
            .await
            .unwrap();
        let stored: serde_json::Value = serde_json::from_slice(&content(&service, &app).await).unwrap();
        assert_eq!(stored, serde_json::json!({"endpoint": "http://a", "display_name": "A"}));
        assert_eq!(committed.meta.etag, hex(&Md5::digest(serde_json::to_vec(&stored).unwrap())));
        let bad = service
            .put_json(&app, chunks(&[br#"{"displayName":"A"}"#]), None, &none(), None, &DeclarationPolicy::default())
            .await;
        assert!(matches!(bad, Err(BlobError::InvalidApplication(_))));
    }

    fn names(listing: &Listing) -> Vec<String> {
        listing
            .items
            .iter()
            .map(|item| match item {
                Listed::Item { url, .. } | Listed::Folder { url } => url.to_string(),
            })
            .collect()
    }

    async fn listings(service: &BlobService) {
        for path in ["a/1", "a/2", "a/b/3", "c", "d/e/f/4"] {
            put_text(service, &format!("files/b/{path}"), path).await;
        }
        let root = service.list(&target("files/b/"), false, None, 100, &|_| true).await.unwrap();
        assert_eq!(names(&root), ["files/b/a/", "files/b/c", "files/b/d/"]);
        let a = service.list(&target("files/b/a/"), false, None, 100, &|_| true).await.unwrap();
        assert_eq!(names(&a), ["files/b/a/1", "files/b/a/2", "files/b/a/b/"]);
        let all = service.list(&target("files/b/"), true, None, 100, &|_| true).await.unwrap();
        assert_eq!(names(&all), ["files/b/a/1", "files/b/a/2", "files/b/a/b/3", "files/b/c", "files/b/d/e/f/4"]);

        // Pages of two, recursive and not.
        for (recursive, expected) in [(true, 5), (false, 3)] {
            let mut seen = Vec::new();
            let mut token = None;
            loop {
                let page = service.list(&target("files/b/"), recursive, token.as_deref(), 2, &|_| true).await.unwrap();
                assert!(page.items.len() <= 2);
                seen.extend(names(&page));
                match page.next_token {
                    Some(next) => token = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen.len(), expected, "{seen:?}");
        }

        // Deleting the only item of a folder makes the folder disappear.
        service.delete(&target("files/b/d/e/f/4"), &none()).await.unwrap();
        let root = service.list(&target("files/b/"), false, None, 100, &|_| true).await.unwrap();
        assert_eq!(names(&root), ["files/b/a/", "files/b/c"]);
        assert!(matches!(
            service.list(&target("files/b/d/"), false, None, 100, &|_| true).await,
            Err(BlobError::NotFound(_))
        ));
        assert!(!service.exists(&target("files/b/d/")).await.unwrap());
        assert!(service.exists(&target("files/b/a/")).await.unwrap());
        let empty_root = service.list(&target("prompts/b/"), false, None, 100, &|_| true).await.unwrap();
        assert!(empty_root.items.is_empty());
        assert!(matches!(
            service.list(&target("files/b/"), false, Some("!!"), 1, &|_| true).await,
            Err(BlobError::BadRequest(_))
        ));
    }

    #[tokio::test]
    async fn listings_on_memory() {
        listings(&service(memory(), false).await).await;
    }

    #[tokio::test]
    async fn listings_on_local_disk_hide_empty_directories() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::storage::open(&format!("file://{}", dir.path().display()), &BTreeMap::new()).unwrap();
        let service = service(store, true).await;
        listings(&service).await;

        // A folder's name is not an item; the disk cannot hold an item there.
        let folder_name = target("files/b/a");
        assert!(matches!(service.metadata(&folder_name).await, Err(BlobError::NotFound(_))));
        assert!(matches!(service.delete(&folder_name, &none()).await, Err(BlobError::NotFound(_))));
        let small = service.put_file(&folder_name, chunks(&[b"x"]), None, &none(), None).await;
        assert!(matches!(&small, Err(BlobError::Conflict(m)) if m.contains("folder")), "{small:?}");
        let big = vec![1u8; 1000];
        let large = service.put_file(&folder_name, chunks(&[&big]), None, &none(), None).await;
        assert!(matches!(&large, Err(BlobError::Conflict(m)) if m.contains("folder")), "{large:?}");
        // Once the folder is gone (deletes leave no empty directories), the name is free.
        for item in ["files/b/a/1", "files/b/a/2", "files/b/a/b/3"] {
            service.delete(&target(item), &none()).await.unwrap();
        }
        service.put_file(&folder_name, chunks(&[b"x"]), None, &none(), None).await.unwrap();
    }

    #[tokio::test]
    async fn foreign_objects_are_not_listed() {
        let store = memory();
        let service = service(store.clone(), false).await;
        put_text(&service, "files/b/real", "x").await;
        store.put(&Path::from("Users/u/files/plain"), "just some bytes, no trailer".into()).await.unwrap();
        let root = service.list(&target("files/b/"), false, None, 100, &|_| true).await.unwrap();
        assert_eq!(names(&root), ["files/b/real"]);
    }

    #[test]
    fn content_types() {
        assert_eq!(check_content_type(None).unwrap(), DEFAULT_CONTENT_TYPE);
        assert_eq!(check_content_type(Some("image/png")).unwrap(), "image/png");
        assert_eq!(check_content_type(Some("text/plain; charset=utf-8")).unwrap(), "text/plain; charset=utf-8");
        assert!(check_content_type(Some("bad\nvalue/x")).is_err());
        assert!(check_content_type(Some("noslash")).is_err());
    }

    #[test]
    fn keys_and_urls() {
        let base = Path::from("Users/u/files/a");
        assert_eq!(relative_key(&base, &Path::from("Users/u/files/a/b/c")).as_deref(), Some("b/c"));
        assert_eq!(relative_key(&base, &Path::from("Users/u/files/ab")), None);
        let folder = ResourceUrl::parse("files/b/a/", Intent::Read).unwrap();
        assert_eq!(descendant_url(&folder, "x%20y/z").unwrap().to_string(), "files/b/a/x%20y/z");
        assert_eq!(decode_token(&encode_token("a/b")).unwrap(), "a/b");
    }
}
