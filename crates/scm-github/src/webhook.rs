//! GitHub webhooks, as a library call a server mounts: the signature (`X-Hub-Signature-256`,
//! HMAC-SHA256 under the host's secret, compared in constant time) is checked before anything
//! is read, each delivery is acted on once, and only three things act: a finished CI report
//! about a pull request pending at that head (`ciPipelineSignal`), a merge
//! (`humanMergeSignal`), and a mention in an issue or comment (a trigger). Everything else is
//! acknowledged and dropped.

use std::collections::HashMap;
use std::sync::Arc;

use auto_swe_store::{CiStatus, PullRequestState, PullRequestUpdate, SecretString, StoreError};
use auto_swe_worker::{CI_SIGNAL, MERGE_SIGNAL};
use hmac::{Hmac, Mac};
use http::HeaderMap;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::error::GitHubError;
use crate::models::{OwnerJson, RepositoryJson};
use crate::scm::{GitHubScm, RepoRef};

/// The header naming a GitHub Enterprise host.
pub const ENTERPRISE_HOST_HEADER: &str = "x-github-enterprise-host";
/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// The event header.
pub const EVENT_HEADER: &str = "x-github-event";
/// The delivery id header.
pub const DELIVERY_HEADER: &str = "x-github-delivery";
/// The `author_association` values whose mentions start runs.
pub(crate) const TRUSTED_ASSOCIATIONS: [&str; 3] = ["OWNER", "MEMBER", "COLLABORATOR"];
/// The mention that makes an issue or comment a trigger, by default.
pub const DEFAULT_MENTION: &str = "@auto-swe";

/// Webhook secrets: github.com's (or the default host's), and one per Enterprise host, used
/// only for deliveries naming that host.
#[derive(Clone, Default)]
pub struct WebhookSecrets {
    default: Option<SecretString>,
    hosts: HashMap<String, SecretString>,
}

impl std::fmt::Debug for WebhookSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSecrets")
            .field("default", &self.default.is_some())
            .field("hosts", &self.hosts.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl WebhookSecrets {
    /// The default host's secret.
    #[must_use]
    pub fn new(default: SecretString) -> Self {
        Self {
            default: Some(default),
            hosts: HashMap::new(),
        }
    }

    /// No default secret: only Enterprise hosts' deliveries are taken.
    #[must_use]
    pub fn enterprise_only() -> Self {
        Self::default()
    }

    /// Adds an Enterprise host's secret (`host[:port]`, any case).
    #[must_use]
    pub fn with_host(mut self, host: &str, secret: SecretString) -> Self {
        self.hosts.insert(host.trim().to_ascii_lowercase(), secret);
        self
    }
}

/// Why a delivery was refused. The server answers with [`WebhookError::http_status`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// A required header is missing.
    #[error("the delivery has no `{0}` header")]
    MissingHeader(&'static str),
    /// The signature does not verify.
    #[error("the delivery's signature does not verify")]
    BadSignature,
    /// The delivery names a host no secret covers.
    #[error("no webhook secret covers host `{0}`")]
    UnknownHost(String),
    /// The delivery is about a repository no connection covers.
    #[error("no connection covers {0}")]
    NotCovered(String),
    /// The body is not the JSON the event documents.
    #[error("the delivery's body does not read: {0}")]
    Malformed(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// GitHub failed while the delivery was judged.
    #[error(transparent)]
    GitHub(#[from] GitHubError),
}

impl WebhookError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            WebhookError::MissingHeader(_) => "WEBHOOK_HEADER_MISSING",
            WebhookError::BadSignature => "WEBHOOK_SIGNATURE_INVALID",
            WebhookError::UnknownHost(_) => "WEBHOOK_HOST_UNKNOWN",
            WebhookError::NotCovered(_) => "REPOSITORY_NOT_COVERED",
            WebhookError::Malformed(_) => "WEBHOOK_PAYLOAD_INVALID",
            WebhookError::Store(error) => error.code(),
            WebhookError::GitHub(error) => error.code(),
        }
    }

    /// The HTTP status to answer with: 401 for signatures and hosts (nothing about the
    /// repository is revealed), 400 for a bad delivery, 422 for an uncovered repository, 503 when
    /// retrying the delivery may succeed, 500 otherwise.
    #[must_use]
    pub fn http_status(&self) -> u16 {
        match self {
            WebhookError::BadSignature | WebhookError::UnknownHost(_) => 401,
            WebhookError::MissingHeader(_) | WebhookError::Malformed(_) => 400,
            WebhookError::NotCovered(_) => 422,
            WebhookError::Store(error) if error.is_retryable() => 503,
            WebhookError::GitHub(error) if error.is_retryable() => 503,
            WebhookError::Store(_) | WebhookError::GitHub(_) => 500,
        }
    }
}

