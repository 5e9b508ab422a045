//! The mint sites (SPEC §8): calls to applications through the host, each
//! handing the application a fresh per-request key.
//!
//! - `POST /openai/deployments/{id}/chat/completions` and `…/completions` →
//!   `interfaces.chat_completions`, else `endpoint`
//! - `POST /openai/deployments/{id}/embeddings` → `interfaces.embeddings`,
//!   else `endpoint`
//! - `POST /openai/deployments/{id}/responses` → `interfaces.responses`
//! - `POST /anthropic/deployments/{id}/v1/messages` → `interfaces.anthropic_messages`
//! - `POST|GET|DELETE /v1/deployments/{id}/mcp` → `mcp.endpoint`
//! - DIAL's feature endpoints: `POST /v1/{id}/rate`,
//!   `POST /v1/deployments/{id}/tokenize`, `…/truncate_prompt`,
//!   `GET /v1/deployments/{id}/configuration` → `features.<name>_endpoint`
//!   (a key of the application's own reach: no attachments, no dependencies)
//!
//! `{id}` is a configuration name or `applications/{bucket}/{path}`. A call:
//! resolve the deployment (404 unknown, 403 not callable: `user_roles`, a
//! stored definition the caller cannot read, or a key calling an
//! application not `accessible_by_per_request_key`) → bound the chain (an
//! application calling on: at most `per_request_key.max_chain_depth` deep)
//! → read the body (bounded) → for the LLM APIs, every attachment must be
//! readable by the caller (403 before the application is contacted; at most
//! `proxy.max_attachments`), then the definition's `defaults` are merged in
//! → mint the key (its grants: the attachments, the dependencies, what the
//! calling application passed on to this one; it carries the originating
//! user, the trace id and the execution path, extended when an application
//! calls on, and never outlives the key of the application calling on) →
//! forward with the host's `X-DIAL-*` headers and relay ([`crate::proxy`]);
//! an application calling on gets the attachments of the answer granted
//! to its key as the answer passes. The call itself is `mint.rs`'s.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::value::RawValue;

use super::error::{ApiError, Dialect};
use super::mint::{Incoming, Reader, answer, decode_id, resolve};
use super::state::AppState;
use crate::apps::{Api, Application, FeaturesData};
use crate::auth::Caller;

/// `POST /openai/deployments/{id}/chat/completions` (and `…/completions`,
/// `…/embeddings`, `…/responses`).
#[utoipa::path(post, path = "/openai/deployments/{deployment}/chat/completions", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "The OpenAI request, forwarded with a per-request key (the definition's defaults merged in)"),
    responses((status = 200, description = "The application's answer, streamed as it comes (JSON or SSE); errors the host answers itself are OpenAI error objects", body = Object)))]
pub async fn openai(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rest = super::respond::raw_path(&uri, "/openai/deployments/");
    let Some((id, api)) = openai_api(rest) else {
        return Dialect::OpenAi.render(no_route(&uri));
    };
    let id = id.to_string();
    answer(&state, caller, &id, api, Incoming { uri, method, headers, body }).await
}

/// The deployment id and API of a path under `/openai/deployments/`.
fn openai_api(rest: &str) -> Option<(&str, Api)> {
    [
        ("/chat/completions", Api::ChatCompletions),
        ("/completions", Api::Completions),
        ("/embeddings", Api::Embeddings),
        ("/responses", Api::Responses),
    ]
    .into_iter()
    .find_map(|(suffix, api)| Some((rest.strip_suffix(suffix)?, api)))
}

/// `POST /anthropic/deployments/{id}/v1/messages`
#[utoipa::path(post, path = "/anthropic/deployments/{deployment}/v1/messages", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "The Anthropic Messages request, forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer, streamed as it comes (JSON or SSE); errors the host answers itself are Anthropic error objects", body = Object)))]
pub async fn anthropic(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rest = super::respond::raw_path(&uri, "/anthropic/deployments/");
    let Some(id) = rest.strip_suffix("/v1/messages").map(str::to_string) else {
        return Dialect::Anthropic.render(no_route(&uri));
    };
    answer(&state, caller, &id, Api::AnthropicMessages, Incoming { uri, method, headers, body }).await
}

