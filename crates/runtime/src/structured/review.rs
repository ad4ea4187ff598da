//! The review network: three personas review a change in parallel, each answering a
//! `ReviewVerdict`; failures are handled by kind (seeds §4).
//!
//! - Unrecoverable (`BUDGET_EXCEEDED`, `MODEL_UNPRICED`, a missing configuration): rethrown,
//!   never a verdict on the code.
//! - Every reviewer failed: retryable `REVIEW_NETWORK_UNAVAILABLE`.
//! - Some failed: each missing verdict becomes a synthetic `REVIEWER_CRASH` finding at
//!   CRITICAL, and the review stands on the others.
//!
//! A CRITICAL verdict rejects even when the model set `approved`.

use std::sync::Arc;

use auto_swe_agents::ReviewPersona;
use auto_swe_models::{Meter, ModelClient, ModelError};
use serde::Serialize;
use serde_json::{Value, json};

use super::{StructuredError, StructuredRequest, call_structured};

/// Category of the synthetic finding a failed reviewer leaves.
pub const REVIEWER_CRASH: &str = "REVIEWER_CRASH";

/// A verdict's severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ReviewSeverity {
    /// Nothing found.
    Pass,
    /// Notes.
    Info,
    /// Worth fixing.
    Warning,
    /// Must be fixed: a rejection whatever `approved` says.
    Critical,
}

impl ReviewSeverity {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "PASS" => Some(Self::Pass),
            "INFO" => Some(Self::Info),
            "WARNING" => Some(Self::Warning),
            "CRITICAL" => Some(Self::Critical),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Info => "INFO",
            Self::Warning => "WARNING",
            Self::Critical => "CRITICAL",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewFinding {
    /// What kind of problem.
    pub category: String,
    /// The problem.
    pub description: String,
    /// Where.
    pub file: String,
    /// Line, when known.
    pub line: Option<u32>,
    /// How to fix it.
    pub suggested_fix: String,
}

/// One reviewer's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewVerdict {
    /// Whether the reviewer approved.
    pub approved: bool,
    /// Which reviewer.
    #[serde(serialize_with = "serialize_persona")]
    pub reviewer: ReviewPersona,
    /// Overall severity.
    pub severity: ReviewSeverity,
    /// Findings.
    pub findings: Vec<ReviewFinding>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde passes fields by reference"
)]
fn serialize_persona<S: serde::Serializer>(p: &ReviewPersona, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(reviewer_label(*p))
}

impl ReviewVerdict {
    /// Whether this verdict rejects the change (CRITICAL always does).
    #[must_use]
    pub fn rejects(&self) -> bool {
        !self.approved || self.severity == ReviewSeverity::Critical
    }
}

/// The verdict's wire label of a persona.
#[must_use]
pub fn reviewer_label(persona: ReviewPersona) -> &'static str {
    match persona {
        ReviewPersona::Security => "SECURITY",
        ReviewPersona::DomainLogic => "DOMAIN_LOGIC",
        ReviewPersona::Performance => "PERFORMANCE",
        _ => "REVIEWER",
    }
}

/// The JSON Schema of a verdict.
#[must_use]
pub fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["approved", "reviewer", "severity", "findings"],
        "properties": {
            "approved": {"type": "boolean"},
            "reviewer": {"type": "string", "enum": ["SECURITY", "DOMAIN_LOGIC", "PERFORMANCE"]},
            "severity": {"type": "string", "enum": ["PASS", "INFO", "WARNING", "CRITICAL"]},
            "findings": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["category", "description", "file", "suggestedFix"],
                "properties": {
                    "category": {"type": "string"},
                    "description": {"type": "string"},
                    "file": {"type": "string"},
                    "line": {"type": ["integer", "null"], "minimum": 1},
                    "suggestedFix": {"type": "string"}
                }
            }}
        }
    })
}

/// Validates a verdict against the schema; the reviewer is the persona that was asked,
/// whatever label the model wrote.
pub fn parse_verdict(persona: ReviewPersona, value: &Value) -> Result<ReviewVerdict, String> {
    let obj = value.as_object().ok_or("the verdict is not an object")?;
    let approved = obj
        .get("approved")
        .and_then(Value::as_bool)
        .ok_or("approved must be a boolean")?;
    let severity = obj
        .get("severity")
        .and_then(Value::as_str)
        .and_then(ReviewSeverity::parse)
        .ok_or("severity must be PASS, INFO, WARNING or CRITICAL")?;
    let label = obj.get("reviewer").and_then(Value::as_str);
    if label != Some(reviewer_label(persona)) {
        return Err(format!("reviewer must be {}", reviewer_label(persona)));
    }
    let findings = obj
        .get("findings")
        .and_then(Value::as_array)
        .ok_or("findings must be an array")?
        .iter()
        .map(|f| {
            let text = |key: &str| {
                f.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or(format!("finding {key} must be a string"))
            };
            let line = match f.get("line") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .and_then(|l| u32::try_from(l).ok())
                        .filter(|l| *l >= 1)
                        .ok_or("finding line must be a positive integer")?,
                ),
            };
            Ok(ReviewFinding {
                category: text("category")?,
                description: text("description")?,
                file: text("file")?,
                line,
                suggested_fix: text("suggestedFix")?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ReviewVerdict {
        approved,
        reviewer: persona,
        severity,
        findings,
    })
}

/// How one reviewer failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReviewerFailure {
    /// Not a verdict on the code: the network rethrows it.
    Unrecoverable(ModelError),
    /// A provider failure or an answer that failed the schema.
    Failed(String),
}

