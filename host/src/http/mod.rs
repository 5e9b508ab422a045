//! The HTTP surface: DIAL-compatible routes over the host's services.

mod consent;
mod console;
mod deployments;
pub mod error;
pub mod extract;
pub mod feed;
mod hosted_skills;
pub mod metrics;
mod mint;
mod multipart;
mod oauth;
mod openapi;
mod permissions;
mod publication;
mod resource_ops;
mod respond;
mod routes;
mod sharing;
mod skills_index;
mod skills_mcp;
mod state;
pub mod subscriptions;
mod v1;
mod v2;
mod wire;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::routing::{MethodRouter, any, get, post};
use tower_http::cors::{Any, CorsLayer};

use hosted_skills::{anthropic, openai};
pub use state::{AppState, Services};

/// Every route: its template and what serves it. The one table the router
/// is built from, and checked against the OpenAPI document (`openapi.rs`).
pub(crate) fn routes_table() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/openapi.json", get(openapi::document)),
        ("/health", get(routes::health)),
        // The agentskills.io well-known index of the public skills and its archives: no credentials.
        ("/.well-known/agent-skills/{*path}", get(skills_index::well_known)),
        // Where MCP clients learn how to sign in (RFC 9728): no credentials.
        ("/.well-known/oauth-protected-resource/{*path}", get(oauth::protected_resource)),
        ("/admin", get(console::page)),
        ("/ready", get(routes::ready)),
        ("/metrics", get(routes::metrics)),
        ("/v1/bucket", get(routes::bucket)),
        ("/v1/ops/handlers", get(routes::list_handlers)),
        ("/v1/ops/handlers/reload", post(routes::reload_handlers)),
        ("/v1/ops/resource/share/create", post(sharing::create)),
        ("/v1/ops/resource/share/list", post(sharing::list)),
        ("/v1/ops/resource/share/discard", post(sharing::discard)),
        ("/v1/ops/resource/share/revoke", post(sharing::revoke)),
        ("/v1/ops/resource/share/copy", post(sharing::copy)),
        ("/v1/ops/resource/copy", post(resource_ops::copy)),
        ("/v1/ops/resource/move", post(resource_ops::move_resource)),
        ("/v1/ops/resource/subscribe", post(feed::subscribe)),
        ("/v1/ops/publication/create", post(publication::create)),
        ("/v1/ops/publication/list", post(publication::list)),
        ("/v1/ops/publication/get", post(publication::get)),
        ("/v1/ops/publication/delete", post(publication::delete)),
        ("/v1/ops/publication/approve", post(publication::approve)),
        ("/v1/ops/publication/reject", post(publication::reject)),
        ("/v1/ops/publication/rule/list", post(publication::list_rules)),
        ("/v1/invitations", get(sharing::list_invitations)),
        ("/v1/invitations/{id}", get(sharing::get_invitation).delete(sharing::delete_invitation)),
        ("/v1/metadata/{*path}", get(v1::metadata)),
        // File uploads are limited by the blob service while streaming.
        ("/v1/files/{*path}", v1::resource_routes()),
        ("/v1/prompts/{*path}", v1::resource_routes()),
        ("/v1/conversations/{*path}", v1::resource_routes()),
        // A stored application's DIAL rate route, `…/{path}/rate`, is a POST here.
        ("/v1/applications/{*path}", v1::resource_routes().post(deployments::rate)),
        // The mint sites: bodies are bounded by the proxy while reading.
        ("/openai/deployments", get(deployments::list_deployments)),
        ("/openai/applications", get(deployments::list_applications)),
        ("/openai/applications/{*rest}", get(deployments::get_application)),
        (
            "/openai/deployments/{*rest}",
            post(deployments::openai).get(deployments::get_deployment).layer(DefaultBodyLimit::disable()),
        ),
        ("/anthropic/deployments/{*rest}", post(deployments::anthropic).layer(DefaultBodyLimit::disable())),
        (
            "/v1/deployments/{*rest}",
            post(deployments::v1_deployment)
                .get(deployments::v1_deployment)
                .delete(deployments::v1_deployment)
                .layer(DefaultBodyLimit::disable()),
        ),
        ("/v1/{deployment}/rate", post(deployments::rate).layer(DefaultBodyLimit::disable())),
        ("/v1/deployment-names", get(deployments::deployment_names)),
        // The skills the caller can read, over MCP (SEP-2640): JSON-RPC bodies are bounded while read.
        (
            "/v1/skills/mcp",
            post(skills_mcp::mcp)
                .get(skills_mcp::not_allowed)
                .delete(skills_mcp::not_allowed)
                .layer(DefaultBodyLimit::disable()),
        ),
        ("/v1/user/info", get(routes::user_info)),
        ("/v1/ops/resource/per-request-permissions/grant", post(permissions::grant)),
        ("/v1/ops/resource/per-request-permissions/revoke", post(permissions::revoke)),
        ("/v1/ops/resource/per-request-permissions/list", post(permissions::list)),
        ("/v1/consent/{*rest}", get(consent::get).post(consent::post).delete(consent::delete)),
        // The hosted skills APIs: uploads are limited by the engine while streaming.
        ("/anthropic/v1/skills", anthropic_api(post(anthropic::create).get(anthropic::list))),
        ("/anthropic/v1/skills/{skill_id}", anthropic_api(get(anthropic::retrieve).delete(anthropic::delete))),
        (
            "/anthropic/v1/skills/{skill_id}/versions",
            anthropic_api(post(anthropic::create_version).get(anthropic::list_versions)),
        ),
        (
            "/anthropic/v1/skills/{skill_id}/versions/{version}",
            anthropic_api(get(anthropic::retrieve_version).delete(anthropic::delete_version)),
        ),
        ("/anthropic/v1/skills/{skill_id}/versions/{version}/content", anthropic_api(get(anthropic::version_content))),
        ("/openai/v1/skills", openai_api(post(openai::create).get(openai::list))),
        ("/openai/v1/skills/{skill_id}", openai_api(get(openai::retrieve).post(openai::update).delete(openai::delete))),
        ("/openai/v1/skills/{skill_id}/content", openai_api(get(openai::content))),
        ("/openai/v1/skills/{skill_id}/versions", openai_api(post(openai::create_version).get(openai::list_versions))),
        (
            "/openai/v1/skills/{skill_id}/versions/{version}",
            openai_api(get(openai::retrieve_version).delete(openai::delete_version)),
        ),
        ("/openai/v1/skills/{skill_id}/versions/{version}/content", openai_api(get(openai::version_content))),
        ("/v2/types", get(routes::list_types)),
        ("/v2/metadata/{*path}", get(v2::metadata)),
        ("/v2/versions/{*path}", get(v2::versions)),
        ("/v2/deleted/{*path}", get(v2::deleted)),
        ("/v2/ops/{group}/restore", post(v2::restore)),
        // Uploads are limited by the engine while streaming, per type.
        ("/v2/{*path}", get(v2::get).put(v2::put).delete(v2::delete).layer(DefaultBodyLimit::disable())),
    ]
}

