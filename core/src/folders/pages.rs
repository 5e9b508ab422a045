//! The folder engine's flat listings that stop at their page
//! ([`super::pager`] on S3; the store's `start-after` elsewhere).

use futures_util::stream::{self, BoxStream};
use futures_util::{StreamExt, TryStreamExt};
use object_store::ObjectMeta;
use object_store::path::Path;

use super::engine::FolderEngine;
use super::pager::Pager;

impl FolderEngine {
    /// Lists through `pager` where a page needs fewer keys than a store
    /// listing asks for (S3).
    pub fn with_pager(mut self, pager: Option<Pager>) -> Self {
        self.pager = pager;
        self
    }

    /// The objects directly under `folder` (a flat one) after `offset` (absent:
    /// from the start), in key order; about `keys` of them are what the
    /// caller expects to pull.
    pub(super) fn list_page_after(
        &self,
        folder: &Path,
        offset: Option<&Path>,
        keys: usize,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        if let Some(pager) = &self.pager {
            return pager.clone().list_after(folder, offset, keys);
        }
        if self.lists_in_key_order {
            return match offset {
                Some(offset) => self.store.list_with_offset(Some(folder), offset),
                None => self.store.list(Some(folder)),
            };
        }
        // A store that lists in no order (the bare local disk the benches
        // compare against): the whole prefix, sorted.
        let (store, folder, offset) = (self.store.clone(), folder.clone(), offset.cloned());
        stream::once(async move {
            // The folders paged here are flat: a delimiter listing is every object.
            let mut all: Vec<ObjectMeta> = store.list_with_delimiter(Some(&folder)).await?.objects;
            all.retain(|object| offset.as_ref().is_none_or(|offset| object.location.as_ref() > offset.as_ref()));
            all.sort_by(|a, b| a.location.cmp(&b.location));
            Ok::<_, object_store::Error>(stream::iter(all.into_iter().map(Ok)))
        })
        .try_flatten()
        .boxed()
    }
}
