//! The v1 resource API (`/v1/{files|prompts|conversations|applications}/…`
//! and `/v1/metadata/…`) in domain terms: a request's raw path resolved to
//! an item or folder of a v1 group, the access decision on it, and what a
//! read, delete and listing answer. The HTTP layer extracts, makes one call
//! here and renders the result.

use crate::access::{Permission, Resource};
use crate::auth::Caller;
use crate::blobs::{BlobGroup, BlobTarget, Download, ItemMeta, Listed};
use crate::catalog::{Catalog, CatalogError, Kind, Link, PermissionNames};
use crate::etag::Preconditions;
use crate::folder_resources::Page;
use crate::resource_url::{Intent, ResourceUrl};

/// What `GET /v1/metadata/…` answers.
pub enum BlobMetadata {
    /// An item's metadata.
    Item { url: ResourceUrl, group: BlobGroup, meta: ItemMeta, permissions: PermissionNames },
    /// A folder with one page of its children (or of every item below it).
    Folder {
        url: ResourceUrl,
        group: BlobGroup,
        items: Vec<(Listed, PermissionNames)>,
        permissions: PermissionNames,
        next_token: Option<String>,
    },
}

/// The v1 API over the catalog's stores, for one request.
pub struct BlobResources<'a> {
    catalog: Catalog<'a>,
}

impl<'a> BlobResources<'a> {
    pub fn new(catalog: Catalog<'a>) -> Self {
        Self { catalog }
    }

    /// Parses `<group>/<bucket>/<path>` (raw), checks the group is a v1 one,
    /// then access.
    pub async fn resolve(
        &self,
        caller: &Caller,
        raw: &str,
        intent: Intent,
        permission: Permission,
    ) -> Result<BlobTarget, CatalogError> {
        let url = ResourceUrl::parse(raw, intent)?;
        if BlobGroup::parse(url.group()).is_none() {
            return Err(CatalogError::NotFound(url.to_string()));
        }
        let location = self.catalog.buckets.decode(url.bucket())?;
        self.catalog.access.check(caller, Resource { url: &url, location: &location }, permission).await?;
        Ok(BlobTarget::new(url, location)?)
    }

    /// `GET`: the item's bytes, or "not modified".
    pub async fn download(
        &self,
        caller: &Caller,
        raw: &str,
        conditions: &Preconditions,
    ) -> Result<Download, CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Read).await?;
        Ok(self.catalog.blobs.download(&target, conditions).await?)
    }

    /// `DELETE`: the item, if `conditions` hold; its shares end.
    pub async fn delete(&self, caller: &Caller, raw: &str, conditions: &Preconditions) -> Result<(), CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Write).await?;
        let link = Link { kind: Kind::Blob(target.group()), url: target.url, location: target.location };
        self.catalog.delete(&link, conditions).await
    }

    /// `GET /v1/metadata/…`: a folder (trailing `/`) lists its children (in
    /// `public`, what the rules show the caller); an item gives its metadata.
    pub async fn metadata(&self, caller: &Caller, raw: &str, page: Page) -> Result<BlobMetadata, CatalogError> {
        let target = self.resolve(caller, raw, Intent::Read, Permission::Read).await?;
        let mut permissions_of = self.catalog.node_permissions(caller, page.permissions);
        if !target.url.is_folder() {
            let meta = self.catalog.blobs.metadata(&target).await?;
            let permissions = permissions_of.of(&target.url, &target.location).await?;
            return Ok(BlobMetadata::Item { url: target.url.clone(), group: target.group(), meta, permissions });
        }
        let filter = self.catalog.access.listing_filter(caller, &target.location).await?;
        let shows = |url: &ResourceUrl| filter.shows(caller, url);
        let listing =
            self.catalog.blobs.list(&target, page.recursive, page.token.as_deref(), page.limit, &shows).await?;
        let mut items = Vec::with_capacity(listing.items.len());
        for item in listing.items {
            let permissions = permissions_of.of(item.url(), &target.location).await?;
            items.push((item, permissions));
        }
        let permissions = permissions_of.of(&target.url, &target.location).await?;
        Ok(BlobMetadata::Folder {
            url: target.url.clone(),
            group: target.group(),
            items,
            permissions,
            next_token: listing.next_token,
        })
    }
}
