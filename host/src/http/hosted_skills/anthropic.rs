//! Anthropic's skills API under `/anthropic/v1/skills` (base URL
//! `<host>/anthropic`). Two generations share the paths: GA objects
//! (`display_name`, `latest_version_id`, versions named by id or `latest`),
//! and the beta `skills-2025-10-02` ones (`display_title`, `latest_version`
//! as epoch microseconds), chosen by that value in `anthropic-beta` alone.

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::upload::{Destination, receive};
use super::{Params, answer, described, limit, rfc3339, upload_terms, version_ref, versions_page, zip_answer};
use crate::access::Permission;
use crate::auth::Caller;
use crate::folders::{Becomes, Order};
use crate::handlers::Problem;
use crate::hosted_skills::{HostedSkills, Skill, SkillVersion};
use crate::http::error::{ApiError, Dialect};
use crate::http::state::AppState;

const BETA: &str = "skills-2025-10-02";
/// `display_name` is one line of at most this many characters.
const MAX_DISPLAY_NAME_CHARS: usize = 255;

/// Whether the request asked for the beta objects: `anthropic-beta` (a
/// comma-separated list, possibly repeated) names [`BETA`].
fn beta(headers: &HeaderMap) -> bool {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|value| value.trim() == BETA)
}

/// A skill, in the generation the request asked for.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum AnthropicSkill {
    Ga {
        #[serde(rename = "type")]
        kind: &'static str,
        id: String,
        display_name: String,
        latest_version_id: String,
        #[schema(value_type = Object)]
        source: serde_json::Value,
        created_at: String,
        updated_at: String,
        /// The skill handler's warnings about the version just made, and the
        /// hosted services' rules it breaks (create answers only).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        #[schema(value_type = Vec<Object>)]
        warnings: Vec<Problem>,
    },
    Beta {
        #[serde(rename = "type")]
        kind: &'static str,
        id: String,
        display_title: String,
        latest_version: String,
        source: &'static str,
        created_at: String,
        updated_at: String,
        /// The skill handler's warnings about the version just made, and the
        /// hosted services' rules it breaks (create answers only).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        #[schema(value_type = Vec<Object>)]
        warnings: Vec<Problem>,
    },
}

/// A skill version; the beta adds `version` and `directory`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AnthropicSkillVersion {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    skill_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    name: String,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    directory: Option<String>,
    created_at: String,
    /// The skill handler's warnings about the version just made, and the
    /// hosted services' rules it breaks (create answers only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    warnings: Vec<Problem>,
}

/// A page of skills: the SDK follows `next_page` until it is null.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AnthropicSkillPage {
    data: Vec<AnthropicSkill>,
    has_more: bool,
    next_page: Option<String>,
}

/// A page of versions, paged like [`AnthropicSkillPage`].
#[derive(Serialize, utoipa::ToSchema)]
pub struct AnthropicVersionPage {
    data: Vec<AnthropicSkillVersion>,
    has_more: bool,
    next_page: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AnthropicDeleted {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
}

fn skill_object(skill: &Skill, beta: bool) -> AnthropicSkill {
    skill_object_warned(skill, beta, Vec::new())
}

fn skill_object_warned(skill: &Skill, beta: bool, warnings: Vec<Problem>) -> AnthropicSkill {
    let latest = skill.latest();
    let display = skill.marker.display_name.clone().unwrap_or_else(|| skill.name().to_string());
    let (created_at, updated_at) = (rfc3339(skill.marker.created_at), rfc3339(skill.marker.updated_at));
    if beta {
        AnthropicSkill::Beta {
            kind: "skill",
            id: skill.id.clone(),
            display_title: display,
            latest_version: latest.epoch_micros().to_string(),
            source: "custom",
            created_at,
            updated_at,
            warnings,
        }
    } else {
        AnthropicSkill::Ga {
            kind: "skill",
            id: skill.id.clone(),
            display_name: display,
            latest_version_id: latest.id.clone(),
            source: serde_json::json!({"type": "custom"}),
            created_at,
            updated_at,
            warnings,
        }
    }
}

async fn version_object(
    skills: &HostedSkills<'_>,
    skill: &Skill,
    version: &SkillVersion,
    beta: bool,
) -> Result<AnthropicSkillVersion, ApiError> {
    let metadata = skills.version_metadata(skill, version).await?;
    let (name, description) = described(version, &metadata);
    Ok(AnthropicSkillVersion {
        kind: "skill_version",
        id: version.id.clone(),
        skill_id: skill.id.clone(),
        version: beta.then(|| version.epoch_micros().to_string()),
        name,
        description,
        directory: beta.then(|| skill.name().to_string()),
        created_at: rfc3339(version.record.created_at),
        warnings: Vec::new(),
    })
}

/// `POST /anthropic/v1/skills`: a new skill from `files[]` parts under one
/// top-level folder (its name), optionally labelled by `display_name` (GA)
/// or `display_title` (beta).
#[utoipa::path(post, path = "/anthropic/v1/skills", tag = "skills-api", operation_id = "anthropic_skills_create",
    request_body(content_type = "multipart/form-data", description = "files[] parts named <skill>/<path>; display_name"),
    responses((status = 200, description = "The skill", body = AnthropicSkill),
        (status = 409, description = "A skill of that name exists (x-should-retry: false)")))]
