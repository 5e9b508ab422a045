//! Everything that can go wrong in the blob layer; `http::error` maps it.

use super::trailer::TrailerError;
use crate::etag::PreconditionFailed;
use crate::locks::LockError;
use crate::resource_url::UrlError;

/// An application definition that cannot be stored: 400
/// `Invalid application: <issue>; <issue>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid application: {}", .0.join("; "))]
pub struct InvalidApplication(pub Vec<String>);

/// Everything that can go wrong in the blob layer.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("Not found: {0}")]
    NotFound(String),
    #[error("Folder not allowed: {0}")]
    FolderNotAllowed(String),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    InvalidApplication(#[from] InvalidApplication),
    /// An application's `resource_dependencies`: 400 (invalid) or 403 (not
    /// allowed to declare).
    #[error(transparent)]
    Declaration(#[from] crate::dependencies::DeclarationError),
    /// A JSON resource over `resources.max_size`.
    #[error("Resource size: {size} exceeds max limit: {max}")]
    ResourceTooLarge { size: u64, max: u64 },
    /// A file upload over `resources.max_file_size`.
    #[error("Request body is too large")]
    UploadTooLarge { max: u64 },
    #[error(transparent)]
    Precondition(#[from] PreconditionFailed),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The per-request key the write came with ended before its commit.
    #[error(transparent)]
    KeyLapsed(#[from] crate::keys::KeyLapsed),
    #[error("item metadata of {path} is damaged: {reason}")]
    Corrupt { path: String, reason: TrailerError },
    #[error("storage error: {0}")]
    Storage(#[from] object_store::Error),
}

impl From<UrlError> for BlobError {
    fn from(error: UrlError) -> Self {
        Self::BadRequest(error.to_string())
    }
}
