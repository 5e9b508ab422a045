//! The one parser of resource URLs: `<group>/<bucket>/<seg1>/…/<segN>[/]`.
//!
//! It works on the raw, still percent-encoded text after the API prefix
//! (`/v1/`, `/v2/metadata/`, …), decodes and validates every segment the way
//! DIAL Core does, and renders the canonical form used in every `url` field
//! of a response. Resolving the bucket to a storage location is the bucket
//! codec's job ([`crate::buckets`]); the storage-path length limit needs that
//! location and is checked by [`ResourceUrl::storage_path`].

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Longest absolute storage path (location + group + path), in UTF-8 bytes.
pub const MAX_STORAGE_PATH_BYTES: usize = 900;

/// The literal bucket everyone may read according to publication rules.
pub const PUBLIC_BUCKET: &str = "public";

/// What is left unescaped in a canonical path segment: RFC 3986 unreserved
/// characters, sub-delimiters, `:` and `@` (Guava's path-segment escaper,
/// which is what DIAL Core uses).
pub const SEGMENT_ESCAPES: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// Whether the URL is about to be written: writes also reject names ending
/// in `.` (object stores such as Azure cannot hold them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Read,
    Write,
}

/// A parsed, validated resource URL. Segments are stored decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceUrl {
    group: String,
    bucket: String,
    segments: Vec<String>,
    folder: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("Url must start with resource/bucket/, but: {0}")]
    MissingBucket(String),
    #[error("Invalid bucket in url: {0}")]
    BadBucketSyntax(String),
    #[error("Invalid resource group in url: {0}")]
    BadGroup(String),
    #[error("Invalid path provided {url}: {reason}")]
    BadSegment { url: String, reason: &'static str },
    #[error("Resource name and/or parent folders must not end with .(dot): {0}")]
    TrailingDot(String),
    #[error("Resource path exceeds max allowed size: {MAX_STORAGE_PATH_BYTES}")]
    TooLong,
}

impl ResourceUrl {
    /// Parses `<group>/<bucket>/<path>` as it appears in a request path or a
    /// JSON body (still percent-encoded).
    pub fn parse(raw: &str, intent: Intent) -> Result<Self, UrlError> {
        if raw.starts_with('/') {
            return Err(UrlError::BadSegment { url: raw.into(), reason: "must not start with /" });
        }
        let mut parts = raw.splitn(3, '/');
        let group = parts.next().unwrap_or_default();
        let bucket = parts.next().unwrap_or_default();
        let Some(path) = parts.next() else {
            return Err(UrlError::MissingBucket(raw.into()));
        };
        if group.is_empty() || !group.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(UrlError::BadGroup(raw.into()));
        }
        if bucket.is_empty() || !bucket.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(UrlError::BadBucketSyntax(raw.into()));
        }

        let folder = path.is_empty() || path.ends_with('/');
        let body = path.strip_suffix('/').unwrap_or(path);
        let mut segments = Vec::new();
        // `group/bucket/` is the root; `group/bucket//` has an empty segment.
        if !path.is_empty() {
            for raw_segment in body.split('/') {
                segments.push(decode_segment(raw, raw_segment)?);
            }
        }
        if intent == Intent::Write && segments.iter().any(|s| s.ends_with('.')) {
            return Err(UrlError::TrailingDot(raw.into()));
        }
        Ok(Self { group: group.into(), bucket: bucket.into(), segments, folder })
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    /// The bucket id as written (`public` or an encrypted id).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn is_public(&self) -> bool {
        self.bucket == PUBLIC_BUCKET
    }

    /// Decoded path segments below the bucket.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// A folder URL ends in `/`; the bucket root is a folder.
    pub fn is_folder(&self) -> bool {
        self.folder
    }

    pub fn is_bucket_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// Last decoded segment; `None` for the bucket root.
    pub fn name(&self) -> Option<&str> {
        self.segments.last().map(String::as_str)
    }

    /// Decoded parent path (`a/b` for `a/b/c`), `None` at the top level.
    pub fn parent_path(&self) -> Option<String> {
        match self.segments.len() {
            0 | 1 => None,
            n => Some(self.segments[..n - 1].join("/")),
        }
    }

    /// Decoded path below the bucket, without a trailing `/`.
    pub fn decoded_path(&self) -> String {
        self.segments.join("/")
    }

    /// The same path named as an item (no trailing `/`); `None` for the
    /// bucket root.
    pub fn as_item(&self) -> Option<Self> {
        (!self.segments.is_empty()).then(|| Self { folder: false, ..self.clone() })
    }

    /// The parent folder's URL; `None` for the bucket root.
    pub fn parent(&self) -> Option<Self> {
        let (_, rest) = self.segments.split_last()?;
        Some(Self { group: self.group.clone(), bucket: self.bucket.clone(), segments: rest.to_vec(), folder: true })
    }

    /// A child of this folder (`segment` is a decoded, valid segment).
    pub fn child(&self, segment: &str, folder: bool) -> Result<Self, UrlError> {
        // The URL is formatted only for an error: listings make a child per entry.
        validate_segment(segment).map_err(|reason| UrlError::BadSegment { url: self.to_string(), reason })?;
        let mut segments = self.segments.clone();
        segments.push(segment.into());
        Ok(Self { group: self.group.clone(), bucket: self.bucket.clone(), segments, folder })
    }

    /// `<location><group>/<decoded path>[/]`, the key in the object store,
    /// checked against [`MAX_STORAGE_PATH_BYTES`]. `location` ends in `/`.
    pub fn storage_path(&self, location: &str) -> Result<String, UrlError> {
        let mut path = format!("{location}{}/{}", self.group, self.decoded_path());
        if self.folder && !self.segments.is_empty() {
            path.push('/');
        }
        if path.len() > MAX_STORAGE_PATH_BYTES {
            return Err(UrlError::TooLong);
        }
        Ok(path)
    }
}

