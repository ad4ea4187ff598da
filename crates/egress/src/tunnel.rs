//! A `CONNECT` tunnel after the 200: hold the client's bytes until its TLS `ClientHello` names
//! the `CONNECT` host, then connect to a checked address and relay both ways. Nothing reaches
//! the upstream before the server name has been checked.

use std::net::IpAddr;
use std::sync::Arc;

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::io::Rewind;
use crate::proxy::{Ask, EgressProxy};
use crate::refusal::{EgressRefusal, Verdict};
use crate::relay::relay;
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

/// The client side of a tunnel: a TCP socket (relayed with `splice`) with the bytes already
/// read from it, or any other stream (relayed by copying).
pub(crate) enum Client {
    Tcp { pending: Vec<u8>, stream: TcpStream },
    Stream(TokioIo<Upgraded>),
}

impl Client {
    /// Takes back the socket under an upgraded connection when it is TCP.
    pub(crate) fn of(upgraded: Upgraded) -> Self {
        match upgraded.downcast::<TokioIo<Rewind<TcpStream>>>() {
            Ok(parts) => {
                // Hyper's read-ahead came from the replayed prefix first, so it goes first.
                let (rest, stream) = parts.io.into_inner().into_parts();
                let mut pending = parts.read_buf.to_vec();
                pending.extend_from_slice(&rest);
                Self::Tcp { pending, stream }
            }
            Err(upgraded) => Self::Stream(TokioIo::new(upgraded)),
        }
    }
}

/// Runs the tunnel to its end. `addresses` were all checked; only they are connected to.
pub(crate) async fn tunnel(
    proxy: Arc<EgressProxy>,
    ask: Ask,
    rule: String,
    addresses: Vec<IpAddr>,
    client: Client,
) {
    match client {
        Client::Tcp {
            pending,
            mut stream,
        } => {
            let mut reader = Rewind::new(pending, &mut stream);
            let Some(mut upstream) = open(&proxy, &ask, rule, &addresses, &mut reader).await else {
                return;
            };
            let (rest, _) = reader.into_parts();
            if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
                return;
            }
            match relay(&stream, &upstream).await {
                Ok((sent, received)) => tracing::debug!(sent, received, "tunnel closed"),
                Err(error) => tracing::debug!(%error, "tunnel ended with an error"),
            }
        }
        Client::Stream(mut io) => {
            let Some(mut upstream) = open(&proxy, &ask, rule, &addresses, &mut io).await else {
                return;
            };
            match tokio::io::copy_bidirectional_with_sizes(
                &mut io,
                &mut upstream,
                RELAY_BUFFER,
                RELAY_BUFFER,
            )
            .await
            {
                Ok((sent, received)) => tracing::debug!(sent, received, "tunnel closed"),
                Err(error) => tracing::debug!(%error, "tunnel ended with an error"),
            }
        }
    }
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
    let start = tokio::time::timeout(
        proxy.config().handshake_timeout,
        read_client_hello(client, &target.host),
    )
    .await
    .unwrap_or(Start::Refused(EgressRefusal::NotTls {
        detail: "no ClientHello arrived in time",
    }));
    let held = match start {
        Start::Hello { held } => held,
        Start::Refused(refusal) => {
            if matches!(refusal, EgressRefusal::SniMismatch { .. }) {
                let _ = client.write_all(&UNRECOGNIZED_NAME_ALERT).await;
            }
            let _ = client.shutdown().await;
            proxy.record(ask, Verdict::refused(&refusal));
            return None;
        }
        Start::Gone => return None,
    };
    let (mut upstream, address) = match proxy.connect(&target, addresses).await {
        Ok(connected) => connected,
        Err(stop) => {
            proxy.record(ask, stop.verdict());
            let _ = client.shutdown().await;
            return None;
        }
    };
    proxy.record(ask, Verdict::Allowed { rule, address });
    upstream.write_all(&held).await.ok()?;
    Some(upstream)
}
