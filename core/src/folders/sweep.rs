//! Garbage collection, proportional to what changed.
//!
//! Before a mutation writes bytes that may become garbage, it appends an
//! entry to a journal (`.dial-host/gc/<time>-<id>.json`): "version V of the
//! resource at B may be unreferenced later" or "the resource at B is being
//! deleted". The sweep reads only the journal, and only acts on entries
//! older than the grace period:
//!
//! - a version entry: the version's subtree is deleted if the marker does
//!   not reference it, as its current version or in its history (a writer
//!   that staged it gave up at half the grace period, so nobody can still
//!   commit it). A version the history keeps by count settles the entry: the
//!   commit that drops it journals it again. One kept for its age only
//!   (`keepUntil`) keeps the entry: readers stop seeing it at `keepUntil`,
//!   and a grace period later the sweep removes it from the history (a
//!   conditional marker write under the resource lock, so no commit is
//!   refused for it) and deletes it;
//! - a tombstone whose restore window has passed is *purged*: the marker is
//!   rewritten, conditionally, to a tombstone without files (a re-create is
//!   a conditional write over the tombstone, so it either lands before the
//!   purge — which then fails and leaves it alone — or after it), every
//!   version it referenced (current and history) is deleted, and then the
//!   marker itself, so a deleted resource leaves nothing in the store and
//!   costs no listing anything. Object stores cannot delete conditionally,
//!   and an unconditional delete could remove a re-create that committed in
//!   between; so the marker is deleted under the resource lock — which every
//!   write of a marker over a tombstone holds from its read to its write (a
//!   re-create's commit, a restore) — after reading that it is still the
//!   purged tombstone, with the lease checked right before the delete. A
//!   re-create then either committed first (the marker is live: left alone)
//!   or reads no marker and creates one (`PutMode::Create`).
//!
//! Nothing else is ever deleted: not the `v/` prefix as a whole (a re-create
//! may be staging there), not a version a marker references. The sweep takes
//! a lock only for what a conditional write cannot fence (the purged marker's
//! delete, a version expired from a history); everything else is fenced by
//! the marker's conditional write. A crash between any two steps leaves an
//! entry behind, so nothing written is ever orphaned for good; an entry that
//! fails is kept for the next sweep and does not stop this one.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::Serialize;

use super::error::FolderError;
use super::journal::{JOURNAL_PREFIX, JournalEntry};
use super::layout::{VERSIONS_DIR, resource_marker_of};
use super::marker::ResourceMarker;
use super::markers::{ReadMarker, read_json};
use super::node::resource_lock_key;
use crate::clock::{new_id, now_ms};
use crate::locks::LockService;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    pub entries_seen: usize,
    pub entries_done: usize,
    /// Entries whose processing failed; they stay for the next sweep.
    pub entries_failed: usize,
    pub versions_deleted: usize,
    pub tombstones_finished: usize,
    pub objects_deleted: usize,
    pub bytes_deleted: u64,
}

/// A marker with the token a conditional rewrite needs.
type Versioned = ReadMarker<ResourceMarker>;

/// The sweep: the store the journal and the resources are in, and the locks
/// the steps no conditional write can fence take.
pub struct Sweeper {
    store: Arc<dyn ObjectStore>,
    locks: Arc<dyn LockService>,
}

impl Sweeper {
    pub fn new(store: Arc<dyn ObjectStore>, locks: Arc<dyn LockService>) -> Self {
        Self { store, locks }
    }

    fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Processes every journal entry older than `grace`. The journal is
    /// streamed, never held whole; an entry that fails is logged, counted
    /// and kept, and the sweep goes on with the next one.
    pub async fn sweep(&self, grace: Duration) -> Result<SweepReport, FolderError> {
        let mut report = SweepReport::default();
        let result = self.sweep_into(grace, &mut report).await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        crate::metrics::sweep(outcome, report.objects_deleted, report.bytes_deleted, report.entries_failed);
        result.map(|()| report)
    }

