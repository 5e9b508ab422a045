//! `POST /v1/skills/mcp`: the skills the caller can read, served to agents
//! over MCP's Streamable HTTP transport with the Skills Extension
//! (SEP-2640, `io.modelcontextprotocol/skills`). Stateless: the 2026-07-28
//! protocol (each request names its version in `_meta`; `server/discover`)
//! and the older `initialize` handshake are both answered, each request on
//! its own, in plain JSON (no session, no event stream: GET and DELETE are
//! 405).
//!
//! Every file is a resource `skill://<bucket id or public>/<path…>/<name>/<file>`;
//! `skills/list` and `skills/get` give each skill's frontmatter and every
//! file with its size and `sha256:` digest, `resources/read` its bytes,
//! `resources/directory/read` a directory's children
//! ([`crate::agent_skills`]). The same credentials as every route; a 401
//! tells the client where to sign in ([`super::oauth`]).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use percent_encoding::{percent_decode_str, utf8_percent_encode};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::error::{ApiError, Dialect};
use super::mint::{UNAUTHENTICATED_RPC_BYTES, read_body, rpc_id};
use super::oauth::with_challenge;
use super::respond::content_type_of;
use super::state::AppState;
use crate::agent_skills::{AgentSkillsError, DirectoryPage, SkillAddress, SkillEntry};
use crate::auth::Caller;
use crate::resource_url::SEGMENT_ESCAPES;

/// The stateless protocol revision.
const MODERN_VERSION: &str = "2026-07-28";
/// The revisions the `initialize` handshake negotiates, oldest first.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Where a 2026-07-28 request names its revision.
const VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The Skills Extension's identifier.
const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// A skill's instructions, the file each entry's `uri` names.
const SKILL_FILE: &str = "SKILL.md";
/// The largest request read (requests name a URI or a cursor).
const MAX_REQUEST_BYTES: u64 = 1 << 20;
const SCHEME: &str = "skill://";
/// What a directory child is typed as.
const DIRECTORY_MIME: &str = "inode/directory";

// JSON-RPC and MCP error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const RESOURCE_NOT_FOUND: i64 = -32002;
const UNSUPPORTED_VERSION: i64 = -32022;

/// `POST /v1/skills/mcp`: one JSON-RPC request (or notification).
#[utoipa::path(post, path = "/v1/skills/mcp", tag = "skills",
    request_body(content = String, content_type = "application/json",
        description = "A JSON-RPC request: `initialize`, `server/discover`, `ping`, `skills/list`, `skills/get`, \
        `resources/list`, `resources/templates/list`, `resources/read`, `resources/directory/read`"),
    responses(
        (status = 200, description = "The JSON-RPC response (errors of the request included)", body = String,
            content_type = "application/json"),
        (status = 202, description = "A notification, accepted"),
        (status = 400, description = "Not a JSON-RPC request (a JSON-RPC error with a null id)"),
        (status = 401, description = "No credentials: `WWW-Authenticate` names the protected-resource metadata")))]
pub async fn mcp(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    let caller = match caller {
        Ok(caller) => caller,
        Err(refused) => {
            // A refused request still answers its own id (read bounded).
            let id = read_body(body, UNAUTHENTICATED_RPC_BYTES).await.ok().and_then(|body| rpc_id(&body));
            return with_challenge(Dialect::JsonRpc { id }.render(refused), &headers, uri.path());
        }
    };
    let body = match read_body(body, MAX_REQUEST_BYTES).await {
        Ok(body) => body,
        Err(error) => return Dialect::JsonRpc { id: None }.render(error),
    };
    let request = match parse(&body) {
        Ok(request) => request,
        Err((code, message)) => {
            return (StatusCode::BAD_REQUEST, rpc_error(None, code, &message, None)).into_response();
        }
    };
    // A notification (`notifications/initialized`, …) needs no answer.
    let Some(id) = request.id else { return StatusCode::ACCEPTED.into_response() };
    let modern = match revision(&request.params, &headers) {
        Ok(modern) => modern,
        Err(requested) => {
            let data = json!({"supported": supported_versions(), "requested": requested});
            let message = format!("Unsupported protocol version: {requested}");
            return rpc_error(Some(&id), UNSUPPORTED_VERSION, &message, Some(data)).into_response();
        }
    };
    let server = Server { state: &state, caller: &caller };
    match server.answer(&request.method, &request.params, modern).await {
        Ok(mut result) => {
            if modern && let Value::Object(fields) = &mut result {
                // The 2026-07-28 result fields, which its clients require.
                fields.insert("resultType".into(), json!("complete"));
                fields.insert("ttlMs".into(), json!(0));
                fields.insert("cacheScope".into(), json!("private"));
            }
            json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Err(Failure::Rpc { code, message }) => rpc_error(Some(&id), code, &message, None).into_response(),
        Err(Failure::Host(error)) => Dialect::JsonRpc { id: Some(id) }.render(error),
    }
}

/// GET and DELETE: no event stream and no session to end.
pub async fn not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")], "The skills MCP endpoint answers POST only")
        .into_response()
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    jsonrpc: String,
    id: Option<Box<RawValue>>,
    method: String,
    #[serde(default)]
    params: Value,
}