/// Everything under `/v1/deployments/`: MCP, and DIAL's feature endpoints.
pub async fn v1_deployment(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rest = super::respond::raw_path(&uri, "/v1/deployments/").to_string();
    let incoming = Incoming { uri, method, headers, body };
    if let Some(id) = rest.strip_suffix("/mcp") {
        return mcp(&state, caller, id, incoming).await;
    }
    let features: [(&str, Api, Method); 3] = [
        ("/tokenize", Api::Tokenize, Method::POST),
        ("/truncate_prompt", Api::TruncatePrompt, Method::POST),
        ("/configuration", Api::Configuration, Method::GET),
    ];
    for (suffix, api, allowed) in features {
        let Some(id) = rest.strip_suffix(suffix) else { continue };
        if incoming.method != allowed {
            let refused = format!("{} takes {allowed}", incoming.uri.path());
            return Dialect::OpenAi.render(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, refused).permanent());
        }
        return match api {
            Api::Tokenize => tokenize(&state, caller, id, incoming).await,
            Api::TruncatePrompt => truncate_prompt(&state, caller, id, incoming).await,
            _ => configuration(&state, caller, id, incoming).await,
        };
    }
    Dialect::JsonRpc { id: None }.render(no_route(&incoming.uri))
}

/// `POST|GET|DELETE /v1/deployments/{id}/mcp` (MCP streamable HTTP).
#[utoipa::path(method(post, get, delete), path = "/v1/deployments/{deployment}/mcp", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "POST: a JSON-RPC message of MCP's streamable HTTP transport"),
    responses((status = 200, description = "The MCP server's answer (JSON or an SSE stream); errors the host answers itself are JSON-RPC errors", body = Object)))]
async fn mcp(state: &AppState, caller: Result<Caller, ApiError>, id: &str, incoming: Incoming) -> Response {
    answer(state, caller, id, Api::Mcp, incoming).await
}

/// `POST /v1/deployments/{id}/tokenize` → `features.tokenize_endpoint`.
#[utoipa::path(post, path = "/v1/deployments/{deployment}/tokenize", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "DIAL's tokenize request, forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer; errors the host answers itself are OpenAI error objects", body = Object)))]
async fn tokenize(state: &AppState, caller: Result<Caller, ApiError>, id: &str, incoming: Incoming) -> Response {
    answer(state, caller, id, Api::Tokenize, incoming).await
}

/// `POST /v1/deployments/{id}/truncate_prompt` → `features.truncate_prompt_endpoint`.
#[utoipa::path(post, path = "/v1/deployments/{deployment}/truncate_prompt", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "DIAL's truncate_prompt request, forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer; errors the host answers itself are OpenAI error objects", body = Object)))]
async fn truncate_prompt(state: &AppState, caller: Result<Caller, ApiError>, id: &str, incoming: Incoming) -> Response {
    answer(state, caller, id, Api::TruncatePrompt, incoming).await
}

/// `GET /v1/deployments/{id}/configuration` → `features.configuration_endpoint`.
#[utoipa::path(get, path = "/v1/deployments/{deployment}/configuration", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    responses((status = 200, description = "The application's configuration schema; errors the host answers itself are OpenAI error objects", body = Object)))]
async fn configuration(state: &AppState, caller: Result<Caller, ApiError>, id: &str, incoming: Incoming) -> Response {
    answer(state, caller, id, Api::Configuration, incoming).await
}

