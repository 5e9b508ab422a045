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
use std::time::Duration;

use futures_util::StreamExt;
use indexmap::IndexMap;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::error::FolderError;
use super::journal::GcJournal;
use super::listing::{self, Listing, MarkerCache};
use super::marker::{
    FileRecord, FolderMarker, MarkerState, RESOURCE_MARKER, ResourceMarker, SCHEMA_VERSION, VersionRecord,
    aggregate_etag,
};
use super::markers::{self, ReadMarker, read_json};
use super::node::Node;
use super::policy::{FolderLimits, Retention};
use super::staging::{Deadline, Staging, Uncommitted, check_files};
use super::sweep::{SweepReport, Sweeper};
use super::validate;
use crate::clock::{new_id, now_ms};
use crate::config::{FoldersConfig, ListingsConfig, TypeSettings};
use crate::etag::Preconditions;
use crate::events::{EventAction, EventBus, ResourceEvent};
use crate::handlers::{Handler, Problem};
use crate::locks::{LockGuard, LockService};
use crate::resource_url::ResourceUrl;
use crate::storage::PathLimits;

/// Server-side copies one new version makes at once.
const COPIES_IN_FLIGHT: usize = 8;

/// What a committed version becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Becomes {
    /// The current version: what every read gets.
    Current,
    /// The newest retained version; the current one stays.
    Retained,
}

/// The result of a committed mutation.
#[derive(Debug, Clone)]
pub struct Committed {
    pub marker: ResourceMarker,
    pub created: bool,
    /// The version committed (the current one unless it was committed as
    /// [`Becomes::Retained`]).
    pub version: String,
    /// The handler's warnings about that version.
    pub warnings: Vec<Problem>,
}