/// The request, or the JSON-RPC error for what is not one.
fn parse(body: &[u8]) -> Result<Request, (i64, String)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| (PARSE_ERROR, format!("Parse error: {e}")))?;
    if value.is_array() {
        return Err((INVALID_REQUEST, "Batches are not supported".into()));
    }
    // A null id is neither a request's (MCP forbids it) nor a notification's.
    if value.get("id").is_some_and(Value::is_null) {
        return Err((INVALID_REQUEST, "Invalid request: `id` must be a string or a number".into()));
    }
    let request: Request =
        serde_json::from_value(value).map_err(|e| (INVALID_REQUEST, format!("Invalid request: {e}")))?;
    if request.jsonrpc != "2.0" {
        return Err((INVALID_REQUEST, "Invalid request: `jsonrpc` must be \"2.0\"".into()));
    }
    Ok(request)
}

/// Whether the request is on the 2026-07-28 protocol (its `_meta` names
/// it; the `MCP-Protocol-Version` header stands in where `_meta` is
/// silent), or `Err` with the revision named if it is none the endpoint
/// speaks.
fn revision(params: &Value, headers: &HeaderMap) -> Result<bool, String> {
    let named = params.pointer("/_meta").and_then(|meta| meta.get(VERSION_META_KEY)).and_then(Value::as_str);
    let header = headers.get("mcp-protocol-version").and_then(|value| value.to_str().ok());
    match named {
        Some(MODERN_VERSION) => Ok(true),
        Some(other) if HANDSHAKE_VERSIONS.contains(&other) => Ok(false),
        Some(other) => Err(other.to_string()),
        None => Ok(header == Some(MODERN_VERSION)),
    }
}

fn supported_versions() -> Vec<&'static str> {
    HANDSHAKE_VERSIONS.iter().copied().chain([MODERN_VERSION]).collect()
}

