//! A proxied sandbox's network namespace, tuned before its first command: its TCP receive
//! buffers start at [`WORKSPACE_TCP_RMEM`].
//!
//! The tools of a proxied workspace reach the egress proxy over loopback, a peer tens of
//! microseconds away, for which the kernel's autotuning keeps a receive window of a few hundred
//! KB; a fast download through the proxy then runs at about two thirds of a direct one (see
//! `docs/sandbox.md`, "Egress proxy cost"). `net.ipv4.tcp_rmem` belongs to a network
//! namespace, and a new one starts from the host's initial values, so each sandbox's own is set
//! here. bubblewrap has no option for it: the launcher asks bubblewrap to report its sandbox
//! (`--info-fd`: the PID and the network namespace's inode), and the sandbox's request is
//! written only after this ran, so the bridge and the command create their sockets with it.
//!
//! Entering the namespace: as root, a thread of its own enters it (`setns`), writes the value and
//! ends, so no thread that runs anything else is ever in a sandbox's namespace. Otherwise that
//! takes joining the sandbox's user namespace first (which this process's user owns, so it has
//! every capability there), and a multi-threaded process cannot: the bridge program does it in
//! a process of its own, run as `BRIDGE --tune-namespace PID INODE` ([`enter_as_owner`]), still
//! single-threaded and without an `exec` in between, which would drop those capabilities. The
//! namespace entered is checked to be the one bubblewrap reported (by inode) and never the
//! entering process's own, so a PID reused by some other process is never written through.
//!
//! A sandbox that could not be tuned still works, at the kernel's defaults: the failure is
//! logged, not raised.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::Duration;

use auto_swe_egress::WORKSPACE_TCP_RMEM;

/// How long bubblewrap may take to report its sandbox.
const REPORT: Duration = Duration::from_secs(10);

/// How long the bridge program may take to tune a namespace.
const ENTER: Duration = Duration::from_secs(10);

/// The bridge program's argument that makes it tune a namespace.
pub(crate) const TUNE_FLAG: &str = "--tune-namespace";

/// The knob, as seen from inside the namespace being tuned.
const KNOB: &str = "/proc/sys/net/ipv4/tcp_rmem";

/// What bubblewrap reported of a sandbox it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reported {
    /// The sandbox's first process, on the host.
    pub(crate) pid: u32,
    /// The inode of its network namespace.
    pub(crate) net: u64,
}

