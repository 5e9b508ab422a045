//! Typed extractors: who is calling, and what a listing asks for.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;

use super::error::ApiError;
use super::state::AppState;
use axum::http::{HeaderMap, StatusCode, header};

use crate::access::AdminDecision;
use crate::auth::{AuthError, Caller, Credentials};
use crate::etag::Preconditions;
use crate::keys;

/// Header carrying a project (or per-request) API key.
pub const API_KEY_HEADER: &str = "api-key";
/// Anthropic's SDK sends its `api_key` here.
pub const X_API_KEY_HEADER: &str = "x-api-key";

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    /// A per-request key decides the identity, whatever else the request
    /// carries (an application calling back may forward the user's token);
    /// anything else goes to the authenticator. A revoked, expired or
    /// unknown key is 401 like any unknown key.
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = |name| parts.headers.get(name).and_then(|value| value.to_str().ok());
        let credentials = Credentials {
            api_key: header(API_KEY_HEADER),
            x_api_key: header(X_API_KEY_HEADER),
            authorization: header(header::AUTHORIZATION.as_str()),
        };
        let api_key = credentials.api_key()?;
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
        Ok(state.auth().authenticate(&credentials)?)
    }
}

/// A caller that must be an admin.
pub struct Admin(pub Caller);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if !state.access().may_decide(&caller, AdminDecision::HostOperations) {
            return Err(ApiError::forbidden(parts.uri.path()));
        }
        Ok(Admin(caller))
    }
}

/// A `true`/`false` query parameter as DIAL reads one: either word in any
/// case, absent = false; `None` for anything else.
pub fn query_flag(value: Option<&str>) -> Option<bool> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("false") => Some(false),
        Some("true") => Some(true),
        Some(_) => None,
    }
}

/// DIAL's answer to any listing parameter it cannot read.
pub const BAD_LISTING_QUERY: &str =
    "Bad query parameters. Limit must be in [0, 1000] range. Recursive must be true/false";

/// A listing's query, read as DIAL reads it (v1 and v2 alike): `limit`
/// 0..=1000 (default 100), `recursive` `true`/`false` in any case, `token`
/// (empty = none), `permissions=true`; anything else in `limit` or
/// `recursive` is a 400 with [`BAD_LISTING_QUERY`].
#[derive(Debug, PartialEq)]
pub struct ListingQuery {
    pub limit: usize,
    pub token: Option<String>,
    pub recursive: bool,
    pub permissions: bool,
}

impl ListingQuery {
    pub const DEFAULT_LIMIT: usize = 100;
    pub const MAX_LIMIT: usize = 1000;

    fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let bad = || ApiError::bad_request(BAD_LISTING_QUERY);
        let limit = match query.get("limit") {
            None => Self::DEFAULT_LIMIT,
            Some(limit) => limit.trim().parse::<usize>().ok().filter(|l| *l <= Self::MAX_LIMIT).ok_or_else(bad)?,
        };
        let recursive = query_flag(query.get("recursive").map(String::as_str)).ok_or_else(bad)?;
        Ok(Self {
            limit,
            token: query.get("token").filter(|token| !token.is_empty()).cloned(),
            recursive,
            permissions: query.get("permissions").is_some_and(|p| p.eq_ignore_ascii_case("true")),
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ListingQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Query(query) = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map_err(|_| ApiError::bad_request(BAD_LISTING_QUERY))?;
        Self::parse(&query)
    }
}

/// A request's `If-Match` / `If-None-Match` conditions.
pub fn preconditions(headers: &HeaderMap) -> Preconditions {
    let value = |name| headers.get(name).map(|v: &axum::http::HeaderValue| v.as_bytes());
    Preconditions::from_values(value("if-match"), value("if-none-match"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<ListingQuery, ApiError> {
        ListingQuery::parse(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn listing_queries_are_read_as_dial_reads_them() {
        let defaults = ListingQuery { limit: 100, token: None, recursive: false, permissions: false };
        assert_eq!(parse(&[]).unwrap(), defaults);
        let all = parse(&[("limit", "0"), ("recursive", "TRUE"), ("token", "t"), ("permissions", "true")]).unwrap();
        assert_eq!(all, ListingQuery { limit: 0, token: Some("t".into()), recursive: true, permissions: true });
        assert_eq!(parse(&[("limit", "1000"), ("recursive", "false"), ("token", "")]).unwrap().limit, 1000);
        assert_eq!(parse(&[("token", "")]).unwrap().token, None);
        for bad in [&[("limit", "1001")][..], &[("limit", "-1")], &[("limit", "x")], &[("recursive", "yes")]] {
            let error = parse(bad).unwrap_err();
            assert_eq!((error.status, error.message.as_str()), (StatusCode::BAD_REQUEST, BAD_LISTING_QUERY));
        }
    }

    #[test]
    fn non_ascii_conditions_are_kept_and_match_nothing() {
        let mut headers = HeaderMap::new();
        headers.insert("if-match", axum::http::HeaderValue::from_bytes(b"\"caf\xe9\"").unwrap());
        let conditions = preconditions(&headers);
        assert!(conditions.if_match.is_some());
        assert!(conditions.check_write(Some("a")).is_err());
    }
}
