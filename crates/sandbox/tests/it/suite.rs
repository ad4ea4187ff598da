//! The shared behaviour and escape suite (`auto_swe_sandbox::testing`), run against every real
//! backend with every claim made: each check is a test of its own per backend.

use auto_swe_sandbox::testing::{BackendProfile, BehaviourSuite, Check, Guarantee, Outcome, Skip};
use auto_swe_sandbox::{Protection, WorkspaceBackend, WorkspaceSpec};

/// Runs `check` against `backend`, which claims everything the crate's backends give; panics
/// with the named failure, or on a skip the crate's backends may not take.
pub(crate) async fn check(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec, check: Check) {
    let profile = BackendProfile::new("/workspace").with_claims(Guarantee::ALL.iter().copied());
    let outcome = BehaviourSuite::new(profile, spec)
        .run_check(backend, check)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
    match outcome {
        Outcome::Passed => {}
        Outcome::Skipped(skip) => {
            assert!(
                allowed(&skip),
                "{check} skipped on {:?}: {skip}",
                backend.kind()
            );
            eprintln!("skipping {check}: {skip}");
        }
        other => panic!("{check}: {other:?}"),
    }
}

/// Skips that depend on the host: caps this host's cgroups cannot enforce, and the file count
/// when the caller is not root (an engine's volumes are then out of its reach). Every other
/// check runs on the crate's backends.
fn allowed(skip: &Skip) -> bool {
    match skip {
        Skip::NotProtected {
            protection: Protection::MemoryCap | Protection::PidsCap,
            ..
        } => true,
        Skip::NotProtected {
            protection: Protection::FileCount,
            ..
        } => !nix::unistd::geteuid().is_root(),
        _ => false,
    }
}

/// One test per check, named after it, each calling `$run(check)`; and a test that the list
/// is the suite's whole list, names included.
macro_rules! suite_tests {
    ($run:path; $($name:ident => $check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $run(auto_swe_sandbox::testing::Check::$check).await;
            }
        )*

        #[test]
        fn every_check_has_a_test() {
            use auto_swe_sandbox::testing::Check;
            assert_eq!([$(Check::$check),*].as_slice(), Check::ALL);
            assert_eq!(
                [$(stringify!($name)),*].as_slice(),
                Check::ALL.iter().map(|c| c.name()).collect::<Vec<_>>()
            );
        }
    };
}

/// Every check of the suite, as `test name => Check variant`, run through `$run`.
macro_rules! every_check {
    ($run:path) => {
        $crate::suite::suite_tests!(
            $run;
            exec_and_status => ExecAndStatus,
            output_limit_honoured => OutputLimitHonoured,
            timeout_kills_the_tree => TimeoutKillsTheTree,
            kill_one_exec => KillOneExec,
            copy_in_and_out => CopyInAndOut,
            pause_and_resume => PauseAndResume,
            remove_twice => RemoveTwice,
            secrets_stay_off_command_lines => SecretsStayOffCommandLines,
            environment_scrubbed => EnvironmentScrubbed,
            no_capabilities => NoCapabilities,
            writes_confined => WritesConfined,
            metadata_names_blackholed => MetadataNamesBlackholed,
            no_engine_socket => NoEngineSocket,
            host_files_hidden => HostFilesHidden,
            escape_tar_copied_back => EscapeTarCopiedBack,
            oom_is_reported => OomIsReported,
            escape_fork_bomb => EscapeForkBomb,
            file_count_bound_refuses_after_a_burst => FileCountBoundRefusesAfterABurst,
            file_count_bound_ends_an_endless_maker => FileCountBoundEndsAnEndlessMaker,
        );
    };
}

pub(crate) use {every_check, suite_tests};
