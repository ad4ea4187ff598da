//! Scanner rules (platform admins only): the built-in pack and the host's own rules, written by
//! id, and "try this pattern" against samples without writing anything.

use std::collections::BTreeMap;

use crate::state::ApiPath;
use auto_swe_scanners::{Pattern, PatternType, Severity, builtin_patterns};
use auto_swe_store::{NewAuditEntry, StoredPattern};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::auth::{AccessLevel, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::Data;
use crate::state::{ApiJson, AppState, SignedIn};

/// Most samples one try takes.
pub const MAX_SAMPLES: usize = 10;
/// Longest sample, in characters.
pub const MAX_SAMPLE_CHARS: usize = 20_000;
/// Longest excerpt of a match a try answers with, in characters.
pub const MAX_EXCERPT_CHARS: usize = 200;
/// Longest expression, in bytes (the store's bound too).
pub const MAX_PATTERN_BYTES: usize = 4096;

/// A rule as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatternView {
    /// Stable id, e.g. `sh.pipe-to-shell`.
    pub id: String,
    /// `INJECTION`, `EXFILTRATION`, `SHELL_COMMAND`, `CODE_SECURITY`, `SENSITIVE_FILE` or
    /// `SECRET`.
    #[serde(rename = "type")]
    pub pattern_type: String,
    /// `PASS`, `INFO`, `WARNING` or `CRITICAL`.
    pub severity: String,
    /// The expression.
    pub pattern: String,
    /// Flag letters (`i`, `m`, `s`, `x`, `u`).
    pub flags: String,
    /// What it catches.
    pub description: String,
    /// Whether scans run it.
    pub enabled: bool,
    /// `BUILTIN` (shipped, unchanged), `OVERRIDE` (a host row with a built-in's id: it
    /// replaces the built-in, or switches it off when disabled) or `HOST` (the host's own).
    pub origin: String,
    /// Who last wrote the host row.
    pub updated_by: Option<String>,
    /// When (milliseconds since the epoch).
    pub updated_at: Option<i64>,
}

impl PatternView {
    fn new(pattern: &Pattern, origin: &str, row: Option<&StoredPattern>) -> Self {
        Self {
            id: pattern.id.clone(),
            pattern_type: pattern.pattern_type.as_str().to_owned(),
            severity: pattern.severity.as_str().to_owned(),
            pattern: pattern.pattern.clone(),
            flags: pattern.flags.clone(),
            description: pattern.description.clone(),
            enabled: pattern.enabled,
            origin: origin.to_owned(),
            updated_by: row.and_then(|r| r.updated_by.clone()),
            updated_at: row.map(|r| r.updated_at.as_millis()),
        }
    }
}

/// A rule to write.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatternBody {
    /// The scanner family.
    #[serde(rename = "type")]
    #[schema(
        pattern = "^(INJECTION|EXFILTRATION|SHELL_COMMAND|CODE_SECURITY|SENSITIVE_FILE|SECRET)$"
    )]
    pub pattern_type: String,
    /// How serious a match is.
    #[schema(pattern = "^(PASS|INFO|WARNING|CRITICAL)$")]
    pub severity: String,
    /// The expression (Rust `regex` syntax; linear time, no look-around).
    #[schema(min_length = 1, max_length = 4096)]
    pub pattern: String,
    /// Flag letters.
    #[serde(default)]
    #[schema(max_length = 16)]
    pub flags: String,
    /// What it catches.
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub description: String,
    /// Whether scans run it (default true).
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

/// Samples to try an expression on.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TryBody {
    /// The expression.
    #[schema(min_length = 1, max_length = 4096)]
    pub pattern: String,
    /// Flag letters.
    #[serde(default)]
    #[schema(max_length = 16)]
    pub flags: String,
    /// One to ten samples of at most 20,000 characters; each is one input (`m` makes `^` and
    /// `$` match at each line).
    #[schema(min_items = 1, max_items = 10)]
    pub samples: Vec<String>,
}

/// What the expression did with one sample.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SampleResult {
    /// The sample's position in the request.
    pub index: usize,
    /// `matched` or `no_match`.
    pub result: String,
    /// The first match, cut to 200 characters.
    pub excerpt: Option<String>,
    /// The first match's whole length, in characters.
    pub length: Option<usize>,
    /// How many matches the sample holds.
    pub matches: usize,
}

/// A try's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct TryResult {
    /// One per sample, in order.
    pub results: Vec<SampleResult>,
}

fn admin_only(user: &UserIdentity) -> ApiResult<()> {
    if user.role >= AccessLevel::Admin {
        Ok(())
    } else {
        Err(ApiError::forbidden("scanner rules need the ADMIN role"))
    }
}

