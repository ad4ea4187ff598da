//! The shared behaviour suite and the escape suite, run against every real backend.

use std::time::Duration;

use auto_swe_sandbox::{
    ExecRequest, Exit, FailureClass, SecretEnv, WorkspaceBackend, WorkspaceSpec,
};

use crate::harness::{Canaries, host_processes_with};

async fn sh(
    backend: &dyn WorkspaceBackend,
    ws: &auto_swe_sandbox::WorkspaceHandle,
    script: &str,
) -> auto_swe_sandbox::ExecOutput {
    backend
        .exec(
            ws,
            &ExecRequest::shell(script).timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap()
}

pub(crate) async fn exec_and_status(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let ws = backend.create(&spec).await.unwrap();
    let out = sh(backend, &ws, "echo out; echo err >&2; exit 3").await;
    assert_eq!(
        (out.status, out.stdout_text(), out.stderr_text()),
        (3, "out\n".to_owned(), "err\n".to_owned())
    );
    let err = backend
        .exec_checked(&ws, &ExecRequest::shell("exit 5"))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.class()),
        ("WORKSPACE_EXEC_FAILED", FailureClass::ExitStatus)
    );
    // Every exec is tagged, and the tag differs per call.
    let a = sh(backend, &ws, "printf %s \"$AUTO_SWE_EXEC_ID\"").await;
    let b = sh(backend, &ws, "printf %s \"$AUTO_SWE_EXEC_ID\"").await;
    assert_eq!(a.stdout_text(), a.exec_id.as_str());
    assert_ne!(a.exec_id, b.exec_id);
    // stdin reaches the command.
    let echoed = backend
        .exec(
            &ws,
            &ExecRequest::new(["cat"]).stdin(b"from stdin".to_vec()),
        )
        .await
        .unwrap();
    assert_eq!(echoed.stdout_text(), "from stdin");
    // Arguments arrive exactly as given: newlines, quotes, empty strings, shell syntax, and a
    // leading dash or plus (the local launcher's own line markers).
    let tricky = [
        "two\nlines\n",
        "",
        "it's \"quoted\" $HOME `id` $(id) ; | &",
        "-dash",
        "+plus\n-minus",
        "\\ back\tslash",
    ];
    let mut argv = vec![
        "/bin/sh",
        "-c",
        r#"for a; do printf '[%s]' "$a"; done"#,
        "sh",
    ];
    argv.extend(tricky);
    let out = backend.exec(&ws, &ExecRequest::new(argv)).await.unwrap();
    let expected: String = tricky.iter().flat_map(|a| ["[", a, "]"]).collect();
    assert_eq!(out.stdout_text(), expected);
    // Several execs at once in one workspace each get their own input, output and status.
    let runs = (0..6).map(|i| {
        let ws = &ws;
        async move {
            let request = ExecRequest::new(["/bin/sh", "-c", "cat; exit \"$0\"", &i.to_string()])
                .stdin(format!("input {i}").into_bytes());
            (i, backend.exec(ws, &request).await.unwrap())
        }
    });
    for (i, out) in futures_util::future::join_all(runs).await {
        assert_eq!((out.status, out.stdout_text()), (i, format!("input {i}")));
    }
    backend.remove(&ws).await.unwrap();
}

pub(crate) async fn timeout_kills_the_tree(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let ws = backend.create(&spec).await.unwrap();
    let request = ExecRequest::shell("sleep 300 & sleep 300 & (sleep 300 &) ; sleep 300")
        .timeout(Duration::from_secs(2));
    let spawned = backend.spawn(&ws, &request).await.unwrap();
    let tag = format!("AUTO_SWE_EXEC_ID={}", spawned.exec_id.as_str());
    let mut output = spawned.output;
    while output.recv().await.is_some() {}
    assert_eq!(spawned.exit.await.unwrap().unwrap(), Exit::TimedOut);
    // Checked from outside: no process of this host carries the exec's tag any more.
    assert_eq!(host_processes_with("environ", &tag), Vec::<u32>::new());
    let err = backend.exec(&ws, &request).await.unwrap_err();
    assert_eq!(
        (err.code(), err.class()),
        ("WORKSPACE_EXEC_TIMEOUT", FailureClass::Timeout)
    );
    // The workspace still works.
    assert_eq!(
        sh(backend, &ws, "echo alive").await.stdout_text(),
        "alive\n"
    );
    backend.remove(&ws).await.unwrap();
}

fn tar_of(name: &str, content: &[u8]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o755);
    builder.append_data(&mut header, name, content).unwrap();
    builder.into_inner().unwrap()
}

fn file_in_tar(archive: &[u8], suffix: &str) -> Vec<u8> {
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_string_lossy().ends_with(suffix) {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut buf).unwrap();
            return buf;
        }
    }
    panic!("{suffix} not in archive");
}

