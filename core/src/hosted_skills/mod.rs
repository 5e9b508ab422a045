//! The hosted skills APIs (Anthropic's and OpenAI's `/v1/skills`, SPEC §12)
//! in domain terms: an API skill *is* a v2 skill resource, so this module
//! only names things — ids for resources, version references for the
//! version history — and runs the store's operations with the store's
//! access checks. The HTTP layer reads uploads and renders each dialect.
//!
//! Ids are stateless and reversible: `skill_<base58 of the resource URL>_<base36
//! of its creation time>`. The URL makes a shared skill addressable by its
//! grantee with the grantee's access; the creation time makes a skill deleted
//! and made again a new id (the hosted APIs never reuse one). A DIAL move
//! gives the skill a new id.

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::access::{AccessError, Permission, Resource};
use crate::auth::Caller;
use crate::catalog::{Catalog, CatalogError, Kind, Link};
use crate::clock::now_ms;
use crate::etag::{EtagMatch, Preconditions};
use crate::folders::archive::stream_zip;
use crate::folders::engine::Becomes;
use crate::folders::marker::{ResourceMarker, VersionRecord};
use crate::folders::staging::MetadataCheck;
use crate::folders::{FolderError, Node, Order, Staging};
use crate::handlers::{Handler, Problem};
use crate::resource_url::{Intent, ResourceUrl};

pub mod vendor_rules;
pub use vendor_rules::VendorNames;
use vendor_rules::vendor_problems;

/// The group API skills live in.
pub const SKILLS_GROUP: &str = "skills";
const SKILL_ID_PREFIX: &str = "skill_";
/// What every version id starts with.
pub const VERSION_ID_PREFIX: &str = "skillver_";
/// How long after a create an identical create by the same caller is taken
/// for its retry: the SDKs retry a create whose answer was lost, and a
/// create carries no idempotency key.
const REPLAY_WINDOW_MS: i64 = 10 * 60 * 1000;

#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    #[error("Skill not found: {0}")]
    NotFound(String),
    #[error("Skill version not found: {0}")]
    VersionNotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// A create over a skill of the same name, or a change the caller may
    /// not make to a skill it can read.
    #[error("{0}")]
    Conflict(String),
    #[error("You may read but not change the skill {0}")]
    ReadOnly(String),
    #[error("Skills are not served here: no handler serves the `skills` group")]
    NoSkillType,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl From<FolderError> for SkillsError {
    fn from(error: FolderError) -> Self {
        match error {
            FolderError::VersionNotFound(version) => Self::VersionNotFound(version),
            error => Self::Catalog(error.into()),
        }
    }
}

/// A skill as the APIs show it: the resource, its numbered marker and id.
pub struct Skill {
    pub id: String,
    pub node: Node,
    pub handler: Handler,
    /// Numbered ([`ResourceMarker::numbered`]).
    pub marker: ResourceMarker,
    /// Every version readers can name, newest first (never empty).
    versions: Vec<SkillVersion>,
}

impl Skill {
    fn new(node: Node, handler: Handler, marker: ResourceMarker) -> Self {
        let id = skill_id(&node.url, marker.created_at);
        let marker = marker.numbered();
        let versions = marker
            .versions_newest_first(now_ms())
            .into_iter()
            .map(|(record, current)| SkillVersion { id: version_id(&record.version), current, record })
            .collect();
        Self { id, node, handler, marker, versions }
    }

    /// The skill's name: the resource's name, the top folder of its archives.
    pub fn name(&self) -> &str {
        self.node.url.name().unwrap_or("skill")
    }

    /// Every version readers can name, newest first.
    pub fn versions(&self) -> &[SkillVersion] {
        &self.versions
    }

    /// The newest version (Anthropic's `latest`, OpenAI's `latest_version`).
    pub fn latest(&self) -> &SkillVersion {
        &self.versions[0]
    }

    /// The current version (OpenAI's `default_version`; what DIAL serves).
    pub fn current(&self) -> &SkillVersion {
        self.versions.iter().find(|version| version.current).expect("a skill has its current version")
    }

