//! The object store behind every resource, chosen by URL.
//!
//! `file:///path` (the embedded default: `<data_dir>/store`) and `memory://`
//! are built in.

use std::sync::Arc;

use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("unsupported storage URL '{0}': use file:///absolute/path or memory://")]
    UnsupportedUrl(String),
    #[error("cannot prepare local storage at {path}: {error}")]
    LocalDir { path: String, error: std::io::Error },
    #[error(transparent)]
    Store(#[from] object_store::Error),
}

/// Opens the store a URL names.
pub fn open(url: &str) -> Result<Arc<dyn ObjectStore>, StorageError> {
    if url == "memory://" || url == "memory:///" {
        return Ok(Arc::new(InMemory::new()));
    }
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(StorageError::UnsupportedUrl(url.into()));
        }
        std::fs::create_dir_all(path).map_err(|error| StorageError::LocalDir { path: path.into(), error })?;
        return Ok(Arc::new(LocalFileSystem::new_with_prefix(path)?));
    }
    Err(StorageError::UnsupportedUrl(url.into()))
}

/// Whether the store answers: a `head` of a key that need not exist.
pub async fn check_ready(store: &dyn ObjectStore) -> Result<(), StorageError> {
    match store.head(&Path::from(".dial-host/ready-probe")).await {
        Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn opens_supported_urls() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&format!("file://{}/nested", dir.path().display())).unwrap();
        check_ready(store.as_ref()).await.unwrap();
        assert!(dir.path().join("nested").is_dir());
        check_ready(open("memory://").unwrap().as_ref()).await.unwrap();
    }

    #[test]
    fn rejects_other_urls() {
        for url in ["file://relative", "ftp://x", "s4://bucket", ""] {
            assert!(matches!(open(url), Err(StorageError::UnsupportedUrl(_))), "{url}");
        }
    }
}
