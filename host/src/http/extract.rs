//! Typed extractors: who is calling.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use axum::http::StatusCode;

use crate::auth::{AuthError, Caller};
use crate::keys;

/// Header carrying a project (or per-request) API key.
pub const API_KEY_HEADER: &str = "api-key";

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    /// A per-request key decides the identity, whatever else the request
    /// carries (an application calling back may forward the user's token);
    /// anything else goes to the authenticator. A revoked, expired or
    /// unknown key is 401 like any unknown key.
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = |name| parts.headers.get(name).and_then(|value| value.to_str().ok());
        let api_key = header(API_KEY_HEADER).map(str::trim);
        if let Some(key) = api_key.filter(|key| keys::looks_like_key(key) && !state.auth().is_project_key(key)) {
            let found = state.keys().get(key).await.map_err(|error| {
                tracing::error!(%error, "looking up a per-request key");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "The key store (Redis) is unavailable; retry")
            })?;
            return match found {
                Some(data) => Ok(Caller::for_key(data)),
                None => Err(AuthError::UnknownKey.into()),
            };
        }
        Ok(state.auth().authenticate(api_key, header("authorization"))?)
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