    /// The version `reference` names.
    pub fn version(&self, reference: &VersionRef) -> Result<&SkillVersion, SkillsError> {
        let mut versions = self.versions.iter();
        let found = match reference {
            VersionRef::Latest => versions.next(),
            VersionRef::Id(id) => versions.find(|v| v.id == *id),
            VersionRef::Number(number) => versions.find(|v| v.number() == *number),
            VersionRef::Epoch(epoch) => versions.find(|v| v.epoch_micros() == *epoch),
        };
        found.ok_or_else(|| SkillsError::VersionNotFound(shown(&reference.to_string())))
    }
}

/// One version of a skill.
#[derive(Debug, Clone)]
pub struct SkillVersion {
    /// `skillver_<version>`.
    pub id: String,
    pub record: VersionRecord,
    pub current: bool,
}

impl SkillVersion {
    /// OpenAI's version number.
    pub fn number(&self) -> u64 {
        self.record.number.unwrap_or(0)
    }

    /// Anthropic's beta `version`: the commit time in microseconds, the
    /// last three digits the number's (unique within the skill: two
    /// commits of one resource in the same millisecond have other numbers).
    pub fn epoch_micros(&self) -> u64 {
        (self.record.created_at.max(0) as u64) * 1000 + self.number() % 1000
    }

    /// The handler's metadata of the version (`name`, `description`).
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.record.metadata.get(key).map(String::as_str)
    }
}

/// How a request names a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRef {
    Latest,
    /// `skillver_…`.
    Id(String),
    /// OpenAI's `"1"`, `"2"`, ….
    Number(u64),
    /// Anthropic's beta 16-digit epoch microseconds.
    Epoch(u64),
}

impl std::fmt::Display for VersionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Latest => f.write_str("latest"),
            Self::Id(id) => f.write_str(id),
            Self::Number(number) => write!(f, "{number}"),
            Self::Epoch(epoch) => write!(f, "{epoch}"),
        }
    }
}

/// `skill_<base58 of the URL>_<base36 of created_at>`.
pub fn skill_id(url: &ResourceUrl, created_at: i64) -> String {
    let url = url.as_item().unwrap_or_else(|| url.clone()).to_string();
    format!("{SKILL_ID_PREFIX}{}_{}", bs58::encode(url.as_bytes()).into_string(), base36(created_at.max(0) as u64))
}

/// The URL and creation time a skill id names; `None` for anything else.
pub fn parse_skill_id(id: &str) -> Option<(ResourceUrl, i64)> {
    let (url, created) = id.strip_prefix(SKILL_ID_PREFIX)?.rsplit_once('_')?;
    let url = String::from_utf8(bs58::decode(url).into_vec().ok()?).ok()?;
    let url = ResourceUrl::parse(&url, Intent::Read).ok()?;
    let created = i64::try_from(u64::from_str_radix(created, 36).ok()?).ok()?;
    (url.group() == SKILLS_GROUP && !url.is_folder()).then_some((url, created))
}

/// `skillver_<the version history's id>`.
pub fn version_id(version: &str) -> String {
    format!("{VERSION_ID_PREFIX}{version}")
}

fn base36(mut value: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(value % 36) as usize]);
        value /= 36;
        if value == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII digits")
}

/// A new skill or version being received.
pub struct Upload {
    pub staging: Staging,
    node: Node,
    handler: Handler,
    /// A create: the skill already there that an identical upload by the
    /// same caller is a retry of.
    retry_of: Option<ResourceMarker>,
    /// A new version: the latest one, made by the same caller moments ago,
    /// that an identical upload is a retry of.
    retry_of_version: Option<(ResourceMarker, SkillVersion)>,
    /// Why the version may not be committed unless it is such a retry: the
    /// skill keeps no more versions than it has.
    full: Option<String>,
    create: bool,
}

/// What deleting a version did.
pub enum Dropped {
    /// The version left the history (when it was the current one, the
    /// newest remaining became current; when it was the only one, the skill
    /// went with it).
    Version(Box<SkillVersion>),
    /// The version named was there and is gone already: the retry of a
    /// delete whose answer was lost.
    Already,
}

