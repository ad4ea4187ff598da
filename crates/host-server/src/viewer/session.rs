//! Browser sign-in for the run viewer. The API stays bearer-only; the viewer exchanges a token
//! typed into its sign-in form (or a one-time code the CLI made) for a cookie holding a
//! short-lived JWT from the server's own issue path. Each cookie request re-reads the user's
//! role and active flag exactly as a bearer JWT does. Forms that change something carry a CSRF
//! token (an HMAC of the session JWT's id) and must come from this origin.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Form, FromRequestParts, Query, State};
use axum::http::header::{COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::Digest as _;

use super::html::{self, Frame, escape, query_value};
use crate::auth::{Caller, UserIdentity};
use crate::error::ApiError;
use crate::state::AppState;

/// The session cookie's name.
pub(crate) const COOKIE_NAME: &str = "auto_swe_ui";
/// How long a one-time sign-in code from the CLI stays good if unused.
pub(crate) const LOGIN_CODE_TTL: Duration = Duration::from_secs(600);

/// A page that could not be shown: an HTML error page, or (not signed in) the sign-in form.
#[derive(Debug)]
pub(crate) enum UiError {
    /// Not signed in, or the session ended: sign in, then come back to `next`.
    SignIn {
        /// Where to return.
        next: String,
    },
    /// A refusal or failure, shown as a page.
    Page {
        /// The status.
        status: StatusCode,
        /// The API's code for the same refusal.
        code: String,
        /// For people.
        message: String,
    },
}

impl UiError {
    /// 403 for a form that did not come from this origin or carries no valid CSRF token.
    pub(crate) fn forbidden(message: &str) -> Self {
        Self::Page {
            status: StatusCode::FORBIDDEN,
            code: "FORBIDDEN".to_owned(),
            message: message.to_owned(),
        }
    }
}

impl From<ApiError> for UiError {
    fn from(error: ApiError) -> Self {
        Self::Page {
            status: error.status(),
            code: error.code().to_owned(),
            message: error.message().to_owned(),
        }
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        match self {
            Self::SignIn { next } => see_other(&format!("/ui/login?next={}", query_value(&next))),
            Self::Page {
                status,
                code,
                message,
            } => {
                let main = format!(
                    "<section class=\"error\"><h1>{}</h1><p class=\"code\">{}</p><p>{}</p>\
                     <p><a href=\"/ui/runs\">Back to the runs</a></p></section>",
                    status.as_u16(),
                    escape(&code),
                    escape(&message)
                );
                let frame = Frame {
                    title: status.canonical_reason().unwrap_or("Error"),
                    user: None,
                    csrf: None,
                    data: &[],
                };
                (status, super::html_response(html::page(&frame, &main))).into_response()
            }
        }
    }
}

/// A `303 See Other` to `location` (always a path of this server).
pub(crate) fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// A signed-in browser: the user as they are now, and the session's id (its JWT's id).
#[derive(Debug, Clone)]
pub(crate) struct UiSession {
    pub(crate) user: UserIdentity,
    session_id: String,
}

impl UiSession {
    /// The caller the API's rules are applied to.
    pub(crate) fn caller(&self) -> Caller {
        Caller::User(self.user.clone())
    }

    /// This session's CSRF token, for its forms.
    pub(crate) fn csrf(&self, state: &AppState) -> String {
        state.auth().csrf_token(&self.session_id)
    }

    /// Refuses (403) a state-changing form unless it came from this origin and carries this
    /// session's CSRF token.
    pub(crate) fn check_form(
        &self,
        state: &AppState,
        headers: &HeaderMap,
        presented: Option<&str>,
    ) -> Result<(), UiError> {
        same_origin(state, headers)?;
        match presented {
            Some(token) if state.auth().csrf_valid(&self.session_id, token) => Ok(()),
            _ => Err(UiError::forbidden(
                "the form's CSRF token is missing or not this session's: reload the page and try again",
            )),
        }
    }
}

impl FromRequestParts<AppState> for UiSession {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, UiError> {
        let next = if parts.method == Method::GET && parts.uri.path().starts_with("/ui/") {
            parts
                .uri
                .path_and_query()
                .map_or("/ui/runs", |p| p.as_str())
                .to_owned()
        } else {
            "/ui/runs".to_owned()
        };
        let Some(jwt) = cookie(&parts.headers, COOKIE_NAME) else {
            return Err(UiError::SignIn { next });
        };
        match state.auth().jwt_session(jwt).await {
            Ok((user, session_id)) if !session_id.is_empty() => Ok(Self { user, session_id }),
            Ok(_) => Err(UiError::SignIn { next }),
            Err(error) if error.status() == StatusCode::UNAUTHORIZED => {
                Err(UiError::SignIn { next })
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// The value of cookie `name` among the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// Refuses (403) a request that says it came from another site or origin. Browsers send
/// `Sec-Fetch-Site` and `Origin` on form posts; either, when present, must name this origin
/// (the `Host` it was sent to, or the configured public URL). Under `Referrer-Policy:
/// no-referrer` a browser sends `Origin: null` for its own forms, so `null` passes only beside
/// `Sec-Fetch-Site: same-origin`, which page scripts cannot set.
pub(crate) fn same_origin(state: &AppState, headers: &HeaderMap) -> Result<(), UiError> {
    let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
    if site.is_some_and(|site| site != b"same-origin") {
        return Err(UiError::forbidden("the form was sent from another site"));
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        let ours = if origin == "null" {
            site.is_some()
        } else {
            host.is_some_and(|host| {
                origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"))
                    == Some(host)
            }) || state
                .public_url()
                .is_some_and(|url| url.trim_end_matches('/') == origin)
        };
        if !ours {
            return Err(UiError::forbidden("the form was sent from another origin"));
        }
    }
    Ok(())
}

/// `next` when it is a path under `/ui/` of this server (no scheme, no host, no `//`, no
/// backslash, no `..`, no control or space character); anything else is not followed.
pub(crate) fn safe_next(next: &str) -> Option<&str> {
    let ok = next.starts_with("/ui/")
        && !next.starts_with("//")
        && !next.contains("//")
        && !next.contains('\\')
        && !next.contains("..")
        && !next.contains("%2e")
        && !next.contains("%2E")
        && next.len() <= 2048
        && next.bytes().all(|b| b.is_ascii_graphic());
    ok.then_some(next)
}

/// The `Set-Cookie` value holding `jwt` until `expires_at` (seconds since the epoch).
fn session_cookie(jwt: &str, expires_at: u64, secure: bool) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let max_age = expires_at.saturating_sub(now);
    format!(
        "{COOKIE_NAME}={jwt}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Whether the cookie must be `Secure`: the request came over https (as a proxy in front
/// says), or the configured public URL is https.
fn secure(state: &AppState, headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"))
        || state
            .public_url()
            .is_some_and(|u| u.starts_with("https://"))
}

/// Signs `user` in: a fresh session JWT in the cookie, then on to `next`.
fn signed_in(
    state: &AppState,
    headers: &HeaderMap,
    user: &UserIdentity,
    next: Option<&str>,
) -> Result<Response, UiError> {
    let (jwt, expires_at) = state.auth().issue(user)?;
    let mut response = see_other(next.and_then(safe_next).unwrap_or("/ui/runs"));
    let cookie =
        HeaderValue::from_str(&session_cookie(&jwt, expires_at, secure(state, headers)))
            .map_err(|_| ApiError::internal("COOKIE_FAILED", "the session cookie is not valid"))?;
    response.headers_mut().insert(SET_COOKIE, cookie);
    tracing::info!(user_id = %user.id, "viewer: signed in");
    Ok(response)
}

/// One-time sign-in codes the CLI hands to a browser: 32 random bytes, kept here only as their
/// SHA-256, taken (and so spent) by the first exchange.
#[derive(Debug, Default)]
pub(crate) struct LoginCodes {
    codes: Mutex<HashMap<String, (String, Instant)>>,
}

impl LoginCodes {
    /// A new code for `user_id`.
    pub(crate) fn issue(&self, user_id: &str) -> Result<String, ApiError> {
        let mut bytes = [0_u8; 32];
        getrandom::getrandom(&mut bytes)
            .map_err(|e| ApiError::internal("RANDOM_FAILED", e.to_string()))?;
        let code = hex::encode(bytes);
        let mut codes = self
            .codes
            .lock()
            .map_err(|_| ApiError::internal("LOGIN_CODES_FAILED", "the code table is poisoned"))?;
        codes.retain(|_, (_, at)| at.elapsed() < LOGIN_CODE_TTL);
        codes.insert(digest(&code), (user_id.to_owned(), Instant::now()));
        Ok(code)
    }

    /// The user `code` was made for, once; `None` for an unknown, spent or expired code.
    fn take(&self, code: &str) -> Option<String> {
        let mut codes = self.codes.lock().ok()?;
        let (user, at) = codes.remove(&digest(code))?;
        (at.elapsed() < LOGIN_CODE_TTL).then_some(user)
    }
}

fn digest(code: &str) -> String {
    hex::encode(sha2::Sha256::digest(code.as_bytes()))
}

/// What the sign-in page takes in its query.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginQuery {
    next: Option<String>,
    code: Option<String>,
}

/// `GET /ui/login`: the sign-in form, or (with `code`) the exchange of a one-time code.
#[tracing::instrument(level = "debug", skip_all)]
pub(crate) async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Result<Response, UiError> {
    if let Some(code) = query.code.as_deref() {
        let refused = || {
            UiError::from(ApiError::unauthenticated(
                "this sign-in link was used already or has expired",
            ))
        };
        let user_id = state.login_codes().take(code).ok_or_else(refused)?;
        let user = state.auth().user(&user_id).await?.ok_or_else(refused)?;
        return signed_in(&state, &headers, &user, query.next.as_deref());
    }
    Ok(login_form(query.next.as_deref(), None, StatusCode::OK))
}

fn login_form(next: Option<&str>, problem: Option<&str>, status: StatusCode) -> Response {
    let next = next.and_then(safe_next).unwrap_or("/ui/runs");
    let mut main = String::from("<section class=\"login\"><h1>Sign in</h1>");
    if let Some(problem) = problem {
        main.push_str("<p class=\"problem\">");
        html::push_escaped(&mut main, problem);
        main.push_str("</p>");
    }
    main.push_str(
        "<form method=\"post\" action=\"/ui/login\"><label>API token \
         <input type=\"password\" name=\"token\" autocomplete=\"off\" required></label>\
         <input type=\"hidden\" name=\"next\" value=\"",
    );
    html::push_escaped(&mut main, next);
    main.push_str(
        "\"><button type=\"submit\">Sign in</button></form><p class=\"hint\">A personal \
         token (<code>ats_…</code>) or a JWT from <code>POST /api/v1/auth/token</code>. \
         The browser keeps a short-lived session, not the token.</p></section>",
    );
    let frame = Frame {
        title: "Sign in",
        user: None,
        csrf: None,
        data: &[],
    };
    (status, super::html_response(html::page(&frame, &main))).into_response()
}

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    token: String,
    next: Option<String>,
}

/// `POST /ui/login`: authenticates the token as the API would; service tokens are refused.
#[tracing::instrument(level = "debug", skip_all)]
pub(crate) async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, UiError> {
    same_origin(&state, &headers)?;
    let token = form.token.trim();
    let next = form.next.as_deref();
    if token.is_empty() || token.len() > 8192 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(login_form(
            next,
            Some("Type a token."),
            StatusCode::BAD_REQUEST,
        ));
    }
    match state
        .auth()
        .authenticate(Some(&format!("Bearer {token}")))
        .await
    {
        Ok(Caller::User(user)) => signed_in(&state, &headers, &user, next),
        Ok(Caller::Service(_)) => Ok(login_form(
            next,
            Some("A service token cannot sign in to the viewer: use a person's token."),
            StatusCode::FORBIDDEN,
        )),
        Err(error) if error.status() == StatusCode::UNAUTHORIZED => Ok(login_form(
            next,
            Some("That token does not sign in here."),
            StatusCode::UNAUTHORIZED,
        )),
        Err(error) => Err(error.into()),
    }
}

/// The sign-out form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct LogoutForm {
    csrf: Option<String>,
}

/// `POST /ui/logout`: clears the cookie.
pub(crate) async fn logout(
    State(state): State<AppState>,
    session: UiSession,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Result<Response, UiError> {
    session.check_form(&state, &headers, form.csrf.as_deref())?;
    let mut response = see_other("/ui/login");
    response.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_static("auto_swe_ui=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_under_the_viewer_are_followed() {
        for good in [
            "/ui/runs",
            "/ui/runs/abc?since=3",
            "/ui/runs?status=FAILED&q=01",
        ] {
            assert_eq!(safe_next(good), Some(good));
        }
        for bad in [
            "https://evil.example/ui/runs",
            "//evil.example/ui/",
            "/ui//evil.example",
            "/\\evil.example",
            "/ui/\\\\evil.example",
            "/ui/../api/v1/me",
            "/ui/%2e%2e/api",
            "/ui/runs\r\nSet-Cookie: x=1",
            "/ui/runs x",
            "/api/v1/me",
            "javascript:alert(1)",
            "ui/runs",
            "",
        ] {
            assert_eq!(safe_next(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_cookie_is_read_by_its_exact_name() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, HeaderValue::from_static("x_auto_swe_ui=no; a=b"));
        headers.append(COOKIE, HeaderValue::from_static("auto_swe_ui=eyJ.yes"));
        assert_eq!(cookie(&headers, COOKIE_NAME), Some("eyJ.yes"));
        assert_eq!(cookie(&HeaderMap::new(), COOKIE_NAME), None);
    }

    #[test]
    fn a_code_is_good_once() {
        let codes = LoginCodes::default();
        let code = codes.issue("u1").unwrap();
        assert_eq!(code.len(), 64);
        assert_eq!(codes.take("not-it"), None);
        assert_eq!(codes.take(&code).as_deref(), Some("u1"));
        assert_eq!(codes.take(&code), None);
    }

    #[test]
    fn the_cookie_is_scoped_and_hidden_from_scripts() {
        let cookie = session_cookie("eyJ.a.b", u64::MAX, true);
        for part in [
            "auto_swe_ui=eyJ.a.b",
            "Path=/ui",
            "HttpOnly",
            "SameSite=Strict",
            "Secure",
        ] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(!session_cookie("eyJ", 0, false).contains("Secure"));
    }
}
