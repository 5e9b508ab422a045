//! The v2 resource API (`/v2/{group}/…`) in domain terms: a request's path
//! resolved to a node of a handler type, the access decision on it, and
//! what each read, delete, listing and restore answers. The HTTP layer
//! extracts, makes one call here and renders the result.
//!
//! Paths are taken raw (still percent-encoded) and parsed by the one URL
//! parser. Everything before the first `files` segment after
//! `<group>/<bucket>/` is the resource (`files` cannot name a resource, so
//! this is unambiguous); what follows is a file path inside it.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use object_store::ObjectStoreExt;

use crate::access::{AdminDecision, Permission, Resource};
use crate::auth::Caller;
use crate::catalog::{Catalog, CatalogError, Kind, PermissionNames};
use crate::clock::now_ms;
use crate::etag::Preconditions;
use crate::folders::archive::stream_zip;
use crate::folders::engine::Committed;
use crate::folders::marker::{FolderMarker, ResourceMarker, VersionRecord};
use crate::folders::names::FILES_SEGMENT;
use crate::folders::{FolderError, ListedNode, Node};
use crate::handlers::Handler;
use crate::resource_url::{Intent, ResourceUrl};

/// A v2 request path, resolved: the node, its handler, and the file path
/// inside the resource when the URL goes through `/files/`.
pub struct Target {
    pub node: Node,
    /// The URL the access check was made on: the item `…/x` for a resource
    /// named in its listing form `…/x/`.
    pub access_url: ResourceUrl,
    pub handler: Handler,
    pub file: Option<String>,
    /// The file part of the URL ended in `/`: it names a folder of files.
    pub file_folder: bool,
}

impl Target {
    /// The file a GET, PUT or DELETE of one file addresses; a URL ending in
    /// `/` names a folder of files, which only listings take.
    pub fn single_file(&self) -> Result<Option<&str>, CatalogError> {
        match &self.file {
            Some(file) if self.file_folder => Err(CatalogError::Invalid(format!(
                "{}/files/{file}/ names a folder of files: a file's URL has no trailing /",
                self.node.url.as_item().unwrap_or_else(|| self.node.url.clone())
            ))),
            file => Ok(file.as_deref()),
        }
    }

    /// DIAL's `resourceType` of the handler's type (`SKILL`).
    pub fn resource_type(&self) -> String {
        crate::folders::resource_type(&self.handler.description().type_name)
    }
}

/// What a GET of a resource or one of its files answers.
pub enum Download {
    /// `If-None-Match` named the current etag.
    NotModified { etag: String },
    /// The version as a ZIP, streamed (see [`stream_zip`]).
    Archive { name: String, etag: String, body: BoxStream<'static, Result<Bytes, std::io::Error>> },
    /// One file of the version, streamed from the store.
    File { path: String, etag: String, size: u64, body: BoxStream<'static, Result<Bytes, std::io::Error>> },
}

/// What a DELETE removed.
pub enum Deleted {
    /// A resource, tombstoned (restorable for the grace period).
    Resource,
    /// An empty folder.
    Folder,
    /// One file: the new version of the resource at `url`, without it.
    File { url: ResourceUrl, committed: Box<Committed> },
}

/// A listing's page request, as DIAL reads its query (v1 and v2 alike).
pub struct Page {
    pub limit: usize,
    /// The previous page's `nextToken`.
    pub token: Option<String>,
    pub recursive: bool,
    /// Whether each node carries the caller's permissions.
    pub permissions: bool,
}

/// What `GET /v2/metadata/…` answers.
pub enum Metadata {
    /// A resource's metadata.
    Resource { url: ResourceUrl, marker: Box<ResourceMarker>, permissions: PermissionNames },
    /// A folder (or the bucket root) with one page of what is in it.
    Folder {
        url: ResourceUrl,
        marker: Option<FolderMarker>,
        resource_type: String,
        items: Vec<(ListedNode, PermissionNames)>,
        permissions: PermissionNames,
        next_token: Option<String>,
    },
    /// A resource's files (`…/files/` or a directory of them), one page.
    Files {
        resource: ResourceUrl,
        dir: String,
        resource_type: String,
        items: Vec<ListedNode>,
        /// A resource's files have its permissions.
        permissions: PermissionNames,
        next_token: Option<String>,
    },
}

/// The versions a resource keeps, newest first, one page.
pub struct VersionPage {
    /// Each version, and whether it is the one the resource serves now.
    pub versions: Vec<(VersionRecord, bool)>,
    pub next_token: Option<String>,
}

/// The resources deleted in one folder that can still be restored, one page.
pub struct RestorablePage {
    /// Each tombstone: its URL, its marker (`deleted_at`, `author`, …) and
    /// the epoch ms until which it can be restored.
    pub items: Vec<(ResourceUrl, Arc<ResourceMarker>, i64)>,
    pub next_token: Option<String>,
}

/// The v2 API over the catalog's stores, for one request.
pub struct FolderResources<'a> {
    catalog: Catalog<'a>,
}

impl<'a> FolderResources<'a> {
    pub fn new(catalog: Catalog<'a>) -> Self {
        Self { catalog }
    }