pub async fn create(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let created = async {
        let caller = caller?;
        let skills = state.hosted_skills();
        let mut received =
            receive(&skills, &caller, request, Destination::NewSkill, upload_terms(&state, &caller)).await?;
        if let Some(display) = received.field("display_name").or(received.field("display_title")) {
            let display = display.trim().to_string();
            if display.is_empty() || display.contains('\n') || display.chars().count() > MAX_DISPLAY_NAME_CHARS {
                return Err(ApiError::bad_request(format!(
                    "display_name must be one line of 1 to {MAX_DISPLAY_NAME_CHARS} characters"
                )));
            }
            received.upload.staging.set_display_name(display);
        }
        let finished = skills.finish(&caller, received.upload, Becomes::Current).await?;
        Ok(Json(skill_object_warned(&finished.skill, beta(&headers), finished.warnings)).into_response())
    };
    answer(Dialect::Anthropic, created.await)
}

/// `GET /anthropic/v1/skills`: the caller's skills, newest first.
#[utoipa::path(get, path = "/anthropic/v1/skills", tag = "skills-api", operation_id = "anthropic_skills_list",
    params(("limit" = Option<usize>, Query, description = "1–1000, default 20"),
        ("page" = Option<String>, Query, description = "`next_page` of the page before"),
        ("source" = Option<String>, Query, description = "`custom` (all of them) or `anthropic` (none here)")),
    responses((status = 200, description = "One page", body = AnthropicSkillPage)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Response {
    let listed = async {
        let caller = caller?;
        let limit = limit(&params, 20, 1000)?;
        let after = params.get("page").map(String::as_str);
        let (page, more) = match params.get("source").map(String::as_str) {
            None | Some("custom") => state.hosted_skills().list(&caller, Order::NewestFirst, after, limit).await?,
            Some("anthropic") => (Vec::new(), false),
            Some(other) => {
                return Err(ApiError::bad_request(format!("source must be custom or anthropic, not {other:?}")));
            }
        };
        let beta = beta(&headers);
        let next_page = page.last().filter(|_| more).map(|last| last.id.clone());
        let data = page.iter().map(|skill| skill_object(skill, beta)).collect();
        Ok(Json(AnthropicSkillPage { data, has_more: more, next_page }).into_response())
    };
    answer(Dialect::Anthropic, listed.await)
}

/// `GET /anthropic/v1/skills/{skill_id}`.
#[utoipa::path(get, path = "/anthropic/v1/skills/{skill_id}", tag = "skills-api", operation_id = "anthropic_skills_retrieve",
    params(("skill_id" = String, Path, description = "The skill's id")),
    responses((status = 200, description = "The skill", body = AnthropicSkill)))]
pub async fn retrieve(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let found = async {
        let skill = state.hosted_skills().find(&caller?, &id, Permission::Read).await?;
        Ok(Json(skill_object(&skill, beta(&headers))).into_response())
    };
    answer(Dialect::Anthropic, found.await)
}

/// `DELETE /anthropic/v1/skills/{skill_id}`: the skill and every version
/// (a tombstone its owner can restore within the grace period).
#[utoipa::path(delete, path = "/anthropic/v1/skills/{skill_id}", tag = "skills-api", operation_id = "anthropic_skills_delete",
    params(("skill_id" = String, Path, description = "The skill's id")),
    responses((status = 200, description = "Deleted", body = AnthropicDeleted)))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> Response {
    let deleted = async {
        state.hosted_skills().delete(&caller?, &id).await?;
        Ok(Json(AnthropicDeleted { kind: "skill_deleted", id }).into_response())
    };
    answer(Dialect::Anthropic, deleted.await)
}

/// `POST /anthropic/v1/skills/{skill_id}/versions`: the whole file set again,
/// as the new latest version.
#[utoipa::path(post, path = "/anthropic/v1/skills/{skill_id}/versions", tag = "skills-api", operation_id = "anthropic_skills_create_version",
    params(("skill_id" = String, Path, description = "The skill's id")),
    request_body(content_type = "multipart/form-data", description = "files[] parts named <skill>/<path>"),
    responses((status = 200, description = "The new version", body = AnthropicSkillVersion)))]
