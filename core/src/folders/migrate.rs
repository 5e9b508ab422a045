//! Moving a store written before issue 28 to the layout of today: each
//! resource's and folder's marker out of its own prefix (`<name>/.dial-resource`)
//! into its parent's index (`.dial-resources/<name>`, see [`super::layout`]).
//!
//! Runs once per store, at start-up, before the server answers anything:
//! the first instance takes the migration lock, moves every marker (a
//! create-only copy, then the old one deleted — so a crash midway is
//! finished by the next start, and a marker already moved is never
//! overwritten) and then writes `.dial-host/layout.json`; every start after
//! that reads the document and does nothing. Instances of a version before
//! issue 28 must all be stopped first: they would read and write the old
//! places (docs/operations.md).

use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use super::engine::FolderEngine;
use super::error::FolderError;
use super::layout::{FOLDER_INDEX, RESOURCE_INDEX, VERSIONS_DIR, folder_marker_of, resource_marker_of};
use super::marker::{FOLDER_MARKER, FolderMarker, RESOURCE_MARKER, ResourceMarker};
use crate::clock::now_ms;
use crate::locks::LockError;

/// Says which layout the store is in.
pub const LAYOUT_DOCUMENT: &str = ".dial-host/layout.json";
/// The layout with markers in their parent's index.
pub const INDEXED_LAYOUT: u32 = 2;
const MIGRATION_LOCK: &str = "layout-migration";
/// Markers moved at once.
const MOVES_IN_FLIGHT: usize = 16;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LayoutDocument {
    layout: u32,
    migrated_at: i64,
}

/// What a migration moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    pub resources: usize,
    pub folders: usize,
    /// Markers found in both places (a migration cut short): the moved one kept.
    pub already_moved: usize,
    /// Objects named like a marker that are not one (a v1 item), left as they are.
    pub left_alone: usize,
}

#[derive(Debug, Clone, Copy)]
enum Legacy {
    Resource,
    Folder,
}

impl FolderEngine {
    /// Moves the store to the indexed layout unless it is there; `None`
    /// when there was nothing to do.
    pub async fn migrate_layout(&self) -> Result<Option<Migration>, FolderError> {
        if self.layout_is_current().await? {
            return Ok(None);
        }
        let _lock = loop {
            match self.locks.acquire(MIGRATION_LOCK).await {
                Ok(lock) => break lock,
                // Another instance is migrating: wait for it.
                Err(LockError::Timeout { .. }) if !self.layout_is_current().await? => continue,
                Err(LockError::Timeout { .. }) => return Ok(None),
                Err(error) => return Err(error.into()),
            }
        };
        if self.layout_is_current().await? {
            return Ok(None);
        }
        // Moves overlap (a GET, a create-only PUT and a DELETE each), so a
        // store of 100 000 markers on S3 moves in minutes, not hours.
        let moves: Vec<Result<Moved, FolderError>> = self
            .store
            .list(None)
            .map_err(FolderError::from)
            .try_filter_map(|meta| {
                std::future::ready(Ok(legacy_marker(&meta.location).map(|legacy| (meta.location, legacy))))
            })
            .map_ok(|(location, legacy)| async move { self.move_marker(&location, legacy).await })
            .try_buffer_unordered(MOVES_IN_FLIGHT)
            .collect()
            .await;
        let mut moved = Migration::default();
        for result in moves {
            match result? {
                Moved::Resource => moved.resources += 1,
                Moved::Folder => moved.folders += 1,
                Moved::Already => moved.already_moved += 1,
                Moved::NotAMarker | Moved::Gone => moved.left_alone += 1,
            }
        }
        let document = LayoutDocument { layout: INDEXED_LAYOUT, migrated_at: now_ms() };
        let json = serde_json::to_vec(&document).expect("a layout document serializes");
        self.store.put(&Path::from(LAYOUT_DOCUMENT), PutPayload::from(json)).await?;
        Ok(Some(moved))
    }

