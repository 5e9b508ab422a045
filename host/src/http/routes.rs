//! Route handlers: thin, typed, errors as [`ApiError`].

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Admin, query_flag};
use super::state::AppState;
use crate::access::APPDATA_FOLDER;
use crate::audit::AuditEvent;
use crate::auth::Caller;
use crate::consent::granted_by;
use crate::handlers::{HandlerSource, LimitOverrides};

/// `{"status": "ok"}` (and, from `/ready`, the number of handler types).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceStatus {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    handlers: Option<usize>,
    /// From `/ready`: handler types that failed to load (an `oci://` type
    /// whose registry is away with nothing cached, …), when there are any;
    /// the rest serves. `POST /v1/ops/handlers/reload` says why.
    #[serde(rename = "handlersFailed", skip_serializing_if = "Option::is_none")]
    handlers_failed: Option<usize>,
}

/// `GET /health`: the process is up.
#[utoipa::path(get, path = "/health", tag = "service", security(()),
    responses((status = 200, description = "The process is up", body = ServiceStatus)))]
pub async fn health() -> Json<ServiceStatus> {
    Json(ServiceStatus { status: "ok", handlers: None, handlers_failed: None })
}

/// `GET /metrics`: Prometheus text format, no credentials (like `/health`;
/// it holds counts by route template, never names or paths).
#[utoipa::path(get, path = "/metrics", tag = "service", security(()),
    responses((status = 200, description = "Prometheus text exposition format", body = String,
        content_type = "text/plain; version=0.0.4")))]
pub async fn metrics() -> impl axum::response::IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], crate::metrics::render())
}

/// `GET /ready`: the store answers, Redis (when configured) answers, and
/// handlers are loaded.
#[utoipa::path(get, path = "/ready", tag = "service", security(()),
    responses(
        (status = 200, description = "Ready to serve", body = ServiceStatus),
        (status = 503, description = "The store or Redis does not answer", body = String, content_type = "text/plain"),
    ))]
pub async fn ready(State(state): State<AppState>) -> Result<Json<ServiceStatus>, ApiError> {
    // The causes name store paths, URLs and Redis addresses: logged, and
    // this route answers anyone.
    crate::storage::check_ready(state.store().as_ref()).await.map_err(|error| {
        tracing::warn!(%error, "readiness: storage");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "storage is not reachable")
    })?;
    if let Some(redis) = state.redis() {
        let mut connection = redis.clone();
        redis::cmd("PING").query_async::<String>(&mut connection).await.map_err(|error| {
            tracing::warn!(%error, "readiness: Redis");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "Redis is not reachable")
        })?;
    }
    let failed = state.handlers().failed().len();
    Ok(Json(ServiceStatus {
        status: "ready",
        handlers: Some(state.handlers().all().len()),
        handlers_failed: (failed > 0).then_some(failed),
    }))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BucketResponse {
    bucket: String,
    /// For a per-request key: `<user bucket>/appdata/<app>`, the folder the
    /// application may write in the user's bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    appdata: Option<String>,
}

/// `GET /v1/bucket`: the caller's own bucket id (an application's own bucket
/// for a per-request key, with its appdata folder).
#[utoipa::path(get, path = "/v1/bucket", tag = "v1",
    responses((status = 200, description = "The caller's bucket", body = BucketResponse)))]
pub async fn bucket(State(state): State<AppState>, caller: Caller) -> Json<BucketResponse> {
    let appdata = caller
        .per_request
        .as_ref()
        .map(|key| format!("{}/{APPDATA_FOLDER}/{}", state.buckets().encode(&key.user_bucket()), key.app_id));
    Json(BucketResponse { bucket: state.buckets().encode(&caller.bucket_location()), appdata })
}

/// `GET /v1/user/info`: DIAL's shape.
#[derive(Serialize, utoipa::ToSchema)]
pub struct UserInfo {
    roles: Vec<String>,
    /// A project key's project (also for a per-request key a project's call started).
    #[serde(skip_serializing_if = "Option::is_none")]
    project: Option<String>,
    /// A user's token claims.
    #[serde(rename = "userClaims", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    user_claims: Option<serde_json::Value>,
}

/// `GET /v1/user/info`: the caller's roles, and its project (API key) or
/// its token's claims (a user) — for a per-request key, the originating
/// user's or project's.
#[utoipa::path(get, path = "/v1/user/info", tag = "v1",
    responses((status = 200, description = "Who the caller is", body = UserInfo)))]
