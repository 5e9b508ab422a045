//! The one place errors become HTTP responses.
//!
//! Each layer has its own error type; the `From` impls below decide its
//! status. Bodies are plain text, DIAL style (`Not found: <url>`), because
//! DIAL clients show them to people as they are — except on the mint sites,
//! whose callers are LLM SDKs: there an error is answered in the caller's
//! [`Dialect`] (OpenAI's and Anthropic's error objects, a JSON-RPC error for
//! MCP), with DIAL's status, and `x-should-retry: false` when a retry
//! cannot change the answer (both SDKs honour it).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::access::{AccessDenied, AccessError};
use crate::auth::AuthError;
use crate::blobs::BlobError;
use crate::buckets::InvalidBucket;
use crate::catalog::CatalogError;
use crate::documents::DocumentError;
use crate::folders::FolderError;
use crate::handlers::{HandlerError, RegistryError};
use crate::hosted_skills::SkillsError;
use crate::keys::KeyLapsed;
use crate::locks::LockError;
use crate::publication::workflow::PublicationError;
use crate::resource_url::UrlError;
use crate::sharing::SharingError;
use crate::storage::StorageError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Whether a retry may get another answer (SDKs retry 5xx and 408,
    /// 409 and 429 by default).
    retryable: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        let retryable = status.is_server_error()
            || matches!(status, StatusCode::REQUEST_TIMEOUT | StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS);
        Self { status, message: message.into(), retryable }
    }

    /// An answer no retry changes, whatever its status (a deployment with
    /// no endpoint for the API is a 503, as DIAL answers, and stays one).
    pub fn permanent(mut self) -> Self {
        self.retryable = false;
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn forbidden(url: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, format!("You don't have an access to: {url}"))
    }

    pub fn not_found(url: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("Not found: {url}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let content_type = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
        (self.status, content_type, self.message).into_response()
    }
}

/// How a mint site's caller expects errors (SPEC "Errors in the caller's
/// dialect").
#[derive(Debug, Clone)]
pub enum Dialect {
    /// `/openai/…`: `{"error": {"message", "type", "param": null, "code"}}`.
    OpenAi,
    /// `/anthropic/…`: `{"type": "error", "error": {"type", "message"}}`.
    Anthropic,
    /// `/v1/deployments/{id}/mcp`: a JSON-RPC error answering the request
    /// `id` (null when the request could not be read that far).
    JsonRpc { id: Option<Box<serde_json::value::RawValue>> },
}

impl Dialect {
    /// `error` as this dialect's callers read it.
    pub fn render(&self, error: ApiError) -> Response {
        let status = error.status;
        let body = match self {
            Self::OpenAi => serde_json::json!({"error": {
                "message": error.message, "type": openai_type(status), "param": null, "code": openai_code(status)}}),
            Self::Anthropic => {
                serde_json::json!({"type": "error", "error": {"type": anthropic_type(status), "message": error.message}})
            }
            Self::JsonRpc { id } => {
                // JSON-RPC's codes: the request was wrong, or the server failed.
                let code = if status.is_client_error() { -32600 } else { -32603 };
                serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": code, "message": error.message, "data": {"status": status.as_u16()}}})
            }
        };
        let mut response = (status, axum::Json(body)).into_response();
        if !error.retryable {
            response.headers_mut().insert("x-should-retry", header::HeaderValue::from_static("false"));
        }
        response
    }

    /// The dialect's final event for a stream the application stopped
    /// feeding, or `None` where the dialect has none.
    pub fn stream_error(&self, message: &str) -> Option<bytes::Bytes> {
        let event = match self {
            Self::OpenAi => format!(
                "data: {}\n\n",
                serde_json::json!({"error": {"message": message, "type": "api_error", "param": null, "code": null}})
            ),
            Self::Anthropic => format!(
                "event: error\ndata: {}\n\n",
                serde_json::json!({"type": "error", "error": {"type": "api_error", "message": message}})
            ),
            Self::JsonRpc { .. } => return None,
        };
        Some(bytes::Bytes::from(event))
    }
}

fn openai_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::FORBIDDEN => "permission_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        status if status.is_client_error() => "invalid_request_error",
        _ => "api_error",
    }
}

/// OpenAI's `code` for the statuses it names one for.
fn openai_code(status: StatusCode) -> Option<&'static str> {
    match status {
        StatusCode::UNAUTHORIZED => Some("invalid_api_key"),
        StatusCode::NOT_FOUND => Some("not_found"),
        StatusCode::CONFLICT => Some("conflict"),
        _ => None,
    }
}

fn anthropic_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::CONFLICT => "conflict_error",
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::FORBIDDEN => "permission_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        status if status.is_client_error() => "invalid_request_error",
        _ => "api_error",
    }
}