    async fn layout_is_current(&self) -> Result<bool, FolderError> {
        match self.store.get(&Path::from(LAYOUT_DOCUMENT)).await {
            Ok(read) => {
                let bytes = read.bytes().await?;
                let document: LayoutDocument = super::markers::parse_json(&Path::from(LAYOUT_DOCUMENT), &bytes)?;
                Ok(document.layout >= INDEXED_LAYOUT)
            }
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    async fn move_marker(&self, from: &Path, legacy: Legacy) -> Result<Moved, FolderError> {
        let mut parts: Vec<_> = from.parts().collect();
        parts.pop();
        // A node the new layout reserves the name of would land inside its
        // parent's index: the operator renames it with the old version first.
        if let Some(name) = parts.last().map(|part| part.as_ref().to_string())
            && (name == RESOURCE_INDEX || name == FOLDER_INDEX)
        {
            return Err(FolderError::BadRequest(format!(
                "{from}: a resource or folder named '{name}' cannot be moved to the indexed layout (the name is \
                 reserved now); rename it with the previous version of dial-host, then start this one"
            )));
        }
        let base = Path::from_iter(parts);
        let to = match legacy {
            Legacy::Resource => resource_marker_of(&base),
            Legacy::Folder => folder_marker_of(&base),
        };
        let bytes = match self.store.get(from).await {
            Ok(read) => read.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(Moved::Gone),
            Err(error) => return Err(error.into()),
        };
        // Only a marker moves: a v1 item named like one (its group's items
        // share the tree) ends with its metadata trailer, never parses as
        // the bare JSON document a marker is, and stays where it is.
        let is_marker = match legacy {
            Legacy::Resource => serde_json::from_slice::<ResourceMarker>(&bytes).is_ok(),
            Legacy::Folder => serde_json::from_slice::<FolderMarker>(&bytes).is_ok(),
        };
        if !is_marker {
            return Ok(Moved::NotAMarker);
        }
        let create = PutOptions { mode: PutMode::Create, ..Default::default() };
        let moved = match self.store.put_opts(&to, PutPayload::from(bytes), create).await {
            Ok(_) => match legacy {
                Legacy::Resource => Moved::Resource,
                Legacy::Folder => Moved::Folder,
            },
            Err(object_store::Error::AlreadyExists { .. }) => Moved::Already,
            Err(error) => return Err(error.into()),
        };
        match self.store.delete(from).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(moved),
            Err(error) => Err(error.into()),
        }
    }
}

/// What became of one old marker.
enum Moved {
    Resource,
    Folder,
    /// Found in both places (a migration cut short): the moved one kept.
    Already,
    /// Named like a marker, but not one (a v1 item).
    NotAMarker,
    /// Gone since it was listed.
    Gone,
}

/// A marker of the old layout at `location`: `<node>/.dial-resource` or
/// `<node>/.dial-folder` — not a version's snapshot of its marker
/// (`<resource>/v/<version>/.dial-resource`; no node is named `v`), and
/// nothing of the host's own.
fn legacy_marker(location: &Path) -> Option<Legacy> {
    let parts: Vec<_> = location.parts().collect();
    if parts.first().is_some_and(|first| first.as_ref() == ".dial-host") || parts.len() < 2 {
        return None;
    }
    let in_a_version = parts.len() >= 3 && parts[parts.len() - 3].as_ref() == VERSIONS_DIR;
    match parts.last()?.as_ref() {
        RESOURCE_MARKER if !in_a_version => Some(Legacy::Resource),
        FOLDER_MARKER => Some(Legacy::Folder),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_markers_are_told_from_snapshots_and_the_hosts_own() {
        let kind = |path: &str| legacy_marker(&Path::from(path)).map(|kind| matches!(kind, Legacy::Resource));
        assert_eq!(kind("Users/a/skills/team/pdf/.dial-resource"), Some(true));
        assert_eq!(kind("Users/a/skills/team/.dial-folder"), Some(false));
        assert_eq!(kind("Users/v/skills/pdf/.dial-resource"), Some(true), "a user named v");
        assert_eq!(kind("Users/a/skills/pdf/v/0123/.dial-resource"), None, "a version's snapshot");
        assert_eq!(kind("Users/a/skills/pdf/v/0123/docs/a.md"), None);
        assert_eq!(kind("Users/a/skills/.dial-resources/pdf"), None, "already moved");
        assert_eq!(kind(".dial-host/gc/1-x.json"), None);
    }
}
