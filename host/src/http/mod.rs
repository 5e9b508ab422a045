//! The HTTP surface: DIAL-compatible routes over the host's services.

pub mod error;
pub mod extract;
mod routes;
mod v2;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::routing::{get, post};
use object_store::ObjectStore;
use tower_http::cors::{Any, CorsLayer};
use tower_http::trace::TraceLayer;

use crate::access::AccessService;
use crate::auth::Authenticator;
use crate::buckets::BucketCodec;
use crate::folders::FolderEngine;
use crate::handlers::HandlerRegistry;

/// Shared by every request: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Services>,
}

/// The services routes use.
pub struct Services {
    pub auth: Authenticator,
    pub access: AccessService,
    pub buckets: BucketCodec,
    pub handlers: HandlerRegistry,
    pub store: Arc<dyn ObjectStore>,
    pub folders: Arc<FolderEngine>,
}

impl AppState {
    pub fn new(services: Services) -> Self {
        Self { inner: Arc::new(services) }
    }

    pub fn auth(&self) -> &Authenticator {
        &self.inner.auth
    }

    pub fn access(&self) -> &AccessService {
        &self.inner.access
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
}

/// All routes, with CORS (DIAL answers every origin and exposes its headers,
/// `ETag` first of all) and request tracing.
pub fn router(state: AppState) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods(Any)
        .allow_headers(Any)
        .expose_headers([header::ETAG])
        .max_age(std::time::Duration::from_secs(86400));
    Router::new()
        .route("/health", get(routes::health))
        .route("/ready", get(routes::ready))
        .route("/v1/bucket", get(routes::bucket))
        .route("/v1/ops/handlers", get(routes::list_handlers))
        .route("/v1/ops/handlers/reload", post(routes::reload_handlers))
        .route("/v2/metadata/{*path}", get(v2::metadata))
        .route("/v2/ops/{group}/restore", post(v2::restore))
        // Uploads are limited by the engine while streaming, per type.
        .route("/v2/{*path}", get(v2::get).put(v2::put).delete(v2::delete).layer(DefaultBodyLimit::disable()))
        .fallback(routes::not_found)
        .layer(cors)
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
