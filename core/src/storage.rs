//! The object store behind every resource, whatever the backend: the local ones this crate opens
//! ([`open_local`]: `memory://`, `file:///abs/path`), the checks every store must pass (conditional
//! writes, readiness), bounded deletes, and the local disk's compare-and-swap. The cloud stores are
//! opened by the binary (`dial_host::backends`), which links their clients.
//!
//! Every commit is a conditional write of a marker (`PutMode::Create` / `PutMode::Update`). InMemory, S3 and
//! Azure do that natively; so does GCS, keyed on the generation, so build an `UpdateVersion` from a `head()` or
//! a `PutResult` (both fields), never from the ETag alone. The local filesystem cannot
//! (`NotImplemented`), so `file://` stores are wrapped in [`SerializedUpdates`], which is correct for one
//! process only.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, UpdateVersion,
};
use tokio::sync::OwnedMutexGuard;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(
        "unsupported storage URL '{0}': use file:///absolute/path, memory://, s3://bucket[/prefix], \
         gs://bucket[/prefix] or az://container[/prefix]"
    )]
    UnsupportedUrl(String),
    #[error("storage.options are not used by '{url}'; remove them (they configure s3://, gs:// and az:// stores)")]
    OptionsNotApplicable { url: String },
    #[error("unknown storage option '{key}' for '{url}' (see the object_store configuration keys)")]
    UnknownOption { key: String, url: String },
    #[error("cannot prepare local storage at {path}: {error}")]
    LocalDir { path: String, error: std::io::Error },
    #[error("the store did not answer within {0:?}")]
    NoAnswer(Duration),
    #[error(transparent)]
    Store(#[from] object_store::Error),
}

/// Opens a store that lives in this process or on its disk: `memory://` or `file:///absolute/path`
/// (created when missing); `None` for any other URL. The cloud stores are opened by the binary, which
/// links their clients.
pub fn open_local(url: &str) -> Result<Option<Arc<dyn ObjectStore>>, StorageError> {
    if url == "memory://" || url == "memory:///" {
        return Ok(Some(Arc::new(InMemory::new())));
    }
    let Some(path) = url.strip_prefix("file://") else { return Ok(None) };
    if !path.starts_with('/') {
        return Err(StorageError::UnsupportedUrl(url.into()));
    }
    std::fs::create_dir_all(path).map_err(|error| StorageError::LocalDir { path: path.into(), error })?;
    // Deletes remove directories they leave empty, as object stores have no directories to leave behind.
    let local = LocalFileSystem::new_with_prefix(path)?.with_automatic_cleanup(true);
    let directories = DirectoryMemo::new(LocalFileSystem::new_with_prefix(path)?, DIRECTORY_MEMO_BYTES);
    Ok(Some(Arc::new(SerializedUpdates::new(local).with_directory_memo(directories))))
}

/// The memory a `file://` store's [`DirectoryMemo`] may hold, estimated from
/// the listings it keeps.
pub const DIRECTORY_MEMO_BYTES: usize = 64 << 20;

/// A directory modified less than this long before a listing of it began is
/// not kept: file systems stamp times at a coarse tick (a jiffy on ext4 and
/// XFS, a second on some), so a change in the same tick as the one before
/// would leave the directory's time as it was.
const SETTLED: Duration = Duration::from_secs(2);

/// Listings of local directories, kept while the directory's modification
/// time says nothing in it changed. On the local disk that is certain:
/// every write, copy or rename of an object ends with a rename or a link
/// into its directory (object_store stages beside the target), and every
/// delete with an unlink from it, and each of those sets the directory's
/// time; a listing is kept only when the directory had settled
/// ([`SETTLED`]) before the listing began and did not change while it was
/// read. A warm listing of a directory of 1 000 objects is then one `stat`
/// instead of a walk and a `stat` per object.
///
/// Every listing is in key order: a directory without subdirectories is
/// sorted once, when listed, and a flat listing of it (`list`,
/// `list_with_offset`) clones only the objects the caller pulls — so the
/// folder engine pages the local disk as it pages S3; a tree is walked and
/// sorted. Bounded by the estimated bytes of what it keeps; a directory
/// larger than a quarter of the bound is not kept (it would push out every
/// other), so its listings walk it each time.
#[derive(Debug)]
pub struct DirectoryMemo {
    local: LocalFileSystem,
    kept: Mutex<KeptListings>,
    max_bytes: usize,
}