pub async fn user_info(caller: Caller) -> Json<UserInfo> {
    let (project, user_claims) = match &caller.identity {
        crate::identity::Identity::Project { name } => (Some(name.clone()), None),
        crate::identity::Identity::User { .. } => (None, Some(caller.claims.clone().unwrap_or_default())),
    };
    Json(UserInfo { roles: caller.roles.clone(), project, user_claims })
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandlerInfo {
    group: String,
    type_name: String,
    display_name: String,
    handler_version: String,
    /// Built in, or the `.wasm` file it was loaded from.
    #[schema(value_type = Object)]
    source: HandlerSource,
    sha256: String,
    strict: bool,
    /// The per-resource limits the handler sets for its type.
    #[schema(value_type = Object)]
    limits: LimitOverrides,
}

/// A folder type as any signed-in caller may know it.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypeInfo {
    /// The URL segment: `/v2/<group>/…`.
    group: String,
    type_name: String,
    display_name: String,
}

/// `GET /v2/types`: the folder types served here (the URL group of each),
/// for any caller: what `/v2/metadata/<group>/<bucket>/` can list. Sources,
/// hashes and limits stay in the admins' `/v1/ops/handlers`.
#[utoipa::path(get, path = "/v2/types", tag = "v2",
    responses((status = 200, description = "The folder types served", body = Vec<TypeInfo>)))]
pub async fn list_types(State(state): State<AppState>, _caller: Caller) -> Json<Vec<TypeInfo>> {
    let types = state
        .handlers()
        .all()
        .into_iter()
        .map(|handler| {
            let description = handler.description();
            TypeInfo {
                group: description.group.clone(),
                type_name: description.type_name.clone(),
                display_name: description.display_name.clone(),
            }
        })
        .collect();
    Json(types)
}

/// `GET /v1/ops/handlers` (admin): the loaded handler types.
#[utoipa::path(get, path = "/v1/ops/handlers", tag = "service",
    responses((status = 200, description = "The loaded handler types (admins)", body = Vec<HandlerInfo>)))]
pub async fn list_handlers(State(state): State<AppState>, _admin: Admin) -> Json<Vec<HandlerInfo>> {
    let handlers = state
        .handlers()
        .all()
        .into_iter()
        .map(|handler| {
            let description = handler.description();
            HandlerInfo {
                group: description.group.clone(),
                type_name: description.type_name.clone(),
                display_name: description.display_name.clone(),
                handler_version: description.handler_version.clone(),
                source: handler.source().clone(),
                sha256: handler.sha256().into(),
                strict: handler.is_strict(),
                limits: description.limits.clone(),
            }
        })
        .collect();
    Json(handlers)
}

/// `POST /v1/ops/handlers/reload` (admin): re-reads `handlers.dir`. 200 when
/// every component loaded; 422 when one did not (what it replaced keeps
/// serving), with the report either way. With `?preview=true` it changes
/// nothing and says what a reload would do (what it would load, update,
/// remove, and which files would fail); a reload is audited with its admin.
#[utoipa::path(post, path = "/v1/ops/handlers/reload", tag = "service", params(ReloadQuery),
    responses(
        (status = 200, description = "Every component loaded (or would): `{serving, failed, removed}`", body = Object),
        (status = 422, description = "Some failed (what they would replace keeps serving), named", body = Object),
    ))]
pub async fn reload_handlers(
    State(state): State<AppState>,
    Admin(admin): Admin,
    query: Result<Query<ReloadQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let preview = query.ok().and_then(|Query(query)| query_flag(query.preview.as_deref()));
    let preview = preview.ok_or_else(|| ApiError::bad_request("preview must be true or false"))?;
    let report = if preview {
        state.handlers().preview_reload().await?
    } else {
        let report = state.handlers().reload().await?;
        state.audit().emit(reload_event(&admin, &report));
        report
    };
    let status = if report.is_clean() { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    Ok((status, Json(report)).into_response())
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReloadQuery {
    /// `true`: report what a reload would do, and do nothing.
    #[param(value_type = Option<bool>)]
    preview: Option<String>,
}

fn reload_event(admin: &Caller, report: &crate::handlers::ReloadReport) -> AuditEvent {
    let changed =
        report.serving.iter().filter(|s| s.change != "unchanged").map(|s| format!("{}:{}", s.group, s.change));
    let removed = report.removed.iter().map(|group| format!("{group}:removed"));
    let failures = report.failed.iter().map(|f| format!("{}: {}", f.source, f.error)).collect();
    AuditEvent::handlers_reload(&granted_by(admin), changed.chain(removed).collect(), failures)
}

/// Anything else.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("No route: {}", uri.path()))
}