pub(crate) async fn copy_in_and_out(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let ws = backend.create(&spec).await.unwrap();
    sh(backend, &ws, "mkdir -p /workspace/in").await;
    backend
        .copy_in(
            &ws,
            &tar_of("tool.sh", b"#!/bin/sh\necho tool ran\n"),
            "/workspace/in",
        )
        .await
        .unwrap();
    // The mode is kept: the copied script is executable.
    assert_eq!(
        sh(backend, &ws, "/workspace/in/tool.sh")
            .await
            .stdout_text(),
        "tool ran\n"
    );
    sh(backend, &ws, "echo made inside > /workspace/in/made.txt").await;
    let archive = backend
        .copy_out(&ws, "/workspace/in", 1 << 20)
        .await
        .unwrap();
    assert_eq!(file_in_tar(&archive, "in/made.txt"), b"made inside\n");
    // Copy-out is capped.
    sh(backend, &ws, "head -c 200000 /dev/zero > /workspace/in/big").await;
    let err = backend
        .copy_out(&ws, "/workspace/in", 10_000)
        .await
        .unwrap_err();
    assert_eq!(err.class(), FailureClass::Refused);
    // Hostile copy paths are refused before anything runs: climbing out, relative, a NUL,
    // look-alikes of `/` and `.` (fullwidth solidus, one-dot leader), control characters.
    for bad in [
        "/workspace/../etc",
        "workspace/in",
        "/workspace/in\0x",
        "/workspace\u{ff0f}in",
        "/workspace/\u{2024}\u{2024}/etc",
        "/workspace/in\nx",
    ] {
        let err = backend
            .copy_in(&ws, &tar_of("x", b"x"), bad)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{bad:?}");
        let err = backend.copy_out(&ws, bad, 1 << 20).await.unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{bad:?}");
    }
    // A failing command's stderr reaches the error text with credential shapes masked.
    let err = backend
        .exec_checked(
            &ws,
            &ExecRequest::shell(
                "echo 'fatal: https://x-access-token:ghs_0123456789abcdefghijABCDEFGHIJ0123@git.example/r' >&2; exit 3",
            ),
        )
        .await
        .unwrap_err();
    let shown = format!("{err:?}");
    assert!(shown.contains("fatal:"), "{shown}");
    assert!(!shown.contains("ghs_0123456789abcdefghij"), "{shown}");
    backend.remove(&ws).await.unwrap();
}

pub(crate) async fn pause_resume_and_remove_twice(
    backend: &dyn WorkspaceBackend,
    spec: WorkspaceSpec,
) {
    let ws = backend.create(&spec).await.unwrap();
    backend.pause(&ws).await.unwrap();
    // Nothing new starts while paused.
    let paused = backend
        .exec(
            &ws,
            &ExecRequest::shell("echo ran").timeout(Duration::from_secs(2)),
        )
        .await;
    assert!(paused.is_err(), "{paused:?}");
    backend.resume(&ws).await.unwrap();
    assert_eq!(sh(backend, &ws, "echo back").await.stdout_text(), "back\n");
    backend.remove(&ws).await.unwrap();
    backend.remove(&ws).await.unwrap();
    let gone = backend
        .exec(&ws, &ExecRequest::shell("true"))
        .await
        .unwrap_err();
    assert_eq!(gone.class(), FailureClass::NotFound);
}

pub(crate) async fn oom_is_reported(backend: &dyn WorkspaceBackend, mut spec: WorkspaceSpec) {
    spec.limits.memory_bytes = 64 * 1024 * 1024;
    let ws = backend.create(&spec).await.unwrap();
    if !ws
        .protections
        .contains(&auto_swe_sandbox::Protection::MemoryCap)
    {
        eprintln!("skipping OOM check: {:?}", ws.missing);
        backend.remove(&ws).await.unwrap();
        return;
    }
    let err = backend
        .exec(
            &ws,
            &ExecRequest::shell("x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo ${#x}")
                .timeout(Duration::from_secs(120)),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.class()),
        ("WORKSPACE_OUT_OF_MEMORY", FailureClass::OutOfMemory)
    );
    backend.remove(&ws).await.unwrap();
}

