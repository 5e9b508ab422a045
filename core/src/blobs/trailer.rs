//! The metadata of a v1 item, kept inside the item's own object, after the
//! content:
//!
//! ```text
//! content ‖ metadata JSON ‖ JSON length (u64, big-endian) ‖ MAGIC (8 bytes)
//! ```
//!
//! One object holds both, so one put (or one multipart completion) writes
//! both at once: a reader never sees content without its metadata, and the
//! embedded default store (the local filesystem) needs no object attributes,
//! which it refuses. Readers fetch a suffix of the object, parse the footer,
//! and then stream the content range `0..content_length`.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

/// Ends every v1 object; anything else under a v1 group is not an item.
pub const MAGIC: &[u8; 8] = b"DHBLOB\x00\x01";
/// JSON length + magic.
pub const FOOTER_LEN: u64 = 16;
/// How much of an object's end a reader fetches first: the footer and, for
/// any realistic metadata, the JSON too (so one ranged read is enough).
pub const TAIL_PROBE: u64 = 4096;
/// Metadata larger than this is not ours (a content type is capped well below).
pub const MAX_META_BYTES: u64 = 64 << 10;

/// What the store keeps about one item besides its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemMeta {
    /// MD5 hex of the content.
    pub etag: String,
    pub content_length: u64,
    pub content_type: String,
    /// Epoch milliseconds of the first write; kept by later writes.
    pub created_at: i64,
    /// Epoch milliseconds of the last write.
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

impl ItemMeta {
    /// What one held in memory costs, as a listing cache counts it.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.etag.len()
            + self.content_type.len()
            + self.author.as_ref().map_or(0, String::len)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrailerError {
    #[error("object of {0} bytes is too short to hold item metadata")]
    TooShort(u64),
    #[error("object does not end with the item-metadata magic")]
    BadMagic,
    #[error("item metadata length {length} does not fit an object of {size} bytes")]
    BadLength { length: u64, size: u64 },
    #[error("item metadata is not valid: {0}")]
    BadJson(String),
    #[error("item metadata says {content} content bytes, but the object holds {actual}")]
    SizeMismatch { content: u64, actual: u64 },
}

/// The bytes appended after the content.
pub fn encode(meta: &ItemMeta) -> Bytes {
    let json = serde_json::to_vec(meta).expect("item metadata always serialises");
    let mut out = BytesMut::with_capacity(json.len() + FOOTER_LEN as usize);
    out.put_slice(&json);
    out.put_u64(json.len() as u64);
    out.put_slice(MAGIC);
    out.freeze()
}

/// The result of looking at the last bytes of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// The whole metadata was in the bytes read.
    Complete(ItemMeta),
    /// The metadata is longer than what was read: fetch this range and pass
    /// it to [`decode_meta`].
    NeedRange(Range<u64>),
}

/// Parses `tail`, the last `tail.len()` bytes of an object of `size` bytes.
pub fn parse_tail(tail: &[u8], size: u64) -> Result<Tail, TrailerError> {
    let json_range = json_range(tail, size)?;
    let tail_start = size - tail.len() as u64;
    if json_range.start < tail_start {
        return Ok(Tail::NeedRange(json_range));
    }
    let from = (json_range.start - tail_start) as usize;
    let to = (json_range.end - tail_start) as usize;
    decode_meta(&tail[from..to], size).map(Tail::Complete)
}

/// Where the JSON sits, from the footer at the end of `tail`.
fn json_range(tail: &[u8], size: u64) -> Result<Range<u64>, TrailerError> {
    if size < FOOTER_LEN || (tail.len() as u64) < FOOTER_LEN || tail.len() as u64 > size {
        return Err(TrailerError::TooShort(size));
    }
    let footer = &tail[tail.len() - FOOTER_LEN as usize..];
    if &footer[8..] != MAGIC {
        return Err(TrailerError::BadMagic);
    }
    let length = u64::from_be_bytes(footer[..8].try_into().expect("8 bytes"));
    if length > MAX_META_BYTES || length > size - FOOTER_LEN {
        return Err(TrailerError::BadLength { length, size });
    }
    let end = size - FOOTER_LEN;
    Ok(end - length..end)
}

