//! The skills a caller can read, as an agent loads them over MCP's Skills
//! Extension (SEP-2640): the caller's own bucket, what is shared with them,
//! and `public` as the folder rules let them see it — in that order, in
//! pages of whole entries; one skill's entry (its frontmatter and every
//! file with its size and SHA-256); one file's bytes; one directory's
//! children. No HTTP and no URI syntax: a skill or file is named by its
//! bucket id (or `public`) and its decoded path segments.
//!
//! Every answer rests on the one access check ([`crate::access`]); what the
//! caller may not read is as unknown as what is not there. A warm page reads
//! no file: the digests are kept in the version's file table and the
//! frontmatter in the marker, and a version written before either has them
//! derived once ([`crate::folders::FolderEngine::file_digests`],
//! [`crate::folders::FolderEngine::kept_metadata`]).

use bytes::Bytes;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::access::{AccessError, ListingFilter, Permission};
use crate::auth::Caller;
use crate::buckets::BucketLocation;
use crate::catalog::{Catalog, CatalogError};
use crate::folder_resources::{FolderResources, decode_token, encode_token};
use crate::folders::marker::{FRONTMATTER_METADATA, ResourceMarker};
use crate::folders::{FolderError, ListedNode, Node};
use crate::handlers::Handler;
use crate::hosted_skills::SKILLS_GROUP;
use crate::resource_url::ResourceUrl;
use crate::sharing::Access;
use crate::skills_index::{listable, skill_url};

/// Skills per `skills/list` page (entries are never split across pages).
pub const SKILLS_PAGE: usize = 100;
/// Files one page's entries may list between them: past it the page ends
/// (it always holds one entry), so a page of big skills stays small.
const PAGE_FILES: usize = 10_000;
/// Bytes a page may hash for versions written before their digests were
/// kept (each is hashed once, ever): past it the page ends early.
const PAGE_HASHED_BYTES: u64 = 256 << 20;
/// Listings and grants one page looks at, at most: past it, the page ends
/// early (a page may be partial; its cursor goes on).
const MAX_STEPS: usize = 64;
/// What one listing of a page asks for beyond the skills the page still
/// has room for: the folders it walks through count too.
const LISTING_SLACK: usize = 16;
/// Children per `resources/directory/read` page.
pub const DIRECTORY_PAGE: usize = 500;
/// The largest file read whole into one answer (base64 in JSON for a
/// binary file); a larger one is read with `GET /v2/…/files/<path>`.
pub const MAX_READ_BYTES: u64 = 8 << 20;
/// The longest cursor read back.
const MAX_CURSOR_BYTES: usize = 8 << 10;

#[derive(Debug, thiserror::Error)]
pub enum AgentSkillsError {
    /// No skill the caller can read is there (or the name is not one).
    #[error("Unknown skill: {0}")]
    UnknownSkill(String),
    /// No file or directory of a skill the caller can read is there.
    #[error("Resource not found: {0}")]
    UnknownResource(String),
    #[error("Not a directory of a skill: {0}")]
    NotADirectory(String),
    #[error("Invalid cursor: {0}")]
    BadCursor(String),
    #[error(
        "{path} is {size} bytes, more than the {MAX_READ_BYTES} one read returns; \
         read it with GET /v2/…/files/{path}"
    )]
    TooLarge { path: String, size: u64 },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl From<FolderError> for AgentSkillsError {
    fn from(error: FolderError) -> Self {
        Self::Catalog(error.into())
    }
}

impl From<AccessError> for AgentSkillsError {
    fn from(error: AccessError) -> Self {
        Self::Catalog(error.into())
    }
}

/// Where a skill, or something in one, is: the bucket id (or `public`)
/// and the decoded path below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillAddress {
    pub authority: String,
    pub segments: Vec<String>,
}

