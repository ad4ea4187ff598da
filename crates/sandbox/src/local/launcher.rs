//! The per-workspace launcher: a host-side shell that sits in the workspace's cgroups and forks
//! one bubblewrap per exec, so execs inherit the cgroups instead of migrating into them; and
//! that starts each exec's sandbox *ahead* of the exec, so the exec itself does not wait for
//! bubblewrap to build it.
//!
//! Why the launcher: moving a process into a cgroup takes the kernel's cgroup-wide migration
//! lock, which on a v1 hierarchy waits for an RCU grace period. Measured on the CI kind of host,
//! an exec after an idle gap paid 12–14 ms for the join on top of a 7 ms bare `bwrap`. The
//! launcher pays the join once, at creation, and is pooled with its cgroups afterwards.
//!
//! Why ahead: building a sandbox (namespaces, mounts, `/proc`, `/dev`) is almost all of an
//! exec's cost, and none of it depends on the exec: a workspace's execs all get the same
//! sandbox options. So the next exec's sandbox is started before that exec is asked for (see
//! [`BURST`] and [`QUIET`]; the driver also asks at create and when a workspace is pooled):
//! bubblewrap builds it and runs a small shell inside ([`STUB`]) that blocks on its request
//! FIFO. The exec then only sends its working
//! directory, environment and command. Every exec still gets a sandbox of its own, with its own
//! PID, network, IPC and mount namespaces, so nothing an earlier exec left running can see it
//! or outlive the exec that started it.
//!
//! The launcher runs outside every sandbox (no sandboxed process can see or signal it: they live
//! in their own user and PID namespaces) and reads one request per line on a pipe only this
//! process holds: a hex id. For each it forks a subshell that opens the sandbox's files in a
//! private (0700) directory and starts `bwrap --args 3 -- /bin/sh -c STUB` with stdin, stdout
//! and stderr on three FIFOs and the request FIFO as descriptor 4; it reports the subshell's PID
//! and later bwrap's exit status on its own stdout. Descriptor 3 is the option file, written
//! whole before the launcher is asked, so bubblewrap starts building at once: it holds the
//! sandbox's options only (paths and flags). The request FIFO carries the working directory,
//! the environment and the command. No value of either — secret or not — is in any argv, and
//! the sandbox starts with an empty environment (`--clearenv`). No path of these files is
//! visible inside a sandbox: the stub only holds inherited descriptors, and closes the option
//! and request ones before the command runs.
//!
//! All FIFOs are opened here *before* the request is sent (writers read-write, which Linux allows
//! on a FIFO and never blocks), so no open on either side ever waits. Because this process also
//! holds the output FIFOs open, end of output is not end of file: it is bwrap's exit (the whole
//! sandbox is gone by then, its PID namespace with it), after which what is buffered is drained.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};

use crate::backend::{OutputChunk, SpawnedProcess};
use crate::error::{Result, SandboxError};
use crate::process::OomProbe;
use crate::spec::ExecId;

mod pipes;
mod supervise;

use self::pipes::{ExecPipes, Fifos, request_text};
use self::supervise::{
    ANSWER, Supervision, explain_start_failure, kill_child_tree, pump, route_events, start_failed,
};