impl From<crate::proxy::ProxyError> for ApiError {
    /// The message names no socket or resolver detail (they are logged).
    fn from(error: crate::proxy::ProxyError) -> Self {
        let status = match error {
            crate::proxy::ProxyError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        };
        let refused = matches!(error, crate::proxy::ProxyError::Refused(_));
        let error = Self::new(status, error.to_string());
        // A refused destination stays refused.
        if refused { error.permanent() } else { error }
    }
}

impl From<SkillsError> for ApiError {
    /// A skill the caller may not read is as absent as one that is not
    /// there; a name already taken stays taken (no retry).
    fn from(error: SkillsError) -> Self {
        match error {
            SkillsError::NotFound(_) | SkillsError::VersionNotFound(_) | SkillsError::NoSkillType => {
                ApiError::new(StatusCode::NOT_FOUND, error.to_string())
            }
            SkillsError::Invalid(message) => ApiError::bad_request(message),
            SkillsError::Conflict(message) => ApiError::new(StatusCode::CONFLICT, message).permanent(),
            SkillsError::ReadOnly(_) => ApiError::new(StatusCode::FORBIDDEN, error.to_string()),
            SkillsError::Catalog(error) => error.into(),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> Self {
        let status = match error {
            AuthError::Conflicting => StatusCode::BAD_REQUEST,
            AuthError::Missing | AuthError::UnknownKey | AuthError::BadToken(_) => StatusCode::UNAUTHORIZED,
        };
        Self::new(status, error.to_string())
    }
}

impl From<AccessDenied> for ApiError {
    fn from(error: AccessDenied) -> Self {
        Self::new(StatusCode::FORBIDDEN, error.to_string())
    }
}

impl From<RegistryError> for ApiError {
    /// At run time only an unreadable handlers directory gets here.
    fn from(error: RegistryError) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    }
}

impl From<AccessError> for ApiError {
    fn from(error: AccessError) -> Self {
        match error {
            AccessError::Denied(denied) => denied.into(),
            AccessError::Unavailable(message) => {
                // The cause names internal documents: logged, not shown.
                tracing::error!(%message, "access state unavailable");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "Access state is unavailable; retry")
            }
        }
    }
}

impl From<DocumentError> for ApiError {
    /// Document errors name internal paths: logged, never shown.
    fn from(error: DocumentError) -> Self {
        match error {
            DocumentError::Contended(_) => {
                tracing::warn!(%error, "contended document");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "Too many concurrent changes; retry")
            }
            DocumentError::Storage(ref store) => Self::storage(store, &error),
            DocumentError::Corrupt { .. } => {
                tracing::error!(%error, "storage error");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Storage error")
            }
        }
    }
}

impl From<SharingError> for ApiError {
    fn from(error: SharingError) -> Self {
        match error {
            SharingError::BadRequest(message) => Self::bad_request(message),
            SharingError::Forbidden(message) => Self::new(StatusCode::FORBIDDEN, message),
            SharingError::NotFound(message) => Self::new(StatusCode::NOT_FOUND, message),
            SharingError::Document(error) => error.into(),
        }
    }
}

impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::IncorrectLink(_) | CatalogError::Invalid(_) => Self::bad_request(error.to_string()),
            CatalogError::ChangedWhileMoved { .. } => Self::new(StatusCode::CONFLICT, error.to_string()),
            CatalogError::NotFound(url) => Self::not_found(&url),
            CatalogError::Url(error) => error.into(),
            CatalogError::Bucket(error) => error.into(),
            CatalogError::Folder(error) => error.into(),
            CatalogError::Blob(error) => error.into(),
            CatalogError::Access(error) => error.into(),
            CatalogError::Sharing(error) => error.into(),
        }
    }
}

impl From<PublicationError> for ApiError {
    fn from(error: PublicationError) -> Self {
        match error {
            PublicationError::Invalid(message) => Self::bad_request(message),
            PublicationError::Forbidden(message) => Self::new(StatusCode::FORBIDDEN, message),
            PublicationError::NotFound(message) => Self::new(StatusCode::NOT_FOUND, message),
            PublicationError::DeleteAfterApproval { url, source } => {
                // The status of the delete that failed, its message as shown.
                let failed = Self::from(source);
                let message = format!("The publication is approved, but deleting {url} failed: {}", failed.message);
                Self::new(failed.status, message)
            }
            PublicationError::Catalog(error) => error.into(),
            PublicationError::Access(error) => error.into(),
            PublicationError::Document(error) => error.into(),
            PublicationError::Bucket(error) => error.into(),
            PublicationError::Url(error) => error.into(),
        }
    }
}

impl From<UrlError> for ApiError {
    fn from(error: UrlError) -> Self {
        Self::bad_request(error.to_string())
    }
}

