//! Consent routes (SPEC §9): `/v1/consent/{id}` (a user's consent to an
//! application that asks for it) and `/v1/consent/{id}/admin-consent` (an
//! admin's consent to its resource-dependency declaration). `{id}` is a
//! deployment id (a configuration name or `applications/{bucket}/{path}`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::error::ApiError;
use super::extract::query_flag;
use super::mint::{Deployment, Reader, decode_id, resolve};
use super::state::AppState;
use crate::access::AdminDecision;
use crate::apps::Application;
use crate::audit::AuditEvent;
use crate::auth::Caller;
use crate::buckets::BucketLocation;
use crate::clock::now_ms;
use crate::consent::{AdminConsent, ApprovedDeclaration, declares, granted_by, is_live, snapshot, user_document};
use crate::proxy::Origin;

const ADMIN_SUFFIX: &str = "/admin-consent";

/// Which consent a path is about.
enum Subject {
    User(String),
    Admin(String),
}

fn subject(uri: &Uri) -> Result<Subject, ApiError> {
    let rest = super::respond::raw_path(uri, "/v1/consent/");
    match rest.strip_suffix(ADMIN_SUFFIX) {
        Some(id) => Ok(Subject::Admin(decode_id(id)?)),
        None => Ok(Subject::User(decode_id(rest)?)),
    }
}

/// A per-request key asking about consent: refused (403), and a refused
/// consent attempt is an audit event. Consent is a human's (or an admin's)
/// decision; an application acting for its user never makes it for them.
fn refuse_key(state: &AppState, caller: &Caller, id: &str, event: &'static str) -> Result<(), ApiError> {
    let Some(key) = &caller.per_request else { return Ok(()) };
    state.audit().emit(AuditEvent::consent_refused(event, id, &caller.author_name(), &key.app, &key.trace_id));
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        format!("An application's per-request key cannot consent for its user: {id}"),
    ))
}

/// The application whose admin consent `caller` asks about. Admin consent
/// is for explicit admins only: a caller holding a configured admin role (no
/// admin role configured: nobody). A per-request key never is.
async fn admin_app(
    state: &AppState,
    caller: &Caller,
    id: &str,
    event: &'static str,
) -> Result<Arc<Application>, ApiError> {
    Ok(admin_deployment(state, caller, id, event).await?.application)
}

async fn admin_deployment(
    state: &AppState,
    caller: &Caller,
    id: &str,
    event: &'static str,
) -> Result<Deployment, ApiError> {
    refuse_key(state, caller, id, event)?;
    if !state.access().may_decide(caller, AdminDecision::AdminConsent) {
        // Refused attempts are audited as grants and withdrawals are.
        state.audit().emit(AuditEvent::admin_consent_refused(event, id, &granted_by(caller)));
        return Err(ApiError::new(StatusCode::FORBIDDEN, "Only admins may decide admin consent"));
    }
    resolve(state, caller, id, Reader::Admin).await
}

/// `GET /v1/consent/{id}`: whether the user accepted; when not, the
/// document to accept (as DIAL).
#[derive(Serialize, utoipa::ToSchema)]
pub struct UserConsent {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    consent: Option<Value>,
    accepted: bool,
}

/// An admin's consent to a declaration: not given (`{"consented": false}`),
/// live, or stale (the declaration changed since: `consented` false,
/// `stale` true), with the record as approved.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminConsentState {
    #[serde(skip_serializing_if = "Option::is_none")]
    consent: Option<ApprovedDeclaration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    granted_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    granted_at: Option<i64>,
    consented: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stale: Option<bool>,
    /// With `?declaration=true` only (the admin console's diff): the
    /// declaration as it is now, in the form a grant would approve it.
    #[serde(skip_serializing_if = "Option::is_none")]
    declaration: Option<ApprovedDeclaration>,
    /// With `?declaration=true` only: where the data a grant releases goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    application: Option<ApplicationSummary>,
}

/// Who an admin consents for: the application's name, the host its calls
/// go to, who owns its definition, and the roles that may call it.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    display_name: Option<String>,
    /// `host[:port]` of its endpoint (or base URL); absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint_host: Option<String>,
    /// `configuration` (the operator's), or the bucket owner of a stored
    /// definition: `user <id>`, `project <name>`, `public`.
    owner: String,
    /// Who may call it; absent: everyone.
    #[serde(skip_serializing_if = "Option::is_none")]
    user_roles: Option<Vec<String>>,
}

