//! Changes to a resource's version history that commit no new version:
//! making a retained version current again without a copy (what OpenAI's
//! `default_version` is), and dropping one retained version. Both rewrite
//! only the marker, under the resource lock, with the marker's ETag as the
//! fencing token like every commit.

use object_store::{ObjectStoreExt, PutPayload, UpdateVersion};

use super::engine::FolderEngine;
use super::error::FolderError;
use super::marker::{RESOURCE_MARKER, ResourceMarker, VersionRecord};
use super::node::Node;
use crate::clock::{new_id, now_ms};
use crate::etag::Preconditions;
use crate::events::EventAction;
use crate::handlers::Handler;

/// Lost compare-and-swaps (to the sweep, which takes no lock a commit
/// excludes) before giving up.
const ATTEMPTS: usize = 5;

impl FolderEngine {
    /// Makes the retained `version` the current one as it is: same id, same
    /// files, no copy and no new version; the version it replaces joins the
    /// history. Naming the current version changes nothing. `conditions`
    /// are checked against the current version. The version is checked as
    /// a restore of it would be ([`FolderEngine::recheck`]): what the type
    /// refuses today does not become current again.
    pub async fn make_current(
        &self,
        node: &Node,
        version: &str,
        handler: &Handler,
        conditions: &Preconditions,
    ) -> Result<ResourceMarker, FolderError> {
        let live = self.resource_for_read(node).await?;
        conditions.check_write(Some(&live.etag))?;
        if live.current_version == version {
            return Ok(live.numbered());
        }
        // A version's files never change: checked once, outside the lock.
        let (metadata, warnings) = self.recheck(node, &self.version_of(node, live, version).await?, handler).await?;
        let _lock = self.locks.acquire(&node.resource_lock_key()).await?;
        for _ in 0..ATTEMPTS {
            let read = self.live_read(node).await?;
            conditions.check_write(Some(&read.marker.etag))?;
            let live = read.marker.clone().numbered();
            if live.current_version == version {
                return Ok(live);
            }
            let target = self.version_of(node, live.clone(), version).await?.numbered_as(&live, version);
            // The outgoing current version's manifest, for reads of it as a
            // retained version.
            let outgoing = node.paths.version(&live.current_version).join(RESOURCE_MARKER);
            self.store.put(&outgoing, PutPayload::from(live.version_snapshot())).await?;
            let mut history: Vec<VersionRecord> = live
                .history
                .iter()
                .filter(|record| record.version != version)
                .cloned()
                .chain(std::iter::once(live.current_record()))
                .collect();
            history.sort_by_key(|record| std::cmp::Reverse((record.number, record.created_at)));
            // The newest version is kept whatever its age while it is not
            // current (a client may name it as the latest).
            if let Some(newest) = history.first_mut().filter(|newest| newest.number > target.number) {
                newest.keep_until = None;
            }
            let now = now_ms();
            let marker = ResourceMarker {
                current_version: target.current_version,
                etag: target.etag,
                metadata: metadata.clone(),
                warnings: warnings.clone(),
                files: target.files,
                committed_at: target.committed_at,
                committed_by: target.committed_by,
                number: target.number,
                history,
                updated_at: now,
                commit_id: new_id(),
                ..live
            };
            if self.rewrite_history(node, &read.marker, &marker, read.version).await? {
                return Ok(marker);
            }
        }
        Err(FolderError::Conflict(format!("{} kept changing; retry", node.item_url())))
    }

    /// Removes the retained `version` from the history (its files go with
    /// the sweep after the grace period). The current version cannot be
    /// dropped: make another one current first.
    pub async fn drop_version(&self, node: &Node, version: &str) -> Result<ResourceMarker, FolderError> {
        let _lock = self.locks.acquire(&node.resource_lock_key()).await?;
        for _ in 0..ATTEMPTS {
            let read = self.live_read(node).await?;
            let live = read.marker.clone().numbered();
            if live.current_version == version {
                return Err(FolderError::BadRequest(format!(
                    "Version {version} is the current version of {}: make another version current before deleting it",
                    node.item_url()
                )));
            }
            let now = now_ms();
            if !live.history.iter().any(|record| record.version == version && record.visible_at(now)) {
                return Err(FolderError::VersionNotFound(version.to_string()));
            }
            self.journal_versions(node, &[version.to_string()]).await?;
            let history = live.history.iter().filter(|record| record.version != version).cloned().collect();
            let marker = ResourceMarker { history, updated_at: now, commit_id: new_id(), ..live };
            if self.rewrite_history(node, &read.marker, &marker, read.version).await? {
                return Ok(marker);
            }
        }
        Err(FolderError::Conflict(format!("{} kept changing; retry", node.item_url())))
    }

    /// Whether `version` was a retained version of the resource and has been
    /// dropped since: its manifest stays until the sweep takes the version
    /// after the grace period, so a retried drop can be told from a drop of
    /// a version that never was.
    pub async fn version_was_dropped(&self, node: &Node, version: &str) -> Result<bool, FolderError> {
        if version.is_empty() || !version.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-') {
            return Ok(false);
        }
        let manifest = node.paths.version(version).join(RESOURCE_MARKER);
        match self.store.head(&manifest).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// The tombstone at `node`, if the resource there was deleted (and not
    /// made again since): a retried delete answers as the first one did.
    pub async fn tombstone(&self, node: &Node) -> Result<Option<ResourceMarker>, FolderError> {
        let read = self.read_resource_marker(node).await?;
        Ok(read.map(|read| read.marker).filter(|marker| !marker.is_ready()))
    }

    /// Writes `marker` over the one read as `expected` and publishes the
    /// change; `false` when another writer got there first (look again).
    async fn rewrite_history(
        &self,
        node: &Node,
        before: &ResourceMarker,
        marker: &ResourceMarker,
        expected: UpdateVersion,
    ) -> Result<bool, FolderError> {
        match self.write_marker(node, Some(before), marker, Some(expected)).await {
            Ok(()) => {
                self.publish(EventAction::Update, node, Some(&marker.etag)).await;
                Ok(true)
            }
            Err(FolderError::Precondition(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

impl ResourceMarker {
    /// A retained version's manifest with the number `live`'s history
    /// gives it (a manifest written before numbering has none).
    fn numbered_as(mut self, live: &ResourceMarker, version: &str) -> Self {
        if let Some(record) = live.history.iter().find(|record| record.version == version) {
            self.number = record.number;
        }
        self
    }
}
