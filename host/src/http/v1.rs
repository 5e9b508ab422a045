//! `/v1/{files|prompts|conversations|applications}/{bucket}/{path}` and
//! `/v1/metadata/{group}/{bucket}/{path}`: v1 single-blob resources.
//!
//! Thin: the raw (still percent-encoded) path goes through the one URL
//! parser, the bucket codec and the one access check; everything else is
//! the blob service's ([`crate::blobs`]).

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
use super::wire::blobs::{folder_node, item_node};
use crate::access::{Permission, Resource};
use crate::auth::Caller;
use crate::blobs::{BlobError, BlobGroup, BlobTarget, Download};
use crate::catalog::{Kind, Link};
use crate::resource_url::{Intent, ResourceUrl};

/// GET / PUT / DELETE of one item. Bodies are limited by the blob service
/// while streaming, so the default body limit is off.
pub fn resource_routes() -> MethodRouter<AppState> {
    get(get_item).put(put_item).delete(delete_item).layer(DefaultBodyLimit::disable())
}

/// Parses `<group>/<bucket>/<path>` (raw), checks the group is a v1 one, then
/// access.
async fn resolve(
    state: &AppState,
    caller: &Caller,
    raw: &str,
    intent: Intent,
    permission: Permission,
) -> Result<BlobTarget, ApiError> {
    let url = ResourceUrl::parse(raw, intent)?;
    if BlobGroup::parse(url.group()).is_none() {
        return Err(ApiError::not_found(&url.to_string()));
    }
    let location = state.buckets().decode(url.bucket())?;
    state.access().check(caller, Resource { url: &url, location: &location }, permission).await?;
    Ok(BlobTarget::new(url, location)?)
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v1/"), Intent::Read, Permission::Read).await?;
    let conditions = preconditions(&headers);
    match state.blobs().download(&target, &conditions).await? {
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v1/"), Intent::Write, Permission::Write).await?;
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
            let stored = blobs.put_file(&target, &mut part, content_type.as_deref(), &conditions, author).await;
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
        blobs.put_json(&target, body, declared, &conditions, Some(caller.author_name()), &policy).await?
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v1/"), Intent::Read, Permission::Write).await?;
    let conditions = preconditions(&headers);
    let link = Link { kind: Kind::Blob(target.group()), url: target.url, location: target.location };
    state.catalog().delete(&link, &conditions).await?;
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v1/metadata/"), Intent::Read, Permission::Read).await?;
    let ListingQuery { limit, token, recursive, permissions: with_permissions } = query;
    let permissions_of = async |url: &ResourceUrl| -> Result<Option<Vec<String>>, ApiError> {
        Ok(Some(state.access().permission_names(&caller, Resource { url, location: &target.location }).await?))
    };
    let (mut body, etag) = if target.url.is_folder() {
        // In `public`, a non-admin sees only what the folder rules admit.
        let filter = state.access().listing_filter(&caller, &target.location).await?;
        let shows = |url: &ResourceUrl| filter.shows(&caller, url);
        let listing = state.blobs().list(&target, recursive, token.as_deref(), limit, &shows).await?;
        let mut body = folder_node(&target.url, target.group(), &listing);
        if with_permissions && let Some(Some(items)) = body.items.as_mut() {
            for (node, item) in items.iter_mut().zip(&listing.items) {
                node.permissions = permissions_of(item.url()).await?;
            }
        }
        (body, None)
    } else {
        let meta = state.blobs().metadata(&target).await?;
        (item_node(&target.url, target.group(), &meta, true), Some(meta.etag))
    };
    if with_permissions {
        body.permissions = permissions_of(&target.url).await?;
    }
    let response = metadata_response(&headers, &body);
    Ok(match etag {
        Some(etag) => with_etag(response, &etag),
        None => response,
    })
}
