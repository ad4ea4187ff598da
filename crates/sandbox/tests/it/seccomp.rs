//! The local seccomp filter in force inside a real sandbox (its program is checked call by call
//! by the unit tests of `local/seccomp.rs`).

use auto_swe_sandbox::{ExecRequest, WorkspaceBackend as _};

use crate::harness;

/// Inside a real sandbox: the filter is in force (`Seccomp: 2`), `keyctl` on the inherited
/// session keyring and `io_uring_setup` fail with EPERM, an ordinary call still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filter_holds_inside_a_local_sandbox() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipping: the probe script uses x86-64 call numbers");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let ws = backend
        .create(&harness::spec("unused", root))
        .await
        .unwrap();
    let has_perl = backend
        .exec(&ws, &ExecRequest::shell("command -v perl"))
        .await
        .unwrap();
    let status = backend
        .exec(
            &ws,
            &ExecRequest::shell("grep '^Seccomp:' /proc/self/status"),
        )
        .await
        .unwrap();
    assert_eq!(status.stdout_text(), "Seccomp:\t2\n");
    if has_perl.status != 0 {
        eprintln!("skipping the call probes: no perl in this root");
        backend.remove(&ws).await.unwrap();
        return;
    }
    let script = r#"
        my $r = syscall(250, 0, -3, 0); print "keyctl $r ", ($!+0), "\n";
        my ($t, $d, $v) = ("user", "k", "v"); $r = syscall(248, $t, $d, $v, 1, -3); print "add_key $r ", ($!+0), "\n";
        my $p = "\0" x 120; $r = syscall(425, 1, $p); print "io_uring_setup $r ", ($!+0), "\n";
        $r = syscall(101, 16, 1, 0, 0); print "ptrace_attach $r ", ($!+0), "\n";
        $r = syscall(39); print "getpid ", ($r > 0 ? "ok" : "bad"), "\n";
    "#;
    let out = backend
        .exec(&ws, &ExecRequest::new(["perl", "-e", script]))
        .await
        .unwrap();
    assert_eq!(
        out.stdout_text(),
        "keyctl -1 1\nadd_key -1 1\nio_uring_setup -1 1\nptrace_attach -1 1\ngetpid ok\n",
        "{}",
        out.stderr_text()
    );
    backend.remove(&ws).await.unwrap();
}
