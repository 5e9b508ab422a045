//! DIAL's publication API: `/v1/ops/publication/*`. Each route reads its
//! body, makes one call to the workflow (`publication::workflow`) and
//! answers with what it returns.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::state::AppState;
use crate::access::public_rules::RulesDocument;
use crate::audit::AuditEvent;
use crate::auth::Caller;
use crate::publication::workflow::PublicationRequest;
use crate::publication::{Publication, PublicationSummary};

fn body<T: DeserializeOwned>(bytes: &Bytes, what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("{what}. Incorrect body: {e}")))
}

/// `POST /v1/ops/publication/create`
#[utoipa::path(post, path = "/v1/ops/publication/create", tag = "publication", request_body = PublicationRequest,
    responses((status = 200, description = "The publication, pending review", body = Publication)))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Json<Publication>, ApiError> {
    let request: PublicationRequest = body(&bytes, "Can't create publication")?;
    Ok(Json(state.publications().create(&caller, request).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
struct UrlRequest {
    url: String,
    #[serde(default)]
    comment: Option<String>,
    /// `publication/list` of `publications/public/` only: the decided ones
    /// (approved and rejected, with who decided) instead of the queue.
    #[serde(default)]
    decided: bool,
}

/// `POST /v1/ops/publication/get`
#[utoipa::path(post, path = "/v1/ops/publication/get", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "The publication (its author or an admin)", body = Publication)))]
pub async fn get(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<Publication>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't get publication")?;
    Ok(Json(state.publications().get(&caller, &request.url).await?))
}

/// `{"publications": [...]}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Publications {
    publications: Vec<PublicationSummary>,
}

/// `POST /v1/ops/publication/list`: `publications/<own bucket>/` for the
/// caller's own, `publications/public/` for the admins' pending queue
/// (with `"decided": true`, the approved and rejected ones).
#[utoipa::path(post, path = "/v1/ops/publication/list", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "The publications, without their resources and rules",
        body = Publications)))]
pub async fn list(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<Publications>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't list publications")?;
    let publications = state.publications().list(&caller, &request.url, request.decided).await?;
    Ok(Json(Publications { publications }))
}

/// `POST /v1/ops/publication/delete`: the author withdraws (or an admin
/// removes) a publication.
#[utoipa::path(post, path = "/v1/ops/publication/delete", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "Withdrawn (author) or removed (admin)")))]
pub async fn delete(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't delete publication")?;
    state.publications().withdraw(&caller, &request.url).await?;
    Ok(StatusCode::OK)
}

/// `POST /v1/ops/publication/approve` (admin): all or nothing, as clients
/// see it (`Publications::approve`).
#[utoipa::path(post, path = "/v1/ops/publication/approve", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "Approved: the resources are in `public` (admins)", body = Publication)))]
pub async fn approve(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Json<Publication>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't decide publication")?;
    let publication = state.publications().approve(&caller, &request.url, request.comment).await?;
    state.audit().emit(AuditEvent::publication_decision(&publication));
    Ok(Json(publication))
}

/// `POST /v1/ops/publication/reject` (admin): `{"url", "comment"}`.
#[utoipa::path(post, path = "/v1/ops/publication/reject", tag = "publication", request_body = UrlRequest,
    responses((status = 200, description = "Rejected, with the comment (admins)", body = Publication)))]
pub async fn reject(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Json<Publication>, ApiError> {
    let request: UrlRequest = body(&bytes, "Can't decide publication")?;
    let publication = state.publications().reject(&caller, &request.url, request.comment).await?;
    state.audit().emit(AuditEvent::publication_decision(&publication));
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
    Ok(Json(Rules { rules: state.publications().rules_along(&caller, &request.url).await? }))
}
