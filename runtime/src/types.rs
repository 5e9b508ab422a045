//! The plain types the rest of the host sees of a handler: what it is
//! given (files, the resource), what it says (description, problems,
//! verdicts) and how a call fails.

use std::fmt;

use indexmap::IndexMap;
use serde::Serialize;

/// One file of a folder resource as a handler sees it: no content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
}

/// The resource a call is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// Last path segment, decoded.
    pub name: String,
    /// Whole decoded path in the bucket.
    pub path: String,
}

/// A problem a handler found, optionally about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Problem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            // A message that already names its file is not prefixed twice.
            Some(path) if !self.message.starts_with(path.as_str()) => write!(f, "{path}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// What `validate` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted, possibly with warnings.
    Valid { warnings: Vec<Problem> },
    /// Rejected: the resource must not be stored.
    Invalid { problems: Vec<Problem> },
}

/// What [`Handler::check`] decided about a commit's file set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Accepted: the warnings to keep and the marker metadata.
    Valid { warnings: Vec<Problem>, metadata: IndexMap<String, String> },
    /// Rejected: the resource must not be stored.
    Invalid { problems: Vec<Problem> },
}

/// A single-file change inside an existing resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    Put,
    Delete,
}

/// Per-type limits a handler may ask for; `None` keeps the host's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_files: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_total_bytes: Option<u64>,
}

/// What a handler says about itself when loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandlerDescription {
    pub type_name: String,
    pub group: String,
    pub display_name: String,
    pub handler_version: String,
    pub limits: LimitOverrides,
}

/// Where a handler came from, for listings and messages:
/// `{"kind": "builtin"}`, `{"kind": "file", "path": …}` or
/// `{"kind": "oci", "path": "oci://…@sha256:…"}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "path", rename_all = "lowercase")]
pub enum HandlerSource {
    Builtin,
    File(std::path::PathBuf),
    /// `handlers.types.<group>.source`, a pinned OCI reference.
    Oci(String),
}

impl fmt::Display for HandlerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin => f.write_str("built-in"),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Oci(reference) => f.write_str(reference),
        }
    }
}

/// Why a handler call failed (as opposed to the handler rejecting the input,
/// which is a [`Verdict::Invalid`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("handler '{handler}' {kind}")]
pub struct HandlerError {
    /// `<type>@<version>`, e.g. `skill@0.1.0`.
    pub handler: String,
    pub kind: HandlerErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerErrorKind {
    #[error("exceeded its CPU time limit of {limit_ms} ms")]
    CpuLimit { limit_ms: u64 },
    #[error("exceeded its memory limit of {limit_mib} MiB")]
    MemoryLimit { limit_mib: u64 },
    #[error("did not finish within {limit_ms} ms")]
    TimedOut { limit_ms: u64 },
    #[error("crashed: {detail}")]
    Trapped { detail: String },
    #[error("could not start: {detail}")]
    Instantiate { detail: String },
}

impl HandlerError {
    /// Limits exceeded on a given input are the input's doing (too big, too
    /// deep) as far as the caller can tell: a 4xx. A crash is a handler bug.
    pub fn caused_by_input(&self) -> bool {
        matches!(self.kind, HandlerErrorKind::CpuLimit { .. } | HandlerErrorKind::MemoryLimit { .. })
    }
}
