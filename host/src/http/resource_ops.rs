//! `POST /v1/ops/resource/copy` and `/v1/ops/resource/move`: one item of any
//! type, v1 or v2, copied or moved server-side (SPEC §11).
//!
//! Both are one commit at the destination (a v2 resource gets a fresh,
//! re-validated version and marker; a v1 item one conditional write); a move
//! then deletes the source, so a crash in between leaves the source intact
//! and the destination old or new, never neither. The delete is conditional
//! on the etag the copy read: a write acknowledged at the source while the
//! copy ran is never deleted (409, the source stays as last written).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use super::catalog;
use super::error::ApiError;
use super::state::AppState;
use crate::access::Permission;
use crate::auth::Caller;
use crate::etag::{EtagMatch, Preconditions};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct TransferRequest {
    source_url: Option<String>,
    destination_url: Option<String>,
    #[serde(default)]
    overwrite: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transfer {
    Copy,
    Move,
}

/// `POST /v1/ops/resource/copy`: READ on the source, WRITE on the destination.
#[utoipa::path(post, path = "/v1/ops/resource/copy", tag = "resources", request_body = TransferRequest,
    responses(
        (status = 200, description = "Copied in one commit at the destination"),
        (status = 412, description = "The destination exists and `overwrite` is false", body = String, content_type = "text/plain"),
    ))]
pub async fn copy(State(state): State<AppState>, caller: Caller, bytes: Bytes) -> Result<StatusCode, ApiError> {
    transfer(&state, &caller, &bytes, Transfer::Copy).await
}

/// `POST /v1/ops/resource/move`: WRITE on both. Within one bucket the
/// source's shares move with it; across buckets they end (as DIAL).
#[utoipa::path(post, path = "/v1/ops/resource/move", tag = "resources", request_body = TransferRequest,
    responses(
        (status = 200, description = "Committed at the destination, then deleted at the source"),
        (status = 412, description = "The destination exists and `overwrite` is false", body = String, content_type = "text/plain"),
    ))]
pub async fn move_resource(
    State(state): State<AppState>,
    caller: Caller,
    bytes: Bytes,
) -> Result<StatusCode, ApiError> {
    transfer(&state, &caller, &bytes, Transfer::Move).await
}

async fn transfer(state: &AppState, caller: &Caller, bytes: &Bytes, kind: Transfer) -> Result<StatusCode, ApiError> {
    let verb = if kind == Transfer::Copy { "copy" } else { "move" };
    let request: TransferRequest = serde_json::from_slice(bytes).map_err(|error| {
        tracing::debug!(%error, "{verb} request");
        ApiError::bad_request(format!("Can't initiate {verb} resource request. Incorrect body provided"))
    })?;
    let source = request.source_url.ok_or_else(|| ApiError::bad_request("sourceUrl must be provided"))?;
    let destination =
        request.destination_url.ok_or_else(|| ApiError::bad_request("destinationUrl must be provided"))?;
    let source = catalog::canonical(state, catalog::parse_link(state, &source)?).await?;
    let destination = catalog::resource(catalog::parse_link(state, &destination)?);
    if source.url.group() != destination.url.group() {
        return Err(ApiError::bad_request("source and destination resources must be the same type"));
    }
    for link in [&source, &destination] {
        if link.url.is_folder() {
            return Err(ApiError::bad_request(format!(
                "{} is a folder: only items can be copied or moved",
                link.key()
            )));
        }
    }
    if source.key() == destination.key() {
        return Err(ApiError::bad_request("source and destination resources cannot be the same"));
    }
    let needed_on_source = if kind == Transfer::Copy { Permission::Read } else { Permission::Write };
    catalog::require(state, caller, &source, needed_on_source).await?;
    catalog::require(state, caller, &destination, Permission::Write).await?;

    // A missing source is the copy's own 404: it reads the source first.
    let conditions = if request.overwrite { Preconditions::default() } else { Preconditions::create_only() };
    let policy = state.declaration_policy(caller);
    let copied = catalog::copy(state, &source, &destination, Some(caller.author_name()), &policy, &conditions).await?;
    if kind == Transfer::Move {
        if source.location == destination.location {
            state.access().sharing().copy(&source.location, &source.key(), &destination.key()).await?;
        }
        // Only the version copied: a write that landed meanwhile stays.
        // Ends the source's shares and invitations, as every delete does.
        let copied_version =
            Preconditions { if_match: Some(EtagMatch::Tags(vec![copied.source_etag])), if_none_match: None };
        match catalog::delete(state, &source, &copied_version).await {
            Err(error) if error.status == StatusCode::PRECONDITION_FAILED => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!(
                        "{} changed while it was being moved: it was copied to {} as it was before the change, \
                         and kept as last written",
                        source.key(),
                        destination.key()
                    ),
                ));
            }
            result => result?,
        }
    }
    Ok(StatusCode::OK)
}
