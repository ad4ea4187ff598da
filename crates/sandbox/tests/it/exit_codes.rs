//! Exit statuses as documented on both backends (a missing command 127, one that cannot be
//! executed 126), and the docker seccomp profile in force inside a real container.

use auto_swe_sandbox::{ExecRequest, LocalRoot, WorkspaceBackend};

use crate::harness;

async fn statuses(backend: &dyn WorkspaceBackend, spec: auto_swe_sandbox::WorkspaceSpec) {
    let ws = backend.create(&spec).await.unwrap();
    for (argv, expected) in [
        (vec!["no-such-command-here"], 127),
        (vec!["/no/such/file"], 127),
        (vec!["/etc/passwd"], 126),
        (vec!["/bin/sh", "-c", "exit 3"], 3),
    ] {
        let out = backend
            .exec(&ws, &ExecRequest::new(argv.clone()))
            .await
            .unwrap();
        assert_eq!(out.status, expected, "{argv:?}: {}", out.stderr_text());
    }
    backend.remove(&ws).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_missing_and_unexecutable_commands() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    statuses(&backend, harness::spec("unused", root)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_missing_and_unexecutable_commands() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    statuses(
        &backend,
        harness::spec(&harness::image(), LocalRoot::HostSystem),
    )
    .await;
}

/// Inside a workspace container: the profile is in force, and the calls it adds to the
/// engine's (and those engines before 25.0 allowed) fail with EPERM, while ordinary ones work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_profile_holds_inside_a_container() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipping: the probe script uses x86-64 call numbers");
        return;
    }
    let Some(backend) = harness::docker().await else {
        return;
    };
    let ws = backend
        .create(&harness::spec(&harness::image(), LocalRoot::HostSystem))
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
    let has_perl = backend
        .exec(&ws, &ExecRequest::shell("command -v perl"))
        .await
        .unwrap();
    if has_perl.status != 0 {
        eprintln!("skipping the call probes: no perl in this image");
        backend.remove(&ws).await.unwrap();
        return;
    }
    let script = r#"
        my $r = syscall(250, 0, -3, 0); print "keyctl $r ", ($!+0), "\n";
        my ($t, $d, $v) = ("user", "k", "v"); $r = syscall(248, $t, $d, $v, 1, -3); print "add_key $r ", ($!+0), "\n";
        my $p = "\0" x 120; $r = syscall(425, 1, $p); print "io_uring_setup $r ", ($!+0), "\n";
        $r = syscall(101, 16, 1, 0, 0); print "ptrace_attach $r ", ($!+0), "\n";
        $r = syscall(272, 0x10000000); print "unshare_user $r ", ($!+0), "\n";
        $r = syscall(323, 0); print "userfaultfd $r ", ($!+0), "\n";
        $r = syscall(321, 0, 0, 0); print "bpf $r ", ($!+0), "\n";
        $r = syscall(39); print "getpid ", ($r > 0 ? "ok" : "bad"), "\n";
    "#;
    let out = backend
        .exec(&ws, &ExecRequest::new(["perl", "-e", script]))
        .await
        .unwrap();
    assert_eq!(
        out.stdout_text(),
        "keyctl -1 1\nadd_key -1 1\nio_uring_setup -1 1\nptrace_attach -1 1\nunshare_user -1 1\n\
         userfaultfd -1 1\nbpf -1 1\ngetpid ok\n",
        "{}",
        out.stderr_text()
    );
    backend.remove(&ws).await.unwrap();
}
