//! `GET /admin`: the admin console — one page whose script and style are
//! embedded in the binary and inlined into it (no build step, no framework,
//! nothing fetched at run time but the API).
//!
//! The console has no powers of its own: the script signs in with an API
//! key or JWT held in the tab (`sessionStorage`, never a cookie, so there is
//! no CSRF surface) and does everything through the documented API routes
//! with the caller's own credential, so every access check is the API's. A
//! non-admin sees what the API gives them. The page holds no data.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

const PAGE: &str = include_str!("console/index.html");
const STYLE: &str = include_str!("console/console.css");

/// The script's parts, in order: one strict function scope holds them all
/// (functions of later parts are called only once the page has loaded).
const SCRIPT_PARTS: [&str; 10] = [
    include_str!("console/base.js"),
    include_str!("console/compare.js"),
    include_str!("console/markdown.js"),
    include_str!("console/publications.js"),
    include_str!("console/rules.js"),
    include_str!("console/public.js"),
    include_str!("console/applications.js"),
    include_str!("console/handlers.js"),
    include_str!("console/history.js"),
    include_str!("console/main.js"),
];

static SCRIPT: LazyLock<String> =
    LazyLock::new(|| format!("'use strict';\n(() => {{\n{}}})();\n", SCRIPT_PARTS.join("\n")));

/// The page with its script and style inlined, and the policy that admits
/// exactly those two by their SHA-256 — not `'self'`, which would also
/// admit a user's uploaded file served from this origin as a script. What
/// the page renders from the API (SKILL.md, file contents, names) is built
/// as DOM text; the policy is the second wall, should that ever slip.
static CONSOLE: LazyLock<(String, String)> = LazyLock::new(|| {
    let hash = |text: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()));
    let page = PAGE.replace("/*STYLE*/", STYLE).replace("/*SCRIPT*/", &SCRIPT);
    let policy = format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; connect-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash(&SCRIPT),
        hash(STYLE)
    );
    (page, policy)
});

/// `GET /admin`: the console.
#[utoipa::path(get, path = "/admin", tag = "service", security(()),
    responses((status = 200, description = "The admin console (HTML; it signs in with a key or JWT held in the tab)",
        content_type = "text/html")))]
pub async fn page() -> Response {
    let (page, policy) = &*CONSOLE;
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, policy.as_str()),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    (headers, page.as_str()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The markers are replaced once each, and the inlined script and style
    /// are byte for byte what the policy's hashes were computed over (a
    /// browser hashes the text between the tags).
    #[test]
    fn the_page_inlines_exactly_what_the_policy_admits() {
        let (page, policy) = &*CONSOLE;
        assert_eq!(PAGE.matches("/*SCRIPT*/").count(), 1);
        assert_eq!(PAGE.matches("/*STYLE*/").count(), 1);
        assert!(page.contains(&format!("<script>{}</script>", *SCRIPT)));
        assert!(page.contains(&format!("<style>{STYLE}</style>")));
        assert!(!policy.contains("'self'; style") && !policy.contains("script-src 'self'"), "{policy}");
        assert!(!SCRIPT.contains("</script") && !STYLE.contains("</style"), "an asset would end its own tag");
        assert!(SCRIPT_PARTS.iter().all(|part| part.len() < 40_000), "parts stay small enough to read");
    }
}
