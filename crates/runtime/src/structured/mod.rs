//! Structured agents: model calls whose answer is a JSON object the workflow acts on (the
//! review network, the planner and decomposer, context validation), and the pure rules that
//! turn those answers into decisions (ticket digests, criteria blocks, plan normalisation).
//!
//! A structured call uses the provider's schema mode (`OutputFormat::JsonSchema`), is
//! admitted and debited on the meter like every other call (a failed stream's reported usage
//! included), and gets one repair retry when the answer is not valid JSON for the schema.

mod context;
mod plan;
mod review;
mod ticket;

use auto_swe_models::{
    Message, Meter, ModelClient, ModelError, ModelRequest, OutputFormat, Part, ResponseBuilder,
    Usage,
};
use futures_util::StreamExt as _;
use serde_json::Value;
use tracing::Instrument as _;

pub use context::{
    CRITERIA_BLOCK_MAX_CHARS, ContextVerdict, MAX_AMBIGUITIES, MAX_CRITERIA_IN_BLOCK,
    ambiguity_reason, assess_criteria, criteria_block,
};
pub use plan::{
    DECOMPOSER_MAX_SUBTASKS, PlanError, PlannedRepository, Subtask, decompose_or_singleton,
    is_subtask_id, normalize_plan, plannable_repositories,
};
pub use review::{
    REVIEWER_CRASH, ReviewError, ReviewFinding, ReviewOutcome, ReviewSeverity, ReviewVerdict,
    ReviewerCall, ReviewerFailure, combine_verdicts, parse_verdict, rejection_summary,
    reviewer_label, run_review_network, verdict_schema,
};
pub use ticket::{TicketDigestLimits, TicketText, ticket_digest};

/// What a structured call asks.
#[derive(Debug, Clone)]
pub struct StructuredRequest {
    /// System prompt.
    pub system: String,
    /// The user message.
    pub prompt: String,
    /// Schema name (provider-safe).
    pub schema_name: String,
    /// JSON Schema of the answer.
    pub schema: Value,
    /// Output cap.
    pub max_tokens: Option<u32>,
}

/// Why a structured call produced no value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StructuredError {
    /// The model call failed (budget, pricing and configuration errors arrive here too).
    #[error("{0}")]
    Model(ModelError),
    /// The answer was not valid for the schema, after the repair retry.
    #[error("STRUCTURED_OUTPUT_INVALID: {message}")]
    Invalid {
        /// Why the last answer was refused.
        message: String,
    },
}

impl StructuredError {
    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Model(e) => e.code(),
            Self::Invalid { .. } => "STRUCTURED_OUTPUT_INVALID",
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Model(e) => e.is_retryable(),
            Self::Invalid { .. } => true,
        }
    }
}

/// One metered call: admitted, streamed, debited whatever it reported however it ended.
pub(crate) async fn metered_call(
    client: &dyn ModelClient,
    meter: &Meter,
    request: &ModelRequest,
) -> Result<(String, Usage), ModelError> {
    let spec = client.spec().clone();
    meter.admit(&spec)?;
    let span = crate::observe::chat_span(&spec);
    let mut builder = ResponseBuilder::new();
    let streamed: Result<(), ModelError> = async {
        let mut stream = client.stream(request).await?;
        while let Some(event) = stream.next().await {
            builder.push(event?);
        }
        Ok(())
    }
    .instrument(span.clone())
    .await;
    let response = builder.finish();
    // A call that failed before reporting anything is not a call on the ledger.
    let reported = streamed.is_ok() || response.usage != Usage::default();
    let debit = if reported {
        meter.record(&spec, &response.usage).map(|_| ())
    } else {
        Ok(())
    };
    let failure = streamed.as_ref().err().or(debit.as_ref().err());
    crate::observe::record_call(&span, meter, &spec, &response.usage, failure);
    drop(span);
    streamed?;
    debit?;
    Ok((response.text(), response.usage))
}

/// Calls `client` in schema mode and validates the answer with `validate`; an answer that is
/// not JSON, or that `validate` refuses, gets one repair retry with the reason.
pub async fn call_structured<T>(
    client: &dyn ModelClient,
    meter: &Meter,
    request: &StructuredRequest,
    validate: impl Fn(&Value) -> Result<T, String>,
) -> Result<(T, Usage), StructuredError> {
    let mut model_request = ModelRequest {
        system: Some(request.system.clone()).filter(|s| !s.is_empty()),
        messages: vec![Message::user(request.prompt.clone())],
        output: OutputFormat::JsonSchema {
            name: request.schema_name.clone(),
            schema: request.schema.clone(),
        },
        max_tokens: request.max_tokens,
        ..ModelRequest::default()
    };
    let mut usage = Usage::default();
    let mut last_problem = String::new();
    for attempt in 0..2 {
        let (text, spent) = metered_call(client, meter, &model_request)
            .await
            .map_err(StructuredError::Model)?;
        crate::turn::add_usage(&mut usage, spent);
        let problem = match serde_json::from_str::<Value>(strip_fences(&text)) {
            Ok(value) => match validate(&value) {
                Ok(t) => return Ok((t, usage)),
                Err(problem) => problem,
            },
            Err(e) => format!("not valid JSON ({e})"),
        };
        last_problem = problem;
        if attempt == 0 {
            model_request
                .messages
                .push(Message::assistant(vec![Part::text(text)]));
            model_request.messages.push(Message::user(format!(
                "Your answer could not be used: {last_problem}. Answer again with only the JSON \
                 object the schema describes."
            )));
        }
    }
    Err(StructuredError::Invalid {
        message: last_problem,
    })
}

/// A model that wraps its JSON in a Markdown code fence still answered in JSON.
fn strip_fences(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}