    /// Parses `<group>/<bucket>/<path>[/files/<file>]` (raw), then makes the
    /// one access check.
    pub async fn resolve(
        &self,
        caller: &Caller,
        raw: &str,
        intent: Intent,
        permission: Permission,
    ) -> Result<Target, CatalogError> {
        let (resource_raw, file_raw) = split_files(raw);
        let url = ResourceUrl::parse(resource_raw, intent)?;
        let handler =
            self.catalog.handlers.get(url.group()).ok_or_else(|| CatalogError::NotFound(format!("/v2/{raw}")))?;
        let location = self.catalog.buckets.decode(url.bucket())?;
        let node = Node::new(url, location)?;
        let file = file_raw.map(decode_file_path).transpose()?;
        let file_folder = file_raw.is_some_and(|raw| raw.ends_with('/'));
        let access_url = self.check(caller, &node, permission).await?;
        Ok(Target { node, access_url, handler, file, file_folder })
    }

    /// The one access check of a v2 node, on the URL access decisions use
    /// (a resource named in its listing form is the item), which it returns.
    pub(crate) async fn check(
        &self,
        caller: &Caller,
        node: &Node,
        permission: Permission,
    ) -> Result<ResourceUrl, CatalogError> {
        let checked = self.catalog.folders.access_url(node).await?;
        self.catalog.access.check(caller, Resource { url: &checked, location: &node.location }, permission).await?;
        Ok(checked)
    }

