//! Reading and writing the markers: typed reads with the token a
//! conditional write needs, and the commit itself — the one conditional
//! write of a resource marker, with the commit-id re-read on a lost race.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::error::FolderError;
use super::marker::{FolderMarker, ResourceMarker};
use super::node::Node;
use crate::etag::PreconditionFailed;

/// A marker as read, with the token a conditional write needs.
pub(super) struct ReadMarker<T> {
    pub(super) marker: T,
    pub(super) version: UpdateVersion,
}

pub(super) async fn read_resource_marker(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
) -> Result<Option<ReadMarker<ResourceMarker>>, FolderError> {
    read_json(store, &node.paths.resource_marker()).await
}

pub(super) async fn read_folder_marker(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
) -> Result<Option<ReadMarker<FolderMarker>>, FolderError> {
    read_json(store, &node.paths.folder_marker()).await
}

/// The live (ready) marker of a resource.
pub(super) async fn live_marker(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
) -> Result<Option<ResourceMarker>, FolderError> {
    Ok(read_resource_marker(store, node).await?.map(|r| r.marker).filter(ResourceMarker::is_ready))
}

/// The commit: a conditional write of the marker. On a lost race the
/// marker is re-read: if it carries our commit id, the write landed.
pub(super) async fn write_marker(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
    marker: &ResourceMarker,
    expected: Option<UpdateVersion>,
) -> Result<(), FolderError> {
    let mode = match expected {
        Some(version) => PutMode::Update(version),
        None => PutMode::Create,
    };
    let path = node.paths.resource_marker();
    let payload = PutPayload::from(marker.to_json());
    match store.put_opts(&path, payload, PutOptions { mode, ..Default::default() }).await {
        Ok(_) => Ok(()),
        Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => {
            match read_resource_marker(store, node).await? {
                Some(read) if read.marker.commit_id == marker.commit_id => Ok(()),
                _ => Err(FolderError::Precondition(PreconditionFailed(format!(
                    "{} was changed by another request; re-read it and retry",
                    node.url
                )))),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// Reads and parses a JSON marker with its conditional-write token.
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
) -> Result<Option<ReadMarker<T>>, FolderError> {
    let result = match store.get(path).await {
        Ok(result) => result,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
    let bytes = result.bytes().await?;
    Ok(Some(ReadMarker { marker: parse_json(path, &bytes)?, version }))
}

/// A marker's JSON, parsed; what cannot be parsed is a storage error naming
/// the object.
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, FolderError> {
    serde_json::from_slice(bytes).map_err(|e| {
        FolderError::Storage(object_store::Error::Generic { store: "marker", source: format!("{path}: {e}").into() })
    })
}