/// What a create or a new version committed, and the warnings the answer
/// carries: the skill handler's, and the hosted services' rules the skill
/// breaks ([`vendor_rules`]).
pub struct Finished {
    pub skill: Skill,
    pub version: SkillVersion,
    pub warnings: Vec<Problem>,
}

impl Finished {
    /// With the handler's warnings about `version`, and the hosted
    /// services' rules its name and description break.
    fn new(skill: Skill, version: SkillVersion, mut warnings: Vec<Problem>) -> Self {
        let metadata = &version.record.metadata;
        let name = metadata.get("name").map_or("", String::as_str);
        let broken = vendor_problems(name, description_of(metadata));
        warnings.extend(broken.into_iter().map(|message| Problem { path: Some("SKILL.md".to_string()), message }));
        Self { skill, version, warnings }
    }
}

fn description_of(metadata: &indexmap::IndexMap<String, String>) -> &str {
    metadata.get("description").map_or("", String::as_str)
}

/// The skills APIs over the catalog's stores, for one request.
pub struct HostedSkills<'a> {
    catalog: Catalog<'a>,
    vendor_names: VendorNames,
}

impl<'a> HostedSkills<'a> {
    pub fn new(catalog: Catalog<'a>, vendor_names: VendorNames) -> Self {
        Self { catalog, vendor_names }
    }

    /// The rule an upload's SKILL.md is held to: its `name` is one of
    /// `names` (DIAL only warns), and with `vendor_names = "refuse"` the
    /// hosted services would take its name and description.
    fn metadata_check(&self, names: Vec<String>) -> MetadataCheck {
        let refuse = self.vendor_names == VendorNames::Refuse;
        Box::new(move |metadata| {
            let found = metadata.get("name");
            if !found.is_some_and(|found| names.contains(found)) {
                let expected = names.iter().map(|name| format!("'{name}'")).collect::<Vec<_>>().join(" or ");
                let found = found.map_or_else(|| "none".to_string(), |found| format!("'{found}'"));
                return Err(format!("The folder name {expected} must match the name in the upload (name: {found})"));
            }
            let problems = vendor_problems(found.map_or("", String::as_str), description_of(metadata));
            if refuse && !problems.is_empty() {
                return Err(format!("{} (skills_api.vendor_names = \"refuse\")", problems.join("; ")));
            }
            Ok(())
        })
    }

    fn handler(&self) -> Result<Handler, SkillsError> {
        self.catalog.handlers.get(SKILLS_GROUP).ok_or(SkillsError::NoSkillType)
    }

    /// The skill `id` names, if the caller may read it (`permission` Write:
    /// also change it). A skill the caller may not read is "not found",
    /// like one that is not there.
    pub async fn find(&self, caller: &Caller, id: &str, permission: Permission) -> Result<Skill, SkillsError> {
        let not_found = || SkillsError::NotFound(shown(id));
        let (url, created_at) = parse_skill_id(id).ok_or_else(not_found)?;
        let handler = self.handler()?;
        let location = self.catalog.buckets.decode(url.bucket()).map_err(|_| not_found())?;
        let node = Node::new(url, location).map_err(|_| not_found())?;
        let resource = Resource { url: &node.url, location: &node.location };
        match self.catalog.access.check(caller, resource, Permission::Read).await {
            Ok(()) => {}
            Err(AccessError::Denied(_)) => return Err(not_found()),
            Err(error) => return Err(CatalogError::from(error).into()),
        }
        let marker = self.catalog.folders.live_marker(&node).await?.filter(|m| m.created_at == created_at);
        let marker = marker.ok_or_else(not_found)?;
        if permission != Permission::Read {
            match self.catalog.access.check(caller, resource, permission).await {
                Ok(()) => {}
                Err(AccessError::Denied(_)) => return Err(SkillsError::ReadOnly(id.to_string())),
                Err(error) => return Err(CatalogError::from(error).into()),
            }
        }
        Ok(Skill::new(node, handler, marker))
    }

