//! The one place errors become HTTP responses.
//!
//! Each layer has its own error type; the `From` impls below decide its
//! status. Bodies are plain text, DIAL style (`Not found: <url>`), because
//! DIAL clients show them to people as they are.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::access::{AccessDenied, AccessError};
use crate::auth::AuthError;
use crate::blobs::BlobError;
use crate::buckets::InvalidBucket;
use crate::documents::DocumentError;
use crate::folders::FolderError;
use crate::handlers::{HandlerError, RegistryError};
use crate::locks::LockError;
use crate::resource_url::UrlError;
use crate::sharing::SharingError;
use crate::storage::StorageError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
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
            DocumentError::Storage(_) | DocumentError::Corrupt { .. } => {
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
            FolderError::Lock(lock) => return Self::from(lock),
            FolderError::Storage(storage) => {
                tracing::error!(error = %storage, "storage error");
                return Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Storage error");
            }
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
            BlobError::Lock(lock) => return Self::from(lock),
            BlobError::Corrupt { .. } | BlobError::Storage(_) => {
                tracing::error!(%error, "storage error");
                return Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Storage error");
            }
        };
        Self::new(status, error.to_string())
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
        tracing::error!(%error, "storage error");
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
}