/// One skill as agents list it.
#[derive(Debug, Clone)]
pub struct SkillEntry {
    /// The skill's own address (its last segment is the frontmatter name).
    pub address: SkillAddress,
    /// `SKILL.md`'s frontmatter as JSON, verbatim.
    pub frontmatter: serde_json::Value,
    /// Every file of the current version, in path order.
    pub files: Vec<SkillFile>,
}

#[derive(Debug, Clone)]
pub struct SkillFile {
    /// Its path in the skill (`/`-separated).
    pub path: String,
    pub size: u64,
    /// SHA-256 hex of its bytes.
    pub sha256: String,
}

/// One page of `skills/list`.
#[derive(Debug)]
pub struct SkillPage {
    pub skills: Vec<SkillEntry>,
    pub next_cursor: Option<String>,
}

/// One file, read.
#[derive(Debug)]
pub struct FileContent {
    pub path: String,
    pub bytes: Bytes,
}

/// A child of a directory in a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryChild {
    /// Its address (the directory's plus its name).
    pub address: SkillAddress,
    pub directory: bool,
}

/// One page of a directory's children.
#[derive(Debug)]
pub struct DirectoryPage {
    pub children: Vec<DirectoryChild>,
    pub next_cursor: Option<String>,
}

/// Where a page resumes: the source (own, shared, public), the grant
/// within "shared" (its URL: the grants may change between pages), and the
/// listing token within it. Opaque to clients (Base58 of its JSON, as
/// listing tokens are).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    #[serde(rename = "s")]
    source: Source,
    #[serde(rename = "g", default, skip_serializing_if = "Option::is_none")]
    grant: Option<String>,
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
enum Source {
    #[default]
    #[serde(rename = "o")]
    Own,
    #[serde(rename = "s")]
    Shared,
    #[serde(rename = "p")]
    Public,
}

impl Cursor {
    fn parse(text: &str) -> Option<Self> {
        if text.len() > MAX_CURSOR_BYTES {
            return None;
        }
        serde_json::from_str(&decode_token(text).ok()?).ok()
    }

    fn render(&self) -> String {
        encode_token(serde_json::to_string(self).unwrap_or_default())
    }

    fn at(source: Source, grant: Option<String>, token: Option<String>) -> Self {
        Self { source, grant, token }
    }
}

/// What one page has taken so far, and what it may still take.
struct PageBuilder {
    skills: Vec<SkillEntry>,
    files: usize,
    hashed: u64,
    steps: usize,
}

impl PageBuilder {
    fn full(&self) -> bool {
        self.skills.len() >= SKILLS_PAGE || self.files >= PAGE_FILES || self.steps >= MAX_STEPS
    }

    /// Whether the page may take a skill that must first hash `bytes`.
    fn may_hash(&self, bytes: u64) -> bool {
        bytes == 0 || self.skills.is_empty() || self.hashed + bytes <= PAGE_HASHED_BYTES
    }
}

/// The skills over the catalog's stores, for one request.
pub struct AgentSkills<'a> {
    catalog: Catalog<'a>,
}

impl<'a> AgentSkills<'a> {
    pub fn new(catalog: Catalog<'a>) -> Self {
        Self { catalog }
    }

    fn handler(&self) -> Result<Handler, AgentSkillsError> {
        self.catalog.handlers.get(SKILLS_GROUP).ok_or_else(|| CatalogError::NotFound("skills".into()).into())
    }

