//! `/v2/{group}/…`: folder resources of every registered handler type.
//! Each route extracts, makes one call to the core's `FolderResources`
//! (which resolves the raw path, decides access and answers in domain
//! terms) and renders what it returns.

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{ListingQuery, preconditions};
use super::multipart::{FormFields, Upload};
use super::respond::{content_type_of, file_headers, metadata_response, raw_path, with_etag};
use super::state::AppState;
use super::wire::folders::{folder_node, metadata_node, resource_node};
use crate::access::Permission;
use crate::auth::Caller;
use crate::etag::Preconditions;
use crate::folder_resources::{Deleted, Download, Metadata, Page, Target};
use crate::folders::Staging;
use crate::folders::engine::Committed;
use crate::resource_url::{Intent, ResourceUrl};

#[derive(Debug, Deserialize)]
pub struct VersionQuery {
    /// A retained version to read instead of the current one.
    version: Option<String>,
}

// The routes below are served by one handler per method (`/v2/{*path}`);
// each kind of path is documented as its own OpenAPI path: a resource or
// folder (`…/{path}`), one file of a resource (`…/{path}/files/{file}`), and
// the listings of both, so a client generated from the document reaches
// every one of them.

const GROUP: &str = "The handler type's group (e.g. `skills`)";
const BUCKET: &str = "The bucket id (`GET /v1/bucket`), or `public`";
const RESOURCE_PATH: &str = "The resource's path (may contain `/`)";
const FILE_PATH: &str = "The file's path inside the resource (may contain `/`)";

/// `GET /v2/{g}/{b}/{path}`: the ZIP, of a retained version with
/// `?version=<id>`; `…/files/{file}`: one file ([`get_file`]).
#[utoipa::path(get, path = "/v2/{group}/{bucket}/{path}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = "The resource's path (may contain `/`); a folder (trailing `/`) is \
            listed with `GET /v2/metadata/…` instead"),
        ("version" = Option<String>, Query, description = "A retained version (`GET /v2/versions/…`) instead of the current one"),),
    responses(
        (status = 200, description = "The resource as a ZIP (streamed); `ETag`",
            content((super::wire::Binary = "application/zip"))),
        (status = 304, description = "`If-None-Match` matched"),
        (status = 400, description = "The path names a folder: list it", body = String, content_type = "text/plain"),
        (status = 404, description = "No such resource or version (`Version <id> not found`)", body = String,
            content_type = "text/plain"),
    ))]
pub async fn get(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<VersionQuery>,
) -> Result<Response, ApiError> {
    let raw = raw_path(&uri, "/v2/");
    // A public folder's well-known skills index is for anyone.
    if let Some(index) = super::skills_index::folder_index(&state, raw).await {
        return index;
    }
    let caller = caller?;
    let conditions = preconditions(&headers);
    match state.folder_resources().download(&caller, raw, query.version.as_deref(), &conditions).await? {
        Download::NotModified { etag } => Ok(with_etag(StatusCode::NOT_MODIFIED.into_response(), &etag)),
        Download::Archive { name, etag, body } => {
            let headers = [
                (header::CONTENT_TYPE, "application/zip".to_string()),
                (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}.zip\"")),
            ];
            Ok(with_etag((headers, Body::from_stream(body)).into_response(), &etag))
        }
        file @ Download::File { .. } => Ok(get_file(file)),
    }
}

/// `GET /v2/{g}/{b}/{path}/files/{file}`: one file of the current version
/// (or `?version=<id>`), streamed.
#[utoipa::path(get, path = "/v2/{group}/{bucket}/{path}/files/{file}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = RESOURCE_PATH), ("file" = String, Path, description = FILE_PATH),
        ("version" = Option<String>, Query, description = "A retained version (`GET /v2/versions/…`) instead of the current one"),),
    responses(
        (status = 200, description = "The file with its own content type (streamed); `ETag` = the file's MD5",
            content((super::wire::Binary = "*/*"))),
        (status = 304, description = "`If-None-Match` matched"),
        (status = 400, description = "The file URL ends in `/` (a folder of files: list it)", body = String,
            content_type = "text/plain"),
        (status = 404, description = "No such resource, file or version (`Version <id> not found`)", body = String,
            content_type = "text/plain"),
    ))]
