//! Listings: the children of a folder, everything below it in pre-order
//! with a resume token, and the files of a resource's version. Only nodes
//! the caller may see are counted and paged.

use std::sync::Arc;

use futures_util::StreamExt;
use object_store::ObjectStore;

use super::error::FolderError;
use super::layout::decode_part;
use super::marker::{FileRecord, FolderMarker, ResourceMarker};
use super::markers::{live_marker, read_folder_marker};
use super::node::{Node, folder_child};
use crate::resource_url::{ResourceUrl, Shows};

/// Marker reads a listing keeps in flight.
const LISTING_READ_AHEAD: usize = 16;

/// One page of a listing (the HTTP layer's `wire` writes its nodes as DIAL does).
#[derive(Debug, Clone)]
pub struct Listing {
    pub items: Vec<ListedNode>,
    pub next_token: Option<String>,
}

/// A child found by a listing.
#[derive(Debug, Clone)]
pub enum ListedNode {
    Resource { url: ResourceUrl, marker: Box<ResourceMarker> },
    Folder { url: ResourceUrl, marker: FolderMarker },
    File { resource: ResourceUrl, path: String, record: FileRecord },
    FileDirectory { resource: ResourceUrl, path: String },
}

impl ListedNode {
    /// The URL access decisions are about: the resource's for its files.
    pub fn url(&self) -> &ResourceUrl {
        match self {
            Self::Resource { url, .. } | Self::Folder { url, .. } => url,
            Self::File { resource, .. } | Self::FileDirectory { resource, .. } => resource,
        }
    }
}

/// Resources and folders directly in `node` (a folder or the bucket
/// root), or everything below it with `recursive`. Reads one marker per
/// child on the page; never looks inside a resource. Only nodes whose
/// URL `shows` admits are counted and paged, so a page never ends on —
/// and a token never names — something the caller may not see.
pub(super) async fn list(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
    recursive: bool,
    token: Option<&str>,
    limit: usize,
    shows: &Shows<'_>,
) -> Result<Listing, FolderError> {
    if !node.url.is_bucket_root() && read_folder_marker(store, node).await?.is_none() {
        return Err(FolderError::NotFound(node.url.to_string()));
    }
    if limit == 0 {
        // DIAL admits `limit=0`: an empty page with no token (there is
        // no last name to resume after), as the v1 listing answers it.
        return Ok(Listing { items: Vec::new(), next_token: None });
    }
    if recursive {
        list_recursive(store, node, token, limit, shows).await
    } else {
        list_children(store, node, token, limit, shows).await
    }
}

pub(super) async fn list_children(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
    token: Option<&str>,
    limit: usize,
    shows: &Shows<'_>,
) -> Result<Listing, FolderError> {
    let mut names: Vec<String> = store
        .list_with_delimiter(Some(node.paths.base()))
        .await?
        .common_prefixes
        .iter()
        .filter_map(|prefix| prefix.parts().next_back().map(|part| decode_part(&part)))
        .collect();
    names.sort();
    let candidates: Vec<String> = names.into_iter().filter(|name| token.is_none_or(|t| name.as_str() > t)).collect();
    // Marker reads overlap (a few pages' worth of latency becomes one);
    // order is kept, and at most LISTING_READ_AHEAD reads run past the page.
    let mut classified = futures_util::stream::iter(candidates)
        .map(|name| async move { classify_child(store, node, &name).await })
        .buffered(LISTING_READ_AHEAD);
    let mut items = Vec::new();
    let mut next_token = None;
    while let Some(listed) = classified.next().await {
        let Some(listed) = listed?.filter(|listed| shows(listed.url())) else { continue };
        if items.len() == limit {
            next_token = Some(last_name(&items));
            break;
        }
        items.push(listed);
    }
    Ok(Listing { items, next_token })
}

async fn classify_child(
    store: &Arc<dyn ObjectStore>,
    parent: &Node,
    name: &str,
) -> Result<Option<ListedNode>, FolderError> {
    let Ok(url) = parent.url.child(name, false) else { return Ok(None) };
    let child = Node { paths: parent.paths.child(name), url, location: parent.location.clone() };
    if let Some(marker) = live_marker(store, &child).await? {
        return Ok(Some(ListedNode::Resource { url: child.url, marker: Box::new(marker) }));
    }
    if let Some(read) = read_folder_marker(store, &child).await? {
        let url = parent.url.child(name, true)?;
        return Ok(Some(ListedNode::Folder { url, marker: read.marker }));
    }
    Ok(None)
}

