//! Folder listings: the children of a folder, and everything below it in
//! pre-order with a resume token. Only nodes the caller may see are counted
//! and paged.
//!
//! A folder's children are its two indexes (`.dial-resources/`,
//! `.dial-folders/`, see [`super::layout`]): one flat store listing each,
//! merged in key order, starting after the token with the store's own
//! `start-after` where the store lists in key order (S3, GCS, Azure,
//! memory, and the local disk through its directory memo), so a page costs
//! the same in a folder of 100 or of 100 000. Each entry comes with its
//! etag; a marker read before at that etag comes from the
//! [`super::listing::MarkerCache`], so a warm page reads no marker — and a
//! marker changed on any instance has a new etag, so it is read again:
//! listings are exactly as fresh as reading every marker would make them.

use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, BoxStream};
use futures_util::{StreamExt, TryStreamExt};
use object_store::{GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt};

use super::engine::FolderEngine;
use super::error::FolderError;
use super::layout::{FOLDER_INDEX, RESOURCE_INDEX, decode_key, encode_part};
use super::listing::{IndexedMarker, ListedNode, Listing};
use super::markers::parse_json;
use super::node::{Node, folder_child};
use crate::clock::now_ms;
use crate::resource_url::Shows;

/// Marker reads a listing keeps in flight.
const LISTING_READ_AHEAD: usize = 16;

/// Markers one page of a folder's restorable deleted resources reads at most.
const RESTORABLE_SCAN_BUDGET: usize = 1000;

/// Which index an entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Resource,
    Folder,
}

/// A child as its folder's index lists it: its stored (encoded) name — the
/// listing's sort key — and its marker's object.
struct IndexEntry {
    key: String,
    kind: Kind,
    object: ObjectMeta,
}