fn get_file(download: Download) -> Response {
    let Download::File { path, etag, size, body } = download else { unreachable!("a file download") };
    let response = (file_headers(content_type_of(&path), size), Body::from_stream(body)).into_response();
    with_etag(response, &etag)
}

/// `PUT`: a whole resource (multipart, one part per file), a folder
/// (trailing `/`), or one file (`…/files/{file}`: [`put_file`]).
#[utoipa::path(put, path = "/v2/{group}/{bucket}/{path}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = "The resource's path (may contain `/`); a trailing `/` names a folder, \
            created with an empty body"),),
    request_body(content = super::wire::FileParts, content_type = "multipart/form-data",
        description = "The whole resource: one part per file, filename = relative path (nothing for a folder)"),
    responses(
        (status = 200, description = "Committed: the resource's metadata (with the handler's warnings) and `ETag`, \
            or the folder created", body = super::wire::Node),
        (status = 400, description = "The handler refused it, or a name or path is invalid: each problem named",
            body = String, content_type = "text/plain"),
        (status = 412, description = "`If-Match` / `If-None-Match` failed", body = String, content_type = "text/plain"),
        (status = 413, description = "Over a size limit of the type", body = String, content_type = "text/plain"),
    ))]
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    let raw = raw_path(&uri, "/v2/");
    let target = state.folder_resources().resolve(&caller, raw, Intent::Write, Permission::Write).await?;
    let conditions = preconditions(&headers);
    let engine = state.folders();
    if let Some(file) = target.single_file()? {
        let file = file.to_owned();
        return put_file(&state, &caller, &target, &file, request, &conditions).await;
    }
    if target.node.url.is_folder() {
        no_files_for_a_folder(&target.node.url, request).await?;
        let marker = engine.create_folder(&target.node, Some(caller.author_name())).await?;
        let etag = marker.etag();
        let body = Json(folder_node(&target.node.url, Some(&marker), &target.resource_type()));
        return Ok(with_etag(body.into_response(), &etag));
    }
    let mut upload = Upload::new(request, "Expected a multipart/form-data body, one part per file")?;
    let mut staging = engine.stage(&target.node, &target.handler, &conditions).await?;
    if let Some(key) = state.writing_key(&caller) {
        staging.bind_to_key(key);
    }
    // A refused upload leaves nothing: what it staged goes before the answer
    // (a refused commit discards its own).
    if let Err(refused) = stage_parts(&mut staging, &mut upload).await {
        staging.discard().await;
        return Err(refused);
    }
    let received = engine.commit(staging, &target.handler, &conditions, Some(caller.author_name())).await;
    committed_answer(&target, received.map_err(ApiError::from))
}

/// Every part of `upload` into `staging`, each part's filename its path.
async fn stage_parts(staging: &mut Staging, upload: &mut Upload) -> Result<(), ApiError> {
    while let Some(mut part) = upload.next_part().await? {
        let name = part
            .file_name()
            .map(str::to_owned)
            .ok_or_else(|| ApiError::bad_request("Every part needs a filename: the file's path in the resource"))?;
        staging.add_file(&name, &mut part).await.map_err(|error| part.error_or(error))?;
    }
    if staging.file_count() == 0 {
        return Err(ApiError::bad_request("The upload has no files"));
    }
    Ok(())
}

/// `PUT /v2/{g}/{b}/{path}/files/{file}`: one file added or replaced, as a
/// new version of the resource.
#[utoipa::path(put, path = "/v2/{group}/{bucket}/{path}/files/{file}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = RESOURCE_PATH), ("file" = String, Path, description = FILE_PATH),),
    request_body(content = super::wire::FileParts, content_type = "multipart/form-data",
        description = "Exactly one part: the file's content (its filename is not used, the URL names the file)"),
    responses(
        (status = 200, description = "Committed: the resource's metadata and its new aggregate `ETag`",
            body = super::wire::Node),
        (status = 400, description = "Not exactly one part, the handler refused the change, or the path is invalid",
            body = String, content_type = "text/plain"),
        (status = 404, description = "No such resource", body = String, content_type = "text/plain"),
        (status = 412, description = "`If-Match` is not the resource's aggregate etag", body = String,
            content_type = "text/plain"),
        (status = 413, description = "Over a size limit of the type", body = String, content_type = "text/plain"),
    ))]
