//! DIAL folders: created with their missing ancestors, deleted only when
//! empty, both under the bucket lock.

use object_store::{ObjectStoreExt, PutMode, PutOptions};

use super::engine::FolderEngine;
use super::error::FolderError;
use super::marker::{FolderMarker, SCHEMA_VERSION};
use super::node::Node;
use crate::clock::now_ms;
use crate::etag::Preconditions;
use crate::events::EventAction;

impl FolderEngine {
    /// Creates a DIAL folder (and any missing ancestors).
    pub async fn create_folder(&self, node: &Node, author: Option<String>) -> Result<FolderMarker, FolderError> {
        if node.url.is_bucket_root() {
            return Err(FolderError::BadRequest("The bucket root always exists".into()));
        }
        self.path_limits.check(&node.paths.folder_marker())?;
        let lock = self.locks.acquire(&node.bucket_lock_key()).await?;
        self.check_structure_for_create(node).await?;
        if self.read_folder_marker(node).await?.is_some() {
            return Err(FolderError::BadRequest(format!("Folder already exists: {}", node.url)));
        }
        self.vivify_ancestors(node, author.as_deref()).await?;
        lock.ensure_held()?;
        let marker = FolderMarker { schema_version: SCHEMA_VERSION, created_at: now_ms(), author };
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(&node.paths.folder_marker(), marker.to_json().into(), options).await {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(FolderError::BadRequest(format!("Folder already exists: {}", node.url)));
            }
            Err(error) => return Err(error.into()),
        }
        self.publish(EventAction::Create, node, None).await;
        Ok(marker)
    }

    /// Deletes an empty DIAL folder; never cascades. `If-Match` compares
    /// the folder's etag (the one its PUT answered).
    pub async fn delete_folder(&self, node: &Node, conditions: &Preconditions) -> Result<(), FolderError> {
        let _lock = self.locks.acquire(&node.bucket_lock_key()).await?;
        let marker = match node.url.is_bucket_root() {
            true => None,
            false => self.read_folder_marker(node).await?,
        };
        let Some(marker) = marker else {
            return Err(FolderError::NotFound(node.url.to_string()));
        };
        conditions.check_write(Some(&marker.marker.etag()))?;
        let listing = self.list_children(node, None, 1, &|_| true).await?;
        if !listing.items.is_empty() {
            return Err(FolderError::FolderNotEmpty(node.url.to_string()));
        }
        // "Empty" holds only while the bucket lock does, and the delete is
        // unconditional: never delete on a lease that may have run out.
        _lock.ensure_held()?;
        self.store.delete(&node.paths.folder_marker()).await?;
        self.publish(EventAction::Delete, node, None).await;
        Ok(())
    }
}
