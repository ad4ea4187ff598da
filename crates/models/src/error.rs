//! The classified error every model call returns, and the scrubbing that keeps provider text
//! and anything key-shaped out of it.

use std::time::Duration;

/// Why a model call failed. Every variant carries text that has already been scrubbed: a
/// provider's own message never reaches a caller raw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider refused the credential (401/403). Never retried.
    #[error("authentication failed ({status}): {message}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// Scrubbed summary.
        message: String,
    },
    /// 429: too many requests. Retried, honouring `retry-after`.
    #[error("rate limited ({status}): {message}")]
    RateLimited {
        /// HTTP status.
        status: u16,
        /// Delay the provider asked for, when it gave one.
        retry_after: Option<Duration>,
        /// Scrubbed summary.
        message: String,
    },
    /// The provider is overloaded (Anthropic 529, `overloaded_error`, 503). Retried.
    #[error("provider overloaded ({status}): {message}")]
    Overloaded {
        /// HTTP status (0 when reported inside a stream).
        status: u16,
        /// Delay the provider asked for, when it gave one.
        retry_after: Option<Duration>,
        /// Scrubbed summary.
        message: String,
    },
    /// The prompt does not fit the model's context window. Never retried.
    #[error("context too long: {message}")]
    ContextTooLong {
        /// Scrubbed summary.
        message: String,
    },
    /// The provider rejected the request as malformed. Never retried.
    #[error("invalid request ({status}): {message}")]
    InvalidRequest {
        /// HTTP status.
        status: u16,
        /// Scrubbed summary.
        message: String,
    },
    /// A 5xx or an error event inside the stream. Retried.
    #[error("provider server error ({status}): {message}")]
    Server {
        /// HTTP status (0 when reported inside a stream).
        status: u16,
        /// Scrubbed summary.
        message: String,
    },
    /// Connecting, sending or reading failed, or a timeout elapsed. Retried when nothing of the
    /// response had been delivered.
    #[error("network error: {message}")]
    Network {
        /// Scrubbed summary.
        message: String,
    },
    /// The provider blocked the prompt itself (Gemini `promptFeedback.blockReason`). Never
    /// retried: the same prompt is blocked again.
    #[error("prompt blocked by the provider: {message}")]
    PromptBlocked {
        /// The block reason, scrubbed.
        message: String,
    },
    /// The outbound policy refused the URL or an address it resolved to. Never retried.
    #[error("refused by policy: {message}")]
    RefusedByPolicy {
        /// Which rule refused it.
        message: String,
    },
    /// The provider answered with something we could not parse. Never retried.
    #[error("unexpected response: {message}")]
    InvalidResponse {
        /// Scrubbed summary.
        message: String,
    },
    /// The request cannot be expressed for this provider (bad model spec, missing key, …).
    #[error("configuration error: {message}")]
    Configuration {
        /// What is wrong.
        message: String,
    },
    /// A budget cap was passed. Never retried.
    #[error("{message}")]
    BudgetExceeded {
        /// The seeds' message: counted and raw figures.
        message: String,
    },
    /// A USD cap applies and the model has no known price. Never retried.
    #[error("model {model} has no known price and a USD budget applies")]
    ModelUnpriced {
        /// The `provider/model` spec.
        model: String,
    },
    /// The call was cancelled by its caller.
    #[error("cancelled")]
    Cancelled,
}

impl ModelError {
    /// The stable code of this error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Auth { .. } => "MODEL_AUTH_FAILED",
            Self::RateLimited { .. } => "MODEL_RATE_LIMITED",
            Self::Overloaded { .. } => "MODEL_OVERLOADED",
            Self::ContextTooLong { .. } => "MODEL_CONTEXT_TOO_LONG",
            Self::InvalidRequest { .. } => "MODEL_INVALID_REQUEST",
            Self::Server { .. } => "MODEL_SERVER_ERROR",
            Self::Network { .. } => "MODEL_NETWORK_ERROR",
            Self::PromptBlocked { .. } => "MODEL_PROMPT_BLOCKED",
            Self::RefusedByPolicy { .. } => "MODEL_REFUSED_BY_POLICY",
            Self::InvalidResponse { .. } => "MODEL_INVALID_RESPONSE",
            Self::Configuration { .. } => "MODEL_CONFIGURATION",
            Self::BudgetExceeded { .. } => "BUDGET_EXCEEDED",
            Self::ModelUnpriced { .. } => "MODEL_UNPRICED",
            Self::Cancelled => "MODEL_CANCELLED",
        }
    }

    /// Whether trying the same call again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimited { .. }
            | Self::Overloaded { .. }
            | Self::Server { .. }
            | Self::Network { .. } => true,
            Self::Auth { .. }
            | Self::PromptBlocked { .. }
            | Self::ContextTooLong { .. }
            | Self::InvalidRequest { .. }
            | Self::RefusedByPolicy { .. }
            | Self::InvalidResponse { .. }
            | Self::Configuration { .. }
            | Self::BudgetExceeded { .. }
            | Self::ModelUnpriced { .. }
            | Self::Cancelled => false,
        }
    }

    /// The delay the provider asked for before a retry, if any.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Overloaded { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    pub(crate) fn network(error: &reqwest::Error) -> Self {
        // reqwest's Display can include the URL; it never includes headers. Scrub anyway.
        let kind = if error.is_timeout() {
            "timed out"
        } else if error.is_connect() {
            "connect failed"
        } else if error.is_body() || error.is_decode() {
            "reading the response failed"
        } else {
            "request failed"
        };
        let mut message = kind.to_owned();
        if let Some(refusal) = find_policy_refusal(error) {
            return Self::RefusedByPolicy { message: refusal };
        }
        let detail = scrub(&error_chain(error));
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(&truncate(&detail, 300));
        }
        Self::Network { message }
    }
}

