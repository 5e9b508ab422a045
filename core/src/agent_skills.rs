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

use crate::access::{AccessError, ListingFilter, Permission, Resource};
use crate::auth::Caller;
use crate::buckets::BucketLocation;
use crate::catalog::{Catalog, CatalogError};
use crate::folders::marker::{FRONTMATTER_METADATA, ResourceMarker};
use crate::folders::{FolderError, ListedNode, Node};
use crate::handlers::Handler;
use crate::resource_url::{Intent, ResourceUrl, SEGMENT_ESCAPES};
use crate::sharing::{Access, covers};

/// Skills per `skills/list` page (entries are never split across pages).
pub const SKILLS_PAGE: usize = 100;
/// Listings and grants one `skills/list` page looks at, at most (each
/// shared resource is one): past it, the page ends early.
const MAX_STEPS: usize = 2 * SKILLS_PAGE;
/// Children per `resources/directory/read` page.
pub const DIRECTORY_PAGE: usize = 500;
/// The largest file read whole into one answer (base64 in JSON for a
/// binary file); a larger one is read with `GET /v2/…/files/<path>`.
pub const MAX_READ_BYTES: u64 = 16 << 20;
/// The group whose resources are skills.
const SKILLS_GROUP: &str = "skills";

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
/// within "shared", and the listing token within it. Written
/// `<source>:<grant>:<token>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Cursor {
    source: Source,
    grant: usize,
    token: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Source {
    #[default]
    Own,
    Shared,
    Public,
}

