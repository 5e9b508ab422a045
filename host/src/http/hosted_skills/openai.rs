//! OpenAI's skills API under `/openai/v1/skills` (base URL
//! `<host>/openai/v1`): versions are numbered `"1"`, `"2"`, … and
//! `default_version` is the one DIAL serves as current — moving it commits
//! nothing; `latest_version` is the newest.

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::upload::{Destination, receive};
use super::{Params, answer, described, limit, upload_terms, version_ref, versions_page, zip_answer};
use crate::access::Permission;
use crate::auth::Caller;
use crate::folders::{Becomes, Order};
use crate::handlers::Problem;
use crate::hosted_skills::{Dropped, HostedSkills, Skill, SkillVersion, SkillsError, VersionRef};
use crate::http::error::{ApiError, Dialect};
use crate::http::state::AppState;

#[derive(Serialize, utoipa::ToSchema)]
pub struct OpenAiSkill {
    id: String,
    object: &'static str,
    name: String,
    description: String,
    /// Unix seconds.
    created_at: i64,
    default_version: String,
    latest_version: String,
    /// The skill handler's warnings about the version just made, and the
    /// hosted services' rules it breaks (create answers only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    warnings: Vec<Problem>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct OpenAiSkillVersion {
    id: String,
    object: &'static str,
    skill_id: String,
    version: String,
    name: String,
    description: String,
    created_at: i64,
    /// The skill handler's warnings about the version just made, and the
    /// hosted services' rules it breaks (create answers only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    warnings: Vec<Problem>,
}

/// A page of skills: the SDK asks for `after=<last id>` while `has_more`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OpenAiSkillList {
    object: &'static str,
    data: Vec<OpenAiSkill>,
    first_id: Option<String>,
    last_id: Option<String>,
    has_more: bool,
}

/// A page of versions, paged like [`OpenAiSkillList`].
#[derive(Serialize, utoipa::ToSchema)]
pub struct OpenAiVersionList {
    object: &'static str,
    data: Vec<OpenAiSkillVersion>,
    first_id: Option<String>,
    last_id: Option<String>,
    has_more: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct OpenAiDeleted {
    id: String,
    object: &'static str,
    deleted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

/// `POST /openai/v1/skills/{skill_id}`'s body.
#[derive(Deserialize, utoipa::ToSchema)]
pub struct OpenAiSkillUpdate {
    default_version: VersionName,
}

/// A version as a body names it: `"2"` as the SDK types it, or `2`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum VersionName {
    Text(String),
    Number(u64),
}

impl VersionName {
    fn reference(&self) -> VersionRef {
        match self {
            Self::Text(text) => version_named(text),
            Self::Number(number) => VersionRef::Number(*number),
        }
    }
}

fn skill_object(skill: &Skill) -> OpenAiSkill {
    let metadata = &skill.marker.metadata;
    let text = |key: &str| metadata.get(key).cloned().unwrap_or_default();
    OpenAiSkill {
        id: skill.id.clone(),
        object: "skill",
        name: text("name"),
        description: text("description"),
        created_at: skill.marker.created_at / 1000,
        default_version: skill.current().number().to_string(),
        latest_version: skill.latest().number().to_string(),
        warnings: Vec::new(),
    }
}

async fn version_object(
    skills: &HostedSkills<'_>,
    skill: &Skill,
    version: &SkillVersion,
) -> Result<OpenAiSkillVersion, ApiError> {
    let metadata = skills.version_metadata(skill, version).await?;
    let (name, description) = described(version, &metadata);
    Ok(OpenAiSkillVersion {
        id: version.id.clone(),
        object: "skill.version",
        skill_id: skill.id.clone(),
        version: version.number().to_string(),
        name,
        description,
        created_at: version.record.created_at / 1000,
        warnings: Vec::new(),
    })
}

/// `order`: `desc` (the default) or `asc`.
fn ascending(params: &Params) -> Result<bool, ApiError> {
    match params.get("order").map(String::as_str) {
        None | Some("desc") => Ok(false),
        Some("asc") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!("order must be asc or desc, not {other:?}"))),
    }
}