/// `POST /v1/{id}/rate` → `features.rate_endpoint` (a stored application's
/// `/v1/applications/{bucket}/{path}/rate` arrives here too).
#[utoipa::path(post, path = "/v1/{deployment}/rate", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "DIAL's rate request (`{\"responseId\", \"rate\"}`), forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer; errors the host answers itself are OpenAI error objects", body = Object)))]
pub async fn rate(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(id) = super::respond::raw_path(&uri, "/v1/").strip_suffix("/rate").map(str::to_string) else {
        return Dialect::OpenAi.render(no_route(&uri));
    };
    answer(&state, caller, &id, Api::Rate, Incoming { uri, method, headers, body }).await
}

/// `GET /openai/deployments`: the applications the caller may call, as
/// DIAL lists deployments (what EPAM's `aidial-client` parses).
#[utoipa::path(get, path = "/openai/deployments", tag = "deployments",
    responses((status = 200, description = "The configured applications the caller may call", body = DeploymentList)))]
pub async fn list_deployments(State(state): State<AppState>, caller: Result<Caller, ApiError>) -> Response {
    listing(&state, caller, Listed::Deployment)
}

/// `GET /openai/applications`: the same, as DIAL lists applications.
#[utoipa::path(get, path = "/openai/applications", tag = "deployments",
    responses((status = 200, description = "The configured applications the caller may call", body = DeploymentList)))]
pub async fn list_applications(State(state): State<AppState>, caller: Result<Caller, ApiError>) -> Response {
    listing(&state, caller, Listed::Application)
}

/// `GET /openai/deployments/{id}`: one application the caller may call.
#[utoipa::path(get, path = "/openai/deployments/{deployment}", tag = "deployments",
    params(("deployment" = String, Path, description = "The application's deployment id")),
    responses((status = 200, description = "The application as a deployment", body = DeploymentInfo)))]
pub async fn get_deployment(State(state): State<AppState>, caller: Result<Caller, ApiError>, uri: Uri) -> Response {
    let id = super::respond::raw_path(&uri, "/openai/deployments/");
    if openai_api(id).is_some() {
        let refused = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("{} takes POST", uri.path()));
        return Dialect::OpenAi.render(refused.permanent());
    }
    describe(&state, caller, id, Listed::Deployment).await
}

/// `GET /openai/applications/{id}`: one application the caller may call,
/// with its `application_properties` (aidial-sdk's
/// `request_dial_application_properties()` reads them here).
#[utoipa::path(get, path = "/openai/applications/{application}", tag = "deployments",
    params(("application" = String, Path, description = "The application's deployment id")),
    responses((status = 200, description = "The application", body = DeploymentInfo)))]
pub async fn get_application(State(state): State<AppState>, caller: Result<Caller, ApiError>, uri: Uri) -> Response {
    let id = super::respond::raw_path(&uri, "/openai/applications/").to_string();
    describe(&state, caller, &id, Listed::Application).await
}

/// One name of `GET /v1/deployment-names`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct DeploymentName {
    id: String,
    /// `application`: every deployment the host serves is one.
    object: &'static str,
}

/// `?type=model,application,toolset`: the kinds listed (all when absent).
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NamesQuery {
    #[serde(rename = "type")]
    kinds: Option<String>,
}

/// `GET /v1/deployment-names`: the ids of the deployments the caller may
/// call, as DIAL names them (`[{"id", "object"}]`); the host's are all
/// applications, so `type` without `application` lists none.
#[utoipa::path(get, path = "/v1/deployment-names", tag = "deployments", params(NamesQuery),
    responses((status = 200, description = "The deployments the caller may call", body = Vec<DeploymentName>)))]
pub async fn deployment_names(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Query(query): axum::extract::Query<NamesQuery>,
) -> axum::Json<Vec<DeploymentName>> {
    let wanted = query.kinds.as_deref().is_none_or(|kinds| kinds.split(',').any(|kind| kind.trim() == "application"));
    let names = state
        .apps()
        .all()
        .filter(|(_, app)| wanted && app.admits(&caller.roles))
        .map(|(id, _)| DeploymentName { id: id.clone(), object: "application" })
        .collect();
    axum::Json(names)
}

