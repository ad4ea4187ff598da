//! A `CONNECT` tunnel after the 200: hold the client's bytes until its TLS `ClientHello` names
//! the `CONNECT` host, then connect to a checked address and relay both ways. Nothing reaches
//! the upstream before the server name has been checked.

use std::net::IpAddr;
use std::sync::Arc;

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::io::Rewind;
use crate::proxy::{Ask, EgressProxy};
use crate::refusal::{EgressRefusal, EgressVerdict};
use crate::relay::{Socket, relay};
use crate::sni::{Hello, MAX_CLIENT_HELLO, server_name};

/// A fatal TLS alert, `unrecognized_name`, sent to a client whose server name was refused so
/// its TLS library reports a handshake failure rather than a bare reset.
const UNRECOGNIZED_NAME_ALERT: [u8; 7] = [21, 3, 3, 0, 2, 2, 112];
/// The copying relay's buffer per direction; large enough that a bulk download is not syscall-bound.
const RELAY_BUFFER: usize = 64 * 1024;
/// The most bytes held while waiting for a whole `ClientHello` (its records' headers included).
const MAX_HELD: usize = 2 * MAX_CLIENT_HELLO;

/// What reading the start of the tunnel came to.
enum Start {
    Hello { held: Vec<u8> },
    Refused(EgressRefusal),
    Gone,
}

async fn read_client_hello<IO: AsyncRead + Unpin>(client: &mut IO, host: &str) -> Start {
    let mut held = Vec::with_capacity(2048);
    let mut chunk = [0_u8; 4096];
    loop {
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Start::Gone,
            Ok(read) => held.extend_from_slice(&chunk[..read]),
        }
        match server_name(&held) {
            Ok(Hello::NeedMore) if held.len() > MAX_HELD => {
                return Start::Refused(EgressRefusal::NotTls {
                    detail: "the ClientHello is too large",
                });
            }
            Ok(Hello::NeedMore) => {}
            Ok(Hello::ServerName(name)) if name == host => return Start::Hello { held },
            Ok(Hello::ServerName(sni)) => {
                return Start::Refused(EgressRefusal::SniMismatch { sni });
            }
            Err(refusal) => return Start::Refused(refusal),
        }
    }
}

/// The client side of a tunnel: a socket (relayed with `splice`) with the bytes already read
/// from it, or any other stream (relayed by copying).
pub(crate) enum Client {
    Tcp {
        pending: Vec<u8>,
        stream: TcpStream,
    },
    Unix {
        pending: Vec<u8>,
        stream: UnixStream,
    },
    Stream(TokioIo<Upgraded>),
}

impl Client {
    /// Takes back the socket under an upgraded connection when it is TCP or Unix.
    pub(crate) fn of(upgraded: Upgraded) -> Self {
        let upgraded = match upgraded.downcast::<TokioIo<Rewind<TcpStream>>>() {
            Ok(parts) => {
                let (pending, stream) = take_back(parts.io.into_inner(), &parts.read_buf);
                return Self::Tcp { pending, stream };
            }
            Err(upgraded) => upgraded,
        };
        match upgraded.downcast::<TokioIo<Rewind<UnixStream>>>() {
            Ok(parts) => {
                let (pending, stream) = take_back(parts.io.into_inner(), &parts.read_buf);
                Self::Unix { pending, stream }
            }
            Err(upgraded) => Self::Stream(TokioIo::new(upgraded)),
        }
    }
}

/// The bytes read but not yet used, and the stream. Hyper's read-ahead came from the replayed
/// prefix first, so it goes first.
fn take_back<IO>(rewind: Rewind<IO>, read_ahead: &[u8]) -> (Vec<u8>, IO) {
    let (rest, stream) = rewind.into_parts();
    let mut pending = read_ahead.to_vec();
    pending.extend_from_slice(&rest);
    (pending, stream)
}

