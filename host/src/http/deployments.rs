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
use axum::response::Response;
use std::sync::Arc;

use super::AppState;
use super::catalog;
use super::error::ApiError;
use crate::access::{Permission, Resource};
use crate::apps::{Api, Application, app_id};
use crate::auth::Caller;
use crate::blobs::BlobTarget;
use crate::blobs::service::Download;
use crate::dependencies;
use crate::etag::{EtagMatch, Preconditions};
use crate::keys::{self, KeyData, KeyGrant, KeyId};
use crate::proxy::{Origin, UpstreamCall};
use crate::resource_url::{Intent, ResourceUrl};

/// `POST /openai/deployments/{id}/chat/completions|responses`
#[utoipa::path(post, path = "/openai/deployments/{deployment}/chat/completions", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "The OpenAI request, forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer, streamed as it comes (JSON or SSE)", body = Object)))]
pub async fn openai(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let rest = super::raw_path(&uri, "/openai/deployments/");
    let (id, api) = if let Some(id) = rest.strip_suffix("/chat/completions") {
        (id, Api::ChatCompletions)
    } else if let Some(id) = rest.strip_suffix("/responses") {
        (id, Api::Responses)
    } else {
        return Err(no_route(&uri));
    };
    call(&state, &caller, id, api, &uri, method, headers, body).await
}

/// `POST /anthropic/deployments/{id}/v1/messages`
#[utoipa::path(post, path = "/anthropic/deployments/{deployment}/v1/messages", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "The Anthropic Messages request, forwarded with a per-request key"),
    responses((status = 200, description = "The application's answer, streamed as it comes (JSON or SSE)", body = Object)))]
pub async fn anthropic(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let rest = super::raw_path(&uri, "/anthropic/deployments/");
    let id = rest.strip_suffix("/v1/messages").ok_or_else(|| no_route(&uri))?;
    call(&state, &caller, id, Api::AnthropicMessages, &uri, method, headers, body).await
}

/// `POST|GET|DELETE /v1/deployments/{id}/mcp` (MCP streamable HTTP).
#[utoipa::path(method(post, get, delete), path = "/v1/deployments/{deployment}/mcp", tag = "deployments", params(("deployment" = String, Path, description = "The application's deployment id")),
    request_body(content = Object, description = "POST: a JSON-RPC message of MCP's streamable HTTP transport"),
    responses((status = 200, description = "The MCP server's answer (JSON or an SSE stream)", body = Object)))]
pub async fn mcp(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let rest = super::raw_path(&uri, "/v1/deployments/");
    let id = rest.strip_suffix("/mcp").ok_or_else(|| no_route(&uri))?;
    call(&state, &caller, id, Api::Mcp, &uri, method, headers, body).await
}

fn no_route(uri: &Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("No route: {}", uri.path()))
}

/// One call, from resolution to relay.
#[allow(clippy::too_many_arguments)]
async fn call(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    api: Api,
    uri: &Uri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
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
    })?;
    let mut url = url::Url::parse(endpoint).map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Deployment {id} has an invalid {} endpoint", api.name()),
        )
    })?;
    if let Some(query) = uri.query() {
        url.set_query(Some(query));
    }

    if api != Api::Mcp && !is_json(&headers) {
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"));
    }
    let body = read_body(body, proxy.max_request_bytes()).await?;
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
        let consented = state.consent().admin_consented(&id, declared).await?;
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
        if consented && call.key_forwarded {
            for target in &mut targets {
                if let Ok(link) = catalog::parse_link(state, target) {
                    *target = catalog::canonical(state, link).await?.key();
                }
            }
        }
        let resolved =
            dependencies::resolve(state.access(), state.buckets(), state.audit(), &call, declared, targets, consented)
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
    let call = UpstreamCall { method, url, headers, body, key, follow_redirects: api == Api::Mcp, origin, trace_id };
    Ok(match proxy.forward(call).await {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(deployment = %id, %error, detail = %error.detail(), "application call failed");
            axum::response::IntoResponse::into_response(error)
        }
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
