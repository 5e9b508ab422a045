//! One call to an application, from resolution to relay: the deployment
//! resolved and checked, the body read (bounded), attachments and
//! dependencies resolved into the grants of a fresh per-request key, the
//! host's `X-DIAL-*` headers asserted, the answer relayed (and, for an
//! application calling on, the attachments of the answer granted to its
//! key as it passes). The routes of `deployments.rs` hand their calls here.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::error::{ApiError, Dialect};
use super::state::AppState;
use crate::access::{Permission, Resource, StateRead};
use crate::apps::{Api, Application, app_id};
use crate::auth::Caller;
use crate::blobs::BlobTarget;
use crate::blobs::service::Download;
use crate::consent::AdminConsentStatus;
use crate::dependencies;
use crate::etag::{EtagMatch, Preconditions};
use crate::keys::{self, Changed, KeyChange, KeyData, KeyGrant, KeyId};
use crate::proxy::answers::{AnswerLinks, Grant};
use crate::proxy::{Origin, UpstreamCall};
use crate::resource_url::{Intent, ResourceUrl};

/// A call as it came in.
pub(super) struct Incoming {
    pub(super) uri: Uri,
    pub(super) method: Method,
    pub(super) headers: HeaderMap,
    pub(super) body: Body,
}

/// The answer to one call: the application's, relayed, or the host's own
/// error in the caller's dialect (an MCP error answers the request's id).
pub(super) async fn answer(
    state: &AppState,
    caller: Result<Caller, ApiError>,
    raw_id: &str,
    api: Api,
    incoming: Incoming,
) -> Response {
    let mut dialect = match api {
        Api::AnthropicMessages => Dialect::Anthropic,
        Api::Mcp => Dialect::JsonRpc { id: None },
        _ => Dialect::OpenAi,
    };
    // A 401 on an MCP endpoint says where to sign in (RFC 9728).
    let challenge =
        if api == Api::Mcp { super::oauth::challenge(&incoming.headers, incoming.uri.path()) } else { None };
    let Incoming { uri, method, headers, body } = incoming;
    let outcome = async {
        let caller = match caller {
            Ok(caller) => caller,
            // A refused MCP request still answers its own id: read (bounded)
            // as far as it takes to find it.
            Err(refused) if api == Api::Mcp => {
                if let Ok(body) = read_body(body, UNAUTHENTICATED_RPC_BYTES).await {
                    dialect = Dialect::JsonRpc { id: rpc_id(&body) };
                }
                return Err(refused);
            }
            Err(refused) => return Err(refused),
        };
        let body = read_body(body, state.proxy().max_request_bytes()).await?;
        if api == Api::Mcp {
            dialect = Dialect::JsonRpc { id: rpc_id(&body) };
        }
        call(state, &caller, raw_id, api, &dialect, Outgoing { uri, method, headers, body }).await
    }
    .await;
    let mut response = outcome.unwrap_or_else(|error| dialect.render(error));
    if response.status() == StatusCode::UNAUTHORIZED
        && let Some(challenge) = challenge
    {
        response.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, challenge);
    }
    if let Ok(id) = decode_id(raw_id) {
        response.extensions_mut().insert(super::metrics::Deployment(id));
    }
    response
}

/// What of a refused caller's MCP request is read to find its `id` (a
/// JSON-RPC request that names a tool is far smaller; the rest is drained
/// by the listener).
pub(super) const UNAUTHENTICATED_RPC_BYTES: u64 = 64 << 10;

