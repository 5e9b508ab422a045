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

use super::error::ApiError;
use super::state::AppState;
use crate::auth::Caller;
use crate::catalog::Transfer;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct TransferRequest {
    source_url: Option<String>,
    destination_url: Option<String>,
    #[serde(default)]
    overwrite: bool,
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
    state.catalog().transfer(caller, &source, &destination, kind, request.overwrite).await?;
    Ok(StatusCode::OK)
}
