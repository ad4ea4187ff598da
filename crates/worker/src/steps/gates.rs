//! Quality gates: the repository's own lint, typecheck, test and build commands, run in a fresh
//! workspace. The same runner judges a pull request's head as local CI.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::DispatchError;
use auto_swe_spec::{FieldDescriptor, InputType, StepDescriptor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::egress::EgressTrace;
use super::workspace::tail;
use super::{StepContext, StepExecutor, WorkerServices};
use crate::scm::LocalRepository;

/// The file a repository names its gate commands in.
pub const GATE_FILE: &str = "auto-swe.toml";

/// Gates run in this order; other names follow alphabetically.
const GATE_ORDER: [&str; 4] = ["lint", "typecheck", "test", "build"];

/// Longest one gate command may run.
const GATE_TIMEOUT: Duration = Duration::from_secs(900);

/// Characters of a gate's output kept.
const GATE_OUTPUT_CHARS: usize = 8_000;

/// A repository's gate commands: `[gates]` in `auto-swe.toml` (name = shell command) run as
/// quality gates and in CI; `[ci]` names checks only CI runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GateConfig {
    /// Quality gates: name to command.
    #[serde(default)]
    pub gates: BTreeMap<String, String>,
    /// Checks only CI runs: name to command.
    #[serde(default)]
    pub ci: BTreeMap<String, String>,
}

/// Which of a repository's commands to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateScope<'a> {
    /// The quality gates (`[gates]`), or only the named ones.
    Gates(Option<&'a [String]>),
    /// Everything CI runs: the gates, then the `[ci]` checks.
    Ci,
}

impl GateConfig {
    /// Reads the gate file's text. A file that does not parse is an error the run ends with,
    /// not a silent pass.
    pub fn parse(text: &str) -> Result<Self, DispatchError> {
        let config: Self = toml::from_str(text).map_err(|e| {
            DispatchError::non_retryable(
                "GATE_CONFIG_INVALID",
                format!("{GATE_FILE} does not parse: {}", e.message()),
            )
        })?;
        if let Some((name, _)) = config
            .gates
            .iter()
            .chain(&config.ci)
            .find(|(_, c)| c.trim().is_empty())
        {
            return Err(DispatchError::non_retryable(
                "GATE_CONFIG_INVALID",
                format!("{GATE_FILE}: gate `{name}` has an empty command"),
            ));
        }
        Ok(config)
    }

    /// The commands `scope` runs, in run order.
    #[must_use]
    pub fn selected(&self, scope: GateScope<'_>) -> Vec<(&str, &str)> {
        match scope {
            GateScope::Gates(only) => self
                .ordered()
                .into_iter()
                .filter(|(name, _)| only.is_none_or(|names| names.iter().any(|n| n == name)))
                .collect(),
            GateScope::Ci => {
                let mut all = self.ordered();
                all.extend(self.ci.iter().map(|(n, c)| (n.as_str(), c.as_str())));
                all
            }
        }
    }

    /// The gates in run order.
    #[must_use]
    pub fn ordered(&self) -> Vec<(&str, &str)> {
        let mut gates: Vec<(&str, &str)> = self
            .gates
            .iter()
            .map(|(name, command)| (name.as_str(), command.as_str()))
            .collect();
        gates.sort_by_key(|(name, _)| {
            (
                GATE_ORDER
                    .iter()
                    .position(|g| g == name)
                    .unwrap_or(GATE_ORDER.len()),
                (*name).to_owned(),
            )
        });
        gates
    }

    /// The command of one gate.
    #[must_use]
    pub fn command(&self, name: &str) -> Option<&str> {
        self.gates.get(name).map(String::as_str)
    }
}

/// One gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateResult {
    /// Gate name.
    pub gate: String,
    /// Its command.
    pub command: String,
    /// Whether it passed.
    pub passed: bool,
    /// Exit status.
    pub exit_code: i32,
    /// The end of its output.
    pub output: String,
}

/// Every gate's verdict on one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateOutcome {
    /// Whether every gate passed (true when the repository names none).
    pub passed: bool,
    /// The commit judged.
    pub head_sha: String,
    /// Per gate.
    pub results: Vec<GateResult>,
}

impl GateOutcome {
    /// The outcome as a log: each gate's command, status and output.
    #[must_use]
    pub fn log(&self) -> String {
        use std::fmt::Write as _;
        let mut log = String::new();
        for result in &self.results {
            let _ = writeln!(
                log,
                "== {} ({}) exit {} {}\n{}",
                result.gate,
                result.command,
                result.exit_code,
                if result.passed { "PASSED" } else { "FAILED" },
                result.output
            );
        }
        if self.results.is_empty() {
            let _ = writeln!(log, "no gates: {GATE_FILE} names none");
        }
        log
    }
}

/// The repository's gate commands at `revision`.
pub(crate) async fn gate_config(
    services: &WorkerServices,
    repo: &LocalRepository,
    revision: &str,
) -> Result<GateConfig, DispatchError> {
    let text = services
        .git
        .show_file(&repo.path, revision, GATE_FILE)
        .await
        .map_err(|e| DispatchError::failure(e.code(), e.to_string()))?;
    match text {
        Some(text) => GateConfig::parse(&text),
        None => Ok(GateConfig::default()),
    }
}

/// Runs what `scope` selects of the repository's commands at `branch`'s commit `head_sha`
/// (read from that commit) in a fresh workspace.
pub async fn run_gates(
    services: &WorkerServices,
    repo: &LocalRepository,
    branch: &str,
    head_sha: &str,
    scope: GateScope<'_>,
) -> Result<GateOutcome, DispatchError> {
    run_gates_traced(services, repo, branch, head_sha, scope, None).await
}