    /// A page of the skills in the caller's bucket (at any depth), newest
    /// first or oldest first, after the skill whose id is `after` (gone
    /// since or not: its id holds its URL and creation time), at most
    /// `limit`; and whether more follow. One listing of the bucket's
    /// creation index and a marker read per skill, however many there are.
    pub async fn list(
        &self,
        caller: &Caller,
        order: Order,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Skill>, bool), SkillsError> {
        let handler = self.handler()?;
        let after = match after {
            None => None,
            Some(after) => Some(parse_skill_id(after).ok_or_else(|| {
                SkillsError::Invalid(format!(
                    "{:?} is no page of this list: pass the id the page before ended with",
                    shown(after)
                ))
            })?),
        };
        let location = caller.bucket_location();
        let root =
            ResourceUrl::parse(&format!("{SKILLS_GROUP}/{}/", self.catalog.buckets.encode(&location)), Intent::Read)
                .map_err(CatalogError::from)?;
        let root = Node::new(root, location).map_err(CatalogError::from)?;
        let after = after.as_ref().map(|(url, created_at)| (url, *created_at));
        let page = self.catalog.folders.list_created(&root, order, after, limit).await?;
        let mut skills = Vec::with_capacity(page.items.len());
        for (url, marker) in page.items {
            let node = Node::new(url, root.location.clone()).map_err(CatalogError::from)?;
            skills.push(Skill::new(node, handler.clone(), marker));
        }
        Ok((skills, page.more))
    }

    /// Starts a new skill named `name` in the caller's bucket. The same
    /// name already there is a conflict — unless the caller made it
    /// moments ago with one version: then the upload may be the retry of a
    /// create whose answer was lost, and [`HostedSkills::finish`] answers
    /// with that skill if the files are the same.
    pub async fn start_create(&self, caller: &Caller, name: &str) -> Result<Upload, SkillsError> {
        let handler = self.handler()?;
        let location = caller.bucket_location();
        let raw = format!("{SKILLS_GROUP}/{}/{}", self.catalog.buckets.encode(&location), encode_segment(name));
        let url = ResourceUrl::parse(&raw, Intent::Write)
            .map_err(|error| SkillsError::Invalid(format!("The skill name {name:?} cannot be used: {error}")))?;
        let node = Node::new(url, location).map_err(CatalogError::from)?;
        let resource = Resource { url: &node.url, location: &node.location };
        self.catalog.access.check(caller, resource, Permission::Write).await.map_err(CatalogError::from)?;
        let existing = self.catalog.folders.live_marker(&node).await?;
        let retry_of = match existing {
            Some(marker) if is_retry_candidate(&marker, caller) => Some(marker),
            Some(_) => return Err(conflict(name)),
            None => None,
        };
        let conditions = if retry_of.is_some() { Preconditions::default() } else { Preconditions::create_only() };
        let mut staging = match self.catalog.folders.stage(&node, &handler, &conditions).await {
            Err(FolderError::Precondition(_)) => return Err(conflict(name)),
            staging => staging?,
        };
        staging.check_metadata(self.metadata_check(vec![name.to_string()]));
        Ok(Upload { staging, node, handler, retry_of, retry_of_version: None, full: None, create: true })
    }

    /// The names a new version of `skill` may come under, as its top folder
    /// and the `name` in its SKILL.md: the skill's folder, and the name the
    /// skill has when it was made through `/v2` under another folder (DIAL
    /// only warns of that; the hosted APIs' download names the folder).
    pub fn version_names(skill: &Skill) -> Vec<&str> {
        let mut names = vec![skill.name()];
        if let Some(name) = skill.marker.metadata.get("name").filter(|name| name.as_str() != skill.name()) {
            names.push(name);
        }
        names
    }