    /// `GET /v2/…`: the resource as a ZIP, or one file (`…/files/<file>`), of
    /// the current version or a retained one.
    pub async fn download(
        &self,
        caller: &Caller,
        raw: &str,
        version: Option<&str>,
        conditions: &Preconditions,
    ) -> Result<Download, CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Read).await?;
        let engine = self.catalog.folders;
        let file = target.single_file()?;
        let marker = match named_version(version)? {
            None => engine.resource_for_read(&target.node).await?,
            Some(version) => engine.version_for_read(&target.node, version).await?,
        };
        if let Some(file) = file {
            let (object, record) = engine.file_path(&target.node, &marker, file)?;
            if conditions.not_modified(&record.etag) {
                return Ok(Download::NotModified { etag: record.etag });
            }
            let stream = engine.store().get(&object).await.map_err(FolderError::from)?.into_stream();
            let body = stream.map(|chunk| chunk.map_err(std::io::Error::other)).boxed();
            return Ok(Download::File { path: file.to_string(), etag: record.etag, size: record.size, body });
        }
        if conditions.not_modified(&marker.etag) {
            return Ok(Download::NotModified { etag: marker.etag });
        }
        let name = target.node.url.name().unwrap_or("resource").replace('"', "");
        let etag = marker.etag.clone();
        let body = stream_zip(engine.store().clone(), target.node.paths().clone(), marker, None).boxed();
        Ok(Download::Archive { name, etag, body })
    }

    /// `DELETE /v2/…`: a resource (tombstoned; its shares end), an empty
    /// folder (`…/x/`, SPEC §4), or one file (a new version without it).
    pub async fn delete(
        &self,
        caller: &Caller,
        raw: &str,
        conditions: &Preconditions,
    ) -> Result<Deleted, CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Write).await?;
        let engine = self.catalog.folders;
        if let Some(file) = target.single_file()? {
            let author = Some(caller.author_name());
            let committed = engine.delete_file(&target.node, file, &target.handler, conditions, author).await?;
            return Ok(Deleted::File { url: target.node.url, committed: Box::new(committed) });
        }
        if target.node.url.is_folder() {
            // A resource's listing form must not delete the resource and its files.
            let named = &target.access_url;
            if !named.is_folder() {
                return Err(CatalogError::Invalid(format!(
                    "{} is a resource, not a folder: delete it as {named}",
                    target.node.url
                )));
            }
            engine.delete_folder(&target.node, conditions).await?;
            self.catalog.access.sharing().forget(&target.node.location, &target.node.url.to_string()).await?;
            return Ok(Deleted::Folder);
        }
        let Target { node, handler, .. } = target;
        let link = crate::catalog::Link { url: node.url, location: node.location, kind: Kind::Folder(handler) };
        self.catalog.delete(&link, conditions).await?;
        Ok(Deleted::Resource)
    }

    /// `GET /v2/metadata/…`: a resource's metadata, a folder's children (in
    /// `public`, what the rules show the caller), or a resource's files.
    /// `version` names a retained version whose files to list (the files
    /// listing only).
    pub async fn metadata(
        &self,
        caller: &Caller,
        raw: &str,
        page: Page,
        version: Option<&str>,
    ) -> Result<Metadata, CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Read).await?;
        let engine = self.catalog.folders;
        let mut permissions_of = self.catalog.node_permissions(caller, page.permissions);
        let location = &target.node.location;
        let version = named_version(version)?;
        if let Some(dir) = &target.file {
            let url = &target.node.url;
            let marker = match version {
                None => {
                    engine.live_marker(&target.node).await?.ok_or_else(|| FolderError::NotFound(url.to_string()))?
                }
                Some(version) => engine.version_for_read(&target.node, version).await?,
            };
            let token = page.token.as_deref().map(decode_token).transpose()?;
            let listing =
                engine.list_files(&target.node, &marker, dir, page.recursive, token.as_deref(), page.limit)?;
            // A resource's files have its permissions.
            let permissions = permissions_of.of(&target.access_url, location).await?;
            return Ok(Metadata::Files {
                resource: target.node.url.clone(),
                dir: dir.clone(),
                resource_type: crate::folders::resource_type(&marker.type_name),
                items: listing.items,
                permissions,
                next_token: listing.next_token.map(encode_token),
            });
        }
        if version.is_some() {
            let resource = target.node.url.to_string();
            return Err(CatalogError::Invalid(format!(
                "version lists a version's files: {}/files/?version=<id>",
                resource.trim_end_matches('/')
            )));
        }
        let url = &target.node.url;
        // A resource answers its metadata whichever form names it (listings
        // give resources URLs ending in `/`). A folder form the access check
        // found no resource for is listed without asking again (a listing
        // page then costs the store its index listings alone).
        let may_be_resource = !url.is_bucket_root() && (!url.is_folder() || target.access_url != *url);
        if may_be_resource && let Some(marker) = engine.live_marker(&target.node).await? {
            let permissions = permissions_of.of(&target.access_url, location).await?;
            return Ok(Metadata::Resource { url: url.clone(), marker: Box::new(marker), permissions });
        }
        let folder = if url.is_folder() { target.node.clone() } else { as_folder(&target.node)? };
        let token = page.token.as_deref().map(decode_token).transpose()?;
        let filter = self.catalog.access.listing_filter(caller, &folder.location).await?;
        let shows = |url: &ResourceUrl| filter.shows(caller, url);
        let listing = engine.list(&folder, page.recursive, token.as_deref(), page.limit, &shows).await?;
        let mut items = Vec::with_capacity(listing.items.len());
        for item in listing.items {
            // Resources are asked about by their item URL, folders by theirs.
            let permissions = permissions_of.of(item.url(), location).await?;
            items.push((item, permissions));
        }
        let permissions = permissions_of.of(&folder.url, location).await?;
        Ok(Metadata::Folder {
            url: folder.url.clone(),
            marker: None,
            resource_type: target.resource_type(),
            items,
            permissions,
            next_token: listing.next_token.map(encode_token),
        })
    }

    /// `GET /v2/versions/…`: the versions the resource keeps, newest first,
    /// the current one marked; paged like listings. The token names the
    /// last version returned; if it has been swept since, the page goes on
    /// with what is older than it.
    pub async fn versions(
        &self,
        caller: &Caller,
        raw: &str,
        token: Option<&str>,
        limit: usize,
    ) -> Result<VersionPage, CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Read).await?;
        if target.file.is_some() {
            return Err(CatalogError::Invalid("Versions are of a resource: drop the /files/… part of the URL".into()));
        }
        let marker = self.catalog.folders.resource_for_read(&target.node).await?;
        let all = marker.versions_newest_first(now_ms());
        let start = match token {
            None => 0,
            Some(token) => {
                let invalid = || CatalogError::Invalid(format!("Invalid token: {token}"));
                let decoded = decode_token(token)?;
                let (created_at, version) = decoded
                    .split_once(':')
                    .and_then(|(at, version)| Some((at.parse::<i64>().ok()?, version)))
                    .ok_or_else(invalid)?;
                match all.iter().position(|(record, _)| record.version == version) {
                    Some(index) => index + 1,
                    None => all.iter().position(|(record, _)| record.created_at < created_at).unwrap_or(all.len()),
                }
            }
        };
        let more = start + limit < all.len();
        let versions: Vec<(VersionRecord, bool)> = all.into_iter().skip(start).take(limit).collect();
        let next_token = versions
            .last()
            .filter(|_| more)
            .map(|(last, _)| encode_token(format!("{}:{}", last.created_at, last.version)));
        Ok(VersionPage { versions, next_token })
    }

    /// `GET /v2/deleted/{g}/{b}/{folder}/`: the resources deleted directly
    /// in a folder that can still be restored, for those who may restore
    /// them — the folder's writers and admins (SPEC §4) — since the API
    /// otherwise names no tombstone and a restore needs the URL.
    pub async fn restorable(
        &self,
        caller: &Caller,
        raw: &str,
        token: Option<&str>,
        limit: usize,
    ) -> Result<RestorablePage, CatalogError> {
        let url = ResourceUrl::parse(raw, Intent::Read)?;
        if !url.is_folder() {
            return Err(CatalogError::Invalid(format!("Deleted resources are listed per folder: {url}/")));
        }
        if self.catalog.handlers.get(url.group()).is_none() {
            return Err(CatalogError::NotFound(format!("/v2/deleted/{raw}")));
        }
        let location = self.catalog.buckets.decode(url.bucket())?;
        let node = Node::new(url, location)?;
        if !self.catalog.access.may_decide(caller, AdminDecision::RestoreDeleted) {
            self.check(caller, &node, Permission::Write).await?;
        }
        let engine = self.catalog.folders;
        let token = token.map(decode_token).transpose()?;
        let listing = engine.list_restorable(&node, token.as_deref(), limit).await?;
        let grace_ms = engine.grace_ms();
        let items = listing
            .items
            .into_iter()
            .filter_map(|item| match item {
                ListedNode::Resource { url, marker } => {
                    let until = marker.restorable_until(grace_ms)?;
                    Some((url, marker, until))
                }
                _ => None,
            })
            .collect();
        Ok(RestorablePage { items, next_token: listing.next_token.map(encode_token) })
    }

    /// `POST /v2/ops/{group}/restore`: undo a delete within the grace window
    /// (the owner or an admin, SPEC §4), or make a retained version current
    /// again (a new commit; `conditions` checked against the current one).
    pub async fn restore(
        &self,
        caller: &Caller,
        group: &str,
        url: &str,
        version: Option<&str>,
        conditions: &Preconditions,
    ) -> Result<(ResourceUrl, ResourceMarker), CatalogError> {
        // A link like any other in a body: `…/x` or its listing form `…/x/`.
        let link = self.catalog.parse_link(url)?.as_resource();
        let handler = match &link.kind {
            Kind::Folder(handler) if link.url.group() == group => handler.clone(),
            _ => return Err(CatalogError::Invalid(format!("{} is not a {group} resource", link.url))),
        };
        let node = Node::new(link.url, link.location)?;
        let engine = self.catalog.folders;
        let marker = match named_version(version)? {
            None => {
                // Admins hold no write on users' buckets, and may restore there.
                if !self.catalog.access.may_decide(caller, AdminDecision::RestoreDeleted) {
                    self.check(caller, &node, Permission::Write).await?;
                }
                engine.restore(&node).await?
            }
            Some(version) => {
                self.check(caller, &node, Permission::Write).await?;
                let author = Some(caller.author_name());
                engine.restore_version(&node, version, &handler, author, conditions).await?
            }
        };
        Ok((node.url, marker))
    }
}