/// Whether `id` is a rule id: 1 to 100 letters, digits, `.`, `_` and `-`, starting with a
/// letter or digit.
#[must_use]
pub fn is_rule_id(id: &str) -> bool {
    id.len() <= 100
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn parse_named<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> ApiResult<T> {
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| ApiError::bad_request("INVALID_BODY", format!("{text:?} is not a {what}")))
}

/// Compiles `pattern` off the async threads; a refusal is `400 INVALID_REGEX` or
/// `400 UNSAFE_FLAGS`.
async fn compiled(pattern: Pattern) -> ApiResult<(Pattern, regex::bytes::Regex)> {
    if pattern.pattern.len() > MAX_PATTERN_BYTES {
        return Err(ApiError::bad_request(
            "INVALID_REGEX",
            format!("the expression is longer than {MAX_PATTERN_BYTES} bytes"),
        ));
    }
    tokio::task::spawn_blocking(move || {
        let regex = pattern.compile()?;
        Ok((pattern, regex))
    })
    .await
    .map_err(|e| ApiError::internal("PATTERN_CHECK_FAILED", e.to_string()))?
    .map_err(|e: auto_swe_scanners::PatternError| ApiError::bad_request(e.code(), e.to_string()))
}

async fn audit(state: &AppState, user: &UserIdentity, action: &str, id: &str, detail: Value) {
    let entry = NewAuditEntry {
        actor: user.id.clone(),
        action: action.to_owned(),
        target_kind: "scanner_rule".to_owned(),
        target_id: id.to_owned(),
        detail,
    };
    if let Err(error) = state.store().append_audit(entry).await {
        tracing::error!(%error, action, id, "the audit entry could not be written");
    }
}

/// Re-reads the rules for this process's workers, so a write applies at once here (other
/// processes read them within half a minute).
async fn apply(state: &AppState) {
    if let Some(live) = state.patterns()
        && let Err(error) = live.refresh().await
    {
        tracing::warn!(%error, "scanner rules were written but not re-read; the next refresh will");
    }
}

/// Every rule: the built-in pack with the host's overrides, then the host's own, by id.
#[utoipa::path(get, path = "/api/v1/scanner-patterns", tag = "scanner patterns",
    responses((status = 200, body = Data<Vec<PatternView>>), (status = 403, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
) -> ApiResult<Json<Data<Vec<PatternView>>>> {
    admin_only(&user)?;
    let rows = state
        .store()
        .list_patterns()
        .await
        .map_err(|e| ApiError::from_store(&e, "scanner rule"))?;
    let mut host: BTreeMap<&str, &StoredPattern> =
        rows.iter().map(|r| (r.pattern.id.as_str(), r)).collect();
    let mut views: Vec<PatternView> = builtin_patterns()
        .iter()
        .map(|builtin| match host.remove(builtin.id.as_str()) {
            Some(row) => PatternView::new(&row.pattern, "OVERRIDE", Some(row)),
            None => PatternView::new(builtin, "BUILTIN", None),
        })
        .collect();
    views.extend(
        host.values()
            .map(|row| PatternView::new(&row.pattern, "HOST", Some(row))),
    );
    Ok(Json(Data { data: views }))
}

/// Writes a rule by id: `201` when the host had no row of that id (a new rule, or a first
/// override of a built-in one), `200` when it replaces the host's row. A row with a built-in's id
/// replaces that rule, or switches it off when disabled. The expression is compiled first;
/// nothing is written when it does not compile.
#[utoipa::path(put, path = "/api/v1/scanner-patterns/{id}", params(("id" = String, Path)),
    request_body = PatternBody, tag = "scanner patterns",
    responses((status = 200, body = Data<PatternView>), (status = 201, body = Data<PatternView>),
              (status = 400, body = crate::routes::ErrorBody), (status = 403, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PatternBody>,
) -> ApiResult<(StatusCode, Json<Data<PatternView>>)> {
    admin_only(&user)?;
    if !is_rule_id(&id) {
        return Err(ApiError::bad_request(
            "INVALID_PATTERN_ID",
            "a rule id is 1 to 100 letters, digits, '.', '_' and '-'",
        ));
    }
    if body.description.chars().count() > 2000 {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "description is longer than 2000 characters",
        ));
    }
    let pattern = Pattern {
        id: id.clone(),
        pattern_type: parse_named::<PatternType>("rule type", &body.pattern_type)?,
        severity: parse_named::<Severity>("severity", &body.severity)?,
        pattern: body.pattern,
        flags: body.flags,
        description: body.description,
        enabled: body.enabled,
    };
    let (pattern, _) = compiled(pattern).await?;
    let existed = state
        .store()
        .list_patterns()
        .await
        .map_err(|e| ApiError::from_store(&e, "scanner rule"))?
        .iter()
        .any(|row| row.pattern.id == id);
    let row = state
        .store()
        .put_pattern(&pattern, Some(&user.id))
        .await
        .map_err(|e| ApiError::from_store(&e, "scanner rule"))?;
    let builtin = builtin_patterns().iter().any(|b| b.id == id);
    audit(
        &state,
        &user,
        if existed {
            "scanner_rule.update"
        } else {
            "scanner_rule.create"
        },
        &id,
        json!({
            "type": pattern.pattern_type.as_str(),
            "severity": pattern.severity.as_str(),
            "enabled": pattern.enabled,
            "overridesBuiltin": builtin,
        }),
    )
    .await;
    apply(&state).await;
    let origin = if builtin { "OVERRIDE" } else { "HOST" };
    Ok((
        if existed {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        },
        Json(Data {
            data: PatternView::new(&row.pattern, origin, Some(&row)),
        }),
    ))
}

