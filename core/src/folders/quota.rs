//! Per-type quotas (`[handlers.types.<group>.quota]`): how many resources
//! of a type one bucket may hold, and how many bytes their current versions
//! may take.
//!
//! ```text
//! <bucket location><group>/.dial-usage    {"resources": N, "bytes": B}
//! ```
//!
//! Every marker write goes through [`FolderEngine::write_marker`], which
//! knows the marker it replaces: what the write changes in the count is the
//! difference between the two (a live marker counts one resource and its
//! current files' bytes; a tombstone nothing). A write that grows the count
//! first adds its change to the usage document with a compare-and-swap,
//! refused with a 413 naming the quota when that would pass it — so of two
//! commits racing for the last slot one gets it and the other is refused,
//! whatever locks they hold — and takes it back when the marker write loses
//! its race. A write that shrinks it (a delete, a smaller version) takes its
//! change back after the marker landed, unless the count was started (by a
//! walk of the bucket) after that write began, so may not hold what it
//! removed. A crash between the two writes leaves the count too high, never
//! too low: a quota can refuse early, but is never passed. Deleting the
//! document has the next growing write count the bucket again (one walk of
//! it), as the first write under a new quota does.
//!
//! Counts are kept only while the type has a quota. When a quota is set,
//! the time is kept in `system/quota-epochs/<group>` (and removed when it
//! is unset, both at start): a count started before it missed the writes
//! made without a quota, and the next growing write counts again.

use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use super::engine::FolderEngine;
use super::error::FolderError;
use super::layout::USAGE_DOCUMENT;
use super::listing::ListedNode;
use super::marker::ResourceMarker;
use super::markers::{self, read_json};
use super::node::{Node, group_root};
use crate::clock::now_ms;
use crate::config::TypeQuota;

/// Where the time each type's quota was set is kept.
const QUOTA_EPOCHS: &str = "system/quota-epochs";

/// Attempts at the usage document's compare-and-swap before a write gives
/// up with a 409 (each loss means another write in the bucket landed).
const USAGE_ATTEMPTS: usize = 32;

/// What a bucket holds of one type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub resources: u64,
    pub bytes: u64,
    /// When the walk this count started from began (ms since the epoch).
    pub counted_at: i64,
}

/// What one marker write changes in a bucket's [`Usage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Change {
    resources: i64,
    bytes: i64,
}

impl Change {
    fn counted(marker: Option<&ResourceMarker>) -> (i64, i64) {
        match marker.filter(|marker| marker.is_ready()) {
            Some(marker) => (1, marker.files.values().map(|file| file.size as i64).sum()),
            None => (0, 0),
        }
    }

    fn between(before: Option<&ResourceMarker>, after: &ResourceMarker) -> Self {
        let (old, new) = (Self::counted(before), Self::counted(Some(after)));
        Self { resources: new.0 - old.0, bytes: new.1 - old.1 }
    }

    fn grows(self) -> bool {
        self.resources > 0 || self.bytes > 0
    }

    fn reversed(self) -> Self {
        Self { resources: -self.resources, bytes: -self.bytes }
    }

    fn applied_to(self, usage: Usage) -> Usage {
        Usage {
            resources: usage.resources.saturating_add_signed(self.resources),
            bytes: usage.bytes.saturating_add_signed(self.bytes),
            counted_at: usage.counted_at,
        }
    }
}

/// How [`FolderEngine::count`] applies a change.
#[derive(Debug, Clone, Copy)]
enum Counting {
    /// A write about to grow the count: counted first when there is no
    /// document, refused when it would pass the quota.
    Reserve(TypeQuota),
    /// A write that landed and shrank the count, begun at this time: only
    /// a count that started before it can hold what it removed.
    Lower { write_began: i64 },
    /// Taking back a reservation made on the count started at this time
    /// (a recount since holds nothing of it).
    Undo { counted_at: i64 },
}

