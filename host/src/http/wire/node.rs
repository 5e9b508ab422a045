//! DIAL's metadata node: the one type every v1 and v2 metadata answer,
//! listing and `share/list` entry is serialized from and documented by.

use indexmap::IndexMap;
use serde::Serialize;
use utoipa::ToSchema;

use crate::handlers::Problem;
use crate::resource_url::ResourceUrl;

/// A node as DIAL lists it: a resource (`ITEM`) or a folder (`FOLDER`).
/// Fields without a value are left out rather than `null` (as DIAL Core
/// writes them), except `items` on a v1 folder inside a listing.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The decoded path of the parent folder from the bucket root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_path: Option<String>,
    pub bucket: String,
    /// `<group>/<bucket>/<path>`, a folder's ending in `/` (v2 resources too).
    pub url: String,
    pub node_type: NodeType,
    /// `FILE`, `PROMPT`, `SKILL`, … (the handler's type name for v2): on
    /// every node, folders and a resource's files included (clients such as
    /// EPAM's `aidial-client` refuse a node without it).
    pub resource_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// v2: the metadata the handler extracted (a skill: name, description,
    /// …), in the order the handler gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<IndexMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// v2: the handler's warnings about the resource (`{path?, message}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub warnings: Option<Vec<Problem>>,
    /// A skill: its id in the hosted skills APIs (`skill_…`), so a grantee
    /// who finds it in `share/list` or a listing can call them with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_id: Option<String>,
    /// v1 files and v2 file listings: a file's size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_length: Option<u64>,
    /// v1 files: the content type it was uploaded with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// With `permissions=true`: what the caller may do (`READ`, `WRITE`);
    /// in `share/list`, what the share grants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<String>>,
    /// `share/list` with `others`: the users who accepted the share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_with: Option<Vec<String>>,
    /// A folder listing's children (`null` on a v1 folder listed inside
    /// another, as DIAL writes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(no_recursion, value_type = Option<Vec<Node>>)]
    pub items: Option<Option<Vec<Node>>>,
    /// More children: pass as `token`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// DIAL's `nodeType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum NodeType {
    Item,
    Folder,
}

impl Node {
    /// A node with its identity only: name and parent path as `url` has
    /// them.
    pub fn at(url: &ResourceUrl, node_type: NodeType, resource_type: &str) -> Self {
        Self::new(
            url.name().map(str::to_string),
            url.parent_path(),
            url.bucket(),
            url.to_string(),
            node_type,
            resource_type,
        )
    }

    pub fn new(
        name: Option<String>,
        parent_path: Option<String>,
        bucket: &str,
        url: String,
        node_type: NodeType,
        resource_type: &str,
    ) -> Self {
        Self {
            name,
            parent_path,
            bucket: bucket.to_string(),
            url,
            node_type,
            resource_type: resource_type.to_string(),
            created_at: None,
            updated_at: None,
            etag: None,
            metadata: None,
            author: None,
            warnings: None,
            skill_id: None,
            content_length: None,
            content_type: None,
            permissions: None,
            shared_with: None,
            items: None,
            next_token: None,
        }
    }
}
