//! Who is calling: `Api-Key` (project keys from config) or
//! `Authorization: Bearer <JWT>` (HS256 secret, RS256/ES256 public keys).
//!
//! The result is a [`Caller`]: an identity, its roles, whether it is an
//! admin, and the bucket it owns. Nothing here knows about HTTP; the axum
//! extractor in `http::extract` feeds it the two header values.

use std::collections::{BTreeMap, HashSet};

use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::Value;

use std::sync::Arc;

use crate::buckets::BucketLocation;
use crate::config::{AccessConfig, IdentityConfig, ProjectKey, PublicKeyAlgorithm};
use crate::identity::Identity;
use crate::keys::{KeyData, Originator};

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who the call is for: the user or project — for an application holding
    /// a per-request key, the one the chain of calls started from.
    pub identity: Identity,
    pub roles: Vec<String>,
    pub is_admin: bool,
    /// The token's claims, for public-folder rules over claims; `None` for
    /// API-key callers (such a caller never matches a claim rule).
    pub claims: Option<Value>,
    /// Set when an application calls with its per-request key: it then owns
    /// `Keys/<app>/` instead of the user's bucket, and is never an admin.
    pub per_request: Option<Arc<KeyData>>,
}

impl Caller {
    /// The name recorded as a resource's author: the user id or project.
    pub fn author_name(&self) -> String {
        match &self.identity {
            Identity::User { id } => id.clone(),
            Identity::Project { name } => name.clone(),
        }
    }

    /// The bucket the caller owns: an application's own bucket for a
    /// per-request key (never the user's).
    pub fn bucket_location(&self) -> BucketLocation {
        match &self.per_request {
            Some(key) => key.app_bucket(),
            None => self.user_location(),
        }
    }

    /// The bucket of the user or project behind the call: what is shared
    /// with *them* is what the call may use.
    pub fn user_location(&self) -> BucketLocation {
        match &self.identity {
            Identity::User { id } => BucketLocation::User(id.clone()),
            Identity::Project { name } => BucketLocation::Key(name.clone()),
        }
    }

    /// An application calling with its per-request key: the originating
    /// user's identity and roles, the application's own bucket, no admin.
    pub fn for_key(key: Arc<KeyData>) -> Self {
        Self {
            identity: key.user.identity.clone(),
            roles: key.user.roles.clone(),
            is_admin: false,
            claims: key.user.claims.clone(),
            per_request: Some(key),
        }
    }

    /// The user (or project) a key acts for, as themselves: their own
    /// bucket, never admin rights (no key carries them) and no key.
    pub fn originating_user(key: &KeyData) -> Self {
        Self {
            identity: key.user.identity.clone(),
            roles: key.user.roles.clone(),
            is_admin: false,
            claims: key.user.claims.clone(),
            per_request: None,
        }
    }

    /// The originating user of a call this caller makes (itself, or the one
    /// its key carries).
    pub fn originator(&self) -> Originator {
        Originator { identity: self.identity.clone(), roles: self.roles.clone(), claims: self.claims.clone() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("At least API-KEY or Authorization header must be provided")]
    Missing,
    #[error("Unknown api key")]
    UnknownKey,
    #[error("Bad Authorization header: {0}")]
    BadToken(String),
    #[error("Either API-KEY or Authorization header must be provided but not both")]
    Conflicting,
}

#[derive(Debug, thiserror::Error)]
#[error("identity configuration: {0}")]
pub struct IdentityConfigError(String);

/// Checks credentials against the configured keys and token issuers.
pub struct Authenticator {
    project_keys: BTreeMap<String, ProjectKey>,
    verifiers: Vec<TokenVerifier>,
    identity: IdentityConfig,
    admin_roles: HashSet<String>,
}

struct TokenVerifier {
    algorithm: Algorithm,
    key: DecodingKey,
}

impl Authenticator {
    /// The identity provider's issuer (`identity.issuer`), where clients
    /// that discover how to sign in (RFC 9728) are sent.
    pub fn issuer(&self) -> Option<&str> {
        self.identity.issuer.as_deref()
    }