    /// Starts a new version of `skill` (found with Write) by `caller`. A
    /// skill that has as many versions as retention keeps takes none (SPEC
    /// §12): a version an API client made is never dropped silently, so
    /// the answer names the setting — unless the upload may be the retry
    /// of the version this caller made moments ago ([`HostedSkills::finish`]).
    pub async fn start_version(&self, caller: &Caller, skill: &Skill) -> Result<Upload, SkillsError> {
        let latest = skill.latest();
        let retry_of_version = (latest.record.author.as_deref() == Some(caller.author_name().as_str())
            && now_ms() - latest.record.created_at <= REPLAY_WINDOW_MS)
            .then(|| (skill.marker.clone(), latest.clone()));
        let keep = self.catalog.folders.retention(&skill.handler).keep_versions as usize;
        let full = (skill.versions().len() >= keep).then(|| {
            format!(
                "The skill has {} versions, as many as it keeps (keep_versions: handlers.types.{SKILLS_GROUP}.keep_versions, \
                 else folders.keep_versions; it is {keep}): a new version would drop the oldest, whose id would stop \
                 answering. Delete a version first, or raise keep_versions",
                skill.versions().len()
            )
        });
        if let (Some(full), None) = (&full, &retry_of_version) {
            return Err(SkillsError::Conflict(full.clone()));
        }
        let mut staging = self.catalog.folders.stage(&skill.node, &skill.handler, &Preconditions::default()).await?;
        let names = Self::version_names(skill).into_iter().map(str::to_string).collect();
        staging.check_metadata(self.metadata_check(names));
        Ok(Upload {
            staging,
            node: skill.node.clone(),
            handler: skill.handler.clone(),
            retry_of: None,
            retry_of_version,
            full,
            create: false,
        })
    }

    /// Validates and commits what `upload` received: a create as the
    /// skill's first version, a new version as the current one or (OpenAI's
    /// `default=false`) as the newest retained one. Returns the skill and
    /// the version committed.
    pub async fn finish(&self, caller: &Caller, mut upload: Upload, becomes: Becomes) -> Result<Finished, SkillsError> {
        if let Err(error) = upload.staging.flush().await {
            upload.staging.discard().await;
            return Err(error.into());
        }
        let name = upload.node.url.name().unwrap_or_default().to_string();
        if let Some(existing) = upload.retry_of.take() {
            // The retry of a create that committed: its answer again (what
            // this upload staged goes).
            let same = upload.staging.etag() == existing.etag;
            upload.staging.discard().await;
            if !same {
                return Err(conflict(&name));
            }
            let handler_warnings = existing.warnings.clone();
            let skill = Skill::new(upload.node, upload.handler, existing);
            let version = skill.current().clone();
            return Ok(Finished::new(skill, version, handler_warnings));
        }
        if let Some((marker, latest)) = upload.retry_of_version.take()
            && upload.staging.etag() == latest.record.etag
        {
            // The same files as the version this caller made moments ago:
            // the retry of a version create whose answer was lost.
            upload.staging.discard().await;
            let handler_warnings = if latest.current { marker.warnings.clone() } else { Vec::new() };
            return Ok(Finished::new(Skill::new(upload.node, upload.handler, marker), latest, handler_warnings));
        }
        if let Some(full) = upload.full.take() {
            upload.staging.discard().await;
            return Err(SkillsError::Conflict(full));
        }
        let conditions = if upload.create { Preconditions::create_only() } else { Preconditions::default() };
        let engine = self.catalog.folders;
        let committed = match engine
            .commit_as(upload.staging, &upload.handler, &conditions, Some(caller.author_name()), becomes)
            .await
        {
            Err(FolderError::Precondition(_)) if upload.create => return Err(conflict(&name)),
            committed => committed?,
        };
        let skill = Skill::new(upload.node, upload.handler, committed.marker);
        let version = skill.version(&VersionRef::Id(version_id(&committed.version)))?.clone();
        Ok(Finished::new(skill, version, committed.warnings))
    }

    /// Deletes the skill `id` names: the store's delete — a tombstone the
    /// owner can restore within the grace period; its shares end. Deleting
    /// a skill that is deleted already (a retry whose first answer was lost)
    /// is done: the tombstone it left shows it was this skill.
    pub async fn delete(&self, caller: &Caller, id: &str) -> Result<(), SkillsError> {
        let skill = match self.find(caller, id, Permission::Write).await {
            Err(SkillsError::NotFound(_)) if self.was_deleted(caller, id).await? => return Ok(()),
            found => found?,
        };
        self.delete_skill(skill).await
    }

    async fn delete_skill(&self, skill: Skill) -> Result<(), SkillsError> {
        let link = Link { url: skill.node.url, location: skill.node.location, kind: Kind::Folder(skill.handler) };
        self.catalog.delete(&link, &Preconditions::default()).await?;
        Ok(())
    }

