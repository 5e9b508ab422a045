//! DIAL's publication API: `/v1/ops/publication/*`.
//!
//! create copies each source into the author's review bucket
//! (`<author>publications/<id>/`); approve copies review → `public`, applies
//! DELETE actions, stores the rules and removes the review copies; reject
//! and delete remove the review copies. Sources are never touched. Every
//! copy of a v2 resource is a whole version with a fresh, validated marker
//! and the same aggregate etag ([`catalog::copy`]).

use std::collections::BTreeSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::catalog::{self, Link};
use super::error::ApiError;
use super::state::AppState;
use crate::access::public_rules::{PublicRules, Rule, RulesDocument};
use crate::access::{Permission, Resource};
use crate::auth::Caller;
use crate::clock::now_ms;
use crate::documents::Update;
use crate::etag::{EtagMatch, Preconditions};
use crate::publication::{
    Action, Publication, PublicationResource, PublicationStore, PublicationSummary, Status, parse_publication_url,
};
use crate::resource_url::{Intent, ResourceUrl, SEGMENT_ESCAPES};
use percent_encoding::utf8_percent_encode;

fn body<T: DeserializeOwned>(bytes: &Bytes, what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("{what}. Incorrect body: {e}")))
}

fn store(state: &AppState) -> PublicationStore {
    PublicationStore::new(state.documents().clone())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct PublicationRequest {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    target_folder: Option<String>,
    #[serde(default)]
    resources: Vec<PublicationResourceRequest>,
    #[serde(default)]
    rules: Vec<Rule>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct PublicationResourceRequest {
    #[serde(default)]
    action: Option<Action>,
    #[serde(default)]
    source_url: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

/// A `public/<path>/` target folder: its canonical form (the key its rules
/// are stored under) and its decoded segments.
fn target_folder(folder: &str) -> Result<(String, Vec<String>), ApiError> {
    let bad = || ApiError::bad_request(format!("Publication \"targetFolder\" must be a public folder: {folder}"));
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

/// `POST /v1/ops/publication/create`
#[utoipa::path(post, path = "/v1/ops/publication/create", tag = "publication", request_body = PublicationRequest,
    responses((status = 200, description = "The publication, pending review", body = crate::publication::Publication)))]
pub async fn create(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<Value>, ApiError> {
    let request: PublicationRequest = body(&bytes, "Can't create publication")?;
    let requested_folder = request
        .target_folder
        .clone()
        .ok_or_else(|| ApiError::bad_request("Publication \"targetFolder\" is missing"))?;
    let (target_folder, folder_segments) = self::target_folder(&requested_folder)?;
    if folder_segments.is_empty() && !request.rules.is_empty() {
        return Err(ApiError::bad_request("Rules are not allowed for root targetFolder"));
    }
    if request.resources.is_empty() && request.rules.is_empty() {
        return Err(ApiError::bad_request("Publication must have at least one resource or rule"));
    }
    for rule in &request.rules {
        rule.check().map_err(|e| ApiError::bad_request(e.to_string()))?;
    }

    let author = caller.bucket_location();
    let author_bucket = state.buckets().encode(&author);
    let mut random = [0u8; 16];
    rand::fill(&mut random);
    let id: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let review_bucket = state.buckets().encode(&author.review(&id));

    let mut planned = Vec::new();
    let mut targets = BTreeSet::new();
    let mut sources = BTreeSet::new();
    for resource in &request.resources {
        let action = resource.action.ok_or_else(|| ApiError::bad_request("Resource \"action\" is missing"))?;
        let target_raw =
            resource.target_url.as_deref().ok_or_else(|| ApiError::bad_request("Resource \"targetUrl\" is missing"))?;
        let target = catalog::resource(catalog::parse_link(&state, target_raw)?);
        let inside = target.url.is_public()
            && !target.url.is_folder()
            && target.url.segments().len() > folder_segments.len()
            && target.url.segments().starts_with(&folder_segments);
        if !inside {
            return Err(ApiError::bad_request(format!(
                "Target resource {target_raw} must be an item inside the target folder {target_folder}"
            )));
        }
        if !targets.insert(target.key()) {
            return Err(ApiError::bad_request(format!("Duplicated target resource: {target_raw}")));
        }
        // The author must be able to read what they publish into.
        if !caller.is_admin && !state.access().rules().admits(&caller, &target.url).await? {
            return Err(ApiError::forbidden(&target.key()));
        }
        let exists = catalog::exists(&state, &target).await?;
        match action {
            Action::Add => {
                let source_raw = resource
                    .source_url
                    .as_deref()
                    .ok_or_else(|| ApiError::bad_request("Resource \"sourceUrl\" is missing"))?;
                // The listing form `…/x/` is the resource `x` only when `x`
                // exists; otherwise it is the folder it looks like. Readable
                // first (as DIAL checks), so the folder answer tells nobody
                // without access whether a resource lives there.
                let source = catalog::canonical(&state, catalog::parse_link(&state, source_raw)?).await?;
                if source.url.is_public() || source.url.is_folder() {
                    catalog::require(&state, &caller, &source, Permission::Read).await?;
                    return Err(ApiError::bad_request(format!("Source resource {source_raw} must be a private item")));
                }
                if source.url.group() != target.url.group() {
                    return Err(ApiError::bad_request(format!(
                        "Source {source_raw} and target {target_raw} must be of the same type"
                    )));
                }
                if !sources.insert(source.key()) {
                    return Err(ApiError::bad_request(format!("Duplicated source resource: {source_raw}")));
                }
                let resource = Resource { url: &source.url, location: &source.location };
                state.access().check(&caller, resource, Permission::Read).await?;
                if !catalog::exists(&state, &source).await? {
                    return Err(ApiError::not_found(&source.key()));
                }
                if exists {
                    return Err(ApiError::bad_request(format!("Target resource already exists: {target_raw}")));
                }
                // As DIAL: the review copy is named by the target's path below
                // the target folder (`skills/<review bucket>/pdf`).
                let below: Vec<String> = target.url.segments()[folder_segments.len()..]
                    .iter()
                    .map(|segment| utf8_percent_encode(segment, SEGMENT_ESCAPES).to_string())
                    .collect();
                let review_raw = format!("{}/{review_bucket}/{}", target.url.group(), below.join("/"));
                let review = catalog::parse_link(&state, &review_raw)?;
                planned.push(Planned { action, source: Some(source), target, review: Some(review) });
            }
            Action::Delete => {
                if !exists {
                    return Err(ApiError::bad_request(format!("Target resource does not exist: {target_raw}")));
                }
                planned.push(Planned { action, source: None, target, review: None });
            }
        }
    }

    // Copy every source into the review bucket; on failure undo what was copied.
    let author_name = Some(caller.author_name());
    for (index, plan) in planned.iter().enumerate() {
        let (Some(source), Some(review)) = (&plan.source, &plan.review) else { continue };
        let policy = state.declaration_policy(&caller);
        if let Err(error) =
            catalog::copy(&state, source, review, author_name.clone(), &policy, &Preconditions::create_only()).await
        {
            remove_review_copies(&state, &planned[..index]).await;
            return Err(error);
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
    };
    if let Err(error) = store(&state).create(&id, &author, &publication).await {
        remove_review_copies(&state, &planned).await;
        return Err(error.into());
    }
    Ok(Json(serde_json::to_value(&publication).expect("publications serialize")))
}

/// Best effort: review copies left behind by a failure are unreachable
/// (no publication names them) and only cost storage.
async fn remove_review_copies(state: &AppState, planned: &[Planned]) {
    for review in planned.iter().filter_map(|p| p.review.as_ref()) {
        remove_review_copy(state, &review.key()).await;
    }
}

async fn remove_reviews_of(state: &AppState, publication: &Publication) {
    for url in publication.resources.iter().filter_map(|r| r.review_url.as_deref()) {
        remove_review_copy(state, url).await;
    }
}

/// One review copy, whatever its state; only real failures are logged.
async fn remove_review_copy(state: &AppState, url: &str) {
    let removed = match catalog::parse_link(state, url) {
        Ok(link) => catalog::delete(state, &link, &Preconditions::default()).await,
        Err(error) => Err(error),
    };
    if let Err(error) = removed
        && error.status != StatusCode::NOT_FOUND
    {
        tracing::warn!(url, error = %error.message, "could not remove a review copy");
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
struct UrlRequest {
    url: String,
    #[serde(default)]
    comment: Option<String>,
}

/// The publication a request names, if the caller is its author or an admin.
async fn authorized(state: &AppState, caller: &Caller, url: &str) -> Result<(String, Publication), ApiError> {
    let forbidden = || ApiError::new(StatusCode::FORBIDDEN, format!("Forbidden resource: {url}"));
    let (bucket, id) =
        parse_publication_url(url).ok_or_else(|| ApiError::bad_request(format!("Invalid publication url: {url}")))?;
    let author = state.buckets().decode(&bucket).map_err(|_| forbidden())?;
    if author != caller.bucket_location() && !caller.is_admin {
        return Err(forbidden());
    }
    let publication = store(state).get(&id).await?.ok_or_else(|| ApiError::not_found(url))?;
    if publication.url != url.trim_start_matches('/') {
        return Err(ApiError::not_found(url));
    }
    Ok((id, publication))
}

/// `POST /v1/ops/publication/get`
#[utoipa::path(post, path = "/v1/ops/publication/get", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "The publication (its author or an admin)", body = crate::publication::Publication)))]
pub async fn get(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<Publication>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't get publication")?;
    Ok(Json(authorized(&state, &caller, &request.url).await?.1))
}

/// `{"publications": [...]}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Publications {
    publications: Vec<PublicationSummary>,
}

/// `POST /v1/ops/publication/list`: `publications/<own bucket>/` for the
/// caller's own, `publications/public/` for the admins' pending queue.
#[utoipa::path(post, path = "/v1/ops/publication/list", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "The publications, without their resources and rules",
        body = Publications)))]
pub async fn list(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<Publications>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't list publications")?;
    let bucket = request
        .url
        .trim_start_matches('/')
        .strip_prefix("publications/")
        .and_then(|rest| rest.strip_suffix('/'))
        .ok_or_else(|| ApiError::bad_request(format!("Invalid publication folder: {}", request.url)))?;
    let publications = if bucket == "public" {
        if !caller.is_admin {
            return Err(ApiError::forbidden(&request.url));
        }
        store(&state).pending().await?
    } else {
        let author = state.buckets().decode(bucket)?;
        if author != caller.bucket_location() {
            return Err(ApiError::forbidden(&request.url));
        }
        store(&state).by_author(&author).await?
    };
    Ok(Json(Publications { publications: publications.iter().map(PublicationSummary::from).collect() }))
}

/// `POST /v1/ops/publication/delete`: the author withdraws (or an admin
/// removes) a publication. Withdrawing a pending one is a compare-and-swap
/// on its status, so it and an approval cannot both win; only then are its
/// review copies removed.
#[utoipa::path(post, path = "/v1/ops/publication/delete", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "Withdrawn (author) or removed (admin)")))]
pub async fn delete(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't delete publication")?;
    let (id, publication) = authorized(&state, &caller, &request.url).await?;
    let (bucket, _) = parse_publication_url(&request.url).expect("checked by authorized");
    let author = state.buckets().decode(&bucket)?;
    match store(&state).withdraw(&id, &author).await? {
        Some(Status::Pending) => remove_reviews_of(&state, &publication).await,
        Some(_) => {}
        None => return Err(ApiError::not_found(&request.url)),
    }
    Ok(StatusCode::OK)
}

/// The publication an admin decides on, while it is still pending.
async fn pending_for_decision(
    state: &AppState,
    caller: &Caller,
    request: &UrlRequest,
) -> Result<(String, Publication), ApiError> {
    if !caller.is_admin {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "Only admins may approve or reject publications"));
    }
    let (id, publication) = authorized(state, caller, &request.url).await?;
    if publication.status != Status::Pending {
        return Err(already_finalized(&request.url));
    }
    Ok((id, publication))
}

