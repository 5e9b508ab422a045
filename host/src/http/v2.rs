//! `/v2/{group}/…`: folder resources of every registered handler type.
//!
//! Paths are taken raw (still percent-encoded) from the request and parsed by
//! the one URL parser. Everything before the first `files` segment is the
//! resource (`files` cannot name a resource, so this is unambiguous).

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{ListingQuery, preconditions};
use super::multipart::{FormFields, Upload};
use super::respond::{file_headers, metadata_response, raw_path, with_etag};
use super::state::AppState;
use super::wire::folders::{files_folder_node, folder_node, listed_node, resource_node};
use crate::access::{AdminDecision, Permission, Resource};
use crate::auth::Caller;
use crate::catalog::{Kind, Link};
use crate::etag::Preconditions;
use crate::folders::Node;
use crate::folders::archive::stream_zip;
use crate::folders::engine::Committed;
use crate::folders::marker::ResourceMarker;
use crate::folders::marker::VersionRecord;
use crate::folders::names::FILES_SEGMENT;
use crate::folders::resource_type;
use crate::handlers::Handler;
use crate::resource_url::{Intent, ResourceUrl};

/// A v2 request path, resolved: the node, its handler, and the file path
/// inside the resource when the URL goes through `/files/`.
struct Target {
    node: Node,
    handler: Handler,
    file: Option<String>,
    /// The file part of the URL ended in `/`: it names a folder of files.
    file_folder: bool,
}

impl Target {
    /// The file a GET, PUT or DELETE of one file addresses; a URL ending in
    /// `/` names a folder of files, which only listings take.
    fn single_file(&self) -> Result<Option<&str>, ApiError> {
        match &self.file {
            Some(file) if self.file_folder => Err(ApiError::bad_request(format!(
                "{}/files/{file}/ names a folder of files: a file's URL has no trailing /",
                self.node.url.as_item().unwrap_or_else(|| self.node.url.clone())
            ))),
            file => Ok(file.as_deref()),
        }
    }
}

/// Parses `<group>/<bucket>/<path>[/files/<file>]` (raw) and checks access.
async fn resolve(
    state: &AppState,
    caller: &Caller,
    raw: &str,
    intent: Intent,
    permission: Permission,
) -> Result<Target, ApiError> {
    let target = locate(state, raw, intent)?;
    check_access(state, caller, &target.node, permission).await?;
    Ok(target)
}

/// The one access check of a v2 node, on the URL access decisions use.
async fn check_access(state: &AppState, caller: &Caller, node: &Node, permission: Permission) -> Result<(), ApiError> {
    let checked = state.folders().access_url(node).await?;
    state.access().check(caller, Resource { url: &checked, location: &node.location }, permission).await?;
    Ok(())
}

/// Parses a v2 path without deciding access.
fn locate(state: &AppState, raw: &str, intent: Intent) -> Result<Target, ApiError> {
    let (resource_raw, file_raw) = split_files(raw);
    let url = ResourceUrl::parse(resource_raw, intent)?;
    let handler = state.handlers().get(url.group()).ok_or_else(|| ApiError::not_found(&format!("/v2/{raw}")))?;
    let location = state.buckets().decode(url.bucket())?;
    let node = Node::new(url, location)?;
    let file = match file_raw {
        Some(raw_file) => Some(decode_file_path(raw_file)?),
        None => None,
    };
    let file_folder = file_raw.is_some_and(|raw| raw.ends_with('/'));
    Ok(Target { node, handler, file, file_folder })
}

/// Splits at the first `files` segment after `<group>/<bucket>/`.
fn split_files(raw: &str) -> (&str, Option<&str>) {
    let mut offset: usize = 0;
    for (index, segment) in raw.split('/').enumerate() {
        if index >= 3 && segment == FILES_SEGMENT {
            // `offset` points at this segment; the resource ends before its `/`.
            let resource = &raw[..offset.saturating_sub(1)];
            let rest = &raw[(offset + segment.len()).min(raw.len())..];
            return (resource, Some(rest.strip_prefix('/').unwrap_or(rest)));
        }
        offset += segment.len() + 1;
    }
    (raw, None)
}

fn decode_file_path(raw: &str) -> Result<String, ApiError> {
    let trimmed = raw.strip_suffix('/').unwrap_or(raw);
    let mut segments = Vec::new();
    for segment in trimmed.split('/').filter(|s| !trimmed.is_empty() || !s.is_empty()) {
        let decoded = percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .map_err(|_| ApiError::bad_request(format!("Invalid file path: {raw}")))?;
        segments.push(decoded.into_owned());
    }
    Ok(segments.join("/"))
}