impl From<InvalidBucket> for ApiError {
    fn from(error: InvalidBucket) -> Self {
        Self::bad_request(error.to_string())
    }
}

impl From<HandlerError> for ApiError {
    fn from(error: HandlerError) -> Self {
        let status = match error.kind {
            _ if error.caused_by_input() => StatusCode::BAD_REQUEST,
            crate::handlers::HandlerErrorKind::TimedOut { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

impl From<FolderError> for ApiError {
    fn from(error: FolderError) -> Self {
        let status = match &error {
            FolderError::NotFound(url) => return Self::not_found(url),
            FolderError::VersionNotFound(_) => StatusCode::NOT_FOUND,
            FolderError::Handler(handler) => return Self::from(handler.clone()),
            FolderError::BadRequest(_) | FolderError::Invalid { .. } | FolderError::TooManyFiles { .. } => {
                StatusCode::BAD_REQUEST
            }
            FolderError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            FolderError::Precondition(_) => StatusCode::PRECONDITION_FAILED,
            FolderError::FolderNotEmpty(_) | FolderError::Conflict(_) => StatusCode::CONFLICT,
            FolderError::TooSlow { .. } => StatusCode::REQUEST_TIMEOUT,
            FolderError::KeyLapsed(lapsed) => return Self::from(lapsed.clone()),
            FolderError::Lock(lock) => return Self::from(lock),
            FolderError::Storage(storage) => return Self::storage(storage, storage),
        };
        Self::new(status, error.to_string())
    }
}

impl From<BlobError> for ApiError {
    fn from(error: BlobError) -> Self {
        let status = match &error {
            BlobError::NotFound(url) => return Self::not_found(url),
            BlobError::Declaration(crate::dependencies::DeclarationError::NotAllowed) => StatusCode::FORBIDDEN,
            BlobError::FolderNotAllowed(_)
            | BlobError::BadRequest(_)
            | BlobError::InvalidApplication(_)
            | BlobError::Declaration(_) => StatusCode::BAD_REQUEST,
            BlobError::ResourceTooLarge { .. } | BlobError::UploadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BlobError::Precondition(_) => StatusCode::PRECONDITION_FAILED,
            BlobError::Conflict(_) => StatusCode::CONFLICT,
            BlobError::KeyLapsed(lapsed) => return Self::from(lapsed.clone()),
            BlobError::Lock(lock) => return Self::from(lock),
            BlobError::Storage(store) => return Self::storage(store, &error),
            BlobError::Corrupt { .. } => {
                tracing::error!(%error, "storage error");
                return Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Storage error");
            }
        };
        Self::new(status, error.to_string())
    }
}

impl From<KeyLapsed> for ApiError {
    /// 401: the key the write came with is no longer a credential; 503
    /// when the key store could not tell.
    fn from(lapsed: KeyLapsed) -> Self {
        match lapsed {
            KeyLapsed::Ended => Self::new(StatusCode::UNAUTHORIZED, lapsed.to_string()),
            KeyLapsed::Unavailable(why) => {
                tracing::error!(why, "checking a per-request key before a commit");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "The key store (Redis) is unavailable; retry")
            }
        }
    }
}

impl From<&LockError> for ApiError {
    /// 503: the request may be retried. Lock keys name internal storage
    /// locations, so they are logged, never shown.
    fn from(error: &LockError) -> Self {
        tracing::warn!(%error, "lock");
        let message = match error {
            LockError::Timeout { .. } => "The resource is busy with another request; retry",
            LockError::Redis(_) => "The lock service (Redis) is unavailable; retry",
            LockError::Lost { .. } => "The request lost its lock before it could commit; nothing was changed, retry",
        };
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }
}

impl From<StorageError> for ApiError {
    fn from(error: StorageError) -> Self {
        match &error {
            StorageError::Store(store) => Self::storage(store, &error),
            StorageError::NoAnswer(_) => {
                tracing::warn!(%error, "storage unavailable");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, STORE_UNAVAILABLE)
            }
            _ => {
                tracing::error!(%error, "storage error");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Storage error")
            }
        }
    }
}

/// What a client is told while the store cannot be reached.
const STORE_UNAVAILABLE: &str = "The store is unavailable; retry";

impl ApiError {
    /// A store failure (`shown` is the error as logged; it names internal
    /// paths, so clients never see it): 503 when the store could not be
    /// reached or did not answer in time — the request may be retried, and
    /// nothing was committed unless the commit's own answer was lost — 500
    /// when it answered with a failure.
    fn storage(store: &object_store::Error, shown: &dyn std::fmt::Display) -> Self {
        if crate::backends::is_unavailable(store) {
            tracing::warn!(error = %shown, "storage unavailable");
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, STORE_UNAVAILABLE);
        }
        tracing::error!(error = %shown, "storage error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Storage error")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::HandlerErrorKind;

    #[test]
    fn statuses() {
        assert_eq!(ApiError::from(AuthError::Missing).status, StatusCode::UNAUTHORIZED);
        assert_eq!(ApiError::from(AuthError::Conflicting).status, StatusCode::BAD_REQUEST);
        assert_eq!(ApiError::from(InvalidBucket("x".into())).message, "invalid bucket: x");
        let handler = |kind| HandlerError { handler: "skill@1".into(), kind };
        let cpu = ApiError::from(handler(HandlerErrorKind::CpuLimit { limit_ms: 5 }));
        assert_eq!(cpu.status, StatusCode::BAD_REQUEST);
        assert_eq!(cpu.message, "handler 'skill@1' exceeded its CPU time limit of 5 ms");
        let crash = ApiError::from(handler(HandlerErrorKind::Trapped { detail: "boom".into() }));
        assert_eq!(crash.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(crash.message, "handler 'skill@1' crashed: boom");
        let slow = ApiError::from(handler(HandlerErrorKind::TimedOut { limit_ms: 5 }));
        assert_eq!(slow.status, StatusCode::SERVICE_UNAVAILABLE);

        let too_large = ApiError::from(BlobError::ResourceTooLarge { size: 10, max: 5 });
        assert_eq!(
            (too_large.status, too_large.message.as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, "Resource size: 10 exceeds max limit: 5")
        );
        let folder = ApiError::from(BlobError::FolderNotAllowed("files/b/x/".into()));
        assert_eq!(
            (folder.status, folder.message.as_str()),
            (StatusCode::BAD_REQUEST, "Folder not allowed: files/b/x/")
        );
        assert_eq!(ApiError::from(BlobError::NotFound("files/b/x".into())).message, "Not found: files/b/x");

        // Lock keys and document paths name internal locations: never shown.
        let lost = ApiError::from(FolderError::Lock(LockError::Lost { key: "bucket:Users/alice/skills".into() }));
        assert_eq!(lost.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!lost.message.contains("Users/"), "{}", lost.message);
        let busy =
            ApiError::from(BlobError::Lock(LockError::Timeout { key: "resource:Keys/p/x".into(), waited_ms: 1 }));
        assert!(!busy.message.contains("Keys/"), "{}", busy.message);
        let contended = ApiError::from(DocumentError::Contended("system/sharing/Users/a/shares.json".into()));
        assert_eq!(contended.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!contended.message.contains("system/"), "{}", contended.message);
        let slow = ApiError::from(FolderError::TooSlow { limit_seconds: 1800 });
        assert_eq!(slow.status, StatusCode::REQUEST_TIMEOUT);
    }

    async fn rendered(dialect: &Dialect, error: ApiError) -> (StatusCode, Option<String>, serde_json::Value) {
        let response = dialect.render(error);
        let retry = response.headers().get("x-should-retry").map(|v| v.to_str().unwrap().to_string());
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, retry, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn errors_in_each_dialect() {
        let denied = || ApiError::new(StatusCode::FORBIDDEN, "no consent");
        let (status, retry, body) = rendered(&Dialect::OpenAi, denied()).await;
        assert_eq!((status, retry.as_deref()), (StatusCode::FORBIDDEN, Some("false")));
        assert_eq!(
            body,
            serde_json::json!({"error": {"message": "no consent", "type": "permission_error", "param": null, "code": null}})
        );
        let (_, _, body) = rendered(&Dialect::Anthropic, denied()).await;
        assert_eq!(
            body,
            serde_json::json!({"type": "error", "error": {"type": "permission_error", "message": "no consent"}})
        );
        let id = Some(serde_json::value::RawValue::from_string("7".into()).unwrap());
        let (_, _, body) = rendered(&Dialect::JsonRpc { id }, denied()).await;
        assert_eq!(
            (&body["id"], &body["error"]["code"], &body["error"]["message"]),
            (&serde_json::json!(7), &serde_json::json!(-32600), &serde_json::json!("no consent"))
        );

        let busy = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "Redis is away; retry");
        assert_eq!(rendered(&Dialect::OpenAi, busy.clone()).await.1, None, "a retry may succeed");
        assert_eq!(rendered(&Dialect::OpenAi, busy.permanent()).await.1.as_deref(), Some("false"));
        assert_eq!(
            rendered(&Dialect::Anthropic, ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "big")).await.2["error"]["type"],
            "request_too_large"
        );
        assert_eq!(rendered(&Dialect::OpenAi, ApiError::new(StatusCode::TOO_MANY_REQUESTS, "slow down")).await.1, None);
    }
}