fn json_response(body: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn rpc_error(id: Option<&RawValue>, code: i64, message: &str, data: Option<Value>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json_response(json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// Why a request has no result: the request's fault (a JSON-RPC error), or
/// the host's (rendered as every route renders it, with its status).
enum Failure {
    Rpc { code: i64, message: String },
    Host(ApiError),
}

impl Failure {
    fn invalid(message: impl Into<String>) -> Self {
        Self::Rpc { code: INVALID_PARAMS, message: message.into() }
    }
}

impl From<AgentSkillsError> for Failure {
    /// Every refusal of what the request named is -32602, as SEP-2640 and
    /// the 2026-07-28 protocol answer them; [`Server::answer`] gives a
    /// `resources/read` of the 2025 protocols its -32002.
    fn from(error: AgentSkillsError) -> Self {
        match error {
            AgentSkillsError::Catalog(error) => Self::Host(error.into()),
            error => Self::invalid(error.to_string()),
        }
    }
}

/// The answers of one request.
struct Server<'a> {
    state: &'a AppState,
    caller: &'a Caller,
}

impl Server<'_> {
    async fn answer(&self, method: &str, params: &Value, modern: bool) -> Result<Value, Failure> {
        let skills = self.state.agent_skills();
        match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
                let version = HANDSHAKE_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&HANDSHAKE_VERSIONS[3]);
                Ok(json!({"protocolVersion": version, "capabilities": capabilities(),
                    "serverInfo": server_info(), "instructions": INSTRUCTIONS}))
            }
            "server/discover" => Ok(json!({"supportedVersions": supported_versions(), "capabilities": capabilities(),
                "instructions": INSTRUCTIONS, "_meta": {"io.modelcontextprotocol/serverInfo": server_info()}})),
            "ping" => Ok(json!({})),
            "skills/list" => {
                let page = skills.list(self.caller, cursor(params)?).await?;
                let entries: Vec<Value> = page.skills.iter().map(entry_json).collect();
                Ok(paged(json!({"skills": entries}), page.next_cursor))
            }
            "skills/get" => {
                let uri = uri_param(params)?;
                let unknown = || Failure::invalid(format!("Unknown skill: {uri}"));
                let mut address = parse_uri(uri).ok_or_else(unknown)?;
                if address.segments.pop().as_deref() != Some(SKILL_FILE) {
                    return Err(unknown());
                }
                let entry = skills.get(self.caller, &address).await.map_err(|error| match error {
                    AgentSkillsError::Catalog(error) => Failure::Host(error.into()),
                    _ => unknown(),
                })?;
                Ok(json!({"skill": entry_json(&entry)}))
            }
            "resources/list" => {
                let page = skills.list(self.caller, cursor(params)?).await?;
                let resources: Vec<Value> = page.skills.iter().flat_map(resources_of).collect();
                Ok(paged(json!({"resources": resources}), page.next_cursor))
            }
            "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
            "resources/read" => {
                let uri = uri_param(params)?;
                // -32002 on the 2025 protocols, -32602 on 2026-07-28.
                let not_found = |message: String| {
                    if modern { Failure::invalid(message) } else { Failure::Rpc { code: RESOURCE_NOT_FOUND, message } }
                };
                let address = parse_uri(uri).ok_or_else(|| not_found(format!("Resource not found: {uri}")))?;
                let file = skills.read(self.caller, &address).await.map_err(|error| match error {
                    AgentSkillsError::UnknownResource(_) => not_found(format!("Resource not found: {uri}")),
                    error => error.into(),
                })?;
                let mime = mime_of(&file.path);
                // The text (or base64) is moved into the answer, not copied.
                let content = match String::from_utf8(Vec::from(file.bytes)) {
                    Ok(text) => json!({"uri": uri, "mimeType": mime, "text": Value::String(text)}),
                    Err(bytes) => json!({"uri": uri, "mimeType": mime,
                        "blob": Value::String(base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes()))}),
                };
                Ok(json!({"contents": [content]}))
            }
            "resources/directory/read" => {
                let uri = uri_param(params)?;
                let unknown = || Failure::invalid(format!("Not a directory of a skill: {uri}"));
                let address = parse_uri(uri.trim_end_matches('/')).ok_or_else(unknown)?;
                let page = skills.directory(self.caller, &address, cursor(params)?).await?;
                Ok(directory_json(page))
            }
            other => Err(Failure::Rpc { code: METHOD_NOT_FOUND, message: format!("Method not found: {other}") }),
        }
    }
}

const INSTRUCTIONS: &str = "Agent skills stored in DIAL: your own, those shared with you and the public ones. \
    skills/list names each skill's SKILL.md and every file with its digest; read them with resources/read.";

fn capabilities() -> Value {
    json!({"resources": {}, "extensions": {SKILLS_EXTENSION: {"directoryRead": true}}})
}

fn server_info() -> Value {
    json!({"name": "dial-host", "version": env!("CARGO_PKG_VERSION")})
}

fn paged(mut result: Value, next_cursor: Option<String>) -> Value {
    if let Some(cursor) = next_cursor {
        result["nextCursor"] = json!(cursor);
    }
    result
}

fn cursor(params: &Value) -> Result<Option<&str>, Failure> {
    match params.get("cursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(cursor)) => Ok(Some(cursor)),
        Some(_) => Err(Failure::invalid("`cursor` must be a string")),
    }
}

fn uri_param(params: &Value) -> Result<&str, Failure> {
    params.get("uri").and_then(Value::as_str).ok_or_else(|| Failure::invalid("`uri` (a string) is required"))
}