/// The launcher loop. `$1` is the FIFO directory, `$2` the bubblewrap binary, `$3` the
/// [`STUB`], `$4` the seccomp program's file (opened on descriptor 9, which bubblewrap reads
/// and closes: `--seccomp 9`). Ids are checked to be lowercase hex, so no request can name a path outside the
/// directory. The subshell opens every file, says so (`o ID`), and only then is the request
/// FIFO written and closed (data in a FIFO that nobody holds open is discarded).
/// bubblewrap reports its sandbox (PID and namespaces, `--info-fd`) in `ID.info`, on the
/// descriptor stdin was taken from (the sandbox never holds it: bubblewrap closes it there).
/// On end of input (this process went away) it kills its whole process group, bubblewrap
/// monitors included, whose `--die-with-parent` children then end the sandboxes. It asks (best
/// effort) not to be the out-of-memory killer's choice inside the workspace's memory cgroup;
/// each subshell puts that back before it starts bubblewrap, so no sandboxed process inherits
/// it.
const LAUNCHER: &str = r#"{ echo -1000 >/proc/self/oom_score_adj; } 2>/dev/null
while IFS= read -r id; do
  case "$id" in ''|*[!0-9a-f]*) continue ;; esac
  f="$1/$id"
  {
    exec 3<"$f.args" 4<"$f.req" 5>"$f.up" 6<"$f.in" 7>"$f.out" 8>"$f.err" 9<"$4"
    { echo 0 >/proc/self/oom_score_adj; } 2>/dev/null
    echo "o $id"
    "$2" --info-fd 6 --args 3 -- /bin/sh -c "$3" sh <&6 >&7 2>&8 7>&- 8>&- 6>"$f.info"
    s=$?
    exec 5>&-
    if [ -s "$f.up" ]; then echo "x $id $s"; else echo "f $id $s"; fi
  } &
  echo "p $id $!"
done
kill -KILL 0"#;

/// The first process of every exec's sandbox (its PID 1): marks on descriptor 5 that the
/// sandbox was built, waits for its request on descriptor 4, then runs the command as its child
/// and exits with its status — reaping, while it waits, whatever is orphaned inside. The request arrives as lines — `-` starts an argument, `+` continues it
/// after a newline — and is rebuilt with `read` and `set --`: shell builtins only, no `eval`,
/// nothing an argument holds is ever interpreted. The arguments are the working directory,
/// `NAME=value` pairs up to a `--`, then the command. Names were checked by the caller; the
/// shell's own variables are never exported, so the command's environment is exactly the
/// exec's, plus `PWD`. A request that never comes (the sandbox was started for an exec that
/// did not happen) ends the sandbox quietly. In a proxied sandbox (the egress socket is bound
/// in) the bridge to the proxy is started before the command (`bridge::START_BRIDGE`).
const STUB: &str = r#"printf u >&5
exec 5>&-
nl='
'
set --
n=0
while IFS= read -r line; do
  case "$line" in
    -*) [ "$n" = 1 ] && set -- "$@" "$cur"; cur=${line#-}; n=1 ;;
    +*) cur="$cur$nl${line#+}" ;;
  esac
done <&4
[ "$n" = 1 ] && set -- "$@" "$cur"
exec 3<&- 4<&-
[ "$#" -gt 0 ] || exit 0
if [ -S /run/auto-swe/egress.sock ]; then /run/auto-swe/netbridge 127.0.0.1:3128 /run/auto-swe/egress.sock || exit 125; fi
cd -- "$1" || exit 126
unset OLDPWD
shift
while [ "$1" != -- ]; do export "$1" || exit 126; shift; done
shift
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -H -n)"
"$@"
exit $?"#;

/// How many times, a millisecond apart, an ended launcher is looked for before giving up.
const REAP_POLLS: u32 = 500;

/// What a launcher starts sandboxes with: the bubblewrap binary and the seccomp program's file.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) bwrap: PathBuf,
    pub(crate) filter: PathBuf,
}

type Waiters = Arc<Mutex<HashMap<String, Waiter>>>;

#[derive(Default)]
struct Waiter {
    /// Turns true once the subshell holds the sandbox's files.
    opened: Option<watch::Sender<bool>>,
    pid: Option<oneshot::Sender<u32>>,
    exit: Option<oneshot::Sender<Ended>>,
}

/// How a sandbox's bubblewrap ended: its status, and whether the sandbox was built (its first
/// process ran) — a status without it is bubblewrap's own failure, never a command's.
#[derive(Debug, Clone, Copy)]
struct Ended {
    status: i32,
    started: bool,
}

