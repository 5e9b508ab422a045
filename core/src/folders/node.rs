//! A v2 node a request addresses, and where it lives: storage paths, lock
//! keys, ancestors.

use object_store::path::Path;

use super::error::FolderError;
use super::layout::{NodePaths, VERSIONS_DIR};
use super::names::check_node_segments;
use crate::buckets::BucketLocation;
use crate::handlers::ResourceInfo;
use crate::resource_url::{Intent, MAX_STORAGE_PATH_BYTES, ResourceUrl};
use crate::storage::PathLimits;

/// Length of a version id ([`new_id`]).
const VERSION_ID_LEN: usize = 36;

/// A v2 node a request addresses: its URL, the bucket it lives in, and
/// where that puts it in the store.
#[derive(Debug, Clone)]
pub struct Node {
    pub url: ResourceUrl,
    pub location: BucketLocation,
    pub(super) paths: NodePaths,
}

impl Node {
    /// Checks reserved names and the storage-path limit.
    pub fn new(url: ResourceUrl, location: BucketLocation) -> Result<Self, FolderError> {
        check_node_segments(url.segments())?;
        url.storage_path(&location.to_string())?;
        let paths = NodePaths::new(&url, &location);
        Ok(Self { url, location, paths })
    }

    pub fn paths(&self) -> &NodePaths {
        &self.paths
    }

    /// Where a file of this resource is stored must fit every storage limit:
    /// SPEC §2's 900 bytes for the whole (decoded) storage path, version
    /// prefix included, and what the backend holds per path segment.
    pub(super) fn check_file_location(&self, path: &str, limits: &PathLimits) -> Result<(), FolderError> {
        let node_path = self.url.storage_path(&self.location.to_string())?;
        let file_path = format!("{node_path}/{VERSIONS_DIR}/{}/{path}", "0".repeat(VERSION_ID_LEN));
        if file_path.len() > MAX_STORAGE_PATH_BYTES {
            return Err(FolderError::BadRequest(format!(
                "File path '{path}' is too long: the resource's storage path with it exceeds max allowed size: \
                 {MAX_STORAGE_PATH_BYTES}"
            )));
        }
        Ok(limits.check(&self.paths.file(&"0".repeat(VERSION_ID_LEN), path))?)
    }

    /// The URL of this node as a resource (no trailing slash).
    pub(super) fn item_url(&self) -> String {
        let mut url = self.url.to_string();
        if url.ends_with('/') && !self.url.is_bucket_root() {
            url.pop();
        }
        url
    }

    pub(super) fn bucket_lock_key(&self) -> String {
        format!("bucket:{}{}", self.location, self.url.group())
    }

    pub(super) fn resource_lock_key(&self) -> String {
        resource_lock_key(self.paths.base())
    }

    pub(super) fn ancestors(&self) -> Vec<Node> {
        let mut ancestors = Vec::new();
        let mut current = self.url.parent();
        while let Some(url) = current {
            if url.is_bucket_root() {
                break;
            }
            current = url.parent();
            let paths = NodePaths::new(&url, &self.location);
            ancestors.push(Node { url, location: self.location.clone(), paths });
        }
        ancestors.reverse();
        ancestors
    }

    pub(super) fn resource_info(&self) -> ResourceInfo {
        ResourceInfo { name: self.url.name().unwrap_or_default().to_string(), path: self.url.decoded_path() }
    }
}

/// The root of the bucket and group `node` is in (what a bucket-wide
/// index or count of the type lives under).
pub(super) fn group_root(node: &Node) -> Result<Node, FolderError> {
    let root = ResourceUrl::parse(&format!("{}/{}/", node.url.group(), node.url.bucket()), Intent::Read)?;
    Node::new(root, node.location.clone())
}

pub(super) fn folder_child(folder: &Node, name: &str) -> Result<Node, FolderError> {
    let url = folder.url.child(name, true)?;
    Ok(Node { paths: folder.paths.child(name), url, location: folder.location.clone() })
}

/// The lock every change of the marker at `base` holds.
pub(super) fn resource_lock_key(base: &Path) -> String {
    format!("resource:{base}")
}
