//! v2 listing nodes as DIAL's metadata JSON: `name`, `parentPath`, `bucket`,
//! `url`, `nodeType`, `resourceType`, timestamps, etag, plus the marker's
//! cached metadata. Resources are `ITEM`s whose url ends in `/` (they are
//! folders in storage); grouping folders are `FOLDER`s. As DIAL Core writes
//! them: every node carries its type's `resourceType` (`SKILL`: folders and
//! a resource's files too, which clients such as `aidial-client` require).

use super::{Node, NodeType};
use crate::folder_resources::Metadata;
use crate::folders::ListedNode;
use crate::folders::marker::{FRONTMATTER_METADATA, FolderMarker, ResourceMarker};
use crate::folders::names::FILES_SEGMENT;
use crate::folders::resource_type;
use crate::hosted_skills::{SKILLS_GROUP, skill_id};
use crate::resource_url::{ResourceUrl, SEGMENT_ESCAPES};

/// What `GET /v2/metadata/…` answers: a resource, or a folder (of
/// resources, or of a resource's files) with one page of its items.
pub fn metadata_node(metadata: Metadata) -> Node {
    match metadata {
        Metadata::Resource { url, marker, permissions } => {
            let mut node = resource_node(&url, &marker);
            node.permissions = permissions;
            node
        }
        Metadata::Folder { url, marker, resource_type, items, permissions, next_token } => {
            let mut node = folder_node(&url, marker.as_ref(), &resource_type);
            let items = items
                .into_iter()
                .map(|(item, permissions)| Node { permissions, ..listed_node(&item, &resource_type) })
                .collect();
            node.permissions = permissions;
            node.items = Some(Some(items));
            node.next_token = next_token;
            node
        }
        Metadata::Files { resource, dir, resource_type, items, permissions, next_token } => {
            let mut node = files_folder_node(&resource, &dir, &resource_type);
            let items = items
                .iter()
                .map(|item| Node { permissions: permissions.clone(), ..listed_node(item, &resource_type) })
                .collect();
            node.permissions = permissions;
            node.items = Some(Some(items));
            node.next_token = next_token;
            node
        }
    }
}

/// One resource (listing item, PUT response, metadata GET).
pub fn resource_node(url: &ResourceUrl, marker: &ResourceMarker) -> Node {
    let mut node = Node::at(url, NodeType::Item, &resource_type(&marker.type_name));
    node.url = format!("{}/", url.to_string().trim_end_matches('/'));
    node.created_at = Some(marker.created_at);
    node.updated_at = Some(marker.updated_at);
    node.etag = Some(marker.etag.clone());
    // The frontmatter kept for agents is theirs, not the listing's.
    let mut metadata = marker.metadata.clone();
    metadata.shift_remove(FRONTMATTER_METADATA);
    node.metadata = Some(metadata);
    node.author = marker.author.clone();
    node.warnings = (!marker.warnings.is_empty()).then(|| marker.warnings.clone());
    node.skill_id = (url.group() == SKILLS_GROUP).then(|| skill_id(url, marker.created_at));
    node
}

/// One listed node; `resource_type` is the listed type's (`SKILL`), which
/// folders and files carry as their resource's.
pub fn listed_node(listed: &ListedNode, resource_type: &str) -> Node {
    match listed {
        ListedNode::Resource { url, marker } => resource_node(url, marker),
        ListedNode::Folder { url, marker } => folder_node(url, Some(marker), resource_type),
        ListedNode::File { resource, path, record } => {
            let mut node = file_node(resource, path, false, resource_type);
            node.etag = Some(record.etag.clone());
            node.content_length = Some(record.size);
            node
        }
        ListedNode::FileDirectory { resource, path } => file_node(resource, path, true, resource_type),
    }
}

/// A DIAL folder (the bucket root too, which has no marker).
pub fn folder_node(url: &ResourceUrl, marker: Option<&FolderMarker>, resource_type: &str) -> Node {
    let mut node = Node::at(url, NodeType::Folder, resource_type);
    node.created_at = marker.map(|marker| marker.created_at);
    node
}

/// The folder a listing of a resource's files answers with: `…/files/`, or
/// `…/files/<dir>/` for a directory of them (`dir` empty for the root).
pub fn files_folder_node(resource: &ResourceUrl, dir: &str, resource_type: &str) -> Node {
    let mut node = file_node(resource, dir, true, resource_type);
    if dir.is_empty() {
        // `…/<resource>/files/`: named `files`, its parent the resource.
        node.name = Some(FILES_SEGMENT.to_string());
        node.parent_path = Some(resource.decoded_path());
    }
    node
}

/// A file (or directory) inside a resource: its url goes through `/files/`,
/// and its `parentPath`, like every node's, is the decoded path from the
/// bucket root (`team/pdf-tools/files/docs`).
fn file_node(resource: &ResourceUrl, path: &str, folder: bool, resource_type: &str) -> Node {
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
    let node_type = if folder { NodeType::Folder } else { NodeType::Item };
    Node::new(Some(name.to_string()), Some(parent_path), resource.bucket(), url, node_type, resource_type)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::folders::marker::FileRecord;
    use crate::resource_url::Intent;

    fn url(raw: &str) -> ResourceUrl {
        ResourceUrl::parse(raw, Intent::Read).unwrap()
    }

    fn as_json(node: Node) -> Value {
        serde_json::to_value(node).unwrap()
    }

    #[test]
    fn every_node_has_its_resource_type_and_no_null_fields() {
        let root = as_json(folder_node(&url("skills/B/"), None, "SKILL"));
        assert_eq!(root, json!({"bucket": "B", "url": "skills/B/", "nodeType": "FOLDER", "resourceType": "SKILL"}));
        let folder = as_json(folder_node(&url("skills/B/team/"), None, "SKILL"));
        assert_eq!(folder["name"], "team");
        assert!(folder.get("parentPath").is_none(), "{folder}");
    }

    /// DIAL Core's shape: the listed `…/files/` folder, items under it whose
    /// `parentPath` is the decoded path from the bucket root.
    #[test]
    fn files_are_nodes_below_the_resources_files_folder() {
        let resource = url("skills/B/team/pdf%20tools");
        assert_eq!(
            as_json(files_folder_node(&resource, "", "SKILL")),
            json!({"name": "files", "parentPath": "team/pdf tools", "bucket": "B",
                   "url": "skills/B/team/pdf%20tools/files/", "nodeType": "FOLDER", "resourceType": "SKILL"})
        );
        assert_eq!(
            as_json(files_folder_node(&resource, "docs/a b", "SKILL")),
            json!({"name": "a b", "parentPath": "team/pdf tools/files/docs", "bucket": "B",
                   "url": "skills/B/team/pdf%20tools/files/docs/a%20b/", "nodeType": "FOLDER", "resourceType": "SKILL"})
        );
        let file = ListedNode::File {
            resource: resource.clone(),
            path: "docs/x.md".into(),
            record: FileRecord { etag: "e".into(), size: 3, sha256: None },
        };
        assert_eq!(
            as_json(listed_node(&file, "SKILL")),
            json!({"name": "x.md", "parentPath": "team/pdf tools/files/docs", "bucket": "B",
                   "url": "skills/B/team/pdf%20tools/files/docs/x.md", "nodeType": "ITEM", "resourceType": "SKILL",
                   "etag": "e", "contentLength": 3})
        );
        let top = ListedNode::File {
            resource,
            path: "SKILL.md".into(),
            record: FileRecord { etag: "e".into(), size: 1, sha256: None },
        };
        assert_eq!(as_json(listed_node(&top, "SKILL"))["parentPath"], "team/pdf tools/files");
    }
}
