//! The subprocess backend through the sandbox crate's behaviour suite: what it does is checked,
//! and what it does not protect is skipped for the reason it declares.

use auto_swe_example_custom_workspace_backend::SubprocessBackend;
use auto_swe_sandbox::testing::{BehaviourSuite, Check, Guarantee, Outcome, Skip};
use auto_swe_sandbox::{LocalRoot, Protection, WorkspaceSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subprocess_backend_passes_what_it_claims() {
    let root = tempfile::tempdir().unwrap();
    let backend = SubprocessBackend::new(root.path()).unwrap();
    let suite = BehaviourSuite::new(
        backend.profile(),
        WorkspaceSpec::new("unused", LocalRoot::HostSystem),
    );
    let report = suite.run(&backend).await;
    assert!(report.is_success(), "{report}");
    let passed: Vec<Check> = report
        .results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Outcome::Passed)))
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(
        passed,
        [
            Check::ExecAndStatus,
            Check::OutputLimitHonoured,
            Check::TimeoutKillsTheTree,
            Check::KillOneExec,
            Check::CopyInAndOut,
            Check::RemoveTwice,
            Check::SecretsStayOffCommandLines,
            Check::EnvironmentScrubbed,
            Check::EscapeTarCopiedBack,
        ],
        "{report}"
    );
    // Every skip is for a claim it does not make or a protection its workspaces do not list.
    let not_protected = |p| Skip::NotProtected {
        protection: p,
        reason: Some("not provided by plain subprocesses".to_owned()),
    };
    let skipped: Vec<(Check, Skip)> = report.skipped().map(|(c, s)| (c, s.clone())).collect();
    assert_eq!(
        skipped,
        [
            (Check::PauseAndResume, not_protected(Protection::Freeze)),
            (
                Check::NoCapabilities,
                Skip::NotClaimed(Guarantee::NoCapabilities)
            ),
            (
                Check::WritesConfined,
                Skip::NotClaimed(Guarantee::WritesConfined)
            ),
            (
                Check::MetadataNamesBlackholed,
                not_protected(Protection::MetadataNames)
            ),
            (
                Check::NoEngineSocket,
                Skip::NotClaimed(Guarantee::NoEngineSocket)
            ),
            (
                Check::HostFilesHidden,
                Skip::NotClaimed(Guarantee::HostFilesHidden)
            ),
            (Check::OomIsReported, not_protected(Protection::MemoryCap)),
            (Check::EscapeForkBomb, not_protected(Protection::PidsCap)),
            (
                Check::FileCountBoundRefusesAfterABurst,
                not_protected(Protection::FileCount)
            ),
            (
                Check::FileCountBoundEndsAnEndlessMaker,
                not_protected(Protection::FileCount)
            ),
        ],
        "{report}"
    );
    // Nothing is left under the root: every check removed its workspace.
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}
