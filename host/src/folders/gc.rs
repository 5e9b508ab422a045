//! Garbage collection, proportional to what changed.
//!
//! Before a mutation writes bytes that may become garbage, it appends an
//! entry to a journal (`.dial-host/gc/<time>-<id>.json`): "version V of the
//! resource at B may be unreferenced later" or "the resource at B is being
//! deleted". The sweep reads only the journal, and only acts on entries
//! older than the grace period: it deletes a version no marker references,
//! finishes a tombstone whose restore window has passed, and drops entries
//! about versions that are live. A crash between any two steps leaves an
//! entry behind, so nothing written is ever orphaned for good.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use super::engine::{FolderEngine, FolderError, new_id, now_ms};
use super::layout::VERSIONS_DIR;
use super::marker::{RESOURCE_MARKER, ResourceMarker};

const JOURNAL_PREFIX: &str = ".dial-host/gc";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct JournalEntry {
    /// The resource's storage prefix.
    base: String,
    /// A version that may become garbage; `None` for a delete.
    version: Option<String>,
    /// The lock that serialises structural changes of that resource.
    lock: String,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    pub entries_seen: usize,
    pub entries_done: usize,
    pub versions_deleted: usize,
    pub tombstones_finished: usize,
    pub objects_deleted: usize,
}

/// Appends entries to the journal.
pub struct GcJournal {
    store: Arc<dyn ObjectStore>,
}

impl GcJournal {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self { store }
    }

    pub async fn record(&self, base: &Path, version: Option<&str>, lock: &str) -> Result<(), FolderError> {
        let entry = JournalEntry { base: base.to_string(), version: version.map(Into::into), lock: lock.into() };
        let name = format!("{:016}-{}.json", now_ms(), new_id());
        let payload = PutPayload::from(serde_json::to_vec(&entry).expect("journal entries serialise"));
        self.store.put(&Path::from(JOURNAL_PREFIX).join(name), payload).await?;
        Ok(())
    }
}

impl FolderEngine {
    /// Processes every journal entry older than the grace period.
    pub async fn sweep(&self) -> Result<SweepReport, FolderError> {
        self.sweep_with_grace(self.grace()).await
    }

    /// The sweep with another grace period (tests, operators' one-off runs).
    pub async fn sweep_with_grace(&self, grace: Duration) -> Result<SweepReport, FolderError> {
        let grace_ms = grace.as_millis() as i64;
        let now = now_ms();
        let mut report = SweepReport::default();
        let entries: Vec<_> = self.store().list(Some(&Path::from(JOURNAL_PREFIX))).try_collect().await?;
        for meta in entries {
            report.entries_seen += 1;
            let written_at =
                meta.location.filename().and_then(|n| n.split('-').next()).and_then(|t| t.parse::<i64>().ok());
            if written_at.is_some_and(|t| now - t < grace_ms) {
                continue;
            }
            let entry: Option<JournalEntry> = match self.store().get(&meta.location).await {
                Ok(result) => serde_json::from_slice(&result.bytes().await?).ok(),
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(error) => return Err(error.into()),
            };
            let done = match entry {
                Some(entry) => self.process(&entry, now, grace_ms, &mut report).await?,
                None => true, // unreadable: nothing to act on
            };
            if done {
                self.store().delete(&meta.location).await?;
                report.entries_done += 1;
            }
        }
        if report.entries_done > 0 {
            tracing::info!(?report, "gc sweep");
        }
        Ok(report)
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
        let marker = self.marker_at(&base).await?;
        let tombstone_due = |m: &ResourceMarker| m.deleted_at.is_some_and(|at| now - at >= grace_ms);
        match (&entry.version, &marker) {
            (Some(version), Some(m)) if &m.current_version == version => {
                if m.is_ready() {
                    return Ok(true); // live
                }
                if !tombstone_due(m) {
                    return Ok(false); // still restorable
                }
                self.finish_tombstone(entry, &base, report).await
            }
            (Some(version), _) => {
                let deleted = self.delete_prefix(&base.clone().join(VERSIONS_DIR).join(version.as_str())).await?;
                report.objects_deleted += deleted;
                report.versions_deleted += usize::from(deleted > 0);
                Ok(true)
            }
            (None, Some(m)) if !m.is_ready() => {
                if !tombstone_due(m) {
                    return Ok(false);
                }
                self.finish_tombstone(entry, &base, report).await
            }
            (None, _) => Ok(true), // restored, re-created or already gone
        }
    }

    /// Removes a tombstoned resource's files, then its marker, under the
    /// bucket lock so a concurrent re-create is not swept away.
    async fn finish_tombstone(
        &self,
        entry: &JournalEntry,
        base: &Path,
        report: &mut SweepReport,
    ) -> Result<bool, FolderError> {
        let _lock = self.locks.acquire(&entry.lock).await?;
        let Some(marker) = self.marker_at(base).await? else { return Ok(true) };
        if marker.is_ready() {
            return Ok(true); // re-created meanwhile
        }
        report.objects_deleted += self.delete_prefix(&base.clone().join(VERSIONS_DIR)).await?;
        match self.store().delete(&base.clone().join(RESOURCE_MARKER)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        report.objects_deleted += 1;
        report.tombstones_finished += 1;
        Ok(true)
    }

    async fn marker_at(&self, base: &Path) -> Result<Option<ResourceMarker>, FolderError> {
        match self.store().get(&base.clone().join(RESOURCE_MARKER)).await {
            Ok(result) => Ok(serde_json::from_slice(&result.bytes().await?).ok()),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn delete_prefix(&self, prefix: &Path) -> Result<usize, FolderError> {
        let locations = self.store().list(Some(prefix)).map_ok(|meta| meta.location).boxed();
        let deleted: Vec<Path> = self.store().delete_stream(locations).try_collect().await?;
        Ok(deleted.len())
    }
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
