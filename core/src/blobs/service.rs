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

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};
use tokio::sync::Semaphore;

use super::trailer::ItemMeta;
use super::{BlobError, BlobTarget};
use crate::config::ListingsConfig;
use crate::etag::Preconditions;
use crate::events::{EventAction, EventBus, ResourceEvent};
use crate::listing_cache::EtagCache;
use crate::locks::LockService;
use crate::storage::PathLimits;

/// An upload larger than this becomes a multipart upload (S3 parts must be
/// at least 5 MiB).
pub(super) const UPLOAD_BUFFER_BYTES: usize = 8 << 20;
/// How often a write or read retries after losing a race to another writer.
pub(super) const MAX_ATTEMPTS: usize = 4;

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

/// The v1 blob service: one per server, shared by all requests.
pub struct BlobService {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) locks: Arc<dyn LockService>,
    pub(super) events: Arc<dyn EventBus>,
    pub(super) limits: BlobLimits,
    /// Whether the store keeps empty directories (the local filesystem).
    pub(super) keeps_empty_dirs: bool,
    pub(super) upload_buffer: usize,
    pub(super) path_limits: PathLimits,
    /// Parses of large JSON bodies running at once: one per CPU. Parsing
    /// is CPU work, so more would not finish sooner; each also holds up to
    /// twice the body beside it (the stored form, an object's members), and
    /// bounding them keeps concurrent large PUTs from multiplying that.
    pub(super) large_parses: Arc<Semaphore>,
    /// Item metadata listings have read, by location and etag: a warm
    /// listing reads no trailer that did not change.
    pub(super) listed: EtagCache<ItemMeta>,
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
            listed: ListingsConfig::default().new_cache(),
        }
    }

    /// What listings keep of the items they read, bounded as `bounds` says.
    pub fn with_listing_cache(mut self, bounds: &ListingsConfig) -> Self {
        self.listed = bounds.new_cache();
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

    pub(super) async fn committed(&self, target: &BlobTarget, meta: ItemMeta, created: bool) -> Committed {
        let action = if created { EventAction::Create } else { EventAction::Update };
        self.publish(action, target, Some(&meta.etag)).await;
        Committed { meta, created }
    }

    async fn publish(&self, action: EventAction, target: &BlobTarget, etag: Option<&str>) {
        self.events.publish(ResourceEvent::now(action, target.url.to_string(), etag.map(Into::into))).await;
    }
}