    /// Whether the skill `id` names is deleted and `caller` could have
    /// deleted it: its tombstone is there, from the same creation.
    async fn was_deleted(&self, caller: &Caller, id: &str) -> Result<bool, SkillsError> {
        let Some((url, created_at)) = parse_skill_id(id) else { return Ok(false) };
        let Ok(location) = self.catalog.buckets.decode(url.bucket()) else { return Ok(false) };
        let Ok(node) = Node::new(url, location) else { return Ok(false) };
        let resource = Resource { url: &node.url, location: &node.location };
        match self.catalog.access.check(caller, resource, Permission::Write).await {
            Ok(()) => {}
            Err(AccessError::Denied(_)) => return Ok(false),
            Err(error) => return Err(CatalogError::from(error).into()),
        }
        let tombstone = self.catalog.folders.tombstone(&node).await?;
        Ok(tombstone.is_some_and(|marker| marker.created_at == created_at))
    }

    /// Makes the version `reference` names the current one, without a new
    /// commit.
    pub async fn make_current(&self, caller: &Caller, id: &str, reference: &VersionRef) -> Result<Skill, SkillsError> {
        let skill = self.find(caller, id, Permission::Write).await?;
        let version = &skill.version(reference)?.record.version;
        let marker =
            self.catalog.folders.make_current(&skill.node, version, &skill.handler, &Preconditions::default()).await?;
        Ok(Skill::new(skill.node, skill.handler, marker))
    }

    /// Removes the version `reference` names from the skill's history (SPEC
    /// §12). Deleting the current version makes the newest remaining one
    /// current, so Anthropic's recipe — every version newest first, then the
    /// skill — works, and so does a rollback by deleting a bad latest
    /// version; deleting the only version deletes the skill (the skill
    /// delete that follows in the recipe is then done already). A version
    /// named again after its delete is [`Dropped::Already`].
    pub async fn drop_version(
        &self,
        caller: &Caller,
        id: &str,
        reference: &VersionRef,
    ) -> Result<Dropped, SkillsError> {
        let skill = match self.find(caller, id, Permission::Write).await {
            // The retry of the delete of a skill's only version, which deleted the skill.
            Err(SkillsError::NotFound(_)) if self.was_deleted(caller, id).await? => return Ok(Dropped::Already),
            found => found?,
        };
        let version = match skill.version(reference) {
            Ok(version) => version.clone(),
            Err(not_found) => {
                return if self.was_dropped(&skill, reference).await? { Ok(Dropped::Already) } else { Err(not_found) };
            }
        };
        if version.current {
            // Only over the version this decision was made on: an upload
            // that landed meanwhile is neither deleted nor made past.
            let unchanged =
                Preconditions { if_match: Some(EtagMatch::Tags(vec![skill.marker.etag.clone()])), if_none_match: None };
            let changed = |error| match error {
                FolderError::Precondition(_) => SkillsError::Conflict(format!(
                    "The skill {id} changed while its version was being deleted: list its versions and retry"
                )),
                error => error.into(),
            };
            let Some(next) = skill.versions().iter().find(|other| !other.current) else {
                let link =
                    Link { url: skill.node.url, location: skill.node.location, kind: Kind::Folder(skill.handler) };
                match self.catalog.delete(&link, &unchanged).await {
                    Err(CatalogError::Folder(error)) => return Err(changed(error)),
                    deleted => deleted?,
                }
                return Ok(Dropped::Version(Box::new(version)));
            };
            let engine = self.catalog.folders;
            engine
                .make_current(&skill.node, &next.record.version, &skill.handler, &unchanged)
                .await
                .map_err(changed)?;
        }
        self.catalog.folders.drop_version(&skill.node, &version.record.version).await?;
        Ok(Dropped::Version(Box::new(version)))
    }