impl Cursor {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ':');
        let source = match parts.next()? {
            "o" => Source::Own,
            "s" => Source::Shared,
            "p" => Source::Public,
            _ => return None,
        };
        let grant = parts.next()?.parse().ok()?;
        let token = parts.next()?;
        Some(Self { source, grant, token: (!token.is_empty()).then(|| token.to_string()) })
    }

    fn render(&self) -> String {
        let source = match self.source {
            Source::Own => "o",
            Source::Shared => "s",
            Source::Public => "p",
        };
        format!("{source}:{}:{}", self.grant, self.token.as_deref().unwrap_or_default())
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
    /// first page): at most [`SKILLS_PAGE`], whole entries.
    pub async fn list(&self, caller: &Caller, cursor: Option<&str>) -> Result<SkillPage, AgentSkillsError> {
        let handler = self.handler()?;
        let mut at = match cursor {
            None => Cursor::default(),
            Some(text) => Cursor::parse(text).ok_or_else(|| AgentSkillsError::BadCursor(text.to_string()))?,
        };
        let mut skills = Vec::new();
        // The grants are read once a page; a page looks at a bounded number
        // of them (a page may be partial: the cursor goes on).
        let mut grants: Option<Vec<String>> = None;
        let mut steps = 0;
        loop {
            steps += 1;
            if skills.len() >= SKILLS_PAGE || steps > MAX_STEPS {
                return Ok(SkillPage { skills, next_cursor: Some(at.render()) });
            }
            let next = match at.source {
                Source::Own => {
                    let own = caller.bucket_location();
                    let token = self.list_bucket(caller, &handler, own, at.token.take(), &mut skills).await?;
                    token.map(|token| Cursor { token: Some(token), ..at.clone() }).or(Some(Cursor {
                        source: Source::Shared,
                        grant: 0,
                        token: None,
                    }))
                }
                Source::Shared => {
                    if grants.is_none() {
                        grants = Some(self.shared_grants(caller).await?);
                    }
                    let grants = grants.as_deref().unwrap_or_default();
                    self.list_shared(caller, &handler, grants, &at, &mut skills).await?
                }
                Source::Public => {
                    let token = self
                        .list_bucket(caller, &handler, BucketLocation::Public, at.token.take(), &mut skills)
                        .await?;
                    token.map(|token| Cursor { token: Some(token), ..at.clone() })
                }
            };
            match next {
                Some(next) => at = next,
                None => return Ok(SkillPage { skills, next_cursor: None }),
            }
        }
    }

    /// Adds to `skills` the skills in `location` (from `token`) until the
    /// page is full; the token to resume with, if there are more.
    async fn list_bucket(
        &self,
        caller: &Caller,
        handler: &Handler,
        location: BucketLocation,
        token: Option<String>,
        skills: &mut Vec<SkillEntry>,
    ) -> Result<Option<String>, AgentSkillsError> {
        let root =
            ResourceUrl::parse(&format!("{SKILLS_GROUP}/{}/", self.catalog.buckets.encode(&location)), Intent::Read)
                .map_err(CatalogError::from)?;
        let filter = self.catalog.access.listing_filter(caller, &location).await?;
        self.list_folder(caller, handler, Node::new(root, location)?, &filter, token, skills).await
    }

    /// Adds to `skills` the skills below the folder `node` that `filter`
    /// shows, until the page is full; the token to resume with, if there
    /// are more.
    async fn list_folder(
        &self,
        caller: &Caller,
        handler: &Handler,
        node: Node,
        filter: &ListingFilter,
        token: Option<String>,
        skills: &mut Vec<SkillEntry>,
    ) -> Result<Option<String>, AgentSkillsError> {
        let shows = |url: &ResourceUrl| filter.shows(caller, url);
        let room = SKILLS_PAGE.saturating_sub(skills.len());
        let page = match self.catalog.folders.list(&node, true, token.as_deref(), room, &shows).await {
            Ok(page) => page,
            // A bucket with no skills yet has no folder to list.
            Err(FolderError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        for item in page.items {
            let ListedNode::Resource { url, marker } = item else { continue };
            let node = Node::new(url, node.location.clone())?;
            if let Some(entry) = self.entry(handler, &node, std::sync::Arc::unwrap_or_clone(marker)).await? {
                skills.push(entry);
            }
        }
        Ok(page.next_token)
    }

    /// Adds to `skills` the skills shared with the caller (`grants`), grant by grant
    /// (in URL order, a grant inside an earlier one skipped), from `at`,
    /// until the page is full; where to resume, if there is more (public
    /// next).
    async fn list_shared(
        &self,
        caller: &Caller,
        handler: &Handler,
        grants: &[String],
        at: &Cursor,
        skills: &mut Vec<SkillEntry>,
    ) -> Result<Option<Cursor>, AgentSkillsError> {
        let public = Some(Cursor { source: Source::Public, grant: 0, token: None });
        let Some(url) = grants.get(at.grant) else { return Ok(public) };
        let next_grant = Cursor { source: Source::Shared, grant: at.grant + 1, token: None };
        if grants[..at.grant].iter().any(|earlier| covers(earlier, url)) {
            return Ok(Some(next_grant));
        }
        let Ok(parsed) = ResourceUrl::parse(url, Intent::Read) else { return Ok(Some(next_grant)) };
        let Ok(location) = self.catalog.buckets.decode(parsed.bucket()) else { return Ok(Some(next_grant)) };
        let node = Node::new(parsed, location)?;
        if node.url.is_folder() {
            let filter = self.catalog.access.listing_filter(caller, &node.location).await?;
            let token = self.list_folder(caller, handler, node, &filter, at.token.clone(), skills).await?;
            return Ok(Some(match token {
                Some(token) => Cursor { token: Some(token), ..at.clone() },
                None => next_grant,
            }));
        }
        if let Some(marker) = self.catalog.folders.live_marker(&node).await?
            && let Some(entry) = self.entry(handler, &node, marker).await?
        {
            skills.push(entry);
        }
        Ok(Some(next_grant))
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
        Ok(urls)
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
        let record = marker.files.get(&path).ok_or_else(unknown)?;
        if record.size > MAX_READ_BYTES {
            return Err(AgentSkillsError::TooLarge { path, size: record.size });
        }
        let object = node.paths().file(&marker.current_version, &path);
        let bytes = self.catalog.folders.store().get(&object).await.map_err(FolderError::from)?.bytes().await;
        Ok(FileContent { path, bytes: bytes.map_err(FolderError::from)? })
    }

    /// The children of the directory at `address` (a skill's own address
    /// is its root), from `cursor`: [`DIRECTORY_PAGE`] at most, in name
    /// order.
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
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|offset| *offset <= children.len())
                .ok_or_else(|| AgentSkillsError::BadCursor(text.to_string()))?,
        };
        let end = (offset + DIRECTORY_PAGE).min(children.len());
        let next_cursor = (end < children.len()).then(|| end.to_string());
        Ok(DirectoryPage { children: children.drain(offset..end).collect(), next_cursor })
    }

    /// The skill `address` is in (the first of its path's prefixes that is
    /// a live skill), if the caller can read it, with the rest of the path.
    async fn resolve(
        &self,
        caller: &Caller,
        address: &SkillAddress,
    ) -> Result<Option<(Node, ResourceMarker, Vec<String>)>, AgentSkillsError> {
        let Ok(location) = self.catalog.buckets.decode(&address.authority) else { return Ok(None) };
        let type_name = self.handler()?.description().type_name.clone();
        for depth in 1..=address.segments.len() {
            let Some(url) = skill_url(&address.authority, &address.segments[..depth]) else { return Ok(None) };
            let Ok(node) = Node::new(url, location.clone()) else { return Ok(None) };
            let Some(marker) = self.catalog.folders.live_marker(&node).await? else { continue };
            if marker.type_name != type_name {
                return Ok(None);
            }
            let checked = self.catalog.folders.access_url(&node).await?;
            let resource = Resource { url: &checked, location: &node.location };
            return match self.catalog.access.check(caller, resource, Permission::Read).await {
                Ok(()) => Ok(Some((node, marker, address.segments[depth..].to_vec()))),
                Err(AccessError::Denied(_)) => Ok(None),
                Err(error) => Err(error.into()),
            };
        }
        Ok(None)
    }

    /// The entry of the live skill `node`: none when its name is not its
    /// frontmatter `name` (DIAL admits display names; SEP-2640 wants the
    /// skill path's last segment to be the name).
    async fn entry(
        &self,
        handler: &Handler,
        node: &Node,
        marker: ResourceMarker,
    ) -> Result<Option<SkillEntry>, AgentSkillsError> {
        let engine = self.catalog.folders;
        let frontmatter = engine
            .kept_metadata(node, &marker, handler, FRONTMATTER_METADATA)
            .await?
            .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
            .filter(serde_json::Value::is_object)
            .unwrap_or_else(|| {
                // A skill its handler no longer describes: what the marker has.
                let field = |key: &str| marker.metadata.get(key).cloned().unwrap_or_default();
                serde_json::json!({"name": field("name"), "description": field("description")})
            });
        let name = frontmatter.get("name").and_then(serde_json::Value::as_str);
        if name.is_none() || name != node.url.name() {
            return Ok(None);
        }
        let marker = engine.file_digests(node, marker).await?;
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

/// `skills/<bucket>/<segments…>` as a resource URL, if it is one.
fn skill_url(bucket: &str, segments: &[String]) -> Option<ResourceUrl> {
    let encoded: Vec<String> = segments
        .iter()
        .map(|segment| percent_encoding::utf8_percent_encode(segment, SEGMENT_ESCAPES).to_string())
        .collect();
    let bucket = percent_encoding::utf8_percent_encode(bucket, SEGMENT_ESCAPES);
    ResourceUrl::parse(&format!("{SKILLS_GROUP}/{bucket}/{}", encoded.join("/")), Intent::Read).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_what_they_did_not_write() {
        for cursor in [
            Cursor::default(),
            Cursor { source: Source::Shared, grant: 3, token: Some("a:b/c".into()) },
            Cursor { source: Source::Public, grant: 0, token: Some("x".into()) },
        ] {
            assert_eq!(Cursor::parse(&cursor.render()), Some(cursor));
        }
        for text in ["", "q:0:", "o::", "o:-1:", "s:1"] {
            assert_eq!(Cursor::parse(text), None, "{text}");
        }
    }
}
