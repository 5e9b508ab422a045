//! The markers that make a prefix a DIAL resource or a DIAL folder — kept in
//! the parent's index, `.dial-resources/<name>` and `.dial-folders/<name>`
//! (see `layout.rs`) — and the aggregate etag.
//!
//! A resource marker is the single source of truth for its resource: its
//! state, the version subtree it points to, the file manifest (so listing
//! files and building the ZIP never list the object store), the handler's
//! cached metadata and warnings. Writing it is the commit point of every
//! mutation.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::handlers::Problem;
use crate::hashing::{hex, md5_hex};

/// A version's snapshot of its marker (`v/<version>/.dial-resource`), and
/// where a resource's marker was before issue 28.
pub const RESOURCE_MARKER: &str = ".dial-resource";
/// Where a folder's marker was before issue 28.
pub const FOLDER_MARKER: &str = ".dial-folder";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarkerState {
    Ready,
    /// A tombstone: the resource counts as absent everywhere.
    Deleting,
}

/// One file of the current version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// MD5 hex of the content: content-derived, so a copy has the same etag.
    pub etag: String,
    pub size: u64,
    /// SHA-256 hex of the content, computed while the upload streamed (what
    /// agents verify a file by); absent in versions written before it was
    /// kept, until [`FolderEngine::file_digests`](super::engine::FolderEngine::file_digests)
    /// adds it. Not part of the aggregate etag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A resource's marker document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMarker {
    #[serde(rename = "type")]
    pub type_name: String,
    pub schema_version: u32,
    pub state: MarkerState,
    pub current_version: String,
    /// Aggregate etag of the current file set.
    pub etag: String,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<i64>,
    /// When the sweep removed a tombstone's files. The tombstone itself is
    /// kept (stores cannot delete conditionally, and an unconditional delete
    /// could remove a re-create that committed meanwhile); a re-create is a
    /// conditional write over it like over any tombstone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purged_at: Option<i64>,
    /// Unique per commit: after an ambiguous conditional write the writer
    /// re-reads the marker and recognises its own commit.
    pub commit_id: String,
    #[serde(default)]
    /// In the order the handler gave it (listings show it so).
    pub metadata: IndexMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Problem>,
    /// Relative path → record, sorted.
    pub files: BTreeMap<String, FileRecord>,
    /// When the current version was committed, and by whom (`createdAt` and
    /// `author` above are the resource's). Absent in markers written before
    /// version history: `updatedAt` and `author` stand in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_by: Option<String>,
    /// The earlier versions retention keeps, newest first. Each one's
    /// manifest is the marker it had as the current version, kept at
    /// `v/<version>/.dial-resource` (a name no file may take).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<VersionRecord>,
    /// The current version's number: versions are numbered 1, 2, … per
    /// resource in the order they were committed, and a number is never
    /// given twice (the hosted skills APIs name versions by it). Absent in
    /// markers written before numbering: [`ResourceMarker::numbered`]
    /// derives the numbers from the commit order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// The highest number given so far (a deleted newest version's number
    /// is not given again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_number: Option<u64>,
    /// A label for people, set by the hosted skills APIs (Anthropic's
    /// `display_name`): not part of the file set, carried by every commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The SHA-256 of the archive the host serves for a version (the
    /// well-known index's `digest`), kept once computed; it answers only
    /// for the version and archive format it names, so a marker carried over
    /// to another version never vouches for the wrong bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveDigest>,
}

/// Marker metadata kept for agents, not shown in DIAL's listings: the skill
/// handler's whole frontmatter as JSON (`frontmatter`, what the MCP Skills
/// Extension serves verbatim without reading SKILL.md).
pub const FRONTMATTER_METADATA: &str = "frontmatter";

/// What archives are built with (`archive::stream_zip`): the entries in
/// path order, no timestamps (1980-01-01), each file deflated or stored by
/// its name, by this zip writer. The same version gives the same bytes on
/// every instance and every GET; when a dependency upgrade changes the bytes
/// (the golden test in `archive.rs` says so), this number goes up, and the
/// archive digests kept with versions ([`ResourceMarker::archive`]) are
/// computed again.
pub const ARCHIVE_FORMAT: u32 = 1;

