//! Consent routes (SPEC §9): `/v1/consent/{id}` (a user's consent to an
//! application that asks for it) and `/v1/consent/{id}/admin-consent` (an
//! admin's consent to its resource-dependency declaration). `{id}` is a
//! deployment id (a configuration name or `applications/{bucket}/{path}`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use super::deployments::{Reader, decode_id, resolve};
use super::error::ApiError;
use crate::audit::AuditEvent;
use crate::auth::Caller;
use crate::consent::{AdminConsent, granted_by, is_live, snapshot, user_document};
use crate::folders::engine::now_ms;

const ADMIN_SUFFIX: &str = "/admin-consent";

/// Which consent a path is about.
enum Subject {
    User(String),
    Admin(String),
}

fn subject(uri: &Uri) -> Result<Subject, ApiError> {
    let rest = super::raw_path(uri, "/v1/consent/");
    match rest.strip_suffix(ADMIN_SUFFIX) {
        Some(id) => Ok(Subject::Admin(decode_id(id)?)),
        None => Ok(Subject::User(decode_id(rest)?)),
    }
}

/// Admin consent is for explicit admins only: a caller holding a configured
/// admin role (no admin role configured: nobody). A per-request key never is.
fn explicit_admin(caller: &Caller) -> Result<(), ApiError> {
    if caller.is_admin && caller.per_request.is_none() {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::FORBIDDEN, "Only admins may decide admin consent"))
    }
}

/// `GET /v1/consent/{id}` (as DIAL: whether the user accepted) and
/// `GET /v1/consent/{id}/admin-consent` (tri-state: not consented; consented
/// and live; stale — the declaration changed since).
#[utoipa::path(get, path = "/v1/consent/{deployment}", tag = "consent",
    params(("deployment" = String, Path, description = "The application; `…/admin-consent` for the admin's consent (admins)")),
    responses((status = 200, description = "`{accepted}` (with the `consent` document to accept when not), or the admin \
        consent: `{consented, stale, consent, grantedBy, grantedAt}`", body = Object)))]
pub async fn get(State(state): State<AppState>, caller: Caller, uri: Uri) -> Result<Response, ApiError> {
    match subject(&uri)? {
        Subject::User(id) => {
            let app = resolve(&state, &caller, &id, Reader::Caller).await?;
            let required = app.features.consent_required == Some(true);
            if !required {
                return Ok(Json(json!({"accepted": true})).into_response());
            }
            // As DIAL: accepted → no consent body; else the document to accept.
            if state.consent().user_accepted(&caller.user_location(), &id).await? {
                return Ok(Json(json!({"accepted": true})).into_response());
            }
            Ok(Json(json!({"consent": user_document(&id), "accepted": false})).into_response())
        }
        Subject::Admin(id) => {
            explicit_admin(&caller)?;
            let app = resolve(&state, &caller, &id, Reader::Admin).await?;
            let Some(record) = state.consent().admin(&id).await? else {
                return Ok(Json(json!({"consented": false})).into_response());
            };
            let live = is_live(&record, &app.resource_dependencies);
            let mut body = serde_json::to_value(&record).expect("records serialize");
            body["consented"] = json!(live);
            body["stale"] = json!(!live);
            Ok(Json(body).into_response())
        }
    }
}

/// `POST /v1/consent/{id}` `{"consent": {…}}`: the user accepts.
/// `POST /v1/consent/{id}/admin-consent`: an admin approves the declaration
/// as it is now (400 when it declares nothing).
#[utoipa::path(post, path = "/v1/consent/{deployment}", tag = "consent",
    params(("deployment" = String, Path, description = "The application; `…/admin-consent`: an admin approves its declaration")),
    request_body(content = Object, description = "A user's `{\"consent\": {…}}`; nothing for the admin's"),
    responses((status = 200, description = "Accepted; for the admin consent, the record", body = Object)))]
pub async fn post(State(state): State<AppState>, caller: Caller, uri: Uri, bytes: Bytes) -> Result<Response, ApiError> {
    match subject(&uri)? {
        Subject::User(id) => {
            resolve(&state, &caller, &id, Reader::Caller).await?;
            let body: Value =
                serde_json::from_slice(&bytes).map_err(|_| ApiError::bad_request("Invalid request body provided"))?;
            let consent = body
                .get("consent")
                .filter(|c| !c.is_null())
                .ok_or_else(|| ApiError::bad_request("User consent is missed"))?;
            state.consent().accept(&caller.user_location(), &id, consent).await?;
            Ok(StatusCode::OK.into_response())
        }
        Subject::Admin(id) => {
            explicit_admin(&caller)?;
            let app = resolve(&state, &caller, &id, Reader::Admin).await?;
            if app.resource_dependencies.is_empty() {
                return Err(ApiError::bad_request(format!("{id} declares no resource dependencies to consent to")));
            }
            let record = AdminConsent {
                consent: snapshot(&app.resource_dependencies),
                granted_by: granted_by(&caller),
                granted_at: now_ms(),
            };
            state.consent().grant(&id, &record).await?;
            let targets = record.consent.resources.iter().map(|r| r.url.clone()).collect();
            state.audit().emit(AuditEvent::admin_consent(&id, targets, &record.granted_by, true));
            let mut body = serde_json::to_value(&record).expect("records serialize");
            body["consented"] = json!(true);
            body["stale"] = json!(false);
            Ok(Json(body).into_response())
        }
    }
}

/// `DELETE /v1/consent/{id}/admin-consent`: the admin withdraws it.
#[utoipa::path(delete, path = "/v1/consent/{deployment}", tag = "consent",
    params(("deployment" = String, Path, description = "The application, as `…/admin-consent`: an admin withdraws it")),
    responses((status = 200, description = "Withdrawn")))]
pub async fn delete(State(state): State<AppState>, caller: Caller, uri: Uri) -> Result<Response, ApiError> {
    let Subject::Admin(id) = subject(&uri)? else {
        return Err(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "A user's consent cannot be deleted here"));
    };
    explicit_admin(&caller)?;
    let app = resolve(&state, &caller, &id, Reader::Admin).await?;
    if !state.consent().withdraw(&id).await? {
        return Err(ApiError::not_found(&format!("admin consent of {id}")));
    }
    let targets = snapshot(&app.resource_dependencies).resources.into_iter().map(|r| r.url).collect();
    state.audit().emit(AuditEvent::admin_consent(&id, targets, &granted_by(&caller), false));
    Ok(StatusCode::OK.into_response())
}
