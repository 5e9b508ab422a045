//! The mint sites (SPEC §8): calls to applications through the host, each
//! handing the application a fresh per-request key.
//!
//! - `POST /openai/deployments/{id}/chat/completions` → `endpoint`
//! - `POST /openai/deployments/{id}/responses` → `interfaces.responses.endpoint`
//! - `POST /anthropic/deployments/{id}/v1/messages` → `interfaces.anthropic_messages.endpoint`
//! - `POST|GET|DELETE /v1/deployments/{id}/mcp` → `mcp.endpoint`
//!
//! `{id}` is a configuration name or `applications/{bucket}/{path}`. A call:
//! resolve the deployment (404 unknown, 403 not callable: `user_roles`, or a
//! stored definition the caller cannot read) → bound the chain (an
//! application calling on: at most `per_request_key.max_chain_depth` deep)
//! → read the body (bounded) → for the LLM APIs, every attachment must be
//! readable by the caller (403 before the application is contacted; at most
//! `proxy.max_attachments`) → mint the key (its grants: the attachments; it
//! carries the originating user, the trace id and the execution path,
//! extended when an application calls on, and never outlives the key of the
//! application calling on) → forward and relay ([`crate::proxy`]).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::AppState;
use super::catalog;
use super::error::{ApiError, Dialect};
use crate::access::{Permission, Resource};
use crate::apps::{Api, Application, app_id};
use crate::auth::Caller;
use crate::blobs::BlobTarget;
use crate::blobs::service::Download;
use crate::consent::AdminConsentStatus;
use crate::dependencies;
use crate::etag::{EtagMatch, Preconditions};
use crate::keys::{self, KeyData, KeyGrant, KeyId};
use crate::proxy::{Origin, UpstreamCall};
use crate::resource_url::{Intent, ResourceUrl};

/// `POST /openai/deployments/{id}/chat/completions|responses`
#[utoipa::path(post, path = "/openai/deployments/{deployment}/chat/completions", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "The OpenAI request, forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer, streamed as it comes (JSON or SSE); errors the host answers itself are OpenAI error objects", body = Object)))]
pub async fn openai(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rest = super::raw_path(&uri, "/openai/deployments/");
    let (id, api) = if let Some(id) = rest.strip_suffix("/chat/completions") {
        (id.to_string(), Api::ChatCompletions)
    } else if let Some(id) = rest.strip_suffix("/responses") {
        (id.to_string(), Api::Responses)
    } else {
        return Dialect::OpenAi.render(no_route(&uri));
    };
    answer(&state, caller, &id, api, Incoming { uri, method, headers, body }).await
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
    let rest = super::raw_path(&uri, "/anthropic/deployments/");
    let Some(id) = rest.strip_suffix("/v1/messages").map(str::to_string) else {
        return Dialect::Anthropic.render(no_route(&uri));
    };
    answer(&state, caller, &id, Api::AnthropicMessages, Incoming { uri, method, headers, body }).await
}

/// `POST|GET|DELETE /v1/deployments/{id}/mcp` (MCP streamable HTTP).
#[utoipa::path(method(post, get, delete), path = "/v1/deployments/{deployment}/mcp", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "POST: a JSON-RPC message of MCP's streamable HTTP transport"),
    responses((status = 200, description = "The MCP server's answer (JSON or an SSE stream); errors the host answers itself are JSON-RPC errors", body = Object)))]
pub async fn mcp(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let rest = super::raw_path(&uri, "/v1/deployments/");
    let Some(id) = rest.strip_suffix("/mcp").map(str::to_string) else {
        return Dialect::JsonRpc { id: None }.render(no_route(&uri));
    };
    answer(&state, caller, &id, Api::Mcp, Incoming { uri, method, headers, body }).await
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
    let id = super::raw_path(&uri, "/openai/deployments/");
    if id.ends_with("/chat/completions") || id.ends_with("/responses") {
        let refused = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("{} takes POST", uri.path()));
        return Dialect::OpenAi.render(refused);
    }
    describe(&state, caller, id, Listed::Deployment).await
}

/// `GET /openai/applications/{id}`: one application the caller may call.
#[utoipa::path(get, path = "/openai/applications/{application}", tag = "deployments",
    params(("application" = String, Path, description = "The application's deployment id")),
    responses((status = 200, description = "The application", body = DeploymentInfo)))]
