//! What a resource URL names, across v1 groups and handler groups: the one
//! place sharing and publication ask "which type is this, does it exist".

use super::error::ApiError;
use super::state::AppState;
use crate::access::{Permission, Resource};
use crate::auth::Caller;
use crate::blobs::service::Download;
use crate::blobs::{BlobGroup, BlobTarget};
use crate::buckets::BucketLocation;
use crate::dependencies::DeclarationPolicy;
use crate::etag::Preconditions;
use crate::folders::Node;
use crate::handlers::Handler;
use crate::resource_url::{Intent, ResourceUrl};

/// The storage model of a group.
#[derive(Clone)]
pub enum Kind {
    /// A v1 single-blob group.
    Blob(BlobGroup),
    /// A v2 folder-resource group and the handler serving it.
    Folder(Handler),
}

impl Kind {
    /// DIAL's `resourceType` name: `FILE`, `PROMPT`, …; for a handler type,
    /// its type name in upper case with `_` for `-` (`SKILL`).
    pub fn resource_type(&self) -> String {
        match self {
            Self::Blob(group) => group.resource_type().to_string(),
            Self::Folder(handler) => crate::folders::listing_json::resource_type(&handler.description().type_name),
        }
    }
}

/// A resource link from a request body, resolved.
pub struct Link {
    pub url: ResourceUrl,
    pub location: BucketLocation,
    pub kind: Kind,
}

impl Link {
    /// The canonical URL string grants and publications are keyed by.
    pub fn key(&self) -> String {
        self.url.to_string()
    }
}

/// Parses a link as clients send it in JSON bodies: `<group>/<bucket>/<path>`,
/// optionally with a leading `/`, `v1/`, `v2/` or `metadata/`.
pub fn parse_link(state: &AppState, raw: &str) -> Result<Link, ApiError> {
    let incorrect = || ApiError::bad_request(format!("Incorrect resource link provided {raw}"));
    // A link is URL-encoded: a raw space (or anything else a URL path cannot
    // hold as it is) is refused, not silently encoded.
    if !raw.bytes().all(|b| b.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&b)) {
        return Err(incorrect());
    }
    let mut text = raw.trim_start_matches('/');
    for prefix in ["v1/", "v2/"] {
        text = text.strip_prefix(prefix).unwrap_or(text);
    }
    text = text.strip_prefix("metadata/").unwrap_or(text);
    let url = ResourceUrl::parse(text, Intent::Read).map_err(|_| incorrect())?;
    let kind = kind_of(state, url.group()).ok_or_else(incorrect)?;
    let location = state.buckets().decode(url.bucket()).map_err(|_| incorrect())?;
    Ok(Link { url, location, kind })
}

/// The link as grants key it: a v2 resource named in its listing form
/// (`…/x/`) is the item `…/x` (see [`crate::folders::FolderEngine::access_url`]).
pub async fn canonical(state: &AppState, link: Link) -> Result<Link, ApiError> {
    match &link.kind {
        Kind::Folder(_) if link.url.is_folder() => {
            let node = Node::new(link.url.clone(), link.location.clone())?;
            let url = state.folders().access_url(&node).await?;
            Ok(Link { url, ..link })
        }
        _ => Ok(link),
    }
}

/// A link that must name a resource (the destination of a copy, move or
/// publication, which is never a folder): a v2 resource in its listing form
/// (`…/x/`) is the item `…/x` whether or not it exists yet.
pub fn resource(link: Link) -> Link {
    match (&link.kind, link.url.as_item()) {
        (Kind::Folder(_), Some(item)) if link.url.is_folder() => Link { url: item, ..link },
        _ => link,
    }
}

/// Ok when `caller` holds `permission` on what `link` names (403 otherwise).
pub async fn require(state: &AppState, caller: &Caller, link: &Link, permission: Permission) -> Result<(), ApiError> {
    let resource = Resource { url: &link.url, location: &link.location };
    Ok(state.access().check(caller, resource, permission).await?)
}

pub fn kind_of(state: &AppState, group: &str) -> Option<Kind> {
    match BlobGroup::parse(group) {
        Some(group) => Some(Kind::Blob(group)),
        None => state.handlers().get(group).map(Kind::Folder),
    }
}

