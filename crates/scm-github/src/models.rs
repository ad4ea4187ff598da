//! The parts of GitHub's REST and webhook payloads this crate reads. Only the fields used are
//! declared (serde ignores the rest), so a payload that grows new fields still reads; a field
//! GitHub documents as nullable is an `Option`.

use serde::Deserialize;

/// A repository.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RepositoryJson {
    pub(crate) name: String,
    pub(crate) owner: OwnerJson,
    #[serde(default)]
    pub(crate) default_branch: Option<String>,
}

/// A repository's owner, or a user.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct OwnerJson {
    pub(crate) login: String,
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
}

/// An installation.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct InstallationJson {
    pub(crate) id: u64,
}

/// An installation access token.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TokenJson {
    pub(crate) token: String,
    #[serde(default)]
    pub(crate) expires_at: Option<String>,
}

/// A branch end of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RefJson {
    #[serde(rename = "ref")]
    pub(crate) name: String,
    pub(crate) sha: String,
}

/// A pull request.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PullJson {
    pub(crate) number: u64,
    pub(crate) html_url: String,
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) merged: Option<bool>,
    #[serde(default)]
    pub(crate) merged_at: Option<String>,
    #[serde(default)]
    pub(crate) draft: Option<bool>,
    #[serde(default)]
    pub(crate) mergeable: Option<bool>,
    #[serde(default)]
    pub(crate) mergeable_state: Option<String>,
    #[serde(default)]
    pub(crate) merge_commit_sha: Option<String>,
    #[serde(default)]
    pub(crate) merged_by: Option<OwnerJson>,
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) body: Option<String>,
    pub(crate) head: RefJson,
    pub(crate) base: RefJson,
}

impl PullJson {
    /// Whether it was merged (the REST answer says `merged`; lists only `merged_at`).
    pub(crate) fn is_merged(&self) -> bool {
        self.merged.unwrap_or(false) || self.merged_at.is_some()
    }
}

/// The app behind a check.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AppJson {
    pub(crate) id: u64,
    #[serde(default)]
    pub(crate) slug: Option<String>,
}

/// A check run's output.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct OutputJson {
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) summary: Option<String>,
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// A check run.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CheckRunJson {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) head_sha: String,
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) conclusion: Option<String>,
    #[serde(default)]
    pub(crate) app: Option<AppJson>,
    #[serde(default)]
    pub(crate) output: Option<OutputJson>,
}

/// A page of check runs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CheckRunsJson {
    pub(crate) check_runs: Vec<CheckRunJson>,
}

/// A check suite.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CheckSuiteJson {
    pub(crate) head_sha: String,
    #[serde(default)]
    pub(crate) status: Option<String>,
    #[serde(default)]
    pub(crate) conclusion: Option<String>,
    #[serde(default)]
    pub(crate) app: Option<AppJson>,
    #[serde(default)]
    pub(crate) latest_check_runs_count: Option<u64>,
}

/// A page of check suites.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CheckSuitesJson {
    pub(crate) check_suites: Vec<CheckSuiteJson>,
}

/// A conclusion that fails CI. `neutral` and `skipped` do not; `stale` and `cancelled` do (the
/// head was not judged to pass).
pub(crate) fn is_failing(conclusion: Option<&str>) -> bool {
    !matches!(conclusion, Some("success" | "neutral" | "skipped"))
}
