//! GitHub in the server: the provider the worker pool opens pull requests with, and the webhook
//! route that hears CI verdicts, merges and mentions (`POST /api/v1/webhooks/github`).
//!
//! Secrets (the App's key, the webhook secret, a personal token) come from files the
//! configuration names or from the environment, never from the configuration text.

use std::path::PathBuf;
use std::sync::Arc;

use auto_swe_scm_github::{
    GitHubAuth, GitHubConfig, GitHubHost, GitHubScm, GitHubWebhooks, WebhookOutcome, WebhookSecrets,
};
use auto_swe_store::{SecretString, Store};
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::templates::template;
use auto_swe_worker::{Launch, LaunchOptions};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::state::{ApiBytes, AppState};

/// The `[github]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct GitHubSection {
    /// A GitHub Enterprise Server host (`ghe.example.com`); github.com when absent.
    pub host: Option<String>,
    /// The REST API's base, when it is not the host's usual one (a proxy, a test server).
    pub api_base: Option<String>,
    /// Where repositories are cloned from, with `api_base`.
    pub git_base: Option<String>,
    /// The App's id; without it, `AUTO_SWE_GITHUB_TOKEN` (a personal token) is used.
    pub app_id: Option<u64>,
    /// The App's private key (PEM).
    pub private_key_file: Option<PathBuf>,
    /// The webhook secret; else `AUTO_SWE_GITHUB_WEBHOOK_SECRET`.
    pub webhook_secret_file: Option<PathBuf>,
    /// The App's slug and its bot account's user id: the run's commits are then authored by
    /// `{slug}[bot]`, which GitHub links to the App. Both or neither.
    pub bot_slug: Option<String>,
    /// See `bot_slug`.
    pub bot_user_id: Option<u64>,
    /// The mention that starts a run from an issue or comment (default `@auto-swe`).
    pub mention: Option<String>,
    /// The built-in template a mention runs (default `ticket-to-merge`).
    #[serde(default = "default_trigger_template")]
    pub trigger_template: String,
}

fn default_trigger_template() -> String {
    "ticket-to-merge".to_owned()
}

/// GitHub, set up.
#[derive(Debug, Clone)]
pub struct GitHub {
    /// The provider.
    pub scm: Arc<GitHubScm>,
    webhooks: GitHubWebhooks,
    trigger_template: String,
}

/// Why GitHub could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("github: {0}")]
pub struct GitHubSetupError(String);

fn secret(
    file: Option<&PathBuf>,
    variable: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SecretString>, GitHubSetupError> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| GitHubSetupError(format!("{}: {e}", path.display())))?;
        return Ok(Some(SecretString::new(text.trim().to_owned())));
    }
    Ok(env(variable)
        .filter(|v| !v.is_empty())
        .map(SecretString::new))
}

