//! Proxied networking, the workspace side: a workspace with [`NetworkMode::Proxy`] has no
//! network but its own loopback, and reaches the world only through its egress proxy, whose
//! Unix socket is bound into it. Tools speak TCP to a proxy, so a small bridge program of ours
//! ([`run_bridge`], installed as `auto-swe-netbridge`) listens on [`PROXY_ADDRESS`] inside and
//! carries each connection to the socket; the environment ([`proxy_env`]) points git, curl,
//! pip, npm and cargo at it.
//!
//! The bridge is the only way out: the workspace's network namespace holds nothing but a
//! loopback (local) or the container has no network at all (Docker), so a tool that ignores
//! the proxy variables reaches nothing. What the proxy lets through is the proxy's policy; the
//! bridge forwards bytes and decides nothing.
//!

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SandboxError};
use crate::spec::{EnvName, NetworkMode};

/// Where the proxy answers inside a proxied workspace.
pub const PROXY_ADDRESS: &str = "127.0.0.1:3128";

/// Where the proxy's Unix socket is bound inside a proxied workspace.
pub const SOCKET_INSIDE: &str = "/run/auto-swe/egress.sock";

/// Where the bridge program is bound (read-only) inside a proxied workspace.
pub const BRIDGE_INSIDE: &str = "/run/auto-swe/netbridge";

/// Where the trusted roots are bound (read-only) inside a proxied workspace that has them.
pub const CA_BUNDLE_INSIDE: &str = "/run/auto-swe/ca.pem";

/// The bridge program's file name, as installed beside the `auto-swe` binary.
pub const BRIDGE_PROGRAM: &str = "auto-swe-netbridge";

/// The environment variable naming the bridge program, when it is not beside the running
/// binary.
pub const BRIDGE_ENV: &str = "AUTO_SWE_NETBRIDGE";

/// The shell line a proxied sandbox runs first: start the bridge ([`bridge_command`]; it
/// returns once it listens) or give up with status 125. Guarded by the socket being there,
/// which only the workspace's own bind mount can make so in a read-only root. A literal, as the
/// local launcher's shell holds it too; a test holds it to the paths above.
pub(crate) const START_BRIDGE: &str = "if [ -S /run/auto-swe/egress.sock ]; then /run/auto-swe/netbridge 127.0.0.1:3128 /run/auto-swe/egress.sock || exit 125; fi\n";

/// The shell command that starts the bridge inside a proxied workspace.
pub(crate) fn bridge_command() -> String {
    format!("{BRIDGE_INSIDE} {PROXY_ADDRESS} {SOCKET_INSIDE}")
}

/// How a proxied workspace reaches its egress proxy: both paths are on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressAttachment {
    /// The proxy's Unix socket (bound into the workspace at [`SOCKET_INSIDE`]).
    pub socket: PathBuf,
    /// The bridge program (bound read-only at [`BRIDGE_INSIDE`]); see [`locate_bridge`].
    pub bridge: PathBuf,
    /// The roots the workspace trusts, when the proxy terminates TLS for a host (its own
    /// authority with the system's; bound read-only at [`CA_BUNDLE_INSIDE`] and named by
    /// [`ca_env`]'s variables).
    pub ca_bundle: Option<PathBuf>,
}

impl EgressAttachment {
    /// Checks both paths: the socket is a socket, the bridge a regular executable file.
    pub(crate) fn check(&self) -> Result<()> {
        let socket = std::fs::metadata(&self.socket).map_err(|e| {
            SandboxError::io(
                format!("reading the egress socket {}", self.socket.display()),
                e,
            )
        })?;
        if !socket.file_type().is_socket() {
            return Err(SandboxError::InvalidRequest(format!(
                "the egress socket {} is not a Unix socket",
                self.socket.display()
            )));
        }
        let bridge = std::fs::metadata(&self.bridge).map_err(|e| {
            SandboxError::io(
                format!("reading the bridge program {}", self.bridge.display()),
                e,
            )
        })?;
        if !bridge.is_file() || bridge.permissions().mode() & 0o111 == 0 {
            return Err(SandboxError::InvalidRequest(format!(
                "the bridge program {} is not an executable file",
                self.bridge.display()
            )));
        }
        if let Some(bundle) = &self.ca_bundle
            && !bundle.is_file()
        {
            return Err(SandboxError::InvalidRequest(format!(
                "the egress trust bundle {} is not a file",
                bundle.display()
            )));
        }
        Ok(())
    }
}

