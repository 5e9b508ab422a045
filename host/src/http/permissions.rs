//! DIAL's per-request-permissions API (`/v1/ops/resource/per-request-permissions/…`):
//! an application holding a per-request key passes access it holds on to an
//! application it calls. The key minted for that call receives it.
//!
//! - `grant` `{"receiver", "resourcePermissions": [{"url", "permissions"}]}`
//!   (`resources` accepted too): every URL must be held by the caller's key
//!   with every permission named (403 `Access to resource is forbidden:
//!   <url>` otherwise, nothing granted); the grant is a change to the live
//!   key ([`crate::keys::KeyChange`]), seen by every instance.
//! - `revoke` (same body): takes it back for calls made from now on.
//! - `list` `{"with": "ME"|"OTHERS"}`: what this key received from its
//!   caller (`{"resources"}`), or what it passed on (`{"receivers"}`).
//!
//! Only a per-request key may call them (403 otherwise). What a receiver
//! gets is still bounded, at every use, by the originating user's reach
//! ([`crate::access`]): passing access on never widens it.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::state::AppState;
use crate::access::{Resource, StateRead};
use crate::auth::Caller;
use crate::keys::{Changed, KeyChange, KeyData, KeyGrant, MAX_KEY_CHANGES};

/// `grant` and `revoke`: the receiving deployment and what it gets.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PerRequestReceiver {
    /// The deployment id of the application the caller calls.
    receiver: String,
    /// What it receives (aidial-client's name; DIAL Core also reads `resources`).
    #[serde(alias = "resources")]
    resource_permissions: Vec<ResourcePermission>,
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
pub struct ResourcePermission {
    url: String,
    /// `READ`, `WRITE` (any case).
    permissions: Vec<String>,
}

/// `list`: `ME` (what this key received) or `OTHERS` (what it passed on).
#[derive(Deserialize, utoipa::ToSchema)]
pub struct ListPermissionRequest {
    with: String,
}

/// `list` with `ME`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ResourcePermissionList {
    resources: Vec<ResourcePermission>,
}

/// `list` with `OTHERS`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PerRequestReceiverList {
    receivers: Vec<ReceiverPermissions>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ReceiverPermissions {
    receiver: String,
    resources: Vec<ResourcePermission>,
}

/// The caller's key: these operations are an application's.
fn key_of(caller: &Caller) -> Result<&KeyData, ApiError> {
    caller
        .per_request
        .as_deref()
        .ok_or_else(|| ApiError::new(StatusCode::FORBIDDEN, "Operation is only permitted by per request API key"))
}

fn body<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|error| ApiError::bad_request(format!("Not valid JSON body: {error}")))
}

/// The changes a `grant` or `revoke` body asks for, each URL in the form
/// grants are keyed by (after access is checked, for a grant). What the
/// key could not take anyway is refused before any URL is looked at, and
/// the URLs of one request are decided on one read of the access state.
async fn changes(
    state: &AppState,
    caller: &Caller,
    key: &KeyData,
    request: PerRequestReceiver,
    granting: bool,
) -> Result<Vec<KeyChange>, ApiError> {
    let receiver = super::mint::decode_id(&request.receiver)?;
    if receiver.is_empty() {
        return Err(ApiError::bad_request("receiver must name a deployment"));
    }
    if request.resource_permissions.is_empty() {
        return Err(ApiError::bad_request("No resources provided"));
    }
    if request.resource_permissions.len() > MAX_KEY_CHANGES.saturating_sub(key.changes_taken) {
        return Err(key_full(request.resource_permissions.len(), key.changes_taken));
    }
    let mut access_state = StateRead::default();
    let mut changes = Vec::with_capacity(request.resource_permissions.len());
    for ResourcePermission { url, permissions } in request.resource_permissions {
        let (mut read, mut write) = (false, false);
        for permission in &permissions {
            match permission.to_ascii_uppercase().as_str() {
                "READ" => read = true,
                "WRITE" => write = true,
                other => return Err(ApiError::bad_request(format!("Unsupported permission {other} for {url}"))),
            }
        }
        if !read && !write {
            return Err(ApiError::bad_request(format!("No permissions given for {url}")));
        }
        let link = state.catalog().parse_canonical(&url).await?;
        if granting {
            let resource = Resource { url: &link.url, location: &link.location };
            let held = state.access().permissions_within(caller, resource, &mut access_state).await?;
            if (read && !held.read) || (write && !held.write) {
                return Err(ApiError::new(StatusCode::FORBIDDEN, format!("Access to resource is forbidden: {url}")));
            }
        }
        let (receiver, url) = (receiver.clone(), link.key());
        changes.push(match granting {
            true => KeyChange::PassOn { receiver, url, read, write },
            false => KeyChange::Withdraw { receiver, url, read, write },
        });
    }
    Ok(changes)
}