/// A running launcher. Dropping it kills the launcher (and, through its process group, every
/// bubblewrap it started).
pub(crate) struct Launcher {
    requests: tokio::sync::Mutex<tokio::process::ChildStdin>,
    waiters: Waiters,
    /// Who the launcher and its sandboxes are on the host; their files are handed to it.
    identity: super::identity::HostIdentity,
    dir: PathBuf,
    pid: u32,
    ended: Arc<std::sync::atomic::AtomicBool>,
    child: Mutex<tokio::process::Child>,
    /// Sandboxes started for the next execs, oldest first.
    standby: Mutex<std::collections::VecDeque<Standby>>,
    /// When the last exec started.
    last_spawn: Mutex<Option<tokio::time::Instant>>,
    /// Bumped by every exec and by [`Launcher::abandon_pending`]: a sandbox prepared after an
    /// exec's end is only started if nothing happened since.
    generation: std::sync::atomic::AtomicU64,
    /// Bumped by [`Launcher::abandon_pending`] only: a sandbox started in an earlier epoch
    /// (for a workspace that has since gone) is never kept, even if it was asked for just
    /// before.
    epoch: std::sync::atomic::AtomicU64,
}

/// Execs that start within this long of the previous one are a burst: each starts the next
/// ones' sandboxes at once (up to [`MAX_WAITING`]), so that bubblewrap builds them while this
/// one runs.
const BURST: Duration = Duration::from_millis(50);

/// How many sandboxes may wait for execs at once: two during a burst, so that two build side by
/// side while execs follow each other; one otherwise.
const MAX_WAITING: usize = 2;

/// Otherwise the next exec's sandbox is started this long after an exec ends, if no other exec
/// has started meanwhile: long before an agent's next tool call, and late enough that a
/// caller who removes the workspace right after its last exec does not pay for a sandbox
/// nobody will use.
const QUIET: Duration = Duration::from_millis(10);

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn launch_error(message: impl Into<String>) -> SandboxError {
    SandboxError::Engine {
        backend: "local",
        message: message.into(),
    }
}

/// A sandbox started ahead of its exec: bubblewrap has (or is about to get) its options, and
/// the stub inside waits on the request FIFO. Everything the exec needs is already open.
struct Standby {
    id: String,
    options: Vec<String>,
    /// The launcher's epoch when it was started.
    epoch: u64,
    held: watch::Receiver<bool>,
    request_tx: pipe::Sender,
    stdin_tx: pipe::Sender,
    stdout_rx: pipe::Receiver,
    stderr_rx: pipe::Receiver,
    pid_rx: oneshot::Receiver<u32>,
    status_rx: oneshot::Receiver<Ended>,
    fifos: Fifos,
}

