//! DIAL's sharing API: `/v1/ops/resource/share/*` and `/v1/invitations`.
//!
//! Everything here acts on the caller's own bucket; the state and its rules
//! live in [`crate::sharing`], the access check in [`crate::access`].

use std::collections::BTreeSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::state::AppState;
use super::wire;
use crate::auth::Caller;
use crate::catalog::{Found, Kind, Link};
use crate::sharing::{Access, Invitation, SharedResource, to_permissions};

/// JSON bodies are accepted whatever the Content-Type says; one that does
/// not parse gets DIAL's exact message (clients match on it), and the
/// parser's detail goes to the log.
fn body<T: DeserializeOwned>(bytes: &Bytes, what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|error| {
        tracing::debug!(%error, "{what}");
        ApiError::bad_request(format!("{what}. Incorrect body"))
    })
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ShareRequest {
    #[serde(default)]
    resources: Vec<ShareResource>,
    #[serde(default)]
    max_accepted_users: Option<i64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
struct ShareResource {
    url: String,
    #[serde(default)]
    permissions: Option<Vec<String>>,
}

fn permissions(requested: Option<&Vec<String>>, default_read: bool) -> Result<Option<BTreeSet<Access>>, ApiError> {
    let Some(requested) = requested else {
        return Ok(default_read.then(|| BTreeSet::from([Access::Read])));
    };
    let mut set = BTreeSet::new();
    for permission in requested {
        set.insert(match permission.to_ascii_uppercase().as_str() {
            "READ" => Access::Read,
            "WRITE" => Access::Write,
            other => return Err(ApiError::bad_request(format!("Unsupported permission: {other}"))),
        });
    }
    if set.is_empty() {
        return Err(ApiError::bad_request("At least one permission must be provided"));
    }
    Ok(Some(set))
}

/// A link the caller owns, named in a sharing request, in the form grants
/// are keyed by.
async fn own_link(state: &AppState, caller: &Caller, raw: &str, message: &str) -> Result<Link, ApiError> {
    let link = state.catalog().parse_link(raw)?;
    if link.location != caller.bucket_location() {
        return Err(ApiError::bad_request(message.replace("{url}", raw)));
    }
    Ok(state.catalog().canonical(link).await?)
}

/// `POST /v1/ops/resource/share/create`
#[utoipa::path(post, path = "/v1/ops/resource/share/create", tag = "sharing", request_body = ShareRequest,
    responses((status = 200, description = "The invitation's link", body = InvitationLink)))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<Json<InvitationLink>, ApiError> {
    let request: ShareRequest = body(&bytes, "Can't initiate share request")?;
    if request.resources.is_empty() {
        return Err(ApiError::bad_request("No resources provided"));
    }
    let mut seen = BTreeSet::new();
    let mut resources = Vec::new();
    for resource in &request.resources {
        let link = own_link(&state, &caller, &resource.url, "Resource {url} does not belong to the user").await?;
        if !seen.insert(link.key()) {
            return Err(ApiError::bad_request(format!("Duplicated resource: {}", resource.url)));
        }
        // Links may be made ahead of the resource, as in DIAL.
        let permissions = permissions(resource.permissions.as_ref(), true)?.expect("defaults to READ");
        let (ttl, mut max_users) = state.access().sharing().limit_for(&caller, &link.kind.resource_type());
        if let Some(asked) = request.max_accepted_users.filter(|n| *n >= 0) {
            max_users = Some(max_users.map_or(asked, |limit| limit.min(asked)));
        }
        resources.push((SharedResource { url: link.key(), permissions }, (ttl, max_users)));
    }
    let invitation = state.access().sharing().create_invitation(&caller.bucket_location(), resources).await?;
    Ok(Json(InvitationLink { invitation_link: format!("/v1/invitations/{}", invitation.id) }))
}

/// `{"invitationLink": "/v1/invitations/<id>"}`.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InvitationLink {
    invitation_link: String,
}

/// An invitation as its owner and invitees see it (not who accepted it).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Invitation)]
pub struct InvitationView {
    id: String,
    resources: Vec<InvitedResource>,
    created_at: i64,
    expire_at: i64,
    max_accepted_users: Option<i64>,
}