fn already_finalized(url: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("Publication is already finalized: {url}"))
}

/// Moves a pending publication to `status`; exactly one decision wins.
async fn decide(state: &AppState, id: &str, request: &UrlRequest, status: Status) -> Result<Publication, ApiError> {
    store(state).finalize(id, status, request.comment.clone()).await?.ok_or_else(|| already_finalized(&request.url))
}

/// `POST /v1/ops/publication/approve` (admin).
///
/// All or nothing, as clients see it: every copy review → `public` and the
/// rules are applied first, then the status moves PENDING → APPROVED by
/// compare-and-swap. If a copy fails (e.g. the target exists: 412) or another
/// decision or a withdrawal wins the swap, what this request applied is
/// undone and the publication stays as it was. DELETE actions and the
/// removal of review copies come after the decision (deletes cannot be
/// undone); they are idempotent.
#[utoipa::path(post, path = "/v1/ops/publication/approve", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "Approved: the resources are in `public` (admins)", body = crate::publication::Publication)))]
pub async fn approve(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Json<Publication>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't decide publication")?;
    let (id, publication) = pending_for_decision(&state, &caller, &request).await?;
    let mut applied = Applied::default();
    let decided = match apply_before_decision(&state, &caller, &publication, &mut applied).await {
        Ok(()) => decide(&state, &id, &request, Status::Approved).await,
        Err(error) => Err(error),
    };
    let publication = match decided {
        Ok(publication) => publication,
        Err(error) => {
            applied.undo(&state).await;
            return Err(error);
        }
    };
    for resource in publication.resources.iter().filter(|r| r.action == Action::Delete) {
        let target = catalog::parse_link(&state, &resource.target_url)?;
        match catalog::delete(&state, &target, &Preconditions::default()).await {
            Ok(()) => {}
            Err(error) if error.status == StatusCode::NOT_FOUND => {}
            Err(error) => {
                tracing::error!(url = resource.target_url, error = %error.message, "approved, but a DELETE action failed");
                return Err(ApiError::new(
                    error.status,
                    format!(
                        "The publication is approved, but deleting {} failed: {}",
                        resource.target_url, error.message
                    ),
                ));
            }
        }
    }
    remove_reviews_of(&state, &publication).await;
    Ok(Json(publication))
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
    async fn undo(self, state: &AppState) {
        for (target, etag) in self.copies.iter().rev() {
            let conditions = Preconditions { if_match: Some(EtagMatch::Tags(vec![etag.clone()])), if_none_match: None };
            if let Err(error) = catalog::delete(state, target, &conditions).await {
                tracing::warn!(url = %target.key(), error = %error.message, "could not undo a publication copy");
            }
        }
        if let Some((folder, previous, ours)) = self.rules {
            let restored = state
                .documents()
                .update(&PublicRules::path(), |all: &mut RulesDocument| {
                    if all.get(&folder) != Some(&ours) {
                        return Ok::<_, ApiError>(Update::Unchanged(()));
                    }
                    match &previous {
                        Some(rules) => all.insert(folder.clone(), rules.clone()),
                        None => all.remove(&folder),
                    };
                    Ok(Update::Changed(()))
                })
                .await;
            if let Err(error) = restored {
                tracing::warn!(folder, error = %error.message, "could not undo publication rules");
            }
        }
    }
}