/// What one version's archive hashes to ([`ResourceMarker::archive`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveDigest {
    pub version: String,
    /// [`ARCHIVE_FORMAT`] the archive was built with.
    pub format: u32,
    pub sha256: String,
}

impl ResourceMarker {
    /// The kept digest of the current version's archive, if it is that
    /// version's and of today's archive format.
    pub fn archive_sha256(&self) -> Option<&str> {
        self.archive
            .as_ref()
            .filter(|archive| archive.version == self.current_version && archive.format == ARCHIVE_FORMAT)
            .map(|archive| archive.sha256.as_str())
    }
}

/// One retained earlier version, as the version listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionRecord {
    pub version: String,
    pub etag: String,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub files: usize,
    pub bytes: u64,
    /// Set when the version fell out of the newest `keep_versions` and is
    /// kept only for its age: it expires then, and a journal entry for it
    /// makes the sweep look at it until it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_until: Option<i64>,
    /// The version's number (see [`ResourceMarker::number`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// The handler's metadata of the version (its `name` and
    /// `description`), so a version listing needs no manifest reads. Absent
    /// in records written before it: the manifest has it.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub metadata: IndexMap<String, String>,
}

impl VersionRecord {
    /// Whether readers still see the version at `now`: an age-kept one
    /// stops being visible when its time is out, and stays in the history
    /// (so in the store) for the grace period after that.
    pub fn visible_at(&self, now: i64) -> bool {
        self.keep_until.is_none_or(|until| until > now)
    }
}

impl ResourceMarker {
    pub fn is_ready(&self) -> bool {
        self.state == MarkerState::Ready
    }

    /// When a tombstone stops being restorable (`grace_ms` after its delete);
    /// `None` for a live resource and for one whose files the sweep removed.
    pub fn restorable_until(&self, grace_ms: i64) -> Option<i64> {
        if self.is_ready() || self.purged_at.is_some() {
            return None;
        }
        Some(self.deleted_at.unwrap_or(0).saturating_add(grace_ms))
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }

    /// The current version as a history entry.
    pub fn current_record(&self) -> VersionRecord {
        VersionRecord {
            version: self.current_version.clone(),
            etag: self.etag.clone(),
            created_at: self.committed_at.unwrap_or(self.updated_at),
            author: self.committed_by.clone().or_else(|| self.author.clone()),
            files: self.files.len(),
            bytes: self.total_bytes(),
            keep_until: None,
            number: self.number,
            // The frontmatter kept for agents is the current version's only.
            metadata: self
                .metadata
                .iter()
                .filter(|(key, _)| *key != FRONTMATTER_METADATA)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The marker with every version numbered. A marker written before
    /// numbering gets the numbers of its commit order (its history is
    /// newest first and the current version the newest), the numbers every
    /// later commit keeps; a numbered marker is returned as it is.
    pub fn numbered(mut self) -> Self {
        if self.number.is_some() {
            return self;
        }
        let count = self.history.len() as u64 + 1;
        for (index, record) in self.history.iter_mut().enumerate() {
            record.number = Some(count - 1 - index as u64);
        }
        self.number = Some(count);
        self.last_number = Some(self.last_number.unwrap_or(0).max(count));
        self
    }

    /// The number the next committed version gets.
    pub fn next_number(&self) -> u64 {
        // Unnumbered, the current version is the newest of its history.
        let current = self.number.unwrap_or(self.history.len() as u64 + 1);
        self.last_number.unwrap_or(0).max(current) + 1
    }

    /// The current version and the visible history at `now`, newest
    /// (highest number) first, each with whether it is the current one.
    /// The current version is the newest unless a retained one was
    /// committed without becoming current, or an older one was made
    /// current again ([`FolderEngine::make_current`](super::FolderEngine::make_current)).
    pub fn versions_newest_first(&self, now: i64) -> Vec<(VersionRecord, bool)> {
        let numbered = match self.number {
            Some(_) => std::borrow::Cow::Borrowed(self),
            None => std::borrow::Cow::Owned(self.clone().numbered()),
        };
        let mut all: Vec<(VersionRecord, bool)> = std::iter::once((numbered.current_record(), true))
            .chain(
                numbered.history.iter().filter(|record| record.visible_at(now)).map(|record| (record.clone(), false)),
            )
            .collect();
        all.sort_by_key(|(record, _)| std::cmp::Reverse((record.number, record.created_at)));
        all
    }

    /// What is kept at `v/<current version>/.dial-resource` when the version
    /// becomes history: this marker without the history.
    pub fn version_snapshot(&self) -> Vec<u8> {
        let snapshot = Self { history: Vec::new(), ..self.clone() };
        snapshot.to_json()
    }

    /// Every version this marker keeps: the current one, then its history.
    pub fn referenced_versions(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.current_version.as_str()).chain(self.history.iter().map(|r| r.version.as_str()))
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a marker always serialises")
    }
}

/// The `.dial-folder` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderMarker {
    pub schema_version: u32,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

impl FolderMarker {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a folder marker always serialises")
    }

