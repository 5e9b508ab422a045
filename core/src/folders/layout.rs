//! Where a v2 resource or folder lives in the object store.
//!
//! ```text
//! <bucket location><group>/<parent…>/.dial-folders/<name>     a DIAL folder
//! <bucket location><group>/<parent…>/.dial-resources/<name>   a DIAL resource (the commit point)
//! <bucket location><group>/<parent…>/<name>/v/<version>/<file…>  its immutable version subtrees
//! <bucket location><group>/.dial-created/…                    the creation index (`super::created_index`)
//! <bucket location><group>/.dial-usage                        what the bucket holds of a type with a quota (`super::quota`)
//! ```
//!
//! A node's marker lives beside its siblings' in its parent's index
//! (`.dial-resources/`, `.dial-folders/`), not inside its own prefix: so one
//! flat store listing of the index gives every child's marker with its etag,
//! in key order, pageable with the store's own `start-after` — a listing
//! page reads no marker it has seen before (`listing_cache`), and on a cloud
//! store a page of a folder of 100 000 costs what a page of 100 costs (the
//! local disk reads a directory whole, kept while it is unchanged). Stores laid out with
//! the markers inside (`<name>/.dial-resource`, before issue 28) are moved
//! once at start-up ([`super::migrate`]).
//!
//! Object-store paths are built segment by segment from decoded names
//! (`object_store` percent-encodes what a store cannot hold), so a name
//! round-trips through listings via [`decode_part`].

use object_store::path::{Path, PathPart};
use percent_encoding::percent_decode_str;

use super::marker::{FOLDER_MARKER, RESOURCE_MARKER};
use crate::buckets::BucketLocation;
use crate::resource_url::ResourceUrl;

/// Segment holding the version subtrees of a resource.
pub const VERSIONS_DIR: &str = "v";
/// A folder's index of the resources directly in it: their markers.
pub const RESOURCE_INDEX: &str = ".dial-resources";
/// A folder's index of the folders directly in it: their markers.
pub const FOLDER_INDEX: &str = ".dial-folders";
/// A bucket group's creation index (`super::created_index`).
pub const CREATED_INDEX: &str = ".dial-created";
/// A bucket group's usage against its type's quota (`super::quota`).
pub const USAGE_DOCUMENT: &str = ".dial-usage";
/// Longest object key we write (S3's limit is 1024 bytes).
pub const MAX_KEY_BYTES: usize = 1024;

/// The storage paths of one v2 node (resource or folder), or of a bucket's
/// group root when the URL has no segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePaths {
    base: Path,
}

impl NodePaths {
    pub fn new(url: &ResourceUrl, location: &BucketLocation) -> Self {
        let location = location.to_string();
        let parts = location
            .split('/')
            .filter(|p| !p.is_empty())
            .chain(std::iter::once(url.group()))
            .chain(url.segments().iter().map(String::as_str));
        Self { base: Path::from_iter(parts) }
    }

    /// The prefix everything of this node lives under.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The commit point: in the parent's resource index.
    pub fn resource_marker(&self) -> Path {
        resource_marker_of(&self.base)
    }

    /// In the parent's folder index.
    pub fn folder_marker(&self) -> Path {
        folder_marker_of(&self.base)
    }

    /// Where the markers of this folder's resources (or folders) are.
    pub fn index(&self, index: &str) -> Path {
        self.base.clone().join(index)
    }

    /// Where the resource marker was before issue 28 (the migration finds
    /// such markers by name; its tests write them here).
    pub fn legacy_resource_marker(&self) -> Path {
        self.base.clone().join(RESOURCE_MARKER)
    }

    /// Where the folder marker was before issue 28.
    pub fn legacy_folder_marker(&self) -> Path {
        self.base.clone().join(FOLDER_MARKER)
    }

    pub fn versions(&self) -> Path {
        self.base.clone().join(VERSIONS_DIR)
    }