impl Launcher {
    /// Starts a launcher as `identity`, with FIFOs under `dir` (created 0700 and handed to
    /// `identity`), and moves it into the cgroups whose `cgroup.procs` files are `join` before
    /// anything is asked of it: it forks nothing until its first request, so every sandbox it
    /// starts is capped from its first instruction. The move is made from this side because an
    /// unprivileged launcher may not write those files itself.
    #[expect(
        clippy::disallowed_methods,
        reason = "the local driver starts its launcher; this is the sanctioned spawn site"
    )]
    pub(crate) fn start(
        join: &[PathBuf],
        dir: &Path,
        tools: &Tools,
        identity: &super::identity::HostIdentity,
    ) -> Result<Self> {
        super::private_dir(dir)?;
        identity.own(dir)?;
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(LAUNCHER)
            .arg("launcher")
            .arg(dir)
            .arg(&tools.bwrap)
            .arg(STUB)
            .arg(&tools.filter)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        if identity.switched {
            // Dropping from root also drops every supplementary group.
            command.uid(identity.uid).gid(identity.gid);
        }
        let mut child = command
            .spawn()
            .map_err(|e| SandboxError::io("starting the workspace launcher", e))?;
        let pid = child.id().unwrap_or(0);
        for file in join {
            if let Err(e) = std::fs::write(file, pid.to_string()) {
                let _ = child.start_kill();
                return Err(SandboxError::io(
                    format!("moving the launcher into {}", file.display()),
                    e,
                ));
            }
        }
        let pid = child.id().unwrap_or(0);
        let requests = child
            .stdin
            .take()
            .ok_or_else(|| launch_error("the launcher has no input"))?;
        let events = child
            .stdout
            .take()
            .ok_or_else(|| launch_error("the launcher has no output"))?;
        let waiters: Waiters = Arc::default();
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(route_events(
            events,
            Arc::clone(&waiters),
            Arc::clone(&ended),
        ));
        Ok(Self {
            requests: tokio::sync::Mutex::new(requests),
            waiters,
            identity: identity.clone(),
            dir: dir.to_path_buf(),
            pid,
            ended,
            child: Mutex::new(child),
            standby: Mutex::new(std::collections::VecDeque::new()),
            last_spawn: Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            epoch: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Who the launcher and its sandboxes are on the host.
    pub(crate) fn identity(&self) -> &super::identity::HostIdentity {
        &self.identity
    }

    /// The launcher's PID (a member of its cgroups).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the launcher still answers (it has not ended, and has never been too slow to).
    pub(crate) fn running(&self) -> bool {
        !self.ended.load(std::sync::atomic::Ordering::SeqCst)
            && std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// Kills the launcher's whole process group (the launcher, its subshells and every
    /// bubblewrap monitor, whose sandboxes then end with them) and reaps the launcher (bounded
    /// wait), so it leaves its cgroups at once instead of lingering there as a zombie. True
    /// when it is gone. Blocks for up to half a second: for `Drop` and synchronous paths;
    /// async code uses [`Launcher::end_async`].
    pub(crate) fn end(&self) -> bool {
        if !self.kill() {
            return false;
        }
        for _ in 0..REAP_POLLS {
            match self.reaped() {
                Some(gone) => return gone,
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        false
    }

    /// [`Launcher::end`] without blocking the runtime while the launcher is reaped.
    pub(crate) async fn end_async(&self) -> bool {
        if !self.kill() {
            return false;
        }
        for _ in 0..REAP_POLLS {
            match self.reaped() {
                Some(gone) => return gone,
                None => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
        false
    }

    /// Sends SIGKILL to the launcher's process group and the launcher; false when its handle
    /// cannot be had.
    fn kill(&self) -> bool {
        let Ok(mut child) = self.child.lock() else {
            return false;
        };
        if let Ok(Some(pid)) = child
            .try_wait()
            .map(|done| done.is_none().then_some(self.pid))
            && let Ok(group) = i32::try_from(pid)
            && group > 1
        {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.start_kill();
        true
    }

    /// `Some(true)` once the launcher is reaped (or cannot be waited for), `Some(false)` when
    /// its handle cannot be had, `None` while it is still running.
    fn reaped(&self) -> Option<bool> {
        let Ok(mut child) = self.child.lock() else {
            return Some(false);
        };
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => Some(true),
            Ok(None) => None,
        }
    }

    /// Fails every exec still waiting and forgets the sandbox started ahead (their processes
    /// are killed with the workspace's cgroups) and when the last exec started: the launcher
    /// is about to serve another workspace.
    pub(crate) fn abandon_pending(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Ok(mut last) = self.last_spawn.lock() {
            last.take();
        }
        if let Ok(mut waiting) = self.standby.lock() {
            waiting.clear();
        }
        if let Ok(mut table) = self.waiters.lock() {
            table.clear();
        }
    }

    /// Starts sandboxes with `options` until `depth` of them wait for execs.
    pub(crate) async fn prepare(&self, options: &[String], depth: usize) -> Result<()> {
        let epoch = self.epoch.load(std::sync::atomic::Ordering::SeqCst);
        self.prepare_in(epoch, options, depth).await
    }

    /// [`Launcher::prepare`] on behalf of the workspace this launcher served in `epoch`:
    /// nothing once the launcher has moved on to another.
    async fn prepare_in(&self, epoch: u64, options: &[String], depth: usize) -> Result<()> {
        loop {
            if self.epoch.load(std::sync::atomic::Ordering::SeqCst) != epoch {
                return Ok(());
            }
            let waiting = self
                .standby
                .lock()
                .map_err(|_| launch_error("launcher standby lock poisoned"))?
                .iter()
                .filter(|s| s.options == options)
                .count();
            if waiting >= depth {
                return Ok(());
            }
            let standby = self.start_sandbox(epoch, options.to_vec()).await?;
            self.keep(standby);
        }
    }

    /// Keeps `standby` for a coming exec, retiring it if it was started for a workspace that
    /// has gone since, and retiring any waiting one made with other options (the workspace
    /// changed) and the oldest beyond [`MAX_WAITING`].
    fn keep(&self, standby: Standby) {
        if standby.epoch != self.epoch.load(std::sync::atomic::Ordering::SeqCst) {
            self.retire(standby);
            return;
        }
        let retired: Vec<Standby> = match self.standby.lock() {
            Ok(mut waiting) => {
                let (same, other): (Vec<Standby>, Vec<Standby>) = waiting
                    .drain(..)
                    .partition(|s| s.options == standby.options);
                waiting.extend(same);
                waiting.push_back(standby);
                let extra = waiting.len().saturating_sub(MAX_WAITING);
                other.into_iter().chain(waiting.drain(..extra)).collect()
            }
            Err(_) => vec![standby],
        };
        for old in retired {
            self.retire(old);
        }
    }

    /// The oldest waiting sandbox made with `options` that has not ended; the others on the
    /// way are retired.
    fn take_standby(&self, options: &[String]) -> Option<Standby> {
        loop {
            let mut standby = self.standby.lock().ok()?.pop_front()?;
            let alive = matches!(
                standby.status_rx.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            );
            if alive && standby.options == options {
                return Some(standby);
            }
            self.retire(standby);
        }
    }

    /// Ends a sandbox that no exec will use: kills its subshell's tree once its PID is known
    /// (bounded), then drops its FIFOs.
    fn retire(&self, standby: Standby) {
        let waiters = Arc::clone(&self.waiters);
        let launcher_pid = self.pid;
        tokio::spawn(async move {
            let mut standby = standby;
            let pid = tokio::time::timeout(Duration::from_secs(5), &mut standby.pid_rx).await;
            if let Ok(Ok(pid)) = pid {
                kill_child_tree(launcher_pid, pid);
            }
            forget(&waiters, &standby.id);
            drop(standby);
        });
    }

    /// Asks the launcher for a new sandbox with `options` (`--clearenv` is put first), on
    /// behalf of the workspace of `epoch`; returns at once, while bubblewrap builds it.
    async fn start_sandbox(&self, epoch: u64, options: Vec<String>) -> Result<Standby> {
        let id = crate::spec::random_hex(12)?;
        let mut option_bytes = b"--clearenv\0".to_vec();
        for option in &options {
            option_bytes.extend_from_slice(option.as_bytes());
            option_bytes.push(0);
        }
        let pipes = ExecPipes::open(&self.dir, &id, &option_bytes, &self.identity)?;
        let (opened_tx, held) = watch::channel(false);
        let (pid_tx, pid_rx) = oneshot::channel();
        let (status_tx, status_rx) = oneshot::channel();
        self.waiters
            .lock()
            .map_err(|_| launch_error("launcher table lock poisoned"))?
            .insert(
                id.clone(),
                Waiter {
                    opened: Some(opened_tx),
                    pid: Some(pid_tx),
                    exit: Some(status_tx),
                },
            );
        let sent = tokio::time::timeout(ANSWER, async {
            let mut requests = self.requests.lock().await;
            requests.write_all(format!("{id}\n").as_bytes()).await?;
            requests.flush().await
        })
        .await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                forget(&self.waiters, &id);
                self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(start_failed(
                    format!("the workspace launcher ended before it took the request: {e}"),
                    true,
                ));
            }
            Err(_) => {
                forget(&self.waiters, &id);
                self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(start_failed(
                    "the workspace launcher took no request in time",
                    true,
                ));
            }
        }
        let ExecPipes {
            fifos,
            request_tx,
            stdin_tx,
            stdout_rx,
            stderr_rx,
        } = pipes;
        Ok(Standby {
            id,
            options,
            epoch,
            held,
            request_tx,
            stdin_tx,
            stdout_rx,
            stderr_rx,
            pid_rx,
            status_rx,
            fifos,
        })
    }

    /// Counts an exec: its generation, and whether it follows the previous one within
    /// [`BURST`].
    fn note_spawn(&self) -> (u64, bool) {
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let now = tokio::time::Instant::now();
        let burst = self
            .last_spawn
            .lock()
            .ok()
            .and_then(|mut last| last.replace(now))
            .is_some_and(|last| now.duration_since(last) < BURST);
        (generation, burst)
    }

    /// Runs one exec in the sandbox waiting for it (or in a new one), and arranges for the
    /// next exec's sandbox (see [`BURST`] and [`QUIET`]). `request.options` are the sandbox's
    /// options; the working directory, environment and command go on the request FIFO;
    /// `request.stdin` goes first on its input.
    pub(crate) async fn spawn(self: &Arc<Self>, request: LaunchRequest) -> Result<SpawnedProcess> {
        let LaunchRequest {
            options,
            env,
            workdir,
            command,
            exec_id,
            stdin,
            keep_stdin_open,
            timeout,
            probes,
            stop,
        } = request;
        let (generation, burst) = self.note_spawn();
        let epoch = self.epoch.load(std::sync::atomic::Ordering::SeqCst);
        let standby = match self.take_standby(&options) {
            Some(standby) => standby,
            None => self.start_sandbox(epoch, options.clone()).await?,
        };
        let Standby {
            id,
            held,
            request_tx,
            stdin_tx,
            stdout_rx,
            stderr_rx,
            pid_rx,
            status_rx,
            fifos,
            ..
        } = standby;
        let tune = bridge_of(&options).map(|bridge| (self.dir.join(format!("{id}.info")), bridge));
        tokio::spawn(send_request(
            held.clone(),
            request_tx,
            request_text(workdir, env, command),
            tune,
        ));
        let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>(16);
        tokio::spawn(feed_stdin(held, stdin_tx, stdin, in_rx));
        let (out_tx, out_rx) = mpsc::channel(64);
        let (done_tx, done_rx) = watch::channel(false);
        let readers = [
            tokio::spawn(pump(
                stdout_rx,
                out_tx.clone(),
                OutputChunk::Stdout,
                done_rx.clone(),
            )),
            tokio::spawn(pump(stderr_rx, out_tx, OutputChunk::Stderr, done_rx)),
        ];
        let (exit_tx, exit_rx) = oneshot::channel();
        let waiters = Arc::clone(&self.waiters);
        let launcher_pid = self.pid;
        let distrusted = Arc::clone(&self.ended);
        let up_path = self.dir.join(format!("{id}.up"));
        let this = Arc::downgrade(self);
        let next_options = (!burst).then(|| options.clone());
        tokio::spawn(async move {
            let exit = Supervision {
                waiters: &waiters,
                launcher_pid,
                distrusted: &distrusted,
                id: &id,
                up: up_path,
                timeout,
                probes,
                stop,
            }
            .run(pid_rx, status_rx)
            .await;
            let _ = done_tx.send(true);
            let [stdout_reader, stderr_reader] = readers;
            let _ = stdout_reader.await;
            let stderr_head = stderr_reader.await.unwrap_or_default();
            drop(fifos);
            let _ = exit_tx.send(explain_start_failure(exit, &stderr_head));
            if let Some(options) = next_options {
                tokio::time::sleep(QUIET).await;
                if let Some(launcher) = this.upgrade()
                    && launcher
                        .generation
                        .load(std::sync::atomic::Ordering::SeqCst)
                        == generation
                {
                    let _ = launcher.prepare_in(epoch, &options, 1).await;
                }
            }
        });
        if burst {
            let _ = self.prepare_in(epoch, &options, MAX_WAITING).await;
        }
        Ok(SpawnedProcess {
            exec_id,
            stdin: keep_stdin_open.then_some(in_tx),
            output: out_rx,
            exit: exit_rx,
        })
    }
}

/// What an exec's workspace cgroups tell about how it ended.
pub(crate) struct ExitProbes {
    /// Whether an exit by SIGKILL was the OOM killer's.
    pub(crate) oom: OomProbe,
    /// Whether the workspace has run into its PIDs cap: a sandbox that could not be built
    /// is then a transient shortage.
    pub(crate) pids_short: OomProbe,
}

/// One exec for [`Launcher::spawn`].
pub(crate) struct LaunchRequest {
    /// Bubblewrap options that make the sandbox (no environment, no command).
    pub(crate) options: Vec<String>,
    /// The command's environment.
    pub(crate) env: Vec<(String, String)>,
    /// The working directory inside.
    pub(crate) workdir: String,
    /// The command and its arguments.
    pub(crate) command: Vec<String>,
    /// The exec's tag.
    pub(crate) exec_id: ExecId,
    /// Bytes written first on standard input.
    pub(crate) stdin: Vec<u8>,
    /// Whether the caller streams more input.
    pub(crate) keep_stdin_open: bool,
    /// Per-call timeout.
    pub(crate) timeout: Duration,
    /// What the workspace's cgroups say about how the exec ended.
    pub(crate) probes: ExitProbes,
    /// Asked for when the exec is to end before its time.
    pub(crate) stop: Option<crate::process::Stop>,
}

/// Writes an exec's request once the launcher holds its sandbox's files; for a proxied sandbox
/// (`tune`: bubblewrap's report and the bridge program), only after its network namespace was
/// tuned, so the bridge and the command start with the workspace's TCP receive buffers.
async fn send_request(
    mut held: watch::Receiver<bool>,
    mut request_tx: pipe::Sender,
    text: String,
    tune: Option<(PathBuf, PathBuf)>,
) {
    if held.wait_for(|held| *held).await.is_ok() {
        if let Some((info, bridge)) = tune {
            super::netns::tune_reported(&info, &bridge).await;
        }
        let _ = request_tx.write_all(text.as_bytes()).await;
    }
}

/// The bridge program on the host when a sandbox made with `options` is proxied (the bridge is
/// bound in, and the stub starts it): its network namespace is tuned before its command.
fn bridge_of(options: &[String]) -> Option<PathBuf> {
    options
        .windows(3)
        .find(|bind| bind[0] == "--ro-bind" && bind[2] == crate::bridge::BRIDGE_INSIDE)
        .map(|bind| PathBuf::from(&bind[1]))
}

fn forget(waiters: &Waiters, id: &str) {
    if let Ok(mut table) = waiters.lock() {
        table.remove(id);
    }
}

/// Writes the exec's standard input once the subshell holds its FIFO (closing it earlier would
/// lose it and block the subshell's open), then what the caller streams; closing ends input.
async fn feed_stdin(
    mut held: watch::Receiver<bool>,
    stdin_tx: pipe::Sender,
    first: Vec<u8>,
    more: mpsc::Receiver<Vec<u8>>,
) {
    if held.wait_for(|held| *held).await.is_err() {
        return;
    }
    crate::process::forward_input(stdin_tx, vec![first], more).await;
}

#[cfg(test)]
mod tests {
    use super::STUB;
    use super::pipes::encode_command;

    #[test]
    fn both_first_shells_cap_open_files_at_the_crates_figure() {
        let cap = format!("ulimit -n {} ", crate::spec::OPEN_FILES_PER_PROCESS);
        for shell in [STUB, crate::local::plan::REAPER] {
            let at = shell.find(&cap).expect("the cap is set");
            assert!(
                at < shell.rfind("\"$@\"").expect("the command runs"),
                "before the command"
            );
        }
    }

    #[test]
    fn both_first_shells_start_the_egress_bridge_before_the_command() {
        for shell in [STUB, &crate::local::plan::reaper(true)] {
            let at = shell
                .find(crate::bridge::START_BRIDGE)
                .expect("the bridge line is there");
            assert!(at < shell.rfind("\"$@\"").expect("the command runs"));
        }
        assert!(!crate::local::plan::reaper(false).contains("netbridge"));
    }

    #[test]
    fn commands_are_encoded_line_by_line() {
        let argv = ["sh", "-c", "echo a\necho b\n", "", "-x"].map(str::to_owned);
        assert_eq!(
            encode_command(&argv),
            "-sh\n--c\n-echo a\n+echo b\n+\n-\n--x\n"
        );
    }
}