    pub fn new(
        project_keys: BTreeMap<String, ProjectKey>,
        identity: &IdentityConfig,
        access: &AccessConfig,
    ) -> Result<Self, IdentityConfigError> {
        let mut verifiers = Vec::new();
        if let Some(secret) = &identity.hs256_secret {
            let key = DecodingKey::from_secret(secret.as_bytes())
                .map_err(|e| IdentityConfigError(format!("hs256_secret: {e}")))?;
            verifiers.push(TokenVerifier { algorithm: Algorithm::HS256, key });
        }
        for (index, public_key) in identity.public_keys.iter().enumerate() {
            let pem = match (&public_key.pem, &public_key.pem_file) {
                (Some(pem), None) => pem.clone(),
                (None, Some(file)) => std::fs::read_to_string(file).map_err(|e| {
                    IdentityConfigError(format!("public_keys[{index}]: cannot read {}: {e}", file.display()))
                })?,
                _ => {
                    return Err(IdentityConfigError(format!(
                        "public_keys[{index}]: set exactly one of `pem` and `pem_file`"
                    )));
                }
            };
            let (algorithm, key) = match public_key.algorithm {
                PublicKeyAlgorithm::RS256 => (Algorithm::RS256, DecodingKey::from_rsa_pem(pem.as_bytes())),
                PublicKeyAlgorithm::ES256 => (Algorithm::ES256, DecodingKey::from_ec_pem(pem.as_bytes())),
            };
            let key = key.map_err(|e| IdentityConfigError(format!("public_keys[{index}]: {e}")))?;
            verifiers.push(TokenVerifier { algorithm, key });
        }
        for (secret, key) in &project_keys {
            if key.project.is_empty() || key.project.contains('/') {
                let shown: String = secret.chars().take(4).collect();
                return Err(IdentityConfigError(format!("key {shown}…: `project` must be non-empty and contain no /")));
            }
        }
        Ok(Self {
            project_keys,
            verifiers,
            identity: identity.clone(),
            admin_roles: access.admin_roles.iter().cloned().collect(),
        })
    }

    /// Whether `key` is one of the configured project keys.
    pub fn is_project_key(&self, key: &str) -> bool {
        self.project_keys.contains_key(key)
    }

    /// Authenticates one request from its credentials.
    pub fn authenticate(&self, credentials: &Credentials) -> Result<Caller, AuthError> {
        match (credentials.api_key()?, credentials.token()) {
            (None, None) => Err(AuthError::Missing),
            (Some(key), None) => self.project_caller(key),
            (None, Some(token)) => self.token_caller(token),
            // The same token in both headers (some DIAL clients send that).
            (Some(key), Some(token)) if key == token => self.token_caller(token),
            // Both, different: only a per-request key may accompany a user's
            // token (applications calling back; the extractor handles them).
            (Some(_), Some(_)) => Err(AuthError::Conflicting),
        }
    }

    fn project_caller(&self, key: &str) -> Result<Caller, AuthError> {
        let project = self.project_keys.get(key).ok_or(AuthError::UnknownKey)?;
        Ok(self.caller(Identity::Project { name: project.project.clone() }, project.roles.clone()))
    }

    fn token_caller(&self, token: &str) -> Result<Caller, AuthError> {
        let header = decode_header(token).map_err(|e| AuthError::BadToken(e.to_string()))?;
        let candidates: Vec<&TokenVerifier> = self.verifiers.iter().filter(|v| v.algorithm == header.alg).collect();
        if candidates.is_empty() {
            return Err(AuthError::BadToken(format!("tokens signed with {:?} are not accepted", header.alg)));
        }
        let mut last_error = String::new();
        for verifier in candidates {
            match decode::<Value>(token, &verifier.key, &self.validation(verifier.algorithm)) {
                Ok(data) => return self.claims_caller(&data.claims),
                Err(e) => last_error = e.to_string(),
            }
        }
        Err(AuthError::BadToken(last_error))
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.identity.leeway_seconds;
        validation.validate_nbf = true;
        match &self.identity.audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        if let Some(issuer) = &self.identity.issuer {
            validation.set_issuer(&[issuer]);
        }
        validation
    }

    fn claims_caller(&self, claims: &Value) -> Result<Caller, AuthError> {
        let user_id = match claim(claims, &self.identity.user_id_claim) {
            Some(Value::String(id)) if !id.is_empty() && !id.contains('/') => id.clone(),
            Some(Value::String(_)) => {
                return Err(AuthError::BadToken(format!(
                    "claim '{}' must be non-empty and contain no /",
                    self.identity.user_id_claim
                )));
            }
            _ => {
                return Err(AuthError::BadToken(format!(
                    "token has no string claim '{}'",
                    self.identity.user_id_claim
                )));
            }
        };
        let roles = match claim(claims, &self.identity.roles_claim) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            Some(Value::String(text)) => match &self.identity.roles_delimiter {
                Some(delimiter) => text
                    .split(delimiter.as_str())
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_string)
                    .collect(),
                None => vec![text.clone()],
            },
            _ => Vec::new(),
        };
        let mut caller = self.caller(Identity::User { id: user_id }, roles);
        caller.claims = Some(claims.clone());
        Ok(caller)
    }

    fn caller(&self, identity: Identity, roles: Vec<String>) -> Caller {
        let is_admin = roles.iter().any(|role| self.admin_roles.contains(role));
        Caller { identity, roles, is_admin, claims: None, per_request: None }
    }
}

