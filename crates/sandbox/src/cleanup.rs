//! Leaving nothing behind: the termination signals a caller turns into
//! [`crate::EphemeralRunner::shutdown`], and the pieces the backends' start-up sweepers share
//! (who is still alive, which per-process state directories were left by the dead).

use std::path::{Path, PathBuf};

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The prefix of the per-process state directories callers make in the temporary directory
/// (`auto-swe-workspaces-<pid>`, as `auto-swe sandbox run` does). A directory of this name whose
/// process has ended is removed by the next `local` backend that starts.
pub const STATE_DIR_PREFIX: &str = "auto-swe-workspaces-";

/// `SIGINT` and `SIGTERM`, caught from the moment [`TerminationSignals::listen`] returns, so a
/// caller can remove what its backends hold before it exits instead of being killed with it all
/// still running.
#[derive(Debug)]
pub struct TerminationSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl TerminationSignals {
    /// Starts catching both signals (their default action, ending the process, is replaced for
    /// the rest of the process's life).
    pub fn listen() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the next of them and returns its number (2 or 15).
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => nix::libc::SIGINT,
            _ = self.terminate.recv() => nix::libc::SIGTERM,
        }
    }
}

/// Whether a process with this PID exists (a zombie counts as ended).
pub(crate) fn alive(pid: u32) -> bool {
    !crate::process::has_ended(pid)
}

/// State directories `auto-swe-workspaces-<pid>` in `dir` whose process has ended (never this
/// process's own).
pub(crate) fn stale_state_dirs(dir: &Path) -> Vec<PathBuf> {
    per_process_dirs(dir)
        .into_iter()
        .filter(|(pid, _)| *pid != std::process::id() && !alive(*pid))
        .map(|(_, path)| path)
        .collect()
}

/// Every state directory `auto-swe-workspaces-<pid>` in `dir`, live or not.
pub(crate) fn state_dirs(dir: &Path) -> Vec<PathBuf> {
    per_process_dirs(dir)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

fn per_process_dirs(dir: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let pid: u32 = name
                .to_str()?
                .strip_prefix(STATE_DIR_PREFIX)?
                .parse()
                .ok()?;
            let is_dir = entry.file_type().ok()?.is_dir();
            is_dir.then(|| (pid, entry.path()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dead_owners_state_dirs_are_stale() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir
            .path()
            .join(format!("{STATE_DIR_PREFIX}{}", std::process::id()));
        // PID 1 is alive in every PID namespace; a PID above the kernel's maximum never is.
        let live = dir.path().join(format!("{STATE_DIR_PREFIX}1"));
        let dead = dir.path().join(format!("{STATE_DIR_PREFIX}4194305"));
        let unrelated = dir.path().join("auto-swe-workspaces-x");
        for d in [&own, &live, &dead, &unrelated] {
            std::fs::create_dir(d).unwrap();
        }
        assert_eq!(stale_state_dirs(dir.path()), vec![dead]);
    }
}
