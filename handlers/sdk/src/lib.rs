//! Write a dial-host folder-resource handler as one short Rust file.
//!
//! A handler is a WebAssembly component implementing the WIT world
//! `dial:handler@1.2.0` (`wit/handler.wit`). This crate hides the WIT glue:
//! a type implements [`Handler`] once, over plain Rust types, and
//! [`export_handler!`] turns it into the component's exports.
//!
//! ```
//! use dial_handler_sdk::{Description, FileSet, Handler, Metadata, Problem, Problems, ResourceInfo, Verdict};
//!
//! pub struct Notes;
//!
//! impl Handler for Notes {
//!     fn describe() -> Description {
//!         Description::new("note", "notes", "Note", env!("CARGO_PKG_VERSION"))
//!     }
//!
//!     fn validate(_resource: &ResourceInfo, files: &mut dyn FileSet) -> Verdict {
//!         let mut problems = Problems::new();
//!         if let Err(error) = files.read_text("NOTE.md", 64 * 1024) {
//!             problems.push_error(error.into());
//!         }
//!         problems.into_verdict()
//!     }
//!
//!     fn metadata(_resource: &ResourceInfo, _files: &mut dyn FileSet) -> Result<Metadata, Vec<Problem>> {
//!         Ok(vec![])
//!     }
//! }
//!
//! dial_handler_sdk::export_handler!(Notes);
//!
//! // Natively, the same type is plain Rust:
//! # use dial_handler_sdk::MemoryFiles;
//! let mut files = MemoryFiles::new().with("NOTE.md", "Hello");
//! assert_eq!(Notes::validate(&ResourceInfo::at("team/hello"), &mut files), Ok(vec![]));
//! let errors = Notes::validate(&ResourceInfo::at("empty"), &mut MemoryFiles::new()).unwrap_err();
//! assert_eq!(errors[0].to_string(), "NOTE.md is missing: add NOTE.md to the resource");
//! ```
//!
//! The rules never touch the WIT types, so they run natively: unit tests pass
//! a [`MemoryFiles`] where the component gets the host's `files.read` import.
//!
//! What else is here:
//! - [`FileSet`]: the resource's file list plus bytes on demand, with
//!   [`FileSet::read_all`] / [`FileSet::read_text`] (chunked, size-capped,
//!   clear errors);
//! - [`Problems`]: errors and warnings with paths, capped;
//! - [`frontmatter`] (feature `frontmatter`): YAML frontmatter parsed safely;
//! - [`manifest`] (features `toml`, `json`): size-capped TOML/JSON manifests;
//! - [`log`]: diagnostics through the host's `log.emit` import;
//! - [`text`]: UTF-8 and control-character checks, message helpers.
//!
//! Version: the component targets `dial:handler@1.2.0` (it imports `log`
//! and exports `check`), so it loads on any 1.2+ host of the 1.x line.

pub mod arena;
mod files;
#[cfg(feature = "frontmatter")]
pub mod frontmatter;
pub mod log;
#[cfg(any(feature = "toml", feature = "json"))]
pub mod manifest;
mod problems;
pub mod text;

#[cfg(target_arch = "wasm32")]
mod guest;

#[cfg(target_arch = "wasm32")]
pub use guest::bindings;

pub use files::{FileError, FileSet, MAX_READ_CHUNK, MemoryFiles, ReadError};
pub use problems::{DEFAULT_MAX_PROBLEMS, Problems};

/// The WIT package version this SDK's components are built against.
pub const WIT_VERSION: &str = "1.2.0";

/// One file of the resource: its path (relative, `/`-separated, already
/// checked by the host) and size. A handler never gets content it did not ask
/// for: bytes come from [`FileSet::read`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
}

/// The resource a call is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// Last segment of the resource path, decoded (e.g. `my-skill`).
    pub name: String,
    /// Whole decoded path inside the bucket (e.g. `team/my-skill`).
    pub path: String,
}

impl ResourceInfo {
    /// A resource at `path`; its name is the last segment.
    pub fn at(path: &str) -> Self {
        let name = path.rsplit('/').next().unwrap_or(path);
        Self { name: name.to_string(), path: path.to_string() }
    }
}

/// An error or a warning: a sentence a person can act on, optionally about
/// one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file it is about, or `None` for the whole resource.
    pub path: Option<String>,
    pub message: String,
}

impl Problem {
    /// A problem about one file.
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: Some(path.into()), message: message.into() }
    }

    /// A problem about the whole resource.
    pub fn new(message: impl Into<String>) -> Self {
        Self { path: None, message: message.into() }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            // A message that already names its file is not prefixed twice.
            Some(path) if !self.message.starts_with(path.as_str()) => write!(f, "{path}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// A single-file change inside an existing resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    Put,
    Delete,
}

/// Limits a type sets for itself; `None` keeps the host's value. The host's
/// per-type configuration (`[handlers.types.<group>]`) wins over these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_file_bytes: Option<u64>,
    pub max_files: Option<u32>,
    pub max_total_bytes: Option<u64>,
}