/// Parses the metadata JSON of an object of `size` bytes and checks that it
/// accounts for every byte of the object.
pub fn decode_meta(json: &[u8], size: u64) -> Result<ItemMeta, TrailerError> {
    let meta: ItemMeta = serde_json::from_slice(json).map_err(|e| TrailerError::BadJson(e.to_string()))?;
    let actual = size - FOOTER_LEN - json.len() as u64;
    if meta.content_length != actual {
        return Err(TrailerError::SizeMismatch { content: meta.content_length, actual });
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(content_length: u64, content_type: &str) -> ItemMeta {
        ItemMeta {
            etag: "d41d8cd98f00b204e9800998ecf8427e".into(),
            content_length,
            content_type: content_type.into(),
            created_at: 1,
            updated_at: 2,
            author: Some("alice".into()),
        }
    }

    fn object(content: &[u8], meta: &ItemMeta) -> Vec<u8> {
        let mut bytes = content.to_vec();
        bytes.extend_from_slice(&encode(meta));
        bytes
    }

    #[test]
    fn round_trip_when_the_tail_holds_everything() {
        let meta = meta(5, "text/plain");
        let bytes = object(b"hello", &meta);
        assert!(bytes.ends_with(MAGIC));
        let size = bytes.len() as u64;
        assert_eq!(parse_tail(&bytes, size), Ok(Tail::Complete(meta.clone())));
        // Only the end of the object: the content is not needed.
        let tail = &bytes[5..];
        assert_eq!(parse_tail(tail, size), Ok(Tail::Complete(meta)));
    }

    #[test]
    fn empty_content() {
        let meta = meta(0, "application/octet-stream");
        let bytes = object(b"", &meta);
        assert_eq!(parse_tail(&bytes, bytes.len() as u64), Ok(Tail::Complete(meta)));
    }

    #[test]
    fn long_metadata_asks_for_its_range() {
        let meta = meta(3, &"x".repeat(5000));
        let bytes = object(b"abc", &meta);
        let size = bytes.len() as u64;
        let tail = &bytes[bytes.len() - 100..];
        let Ok(Tail::NeedRange(range)) = parse_tail(tail, size) else { panic!("expected a range") };
        assert_eq!(range.start, 3);
        assert_eq!(range.end, size - FOOTER_LEN);
        let json = &bytes[range.start as usize..range.end as usize];
        assert_eq!(decode_meta(json, size), Ok(meta));
    }

    #[test]
    fn foreign_and_damaged_objects_are_rejected() {
        assert_eq!(parse_tail(b"", 0), Err(TrailerError::TooShort(0)));
        assert_eq!(parse_tail(b"short", 5), Err(TrailerError::TooShort(5)));
        assert_eq!(parse_tail(b"just some plain file content", 28), Err(TrailerError::BadMagic));

        let meta = meta(5, "text/plain");
        let mut bytes = object(b"hello", &meta);
        let size = bytes.len() as u64;
        // A length pointing before the start of the object.
        let at = bytes.len() - 16;
        bytes[at..at + 8].copy_from_slice(&(size * 2).to_be_bytes());
        assert!(matches!(parse_tail(&bytes, size), Err(TrailerError::BadLength { .. })));

        // Content appended or cut: the sizes no longer add up.
        let mut grown = b"hello!".to_vec();
        grown.extend_from_slice(&encode(&meta));
        assert_eq!(parse_tail(&grown, grown.len() as u64), Err(TrailerError::SizeMismatch { content: 5, actual: 6 }));

        // Garbage where the JSON should be.
        let mut garbage = b"hello".to_vec();
        garbage.extend_from_slice(b"{not json");
        garbage.extend_from_slice(&9u64.to_be_bytes());
        garbage.extend_from_slice(MAGIC);
        assert!(matches!(parse_tail(&garbage, garbage.len() as u64), Err(TrailerError::BadJson(_))));
    }

    #[test]
    fn metadata_json_is_camel_case_and_omits_a_missing_author() {
        let mut meta = meta(1, "image/png");
        meta.author = None;
        let json = serde_json::to_value(&meta).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "etag": "d41d8cd98f00b204e9800998ecf8427e",
                "contentLength": 1,
                "contentType": "image/png",
                "createdAt": 1,
                "updatedAt": 2,
            })
        );
    }
}
