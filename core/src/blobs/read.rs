//! Reading an item as stored: the trailer with one suffix read, then the
//! content pinned to the same object version, so content and metadata
//! always belong together.

use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStoreExt, UpdateVersion};

use super::BlobError;
use super::service::BlobService;
use super::trailer::{self, FOOTER_LEN, ItemMeta, TAIL_PROBE, Tail};

/// An item as stored: its metadata and the object's version.
pub(super) struct Stored {
    pub(super) meta: ItemMeta,
    pub(super) object: ObjectMeta,
}

impl Stored {
    pub(super) fn version(&self) -> UpdateVersion {
        UpdateVersion { e_tag: self.object.e_tag.clone(), version: self.object.version.clone() }
    }
}

impl BlobService {
    /// An item as stored, or `None` when there is no object.
    pub(super) async fn read_stored(&self, path: &Path) -> Result<Option<Stored>, BlobError> {
        let options = GetOptions { range: Some(GetRange::Suffix(TAIL_PROBE)), ..Default::default() };
        let result = match self.store.get_opts(path, options).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            // Azure has no suffix ranges: learn the size first.
            Err(object_store::Error::NotSupported { .. }) => {
                return match self.store.head(path).await {
                    Ok(object) => self.read_stored_at(&object).await,
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(error) => Err(error.into()),
                };
            }
            Err(error) => return Err(error.into()),
        };
        let object = result.meta.clone();
        let tail = result.bytes().await?;
        self.finish_read(object, &tail).await.map(Some)
    }

    /// An item whose size is known (from a listing or a `head`), pinned to
    /// that version: a `Precondition` error means it changed since.
    pub(super) async fn read_stored_at(&self, object: &ObjectMeta) -> Result<Option<Stored>, BlobError> {
        if object.size < FOOTER_LEN {
            let reason = trailer::TrailerError::TooShort(object.size);
            return Err(BlobError::Corrupt { path: object.location.to_string(), reason });
        }
        let start = object.size.saturating_sub(TAIL_PROBE);
        let options = GetOptions {
            range: Some((start..object.size).into()),
            if_match: object.e_tag.clone(),
            ..Default::default()
        };
        match self.store.get_opts(&object.location, options).await {
            Ok(result) => {
                let object = result.meta.clone();
                let tail = result.bytes().await?;
                self.finish_read(object, &tail).await.map(Some)
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn finish_read(&self, object: ObjectMeta, tail: &[u8]) -> Result<Stored, BlobError> {
        let corrupt = |reason| BlobError::Corrupt { path: object.location.to_string(), reason };
        let meta = match trailer::parse_tail(tail, object.size).map_err(corrupt)? {
            Tail::Complete(meta) => meta,
            Tail::NeedRange(range) => {
                let options =
                    GetOptions { range: Some(range.into()), if_match: object.e_tag.clone(), ..Default::default() };
                let json = self.store.get_opts(&object.location, options).await?.bytes().await?;
                trailer::decode_meta(&json, object.size).map_err(corrupt)?
            }
        };
        Ok(Stored { meta, object })
    }

    /// A listed object's item, or `None` when it is gone or not an item.
    /// A listed item's metadata: from the listing cache when this version
    /// was read before, else read from its trailer (and kept).
    pub(super) async fn read_listed(&self, object: &ObjectMeta) -> Result<Option<ItemMeta>, BlobError> {
        if let Some(meta) = self.listed.get(object) {
            return Ok(Some(meta));
        }
        let read = match self.read_stored_at(object).await {
            Ok(Some(stored)) => {
                // Pinned to the listed version by If-Match: keep it under that etag.
                self.listed.insert(object, stored.meta.clone(), stored.meta.heap_bytes());
                Ok(Some(stored))
            }
            // Rewritten since it was listed: read the current version.
            Err(BlobError::Storage(object_store::Error::Precondition { .. })) => {
                self.read_stored(&object.location).await
            }
            other => other,
        };
        match read {
            Err(BlobError::Corrupt { path, reason }) => {
                tracing::debug!(%path, %reason, "skipping an object that is not a v1 item");
                Ok(None)
            }
            other => other.map(|stored| stored.map(|stored| stored.meta)),
        }
    }
}