/// What a request presents as credentials, from its headers: `Api-Key`,
/// `X-Api-Key` (Anthropic's SDK) and `Authorization: Bearer <value>`. A
/// bearer value that is not a JWT (three dot-separated parts) is an API
/// key: the OpenAI SDK sends its `api_key` that way.
#[derive(Debug, Default, Clone, Copy)]
pub struct Credentials<'a> {
    pub api_key: Option<&'a str>,
    pub x_api_key: Option<&'a str>,
    pub authorization: Option<&'a str>,
}

impl<'a> Credentials<'a> {
    /// `Authorization`'s value after `Bearer ` (any case; the scheme alone
    /// or an empty value counts as absent).
    fn bearer(&self) -> Option<&'a str> {
        let value = self.authorization?.trim();
        let token = match value.split_once(' ') {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
            _ if value.eq_ignore_ascii_case("bearer") => "",
            _ => value,
        };
        Some(token).filter(|token| !token.is_empty())
    }

    /// The JWT presented, if the bearer value is one.
    pub fn token(&self) -> Option<&'a str> {
        self.bearer().filter(|value| looks_like_jwt(value))
    }

    /// The API key presented (`Api-Key`, `X-Api-Key` or a bearer value that
    /// is not a JWT); two different ones are a 400.
    pub fn api_key(&self) -> Result<Option<&'a str>, AuthError> {
        let bearer_key = self.bearer().filter(|value| !looks_like_jwt(value));
        let mut found: Option<&'a str> = None;
        for key in [self.api_key, self.x_api_key, bearer_key].into_iter().flatten() {
            let key = key.trim();
            match found {
                _ if key.is_empty() => {}
                Some(other) if other != key => return Err(AuthError::Conflicting),
                _ => found = Some(key),
            }
        }
        Ok(found)
    }
}

/// A JWT is three dot-separated, non-empty base64url parts.
fn looks_like_jwt(value: &str) -> bool {
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 3 && parts.iter().all(|part| !part.is_empty())
}