pub(crate) async fn secrets_stay_off_command_lines(
    backend: &dyn WorkspaceBackend,
    mut spec: WorkspaceSpec,
) {
    let value = format!("s3cret-{}-value", std::process::id());
    spec.secret_env = SecretEnv::new()
        .with("CREATE_SECRET", format!("{value}-create"))
        .unwrap();
    let ws = backend.create(&spec).await.unwrap();
    let request = ExecRequest::shell(
        "test -n \"$EXEC_SECRET\" && test -n \"$CREATE_SECRET\" && cat /proc/[0-9]*/cmdline | tr '\\0' ' '; sleep 2",
    )
    .secrets(SecretEnv::new().with("EXEC_SECRET", value.clone()).unwrap());
    let spawned = backend.spawn(&ws, &request).await.unwrap();
    // From outside, while it runs: no host process has the value on its command line.
    let mut output = spawned.output;
    let mut seen = Vec::new();
    if let Some(auto_swe_sandbox::OutputChunk::Stdout(first)) = output.recv().await {
        assert_eq!(host_processes_with("cmdline", &value), Vec::<u32>::new());
        seen.extend(first);
    }
    while let Some(chunk) = output.recv().await {
        if let auto_swe_sandbox::OutputChunk::Stdout(b) = chunk {
            seen.extend(b);
        }
    }
    assert_eq!(spawned.exit.await.unwrap().unwrap(), Exit::Status(0));
    let inside = String::from_utf8_lossy(&seen);
    assert!(inside.contains("sleep"), "{inside}");
    assert!(!inside.contains(&value), "{inside}");
    backend.remove(&ws).await.unwrap();
}

