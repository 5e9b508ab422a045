//! DIAL's JSON shapes as the routes answer them, and the bodies read as
//! streams, as the OpenAPI document describes them: one type per shape,
//! serialized to answer and described by the same derive.
//!
//! - [`Node`] (`node.rs`): DIAL's metadata node, built by [`folders`] (v2
//!   resources, folders and a resource's files) and [`blobs`] (v1 items and
//!   folders).

pub mod blobs;
pub mod folders;
mod node;

pub use node::{Node, NodeType};

use serde::Serialize;
use utoipa::ToSchema;

/// `{"resources": [...]}`: shared resources.
#[derive(Serialize, ToSchema)]
pub struct Nodes {
    pub resources: Vec<Node>,
}

/// A multipart upload: one part per file, the part's filename its path.
#[derive(ToSchema)]
#[allow(dead_code)] // a schema only: the parts are read as a stream
pub struct FileParts {
    /// Any number of file parts; the field name is not used.
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}

/// Bytes as they are stored (a ZIP, a file, a stream).
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // a schema only
pub struct Binary(Vec<u8>);