impl ApplicationSummary {
    fn of(state: &AppState, id: &str, deployment: &Deployment) -> Self {
        let app = &deployment.application;
        let endpoint = app.endpoint.as_deref().or(app.base_url.as_deref());
        let endpoint_host = endpoint.and_then(|url| url::Url::parse(url).ok()).and_then(|url| {
            let host = url.host_str()?.to_string();
            Some(url.port().map_or(host.clone(), |port| format!("{host}:{port}")))
        });
        let owner = match deployment.origin {
            Origin::Configured => "configuration".to_string(),
            Origin::Stored => {
                let bucket = id.split('/').nth(1).unwrap_or_default();
                match state.buckets().decode(bucket) {
                    Ok(BucketLocation::User(sub)) => format!("user {sub}"),
                    Ok(BucketLocation::Key(name)) => format!("project {name}"),
                    Ok(BucketLocation::Public) => "public".to_string(),
                    Ok(other) => other.to_string(),
                    Err(_) => bucket.to_string(),
                }
            }
        };
        Self { display_name: app.display_name.clone(), endpoint_host, owner, user_roles: app.user_roles.clone() }
    }
}

/// `GET /v1/consent/{id}/admin-consent?declaration=true` adds today's
/// declaration; without it the answer is DIAL's shape exactly.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminConsentQuery {
    /// `true` (any case) adds `declaration`: what the application declares now.
    #[param(value_type = Option<bool>)]
    declaration: Option<String>,
}

impl AdminConsentQuery {
    fn wants_declaration(&self) -> Result<bool, ApiError> {
        query_flag(self.declaration.as_deref())
            .ok_or_else(|| ApiError::bad_request("declaration must be true or false"))
    }
}

impl AdminConsentState {
    fn of(record: AdminConsent, live: bool) -> Self {
        Self {
            consent: Some(record.consent),
            granted_by: Some(record.granted_by),
            granted_at: Some(record.granted_at),
            consented: live,
            stale: Some(!live),
            declaration: None,
            application: None,
        }
    }
}

/// `/v1/consent/{id}` and `/v1/consent/{id}/admin-consent` share one route
/// (`{id}` may hold `/`); each method dispatches on the path's subject.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    query: Result<Query<AdminConsentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    Ok(match subject(&uri)? {
        Subject::User(id) => Json(user_get(&state, &caller, &id).await?).into_response(),
        Subject::Admin(id) => {
            let Query(query) = query.map_err(|_| ApiError::bad_request("declaration must be true or false"))?;
            Json(admin_get(&state, &caller, &id, query).await?).into_response()
        }
    })
}

pub async fn post(State(state): State<AppState>, caller: Caller, uri: Uri, bytes: Bytes) -> Result<Response, ApiError> {
    Ok(match subject(&uri)? {
        Subject::User(id) => user_post(&state, &caller, &id, &bytes).await?.into_response(),
        Subject::Admin(id) => Json(admin_post(&state, &caller, &id, &bytes).await?).into_response(),
    })
}

/// A user's consent has no DELETE: 405 whoever asks, before credentials.
pub async fn delete(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let Subject::Admin(id) = subject(&uri)? else {
        return Err(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "A user's consent cannot be deleted here"));
    };
    Ok(admin_delete(&state, &caller?, &id).await?.into_response())
}

/// `GET /v1/consent/{id}` (as DIAL: whether the user accepted).
#[utoipa::path(get, path = "/v1/consent/{deployment}", tag = "consent",
    params(("deployment" = String, Path, description = "The application's deployment id")),
    responses((status = 200, description = "Whether the caller accepted; when not, the consent document to accept",
        body = UserConsent)))]
pub async fn user_get(state: &AppState, caller: &Caller, id: &str) -> Result<UserConsent, ApiError> {
    refuse_key(state, caller, id, "user_consent_read")?;
    let app = resolve(state, caller, id, Reader::Caller).await?.application;
    if app.features.consent_required != Some(true) {
        return Ok(UserConsent { consent: None, accepted: true });
    }
    let declared = &app.resource_dependencies;
    let document = user_document(id, declared);
    // As DIAL: accepted → no consent body, unless the application declares
    // resources: then the document says what the user agreed to let it reach.
    if state.consent().user_accepted(&caller.user_location(), id, declared).await? {
        return Ok(UserConsent { consent: (!declared.is_empty()).then_some(document), accepted: true });
    }
    Ok(UserConsent { consent: Some(document), accepted: false })
}

/// `GET /v1/consent/{id}/admin-consent`: tri-state — not consented;
/// consented and live; stale (the declaration changed since).
#[utoipa::path(get, path = "/v1/consent/{deployment}/admin-consent", tag = "consent",
    params(("deployment" = String, Path, description = "The application's deployment id"), AdminConsentQuery),
    responses((status = 200, description = "The admin consent's state, with the record as approved", body = AdminConsentState)))]