/// A mention asking for a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TriggerRequest {
    /// The repository's connection.
    pub connection_id: String,
    /// The issue (or pull request) number.
    pub issue_number: u64,
    /// Its title.
    pub title: String,
    /// Its body.
    pub body: String,
    /// The comment that mentioned the worker, when a comment did.
    pub comment: Option<String>,
    /// Who asked.
    pub sender: String,
}

/// What a verified delivery did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
#[non_exhaustive]
pub enum WebhookOutcome {
    /// A signal went to a run.
    Signalled {
        /// The run.
        run_id: String,
        /// `ciPipelineSignal` or `humanMergeSignal`.
        signal: &'static str,
        /// What it carried.
        payload: Value,
    },
    /// A mention asks for a run; the server launches it.
    Trigger(TriggerRequest),
    /// A pull request closed without merging was recorded; no run is signalled.
    Closed {
        /// The connection.
        connection_id: String,
        /// The pull request.
        number: i64,
    },
    /// This delivery was seen before.
    Duplicate {
        /// Its id.
        delivery_id: String,
    },
    /// Acknowledged and dropped.
    Ignored {
        /// The event.
        event: String,
        /// Why nothing was done.
        reason: String,
    },
}

/// The webhook endpoint's logic, over one provider per host.
#[derive(Debug, Clone)]
pub struct GitHubWebhooks {
    secrets: WebhookSecrets,
    providers: HashMap<String, Arc<GitHubScm>>,
    default_host: String,
    mention: String,
}

fn ignored(event: &str, reason: impl Into<String>) -> WebhookOutcome {
    WebhookOutcome::Ignored {
        event: event.to_owned(),
        reason: reason.into(),
    }
}

impl GitHubWebhooks {
    /// Deliveries verified with `secrets`, for repositories of `providers` (one per host).
    /// Deliveries without an Enterprise host header are github.com's.
    #[must_use]
    pub fn new(secrets: WebhookSecrets, providers: Vec<Arc<GitHubScm>>) -> Self {
        Self {
            secrets,
            providers: providers
                .into_iter()
                .map(|p| (p.host().to_owned(), p))
                .collect(),
            default_host: "github.com".to_owned(),
            mention: DEFAULT_MENTION.to_owned(),
        }
    }

    /// Deliveries without an Enterprise host header are `host`'s.
    #[must_use]
    pub fn with_default_host(mut self, host: &str) -> Self {
        self.default_host = host.trim().to_ascii_lowercase();
        self
    }

    /// The mention that triggers a run (`@my-app`).
    #[must_use]
    pub fn with_mention(mut self, mention: &str) -> Self {
        mention.clone_into(&mut self.mention);
        self
    }

