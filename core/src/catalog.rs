//! What a resource URL names, across v1 groups and handler groups: the one
//! place sharing, publication, copy/move and the change feed ask "which type
//! is this, does it exist", and the one way any resource is copied or
//! deleted.

use crate::access::{AccessError, AccessService, AdminDecision, Permission, Resource, StateRead};
use crate::auth::Caller;
use crate::blobs::service::Download;
use crate::blobs::{BlobError, BlobGroup, BlobService, BlobTarget, ItemMeta};
use crate::buckets::{BucketCodec, BucketLocation, InvalidBucket};
use crate::dependencies::{DeclarationPolicy, V1_GROUPS};
use crate::etag::{EtagMatch, Preconditions};
use crate::folders::marker::{FolderMarker, ResourceMarker};
use crate::folders::{FolderEngine, FolderError, Node};
use crate::handlers::{Handler, HandlerRegistry};
use crate::resource_url::{Intent, ResourceUrl, UrlError};
use crate::sharing::SharingError;

/// Why a catalog operation failed: the error of the store it reached, or a
/// link that names nothing this host serves.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// DIAL's answer to a link that is not `<group>/<bucket>/<path>` of a
    /// served group and a valid bucket (400).
    #[error("Incorrect resource link provided {0}")]
    IncorrectLink(String),
    /// A request the catalog cannot carry out as asked (400), with DIAL's message.
    #[error("{0}")]
    Invalid(String),
    /// A move whose source changed while it was copied (409): the copy has
    /// the version read, the source stays as last written.
    #[error(
        "{source_url} changed while it was being moved: it was copied to {destination_url} as it was before the \
         change, and kept as last written"
    )]
    ChangedWhileMoved { source_url: String, destination_url: String },
    /// Nothing this host serves is there (404): `Not found: <url>`.
    #[error("Not found: {0}")]
    NotFound(String),
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error(transparent)]
    Bucket(#[from] InvalidBucket),
    #[error(transparent)]
    Folder(#[from] FolderError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error(transparent)]
    Sharing(#[from] SharingError),
}

impl CatalogError {
    /// Whether a condition of the request (`If-Match`, create-only) failed.
    fn is_precondition(&self) -> bool {
        matches!(self, Self::Folder(FolderError::Precondition(_)) | Self::Blob(BlobError::Precondition(_)))
    }

    /// Whether the item was not there (a delete of something already gone
    /// is done, for the publication workflow's clean-ups).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Self::Folder(FolderError::NotFound(_))
                | Self::Blob(BlobError::NotFound(_))
                | Self::Sharing(SharingError::NotFound(_))
        )
    }
}

/// The storage model of a group.
#[derive(Clone)]
pub enum Kind {
    /// A v1 single-blob group.
    Blob(BlobGroup),
    /// A v2 folder-resource group and the handler serving it.
    Folder(Handler),
}

impl Kind {
    /// DIAL's `resourceType` name: `FILE`, `PROMPT`, …; for a handler type,
    /// its type name in upper case with `_` for `-` (`SKILL`).
    pub fn resource_type(&self) -> String {
        match self {
            Self::Blob(group) => group.resource_type().to_string(),
            Self::Folder(handler) => crate::folders::resource_type(&handler.description().type_name),
        }
    }
}

/// A resource link from a request body, resolved.
pub struct Link {
    pub url: ResourceUrl,
    pub location: BucketLocation,
    pub kind: Kind,
}

impl Link {
    /// The canonical URL string grants and publications are keyed by.
    pub fn key(&self) -> String {
        self.url.to_string()
    }

    /// A link that must name a resource (the destination of a copy, move or
    /// publication, which is never a folder): a v2 resource in its listing
    /// form (`…/x/`) is the item `…/x` whether or not it exists yet.
    pub fn as_resource(self) -> Link {
        match (&self.kind, self.url.as_item()) {
            (Kind::Folder(_), Some(item)) if self.url.is_folder() => Link { url: item, ..self },
            _ => self,
        }
    }

    fn resource(&self) -> Resource<'_> {
        Resource { url: &self.url, location: &self.location }
    }
}