/// The `id` of a JSON-RPC request (none for a notification, a batch, or a
/// body that is not one).
pub(super) fn rpc_id(body: &[u8]) -> Option<Box<serde_json::value::RawValue>> {
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
    if let Some(calling) = &caller.per_request
        && !application.accessible_by_per_request_key()
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("Deployment {id} is not accessible by {} (features.accessible_by_per_request_key)", calling.app),
        ));
    }
    let Some(endpoint) = application.endpoint_for(api) else {
        return match api {
            // As DIAL Core: a rating an application does not take is accepted
            // (clients rate any answer); the other features are refused.
            Api::Rate => Ok(StatusCode::OK.into_response()),
            api if api.is_feature() => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("Deployment {id} has no {} endpoint (features.{}_endpoint)", api.name(), api.label()),
            )),
            _ => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Deployment {id} has no {} endpoint", api.name()),
            )
            .permanent()),
        };
    };
    let url = endpoint.url(&canonical_path(uri.path(), raw_id, &id, api), uri.query()).map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Deployment {id} has an invalid {} endpoint", api.name()),
        )
        .permanent()
    })?;

    if api.is_llm() && !is_json(&headers) {
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"));
    }
    let mut grants = if api.is_llm() { link_grants(state, caller, api, &body).await? } else { Vec::new() };
    let body = match application.defaults_for(api) {
        Some(defaults) => proxy
            .with_defaults(body, defaults)
            .await
            .map_err(|error| ApiError::bad_request(format!("Invalid JSON body: {error}")))?,
        None => body,
    };

    // The originating user as themselves: what they accepted and what they
    // can reach on their own, never what a calling application's key holds
    // (and never admin rights, which no key carries).
    let user = Caller { per_request: None, is_admin: false, ..caller.clone() };
    if application.features.consent_required == Some(true)
        && !state.consent().user_accepted(&user.user_location(), &id, &application.resource_dependencies).await?
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("User didn't accept consent to call the deployment: {id}"),
        ));
    }
    let trace_id = caller.per_request.as_ref().map_or_else(new_trace_id, |key| key.trace_id.clone());
    // Dependencies are resolved where DIAL resolves them: the mint sites
    // that carry a conversation (LLM APIs) and MCP, not the feature endpoints.
    if !application.resource_dependencies.is_empty() && !api.is_feature() {
        let declared = &application.resource_dependencies;
        let consent = state.consent().admin_status(&id, declared).await?;
        let source = caller.per_request.as_ref().map_or("root", |key| key.app.as_str());
        let call = crate::audit::Call {
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
                if let Ok(link) = state.catalog().parse_link(target) {
                    *target = state.catalog().canonical(link).await?.key();
                }
            }
        }
        let resolved =
            dependencies::resolve(state.access(), state.buckets(), state.audit(), &call, declared, targets, consent)
                .await
                .map_err(|failed| ApiError::new(StatusCode::FORBIDDEN, failed.to_string()))?;
        grants.extend(resolved);
    }

    let mut answer_links = None;
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
                // What the calling application passed on to this one.
                received: caller.per_request.as_ref().map(|calling| calling.passed_to(&id)).unwrap_or_default(),
                passed_on: Vec::new(),
                expires_at,
                changes_taken: 0,
            };
            if let Some(calling) = &caller.per_request
                && matches!(api, Api::ChatCompletions | Api::Completions)
            {
                answer_links = Some(AnswerLinks {
                    grant: answer_grant(state, Arc::new(data.clone()), calling.id.0.clone()),
                    max: proxy.max_attachments(),
                });
            }
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
        asserted: asserted_headers(&id, &application),
        forward_authorization: application.forward_auth_token,
        answer_links,
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

/// The path a call came in at, its deployment id in the one form the host
/// names it by (as DIAL Core rewrites it before appending the path to a
/// `base_url`): `/openai/deployments/echo%2Dsdk/…` goes on as `…/echo-sdk/…`.
fn canonical_path(path: &str, raw_id: &str, id: &str, api: Api) -> String {
    let suffix_at = path.len().saturating_sub(api.path_suffix().len());
    let id_at = suffix_at.saturating_sub(raw_id.len());
    match (path.get(..id_at), path.get(suffix_at..)) {
        (Some(prefix), Some(suffix)) => format!("{prefix}{}{suffix}", encode_id(id)),
        _ => path.to_string(),
    }
}

/// A deployment id as a URL path (and header value): each segment percent-encoded.
fn encode_id(id: &str) -> String {
    let encoded: Vec<String> = id
        .split('/')
        .map(|segment| percent_encoding::utf8_percent_encode(segment, crate::resource_url::SEGMENT_ESCAPES).to_string())
        .collect();
    encoded.join("/")
}

/// `X-DIAL-APPLICATION-PROPERTIES` is left out above this size: the
/// application then reads its properties from `GET /openai/applications/{id}`
/// (aidial-sdk does), instead of a header servers would refuse.
const MAX_PROPERTIES_HEADER: usize = 16 << 10;