    /// Verifies and acts on one delivery: its headers and its raw body.
    #[tracing::instrument(
        level = "info",
        name = "github.webhook",
        skip_all,
        fields(event, delivery, host, outcome)
    )]
    pub async fn handle(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<WebhookOutcome, WebhookError> {
        let header = |name: &'static str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let host = match header(ENTERPRISE_HOST_HEADER) {
            Some(host) => host.to_ascii_lowercase(),
            None => self.default_host.clone(),
        };
        let span = tracing::Span::current();
        span.record("host", host.as_str());
        let secret = if header(ENTERPRISE_HOST_HEADER).is_some() {
            self.secrets.hosts.get(&host)
        } else {
            self.secrets.default.as_ref()
        }
        .ok_or_else(|| WebhookError::UnknownHost(host.clone()))?;
        let signature =
            header(SIGNATURE_HEADER).ok_or(WebhookError::MissingHeader(SIGNATURE_HEADER))?;
        verify_signature(secret, body, signature)?;
        let event = header(EVENT_HEADER).ok_or(WebhookError::MissingHeader(EVENT_HEADER))?;
        let delivery =
            header(DELIVERY_HEADER).ok_or(WebhookError::MissingHeader(DELIVERY_HEADER))?;
        span.record("event", event);
        span.record("delivery", delivery);
        let payload: Value =
            serde_json::from_slice(body).map_err(|e| WebhookError::Malformed(e.to_string()))?;
        let digest = json!({
            "repository": payload.pointer("/repository/full_name"),
            "action": payload.get("action"),
        });
        let source = format!("github:{host}");
        let store = self.provider_store(&host);
        if let Some(store) = store {
            let receipt = store
                .record_delivery(&source, delivery, event, &digest)
                .await?;
            if receipt == auto_swe_store::DeliveryReceipt::Duplicate {
                span.record("outcome", "duplicate");
                return Ok(WebhookOutcome::Duplicate {
                    delivery_id: delivery.to_owned(),
                });
            }
        }
        let outcome = match self.dispatch(&host, event, &payload).await {
            Ok(outcome) => outcome,
            Err(error) => {
                // Not acted on: GitHub's redelivery of it must be acted on, not dropped as a
                // duplicate. A failure to forget is logged; the action's own error is what the
                // sender hears.
                if let Some(store) = store
                    && let Err(forget) = store.forget_delivery(&source, delivery).await
                {
                    tracing::warn!(code = forget.code(), "a failed delivery stays recorded");
                }
                span.record("outcome", "failed");
                return Err(error);
            }
        };
        span.record(
            "outcome",
            match &outcome {
                WebhookOutcome::Signalled { signal, .. } => signal,
                WebhookOutcome::Trigger(_) => "trigger",
                WebhookOutcome::Closed { .. } => "closed",
                WebhookOutcome::Duplicate { .. } => "duplicate",
                WebhookOutcome::Ignored { .. } => "ignored",
            },
        );
        Ok(outcome)
    }

    fn provider_store(&self, host: &str) -> Option<&auto_swe_store::Store> {
        self.providers.get(host).map(|p| p.store())
    }

    async fn dispatch(
        &self,
        host: &str,
        event: &str,
        payload: &Value,
    ) -> Result<WebhookOutcome, WebhookError> {
        let action = payload.get("action").and_then(Value::as_str).unwrap_or("");
        match event {
            "check_run" | "check_suite" if action == "completed" => {
                let (provider, repo) = self.covered(host, payload).await?;
                self.ci_report(&provider, &repo, event, payload).await
            }
            "pull_request" if action == "closed" => {
                let (provider, repo) = self.covered(host, payload).await?;
                self.closed(&provider, &repo, payload).await
            }
            "issues" if action == "opened" => self.mention(host, event, payload, None).await,
            "issue_comment" if action == "created" => {
                let comment = payload
                    .pointer("/comment/body")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.mention(host, event, payload, Some(comment)).await
            }
            _ => Ok(ignored(
                event,
                format!("`{event}` `{action}` is not acted on"),
            )),
        }
    }

    /// The provider and repository a payload is about; a repository no connection covers is
    /// refused.
    async fn covered(
        &self,
        host: &str,
        payload: &Value,
    ) -> Result<(Arc<GitHubScm>, RepoRef), WebhookError> {
        let repository: RepositoryJson = payload
            .get("repository")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| WebhookError::Malformed(format!("repository: {e}")))?
            .ok_or_else(|| WebhookError::Malformed("no repository".to_owned()))?;
        let full_name = format!("{}/{}", repository.owner.login, repository.name);
        let provider = self
            .providers
            .get(host)
            .cloned()
            .ok_or_else(|| WebhookError::NotCovered(format!("{host}/{full_name}")))?;
        let connection = provider
            .store()
            .find_repo_connection(host, &repository.owner.login, &repository.name)
            .await?
            .ok_or_else(|| WebhookError::NotCovered(format!("{host}/{full_name}")))?;
        let repo = provider.repo_ref(&connection.id).await?;
        Ok((provider, repo))
    }

    /// A finished check run or suite: a verdict for the run only when its pull request is
    /// pending at exactly that head and every check there has finished.
    async fn ci_report(
        &self,
        provider: &GitHubScm,
        repo: &RepoRef,
        event: &str,
        payload: &Value,
    ) -> Result<WebhookOutcome, WebhookError> {
        let Some(object) = payload.get(event) else {
            return Err(WebhookError::Malformed(format!("no `{event}` object")));
        };
        let sha = object
            .get("head_sha")
            .and_then(Value::as_str)
            .ok_or_else(|| WebhookError::Malformed("no head_sha".to_owned()))?;
        if event == "check_run"
            && object.get("name").and_then(Value::as_str) == Some(&provider.config().check_name)
        {
            return Ok(ignored(event, "the worker's own check run"));
        }
        let store = provider.store();
        let Some(pr) = store.pull_request_by_head(&repo.connection_id, sha).await? else {
            return Ok(ignored(event, "no pull request is at that head"));
        };
        if pr.state != PullRequestState::Open || pr.ci_status != CiStatus::Pending {
            return Ok(ignored(
                event,
                "the pull request is not pending at that head",
            ));
        }
        let Some(verdict) = provider.ci_verdict(repo, sha).await? else {
            return Ok(ignored(event, "checks at that head are still running"));
        };
        if !store
            .set_ci_status(&repo.connection_id, sha, verdict)
            .await?
        {
            return Ok(ignored(event, "the head moved on"));
        }
        let Some(run_id) = pr.run_id else {
            return Ok(ignored(event, "no run opened that pull request"));
        };
        let payload = json!({
            "status": verdict.as_str(),
            "headSha": sha,
            "number": pr.number,
        });
        signal(store, &run_id, CI_SIGNAL, payload, event).await
    }

    /// A closed pull request: merged → the run's merge signal; closed by a person without
    /// merging → recorded, no signal (never a merge).
    async fn closed(
        &self,
        provider: &GitHubScm,
        repo: &RepoRef,
        payload: &Value,
    ) -> Result<WebhookOutcome, WebhookError> {
        let pull: crate::models::PullJson = payload
            .get("pull_request")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| WebhookError::Malformed(format!("pull_request: {e}")))?
            .ok_or_else(|| WebhookError::Malformed("no pull_request".to_owned()))?;
        let number = i64::try_from(pull.number)
            .map_err(|_| WebhookError::Malformed("pull request number".to_owned()))?;
        let store = provider.store();
        let known = match store.get_pull_request(&repo.connection_id, number).await {
            Ok(pr) => pr,
            Err(StoreError::NotFound { .. }) => {
                return Ok(ignored("pull_request", "not a run's pull request"));
            }
            Err(error) => return Err(error.into()),
        };
        let merged = pull.is_merged();
        store
            .upsert_pull_request(PullRequestUpdate {
                connection_id: repo.connection_id.clone(),
                number,
                run_id: known.run_id.clone(),
                url: known.url.clone(),
                head_sha: known.head_sha.clone(),
                state: if merged {
                    PullRequestState::Merged
                } else {
                    PullRequestState::Closed
                },
            })
            .await?;
        let conclusion = if merged { "success" } else { "cancelled" };
        let summary = if merged {
            "The pull request was merged."
        } else {
            "The pull request was closed without merging."
        };
        if let Err(error) = provider
            .finish_own_check(repo, &known.head_sha, conclusion, summary)
            .await
        {
            tracing::warn!(code = error.code(), "the run's check run was not finished");
        }
        if !merged {
            return Ok(WebhookOutcome::Closed {
                connection_id: repo.connection_id.clone(),
                number,
            });
        }
        let Some(run_id) = known.run_id else {
            return Ok(ignored("pull_request", "no run opened that pull request"));
        };
        let payload = json!({
            "merged": true,
            "number": number,
            "sha": pull.merge_commit_sha,
            "headSha": pull.head.sha,
            "mergedBy": pull.merged_by.map(|u| u.login),
        });
        signal(store, &run_id, MERGE_SIGNAL, payload, "pull_request").await
    }

    /// An opened issue or a new comment that mentions the worker, by a person, on a covered
    /// repository: a trigger.
    async fn mention(
        &self,
        host: &str,
        event: &str,
        payload: &Value,
        comment: Option<String>,
    ) -> Result<WebhookOutcome, WebhookError> {
        let sender: Option<OwnerJson> = payload
            .get("sender")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok());
        if sender.as_ref().and_then(|s| s.kind.as_deref()) == Some("Bot") {
            return Ok(ignored(event, "a bot's words start nothing"));
        }
        let issue = payload
            .get("issue")
            .ok_or_else(|| WebhookError::Malformed("no issue".to_owned()))?;
        let text = |key: &str| {
            issue
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        // Only people the repository trusts start runs: on a public repository anyone may
        // comment, and a run spends the organization's budget on the commenter's words.
        let author = match event {
            "issue_comment" => payload.get("comment"),
            _ => Some(issue),
        }
        .and_then(|o| o.get("author_association"))
        .and_then(Value::as_str)
        .unwrap_or("NONE");
        if !TRUSTED_ASSOCIATIONS.contains(&author) {
            return Ok(ignored(
                event,
                format!(
                    "{author}: only the repository's owners, members and collaborators start runs"
                ),
            ));
        }
        let body = text("body");
        let mentioned = match &comment {
            Some(comment) => mentions(comment, &self.mention),
            None => mentions(&body, &self.mention) || mentions(&text("title"), &self.mention),
        };
        if !mentioned {
            return Ok(ignored(event, "the worker is not mentioned"));
        }
        let (_, repo) = self.covered(host, payload).await?;
        let issue_number = issue
            .get("number")
            .and_then(Value::as_u64)
            .ok_or_else(|| WebhookError::Malformed("no issue number".to_owned()))?;
        Ok(WebhookOutcome::Trigger(TriggerRequest {
            connection_id: repo.connection_id,
            issue_number,
            title: text("title"),
            body,
            comment,
            sender: sender.map(|s| s.login).unwrap_or_default(),
        }))
    }
}

