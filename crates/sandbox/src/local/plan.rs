//! The pure part of the `local` backend: a workspace spec and policy in, a bubblewrap argv out.
//! Nothing here touches the host; the host's system-directory layout is passed in.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bridge::{self, EgressSocket};
use crate::spec::{LocalRoot, MountAccess, NetworkMode};

/// Top-level host directories that the opt-in host-system root may expose, read-only.
pub const HOST_SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files of the host's `/etc` that the host-system root exposes: enough for the dynamic linker,
/// user names, TLS roots and tools' defaults; nothing that can hold a credential (`shadow`,
/// `ssh/`, `gitconfig`, `netrc`, `docker/`, `environment`, …).
pub const HOST_ETC_ALLOWLIST: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/localtime",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/inputrc",
];

/// Kernel knobs of `/proc` bound read-only over the sandbox's own `/proc` where the kernel has
/// them; `/proc/sys`, always there, is bound unconditionally before them.
pub const PROC_KNOBS: &[&str] = &["/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"];

/// How a top-level host system path appears on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "target")]
pub enum HostEntry {
    /// A real directory, bound read-only.
    Directory,
    /// A symlink (merged-`/usr` hosts), recreated as the same symlink.
    Symlink(String),
}

/// What the host has of [`HOST_SYSTEM_DIRS`] and [`HOST_ETC_ALLOWLIST`], read once by the driver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostLayout {
    /// Present system paths.
    pub system: Vec<(String, HostEntry)>,
    /// Present `/etc` entries from the allow-list.
    pub etc: Vec<String>,
}

/// Whether the sandbox is a long-lived workspace or a locked-down one-shot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lockdown {
    /// Agent workspace: `/tmp` persists in the workspace's state directory.
    Workspace,
    /// Author command: `/tmp` is a fresh tmpfs.
    Ephemeral,
}

/// Everything the argv depends on.
#[derive(Debug, Clone, Serialize)]
pub struct BwrapPlan<'a> {
    /// Root filesystem choice.
    pub root: &'a LocalRoot,
    /// Host layout (only read for [`LocalRoot::HostSystem`]).
    pub host: &'a HostLayout,
    /// Host directory bound at `/workspace`, if any.
    pub workspace_dir: Option<&'a Path>,
    /// Host directory bound at `/tmp` for [`Lockdown::Workspace`].
    pub tmp_dir: Option<&'a Path>,
    /// Generated `/etc/hosts` and `/etc/resolv.conf`.
    pub hosts_file: &'a Path,
    /// Generated resolver file.
    pub resolv_file: &'a Path,
    /// Extra mounts.
    pub mounts: &'a [crate::spec::Mount],
    /// Network.
    pub network: NetworkMode,
    /// The egress proxy a [`NetworkMode::Proxy`] sandbox reaches, with the bridge program.
    pub egress: Option<&'a EgressSocket>,
    /// Lockdown.
    pub lockdown: Lockdown,
    /// Working directory inside.
    pub workdir: &'a str,
    /// The command.
    pub argv: &'a [String],
    /// The descriptor bubblewrap reads the seccomp program from (`--seccomp`), when there is
    /// one (see `local::seccomp`).
    pub seccomp_fd: Option<u32>,
}

/// The descriptor the driver hands each bubblewrap the seccomp program on.
pub const SECCOMP_FD: u32 = 9;

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The bubblewrap arguments (without the program name) for a plan: [`sandbox_args`], then the
/// working directory and the command.
#[must_use]
pub fn bwrap_args(plan: &BwrapPlan<'_>) -> Vec<String> {
    let mut a = sandbox_args(plan);
    a.extend([
        "--chdir".to_owned(),
        plan.workdir.to_owned(),
        "--".to_owned(),
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        reaper(plan.egress.is_some()),
        "sh".to_owned(),
    ]);
    a.extend(plan.argv.iter().cloned());
    a
}

/// The first process of a sandbox run straight from [`bwrap_args`]: runs the command as its
/// child and exits with its status. As PID 1 of the sandbox it reaps every process orphaned
/// inside while it waits, and, being waited for by bubblewrap itself (`--as-pid-1`), it never
/// outlives bubblewrap as a zombie that only the host's init could reap.
pub const REAPER: &str = r#"ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -H -n)"
"$@"
exit $?"#;

/// [`REAPER`] for a proxied sandbox: the egress bridge ([`bridge::BRIDGE_INSIDE`]) is started
/// first, and the sandbox ends with status 125 when it cannot listen.
#[must_use]
pub fn reaper(proxied: bool) -> String {
    if proxied {
        format!("{}{REAPER}", bridge::START_BRIDGE)
    } else {
        REAPER.to_owned()
    }
}

