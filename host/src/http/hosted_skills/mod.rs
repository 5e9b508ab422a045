//! The hosted skills APIs (SPEC §12): Anthropic's under `/anthropic/v1/skills`
//! and OpenAI's under `/openai/v1/skills`, so each official SDK works with
//! only its `base_url` and key changed. Both are views of the same v2 skill
//! resources ([`crate::hosted_skills`]); each module here renders its API's
//! objects, pages and errors, and [`upload`] reads the uploads both send.

pub mod anthropic;
pub mod openai;
mod upload;

use std::collections::HashMap;
use std::time::UNIX_EPOCH;

use axum::body::Body;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, Dialect};
use super::state::AppState;
use crate::hosted_skills::{SKILLS_GROUP, Skill, SkillVersion, VERSION_ID_PREFIX, VersionRef, shown};
use upload::{UploadTerms, ZipLimits};

/// Query parameters (unknown ones are ignored, as the hosted APIs do).
type Params = HashMap<String, String>;

/// The route's answer, or its error in the API's dialect.
fn answer(dialect: Dialect, result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(|error| dialect.render(error))
}

/// Any other route or method under `/anthropic/v1/`: 404 (405 on a known
/// path) in Anthropic's error shape, so the SDK shows what was wrong.
pub async fn anthropic_unknown(method: Method, uri: Uri) -> Response {
    Dialect::Anthropic.render(unknown_route(&method, &uri))
}

/// Any other route or method under `/openai/v1/`, in OpenAI's error shape.
pub async fn openai_unknown(method: Method, uri: Uri) -> Response {
    Dialect::OpenAi.render(unknown_route(&method, &uri))
}

/// The skills APIs' paths, each as a pattern of segments (`*` one id).
const ROUTES: &[&str] = &[
    "skills",
    "skills/*",
    "skills/*/content",
    "skills/*/versions",
    "skills/*/versions/*",
    "skills/*/versions/*/content",
];

fn unknown_route(method: &Method, uri: &Uri) -> ApiError {
    let path = uri.path();
    let (prefix, rest) = match path.strip_prefix("/anthropic/v1/") {
        Some(rest) => ("/anthropic/v1", rest),
        None => ("/openai/v1", path.strip_prefix("/openai/v1/").unwrap_or_default()),
    };
    let segments: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let known = ROUTES.iter().any(|route| {
        let pattern: Vec<&str> = route.split('/').collect();
        pattern.len() == segments.len() && pattern.iter().zip(&segments).all(|(p, s)| *p == "*" || p == s)
    });
    let shown = shown(path);
    if known {
        return ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not a method of {shown}"))
            .permanent();
    }
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "No route {method} {shown}: this host serves the skills API under {prefix}/skills, nothing else of {prefix}"
        ),
    )
    .permanent()
}

/// `limit` of a list: `default` when absent, within `1..=max`.
fn limit(params: &Params, default: usize, max: usize) -> Result<usize, ApiError> {
    match params.get("limit") {
        None => Ok(default),
        Some(raw) => {
            raw.parse::<usize>().ok().filter(|limit| (1..=max).contains(limit)).ok_or_else(|| {
                ApiError::bad_request(format!("limit must be a whole number from 1 to {max}, not {raw:?}"))
            })
        }
    }
}

/// One page of `items` after the item whose id is `after` (absent: from the
/// start). An `after` no longer listed (deleted meanwhile) resumes at the
/// first item `comes_after` it. Returns the page and whether more follow.
fn page_after<T>(
    items: Vec<T>,
    after: Option<&str>,
    limit: usize,
    id_of: impl Fn(&T) -> &str,
    comes_after: impl Fn(&T) -> bool,
) -> (Vec<T>, bool) {
    let start = match after {
        None => 0,
        Some(after) => match items.iter().position(|item| id_of(item) == after) {
            Some(index) => index + 1,
            None => items.iter().position(comes_after).unwrap_or(items.len()),
        },
    };
    let more = items.len() > start + limit;
    (items.into_iter().skip(start).take(limit).collect(), more)
}

/// A page of `skill`'s versions (newest first, or oldest first when
/// `ascending`) after the version `after`; one gone since resumes by its id,
/// which sorts by commit time. Anything but a version id is 400.
fn versions_page(
    skill: &Skill,
    after: Option<&str>,
    limit: usize,
    ascending: bool,
) -> Result<(Vec<SkillVersion>, bool), ApiError> {
    if let Some(after) = after.filter(|after| !after.starts_with(VERSION_ID_PREFIX)) {
        return Err(bad_cursor(after));
    }
    let mut versions = skill.versions().to_vec();
    if ascending {
        versions.reverse();
    }
    Ok(page_after(
        versions,
        after,
        limit,
        |v| v.id.as_str(),
        |v| match after {
            Some(after) if ascending => v.id.as_str() > after,
            Some(after) => v.id.as_str() < after,
            None => false,
        },
    ))
}