/// A resource an invitation covers.
#[derive(Serialize, utoipa::ToSchema)]
pub struct InvitedResource {
    url: String,
    /// `READ`, `WRITE`.
    #[schema(value_type = Vec<String>)]
    permissions: BTreeSet<Access>,
}

impl From<Invitation> for InvitationView {
    fn from(invitation: Invitation) -> Self {
        let resources = invitation
            .resources
            .into_iter()
            .map(|r| InvitedResource { url: r.url, permissions: r.permissions })
            .collect();
        let Invitation { id, created_at, expire_at, max_accepted_users, .. } = invitation;
        Self { id, resources, created_at, expire_at, max_accepted_users }
    }
}

/// `{"invitations": [...]}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Invitations {
    invitations: Vec<InvitationView>,
}

/// `GET /v1/invitations`: the caller's own invitations.
#[utoipa::path(get, path = "/v1/invitations", tag = "sharing",
    responses((status = 200, description = "The caller's invitations", body = Invitations)))]
pub async fn list_invitations(State(state): State<AppState>, caller: Caller) -> Result<Json<Invitations>, ApiError> {
    let invitations = state.access().sharing().invitations_of(&caller.bucket_location()).await?;
    Ok(Json(Invitations { invitations: invitations.into_iter().map(InvitationView::from).collect() }))
}

#[derive(Deserialize)]
pub struct AcceptQuery {
    #[serde(default)]
    accept: Option<String>,
}

/// `GET /v1/invitations/{id}`: the invitation; with `?accept=true`, accept it.
#[utoipa::path(get, path = "/v1/invitations/{id}", tag = "sharing",
    params(("id" = String, Path, description = "The invitation's id"),
        ("accept" = Option<bool>, Query, description = "`true`: accept it (200, no body)")),
    responses((status = 200, description = "The invitation, or nothing once accepted", body = InvitationView)))]
pub async fn get_invitation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<AcceptQuery>,
) -> Result<Response, ApiError> {
    let sharing = state.access().sharing();
    if query.accept.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        sharing.accept(&caller.bucket_location(), &id).await?;
        return Ok(StatusCode::OK.into_response());
    }
    let (_, invitation) = sharing.invitation(&id).await?;
    Ok(Json(InvitationView::from(invitation)).into_response())
}

/// `DELETE /v1/invitations/{id}`: the owner withdraws an invitation.
#[utoipa::path(delete, path = "/v1/invitations/{id}", tag = "sharing",
    params(("id" = String, Path, description = "The invitation's id")),
    responses((status = 200, description = "Withdrawn by its owner")))]
pub async fn delete_invitation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.access().sharing().delete_invitation(&caller.bucket_location(), &id).await?;
    Ok(StatusCode::OK)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ListRequest {
    #[serde(default)]
    resource_types: Vec<String>,
    #[serde(default)]
    with: Option<String>,
}

/// `POST /v1/ops/resource/share/list`: `with: "others"` lists what the caller
/// shares; anything else, what is shared with the caller.
#[utoipa::path(post, path = "/v1/ops/resource/share/list", tag = "sharing", request_body = ListRequest,
    responses((status = 200, description = "Resources shared with the caller, or (`with: others`) by the caller",
        body = wire::Nodes)))]
