//! Proxied networking, the workspace side: a workspace with [`NetworkMode::Proxy`] has no
//! network but its own loopback, and reaches the world only through its egress proxy, whose
//! Unix socket is bound into it. Tools speak TCP to a proxy, so a small bridge program of ours
//! ([`run_bridge`], installed as `auto-swe-netbridge`) listens on [`PROXY_ADDRESS`] inside and
//! hands each connection it accepts over to the proxy through the socket (the proxy's
//! [`auto_swe_egress::hand_over`]), so the proxy serves the tool's TCP connection itself; the
//! environment ([`proxy_env`]) points git, curl, pip, npm and cargo at it.
//!
//! The bridge is the only way out: the workspace's network namespace holds nothing but a
//! loopback (local) or the container has no network at all (Docker), so a tool that ignores
//! the proxy variables reaches nothing. What the proxy lets through is the proxy's policy; the
//! bridge passes connections on and decides nothing.
//!

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SandboxError};
use crate::spec::{EnvName, NetworkMode, SecretValue};

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

/// How a proxied workspace reaches its egress proxy: through its Unix socket bound in (the
/// `local` and `docker` backends), or over TCP with a credential (the `kubernetes` backend,
/// whose pods cannot share a socket with the host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum EgressAttachment {
    /// The proxy's Unix socket and the bridge program, bound into the workspace.
    Socket(EgressSocket),
    /// A proxy listening on TCP that asks every request for a credential.
    Tcp(EgressTcpProxy),
}

impl From<EgressSocket> for EgressAttachment {
    fn from(socket: EgressSocket) -> Self {
        Self::Socket(socket)
    }
}

impl From<EgressTcpProxy> for EgressAttachment {
    fn from(proxy: EgressTcpProxy) -> Self {
        Self::Tcp(proxy)
    }
}

/// A proxy reached through its Unix socket: both paths are on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressSocket {
    /// The proxy's Unix socket (bound into the workspace at [`SOCKET_INSIDE`]).
    pub socket: PathBuf,
    /// The bridge program (bound read-only at [`BRIDGE_INSIDE`]); see [`locate_bridge`].
    pub bridge: PathBuf,
    /// The roots the workspace trusts, when the proxy terminates TLS for a host (its own
    /// authority with the system's; bound read-only at [`CA_BUNDLE_INSIDE`] and named by
    /// [`ca_env`]'s variables).
    pub ca_bundle: Option<PathBuf>,
}

/// A proxy the workspace reaches over TCP (a pod on the cluster network): the proxy asks every
/// request for `credential` (`Proxy-Authorization: Basic`, user `auto-swe`), so one listener
/// may be reachable by many workspaces while only this one can use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressTcpProxy {
    /// The proxy's address, as the workspace reaches it (no name: the workspace resolves none).
    pub host: IpAddr,
    /// The proxy's port.
    pub port: u16,
    /// The credential the proxy asks for; never shown or serialised.
    pub credential: SecretValue,
    /// The roots the workspace trusts, PEM, when the proxy terminates TLS for a host (its own
    /// authority with the system's); placed at [`CA_BUNDLE_INSIDE`] and named by [`ca_env`]'s
    /// variables.
    pub ca_bundle_pem: Option<String>,
}

/// The user name the proxy's credential goes with (the egress proxy's `PROXY_USER`).
const PROXY_USER: &str = "auto-swe";

impl EgressTcpProxy {
    /// The proxy URL the workspace's tools use, credential included: it goes only where secret
    /// values go (a Kubernetes Secret), never into a plain manifest field or a log.
    pub(crate) fn proxy_url(&self) -> String {
        let address = SocketAddr::new(self.host, self.port);
        format!("http://{PROXY_USER}:{}@{address}", self.credential.expose())
    }

    /// Checks what the workspace will be handed: a real address and port, a credential that
    /// needs no escaping in a URL, a bundle that is PEM.
    fn check(&self) -> Result<()> {
        if self.host.is_unspecified() || self.port == 0 {
            return Err(SandboxError::InvalidRequest(format!(
                "the egress proxy address {} is not one a workspace can reach",
                SocketAddr::new(self.host, self.port)
            )));
        }
        let credential = self.credential.expose();
        if credential.is_empty()
            || !credential
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
        {
            return Err(SandboxError::InvalidRequest(
                "the egress proxy credential is empty or not URL-safe (letters, digits, -_.~)"
                    .to_owned(),
            ));
        }
        if let Some(pem) = &self.ca_bundle_pem
            && !pem.contains("-----BEGIN CERTIFICATE-----")
        {
            return Err(SandboxError::InvalidRequest(
                "the egress trust bundle holds no PEM certificate".to_owned(),
            ));
        }
        Ok(())
    }
}

