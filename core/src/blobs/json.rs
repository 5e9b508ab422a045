//! Checking v1 JSON bodies and file content types: UTF-8 JSON whatever the
//! request says, applications normalised and validated, large bodies parsed
//! on the blocking pool a few at a time.

use bytes::Bytes;
use serde_json::value::RawValue;

use super::application::normalize_application;
use super::service::BlobService;
use super::{BlobError, BlobGroup};
use crate::dependencies::DeclarationPolicy;

/// Longest content type kept for a file.
const MAX_CONTENT_TYPE_BYTES: usize = 256;
/// Content type of a file part that names none.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";
/// Content type of JSON resources.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// A JSON body at least this large waits for a parse permit (see
/// `BlobService::large_parses`); smaller ones parse at once.
const LARGE_JSON_BYTES: usize = 1 << 20;

impl BlobService {
    /// The content to store for a JSON body: checked (and for applications,
    /// normalised) on a blocking thread, since a large body takes a while;
    /// a large one first waits for a permit of [`Self::large_parses`].
    pub(super) async fn check_json(
        &self,
        group: BlobGroup,
        body: Bytes,
        policy: DeclarationPolicy,
    ) -> Result<Bytes, BlobError> {
        let permit = match body.len() >= LARGE_JSON_BYTES {
            true => Some(self.large_parses.clone().acquire_owned().await.expect("the semaphore is never closed")),
            false => None,
        };
        tokio::task::spawn_blocking(move || {
            // Held by the parse, not the request: a client that goes away
            // does not free the permit of a parse still running.
            let _permit = permit;
            json_content(group, body, &policy)
        })
        .await
        .expect("checking a JSON body panicked")
    }
}

/// A JSON body as stored: prompts and conversations as sent, applications
/// in their normalised form. UTF-8 is checked first and whole: the parser
/// skips over the strings of a document it does not build, unchecked.
fn json_content(group: BlobGroup, body: Bytes, policy: &DeclarationPolicy) -> Result<Bytes, BlobError> {
    let text = std::str::from_utf8(&body).map_err(|error| {
        BlobError::BadRequest(format!(
            "Failed to parse json: the body is not valid UTF-8 (byte {})",
            error.valid_up_to()
        ))
    })?;
    match group {
        BlobGroup::Applications => {
            let definition: &RawValue = parse_json(text)?;
            Ok(Bytes::from(normalize_application(definition, policy)?))
        }
        _ => {
            let _: serde::de::IgnoredAny = parse_json(text)?;
            Ok(body)
        }
    }
}

fn parse_json<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Result<T, BlobError> {
    serde_json::from_str(text).map_err(|e| BlobError::BadRequest(format!("Failed to parse json: {e}")))
}

/// A file part's content type, kept as given when it is a plausible one.
pub(super) fn check_content_type(content_type: Option<&str>) -> Result<String, BlobError> {
    let Some(value) = content_type.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_CONTENT_TYPE.into());
    };
    let printable = value.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
    if !printable || value.len() > MAX_CONTENT_TYPE_BYTES || !value.contains('/') {
        return Err(BlobError::BadRequest(format!("Invalid content type: {value}")));
    }
    Ok(value.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(check_content_type(None).unwrap(), DEFAULT_CONTENT_TYPE);
        assert_eq!(check_content_type(Some("image/png")).unwrap(), "image/png");
        assert_eq!(check_content_type(Some("text/plain; charset=utf-8")).unwrap(), "text/plain; charset=utf-8");
        assert!(check_content_type(Some("bad\nvalue/x")).is_err());
        assert!(check_content_type(Some("noslash")).is_err());
    }
}
