//! v1 listings: the children of a folder or every item below it, paged
//! over what the caller may see, with opaque tokens.

use futures_util::stream::{self};
use futures_util::{Stream, StreamExt, TryStreamExt};
use object_store::ObjectMeta;
use object_store::path::Path;
use percent_encoding::percent_decode_str;

use super::service::BlobService;
use super::trailer::{FOOTER_LEN, ItemMeta};
use super::{BlobError, BlobTarget};
use crate::resource_url::{ResourceUrl, Shows};

/// Trailer reads a listing keeps in flight.
const LISTING_READ_AHEAD: usize = 16;

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub items: Vec<Listed>,
    /// Opaque; pass back as `token` for the next page.
    pub next_token: Option<String>,
}

/// A node found by a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    Item { url: ResourceUrl, meta: ItemMeta },
    Folder { url: ResourceUrl },
}

impl Listed {
    pub fn url(&self) -> &ResourceUrl {
        match self {
            Self::Item { url, .. } | Self::Folder { url } => url,
        }
    }
}

/// A child found by a non-recursive listing, before its trailer is read.
enum Entry {
    Item(ObjectMeta),
    Folder(Path),
}

impl BlobService {
    /// The children of a folder (items and folders), or with `recursive`
    /// every item below it; `limit` per page, `token` from the previous page.
    /// The bucket root always lists (maybe empty); an empty folder is 404.
    /// Only nodes whose URL `shows` admits are counted and paged, so a page
    /// never ends on — and a token never names — something the caller may
    /// not see.
    pub async fn list(
        &self,
        folder: &BlobTarget,
        recursive: bool,
        token: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        if !folder.url.is_folder() {
            return Err(BlobError::BadRequest(format!("Not a folder: {}", folder.url)));
        }
        self.path_limits.check(folder.path()).map_err(|e| BlobError::BadRequest(e.to_string()))?;
        let after = token.map(decode_token).transpose()?;
        let listing = match self.list_page(folder, recursive, after.as_deref(), limit, shows).await {
            // A directory-backed store cannot list below an item: nothing is there.
            Err(BlobError::Storage(_)) if self.keeps_empty_dirs && self.item_in_the_way(folder).await?.is_some() => {
                return Err(BlobError::NotFound(folder.url.to_string()));
            }
            listing => listing?,
        };
        if listing.items.is_empty()
            && after.is_none()
            && !folder.url.is_bucket_root()
            && !self.has_items(folder.path()).await?
        {
            return Err(BlobError::NotFound(folder.url.to_string()));
        }
        Ok(listing)
    }

    async fn list_page(
        &self,
        folder: &BlobTarget,
        recursive: bool,
        after: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        Ok(if limit == 0 {
            Listing::default()
        } else if recursive {
            self.list_recursive(folder, after, limit, shows).await?
        } else {
            self.list_children(folder, after, limit, shows).await?
        })
    }

