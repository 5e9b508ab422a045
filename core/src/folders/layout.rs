//! Where a v2 resource or folder lives in the object store.
//!
//! ```text
//! <bucket location><group>/<path…>/.dial-folder          a DIAL folder
//! <bucket location><group>/<path…>/.dial-resource        a DIAL resource (the commit point)
//! <bucket location><group>/<path…>/v/<version>/<file…>   its immutable version subtrees
//! ```
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

    pub fn resource_marker(&self) -> Path {
        self.base.clone().join(RESOURCE_MARKER)
    }

    pub fn folder_marker(&self) -> Path {
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

/// The decoded name of one path part from a listing.
pub fn decode_part(part: &PathPart<'_>) -> String {
    percent_decode_str(part.as_ref()).decode_utf8_lossy().into_owned()
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
        assert_eq!(node.resource_marker().as_ref(), "Users/alice/skills/team/my skill/.dial-resource");
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
        assert_eq!(relative_path(node.base(), &node.file("v1", "x/y.txt")).unwrap(), "v/v1/x/y.txt");
    }
}