/// What a handler is; the host asks once, when it loads the component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// Written into each resource marker, e.g. `skill`.
    pub type_name: String,
    /// URL group the type is served under, e.g. `skills` (`/v2/skills/…`).
    pub group: String,
    /// Human-readable, e.g. `Agent skill`.
    pub display_name: String,
    /// The handler's own version, usually `env!("CARGO_PKG_VERSION")`.
    pub handler_version: String,
    pub limits: Limits,
}

impl Description {
    /// A description without limit overrides.
    pub fn new(type_name: &str, group: &str, display_name: &str, handler_version: &str) -> Self {
        Self {
            type_name: type_name.into(),
            group: group.into(),
            display_name: display_name.into(),
            handler_version: handler_version.into(),
            limits: Limits::default(),
        }
    }

    /// The same description with these limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// What `validate` decides: `Ok(warnings)` accepts the resource (warnings are
/// returned to the client and kept in the marker), `Err(errors)` rejects it.
pub type Verdict = Result<Vec<Problem>, Vec<Problem>>;

/// Marker metadata: `(key, value)` pairs in the order they should be shown.
pub type Metadata = Vec<(String, String)>;

/// What [`Handler::check`] decides: `Ok((warnings, metadata))` accepts the
/// resource, `Err(errors)` rejects it.
pub type Checked = Result<(Vec<Problem>, Metadata), Vec<Problem>>;

/// A folder-resource type's rules. Implement it once; [`export_handler!`]
/// adapts it to the WIT exports, and tests call it directly.
///
/// Every call is independent: the host gives each call a fresh instance, so
/// nothing carries over between calls (no caches, no statics that matter).
pub trait Handler {
    /// Type name, group, display name, version and limit overrides.
    fn describe() -> Description;

    /// Checks the whole file set.
    fn validate(resource: &ResourceInfo, files: &mut dyn FileSet) -> Verdict;

    /// Metadata cached in the resource marker (shown in listings). The host
    /// calls it only on a file set `validate` accepted, but it must still
    /// return errors rather than panic when something is off.
    fn metadata(resource: &ResourceInfo, files: &mut dyn FileSet) -> Result<Metadata, Vec<Problem>>;

    /// Everything the host asks on a commit, in one call: what
    /// [`validate`](Self::validate) then [`metadata`](Self::metadata) would
    /// say. The default calls the two (in the component, a file both read is
    /// fetched from the host once); override it when they share work, such
    /// as parsing the same file, so a commit parses once. It must agree with
    /// the two: hosts before 1.2 and `validate`-only callers use those.
    fn check(resource: &ResourceInfo, files: &mut dyn FileSet) -> Checked {
        let warnings = Self::validate(resource, files)?;
        Ok((warnings, Self::metadata(resource, files)?))
    }

    /// Guards a single-file change before it is applied (for example: a
    /// type's defining file cannot be deleted). A PUT is re-validated with
    /// `validate` on the new file set anyway. The default allows everything.
    fn validate_file_mutation(path: &str, op: Mutation) -> Result<(), Problem> {
        let _ = (path, op);
        Ok(())
    }
}

/// Exports a [`Handler`] as the component's `dial:handler@1.2.0` exports:
/// `dial_handler_sdk::export_handler!(MyHandler);` once, at the crate root.
///
/// On other targets than `wasm32` it expands to nothing, so the same crate
/// builds natively for unit tests.
#[macro_export]
macro_rules! export_handler {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::export_handler!($ty with_types_in $crate::bindings);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Warns about `draft.md`, rejects a set without `NOTE.md`; the metadata
    /// counts the files, and panics if asked about a rejected set.
    struct Notes;

    impl Handler for Notes {
        fn describe() -> Description {
            Description::new("note", "notes", "Note", "1.0.0")
        }

        fn validate(_resource: &ResourceInfo, files: &mut dyn FileSet) -> Verdict {
            let mut problems = Problems::new();
            if files.entry("NOTE.md").is_none() {
                problems.error("NOTE.md is missing");
            }
            if files.entry("draft.md").is_some() {
                problems.warning_at("draft.md", "drafts are not shown");
            }
            problems.into_verdict()
        }

        fn metadata(_resource: &ResourceInfo, files: &mut dyn FileSet) -> Result<Metadata, Vec<Problem>> {
            assert!(files.entry("NOTE.md").is_some(), "metadata is asked only about a valid set");
            Ok(vec![("files".into(), files.entries().len().to_string())])
        }
    }

    #[test]
    fn the_default_check_is_validate_then_metadata() {
        let resource = ResourceInfo::at("team/n");
        let mut valid = MemoryFiles::new().with("NOTE.md", "hi").with("draft.md", "wip");
        let (warnings, metadata) = Notes::check(&resource, &mut valid).unwrap();
        assert_eq!(warnings, vec![Problem::at("draft.md", "drafts are not shown")]);
        assert_eq!(metadata, vec![("files".to_string(), "2".to_string())]);

        let mut invalid = MemoryFiles::new().with("draft.md", "wip");
        let errors = Notes::check(&resource, &mut invalid).unwrap_err();
        assert_eq!(errors[0].message, "NOTE.md is missing");
    }
}
