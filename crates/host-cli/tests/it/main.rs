//! Integration tests of the `auto-swe` binary, run as a real process.
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod agents;
mod arguments;
mod crash;
mod doctor;
mod local;
mod models_check;
mod progress;
mod sandbox;
mod scan;
mod simulate;
mod spec;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Output of one run of the binary.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// The workspace root, so paths in output are short and stable.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `auto-swe ARGS` from the workspace root.
pub(crate) fn auto_swe(args: &[&str]) -> Run {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let output = Command::new(env!("CARGO_BIN_EXE_auto-swe"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}
