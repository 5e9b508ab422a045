//! DIAL's metadata JSON for v1 nodes (`GET /v1/metadata/…`, PUT responses):
//! camelCase names, enum names for `nodeType` / `resourceType`, null fields
//! omitted — except `"items": null` on folders inside a listing, as DIAL
//! writes them.

use serde_json::{Map, Value, json};

use super::listing::{Listed, Listing};
use super::{BlobGroup, ItemMeta};
use crate::resource_url::ResourceUrl;

/// One item. `etag` only for single-item metadata and write responses, not
/// in listings; `contentLength`/`contentType` for files.
pub fn item_json(url: &ResourceUrl, group: BlobGroup, meta: &ItemMeta, with_etag: bool) -> Value {
    let mut node = base(url, group, "ITEM");
    node.insert("createdAt".into(), json!(meta.created_at));
    node.insert("updatedAt".into(), json!(meta.updated_at));
    if with_etag {
        node.insert("etag".into(), json!(meta.etag));
    }
    if group == BlobGroup::Files {
        node.insert("contentLength".into(), json!(meta.content_length));
        node.insert("contentType".into(), json!(meta.content_type));
    }
    if let Some(author) = &meta.author {
        node.insert("author".into(), json!(author));
    }
    Value::Object(node)
}

/// A folder with one page of its children (or, with `recursive`, of every
/// item below it).
pub fn folder_json(url: &ResourceUrl, group: BlobGroup, listing: &Listing) -> Value {
    let mut node = base(url, group, "FOLDER");
    let items: Vec<Value> = listing.items.iter().map(|listed| listed_json(listed, group)).collect();
    node.insert("items".into(), Value::Array(items));
    if let Some(token) = &listing.next_token {
        node.insert("nextToken".into(), json!(token));
    }
    Value::Object(node)
}

fn listed_json(listed: &Listed, group: BlobGroup) -> Value {
    match listed {
        Listed::Item { url, meta } => item_json(url, group, meta, false),
        Listed::Folder { url } => {
            let mut node = base(url, group, "FOLDER");
            node.insert("items".into(), Value::Null);
            Value::Object(node)
        }
    }
}

fn base(url: &ResourceUrl, group: BlobGroup, node_type: &str) -> Map<String, Value> {
    let mut node = Map::new();
    if let Some(name) = url.name() {
        node.insert("name".into(), json!(name));
    }
    if let Some(parent) = url.parent_path() {
        node.insert("parentPath".into(), json!(parent));
    }
    node.insert("bucket".into(), json!(url.bucket()));
    node.insert("url".into(), json!(url.to_string()));
    node.insert("nodeType".into(), json!(node_type));
    node.insert("resourceType".into(), json!(group.resource_type()));
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource_url::Intent;

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
            item_json(&url, BlobGroup::Files, &meta(), true),
            json!({
                "name": "a b.txt", "parentPath": "dir", "bucket": "b", "url": "files/b/dir/a%20b.txt",
                "nodeType": "ITEM", "resourceType": "FILE", "createdAt": 1, "updatedAt": 2, "etag": "e",
                "contentLength": 3, "contentType": "text/plain",
            })
        );
        let url = ResourceUrl::parse("prompts/b/p", Intent::Read).unwrap();
        assert_eq!(
            item_json(&url, BlobGroup::Prompts, &meta(), false),
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
        let listing = Listing {
            items: vec![Listed::Folder { url: child }, Listed::Item { url: item, meta: meta() }],
            next_token: Some("t".into()),
        };
        assert_eq!(
            folder_json(&root, BlobGroup::Conversations, &listing),
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