/// Walks an error's sources looking for a refusal raised by the guarded resolver.
fn find_policy_refusal(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(err) = current {
        if let Some(refusal) = err.downcast_ref::<crate::http::PolicyRefusal>() {
            return Some(refusal.to_string());
        }
        current = err.source();
    }
    None
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut current = error.source();
    while let Some(err) = current {
        parts.push(err.to_string());
        current = err.source();
    }
    parts.join(": ")
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Replaces anything that looks like a credential with `[REDACTED]`: known key prefixes
/// (`sk-`, `sk-ant-`, `AIza`, `gsk_`, `xai-`, …), bearer tokens, `key=` query values and long
/// opaque tokens mixing letters and digits.
#[must_use]
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let token_end = rest.find(|c: char| !is_token_char(c)).unwrap_or(rest.len());
        if token_end == 0 {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
            continue;
        }
        let token = &rest[..token_end];
        if looks_like_secret(token) {
            out.push_str("[REDACTED]");
        } else {
            out.push_str(token);
        }
        rest = &rest[token_end..];
    }
    redact_after_markers(&out)
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
}

const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk-",
    "rk-",
    "AIza",
    "gsk_",
    "xai-",
    "ghp_",
    "gho_",
    "github_pat_",
    "hf_",
    "ya29.",
    "Bearer",
];

fn looks_like_secret(token: &str) -> bool {
    let trimmed = token.trim_matches(|c: char| matches!(c, '.' | '/' | '='));
    if SECRET_PREFIXES
        .iter()
        .any(|p| trimmed.starts_with(p) && trimmed.len() >= p.len() + 8)
    {
        return true;
    }
    // Long opaque tokens: 32+ characters with letters and digits and no path separators
    // (paths and URLs are kept readable).
    if trimmed.len() >= 32 && !trimmed.contains('/') && !trimmed.contains('.') {
        let letters = trimmed.chars().filter(char::is_ascii_alphabetic).count();
        let digits = trimmed.chars().filter(char::is_ascii_digit).count();
        return letters >= 8 && digits >= 4;
    }
    false
}

/// Redacts the value after `key=`, `api_key=`, `x-api-key:`, `authorization:` and `bearer `.
fn redact_after_markers(text: &str) -> String {
    const MARKERS: &[&str] = &[
        "key=",
        "api_key=",
        "x-api-key:",
        "x-goog-api-key:",
        "authorization:",
        "bearer ",
    ];
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < text.len() {
        let hit = MARKERS
            .iter()
            .filter_map(|m| lower[index..].find(m).map(|at| (index + at, m.len())))
            .min_by_key(|(at, _)| *at);
        let Some((at, len)) = hit else {
            out.push_str(&text[index..]);
            break;
        };
        let value_start = at + len;
        out.push_str(&text[index..value_start]);
        let after = &text[value_start..];
        let skipped = after.len() - after.trim_start().len();
        out.push_str(&after[..skipped]);
        let value = &after[skipped..];
        let whole_line = lower[at..].starts_with("authorization:");
        let value_len = if whole_line {
            value.find(['\n', '"', '\'']).unwrap_or(value.len())
        } else {
            value
                .find(|c: char| c.is_whitespace() || matches!(c, '&' | '"' | '\'' | ',' | ';'))
                .unwrap_or(value.len())
        };
        if value_len > 0 && &value[..value_len] != "[REDACTED]" {
            out.push_str("[REDACTED]");
        } else {
            out.push_str(&value[..value_len]);
        }
        index = value_start + skipped + value_len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_key_shapes() {
        let cases = [
            (
                "Incorrect API key provided: sk-proj-abcdefghijklmnop1234",
                "Incorrect API key provided: [REDACTED]",
            ),
            (
                "key sk-ant-api03-AAAAAAAAAAAAAAAAAAAA-BBBB used",
                "key [REDACTED] used",
            ),
            (
                "https://x.test/v1?key=AIzaSyD0123456789abcdefghij&alt=sse",
                "https://x.test/v1?key=[REDACTED]&alt=sse",
            ),
            (
                "Authorization: Bearer abc.def.ghi",
                "Authorization: [REDACTED]",
            ),
            (
                "token 0123456789abcdefghijABCDEFGHIJ0123 end",
                "token [REDACTED] end",
            ),
            ("plain words stay", "plain words stay"),
            (
                "/v1/messages and claude-sonnet-4-5-20250929",
                "/v1/messages and claude-sonnet-4-5-20250929",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(scrub(input), expected, "input: {input}");
        }
    }

    #[test]
    fn retryability_follows_class() {
        assert!(
            !ModelError::Auth {
                status: 401,
                message: String::new()
            }
            .is_retryable()
        );
        assert!(
            ModelError::RateLimited {
                status: 429,
                retry_after: None,
                message: String::new()
            }
            .is_retryable()
        );
        assert!(
            !ModelError::BudgetExceeded {
                message: String::new()
            }
            .is_retryable()
        );
        assert_eq!(
            ModelError::ModelUnpriced {
                model: "x/y".into()
            }
            .code(),
            "MODEL_UNPRICED"
        );
    }
}