/// Splits at the first `files` segment after `<group>/<bucket>/`.
fn split_files(raw: &str) -> (&str, Option<&str>) {
    let mut offset: usize = 0;
    for (index, segment) in raw.split('/').enumerate() {
        if index >= 3 && segment == FILES_SEGMENT {
            // `offset` points at this segment; the resource ends before its `/`.
            let resource = &raw[..offset.saturating_sub(1)];
            let rest = &raw[(offset + segment.len()).min(raw.len())..];
            return (resource, Some(rest.strip_prefix('/').unwrap_or(rest)));
        }
        offset += segment.len() + 1;
    }
    (raw, None)
}

fn decode_file_path(raw: &str) -> Result<String, CatalogError> {
    let trimmed = raw.strip_suffix('/').unwrap_or(raw);
    let mut segments = Vec::new();
    for segment in trimmed.split('/').filter(|s| !trimmed.is_empty() || !s.is_empty()) {
        let decoded = percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .map_err(|_| CatalogError::Invalid(format!("Invalid file path: {raw}")))?;
        segments.push(decoded.into_owned());
    }
    Ok(segments.join("/"))
}

/// A `version` a request names: absent, or not empty.
fn named_version(version: Option<&str>) -> Result<Option<&str>, CatalogError> {
    match version {
        Some("") => Err(CatalogError::Invalid("version must name a version (see /v2/versions/…)".into())),
        other => Ok(other),
    }
}