/// The variables that make the usual tools trust [`CA_BUNDLE_INSIDE`] (git, curl, OpenSSL,
/// Python's requests and pip, Node, cargo).
#[must_use]
pub fn ca_env() -> Vec<(EnvName, String)> {
    [
        "GIT_SSL_CAINFO",
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "PIP_CERT",
        "NODE_EXTRA_CA_CERTS",
        "CARGO_HTTP_CAINFO",
    ]
    .iter()
    .filter_map(|name| EnvName::new(*name).ok())
    .map(|name| (name, CA_BUNDLE_INSIDE.to_owned()))
    .collect()
}

/// `egress` checked against `network`: present exactly when the network is
/// [`NetworkMode::Proxy`], with a socket and an executable bridge.
pub fn check_egress(
    network: NetworkMode,
    egress: Option<&EgressAttachment>,
) -> Result<Option<&EgressAttachment>> {
    match (network, egress) {
        (NetworkMode::Proxy, Some(egress)) => {
            egress.check()?;
            Ok(Some(egress))
        }
        (NetworkMode::Proxy, None) => Err(SandboxError::InvalidRequest(
            "proxy networking needs the egress proxy's socket (an EgressAttachment)".to_owned(),
        )),
        (_, Some(_)) => Err(SandboxError::InvalidRequest(
            "an egress proxy is attached only with proxy networking".to_owned(),
        )),
        (_, None) => Ok(None),
    }
}

/// `env` with, for proxy networking, the variables that point tools at the proxy
/// ([`proxy_env`]) and, when `egress` carries a trust bundle, at it ([`ca_env`]); the caller's
/// own values win.
#[must_use]
pub fn with_proxy_env(
    env: &BTreeMap<EnvName, String>,
    network: NetworkMode,
    egress: Option<&EgressAttachment>,
) -> BTreeMap<EnvName, String> {
    let mut env = env.clone();
    if network == NetworkMode::Proxy {
        let trusted = egress.is_some_and(|egress| egress.ca_bundle.is_some());
        let extra = proxy_env()
            .into_iter()
            .chain(if trusted { ca_env() } else { Vec::new() });
        for (name, value) in extra {
            env.entry(name).or_insert(value);
        }
    }
    env
}

/// The bridge program: [`BRIDGE_ENV`] when set, else `auto-swe-netbridge` beside the running
/// binary or one directory up (where Cargo puts binaries for a test executable in `deps/`).
pub fn locate_bridge() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(BRIDGE_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let exe =
        std::env::current_exe().map_err(|e| SandboxError::io("finding the running binary", e))?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(BRIDGE_PROGRAM))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| SandboxError::BackendUnavailable {
            backend: "proxy",
            reason: format!("no {BRIDGE_PROGRAM} beside {}", exe.display()),
            remedy: format!(
                "install it beside auto-swe (cargo install auto-swe-sandbox --bin {BRIDGE_PROGRAM}) or set {BRIDGE_ENV}"
            ),
        })
}

/// The environment that points the usual tools at the proxy inside a proxied workspace
/// (git, curl and pip read the `*_proxy` pair, npm its `npm_config_*` pair, cargo
/// `CARGO_HTTP_PROXY`). Loopback is never proxied.
#[must_use]
pub fn proxy_env() -> Vec<(EnvName, String)> {
    let url = format!("http://{PROXY_ADDRESS}");
    let names = [
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "CARGO_HTTP_PROXY",
    ];
    let mut env: Vec<(EnvName, String)> = names
        .iter()
        .filter_map(|name| EnvName::new(*name).ok().map(|n| (n, url.clone())))
        .collect();
    for name in ["no_proxy", "NO_PROXY"] {
        if let Ok(name) = EnvName::new(name) {
            env.push((name, "localhost,127.0.0.1,::1".to_owned()));
        }
    }
    env
}