/// Canonical form: every segment re-encoded, trailing `/` for folders.
impl fmt::Display for ResourceUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/", self.group, self.bucket)?;
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "{}", utf8_percent_encode(segment, SEGMENT_ESCAPES))?;
        }
        if self.folder && !self.segments.is_empty() {
            f.write_str("/")?;
        }
        Ok(())
    }
}

fn decode_segment(url: &str, raw_segment: &str) -> Result<String, UrlError> {
    let bad = |reason| UrlError::BadSegment { url: url.into(), reason };
    if raw_segment.contains(['?', '#']) {
        return Err(bad("query and fragment are not allowed in a resource path"));
    }
    // `+` stays a plus: this is a path, not a form.
    let decoded = percent_decode_str(raw_segment).decode_utf8().map_err(|_| bad("segment is not valid UTF-8"))?;
    validate_segment(&decoded).map_err(bad)?;
    Ok(decoded.into_owned())
}

/// Why `segment` cannot be one, if it cannot.
fn validate_segment(segment: &str) -> Result<(), &'static str> {
    if segment.is_empty() {
        return Err("empty segment");
    }
    if segment.contains('/') {
        return Err("a segment must not contain /");
    }
    // Never a name (writes refuse names ending in `.`), and clients and
    // proxies would resolve them: refused on reads too.
    if segment == "." || segment == ".." {
        return Err("a . or .. segment is not allowed");
    }
    if segment.contains(['{', '}']) {
        return Err("a segment must not contain { or }");
    }
    if segment.chars().any(char::is_control) {
        return Err("a segment must not contain control characters");
    }
    Ok(())
}

