//! How resource answers are written: the request path handed to the URL
//! parser, the `ETag` header, metadata JSON with DIAL's content type, and
//! the headers of a stored file served to a client.

use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

/// The request path after `prefix`, still percent-encoded: resource routes
/// hand it to the one URL parser as it came.
pub(super) fn raw_path<'a>(uri: &'a axum::http::Uri, prefix: &str) -> &'a str {
    uri.path().strip_prefix(prefix).unwrap_or_default()
}

/// Adds the `ETag` header DIAL clients read after every read and write.
/// A metadata request whose `Accept` names this gets it as the content type.
const METADATA_MIME: &str = "application/vnd.dial.metadata+json";

/// A metadata answer (v1 and v2) as DIAL gives it: JSON, typed
/// `application/vnd.dial.metadata+json` when the request's `Accept` names
/// that, else `application/json`.
pub(super) fn metadata_response(request: &HeaderMap, body: &super::wire::Node) -> Response {
    let accepts_metadata_mime = request
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| accept.contains(METADATA_MIME));
    let content_type = if accepts_metadata_mime { METADATA_MIME } else { "application/json" };
    let body = serde_json::to_vec(body).expect("a node serializes");
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

pub(super) fn with_etag(mut response: axum::response::Response, etag: &str) -> axum::response::Response {
    if let Ok(value) = axum::http::HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// The headers of a stored file served to a client. A file's bytes are the
/// uploader's, so they are never rendered as a page of the API's origin:
/// `nosniff` and a sandboxing CSP always, and `attachment` for types a
/// browser would execute (HTML, SVG, XML, scripts).
pub(super) fn file_headers(content_type: &str, length: u64) -> [(header::HeaderName, String); 5] {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let active = ["html", "xml", "svg", "javascript", "ecmascript"].iter().any(|kind| essence.contains(kind));
    [
        (header::CONTENT_TYPE, content_type.to_string()),
        (header::CONTENT_LENGTH, length.to_string()),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".into()),
        (header::CONTENT_SECURITY_POLICY, "sandbox".into()),
        (header::CONTENT_DISPOSITION, if active { "attachment" } else { "inline" }.into()),
    ]
}

/// A small table: the common types of skill files; everything else is bytes.
pub(super) fn content_type_of(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "md" => "text/markdown; charset=utf-8",
        "txt" | "py" | "sh" | "js" | "ts" | "rs" | "toml" | "yaml" | "yml" | "csv" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "html" | "htm" => "text/html; charset=utf-8",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}
