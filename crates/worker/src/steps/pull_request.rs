//! `createOrUpdatePullRequest` (idempotent on the run's branch; re-arms the CI wait for the
//! head) and `fetchCiLogs`.

use async_trait::async_trait;
use auto_swe_interpreter::DispatchError;
use auto_swe_spec::{FieldDescriptor, InputType, StepDescriptor};
use serde_json::{Value, json};

use super::implement::{repository, ticket_text};
use super::outcome::{Checked, SendFailure};
use super::workspace::tail;
use super::{StepContext, StepExecutor};
use crate::scm::{PullRequestCheck, PullRequestRequest, ScmError};

/// Characters of CI log handed to a fixer.
const CI_LOG_CHARS: usize = 12_000;

fn scm_failure(error: &ScmError) -> DispatchError {
    super::step_failure(error.code(), error.to_string(), error.is_retryable())
}

fn field(kind: InputType, description: &str) -> FieldDescriptor {
    FieldDescriptor {
        kind: Some(kind),
        required: false,
        description: Some(description.to_owned()),
    }
}

pub(crate) struct CreateOrUpdatePullRequest;

#[async_trait]
impl StepExecutor for CreateOrUpdatePullRequest {
    fn descriptor(&self) -> StepDescriptor {
        let mut step = StepDescriptor {
            description: Some("Opens the run's pull request from its branch, or moves it to the branch's new head; either way the head's CI is armed. config.draft (boolean) opens it as a draft and config.labels (strings) labels it, where the provider has them.".to_owned()),
            ..StepDescriptor::default()
        };
        step.inputs.insert(
            "title".to_owned(),
            field(
                InputType::String,
                "Title (default: the ticket's first line).",
            ),
        );
        step.inputs
            .insert("body".to_owned(), field(InputType::String, "Body."));
        step.inputs.insert(
            "review".to_owned(),
            field(
                InputType::Object,
                "The review network's output: its findings are commented on the pull request, once per run for the same findings, as plain text.",
            ),
        );
        for (name, kind) in [
            ("number", InputType::Integer),
            ("url", InputType::String),
            ("headSha", InputType::String),
            ("created", InputType::Boolean),
            ("reviewComment", InputType::String),
        ] {
            step.outputs.insert(name.to_owned(), field(kind, ""));
        }
        step
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        context.run.may_write_repository()?;
        let repo = repository(context).await?;
        let mut title = context.input_str("title");
        if title.trim().is_empty() {
            let ticket = ticket_text(context.run.input.get("ticket"));
            title = ticket
                .lines()
                .next()
                .unwrap_or("auto-swe change")
                .chars()
                .take(120)
                .collect();
        }
        let body = context.input_str("body");
        let mut request =
            PullRequestRequest::new(&context.run.run_id, context.run.branch(), title, body);
        request.draft = context
            .config("draft")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        request.labels = context
            .config("labels")
            .and_then(Value::as_array)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        // The pull request is an external write: claimed in the run's outcome ledger first.
        // Every provider finds the run's pull request before it opens one (a repeat cannot open a
        // second), so an error it returns left nothing half-sent; only a crash between the claim
        // and its record leaves the claim pending, and then the provider is asked whether the
        // request was applied.
        let check = || async {
            match context
                .services
                .scm
                .check_pull_request(&repo, &request)
                .await
            {
                Ok(PullRequestCheck::Applied(found)) => {
                    serde_json::to_value(&found).map_or(Checked::CannotTell, Checked::Happened)
                }
                Ok(PullRequestCheck::NotApplied) => Checked::DidNotHappen,
                Ok(PullRequestCheck::CannotTell) => Checked::CannotTell,
                Err(error) => {
                    tracing::warn!(code = error.code(), %error, "the pull request could not be read back");
                    Checked::CannotTell
                }
            }
        };
        let mut opened = context
            .send_once_checked(context.outcome_key("pull-request"), check, || async {
                let opened = context
                    .services
                    .scm
                    .create_or_update_pull_request(&repo, &request)
                    .await
                    .map_err(|e| SendFailure::NotSent(scm_failure(&e)))?;
                serde_json::to_value(&opened).map_err(|e| {
                    SendFailure::MaybeSent(DispatchError::non_retryable(
                        "SCM_FAILED",
                        e.to_string(),
                    ))
                })
            })
            .await?;
        if opened.get("number").is_none() {
            // A person answered that the update was made: what it made is read back from the
            // provider's record of the run's pull request.
            opened = as_made(context, &repo, opened).await?;
        }
        context.tracer.record(auto_swe_runtime::TraceEntry::event(
            "pull_request.updated",
            json!({ "number": opened.get("number"), "headSha": opened.get("headSha"), "created": opened.get("created") }),
        ));
        if let Some(review) = context.request.inputs.get("review") {
            let comment = review_comment(context, &repo, &opened, review).await;
            if let Some(object) = opened.as_object_mut() {
                object.insert(
                    "reviewComment".to_owned(),
                    comment.map_or(Value::Null, Value::String),
                );
            }
        }
        Ok(opened)
    }
}

