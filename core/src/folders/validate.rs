//! The handler's check of a version's file set, through [`VersionFiles`]:
//! the [`FileSource`] the guest's `files.read` reads the store through (the
//! one seam between the engine and the runtime).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use indexmap::IndexMap;
use object_store::{ObjectStore, ObjectStoreExt};

use super::error::FolderError;
use super::layout::NodePaths;
use super::marker::FileRecord;
use super::node::Node;
use crate::handlers::files::ReadFuture;
use crate::handlers::{Checked, FileEntry, FileSource, Handler, Problem, ReadError};

/// Runs the handler on a version's file set: the problems, or the
/// marker metadata and the warnings to keep.
pub(super) async fn check_with_handler(
    store: &Arc<dyn ObjectStore>,
    node: &Node,
    version: &str,
    files: &BTreeMap<String, FileRecord>,
    handler: &Handler,
) -> Result<(IndexMap<String, String>, Vec<Problem>), FolderError> {
    let entries: Vec<FileEntry> =
        files.iter().map(|(path, record)| FileEntry { path: path.clone(), size: record.size }).collect();
    let files = Arc::new(VersionFiles {
        store: store.clone(),
        paths: node.paths.clone(),
        version: version.to_string(),
        files: files.clone(),
        failure: std::sync::Mutex::new(None),
    });
    let source: Arc<dyn FileSource> = files.clone();
    let info = node.resource_info();
    let type_name = handler.description().type_name.clone();
    let checked = handler.check(&info, &entries, source).await;
    // A file the store failed to give is the host's failure, not a
    // problem of the upload, whatever the handler made of it.
    files.take_failure()?;
    match checked? {
        Checked::Valid { warnings, metadata } => Ok((metadata, warnings)),
        Checked::Invalid { problems } => Err(FolderError::Invalid { type_name, problems }),
    }
}

/// The files of one version, for a handler's `files.read`. A storage
/// failure is kept for the engine (which answers it as the host's error)
/// and reaches the guest without detail: store errors name internal paths.
struct VersionFiles {
    store: Arc<dyn ObjectStore>,
    paths: NodePaths,
    version: String,
    files: BTreeMap<String, FileRecord>,
    failure: std::sync::Mutex<Option<object_store::Error>>,
}

impl VersionFiles {
    fn take_failure(&self) -> Result<(), FolderError> {
        let failure = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        failure.map_or(Ok(()), |error| Err(FolderError::Storage(error)))
    }
}

impl FileSource for VersionFiles {
    fn read<'a>(&'a self, path: &'a str, offset: u64, len: u32) -> ReadFuture<'a> {
        Box::pin(async move {
            let record = self.files.get(path).ok_or(ReadError::NotFound)?;
            let end = offset.saturating_add(len as u64).min(record.size);
            if offset >= end {
                return Ok(Bytes::new());
            }
            match self.store.get_range(&self.paths.file(&self.version, path), offset..end).await {
                Ok(bytes) => Ok(bytes),
                Err(error) => {
                    *self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error);
                    Err(ReadError::Storage("the file could not be read".into()))
                }
            }
        })
    }
}