#[derive(Debug, Deserialize)]
pub struct VersionQuery {
    /// A retained version to read instead of the current one.
    version: Option<String>,
}

/// A `version` a request names: absent, or not empty.
fn named_version(version: Option<&str>) -> Result<Option<&str>, ApiError> {
    match version {
        Some("") => Err(ApiError::bad_request("version must name a version (see /v2/versions/…)")),
        other => Ok(other),
    }
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
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<VersionQuery>,
) -> Result<Response, ApiError> {
    let target = resolve(&state, &caller, raw_path(&uri, "/v2/"), Intent::Read, Permission::Read).await?;
    let conditions = preconditions(&headers);
    let engine = state.folders();
    let file = target.single_file()?.map(str::to_owned);
    let marker = match named_version(query.version.as_deref())? {
        None => engine.resource_for_read(&target.node).await?,
        Some(version) => engine.version_for_read(&target.node, version).await?,
    };
    if let Some(file) = file {
        return get_file(&state, &target, &file, marker, &conditions).await;
    }
    if conditions.not_modified(&marker.etag) {
        return Ok(with_etag(StatusCode::NOT_MODIFIED.into_response(), &marker.etag));
    }
    let name = target.node.url.name().unwrap_or("resource").replace('"', "");
    let etag = marker.etag.clone();
    let body = Body::from_stream(stream_zip(engine.store().clone(), target.node.paths().clone(), marker));
    let response = (
        [
            (header::CONTENT_TYPE, "application/zip".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}.zip\"")),
        ],
        body,
    )
        .into_response();
    Ok(with_etag(response, &etag))
}

/// `GET /v2/{g}/{b}/{path}/files/{file}`: one file of the version `marker`
/// describes (the current one, or `?version=<id>`), streamed.
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
async fn get_file(
    state: &AppState,
    target: &Target,
    file: &str,
    marker: ResourceMarker,
    conditions: &Preconditions,
) -> Result<Response, ApiError> {
    let engine = state.folders();
    let (object, record) = engine.file_path(&target.node, &marker, file)?;
    if conditions.not_modified(&record.etag) {
        return Ok(with_etag(StatusCode::NOT_MODIFIED.into_response(), &record.etag));
    }
    let stream = engine.store().get(&object).await.map_err(crate::folders::FolderError::from)?.into_stream();
    let response = (
        file_headers(content_type_of(file), record.size),
        Body::from_stream(stream.map(|chunk| chunk.map_err(std::io::Error::other))),
    )
        .into_response();
    Ok(with_etag(response, &record.etag))
}

