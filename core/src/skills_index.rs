//! The public skills as agents discover them without credentials: the
//! agentskills.io well-known index (discovery schema 0.2.0) of `public`, or
//! of one public folder, and the archives it points to.
//!
//! Only what an anonymous reader may read is listed or served: a skill
//! below a public folder that has rules (someone is admitted, so someone is
//! not) is left out, whoever the rules admit. Each entry's `digest` is the
//! SHA-256 of exactly the bytes its `url` serves: the archive of one version
//! (pinned in the URL), built deterministically
//! ([`crate::folders::archive::ARCHIVE_FORMAT`]) and its digest kept with
//! the version, so a warm index reads no marker and builds no archive.

use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::access::AccessError;
use crate::access::public_rules::{RulesDocument, public_folders};
use crate::buckets::BucketLocation;
use crate::catalog::{Catalog, CatalogError};
use crate::folders::archive::stream_zip;
use crate::folders::{ListedNode, Node};
use crate::handlers::Handler;
use crate::hosted_skills::SKILLS_GROUP;
use crate::resource_url::{Intent, ResourceUrl};

/// The schema an index names.
pub const DISCOVERY_SCHEMA: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";
/// Resources listed per store page while an index is built.
const PAGE: usize = 1000;

/// One public skill as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedSkill {
    /// The frontmatter `name`.
    pub name: String,
    pub description: String,
    /// Its path below `public` (decoded segments).
    pub path: Vec<String>,
    /// The version its archive is pinned to.
    pub version: String,
    /// OpenAI-style version number, when the resource has numbers.
    pub number: Option<u64>,
    /// SHA-256 hex of the archive of that version.
    pub sha256: String,
}

/// A public skill's archive, as served.
pub struct Archive {
    pub version: String,
    pub sha256: Option<String>,
    pub body: BoxStream<'static, Result<Bytes, std::io::Error>>,
}

/// The public skills over the catalog's stores, for one request.
pub struct SkillsIndex<'a> {
    catalog: Catalog<'a>,
}

impl<'a> SkillsIndex<'a> {
    pub fn new(catalog: Catalog<'a>) -> Self {
        Self { catalog }
    }

    fn handler(&self) -> Result<Handler, CatalogError> {
        self.catalog.handlers.get(SKILLS_GROUP).ok_or_else(|| CatalogError::NotFound("skills".into()))
    }

    /// The skills below the public folder `folder` (decoded segments; none:
    /// all of `public`) that anyone may read, in path order. 404 for a
    /// folder that does not exist or that has rules.
    pub async fn list(&self, folder: &[String]) -> Result<Vec<IndexedSkill>, CatalogError> {
        self.handler()?;
        let url = public_url(folder, true)?;
        let node = Node::new(url.clone(), BucketLocation::Public)?;
        let rules = self.catalog.access.rules().all().await.map_err(AccessError::from)?;
        if !open_to_anyone(&rules, &url) {
            return Err(CatalogError::NotFound(url.to_string()));
        }
        let engine = self.catalog.folders;
        let shows = |url: &ResourceUrl| open_to_anyone(&rules, url);
        let mut skills = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = engine.list(&node, true, token.as_deref(), PAGE, &shows).await?;
            for item in page.items {
                let ListedNode::Resource { url, marker } = item else { continue };
                let field = |key: &str| marker.metadata.get(key).cloned().unwrap_or_default();
                if !listable(&field("name"), &field("description")) {
                    continue;
                }
                let node = Node::new(url.clone(), BucketLocation::Public)?;
                let sha256 = engine.archive_digest(&node, &marker).await?;
                skills.push(IndexedSkill {
                    name: field("name"),
                    description: field("description"),
                    path: url.segments().to_vec(),
                    version: marker.current_version.clone(),
                    number: marker.number,
                    sha256,
                });
            }
            match page.next_token {
                Some(next) => token = Some(next),
                None => return Ok(skills),
            }
        }
    }

    /// The archive of the public skill at `path` (decoded segments): of
    /// `version` when given (404 unless it is the current one: the index
    /// pins the version it listed), else the current one. What the index
    /// would not list is 404 too.
    pub async fn archive(&self, path: &[String], version: Option<&str>) -> Result<Archive, CatalogError> {
        let handler = self.handler()?;
        let url = public_url(path, false)?;
        let rules = self.catalog.access.rules().all().await.map_err(AccessError::from)?;
        let not_found = || CatalogError::NotFound(url.to_string());
        if path.is_empty() || !open_to_anyone(&rules, &url) {
            return Err(not_found());
        }
        let node = Node::new(url.clone(), BucketLocation::Public)?;
        let engine = self.catalog.folders;
        let marker = engine.live_marker(&node).await?.ok_or_else(not_found)?;
        if version.is_some_and(|version| version != marker.current_version)
            || marker.type_name != handler.description().type_name
        {
            return Err(not_found());
        }
        let sha256 = marker.archive_sha256().map(str::to_owned);
        let version = marker.current_version.clone();
        let body = Box::pin(stream_zip(engine.store().clone(), node.paths().clone(), marker, None));
        Ok(Archive { version, sha256, body })
    }
}

/// Whether the index may list a skill: its `name` as the Agent Skills
/// format requires it (1–64 lowercase letters, digits and single inner
/// hyphens; DIAL accepts display names too, with a warning, and agents
/// skip such entries) and a description of 1–1024 characters.
pub(crate) fn listable(name: &str, description: &str) -> bool {
    let name_ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    name_ok && (1..=1024).contains(&description.chars().count())
}

/// `skills/public/<segments>` (a folder URL when `folder`).
fn public_url(segments: &[String], folder: bool) -> Result<ResourceUrl, CatalogError> {
    skill_url("public", segments, folder)
}

/// `skills/<bucket id>/<segments…>` (decoded segments, each checked as the
/// URL parser checks one; a folder URL when `folder`, the bucket root when
/// there are none).
pub(crate) fn skill_url(bucket: &str, segments: &[String], folder: bool) -> Result<ResourceUrl, CatalogError> {
    let bucket = percent_encoding::utf8_percent_encode(bucket, crate::resource_url::SEGMENT_ESCAPES);
    let mut url = ResourceUrl::parse(&format!("{SKILLS_GROUP}/{bucket}/"), Intent::Read)?;
    for (index, segment) in segments.iter().enumerate() {
        url = url.child(segment, folder || index + 1 < segments.len())?;
    }
    Ok(url)
}

/// Whether anyone, with no credentials, may read `url` in `public`: no
/// folder above it (or it, for a folder) has rules.
fn open_to_anyone(rules: &RulesDocument, url: &ResourceUrl) -> bool {
    public_folders(url).iter().all(|folder| rules.get(folder).is_none_or(|rules| rules.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_agents_take_are_listed() {
        for name in ["pdf-tools", "a", "x2", &"a".repeat(64)] {
            assert!(listable(name, "d"), "{name}");
        }
        for name in ["", "PDF Tools", "-pdf", "pdf-", "pdf--tools", "pdf_tools", &"a".repeat(65)] {
            assert!(!listable(name, "d"), "{name}");
        }
        assert!(!listable("pdf", "") && !listable("pdf", &"d".repeat(1025)) && listable("pdf", &"d".repeat(1024)));
    }
}