#[derive(Debug)]
struct KeptListings {
    lru: hashlink::LruCache<std::path::PathBuf, Arc<KeptListing>>,
    bytes: usize,
}

/// A directory's delimiter listing, objects sorted by location.
#[derive(Debug)]
struct KeptListing {
    modified: Option<std::time::SystemTime>,
    common_prefixes: Vec<Path>,
    objects: Vec<ObjectMeta>,
}

/// What a kept entry costs besides its strings: `ObjectMeta`'s own fields.
const KEPT_ENTRY_OVERHEAD: usize = 96;

impl KeptListing {
    /// The memory the listing holds, as near as it can be told.
    fn bytes(&self) -> usize {
        let objects: usize = self
            .objects
            .iter()
            .map(|object| {
                KEPT_ENTRY_OVERHEAD + object.location.as_ref().len() + object.e_tag.as_ref().map_or(0, String::len)
            })
            .sum();
        let prefixes: usize = self.common_prefixes.iter().map(|prefix| 24 + prefix.as_ref().len()).sum();
        objects + prefixes + KEPT_ENTRY_OVERHEAD
    }
}

impl DirectoryMemo {
    /// Lists (and maps locations to the file system) through `local`, a
    /// store on the same directory as the one it serves.
    pub fn new(local: LocalFileSystem, max_bytes: usize) -> Self {
        let kept = KeptListings { lru: hashlink::LruCache::new_unbounded(), bytes: 0 };
        Self { local, kept: Mutex::new(kept), max_bytes }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let Some(prefix) = prefix else { return self.local.list_with_delimiter(None).await };
        let listing = self.listing(prefix).await?;
        Ok(ListResult {
            common_prefixes: listing.common_prefixes.clone(),
            objects: listing.objects.clone(),
            extensions: Default::default(),
        })
    }

    /// Every object below `prefix` after `offset`: in key order, cloned as
    /// pulled, from the kept listing when the directory has no
    /// subdirectories; else the walk of the whole tree (in no order).
    fn list(
        self: Arc<Self>,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let (Some(prefix), offset) = (prefix.cloned(), offset.cloned()) else {
            return match offset {
                Some(offset) => self.local.list_with_offset(None, offset),
                None => self.local.list(None),
            };
        };
        futures_util::stream::once(async move {
            let listing = self.listing(&prefix).await?;
            if !listing.common_prefixes.is_empty() {
                // A tree: walked, and sorted too, so that every listing of
                // this store is in key order.
                let walked = match offset {
                    Some(offset) => self.local.list_with_offset(Some(&prefix), &offset),
                    None => self.local.list(Some(&prefix)),
                };
                let mut walked: Vec<ObjectMeta> = walked.try_collect().await?;
                walked.sort_by(|a, b| a.location.cmp(&b.location));
                return Ok(futures_util::stream::iter(walked.into_iter().map(Ok)).boxed());
            }
            let start = offset.map_or(0, |offset| listing.objects.partition_point(|object| object.location <= offset));
            let objects = (start..listing.objects.len()).map(move |index| Ok(listing.objects[index].clone()));
            Ok::<_, object_store::Error>(futures_util::stream::iter(objects).boxed())
        })
        .try_flatten()
        .boxed()
    }

