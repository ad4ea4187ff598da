//! The shared behaviour suite of [`WorkspaceBackend`] (feature `testing`): the checks the crate's
//! own backends pass, for an embedder to run against theirs.
//!
//! A backend is checked against what it declares: a [`BackendProfile`] says where commands see
//! the workspace and which [`Guarantee`]s the backend claims, and every workspace's
//! [`WorkspaceHandle::protections`] say which caps are in force. A check whose guarantee or
//! protection is not declared is [`Outcome::Skipped`] with the reason — never passed silently —
//! and a failed check is a [`CheckFailure`] naming the check, the step, what was expected and
//! what happened.
//!
//! Some checks touch the host running the suite: with [`Guarantee::ProcessesOnThisHost`] they
//! read `/proc` to look at an exec's processes from outside, and with
//! [`Guarantee::HostFilesHidden`] they plant canary files in `/root` and `$HOME` (removed
//! afterwards).
//!
//! ```no_run
//! use auto_swe_sandbox::testing::{BackendProfile, BehaviourSuite, Guarantee};
//! use auto_swe_sandbox::{LocalBackend, LocalConfig, LocalRoot, WorkspaceSpec};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let backend = LocalBackend::new(LocalConfig::new(LocalRoot::HostSystem))?;
//! let profile = BackendProfile::new("/workspace").with_claims(Guarantee::ALL.iter().copied());
//! let suite = BehaviourSuite::new(profile, WorkspaceSpec::new("unused", LocalRoot::HostSystem));
//! let report = suite.run(&backend).await;
//! print!("{report}");
//! assert!(report.is_success());
//! # Ok(())
//! # }
//! ```

mod checks;
mod context;
mod host;
mod posture;
mod resources;

pub use host::cgroup_parents;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument as _;

use crate::backend::{Protection, WorkspaceBackend, WorkspaceHandle};
use crate::spec::WorkspaceSpec;

use context::Ctx;

/// A guarantee a backend may claim beyond running commands: the suite checks each one claimed
/// and skips, saying so, the checks of each one not claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Guarantee {
    /// The workspace's processes run on the machine running the suite, so it can look at them
    /// from outside through `/proc` (that a timed-out tree is gone, that no command line holds
    /// a secret).
    ProcessesOnThisHost,
    /// Commands hold no Linux capability.
    NoCapabilities,
    /// Commands cannot write outside the workspace directory and `/tmp`.
    WritesConfined,
    /// Files of the host's accounts (`/root`, the suite's `$HOME`) cannot be read.
    HostFilesHidden,
    /// No container engine socket is reachable.
    NoEngineSocket,
}

impl Guarantee {
    /// Every claim.
    pub const ALL: &'static [Self] = &[
        Self::ProcessesOnThisHost,
        Self::NoCapabilities,
        Self::WritesConfined,
        Self::HostFilesHidden,
        Self::NoEngineSocket,
    ];
}

/// Where a workspace's directory is, as its commands see it.
#[derive(Clone)]
enum WorkspaceDir {
    Fixed(String),
    PerWorkspace(Arc<dyn Fn(&WorkspaceHandle) -> String + Send + Sync>),
}

/// What a backend declares about itself: the suite's parameters.
#[derive(Clone)]
pub struct BackendProfile {
    dir: WorkspaceDir,
    claims: BTreeSet<Guarantee>,
    patience: Duration,
}

impl fmt::Debug for BackendProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = match &self.dir {
            WorkspaceDir::Fixed(dir) => dir.as_str(),
            WorkspaceDir::PerWorkspace(_) => "<per workspace>",
        };
        f.debug_struct("BackendProfile")
            .field("dir", &dir)
            .field("claims", &self.claims)
            .field("patience", &self.patience)
            .finish()
    }
}

