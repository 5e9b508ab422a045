//! What listings answer: a page of nodes, the markers listings keep, and
//! the files of a resource's version (from its manifest, no store listing).
//! Folder listings themselves are engine operations (`list_ops.rs`).

use std::sync::Arc;

use super::error::FolderError;
use super::marker::{FileRecord, FolderMarker, ResourceMarker};
use super::node::Node;
use crate::listing_cache::EtagCache;
use crate::resource_url::ResourceUrl;

/// One page of a listing (the HTTP layer's `wire` writes its nodes as DIAL does).
#[derive(Debug, Clone)]
pub struct Listing {
    pub items: Vec<ListedNode>,
    pub next_token: Option<String>,
}

/// A child found by a listing.
#[derive(Debug, Clone)]
pub enum ListedNode {
    Resource { url: ResourceUrl, marker: Arc<ResourceMarker> },
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

/// Markers listings have read, by location and etag.
pub type MarkerCache = EtagCache<IndexedMarker>;

/// A marker as a listing keeps it.
#[derive(Debug, Clone)]
pub enum IndexedMarker {
    Resource(Arc<ResourceMarker>),
    Folder(FolderMarker),
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

/// Bucket group roots whose creation index this instance has seen complete
/// (`super::created_index`).
const KNOWN_COMPLETE: usize = 10_000;

/// The bucket roots this instance has seen marked complete.
pub(crate) struct KnownComplete(pub(super) std::sync::Mutex<hashlink::LruCache<object_store::path::Path, ()>>);

impl Default for KnownComplete {
    fn default() -> Self {
        Self(std::sync::Mutex::new(hashlink::LruCache::new(KNOWN_COMPLETE)))
    }
}