    /// A page of the skills `caller` can read, from `cursor` (none: the
    /// first page): at most [`SKILLS_PAGE`] whole entries, fewer where the
    /// page's bounds end it early.
    pub async fn list(&self, caller: &Caller, cursor: Option<&str>) -> Result<SkillPage, AgentSkillsError> {
        let handler = self.handler()?;
        let mut at = match cursor {
            None => Cursor::default(),
            Some(text) => Cursor::parse(text).ok_or_else(|| AgentSkillsError::BadCursor(text.to_string()))?,
        };
        let mut page = PageBuilder { skills: Vec::new(), files: 0, hashed: 0, steps: 0 };
        // The grants are read once a page.
        let mut grants: Option<Vec<String>> = None;
        loop {
            if page.full() {
                return Ok(SkillPage { skills: page.skills, next_cursor: Some(at.render()) });
            }
            page.steps += 1;
            let next = match at.source {
                Source::Own => {
                    let own = caller.bucket_location();
                    let root = self.root(&own)?;
                    match self.list_folder(caller, &handler, root, at.token.take(), &mut page).await? {
                        Some(token) => Some(Cursor::at(Source::Own, None, Some(token))),
                        None => Some(Cursor::at(Source::Shared, None, None)),
                    }
                }
                Source::Shared => {
                    if grants.is_none() {
                        grants = Some(self.shared_grants(caller).await?);
                    }
                    let grants = grants.as_deref().unwrap_or_default();
                    Some(self.list_shared(caller, &handler, grants, &at, &mut page).await?)
                }
                Source::Public => {
                    let root = self.root(&BucketLocation::Public)?;
                    let token = self.list_folder(caller, &handler, root, at.token.take(), &mut page).await?;
                    token.map(|token| Cursor::at(Source::Public, None, Some(token)))
                }
            };
            match next {
                Some(next) => at = next,
                None => return Ok(SkillPage { skills: page.skills, next_cursor: None }),
            }
        }
    }

    /// The skills group's root in `location`.
    fn root(&self, location: &BucketLocation) -> Result<Node, AgentSkillsError> {
        let url = skill_url(&self.catalog.buckets.encode(location), &[], true)?;
        Ok(Node::new(url, location.clone())?)
    }