impl FolderEngine {
    /// Resources and folders directly in `node` (a folder or the bucket
    /// root), or everything below it with `recursive`. Never looks inside a
    /// resource. Only nodes whose URL `shows` admits are counted and paged,
    /// so a page never ends on — and a token never names — something the
    /// caller may not see. A folder that does not exist is 404 (asked only
    /// when the page is empty: a folder with children exists).
    pub async fn list(
        &self,
        node: &Node,
        recursive: bool,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, FolderError> {
        let listing = if limit == 0 {
            // DIAL admits `limit=0`: an empty page with no token (there is
            // no last name to resume after), as the v1 listing answers it.
            Listing { items: Vec::new(), next_token: None }
        } else if recursive {
            self.list_recursive(node, token, limit, shows).await?
        } else {
            self.list_children(node, token, limit, shows).await?
        };
        if listing.items.is_empty() && !self.folder_exists(node).await? {
            return Err(FolderError::NotFound(node.url.to_string()));
        }
        Ok(listing)
    }

    /// The children of `node` after the name `token`, at most `limit` of
    /// those `shows` admits.
    pub(super) async fn list_children(
        &self,
        node: &Node,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, FolderError> {
        let entries = merge_by_key(
            self.index_entries(node, Kind::Resource, token, limit.saturating_add(1)),
            self.index_entries(node, Kind::Folder, token, limit.saturating_add(1)),
        );
        // Marker reads (the ones the cache does not answer) overlap; order
        // is kept, and at most LISTING_READ_AHEAD reads run past the page.
        let mut classified =
            entries.map_ok(|entry| async move { self.classify(node, entry).await }).try_buffered(LISTING_READ_AHEAD);
        let mut items: Vec<ListedNode> = Vec::new();
        let mut next_token = None;
        // The last live resource met, shown or not: a name both a live
        // resource and a folder is the resource (a hidden one hides both).
        let mut last_resource: Option<String> = None;
        while let Some(listed) = classified.next().await {
            let Some(listed) = listed? else { continue };
            let name = listed.url().name().map(str::to_owned);
            let shadowed = match listed {
                ListedNode::Resource { .. } => {
                    last_resource.clone_from(&name);
                    false
                }
                _ => name.is_some() && last_resource == name,
            };
            if shadowed || !shows(listed.url()) {
                continue;
            }
            if items.len() == limit {
                next_token = Some(last_name(&items));
                break;
            }
            items.push(listed);
        }
        Ok(Listing { items, next_token })
    }

    /// The resources deleted directly in the folder `node` that can still be
    /// restored (within the grace period, files not yet swept), after the
    /// name `token`, at most `limit`: what an owner or an admin picks from
    /// to undo a delete. Live resources are passed over (their markers come
    /// from the cache as in any listing).
    pub async fn list_restorable(
        &self,
        node: &Node,
        token: Option<&str>,
        limit: usize,
    ) -> Result<Listing, FolderError> {
        if limit == 0 {
            return Ok(Listing { items: Vec::new(), next_token: None });
        }
        let now = now_ms();
        let grace_ms = self.grace_ms();
        // Each entry comes back with its name, so a page cut short by the scan budget resumes after it.
        let restorable = move |entry: IndexEntry| async move {
            let name = decode_key(&entry.key);
            let Ok(url) = node.url.child(&name, false) else { return Ok((name, None)) };
            Ok(match self.indexed_marker(&entry.object, Kind::Resource).await? {
                Some(IndexedMarker::Resource(marker))
                    if marker.restorable_until(grace_ms).is_some_and(|until| until >= now) =>
                {
                    (name, Some(ListedNode::Resource { url, marker }))
                }
                _ => (name, None),
            })
        };
        let mut found = self
            .index_entries(node, Kind::Resource, token, limit.saturating_add(1))
            .map_ok(restorable)
            .try_buffered(LISTING_READ_AHEAD);
        let mut items: Vec<ListedNode> = Vec::new();
        let mut next_token = None;
        let mut scanned = 0;
        while let Some(entry) = found.next().await {
            let (name, listed) = entry?;
            if let Some(listed) = listed {
                if items.len() == limit {
                    next_token = Some(last_name(&items));
                    break;
                }
                items.push(listed);
            }
            // Tombstones are few among live resources: one request reads at most this many markers, and a
            // page with fewer items than asked (even none) then carries a token to go on from.
            scanned += 1;
            if scanned == RESTORABLE_SCAN_BUDGET {
                next_token = Some(name);
                break;
            }
        }
        if items.is_empty() && !self.folder_exists(node).await? {
            return Err(FolderError::NotFound(node.url.to_string()));
        }
        Ok(Listing { items, next_token })
    }

    /// The entries of one index of `node` after the name `after`, in key
    /// order ([`FolderEngine::list_page_after`]: from `start-after` where the
    /// store lists in key order, asking S3 for about `keys` at first).
    fn index_entries(
        &self,
        node: &Node,
        kind: Kind,
        after: Option<&str>,
        keys: usize,
    ) -> BoxStream<'static, Result<IndexEntry, FolderError>> {
        let index = node.paths.index(match kind {
            Kind::Resource => RESOURCE_INDEX,
            Kind::Folder => FOLDER_INDEX,
        });
        let offset = after.map(|after| index.clone().join(after));
        let listed = self.list_page_after(&index, offset.as_ref(), keys);
        let entry = move |object: ObjectMeta| {
            let key = object.location.prefix_match(&index).and_then(|mut parts| {
                let name = parts.next()?;
                parts.next().is_none().then(|| name.as_ref().to_string())
            });
            key.map(|key| IndexEntry { key, kind, object })
        };
        listed
            .map_err(FolderError::from)
            .try_filter_map(move |object| futures_util::future::ready(Ok(entry(object))))
            .boxed()
    }

    /// The listed node an index entry is, if its marker (still) says so.
    async fn classify(&self, parent: &Node, entry: IndexEntry) -> Result<Option<ListedNode>, FolderError> {
        let name = decode_key(&entry.key);
        let Ok(url) = parent.url.child(&name, entry.kind == Kind::Folder) else { return Ok(None) };
        Ok(match self.indexed_marker(&entry.object, entry.kind).await? {
            Some(IndexedMarker::Resource(marker)) if marker.is_ready() => Some(ListedNode::Resource { url, marker }),
            Some(IndexedMarker::Folder(marker)) => Some(ListedNode::Folder { url, marker }),
            _ => None,
        })
    }

    /// The marker `object` lists, from the cache when it holds that
    /// version, else read — pinned to the listed version by `If-Match`, so
    /// it is kept under the etag the listing gives (some stores quote an
    /// etag in a read's header and not in a listing); a marker changed since
    /// it was listed is read as it is now, and kept under that read's etag.
    /// `None` when it was deleted since it was listed.
    async fn indexed_marker(&self, object: &ObjectMeta, kind: Kind) -> Result<Option<IndexedMarker>, FolderError> {
        if let Some(marker) = self.listed.get(object) {
            return Ok(Some(marker));
        }
        let pinned = GetOptions { if_match: object.e_tag.clone(), ..Default::default() };
        let (read, kept_as) = match self.store.get_opts(&object.location, pinned).await {
            Err(object_store::Error::Precondition { .. }) => {
                let read = self.store.get(&object.location).await;
                let meta = read.as_ref().map_or_else(|_| object.clone(), |read| read.meta.clone());
                (read, meta)
            }
            read => (read, object.clone()),
        };
        let read = match read {
            Ok(read) => read,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let bytes: Bytes = read.bytes().await?;
        let marker = match kind {
            Kind::Resource => IndexedMarker::Resource(Arc::new(parse_json(&object.location, &bytes)?)),
            Kind::Folder => IndexedMarker::Folder(parse_json(&object.location, &bytes)?),
        };
        // Parsed, a marker holds about twice its JSON (strings, map nodes).
        self.listed.insert(&kept_as, marker.clone(), 2 * bytes.len());
        Ok(Some(marker))
    }

    /// Every folder and resource below `node` (never files or version
    /// trees), in pre-order by stored name: a folder, then everything in
    /// it, then its next sibling. That order is the order of relative paths
    /// compared segment by segment, so the token — the relative path of the
    /// last node returned — resumes exactly after it: pages together are the
    /// unpaged listing, each node once. Subtrees wholly before the token are
    /// not read at all; folders the caller may not see are not entered
    /// (public rules apply along ancestors, so nothing below them shows
    /// either).
    async fn list_recursive(
        &self,
        node: &Node,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, FolderError> {
        let after: Option<Vec<String>> = token.map(|t| t.split('/').map(encode_part).collect());
        let mut items = Vec::new();
        let mut last: Vec<String> = Vec::new();
        let root_children = self.list_children(node, None, usize::MAX, &|_| true).await?.items;
        // Each level: the folder's node, its relative path (stored names),
        // its children left.
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
            path.push(encode_part(&name));
            let done = after.as_ref().is_some_and(|after| path <= *after);
            let shown = shows(child.url());
            if !done && shown {
                if items.len() == limit {
                    return Ok(Listing { items, next_token: Some(decoded_token(&last)) });
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
}

/// Merges two streams of entries sorted by key into one; on a tie, the
/// resource's entry comes first. The two are pulled together, so their
/// store listings overlap.
fn merge_by_key(
    resources: BoxStream<'static, Result<IndexEntry, FolderError>>,
    folders: BoxStream<'static, Result<IndexEntry, FolderError>>,
) -> BoxStream<'static, Result<IndexEntry, FolderError>> {
    let state = (resources.peekable(), folders.peekable());
    stream::unfold(state, |(mut resources, mut folders)| async move {
        let take_resource = {
            // Both at once: the first page of each index is asked for together.
            let (resource, folder) =
                futures_util::join!(Pin::new(&mut resources).peek(), Pin::new(&mut folders).peek());
            match (resource, folder) {
                (None, None) => return None,
                (Some(Ok(resource)), Some(Ok(folder))) => resource.key <= folder.key,
                (Some(_), None) | (Some(Err(_)), _) => true,
                (None, Some(_)) | (_, Some(Err(_))) => false,
            }
        };
        let next = if take_resource { resources.next().await } else { folders.next().await };
        next.map(|next| (next, (resources, folders)))
    })
    .boxed()
}

/// The token of a recursive listing: the relative path of the last node
/// returned, decoded (as it is in URLs), `/`-separated.
fn decoded_token(stored: &[String]) -> String {
    stored.iter().map(|part| decode_key(part)).collect::<Vec<_>>().join("/")
}

fn last_name(items: &[ListedNode]) -> String {
    match items.last() {
        Some(ListedNode::Resource { url, .. } | ListedNode::Folder { url, .. }) => {
            url.name().unwrap_or_default().into()
        }
        _ => String::new(),
    }
}