async fn put_file(
    state: &AppState,
    caller: &Caller,
    target: &Target,
    file: &str,
    request: Request,
    conditions: &Preconditions,
) -> Result<Response, ApiError> {
    let mut upload = Upload::new(request, "Expected a multipart/form-data body, one part per file")?;
    let received = async {
        // The path comes from the URL, so the one part may be unnamed.
        let mut part = upload.single_file(FormFields::Counted).await?;
        let (author, key) = (Some(caller.author_name()), state.writing_key(caller));
        let committed =
            state.folders().put_file(&target.node, file, &mut part, &target.handler, conditions, author, key).await;
        committed.map_err(|error| part.error_or(error))
    }
    .await;
    committed_answer(target, received)
}

/// The answer to a PUT that read an upload: the committed resource, or the
/// refusal (what is left of the upload is the listener's to drain).
fn committed_answer(target: &Target, received: Result<Committed, ApiError>) -> Result<Response, ApiError> {
    let committed = received?;
    let body = Json(resource_node(&target.node.url, &committed.marker));
    Ok(with_etag(body.into_response(), &committed.marker.etag))
}

/// A folder PUT (`…/x/`) creates a folder and stores nothing it is sent:
/// parts there would be dropped while the client is told 200, so a
/// multipart body with any part is refused, naming the URL that stores
/// files. Only the first part's headers are read; the listener drains the
/// rest (bounded), as for any refused upload.
async fn no_files_for_a_folder(url: &ResourceUrl, request: Request) -> Result<(), ApiError> {
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("multipart/"));
    if !multipart {
        return Ok(());
    }
    let mut upload = Upload::new(request, "A folder is created with an empty body")?;
    let parts = upload.next_part().await?.is_some();
    match (parts, url.as_item()) {
        (false, _) => Ok(()),
        (true, Some(resource)) => Err(ApiError::bad_request(format!(
            "{url} names a folder, which is created with an empty body: PUT the resource's files at {resource}"
        ))),
        (true, None) => Err(ApiError::bad_request(format!("{url} is a bucket root, which takes no files"))),
    }
}

/// `DELETE`: a resource (tombstone), an empty folder, or one file
/// ([`delete_file`]).
#[utoipa::path(delete, path = "/v2/{group}/{bucket}/{path}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = "The resource's path (may contain `/`); a trailing `/` names a folder"),),
    responses(
        (status = 200, description = "A resource tombstoned (restorable for the grace period), or an empty folder removed"),
        (status = 400, description = "`…/x/` names a resource, not a folder (delete it as `…/x`)", body = String,
            content_type = "text/plain"),
        (status = 409, description = "The folder is not empty", body = String, content_type = "text/plain"),
    ))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let conditions = preconditions(&headers);
    match state.folder_resources().delete(&caller, raw_path(&uri, "/v2/"), &conditions).await? {
        Deleted::Resource | Deleted::Folder => Ok(StatusCode::OK.into_response()),
        Deleted::File { url, committed } => Ok(delete_file(&url, *committed)),
    }
}

/// `DELETE /v2/{g}/{b}/{path}/files/{file}`: one file removed, as a new
/// version of the resource.
#[utoipa::path(delete, path = "/v2/{group}/{bucket}/{path}/files/{file}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = RESOURCE_PATH), ("file" = String, Path, description = FILE_PATH),),
    responses(
        (status = 200, description = "Removed: the resource's metadata and its new aggregate `ETag`",
            body = super::wire::Node),
        (status = 400, description = "The handler refuses it (a skill's `SKILL.md`)", body = String,
            content_type = "text/plain"),
        (status = 404, description = "No such resource or file", body = String, content_type = "text/plain"),
        (status = 412, description = "`If-Match` is not the resource's aggregate etag", body = String,
            content_type = "text/plain"),
    ))]
fn delete_file(url: &ResourceUrl, committed: Committed) -> Response {
    let body = Json(resource_node(url, &committed.marker));
    with_etag(body.into_response(), &committed.marker.etag)
}