impl GitHub {
    /// The provider and the webhook route for `section`, mirrors under `state_dir`.
    pub fn open(
        section: &GitHubSection,
        store: &Store,
        state_dir: &std::path::Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, GitHubSetupError> {
        let failed = |e: auto_swe_scm_github::GitHubError| GitHubSetupError(e.to_string());
        let host = match (&section.host, &section.api_base, &section.git_base) {
            (host, Some(api), Some(git)) => {
                GitHubHost::custom(host.as_deref().unwrap_or("github.com"), api, git)
                    .map_err(failed)?
            }
            (Some(host), None, None) => GitHubHost::enterprise(host).map_err(failed)?,
            (None, None, None) => GitHubHost::github_com(),
            _ => {
                return Err(GitHubSetupError(
                    "apiBase and gitBase go together".to_owned(),
                ));
            }
        };
        let auth = match (section.app_id, &section.private_key_file) {
            (Some(app_id), Some(_)) => GitHubAuth::App {
                app_id,
                private_key: secret(section.private_key_file.as_ref(), "", env)?
                    .ok_or_else(|| GitHubSetupError("the private key file is empty".to_owned()))?,
            },
            (Some(_), None) => {
                return Err(GitHubSetupError("appId needs privateKeyFile".to_owned()));
            }
            (None, _) => {
                GitHubAuth::Token(secret(None, "AUTO_SWE_GITHUB_TOKEN", env)?.ok_or_else(|| {
                    GitHubSetupError(
                        "configure appId and privateKeyFile, or set AUTO_SWE_GITHUB_TOKEN"
                            .to_owned(),
                    )
                })?)
            }
        };
        let host_name = host.host.clone();
        let mut config = GitHubConfig::new(host, auth, state_dir.join("github-mirrors"));
        config.commit_identity = match (&section.bot_slug, section.bot_user_id) {
            (Some(slug), Some(id)) => Some(GitHubConfig::bot_identity(slug, id)),
            (None, None) => None,
            _ => {
                return Err(GitHubSetupError(
                    "botSlug and botUserId go together".to_owned(),
                ));
            }
        };
        let scm = Arc::new(GitHubScm::new(config, store.clone(), LocalGit::new()).map_err(failed)?);
        let webhook_secret = secret(
            section.webhook_secret_file.as_ref(),
            "AUTO_SWE_GITHUB_WEBHOOK_SECRET",
            env,
        )?
        .ok_or_else(|| {
            GitHubSetupError(
                "set AUTO_SWE_GITHUB_WEBHOOK_SECRET or webhookSecretFile: unsigned deliveries \
                 are never taken"
                    .to_owned(),
            )
        })?;
        let secrets = if section.host.is_some() {
            WebhookSecrets::enterprise_only().with_host(&host_name, webhook_secret)
        } else {
            WebhookSecrets::new(webhook_secret)
        };
        let mut webhooks =
            GitHubWebhooks::new(secrets, vec![Arc::clone(&scm)]).with_default_host(&host_name);
        if let Some(mention) = &section.mention {
            webhooks = webhooks.with_mention(mention);
        }
        if template(&section.trigger_template).is_none() {
            return Err(GitHubSetupError(format!(
                "triggerTemplate {} is not a built-in template",
                section.trigger_template
            )));
        }
        Ok(Self {
            scm,
            webhooks,
            trigger_template: section.trigger_template.clone(),
        })
    }
}

/// A GitHub delivery: verified, deduplicated and acted on. Refusals answer in the one error
/// shape with the crate's status (401 for a bad signature, 400 for a bad delivery, 422 for a
/// repository no connection covers); a replayed delivery answers 200 and does nothing.
#[utoipa::path(post, path = "/api/v1/webhooks/github", tag = "webhooks",
    request_body(content = String, description = "GitHub's JSON payload, signed in X-Hub-Signature-256", content_type = "application/json"),
    params(("X-GitHub-Event" = String, Header), ("X-GitHub-Delivery" = String, Header),
           ("X-Hub-Signature-256" = String, Header)),
    responses((status = 202, description = "acted on or acknowledged", body = Object),
              (status = 200, description = "a delivery seen before", body = Object),
              (status = 404, body = crate::routes::ErrorBody),
              (status = 422, body = crate::routes::ErrorBody)))]
pub async fn webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    // A delivery without GitHub's headers is refused the same way whether or not GitHub is
    // configured here.
    for name in ["x-github-event", "x-github-delivery", "x-hub-signature-256"] {
        if headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.trim().is_empty())
        {
            return Err(ApiError::bad_request(
                "WEBHOOK_HEADER_MISSING",
                format!("the delivery has no {name} header"),
            ));
        }
    }
    let Some(github) = state.github() else {
        return Err(ApiError::not_found(
            "ROUTE_NOT_FOUND",
            "GitHub is not configured on this server",
        ));
    };
    let outcome = github.webhooks.handle(&headers, &body).await.map_err(|e| {
        let status =
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(code = e.code(), error = %e, "a GitHub delivery failed");
        }
        ApiError::new(status, e.code(), e.to_string())
    })?;
    match outcome {
        WebhookOutcome::Duplicate { .. } => Ok((
            StatusCode::OK,
            Json(serde_json::to_value(&outcome).unwrap_or_default()),
        )),
        WebhookOutcome::Trigger(trigger) => {
            let Some(found) = template(&github.trigger_template) else {
                return Err(ApiError::internal(
                    "TEMPLATE_NOT_FOUND",
                    "the trigger template",
                ));
            };
            let delivery = headers
                .get("x-github-delivery")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let mut body = trigger.body.clone();
            if let Some(comment) = &trigger.comment {
                body = format!("{body}\n\n{comment}");
            }
            let mut options = LaunchOptions::default();
            options.idempotency_key = Some(format!("github-delivery-{delivery}"));
            let launched = state
                .launch(
                    Launch {
                        spec: found.spec(),
                        input: json!({
                            "ticket": { "title": trigger.title, "body": body,
                                        "id": format!("#{}", trigger.issue_number) },
                            "repository": trigger.connection_id,
                        }),
                        submitter: format!("github:{}", trigger.sender),
                    },
                    options,
                )
                .await
                .map_err(|e| crate::routes::launch::launch_error(&e))?;
            Ok((
                StatusCode::ACCEPTED,
                Json(json!({ "outcome": "trigger", "runId": launched.run().id })),
            ))
        }
        other => Ok((
            StatusCode::ACCEPTED,
            Json(serde_json::to_value(&other).unwrap_or_default()),
        )),
    }
}