/// A route of Anthropic's skills API: uploads are limited by the engine
/// while streaming; another method is a 405 in Anthropic's error shape.
fn anthropic_api(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(DefaultBodyLimit::disable()).fallback(hosted_skills::anthropic_unknown)
}

/// A route of OpenAI's skills API, like [`anthropic_api`].
fn openai_api(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(DefaultBodyLimit::disable()).fallback(hosted_skills::openai_unknown)
}

/// All routes, with CORS (DIAL answers every origin and exposes its headers,
/// `ETag` first of all), metrics and the access log.
pub fn router(state: AppState) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods(Any)
        .allow_headers(Any)
        .expose_headers([
            header::ETAG,
            header::HeaderName::from_static(metrics::X_REQUEST_ID),
            header::HeaderName::from_static(metrics::REQUEST_ID),
        ])
        .max_age(std::time::Duration::from_secs(86400));
    routes_table()
        .into_iter()
        .fold(Router::new(), |router, (template, route)| router.route(template, route))
        // Anything else under the skills APIs' prefixes: a 404 in their
        // error shapes (what only answers errors is no documented route).
        .route("/anthropic/v1/{*rest}", any(hosted_skills::anthropic_unknown))
        .route("/openai/v1/{*rest}", any(hosted_skills::openai_unknown))
        .fallback(routes::not_found)
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(cors)
        .with_state(state)
}