impl BackendProfile {
    /// A backend whose commands see every workspace at `dir` (`/workspace` for the crate's
    /// own backends), claiming nothing yet.
    #[must_use]
    pub fn new(dir: impl Into<String>) -> Self {
        Self {
            dir: WorkspaceDir::Fixed(dir.into()),
            claims: BTreeSet::new(),
            patience: Duration::from_secs(60),
        }
    }

    /// A backend whose commands see each workspace at its own directory, claiming nothing yet.
    #[must_use]
    pub fn per_workspace(dir: impl Fn(&WorkspaceHandle) -> String + Send + Sync + 'static) -> Self {
        Self {
            dir: WorkspaceDir::PerWorkspace(Arc::new(dir)),
            ..Self::new(String::new())
        }
    }

    /// Adds claims.
    #[must_use]
    pub fn with_claims(mut self, claims: impl IntoIterator<Item = Guarantee>) -> Self {
        self.claims.extend(claims);
        self
    }

    /// How long the suite waits past an exec's own timeout (or for a call without one) before
    /// it gives up on the backend and fails the check; one minute unless set.
    #[must_use]
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Whether the backend makes `claim`.
    #[must_use]
    pub fn claims(&self, claim: Guarantee) -> bool {
        self.claims.contains(&claim)
    }

    /// The workspace directory of `workspace` as its commands see it.
    #[must_use]
    pub fn workspace_dir(&self, workspace: &WorkspaceHandle) -> String {
        match &self.dir {
            WorkspaceDir::Fixed(dir) => dir.clone(),
            WorkspaceDir::PerWorkspace(dir) => dir(workspace),
        }
    }
}

/// One check of the suite. Its name is its `snake_case` spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Check {
    /// Output, status, exec tags, stdin, exact arguments, concurrent execs.
    ExecAndStatus,
    /// A request's output cap keeps at most that many bytes per stream and says so.
    OutputLimitHonoured,
    /// A timeout ends the exec's whole tree and leaves the workspace usable.
    TimeoutKillsTheTree,
    /// `kill_exec` ends one exec's tree (status 137) while the workspace stays up.
    KillOneExec,
    /// Copy in keeps modes, copy out is capped, hostile paths are refused, errors are masked.
    CopyInAndOut,
    /// Pause stops new execs; resume lets them run again.
    PauseAndResume,
    /// Removing twice is no error; a removed workspace is not found.
    RemoveTwice,
    /// Secret values reach the command but no command line.
    SecretsStayOffCommandLines,
    /// No variable of the host process's environment reaches a command.
    EnvironmentScrubbed,
    /// Commands hold no capability.
    NoCapabilities,
    /// Writes outside the workspace and `/tmp` fail; inside they work.
    WritesConfined,
    /// Cloud-metadata names resolve to nowhere.
    MetadataNamesBlackholed,
    /// No container engine socket inside.
    NoEngineSocket,
    /// Canary files in `/root` and `$HOME` cannot be read.
    HostFilesHidden,
    /// A tar with `../` entries made inside and copied back in is refused.
    EscapeTarCopiedBack,
    /// Overrunning the memory cap is reported as out-of-memory.
    OomIsReported,
    /// A fork bomb runs into the pids cap and nothing of it is left.
    EscapeForkBomb,
    /// The exec that takes the workspace over its file bound fails, and so does every later one.
    FileCountBoundRefusesAfterABurst,
    /// A command making files without end is ended by the file bound, tree and all.
    FileCountBoundEndsAnEndlessMaker,
}

