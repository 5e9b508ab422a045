//! The folder-resource engine (v2): DIAL resources that are folders of files,
//! typed by a handler, and DIAL folders that group them.
//!
//! - [`marker`]: `.dial-resource` / `.dial-folder` documents, aggregate etag.
//! - [`layout`]: where nodes, markers and version subtrees live in the store.
//! - [`names`]: reserved names and file-path rules.
//! - [`engine`]: every operation; the marker write is the only commit point.
//! - [`archive`]: the streamed ZIP of a resource.
//! - [`gc`]: the journal of what may become garbage, and the sweep.
//!
//! Invariants: a reader resolves marker → `currentVersion` → files, so it
//! sees one whole version; a version subtree is written before the marker
//! that references it and never modified after; a crash at any point leaves
//! the old or the new marker, and the sweep reclaims every byte no marker
//! references once the grace period has passed.

pub mod archive;
pub mod engine;
pub mod gc;
pub mod layout;
pub mod listing_json;
pub mod marker;
pub mod names;

pub use engine::{FolderEngine, FolderError, FolderLimits, Listing, Node, Staging};
