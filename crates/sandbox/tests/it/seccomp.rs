//! The local seccomp filter: its program run call by call (every denied call refused, ordinary
//! calls allowed, foreign ABIs killed), and the filter in force inside a real sandbox.

use auto_swe_sandbox::local::seccomp::{
    AARCH64, Arch, RET_ALLOW, RET_EPERM, RET_KILL_PROCESS, X86_64, evaluate, program, to_bytes,
};
use auto_swe_sandbox::{ExecRequest, WorkspaceBackend as _};

use crate::harness;

fn check(arch: &Arch, ordinary: &[u32]) {
    let filter = program(arch);
    assert_eq!(to_bytes(&filter).len(), filter.len() * 8);
    for (name, nr) in arch.denied {
        assert_eq!(
            evaluate(&filter, arch.audit, *nr, 0),
            Some(RET_EPERM),
            "{name}"
        );
    }
    for nr in ordinary {
        assert_eq!(
            evaluate(&filter, arch.audit, *nr, 0),
            Some(RET_ALLOW),
            "call {nr}"
        );
    }
    // ptrace: a child that asks to be traced, and a tracer's requests on it, pass; attaching
    // to a running process does not.
    for request in [0u64, 2, 7, 24, 0x4200] {
        assert_eq!(
            evaluate(&filter, arch.audit, arch.ptrace, request),
            Some(RET_ALLOW),
            "ptrace request {request}"
        );
    }
    for request in [16u64, 0x4206, 0xffff_ffff_0000_0010] {
        assert_eq!(
            evaluate(&filter, arch.audit, arch.ptrace, request),
            Some(RET_EPERM),
            "ptrace request {request:#x}"
        );
    }
    // Another architecture's numbering is never trusted.
    for other in [0x4000_0003, 0xc000_0028, 0] {
        assert_eq!(
            evaluate(&filter, other, 0, 0),
            Some(RET_KILL_PROCESS),
            "arch {other:#x}"
        );
    }
    if let Some(foreign) = arch.foreign_from {
        assert_eq!(
            evaluate(&filter, arch.audit, foreign + 1, 0),
            Some(RET_KILL_PROCESS)
        );
    }
    // Every call number ends at one of the three returns.
    for nr in 0..1024 {
        assert!(evaluate(&filter, arch.audit, nr, 0).is_some(), "call {nr}");
    }
}

#[test]
fn x86_64_program_refuses_the_list_and_allows_the_rest() {
    // read, write, openat, clone, execve, getpid, wait4, unshare, clone3.
    check(&X86_64, &[0, 1, 257, 56, 59, 39, 61, 272, 435]);
}

#[test]
fn aarch64_program_refuses_the_list_and_allows_the_rest() {
    // read, write, openat, clone, execve, getpid, wait4, unshare, clone3.
    check(&AARCH64, &[63, 64, 56, 220, 221, 172, 260, 97, 435]);
}

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