impl EgressSocket {
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

/// `egress` against `network` alone: present exactly when the network is
/// [`NetworkMode::Proxy`].
fn present(
    network: NetworkMode,
    egress: Option<&EgressAttachment>,
) -> Result<Option<&EgressAttachment>> {
    match (network, egress) {
        (NetworkMode::Proxy, Some(egress)) => Ok(Some(egress)),
        (NetworkMode::Proxy, None) => Err(SandboxError::InvalidRequest(
            "proxy networking needs the egress proxy's attachment (an EgressAttachment)".to_owned(),
        )),
        (_, Some(_)) => Err(SandboxError::InvalidRequest(
            "an egress proxy is attached only with proxy networking".to_owned(),
        )),
        (_, None) => Ok(None),
    }
}

/// `egress` checked against `network`: present exactly when the network is
/// [`NetworkMode::Proxy`]; a socket attachment with a socket and an executable bridge, a TCP one
/// with a reachable address and a URL-safe credential.
pub fn check_egress(
    network: NetworkMode,
    egress: Option<&EgressAttachment>,
) -> Result<Option<&EgressAttachment>> {
    let egress = present(network, egress)?;
    match egress {
        Some(EgressAttachment::Socket(socket)) => socket.check()?,
        Some(EgressAttachment::Tcp(proxy)) => proxy.check()?,
        None => {}
    }
    Ok(egress)
}

/// [`check_egress`] for the backends that bind the proxy's socket in (`local`, `docker`): a TCP
/// attachment is refused.
pub fn check_socket_egress(
    network: NetworkMode,
    egress: Option<&EgressAttachment>,
) -> Result<Option<&EgressSocket>> {
    match present(network, egress)? {
        None => Ok(None),
        Some(EgressAttachment::Socket(socket)) => socket.check().map(|()| Some(socket)),
        Some(EgressAttachment::Tcp(_)) => Err(SandboxError::InvalidRequest(
            "this backend binds the egress proxy's Unix socket in; a proxy reached over TCP is \
             for the kubernetes backend"
                .to_owned(),
        )),
    }
}

/// [`check_egress`] for the backends whose workspaces reach the proxy over the network
/// (`kubernetes`): a socket attachment is refused.
pub fn check_tcp_egress(
    network: NetworkMode,
    egress: Option<&EgressAttachment>,
) -> Result<Option<&EgressTcpProxy>> {
    match present(network, egress)? {
        None => Ok(None),
        Some(EgressAttachment::Tcp(proxy)) => proxy.check().map(|()| Some(proxy)),
        Some(EgressAttachment::Socket(_)) => Err(SandboxError::InvalidRequest(
            "a Unix socket cannot be shared with a pod; the kubernetes backend reaches the \
             egress proxy over TCP"
                .to_owned(),
        )),
    }
}

/// `env` with, for proxy networking, the variables that point tools at the proxy
/// ([`proxy_env`]) and, when `egress` carries a trust bundle, at it ([`ca_env`]); the caller's
/// own values win.
#[must_use]
pub fn with_proxy_env(
    env: &BTreeMap<EnvName, String>,
    network: NetworkMode,
    egress: Option<&EgressSocket>,
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
        [flag, pid, net] if flag == crate::local::netns::TUNE_FLAG => {
            crate::local::netns::tune_namespace_main(pid, net)
        }
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

/// Accepts connections on `listener` for good and hands each over to the proxy on the Unix
/// socket `socket` (the proxy's handoff, [`auto_swe_egress::hand_over`]): the proxy then serves
/// the TCP connection itself, and no byte of it passes through this process. A connection the
/// socket refuses is closed at once.
pub fn run_bridge(listener: &TcpListener, socket: &Path) {
    for stream in listener.incoming() {
        let Ok(client) = stream else {
            // Out of descriptors, or a connection reset before it was taken: back off briefly
            // rather than spin.
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        if let Ok(proxy) = UnixStream::connect(socket) {
            let _ = auto_swe_egress::hand_over(&proxy, &client);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_attachment_needs_a_socket_and_an_executable_bridge() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let socket = dir.path().join("egress.sock");
        let _listener =
            std::os::unix::net::UnixListener::bind(&socket).unwrap_or_else(|e| panic!("{e}"));
        let file = |name: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("{e}"));
            path
        };
        let attachment = |bridge: PathBuf| EgressSocket {
            socket: socket.clone(),
            bridge,
            ca_bundle: None,
        };
        assert!(attachment(file("bridge", 0o755)).check().is_ok());
        assert!(attachment(file("owner-only", 0o700)).check().is_ok());
        let refused = [
            file("not-executable", 0o644),
            dir.path().to_owned(),
            socket.clone(),
        ];
        for bridge in refused {
            let error = attachment(bridge.clone()).check().unwrap_err();
            assert!(
                error.to_string().contains("is not an executable file"),
                "{}: {error}",
                bridge.display()
            );
        }
    }

    #[test]
    fn the_bridge_hands_each_connection_to_the_proxy_which_answers_it() {
        use std::io::Read as _;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let socket = dir.path().join("egress.sock");
        let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
        let sink = Arc::new(auto_swe_egress::MemorySink::new());
        let proxy = Arc::new(auto_swe_egress::EgressProxy::new(
            auto_swe_egress::EgressPolicy::deny_all(),
            Arc::new(auto_swe_egress::StaticResolver::new()),
            sink.clone(),
            auto_swe_egress::ProxyConfig::default(),
        ));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let unix = runtime.block_on(async {
            tokio::net::UnixListener::bind(&socket).unwrap_or_else(|e| panic!("{e}"))
        });
        runtime.spawn(proxy.serve_unix(unix, shutdown.clone()));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || run_bridge(&listener, &socket));
        for _ in 0..3 {
            let mut client =
                std::net::TcpStream::connect(address).unwrap_or_else(|e| panic!("{e}"));
            // A bridge that loses the connection fails the test rather than hanging it.
            client
                .set_read_timeout(Some(std::time::Duration::from_secs(30)))
                .unwrap_or_else(|e| panic!("{e}"));
            client
                .write_all(b"GET http://elsewhere.test/ HTTP/1.1\r\nhost: elsewhere.test\r\n\r\n")
                .unwrap_or_else(|e| panic!("{e}"));
            let mut answer = String::new();
            client
                .read_to_string(&mut answer)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
            assert!(answer.contains("DEFAULT_DENY"), "{answer}");
        }
        assert_eq!(sink.decisions().len(), 3);
        shutdown.cancel();
    }

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

#[cfg(test)]
mod tcp_tests {
    use super::*;

    fn proxy(credential: &str) -> EgressTcpProxy {
        EgressTcpProxy {
            host: IpAddr::from([10, 0, 0, 9]),
            port: 3128,
            credential: SecretValue::new(credential),
            ca_bundle_pem: None,
        }
    }

    #[test]
    fn a_tcp_attachment_is_checked_and_never_shows_its_credential() {
        let good = EgressAttachment::from(proxy("abc-DEF_0.9~"));
        assert!(format!("{good:?}").contains("[redacted]"));
        assert!(!format!("{good:?}").contains("abc-DEF"));
        let json = serde_json::to_string(&good).unwrap_or_default();
        assert!(
            json.contains("\"transport\":\"tcp\"") && !json.contains("abc-DEF"),
            "{json}"
        );
        assert!(matches!(
            check_tcp_egress(NetworkMode::Proxy, Some(&good)),
            Ok(Some(_))
        ));
        let EgressAttachment::Tcp(tcp) = &good else {
            unreachable!()
        };
        assert_eq!(
            tcp.proxy_url(),
            "http://auto-swe:abc-DEF_0.9~@10.0.0.9:3128"
        );
        // Where it does not belong: no proxy networking, or a backend that binds a socket in.
        assert!(check_tcp_egress(NetworkMode::None, Some(&good)).is_err());
        assert!(check_tcp_egress(NetworkMode::Proxy, None).is_err());
        let refused = check_socket_egress(NetworkMode::Proxy, Some(&good)).unwrap_err();
        assert!(refused.to_string().contains("over TCP"), "{refused}");
        // What the workspace could not use, or a URL could not carry as is.
        let mut unspecified = proxy("abc");
        unspecified.host = IpAddr::from([0, 0, 0, 0]);
        let mut no_port = proxy("abc");
        no_port.port = 0;
        let mut not_pem = proxy("abc");
        not_pem.ca_bundle_pem = Some("roots".to_owned());
        for bad in [
            unspecified,
            no_port,
            not_pem,
            proxy(""),
            proxy("a@b"),
            proxy("a:b"),
        ] {
            let bad = EgressAttachment::from(bad);
            assert!(
                check_egress(NetworkMode::Proxy, Some(&bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_socket_attachment_is_refused_by_a_tcp_backend_before_its_paths_are_read() {
        let socket = EgressAttachment::from(EgressSocket {
            socket: "/nonexistent/egress.sock".into(),
            bridge: "/nonexistent/netbridge".into(),
            ca_bundle: None,
        });
        let refused = check_tcp_egress(NetworkMode::Proxy, Some(&socket)).unwrap_err();
        assert!(
            refused.to_string().contains("cannot be shared with a pod"),
            "{refused}"
        );
    }
}