pub async fn create_version(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let created = async {
        let caller = caller?;
        let skills = state.hosted_skills();
        let skill = skills.find(&caller, &id, Permission::Write).await?;
        let received =
            receive(&skills, &caller, request, Destination::Version(&skill), upload_terms(&state, &caller)).await?;
        let finished = skills.finish(&caller, received.upload, Becomes::Current).await?;
        let mut object = version_object(&skills, &finished.skill, &finished.version, beta(&headers)).await?;
        object.warnings = finished.warnings;
        Ok(Json(object).into_response())
    };
    answer(Dialect::Anthropic, created.await)
}

/// `GET /anthropic/v1/skills/{skill_id}/versions`: newest first.
#[utoipa::path(get, path = "/anthropic/v1/skills/{skill_id}/versions", tag = "skills-api", operation_id = "anthropic_skills_list_versions",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("limit" = Option<usize>, Query, description = "1–1000, default 20"),
        ("page" = Option<String>, Query, description = "`next_page` of the page before")),
    responses((status = 200, description = "One page", body = AnthropicVersionPage)))]
pub async fn list_versions(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Response {
    let listed = async {
        let limit = limit(&params, 20, 1000)?;
        let skills = state.hosted_skills();
        let skill = skills.find(&caller?, &id, Permission::Read).await?;
        let (page, more) = versions_page(&skill, params.get("page").map(String::as_str), limit, false)?;
        let beta = beta(&headers);
        let next_page = page.last().filter(|_| more).map(|last| last.id.clone());
        let mut data = Vec::with_capacity(page.len());
        for version in &page {
            data.push(version_object(&skills, &skill, version, beta).await?);
        }
        Ok(Json(AnthropicVersionPage { data, has_more: more, next_page }).into_response())
    };
    answer(Dialect::Anthropic, listed.await)
}

/// `GET /anthropic/v1/skills/{skill_id}/versions/{version}`: by id,
/// `latest`, or (beta) epoch microseconds.
#[utoipa::path(get, path = "/anthropic/v1/skills/{skill_id}/versions/{version}", tag = "skills-api", operation_id = "anthropic_skills_retrieve_version",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("version" = String, Path, description = "A version id, `latest`, or the beta's epoch-microseconds version")),
    responses((status = 200, description = "The version", body = AnthropicSkillVersion)))]
pub async fn retrieve_version(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    let found = async {
        let skills = state.hosted_skills();
        let skill = skills.find(&caller?, &id, Permission::Read).await?;
        let version = skill.version(&version_ref(&version))?;
        Ok(Json(version_object(&skills, &skill, version, beta(&headers)).await?).into_response())
    };
    answer(Dialect::Anthropic, found.await)
}

/// `DELETE /anthropic/v1/skills/{skill_id}/versions/{version}`: one version
/// leaves the history; when it was the latest, the newest remaining one
/// becomes current; when it was the only one, the skill goes with it.
#[utoipa::path(delete, path = "/anthropic/v1/skills/{skill_id}/versions/{version}", tag = "skills-api", operation_id = "anthropic_skills_delete_version",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("version" = String, Path, description = "A version id, or the beta's epoch-microseconds version")),
    responses((status = 200, description = "Deleted", body = AnthropicDeleted),
        (status = 404, description = "No such version")))]
pub async fn delete_version(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path((id, named)): Path<(String, String)>,
) -> Response {
    let deleted = async {
        // Done now or by the call this one retries: the same answer.
        state.hosted_skills().drop_version(&caller?, &id, &version_ref(&named)).await?;
        Ok(Json(AnthropicDeleted { kind: "skill_version_deleted", id: named }).into_response())
    };
    answer(Dialect::Anthropic, deleted.await)
}

/// `GET /anthropic/v1/skills/{skill_id}/versions/{version}/content`: the
/// version as a zip whose one top folder is the skill's name.
#[utoipa::path(get, path = "/anthropic/v1/skills/{skill_id}/versions/{version}/content", tag = "skills-api", operation_id = "anthropic_skills_version_content",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("version" = String, Path, description = "A version id, `latest`, or the beta's epoch-microseconds version")),
    responses((status = 200, description = "The version's files", content_type = "application/zip", body = Vec<u8>)))]
pub async fn version_content(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    let archived = async {
        let (name, body) = state.hosted_skills().archive(&caller?, &id, Some(&version_ref(&version))).await?;
        Ok(zip_answer(&name, body))
    };
    answer(Dialect::Anthropic, archived.await)
}