pub async fn admin_get(
    state: &AppState,
    caller: &Caller,
    id: &str,
    query: AdminConsentQuery,
) -> Result<AdminConsentState, ApiError> {
    let deployment = admin_deployment(state, caller, id, "admin_consent_read").await?;
    let app = &deployment.application;
    let wants_declaration = query.wants_declaration()?;
    let mut answer = match state.consent().admin(id).await? {
        Some(record) => {
            let live = is_live(&record, &app.resource_dependencies);
            AdminConsentState::of(record, live)
        }
        None => AdminConsentState {
            consent: None,
            granted_by: None,
            granted_at: None,
            consented: false,
            stale: None,
            declaration: None,
            application: None,
        },
    };
    if wants_declaration {
        answer.declaration = Some(snapshot(&app.resource_dependencies));
        answer.application = Some(ApplicationSummary::of(state, id, &deployment));
    }
    Ok(answer)
}

/// `POST /v1/consent/{id}` `{"consent": {…}}`: the user accepts.
#[utoipa::path(post, path = "/v1/consent/{deployment}", tag = "consent",
    params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "`{\"consent\": {…}}`: the document `GET` gave"),
    responses((status = 200, description = "Accepted")))]
pub async fn user_post(state: &AppState, caller: &Caller, id: &str, bytes: &Bytes) -> Result<StatusCode, ApiError> {
    refuse_key(state, caller, id, "user_consent_grant")?;
    resolve(state, caller, id, Reader::Caller).await?;
    let body: Value =
        serde_json::from_slice(bytes).map_err(|_| ApiError::bad_request("Invalid request body provided"))?;
    let consent =
        body.get("consent").filter(|c| !c.is_null()).ok_or_else(|| ApiError::bad_request("User consent is missed"))?;
    state.consent().accept(&caller.user_location(), id, consent).await?;
    Ok(StatusCode::OK)
}

/// What a grant may pin: `{"declaration": {"resources": […]}}`, the
/// declaration the admin reviewed (as `GET …?declaration=true` showed it).
#[derive(serde::Deserialize, utoipa::ToSchema)]
pub struct ReviewedDeclaration {
    declaration: Option<ApprovedDeclaration>,
}

/// `POST /v1/consent/{id}/admin-consent`: an admin approves the declaration
/// as it is now (400 when it declares nothing). DIAL's body is empty and
/// ignored; a body naming the `declaration` the admin reviewed makes the
/// grant conditional on it (412 when the application declares something
/// else by now), so an admin never approves what they were not shown.
#[utoipa::path(post, path = "/v1/consent/{deployment}/admin-consent", tag = "consent",
    params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = ReviewedDeclaration, description = "Optional: the declaration reviewed"),
    responses((status = 200, description = "Granted: the record as approved", body = AdminConsentState),
        (status = 412, description = "The declaration changed since the one reviewed", body = String,
            content_type = "text/plain")))]
pub async fn admin_post(
    state: &AppState,
    caller: &Caller,
    id: &str,
    bytes: &Bytes,
) -> Result<AdminConsentState, ApiError> {
    let app = admin_app(state, caller, id, "admin_consent_grant").await?;
    if app.resource_dependencies.is_empty() {
        return Err(ApiError::bad_request(format!("{id} declares no resource dependencies to consent to")));
    }
    // DIAL clients send `{}` or nothing; only a JSON object naming a declaration is read.
    let reviewed = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(body)) if body.contains_key("declaration") => {
            serde_json::from_value::<ReviewedDeclaration>(Value::Object(body))
                .map_err(|e| ApiError::bad_request(format!("Invalid reviewed declaration: {e}")))?
                .declaration
        }
        _ => None,
    };
    if let Some(reviewed) = reviewed
        && !declares(&reviewed, &app.resource_dependencies)
    {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("The declaration of {id} changed since the one reviewed: review it again"),
        ));
    }
    let record = AdminConsent {
        consent: snapshot(&app.resource_dependencies),
        granted_by: granted_by(caller),
        granted_at: now_ms(),
    };
    state.consent().grant(id, &record).await?;
    let targets = record.consent.resources.iter().map(|r| r.url.clone()).collect();
    state.audit().emit(AuditEvent::admin_consent(id, targets, &record.granted_by, true));
    Ok(AdminConsentState::of(record, true))
}

/// `DELETE /v1/consent/{id}/admin-consent`: the admin withdraws it.
#[utoipa::path(delete, path = "/v1/consent/{deployment}/admin-consent", tag = "consent",
    params(("deployment" = String, Path, description = "The application's deployment id")),
    responses((status = 200, description = "Withdrawn")))]
pub async fn admin_delete(state: &AppState, caller: &Caller, id: &str) -> Result<StatusCode, ApiError> {
    let app = admin_app(state, caller, id, "admin_consent_withdraw").await?;
    if !state.consent().withdraw(id).await? {
        return Err(ApiError::not_found(&format!("admin consent of {id}")));
    }
    let targets = snapshot(&app.resource_dependencies).resources.into_iter().map(|r| r.url).collect();
    state.audit().emit(AuditEvent::admin_consent(id, targets, &granted_by(caller), false));
    Ok(StatusCode::OK)
}
