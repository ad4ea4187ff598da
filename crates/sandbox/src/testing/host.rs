//! Looking from outside the workspace: this host's processes and planted canary files.

use std::path::PathBuf;

/// A fresh random tag for names the suite makes, so concurrent runs never see each other's.
pub(super) fn nonce() -> String {
    crate::spec::random_hex(6).unwrap_or_else(|_| format!("{}", std::process::id()))
}

/// This host's live processes whose `/proc/<pid>/<file>` (`environ`, `cmdline`) holds
/// `needle`.
pub(super) async fn processes_with(file: &'static str, needle: String) -> Vec<u32> {
    tokio::task::spawn_blocking(move || scan(file, needle.as_bytes()))
        .await
        .unwrap_or_default()
}

/// This host's processes whose command line is exactly `cmdline` (NUL-separated).
pub(super) async fn processes_running(cmdline: Vec<u8>) -> Vec<u32> {
    tokio::task::spawn_blocking(move || {
        pids()
            .into_iter()
            .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline))
            .filter(|pid| !ending(*pid))
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// `PF_EXITING` in `/proc/<pid>/stat`'s flags: the process is in its exit path.
const PF_EXITING: u64 = 0x4;

/// Whether `/proc/<pid>/stat` shows a process that has ended or is ending: a zombie, or one in
/// its exit path (whose `/proc` files can still be read for a moment on a loaded host).
fn stat_says_ending(stat: &str) -> bool {
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    if matches!(fields.next(), Some("Z" | "X" | "x")) {
        return true;
    }
    // state ppid pgrp session tty_nr tpgid flags: the flags are the sixth field after the state.
    fields
        .nth(5)
        .and_then(|flags| flags.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_EXITING != 0)
}

/// Whether `/proc/<pid>/status` shows a `SIGKILL` pending (for the thread or its group): the
/// process is killed and will not run again.
fn sigkill_pending(status: &str) -> bool {
    status
        .lines()
        .filter_map(|l| {
            l.strip_prefix("SigPnd:")
                .or_else(|| l.strip_prefix("ShdPnd:"))
        })
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .any(|mask| mask & (1 << 8) != 0)
}

/// Whether `pid` is gone, or already killed and on its way out.
fn ending(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    stat_says_ending(&stat)
        || std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_or(true, |status| sigkill_pending(&status))
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc").map_or_else(
        |_| Vec::new(),
        |dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .collect()
        },
    )
}

fn scan(file: &str, needle: &[u8]) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/{file}"))
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
        })
        .filter(|pid| !ending(*pid))
        .collect()
}

/// Canary files planted in `/root` and `$HOME`; removed on drop.
pub(super) struct Canaries {
    pub(super) value: String,
    pub(super) files: Vec<PathBuf>,
}

impl Canaries {
    /// Plants a canary in each directory the suite may write to.
    pub(super) async fn plant() -> Self {
        let tag = nonce();
        let value = format!("Canary-Value-{tag}-9f3");
        let mut dirs = vec![PathBuf::from("/root")];
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home));
        }
        let mut files = Vec::new();
        for dir in dirs {
            let file = dir.join(format!(".auto-swe-canary-{tag}"));
            if !files.contains(&file) && tokio::fs::write(&file, &value).await.is_ok() {
                files.push(file);
            }
        }
        Self { value, files }
    }
}

impl Drop for Canaries {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Where the local backend makes the cgroups of this process's workspaces: the `auto-swe`
/// directory under each of this process's own cgroups (one per v1 controller, or the v2 one),
/// those that exist. A cgroup there is named after the process that made it
/// (`<pid>.<start>.…`), so a test finds what a process it killed left behind.
#[must_use]
pub fn cgroup_parents() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let mount = if controllers.is_empty() {
                PathBuf::from("/sys/fs/cgroup")
            } else {
                std::path::Path::new("/sys/fs/cgroup").join(controllers.split(',').next()?)
            };
            Some(mount.join(path.trim_start_matches('/')).join("auto-swe"))
        })
        .filter(|dir| dir.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_or_an_exiting_process_is_ending() {
        let running = "42 (sh) R 1 42 42 0 -1 4194304 99 0 0 0";
        assert!(!stat_says_ending(running));
        assert!(stat_says_ending("42 (sh) Z 1 42 42 0 -1 4194304 99 0"));
        // PF_EXITING (0x4) set in the flags.
        assert!(stat_says_ending("42 (sh) R 1 42 42 0 -1 4194308 99 0"));
        // A name with spaces and parentheses does not shift the fields.
        assert!(!stat_says_ending("42 (a) R (b) R 1 42 42 0 -1 4194304 9"));
        assert!(stat_says_ending("42 (a) R (b) D 1 42 42 0 -1 4194308 9"));
    }

    #[test]
    fn a_pending_sigkill_is_ending() {
        let quiet = "State:\tR (running)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n";
        assert!(!sigkill_pending(quiet));
        assert!(sigkill_pending(&quiet.replace(
            "ShdPnd:\t0000000000000000",
            "ShdPnd:\t0000000000000100"
        )));
        assert!(sigkill_pending(&quiet.replace(
            "SigPnd:\t0000000000000000",
            "SigPnd:\t0000000000004100"
        )));
        // SIGTERM (bit 14) alone is not a kill.
        assert!(!sigkill_pending(&quiet.replace(
            "ShdPnd:\t0000000000000000",
            "ShdPnd:\t0000000000004000"
        )));
    }

    #[tokio::test]
    async fn this_process_is_found_and_not_ending() {
        let me = std::process::id();
        assert!(!ending(me));
        let cmdline = std::fs::read(format!("/proc/{me}/cmdline")).unwrap();
        assert!(processes_running(cmdline).await.contains(&me));
        assert!(ending(u32::MAX));
    }
}