/// `GET /v2/metadata/{g}/{b}/{path}[/]`: a folder's children or a
/// resource's metadata; `…/{resource}/files[/{dir}]`: its files
/// ([`list_files`]).
#[utoipa::path(get, path = "/v2/metadata/{group}/{bucket}/{path}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = "A folder's path (trailing `/`; empty for the bucket root) or a \
            resource's"),
        ("limit" = Option<usize>, Query, minimum = 0, maximum = 1000, description = "Page size (0–1000, default 100)"),
        ("token" = Option<String>, Query, description = "The `nextToken` of the previous page"),
        ("recursive" = Option<bool>, Query, description = "Every nested folder and resource, in pre-order"),
        ("permissions" = Option<bool>, Query, description = "Add the caller's `permissions`")),
    responses((status = 200, description = "A folder's children, or a resource's metadata \
        (typed `application/vnd.dial.metadata+json` when `Accept` names it)",
        content((super::wire::Node = "application/json"), (super::wire::Node = "application/vnd.dial.metadata+json")))))]
pub async fn metadata(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    query: ListingQuery,
    Query(version): Query<VersionQuery>,
) -> Result<Response, ApiError> {
    let ListingQuery { limit, token, recursive, permissions } = query;
    let page = Page { limit, token, recursive, permissions };
    let raw = raw_path(&uri, "/v2/metadata/");
    let metadata = state.folder_resources().metadata(&caller, raw, page, version.version.as_deref()).await?;
    Ok(match metadata {
        files @ Metadata::Files { .. } => list_files(&headers, files),
        other => metadata_response(&headers, &metadata_node(other)),
    })
}

/// `GET /v2/metadata/{g}/{b}/{path}/files[/{dir}]`: the files of the
/// current version, as DIAL Core answers it: the `…/files/` folder (or the
/// directory listed) with its files and directories below it, paged as
/// every listing is.
#[utoipa::path(get, path = "/v2/metadata/{group}/{bucket}/{path}/files/{dir}", tag = "v2",
    params(("group" = String, Path, description = GROUP), ("bucket" = String, Path, description = BUCKET),
        ("path" = String, Path, description = RESOURCE_PATH),
        ("dir" = String, Path, description = "A directory of files inside the resource (may contain `/`)"),
        ("limit" = Option<usize>, Query, minimum = 0, maximum = 1000, description = "Page size (0–1000, default 100)"),
        ("token" = Option<String>, Query, description = "The `nextToken` of the previous page"),
        ("recursive" = Option<bool>, Query, description = "Every file below, without directory nodes"),
        ("permissions" = Option<bool>, Query, description = "Add the caller's `permissions` (the resource's)"),
        ("version" = Option<String>, Query, description = "A retained version's files (`GET /v2/versions/…`) instead \
            of the current one's")),
    responses((status = 200, description = "The folder of files listed, its `items` the files (`ITEM`) and directories \
        (`FOLDER`) in it (typed `application/vnd.dial.metadata+json` when `Accept` names it)",
        content((super::wire::Node = "application/json"), (super::wire::Node = "application/vnd.dial.metadata+json"))),
        (status = 404, description = "No such resource, directory or version", body = String, content_type = "text/plain"),))]
fn list_files(headers: &HeaderMap, files: Metadata) -> Response {
    metadata_response(headers, &metadata_node(files))
}

/// One retained version of a v2 resource, as `GET /v2/versions/…` lists it.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    version: String,
    etag: String,
    created_at: i64,
    author: Option<String>,
    files: usize,
    bytes: u64,
    /// The version the resource serves now.
    current: bool,
}

/// `GET /v2/versions/…`: newest first.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionList {
    versions: Vec<VersionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

/// `GET /v2/versions/{g}/{b}/{path}`: the versions the resource keeps,
/// newest first, the current one marked; paged like listings.
#[utoipa::path(get, path = "/v2/versions/{group}/{bucket}/{path}", tag = "v2",
    params(("group" = String, Path, description = "The handler type's group (e.g. `skills`)"),
        ("bucket" = String, Path, description = "The bucket id (`GET /v1/bucket`), or `public`"),
        ("path" = String, Path, description = "The resource's path (may contain `/`)"),
        ("limit" = Option<usize>, Query, minimum = 0, maximum = 1000, description = "Page size (0–1000, default 100)"),
        ("token" = Option<String>, Query, description = "The `nextToken` of the previous page"),),
    responses((status = 200, description = "The retained versions, newest first, the current one marked",
        body = VersionList)))]