    /// The delimiter listing of `prefix`, kept or read (and kept if settled).
    async fn listing(&self, prefix: &Path) -> object_store::Result<Arc<KeptListing>> {
        let directory = self.local.path_to_filesystem(prefix).ok();
        let before = match &directory {
            Some(directory) => match modified(directory).await {
                // Nothing there: nothing to walk (a folder without subfolders
                // has no folder index, and every listing of it asks).
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Arc::new(KeptListing { modified: None, common_prefixes: vec![], objects: vec![] }));
                }
                result => result.ok(),
            },
            None => None,
        };
        if let (Some(directory), Some(before)) = (&directory, before)
            && let Some(kept) = self.kept(directory, before)
        {
            return Ok(kept);
        }
        let started = std::time::SystemTime::now();
        let mut listed = self.local.list_with_delimiter(Some(prefix)).await?;
        listed.objects.sort_by(|a, b| a.location.cmp(&b.location));
        let listing = Arc::new(KeptListing {
            modified: before,
            common_prefixes: listed.common_prefixes,
            objects: listed.objects,
        });
        let settled = before.is_some_and(|before| before + SETTLED < started);
        if let Some(directory) = directory
            && settled
            && modified(&directory).await.ok() == before
        {
            self.keep(directory, listing.clone());
        }
        Ok(listing)
    }

    fn kept(&self, directory: &std::path::Path, modified: std::time::SystemTime) -> Option<Arc<KeptListing>> {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.lru.get(directory).filter(|listing| listing.modified == Some(modified)).cloned()
    }

    fn keep(&self, directory: std::path::PathBuf, listing: Arc<KeptListing>) {
        let bytes = listing.bytes();
        if bytes > self.max_bytes / 4 {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.bytes += bytes;
        if let Some(replaced) = kept.lru.insert(directory, listing) {
            kept.bytes -= replaced.bytes();
        }
        while kept.bytes > self.max_bytes {
            let Some((_, evicted)) = kept.lru.remove_lru() else { break };
            kept.bytes -= evicted.bytes();
        }
    }
}

/// A directory's modification time.
async fn modified(directory: &std::path::Path) -> std::io::Result<std::time::SystemTime> {
    let directory = directory.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::metadata(directory)?.modified())
        .await
        .unwrap_or_else(|joined| Err(std::io::Error::other(joined)))
}

/// What the start-up check found about a store's conditional writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fencing {
    /// Create-only and compare-and-swap writes are refused when they should be.
    Fenced,
    /// The store accepted a write it should have refused, or cannot make one: the reason, for the operator.
    Unfenced(String),
}

/// Checks that the store really does the conditional writes every commit relies on, by writing a probe
/// object under `.dial-host/fence-probe/` (and deleting it): a create-only write over an existing object
/// must be refused, a compare-and-swap on the version read must land, and one on a stale version must be
/// refused. A store that ignores the conditions (some emulators and S3-compatible servers do) would let a
/// writer whose lock lapsed overwrite a newer commit without anyone noticing; the server refuses to start
/// on it unless `storage.allow_unfenced` is set. Errors other than those answers (the store unreachable,
/// no permission) are returned as they are.
pub async fn check_fencing(store: &dyn ObjectStore) -> Result<Fencing, StorageError> {
    let path = Path::from(format!(".dial-host/fence-probe/{}", probe_id()));
    let result = probe_fencing(store, &path).await;
    // Best effort: the probe is a few bytes, and a failed delete must not hide the verdict.
    if let Err(error) = store.delete(&path).await
        && !matches!(error, object_store::Error::NotFound { .. })
    {
        tracing::warn!(%error, path = %path, "could not delete the conditional-write probe");
    }
    result
}

async fn probe_fencing(store: &dyn ObjectStore, path: &Path) -> Result<Fencing, StorageError> {
    let unfenced = |why: &str| Ok(Fencing::Unfenced(why.to_string()));
    let create = PutOptions::from(PutMode::Create);
    let first = match store.put_opts(path, "probe 1".into(), create.clone()).await {
        Ok(result) => result,
        Err(object_store::Error::NotImplemented { .. }) => return unfenced("it cannot make create-only writes"),
        Err(error) => return Err(error.into()),
    };
    match store.put_opts(path, "probe 2".into(), create).await {
        Err(object_store::Error::AlreadyExists { .. }) => {}
        Ok(_) => return unfenced("a create-only write over an existing object was accepted"),
        Err(error) => return Err(error.into()),
    }
    let update = |result: &PutResult| PutOptions::from(PutMode::Update(UpdateVersion::from(result.clone())));
    let second = match store.put_opts(path, "probe 3".into(), update(&first)).await {
        Ok(result) => result,
        Err(object_store::Error::NotImplemented { .. }) => return unfenced("it cannot make compare-and-swap writes"),
        Err(object_store::Error::Precondition { .. }) => {
            return unfenced("a compare-and-swap write on the version just written was refused");
        }
        Err(error) => return Err(error.into()),
    };
    if second.e_tag == first.e_tag && second.version == first.version {
        return unfenced("a write that changed the object kept its ETag and version");
    }
    match store.put_opts(path, "probe 4".into(), update(&first)).await {
        Err(object_store::Error::Precondition { .. }) => {}
        Ok(_) => return unfenced("a compare-and-swap write on a stale version was accepted"),
        Err(error) => return Err(error.into()),
    }
    match store.get(path).await?.bytes().await?.as_ref() {
        b"probe 3" => Ok(Fencing::Fenced),
        _ => unfenced("a refused write changed the object anyway"),
    }
}