    async fn sweep_into(&self, grace: Duration, report: &mut SweepReport) -> Result<(), FolderError> {
        let grace_ms = grace.as_millis() as i64;
        let now = now_ms();
        let mut entries = self.store().list(Some(&Path::from(JOURNAL_PREFIX)));
        while let Some(meta) = entries.next().await {
            let meta = meta?;
            report.entries_seen += 1;
            let written_at =
                meta.location.filename().and_then(|n| n.split('-').next()).and_then(|t| t.parse::<i64>().ok());
            if written_at.is_some_and(|t| now - t < grace_ms) {
                continue;
            }
            match self.settle_entry(&meta.location, now, grace_ms, report).await {
                Ok(true) => report.entries_done += 1,
                Ok(false) => {}
                Err(error) => {
                    report.entries_failed += 1;
                    tracing::warn!(entry = %meta.location, %error, "gc journal entry failed; kept for the next sweep");
                }
            }
        }
        if report.entries_done > 0 || report.entries_failed > 0 {
            tracing::info!(?report, "gc sweep");
        }
        Ok(())
    }

    /// Reads one due entry, acts on it, and removes it once it is settled.
    async fn settle_entry(
        &self,
        location: &Path,
        now: i64,
        grace_ms: i64,
        report: &mut SweepReport,
    ) -> Result<bool, FolderError> {
        let entry: Option<JournalEntry> = match self.store().get(location).await {
            Ok(result) => serde_json::from_slice(&result.bytes().await?).ok(),
            Err(object_store::Error::NotFound { .. }) => return Ok(false), // another sweep settled it
            Err(error) => return Err(error.into()),
        };
        let settled = match entry {
            Some(entry) => self.process(&entry, now, grace_ms, report).await?,
            None => {
                tracing::warn!(entry = %location, "unreadable gc journal entry dropped");
                true
            }
        };
        if settled {
            match self.store().delete(location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(settled)
    }

    /// Acts on one due entry; `true` when the entry is settled.
    async fn process(
        &self,
        entry: &JournalEntry,
        now: i64,
        grace_ms: i64,
        report: &mut SweepReport,
    ) -> Result<bool, FolderError> {
        let base = Path::from(entry.base.as_str());
        let read = self.marker_at(&base).await?;
        let kept = match (&entry.version, &read) {
            (Some(version), Some(read)) => read.marker.history.iter().find(|r| &r.version == version),
            _ => None,
        };
        match (&entry.version, &read, kept) {
            // A purged tombstone's history went with it.
            (Some(version), Some(read), Some(_)) if read.marker.purged_at.is_some() => {
                self.delete_version(&base, version, report).await
            }
            (Some(_), Some(_), Some(kept)) => match kept.keep_until {
                None => Ok(true),
                // Readers stop seeing it at `until`; the store keeps it a grace period more.
                Some(until) if until.saturating_add(grace_ms) > now => Ok(false),
                // A tombstone's expiry waits: its restore brings the history back, its purge ends it.
                Some(_) if !read.as_ref().is_some_and(|r| r.marker.is_ready()) => Ok(false),
                Some(_) => self.expire(&base, &kept.version, now, grace_ms, report).await,
            },
            // Not referenced (and its writer gave up long ago): garbage.
            (Some(version), None, _) => self.delete_version(&base, version, report).await,
            (Some(version), Some(read), _) if &read.marker.current_version != version => {
                self.delete_version(&base, version, report).await
            }
            // Live: the version is current, or the delete was undone.
            (_, Some(read), _) if read.marker.is_ready() => Ok(true),
            (None, None, _) => Ok(true),
            (_, Some(read), _) => {
                let due = read.marker.deleted_at.is_some_and(|at| now - at >= grace_ms);
                if !due {
                    return Ok(false); // still restorable
                }
                self.purge(&base, read, report).await
            }
        }
    }

    /// Removes an age-kept version that readers have not seen for a grace
    /// period from a live marker's history, then deletes it. The marker is
    /// rewritten under the resource lock (commits re-read and write it under
    /// it, so none is refused for this write); a crash before the delete
    /// leaves the entry, which then finds the version unreferenced.
    async fn expire(
        &self,
        base: &Path,
        version: &str,
        now: i64,
        grace_ms: i64,
        report: &mut SweepReport,
    ) -> Result<bool, FolderError> {
        {
            let _lock = self.locks.acquire(&resource_lock_key(base)).await?;
            let Some(read) = self.marker_at(base).await? else { return Ok(false) };
            if let Some(record) = read.marker.history.iter().find(|r| r.version == version) {
                let due = record.keep_until.is_some_and(|until| until.saturating_add(grace_ms) <= now);
                if !read.marker.is_ready() || !due {
                    return Ok(record.keep_until.is_none());
                }
                let history = read.marker.history.iter().filter(|r| r.version != version).cloned().collect();
                if !self.rewrite(base, &read, ResourceMarker { history, ..read.marker.clone() }).await? {
                    return Ok(false);
                }
            } else if read.marker.current_version == version {
                return Ok(true);
            }
        }
        self.delete_version(base, version, report).await
    }

    async fn delete_version(&self, base: &Path, version: &str, report: &mut SweepReport) -> Result<bool, FolderError> {
        let (deleted, bytes) = self.delete_prefix(&base.clone().join(VERSIONS_DIR).join(version)).await?;
        report.objects_deleted += deleted;
        report.bytes_deleted += bytes;
        report.versions_deleted += usize::from(deleted > 0);
        Ok(true)
    }

    /// Finishes a tombstone whose restore window has passed: the marker
    /// becomes a tombstone without files (a conditional write: a re-create
    /// or restore that got in first wins, and this sweep leaves it alone),
    /// then every version it referenced is deleted, then the marker. The
    /// purged marker keeps naming those versions, so after a crash between
    /// the steps the entry (still there) finishes the job; a re-create over
    /// it journals that version as superseded, like any commit does.
    async fn purge(&self, base: &Path, read: &Versioned, report: &mut SweepReport) -> Result<bool, FolderError> {
        if read.marker.purged_at.is_none() {
            let mut purged = read.marker.clone();
            purged.purged_at = Some(now_ms());
            purged.files.clear();
            // Changed since it was read (restored, re-created): look again next time.
            if !self.rewrite(base, read, purged).await? {
                return Ok(false);
            }
            report.tombstones_finished += 1;
        }
        for version in read.marker.referenced_versions() {
            let (deleted, bytes) = self.delete_prefix(&base.clone().join(VERSIONS_DIR).join(version)).await?;
            report.objects_deleted += deleted;
            report.bytes_deleted += bytes;
        }
        self.remove_purged_marker(base, report).await
    }

    /// Deletes the marker of a purged tombstone: what is left of a deleted
    /// resource, which every listing of its folder would otherwise read
    /// forever. Under the resource lock (see the module docs: every write
    /// over a tombstone holds it from its read to its write), only if the
    /// marker is still a purged tombstone, and never on a lease that may
    /// have run out. A marker that is live again, or a newer tombstone
    /// (with an entry of its own), settles this entry as it is.
    async fn remove_purged_marker(&self, base: &Path, report: &mut SweepReport) -> Result<bool, FolderError> {
        let lock = self.locks.acquire(&resource_lock_key(base)).await?;
        let purged = self.marker_at(base).await?.is_some_and(|read| read.marker.purged_at.is_some());
        if purged {
            lock.ensure_held()?;
            match self.store().delete(&resource_marker_of(base)).await {
                Ok(()) => report.objects_deleted += 1,
                Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(true)
    }

    /// Writes `marker` (with a new commit id) over the marker `read` came
    /// from, if it is still that one: `false` when it changed since.
    async fn rewrite(&self, base: &Path, read: &Versioned, marker: ResourceMarker) -> Result<bool, FolderError> {
        let marker = ResourceMarker { commit_id: new_id(), ..marker };
        let options = PutOptions { mode: PutMode::Update(read.version.clone()), ..Default::default() };
        let path = resource_marker_of(base);
        match self.store().put_opts(&path, PutPayload::from(marker.to_json()), options).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    async fn marker_at(&self, base: &Path) -> Result<Option<Versioned>, FolderError> {
        read_json(self.store(), &resource_marker_of(base)).await
    }

    /// Deletes every object below `prefix`: how many, and their bytes.
    async fn delete_prefix(&self, prefix: &Path) -> Result<(usize, u64), FolderError> {
        let listed: Vec<ObjectMeta> = self.store().list(Some(prefix)).try_collect().await?;
        let bytes = listed.iter().map(|meta| meta.size).sum();
        let deleted =
            crate::storage::delete_all(self.store(), listed.into_iter().map(|meta| meta.location).collect()).await?;
        Ok((deleted, bytes))
    }
}