pub async fn versions(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    query: ListingQuery,
) -> Result<Json<VersionList>, ApiError> {
    let raw = raw_path(&uri, "/v2/versions/");
    let page = state.folder_resources().versions(&caller, raw, query.token.as_deref(), query.limit).await?;
    let versions = page
        .versions
        .into_iter()
        .map(|(record, current)| VersionInfo {
            version: record.version,
            etag: record.etag,
            created_at: record.created_at,
            author: record.author,
            files: record.files,
            bytes: record.bytes,
            current,
        })
        .collect();
    Ok(Json(VersionList { versions, next_token: page.next_token }))
}

/// One deleted resource that can still be restored.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedInfo {
    /// The resource's URL, as `POST /v2/ops/{group}/restore` takes it.
    url: String,
    name: String,
    /// The etag it had when deleted (a restore brings it back unchanged).
    etag: String,
    deleted_at: i64,
    /// After this (epoch ms) the sweep may remove it for good.
    restorable_until: i64,
    /// Who last wrote it before the delete.
    author: Option<String>,
    files: usize,
    bytes: u64,
}

/// `GET /v2/deleted/…`: in name order.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedList {
    items: Vec<DeletedInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

/// `GET /v2/deleted/{g}/{b}/{folder}/`: the resources deleted directly in a
/// folder that can still be restored (`POST /v2/ops/{group}/restore`), for
/// the folder's writers and admins; paged like listings.
#[utoipa::path(get, path = "/v2/deleted/{group}/{bucket}/{folder}/", tag = "v2",
    params(("group" = String, Path, description = "The handler type's group (e.g. `skills`)"),
        ("bucket" = String, Path, description = "The bucket id (`GET /v1/bucket`), or `public`"),
        ("folder" = String, Path, description = "A folder's path, ending in `/` (empty for the bucket's root)"),
        ("limit" = Option<usize>, Query, minimum = 0, maximum = 1000, description = "Page size (0–1000, default 100)"),
        ("token" = Option<String>, Query, description = "The `nextToken` of the previous page"),),
    responses((status = 200, description = "The restorable deleted resources, by name", body = DeletedList),
        (status = 403, description = "Neither a writer of the folder nor an admin", body = String,
            content_type = "text/plain"),
        (status = 404, description = "No such folder or type", body = String, content_type = "text/plain")))]
pub async fn deleted(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    query: ListingQuery,
) -> Result<Json<DeletedList>, ApiError> {
    let raw = raw_path(&uri, "/v2/deleted/");
    let page = state.folder_resources().restorable(&caller, raw, query.token.as_deref(), query.limit).await?;
    let items = page
        .items
        .into_iter()
        .map(|(url, marker, restorable_until)| DeletedInfo {
            name: url.name().unwrap_or_default().to_owned(),
            url: url.to_string(),
            etag: marker.etag.clone(),
            deleted_at: marker.deleted_at.unwrap_or(marker.updated_at),
            restorable_until,
            author: marker.author.clone(),
            files: marker.files.len(),
            bytes: marker.total_bytes(),
        })
        .collect();
    Ok(Json(DeletedList { items, next_token: page.next_token }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct RestoreRequest {
    url: String,
    /// A retained version to make current again; without it, the request
    /// undoes a delete.
    version: Option<String>,
}

/// `POST /v2/ops/{group}/restore {"url": …}`: undo a delete within the grace
/// window; with `"version"`, make a retained version current again (a new
/// commit; `If-Match` is checked against the current version).
#[utoipa::path(post, path = "/v2/ops/{group}/restore", tag = "v2",
    params(("group" = String, Path, description = "The handler type's group")),
    request_body = RestoreRequest,
    responses(
        (status = 200, description = "Restored: the resource's metadata and `ETag`", body = super::wire::Node),
        (status = 404, description = "No such resource (or tombstone), or `Version <id> not found`", body = String,
            content_type = "text/plain"),
        (status = 412, description = "`If-Match` is not the current etag", body = String, content_type = "text/plain"),
    ))]
pub async fn restore(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path(group): axum::extract::Path<String>,
    headers: HeaderMap,
    body: String,
) -> Result<Response, ApiError> {
    let request: RestoreRequest =
        serde_json::from_str(&body).map_err(|e| ApiError::bad_request(format!("Failed to parse json: {e}")))?;
    let conditions = preconditions(&headers);
    let version = request.version.as_deref();
    let (url, marker) = state.folder_resources().restore(&caller, &group, &request.url, version, &conditions).await?;
    Ok(with_etag(Json(resource_node(&url, &marker)).into_response(), &marker.etag))
}