fn bad_cursor(cursor: &str) -> ApiError {
    let cursor = shown(cursor);
    ApiError::bad_request(format!("{cursor:?} is no page of this list: pass the id the page before ended with"))
}

/// A version as a path segment names it: `latest`, `skillver_…`, a
/// 16-digit epoch (Anthropic's beta) or a number (OpenAI).
fn version_ref(raw: &str) -> VersionRef {
    if raw == "latest" {
        return VersionRef::Latest;
    }
    if raw.len() >= 13 && raw.bytes().all(|b| b.is_ascii_digit()) {
        return raw.parse().map(VersionRef::Epoch).unwrap_or_else(|_| VersionRef::Id(raw.to_string()));
    }
    match raw.parse::<u64>() {
        Ok(number) => VersionRef::Number(number),
        Err(_) => VersionRef::Id(raw.to_string()),
    }
}

/// The archive of a version, as both APIs download it.
fn zip_answer(
    name: &str,
    body: futures_util::stream::BoxStream<'static, Result<bytes::Bytes, std::io::Error>>,
) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "application/zip".to_string()),
        (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}.zip\"", name.replace('"', ""))),
    ];
    (StatusCode::OK, headers, Body::from_stream(body)).into_response()
}

/// What an upload by `caller` may be: a zip of the skill type's total size
/// plus room for the archive's own headers, with four entries per file the
/// type allows plus a thousand (folders, `__MACOSX/` forks); and, for an
/// application, bound to its per-request key.
fn upload_terms(state: &AppState, caller: &crate::auth::Caller) -> UploadTerms {
    let limits = state.handlers().get(SKILLS_GROUP).map(|handler| state.folders().limits(&handler));
    let (total, files) = limits.map_or((0, 0), |limits| (limits.max_total_bytes, u64::from(limits.max_files)));
    let zip =
        ZipLimits { bytes: total.saturating_add(16 << 20), entries: files.saturating_mul(4).saturating_add(1000) };
    UploadTerms { zip, key: state.writing_key(caller) }
}

/// `name` and `description` of a version, as its SKILL.md says.
fn described(version: &SkillVersion, metadata: &indexmap::IndexMap<String, String>) -> (String, String) {
    let get = |key: &str| metadata.get(key).cloned().or_else(|| version.metadata(key).map(str::to_owned));
    (get("name").unwrap_or_default(), get("description").unwrap_or_default())
}

/// RFC 3339 in UTC with microseconds, from Unix milliseconds.
fn rfc3339(ms: i64) -> String {
    let since_epoch = std::time::Duration::from_millis(ms.unsigned_abs());
    let at = if ms >= 0 { UNIX_EPOCH + since_epoch } else { UNIX_EPOCH - since_epoch };
    humantime::format_rfc3339_micros(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(rfc3339(1_764_504_000_123), "2025-11-30T12:00:00.123000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn pages_resume_after_an_item_even_when_it_is_gone() {
        let items: Vec<(i32, String)> = [50, 40, 30, 20, 10].map(|n| (n, n.to_string())).into();
        let page = |after: Option<&str>, below: i32| {
            let (page, more) = page_after(items.clone(), after, 2, |item| item.1.as_str(), |item| item.0 < below);
            (page.into_iter().map(|item| item.0).collect::<Vec<_>>(), more)
        };
        assert_eq!(page(None, 0), (vec![50, 40], true));
        assert_eq!(page(Some("40"), 0), (vec![30, 20], true));
        assert_eq!(page(Some("20"), 0), (vec![10], false));
        // "35" was deleted: resume at the first item below it.
        assert_eq!(page(Some("35"), 35), (vec![30, 20], true));
    }

    #[test]
    fn versions_are_named_four_ways() {
        assert_eq!(version_ref("latest"), VersionRef::Latest);
        assert_eq!(version_ref("3"), VersionRef::Number(3));
        assert_eq!(version_ref("1759178010641129"), VersionRef::Epoch(1_759_178_010_641_129));
        assert_eq!(version_ref("skillver_01ab"), VersionRef::Id("skillver_01ab".into()));
        assert_eq!(version_ref("-1"), VersionRef::Id("-1".into()));
    }
}
