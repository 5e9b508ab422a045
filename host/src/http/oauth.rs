//! How an MCP client learns where to sign in (RFC 9728), as DIAL Core
//! answers its MCP routes (PR #1499): a 401 there carries
//! `WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/oauth-protected-resource<path>"`,
//! and that document names the configured identity provider's issuer.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;
use super::state::AppState;

/// Where the protected-resource metadata of a path lives (the path follows).
const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";
/// The skills MCP endpoint.
pub const SKILLS_MCP_PATH: &str = "/v1/skills/mcp";

/// RFC 9728 protected-resource metadata.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ProtectedResource {
    /// The MCP endpoint's URL.
    resource: String,
    /// The identity provider's issuer (`identity.issuer`), when configured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    authorization_servers: Vec<String>,
    bearer_methods_supported: [&'static str; 1],
    resource_name: &'static str,
}

/// Whether `path` is one of the host's MCP endpoints: the skills
/// endpoint, or a deployment's `/v1/deployments/{id}/mcp` (a stored
/// application's id has slashes: `applications/<bucket>/<path>`).
fn is_mcp_path(path: &str) -> bool {
    path == SKILLS_MCP_PATH
        || path
            .strip_prefix("/v1/deployments/")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .is_some_and(|id| !id.is_empty() && id.split('/').all(|segment| !segment.is_empty()))
}

/// The request's origin as its client reached it (a proxy in front names
/// it in `X-Forwarded-Proto` / `X-Forwarded-Host`).
fn origin(headers: &HeaderMap) -> String {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    let first = |value: &str| value.split(',').next().unwrap_or_default().trim().to_string();
    let scheme = header("x-forwarded-proto").map(first).filter(|scheme| scheme == "https" || scheme == "http");
    let host = header("x-forwarded-host").map(first).or_else(|| header(header::HOST.as_str()).map(str::to_owned));
    format!("{}://{}", scheme.as_deref().unwrap_or("http"), host.unwrap_or_else(|| "localhost".into()))
}

/// The `WWW-Authenticate` value a 401 on the MCP endpoint `path` carries.
pub fn challenge(headers: &HeaderMap, path: &str) -> Option<HeaderValue> {
    if !is_mcp_path(path) {
        return None;
    }
    let metadata = format!("{}{METADATA_PREFIX}{path}", origin(headers));
    HeaderValue::from_str(&format!("Bearer resource_metadata=\"{}\"", metadata.replace('"', "%22"))).ok()
}

/// Adds the challenge to a 401 answered on an MCP endpoint.
pub fn with_challenge(mut response: Response, headers: &HeaderMap, path: &str) -> Response {
    if response.status() == axum::http::StatusCode::UNAUTHORIZED
        && let Some(value) = challenge(headers, path)
    {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `GET /.well-known/oauth-protected-resource/{path}`: the metadata of an
/// MCP endpoint (404 for any other path). No credentials.
#[utoipa::path(get, path = "/.well-known/oauth-protected-resource/{path}", tag = "skills",
    params(("path" = String, Path, description = "An MCP endpoint's path: `v1/skills/mcp` or `v1/deployments/{id}/mcp`")),
    responses(
        (status = 200, description = "RFC 9728 protected-resource metadata naming the identity provider",
            body = ProtectedResource),
        (status = 404, description = "Not an MCP endpoint", body = String, content_type = "text/plain")))]
pub async fn protected_resource(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    let path = uri.path().strip_prefix(METADATA_PREFIX).unwrap_or_default();
    if !is_mcp_path(path) {
        return Err(ApiError::not_found(uri.path()));
    }
    let document = ProtectedResource {
        resource: format!("{}{path}", origin(&headers)),
        authorization_servers: state.auth().issuer().map(str::to_owned).into_iter().collect(),
        bearer_methods_supported: ["header"],
        resource_name: "dial-host",
    };
    Ok(Json(document).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mcp_endpoints_are_protected_resources() {
        for path in ["/v1/skills/mcp", "/v1/deployments/app/mcp", "/v1/deployments/applications/B/team/app/mcp"] {
            assert!(is_mcp_path(path), "{path}");
        }
        for path in ["/v1/skills", "/v1/deployments//mcp", "/v1/deployments/a//b/mcp", "/v1/bucket"] {
            assert!(!is_mcp_path(path), "{path}");
        }
    }

    #[test]
    fn the_challenge_names_the_origin_the_client_used() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("dial.example:8080"));
        let value = challenge(&headers, SKILLS_MCP_PATH).unwrap();
        assert_eq!(
            value,
            "Bearer resource_metadata=\"http://dial.example:8080/.well-known/oauth-protected-resource/v1/skills/mcp\""
        );
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        headers.insert("x-forwarded-host", HeaderValue::from_static("dial.example.com"));
        let value = challenge(&headers, SKILLS_MCP_PATH).unwrap();
        assert!(value.to_str().unwrap().contains("\"https://dial.example.com/.well-known/"));
        assert!(challenge(&headers, "/v1/bucket").is_none());
    }
}