    /// A folder's etag: the MD5 of its marker (what its PUT answered).
    pub fn etag(&self) -> String {
        md5_hex(&self.to_json())
    }
}

/// The aggregate etag: MD5 over the sorted `(path, file etag)` pairs, so it
/// depends on content only (an identical copy has the same one).
pub fn aggregate_etag(files: &BTreeMap<String, FileRecord>) -> String {
    let mut hasher = Md5::new();
    for (path, record) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(record.etag.as_bytes());
        hasher.update([b'\n']);
    }
    hex(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, FileRecord> {
        pairs.iter().map(|(p, e)| (p.to_string(), FileRecord { etag: e.to_string(), size: 1, sha256: None })).collect()
    }

    #[test]
    fn aggregate_etag_depends_on_paths_and_contents_only() {
        let a = aggregate_etag(&files(&[("SKILL.md", "aa"), ("x/y", "bb")]));
        assert_eq!(a, aggregate_etag(&files(&[("x/y", "bb"), ("SKILL.md", "aa")])));
        assert_ne!(a, aggregate_etag(&files(&[("SKILL.md", "aa"), ("x/y", "bc")])));
        assert_ne!(a, aggregate_etag(&files(&[("SKILL.md", "aa"), ("x/z", "bb")])));
        // Path/etag boundaries cannot be shifted to collide.
        assert_ne!(aggregate_etag(&files(&[("ab", "c")])), aggregate_etag(&files(&[("a", "bc")])));
        assert_eq!(a.len(), 32);
    }

    #[test]
    fn marker_json_round_trip_uses_the_seed_field_names() {
        let marker = ResourceMarker {
            type_name: "skill".into(),
            schema_version: SCHEMA_VERSION,
            state: MarkerState::Deleting,
            current_version: "v1".into(),
            etag: "e".into(),
            created_at: 1,
            updated_at: 2,
            author: Some("alice".into()),
            deleted_at: Some(3),
            purged_at: None,
            commit_id: "c".into(),
            metadata: IndexMap::from([("name".into(), "x".into())]),
            warnings: vec![],
            files: files(&[("SKILL.md", "aa")]),
            committed_at: None,
            committed_by: None,
            history: vec![],
            number: None,
            last_number: None,
            display_name: None,
            archive: None,
        };
        let json: serde_json::Value = serde_json::from_slice(&marker.to_json()).unwrap();
        assert_eq!(json["type"], "skill");
        assert_eq!(json["state"], "deleting");
        assert_eq!(json["currentVersion"], "v1");
        assert_eq!(json["deletedAt"], 3);
        let back: ResourceMarker = serde_json::from_value(json).unwrap();
        assert_eq!(back, marker);
    }
}
