//! An exec's supervision: its bounded waits on the launcher, how it ended, its output, and
//! the kill of its sandbox's tree.

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};

use std::sync::Arc;

use super::{Ended, Waiters, forget, launch_error};
use crate::backend::{Exit, OutputChunk};
use crate::error::{Result, SandboxError};
use crate::process::kill_tree;

/// How long the launcher may take to report that it started an exec's sandbox (it forks a
/// subshell and says so at once). One that takes longer is no longer trusted: the exec fails
/// with a retryable [`SandboxError::ExecStartFailed`] and the driver replaces the launcher.
pub(crate) const ANSWER: Duration = Duration::from_secs(10);

/// An exec's waits on the launcher, each bounded.
pub(super) struct Supervision<'a> {
    pub(super) waiters: &'a Waiters,
    pub(super) launcher_pid: u32,
    /// Set when the launcher stops answering, so the driver replaces it.
    pub(super) distrusted: &'a std::sync::atomic::AtomicBool,
    pub(super) id: &'a str,
    /// The file the sandbox's first process marks when it runs.
    pub(super) up: PathBuf,
    pub(super) timeout: Duration,
    pub(super) probes: super::ExitProbes,
    pub(super) stop: Option<crate::process::Stop>,
}

/// A start failure of the `local` backend.
pub(super) fn start_failed(reason: impl Into<String>, retryable: bool) -> SandboxError {
    SandboxError::ExecStartFailed {
        backend: "local",
        reason: reason.into(),
        retryable,
    }
}

impl Supervision<'_> {
    /// Waits for the exec's start (at most [`ANSWER`]) and end (within `timeout`); on timeout
    /// kills the subshell's tree (bwrap and the whole sandbox). A bubblewrap that ended without
    /// building the sandbox is a start failure, never a status.
    pub(super) async fn run(
        self,
        mut pid_rx: oneshot::Receiver<u32>,
        status_rx: oneshot::Receiver<Ended>,
    ) -> Result<Exit> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let pid = match tokio::time::timeout(ANSWER, &mut pid_rx).await {
            Ok(Ok(pid)) => pid,
            Ok(Err(_)) => return Err(start_failed("the workspace launcher ended", true)),
            Err(_) => {
                self.distrusted
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                forget(self.waiters, self.id);
                return Err(start_failed(
                    format!(
                        "the workspace launcher did not answer within {} s",
                        ANSWER.as_secs()
                    ),
                    true,
                ));
            }
        };
        match wait_status(pid, deadline, status_rx, self.stop.as_ref()).await {
            // Retryable when the workspace ran out of PIDs: bubblewrap refused a fork may
            // end without a word.
            Waited::Ended(Ended { started: false, .. }) if (self.probes.pids_short)() => {
                Err(start_failed(
                    "bubblewrap could not build the sandbox; the workspace reached its process limit",
                    true,
                ))
            }
            Waited::Ended(Ended { started: false, .. }) => Err(start_failed(
                "bubblewrap could not build the sandbox",
                false,
            )),
            Waited::Ended(Ended { status: 137, .. }) if (self.probes.oom)() => {
                Ok(Exit::OutOfMemory)
            }
            Waited::Ended(Ended { status, .. }) => Ok(Exit::Status(status)),
            // The launcher itself could not fork, or was killed: the command never ran when
            // the sandbox never marked its start.
            Waited::LauncherGone if std::fs::metadata(&self.up).is_ok_and(|m| m.len() == 0) => {
                Err(start_failed(
                    "the workspace launcher ended before the sandbox started",
                    true,
                ))
            }
            Waited::LauncherGone => Err(launch_error("the workspace launcher ended")),
            Waited::TimedOut => {
                forget(self.waiters, self.id);
                kill_child_tree(self.launcher_pid, pid);
                Ok(Exit::TimedOut)
            }
            Waited::Stopped => {
                forget(self.waiters, self.id);
                kill_child_tree(self.launcher_pid, pid);
                Ok(Exit::Status(crate::process::KILLED_STATUS))
            }
        }
    }
}

/// What waiting for an exec's end gave.
pub(super) enum Waited {
    /// The launcher reported how bubblewrap ended (or the subshell ended without a report).
    Ended(Ended),
    /// The launcher went away before reporting.
    LauncherGone,
    /// The deadline passed first.
    TimedOut,
    /// The exec was asked to end.
    Stopped,
}

/// Waits for the `x`/`f` line of the subshell `pid` until `deadline`. A subshell that is gone
/// without one (it could not even fork bubblewrap, so it never reached its report) is a start
/// failure, noticed within about a quarter of a second instead of at the exec's timeout.
pub(super) async fn wait_status(
    pid: u32,
    deadline: tokio::time::Instant,
    mut status_rx: oneshot::Receiver<Ended>,
    stop: Option<&crate::process::Stop>,
) -> Waited {
    const LOOK: Duration = Duration::from_millis(100);
    let mut gone_seen = false;
    loop {
        let until = deadline.min(tokio::time::Instant::now() + LOOK);
        let waited = tokio::select! {
            waited = tokio::time::timeout_at(until, &mut status_rx) => waited,
            () = crate::process::stop_requested(stop) => return Waited::Stopped,
        };
        match waited {
            Ok(Ok(ended)) => return Waited::Ended(ended),
            Ok(Err(_)) => return Waited::LauncherGone,
            Err(_) if tokio::time::Instant::now() >= deadline => return Waited::TimedOut,
            Err(_) => {
                if crate::process::has_ended(pid) {
                    // Its report, if it made one, was written before it ended: one more look.
                    if gone_seen {
                        return Waited::Ended(Ended {
                            status: -1,
                            started: false,
                        });
                    }
                    gone_seen = true;
                }
            }
        }
    }
}