    pub fn version(&self, version: &str) -> Path {
        self.versions().join(version)
    }

    /// A file of a version; `relative` is a validated `/`-separated path.
    pub fn file(&self, version: &str, relative: &str) -> Path {
        let mut path = self.version(version);
        for segment in relative.split('/') {
            path = path.join(segment);
        }
        path
    }

    /// The node named `name` directly below this one.
    pub fn child(&self, name: &str) -> Self {
        Self { base: self.base.clone().join(name) }
    }
}

/// The resource marker of the node whose prefix is `base`.
pub fn resource_marker_of(base: &Path) -> Path {
    index_entry(base, RESOURCE_INDEX)
}

/// The folder marker of the node whose prefix is `base`.
pub fn folder_marker_of(base: &Path) -> Path {
    index_entry(base, FOLDER_INDEX)
}

/// `<parent>/<index>/<name>` for the node at `<parent>/<name>`.
fn index_entry(base: &Path, index: &str) -> Path {
    let mut parts: Vec<PathPart<'_>> = base.parts().collect();
    let name = parts.pop().unwrap_or_else(|| PathPart::from(""));
    Path::from_iter(parts.into_iter().chain([PathPart::from(index), name]))
}

/// The decoded name of one path part from a listing.
pub fn decode_part(part: &PathPart<'_>) -> String {
    decode_key(part.as_ref())
}

/// The decoded name of a stored (encoded) path part.
pub fn decode_key(stored: &str) -> String {
    percent_decode_str(stored).decode_utf8_lossy().into_owned()
}

/// The stored form of a name: what a listing sorts by.
pub fn encode_part(name: &str) -> String {
    PathPart::from(name).as_ref().to_string()
}

/// The relative path of `path` below `prefix`, decoded, `/`-separated.
pub fn relative_path(prefix: &Path, path: &Path) -> Option<String> {
    let parts: Vec<String> = path.prefix_match(prefix)?.map(|part| decode_part(&part)).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource_url::{Intent, ResourceUrl};

    #[test]
    fn paths_of_a_resource() {
        let url = ResourceUrl::parse("skills/b/team/my%20skill", Intent::Write).unwrap();
        let node = NodePaths::new(&url, &BucketLocation::User("alice".into()));
        assert_eq!(node.base().as_ref(), "Users/alice/skills/team/my skill");
        assert_eq!(node.resource_marker().as_ref(), "Users/alice/skills/team/.dial-resources/my skill");
        assert_eq!(node.folder_marker().as_ref(), "Users/alice/skills/team/.dial-folders/my skill");
        assert_eq!(node.legacy_resource_marker().as_ref(), "Users/alice/skills/team/my skill/.dial-resource");
        assert_eq!(node.file("v1", "scripts/run.sh").as_ref(), "Users/alice/skills/team/my skill/v/v1/scripts/run.sh");
        let root =
            NodePaths::new(&ResourceUrl::parse("skills/public/", Intent::Read).unwrap(), &BucketLocation::Public);
        assert_eq!(root.base().as_ref(), "public/skills");
    }

    #[test]
    fn awkward_names_round_trip_through_listings() {
        let url = ResourceUrl::parse("skills/b/a%25b%23c%5B%5D", Intent::Write).unwrap();
        let node = NodePaths::new(&url, &BucketLocation::Key("p".into()));
        let parent = NodePaths::new(&url.parent().unwrap(), &BucketLocation::Key("p".into()));
        let name = relative_path(parent.base(), node.base()).unwrap();
        assert_eq!(name, "a%b#c[]");
        let indexed = relative_path(&parent.index(RESOURCE_INDEX), &node.resource_marker()).unwrap();
        assert_eq!(indexed, "a%b#c[]", "an index entry is named as the node's prefix is");
        assert_eq!(relative_path(node.base(), &node.file("v1", "x/y.txt")).unwrap(), "v/v1/x/y.txt");
    }
}