    /// Adds to the page the skills below the folder `node` that the caller
    /// sees, from `token`, until the page is full; the token to resume
    /// with, if there is more. One listing a call: a listing's token is
    /// the path of the last item it gave, so the page may stop at any item.
    async fn list_folder(
        &self,
        caller: &Caller,
        handler: &Handler,
        node: Node,
        token: Option<String>,
        page: &mut PageBuilder,
    ) -> Result<Option<String>, AgentSkillsError> {
        let filter: ListingFilter = self.catalog.access.listing_filter(caller, &node.location).await?;
        let shows = |url: &ResourceUrl| filter.shows(caller, url);
        let limit = SKILLS_PAGE.saturating_sub(page.skills.len()) + LISTING_SLACK;
        let listing = match self.catalog.folders.list(&node, true, token.as_deref(), limit, &shows).await {
            Ok(listing) => listing,
            // A bucket with no skills yet has no folder to list.
            Err(FolderError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let depth = node.url.segments().len();
        let mut last: Option<String> = None;
        for item in listing.items {
            let relative = item.url().segments()[depth..].join("/");
            if let ListedNode::Resource { url, marker } = item {
                let marker = std::sync::Arc::unwrap_or_clone(marker);
                if page.skills.len() >= SKILLS_PAGE || page.files >= PAGE_FILES || !page.may_hash(unhashed(&marker)) {
                    return Ok(last);
                }
                self.take(handler, Node::new(url, node.location.clone())?, marker, page).await?;
            }
            last = Some(relative);
        }
        Ok(listing.next_token)
    }

    /// Adds to the page the skills shared with the caller (`grants`, sorted),
    /// grant by grant from `at`, until the page is full (a grant inside an
    /// earlier folder grant is skipped: its skills are listed there); where
    /// to resume (public, once the grants are done).
    async fn list_shared(
        &self,
        caller: &Caller,
        handler: &Handler,
        grants: &[String],
        at: &Cursor,
        page: &mut PageBuilder,
    ) -> Result<Cursor, AgentSkillsError> {
        // The first grant at or after the one the cursor names.
        let index = at.grant.as_ref().map_or(0, |grant| grants.partition_point(|url| url < grant));
        let Some(url) = grants.get(index) else { return Ok(Cursor::at(Source::Public, None, None)) };
        let next_grant = Cursor::at(Source::Shared, grants.get(index + 1).cloned(), None);
        let next_grant = if next_grant.grant.is_some() { next_grant } else { Cursor::at(Source::Public, None, None) };
        if covered_by_earlier(grants, index) {
            return Ok(next_grant);
        }
        let Ok(parsed) = ResourceUrl::parse(url, crate::resource_url::Intent::Read) else { return Ok(next_grant) };
        let Ok(location) = self.catalog.buckets.decode(parsed.bucket()) else { return Ok(next_grant) };
        let node = Node::new(parsed, location)?;
        if node.url.is_folder() {
            // The token applies to this grant only.
            let token = if at.grant.as_ref() == Some(url) { at.token.clone() } else { None };
            return Ok(match self.list_folder(caller, handler, node, token, page).await? {
                Some(token) => Cursor::at(Source::Shared, Some(url.clone()), Some(token)),
                None => next_grant,
            });
        }
        if let Some(marker) = self.catalog.folders.live_marker(&node).await? {
            if !page.may_hash(unhashed(&marker)) {
                return Ok(Cursor::at(Source::Shared, Some(url.clone()), None));
            }
            self.take(handler, node, marker, page).await?;
        }
        Ok(next_grant)
    }

    /// The skills group's URLs shared with the caller for reading, sorted.
    async fn shared_grants(&self, caller: &Caller) -> Result<Vec<String>, AgentSkillsError> {
        let grants =
            self.catalog.access.sharing().shared_with(&caller.user_location()).await.map_err(CatalogError::from)?;
        let prefix = format!("{SKILLS_GROUP}/");
        let mut urls: Vec<String> = grants
            .into_iter()
            .filter(|grant| grant.url.starts_with(&prefix) && grant.permissions.contains(&Access::Read))
            .map(|grant| grant.url)
            .collect();
        urls.sort();
        urls.dedup();
        Ok(urls)
    }

    /// Adds the entry of the live skill `node` to the page, if it is one
    /// agents take.
    async fn take(
        &self,
        handler: &Handler,
        node: Node,
        marker: ResourceMarker,
        page: &mut PageBuilder,
    ) -> Result<(), AgentSkillsError> {
        let hashed = unhashed(&marker);
        if let Some(entry) = self.entry(handler, &node, marker).await? {
            page.files += entry.files.len();
            page.hashed += hashed;
            page.skills.push(entry);
        }
        Ok(())
    }

    /// The entry of the skill at `address`, if the caller can read it.
    pub async fn get(&self, caller: &Caller, address: &SkillAddress) -> Result<SkillEntry, AgentSkillsError> {
        let handler = self.handler()?;
        let unknown = || AgentSkillsError::UnknownSkill(address.segments.join("/"));
        let (node, marker, rest) = self.resolve(caller, address).await?.ok_or_else(unknown)?;
        if !rest.is_empty() {
            return Err(unknown());
        }
        self.entry(&handler, &node, marker).await?.ok_or_else(unknown)
    }

    /// The bytes of the file at `address` (a skill's address and the file's
    /// path in it), if the caller can read the skill.
    pub async fn read(&self, caller: &Caller, address: &SkillAddress) -> Result<FileContent, AgentSkillsError> {
        let unknown = || AgentSkillsError::UnknownResource(address.segments.join("/"));
        let (node, marker, rest) = self.resolve(caller, address).await?.ok_or_else(unknown)?;
        let path = rest.join("/");
        let engine = self.catalog.folders;
        let (object, record) = engine.file_path(&node, &marker, &path).map_err(|_| unknown())?;
        if record.size > MAX_READ_BYTES {
            return Err(AgentSkillsError::TooLarge { path, size: record.size });
        }
        let bytes = engine.store().get(&object).await.map_err(FolderError::from)?.bytes().await;
        Ok(FileContent { path, bytes: bytes.map_err(FolderError::from)? })
    }

    /// The children of the directory at `address` (a skill's own address
    /// is its root), from `cursor`: [`DIRECTORY_PAGE`] at most, in the
    /// order of the version's file table (by path). A cursor holds the
    /// version it was given for: once another is current it is refused.
    pub async fn directory(
        &self,
        caller: &Caller,
        address: &SkillAddress,
        cursor: Option<&str>,
    ) -> Result<DirectoryPage, AgentSkillsError> {
        let unknown = || AgentSkillsError::UnknownResource(address.segments.join("/"));
        let (_, marker, rest) = self.resolve(caller, address).await?.ok_or_else(unknown)?;
        let directory = rest.join("/");
        if marker.files.contains_key(&directory) {
            return Err(AgentSkillsError::NotADirectory(address.segments.join("/")));
        }
        let prefix = if directory.is_empty() { String::new() } else { format!("{directory}/") };
        let mut children: Vec<DirectoryChild> = Vec::new();
        for path in marker.files.keys().filter(|path| path.starts_with(&prefix)) {
            let below = &path[prefix.len()..];
            let (name, is_directory) = match below.split_once('/') {
                Some((name, _)) => (name, true),
                None => (below, false),
            };
            // Paths are sorted: a directory's files are adjacent.
            if children.last().is_some_and(|last| last.address.segments.last().map(String::as_str) == Some(name)) {
                continue;
            }
            let mut child = address.clone();
            child.segments.push(name.to_string());
            children.push(DirectoryChild { address: child, directory: is_directory });
        }
        if children.is_empty() {
            return Err(unknown());
        }
        let offset = match cursor {
            None => 0,
            Some(text) => decode_token(text)
                .ok()
                .and_then(|token| {
                    let (version, offset) = token.rsplit_once(':')?;
                    (version == marker.current_version).then(|| offset.parse::<usize>().ok())?
                })
                .filter(|offset| *offset <= children.len())
                .ok_or_else(|| AgentSkillsError::BadCursor(text.to_string()))?,
        };
        let end = (offset + DIRECTORY_PAGE).min(children.len());
        let next_cursor = (end < children.len()).then(|| encode_token(format!("{}:{end}", marker.current_version)));
        Ok(DirectoryPage { children: children.drain(offset..end).collect(), next_cursor })
    }

    /// The skill `address` is in (the first of its path's prefixes that is
    /// a live skill), if the caller can read it, with the rest of the path.
    /// The walk stops at the first prefix that is neither a skill nor a
    /// folder, so a made-up path costs two reads at most.
    async fn resolve(
        &self,
        caller: &Caller,
        address: &SkillAddress,
    ) -> Result<Option<(Node, ResourceMarker, Vec<String>)>, AgentSkillsError> {
        let Ok(location) = self.catalog.buckets.decode(&address.authority) else { return Ok(None) };
        let type_name = self.handler()?.description().type_name.clone();
        let engine = self.catalog.folders;
        let Ok(mut folder) = skill_url(&address.authority, &[], true) else { return Ok(None) };
        for (depth, segment) in address.segments.iter().enumerate() {
            let Ok(url) = folder.child(segment, false) else { return Ok(None) };
            let Ok(node) = Node::new(url, location.clone()) else { return Ok(None) };
            let Some(marker) = engine.live_marker(&node).await? else {
                let Ok(url) = folder.child(segment, true) else { return Ok(None) };
                let Ok(below) = Node::new(url.clone(), location.clone()) else { return Ok(None) };
                if !engine.folder_exists(&below).await? {
                    return Ok(None);
                }
                folder = url;
                continue;
            };
            if marker.type_name != type_name {
                return Ok(None);
            }
            return match FolderResources::new(self.catalog).check(caller, &node, Permission::Read).await {
                Ok(_) => Ok(Some((node, marker, address.segments[depth + 1..].to_vec()))),
                Err(CatalogError::Access(AccessError::Denied(_))) => Ok(None),
                Err(error) => Err(error.into()),
            };
        }
        Ok(None)
    }

    /// The entry of the live skill `node`, if agents take it as one: its
    /// name is its frontmatter `name` and a name as the Agent Skills format
    /// wants it (SEP-2640: a skill's last path segment is its name), and its
    /// handler describes it. A skill whose files or handler fail is left
    /// out (logged), not the whole answer; a store that fails fails it.
    async fn entry(
        &self,
        handler: &Handler,
        node: &Node,
        marker: ResourceMarker,
    ) -> Result<Option<SkillEntry>, AgentSkillsError> {
        let skipped = |error: FolderError| -> Result<Option<SkillEntry>, AgentSkillsError> {
            match error {
                FolderError::Storage(object_store::Error::NotFound { .. }) | FolderError::Handler(_) => {
                    tracing::warn!(skill = %node.url, %error, "a skill left out of the agents' listing");
                    Ok(None)
                }
                error => Err(error.into()),
            }
        };
        let engine = self.catalog.folders;
        let kept = match engine.kept_metadata(node, &marker, handler, FRONTMATTER_METADATA).await {
            Ok(kept) => kept,
            Err(error) => return skipped(error),
        };
        // Verbatim or not at all: a skill its handler no longer describes is
        // not listed.
        let Some(frontmatter) = kept
            .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
            .filter(serde_json::Value::is_object)
        else {
            return Ok(None);
        };
        let name = frontmatter.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
        let description = frontmatter.get("description").and_then(serde_json::Value::as_str).unwrap_or_default();
        if node.url.name() != Some(name) || !listable(name, description) {
            return Ok(None);
        }
        let marker = match engine.file_digests(node, marker).await {
            Ok(marker) => marker,
            Err(error) => return skipped(error),
        };
        let files = marker
            .files
            .iter()
            .map(|(path, record)| SkillFile {
                path: path.clone(),
                size: record.size,
                sha256: record.sha256.clone().unwrap_or_default(),
            })
            .collect();
        let address = SkillAddress {
            authority: self.catalog.buckets.encode(&node.location),
            segments: node.url.segments().to_vec(),
        };
        Ok(Some(SkillEntry { address, frontmatter, files }))
    }
}

/// The bytes of `marker`'s files that have no SHA-256 yet.
fn unhashed(marker: &ResourceMarker) -> u64 {
    marker.files.values().filter(|record| record.sha256.is_none()).map(|record| record.size).sum()
}

/// Whether the grant at `index` of the sorted `grants` is inside an
/// earlier folder grant: one of its ancestor folders is granted (sorted,
/// so found by binary search).
fn covered_by_earlier(grants: &[String], index: usize) -> bool {
    let url = &grants[index];
    let body = url.strip_suffix('/').unwrap_or(url);
    body.match_indices('/')
        .map(|(at, _)| &url[..=at])
        .any(|ancestor| grants[..index].binary_search_by(|grant| grant.as_str().cmp(ancestor)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_what_they_did_not_write() {
        for cursor in [
            Cursor::default(),
            Cursor::at(Source::Shared, Some("skills/b/a:b/".into()), Some("x/y".into())),
            Cursor::at(Source::Public, None, Some("x".into())),
        ] {
            assert_eq!(Cursor::parse(&cursor.render()), Some(cursor));
        }
        for text in ["", "o:0:", "not-base58-0OIl", &encode_token("{\"s\":\"q\"}"), &"1".repeat(MAX_CURSOR_BYTES + 1)] {
            assert_eq!(Cursor::parse(text), None, "{text}");
        }
    }

    #[test]
    fn a_grant_inside_an_earlier_folder_grant_is_covered() {
        let mut grants: Vec<String> =
            ["skills/b/team/", "skills/b/team/a", "skills/b/team/sub/", "skills/b/teams", "skills/c/x"]
                .map(String::from)
                .to_vec();
        grants.sort();
        let covered: Vec<bool> = (0..grants.len()).map(|index| covered_by_earlier(&grants, index)).collect();
        assert_eq!(covered, [false, true, true, false, false], "{grants:?}");
    }
}