/// Gives a start failure bubblewrap's own words (what it wrote on the exec's standard error:
/// the command never ran, so nothing there is the command's), and says whether it was a
/// transient shortage worth another try.
pub(super) fn explain_start_failure(exit: Result<Exit>, stderr: &[u8]) -> Result<Exit> {
    match exit {
        Err(SandboxError::ExecStartFailed {
            backend,
            reason,
            retryable,
        }) => {
            let said = String::from_utf8_lossy(stderr);
            let said = said.trim();
            let transient = [
                "Resource temporarily unavailable",
                "Cannot fork",
                "Cannot allocate memory",
            ]
            .iter()
            .any(|shortage| said.contains(shortage));
            Err(SandboxError::ExecStartFailed {
                backend,
                reason: if said.is_empty() {
                    reason
                } else {
                    format!("{reason}: {}", said.chars().take(512).collect::<String>())
                },
                retryable: retryable || transient,
            })
        }
        other => other,
    }
}

/// Routes the launcher's `p ID PID` and `x ID STATUS` lines to the waiting execs.
pub(super) async fn route_events(
    events: tokio::process::ChildStdout,
    waiters: Waiters,
    ended: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut lines = BufReader::new(events).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut parts = line.split(' ');
        let (Some(kind), Some(id)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(mut table) = waiters.lock() else {
            break;
        };
        if kind == "o" {
            if let Some(tx) = table.get_mut(id).and_then(|w| w.opened.take()) {
                let _ = tx.send(true);
            }
            continue;
        }
        let Some(Ok(value)) = parts.next().map(str::parse::<i64>) else {
            continue;
        };
        match kind {
            "p" => {
                if let Some(tx) = table.get_mut(id).and_then(|w| w.pid.take()) {
                    let _ = tx.send(u32::try_from(value).unwrap_or(0));
                }
            }
            "x" | "f" => {
                if let Some(mut waiter) = table.remove(id)
                    && let Some(tx) = waiter.exit.take()
                {
                    let _ = tx.send(Ended {
                        status: i32::try_from(value).unwrap_or(-1),
                        started: kind == "x",
                    });
                }
            }
            _ => {}
        }
    }
    // The launcher is gone: every pending exec learns it (its senders drop here).
    ended.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Ok(mut table) = waiters.lock() {
        table.clear();
    }
}

/// Reads a FIFO this process also holds open for writing: until bubblewrap has exited (`done`),
/// then whatever is still buffered, then stops. Returns the first bytes it read (up to
/// [`HEAD`]), where bubblewrap's own message is when it could not build the sandbox.
pub(super) async fn pump(
    mut reader: pipe::Receiver,
    tx: mpsc::Sender<OutputChunk>,
    wrap: fn(Vec<u8>) -> OutputChunk,
    mut done: watch::Receiver<bool>,
) -> Vec<u8> {
    let mut buf = vec![0_u8; 16 * 1024];
    let mut head = Vec::new();
    let keep = |bytes: &[u8], head: &mut Vec<u8>| {
        let room = HEAD.saturating_sub(head.len());
        head.extend_from_slice(&bytes[..bytes.len().min(room)]);
    };
    loop {
        tokio::select! {
            read = reader.read(&mut buf) => match read {
                Ok(0) | Err(_) => return head,
                Ok(n) => {
                    keep(&buf[..n], &mut head);
                    let _ = tx.send(wrap(buf[..n].to_vec())).await;
                }
            },
            changed = done.changed() => {
                if changed.is_err() || *done.borrow() {
                    break;
                }
            }
        }
    }
    // The sandbox is gone, so what the FIFO holds is all there will be: read it to the end
    // with the read call itself. (`try_read` answers "would block" whenever the reactor has not
    // yet seen the FIFO readable — under load, output written just before the exit — and lost
    // it: an exec that printed its result came back with none.)
    loop {
        match nix::unistd::read(&reader, &mut buf) {
            Ok(n) if n > 0 => {
                keep(&buf[..n], &mut head);
                let _ = tx.send(wrap(buf[..n].to_vec())).await;
            }
            Err(nix::errno::Errno::EINTR) => {}
            _ => return head,
        }
    }
}

/// How much of a stream's start [`pump`] keeps.
pub(super) const HEAD: usize = 2048;

/// Kills `pid`'s tree if `pid` is still a child of the launcher: a PID the launcher reported can
/// only be trusted while it is its own subshell.
pub(super) fn kill_child_tree(launcher: u32, pid: u32) {
    if pid > 0 && crate::process::parent_of(pid) == Some(launcher) {
        kill_tree(pid);
    }
}