/// The headers the host asserts to an application (a client's values of
/// them are dropped): its features, always; its id when it has a schema or
/// properties, and its properties (compact JSON, ASCII-escaped).
fn asserted_headers(id: &str, application: &Application) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    let features = serde_json::to_string(&application.features_data()).expect("features serialize");
    put("x-dial-deployment-features", ascii_json(&features));
    if application.announces_itself() {
        put("x-dial-application-id", encode_id(id));
    }
    if let Some(properties) = &application.application_properties {
        let json = ascii_json(properties.get());
        if json.len() <= MAX_PROPERTIES_HEADER {
            put("x-dial-application-properties", json);
        } else {
            tracing::info!(deployment = id, bytes = json.len(), "application properties too large for a header");
        }
    }
    headers
}

/// JSON text with every non-ASCII character escaped (`\u00e9`): still the
/// same JSON, and a valid header value.
fn ascii_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Grants the calling application's key READ on each attachment of the
/// callee's answer the callee's key could read (as DIAL Core does): how a
/// file an application produced in its appdata reaches its caller. Every
/// use stays bounded by the originating user's reach.
fn answer_grant(state: &AppState, callee: Arc<KeyData>, calling_key: String) -> Grant {
    let state = state.clone();
    Arc::new(move |links: Vec<String>| {
        let (state, callee, calling_key) = (state.clone(), callee.clone(), calling_key.clone());
        Box::pin(async move {
            let reader = Caller::for_key(callee.clone());
            let mut changes = Vec::new();
            let mut access_state = StateRead::default();
            for url in links {
                let Ok(link) = state.catalog().parse_link(&url) else { continue };
                let Ok(link) = state.catalog().canonical(link).await else { continue };
                let resource = Resource { url: &link.url, location: &link.location };
                match state.access().permissions_within(&reader, resource, &mut access_state).await {
                    Ok(held) if held.read => {
                        changes.push(KeyChange::Grant { url: link.key(), read: true, write: false })
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(deployment = %callee.app, %error, "an answer's attachment"),
                }
            }
            match state.keys().change(&calling_key, changes).await {
                Ok(Changed::Applied | Changed::Gone) => {}
                Ok(Changed::Full) => {
                    tracing::warn!(deployment = %callee.app, "the calling key took all the changes it may; an answer's attachments were not granted")
                }
                Err(error) => tracing::warn!(deployment = %callee.app, %error, "granting an answer's attachments"),
            }
        })
    })
}

/// A deployment id from a request path (percent-decoded).
pub(crate) fn decode_id(raw_id: &str) -> Result<String, ApiError> {
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
/// `proxy.max_definition_bytes` and parsed once per etag.
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
    let url = ResourceUrl::parse(&encode_id(id), Intent::Read).map_err(|_| unknown())?;
    let location = state.buckets().decode(url.bucket()).map_err(|_| unknown())?;
    if reader == Reader::Caller {
        state.access().check(caller, Resource { url: &url, location: &location }, Permission::Read).await?;
    }
    let target = BlobTarget::new(url, location).map_err(|_| unknown())?;
    let cache_key = target.url.to_string();
    let definitions = state.definitions();
    // A definition not parsed yet (or changed) is loaded by one caller at a
    // time: the others wait, then read it conditionally and find it parsed.
    let mut turn = None;
    loop {
        let cached = definitions.get(&cache_key);
        let conditions = Preconditions {
            if_match: None,
            if_none_match: cached.as_ref().map(|(etag, _)| EtagMatch::Tags(vec![etag.clone()])),
        };
        let (meta, content) = match state.blobs().download(&target, &conditions).await {
            Ok(Download::Content { meta, body }) => (meta, body),
            Ok(Download::NotModified(_)) => {
                return Ok(cached.expect("If-None-Match is sent only with a cached etag").1);
            }
            Err(crate::blobs::BlobError::NotFound(_)) => return Err(unknown()),
            Err(error) => return Err(error.into()),
        };
        if turn.is_none() {
            drop(content);
            turn = Some(definitions.loading(&cache_key).await);
            continue;
        }
        let max = state.proxy().max_definition_bytes();
        if meta.content_length > max {
            tracing::error!(
                deployment = id,
                bytes = meta.content_length,
                max,
                "stored application definition too large"
            );
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "The definition of {id} is {} bytes, over the {max} a call reads (proxy.max_definition_bytes)",
                    meta.content_length
                ),
            ));
        }
        let _budget = definitions.reserve(meta.content_length).await;
        let bytes = read_stream(content, max).await?;
        let app = Application::from_stored(&bytes).map_err(|why| {
            tracing::error!(deployment = id, why, "stored application definition");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("The definition of {id} cannot be read"))
        })?;
        let app = Arc::new(app);
        definitions.insert(cache_key, meta.etag, app.clone(), bytes.len());
        return Ok(app);
    }
}