/// The first and last ids of a page.
fn ends<T>(data: &[T], id_of: impl Fn(&T) -> String) -> (Option<String>, Option<String>) {
    (data.first().map(&id_of), data.last().map(&id_of))
}

/// A version as OpenAI names it: its number (or `latest`, or its id; no
/// epoch versions, which are Anthropic's beta).
fn version_named(raw: &str) -> VersionRef {
    match version_ref(raw) {
        VersionRef::Epoch(_) => VersionRef::Id(raw.to_string()),
        reference => reference,
    }
}

/// `POST /openai/v1/skills`: a new skill from `files[]` parts under one
/// top-level folder, or one zip part `files` holding that folder.
#[utoipa::path(post, path = "/openai/v1/skills", tag = "skills-api", operation_id = "openai_skills_create",
    request_body(content_type = "multipart/form-data", description = "files[] parts named <skill>/<path>, or one zip `files`"),
    responses((status = 200, description = "The skill", body = OpenAiSkill),
        (status = 409, description = "A skill of that name exists (x-should-retry: false)")))]
pub async fn create(State(state): State<AppState>, caller: Result<Caller, ApiError>, request: Request) -> Response {
    let created = async {
        let caller = caller?;
        let skills = state.hosted_skills();
        let received = receive(&skills, &caller, request, Destination::NewSkill, upload_terms(&state, &caller)).await?;
        let finished = skills.finish(&caller, received.upload, Becomes::Current).await?;
        Ok(Json(OpenAiSkill { warnings: finished.warnings, ..skill_object(&finished.skill) }).into_response())
    };
    answer(Dialect::OpenAi, created.await)
}

/// `GET /openai/v1/skills`: the caller's skills by creation time.
#[utoipa::path(get, path = "/openai/v1/skills", tag = "skills-api", operation_id = "openai_skills_list",
    params(("limit" = Option<usize>, Query, description = "1–100, default 20"),
        ("after" = Option<String>, Query, description = "The id of the last skill of the page before"),
        ("order" = Option<String>, Query, description = "`desc` (newest first, the default) or `asc`")),
    responses((status = 200, description = "One page", body = OpenAiSkillList)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Query(params): Query<Params>,
) -> Response {
    let listed = async {
        let caller = caller?;
        let limit = limit(&params, 20, 100)?;
        let ascending = ascending(&params)?;
        let order = if ascending { Order::OldestFirst } else { Order::NewestFirst };
        let after = params.get("after").map(String::as_str);
        let (page, more) = state.hosted_skills().list(&caller, order, after, limit).await?;
        let data: Vec<OpenAiSkill> = page.iter().map(skill_object).collect();
        let (first_id, last_id) = ends(&data, |s: &OpenAiSkill| s.id.clone());
        Ok(Json(OpenAiSkillList { object: "list", data, first_id, last_id, has_more: more }).into_response())
    };
    answer(Dialect::OpenAi, listed.await)
}

/// `GET /openai/v1/skills/{skill_id}`.
#[utoipa::path(get, path = "/openai/v1/skills/{skill_id}", tag = "skills-api", operation_id = "openai_skills_retrieve",
    params(("skill_id" = String, Path, description = "The skill's id")),
    responses((status = 200, description = "The skill", body = OpenAiSkill)))]
pub async fn retrieve(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> Response {
    let found = async {
        let skill = state.hosted_skills().find(&caller?, &id, Permission::Read).await?;
        Ok(Json(skill_object(&skill)).into_response())
    };
    answer(Dialect::OpenAi, found.await)
}

/// `POST /openai/v1/skills/{skill_id}`: moves `default_version` — what DIAL
/// serves as current — to another kept version; no new version is made.
#[utoipa::path(post, path = "/openai/v1/skills/{skill_id}", tag = "skills-api", operation_id = "openai_skills_update",
    params(("skill_id" = String, Path, description = "The skill's id")),
    request_body(content = OpenAiSkillUpdate, description = "The version to serve by default"),
    responses((status = 200, description = "The skill", body = OpenAiSkill)))]
