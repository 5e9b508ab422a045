//! Folder-resource handlers: WebAssembly components that carry a type's rules.
//!
//! - [`runtime`]: the wasmtime engine, the sandbox (CPU deadline, memory cap,
//!   read budget, fresh instance per call) and the calls into a component.
//! - [`cache`]: compiled components kept on disk between starts.
//! - [`registry`]: which handler serves which URL group; loads the built-in
//!   skill handler and every `*.wasm` in `handlers.dir`.
//! - [`files`]: where a handler's `files.read` import gets bytes from.
//!
//! The rest of the host sees [`Handler`] and the plain types below; nothing
//! outside this module touches wasmtime.

mod bindings;
pub mod cache;
pub mod files;
pub mod local;
pub mod registry;
pub mod runtime;

use indexmap::IndexMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

pub use cache::CacheConfig;
pub use files::{FileSource, InMemoryFiles, ReadError};
pub use registry::{HandlerRegistry, RegistryError};
pub use runtime::{LoadError, Runtime, RuntimeLimits};

/// The built-in Agent Skills handler, compiled by the build script.
pub const BUILTIN_SKILL_HANDLER: &[u8] =
    include_bytes!(concat!(env!("DIAL_GUEST_WASM_DIR"), "/dial_skill_handler.wasm"));

/// Where the build script put the guest components (the built-in handler and
/// the test guests); tests and benchmarks load test guests from here.
pub const GUEST_WASM_DIR: &str = env!("DIAL_GUEST_WASM_DIR");

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

/// Where a handler came from, for listings and messages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "path", rename_all = "lowercase")]
pub enum HandlerSource {
    Builtin,
    File(std::path::PathBuf),
}

impl fmt::Display for HandlerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin => f.write_str("built-in"),
            Self::File(path) => write!(f, "{}", path.display()),
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

/// A loaded handler: its description, its settings and its compiled
/// component. Cheap to clone; every call runs in a fresh instance.
#[derive(Clone)]
pub struct Handler {
    inner: Arc<runtime::LoadedComponent>,
    runtime: Arc<Runtime>,
    strict: bool,
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("description", self.description())
            .field("source", self.source())
            .field("strict", &self.strict)
            .finish()
    }
}

impl Handler {
    pub fn description(&self) -> &HandlerDescription {
        &self.inner.description
    }

    pub fn source(&self) -> &HandlerSource {
        &self.inner.source
    }

    /// SHA-256 of the component, hex.
    pub fn sha256(&self) -> &str {
        &self.inner.sha256
    }

    /// Whether a commit costs one call (the WIT 1.2 `check` export) rather
    /// than `validate` then `build-marker-metadata`.
    pub fn has_check(&self) -> bool {
        self.inner.has_check()
    }

    /// With `strict`, warnings count as problems.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// `<type>@<version>`, the name used in every error message.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Checks a whole file set. `files` serves the bytes the handler asks for.
    pub async fn validate(
        &self,
        resource: &ResourceInfo,
        entries: &[FileEntry],
        files: Arc<dyn FileSource>,
    ) -> Result<Verdict, HandlerError> {
        let outcome = self.runtime.validate(&self.inner, resource, entries, files).await?;
        Ok(match outcome {
            Ok(warnings) if self.strict && !warnings.is_empty() => Verdict::Invalid { problems: warnings },
            Ok(warnings) => Verdict::Valid { warnings },
            Err(problems) => Verdict::Invalid { problems },
        })
    }

    /// Metadata for the marker (name, description, version, …).
    pub async fn build_marker_metadata(
        &self,
        resource: &ResourceInfo,
        entries: &[FileEntry],
        files: Arc<dyn FileSource>,
    ) -> Result<Result<IndexMap<String, String>, Vec<Problem>>, HandlerError> {
        let outcome = self.runtime.build_marker_metadata(&self.inner, resource, entries, files).await?;
        Ok(outcome.map(|pairs| pairs.into_iter().collect()))
    }

    /// Everything one commit asks of the handler, in one call where the
    /// component allows it: the warnings to keep and the marker metadata,
    /// or the problems that make the file set invalid (with `strict`,
    /// warnings are problems).
    pub async fn check(
        &self,
        resource: &ResourceInfo,
        entries: &[FileEntry],
        files: Arc<dyn FileSource>,
    ) -> Result<Checked, HandlerError> {
        Ok(match self.runtime.check(&self.inner, resource, entries, files).await? {
            Ok((warnings, _)) if self.strict && !warnings.is_empty() => Checked::Invalid { problems: warnings },
            Ok((warnings, metadata)) => Checked::Valid { warnings, metadata: metadata.into_iter().collect() },
            Err(problems) => Checked::Invalid { problems },
        })
    }

    /// Guards a single-file change before it is applied.
    pub async fn validate_file_mutation(&self, path: &str, op: Mutation) -> Result<Result<(), Problem>, HandlerError> {
        self.runtime.validate_file_mutation(&self.inner, path, op).await
    }
}