/// READ grants for the request's attachments and for the skills its
/// messages picked; one the caller cannot read fails the whole call before
/// the application is contacted (the first such stops the check). The body
/// is scanned for links without building a tree of it, and at most
/// `proxy.max_attachments` are taken (400 beyond).
async fn link_grants(state: &AppState, caller: &Caller, api: Api, body: &Bytes) -> Result<Vec<KeyGrant>, ApiError> {
    let links =
        state.proxy().attachments(api, body.clone()).await.map_err(|error| ApiError::bad_request(error.to_string()))?;
    let mut grants = Vec::with_capacity(links.attachments.len() + links.skills.len());
    // One read of the access state (each owner's shares, the public rules)
    // decides every link of the call.
    let mut access_state = StateRead::default();
    for url in links.attachments {
        let denied = || ApiError::new(StatusCode::FORBIDDEN, format!("Access denied to the file {url}"));
        let link = state.catalog().parse_link(&url).map_err(|_| denied())?;
        let link = state.catalog().canonical(link).await?;
        let resource = Resource { url: &link.url, location: &link.location };
        if !state.access().permissions_within(caller, resource, &mut access_state).await?.read {
            return Err(denied());
        }
        grants.push(KeyGrant { url: link.key(), read: true, write: false });
    }
    for url in links.skills {
        if let Some(grant) = skill_grant(state, caller, &url, &mut access_state).await? {
            grants.push(grant);
        }
    }
    Ok(grants)
}

/// A skill picked for a message, as DIAL Core takes it (#1956): what is
/// not a skill resource is a 400, one the caller cannot read a 403 (before
/// anything else is said of it); a public one needs no grant (the key
/// reads `public` as its user does); any other gets READ on the skill —
/// its files included — for the called application's key.
async fn skill_grant(
    state: &AppState,
    caller: &Caller,
    url: &str,
    access_state: &mut StateRead,
) -> Result<Option<KeyGrant>, ApiError> {
    let not_a_skill = || ApiError::bad_request(format!("{url} is not a SKILL resource"));
    let link = state.catalog().parse_link(url).map_err(|_| not_a_skill())?;
    if link.kind.resource_type() != SKILL_RESOURCE_TYPE {
        return Err(not_a_skill());
    }
    let link = state.catalog().canonical(link).await?;
    let resource = Resource { url: &link.url, location: &link.location };
    if !state.access().permissions_within(caller, resource, access_state).await?.read {
        return Err(ApiError::new(StatusCode::FORBIDDEN, format!("Access denied to the skill {url}")));
    }
    if link.url.is_folder() || !state.catalog().exists(&link).await? {
        return Err(not_a_skill());
    }
    Ok((!link.url.is_public()).then(|| KeyGrant { url: link.key(), read: true, write: false }))
}

/// DIAL's `resourceType` of the skills a message may pick.
const SKILL_RESOURCE_TYPE: &str = "SKILL";

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

/// The trace of a call chain's first call: the request's own when traces
/// are on (so the audit and the exported spans name one trace), else new.
fn new_trace_id() -> String {
    if let Some(traced) = crate::telemetry::trace_id() {
        return traced;
    }
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
pub(super) async fn read_body(body: Body, max: u64) -> Result<Bytes, ApiError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_an_application_gets_names_the_deployment_as_the_host_does() {
        let path = |raw: &str, raw_id: &str, id: &str, api| canonical_path(raw, raw_id, id, api);
        assert_eq!(
            path("/openai/deployments/echo%2Dsdk/chat/completions", "echo%2Dsdk", "echo-sdk", Api::ChatCompletions),
            "/openai/deployments/echo-sdk/chat/completions"
        );
        assert_eq!(
            path(
                "/openai/deployments/applications/B/my%20app/completions",
                "applications/B/my%20app",
                "applications/B/my app",
                Api::Completions
            ),
            "/openai/deployments/applications/B/my%20app/completions"
        );
        assert_eq!(
            path(
                "/anthropic/deployments/completions/v1/messages",
                "completions",
                "completions",
                Api::AnthropicMessages
            ),
            "/anthropic/deployments/completions/v1/messages"
        );
        assert_eq!(ascii_json(r#"{"a":"é😀"}"#), r#"{"a":"\u00e9\ud83d\ude00"}"#);
    }
}