pub async fn update(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let updated = async {
        let caller = caller?;
        let update: OpenAiSkillUpdate = serde_json::from_slice(&body).map_err(|error| {
            ApiError::bad_request(format!("Expected a JSON body {{\"default_version\": \"<number>\"}}: {error}"))
        })?;
        let skill = match state.hosted_skills().make_current(&caller, &id, &update.default_version.reference()).await {
            Err(SkillsError::VersionNotFound(named)) => {
                return Err(ApiError::bad_request(format!("default_version {named:?} is not a version of this skill")));
            }
            skill => skill?,
        };
        Ok(Json(skill_object(&skill)).into_response())
    };
    answer(Dialect::OpenAi, updated.await)
}

/// `DELETE /openai/v1/skills/{skill_id}`: the skill and every version (a
/// tombstone its owner can restore within the grace period).
#[utoipa::path(delete, path = "/openai/v1/skills/{skill_id}", tag = "skills-api", operation_id = "openai_skills_delete",
    params(("skill_id" = String, Path, description = "The skill's id")),
    responses((status = 200, description = "Deleted", body = OpenAiDeleted)))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> Response {
    let deleted = async {
        state.hosted_skills().delete(&caller?, &id).await?;
        Ok(Json(OpenAiDeleted { id, object: "skill.deleted", deleted: true, version: None }).into_response())
    };
    answer(Dialect::OpenAi, deleted.await)
}

/// `GET /openai/v1/skills/{skill_id}/content`: the default version's zip.
#[utoipa::path(get, path = "/openai/v1/skills/{skill_id}/content", tag = "skills-api", operation_id = "openai_skills_content",
    params(("skill_id" = String, Path, description = "The skill's id")),
    responses((status = 200, description = "The default version's files", content_type = "application/zip", body = Vec<u8>)))]
pub async fn content(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> Response {
    let archived = async {
        let (name, body) = state.hosted_skills().archive(&caller?, &id, None).await?;
        Ok(zip_answer(&name, body))
    };
    answer(Dialect::OpenAi, archived.await)
}

/// `POST /openai/v1/skills/{skill_id}/versions`: a new version; with
/// `default=true` it becomes the default (current), else the default stays.
#[utoipa::path(post, path = "/openai/v1/skills/{skill_id}/versions", tag = "skills-api", operation_id = "openai_skills_create_version",
    params(("skill_id" = String, Path, description = "The skill's id")),
    request_body(content_type = "multipart/form-data", description = "default (true/false), then files[] parts or one zip `files`"),
    responses((status = 200, description = "The new version", body = OpenAiSkillVersion)))]
pub async fn create_version(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let created = async {
        let caller = caller?;
        let skills = state.hosted_skills();
        let skill = skills.find(&caller, &id, Permission::Write).await?;
        let received =
            receive(&skills, &caller, request, Destination::Version(&skill), upload_terms(&state, &caller)).await?;
        let becomes = match received.field("default") {
            None | Some("false") => Becomes::Retained,
            Some("true") => Becomes::Current,
            Some(other) => return Err(ApiError::bad_request(format!("default must be true or false, not {other:?}"))),
        };
        let finished = skills.finish(&caller, received.upload, becomes).await?;
        let object = version_object(&skills, &finished.skill, &finished.version).await?;
        Ok(Json(OpenAiSkillVersion { warnings: finished.warnings, ..object }).into_response())
    };
    answer(Dialect::OpenAi, created.await)
}