/// How a listing names what it lists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listed {
    Deployment,
    Application,
}

/// DIAL's listing shape of a deployment (`DeploymentData`, `ApplicationData`).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct DeploymentInfo {
    id: String,
    /// `deployment` or `application`.
    object: &'static str,
    /// Under `/openai/deployments`: the deployment id.
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    /// Under `/openai/applications`: the deployment id.
    #[serde(skip_serializing_if = "Option::is_none")]
    application: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icon_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reference: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description_keywords: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_attachment_types: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_input_attachments: Option<u64>,
    owner: &'static str,
    status: &'static str,
    /// Epoch seconds (DIAL's fixed value for configured deployments, or the
    /// definition's `created_at`).
    created_at: i64,
    updated_at: i64,
    features: FeaturesData,
    /// What is merged into a request where the client left a field unset.
    #[schema(value_type = Object)]
    defaults: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    responses_defaults: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    application_type_schema_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    application_properties: Option<Box<RawValue>>,
}

/// `{"object": "list", "data": [...]}`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct DeploymentList {
    object: &'static str,
    data: Vec<DeploymentInfo>,
}

/// DIAL Core's `createdAt`/`updatedAt` for deployments it lists from its config.
const DIAL_LISTED_AT: i64 = 1_672_534_800;

impl DeploymentInfo {
    fn of(id: &str, app: &Application, listed: Listed) -> Self {
        let seconds = |ms: Option<i64>| ms.map_or(DIAL_LISTED_AT, |ms| ms / 1000);
        Self {
            id: id.to_string(),
            object: match listed {
                Listed::Deployment => "deployment",
                Listed::Application => "application",
            },
            model: (listed == Listed::Deployment).then(|| id.to_string()),
            application: (listed == Listed::Application).then(|| id.to_string()),
            display_name: app.display_name.clone(),
            display_version: app.display_version.clone(),
            icon_url: app.icon_url.clone(),
            description: app.description.clone(),
            reference: app.reference.clone(),
            author: app.author.clone(),
            description_keywords: app.description_keywords.clone(),
            input_attachment_types: app.input_attachment_types.clone(),
            max_input_attachments: app.max_input_attachments,
            owner: "organization-owner",
            status: "succeeded",
            created_at: seconds(app.created_at),
            updated_at: seconds(app.updated_at.or(app.created_at)),
            features: app.features_data(),
            defaults: app.defaults.clone().unwrap_or_else(|| RawValue::from_string("{}".into()).expect("JSON")),
            responses_defaults: app.responses_defaults.clone(),
            application_type_schema_id: app.application_type_schema_id.clone(),
            application_properties: app.application_properties.clone(),
        }
    }
}

fn listing(state: &AppState, caller: Result<Caller, ApiError>, listed: Listed) -> Response {
    let caller = match caller {
        Ok(caller) => caller,
        Err(error) => return Dialect::OpenAi.render(error),
    };
    let data = state
        .apps()
        .all()
        .filter(|(_, app)| app.admits(&caller.roles))
        .map(|(id, app)| DeploymentInfo::of(id, app, listed))
        .collect();
    axum::Json(DeploymentList { object: "list", data }).into_response()
}

async fn describe(state: &AppState, caller: Result<Caller, ApiError>, raw_id: &str, listed: Listed) -> Response {
    let described = async {
        let caller = caller?;
        let id = decode_id(raw_id)?;
        let deployment = resolve(state, &caller, &id, Reader::Caller).await?;
        Ok::<_, ApiError>(axum::Json(DeploymentInfo::of(&id, &deployment.application, listed)).into_response())
    };
    described.await.unwrap_or_else(|error| Dialect::OpenAi.render(error))
}

fn no_route(uri: &Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("No route: {}", uri.path()))
}