/// A small table: the common types of skill files; everything else is bytes.
fn content_type_of(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "md" => "text/markdown; charset=utf-8",
        "txt" | "py" | "sh" | "js" | "ts" | "rs" | "toml" | "yaml" | "yml" | "csv" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "html" | "htm" => "text/html; charset=utf-8",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v2/"), Intent::Write, Permission::Write).await?;
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
        let resource_type = resource_type(&target.handler.description().type_name);
        let body = Json(folder_node(&target.node.url, Some(&marker), &resource_type));
        return Ok(with_etag(body.into_response(), &etag));
    }
    let mut upload = Upload::new(request, "Expected a multipart/form-data body, one part per file")?;
    let received = async {
        let mut staging = engine.stage(&target.node, &target.handler, &conditions).await?;
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
        Ok(engine.commit(staging, &target.handler, &conditions, Some(caller.author_name())).await?)
    }
    .await;
    committed_answer(&target, received)
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
        let committed = state
            .folders()
            .put_file(&target.node, file, &mut part, &target.handler, conditions, Some(caller.author_name()))
            .await;
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v2/"), Intent::Read, Permission::Write).await?;
    let conditions = preconditions(&headers);
    let engine = state.folders();
    if let Some(file) = target.single_file()? {
        return delete_file(&state, &caller, &target, file, &conditions).await;
    }
    if target.node.url.is_folder() {
        // `…/x/` deletes a folder only if empty (SPEC §4); a resource's
        // listing form must not delete the resource and its files.
        let named = engine.access_url(&target.node).await?;
        if !named.is_folder() {
            return Err(ApiError::bad_request(format!(
                "{} is a resource, not a folder: delete it as {named}",
                target.node.url
            )));
        }
        engine.delete_folder(&target.node, &conditions).await?;
        state.access().sharing().forget(&target.node.location, &target.node.url.to_string()).await?;
        return Ok(StatusCode::OK.into_response());
    }
    let Target { node, handler, .. } = target;
    let link = Link { url: node.url, location: node.location, kind: Kind::Folder(handler) };
    state.catalog().delete(&link, &conditions).await?;
    Ok(StatusCode::OK.into_response())
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
async fn delete_file(
    state: &AppState,
    caller: &Caller,
    target: &Target,
    file: &str,
    conditions: &Preconditions,
) -> Result<Response, ApiError> {
    let committed = state
        .folders()
        .delete_file(&target.node, file, &target.handler, conditions, Some(caller.author_name()))
        .await?;
    let body = Json(resource_node(&target.node.url, &committed.marker));
    Ok(with_etag(body.into_response(), &committed.marker.etag))
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
) -> Result<Response, ApiError> {
    let target = resolve(&state, &caller, raw_path(&uri, "/v2/metadata/"), Intent::Read, Permission::Read).await?;
    if let Some(dir) = &target.file {
        return list_files(&state, &caller, &target, dir, &headers, query).await;
    }
    let ListingQuery { limit, token, recursive, permissions: with_permissions } = query;
    let engine = state.folders();
    let url = &target.node.url;
    let resource_type = resource_type(&target.handler.description().type_name);
    // A resource answers its metadata whichever form names it (listings
    // give resources URLs ending in `/`).
    if !url.is_bucket_root()
        && let Some(marker) = engine.live_marker(&target.node).await?
    {
        let mut node = resource_node(url, &marker);
        if with_permissions {
            node.permissions =
                permission_names(&state, &caller, &target.node, &engine.access_url(&target.node).await?).await?;
        }
        return Ok(metadata_response(&headers, &node));
    }
    let folder = if url.is_folder() { target.node.clone() } else { as_folder(&target.node)? };
    let token = token.as_deref().map(decode_token).transpose()?;
    // In `public`, a non-admin sees only what the folder rules admit.
    let filter = state.access().listing_filter(&caller, &folder.location).await?;
    let shows = |url: &ResourceUrl| filter.shows(&caller, url);
    let listing = engine.list(&folder, recursive, token.as_deref(), limit, &shows).await?;
    let mut node = folder_node(&folder.url, None, &resource_type);
    let mut items = Vec::with_capacity(listing.items.len());
    for item in &listing.items {
        let mut listed = listed_node(item, &resource_type);
        if with_permissions {
            // Resources are asked about by their item URL, folders by theirs.
            listed.permissions = permission_names(&state, &caller, &folder, item.url()).await?;
        }
        items.push(listed);
    }
    if with_permissions {
        node.permissions = permission_names(&state, &caller, &folder, &folder.url).await?;
    }
    node.items = Some(Some(items));
    node.next_token = listing.next_token.map(|token| bs58::encode(token.as_bytes()).into_string());
    Ok(metadata_response(&headers, &node))
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
        ("permissions" = Option<bool>, Query, description = "Add the caller's `permissions` (the resource's)")),
    responses((status = 200, description = "The folder of files listed, its `items` the files (`ITEM`) and directories \
        (`FOLDER`) in it (typed `application/vnd.dial.metadata+json` when `Accept` names it)",
        content((super::wire::Node = "application/json"), (super::wire::Node = "application/vnd.dial.metadata+json"))),
        (status = 404, description = "No such resource or directory", body = String, content_type = "text/plain"),))]
async fn list_files(
    state: &AppState,
    caller: &Caller,
    target: &Target,
    dir: &str,
    headers: &HeaderMap,
    query: ListingQuery,
) -> Result<Response, ApiError> {
    let ListingQuery { limit, token, recursive, permissions: with_permissions } = query;
    let engine = state.folders();
    let url = &target.node.url;
    let marker = engine.live_marker(&target.node).await?.ok_or_else(|| ApiError::not_found(&url.to_string()))?;
    let token = token.as_deref().map(decode_token).transpose()?;
    let listing = engine.list_files(&target.node, &marker, dir, recursive, token.as_deref(), limit)?;
    let resource_type = resource_type(&marker.type_name);
    let mut items: Vec<_> = listing.items.iter().map(|item| listed_node(item, &resource_type)).collect();
    let mut node = files_folder_node(url, dir, &resource_type);
    if with_permissions {
        // A resource's files have its permissions.
        let permissions =
            permission_names(state, caller, &target.node, &engine.access_url(&target.node).await?).await?;
        items.iter_mut().for_each(|item| item.permissions = permissions.clone());
        node.permissions = permissions;
    }
    node.items = Some(Some(items));
    node.next_token = listing.next_token.map(|token| bs58::encode(token.as_bytes()).into_string());
    Ok(metadata_response(headers, &node))
}

/// What `caller` may do at `url` (in `node`'s bucket), as `permissions` lists it.
async fn permission_names(
    state: &AppState,
    caller: &Caller,
    node: &Node,
    url: &ResourceUrl,
) -> Result<Option<Vec<String>>, ApiError> {
    Ok(Some(state.access().permission_names(caller, Resource { url, location: &node.location }).await?))
}