/// What a link names, as found in the store (DIAL's metadata node is built
/// from it by the HTTP layer).
pub enum Found {
    /// A live v2 resource.
    Resource(Box<ResourceMarker>),
    /// A v2 folder (its marker, when it has one).
    Folder(Option<FolderMarker>),
    /// A v1 item.
    Item(ItemMeta),
    /// A v1 folder (a prefix with something below it).
    BlobFolder,
}

/// What a caller may do somewhere, as DIAL's `permissions` lists it; `None`
/// when the request did not ask.
pub type PermissionNames = Option<Vec<String>>;

/// The caller's permissions on each node of one answer, when the request
/// asked for them (`permissions=true`): the access state they need (the
/// public rules, an owner's shares) is read once for the whole answer, not
/// once per node.
pub struct NodePermissions<'a> {
    access: &'a AccessService,
    caller: &'a Caller,
    /// `None`: not asked.
    state: Option<StateRead>,
}

impl NodePermissions<'_> {
    pub async fn of(&mut self, url: &ResourceUrl, location: &BucketLocation) -> Result<PermissionNames, CatalogError> {
        let Some(state) = self.state.as_mut() else { return Ok(None) };
        Ok(Some(self.access.permission_names(self.caller, Resource { url, location }, state).await?))
    }
}

/// What a copy read and wrote.
pub struct Copied {
    /// The etag of the source as it was copied: a move deletes the source
    /// only if it still has it.
    pub source_etag: String,
    /// The etag the target was written with.
    pub etag: String,
}

/// A server-side copy, or a move (copy, then delete the source).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    Copy,
    Move,
}

/// The stores of every group, borrowed for one request.
#[derive(Clone, Copy)]
pub struct Catalog<'a> {
    pub handlers: &'a HandlerRegistry,
    pub buckets: &'a BucketCodec,
    pub folders: &'a FolderEngine,
    pub blobs: &'a BlobService,
    pub access: &'a AccessService,
    /// `access.allow_user_resource_dependencies`.
    pub allow_user_dependencies: bool,
}