pub async fn get_application(State(state): State<AppState>, caller: Result<Caller, ApiError>, uri: Uri) -> Response {
    let id = super::raw_path(&uri, "/openai/applications/").to_string();
    describe(&state, caller, &id, Listed::Application).await
}

/// How a listing names what it lists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listed {
    Deployment,
    Application,
}

/// DIAL's listing shape of a deployment (`DeploymentData`).
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
    owner: &'static str,
    status: &'static str,
    /// Epoch seconds (DIAL's fixed value for configured deployments).
    created_at: i64,
    updated_at: i64,
    #[schema(value_type = Object)]
    features: serde_json::Value,
    #[schema(value_type = Object)]
    defaults: serde_json::Value,
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
        let consent_required = app.features.consent_required.unwrap_or(false);
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
            owner: "organization-owner",
            status: "succeeded",
            created_at: DIAL_LISTED_AT,
            updated_at: DIAL_LISTED_AT,
            // DIAL's listing flags, at its defaults: the host forwards what
            // the client sends and supports none of the optional endpoints.
            features: serde_json::json!({
                "rate": false, "tokenize": false, "truncate_prompt": false, "configuration": false,
                "system_prompt": true, "tools": false, "seed": false, "url_attachments": false,
                "folder_attachments": false, "allow_resume": true, "accessible_by_per_request_key": true,
                "content_parts": false, "temperature": true, "addons": true, "consent_required": consent_required,
            }),
            defaults: serde_json::json!({}),
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

/// A call as it came in.
struct Incoming {
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
}

/// The answer to one call: the application's, relayed, or the host's own
/// error in the caller's dialect (an MCP error answers the request's id).
async fn answer(
    state: &AppState,
    caller: Result<Caller, ApiError>,
    raw_id: &str,
    api: Api,
    incoming: Incoming,
) -> Response {
    let mut dialect = match api {
        Api::ChatCompletions | Api::Responses => Dialect::OpenAi,
        Api::AnthropicMessages => Dialect::Anthropic,
        Api::Mcp => Dialect::JsonRpc { id: None },
    };
    let Incoming { uri, method, headers, body } = incoming;
    let outcome = async {
        let caller = caller?;
        let body = read_body(body, state.proxy().max_request_bytes()).await?;
        if api == Api::Mcp {
            dialect = Dialect::JsonRpc { id: rpc_id(&body) };
        }
        call(state, &caller, raw_id, api, &dialect, Outgoing { uri, method, headers, body }).await
    }
    .await;
    let mut response = outcome.unwrap_or_else(|error| dialect.render(error));
    if let Ok(id) = decode_id(raw_id) {
        response.extensions_mut().insert(crate::metrics::http::Deployment(id));
    }
    response
}

/// The `id` of a JSON-RPC request (none for a notification, a batch, or a
/// body that is not one).
fn rpc_id(body: &[u8]) -> Option<Box<serde_json::value::RawValue>> {
    #[derive(serde::Deserialize)]
    struct Request {
        id: Option<Box<serde_json::value::RawValue>>,
    }
    serde_json::from_slice::<Request>(body).ok()?.id
}

/// A call's request, its body read.
struct Outgoing {
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
}