impl ReviewerFailure {
    /// Classifies a structured call's error.
    #[must_use]
    pub fn from_error(error: StructuredError) -> Self {
        match error {
            StructuredError::Model(
                e @ (ModelError::BudgetExceeded { .. }
                | ModelError::ModelUnpriced { .. }
                | ModelError::Configuration { .. }),
            ) => Self::Unrecoverable(e),
            other => Self::Failed(other.code().to_owned()),
        }
    }
}

/// Why the network produced no outcome.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// A reviewer hit an unrecoverable error; the activity fails with it.
    #[error("{0}")]
    Unrecoverable(ModelError),
    /// Every reviewer failed.
    #[error("REVIEW_NETWORK_UNAVAILABLE: every reviewer failed ({failures})")]
    NetworkUnavailable {
        /// The failures' codes, one per reviewer.
        failures: String,
    },
}

impl ReviewError {
    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unrecoverable(e) => e.code(),
            Self::NetworkUnavailable { .. } => "REVIEW_NETWORK_UNAVAILABLE",
        }
    }

    /// `REVIEW_NETWORK_UNAVAILABLE` is retried; an unrecoverable error never is.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unrecoverable(_) => false,
            Self::NetworkUnavailable { .. } => true,
        }
    }
}

/// The network's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOutcome {
    /// All three approved and none is CRITICAL.
    pub approved: bool,
    /// The verdicts, synthetic ones included, in the order asked.
    pub verdicts: Vec<ReviewVerdict>,
    /// The review-fix session's input; empty when approved.
    pub rejection_summary: String,
}

/// Combines per-reviewer results into the network's decision.
pub fn combine_verdicts(
    results: Vec<(ReviewPersona, Result<ReviewVerdict, ReviewerFailure>)>,
) -> Result<ReviewOutcome, ReviewError> {
    let mut verdicts = Vec::new();
    let mut failures = Vec::new();
    for (persona, result) in results {
        match result {
            Ok(verdict) => verdicts.push(verdict),
            Err(ReviewerFailure::Unrecoverable(e)) => return Err(ReviewError::Unrecoverable(e)),
            Err(ReviewerFailure::Failed(why)) => {
                failures.push(format!("{}: {why}", reviewer_label(persona)));
                verdicts.push(ReviewVerdict {
                    approved: false,
                    reviewer: persona,
                    severity: ReviewSeverity::Critical,
                    findings: vec![ReviewFinding {
                        category: REVIEWER_CRASH.to_owned(),
                        description: format!(
                            "the {} reviewer did not return a verdict ({why})",
                            reviewer_label(persona)
                        ),
                        file: String::new(),
                        line: None,
                        suggested_fix: "run the review again".to_owned(),
                    }],
                });
            }
        }
    }
    if !verdicts.is_empty() && failures.len() == verdicts.len() {
        return Err(ReviewError::NetworkUnavailable {
            failures: failures.join("; "),
        });
    }
    let approved = !verdicts.is_empty() && verdicts.iter().all(|v| !v.rejects());
    let rejection_summary = if approved {
        String::new()
    } else {
        rejection_summary(&verdicts)
    };
    Ok(ReviewOutcome {
        approved,
        verdicts,
        rejection_summary,
    })
}

/// One line per finding of every rejecting reviewer:
/// `[SECURITY] CRITICAL injection at src/db.rs:42: <problem> — fix: <suggested fix>`; a
/// reviewer that rejected without findings gets `rejected without findings: <reviewer>`.
#[must_use]
pub fn rejection_summary(verdicts: &[ReviewVerdict]) -> String {
    let mut lines = Vec::new();
    for v in verdicts.iter().filter(|v| v.rejects()) {
        let reviewer = reviewer_label(v.reviewer);
        if v.findings.is_empty() {
            lines.push(format!("rejected without findings: {reviewer}"));
        }
        for f in &v.findings {
            let location = match (f.file.as_str(), f.line) {
                ("", _) => "unknown location".to_owned(),
                (file, Some(line)) => format!("{file}:{line}"),
                (file, None) => file.to_owned(),
            };
            lines.push(format!(
                "[{reviewer}] {} {} at {location}: {} — fix: {}",
                v.severity.as_str(),
                f.category,
                one_line(&f.description),
                one_line(&f.suggested_fix)
            ));
        }
    }
    lines.join("\n")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One reviewer to ask.
pub struct ReviewerCall {
    /// Which persona.
    pub persona: ReviewPersona,
    /// Its bound model.
    pub client: Arc<dyn ModelClient>,
    /// Its system prompt (persona prompt and skills).
    pub system: String,
    /// The change to review.
    pub prompt: String,
}

/// Runs the reviewers in parallel and combines their verdicts.
pub async fn run_review_network(
    meter: &Meter,
    reviewers: Vec<ReviewerCall>,
) -> Result<ReviewOutcome, ReviewError> {
    let calls = reviewers.iter().map(|r| async move {
        let request = StructuredRequest {
            system: r.system.clone(),
            prompt: r.prompt.clone(),
            schema_name: "review_verdict".to_owned(),
            schema: verdict_schema(),
            max_tokens: None,
        };
        let result = call_structured(r.client.as_ref(), meter, &request, |v| {
            parse_verdict(r.persona, v)
        })
        .await
        .map(|(verdict, _)| verdict)
        .map_err(ReviewerFailure::from_error);
        (r.persona, result)
    });
    combine_verdicts(futures_util::future::join_all(calls).await)
}