pub async fn list(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<Json<wire::Nodes>, ApiError> {
    let request: ListRequest = body(&bytes, "Can't list shared resources")?;
    let sharing = state.access().sharing();
    let by_me = request.with.as_deref().is_some_and(|w| w.eq_ignore_ascii_case("others"));
    let grants = if by_me {
        sharing.shared_by(&caller.bucket_location()).await?
    } else {
        sharing.shared_with(&caller.bucket_location()).await?
    };
    let wanted: BTreeSet<String> = request.resource_types.iter().map(|t| t.to_ascii_uppercase()).collect();
    let mut nodes = Vec::new();
    for grant in &grants {
        let Ok(link) = state.catalog().parse_link(&grant.url) else { continue };
        let resource_type = link.kind.resource_type();
        if !wanted.is_empty() && !wanted.contains(&resource_type) {
            continue;
        }
        // A shared resource that no longer exists is not listed.
        let Some(found) = state.catalog().find(&link).await? else { continue };
        let mut node = shared_node(&link, found);
        node.permissions = Some(to_permissions(&grant.permissions).names().into_iter().map(str::to_string).collect());
        node.shared_with = (!grant.users.is_empty()).then(|| grant.users.clone());
        nodes.push(node);
    }
    Ok(Json(wire::Nodes { resources: nodes }))
}

/// What a shared link names, as `share/list` lists it.
fn shared_node(link: &Link, found: Found) -> wire::Node {
    let resource_type = link.kind.resource_type();
    let mut node = match (found, &link.kind) {
        (Found::Resource(marker), _) => wire::folders::resource_node(&link.url, &marker),
        (Found::Folder(marker), _) => wire::folders::folder_node(&link.url, marker.as_ref(), &resource_type),
        (Found::Item(meta), Kind::Blob(group)) => wire::blobs::item_node(&link.url, *group, &meta, false),
        (Found::Item(_) | Found::BlobFolder, _) => wire::Node::at(&link.url, wire::NodeType::Folder, &resource_type),
    };
    node.resource_type = resource_type;
    node
}

#[derive(Deserialize, utoipa::ToSchema)]
struct UrlsRequest {
    #[serde(default)]
    resources: Vec<ShareResource>,
}

/// `POST /v1/ops/resource/share/discard`: the caller gives up shares.
#[utoipa::path(post, path = "/v1/ops/resource/share/discard", tag = "sharing", request_body = UrlsRequest,
    responses((status = 200, description = "The caller no longer has them")))]
pub async fn discard(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let request: UrlsRequest = body(&bytes, "Can't discard shared resources")?;
    let mut resources = Vec::new();
    for resource in &request.resources {
        let link = state.catalog().parse_canonical(&resource.url).await?;
        resources.push((link.location.clone(), link.key()));
    }
    state.access().sharing().discard(&caller.bucket_location(), &resources).await?;
    Ok(StatusCode::OK)
}

/// `POST /v1/ops/resource/share/revoke`: the owner takes grants back.
#[utoipa::path(post, path = "/v1/ops/resource/share/revoke", tag = "sharing", request_body = UrlsRequest,
    responses((status = 200, description = "Grants taken back (all, or the permissions named)")))]
pub async fn revoke(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let request: UrlsRequest = body(&bytes, "Can't revoke shared resources")?;
    if request.resources.is_empty() {
        return Err(ApiError::bad_request("No resources provided"));
    }
    let mut resources = Vec::new();
    for resource in &request.resources {
        let message = "You are only allowed to revoke access from own resources";
        let link = own_link(&state, &caller, &resource.url, message).await?;
        resources.push((link.key(), permissions(resource.permissions.as_ref(), false)?));
    }
    state.access().sharing().revoke(&caller.bucket_location(), &resources).await?;
    Ok(StatusCode::OK)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct CopyRequest {
    source_url: String,
    destination_url: String,
}

/// `POST /v1/ops/resource/share/copy`: grantees of the source get the same
/// on the destination; both must be the caller's and exist.
#[utoipa::path(post, path = "/v1/ops/resource/share/copy", tag = "sharing", request_body = CopyRequest,
    responses((status = 200, description = "The destination's grantees are the source's")))]
pub async fn copy(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let request: CopyRequest = body(&bytes, "Can't copy shared access")?;
    let message = "Resource {url} does not belong to the user";
    let source = own_link(&state, &caller, &request.source_url, message).await?;
    let destination = own_link(&state, &caller, &request.destination_url, message).await?;
    // As DIAL: a missing source is a bad request, a missing destination not found.
    if !state.catalog().exists(&source).await? {
        return Err(ApiError::bad_request(format!("Source resource {} does not exist", source.key())));
    }
    if !state.catalog().exists(&destination).await? {
        return Err(ApiError::not_found(&destination.key()));
    }
    state.access().sharing().copy(&caller.bucket_location(), &source.key(), &destination.key()).await?;
    Ok(StatusCode::OK)
}
