//! The files an exec's sandbox is started with: the option file, the FIFOs, and the request
//! text the stub reads.

use std::path::{Path, PathBuf};

use tokio::net::unix::pipe;

use crate::error::{Result, SandboxError};

/// The files of one sandbox, made and opened on this side before the launcher is asked: the
/// option file (bubblewrap's options, nothing secret, written whole so bubblewrap can read it to
/// its end at once) and four FIFOs.
pub(super) struct ExecPipes {
    pub(super) fifos: Fifos,
    pub(super) request_tx: pipe::Sender,
    pub(super) stdin_tx: pipe::Sender,
    pub(super) stdout_rx: pipe::Receiver,
    pub(super) stderr_rx: pipe::Receiver,
}

impl ExecPipes {
    pub(super) fn open(
        dir: &Path,
        id: &str,
        options: &[u8],
        identity: &crate::local::identity::HostIdentity,
    ) -> Result<Self> {
        let path = |suffix: &str| dir.join(format!("{id}.{suffix}"));
        let mut fifos = Fifos::make(&[path("req"), path("in"), path("out"), path("err")])?;
        for fifo in &fifos.0 {
            identity.own(fifo)?;
        }
        let io = |e| SandboxError::io("opening an exec pipe", e);
        // The option file, written whole, the (empty) start mark and bubblewrap's (empty)
        // report: new, 0600, removed with the FIFOs.
        for (suffix, text) in [("up", &[][..]), ("info", &[][..]), ("args", options)] {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let file = path(suffix);
            let mut opened = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&file)
                .map_err(io)?;
            fifos.0.push(file.clone());
            opened.write_all(text).map_err(io)?;
            identity.own(&file)?;
        }
        let writer = |p: PathBuf| {
            pipe::OpenOptions::new()
                .read_write(true)
                .open_sender(p)
                .map_err(io)
        };
        let reader = |p: PathBuf| {
            pipe::OpenOptions::new()
                .read_write(true)
                .open_receiver(p)
                .map_err(io)
        };
        Ok(Self {
            request_tx: writer(path("req"))?,
            stdin_tx: writer(path("in"))?,
            stdout_rx: reader(path("out"))?,
            stderr_rx: reader(path("err"))?,
            fifos,
        })
    }
}

/// What the stub reads: the working directory, `NAME=value` pairs, `--`, the command.
pub(super) fn request_text(
    workdir: String,
    env: Vec<(String, String)>,
    command: Vec<String>,
) -> String {
    let mut args = Vec::with_capacity(env.len() + command.len() + 2);
    args.push(workdir);
    args.extend(
        env.into_iter()
            .map(|(name, value)| format!("{name}={value}")),
    );
    args.push("--".to_owned());
    args.extend(command);
    encode_command(&args)
}

/// An argument list as the stub reads it: one line per line of each argument, `-` before an
/// argument's first line and `+` before each further one.
pub(super) fn encode_command(command: &[String]) -> String {
    let mut out = String::new();
    for arg in command {
        for (i, line) in arg.split('\n').enumerate() {
            out.push(if i == 0 { '-' } else { '+' });
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// FIFOs of one exec, unlinked when dropped.
pub(super) struct Fifos(Vec<PathBuf>);

impl Fifos {
    pub(super) fn make(paths: &[PathBuf]) -> Result<Self> {
        let mut made = Self(Vec::new());
        for path in paths {
            nix::unistd::mkfifo(
                path,
                nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
            )
            .map_err(|e| SandboxError::io("creating an exec pipe", e.into()))?;
            made.0.push(path.clone());
        }
        Ok(made)
    }
}

impl Drop for Fifos {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}