/// One call, from resolution to relay.
async fn call(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    api: Api,
    dialect: &Dialect,
    outgoing: Outgoing,
) -> Result<Response, ApiError> {
    let Outgoing { uri, method, headers, body } = outgoing;
    let id = decode_id(raw_id)?;
    let proxy = state.proxy();
    // The chain so far: an application calling on goes one level deeper.
    let execution_path = execution_path(caller, &id);
    let depth = execution_path.len() - 1;
    if depth > proxy.max_chain_depth() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "The call chain is too deep: {id} would be application {depth} of a chain allowed {} \
                 (per_request_key.max_chain_depth)",
                proxy.max_chain_depth()
            ),
        ));
    }
    let Deployment { application, origin } = resolve(state, caller, &id, Reader::Caller).await?;
    let endpoint = application.endpoint_for(api).ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("Deployment {id} has no {} endpoint", api.name()))
            .permanent()
    })?;
    let mut url = url::Url::parse(endpoint).map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Deployment {id} has an invalid {} endpoint", api.name()),
        )
        .permanent()
    })?;
    if let Some(query) = uri.query() {
        url.set_query(Some(query));
    }

    if api != Api::Mcp && !is_json(&headers) {
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"));
    }
    let mut grants = if api == Api::Mcp { Vec::new() } else { attachment_grants(state, caller, api, &body).await? };

    // The originating user as themselves: what they accepted and what they
    // can reach on their own, never what a calling application's key holds
    // (and never admin rights, which no key carries).
    let user = Caller { per_request: None, is_admin: false, ..caller.clone() };
    if application.features.consent_required == Some(true)
        && !state.consent().user_accepted(&user.user_location(), &id).await?
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("User didn't accept consent to call the deployment: {id}"),
        ));
    }
    let trace_id = caller.per_request.as_ref().map_or_else(new_trace_id, |key| key.trace_id.clone());
    if !application.resource_dependencies.is_empty() {
        let declared = &application.resource_dependencies;
        let consent = state.consent().admin_status(&id, declared).await?;
        let source = caller.per_request.as_ref().map_or("root", |key| key.app.as_str());
        let call = dependencies::Call {
            deployment: &id,
            user: &user,
            source_deployment: source,
            trace_id: &trace_id,
            key_forwarded: application.forwards_key(api),
        };
        // Keyed as grants key links: a v2 resource declared as `…/x/` is
        // `…/x` (a marker read for such targets only, and only when the call
        // can be granted anything). A target that is no link stays as
        // declared, for `resolve` to refuse with its reason.
        let mut targets = dependencies::targets(state.buckets(), &user, declared);
        if consent == AdminConsentStatus::Live && call.key_forwarded {
            for target in &mut targets {
                if let Ok(link) = catalog::parse_link(state, target) {
                    *target = catalog::canonical(state, link).await?.key();
                }
            }
        }
        let resolved =
            dependencies::resolve(state.access(), state.buckets(), state.audit(), &call, declared, targets, consent)
                .await
                .map_err(|failed| ApiError::new(StatusCode::FORBIDDEN, failed.to_string()))?;
        grants.extend(resolved);
    }

    let key = match application.forwards_key(api) {
        false => None,
        true => {
            // A callee's key never outlives its caller's.
            let mut expires_at = keys::expiry(proxy.key_ttl());
            if let Some(calling) = &caller.per_request {
                expires_at = expires_at.min(calling.expires_at);
            }
            let data = KeyData {
                id: KeyId::default(),
                user: caller.originator(),
                app: id.clone(),
                app_id: app_id(&id),
                execution_path,
                trace_id: trace_id.clone(),
                grants,
                expires_at,
            };
            Some(state.keys().mint(data).await.map_err(key_store_unavailable)?)
        }
    };
    let stream_failure = dialect.stream_error(&format!(
        "The application {id} stopped answering for {} ms; the answer is incomplete",
        proxy.read_timeout_ms()
    ));
    let call = UpstreamCall {
        method,
        url,
        headers,
        body,
        key,
        follow_redirects: api == Api::Mcp,
        origin,
        trace_id,
        deployment: id.clone(),
        interface: api.label(),
        stream_failure,
    };
    proxy.forward(call).await.map_err(|error| {
        tracing::warn!(deployment = %id, %error, detail = %error.detail(), "application call failed");
        ApiError::from(error)
    })
}

/// A deployment id from a request path (percent-decoded).
pub(super) fn decode_id(raw_id: &str) -> Result<String, ApiError> {
    percent_encoding::percent_decode_str(raw_id)
        .decode_utf8()
        .map(|id| id.into_owned())
        .map_err(|_| ApiError::not_found(&format!("Unknown application: {raw_id}")))
}

/// Who a resolution is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reader {
    /// A caller of the application: `user_roles` and READ on a stored
    /// definition apply.
    Caller,
    /// An admin deciding on consent, who must see any definition.
    Admin,
}

/// An application a deployment id names, and who chose its endpoint.
pub(super) struct Deployment {
    pub application: Arc<Application>,
    pub origin: Origin,
}

/// The application a deployment id names, if the caller may call it: a
/// configuration application or a stored definition the caller can read,
/// whose `user_roles` admit the caller. A stored definition is read at most
/// `resources.max_size` and parsed once per etag.
pub(super) async fn resolve(
    state: &AppState,
    caller: &Caller,
    id: &str,
    reader: Reader,
) -> Result<Deployment, ApiError> {
    let (application, origin) = match state.apps().get(id) {
        Some(app) => (app, Origin::Configured),
        None => (stored(state, caller, id, reader).await?, Origin::Stored),
    };
    if reader == Reader::Caller && !application.admits(&caller.roles) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, format!("Forbidden deployment: {id}")));
    }
    Ok(Deployment { application, origin })
}