/// Listing tokens are opaque to clients (Base58 of the last name returned),
/// so they need no escaping in a query string.
pub(crate) fn encode_token(token: impl AsRef<[u8]>) -> String {
    bs58::encode(token.as_ref()).into_string()
}

pub(crate) fn decode_token(token: &str) -> Result<String, CatalogError> {
    let invalid = || CatalogError::Invalid(format!("Invalid token: {token}"));
    let bytes = bs58::decode(token).into_vec().map_err(|_| invalid())?;
    String::from_utf8(bytes).map_err(|_| invalid())
}

/// The folder form of a node addressed without its trailing slash.
fn as_folder(node: &Node) -> Result<Node, CatalogError> {
    let raw = format!("{}/", node.url);
    let url = ResourceUrl::parse(&raw, Intent::Read)?;
    Ok(Node::new(url, node.location.clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_segment_splits_resource_and_file() {
        assert_eq!(split_files("skills/b/team/s"), ("skills/b/team/s", None));
        assert_eq!(split_files("skills/b/s/files/SKILL.md"), ("skills/b/s", Some("SKILL.md")));
        assert_eq!(split_files("skills/b/s/files/a/files/b"), ("skills/b/s", Some("a/files/b")));
        assert_eq!(split_files("skills/b/s/files"), ("skills/b/s", Some("")));
        assert_eq!(split_files("skills/b/s/files/"), ("skills/b/s", Some("")));
        assert_eq!(split_files("files/b/x"), ("files/b/x", None), "the group may be called files");
    }

    #[test]
    fn file_paths_are_decoded() {
        assert_eq!(decode_file_path("a%20b/c.md").unwrap(), "a b/c.md");
        assert_eq!(decode_file_path("").unwrap(), "");
        assert_eq!(decode_file_path("dir/").unwrap(), "dir");
    }
}