impl BlobService {
    /// On a directory-backed store, the item above `target` that makes it
    /// impossible to store (a file cannot hold files), as a 409 like a
    /// folder in the way; `None` when no ancestor is an item.
    pub(super) async fn item_in_the_way(&self, target: &BlobTarget) -> Result<Option<BlobError>, BlobError> {
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
pub(super) fn folder_in_the_way(target: &BlobTarget) -> BlobError {
    BlobError::Conflict(format!("A folder already exists at {}/", target.url))
}

#[cfg(test)]
mod tests {

    use futures_util::{Stream, TryStreamExt};
    use md5::{Digest, Md5};
    use object_store::path::Path;

    use super::*;
    use crate::blobs::DEFAULT_CONTENT_TYPE;
    use crate::blobs::JSON_CONTENT_TYPE;
    use crate::blobs::listing::{Listed, Listing};
    use crate::buckets::BucketLocation;
    use crate::config::LockConfig;
    use crate::dependencies::DeclarationPolicy;
    use crate::etag::EtagMatch;
    use crate::hashing::hex;
    use crate::resource_url::Intent;
    use crate::resource_url::ResourceUrl;

    const LIMITS: BlobLimits = BlobLimits { max_size: 1 << 20, max_file_size: 1 << 20 };

    async fn service(store: Arc<dyn ObjectStore>, keeps_empty_dirs: bool) -> BlobService {
        let locks = crate::locks::from_config(None, &LockConfig::default(), "t:");
        let events = crate::events::from_config(None, "t:").await.unwrap();
        BlobService::new(store, locks, events, LIMITS, keeps_empty_dirs).with_upload_buffer(64)
    }

    fn memory() -> Arc<dyn ObjectStore> {
        crate::storage::open_local("memory://").unwrap().unwrap()
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
        service
            .put_file(&target(raw), chunks(&[text.as_bytes()]), Some("text/plain"), &none(), None, None)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn small_and_multipart_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let local = crate::storage::open_local(&format!("file://{}", dir.path().display())).unwrap().unwrap();
        for store in [memory(), local] {
            round_trip(&service(store, false).await).await;
        }
    }

    async fn round_trip(service: &BlobService) {
        let small = target("files/b/small.txt");
        let committed =
            service.put_file(&small, chunks(&[b"hel", b"lo"]), Some("text/plain"), &none(), None, None).await.unwrap();
        assert!(committed.created);
        assert_eq!(committed.meta.etag, hex(&Md5::digest(b"hello")));
        assert_eq!(committed.meta.content_length, 5);
        assert_eq!(content(service, &small).await, b"hello");

        // Over the (test-sized) upload buffer: a multipart upload.
        let big: Vec<u8> = (0..1000u32).flat_map(|i| i.to_be_bytes()).collect();
        let pieces: Vec<&[u8]> = big.chunks(37).collect();
        let large = target("files/b/large.bin");
        let committed = service.put_file(&large, chunks(&pieces), None, &none(), None, None).await.unwrap();
        assert_eq!(committed.meta.etag, hex(&Md5::digest(&big)));
        assert_eq!(committed.meta.content_type, DEFAULT_CONTENT_TYPE);
        assert_eq!(content(service, &large).await, big);
        assert_eq!(service.metadata(&large).await.unwrap(), committed.meta);

        // A multipart upload that fails its condition at the commit, or runs
        // over the limit, leaves the item as it was.
        let again = service.put_file(&large, chunks(&pieces), None, &if_none_match_any(), None, None).await;
        assert!(matches!(again, Err(BlobError::Precondition(_))));
        let too_big = vec![7u8; LIMITS.max_file_size as usize + 1];
        let over_pieces: Vec<&[u8]> = too_big.chunks(4096).collect();
        let over = service.put_file(&large, chunks(&over_pieces), None, &none(), None, None).await;
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
        let again = service.put_file(&item, chunks(&[b"two"]), None, &if_none_match_any(), None, None).await;
        assert!(matches!(again, Err(BlobError::Precondition(_))));
        let stale = Preconditions { if_match: Some(EtagMatch::Tags(vec!["nope".into()])), if_none_match: None };
        let update = service.put_file(&item, chunks(&[b"two"]), None, &stale, None, None).await;
        assert!(matches!(update, Err(BlobError::Precondition(_))));
        let fresh =
            Preconditions { if_match: Some(EtagMatch::Tags(vec![first.meta.etag.clone()])), if_none_match: None };
        let second = service.put_file(&item, chunks(&[b"two"]), None, &fresh, None, None).await.unwrap();
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
        for store in [memory(), crate::storage::open_local(&url).unwrap().unwrap()] {
            let service = Arc::new(service(store, false).await);
            let mut writers = tokio::task::JoinSet::new();
            for i in 0..8 {
                let service = service.clone();
                writers.spawn(async move {
                    let body = chunks(&[format!("w{i}").as_bytes()]);
                    service.put_file(&target("files/b/race"), body, None, &if_none_match_any(), None, None).await
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
            .put_json(&prompt, chunks(&[body]), None, &none(), None, &DeclarationPolicy::default(), None)
            .await
            .unwrap();
        assert_eq!(committed.meta.content_type, JSON_CONTENT_TYPE);
        assert_eq!(content(&service, &prompt).await, body, "stored as given");

        let invalid = service
            .put_json(&prompt, chunks(&[b"{nope"]), None, &none(), None, &DeclarationPolicy::default(), None)
            .await;
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
                None,
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
                None,
            )
            .await;
        assert!(matches!(declared, Err(BlobError::ResourceTooLarge { size, .. }) if size == LIMITS.max_size + 1));
        let huge = vec![b' '; LIMITS.max_size as usize + 1];
        let streamed =
            service.put_json(&prompt, chunks(&[&huge]), None, &none(), None, &DeclarationPolicy::default(), None).await;
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
                None,
            )
            .await
            .unwrap();
        let stored: serde_json::Value = serde_json::from_slice(&content(&service, &app).await).unwrap();
        assert_eq!(stored, serde_json::json!({"endpoint": "http://a", "display_name": "A"}));
        assert_eq!(committed.meta.etag, hex(&Md5::digest(serde_json::to_vec(&stored).unwrap())));
        let bad = service
            .put_json(
                &app,
                chunks(&[br#"{"displayName":"A"}"#]),
                None,
                &none(),
                None,
                &DeclarationPolicy::default(),
                None,
            )
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
        let store = crate::storage::open_local(&format!("file://{}", dir.path().display())).unwrap().unwrap();
        let service = service(store, true).await;
        listings(&service).await;

        // A folder's name is not an item; the disk cannot hold an item there.
        let folder_name = target("files/b/a");
        assert!(matches!(service.metadata(&folder_name).await, Err(BlobError::NotFound(_))));
        assert!(matches!(service.delete(&folder_name, &none()).await, Err(BlobError::NotFound(_))));
        let small = service.put_file(&folder_name, chunks(&[b"x"]), None, &none(), None, None).await;
        assert!(matches!(&small, Err(BlobError::Conflict(m)) if m.contains("folder")), "{small:?}");
        let big = vec![1u8; 1000];
        let large = service.put_file(&folder_name, chunks(&[&big]), None, &none(), None, None).await;
        assert!(matches!(&large, Err(BlobError::Conflict(m)) if m.contains("folder")), "{large:?}");
        // Once the folder is gone (deletes leave no empty directories), the name is free.
        for item in ["files/b/a/1", "files/b/a/2", "files/b/a/b/3"] {
            service.delete(&target(item), &none()).await.unwrap();
        }
        service.put_file(&folder_name, chunks(&[b"x"]), None, &none(), None, None).await.unwrap();
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
}