impl Check {
    /// Every check, in the order [`BehaviourSuite::run`] runs them.
    pub const ALL: &'static [Self] = &[
        Self::ExecAndStatus,
        Self::OutputLimitHonoured,
        Self::TimeoutKillsTheTree,
        Self::KillOneExec,
        Self::CopyInAndOut,
        Self::PauseAndResume,
        Self::RemoveTwice,
        Self::SecretsStayOffCommandLines,
        Self::EnvironmentScrubbed,
        Self::NoCapabilities,
        Self::WritesConfined,
        Self::MetadataNamesBlackholed,
        Self::NoEngineSocket,
        Self::HostFilesHidden,
        Self::EscapeTarCopiedBack,
        Self::OomIsReported,
        Self::EscapeForkBomb,
        Self::FileCountBoundRefusesAfterABurst,
        Self::FileCountBoundEndsAnEndlessMaker,
    ];

    /// The check's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::ExecAndStatus => "exec_and_status",
            Self::OutputLimitHonoured => "output_limit_honoured",
            Self::TimeoutKillsTheTree => "timeout_kills_the_tree",
            Self::KillOneExec => "kill_one_exec",
            Self::CopyInAndOut => "copy_in_and_out",
            Self::PauseAndResume => "pause_and_resume",
            Self::RemoveTwice => "remove_twice",
            Self::SecretsStayOffCommandLines => "secrets_stay_off_command_lines",
            Self::EnvironmentScrubbed => "environment_scrubbed",
            Self::NoCapabilities => "no_capabilities",
            Self::WritesConfined => "writes_confined",
            Self::MetadataNamesBlackholed => "metadata_names_blackholed",
            Self::NoEngineSocket => "no_engine_socket",
            Self::HostFilesHidden => "host_files_hidden",
            Self::EscapeTarCopiedBack => "escape_tar_copied_back",
            Self::OomIsReported => "oom_is_reported",
            Self::EscapeForkBomb => "escape_fork_bomb",
            Self::FileCountBoundRefusesAfterABurst => "file_count_bound_refuses_after_a_burst",
            Self::FileCountBoundEndsAnEndlessMaker => "file_count_bound_ends_an_endless_maker",
        }
    }

    /// The claims the check needs the profile to make.
    fn claims(self) -> &'static [Guarantee] {
        match self {
            Self::TimeoutKillsTheTree
            | Self::KillOneExec
            | Self::SecretsStayOffCommandLines
            | Self::EscapeForkBomb
            | Self::FileCountBoundEndsAnEndlessMaker => &[Guarantee::ProcessesOnThisHost],
            Self::NoCapabilities => &[Guarantee::NoCapabilities],
            Self::WritesConfined => &[Guarantee::WritesConfined],
            Self::NoEngineSocket => &[Guarantee::NoEngineSocket],
            Self::HostFilesHidden => &[Guarantee::HostFilesHidden],
            _ => &[],
        }
    }

    /// The protection the check needs the workspace to list.
    fn protection(self) -> Option<Protection> {
        match self {
            Self::PauseAndResume => Some(Protection::Freeze),
            Self::MetadataNamesBlackholed => Some(Protection::MetadataNames),
            Self::OomIsReported => Some(Protection::MemoryCap),
            Self::EscapeForkBomb => Some(Protection::PidsCap),
            Self::FileCountBoundRefusesAfterABurst | Self::FileCountBoundEndsAnEndlessMaker => {
                Some(Protection::FileCount)
            }
            _ => None,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a check did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Skip {
    /// The profile does not make this claim.
    NotClaimed(Guarantee),
    /// The workspace does not list this protection; `reason` is what its `missing` says.
    NotProtected {
        /// The protection.
        protection: Protection,
        /// The workspace's reason, when it gave one.
        reason: Option<String>,
    },
    /// The backend answered that it does not support the operation.
    Unsupported {
        /// The operation.
        operation: &'static str,
    },
    /// Nothing on this host lets the check tell a pass from a failure.
    NothingToCompare(&'static str),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotClaimed(claim) => write!(f, "the profile does not claim {claim:?}"),
            Self::NotProtected { protection, reason } => {
                write!(f, "the workspace does not list {protection:?}")?;
                if let Some(reason) = reason {
                    write!(f, " ({reason})")?;
                }
                Ok(())
            }
            Self::Unsupported { operation } => {
                write!(f, "the backend does not support {operation}")
            }
            Self::NothingToCompare(what) => write!(f, "nothing to compare: {what}"),
        }
    }
}

/// How a check that did not fail ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Every step held.
    Passed,
    /// The check did not run, for this reason.
    Skipped(Skip),
}