/// Runs the tunnel to its end. `addresses` were all checked; only they are connected to.
pub(crate) async fn tunnel(
    proxy: Arc<EgressProxy>,
    ask: Ask,
    rule: String,
    addresses: Vec<IpAddr>,
    client: Client,
) {
    let ended = match client {
        Client::Tcp {
            pending,
            mut stream,
        } => {
            let Some(upstream) =
                open_held(&proxy, &ask, rule, &addresses, pending, &mut stream).await
            else {
                return;
            };
            relay(Socket::Tcp(&stream), &upstream).await
        }
        Client::Unix {
            pending,
            mut stream,
        } => {
            let Some(upstream) =
                open_held(&proxy, &ask, rule, &addresses, pending, &mut stream).await
            else {
                return;
            };
            relay(Socket::Unix(&stream), &upstream).await
        }
        Client::Stream(mut io) => {
            let Some(mut upstream) = open(&proxy, &ask, rule, &addresses, &mut io).await else {
                return;
            };
            tokio::io::copy_bidirectional_with_sizes(
                &mut io,
                &mut upstream,
                RELAY_BUFFER,
                RELAY_BUFFER,
            )
            .await
        }
    };
    match ended {
        Ok((sent, received)) => tracing::debug!(sent, received, "tunnel closed"),
        Err(error) => tracing::debug!(%error, "tunnel ended with an error"),
    }
}

/// Reads the tunnel's `ClientHello` (within the handshake timeout) and holds it to `host`: the
/// bytes read when it names `host`; else the refusal is recorded, the client gets an alert (a
/// foreign server name) and is shut, and `None`.
pub(crate) async fn checked_hello<IO>(
    proxy: &EgressProxy,
    ask: &Ask,
    client: &mut IO,
    host: &str,
) -> Option<Vec<u8>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let start = tokio::time::timeout(
        proxy.config().handshake_timeout,
        read_client_hello(client, host),
    )
    .await
    .unwrap_or(Start::Refused(EgressRefusal::NotTls {
        detail: "no ClientHello arrived in time",
    }));
    match start {
        Start::Hello { held } => Some(held),
        Start::Refused(refusal) => {
            if matches!(refusal, EgressRefusal::SniMismatch { .. }) {
                let _ = client.write_all(&UNRECOGNIZED_NAME_ALERT).await;
            }
            let _ = client.shutdown().await;
            proxy.record(ask, EgressVerdict::refused(&refusal));
            None
        }
        Start::Gone => None,
    }
}

/// [`open`] for a socket with bytes already read from it: the bytes the `ClientHello` check did
/// not use go upstream too, before the relay takes over the socket.
async fn open_held<IO>(
    proxy: &EgressProxy,
    ask: &Ask,
    rule: String,
    addresses: &[IpAddr],
    pending: Vec<u8>,
    stream: &mut IO,
) -> Option<TcpStream>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut reader = Rewind::new(pending, stream);
    let mut upstream = open(proxy, ask, rule, addresses, &mut reader).await?;
    let (rest, _) = reader.into_parts();
    if !rest.is_empty() {
        upstream.write_all(&rest).await.ok()?;
    }
    Some(upstream)
}

/// Reads and checks the `ClientHello`, connects to a checked address and sends it the bytes
/// held; records the decision. `None` when the tunnel ends here.
async fn open<IO>(
    proxy: &EgressProxy,
    ask: &Ask,
    rule: String,
    addresses: &[IpAddr],
    client: &mut IO,
) -> Option<TcpStream>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let target = ask.target.clone()?;
    let held = checked_hello(proxy, ask, client, &target.host).await?;
    let (mut upstream, address) = match proxy.connect(&target, addresses).await {
        Ok(connected) => connected,
        Err(stop) => {
            proxy.record(ask, stop.verdict());
            let _ = client.shutdown().await;
            return None;
        }
    };
    proxy.record(ask, EgressVerdict::Allowed { rule, address });
    upstream.write_all(&held).await.ok()?;
    Some(upstream)
}
