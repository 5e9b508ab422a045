//! The folder-resource engine (v2): DIAL resources that are folders of files,
//! typed by a handler, and DIAL folders that group them.
//!
//! - [`marker`]: the resource and folder marker documents, aggregate etag.
//! - [`layout`]: where nodes, markers and version subtrees live in the store.
//! - [`names`]: reserved names and file-path rules.
//! - [`node`]: the node a request addresses (paths, lock keys, ancestors).
//! - [`policy`]: a type's limits and version retention.
//! - [`error`]: the engine's error, [`FolderError`].
//! - [`markers`]: marker reads and the one conditional marker write.
//! - [`staging`]: a new version's files streamed into the store, bounded.
//! - [`validate`]: the handler's check, reading files through `VersionFiles`.
//! - [`engine`]: the façade and the commit protocol; the marker write is the
//!   only commit point. [`file_ops`] (single-file changes) and [`folder_ops`]
//!   (DIAL folders) add their operations to it.
//! - `history`: making a retained version current, dropping one.
//! - `digests`: the SHA-256 of a version's files, added once to versions
//!   written before uploads computed them.
//! - `list_ops`: folder listings from the folder indexes, with the marker
//!   cache; [`listing`]: what they answer, and a version's files.
//! - [`migrate`]: the one-time move of a store laid out before the indexes.
//! - [`archive`]: the streamed ZIP of a resource; [`unzip`]: an uploaded zip, its
//!   directory checked before anything is inflated.
//! - [`journal`]: what may become garbage; [`sweep`]: what the sweep does with it.
//!
//! Invariants: a reader resolves marker → `currentVersion` → files, so it
//! sees one whole version; a version subtree is written before the marker
//! that references it and never modified after; a crash at any point leaves
//! the old or the new marker, and the sweep reclaims every byte no marker
//! references once the grace period has passed.

pub mod archive;
pub mod created_index;
mod digests;
pub mod engine;
pub mod error;
mod file_ops;
mod folder_ops;
mod history;
pub mod journal;
pub mod layout;
mod list_ops;
pub mod listing;
pub mod marker;
mod markers;
pub mod migrate;
pub mod names;
pub mod node;
pub mod pager;
mod pages;
pub mod policy;
pub mod quota;
pub mod staging;
pub mod sweep;
pub mod unzip;
mod validate;

pub use created_index::{CreatedPage, Order};
pub use engine::{Becomes, Committed, FolderEngine, spawn_sweeper};
pub use error::FolderError;
pub use listing::{ListedNode, Listing};
pub use node::Node;
pub use pager::Pager;
pub use policy::{FolderLimits, Retention};
pub use staging::Staging;

/// DIAL's `resourceType` for a handler type: `skill` → `SKILL`.
pub fn resource_type(type_name: &str) -> String {
    type_name.to_uppercase().replace('-', "_")
}
