//! The viewer's stylesheet and script, compiled into the server and served with a year's
//! cache: their URLs carry a hash of their content, so a new build is fetched at once.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::Digest as _;

const CSS: &str = include_str!("assets/viewer.css");
const JS: &str = include_str!("assets/viewer.js");

/// The first 12 hex digits of the assets' SHA-256, for their URLs.
pub(crate) fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut hash = sha2::Sha256::new();
        hash.update(CSS.as_bytes());
        hash.update(JS.as_bytes());
        hex::encode(&hash.finalize()[..6])
    })
}

/// `GET /ui/assets/{name}`.
pub(crate) async fn serve(Path(name): Path<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "viewer.css" => (CSS, "text/css; charset=utf-8"),
        "viewer.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(kind)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        body,
    )
        .into_response()
}