/// A name no other instance's concurrent probe uses.
fn probe_id() -> String {
    let mut bytes = [0u8; 8];
    rand::fill(&mut bytes[..]);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Deletes every location; one already gone counts as deleted, since it is
/// (another instance's sweep got there first). The backends disagree on
/// that case: S3 answers 204, Azure's batch delete 404 per missing blob, the
/// local store `NotFound`. Returns how many locations are now gone.
pub async fn delete_all(store: &dyn ObjectStore, locations: Vec<Path>) -> object_store::Result<usize> {
    use futures_util::{StreamExt, TryStreamExt};
    let locations = futures_util::stream::iter(locations.into_iter().map(Ok)).boxed();
    store
        .delete_stream(locations)
        .or_else(|error| async move {
            match error {
                object_store::Error::NotFound { path, .. } => Ok(Path::from(path)),
                error => Err(error),
            }
        })
        .try_fold(0, |deleted, _| async move { Ok(deleted + 1) })
        .await
}

/// Bytes the local filesystem holds in one file or directory name.
const LOCAL_NAME_BYTES: usize = 255;
/// …minus room for the `#<n>` suffix of the in-progress file object_store
/// writes next to its target before renaming it into place.
pub const LOCAL_MAX_PART_BYTES: usize = LOCAL_NAME_BYTES - 16;

/// What a backend cannot hold, checked before anything is written, so a
/// name it would refuse is a 400 that says why, never a store error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathLimits {
    /// Longest path part as stored (object_store percent-encodes some
    /// characters and every non-ASCII byte), when the backend has a limit.
    pub max_part_bytes: Option<usize>,
}

/// A path the backend cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "The name '{shown}' is {bytes} bytes as stored; this store (local disk) holds at most {limit} bytes per path segment"
)]
pub struct PathLimitError {
    shown: String,
    bytes: usize,
    limit: usize,
}

impl PathLimits {
    /// The limits of the store a URL names: the local filesystem's name
    /// length; object stores have none per segment.
    pub fn for_url(url: &str) -> Self {
        Self { max_part_bytes: url.starts_with("file://").then_some(LOCAL_MAX_PART_BYTES) }
    }

    pub fn check(&self, path: &Path) -> Result<(), PathLimitError> {
        let Some(limit) = self.max_part_bytes else { return Ok(()) };
        match path.parts().find(|part| part.as_ref().len() > limit) {
            None => Ok(()),
            Some(part) => {
                let decoded = percent_encoding::percent_decode_str(part.as_ref()).decode_utf8_lossy().into_owned();
                let mut shown: String = decoded.chars().take(40).collect();
                if shown.len() < decoded.len() {
                    shown.push('…');
                }
                Err(PathLimitError { shown, bytes: part.as_ref().len(), limit })
            }
        }
    }
}

/// Removes what a crashed process left in a local store: object_store
/// writes every file as `<name>#<n>` and renames it into place, so a crash
/// leaves such files (some holding partial data) that listings never show
/// and nothing else would delete. Only files last modified before
/// `started` are removed — the local store has one process, so those belong
/// to a process that is gone. Blocking: run it on a blocking thread.
pub fn reclaim_local_leftovers(root: &std::path::Path, started: std::time::SystemTime) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
                continue;
            }
            let name = entry.file_name();
            let in_progress = name
                .to_str()
                .and_then(|name| name.rsplit_once('#'))
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if in_progress && entry.metadata()?.modified()? < started {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => removed += 1,
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }
    Ok(removed)
}