    /// Sort keys are the stored (encoded) names, folders with a trailing `/`
    /// — the order an object store lists keys in.
    async fn list_children(
        &self,
        folder: &BlobTarget,
        after: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        let listed = self.store.list_with_delimiter(Some(folder.path())).await?;
        let mut entries: Vec<(String, Entry)> = Vec::new();
        for object in listed.objects {
            if object.size < FOOTER_LEN || object.location == *folder.path() {
                continue;
            }
            if let Some(name) = object.location.filename().map(str::to_owned) {
                entries.push((name, Entry::Item(object)));
            }
        }
        for prefix in listed.common_prefixes {
            if let Some(name) = prefix.filename().map(str::to_owned) {
                entries.push((format!("{name}/"), Entry::Folder(prefix)));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.retain(|(key, _)| after.is_none_or(|after| key.as_str() > after));
        let resolved = stream::iter(entries)
            .map(|(key, entry)| async move { (key, self.resolve_child(folder, entry).await) })
            .buffered(LISTING_READ_AHEAD);
        page(resolved, limit, shows).await
    }

    async fn resolve_child(&self, folder: &BlobTarget, entry: Entry) -> Result<Option<Listed>, BlobError> {
        match entry {
            Entry::Item(object) => {
                let name = decode_name(object.location.filename().unwrap_or_default());
                let Ok(url) = folder.url.child(&name, false) else { return Ok(None) };
                Ok(self.read_listed(&object).await?.map(|meta| Listed::Item { url, meta }))
            }
            Entry::Folder(prefix) => {
                let name = decode_name(prefix.filename().unwrap_or_default());
                let Ok(url) = folder.url.child(&name, true) else { return Ok(None) };
                if self.keeps_empty_dirs && !self.has_items(&prefix).await? {
                    return Ok(None);
                }
                Ok(Some(Listed::Folder { url }))
            }
        }
    }

    /// Every item below the folder, in key order; the key is the path
    /// relative to the folder.
    async fn list_recursive(
        &self,
        folder: &BlobTarget,
        after: Option<&str>,
        limit: usize,
        shows: &Shows<'_>,
    ) -> Result<Listing, BlobError> {
        let base = folder.path();
        let listed = match after {
            Some(after) => {
                let offset = Path::parse(format!("{base}/{after}"))
                    .map_err(|_| BlobError::BadRequest("Invalid token".into()))?;
                self.store.list_with_offset(Some(base), &offset)
            }
            None => self.store.list(Some(base)),
        };
        let mut objects: Vec<(String, ObjectMeta)> = listed
            .try_filter_map(|object| {
                let key = relative_key(base, &object.location);
                futures_util::future::ready(Ok(key.map(|key| (key, object))))
            })
            .try_collect()
            .await?;
        objects.retain(|(key, object)| object.size >= FOOTER_LEN && after.is_none_or(|after| key.as_str() > after));
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        let resolved = stream::iter(objects)
            .map(|(key, object)| async move {
                let url = match descendant_url(&folder.url, &key) {
                    Some(url) => url,
                    None => return (key, Ok(None)),
                };
                let item = self.read_listed(&object).await.map(|meta| meta.map(|meta| Listed::Item { url, meta }));
                (key, item)
            })
            .buffered(LISTING_READ_AHEAD);
        page(resolved, limit, shows).await
    }

    /// Whether any object (that could be an item) is stored below `prefix`.
    pub(super) async fn has_items(&self, prefix: &Path) -> Result<bool, BlobError> {
        let mut objects = self.store.list(Some(prefix));
        while let Some(object) = objects.next().await {
            if object?.size >= FOOTER_LEN {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Takes up to `limit` nodes; the token is the key of the last one taken,
/// given only when another node follows.
async fn page<S>(mut resolved: S, limit: usize, shows: &Shows<'_>) -> Result<Listing, BlobError>
where
    S: Stream<Item = (String, Result<Option<Listed>, BlobError>)> + Unpin,
{
    let mut items = Vec::new();
    let mut last_key: Option<String> = None;
    let mut next_token = None;
    while let Some((key, listed)) = resolved.next().await {
        let Some(listed) = listed?.filter(|listed| shows(listed.url())) else { continue };
        if items.len() == limit {
            next_token = last_key.take().map(|key| encode_token(&key));
            break;
        }
        items.push(listed);
        last_key = Some(key);
    }
    Ok(Listing { items, next_token })
}

/// Tokens are opaque to clients: Base58 of the last key returned, so they
/// need no escaping in a query string.
fn encode_token(key: &str) -> String {
    bs58::encode(key.as_bytes()).into_string()
}

fn decode_token(token: &str) -> Result<String, BlobError> {
    let invalid = || BlobError::BadRequest(format!("Invalid token: {token}"));
    let bytes = bs58::decode(token).into_vec().map_err(|_| invalid())?;
    String::from_utf8(bytes).map_err(|_| invalid())
}

fn decode_name(encoded: &str) -> String {
    percent_decode_str(encoded).decode_utf8_lossy().into_owned()
}

/// `a/b%2Fc` of `<base>/a/b%2Fc` (the stored, encoded form).
fn relative_key(base: &Path, location: &Path) -> Option<String> {
    let rest = location.as_ref().strip_prefix(base.as_ref())?.strip_prefix('/')?;
    (!rest.is_empty()).then(|| rest.to_string())
}

/// The item URL of a relative key below `folder`.
fn descendant_url(folder: &ResourceUrl, key: &str) -> Option<ResourceUrl> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut url = folder.clone();
    for (index, part) in parts.iter().enumerate() {
        url = url.child(&decode_name(part), index + 1 < parts.len()).ok()?;
    }
    Some(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource_url::Intent;

    #[test]
    fn keys_and_urls() {
        let base = Path::from("Users/u/files/a");
        assert_eq!(relative_key(&base, &Path::from("Users/u/files/a/b/c")).as_deref(), Some("b/c"));
        assert_eq!(relative_key(&base, &Path::from("Users/u/files/ab")), None);
        let folder = ResourceUrl::parse("files/b/a/", Intent::Read).unwrap();
        assert_eq!(descendant_url(&folder, "x%20y/z").unwrap().to_string(), "files/b/a/x%20y/z");
        assert_eq!(decode_token(&encode_token("a/b")).unwrap(), "a/b");
    }
}