/// Why a namespace was not tuned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TuneError {
    #[error("bubblewrap reported no sandbox in {0:?}")]
    NotReported(Duration),
    #[error("the process is no longer in the reported network namespace")]
    NotTheSandbox,
    #[error("the namespace is this process's own")]
    OwnNamespace,
    #[error("entering the namespace is not permitted")]
    NotPermitted,
    #[error("the bridge program could not tune it: {0}")]
    Helper(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads bubblewrap's report (`--info-fd`) from `info`, waiting while it is still empty or
/// partial, up to [`REPORT`].
pub(crate) async fn reported(info: &Path) -> Result<Reported, TuneError> {
    let deadline = tokio::time::Instant::now() + REPORT;
    loop {
        if let Ok(text) = tokio::fs::read_to_string(info).await
            && let Some(reported) = parse_report(&text)
        {
            return Ok(reported);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(TuneError::NotReported(REPORT));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// bubblewrap's report: `{"child-pid": N, "net-namespace": INODE, ...}`.
fn parse_report(text: &str) -> Option<Reported> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(Reported {
        pid: u32::try_from(value.get("child-pid")?.as_u64()?).ok()?,
        net: value.get("net-namespace")?.as_u64()?,
    })
}

/// Tunes the sandbox bubblewrap reported in `info`, with the bridge program at `bridge` when
/// this process cannot enter it; logs, and goes on, when it cannot.
pub(crate) async fn tune_reported(info: &Path, bridge: &Path) {
    let tuned = match reported(info).await {
        Ok(sandbox) => tune(sandbox, bridge).await,
        Err(e) => Err(e),
    };
    if let Err(error) = tuned {
        tracing::warn!(%error, "a proxied sandbox keeps the kernel's TCP receive buffers");
    }
}

/// Sets [`WORKSPACE_TCP_RMEM`] in `sandbox`'s network namespace: from a thread of this process,
/// or with the bridge program at `bridge` where this process may not enter.
#[tracing::instrument(level = "debug", skip_all, fields(pid = sandbox.pid))]
pub(crate) async fn tune(sandbox: Reported, bridge: &Path) -> Result<(), TuneError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    // A thread of its own, ended after the write: it is the only thread ever in the namespace.
    std::thread::Builder::new()
        .name("netns-tune".to_owned())
        .stack_size(64 * 1024)
        .spawn(move || {
            let _ = sender.send(enter_and_write(sandbox));
        })?;
    match receiver.await {
        Ok(Err(TuneError::NotPermitted)) => helper(sandbox, bridge).await,
        Ok(done) => done,
        Err(_) => Err(TuneError::Io(std::io::Error::other(
            "the tuning thread ended",
        ))),
    }
}

/// Opens `sandbox`'s network namespace, checked to be the reported one and not ours.
fn namespace_of(sandbox: Reported) -> Result<std::fs::File, TuneError> {
    let namespace = std::fs::File::open(format!("/proc/{}/ns/net", sandbox.pid))?;
    let found = namespace.metadata()?;
    if found.ino() != sandbox.net {
        return Err(TuneError::NotTheSandbox);
    }
    let own = std::fs::metadata("/proc/thread-self/ns/net")?;
    if (found.dev(), found.ino()) == (own.dev(), own.ino()) {
        return Err(TuneError::OwnNamespace);
    }
    Ok(namespace)
}

/// On the calling thread, which must end afterwards: enters the namespace and writes the knob.
fn enter_and_write(sandbox: Reported) -> Result<(), TuneError> {
    let namespace = namespace_of(sandbox)?;
    match nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET) {
        Ok(()) => {}
        Err(nix::errno::Errno::EPERM) => return Err(TuneError::NotPermitted),
        Err(e) => return Err(std::io::Error::from(e).into()),
    }
    std::fs::write(KNOB, format!("{WORKSPACE_TCP_RMEM}\n"))?;
    Ok(())
}

/// The bridge program's entry for [`TUNE_FLAG`]: in this (single-threaded) process, joins the
/// reported sandbox's user namespace, which this process's user owns, then its network
/// namespace, and writes the knob. The exit status says whether it did.
#[must_use]
pub(crate) fn tune_namespace_main(
    pid: &std::ffi::OsStr,
    net: &std::ffi::OsStr,
) -> std::process::ExitCode {
    let parsed = pid
        .to_str()
        .and_then(|pid| pid.parse().ok())
        .zip(net.to_str().and_then(|net| net.parse().ok()));
    let Some((pid, net)) = parsed else {
        eprintln!("usage: {TUNE_FLAG} PID NET-NAMESPACE-INODE");
        return std::process::ExitCode::from(2);
    };
    match enter_as_owner(Reported { pid, net }) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// Joins `sandbox`'s user namespace and network namespace and writes the knob. Only a
/// single-threaded process may join a user namespace.
fn enter_as_owner(sandbox: Reported) -> Result<(), TuneError> {
    use nix::sched::{CloneFlags, setns};
    let user = std::fs::File::open(format!("/proc/{}/ns/user", sandbox.pid))?;
    let namespace = namespace_of(sandbox)?;
    setns(&user, CloneFlags::CLONE_NEWUSER).map_err(std::io::Error::from)?;
    setns(&namespace, CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
    std::fs::write(KNOB, format!("{WORKSPACE_TCP_RMEM}\n"))?;
    Ok(())
}

/// Where entering from this process is refused (no `CAP_SYS_ADMIN`): the bridge program tunes
/// the namespace in a process of its own (see [`tune_namespace_main`]).
#[expect(
    clippy::disallowed_methods,
    reason = "the bridge program runs on the host, outside every sandbox, with no secret in its arguments"
)]
async fn helper(sandbox: Reported, bridge: &Path) -> Result<(), TuneError> {
    let output = tokio::process::Command::new(bridge)
        // Under the name it has inside a sandbox, which the `auto-swe` binaries answer to.
        .arg0(crate::bridge::BRIDGE_INSIDE)
        .args([
            TUNE_FLAG.to_owned(),
            sandbox.pid.to_string(),
            sandbox.net.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(ENTER, output)
        .await
        .map_err(|_| TuneError::Helper(format!("no answer in {ENTER:?}")))??;
    if output.status.success() {
        Ok(())
    } else {
        Err(TuneError::Helper(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process alone in a new network namespace (and a user namespace too when `user` is
    /// given: then started as that uid), ended by its PID when dropped.
    struct Alone(std::process::Child);

    impl Drop for Alone {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the test makes namespaces with util-linux, as root"
    )]
    fn alone(user: Option<u32>) -> (Alone, Reported) {
        let mut command = if let Some(uid) = user {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "unshare",
                "--user",
                "--net",
            ]);
            c
        } else {
            let mut c = std::process::Command::new("unshare");
            c.arg("--net");
            c
        };
        let child = command
            .args(["sleep", "60"])
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let alone = Alone(child);
        let pid = alone.0.id();
        let own = std::fs::metadata("/proc/self/ns/net").unwrap_or_else(|e| panic!("{e}"));
        // Until `unshare` has made the namespace and become `sleep`.
        for _ in 0..500 {
            if let Ok(found) = std::fs::metadata(format!("/proc/{pid}/ns/net"))
                && found.ino() != own.ino()
                && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "sleep")
            {
                return (
                    alone,
                    Reported {
                        pid,
                        net: found.ino(),
                    },
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no namespace was made");
    }

    /// The knob as `pid`'s network namespace has it.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test reads the knob with nsenter"
    )]
    fn knob_in(pid: u32) -> String {
        let output = std::process::Command::new("nsenter")
            .args(["--target", &pid.to_string(), "--net", "cat", KNOB])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn root() -> bool {
        let root = nix::unistd::geteuid().is_root();
        if !root {
            eprintln!("not root: namespaces are not made here");
        }
        root
    }

    #[tokio::test]
    async fn only_the_reported_namespace_is_written_and_never_this_process_s() {
        if !root() {
            return;
        }
        let host = std::fs::read_to_string(KNOB).unwrap_or_else(|e| panic!("{e}"));
        let (_alone, sandbox) = alone(None);
        assert_ne!(knob_in(sandbox.pid), WORKSPACE_TCP_RMEM);
        // A report that names another namespace (a PID since reused), and this process itself.
        let lying = Reported {
            net: sandbox.net + 1,
            ..sandbox
        };
        let bridge = Path::new("/nonexistent/bridge");
        assert!(matches!(
            tune(lying, bridge).await,
            Err(TuneError::NotTheSandbox)
        ));
        // This process's own namespace is refused before anything is entered. Checked on the
        // check alone: a test that tried to tune it would, were the check broken, write the
        // host's knob.
        let own = std::fs::metadata("/proc/self/ns/net").unwrap_or_else(|e| panic!("{e}"));
        let itself = Reported {
            pid: std::process::id(),
            net: own.ino(),
        };
        assert!(matches!(namespace_of(itself), Err(TuneError::OwnNamespace)));
        assert_ne!(knob_in(sandbox.pid), WORKSPACE_TCP_RMEM);
        tune(sandbox, bridge)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(knob_in(sandbox.pid), WORKSPACE_TCP_RMEM);
        assert_eq!(
            std::fs::read_to_string(KNOB).unwrap_or_else(|e| panic!("{e}")),
            host
        );
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test runs the bridge program as an unprivileged user"
    )]
    fn an_unprivileged_caller_tunes_only_the_namespaces_it_owns() {
        if !root() {
            return;
        }
        let Ok(bridge) = crate::bridge::locate_bridge() else {
            panic!("no bridge program: build the workspace's binaries first");
        };
        let host = std::fs::read_to_string(KNOB).unwrap_or_else(|e| panic!("{e}"));
        let (_alone, sandbox) = alone(Some(65534));
        let as_nobody = |target: Reported| {
            std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bridge)
                .args([TUNE_FLAG, &target.pid.to_string(), &target.net.to_string()])
                .output()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let written = as_nobody(sandbox);
        assert!(
            written.status.success(),
            "{}",
            String::from_utf8_lossy(&written.stderr)
        );
        assert_eq!(knob_in(sandbox.pid), WORKSPACE_TCP_RMEM);
        // Aimed at a namespace the caller does not own (this process's), even reported right:
        // refused.
        let own = std::fs::metadata("/proc/self/ns/net").unwrap_or_else(|e| panic!("{e}"));
        let refused = as_nobody(Reported {
            pid: std::process::id(),
            net: own.ino(),
        });
        assert!(!refused.status.success());
        assert_eq!(
            std::fs::read_to_string(KNOB).unwrap_or_else(|e| panic!("{e}")),
            host
        );
    }

    #[tokio::test]
    async fn the_bridge_program_tunes_what_it_is_asked_to_and_says_when_it_cannot() {
        if !root() {
            return;
        }
        let Ok(bridge) = crate::bridge::locate_bridge() else {
            panic!("no bridge program: build the workspace's binaries first");
        };
        let (_alone, sandbox) = alone(Some(65534));
        let lying = Reported {
            net: sandbox.net + 1,
            ..sandbox
        };
        assert!(matches!(
            helper(lying, &bridge).await,
            Err(TuneError::Helper(message)) if message.contains("no longer")
        ));
        assert_ne!(knob_in(sandbox.pid), WORKSPACE_TCP_RMEM);
        helper(sandbox, &bridge)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(knob_in(sandbox.pid), WORKSPACE_TCP_RMEM);
    }

    #[tokio::test]
    async fn a_report_is_waited_for_while_bubblewrap_writes_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let info = dir.path().join("x.info");
        std::fs::write(&info, "").unwrap_or_else(|e| panic!("{e}"));
        let writer = {
            let info = info.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                std::fs::write(&info, "{\n    \"child-pid\": 7,\n")
                    .unwrap_or_else(|e| panic!("{e}"));
                tokio::time::sleep(Duration::from_millis(30)).await;
                std::fs::write(&info, "{\"child-pid\": 7, \"net-namespace\": 9}\n")
                    .unwrap_or_else(|e| panic!("{e}"));
            })
        };
        let found = reported(&info).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found, Reported { pid: 7, net: 9 });
        writer.await.unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn the_report_is_read_only_when_whole() {
        let whole = "{\n    \"child-pid\": 19810,\n    \"mnt-namespace\": 4026532175,\n    \"net-namespace\": 4026532177,\n    \"pid-namespace\": 4026532176\n}\n";
        assert_eq!(
            parse_report(whole),
            Some(Reported {
                pid: 19810,
                net: 4_026_532_177
            })
        );
        for partial in ["", "{\n    \"child-pid\": 19810,\n", "{\"child-pid\": 1}"] {
            assert_eq!(parse_report(partial), None, "{partial}");
        }
    }
}