async fn signal(
    store: &auto_swe_store::Store,
    run_id: &str,
    name: &'static str,
    payload: Value,
    event: &str,
) -> Result<WebhookOutcome, WebhookError> {
    match store.send_signal(run_id, name, &payload).await {
        Ok(_) => Ok(WebhookOutcome::Signalled {
            run_id: run_id.to_owned(),
            signal: name,
            payload,
        }),
        Err(StoreError::RunEnded { .. }) => Ok(ignored(event, "the run has ended")),
        Err(error) => Err(error.into()),
    }
}

/// Whether `text` mentions `handle` as a whole word (any case).
fn mentions(text: &str, handle: &str) -> bool {
    let text = text.to_ascii_lowercase();
    let handle = handle.to_ascii_lowercase();
    text.match_indices(&handle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + handle.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// Checks `sha256=<hex>` against HMAC-SHA256 of `body` under `secret`, in constant time.
pub fn verify_signature(
    secret: &SecretString,
    body: &[u8],
    signature: &str,
) -> Result<(), WebhookError> {
    let hex_digest = signature
        .strip_prefix("sha256=")
        .ok_or(WebhookError::BadSignature)?;
    let expected = hex::decode(hex_digest).map_err(|_| WebhookError::BadSignature)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .map_err(|_| WebhookError::BadSignature)?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| WebhookError::BadSignature)
}

/// The `X-Hub-Signature-256` value GitHub sends for `body` under `secret`.
#[must_use]
pub fn sign(secret: &SecretString, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("hey @auto-swe please fix", "@auto-swe"));
        assert!(mentions("@AUTO-SWE.", "@auto-swe"));
        assert!(!mentions("hey @auto-swe-bot", "@auto-swe"));
        assert!(!mentions("mail x@auto-swe", "@auto-swe"));
        assert!(!mentions("nothing here", "@auto-swe"));
    }

    #[test]
    fn signatures_verify_only_with_the_secret_and_the_body() {
        let secret = SecretString::new("It's a Secret to Everybody");
        let body = b"Hello, World!";
        let good = sign(&secret, body);
        assert!(verify_signature(&secret, body, &good).is_ok());
        assert!(verify_signature(&secret, b"Hello, World?", &good).is_err());
        assert!(verify_signature(&SecretString::new("other"), body, &good).is_err());
        for bad in [
            "",
            "sha256=",
            "sha1=abcd",
            "sha256=zz",
            &good[..good.len() - 2],
        ] {
            assert!(verify_signature(&secret, body, bad).is_err(), "{bad}");
        }
    }
}
