//! Typed extractors: who is calling.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::auth::Caller;

/// Header carrying a project (or per-request) API key.
pub const API_KEY_HEADER: &str = "api-key";

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = |name| parts.headers.get(name).and_then(|value| value.to_str().ok());
        let caller = state.auth().authenticate(header(API_KEY_HEADER), header("authorization"))?;
        Ok(caller)
    }
}

/// A caller that must be an admin.
pub struct Admin(pub Caller);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if !caller.is_admin {
            return Err(ApiError::forbidden(parts.uri.path()));
        }
        Ok(Admin(caller))
    }
}