/// How long [`check_ready`] waits. The cloud clients retry an unreachable endpoint with backoff for
/// minutes, far longer than a readiness probe waits; a store that does not answer in time is not ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the store answers, within [`READY_TIMEOUT`]: a listing of a prefix that need not exist. Not a
/// `head`: S3 answers a HEAD in a missing bucket with the same bare 404 as for a missing key.
pub async fn check_ready(store: &dyn ObjectStore) -> Result<(), StorageError> {
    let probe = Path::from(".dial-host/ready-probe");
    match tokio::time::timeout(READY_TIMEOUT, store.list_with_delimiter(Some(&probe))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Err(StorageError::NoAnswer(READY_TIMEOUT)),
    }
}

/// Adds `PutMode::Update` (compare-and-swap on the ETag) to a store that lacks it, by serialising writes to
/// each path inside this process: lock the path, `head` it, compare the ETag, then overwrite.
///
/// **Correct for ONE process only.** Another process writing the same files is not excluded, so
/// deployments with several instances must use a store with a native compare-and-swap (S3, GCS, Azure);
/// see [`supports_cas_natively`]. This is what LocalFileSystem needs: it implements `Create` (atomic hard
/// link) but returns `NotImplemented` for `Update`, and upstream will not add it (it needs file locking).
///
/// Every `put_opts` on a path (Overwrite and Create too) and every copy or rename onto it takes the path's
/// lock, so nothing this process writes can slip between an Update's check and its write. Deletes are not
/// serialised: delete an object that is updated by compare-and-swap only under a lock every writer of it
/// holds from its check to its write (the sweep deletes a purged tombstone's marker under the resource
/// lock, which every write over a tombstone holds).
///
/// LocalFileSystem ETags are `inode-mtime-size`, not content hashes: a rewrite with the same bytes still
/// changes the ETag, and in theory an ETag can recur (inode number reused within one timestamp tick with
/// the same size), which would let a very stale writer pass. Put a unique commit id in the marker body.
#[derive(Debug)]
pub struct SerializedUpdates<S> {
    inner: S,
    locks: PathLocks,
    directories: Option<Arc<DirectoryMemo>>,
}

impl<S: ObjectStore> SerializedUpdates<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, locks: PathLocks::default(), directories: None }
    }

    /// Listings of unchanged directories answered from `memo`.
    pub fn with_directory_memo(mut self, memo: DirectoryMemo) -> Self {
        self.directories = Some(Arc::new(memo));
        self
    }

    async fn put_serialized(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let _held = self.locks.lock(location).await;
        let PutOptions { mode, tags, attributes, extensions } = opts;
        let mode = match mode {
            PutMode::Update(expected) => {
                self.check_version(location, expected).await?;
                PutMode::Overwrite
            }
            other => other,
        };
        self.inner.put_opts(location, payload, PutOptions { mode, tags, attributes, extensions }).await
    }

    /// `Precondition` unless the object exists with the expected ETag (a missing object is a
    /// `Precondition` too, as on S3 and InMemory).
    async fn check_version(&self, location: &Path, expected: UpdateVersion) -> object_store::Result<()> {
        let Some(expected) = expected.e_tag else {
            return Err(object_store::Error::Generic {
                store: "SerializedUpdates",
                source: "PutMode::Update needs an e_tag".into(),
            });
        };
        let precondition =
            |why: String| object_store::Error::Precondition { path: location.to_string(), source: why.into() };
        match self.inner.head(location).await {
            Ok(meta) if meta.e_tag.as_deref() == Some(expected.as_str()) => Ok(()),
            Ok(meta) => Err(precondition(format!("ETag {:?} does not match {expected}", meta.e_tag))),
            Err(object_store::Error::NotFound { .. }) => Err(precondition(format!("{location} does not exist"))),
            Err(error) => Err(error),
        }
    }

    async fn copy_serialized(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        let _held = self.locks.lock(to).await;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_serialized(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        let _held = self.locks.lock(to).await;
        self.inner.rename_opts(from, to, options).await
    }
}

