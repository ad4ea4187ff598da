//! The shared behaviour suite and escape suite against the `local` (bubblewrap) backend.

use crate::{harness, suite};

macro_rules! local_suite {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let state = tempfile::tempdir().unwrap();
            let Some((backend, root)) = harness::local(&state) else { return };
            suite::$name(&backend, harness::spec("unused", root)).await;
        }
    )*};
}

local_suite!(
    exec_and_status,
    timeout_kills_the_tree,
    copy_in_and_out,
    pause_resume_and_remove_twice,
    oom_is_reported,
    secrets_stay_off_command_lines,
    posture,
    canaries_are_unreadable,
    escape_tar_copied_back,
    escape_fork_bomb,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_escape_suite() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    crate::git_escape::git_escape_suite(&backend, harness::spec("unused", root)).await;
}