/// Whether the item a link names exists (folders are not checked: a v1
/// folder is only a prefix).
pub async fn exists(state: &AppState, link: &Link) -> Result<bool, ApiError> {
    if link.url.is_folder() && matches!(link.kind, Kind::Blob(_)) {
        return Ok(true);
    }
    match &link.kind {
        Kind::Blob(_) => {
            let target = BlobTarget::new(link.url.clone(), link.location.clone())?;
            Ok(state.blobs().exists(&target).await?)
        }
        Kind::Folder(_) => {
            let node = Node::new(link.url.clone(), link.location.clone())?;
            let engine = state.folders();
            if link.url.is_folder() && engine.folder_exists(&node).await? {
                return Ok(true);
            }
            Ok(engine.live_marker(&node).await?.is_some())
        }
    }
}

/// What a copy read and wrote.
pub struct Copied {
    /// The etag of the source as it was copied: a move deletes the source
    /// only if it still has it.
    pub source_etag: String,
    /// The etag the target was written with.
    pub etag: String,
}

/// Copies the item `source` names to `target` (same group) if `conditions`
/// hold there (publication: create only): a v2 resource gets a fresh,
/// re-validated marker with the same aggregate etag; a v1 item is streamed,
/// never held whole. `policy`: what the writer of the copy may declare
/// (applications).
pub async fn copy(
    state: &AppState,
    source: &Link,
    target: &Link,
    author: Option<String>,
    policy: &DeclarationPolicy,
    conditions: &Preconditions,
) -> Result<Copied, ApiError> {
    match &source.kind {
        Kind::Folder(handler) => {
            let from = Node::new(source.url.clone(), source.location.clone())?;
            let to = Node::new(target.url.clone(), target.location.clone())?;
            let copied = state.folders().copy_resource(&from, &to, handler, author, conditions).await?;
            // The aggregate etag is content-derived: the copy's is the source's.
            Ok(Copied { source_etag: copied.marker.etag.clone(), etag: copied.marker.etag })
        }
        Kind::Blob(group) => {
            let from = BlobTarget::new(source.url.clone(), source.location.clone())?;
            let to = BlobTarget::new(target.url.clone(), target.location.clone())?;
            let Download::Content { meta, body } = state.blobs().download(&from, &Preconditions::default()).await?
            else {
                unreachable!("no If-None-Match was sent");
            };
            let committed = if group.is_json() {
                state.blobs().put_json(&to, body, Some(meta.content_length), conditions, author, policy).await?
            } else {
                state.blobs().put_file(&to, body, Some(&meta.content_type), conditions, author).await?
            };
            Ok(Copied { source_etag: meta.etag, etag: committed.meta.etag })
        }
    }
}

/// Deletes the item a link names (a v2 resource is tombstoned) if
/// `conditions` hold, and ends its shares and invitations: re-creating it
/// (or restoring a v2 resource) does not bring them back. Every resource
/// delete goes through here.
pub async fn delete(state: &AppState, link: &Link, conditions: &Preconditions) -> Result<(), ApiError> {
    match &link.kind {
        Kind::Folder(_) => {
            let node = Node::new(link.url.clone(), link.location.clone())?;
            state.folders().delete_resource(&node, conditions).await?;
        }
        Kind::Blob(_) => {
            let target = BlobTarget::new(link.url.clone(), link.location.clone())?;
            state.blobs().delete(&target, conditions).await?;
        }
    }
    state.access().sharing().forget(&link.location, &link.key()).await?;
    Ok(())
}

/// DIAL's metadata node for what a link names (an item with its timestamps,
/// or a folder), or `None` when it no longer exists.
pub async fn metadata_node(state: &AppState, link: &Link) -> Result<Option<serde_json::Value>, ApiError> {
    match &link.kind {
        Kind::Folder(_) => {
            let node = Node::new(link.url.clone(), link.location.clone())?;
            if let Some(marker) = state.folders().live_marker(&node).await? {
                return Ok(Some(crate::folders::listing_json::resource_json(&link.url, &marker)));
            }
            let exists = link.url.is_folder() && state.folders().folder_exists(&node).await?;
            Ok(exists.then(|| crate::folders::listing_json::folder_json(&link.url, None, &link.kind.resource_type())))
        }
        Kind::Blob(group) => {
            let target = BlobTarget::new(link.url.clone(), link.location.clone())?;
            if link.url.is_folder() {
                let exists = state.blobs().exists(&target).await?;
                let listing = crate::blobs::Listing::default();
                let mut node = crate::blobs::listing_json::folder_json(&link.url, *group, &listing);
                node.as_object_mut().expect("an object").remove("items");
                return Ok(exists.then_some(node));
            }
            match state.blobs().metadata(&target).await {
                Ok(meta) => Ok(Some(crate::blobs::listing_json::item_json(&link.url, *group, &meta, false))),
                Err(crate::blobs::BlobError::NotFound(_)) => Ok(None),
                Err(error) => Err(error.into()),
            }
        }
    }
}
