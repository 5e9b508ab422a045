//! v1 single-blob resources: `files`, `prompts`, `conversations`,
//! `applications` (DIAL's `/v1/{group}/{bucket}/{path}` and
//! `/v1/metadata/…`). Storage and listing logic only; the HTTP side is
//! `http/v1.rs`.
//!
//! - [`trailer`]: an item's metadata (content type, timestamps, MD5 etag,
//!   length) lives in the item's own object, after the content, so one put
//!   writes both atomically on every store.
//! - [`application`]: application definitions — camelCase in, snake_case
//!   stored, one validation function.
//! - [`service`]: [`BlobService`], the façade: every read, write and delete;
//!   staging and the commit in `upload`, trailer reads in `read`, JSON bodies
//!   and content types in `json`.
//! - [`listing`]: listings and their tokens.
//! - [`error`]: the v1 store's error, [`BlobError`].
//!
//! An item lives at `<bucket location><group>/<decoded segments…>` (the
//! convention of the v2 layout), so v1 groups never collide with v2 ones.
//! Folders are implicit: a folder exists while something is stored below it.

pub mod application;
pub mod error;
mod json;
pub mod listing;
mod read;
pub mod service;
pub mod trailer;
mod upload;

use object_store::path::Path;

pub use error::{BlobError, InvalidApplication};
pub use json::{DEFAULT_CONTENT_TYPE, JSON_CONTENT_TYPE};
pub use listing::{Listed, Listing};
pub use service::{BlobLimits, BlobService, Committed, Download};
pub use trailer::ItemMeta;

use crate::buckets::BucketLocation;
use crate::folders::layout::NodePaths;
use crate::resource_url::ResourceUrl;

/// The v1 resource groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlobGroup {
    Files,
    Prompts,
    Conversations,
    Applications,
}

impl BlobGroup {
    pub const ALL: [Self; 4] = [Self::Files, Self::Prompts, Self::Conversations, Self::Applications];

    /// The group of a URL's first segment, if it is a v1 one.
    pub fn parse(group: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == group)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Files => "files",
            Self::Prompts => "prompts",
            Self::Conversations => "conversations",
            Self::Applications => "applications",
        }
    }

    /// DIAL's `resourceType`.
    pub fn resource_type(self) -> &'static str {
        match self {
            Self::Files => "FILE",
            Self::Prompts => "PROMPT",
            Self::Conversations => "CONVERSATION",
            Self::Applications => "APPLICATION",
        }
    }

    /// Whether items are JSON documents (everything but `files`).
    pub fn is_json(self) -> bool {
        self != Self::Files
    }
}

/// A v1 item or folder a request addresses: its URL, its bucket, and where
/// that puts it in the store (the object of an item, the prefix of a folder).
#[derive(Debug, Clone)]
pub struct BlobTarget {
    pub url: ResourceUrl,
    pub location: BucketLocation,
    group: BlobGroup,
    path: Path,
}

impl BlobTarget {
    /// Checks that the group is a v1 one and the storage-path limit.
    pub fn new(url: ResourceUrl, location: BucketLocation) -> Result<Self, BlobError> {
        let group = BlobGroup::parse(url.group()).ok_or_else(|| BlobError::NotFound(url.to_string()))?;
        url.storage_path(&location.to_string())?;
        let path = NodePaths::new(&url, &location).base().clone();
        Ok(Self { url, location, group, path })
    }

    pub fn group(&self) -> BlobGroup {
        self.group
    }

    /// The object of an item; the prefix of a folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock_key(&self) -> String {
        format!("resource:{}", self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource_url::Intent;

    #[test]
    fn groups() {
        for group in BlobGroup::ALL {
            assert_eq!(BlobGroup::parse(group.as_str()), Some(group));
        }
        assert_eq!(BlobGroup::parse("skills"), None);
        assert_eq!(BlobGroup::Conversations.resource_type(), "CONVERSATION");
        assert!(!BlobGroup::Files.is_json() && BlobGroup::Prompts.is_json());
    }

    #[test]
    fn targets_live_where_the_v2_layout_puts_nodes() {
        let url = ResourceUrl::parse("files/b/dir/a%20b.txt", Intent::Write).unwrap();
        let target = BlobTarget::new(url, BucketLocation::User("alice".into())).unwrap();
        assert_eq!(target.path().as_ref(), "Users/alice/files/dir/a b.txt");
        assert_eq!(target.group(), BlobGroup::Files);
        let root = ResourceUrl::parse("prompts/public/", Intent::Read).unwrap();
        assert_eq!(BlobTarget::new(root, BucketLocation::Public).unwrap().path().as_ref(), "public/prompts");
        let skills = ResourceUrl::parse("skills/b/x", Intent::Read).unwrap();
        assert!(matches!(BlobTarget::new(skills, BucketLocation::Public), Err(BlobError::NotFound(_))));
    }
}
