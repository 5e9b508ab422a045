//! DIAL's JSON shapes as the routes answer them, and the bodies read as
//! streams, as the OpenAPI document describes them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A node as DIAL lists it: a resource (`ITEM`) or a folder (`FOLDER`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub name: Option<String>,
    pub parent_path: Option<String>,
    pub bucket: String,
    /// `<group>/<bucket>/<path>`, a folder's ending in `/` (v2 resources too).
    pub url: String,
    #[schema(example = "ITEM")]
    pub node_type: String,
    /// `FILE`, `PROMPT`, `SKILL`, … (the handler's type name for v2): on
    /// every node, folders and a resource's files included (clients such as
    /// EPAM's `aidial-client` refuse a node without it).
    pub resource_type: String,
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub etag: Option<String>,
    /// v2: the metadata the handler extracted (a skill: name, description, …).
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    pub author: Option<String>,
    /// v2: the handler's warnings about the resource.
    pub warnings: Option<Vec<String>>,
    /// v1 files and v2 file listings: a file's size in bytes.
    pub content_length: Option<u64>,
    /// v1 files: the content type it was uploaded with.
    pub content_type: Option<String>,
    /// With `permissions=true`: what the caller may do (`READ`, `WRITE`, …);
    /// in `share/list`, what the share grants.
    pub permissions: Option<Vec<String>>,
    /// `share/list` with `others`: the users who accepted the share.
    pub shared_with: Option<Vec<String>>,
    /// A folder listing's children.
    #[schema(no_recursion)]
    pub items: Option<Vec<Node>>,
    /// More children: pass as `token`.
    pub next_token: Option<String>,
}

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
