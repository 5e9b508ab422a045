//! Everything that can go wrong in the folder engine; `http::error` maps it
//! to a status.

use super::names::NameError;
use crate::etag::PreconditionFailed;
use crate::handlers::{HandlerError, Problem};
use crate::keys::KeyLapsed;
use crate::locks::LockError;
use crate::resource_url::UrlError;
use crate::storage::PathLimitError;

#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("Not found: {0}")]
    NotFound(String),
    /// A version id the resource does not keep (never had, or swept).
    #[error("Version {0} not found")]
    VersionNotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("Invalid {type_name}: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid { type_name: String, problems: Vec<Problem> },
    #[error("Too many files: the limit is {limit} per resource")]
    TooManyFiles { limit: u32 },
    #[error("{0}")]
    TooLarge(String),
    #[error(transparent)]
    Precondition(#[from] PreconditionFailed),
    #[error("Folder is not empty: {0}")]
    FolderNotEmpty(String),
    #[error("{0}")]
    Conflict(String),
    /// The request took longer than the commit deadline: nothing was stored.
    #[error("The upload took longer than {limit_seconds} s to commit; nothing was stored. Retry it (faster)")]
    TooSlow { limit_seconds: u64 },
    /// The per-request key the write came with ended before its commit.
    #[error(transparent)]
    KeyLapsed(#[from] KeyLapsed),
    #[error(transparent)]
    Handler(#[from] HandlerError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("storage error: {0}")]
    Storage(#[from] object_store::Error),
}

impl From<UrlError> for FolderError {
    fn from(error: UrlError) -> Self {
        Self::BadRequest(error.to_string())
    }
}

impl From<PathLimitError> for FolderError {
    fn from(error: PathLimitError) -> Self {
        Self::BadRequest(error.to_string())
    }
}

impl From<NameError> for FolderError {
    fn from(error: NameError) -> Self {
        Self::BadRequest(error.to_string())
    }
}
