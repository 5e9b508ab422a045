//! Listing nodes as DIAL's metadata JSON: `name`, `parentPath`, `bucket`,
//! `url`, `nodeType`, `resourceType`, timestamps, etag, plus the marker's
//! cached metadata. Resources are `ITEM`s whose url ends in `/` (they are
//! folders in storage); grouping folders are `FOLDER`s.

use serde_json::{Value, json};

use super::engine::ListedNode;
use super::marker::{FolderMarker, ResourceMarker};
use crate::resource_url::ResourceUrl;

/// DIAL's `resourceType` for a handler type: `skill` → `SKILL`.
pub fn resource_type(type_name: &str) -> String {
    type_name.to_uppercase().replace('-', "_")
}

/// The JSON of one resource (listing item, PUT response, metadata GET).
pub fn resource_json(url: &ResourceUrl, marker: &ResourceMarker) -> Value {
    let mut node = base(url, "ITEM");
    node["url"] = json!(format!("{}/", url.to_string().trim_end_matches('/')));
    node["resourceType"] = json!(resource_type(&marker.type_name));
    node["createdAt"] = json!(marker.created_at);
    node["updatedAt"] = json!(marker.updated_at);
    node["etag"] = json!(marker.etag);
    node["metadata"] = json!(marker.metadata);
    if let Some(author) = &marker.author {
        node["author"] = json!(author);
    }
    if !marker.warnings.is_empty() {
        node["warnings"] = json!(marker.warnings);
    }
    node
}

pub fn node_json(listed: &ListedNode) -> Value {
    match listed {
        ListedNode::Resource { url, marker } => resource_json(url, marker),
        ListedNode::Folder { url, marker } => folder_json(url, Some(marker)),
        ListedNode::File { resource, path, record } => {
            let mut node = file_base(resource, path, "ITEM");
            node["etag"] = json!(record.etag);
            node["contentLength"] = json!(record.size);
            node
        }
        ListedNode::FileDirectory { resource, path } => file_base(resource, &format!("{path}/"), "FOLDER"),
    }
}

/// The JSON of a DIAL folder (the bucket root too, which has no marker).
pub fn folder_json(url: &ResourceUrl, marker: Option<&FolderMarker>) -> Value {
    let mut node = base(url, "FOLDER");
    if let Some(marker) = marker {
        node["createdAt"] = json!(marker.created_at);
    }
    node
}

fn base(url: &ResourceUrl, node_type: &str) -> Value {
    json!({
        "name": url.name(),
        "parentPath": url.parent_path(),
        "bucket": url.bucket(),
        "url": url.to_string(),
        "nodeType": node_type,
    })
}

/// A file (or directory) inside a resource: its url goes through `/files/`.
fn file_base(resource: &ResourceUrl, path: &str, node_type: &str) -> Value {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, trimmed),
    };
    let mut url = resource.to_string().trim_end_matches('/').to_string();
    url.push_str("/files");
    for segment in path.split('/') {
        url.push('/');
        url.push_str(&percent_encoding::utf8_percent_encode(segment, crate::resource_url::SEGMENT_ESCAPES).to_string());
    }
    json!({
        "name": name,
        "parentPath": parent,
        "bucket": resource.bucket(),
        "url": url,
        "nodeType": node_type,
    })
}