/// The bubblewrap options that make the sandbox itself, the same for every exec of a
/// workspace (the plan's working directory and command are not read).
///
/// New user (mapped to uid/gid 1000, no nested user namespaces), pid, ipc, uts, cgroup and mount
/// namespaces; a network namespace unless the host network was asked for; all capabilities
/// dropped; a new session (no terminal injection); death with the parent; a read-only root.
///
/// The command (a shell of ours: [`REAPER`], or the launcher's stub) is the sandbox's PID 1
/// (`--as-pid-1`): bubblewrap's own PID 1 reports the command's status and exits without being
/// waited for, leaving a zombie on hosts whose init reaps nothing (many containers), and each
/// such zombie keeps a PID of the workspace's pids cgroup charged for good.
#[must_use]
pub fn sandbox_args(plan: &BwrapPlan<'_>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| (*s).to_owned()));
    push(&[
        "--unshare-user",
        "--disable-userns",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    if plan.network != NetworkMode::Host {
        push(&["--unshare-net"]);
    }
    push(&[
        "--hostname",
        "workspace",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]);
    match plan.root {
        LocalRoot::Rootfs(dir) => {
            let dir = path(dir);
            push(&["--ro-bind", &dir, "/"]);
        }
        LocalRoot::HostSystem => {
            for (name, entry) in &plan.host.system {
                match entry {
                    HostEntry::Directory => push(&["--ro-bind", name, name]),
                    HostEntry::Symlink(target) => push(&["--symlink", target, name]),
                }
            }
            push(&["--dir", "/etc"]);
            for file in &plan.host.etc {
                push(&["--ro-bind", file, file]);
            }
        }
    }
    push(&["--proc", "/proc"]);
    // The kernel's knobs, read-only whoever the sandbox is on the host: bubblewrap covers them
    // only when they look writable to it, and an unprivileged start finds them unwritable.
    // `/proc/sys` resolves its `net` subtree in the reader's own network namespace, so the
    // sandbox still sees its own values.
    push(&["--ro-bind", "/proc/sys", "/proc/sys"]);
    for knob in PROC_KNOBS {
        push(&["--ro-bind-try", knob, knob]);
    }
    push(&["--dev", "/dev"]);
    match (plan.lockdown, plan.tmp_dir) {
        (Lockdown::Workspace, Some(tmp)) => {
            let tmp = path(tmp);
            push(&["--bind", &tmp, "/tmp"]);
        }
        _ => push(&["--tmpfs", "/tmp"]),
    }
    let hosts = path(plan.hosts_file);
    let resolv = path(plan.resolv_file);
    push(&["--ro-bind", &hosts, "/etc/hosts"]);
    push(&["--ro-bind", &resolv, "/etc/resolv.conf"]);
    if let Some(dir) = plan.workspace_dir {
        let dir = path(dir);
        push(&["--bind", &dir, "/workspace"]);
    }
    for mount in plan.mounts {
        let source = path(&mount.source);
        let flag = match mount.access {
            MountAccess::ReadOnly => "--ro-bind",
            MountAccess::ReadWrite => "--bind",
        };
        push(&[flag, &source, &mount.target]);
    }
    if let Some(egress) = plan.egress {
        // A fresh `/run` holds the two mount points, whatever root is below it.
        let (socket, bridge) = (path(&egress.socket), path(&egress.bridge));
        push(&[
            "--tmpfs",
            "/run",
            "--bind",
            &socket,
            bridge::SOCKET_INSIDE,
            "--ro-bind",
            &bridge,
            bridge::BRIDGE_INSIDE,
        ]);
        if let Some(bundle) = &egress.ca_bundle {
            let bundle = path(bundle);
            push(&["--ro-bind", &bundle, bridge::CA_BUNDLE_INSIDE]);
        }
    }
    push(&["--remount-ro", "/"]);
    if let Some(fd) = plan.seccomp_fd {
        let fd = fd.to_string();
        push(&["--seccomp", &fd]);
    }
    a
}

/// The `/etc/hosts` every workspace gets: loopback names, and the cloud-metadata names pinned
/// to an unroutable address.
#[must_use]
pub fn hosts_file(block_metadata: bool) -> String {
    let mut text = String::from(
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tworkspace\n",
    );
    if block_metadata {
        for name in crate::policy::METADATA_HOSTNAMES {
            text.push_str("0.0.0.0\t");
            text.push_str(name);
            text.push('\n');
        }
    }
    text
}

/// The `/etc/resolv.conf` for a list of resolvers.
#[must_use]
pub fn resolv_file(dns: &[std::net::IpAddr]) -> String {
    let mut text = String::new();
    for ip in dns {
        text.push_str("nameserver ");
        text.push_str(&ip.to_string());
        text.push('\n');
    }
    text
}

/// Reads which of [`HOST_SYSTEM_DIRS`] and [`HOST_ETC_ALLOWLIST`] exist on this host.
pub(crate) fn read_host_layout() -> HostLayout {
    let mut layout = HostLayout::default();
    for dir in HOST_SYSTEM_DIRS {
        let p = PathBuf::from(dir);
        match std::fs::symlink_metadata(&p) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&p) {
                    layout
                        .system
                        .push(((*dir).to_owned(), HostEntry::Symlink(path(&target))));
                }
            }
            Ok(meta) if meta.is_dir() => {
                layout
                    .system
                    .push(((*dir).to_owned(), HostEntry::Directory));
            }
            _ => {}
        }
    }
    for file in HOST_ETC_ALLOWLIST {
        if std::fs::metadata(file).is_ok() {
            layout.etc.push((*file).to_owned());
        }
    }
    layout
}
