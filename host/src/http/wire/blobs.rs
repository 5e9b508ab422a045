//! v1 nodes as DIAL's metadata JSON (`GET /v1/metadata/…`, PUT responses):
//! camelCase names, enum names for `nodeType` / `resourceType`, null fields
//! omitted — except `"items": null` on folders inside a listing, as DIAL
//! writes them.

use super::{Node, NodeType};
use crate::blob_resources::BlobMetadata;
use crate::blobs::{BlobGroup, ItemMeta, Listed};
use crate::resource_url::ResourceUrl;

/// What `GET /v1/metadata/…` answers: an item with its etag, or a folder
/// with one page of its children.
pub fn metadata_node(metadata: BlobMetadata) -> Node {
    match metadata {
        BlobMetadata::Item { url, group, meta, permissions } => {
            Node { permissions, ..item_node(&url, group, &meta, true) }
        }
        BlobMetadata::Folder { url, group, items, permissions, next_token } => {
            let mut node = Node::at(&url, NodeType::Folder, group.resource_type());
            let items = items
                .into_iter()
                .map(|(listed, permissions)| Node { permissions, ..listed_node(&listed, group) })
                .collect();
            node.items = Some(Some(items));
            node.next_token = next_token;
            node.permissions = permissions;
            node
        }
    }
}

/// One item. `etag` only for single-item metadata and write responses, not
/// in listings; `contentLength`/`contentType` for files.
pub fn item_node(url: &ResourceUrl, group: BlobGroup, meta: &ItemMeta, with_etag: bool) -> Node {
    let mut node = Node::at(url, NodeType::Item, group.resource_type());
    node.created_at = Some(meta.created_at);
    node.updated_at = Some(meta.updated_at);
    node.etag = with_etag.then(|| meta.etag.clone());
    if group == BlobGroup::Files {
        node.content_length = Some(meta.content_length);
        node.content_type = Some(meta.content_type.clone());
    }
    node.author = meta.author.clone();
    node
}

fn listed_node(listed: &Listed, group: BlobGroup) -> Node {
    match listed {
        Listed::Item { url, meta } => item_node(url, group, meta, false),
        Listed::Folder { url } => {
            let mut node = Node::at(url, NodeType::Folder, group.resource_type());
            node.items = Some(None);
            node
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resource_url::Intent;

    fn as_json(node: Node) -> serde_json::Value {
        serde_json::to_value(node).unwrap()
    }

    fn meta() -> ItemMeta {
        ItemMeta {
            etag: "e".into(),
            content_length: 3,
            content_type: "text/plain".into(),
            created_at: 1,
            updated_at: 2,
            author: None,
        }
    }

    #[test]
    fn items() {
        let url = ResourceUrl::parse("files/b/dir/a%20b.txt", Intent::Read).unwrap();
        assert_eq!(
            as_json(item_node(&url, BlobGroup::Files, &meta(), true)),
            json!({
                "name": "a b.txt", "parentPath": "dir", "bucket": "b", "url": "files/b/dir/a%20b.txt",
                "nodeType": "ITEM", "resourceType": "FILE", "createdAt": 1, "updatedAt": 2, "etag": "e",
                "contentLength": 3, "contentType": "text/plain",
            })
        );
        let url = ResourceUrl::parse("prompts/b/p", Intent::Read).unwrap();
        assert_eq!(
            as_json(item_node(&url, BlobGroup::Prompts, &meta(), false)),
            json!({
                "name": "p", "bucket": "b", "url": "prompts/b/p",
                "nodeType": "ITEM", "resourceType": "PROMPT", "createdAt": 1, "updatedAt": 2,
            })
        );
    }

    #[test]
    fn folders() {
        let root = ResourceUrl::parse("conversations/b/", Intent::Read).unwrap();
        let child = ResourceUrl::parse("conversations/b/sub/", Intent::Read).unwrap();
        let item = ResourceUrl::parse("conversations/b/c", Intent::Read).unwrap();
        let listing = BlobMetadata::Folder {
            url: root,
            group: BlobGroup::Conversations,
            items: vec![(Listed::Folder { url: child }, None), (Listed::Item { url: item, meta: meta() }, None)],
            permissions: None,
            next_token: Some("t".into()),
        };
        assert_eq!(
            as_json(metadata_node(listing)),
            json!({
                "bucket": "b", "url": "conversations/b/", "nodeType": "FOLDER", "resourceType": "CONVERSATION",
                "items": [
                    {"name": "sub", "bucket": "b", "url": "conversations/b/sub/", "nodeType": "FOLDER",
                     "resourceType": "CONVERSATION", "items": null},
                    {"name": "c", "bucket": "b", "url": "conversations/b/c", "nodeType": "ITEM",
                     "resourceType": "CONVERSATION", "createdAt": 1, "updatedAt": 2},
                ],
                "nextToken": "t",
            })
        );
    }
}