/// A stored definition (`applications/{bucket}/{path}`).
async fn stored(state: &AppState, caller: &Caller, id: &str, reader: Reader) -> Result<Arc<Application>, ApiError> {
    let unknown = || ApiError::not_found(&format!("Unknown application: {id}"));
    if !id.starts_with("applications/") || id.ends_with('/') {
        return Err(unknown());
    }
    let encoded: Vec<String> = id
        .split('/')
        .map(|segment| percent_encoding::utf8_percent_encode(segment, crate::resource_url::SEGMENT_ESCAPES).to_string())
        .collect();
    let url = ResourceUrl::parse(&encoded.join("/"), Intent::Read).map_err(|_| unknown())?;
    let location = state.buckets().decode(url.bucket()).map_err(|_| unknown())?;
    if reader == Reader::Caller {
        state.access().check(caller, Resource { url: &url, location: &location }, Permission::Read).await?;
    }
    let cache_key = url.to_string();
    let cached = state.definitions().get(&cache_key);
    let conditions = Preconditions {
        if_match: None,
        if_none_match: cached.as_ref().map(|(etag, _)| EtagMatch::Tags(vec![etag.clone()])),
    };
    let target = BlobTarget::new(url, location).map_err(|_| unknown())?;
    let (etag, content) = match state.blobs().download(&target, &conditions).await {
        Ok(Download::Content { meta, body }) => (meta.etag, body),
        Ok(Download::NotModified(_)) => return Ok(cached.expect("If-None-Match is sent only with a cached etag").1),
        Err(crate::blobs::BlobError::NotFound(_)) => return Err(unknown()),
        Err(error) => return Err(error.into()),
    };
    let bytes = read_stream(content, state.blobs().limits().max_size).await?;
    let app = Application::from_stored(&bytes).map_err(|why| {
        tracing::error!(deployment = id, why, "stored application definition");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("The definition of {id} cannot be read"))
    })?;
    let app = Arc::new(app);
    state.definitions().insert(cache_key, etag, app.clone());
    Ok(app)
}

/// READ grants for the request's attachments; one the caller cannot read
/// fails the whole call before the application is contacted (the first such
/// stops the check). The body is scanned for links without building a tree
/// of it, and at most `proxy.max_attachments` are taken (400 beyond).
async fn attachment_grants(
    state: &AppState,
    caller: &Caller,
    api: Api,
    body: &Bytes,
) -> Result<Vec<KeyGrant>, ApiError> {
    let urls =
        state.proxy().attachments(api, body.clone()).await.map_err(|error| ApiError::bad_request(error.to_string()))?;
    let mut grants = Vec::with_capacity(urls.len());
    for url in urls {
        let denied = || ApiError::new(StatusCode::FORBIDDEN, format!("Access denied to the file {url}"));
        let link = catalog::parse_link(state, &url).map_err(|_| denied())?;
        let link = catalog::canonical(state, link).await?;
        let resource = Resource { url: &link.url, location: &link.location };
        if !state.access().permissions(caller, resource).await?.read {
            return Err(denied());
        }
        grants.push(KeyGrant { url: link.key(), read: true, write: false });
    }
    Ok(grants)
}

/// The callee's place in the chain: the caller's path (for an application
/// calling on, the path its key carries; for the root call, who made it),
/// then the callee.
fn execution_path(caller: &Caller, deployment: &str) -> Vec<String> {
    let mut path = match &caller.per_request {
        Some(key) => key.execution_path.clone(),
        None => vec![caller.author_name()],
    };
    path.push(deployment.to_string());
    path
}

fn new_trace_id() -> String {
    let mut bytes = [0u8; 16];
    rand::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.to_ascii_lowercase().contains("application/json"))
}

fn key_store_unavailable(error: keys::KeyStoreError) -> ApiError {
    tracing::error!(%error, "minting a per-request key");
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "The key store (Redis) is unavailable; retry")
}

/// The request body, whole, up to `max` bytes (413 above).
async fn read_body(body: Body, max: u64) -> Result<Bytes, ApiError> {
    read_stream(body.into_data_stream(), max).await
}

async fn read_stream<S, E>(mut stream: S, max: u64) -> Result<Bytes, ApiError>
where
    S: futures_util::Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    let mut bytes = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("Failed to read the request body: {e}")))?;
        if (bytes.len() + chunk.len()) as u64 > max {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("The request body exceeds the limit of {max} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.freeze())
}