async fn apply(state: &AppState, key: &KeyData, changes: Vec<KeyChange>) -> Result<(), ApiError> {
    let applied = state.keys().change(&key.id.0, changes).await.map_err(|error| {
        tracing::error!(%error, "changing a per-request key");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "The key store (Redis) is unavailable; retry")
    })?;
    match applied {
        Changed::Applied => Ok(()),
        Changed::Gone => Err(crate::auth::AuthError::UnknownKey.into()),
        Changed::Full => Err(key_full(0, MAX_KEY_CHANGES)),
    }
}

/// 400: `asked` more changes do not fit in what the key took so far.
fn key_full(asked: usize, taken: usize) -> ApiError {
    let left = MAX_KEY_CHANGES.saturating_sub(taken);
    let asked = if asked == 0 { String::new() } else { format!(": {asked} asked for, {left} left") };
    ApiError::bad_request(format!("This key took the {MAX_KEY_CHANGES} changes one key may take{asked}"))
}

/// `POST /v1/ops/resource/per-request-permissions/grant`
#[utoipa::path(post, path = "/v1/ops/resource/per-request-permissions/grant", tag = "deployments",
    request_body = PerRequestReceiver,
    responses((status = 200, description = "Granted: the key minted for the caller's next call to the receiver gets it")))]
pub async fn grant(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let key = key_of(&caller)?;
    let changes = changes(&state, &caller, key, body(&bytes)?, true).await?;
    apply(&state, key, changes).await?;
    Ok(StatusCode::OK)
}

/// `POST /v1/ops/resource/per-request-permissions/revoke`
#[utoipa::path(post, path = "/v1/ops/resource/per-request-permissions/revoke", tag = "deployments",
    request_body = PerRequestReceiver,
    responses((status = 200, description = "Revoked for the calls made from now on")))]
pub async fn revoke(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    let key = key_of(&caller)?;
    let changes = changes(&state, &caller, key, body(&bytes)?, false).await?;
    apply(&state, key, changes).await?;
    Ok(StatusCode::OK)
}

fn permissions(grant: &KeyGrant) -> ResourcePermission {
    let held = crate::access::Permissions { read: grant.read, write: grant.write };
    ResourcePermission { url: grant.url.clone(), permissions: held.names().into_iter().map(String::from).collect() }
}

/// `POST /v1/ops/resource/per-request-permissions/list`
#[utoipa::path(post, path = "/v1/ops/resource/per-request-permissions/list", tag = "deployments",
    request_body = ListPermissionRequest,
    responses((status = 200, description = "`ME`: what the key received; `OTHERS`: what it passed on, by receiver", body = Object)))]
pub async fn list(caller: Caller, bytes: Bytes) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let key = key_of(&caller)?;
    let request: ListPermissionRequest = body(&bytes)?;
    Ok(match request.with.to_ascii_uppercase().as_str() {
        "ME" => {
            Json(ResourcePermissionList { resources: key.received.iter().map(permissions).collect() }).into_response()
        }
        "OTHERS" => {
            let mut receivers: Vec<ReceiverPermissions> = Vec::new();
            for passed in &key.passed_on {
                let resource = permissions(&passed.grant);
                match receivers.iter_mut().find(|r| r.receiver == passed.receiver) {
                    Some(receiver) => receiver.resources.push(resource),
                    None => receivers
                        .push(ReceiverPermissions { receiver: passed.receiver.clone(), resources: vec![resource] }),
                }
            }
            Json(PerRequestReceiverList { receivers }).into_response()
        }
        other => return Err(ApiError::bad_request(format!("with must be ME or OTHERS, not {other}"))),
    })
}
