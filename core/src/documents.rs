//! Small JSON documents the host keeps for itself (sharing grants,
//! invitations, publications, public-folder rules), updated with
//! compare-and-swap so concurrent writers on any instance never lose an
//! update.
//!
//! They live under `system/`, beside the bucket locations (`Users/`, `Keys/`,
//! `public/`), where no resource URL can reach them.

use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::buckets::BucketLocation;

/// Attempts before a contended update gives up.
const MAX_ATTEMPTS: u32 = 32;

#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("storage error: {0}")]
    Storage(#[from] object_store::Error),
    #[error("document {path} is corrupt: {error}")]
    Corrupt { path: String, error: serde_json::Error },
    #[error("document {0} is too contended; retry later")]
    Contended(String),
}

/// Reads and updates JSON documents in the object store.
#[derive(Debug, Clone)]
pub struct Documents {
    store: Arc<dyn ObjectStore>,
}

/// Where a document of `kind` about `location` lives:
/// `system/<kind>/<location parts…>/<name>.json`.
pub fn path_for(kind: &str, location: &BucketLocation, name: &str) -> Path {
    let location = location.to_string();
    let parts = ["system", kind]
        .into_iter()
        .chain(location.split('/').filter(|p| !p.is_empty()))
        .map(str::to_string)
        .chain(std::iter::once(format!("{name}.json")));
    Path::from_iter(parts)
}

/// A global document: `system/<kind…>/<name>.json` (`kind` may hold `/`).
pub fn global_path(kind: &str, name: &str) -> Path {
    let parts = std::iter::once("system").chain(kind.split('/')).map(str::to_string);
    Path::from_iter(parts.chain(std::iter::once(format!("{name}.json"))))
}

impl Documents {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self { store }
    }

    /// The document, or its default when it was never written.
    pub async fn read<T: DeserializeOwned + Default>(&self, path: &Path) -> Result<T, DocumentError> {
        Ok(self.read_versioned(path).await?.0)
    }

    async fn read_versioned<T: DeserializeOwned + Default>(
        &self,
        path: &Path,
    ) -> Result<(T, Option<UpdateVersion>), DocumentError> {
        let result = match self.store.get(path).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok((T::default(), None)),
            Err(error) => return Err(error.into()),
        };
        let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
        let bytes = result.bytes().await?;
        let document =
            serde_json::from_slice(&bytes).map_err(|error| DocumentError::Corrupt { path: path.to_string(), error })?;
        Ok((document, Some(version)))
    }

    /// Applies `change` to the current document and writes it back only if
    /// nobody wrote in between; otherwise re-reads and applies it again.
    /// `change` may refuse (its error is returned and nothing is written) or
    /// answer `Unchanged` to skip the write.
    pub async fn update<T, R, E>(
        &self,
        path: &Path,
        mut change: impl FnMut(&mut T) -> Result<Update<R>, E>,
    ) -> Result<R, E>
    where
        T: DeserializeOwned + Serialize + Default,
        E: From<DocumentError>,
    {
        for attempt in 0..MAX_ATTEMPTS {
            let (mut document, version) = self.read_versioned::<T>(path).await?;
            let result = match change(&mut document)? {
                Update::Unchanged(result) => return Ok(result),
                Update::Changed(result) => result,
            };
            let mode = match version {
                Some(version) => PutMode::Update(version),
                None => PutMode::Create,
            };
            let payload = PutPayload::from(serde_json::to_vec(&document).expect("documents serialize"));
            match self.store.put_opts(path, payload, PutOptions { mode, ..Default::default() }).await {
                Ok(_) => return Ok(result),
                Err(object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. }) => {
                    let backoff = 2 + u64::from(attempt) * 3 + rand::random_range(0..5);
                    tokio::time::sleep(Duration::from_millis(backoff)).await;
                }
                Err(error) => return Err(DocumentError::from(error).into()),
            }
        }
        Err(DocumentError::Contended(path.to_string()).into())
    }

    /// Writes a new document; false when one already exists.
    pub async fn create<T: Serialize>(&self, path: &Path, document: &T) -> Result<bool, DocumentError> {
        let payload = PutPayload::from(serde_json::to_vec(document).expect("documents serialize"));
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(path, payload, options).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Removes a document (absent is fine).
    pub async fn delete(&self, path: &Path) -> Result<(), DocumentError> {
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// A document that may not exist.
    pub async fn get<T: DeserializeOwned>(&self, path: &Path) -> Result<Option<T>, DocumentError> {
        match self.store.get(path).await {
            Ok(result) => {
                let bytes = result.bytes().await?;
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|error| DocumentError::Corrupt { path: path.to_string(), error })
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

/// What an update's closure decided.
pub enum Update<R> {
    /// Write the changed document, then return `R`.
    Changed(R),
    /// Nothing to write; return `R`.
    Unchanged(R),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_updates_all_land() {
        let documents = Documents::new(Arc::new(object_store::memory::InMemory::new()));
        let path = global_path("test", "counter");
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let documents = documents.clone();
            let path = path.clone();
            tasks.spawn(async move {
                documents
                    .update(&path, |map: &mut BTreeMap<String, u32>| {
                        map.insert(format!("writer-{i}"), i);
                        Ok::<_, DocumentError>(Update::Changed(()))
                    })
                    .await
            });
        }
        for result in tasks.join_all().await {
            result.unwrap();
        }
        let map: BTreeMap<String, u32> = documents.read(&path).await.unwrap();
        assert_eq!(map.len(), 16);
    }

    #[test]
    fn documents_live_outside_every_bucket() {
        let path = path_for("sharing", &BucketLocation::User("alice".into()), "grants");
        assert_eq!(path.as_ref(), "system/sharing/Users/alice/grants.json");
        assert_eq!(global_path("publication/items", "x").as_ref(), "system/publication/items/x.json");
    }
}