impl FolderEngine {
    /// The commit point of every v2 change: the conditional write of
    /// `marker` over `before` ([`markers::write_marker`]), with the type's
    /// quota checked and its count kept.
    pub(super) async fn write_marker(
        &self,
        node: &Node,
        before: Option<&ResourceMarker>,
        marker: &ResourceMarker,
        expected: Option<UpdateVersion>,
    ) -> Result<(), FolderError> {
        let change = Change::between(before, marker);
        let quota = self.type_quota(node.url.group());
        let Some(quota) = quota.filter(|_| change != Change::default()) else {
            return markers::write_marker(&self.store, node, marker, expected).await;
        };
        if !change.grows() {
            let write_began = now_ms();
            markers::write_marker(&self.store, node, marker, expected).await?;
            if let Err(error) = self.count(node, change, Counting::Lower { write_began }).await {
                // The write landed; the count stays high until a recount.
                tracing::warn!(%error, resource = %node.url, "could not lower the quota count");
            }
            return Ok(());
        }
        let counted_at = self.count(node, change, Counting::Reserve(quota)).await?;
        match markers::write_marker(&self.store, node, marker, expected).await {
            // Only a lost race is sure not to have landed: any other error
            // keeps the count high rather than let the quota be passed.
            Err(error @ FolderError::Precondition(_)) => {
                if let Err(undo) = self.count(node, change.reversed(), Counting::Undo { counted_at }).await {
                    tracing::warn!(error = %undo, resource = %node.url, "could not take back a quota reservation");
                }
                Err(error)
            }
            written => written,
        }
    }

    fn type_quota(&self, group: &str) -> Option<TypeQuota> {
        self.type_settings.get(group).and_then(|settings| settings.quota)
    }

    /// What `node`'s bucket holds of its type, as its usage document says
    /// (counted when there is none).
    pub async fn usage(&self, node: &Node) -> Result<Usage, FolderError> {
        let epoch = self.quota_epoch(node.url.group());
        match read_json::<Usage>(&self.store, &usage_document(node)?).await? {
            Some(read) if read.marker.counted_at >= epoch => Ok(read.marker),
            _ => self.count_bucket(node).await,
        }
    }