/// Deletes a host rule; deleting an override brings the built-in rule back.
#[utoipa::path(delete, path = "/api/v1/scanner-patterns/{id}", params(("id" = String, Path)),
    tag = "scanner patterns",
    responses((status = 204), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    admin_only(&user)?;
    let gone = is_rule_id(&id)
        && state
            .store()
            .delete_pattern(&id)
            .await
            .map_err(|e| ApiError::from_store(&e, "scanner rule"))?;
    if !gone {
        return Err(ApiError::not_found(
            "PATTERN_NOT_FOUND",
            format!("the host has no rule {id}"),
        ));
    }
    audit(&state, &user, "scanner_rule.delete", &id, json!({})).await;
    apply(&state).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Runs an expression over samples with the checks a write makes, and writes nothing.
#[utoipa::path(post, path = "/api/v1/scanner-patterns/test", request_body = TryBody,
    tag = "scanner patterns",
    responses((status = 200, body = Data<TryResult>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn try_pattern(
    SignedIn(user): SignedIn,
    ApiJson(body): ApiJson<TryBody>,
) -> ApiResult<Json<Data<TryResult>>> {
    admin_only(&user)?;
    if body.samples.is_empty() || body.samples.len() > MAX_SAMPLES {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            format!("give 1 to {MAX_SAMPLES} samples"),
        ));
    }
    if let Some(index) = body
        .samples
        .iter()
        .position(|s| s.chars().count() > MAX_SAMPLE_CHARS)
    {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            format!("sample {index} is longer than {MAX_SAMPLE_CHARS} characters"),
        ));
    }
    let candidate = Pattern {
        id: "candidate".to_owned(),
        pattern_type: PatternType::Injection,
        severity: Severity::Info,
        pattern: body.pattern,
        flags: body.flags,
        description: String::new(),
        enabled: true,
    };
    let (_, regex) = compiled(candidate).await?;
    let samples = body.samples;
    let results = tokio::task::spawn_blocking(move || {
        samples
            .iter()
            .enumerate()
            .map(|(index, sample)| sample_result(&regex, index, sample))
            .collect()
    })
    .await
    .map_err(|e| ApiError::internal("PATTERN_CHECK_FAILED", e.to_string()))?;
    Ok(Json(Data {
        data: TryResult { results },
    }))
}

fn sample_result(regex: &regex::bytes::Regex, index: usize, sample: &str) -> SampleResult {
    let mut found = regex.find_iter(sample.as_bytes());
    let Some(first) = found.next() else {
        return SampleResult {
            index,
            result: "no_match".to_owned(),
            excerpt: None,
            length: None,
            matches: 0,
        };
    };
    let text = String::from_utf8_lossy(first.as_bytes());
    SampleResult {
        index,
        result: "matched".to_owned(),
        excerpt: Some(text.chars().take(MAX_EXCERPT_CHARS).collect()),
        length: Some(text.chars().count()),
        matches: 1 + found.count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_plain_names() {
        for good in ["sh.rm-rf-root", "host_1", "a", &"x".repeat(100)] {
            assert!(is_rule_id(good), "{good}");
        }
        for bad in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "a b",
            "a%",
            "ä",
            &"x".repeat(101),
        ] {
            assert!(!is_rule_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_sample_reports_its_first_match_cut_and_counts_the_rest() {
        let regex = regex::bytes::Regex::new("a+").unwrap();
        let long = format!("{} b a", "a".repeat(300));
        let result = sample_result(&regex, 3, &long);
        assert_eq!(result.index, 3);
        assert_eq!(result.result, "matched");
        assert_eq!(result.excerpt.as_deref().map(str::len), Some(200));
        assert_eq!(result.length, Some(300));
        assert_eq!(result.matches, 2);
        let none = sample_result(&regex, 0, "bbb");
        assert_eq!(none.result, "no_match");
        assert_eq!((none.excerpt, none.length, none.matches), (None, None, 0));
    }
}
