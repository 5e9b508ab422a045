//! Every resource of a bucket's group in the order it was created — what
//! the hosted skills APIs page (newest first, or oldest first for OpenAI's
//! `order=asc`) — so a page of their list costs one store listing of about
//! the page's length and one marker read per skill, however large the
//! bucket, and no skill is left out however many there are.
//!
//! ```text
//! <bucket location><group>/.dial-created/d/<i64::MAX - created_at, 19 digits>-<base58 of the resource URL>
//! <bucket location><group>/.dial-created/a/<created_at, 19 digits>-<base58 of the resource URL>
//! <bucket location><group>/.dial-created/complete     every resource made before it came is indexed
//! ```
//!
//! An entry is an empty object, written before the commit that creates (or
//! restores) its resource and deleted after the one that deletes it. So an
//! entry may outlive its resource (the commit failed after it was written,
//! or a crash came between a delete and the entry's) but a live resource
//! never lacks its entry: readers read each listed resource's marker and
//! skip an entry whose resource is not live with that creation time,
//! removing it under the resource's lock (which a create or restore holds
//! from its entry to its marker) once no commit can be making it. Entries
//! with one creation time sort by the base58 of their URL. A URL too long for
//! a key (or a local file name) is written as `<digits>_<SHA-256 hex of the URL>`, the URL in the
//! object's body. A bucket written before the index existed is indexed once,
//! by the first list of it (one walk of the bucket), then marked complete.

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

use super::engine::FolderEngine;
use super::error::FolderError;
use super::layout::{CREATED_INDEX, MAX_KEY_BYTES};
use super::listing::ListedNode;
use super::marker::ResourceMarker;
use super::node::{Node, group_root};
use crate::clock::now_ms;
use crate::hashing::hex;
use crate::resource_url::{Intent, ResourceUrl};

const COMPLETE: &str = "complete";
/// Entries a page may pass over (gone resources) besides the ones it
/// shows: the bound on one page's store operations.
const MAX_SKIPPED_PER_PAGE: usize = 1000;
/// An entry whose resource is not live is removed once it is older than
/// this: no commit is still under way by then (a staging's deadline is an
/// hour).
const STALE_AFTER_MS: i64 = 2 * 60 * 60 * 1000;
/// The longest entry name written with the URL in it: a file name on the
/// local disk (255 bytes on most file systems), with room to spare.
const MAX_ENTRY_NAME_BYTES: usize = 200;

/// The flag saying every resource of the group at `group` (a bucket's
/// group root in the store) is indexed. A tool that moves resources by
/// renaming their objects deletes it: the next list indexes the group
/// again.
pub fn created_index_complete(group: &Path) -> Path {
    group.clone().join(CREATED_INDEX).join(COMPLETE)
}

/// The order of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    NewestFirst,
    OldestFirst,
}

impl Order {
    fn dir(self) -> &'static str {
        match self {
            Self::NewestFirst => "d",
            Self::OldestFirst => "a",
        }
    }

    fn digits(self, created_at: i64) -> String {
        match self {
            Self::NewestFirst => format!("{:019}", i64::MAX - created_at.max(0)),
            Self::OldestFirst => format!("{:019}", created_at.max(0)),
        }
    }

    fn created_at(self, digits: &str) -> Option<i64> {
        let value: i64 = digits.parse().ok()?;
        Some(match self {
            Self::NewestFirst => i64::MAX - value,
            Self::OldestFirst => value,
        })
    }
}

/// One page: the live resources (their URLs and markers) and whether more
/// follow.
pub struct CreatedPage {
    pub items: Vec<(ResourceUrl, ResourceMarker)>,
    pub more: bool,
}

/// The key of the entry of `url` (its item form) in `folder`, the index of
/// `order`, and the body it needs (the URL, when it does not fit in the key).
fn entry_in(folder: Path, url: &str, created_at: i64, order: Order) -> (Path, Option<String>) {
    let name = format!("{}-{}", order.digits(created_at), bs58::encode(url.as_bytes()).into_string());
    if name.len() <= MAX_ENTRY_NAME_BYTES && folder.as_ref().len() + 1 + name.len() <= MAX_KEY_BYTES {
        return (folder.join(name), None);
    }
    let hashed = format!("{}_{}", order.digits(created_at), hex(&Sha256::digest(url.as_bytes())));
    (folder.join(hashed), Some(url.to_string()))
}

impl FolderEngine {
    /// The index of the bucket and group `node` is in.
    fn created_index(node: &Node) -> Result<Path, FolderError> {
        Ok(group_root(node)?.paths.base().clone().join(CREATED_INDEX))
    }

    /// The key of `node`'s entry in `order`, and the body it needs (the URL,
    /// when it does not fit in the key).
    fn created_entry(node: &Node, created_at: i64, order: Order) -> Result<(Path, Option<String>), FolderError> {
        let folder = Self::created_index(node)?.join(order.dir());
        Ok(entry_in(folder, &node.item_url(), created_at, order))
    }

