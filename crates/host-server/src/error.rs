//! The one error shape every route answers with: `{"error": {"code", "message", "details"?}}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A refusal or failure, as the API reports it (boxed: handlers return it on every path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {}: {}", .0.status, .0.code, .0.message)]
pub struct ApiError(Box<Fields>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    status: StatusCode,
    code: String,
    message: String,
    details: Option<Value>,
    retry_after: Option<u64>,
}

impl ApiError {
    /// An error with this status, code and message.
    #[must_use]
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self(Box::new(Fields {
            status,
            code: code.into(),
            message: message.into(),
            details: None,
            retry_after: None,
        }))
    }

    /// The HTTP status.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.0.status
    }

    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &str {
        &self.0.code
    }

    /// The message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Adds details.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.0.details = Some(details);
        self
    }

    /// Adds a `Retry-After`.
    #[must_use]
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.0.retry_after = Some(seconds);
        self
    }

    /// 400 with a code.
    #[must_use]
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 401: no credential, or one that does not authenticate.
    #[must_use]
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", message)
    }

    /// 403: authenticated, not allowed.
    #[must_use]
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }

    /// 404 with a code. Used as well for what exists but the caller may not see, so ids do not
    /// leak.
    #[must_use]
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 409 with a code.
    #[must_use]
    pub fn conflict(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 500/503: the server's own failure; the message says what, never a secret.
    #[must_use]
    pub fn internal(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
    }

    /// A store failure: refusals keep their meaning, everything else is the server's.
    #[must_use]
    pub fn from_store(error: &auto_swe_store::StoreError, what: &str) -> Self {
        match error.code() {
            "STORE_NOT_FOUND" => Self::not_found(
                &format!("{}_NOT_FOUND", what.to_uppercase().replace(' ', "_")),
                format!("no such {what}"),
            ),
            "STORE_INVALID_INPUT" => Self::bad_request("INVALID_INPUT", error.to_string()),
            "STORE_VALUE_TOO_LARGE" => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                error.to_string(),
            ),
            "ENGINE_PAYLOAD_TOO_LARGE" => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "ENGINE_PAYLOAD_TOO_LARGE",
                error.to_string(),
            ),
            "STORE_CONFLICT" | "IDEMPOTENCY_KEY_MISMATCH" | "RUN_ENDED" | "RUN_OTHER_ENGINE" => {
                Self::conflict(error.code(), error.to_string())
            }
            code if error.is_retryable() => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                code,
                "the store is unavailable",
            )
            .retry_after(1),
            code => {
                tracing::error!(%error, code, "store failure");
                Self::internal(code, "the store failed")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let Fields {
            status,
            code,
            message,
            details,
            retry_after,
        } = *self.0;
        let mut body = json!({ "code": code, "message": message });
        if let Some(details) = details {
            body["details"] = details;
        }
        let mut response = (status, axum::Json(json!({ "error": body }))).into_response();
        if let Some(seconds) = retry_after
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

/// Puts a refusal that did not come from [`ApiError`] — the framework's own (a path segment
/// that is not UTF-8, a body over the limit before a handler saw it, a request that ran past
/// its timeout) — into the one error shape, keeping its status and headers. JSON and HTML
/// answers pass as they are.
pub(crate) async fn one_error_shape(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if kind.starts_with("application/json") || kind.starts_with("text/html") {
        return response;
    }
    let reason = status.canonical_reason().unwrap_or("Error");
    let code = reason.to_uppercase().replace([' ', '-'], "_");
    let message = match status {
        StatusCode::BAD_REQUEST => "the request is not valid",
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is larger than the server accepts",
        StatusCode::REQUEST_TIMEOUT => "the request took longer than the server allows",
        _ => reason,
    };
    let (mut parts, _) = response.into_parts();
    let replacement = ApiError::new(status, code, message).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, replacement.into_body())
}

/// What a handler returns.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_the_one_shape() {
        let response = ApiError::conflict("IDEMPOTENCY_KEY_RETRY", "x")
            .with_details(json!({"runId": "r"}))
            .retry_after(3)
            .into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
    }

    #[tokio::test]
    async fn a_plain_refusal_is_put_into_the_one_shape() {
        let plain = (
            StatusCode::PAYLOAD_TOO_LARGE,
            "Failed to buffer the request body",
        )
            .into_response();
        let response = one_error_shape(plain).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "PAYLOAD_TOO_LARGE");
        let timeout = one_error_shape(StatusCode::REQUEST_TIMEOUT.into_response()).await;
        let body = axum::body::to_bytes(timeout.into_body(), 4096)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "REQUEST_TIMEOUT");
        let ok = one_error_shape(ApiError::conflict("X", "y").into_response()).await;
        assert_eq!(ok.headers()[header::CONTENT_TYPE], "application/json");
    }
}
