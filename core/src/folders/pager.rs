//! S3's paged listing for the folder engine: each request asks for no more
//! keys than the page still needs (`max-keys`: the page's length first, then
//! twice as many each time, up to the 1 000 S3 gives at most) instead of
//! 1 000 whatever the page. Counted as `list_page` store operations.

use std::sync::Arc;

use futures_util::stream::{self, BoxStream};
use futures_util::{StreamExt, TryStreamExt};
use object_store::ObjectMeta;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;

/// The most keys one request asks for (S3's own bound).
const MAX_KEYS: usize = 1000;

/// A store's paginated listing (S3's `ListObjectsV2` with `max-keys`),
/// under the prefix a `PrefixStore` confines the store to.
#[derive(Clone)]
pub struct Pager {
    inner: Arc<dyn PaginatedListStore>,
    prefix: Path,
}

impl std::fmt::Debug for Pager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pager(prefix {:?})", self.prefix.as_ref())
    }
}

/// Where a paged listing is.
struct Paging {
    token: Option<String>,
    first: bool,
    keys: usize,
}

impl Pager {
    /// Lists through `inner` under `prefix` (empty: the whole store).
    pub fn new(inner: Arc<dyn PaginatedListStore>, prefix: Path) -> Self {
        Self { inner, prefix }
    }

    fn full(&self, path: &Path) -> Path {
        if self.prefix.as_ref().is_empty() {
            return path.clone();
        }
        Path::from_iter(self.prefix.parts().chain(path.parts()))
    }

    /// The objects under `folder` after `offset`, `keys` asked for first.
    pub(super) fn list_after(
        self,
        folder: &Path,
        offset: Option<&Path>,
        keys: usize,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let listed = format!("{}/", self.full(folder).as_ref());
        let offset = offset.map(|offset| self.full(offset).as_ref().to_string());
        let paging = Paging { token: None, first: true, keys: keys.clamp(1, MAX_KEYS) };
        stream::try_unfold(Some(paging), move |paging| {
            let (pager, listed, offset) = (self.clone(), listed.clone(), offset.clone());
            async move {
                let Some(paging) = paging else { return Ok::<_, object_store::Error>(None) };
                let options = PaginatedListOptions {
                    offset: if paging.first { offset } else { None },
                    max_keys: Some(paging.keys),
                    page_token: paging.token,
                    ..Default::default()
                };
                let page =
                    crate::metrics::store::measured("list_page", pager.inner.list_paginated(Some(&listed), options))
                        .await?;
                let objects: Vec<ObjectMeta> =
                    page.result.objects.into_iter().filter_map(|object| pager.strip(object)).collect();
                let next = page.page_token.map(|token| Paging {
                    token: Some(token),
                    first: false,
                    keys: (paging.keys * 2).min(MAX_KEYS),
                });
                Ok(Some((stream::iter(objects.into_iter().map(Ok)), next)))
            }
        })
        .try_flatten()
        .boxed()
    }

    /// `object` with its location inside the store's prefix.
    fn strip(&self, mut object: ObjectMeta) -> Option<ObjectMeta> {
        if !self.prefix.as_ref().is_empty() {
            let inside = Path::from_iter(object.location.prefix_match(&self.prefix)?);
            object.location = inside;
        }
        Some(object)
    }
}