/// The folder engine: one per server, shared by all requests.
pub struct FolderEngine {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) locks: Arc<dyn LockService>,
    events: Arc<dyn EventBus>,
    pub(super) journal: GcJournal,
    config: FoldersConfig,
    pub(super) type_settings: BTreeMap<String, TypeSettings>,
    pub(super) path_limits: PathLimits,
    /// Markers listings read, by location and etag.
    pub(super) listed: MarkerCache,
    /// Whether the store lists keys in order (listings then page with
    /// `start-after` instead of listing an index whole).
    pub(super) lists_in_key_order: bool,
    /// The store's paged listing, where it has one ([`super::pages`]).
    pub(super) pager: Option<super::pager::Pager>,
    pub(super) known_complete: super::listing::KnownComplete,
    /// When each type's quota was set ([`Self::settle_quotas`]).
    pub(super) quota_epochs: std::sync::RwLock<BTreeMap<String, i64>>,
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
        for (group, quota) in type_settings.iter().filter_map(|(group, settings)| Some((group, settings.quota?))) {
            quota.max_resources.inspect(|limit| crate::metrics::quota_limit(group, "max_resources", *limit));
            quota.max_bytes.inspect(|limit| crate::metrics::quota_limit(group, "max_bytes", *limit));
        }
        Self {
            store,
            locks,
            events,
            journal,
            config,
            type_settings,
            path_limits: PathLimits::default(),
            listed: ListingsConfig::default().new_cache(),
            lists_in_key_order: true,
            pager: None,
            known_complete: Default::default(),
            quota_epochs: Default::default(),
        }
    }

    /// How much of what listings read is kept, and whether the store lists
    /// a flat prefix's keys in order (S3, GCS, Azure and memory do, and so
    /// does the local disk as `storage::open_local` opens it; `false` only
    /// for a store wrapped without that promise).
    pub fn with_listings(mut self, bounds: &ListingsConfig, lists_in_key_order: bool) -> Self {
        self.listed = bounds.new_cache();
        self.lists_in_key_order = lists_in_key_order;
        self
    }

    /// The markers listings keep now (entries, estimated bytes).
    pub fn listing_cache_size(&self) -> (usize, usize) {
        (self.listed.len(), self.listed.bytes())
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

    pub(crate) fn grace_ms(&self) -> i64 {
        i64::try_from(self.grace().as_millis()).unwrap_or(i64::MAX)
    }

    /// A writer slower than this gives up before committing: the sweep may
    /// consider its version garbage after the full grace period.
    pub(super) fn commit_deadline(&self) -> Deadline {
        Deadline::starting_now(self.grace() / 2)
    }

    pub fn limits(&self, handler: &Handler) -> FolderLimits {
        FolderLimits::resolve(&self.config, handler, self.type_settings.get(&handler.description().group))
    }

    pub fn retention(&self, handler: &Handler) -> Retention {
        Retention::resolve(&self.config, self.type_settings.get(&handler.description().group))
    }

    // ----- reads -------------------------------------------------------

    pub(super) async fn read_resource_marker(
        &self,
        node: &Node,
    ) -> Result<Option<ReadMarker<ResourceMarker>>, FolderError> {
        markers::read_resource_marker(&self.store, node).await
    }

    pub(super) async fn read_folder_marker(
        &self,
        node: &Node,
    ) -> Result<Option<ReadMarker<FolderMarker>>, FolderError> {
        markers::read_folder_marker(&self.store, node).await
    }

    /// Whether a DIAL folder exists at `node` (the bucket root always does).
    pub async fn folder_exists(&self, node: &Node) -> Result<bool, FolderError> {
        Ok(node.url.is_bucket_root() || self.read_folder_marker(node).await?.is_some())
    }

    /// The live (ready) marker of a resource.
    pub async fn live_marker(&self, node: &Node) -> Result<Option<ResourceMarker>, FolderError> {
        markers::live_marker(&self.store, node).await
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

    pub(super) async fn version_of(
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
    pub(super) async fn supersede(
        &self,
        node: &Node,
        previous: Option<&ResourceMarker>,
        retention: Retention,
    ) -> Result<Vec<VersionRecord>, FolderError> {
        let Some(previous) = previous else { return Ok(Vec::new()) };
        if !previous.is_ready() {
            let journal: Vec<String> = previous.referenced_versions().map(str::to_owned).collect();
            self.journal_versions(node, &journal).await?;
            return Ok(Vec::new());
        }
        let previous = previous.clone().numbered();
        self.retire_to_history(node, &previous, &previous.history, retention, false).await
    }

    /// The history once `outgoing` (a marker as it is or would be as
    /// current) joins `history` as a retained version: ordered newest
    /// (highest number) first, `retention` applied — never dropping the
    /// newest when `keep_newest` (it is not current, and a client may name
    /// it as the latest) — and `outgoing`'s manifest written beside its
    /// files when it stays.
    pub(super) async fn retire_to_history(
        &self,
        node: &Node,
        outgoing: &ResourceMarker,
        history: &[VersionRecord],
        retention: Retention,
        keep_newest: bool,
    ) -> Result<Vec<VersionRecord>, FolderError> {
        let mut candidates: Vec<VersionRecord> =
            std::iter::once(outgoing.current_record()).chain(history.iter().cloned()).collect();
        candidates.sort_by_key(|record| std::cmp::Reverse((record.number, record.created_at)));
        let (kept, journal) = retention.apply(candidates, now_ms(), keep_newest);
        let keeps_outgoing = kept.iter().any(|r| r.version == outgoing.current_version);
        let snapshot = async {
            if keeps_outgoing {
                let path = node.paths.version(&outgoing.current_version).join(RESOURCE_MARKER);
                self.store.put(&path, PutPayload::from(outgoing.version_snapshot())).await?;
            }
            Ok::<(), FolderError>(())
        };
        tokio::try_join!(snapshot, self.journal_versions(node, &journal))?;
        Ok(kept)
    }

    /// Journal entries for versions that may have become garbage.
    pub(super) async fn journal_versions(&self, node: &Node, versions: &[String]) -> Result<(), FolderError> {
        let base = node.paths.base();
        futures_util::future::try_join_all(
            versions.iter().map(|version| async move { self.journal.record(base, Some(version)).await }),
        )
        .await?;
        Ok(())
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
            pending: Uncommitted::new(self.store.clone(), node.clone(), version, journal_entry),
            existed: current.is_some(),
            node: node.clone(),
            files: BTreeMap::new(),
            names: Default::default(),
            bytes_in_flight: 0,
            limits: self.limits(handler),
            deadline,
            path_limits: self.path_limits,
            store: self.store.clone(),
            display_name: None,
            metadata_check: None,
            key: None,
        })
    }

    /// Validates a staged version and commits it as the resource's current one.
    pub async fn commit(
        &self,
        staging: Staging,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
    ) -> Result<Committed, FolderError> {
        self.commit_as(staging, handler, conditions, author, Becomes::Current).await
    }

    /// Validates a staged version and commits it: as the current version,
    /// or ([`Becomes::Retained`]) as the newest retained one, the current
    /// version staying what readers get (a create always becomes current).
    /// A commit refused leaves nothing of the staged version behind.
    pub async fn commit_as(
        &self,
        mut staging: Staging,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
        becomes: Becomes,
    ) -> Result<Committed, FolderError> {
        let committed = self.try_commit(&mut staging, handler, conditions, author, becomes).await;
        if let Err(error) = &committed {
            staging.pending.failed_with(error);
            staging.discard().await;
        }
        committed
    }

    async fn try_commit(
        &self,
        staging: &mut Staging,
        handler: &Handler,
        conditions: &Preconditions,
        author: Option<String>,
        becomes: Becomes,
    ) -> Result<Committed, FolderError> {
        staging.flush().await?;
        let node = staging.node.clone();
        // Past the deadline the sweep may have removed staged files: stop
        // before the handler reads them.
        staging.deadline.check()?;
        let version = staging.pending.version.clone();
        let (metadata, warnings) = self.check_with_handler(&node, &version, &staging.files, handler).await?;
        if let Some(check) = &staging.metadata_check {
            check(&metadata).map_err(FolderError::BadRequest)?;
        }
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
            let now = now_ms();
            let number = live.map(|r| r.marker.next_number()).unwrap_or(1);
            let staged = ResourceMarker {
                type_name: handler.description().type_name.clone(),
                schema_version: SCHEMA_VERSION,
                state: MarkerState::Ready,
                current_version: version.clone(),
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
                history: Vec::new(),
                number: Some(number),
                last_number: Some(number),
                display_name: staging.display_name.clone().or_else(|| live.and_then(|r| r.marker.display_name.clone())),
                archive: None,
            };
            let marker = match (becomes, live) {
                (Becomes::Retained, Some(live)) => {
                    let current = live.marker.clone().numbered();
                    let history =
                        self.retire_to_history(&node, &staged, &current.history, self.retention(handler), true).await?;
                    ResourceMarker {
                        history,
                        last_number: Some(number),
                        updated_at: now,
                        commit_id: new_id(),
                        display_name: staged.display_name.clone(),
                        ..current
                    }
                }
                _ => {
                    let previous = existing.as_ref().map(|r| &r.marker);
                    let history = self.supersede(&node, previous, self.retention(handler)).await?;
                    ResourceMarker { history, ..staged }
                }
            };
            staging.deadline.check()?;
            // An application's upload commits only while its key lives.
            if let Some(key) = &staging.key {
                key.ensure_alive().await?;
            }
            // The structure checked above (no resource or folder in the way)
            // holds only while the bucket lock does.
            if creating {
                // The creation index names it before it is there (readers skip what is not).
                self.index_created(&node, marker.created_at).await?;
                ensure_held(&locks)?;
            }
            staging.pending.committing();
            let expected = existing.as_ref().map(|r| r.version.clone());
            match self.write_marker(&node, existing.as_ref().map(|r| &r.marker), &marker, expected).await {
                Ok(()) => break (marker, creating),
                // Lost the compare-and-swap to a writer these locks do not
                // exclude (the sweep purging a tombstone, an instance that
                // shares no lock with this one, a lease that ran out): look
                // again, and write over what is there now if the conditions
                // hold there. A write without conditions is no
                // compare-and-swap: others writing is no reason to refuse it.
                Err(FolderError::Precondition(_)) => staging.pending.not_committed(),
                Err(error) => return Err(error),
            }
        };
        staging.pending.committed(&self.journal);
        let action = if creating { EventAction::Create } else { EventAction::Update };
        self.publish(action, &node, Some(&marker.etag)).await;
        Ok(Committed { marker, created: creating, version, warnings })
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
        // Checked as an upload of these files to `target` would be, today:
        // the type's limits and the path rules there.
        let limits = self.limits(handler);
        check_files(target, &self.path_limits, &limits, marker.files.iter().map(|(path, f)| (path.as_str(), f.size)))?;
        let mut staging = self.stage(target, handler, conditions).await?;
        // The label goes with the files (a move keeps it).
        staging.display_name = marker.display_name.clone();
        // A version stays readable for the grace period after it stops being
        // referenced, even if the source changes meanwhile, so these copies
        // are consistent.
        let copies = marker
            .files
            .keys()
            .map(|path| (source.paths.file(&marker.current_version, path), target.paths.file(staging.version(), path)));
        self.copy_all(copies.collect()).await?;
        staging.files.extend(marker.files.clone());
        self.commit(staging, handler, conditions, author).await
    }

    /// A version about to become current again as it is (no copy), checked
    /// as a commit of its files would be today — the type's limits, the
    /// path rules, then the handler (`strict` included) — so what the type
    /// refuses now is not revived. The marker metadata and warnings it
    /// gets.
    pub(super) async fn recheck(
        &self,
        node: &Node,
        version: &ResourceMarker,
        handler: &Handler,
    ) -> Result<(IndexMap<String, String>, Vec<Problem>), FolderError> {
        let sizes = version.files.iter().map(|(path, f)| (path.as_str(), f.size));
        check_files(node, &self.path_limits, &self.limits(handler), sizes)?;
        self.check_with_handler(node, &version.current_version, &version.files, handler).await
    }

    /// Server-side copies, [`COPIES_IN_FLIGHT`] at a time. A failure stops
    /// new copies but waits for those in flight (a copy cut off could still
    /// land after its version was given up), then is returned.
    pub(super) async fn copy_all(&self, copies: Vec<(Path, Path)>) -> Result<(), FolderError> {
        let store = self.store.clone();
        let failed = std::sync::atomic::AtomicBool::new(false);
        let outcomes: Vec<object_store::Result<()>> = futures_util::stream::iter(copies)
            .take_while(|_| std::future::ready(!failed.load(std::sync::atomic::Ordering::Relaxed)))
            .map(|(from, to)| {
                let (store, failed) = (store.clone(), &failed);
                async move {
                    let copied = store.copy(&from, &to).await;
                    if copied.is_err() {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    copied
                }
            })
            .buffer_unordered(COPIES_IN_FLIGHT)
            .collect()
            .await;
        outcomes.into_iter().collect::<object_store::Result<()>>()?;
        Ok(())
    }
    /// Runs the handler on a version's file set: the problems, or the
    /// marker metadata and the warnings to keep.
    pub(super) async fn check_with_handler(
        &self,
        node: &Node,
        version: &str,
        files: &BTreeMap<String, FileRecord>,
        handler: &Handler,
    ) -> Result<(IndexMap<String, String>, Vec<Problem>), FolderError> {
        validate::check_with_handler(&self.store, node, version, files, handler).await
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
        self.write_marker(node, Some(&current.marker), &tombstone, Some(current.version)).await?;
        self.unindex_created(node, tombstone.created_at).await;
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
        if read.marker.restorable_until(self.grace_ms()).is_none_or(|until| now_ms() > until) {
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
        self.index_created(node, restored.created_at).await?;
        self.write_marker(node, Some(&read.marker), &restored, Some(read.version)).await?;
        self.publish(EventAction::Create, node, Some(&restored.etag)).await;
        Ok(restored)
    }

    /// No ancestor may be a resource, and the node may be neither a live
    /// resource nor a folder where the other is asked for.
    pub(super) async fn check_structure_for_create(&self, node: &Node) -> Result<(), FolderError> {
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
    pub(super) async fn vivify_ancestors(&self, node: &Node, author: Option<&str>) -> Result<(), FolderError> {
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

    /// Files of the current version under `dir`; see [`listing::list_files`].
    pub fn list_files(
        &self,
        node: &Node,
        marker: &ResourceMarker,
        dir: &str,
        recursive: bool,
        token: Option<&str>,
        limit: usize,
    ) -> Result<Listing, FolderError> {
        listing::list_files(node, marker, dir, recursive, token, limit)
    }

    // ----- the sweep ----------------------------------------------------

    /// The sweep over this engine's store, journal and locks.
    pub fn sweeper(&self) -> Sweeper {
        Sweeper::new(self.store.clone(), self.locks.clone())
    }

    /// Processes every journal entry older than the grace period.
    pub async fn sweep(&self) -> Result<SweepReport, FolderError> {
        self.sweeper().sweep(self.grace()).await
    }

    /// The sweep with another grace period (tests, operators' one-off runs).
    pub async fn sweep_with_grace(&self, grace: Duration) -> Result<SweepReport, FolderError> {
        self.sweeper().sweep(grace).await
    }

    // ----- plumbing -----------------------------------------------------

    /// Structural changes take the bucket lock, content changes the
    /// resource lock (always in that order).
    pub(super) async fn lock_for(&self, node: &Node, structural: bool) -> Result<Vec<LockGuard>, FolderError> {
        let mut guards = Vec::new();
        if structural {
            guards.push(self.locks.acquire(&node.bucket_lock_key()).await?);
        }
        guards.push(self.locks.acquire(&node.resource_lock_key()).await?);
        Ok(guards)
    }

    pub(super) async fn publish(&self, action: EventAction, node: &Node, etag: Option<&str>) {
        let url = if node.url.is_folder() { node.url.to_string() } else { node.item_url() };
        self.events.publish(ResourceEvent::now(action, url, etag.map(Into::into))).await;
    }
}

/// Every guard of a step that relies on its locks must still be held.
pub(super) fn ensure_held(guards: &[LockGuard]) -> Result<(), FolderError> {
    guards.iter().try_for_each(LockGuard::ensure_held).map_err(FolderError::from)
}

/// Runs the sweep every `interval` until the engine is dropped.
pub fn spawn_sweeper(engine: &Arc<FolderEngine>, interval: Duration) {
    let engine = Arc::downgrade(engine);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let Some(engine) = engine.upgrade() else { break };
            if let Err(error) = engine.sweep().await {
                tracing::warn!(%error, "gc sweep failed");
            }
        }
    });
}
