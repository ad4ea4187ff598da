//! What the suite does not ask but this backend promises: dropping an exec (the caller gave up
//! on it) ends its whole tree.
#![expect(
    clippy::unwrap_used,
    reason = "a test helper outside #[test] fails loudly too"
)]

use std::time::{Duration, Instant};

use auto_swe_example_custom_workspace_backend::SubprocessBackend;
use auto_swe_sandbox::{ExecRequest, LocalRoot, WorkspaceBackend as _, WorkspaceSpec};

/// Host processes whose command line is exactly `sleep <secs>`.
fn sleeping(secs: u32) -> Vec<u32> {
    let wanted = format!("sleep\0{secs}\0").into_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_exec_ends_its_tree() {
    let root = tempfile::tempdir().unwrap();
    let backend = SubprocessBackend::new(root.path()).unwrap();
    let ws = backend
        .create(&WorkspaceSpec::new("unused", LocalRoot::HostSystem))
        .await
        .unwrap();
    let secs = 200_000 + std::process::id() % 50_000;
    let request = ExecRequest::shell(&format!("sleep {secs} & (sleep {secs} &); sleep {secs}"));
    let given_up = tokio::time::timeout(Duration::from_millis(500), backend.exec(&ws, &request));
    assert!(given_up.await.is_err(), "the exec ended by itself");
    // The caller dropped the exec: its supervisor ends the group and every tagged process.
    let started = Instant::now();
    while !sleeping(secs).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "left running: {:?}",
            sleeping(secs)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The workspace runs on.
    let out = backend
        .exec(&ws, &ExecRequest::shell("echo still"))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "still\n");
    backend.remove(&ws).await.unwrap();
}