/// Copies every ADD from review to its target (create-only) and stores the
/// rules, recording each step in `applied`.
async fn apply_before_decision(
    state: &AppState,
    admin: &Caller,
    publication: &Publication,
    applied: &mut Applied,
) -> Result<(), ApiError> {
    let author = publication.author.clone();
    // The admin who approves writes the public copies.
    let policy = &state.declaration_policy(admin);
    for resource in publication.resources.iter().filter(|r| r.action == Action::Add) {
        let target = catalog::parse_link(state, &resource.target_url)?;
        let review_url = resource.review_url.as_deref().unwrap_or_default();
        let review = catalog::parse_link(state, review_url)?;
        let copied =
            catalog::copy(state, &review, &target, author.clone(), policy, &Preconditions::create_only()).await?;
        applied.copies.push((target, copied.etag));
    }
    if !publication.rules.is_empty() {
        let folder = publication.target_folder.clone();
        let rules = publication.rules.clone();
        let previous = state
            .documents()
            .update(&PublicRules::path(), |all: &mut RulesDocument| {
                Ok::<_, ApiError>(Update::Changed(all.insert(folder.clone(), rules.clone())))
            })
            .await?;
        applied.rules = Some((folder, previous, rules));
    }
    Ok(())
}

/// `POST /v1/ops/publication/reject` (admin): `{"url", "comment"}`.
#[utoipa::path(post, path = "/v1/ops/publication/reject", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "Rejected, with the comment (admins)", body = crate::publication::Publication)))]
pub async fn reject(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Json<Publication>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't decide publication")?;
    let (id, _) = pending_for_decision(&state, &caller, &request).await?;
    let publication = decide(&state, &id, &request, Status::Rejected).await?;
    remove_reviews_of(&state, &publication).await;
    Ok(Json(publication))
}

/// `{"rules": {"<folder>": [rule, ...]}}`: the rules along a folder.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Rules {
    // Inline: by reference, utoipa would name the alias's schema `BTreeMap`.
    #[schema(inline)]
    rules: RulesDocument,
}

/// `POST /v1/ops/publication/rule/list`: `{"url": "public/<folder>/"}` → the
/// rules of the folder and its ancestors. The caller must be able to read
/// the folder.
#[utoipa::path(post, path = "/v1/ops/publication/rule/list", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "The rules of the folder and its ancestors", body = Rules)))]
pub async fn list_rules(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<Rules>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't list rules")?;
    target_folder(&request.url)?;
    let folder = ResourceUrl::parse(&format!("any/{}", request.url), Intent::Read)?;
    if !caller.is_admin && !state.access().rules().admits(&caller, &folder).await? {
        return Err(ApiError::forbidden(&request.url));
    }
    let rules = state.access().rules().along(&folder).await?;
    Ok(Json(Rules { rules }))
}
