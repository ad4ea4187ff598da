//! Runs the sandbox crate's behaviour suite against [`SubprocessBackend`] and exits non-zero
//! when a check fails.
//!
//! Run with `cargo run -p auto-swe-example-custom-workspace-backend`.
#![expect(clippy::print_stdout, reason = "an example prints its report")]

use std::process::ExitCode;

use auto_swe_example_custom_workspace_backend::SubprocessBackend;
use auto_swe_sandbox::testing::BehaviourSuite;
use auto_swe_sandbox::{LocalRoot, WorkspaceSpec};

#[tokio::main]
async fn main() -> ExitCode {
    let root = match tempfile::tempdir() {
        Ok(root) => root,
        Err(e) => {
            println!("no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let backend = match SubprocessBackend::new(root.path()) {
        Ok(backend) => backend,
        Err(e) => {
            println!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // The image and root are other backends' business; this one runs on the host as it is.
    let spec = WorkspaceSpec::new("unused", LocalRoot::HostSystem);
    let report = BehaviourSuite::new(backend.profile(), spec)
        .run(&backend)
        .await;
    print!("{report}");
    let failed = report.failures().count();
    println!(
        "{} checks: {failed} failed, {} skipped",
        report.results.len(),
        report.skipped().count()
    );
    if report.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
