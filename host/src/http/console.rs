//! `GET /admin`: the admin console — one page, its script and its style,
//! embedded in the binary (no build step, nothing fetched at run time).
//!
//! The console has no powers of its own: the script signs in with an API
//! key or JWT held in the tab (`sessionStorage`, never a cookie, so there is
//! no CSRF surface) and does everything through the documented API routes
//! with the caller's own credential, so every access check is the API's. A
//! non-admin sees what the API gives them. The assets are public: they hold
//! no data.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

const PAGE: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// Scripts and styles from this origin's `/admin/` only, requests to this
/// origin only, no framing, no forms posting elsewhere: what the page
/// renders from the API (SKILL.md, file contents, names) is built as DOM
/// text, and this policy is the second wall should that ever slip.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                      img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    (headers, body).into_response()
}

/// `GET /admin`: the console's page.
#[utoipa::path(get, path = "/admin", tag = "service", security(()),
    responses((status = 200, description = "The admin console (HTML; it signs in with a key or JWT held in the tab)",
        content_type = "text/html")))]
pub async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

/// `GET /admin/{asset}`: the console's script and style.
#[utoipa::path(get, path = "/admin/{asset}", tag = "service", security(()),
    params(("asset" = String, Path, description = "`console.js` or `console.css`")),
    responses((status = 200, description = "The console's script or style"),
        (status = 404, description = "No such asset", body = String, content_type = "text/plain")))]
pub async fn asset_named(Path(name): Path<String>) -> Result<Response, ApiError> {
    match name.as_str() {
        "console.js" => Ok(asset("text/javascript; charset=utf-8", SCRIPT)),
        "console.css" => Ok(asset("text/css; charset=utf-8", STYLE)),
        _ => Err(ApiError::not_found(&format!("/admin/{name}"))),
    }
}