impl<'a> Catalog<'a> {
    /// Parses a link as clients send it in JSON bodies: `<group>/<bucket>/<path>`,
    /// optionally with a leading `/`, `v1/`, `v2/` or `metadata/`.
    pub fn parse_link(&self, raw: &str) -> Result<Link, CatalogError> {
        let incorrect = || CatalogError::IncorrectLink(raw.to_string());
        // A link is URL-encoded: a raw space (or anything else a URL path
        // cannot hold as it is) is refused, not silently encoded.
        if !raw.bytes().all(|b| b.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&b)) {
            return Err(incorrect());
        }
        let mut text = raw.trim_start_matches('/');
        for prefix in ["v1/", "v2/"] {
            text = text.strip_prefix(prefix).unwrap_or(text);
        }
        text = text.strip_prefix("metadata/").unwrap_or(text);
        let url = ResourceUrl::parse(text, Intent::Read).map_err(|_| incorrect())?;
        let kind = self.kind_of(url.group()).ok_or_else(incorrect)?;
        let location = self.buckets.decode(url.bucket()).map_err(|_| incorrect())?;
        Ok(Link { url, location, kind })
    }

    /// The storage model of `group`, if this host serves it.
    pub fn kind_of(&self, group: &str) -> Option<Kind> {
        match BlobGroup::parse(group) {
            Some(group) => Some(Kind::Blob(group)),
            None => self.handlers.get(group).map(Kind::Folder),
        }
    }

    /// The link as grants key it: a v2 resource named in its listing form
    /// (`…/x/`) is the item `…/x` (see [`FolderEngine::access_url`]).
    pub async fn canonical(&self, link: Link) -> Result<Link, CatalogError> {
        match &link.kind {
            Kind::Folder(_) if link.url.is_folder() => {
                let node = Node::new(link.url.clone(), link.location.clone())?;
                let url = self.folders.access_url(&node).await?;
                Ok(Link { url, ..link })
            }
            _ => Ok(link),
        }
    }

    /// [`Catalog::parse_link`], then [`Catalog::canonical`].
    pub async fn parse_canonical(&self, raw: &str) -> Result<Link, CatalogError> {
        self.canonical(self.parse_link(raw)?).await
    }

    /// Ok when `caller` holds `permission` on what `link` names (denied otherwise).
    pub async fn require(&self, caller: &Caller, link: &Link, permission: Permission) -> Result<(), CatalogError> {
        Ok(self.access.check(caller, link.resource(), permission).await?)
    }

    /// Whether the item a link names exists (folders are not checked: a v1
    /// folder is only a prefix).
    pub async fn exists(&self, link: &Link) -> Result<bool, CatalogError> {
        match &link.kind {
            Kind::Blob(_) if link.url.is_folder() => Ok(true),
            Kind::Blob(_) => {
                let target = BlobTarget::new(link.url.clone(), link.location.clone())?;
                Ok(self.blobs.exists(&target).await?)
            }
            Kind::Folder(_) => {
                let node = Node::new(link.url.clone(), link.location.clone())?;
                if link.url.is_folder() && self.folders.folder_exists(&node).await? {
                    return Ok(true);
                }
                Ok(self.folders.live_marker(&node).await?.is_some())
            }
        }
    }

    /// What a link names as it is now (an item with its timestamps, or a
    /// folder), or `None` when it no longer exists.
    pub async fn find(&self, link: &Link) -> Result<Option<Found>, CatalogError> {
        match &link.kind {
            Kind::Folder(_) => {
                let node = Node::new(link.url.clone(), link.location.clone())?;
                if let Some(marker) = self.folders.live_marker(&node).await? {
                    return Ok(Some(Found::Resource(Box::new(marker))));
                }
                let exists = link.url.is_folder() && self.folders.folder_exists(&node).await?;
                Ok(exists.then_some(Found::Folder(None)))
            }
            Kind::Blob(_) => {
                let target = BlobTarget::new(link.url.clone(), link.location.clone())?;
                if link.url.is_folder() {
                    return Ok(self.blobs.exists(&target).await?.then_some(Found::BlobFolder));
                }
                match self.blobs.metadata(&target).await {
                    Ok(meta) => Ok(Some(Found::Item(meta))),
                    Err(BlobError::NotFound(_)) => Ok(None),
                    Err(error) => Err(error.into()),
                }
            }
        }
    }

    /// The caller's permissions on the nodes of one answer, if `asked`.
    pub fn node_permissions<'c>(&self, caller: &'c Caller, asked: bool) -> NodePermissions<'c>
    where
        'a: 'c,
    {
        NodePermissions { access: self.access, caller, state: asked.then(StateRead::default) }
    }

    /// What `writer` may declare in an application's
    /// `resource_dependencies`: admins may, others only when the
    /// configuration allows it; targets name a v1 group or a loaded type.
    /// No stored definition, whoever writes it, gets the user's token.
    pub fn declaration_policy(&self, writer: &Caller) -> DeclarationPolicy {
        let mut declarable: Vec<String> = V1_GROUPS.iter().map(|g| g.to_string()).collect();
        declarable.extend(self.handlers.all().iter().map(|h| h.description().group.clone()));
        DeclarationPolicy {
            declarable,
            may_declare: self.access.may_decide(writer, AdminDecision::DeclareDependencies)
                || self.allow_user_dependencies,
            may_forward_auth_token: false,
        }
    }

    /// Copies the item `source` names to `target` (same group) if
    /// `conditions` hold there (publication: create only), written by
    /// `writer` (what it may declare, for applications) and authored by
    /// `author`: a v2 resource gets a fresh, re-validated marker with the
    /// same aggregate etag; a v1 item is streamed, never held whole.
    pub async fn copy(
        &self,
        source: &Link,
        target: &Link,
        writer: &Caller,
        author: Option<String>,
        conditions: &Preconditions,
    ) -> Result<Copied, CatalogError> {
        match &source.kind {
            Kind::Folder(handler) => {
                let from = Node::new(source.url.clone(), source.location.clone())?;
                let to = Node::new(target.url.clone(), target.location.clone())?;
                let copied = self.folders.copy_resource(&from, &to, handler, author, conditions).await?;
                // The aggregate etag is content-derived: the copy's is the source's.
                Ok(Copied { source_etag: copied.marker.etag.clone(), etag: copied.marker.etag })
            }
            Kind::Blob(group) => {
                let from = BlobTarget::new(source.url.clone(), source.location.clone())?;
                let to = BlobTarget::new(target.url.clone(), target.location.clone())?;
                let Download::Content { meta, body } = self.blobs.download(&from, &Preconditions::default()).await?
                else {
                    unreachable!("no If-None-Match was sent");
                };
                let committed = if group.is_json() {
                    let policy = self.declaration_policy(writer);
                    self.blobs.put_json(&to, body, Some(meta.content_length), conditions, author, &policy, None).await?
                } else {
                    self.blobs.put_file(&to, body, Some(&meta.content_type), conditions, author, None).await?
                };
                Ok(Copied { source_etag: meta.etag, etag: committed.meta.etag })
            }
        }
    }

    /// Deletes the item a link names (a v2 resource is tombstoned) if
    /// `conditions` hold, and ends its shares and invitations: re-creating
    /// it (or restoring a v2 resource) does not bring them back. Every
    /// resource delete goes through here.
    pub async fn delete(&self, link: &Link, conditions: &Preconditions) -> Result<(), CatalogError> {
        match &link.kind {
            Kind::Folder(_) => {
                let node = Node::new(link.url.clone(), link.location.clone())?;
                self.folders.delete_resource(&node, conditions).await?;
            }
            Kind::Blob(_) => {
                let target = BlobTarget::new(link.url.clone(), link.location.clone())?;
                self.blobs.delete(&target, conditions).await?;
            }
        }
        self.access.sharing().forget(&link.location, &link.key()).await?;
        Ok(())
    }

    /// Copies or moves one item of any type (`POST /v1/ops/resource/copy|move`):
    /// READ (copy) or WRITE (move) on the source, WRITE on the destination.
    /// One commit at the destination; a move then deletes the source only
    /// if it still has the version copied (a write acknowledged meanwhile
    /// is never lost), and within one bucket the source's shares move with
    /// it (across buckets they end, as DIAL).
    pub async fn transfer(
        &self,
        caller: &Caller,
        source: &str,
        destination: &str,
        kind: Transfer,
        overwrite: bool,
    ) -> Result<(), CatalogError> {
        let invalid = |message: String| CatalogError::Invalid(message);
        let source = self.parse_canonical(source).await?;
        let destination = self.parse_link(destination)?.as_resource();
        if source.url.group() != destination.url.group() {
            return Err(invalid("source and destination resources must be the same type".into()));
        }
        for link in [&source, &destination] {
            if link.url.is_folder() {
                return Err(invalid(format!("{} is a folder: only items can be copied or moved", link.key())));
            }
        }
        if source.key() == destination.key() {
            return Err(invalid("source and destination resources cannot be the same".into()));
        }
        let needed_on_source = if kind == Transfer::Copy { Permission::Read } else { Permission::Write };
        self.require(caller, &source, needed_on_source).await?;
        self.require(caller, &destination, Permission::Write).await?;

        // A missing source is the copy's own 404: it reads the source first.
        let conditions = if overwrite { Preconditions::default() } else { Preconditions::create_only() };
        let copied = self.copy(&source, &destination, caller, Some(caller.author_name()), &conditions).await?;
        if kind == Transfer::Move {
            if source.location == destination.location {
                self.access.sharing().copy(&source.location, &source.key(), &destination.key()).await?;
            }
            // Only the version copied: a write that landed meanwhile stays.
            // Ends the source's shares and invitations, as every delete does.
            let copied_version =
                Preconditions { if_match: Some(EtagMatch::Tags(vec![copied.source_etag])), if_none_match: None };
            match self.delete(&source, &copied_version).await {
                Err(error) if error.is_precondition() => {
                    return Err(CatalogError::ChangedWhileMoved {
                        source_url: source.key(),
                        destination_url: destination.key(),
                    });
                }
                result => result?,
            }
        }
        Ok(())
    }
}