    /// Adds `change` to the bucket's count as `counting` says; returns when
    /// the count it changed was started.
    async fn count(&self, node: &Node, change: Change, counting: Counting) -> Result<i64, FolderError> {
        let path = usage_document(node)?;
        let epoch = self.quota_epoch(node.url.group());
        for _ in 0..USAGE_ATTEMPTS {
            let read = read_json::<Usage>(&self.store, &path).await?;
            let (usage, mode) = match (read, counting) {
                (Some(read), Counting::Reserve(_)) if read.marker.counted_at < epoch => {
                    (self.count_bucket(node).await?, PutMode::Update(read.version))
                }
                (Some(read), Counting::Lower { .. } | Counting::Undo { .. }) if read.marker.counted_at < epoch => {
                    return Ok(read.marker.counted_at);
                }
                (Some(read), Counting::Lower { write_began }) if read.marker.counted_at >= write_began => {
                    return Ok(read.marker.counted_at);
                }
                (Some(read), Counting::Undo { counted_at }) if read.marker.counted_at != counted_at => {
                    return Ok(read.marker.counted_at);
                }
                (Some(read), _) => (read.marker, PutMode::Update(read.version)),
                // No count to correct: the next growing write counts afresh.
                (None, Counting::Lower { .. } | Counting::Undo { .. }) => return Ok(0),
                (None, Counting::Reserve(_)) => (self.count_bucket(node).await?, PutMode::Create),
            };
            let after = change.applied_to(usage);
            if let Counting::Reserve(quota) = counting {
                check_quota(node, quota, change, after)?;
            }
            let body = PutPayload::from(serde_json::to_vec(&after).expect("a usage serializes"));
            match self.store.put_opts(&path, body, PutOptions { mode, ..Default::default() }).await {
                Ok(_) => return Ok(after.counted_at),
                Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(FolderError::Conflict(format!(
            "The {} bucket kept changing while this write was counted against its quota; retry",
            node.url.group()
        )))
    }

    /// Counts what the bucket holds: one walk of it.
    async fn count_bucket(&self, node: &Node) -> Result<Usage, FolderError> {
        let root = group_root(node)?;
        let everything = |_: &crate::resource_url::ResourceUrl| true;
        let mut usage = Usage { counted_at: now_ms(), ..Usage::default() };
        let mut token = None;
        loop {
            let page = self.list(&root, true, token.as_deref(), 1000, &everything).await?;
            for item in page.items {
                if let ListedNode::Resource { marker, .. } = item {
                    let (resources, bytes) = Change::counted(Some(&marker));
                    usage.resources += resources as u64;
                    usage.bytes += bytes as u64;
                }
            }
            token = page.next_token;
            if token.is_none() {
                return Ok(usage);
            }
        }
    }

    /// Notes when each type's quota was set (kept in the store, so every
    /// instance and every restart agrees) and forgets it for a type that
    /// has none now: a bucket's count older than its type's quota missed
    /// the writes made without one, and is made again. Run once at start.
    pub async fn settle_quotas(&self) -> Result<(), FolderError> {
        let mut epochs = std::collections::BTreeMap::new();
        let known: Vec<_> = self.store.list(Some(&Path::from(QUOTA_EPOCHS))).try_collect().await?;
        for stale in known.iter().filter(|meta| {
            let group = meta.location.filename().unwrap_or_default();
            self.type_quota(group).is_none()
        }) {
            match self.store.delete(&stale.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        for group in self.type_settings.keys().filter(|group| self.type_quota(group).is_some()) {
            let path = Path::from(QUOTA_EPOCHS).join(group.as_str());
            let since = match read_json::<QuotaEpoch>(&self.store, &path).await? {
                Some(read) => read.marker.since,
                None => {
                    let epoch = QuotaEpoch { since: now_ms() };
                    let body = PutPayload::from(serde_json::to_vec(&epoch).expect("an epoch serializes"));
                    let options = PutOptions { mode: PutMode::Create, ..Default::default() };
                    match self.store.put_opts(&path, body, options).await {
                        Ok(_) => epoch.since,
                        // Another instance starting: its time stands.
                        Err(object_store::Error::AlreadyExists { .. }) => read_json::<QuotaEpoch>(&self.store, &path)
                            .await?
                            .map_or(epoch.since, |read| read.marker.since),
                        Err(error) => return Err(error.into()),
                    }
                }
            };
            epochs.insert(group.clone(), since);
        }
        *self.quota_epochs.write().expect("not poisoned") = epochs;
        Ok(())
    }

    /// When `group`'s quota was set: counts started before it are stale.
    fn quota_epoch(&self, group: &str) -> i64 {
        self.quota_epochs.read().expect("not poisoned").get(group).copied().unwrap_or(i64::MIN)
    }
}

/// When a type's quota was set ([`FolderEngine::settle_quotas`]).
#[derive(Debug, Serialize, Deserialize)]
struct QuotaEpoch {
    since: i64,
}

/// The usage document of the bucket and group `node` is in.
fn usage_document(node: &Node) -> Result<Path, FolderError> {
    Ok(group_root(node)?.paths.base().clone().join(USAGE_DOCUMENT))
}

/// A growing `change` that leaves the bucket at `after` must stay within
/// `quota`.
fn check_quota(node: &Node, quota: TypeQuota, change: Change, after: Usage) -> Result<(), FolderError> {
    let group = node.url.group();
    let over = |limit: Option<u64>, grows: bool, value: u64| limit.filter(|limit| grows && value > *limit);
    if let Some(limit) = over(quota.max_resources, change.resources > 0, after.resources) {
        crate::metrics::quota_refused(group, "max_resources");
        return Err(FolderError::TooLarge(format!(
            "Quota exceeded: the bucket {} already holds {} {group} of the {limit} its quota allows \
             (handlers.types.{group}.quota.max_resources); delete one first",
            node.url.bucket(),
            after.resources - change.resources as u64,
        )));
    }
    if let Some(limit) = over(quota.max_bytes, change.bytes > 0, after.bytes) {
        crate::metrics::quota_refused(group, "max_bytes");
        return Err(FolderError::TooLarge(format!(
            "Quota exceeded: this write would bring the {group} of the bucket {} to {} bytes, over the {limit} \
             its quota allows (handlers.types.{group}.quota.max_bytes)",
            node.url.bucket(),
            after.bytes,
        )));
    }
    Ok(())
}