/// Follows a dotted path (`realm_access.roles`) into the claims.
fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(claims, |value, key| value.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};
    use serde_json::json;

    fn authn(auth: &Authenticator, api_key: Option<&str>, authorization: Option<&str>) -> Result<Caller, AuthError> {
        auth.authenticate(&Credentials { api_key, x_api_key: None, authorization })
    }

    fn keys() -> BTreeMap<String, ProjectKey> {
        BTreeMap::from([
            ("admin-key".to_string(), ProjectKey { project: "ops".into(), roles: vec!["admin".into()] }),
            ("user-key".to_string(), ProjectKey { project: "alpha".into(), roles: vec!["user".into()] }),
        ])
    }

    fn authenticator(identity: IdentityConfig) -> Authenticator {
        Authenticator::new(keys(), &identity, &AccessConfig::default()).unwrap()
    }

    fn hs256_identity() -> IdentityConfig {
        IdentityConfig { hs256_secret: Some("jwt-secret".into()), ..IdentityConfig::default() }
    }

    fn hs256_token(claims: Value) -> String {
        encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(b"jwt-secret").unwrap()).unwrap()
    }

    fn future() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600
    }

    #[test]
    fn project_keys() {
        let auth = authenticator(IdentityConfig::default());
        let admin = authn(&auth, Some("admin-key"), None).unwrap();
        assert_eq!(admin.identity, Identity::Project { name: "ops".into() });
        assert!(admin.is_admin);
        assert_eq!(admin.bucket_location().to_string(), "Keys/ops/");
        let user = authn(&auth, Some("user-key"), None).unwrap();
        assert!(!user.is_admin);
        assert_eq!(authn(&auth, Some("nope"), None), Err(AuthError::UnknownKey));
        assert_eq!(authn(&auth, None, None), Err(AuthError::Missing));
        assert_eq!(authn(&auth, Some("  "), Some("Bearer")), Err(AuthError::Missing));
    }

    #[test]
    fn hs256_token_with_nested_claims() {
        let identity = IdentityConfig { roles_claim: "realm_access.roles".into(), ..hs256_identity() };
        let auth = authenticator(identity);
        let token = hs256_token(json!({"sub": "alice", "exp": future(), "realm_access": {"roles": ["admin", "x"]}}));
        let caller = authn(&auth, None, Some(&format!("Bearer {token}"))).unwrap();
        assert_eq!(caller.identity, Identity::User { id: "alice".into() });
        assert_eq!(caller.roles, ["admin", "x"]);
        assert!(caller.is_admin);
        assert_eq!(caller.bucket_location().to_string(), "Users/alice/");
    }

    #[test]
    fn roles_as_a_delimited_string() {
        let auth = authenticator(IdentityConfig { roles_delimiter: Some(",".into()), ..hs256_identity() });
        let token = hs256_token(json!({"sub": "bob", "exp": future(), "roles": "user, admin"}));
        assert_eq!(authn(&auth, None, Some(&format!("Bearer {token}"))).unwrap().roles, ["user", "admin"]);
    }

    #[test]
    fn bad_tokens() {
        let auth = authenticator(hs256_identity());
        let expired = hs256_token(json!({"sub": "alice", "exp": 1000}));
        assert!(matches!(authn(&auth, None, Some(&format!("Bearer {expired}"))), Err(AuthError::BadToken(_))));
        let no_sub = hs256_token(json!({"exp": future()}));
        assert!(
            matches!(authn(&auth, None, Some(&format!("Bearer {no_sub}"))), Err(AuthError::BadToken(m)) if m.contains("sub"))
        );
        let forged = encode(
            &Header::new(Algorithm::HS256),
            &json!({"sub": "x", "exp": future()}),
            &EncodingKey::from_secret(b"other").unwrap(),
        )
        .unwrap();
        assert!(matches!(authn(&auth, None, Some(&format!("Bearer {forged}"))), Err(AuthError::BadToken(_))));
        assert!(matches!(authn(&auth, None, Some("Bearer not.a.jwt")), Err(AuthError::BadToken(_))));
        // No verifier for HS256 configured at all.
        let token = hs256_token(json!({"sub": "alice", "exp": future()}));
        let strict = authenticator(IdentityConfig::default());
        assert!(
            matches!(authn(&strict, None, Some(&format!("Bearer {token}"))), Err(AuthError::BadToken(m)) if m.contains("HS256"))
        );
    }

    #[test]
    fn both_headers() {
        let auth = authenticator(hs256_identity());
        let token = hs256_token(json!({"sub": "alice", "exp": future()}));
        assert_eq!(authn(&auth, Some("user-key"), Some(&format!("Bearer {token}"))), Err(AuthError::Conflicting));
        // Equal values: the token wins, else the key.
        let same = authn(&auth, Some(&token), Some(&format!("Bearer {token}"))).unwrap();
        assert_eq!(same.identity, Identity::User { id: "alice".into() });
        let key_twice = authn(&auth, Some("user-key"), Some("Bearer user-key")).unwrap();
        assert_eq!(key_twice.identity, Identity::Project { name: "alpha".into() });
    }

    /// The official SDKs: OpenAI's sends `api_key` as a bearer value,
    /// Anthropic's as `X-Api-Key`; a bearer value that is not a JWT is a key.
    #[test]
    fn sdk_keys_in_any_header() {
        let auth = authenticator(hs256_identity());
        let as_bearer = authn(&auth, None, Some("Bearer user-key")).unwrap();
        assert_eq!(as_bearer.identity, Identity::Project { name: "alpha".into() });
        let x_api_key = Credentials { x_api_key: Some("user-key"), ..Default::default() };
        assert_eq!(auth.authenticate(&x_api_key).unwrap().identity, Identity::Project { name: "alpha".into() });
        let both =
            Credentials { x_api_key: Some("user-key"), authorization: Some("bearer user-key"), ..Default::default() };
        assert!(auth.authenticate(&both).is_ok(), "the same key twice");
        let differ = Credentials { api_key: Some("admin-key"), x_api_key: Some("user-key"), ..Default::default() };
        assert_eq!(auth.authenticate(&differ), Err(AuthError::Conflicting));
        assert_eq!(authn(&auth, None, Some("Bearer nope")), Err(AuthError::UnknownKey));
        assert_eq!(authn(&auth, Some("user-key"), Some("Bearer admin-key")), Err(AuthError::Conflicting));
    }

    #[test]
    fn issuer_and_audience_when_configured() {
        let auth = authenticator(IdentityConfig {
            issuer: Some("https://idp".into()),
            audience: Some("dial".into()),
            ..hs256_identity()
        });
        let good = hs256_token(json!({"sub": "a", "exp": future(), "iss": "https://idp", "aud": "dial"}));
        assert!(authn(&auth, None, Some(&format!("Bearer {good}"))).is_ok());
        let wrong_aud = hs256_token(json!({"sub": "a", "exp": future(), "iss": "https://idp", "aud": "other"}));
        assert!(authn(&auth, None, Some(&format!("Bearer {wrong_aud}"))).is_err());
    }

    #[test]
    fn config_errors() {
        let identity = IdentityConfig {
            public_keys: vec![crate::config::PublicKeyConfig {
                algorithm: PublicKeyAlgorithm::RS256,
                pem: Some("not a pem".into()),
                pem_file: None,
            }],
            ..IdentityConfig::default()
        };
        assert!(Authenticator::new(keys(), &identity, &AccessConfig::default()).is_err());
        let bad_project = BTreeMap::from([("k".to_string(), ProjectKey { project: "a/b".into(), roles: vec![] })]);
        assert!(Authenticator::new(bad_project, &IdentityConfig::default(), &AccessConfig::default()).is_err());
    }
}
