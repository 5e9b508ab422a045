//! The HTTP surface: DIAL-compatible routes over the host's services.

pub mod catalog;
mod consent;
mod deployments;
pub mod error;
pub mod extract;
pub mod feed;
mod multipart;
mod openapi;
mod permissions;
mod publication;
mod resource_ops;
mod routes;
mod sharing;
mod v1;
mod v2;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use object_store::ObjectStore;
use tower_http::cors::{Any, CorsLayer};

use crate::access::AccessService;
use crate::apps::{ConfigApps, StoredDefinitions};
use crate::audit::Audit;
use crate::auth::Authenticator;
use crate::auth::Caller;
use crate::blobs::BlobService;
use crate::buckets::BucketCodec;
use crate::consent::ConsentStore;
use crate::dependencies::{DeclarationPolicy, V1_GROUPS};
use crate::documents::Documents;
use crate::folders::FolderEngine;
use crate::handlers::HandlerRegistry;
use crate::keys::Keys;
use crate::proxy::Proxy;

/// Shared by every request: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Services>,
}

/// The services routes use.
pub struct Services {
    pub auth: Authenticator,
    pub apps: ConfigApps,
    /// Stored application definitions parsed once per etag.
    pub definitions: StoredDefinitions,
    pub keys: Keys,
    pub proxy: Proxy,
    pub consent: ConsentStore,
    pub audit: Audit,
    /// `access.allow_user_resource_dependencies`.
    pub allow_user_dependencies: bool,
    pub access: AccessService,
    pub documents: Documents,
    pub buckets: BucketCodec,
    pub handlers: HandlerRegistry,
    pub store: Arc<dyn ObjectStore>,
    pub folders: Arc<FolderEngine>,
    pub blobs: Arc<BlobService>,
    /// The shared Redis connection (locks, key store, events), for `/ready`.
    pub redis: Option<crate::redis_conn::RedisConnection>,
    /// Committed changes, from every instance: the change feed's source.
    pub events: Arc<dyn crate::events::EventBus>,
    pub feed_heartbeat: std::time::Duration,
    /// Open change-feed subscriptions per caller, bounded by
    /// `feed.max_subscriptions_per_caller`.
    pub feed_subscriptions: feed::Subscriptions,
    /// Set when the server begins to stop: endless responses (the change
    /// feed) end instead of holding the graceful stop for its whole bound.
    pub stopping: tokio::sync::watch::Sender<bool>,
}

impl AppState {
    pub fn new(services: Services) -> Self {
        Self { inner: Arc::new(services) }
    }

    pub fn auth(&self) -> &Authenticator {
        &self.inner.auth
    }

    pub fn apps(&self) -> &ConfigApps {
        &self.inner.apps
    }

    pub fn definitions(&self) -> &StoredDefinitions {
        &self.inner.definitions
    }

    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    pub fn proxy(&self) -> &Proxy {
        &self.inner.proxy
    }

    pub fn consent(&self) -> &ConsentStore {
        &self.inner.consent
    }

    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }

    /// What `writer` may declare in an application's
    /// `resource_dependencies`: admins may, others only when the
    /// configuration allows it; targets name a v1 group or a loaded type.
    /// No stored definition, whoever writes it, gets the user's token.
    pub fn declaration_policy(&self, writer: &Caller) -> DeclarationPolicy {
        let mut declarable: Vec<String> = V1_GROUPS.iter().map(|g| g.to_string()).collect();
        declarable.extend(self.handlers().all().iter().map(|h| h.description().group.clone()));
        DeclarationPolicy {
            declarable,
            may_declare: writer.is_admin || self.inner.allow_user_dependencies,
            may_forward_auth_token: false,
        }
    }

    pub fn events(&self) -> &Arc<dyn crate::events::EventBus> {
        &self.inner.events
    }

    pub fn feed_heartbeat(&self) -> std::time::Duration {
        self.inner.feed_heartbeat
    }

    pub fn feed_subscriptions(&self) -> &feed::Subscriptions {
        &self.inner.feed_subscriptions
    }

    /// Ends every change-feed stream; called when the server begins to stop.
    pub fn begin_stop(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Becomes `true` when the server begins to stop.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.stopping.subscribe()
    }

    pub fn access(&self) -> &AccessService {
        &self.inner.access
    }

    pub fn documents(&self) -> &Documents {
        &self.inner.documents
    }

    pub fn buckets(&self) -> &BucketCodec {
        &self.inner.buckets
    }

    pub fn handlers(&self) -> &HandlerRegistry {
        &self.inner.handlers
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    pub fn folders(&self) -> &FolderEngine {
        &self.inner.folders
    }

    pub fn blobs(&self) -> &BlobService {
        &self.inner.blobs
    }

    pub fn redis(&self) -> Option<&crate::redis_conn::RedisConnection> {
        self.inner.redis.as_ref()
    }
}