/// Which listed nodes a listing may show, by URL (listings page over what it
/// admits, so hidden names never reach a page or a token).
pub type Shows<'a> = dyn Fn(&ResourceUrl) -> bool + Send + Sync + 'a;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<ResourceUrl, UrlError> {
        ResourceUrl::parse(raw, Intent::Read)
    }

    #[test]
    fn item_and_folder() {
        let item = parse("files/abc123/folder/file.txt").unwrap();
        assert_eq!(item.group(), "files");
        assert_eq!(item.bucket(), "abc123");
        assert_eq!(item.segments(), ["folder", "file.txt"]);
        assert!(!item.is_folder());
        assert_eq!(item.name(), Some("file.txt"));
        assert_eq!(item.parent_path().as_deref(), Some("folder"));
        assert_eq!(item.to_string(), "files/abc123/folder/file.txt");

        let folder = parse("skills/abc123/team/").unwrap();
        assert!(folder.is_folder());
        assert_eq!(folder.segments(), ["team"]);
        assert_eq!(folder.parent_path(), None);
        assert_eq!(folder.to_string(), "skills/abc123/team/");
    }

    #[test]
    fn bucket_root() {
        let root = parse("prompts/public/").unwrap();
        assert!(root.is_bucket_root() && root.is_folder() && root.is_public());
        assert_eq!(root.name(), None);
        assert_eq!(root.to_string(), "prompts/public/");
        assert_eq!(root.parent(), None);
    }

    #[test]
    fn bucket_is_required() {
        assert_eq!(parse("files/abc"), Err(UrlError::MissingBucket("files/abc".into())));
        assert!(matches!(parse("files"), Err(UrlError::MissingBucket(_))));
        assert!(matches!(parse(""), Err(UrlError::MissingBucket(_))));
        assert!(matches!(parse("files//x"), Err(UrlError::BadBucketSyntax(_))));
        assert!(matches!(parse("files/ab-c/x"), Err(UrlError::BadBucketSyntax(_))));
        assert!(matches!(parse("files/ab%41/x"), Err(UrlError::BadBucketSyntax(_))));
        assert!(matches!(parse("/files/abc/x"), Err(UrlError::BadSegment { .. })));
        assert!(matches!(parse("fi.les/abc/x"), Err(UrlError::BadGroup(_))));
    }

    #[test]
    fn segments_are_decoded_and_reencoded_canonically() {
        let url = parse("conversations/b1/conversation%201%40").unwrap();
        assert_eq!(url.name(), Some("conversation 1@"));
        assert_eq!(url.to_string(), "conversations/b1/conversation%201@");

        let url = parse("files/b1/a+b/%E6%8A%80%E8%83%BD/%21%24%26").unwrap();
        assert_eq!(url.segments(), ["a+b", "技能", "!$&"]);
        assert_eq!(url.to_string(), "files/b1/a+b/%E6%8A%80%E8%83%BD/!$&");

        let url = parse("files/b1/%3F%23%25%22%20x").unwrap();
        assert_eq!(url.name(), Some("?#%\" x"));
        assert_eq!(url.to_string(), "files/b1/%3F%23%25%22%20x");
    }

    #[test]
    fn canonical_form_is_a_fixed_point() {
        for raw in ["files/b/a%20b/c", "skills/b/x%40y/", "prompts/public/%E2%82%AC%2B"] {
            let once = parse(raw).unwrap().to_string();
            assert_eq!(parse(&once).unwrap().to_string(), once);
        }
    }

    #[test]
    fn invalid_segments() {
        for raw in [
            "files/b/a//c",   // empty segment
            "files/b/a%2Fb",  // encoded slash
            "files/b/a%7Bb",  // {
            "files/b/a}b",    // }
            "files/b/a%0Ab",  // control
            "files/b/a%7Fb",  // DEL
            "files/b/%FF",    // not UTF-8
            "files/b/a?x=1",  // query
            "files/b/a#frag", // fragment
            "files/b//",      // empty segment before the folder slash
            "files/b/../x",   // dot segments, plain or encoded
            "files/b/a/.",
            "files/b/%2E%2E/x",
        ] {
            assert!(matches!(parse(raw), Err(UrlError::BadSegment { .. })), "{raw} should be rejected");
        }
    }

    #[test]
    fn trailing_dot_rejected_only_on_write() {
        assert!(parse("files/b/name.").is_ok());
        assert_eq!(
            ResourceUrl::parse("files/b/name.", Intent::Write),
            Err(UrlError::TrailingDot("files/b/name.".into()))
        );
        assert!(matches!(ResourceUrl::parse("files/b/dir./x", Intent::Write), Err(UrlError::TrailingDot(_))));
        assert!(ResourceUrl::parse("files/b/.hidden", Intent::Write).is_ok());
    }

    #[test]
    fn storage_path_and_its_limit() {
        let url = parse("files/b/a%20b/c").unwrap();
        assert_eq!(url.storage_path("Users/u1/").unwrap(), "Users/u1/files/a b/c");
        let folder = parse("skills/b/team/").unwrap();
        assert_eq!(folder.storage_path("public/").unwrap(), "public/skills/team/");
        assert_eq!(parse("skills/b/").unwrap().storage_path("public/").unwrap(), "public/skills/");

        let location = "Users/u/";
        let prefix = location.len() + "files/".len();
        let fits = format!("files/b/{}", "x".repeat(MAX_STORAGE_PATH_BYTES - prefix));
        assert!(parse(&fits).unwrap().storage_path(location).is_ok());
        let too_long = format!("files/b/{}", "x".repeat(MAX_STORAGE_PATH_BYTES - prefix + 1));
        assert_eq!(parse(&too_long).unwrap().storage_path(location), Err(UrlError::TooLong));
        // The limit counts UTF-8 bytes, not characters.
        let multibyte = format!("files/b/{}", "%C3%A9".repeat((MAX_STORAGE_PATH_BYTES - prefix) / 2 + 1));
        assert_eq!(parse(&multibyte).unwrap().storage_path(location), Err(UrlError::TooLong));
    }

    #[test]
    fn parent_and_child() {
        let url = parse("skills/b/team/nested/my-skill").unwrap();
        let parent = url.parent().unwrap();
        assert_eq!(parent.to_string(), "skills/b/team/nested/");
        assert_eq!(parent.child("my-skill", false).unwrap(), url);
        assert!(parent.child("a/b", false).is_err());
        assert!(parent.child("", true).is_err());
    }
}
