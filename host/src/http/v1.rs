//! `/v1/{files|prompts|conversations|applications}/{bucket}/{path}` and
//! `/v1/metadata/{group}/{bucket}/{path}`: v1 single-blob resources.
//!
//! Thin: each route extracts, makes one call to the core's
//! `BlobResources` (the raw path through the one URL parser, the bucket
//! codec and the one access check, then the blob service) and renders what
//! it returns.

use axum::Json;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use futures_util::StreamExt;

use super::error::ApiError;
use super::extract::{ListingQuery, preconditions};
use super::multipart::{FormFields, Upload};
use super::respond::{file_headers, metadata_response, raw_path, with_etag};
use super::state::AppState;
use super::wire::blobs::{item_node, metadata_node};
use crate::access::Permission;
use crate::auth::Caller;
use crate::blob_resources::BlobMetadata;
use crate::blobs::{BlobError, BlobGroup, Download};
use crate::folder_resources::Page;
use crate::resource_url::Intent;

/// GET / PUT / DELETE of one item. Bodies are limited by the blob service
/// while streaming, so the default body limit is off.
pub fn resource_routes() -> MethodRouter<AppState> {
    get(get_item).put(put_item).delete(delete_item).layer(DefaultBodyLimit::disable())
}

/// `GET`: the item's bytes with its content type, length and `ETag`; 304
/// when `If-None-Match` matches.
#[utoipa::path(get, path = "/v1/files/{bucket}/{path}", tag = "v1", params(("bucket" = String, Path, description = "The bucket id (`GET /v1/bucket`), or `public`"),
        ("path" = String, Path, description = "The item's path in the bucket (may contain `/`)")),
    responses(
        (status = 200, description = "The item's bytes with its content type (a file) or JSON (prompt, conversation, \
            application); `ETag`",
            content((serde_json::Value = "application/json"), (super::wire::Binary = "*/*"))),
        (status = 304, description = "`If-None-Match` matched"),
    ))]
pub(super) async fn get_item(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let conditions = preconditions(&headers);
    match state.blob_resources().download(&caller, raw_path(&uri, "/v1/"), &conditions).await? {
        Download::NotModified(meta) => Ok(with_etag(StatusCode::NOT_MODIFIED.into_response(), &meta.etag)),
        Download::Content { meta, body } => {
            let response = (
                file_headers(&meta.content_type, meta.content_length),
                Body::from_stream(body.map(|chunk| chunk.map_err(std::io::Error::other))),
            )
                .into_response();
            Ok(with_etag(response, &meta.etag))
        }
    }
}

/// `PUT`: a file (multipart, one file part, streamed) or a JSON document
/// (whatever the request's content type). Answers the item's metadata.
#[utoipa::path(put, path = "/v1/files/{bucket}/{path}", tag = "v1", params(("bucket" = String, Path, description = "The bucket id (`GET /v1/bucket`), or `public`"),
        ("path" = String, Path, description = "The item's path in the bucket (may contain `/`)")),
    request_body(description = "A file as one multipart part; prompts and conversations as any JSON document, applications as a JSON object",
        content((super::wire::FileParts = "multipart/form-data"), (serde_json::Value = "application/json"))),
    responses(
        (status = 200, description = "Stored; the item's metadata and `ETag`", body = super::wire::Node),
        (status = 412, description = "`If-Match` / `If-None-Match` failed", body = String, content_type = "text/plain"),
        (status = 413, description = "Larger than `resources.max_size` / `max_file_size`", body = String, content_type = "text/plain"),
    ))]
pub(super) async fn put_item(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    let raw = raw_path(&uri, "/v1/");
    let target = state.blob_resources().resolve(&caller, raw, Intent::Write, Permission::Write).await?;
    if target.url.is_folder() {
        return Err(BlobError::FolderNotAllowed(target.url.to_string()).into());
    }
    let conditions = preconditions(&headers);
    let blobs = state.blobs();
    let committed = if target.group() == BlobGroup::Files {
        let mut upload = Upload::new(request, "Expected a multipart/form-data body with one file part")?;
        async {
            // Parts without a filename are form fields, which DIAL ignores.
            let mut part = upload.single_file(FormFields::Skipped).await?;
            let content_type = part.content_type().map(str::to_owned);
            let author = Some(caller.author_name());
            let key = state.writing_key(&caller);
            let stored =
                blobs.put_file(&target, &mut part, content_type.as_deref(), &conditions, author, key.as_ref()).await;
            stored.map_err(|error| part.error_or(error))
        }
        .await?
    } else {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        let body = request.into_body().into_data_stream();
        let policy = state.declaration_policy(&caller);
        let (author, key) = (Some(caller.author_name()), state.writing_key(&caller));
        blobs.put_json(&target, body, declared, &conditions, author, &policy, key.as_ref()).await?
    };
    let body = Json(item_node(&target.url, target.group(), &committed.meta, true));
    Ok(with_etag(body.into_response(), &committed.meta.etag))
}

/// `DELETE`: the item (`If-Match` / `If-None-Match` checked).
#[utoipa::path(delete, path = "/v1/files/{bucket}/{path}", tag = "v1", params(("bucket" = String, Path, description = "The bucket id (`GET /v1/bucket`), or `public`"),
        ("path" = String, Path, description = "The item's path in the bucket (may contain `/`)")),
    responses((status = 200, description = "Deleted (its shares end)")))]
pub(super) async fn delete_item(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let conditions = preconditions(&headers);
    state.blob_resources().delete(&caller, raw_path(&uri, "/v1/"), &conditions).await?;
    Ok(StatusCode::OK.into_response())
}

/// `GET /v1/metadata/{group}/{bucket}/{path}`: a folder (trailing `/`) lists
/// its children (`limit`, `token`, `recursive`); an item gives its metadata.
#[utoipa::path(get, path = "/v1/metadata/{group}/{bucket}/{path}", tag = "v1",
    params(("group" = String, Path, description = "`files`, `prompts`, `conversations` or `applications`"),
        ("bucket" = String, Path, description = "The bucket id, or `public`"),
        ("path" = String, Path, description = "An item, or a folder ending in `/` (may contain `/`)"),
        ("limit" = Option<usize>, Query, minimum = 0, maximum = 1000, description = "Page size (0–1000, default 100)"),
        ("token" = Option<String>, Query, description = "The `nextToken` of the previous page"),
        ("recursive" = Option<bool>, Query, description = "Every nested item, not only the children")),
    responses((status = 200, description = "The folder's children, or the item's metadata (typed \
        `application/vnd.dial.metadata+json` when `Accept` names it)",
        content((super::wire::Node = "application/json"), (super::wire::Node = "application/vnd.dial.metadata+json")))))]
pub async fn metadata(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    query: ListingQuery,
) -> Result<Response, ApiError> {
    let ListingQuery { limit, token, recursive, permissions } = query;
    let page = Page { limit, token, recursive, permissions };
    let raw = raw_path(&uri, "/v1/metadata/");
    let metadata = state.blob_resources().metadata(&caller, raw, page).await?;
    // An item answers with its etag; a listing has none.
    let etag = match &metadata {
        BlobMetadata::Item { meta, .. } => Some(meta.etag.clone()),
        BlobMetadata::Folder { .. } => None,
    };
    let response = metadata_response(&headers, &metadata_node(metadata));
    Ok(match etag {
        Some(etag) => with_etag(response, &etag),
        None => response,
    })
}
