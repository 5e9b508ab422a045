//! The publication workflow: create (sources → the author's review bucket),
//! get/list, withdraw, and the admins' decisions — approve (review →
//! `public`, DELETE actions, rules; all or nothing as clients see it) and
//! reject. Sources are never touched. Every copy goes through the
//! [`Catalog`], so a v2 resource arrives as a whole version with a fresh,
//! validated marker and the same aggregate etag.

use std::collections::BTreeSet;

use percent_encoding::utf8_percent_encode;
use serde::Deserialize;

use super::{
    Action, Decision, Publication, PublicationResource, PublicationStore, PublicationSummary, Status,
    parse_publication_url,
};
use crate::access::public_rules::{PublicRules, Rule, RulesDocument};
use crate::access::{AccessDenied, AccessError, AdminDecision, Permission};
use crate::auth::Caller;
use crate::buckets::InvalidBucket;
use crate::catalog::{Catalog, CatalogError, Link};
use crate::clock::now_ms;
use crate::consent::granted_by;
use crate::documents::{DocumentError, Documents, Update};
use crate::etag::{EtagMatch, Preconditions};
use crate::resource_url::{Intent, ResourceUrl, SEGMENT_ESCAPES, UrlError};

/// Why a publication request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum PublicationError {
    /// The request is wrong (400), with DIAL's message.
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this (403), with DIAL's message.
    #[error("{0}")]
    Forbidden(String),
    /// No such publication, or no longer pending (404), with DIAL's message.
    #[error("{0}")]
    NotFound(String),
    /// The decision landed, but a DELETE action after it failed (deletes
    /// cannot be undone, so the approval stands).
    #[error("The publication is approved, but deleting {url} failed: {source}")]
    DeleteAfterApproval { url: String, source: CatalogError },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error(transparent)]
    Document(#[from] DocumentError),
    #[error(transparent)]
    Bucket(#[from] InvalidBucket),
    #[error(transparent)]
    Url(#[from] UrlError),
}

impl From<AccessDenied> for PublicationError {
    fn from(denied: AccessDenied) -> Self {
        Self::Access(denied.into())
    }
}

fn invalid(message: impl Into<String>) -> PublicationError {
    PublicationError::Invalid(message.into())
}

fn denied(url: &str) -> PublicationError {
    AccessDenied { url: url.to_string() }.into()
}

fn not_found(url: &str) -> PublicationError {
    PublicationError::NotFound(format!("Not found: {url}"))
}

fn already_finalized(url: &str) -> PublicationError {
    PublicationError::NotFound(format!("Publication is already finalized: {url}"))
}

/// `POST /v1/ops/publication/create`'s body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicationRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub target_folder: Option<String>,
    #[serde(default)]
    pub resources: Vec<PublicationResourceRequest>,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicationResourceRequest {
    #[serde(default)]
    pub action: Option<Action>,
    #[serde(default)]
    pub source_url: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
}

/// A `public/<path>/` target folder: its canonical form (the key its rules
/// are stored under) and its decoded segments.
fn target_folder(folder: &str) -> Result<(String, Vec<String>), PublicationError> {
    let bad = || invalid(format!("Publication \"targetFolder\" must be a public folder: {folder}"));
    if !folder.starts_with("public/") || !folder.ends_with('/') {
        return Err(bad());
    }
    // Parsed as a folder of some group in `public`, by the one URL parser.
    let url = ResourceUrl::parse(&format!("any/{folder}"), Intent::Write).map_err(|_| bad())?;
    let canonical = url.to_string().strip_prefix("any/").map(str::to_string).ok_or_else(bad)?;
    Ok((canonical, url.segments().to_vec()))
}

/// A publication's view of one resource action, checked.
struct Planned {
    action: Action,
    source: Option<Link>,
    target: Link,
    review: Option<Link>,
}

/// The workflow over the catalog and the host's documents, for one request.
pub struct Publications<'a> {
    catalog: Catalog<'a>,
    documents: &'a Documents,
}

impl<'a> Publications<'a> {
    pub fn new(catalog: Catalog<'a>, documents: &'a Documents) -> Self {
        Self { catalog, documents }
    }

    fn store(&self) -> PublicationStore {
        PublicationStore::new(self.documents.clone())
    }

    /// Checks the request, copies every source into a fresh review bucket
    /// and records the publication, pending (on failure, what was copied is
    /// removed).
    pub async fn create(&self, caller: &Caller, request: PublicationRequest) -> Result<Publication, PublicationError> {
        let catalog = &self.catalog;
        let requested_folder =
            request.target_folder.clone().ok_or_else(|| invalid("Publication \"targetFolder\" is missing"))?;
        let (target_folder, folder_segments) = target_folder(&requested_folder)?;
        if folder_segments.is_empty() && !request.rules.is_empty() {
            return Err(invalid("Rules are not allowed for root targetFolder"));
        }
        if request.resources.is_empty() && request.rules.is_empty() {
            return Err(invalid("Publication must have at least one resource or rule"));
        }
        for rule in &request.rules {
            rule.check().map_err(|e| invalid(e.to_string()))?;
        }

        let author = caller.bucket_location();
        let author_bucket = catalog.buckets.encode(&author);
        let mut random = [0u8; 16];
        rand::fill(&mut random);
        let id: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let review_bucket = catalog.buckets.encode(&author.review(&id));

        let mut planned = Vec::new();
        let mut targets = BTreeSet::new();
        let mut sources = BTreeSet::new();
        for resource in &request.resources {
            let action = resource.action.ok_or_else(|| invalid("Resource \"action\" is missing"))?;
            let target_raw =
                resource.target_url.as_deref().ok_or_else(|| invalid("Resource \"targetUrl\" is missing"))?;
            let target = catalog.parse_link(target_raw)?.as_resource();
            let inside = target.url.is_public()
                && !target.url.is_folder()
                && target.url.segments().len() > folder_segments.len()
                && target.url.segments().starts_with(&folder_segments);
            if !inside {
                return Err(invalid(format!(
                    "Target resource {target_raw} must be an item inside the target folder {target_folder}"
                )));
            }
            if !targets.insert(target.key()) {
                return Err(invalid(format!("Duplicated target resource: {target_raw}")));
            }
            // The author must be able to read what they publish into.
            if !catalog.access.sees_public(caller, &target.url).await? {
                return Err(denied(&target.key()));
            }
            let exists = catalog.exists(&target).await?;
            match action {
                Action::Add => {
                    let source_raw =
                        resource.source_url.as_deref().ok_or_else(|| invalid("Resource \"sourceUrl\" is missing"))?;
                    // The listing form `…/x/` is the resource `x` only when
                    // `x` exists; otherwise it is the folder it looks like.
                    // Readable first (as DIAL checks), so the folder answer
                    // tells nobody without access whether a resource lives there.
                    let source = catalog.parse_canonical(source_raw).await?;
                    if source.url.is_public() || source.url.is_folder() {
                        catalog.require(caller, &source, Permission::Read).await?;
                        return Err(invalid(format!("Source resource {source_raw} must be a private item")));
                    }
                    if source.url.group() != target.url.group() {
                        return Err(invalid(format!(
                            "Source {source_raw} and target {target_raw} must be of the same type"
                        )));
                    }
                    if !sources.insert(source.key()) {
                        return Err(invalid(format!("Duplicated source resource: {source_raw}")));
                    }
                    catalog.require(caller, &source, Permission::Read).await?;
                    if !catalog.exists(&source).await? {
                        return Err(not_found(&source.key()));
                    }
                    if exists {
                        return Err(invalid(format!("Target resource already exists: {target_raw}")));
                    }
                    // As DIAL: the review copy is named by the target's path
                    // below the target folder (`skills/<review bucket>/pdf`).
                    let below: Vec<String> = target.url.segments()[folder_segments.len()..]
                        .iter()
                        .map(|segment| utf8_percent_encode(segment, SEGMENT_ESCAPES).to_string())
                        .collect();
                    let review_raw = format!("{}/{review_bucket}/{}", target.url.group(), below.join("/"));
                    let review = catalog.parse_link(&review_raw)?;
                    planned.push(Planned { action, source: Some(source), target, review: Some(review) });
                }
                Action::Delete => {
                    if !exists {
                        return Err(invalid(format!("Target resource does not exist: {target_raw}")));
                    }
                    planned.push(Planned { action, source: None, target, review: None });
                }
            }
        }

        // Copy every source into the review bucket; on failure undo what was copied.
        let author_name = Some(caller.author_name());
        for (index, plan) in planned.iter().enumerate() {
            let (Some(source), Some(review)) = (&plan.source, &plan.review) else { continue };
            let copied = catalog.copy(source, review, caller, author_name.clone(), &Preconditions::create_only()).await;
            if let Err(error) = copied {
                self.remove_review_copies(&planned[..index]).await;
                return Err(error.into());
            }
        }
        let resource_types = planned.iter().map(|p| p.target.kind.resource_type()).collect::<BTreeSet<_>>();
        let publication = Publication {
            url: format!("publications/{author_bucket}/{id}"),
            name: request.name,
            target_folder,
            status: Status::Pending,
            created_at: now_ms(),
            author: author_name,
            resources: planned
                .iter()
                .map(|p| PublicationResource {
                    action: p.action,
                    source_url: p.source.as_ref().map(Link::key),
                    target_url: p.target.key(),
                    review_url: p.review.as_ref().map(Link::key),
                })
                .collect(),
            rules: request.rules,
            resource_types,
            comment: None,
            decided_by: None,
            decided_at: None,
        };
        if let Err(error) = self.store().create(&id, &author, &publication).await {
            self.remove_review_copies(&planned).await;
            return Err(error.into());
        }
        Ok(publication)
    }

    /// Best effort: review copies left behind by a failure are unreachable
    /// (no publication names them) and only cost storage.
    async fn remove_review_copies(&self, planned: &[Planned]) {
        for review in planned.iter().filter_map(|p| p.review.as_ref()) {
            self.remove_review_copy(&review.key()).await;
        }
    }

    async fn remove_reviews_of(&self, publication: &Publication) {
        for url in publication.resources.iter().filter_map(|r| r.review_url.as_deref()) {
            self.remove_review_copy(url).await;
        }
    }

    /// One review copy, whatever its state; only real failures are logged.
    async fn remove_review_copy(&self, url: &str) {
        let removed = match self.catalog.parse_link(url) {
            Ok(link) => self.catalog.delete(&link, &Preconditions::default()).await,
            Err(error) => Err(error),
        };
        if let Err(error) = removed
            && !error.is_not_found()
        {
            tracing::warn!(url, %error, "could not remove a review copy");
        }
    }

    /// The publication a request names, if the caller is its author or an
    /// admin.
    async fn authorized(&self, caller: &Caller, url: &str) -> Result<(String, Publication), PublicationError> {
        let forbidden = || PublicationError::Forbidden(format!("Forbidden resource: {url}"));
        let (bucket, id) =
            parse_publication_url(url).ok_or_else(|| invalid(format!("Invalid publication url: {url}")))?;
        let author = self.catalog.buckets.decode(&bucket).map_err(|_| forbidden())?;
        let access = self.catalog.access;
        if author != caller.bucket_location() && !access.may_decide(caller, AdminDecision::Publications) {
            return Err(forbidden());
        }
        let publication = self.store().get(&id).await?.ok_or_else(|| not_found(url))?;
        if publication.url != url.trim_start_matches('/') {
            return Err(not_found(url));
        }
        Ok((id, publication))
    }

    /// The publication at `url` (its author or an admin).
    pub async fn get(&self, caller: &Caller, url: &str) -> Result<Publication, PublicationError> {
        Ok(self.authorized(caller, url).await?.1)
    }

    /// `publications/<own bucket>/`: the caller's own; `publications/public/`:
    /// the admins' pending queue, or with `decided` the approved and
    /// rejected ones (who decided, when, and why).
    pub async fn list(
        &self,
        caller: &Caller,
        folder: &str,
        decided: bool,
    ) -> Result<Vec<PublicationSummary>, PublicationError> {
        let bucket = folder
            .trim_start_matches('/')
            .strip_prefix("publications/")
            .and_then(|rest| rest.strip_suffix('/'))
            .ok_or_else(|| invalid(format!("Invalid publication folder: {folder}")))?;
        let publications = if bucket == "public" {
            if !self.catalog.access.may_decide(caller, AdminDecision::Publications) {
                return Err(denied(folder));
            }
            if decided { self.store().decided().await? } else { self.store().pending().await? }
        } else {
            let author = self.catalog.buckets.decode(bucket)?;
            if author != caller.bucket_location() {
                return Err(denied(folder));
            }
            self.store().by_author(&author).await?
        };
        Ok(publications.iter().map(PublicationSummary::from).collect())
    }

    /// The author withdraws (or an admin removes) a publication.
    /// Withdrawing a pending one is a compare-and-swap on its status, so it
    /// and an approval cannot both win; only then are its review copies
    /// removed.
    pub async fn withdraw(&self, caller: &Caller, url: &str) -> Result<(), PublicationError> {
        let (id, publication) = self.authorized(caller, url).await?;
        let (bucket, _) = parse_publication_url(url).expect("checked by authorized");
        let author = self.catalog.buckets.decode(&bucket)?;
        match self.store().withdraw(&id, &author).await? {
            Some(Status::Pending) => self.remove_reviews_of(&publication).await,
            Some(_) => {}
            None => return Err(not_found(url)),
        }
        Ok(())
    }

    /// The publication an admin decides on, while it is still pending.
    async fn pending_for_decision(
        &self,
        caller: &Caller,
        url: &str,
    ) -> Result<(String, Publication), PublicationError> {
        if !self.catalog.access.may_decide(caller, AdminDecision::Publications) {
            return Err(PublicationError::Forbidden("Only admins may approve or reject publications".into()));
        }
        let (id, publication) = self.authorized(caller, url).await?;
        if publication.status != Status::Pending {
            return Err(already_finalized(url));
        }
        Ok((id, publication))
    }

    /// Moves a pending publication to `status`; exactly one decision wins.
    async fn decide(
        &self,
        admin: &Caller,
        id: &str,
        url: &str,
        status: Status,
        comment: Option<String>,
    ) -> Result<Publication, PublicationError> {
        let decision = Decision { status, comment, by: granted_by(admin), at: now_ms() };
        self.store().finalize(id, decision).await?.ok_or_else(|| already_finalized(url))
    }

    /// Approves (admins). All or nothing, as clients see it: every copy
    /// review → `public` and the rules are applied first, then the status
    /// moves PENDING → APPROVED by compare-and-swap. If a copy fails (e.g.
    /// the target exists: 412) or another decision or a withdrawal wins the
    /// swap, what this request applied is undone and the publication stays
    /// as it was. DELETE actions and the removal of review copies come after
    /// the decision (deletes cannot be undone); they are idempotent.
    pub async fn approve(
        &self,
        admin: &Caller,
        url: &str,
        comment: Option<String>,
    ) -> Result<Publication, PublicationError> {
        let (id, publication) = self.pending_for_decision(admin, url).await?;
        let mut applied = Applied::default();
        let decided = match self.apply_before_decision(admin, &publication, &mut applied).await {
            Ok(()) => self.decide(admin, &id, url, Status::Approved, comment).await,
            Err(error) => Err(error),
        };
        let publication = match decided {
            Ok(publication) => publication,
            Err(error) => {
                applied.undo(self).await;
                return Err(error);
            }
        };
        for resource in publication.resources.iter().filter(|r| r.action == Action::Delete) {
            let target = self.catalog.parse_link(&resource.target_url)?;
            match self.catalog.delete(&target, &Preconditions::default()).await {
                Ok(()) => {}
                Err(error) if error.is_not_found() => {}
                Err(error) => {
                    tracing::error!(url = resource.target_url, %error, "approved, but a DELETE action failed");
                    return Err(PublicationError::DeleteAfterApproval {
                        url: resource.target_url.clone(),
                        source: error,
                    });
                }
            }
        }
        self.remove_reviews_of(&publication).await;
        Ok(publication)
    }

    /// Copies every ADD from review to its target (create-only) and stores
    /// the rules, recording each step in `applied`.
    async fn apply_before_decision(
        &self,
        admin: &Caller,
        publication: &Publication,
        applied: &mut Applied,
    ) -> Result<(), PublicationError> {
        let author = publication.author.clone();
        for resource in publication.resources.iter().filter(|r| r.action == Action::Add) {
            let target = self.catalog.parse_link(&resource.target_url)?;
            let review = self.catalog.parse_link(resource.review_url.as_deref().unwrap_or_default())?;
            // The admin who approves writes the public copies.
            let copied =
                self.catalog.copy(&review, &target, admin, author.clone(), &Preconditions::create_only()).await?;
            applied.copies.push((target, copied.etag));
        }
        if !publication.rules.is_empty() {
            let folder = publication.target_folder.clone();
            let rules = publication.rules.clone();
            let previous = self
                .documents
                .update(&PublicRules::path(), |all: &mut RulesDocument| {
                    Ok::<_, DocumentError>(Update::Changed(all.insert(folder.clone(), rules.clone())))
                })
                .await?;
            applied.rules = Some((folder, previous, rules));
        }
        Ok(())
    }

    /// Rejects (admins), with the comment.
    pub async fn reject(
        &self,
        admin: &Caller,
        url: &str,
        comment: Option<String>,
    ) -> Result<Publication, PublicationError> {
        let (id, _) = self.pending_for_decision(admin, url).await?;
        let publication = self.decide(admin, &id, url, Status::Rejected, comment).await?;
        self.remove_reviews_of(&publication).await;
        Ok(publication)
    }

    /// The rules of a `public/<folder>/` and its ancestors; the caller must
    /// be able to read the folder.
    pub async fn rules_along(&self, caller: &Caller, folder: &str) -> Result<RulesDocument, PublicationError> {
        target_folder(folder)?;
        let url = ResourceUrl::parse(&format!("any/{folder}"), Intent::Read)?;
        let access = self.catalog.access;
        if !access.sees_public(caller, &url).await? {
            return Err(denied(folder));
        }
        Ok(access.rules().along(&url).await?)
    }
}

/// What an approval applied before its decision, so it can be undone.
#[derive(Default)]
struct Applied {
    /// Targets this request created, with the etag it created them with.
    copies: Vec<(Link, String)>,
    /// The rules the target folder had before (`None`: it had none).
    rules: Option<(String, Option<Vec<Rule>>, Vec<Rule>)>,
}

impl Applied {
    /// Best effort, each step conditional on still being what this request
    /// wrote: a target changed since is left alone, as are rules changed since.
    async fn undo(self, publications: &Publications<'_>) {
        for (target, etag) in self.copies.iter().rev() {
            let conditions = Preconditions { if_match: Some(EtagMatch::Tags(vec![etag.clone()])), if_none_match: None };
            if let Err(error) = publications.catalog.delete(target, &conditions).await {
                tracing::warn!(url = %target.key(), %error, "could not undo a publication copy");
            }
        }
        if let Some((folder, previous, ours)) = self.rules {
            let restored = publications
                .documents
                .update(&PublicRules::path(), |all: &mut RulesDocument| {
                    if all.get(&folder) != Some(&ours) {
                        return Ok::<_, DocumentError>(Update::Unchanged(()));
                    }
                    match &previous {
                        Some(rules) => all.insert(folder.clone(), rules.clone()),
                        None => all.remove(&folder),
                    };
                    Ok(Update::Changed(()))
                })
                .await;
            if let Err(error) = restored {
                tracing::warn!(folder, %error, "could not undo publication rules");
            }
        }
    }
}