/// Listing tokens are opaque to clients (Base58 of the last name returned),
/// so they need no escaping in a query string.
fn decode_token(token: &str) -> Result<String, ApiError> {
    let invalid = || ApiError::bad_request(format!("Invalid token: {token}"));
    let bytes = bs58::decode(token).into_vec().map_err(|_| invalid())?;
    String::from_utf8(bytes).map_err(|_| invalid())
}

/// The folder form of a node addressed without its trailing slash.
fn as_folder(node: &Node) -> Result<Node, ApiError> {
    let raw = format!("{}/", node.url);
    let url = ResourceUrl::parse(&raw, Intent::Read)?;
    Ok(Node::new(url, node.location.clone())?)
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
    let target = resolve(&state, &caller, raw_path(&uri, "/v2/versions/"), Intent::Read, Permission::Read).await?;
    if target.file.is_some() {
        return Err(ApiError::bad_request("Versions are of a resource: drop the /files/… part of the URL"));
    }
    let limit = query.limit;
    let marker = state.folders().resource_for_read(&target.node).await?;
    let now = crate::clock::now_ms();
    let all: Vec<(VersionRecord, bool)> = std::iter::once((marker.current_record(), true))
        .chain(marker.history.iter().filter(|record| record.visible_at(now)).map(|record| (record.clone(), false)))
        .collect();
    // The token names the last version returned; if it has been swept
    // since, the page goes on with what is older than it.
    let start = match &query.token {
        None => 0,
        Some(token) => {
            let decoded = decode_token(token)?;
            let (created_at, version) = decoded
                .split_once(':')
                .and_then(|(at, version)| Some((at.parse::<i64>().ok()?, version)))
                .ok_or_else(|| ApiError::bad_request(format!("Invalid token: {token}")))?;
            match all.iter().position(|(record, _)| record.version == version) {
                Some(index) => index + 1,
                None => all.iter().position(|(record, _)| record.created_at < created_at).unwrap_or(all.len()),
            }
        }
    };
    let more = start + limit < all.len();
    let versions: Vec<VersionInfo> = all
        .into_iter()
        .skip(start)
        .take(limit)
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
    let next_token = versions.last().filter(|_| more).map(|last| {
        let token = format!("{}:{}", last.created_at, last.version);
        bs58::encode(token.as_bytes()).into_string()
    });
    Ok(Json(VersionList { versions, next_token }))
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
    // A link like any other in a body: `…/x` or its listing form `…/x/`.
    let link = state.catalog().parse_link(&request.url)?.as_resource();
    let handler = match &link.kind {
        Kind::Folder(handler) if link.url.group() == group => handler.clone(),
        _ => return Err(ApiError::bad_request(format!("{} is not a {group} resource", link.url))),
    };
    let target = Target { node: Node::new(link.url, link.location)?, handler, file: None, file_folder: false };
    let engine = state.folders();
    let marker = match named_version(request.version.as_deref())? {
        None => {
            // The owner or an admin (SPEC §4): admins hold no write on users' buckets.
            if !state.access().may_decide(&caller, AdminDecision::RestoreDeleted) {
                check_access(&state, &caller, &target.node, Permission::Write).await?;
            }
            engine.restore(&target.node).await?
        }
        Some(version) => {
            check_access(&state, &caller, &target.node, Permission::Write).await?;
            let conditions = preconditions(&headers);
            let author = Some(caller.author_name());
            engine.restore_version(&target.node, version, &target.handler, author, &conditions).await?
        }
    };
    Ok(with_etag(Json(resource_node(&target.node.url, &marker)).into_response(), &marker.etag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_segment_splits_resource_and_file() {
        assert_eq!(split_files("skills/b/team/s"), ("skills/b/team/s", None));
        assert_eq!(split_files("skills/b/s/files/SKILL.md"), ("skills/b/s", Some("SKILL.md")));
        assert_eq!(split_files("skills/b/s/files/a/files/b"), ("skills/b/s", Some("a/files/b")));
        assert_eq!(split_files("skills/b/s/files"), ("skills/b/s", Some("")));
        assert_eq!(split_files("skills/b/s/files/"), ("skills/b/s", Some("")));
        assert_eq!(split_files("files/b/x"), ("files/b/x", None), "the group may be called files");
    }

    #[test]
    fn file_paths_are_decoded() {
        assert_eq!(decode_file_path("a%20b/c.md").unwrap(), "a b/c.md");
        assert_eq!(decode_file_path("").unwrap(), "");
        assert_eq!(decode_file_path("dir/").unwrap(), "dir");
    }
}
