//! The Agent Skills handler for dial-host: validates a skill's file set
//! (`SKILL.md` and its YAML frontmatter) and extracts the marker metadata.
//!
//! The rules are plain Rust so they run natively in tests; the wasm component
//! glue (`guest`) converts between these types and the WIT contract.

pub mod frontmatter;
pub mod rules;

#[cfg(target_arch = "wasm32")]
mod guest;

pub use rules::{
    DISPLAY_NAME, FileEntry, FileReader, GROUP, Mutation, Problem, ReadError, ResourceInfo, TYPE_NAME,
    build_marker_metadata, validate, validate_file_mutation,
};