/// The result of a pull request update a person said was made (`auto-swe runs resolve
/// --happened`): the run's pull request as the provider recorded it, with the person's answer
/// kept beside it.
async fn as_made(
    context: &StepContext<'_>,
    repo: &crate::scm::LocalRepository,
    answer: Value,
) -> Result<Value, DispatchError> {
    let found = context
        .services
        .scm
        .pull_request_of_run(repo, &context.run.run_id)
        .await
        .map_err(|e| scm_failure(&e))?;
    let mut made = match found {
        Some(pr) => json!({
            "number": pr.number,
            "url": pr.url,
            "headSha": pr.head_sha,
            "created": false,
        }),
        None => json!({ "number": Value::Null, "created": false }),
    };
    if let Some(object) = made.as_object_mut() {
        object.insert("resolution".to_owned(), answer);
    }
    Ok(made)
}

/// Comments the review's findings on the pull request `opened`, once per run for the same
/// findings. A comment is a courtesy to the people reading the pull request, never the run's
/// point: a failure to post it is traced and the step goes on.
async fn review_comment(
    context: &StepContext<'_>,
    repo: &crate::scm::LocalRepository,
    opened: &Value,
    review: &Value,
) -> Option<String> {
    let number = opened.get("number").and_then(Value::as_i64)?;
    let head = opened.get("headSha").and_then(Value::as_str).unwrap_or("");
    let comment = super::review_comment::render(review, head)?;
    let key = format!("review-comment:{}", comment.digest);
    let sent = context
        .send_once_as(key, || async {
            let url = context
                .services
                .scm
                .comment_on_pull_request(repo, number, &comment.body)
                .await
                // A refusal made nothing; an unavailable provider may have made it anyway.
                .map_err(|e| {
                    if e.is_retryable() {
                        SendFailure::MaybeSent(scm_failure(&e))
                    } else {
                        SendFailure::NotSent(scm_failure(&e))
                    }
                })?;
            Ok(Value::String(url))
        })
        .await;
    match sent {
        Ok(url) => {
            context.tracer.record(auto_swe_runtime::TraceEntry::event(
                "pull_request.review_comment",
                json!({ "number": number, "findings": comment.digest, "url": url }),
            ));
            url.as_str().map(str::to_owned)
        }
        Err(error) => {
            tracing::warn!(
                code = error.code(),
                "the review's findings were not commented"
            );
            context.tracer.record(auto_swe_runtime::TraceEntry::event(
                "pull_request.review_comment_failed",
                json!({ "number": number, "findings": comment.digest, "code": error.code(), "message": error.message }),
            ));
            None
        }
    }
}

pub(crate) struct FetchCiLogs;

#[async_trait]
impl StepExecutor for FetchCiLogs {
    fn descriptor(&self) -> StepDescriptor {
        let mut step = StepDescriptor {
            description: Some(
                "The CI log of the run's pull request head, for a CI fix.".to_owned(),
            ),
            ..StepDescriptor::default()
        };
        step.outputs.insert(
            "logs".to_owned(),
            field(InputType::String, "The end of the log."),
        );
        step.outputs.insert(
            "headSha".to_owned(),
            field(InputType::String, "The head it judged."),
        );
        step
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        let scm = &context.services.scm;
        let repo = repository(context).await?;
        let pr = scm
            .pull_request_of_run(&repo, &context.run.run_id)
            .await
            .map_err(|e| scm_failure(&e))?
            .ok_or_else(|| {
                DispatchError::non_retryable(
                    "PULL_REQUEST_NOT_FOUND",
                    "the run has no pull request",
                )
            })?;
        let logs = scm
            .fetch_ci_logs(&repo, &pr.head_sha)
            .await
            .map_err(|e| scm_failure(&e))?;
        Ok(json!({
            "headSha": pr.head_sha,
            "ciStatus": pr.ci_status.as_str(),
            "logs": tail(&logs, CI_LOG_CHARS),
        }))
    }
}