/// A failed check: which, at what step, what was expected and what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{check} failed at `{step}`: expected {expected}; got {actual}")]
pub struct CheckFailure {
    /// The check.
    pub check: Check,
    /// The step that did not hold.
    pub step: String,
    /// What the step expected.
    pub expected: String,
    /// What happened.
    pub actual: String,
}

/// The result of every check of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteReport {
    /// Each check with its result, in the order they ran.
    pub results: Vec<(Check, Result<Outcome, CheckFailure>)>,
}

impl SuiteReport {
    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &CheckFailure> {
        self.results.iter().filter_map(|(_, r)| r.as_ref().err())
    }

    /// The skipped checks with their reasons.
    pub fn skipped(&self) -> impl Iterator<Item = (Check, &Skip)> {
        self.results.iter().filter_map(|(check, r)| match r {
            Ok(Outcome::Skipped(skip)) => Some((*check, skip)),
            _ => None,
        })
    }

    /// Whether no check failed.
    #[must_use]
    pub fn is_success(&self) -> bool {
        self.failures().next().is_none()
    }
}

impl fmt::Display for SuiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (check, result) in &self.results {
            match result {
                Ok(Outcome::Passed) => writeln!(f, "passed   {check}")?,
                Ok(Outcome::Skipped(skip)) => writeln!(f, "skipped  {check}: {skip}")?,
                Err(failure) => writeln!(f, "FAILED   {failure}")?,
            }
        }
        Ok(())
    }
}

/// The behaviour suite, set up for one backend's profile and base workspace spec.
#[derive(Debug, Clone)]
pub struct BehaviourSuite {
    profile: BackendProfile,
    spec: WorkspaceSpec,
}

impl BehaviourSuite {
    /// A suite creating its workspaces from `spec` (image, root, caps: what the backend needs;
    /// checks change caps where they test them).
    #[must_use]
    pub fn new(profile: BackendProfile, spec: WorkspaceSpec) -> Self {
        Self { profile, spec }
    }

    /// Runs every check, one after another, each in a workspace of its own.
    pub async fn run(&self, backend: &dyn WorkspaceBackend) -> SuiteReport {
        let mut results = Vec::with_capacity(Check::ALL.len());
        for check in Check::ALL {
            results.push((*check, self.run_check(backend, *check).await));
        }
        SuiteReport { results }
    }

    /// Runs one check in a workspace of its own, removed afterwards whatever happened.
    pub async fn run_check(
        &self,
        backend: &dyn WorkspaceBackend,
        check: Check,
    ) -> Result<Outcome, CheckFailure> {
        let span = tracing::info_span!("sandbox.suite.check", check = check.name());
        self.run_check_inner(backend, check).instrument(span).await
    }

    async fn run_check_inner(
        &self,
        backend: &dyn WorkspaceBackend,
        check: Check,
    ) -> Result<Outcome, CheckFailure> {
        if let Some(claim) = check.claims().iter().find(|c| !self.profile.claims(**c)) {
            return Ok(Outcome::Skipped(Skip::NotClaimed(*claim)));
        }
        let spec = checks::spec_for(check, &self.spec);
        let ctx = Ctx::create(backend, &self.profile, check, &spec).await?;
        if let Some(protection) = check.protection()
            && !ctx.ws.protections.contains(&protection)
        {
            let reason = ctx.missing_reason(protection);
            let outcome = Outcome::Skipped(Skip::NotProtected { protection, reason });
            return ctx.finish(Ok(outcome)).await;
        }
        let result = checks::run(&ctx, check).await;
        ctx.finish(result).await
    }
}