    /// Whether the version `reference` names was one of `skill`'s and has
    /// been deleted: a number below the highest given (numbers are never
    /// given twice), or an id whose files wait for the sweep.
    async fn was_dropped(&self, skill: &Skill, reference: &VersionRef) -> Result<bool, SkillsError> {
        match reference {
            VersionRef::Number(number) => {
                let highest = skill.versions().iter().map(SkillVersion::number).max().unwrap_or(0);
                Ok(*number >= 1 && *number <= skill.marker.last_number.unwrap_or(0).max(highest))
            }
            VersionRef::Id(id) => match id.strip_prefix(VERSION_ID_PREFIX) {
                Some(version) => Ok(self.catalog.folders.version_was_dropped(&skill.node, version).await?),
                None => Ok(false),
            },
            VersionRef::Latest | VersionRef::Epoch(_) => Ok(false),
        }
    }

    /// The archive of the version `reference` names (`None`: the current
    /// one): its files under one folder, the skill's name, which is returned
    /// with it.
    pub async fn archive(
        &self,
        caller: &Caller,
        id: &str,
        reference: Option<&VersionRef>,
    ) -> Result<(String, BoxStream<'static, Result<Bytes, std::io::Error>>), SkillsError> {
        let skill = self.find(caller, id, Permission::Read).await?;
        let version = match reference {
            Some(reference) => skill.version(reference)?,
            None => skill.current(),
        };
        let engine = self.catalog.folders;
        let manifest = engine.version_for_read(&skill.node, &version.record.version).await?;
        let name = skill.name().to_string();
        let body = stream_zip(engine.store().clone(), skill.node.paths().clone(), manifest, Some(name.clone()));
        Ok((name, body.boxed()))
    }

    /// The handler's metadata of `version`, from the history record, or —
    /// for a record written before records carried it — its manifest.
    pub async fn version_metadata(
        &self,
        skill: &Skill,
        version: &SkillVersion,
    ) -> Result<indexmap::IndexMap<String, String>, SkillsError> {
        if !version.record.metadata.is_empty() {
            return Ok(version.record.metadata.clone());
        }
        Ok(self.catalog.folders.version_for_read(&skill.node, &version.record.version).await?.metadata)
    }
}

fn conflict(name: &str) -> SkillsError {
    SkillsError::Conflict(format!(
        "A skill named {name} already exists: add a version to it, or delete it first (the skill's name is the \
         upload's top-level folder)"
    ))
}

/// A live skill an identical create by `caller` would be the retry of.
fn is_retry_candidate(marker: &ResourceMarker, caller: &Caller) -> bool {
    marker.author.as_deref() == Some(caller.author_name().as_str())
        && marker.history.is_empty()
        && now_ms() - marker.created_at <= REPLAY_WINDOW_MS
}

/// At most [`SHOWN_CHARS`] characters of an id a client sent, for a
/// message (an id may be as long as a URL allows).
pub fn shown(id: &str) -> String {
    match id.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{}…", &id[..end]),
        None => id.to_string(),
    }
}

const SHOWN_CHARS: usize = 200;

fn encode_segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, crate::resource_url::SEGMENT_ESCAPES).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_ids_are_reversible_and_name_nothing_else() {
        let url = ResourceUrl::parse("skills/BUCKET123/folder/my-skill", Intent::Read).unwrap();
        let id = skill_id(&url, 1_764_504_000_123);
        assert!(id.starts_with("skill_") && !id.contains('/') && !id.contains('%'), "{id}");
        let (back, created) = parse_skill_id(&id).unwrap();
        assert_eq!((back.to_string(), created), (url.to_string(), 1_764_504_000_123));
        // A listing's form names the same skill.
        let folder_form = ResourceUrl::parse("skills/BUCKET123/folder/my-skill/", Intent::Read).unwrap();
        assert_eq!(skill_id(&folder_form, 1_764_504_000_123), id);
        for bad in ["skill_", "skill_abc", "skill_0OIl_1", "skillver_x_1", "nope", &id.replace("skill_", "skill-")] {
            assert!(parse_skill_id(bad).is_none(), "{bad}");
        }
        let prompt = ResourceUrl::parse("prompts/BUCKET123/x", Intent::Read).unwrap();
        assert!(parse_skill_id(&skill_id(&prompt, 1)).is_none(), "only the skills group");
    }

    #[test]
    fn base36_counts() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        assert_eq!(u64::from_str_radix(&base36(1_764_504_000_123), 36).unwrap(), 1_764_504_000_123);
    }
}