/// `skill://<authority>/<segments…>`, each segment percent-decoded; none
/// for another scheme, a query or fragment, an empty, `.` or `..` segment,
/// a `%` that starts no escape, or an escape that decodes to `/` (one URI
/// per file: `uri_of` writes each segment so).
fn parse_uri(uri: &str) -> Option<SkillAddress> {
    let rest = uri.strip_prefix(SCHEME)?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let mut parts = rest.split('/');
    let authority = parts.next().filter(|authority| !authority.is_empty())?.to_string();
    let segments = parts
        .map(|segment| {
            let escapes_ok = segment.match_indices('%').all(|(at, _)| {
                segment.as_bytes().get(at + 1..at + 3).is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
            });
            let decoded = percent_decode_str(segment).decode_utf8().ok()?;
            (escapes_ok && !decoded.is_empty() && decoded != "." && decoded != ".." && !decoded.contains('/'))
                .then(|| decoded.into_owned())
        })
        .collect::<Option<Vec<String>>>()?;
    (!segments.is_empty()).then_some(SkillAddress { authority, segments })
}

/// The URI of `address` plus the `/`-separated `path` (empty: none).
fn uri_of(address: &SkillAddress, path: &str) -> String {
    let mut uri = format!("{SCHEME}{}", utf8_percent_encode(&address.authority, SEGMENT_ESCAPES));
    for segment in address.segments.iter().map(String::as_str).chain(path.split('/').filter(|s| !s.is_empty())) {
        uri.push('/');
        uri.extend(utf8_percent_encode(segment, SEGMENT_ESCAPES));
    }
    uri
}

/// A skill as `skills/list` and `skills/get` give it.
fn entry_json(entry: &SkillEntry) -> Value {
    let resources: Vec<Value> = entry
        .files
        .iter()
        .map(|file| {
            json!({"uri": uri_of(&entry.address, &file.path), "size": file.size,
                "digest": format!("sha256:{}", file.sha256)})
        })
        .collect();
    json!({"uri": uri_of(&entry.address, SKILL_FILE), "frontmatter": entry.frontmatter, "resources": resources})
}

/// A skill's files as `resources/list` gives them; its `SKILL.md` by the
/// skill's name and description, as SEP-2640 suggests.
fn resources_of(entry: &SkillEntry) -> Vec<Value> {
    let skill = entry.address.segments.last().cloned().unwrap_or_default();
    entry
        .files
        .iter()
        .map(|file| {
            let mut resource = json!({"uri": uri_of(&entry.address, &file.path),
                "name": format!("{skill}/{}", file.path), "mimeType": mime_of(&file.path), "size": file.size});
            if file.path == SKILL_FILE {
                resource["name"] = json!(skill);
                resource["description"] = entry.frontmatter["description"].clone();
            }
            resource
        })
        .collect()
}

fn directory_json(page: DirectoryPage) -> Value {
    let resources: Vec<Value> = page
        .children
        .iter()
        .map(|child| {
            let name = child.address.segments.last().cloned().unwrap_or_default();
            let mime = if child.directory { DIRECTORY_MIME } else { mime_of(&name) };
            json!({"uri": uri_of(&child.address, ""), "name": name, "mimeType": mime})
        })
        .collect();
    let mut result = Map::new();
    result.insert("resources".into(), Value::Array(resources));
    paged(Value::Object(result), page.next_cursor)
}

/// The media type of a file, without parameters.
fn mime_of(path: &str) -> &'static str {
    content_type_of(path).split(';').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_uris_round_trip() {
        let address = SkillAddress { authority: "public".into(), segments: vec!["team a".into(), "pdf-tools".into()] };
        let uri = uri_of(&address, "references/forms 100%.md");
        assert_eq!(uri, "skill://public/team%20a/pdf-tools/references/forms%20100%25.md");
        let parsed = parse_uri(&uri).unwrap();
        assert_eq!(parsed.segments, ["team a", "pdf-tools", "references", "forms 100%.md"]);
        for bad in [
            "file://public/a",
            "skill:///a",
            "skill://public",
            "skill://public/a//b",
            "skill://public/a/../b",
            "skill://public/a/%2E%2E/b",
            "skill://public/a/b%2Fc",
            "skill://public/a/%zz",
            "skill://public/a/b%2",
            "skill://public/a/b?x=1",
        ] {
            assert_eq!(parse_uri(bad), None, "{bad}");
        }
    }

    #[test]
    fn revisions() {
        let headers = HeaderMap::new();
        let meta = |version: &str| json!({"_meta": {VERSION_META_KEY: version}});
        assert_eq!(revision(&meta(MODERN_VERSION), &headers), Ok(true));
        assert_eq!(revision(&meta("2025-06-18"), &headers), Ok(false));
        assert_eq!(revision(&meta("2099-01-01"), &headers), Err("2099-01-01".into()));
        assert_eq!(revision(&json!({}), &headers), Ok(false));
    }
}