impl<S: fmt::Display> fmt::Display for SerializedUpdates<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SerializedUpdates({})", self.inner)
    }
}

// `ObjectStore` is an `async_trait` trait: implement it the same way.
#[async_trait::async_trait]
impl<S: ObjectStore> ObjectStore for SerializedUpdates<S> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.put_serialized(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await.map_err(|error| not_a_directory_is_not_found(location, error))
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await.map_err(|error| not_a_directory_is_not_found(location, error))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match &self.directories {
            Some(memo) => memo.clone().list(prefix, None),
            None => self.inner.list(prefix),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match &self.directories {
            Some(memo) => memo.clone().list(prefix, Some(offset)),
            None => self.inner.list_with_offset(prefix, offset),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        match &self.directories {
            Some(memo) => memo.list_with_delimiter(prefix).await,
            None => self.inner.list_with_delimiter(prefix).await,
        }
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.copy_serialized(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> object_store::Result<()> {
        self.rename_serialized(from, to, options).await
    }
}

/// On a directory tree, reading `a/b` where `a` is a file fails with "not a
/// directory", and a name longer than the file system holds with "file name
/// too long"; in object-store terms such an object simply does not exist.
fn not_a_directory_is_not_found(location: &Path, error: object_store::Error) -> object_store::Error {
    if cannot_exist(&error) {
        return object_store::Error::NotFound { path: location.to_string(), source: Box::new(error) };
    }
    error
}

fn cannot_exist(error: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return matches!(io.kind(), std::io::ErrorKind::NotADirectory | std::io::ErrorKind::InvalidFilename);
        }
        source = current.source();
    }
    false
}

/// One async mutex per path, created on first use and forgotten once nobody holds or awaits it.
///
/// The map holds `Weak`s, so a path's mutex lives exactly as long as someone holds or waits for it; the
/// last guard removes its entry, and a sweep on growth catches entries of cancelled waiters.
#[derive(Debug, Default)]
struct PathLocks {
    map: Arc<Mutex<LockMap>>,
}

#[derive(Debug, Default)]
struct LockMap {
    locks: HashMap<Path, Weak<tokio::sync::Mutex<()>>>,
    /// Size at which to drop dead entries next; doubles with the live set so sweeps stay amortised O(1).
    sweep_at: usize,
}

impl PathLocks {
    async fn lock(&self, path: &Path) -> PathGuard {
        let mutex = {
            let mut map = self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match map.locks.get(path).and_then(Weak::upgrade) {
                Some(mutex) => mutex,
                None => {
                    let mutex = Arc::new(tokio::sync::Mutex::new(()));
                    map.locks.insert(path.clone(), Arc::downgrade(&mutex));
                    if map.locks.len() > map.sweep_at {
                        map.locks.retain(|_, lock| lock.strong_count() > 0);
                        map.sweep_at = (map.locks.len() * 2).max(64);
                    }
                    mutex
                }
            }
        };
        let guard = mutex.lock_owned().await;
        PathGuard { map: self.map.clone(), path: path.clone(), guard: Some(guard) }
    }
}

struct PathGuard {
    map: Arc<Mutex<LockMap>>,
    path: Path,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for PathGuard {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if map.locks.get(&self.path).is_some_and(|lock| lock.strong_count() == 0) {
            map.locks.remove(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store with native `Update` and one given it by [`SerializedUpdates`] behave alike.
    async fn compare_and_swap_semantics(store: Arc<dyn ObjectStore>) {
        let path = Path::from("r/marker.json");
        let create = PutOptions::from(PutMode::Create);
        let update = |version: UpdateVersion| PutOptions::from(PutMode::Update(version));

        let first = store.put_opts(&path, "one".into(), create.clone()).await.unwrap();
        let again = store.put_opts(&path, "two".into(), create.clone()).await;
        assert!(matches!(again, Err(object_store::Error::AlreadyExists { .. })), "{again:?}");

        let second = store.put_opts(&path, "two".into(), update(first.clone().into())).await.unwrap();
        assert_ne!(second.e_tag, first.e_tag);
        assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), "two");

        let stale = store.put_opts(&path, "three".into(), update(first.into())).await;
        assert!(matches!(stale, Err(object_store::Error::Precondition { .. })), "{stale:?}");
        assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), "two");

        let missing = store.put_opts(&Path::from("r/none"), "x".into(), update(second.clone().into())).await;
        assert!(matches!(missing, Err(object_store::Error::Precondition { .. })), "{missing:?}");

        let mut writers = tokio::task::JoinSet::new();
        for i in 0..8 {
            let (store, path, version) = (store.clone(), path.clone(), UpdateVersion::from(second.clone()));
            writers.spawn(async move { store.put_opts(&path, format!("w{i}").into(), update(version)).await });
        }
        let (mut won, mut lost) = (0, 0);
        while let Some(result) = writers.join_next().await {
            match result.unwrap() {
                Ok(_) => won += 1,
                Err(object_store::Error::Precondition { .. }) => lost += 1,
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!((won, lost), (1, 7));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn serialized_updates_give_local_disk_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let update = PutOptions::from(PutMode::Update(UpdateVersion { e_tag: Some("\"x\"".into()), version: None }));
        let bare = local.put_opts(&Path::from("a"), "x".into(), update).await;
        assert!(matches!(bare, Err(object_store::Error::NotImplemented { .. })), "{bare:?}");
        compare_and_swap_semantics(Arc::new(SerializedUpdates::new(local))).await;
        let opened = open_local(&format!("file://{}/opened", dir.path().display())).unwrap().unwrap();
        compare_and_swap_semantics(opened).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn memory_store_has_the_same_semantics_natively() {
        compare_and_swap_semantics(open_local("memory://").unwrap().unwrap()).await;
    }

    #[tokio::test]
    async fn path_locks_are_forgotten_when_released() {
        let locks = PathLocks::default();
        let held = locks.lock(&Path::from("a")).await;
        let other = locks.lock(&Path::from("b")).await;
        assert_eq!(locks.map.lock().unwrap().locks.len(), 2);
        drop(held);
        drop(other);
        assert!(locks.map.lock().unwrap().locks.is_empty());

        // A waiter cancelled while another holds the lock leaves a dead entry; the next growth sweeps it.
        let held = locks.lock(&Path::from("a")).await;
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(10), locks.lock(&Path::from("a"))).await.is_err()
        );
        drop(held);
        for i in 0..100 {
            drop(locks.lock(&Path::from(format!("p{i}"))).await);
        }
        assert!(locks.map.lock().unwrap().locks.is_empty());
    }

    /// Sets a directory's modification time to `ago` in the past, as if it had
    /// settled long before.
    fn settle(directory: &std::path::Path, ago: Duration) {
        let at = std::time::SystemTime::now() - ago;
        std::fs::File::open(directory).unwrap().set_modified(at).unwrap();
    }

    fn names(listed: &ListResult) -> Vec<String> {
        let mut names: Vec<String> =
            listed.objects.iter().map(|o| o.location.filename().unwrap().to_string()).collect();
        names.extend(listed.common_prefixes.iter().map(|p| format!("{}/", p.filename().unwrap())));
        names.sort();
        names
    }

    /// A settled directory's listing is kept — a file slipped in behind the
    /// store's back with the time put back is not seen, which is how the test
    /// knows the memo answered — and every change the store makes (overwrite,
    /// create, copy, rename, delete, a subdirectory's first object) shows in
    /// the very next listing. A directory that had not settled is never kept.
    #[tokio::test]
    async fn the_directory_memo_answers_only_while_a_directory_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_local(&format!("file://{}", dir.path().display())).unwrap().unwrap();
        let folder = Path::from("f");
        let on_disk = dir.path().join("f");
        store.put(&folder.clone().join("a"), "a".into()).await.unwrap();
        let list = || async { names(&store.list_with_delimiter(Some(&folder)).await.unwrap()) };

        // Not settled: listed from the disk every time.
        assert_eq!(list().await, ["a"]);
        let modified = std::fs::metadata(&on_disk).unwrap().modified().unwrap();
        std::fs::write(on_disk.join("hidden"), "x").unwrap();
        std::fs::File::open(&on_disk).unwrap().set_modified(modified).unwrap();
        assert_eq!(list().await, ["a", "hidden"], "a directory changed just now is not kept");
        std::fs::remove_file(on_disk.join("hidden")).unwrap();

        let changes: [(&str, Vec<&str>); 6] = [
            ("overwrite", vec!["a"]),
            ("create", vec!["a", "b"]),
            ("copy", vec!["a", "b", "c"]),
            ("rename", vec!["a", "b", "d"]),
            ("delete", vec!["a", "d"]),
            ("subdirectory", vec!["a", "d", "sub/"]),
        ];
        for (change, expected) in changes {
            settle(&on_disk, Duration::from_secs(10));
            let before = list().await;
            // Kept now: a file slipped in with the time put back is not seen.
            let settled = std::fs::metadata(&on_disk).unwrap().modified().unwrap();
            std::fs::write(on_disk.join("slipped"), "x").unwrap();
            std::fs::File::open(&on_disk).unwrap().set_modified(settled).unwrap();
            assert_eq!(list().await, before, "{change}: the memo answered");
            std::fs::remove_file(on_disk.join("slipped")).unwrap();
            std::fs::File::open(&on_disk).unwrap().set_modified(settled).unwrap();
            let at = |name: &str| folder.clone().join(name);
            match change {
                "overwrite" => _ = store.put(&at("a"), "a2".into()).await.unwrap(),
                "create" => {
                    let create = PutOptions { mode: PutMode::Create, ..Default::default() };
                    store.put_opts(&at("b"), "b".into(), create).await.unwrap();
                }
                "copy" => store.copy(&at("b"), &at("c")).await.unwrap(),
                "rename" => store.rename(&at("c"), &at("d")).await.unwrap(),
                "delete" => store.delete(&at("b")).await.unwrap(),
                _ => _ = store.put(&at("sub").join("x"), "x".into()).await.unwrap(),
            }
            assert_eq!(list().await, expected, "{change} shows at once");
        }
        // A directory without subdirectories lists in key order, from the
        // kept listing, after an offset; one with them, every object below.
        for name in ["m", "b", "z", "c"] {
            store.put(&Path::from("flat").join(name), "x".into()).await.unwrap();
        }
        settle(&dir.path().join("flat"), Duration::from_secs(10));
        let flat = |offset: Option<&str>| {
            let listed = match offset {
                Some(offset) => store.list_with_offset(Some(&Path::from("flat")), &Path::from("flat").join(offset)),
                None => store.list(Some(&Path::from("flat"))),
            };
            async move {
                let listed: Vec<ObjectMeta> = listed.try_collect().await.unwrap();
                listed.into_iter().map(|o| o.location.filename().unwrap().to_string()).collect::<Vec<_>>()
            }
        };
        assert_eq!(flat(None).await, ["b", "c", "m", "z"]);
        assert_eq!(flat(Some("c")).await, ["m", "z"]);
        assert_eq!(flat(Some("a")).await, ["b", "c", "m", "z"]);
        let mut nested: Vec<String> =
            store.list(Some(&folder)).map_ok(|o| o.location.to_string()).try_collect().await.unwrap();
        nested.sort();
        assert_eq!(nested, ["f/a", "f/d", "f/sub/x"], "a directory with subdirectories lists everything below it");
        let missing: Vec<ObjectMeta> = store.list(Some(&Path::from("none"))).try_collect().await.unwrap();
        assert!(missing.is_empty());

        let etag = |listed: ListResult| {
            listed.objects.into_iter().find(|o| o.location == folder.clone().join("a")).unwrap().e_tag
        };
        let first = etag(store.list_with_delimiter(Some(&folder)).await.unwrap());
        settle(&on_disk, Duration::from_secs(10));
        store.list_with_delimiter(Some(&folder)).await.unwrap();
        store.put(&folder.clone().join("a"), "a3".into()).await.unwrap();
        assert_ne!(
            etag(store.list_with_delimiter(Some(&folder)).await.unwrap()),
            first,
            "an overwrite's new etag is listed"
        );
    }
}