    /// Writes `node`'s entries: before the commit that makes it live.
    pub(super) async fn index_created(&self, node: &Node, created_at: i64) -> Result<(), FolderError> {
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let (key, body) = Self::created_entry(node, created_at, order)?;
            self.store.put(&key, PutPayload::from(body.unwrap_or_default())).await?;
        }
        Ok(())
    }

    /// Removes `node`'s entries: after the commit that tombstoned it. A
    /// failure only leaves entries readers skip.
    pub(super) async fn unindex_created(&self, node: &Node, created_at: i64) {
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let removed = match Self::created_entry(node, created_at, order) {
                Ok((key, _)) => self.store.delete(&key).await.map_err(FolderError::from),
                Err(error) => Err(error),
            };
            if let Err(error) = removed {
                tracing::warn!(%error, url = %node.url, "removing a resource's entry from the creation index");
            }
        }
    }

    /// A page of the live resources of `root` (a bucket's group root) in
    /// `order`, after the resource `after` names (its URL and creation
    /// time; gone since or not): at most `limit`, and whether more follow.
    pub async fn list_created(
        &self,
        root: &Node,
        order: Order,
        after: Option<(&ResourceUrl, i64)>,
        limit: usize,
    ) -> Result<CreatedPage, FolderError> {
        self.ensure_indexed(root).await?;
        let folder = Self::created_index(root)?.join(order.dir());
        // The cursor's entry in this bucket's index, whatever bucket it names.
        let offset = after.map(|(url, created_at)| {
            let item = url.as_item().unwrap_or_else(|| url.clone()).to_string();
            entry_in(folder.clone(), &item, created_at, order).0
        });
        let mut listed: BoxStream<'static, object_store::Result<ObjectMeta>> =
            self.list_page_after(&folder, offset.as_ref(), limit.saturating_add(1));
        let (mut items, mut skipped) = (Vec::new(), 0);
        while let Some(object) = listed.next().await {
            let object = object?;
            let Some((url, created_at)) = self.read_created_entry(&folder, &object, order).await? else { continue };
            let node = Node::new(url.clone(), root.location.clone())?;
            match self.read_resource_marker(&node).await?.map(|read| read.marker) {
                Some(marker) if marker.is_ready() && marker.created_at == created_at => {
                    if items.len() == limit {
                        return Ok(CreatedPage { items, more: true });
                    }
                    items.push((url, marker));
                    continue;
                }
                _ => self.remove_dead_entry(&node, created_at, &object.location).await,
            }
            skipped += 1;
            if skipped == MAX_SKIPPED_PER_PAGE {
                return Ok(CreatedPage { more: true, items });
            }
        }
        Ok(CreatedPage { items, more: false })
    }

    /// Removes the entry (at `entry`) of `node` created at `created_at`
    /// when its resource is not live with that creation time: a
    /// tombstone's now (a restore writes it again), one with no resource or
    /// a younger one once no commit can still be making it. Decided under
    /// the resource's lock, which a create or restore holds from writing
    /// the entry to writing the marker: a reader that saw the tombstone
    /// just before a restore must not take the restored resource's entry.
    /// A failure only leaves the entry for a later page.
    async fn remove_dead_entry(&self, node: &Node, created_at: i64, entry: &Path) {
        let Ok(_lock) = self.locks.acquire(&node.resource_lock_key()).await else { return };
        let Ok(read) = self.read_resource_marker(node).await else { return };
        let dead = match read.map(|read| read.marker) {
            Some(marker) if marker.is_ready() && marker.created_at == created_at => false,
            Some(marker) if !marker.is_ready() && marker.created_at == created_at => true,
            _ => now_ms() - created_at > STALE_AFTER_MS,
        };
        if dead && let Err(error) = self.store.delete(entry).await {
            tracing::warn!(%error, url = %node.url, "removing a gone resource's entry from the creation index");
        }
    }

    /// The URL and creation time an entry names; `None` for what is no entry.
    async fn read_created_entry(
        &self,
        folder: &Path,
        object: &ObjectMeta,
        order: Order,
    ) -> Result<Option<(ResourceUrl, i64)>, FolderError> {
        let Some(name) = object.location.prefix_match(folder).and_then(|mut parts| parts.next()) else {
            return Ok(None);
        };
        let name = name.as_ref().to_string();
        let url = if let Some((digits, encoded)) = name.split_once('-') {
            let decoded = bs58::decode(encoded).into_vec().ok().and_then(|bytes| String::from_utf8(bytes).ok());
            decoded.zip(order.created_at(digits))
        } else if let Some((digits, _)) = name.split_once('_') {
            let body = self.store.get(&object.location).await?.bytes().await?;
            String::from_utf8(body.to_vec()).ok().zip(order.created_at(digits))
        } else {
            None
        };
        Ok(url.and_then(|(url, created_at)| Some((ResourceUrl::parse(&url, Intent::Read).ok()?, created_at))))
    }

    /// Indexes every resource of `root` made before the index existed: one
    /// walk of the bucket, once; then the index is marked complete.
    async fn ensure_indexed(&self, root: &Node) -> Result<(), FolderError> {
        let complete = created_index_complete(root.paths.base());
        if self.known_complete.0.lock().expect("not poisoned").get(&complete).is_some() {
            return Ok(());
        }
        match self.store.head(&complete).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => {
                let everything = |_: &ResourceUrl| true;
                let mut token = None;
                loop {
                    let page = self.list(root, true, token.as_deref(), 1000, &everything).await?;
                    for item in page.items {
                        if let ListedNode::Resource { url, marker } = item {
                            let node = Node::new(url, root.location.clone())?;
                            self.index_created(&node, marker.created_at).await?;
                        }
                    }
                    token = page.next_token;
                    if token.is_none() {
                        break;
                    }
                }
                self.store.put(&complete, PutPayload::from_static(b"")).await?;
            }
            Err(error) => return Err(error.into()),
        }
        self.known_complete.0.lock().expect("not poisoned").insert(complete, ());
        Ok(())
    }
}