/// Every route: its template and what serves it. The one table the router
/// is built from, and checked against the OpenAPI document (`openapi.rs`).
pub(crate) fn routes_table() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/openapi.json", get(openapi::document)),
        ("/health", get(routes::health)),
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
        ("/v1/user/info", get(routes::user_info)),
        ("/v1/ops/resource/per-request-permissions/grant", post(permissions::grant)),
        ("/v1/ops/resource/per-request-permissions/revoke", post(permissions::revoke)),
        ("/v1/ops/resource/per-request-permissions/list", post(permissions::list)),
        ("/v1/consent/{*rest}", get(consent::get).post(consent::post).delete(consent::delete)),
        ("/v2/metadata/{*path}", get(v2::metadata)),
        ("/v2/versions/{*path}", get(v2::versions)),
        ("/v2/ops/{group}/restore", post(v2::restore)),
        // Uploads are limited by the engine while streaming, per type.
        ("/v2/{*path}", get(v2::get).put(v2::put).delete(v2::delete).layer(DefaultBodyLimit::disable())),
    ]
}

/// All routes, with CORS (DIAL answers every origin and exposes its headers,
/// `ETag` first of all), metrics and the access log.
pub fn router(state: AppState) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods(Any)
        .allow_headers(Any)
        .expose_headers([header::ETAG])
        .max_age(std::time::Duration::from_secs(86400));
    routes_table()
        .into_iter()
        .fold(Router::new(), |router, (template, route)| router.route(template, route))
        .fallback(routes::not_found)
        .layer(axum::middleware::from_fn(crate::metrics::http::track))
        .layer(cors)
        .with_state(state)
}

/// The request path after `prefix`, still percent-encoded: resource routes
/// hand it to the one URL parser as it came.
fn raw_path<'a>(uri: &'a axum::http::Uri, prefix: &str) -> &'a str {
    uri.path().strip_prefix(prefix).unwrap_or_default()
}

/// Adds the `ETag` header DIAL clients read after every read and write.
/// A metadata request whose `Accept` names this gets it as the content type.
const METADATA_MIME: &str = "application/vnd.dial.metadata+json";

/// A metadata answer (v1 and v2) as DIAL gives it: JSON, typed
/// `application/vnd.dial.metadata+json` when the request's `Accept` names
/// that, else `application/json`.
fn metadata_response(request: &HeaderMap, body: &serde_json::Value) -> Response {
    let accepts_metadata_mime = request
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains(METADATA_MIME));
    let content_type = if accepts_metadata_mime { METADATA_MIME } else { "application/json" };
    ([(header::CONTENT_TYPE, content_type)], body.to_string()).into_response()
}

fn with_etag(mut response: axum::response::Response, etag: &str) -> axum::response::Response {
    if let Ok(value) = axum::http::HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// The headers of a stored file served to a client. A file's bytes are the
/// uploader's, so they are never rendered as a page of the API's origin:
/// `nosniff` and a sandboxing CSP always, and `attachment` for types a
/// browser would execute (HTML, SVG, XML, scripts).
fn file_headers(content_type: &str, length: u64) -> [(header::HeaderName, String); 5] {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let active = ["html", "xml", "svg", "javascript", "ecmascript"].iter().any(|kind| essence.contains(kind));
    [
        (header::CONTENT_TYPE, content_type.to_string()),
        (header::CONTENT_LENGTH, length.to_string()),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".into()),
        (header::CONTENT_SECURITY_POLICY, "sandbox".into()),
        (header::CONTENT_DISPOSITION, if active { "attachment" } else { "inline" }.into()),
    ]
}
