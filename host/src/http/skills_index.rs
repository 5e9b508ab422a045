//! The agentskills.io well-known URIs (SPEC §13), answered without
//! credentials: `GET /.well-known/agent-skills/index.json` (every public
//! skill anyone may read), `<public folder URL>/.well-known/agent-skills/index.json`
//! under `/v2/skills/public/…` (that folder's, routed here from `v2.rs`),
//! and the archives they point to, `/.well-known/agent-skills/<path>.zip?version=<id>`
//! — the bytes each entry's `digest` is of ([`crate::skills_index`]).

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use percent_encoding::utf8_percent_encode;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::state::AppState;
use crate::resource_url::SEGMENT_ESCAPES;
use crate::skills_index::{DISCOVERY_SCHEMA, IndexedSkill};

/// Where the well-known routes live.
pub const WELL_KNOWN: &str = "/.well-known/agent-skills/";
/// An index's own name under [`WELL_KNOWN`].
const INDEX: &str = "index.json";

/// The index (discovery schema 0.2.0).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SkillsIndexDocument {
    #[serde(rename = "$schema")]
    schema: &'static str,
    skills: Vec<IndexEntry>,
}

/// One skill of the index.
#[derive(Serialize, utoipa::ToSchema)]
pub struct IndexEntry {
    /// Its frontmatter `name`.
    name: String,
    description: String,
    /// `archive`: a ZIP with the skill's files at its root.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Where the archive of the version listed is served (relative to the host).
    url: String,
    /// `sha256:<hex>` of exactly the bytes `url` serves.
    digest: String,
    /// The version's number.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

impl From<IndexedSkill> for IndexEntry {
    fn from(skill: IndexedSkill) -> Self {
        let path: Vec<String> =
            skill.path.iter().map(|segment| utf8_percent_encode(segment, SEGMENT_ESCAPES).to_string()).collect();
        let url = format!("{WELL_KNOWN}{}.zip?version={}", path.join("/"), skill.version);
        Self {
            name: skill.name,
            description: skill.description,
            kind: "archive",
            url,
            digest: format!("sha256:{}", skill.sha256),
            version: skill.number.map(|number| number.to_string()),
        }
    }
}

/// `?version=<id>` of an archive.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ArchiveQuery {
    /// The version the index listed (another: 404).
    version: Option<String>,
}

/// `GET /.well-known/agent-skills/index.json`, and `…/<path>.zip`.
#[utoipa::path(get, path = "/.well-known/agent-skills/{path}", tag = "skills",
    params(("path" = String, Path, description = "`index.json`, or a public skill's path with `.zip`"), ArchiveQuery),
    responses(
        (status = 200, description = "The index of the public skills anyone may read, or one skill's archive",
            body = SkillsIndexDocument),
        (status = 404, description = "No such public skill (or one below a folder with rules)", body = String,
            content_type = "text/plain")))]
pub async fn well_known(
    State(state): State<AppState>,
    uri: Uri,
    Query(query): Query<ArchiveQuery>,
) -> Result<Response, ApiError> {
    let rest = uri.path().strip_prefix(WELL_KNOWN).unwrap_or_default();
    if rest == INDEX {
        return index(&state, &[]).await;
    }
    let Some(path) = rest.strip_suffix(".zip") else {
        return Err(ApiError::not_found(uri.path()));
    };
    let segments = decoded(path).ok_or_else(|| ApiError::not_found(uri.path()))?;
    let archive = state.skills_index().archive(&segments, query.version.as_deref()).await?;
    let name = segments.last().cloned().unwrap_or_default().replace('"', "");
    let cache = if query.version.is_some() { "public, max-age=31536000, immutable" } else { "no-cache" };
    let mut response = (
        [
            (header::CONTENT_TYPE, "application/zip".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}.zip\"")),
            (header::CACHE_CONTROL, cache.to_string()),
        ],
        Body::from_stream(archive.body),
    )
        .into_response();
    if let Some(sha256) = archive.sha256.and_then(|sha256| HeaderValue::from_str(&format!("\"{sha256}\"")).ok()) {
        response.headers_mut().insert(header::ETAG, sha256);
    }
    Ok(response)
}

/// The index of the public folder `path` names (`skills/public/<folder…>/`
/// before the well-known suffix), if it is one: `v2.rs` asks before it
/// wants credentials.
pub async fn folder_index(state: &AppState, raw_path: &str) -> Option<Result<Response, ApiError>> {
    let folder = raw_path.strip_prefix("skills/public/")?.strip_suffix(&format!("{}{INDEX}", &WELL_KNOWN[1..]))?;
    let Some(segments) = decoded(folder.trim_end_matches('/')) else {
        return Some(Err(ApiError::not_found(raw_path)));
    };
    Some(index(state, &segments).await)
}

async fn index(state: &AppState, folder: &[String]) -> Result<Response, ApiError> {
    let skills = state.skills_index().list(folder).await?;
    let document =
        SkillsIndexDocument { schema: DISCOVERY_SCHEMA, skills: skills.into_iter().map(IndexEntry::from).collect() };
    Ok(([(header::CACHE_CONTROL, "no-cache")], Json(document)).into_response())
}

/// Percent-decoded `/`-separated segments (none for an empty path).
fn decoded(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    path.split('/')
        .map(|segment| percent_encoding::percent_decode_str(segment).decode_utf8().ok().map(|s| s.into_owned()))
        .collect()
}