/// Every folder and resource below `node` (never files or version
/// trees), in pre-order by name: a folder, then everything in it, then
/// its next sibling. That order is the order of relative paths compared
/// segment by segment, so the token — the relative path of the last node
/// returned — resumes exactly after it: pages together are the unpaged
/// listing, each node once. Subtrees wholly before the token are not
/// read at all; folders the caller may not see are not entered (public
/// rules apply along ancestors, so nothing below them shows either).
async fn list_recursive(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
    token: Option<&str>,
    limit: usize,
    shows: &Shows<'_>,
) -> Result<Listing, FolderError> {
    let after: Option<Vec<String>> = token.map(|t| t.split('/').map(str::to_owned).collect());
    let mut items = Vec::new();
    let mut last: Vec<String> = Vec::new();
    let root_children = list_children(store, node, None, usize::MAX, &|_| true).await?.items;
    // Each level: the folder's node, its relative path, its children left.
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
        path.push(name.clone());
        let done = after.as_ref().is_some_and(|after| path <= *after);
        let shown = shows(child.url());
        if !done && shown {
            if items.len() == limit {
                return Ok(Listing { items, next_token: Some(last.join("/")) });
            }
            items.push(child);
            last.clone_from(&path);
        }
        // Enter a folder unless all of it comes before the token.
        let token_inside = after.as_ref().is_some_and(|after| after.starts_with(&path));
        if is_folder && shown && (!done || token_inside) {
            let subfolder = folder_child(folder, &name)?;
            let grandchildren = list_children(store, &subfolder, None, usize::MAX, &|_| true).await?.items;
            stack.push((subfolder, path, grandchildren.into_iter()));
        }
    }
    Ok(Listing { items, next_token: None })
}

/// Files of the current version under `dir` (the resource root when
/// empty), from the marker's manifest, paged as every listing is: in the
/// order of their keys — a file's path, a directory's path with its `/`
/// (where its first file sorts) — after the key `token` names, at most
/// `limit`, the last key returned as the next token.
pub(super) fn list_files(
    node: &Node,
    marker: &ResourceMarker,
    dir: &str,
    recursive: bool,
    token: Option<&str>,
    limit: usize,
) -> Result<Listing, FolderError> {
    let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
    let exists =
        dir.is_empty() || marker.files.range(prefix.clone()..).next().is_some_and(|(p, _)| p.starts_with(&prefix));
    if !exists {
        return Err(FolderError::NotFound(format!("{}/files/{dir}/", node.item_url())));
    }
    let after = token.filter(|token| *token > prefix.as_str());
    let mut items = Vec::new();
    let mut last: Option<String> = None;
    let mut next_token = None;
    for (path, record) in marker.files.range(after.unwrap_or(&prefix).to_string()..) {
        let Some(rest) = path.strip_prefix(&prefix) else { break };
        let directory = rest.split_once('/').filter(|_| !recursive).map(|(subdir, _)| format!("{prefix}{subdir}"));
        let key = directory.as_ref().map_or_else(|| path.clone(), |directory| format!("{directory}/"));
        if after.is_some_and(|after| key.as_str() <= after) || last.as_ref() == Some(&key) {
            continue;
        }
        if items.len() == limit {
            next_token = last;
            break;
        }
        items.push(match directory {
            Some(path) => ListedNode::FileDirectory { resource: node.url.clone(), path },
            None => ListedNode::File { resource: node.url.clone(), path: path.clone(), record: record.clone() },
        });
        last = Some(key);
    }
    Ok(Listing { items, next_token })
}

fn last_name(items: &[ListedNode]) -> String {
    match items.last() {
        Some(ListedNode::Resource { url, .. } | ListedNode::Folder { url, .. }) => {
            url.name().unwrap_or_default().into()
        }
        _ => String::new(),
    }
}