/// [`run_gates`], the workspace proxy's refusals (with egress) going to `trace`.
async fn run_gates_traced(
    services: &WorkerServices,
    repo: &LocalRepository,
    branch: &str,
    head_sha: &str,
    scope: GateScope<'_>,
    trace: Option<EgressTrace>,
) -> Result<GateOutcome, DispatchError> {
    let config = gate_config(services, repo, head_sha).await?;
    let selected = config.selected(scope);
    let mut results = Vec::new();
    if !selected.is_empty() {
        let bundle = services
            .git
            .bundle(&repo.path, &[&format!("refs/heads/{branch}")])
            .await
            .map_err(|e| DispatchError::failure(e.code(), e.to_string()))?;
        let checkout = services
            .workspaces
            .checkout(
                "gates",
                bundle,
                branch,
                Some(head_sha),
                &services.scm.commit_identity(),
                trace,
            )
            .await?;
        for (gate, command) in selected {
            let run = checkout.run(command, GATE_TIMEOUT, GATE_OUTPUT_CHARS).await;
            let run = match run {
                Ok(run) => run,
                Err(error) => {
                    checkout.remove().await;
                    return Err(error);
                }
            };
            results.push(GateResult {
                gate: gate.to_owned(),
                command: command.to_owned(),
                passed: run.status == 0,
                exit_code: run.status,
                output: tail(&run.output, GATE_OUTPUT_CHARS),
            });
        }
        checkout.remove().await;
    }
    Ok(GateOutcome {
        passed: results.iter().all(|r| r.passed),
        head_sha: head_sha.to_owned(),
        results,
    })
}

/// `runQualityGates`: the repository's gates on the run's branch head.
pub(crate) struct QualityGates;

#[async_trait]
impl StepExecutor for QualityGates {
    fn time_limit(&self, _request: &auto_swe_interpreter::StepDispatch) -> std::time::Duration {
        super::IMPLEMENTER_TIME_LIMIT
    }

    fn descriptor(&self) -> StepDescriptor {
        let mut step = StepDescriptor {
            description: Some(format!(
                "Runs the repository's gate commands ({GATE_FILE} [gates]) on the run's branch head in a fresh workspace."
            )),
            ..StepDescriptor::default()
        };
        step.inputs.insert(
            "gates".to_owned(),
            FieldDescriptor {
                kind: Some(InputType::Array),
                required: false,
                description: Some("Only these gates (default: all).".to_owned()),
            },
        );
        step.outputs.insert(
            "passed".to_owned(),
            FieldDescriptor {
                kind: Some(InputType::Boolean),
                required: false,
                description: Some("Every gate passed.".to_owned()),
            },
        );
        step
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        let services = context.services;
        let repo = super::implement::repository(context).await?;
        let branch = context.run.branch();
        let head = services
            .git
            .rev_parse(&repo.path, &format!("refs/heads/{branch}"))
            .await
            .map_err(|e| DispatchError::non_retryable(e.code(), e.to_string()))?;
        let only: Option<Vec<String>> = context
            .request
            .inputs
            .get("gates")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            });
        let outcome = tokio::select! {
            outcome = run_gates_traced(
                services,
                &repo,
                &branch,
                &head,
                GateScope::Gates(only.as_deref()),
                Some(context.egress_trace()),
            ) => outcome?,
            () = context.cancel.cancelled() => {
                return Err(DispatchError::cancelled("the gates were cancelled"));
            }
        };
        context.tracer.record(auto_swe_runtime::TraceEntry::event(
            "gates.ran",
            serde_json::json!({
                "passed": outcome.passed,
                "gates": outcome.results.iter().map(|r| (&r.gate, r.passed)).collect::<Vec<_>>(),
            }),
        ));
        serde_json::to_value(&outcome)
            .map_err(|e| DispatchError::non_retryable("GATES_FAILED", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_run_in_the_usual_order_and_bad_files_are_refused() {
        let config = GateConfig::parse(
            "[gates]\nbuild = \"make\"\ntest = \"sh t.sh\"\nzz = \"true\"\nlint = \"sh lint.sh\"\n",
        )
        .unwrap();
        let names: Vec<&str> = config.ordered().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["lint", "test", "build", "zz"]);
        assert_eq!(
            GateConfig::parse("[gates]\ntest = 3").unwrap_err().code,
            "GATE_CONFIG_INVALID"
        );
        assert_eq!(
            GateConfig::parse("[gates]\ntest = \" \"").unwrap_err().code,
            "GATE_CONFIG_INVALID"
        );
        assert_eq!(GateConfig::parse("").unwrap(), GateConfig::default());
        let with_ci =
            GateConfig::parse("[gates]\ntest = \"t\"\n[ci]\nchangelog = \"c\"\n").unwrap();
        let only_test = ["test".to_owned()];
        assert_eq!(
            with_ci.selected(GateScope::Gates(None)),
            vec![("test", "t")]
        );
        assert_eq!(
            with_ci.selected(GateScope::Gates(Some(&only_test))),
            vec![("test", "t")]
        );
        assert_eq!(
            with_ci.selected(GateScope::Ci),
            vec![("test", "t"), ("changelog", "c")]
        );
        assert_eq!(
            GateConfig::parse("[gatez]\ntest = \"t\"").unwrap_err().code,
            "GATE_CONFIG_INVALID"
        );
    }
}
