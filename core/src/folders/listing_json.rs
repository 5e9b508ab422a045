//! Listing nodes as DIAL's metadata JSON: `name`, `parentPath`, `bucket`,
//! `url`, `nodeType`, `resourceType`, timestamps, etag, plus the marker's
//! cached metadata. Resources are `ITEM`s whose url ends in `/` (they are
//! folders in storage); grouping folders are `FOLDER`s. As DIAL Core writes
//! them: every node carries its type's `resourceType` (`SKILL`: folders and
//! a resource's files too, which clients such as `aidial-client` require),
//! and fields without a value are left out rather than `null`.

use serde_json::{Map, Value, json};

use super::listing::ListedNode;
use super::marker::{FolderMarker, ResourceMarker};
use super::names::FILES_SEGMENT;
use crate::resource_url::{ResourceUrl, SEGMENT_ESCAPES};

/// DIAL's `resourceType` for a handler type: `skill` → `SKILL`.
pub fn resource_type(type_name: &str) -> String {
    type_name.to_uppercase().replace('-', "_")
}

/// The JSON of one resource (listing item, PUT response, metadata GET).
pub fn resource_json(url: &ResourceUrl, marker: &ResourceMarker) -> Value {
    let mut node = base(url, "ITEM", &resource_type(&marker.type_name));
    node["url"] = json!(format!("{}/", url.to_string().trim_end_matches('/')));
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

/// One listed node; `resource_type` is the listed type's (`SKILL`), which
/// folders and files carry as their resource's.
pub fn node_json(listed: &ListedNode, resource_type: &str) -> Value {
    match listed {
        ListedNode::Resource { url, marker } => resource_json(url, marker),
        ListedNode::Folder { url, marker } => folder_json(url, Some(marker), resource_type),
        ListedNode::File { resource, path, record } => {
            let mut node = file_base(resource, path, false, resource_type);
            node["etag"] = json!(record.etag);
            node["contentLength"] = json!(record.size);
            node
        }
        ListedNode::FileDirectory { resource, path } => file_base(resource, path, true, resource_type),
    }
}

/// The JSON of a DIAL folder (the bucket root too, which has no marker).
pub fn folder_json(url: &ResourceUrl, marker: Option<&FolderMarker>, resource_type: &str) -> Value {
    let mut node = base(url, "FOLDER", resource_type);
    if let Some(marker) = marker {
        node["createdAt"] = json!(marker.created_at);
    }
    node
}

/// The folder a listing of a resource's files answers with: `…/files/`, or
/// `…/files/<dir>/` for a directory of them (`dir` empty for the root).
pub fn files_folder_json(resource: &ResourceUrl, dir: &str, resource_type: &str) -> Value {
    match dir.is_empty() {
        // `…/<resource>/files/`: named `files`, its parent the resource.
        true => {
            let mut node = file_base(resource, "", true, resource_type);
            node["name"] = json!(FILES_SEGMENT);
            node["parentPath"] = json!(resource.decoded_path());
            node
        }
        false => file_base(resource, dir, true, resource_type),
    }
}

fn base(url: &ResourceUrl, node_type: &str, resource_type: &str) -> Value {
    node(url.name(), url.parent_path(), url.bucket(), url.to_string(), node_type, resource_type)
}

/// A file (or directory) inside a resource: its url goes through `/files/`,
/// and its `parentPath`, like every node's, is the decoded path from the
/// bucket root (`team/pdf-tools/files/docs`).
fn file_base(resource: &ResourceUrl, path: &str, folder: bool, resource_type: &str) -> Value {
    let (parent, name) = match path.rsplit_once('/') {
        Some((parent, name)) => (format!("/{parent}"), name),
        None => (String::new(), path),
    };
    let mut url = resource.to_string().trim_end_matches('/').to_string();
    url.push('/');
    url.push_str(FILES_SEGMENT);
    for segment in path.split('/').filter(|segment| !segment.is_empty()) {
        url.push('/');
        url.push_str(&percent_encoding::utf8_percent_encode(segment, SEGMENT_ESCAPES).to_string());
    }
    if folder {
        url.push('/');
    }
    let parent_path = format!("{}/{FILES_SEGMENT}{parent}", resource.decoded_path());
    node(Some(name), Some(parent_path), resource.bucket(), url, if folder { "FOLDER" } else { "ITEM" }, resource_type)
}

fn node(
    name: Option<&str>,
    parent_path: Option<String>,
    bucket: &str,
    url: String,
    node_type: &str,
    resource_type: &str,
) -> Value {
    let mut node = Map::new();
    if let Some(name) = name {
        node.insert("name".into(), json!(name));
    }
    if let Some(parent_path) = parent_path {
        node.insert("parentPath".into(), json!(parent_path));
    }
    node.insert("bucket".into(), json!(bucket));
    node.insert("url".into(), json!(url));
    node.insert("nodeType".into(), json!(node_type));
    node.insert("resourceType".into(), json!(resource_type));
    Value::Object(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folders::marker::FileRecord;
    use crate::resource_url::Intent;

    fn url(raw: &str) -> ResourceUrl {
        ResourceUrl::parse(raw, Intent::Read).unwrap()
    }

    #[test]
    fn every_node_has_its_resource_type_and_no_null_fields() {
        let root = folder_json(&url("skills/B/"), None, "SKILL");
        assert_eq!(root, json!({"bucket": "B", "url": "skills/B/", "nodeType": "FOLDER", "resourceType": "SKILL"}));
        let folder = folder_json(&url("skills/B/team/"), None, "SKILL");
        assert_eq!(folder["name"], "team");
        assert!(folder.get("parentPath").is_none(), "{folder}");
    }

    /// DIAL Core's shape: the listed `…/files/` folder, items under it whose
    /// `parentPath` is the decoded path from the bucket root.
    #[test]
    fn files_are_nodes_below_the_resources_files_folder() {
        let resource = url("skills/B/team/pdf%20tools");
        assert_eq!(
            files_folder_json(&resource, "", "SKILL"),
            json!({"name": "files", "parentPath": "team/pdf tools", "bucket": "B",
                   "url": "skills/B/team/pdf%20tools/files/", "nodeType": "FOLDER", "resourceType": "SKILL"})
        );
        assert_eq!(
            files_folder_json(&resource, "docs/a b", "SKILL"),
            json!({"name": "a b", "parentPath": "team/pdf tools/files/docs", "bucket": "B",
                   "url": "skills/B/team/pdf%20tools/files/docs/a%20b/", "nodeType": "FOLDER", "resourceType": "SKILL"})
        );
        let file = ListedNode::File {
            resource: resource.clone(),
            path: "docs/x.md".into(),
            record: FileRecord { etag: "e".into(), size: 3 },
        };
        assert_eq!(
            node_json(&file, "SKILL"),
            json!({"name": "x.md", "parentPath": "team/pdf tools/files/docs", "bucket": "B",
                   "url": "skills/B/team/pdf%20tools/files/docs/x.md", "nodeType": "ITEM", "resourceType": "SKILL",
                   "etag": "e", "contentLength": 3})
        );
        let top =
            ListedNode::File { resource, path: "SKILL.md".into(), record: FileRecord { etag: "e".into(), size: 1 } };
        assert_eq!(node_json(&top, "SKILL")["parentPath"], "team/pdf tools/files");
    }
}