pub(crate) async fn posture(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let ws = backend.create(&spec).await.unwrap();
    let caps = sh(
        backend,
        &ws,
        "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status",
    )
    .await;
    for line in caps.stdout_text().lines() {
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    // Writes outside /workspace (and /tmp) are refused; inside they work.
    for target in ["/etc/x", "/usr/x", "/x", "/var/x", "/bin/x"] {
        let out = sh(backend, &ws, &format!("echo x > {target}")).await;
        assert_ne!(out.status, 0, "{target} was writable");
    }
    assert_eq!(
        sh(
            backend,
            &ws,
            "echo x > /workspace/x && echo x > /tmp/x && echo ok"
        )
        .await
        .stdout_text(),
        "ok\n"
    );
    // Metadata names resolve to nowhere (the hosts entries), by inspection.
    let hosts = sh(backend, &ws, "cat /etc/hosts").await.stdout_text();
    assert!(
        hosts.contains("0.0.0.0\tmetadata.google.internal"),
        "{hosts}"
    );
    // No engine socket.
    let sockets = sh(
        backend,
        &ws,
        "ls /var/run/docker.sock /run/docker.sock 2>&1; true",
    )
    .await;
    assert!(
        sockets.stdout_text().contains("No such file"),
        "{}",
        sockets.stdout_text()
    );
    backend.remove(&ws).await.unwrap();
}

pub(crate) async fn canaries_are_unreadable(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let canaries = Canaries::plant();
    assert!(!canaries.files.is_empty());
    let ws = backend.create(&spec).await.unwrap();
    for file in &canaries.files {
        let out = sh(
            backend,
            &ws,
            &format!(
                "cat {} 2>&1; ls -a {} 2>&1",
                file.display(),
                file.parent().unwrap().display()
            ),
        )
        .await;
        assert!(
            !out.stdout_text().contains(&canaries.value),
            "{}",
            out.stdout_text()
        );
    }
    // The creating process's environment does not leak in.
    let env = sh(backend, &ws, "env").await.stdout_text();
    for (name, _) in std::env::vars() {
        if name.starts_with("CARGO") || name == "RUST_TEST_THREADS" {
            assert!(!env.contains(&format!("{name}=")), "{name} leaked");
        }
    }
    backend.remove(&ws).await.unwrap();
}

/// Escape: a tar with `../` entries made inside and copied back in is refused.
pub(crate) async fn escape_tar_copied_back(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let ws = backend.create(&spec).await.unwrap();
    let made = sh(backend, &ws, "mkdir -p /workspace/a/b && echo pwn > /workspace/a/x && cd /workspace/a/b && tar -cPf /workspace/evil.tar ../x && echo ok").await;
    assert_eq!(made.stdout_text(), "ok\n", "{}", made.stderr_text());
    let outer = backend
        .copy_out(&ws, "/workspace/evil.tar", 1 << 20)
        .await
        .unwrap();
    let evil = file_in_tar(&outer, "evil.tar");
    let err = backend
        .copy_in(&ws, &evil, "/workspace/a/b")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_UNSAFE_ARCHIVE");
    backend.remove(&ws).await.unwrap();
}

/// Escape: a fork bomb runs into the pids cap and the workspace survives.
pub(crate) async fn escape_fork_bomb(backend: &dyn WorkspaceBackend, mut spec: WorkspaceSpec) {
    spec.limits.pids = 64;
    let ws = backend.create(&spec).await.unwrap();
    if !ws
        .protections
        .contains(&auto_swe_sandbox::Protection::PidsCap)
    {
        // Never run a fork bomb without a cap.
        eprintln!("skipping fork bomb: {:?}", ws.missing);
        backend.remove(&ws).await.unwrap();
        return;
    }
    let request = ExecRequest::shell("b() { b | b & }; b; sleep 5; echo survived")
        .timeout(Duration::from_secs(10));
    let spawned = backend.spawn(&ws, &request).await.unwrap();
    let tag = format!("AUTO_SWE_EXEC_ID={}", spawned.exec_id.as_str());
    let mut output = spawned.output;
    while output.recv().await.is_some() {}
    let _ = spawned.exit.await.unwrap();
    // The host kept working (this test is still running), and once the workspace is removed
    // nothing of the bomb is left. (While the cap is saturated even the engine's own kill exec
    // cannot start inside, so removal is the containment on Docker.)
    backend.remove(&ws).await.unwrap();
    assert_eq!(host_processes_with("environ", &tag), Vec::<u32>::new());
}

/// Creates a workspace bounded at 1,000 files; `None` (reason printed) when this host cannot
/// count it — only a caller that is not root, whose engine keeps volumes out of its reach.
async fn bounded_workspace(
    backend: &dyn WorkspaceBackend,
    mut spec: WorkspaceSpec,
) -> Option<auto_swe_sandbox::WorkspaceHandle> {
    spec.limits.files = 1000;
    let ws = backend.create(&spec).await.unwrap();
    if ws
        .protections
        .contains(&auto_swe_sandbox::Protection::FileCount)
    {
        return Some(ws);
    }
    assert!(
        !nix::unistd::geteuid().is_root(),
        "a root caller's workspace must count its files: {:?}",
        ws.missing
    );
    eprintln!("skipping the file-count bound: {:?}", ws.missing);
    backend.remove(&ws).await.unwrap();
    None
}

/// Makes `n` empty files in `/workspace/<dir>` as fast as a shell can.
fn make_files(dir: &str, n: u32) -> String {
    format!(
        "mkdir -p /workspace/{dir} && cd /workspace/{dir} && i=0; \
         while [ $i -lt {n} ]; do : > f$i; i=$((i+1)); done"
    )
}

/// Under its bound a workspace works as ever; the exec that takes it over fails
/// `WORKSPACE_FILE_LIMIT`, and from then on nothing runs in it — removing files from inside
/// would need an exec, and an exec could as well make more.
pub(crate) async fn file_count_bound_refuses_after_a_burst(
    backend: &dyn WorkspaceBackend,
    spec: WorkspaceSpec,
) {
    let Some(ws) = bounded_workspace(backend, spec).await else {
        return;
    };
    let out = sh(backend, &ws, &make_files("a", 500)).await;
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    // Links to the whole host count as one entry each, not as what they point at.
    let out = sh(
        backend,
        &ws,
        "ln -s / /workspace/root && ln -s /usr /workspace/usr",
    )
    .await;
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    assert_eq!(sh(backend, &ws, "echo ok").await.stdout_text(), "ok\n");
    let over = backend
        .exec(
            &ws,
            &ExecRequest::shell(&make_files("b", 1500)).timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (over.code(), over.class()),
        ("WORKSPACE_FILE_LIMIT", FailureClass::Refused),
        "{over}"
    );
    let refused = backend
        .exec(&ws, &ExecRequest::shell("rm -rf /workspace/b"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "WORKSPACE_FILE_LIMIT");
    let refused = backend
        .spawn(&ws, &ExecRequest::shell("true"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "WORKSPACE_FILE_LIMIT");
    backend.remove(&ws).await.unwrap();
}

/// A command that makes files without end is ended by the bound, long before its timeout, and
/// its whole tree with it.
pub(crate) async fn file_count_bound_ends_an_endless_maker(
    backend: &dyn WorkspaceBackend,
    spec: WorkspaceSpec,
) {
    let Some(ws) = bounded_workspace(backend, spec).await else {
        return;
    };
    let marker = format!("files-maker-{}", std::process::id());
    // The maker carries the marker in its environment, so its host process can be looked for.
    let script = format!(
        "MARK={marker} exec sh -c 'mkdir -p /workspace/c && cd /workspace/c && i=0; \
         while :; do : > f$i; i=$((i+1)); done'"
    );
    let ended = backend
        .exec(
            &ws,
            &ExecRequest::shell(&script).timeout(Duration::from_secs(120)),
        )
        .await
        .unwrap_err();
    assert_eq!(ended.code(), "WORKSPACE_FILE_LIMIT", "{ended}");
    assert!(
        host_processes_with("environ", &marker).is_empty(),
        "the maker outlived its exec"
    );
    backend.remove(&ws).await.unwrap();
}