/// `GET /openai/v1/skills/{skill_id}/versions`: by number, newest first
/// unless `order=asc`.
#[utoipa::path(get, path = "/openai/v1/skills/{skill_id}/versions", tag = "skills-api", operation_id = "openai_skills_list_versions",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("limit" = Option<usize>, Query, description = "1–100, default 20"),
        ("after" = Option<String>, Query, description = "The id of the last version of the page before"),
        ("order" = Option<String>, Query, description = "`desc` (the default) or `asc`")),
    responses((status = 200, description = "One page", body = OpenAiVersionList)))]
pub async fn list_versions(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> Response {
    let listed = async {
        let limit = limit(&params, 20, 100)?;
        let ascending = ascending(&params)?;
        let skills = state.hosted_skills();
        let skill = skills.find(&caller?, &id, Permission::Read).await?;
        let (page, more) = versions_page(&skill, params.get("after").map(String::as_str), limit, ascending)?;
        let mut data = Vec::with_capacity(page.len());
        for version in &page {
            data.push(version_object(&skills, &skill, version).await?);
        }
        let (first_id, last_id) = ends(&data, |v: &OpenAiSkillVersion| v.id.clone());
        Ok(Json(OpenAiVersionList { object: "list", data, first_id, last_id, has_more: more }).into_response())
    };
    answer(Dialect::OpenAi, listed.await)
}

/// `GET /openai/v1/skills/{skill_id}/versions/{version}`.
#[utoipa::path(get, path = "/openai/v1/skills/{skill_id}/versions/{version}", tag = "skills-api", operation_id = "openai_skills_retrieve_version",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("version" = String, Path, description = "The version number (or `latest`)")),
    responses((status = 200, description = "The version", body = OpenAiSkillVersion)))]
pub async fn retrieve_version(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    let found = async {
        let skills = state.hosted_skills();
        let skill = skills.find(&caller?, &id, Permission::Read).await?;
        let version = skill.version(&version_named(&version))?;
        Ok(Json(version_object(&skills, &skill, version).await?).into_response())
    };
    answer(Dialect::OpenAi, found.await)
}

/// `DELETE /openai/v1/skills/{skill_id}/versions/{version}`: deleting the
/// default version makes the newest remaining one the default; deleting the
/// only one deletes the skill. A number is never given again.
#[utoipa::path(delete, path = "/openai/v1/skills/{skill_id}/versions/{version}", tag = "skills-api", operation_id = "openai_skills_delete_version",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("version" = String, Path, description = "The version number")),
    responses((status = 200, description = "Deleted", body = OpenAiDeleted),
        (status = 404, description = "No such version")))]
pub async fn delete_version(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path((id, named)): Path<(String, String)>,
) -> Response {
    let deleted = async {
        let (id, number) = match state.hosted_skills().drop_version(&caller?, &id, &version_named(&named)).await? {
            Dropped::Version(version) => (version.id.clone(), version.number().to_string()),
            // A retry: the version's id is gone with it, its name is not.
            Dropped::Already => (named.clone(), named),
        };
        Ok(Json(OpenAiDeleted { id, object: "skill.version.deleted", deleted: true, version: Some(number) })
            .into_response())
    };
    answer(Dialect::OpenAi, deleted.await)
}

/// `GET /openai/v1/skills/{skill_id}/versions/{version}/content`.
#[utoipa::path(get, path = "/openai/v1/skills/{skill_id}/versions/{version}/content", tag = "skills-api", operation_id = "openai_skills_version_content",
    params(("skill_id" = String, Path, description = "The skill's id"),
        ("version" = String, Path, description = "The version number (or `latest`)")),
    responses((status = 200, description = "The version's files", content_type = "application/zip", body = Vec<u8>)))]
pub async fn version_content(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    let archived = async {
        let (name, body) = state.hosted_skills().archive(&caller?, &id, Some(&version_named(&version))).await?;
        Ok(zip_answer(&name, body))
    };
    answer(Dialect::OpenAi, archived.await)
}