/// Whether this process was started as the bridge: under the name it has inside a proxied
/// sandbox ([`BRIDGE_INSIDE`]). A host binary bound in as the bridge (the `auto-swe` CLI binds
/// itself) calls [`bridge_main`] then.
#[must_use]
pub fn is_bridge_invocation() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|argv0| Path::new(&argv0) == Path::new(BRIDGE_INSIDE))
}

/// The bridge program's entry: `auto-swe-netbridge LISTEN SOCKET`. Starts a copy of itself in
/// the background that binds `LISTEN` and carries every accepted connection to `SOCKET`, and
/// exits 0 once that copy listens (1 with its reason when it cannot), so the next command can
/// connect at once.
#[must_use]
pub fn bridge_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().skip(1).collect();
    match args.as_slice() {
        [flag, listen, socket] if flag == SERVE_FLAG => serve(listen, Path::new(socket)),
        [listen, socket] => start_in_background(listen, socket),
        _ => {
            eprintln!("usage: {BRIDGE_PROGRAM} LISTEN-ADDRESS SOCKET-PATH");
            ExitCode::from(2)
        }
    }
}

/// The argument that makes the bridge the background copy.
const SERVE_FLAG: &str = "--serve";

#[expect(
    clippy::disallowed_methods,
    reason = "the bridge starts its own background copy, inside the sandbox"
)]
fn start_in_background(listen: &OsString, socket: &OsString) -> ExitCode {
    let started = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .arg(SERVE_FLAG)
            .arg(listen)
            .arg(socket)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
    });
    let mut child = match started {
        Ok(child) => child,
        Err(e) => {
            eprintln!("{BRIDGE_PROGRAM}: starting the bridge: {e}");
            return ExitCode::from(1);
        }
    };
    let mut said = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut said);
    }
    if said.trim_end() == READY {
        ExitCode::SUCCESS
    } else {
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("{BRIDGE_PROGRAM}: {}", said.trim_end());
        ExitCode::from(1)
    }
}

/// What the background copy says once it listens.
const READY: &str = "listening";

fn serve(listen: &OsString, socket: &Path) -> ExitCode {
    let mut out = std::io::stdout();
    let Some(address) = listen.to_str().and_then(|l| l.parse::<SocketAddr>().ok()) else {
        let _ = writeln!(out, "{} is not an address", listen.to_string_lossy());
        return ExitCode::from(2);
    };
    let listener = match TcpListener::bind(address) {
        Ok(listener) => listener,
        Err(e) => {
            let _ = writeln!(out, "binding {address}: {e}");
            return ExitCode::from(1);
        }
    };
    let _ = nix::unistd::setsid();
    let _ = writeln!(out, "{READY}").and_then(|()| out.flush());
    run_bridge(&listener, socket);
    ExitCode::SUCCESS
}

/// Accepts connections on `listener` for good, each carried to the Unix socket `socket` on
/// threads of its own. A connection the socket refuses is closed at once.
pub fn run_bridge(listener: &TcpListener, socket: &Path) {
    for stream in listener.incoming() {
        let Ok(client) = stream else {
            // Out of descriptors or threads, or a connection reset before it was taken: back
            // off briefly rather than spin.
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        let socket = socket.to_path_buf();
        let _ = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || carry(&client, &socket));
    }
}

fn carry(client: &TcpStream, socket: &Path) {
    let _ = client.set_nodelay(true);
    let Ok(upstream) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(client_back), Ok(upstream_back)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            pump(&client_back, &upstream_back);
            let _ = upstream_back.shutdown(Shutdown::Write);
        });
    pump(&upstream, client);
    let _ = client.shutdown(Shutdown::Write);
    if let Ok(up) = up {
        let _ = up.join();
    }
}

/// Copies until end of input or an error on either side.
fn pump(mut from: impl std::io::Read, mut to: impl std::io::Write) {
    let mut buffer = vec![0_u8; 32 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_line_names_the_paths_it_is_bound_at() {
        assert_eq!(
            START_BRIDGE,
            format!(
                "if [ -S {SOCKET_INSIDE} ]; then {} || exit 125; fi\n",
                bridge_command()
            )
        );
    }
}
