//! [`Handler`]: a loaded handler as the engine calls it.

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use tracing::Instrument;

use super::config::HandlersConfig;
use super::files::FileSource;
use super::runtime::{self, Runtime};
use super::types::{
    Checked, FileEntry, HandlerDescription, HandlerError, HandlerSource, Mutation, Problem, ResourceInfo, Verdict,
};

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

    /// Whether its compiled code came from the disk cache.
    pub fn from_cache(&self) -> bool {
        self.inner.from_cache()
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
        let outcome =
            self.runtime.validate(&self.inner, resource, entries, files).instrument(self.span("validate")).await?;
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
        let outcome = self
            .runtime
            .build_marker_metadata(&self.inner, resource, entries, files)
            .instrument(self.span("build_marker_metadata"))
            .await?;
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
        let checked = self.runtime.check(&self.inner, resource, entries, files).instrument(self.span("check")).await?;
        Ok(match checked {
            Ok((warnings, _)) if self.strict && !warnings.is_empty() => Checked::Invalid { problems: warnings },
            Ok((warnings, metadata)) => Checked::Valid { warnings, metadata: metadata.into_iter().collect() },
            Err(problems) => Checked::Invalid { problems },
        })
    }

    /// Guards a single-file change before it is applied.
    pub async fn validate_file_mutation(&self, path: &str, op: Mutation) -> Result<Result<(), Problem>, HandlerError> {
        self.runtime.validate_file_mutation(&self.inner, path, op).instrument(self.span("validate_file_mutation")).await
    }

    /// The trace span of one call into the component.
    fn span(&self, function: &'static str) -> tracing::Span {
        tracing::info_span!(
            target: crate::TRACE_SPANS,
            "handler",
            otel.name = %format!("handler {function}"),
            handler.function = function,
            handler.type = %self.label(),
        )
    }
}

impl Handler {
    pub fn new(loaded: runtime::LoadedComponent, runtime: Arc<Runtime>, config: &HandlersConfig) -> Self {
        let strict = config.types.get(&loaded.description.group).is_some_and(|settings| settings.strict);
        Handler { inner: Arc::new(loaded), runtime, strict }
    }
}
