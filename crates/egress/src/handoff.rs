//! Connections handed over on the proxy's Unix socket.
//!
//! A workspace with no network reaches its proxy through a Unix socket bound into it, and its
//! tools speak TCP to `127.0.0.1:3128` inside. The workspace's bridge accepts each such
//! connection and, instead of copying its bytes to the socket, *hands the connection itself*
//! over: it sends [`HANDOFF`] with the accepted socket attached (`SCM_RIGHTS`) and closes its
//! own copy. The proxy then serves the client's TCP connection directly, as it serves one
//! accepted on a TCP listener: no bridge process copies each byte twice on the way, and a
//! tunnel is relayed with `splice` between two TCP sockets.
//!
//! The descriptor comes from inside a workspace, so it is hostile input: the proxy takes only a
//! connected TCP socket whose peer is a loopback address (what the bridge accepts from the
//! workspace's own tools), and refuses anything else — a file, a pipe, a listening socket, a
//! Unix socket, a socket connected elsewhere — with a [`HandoffError`]. Whatever it takes, it
//! only answers on: it never connects a handed-over socket anywhere, so a descriptor cannot make
//! the proxy reach more than the workspace could by asking it.
//!
//! A connection whose first byte is anything else is an ordinary client speaking HTTP over the
//! Unix socket (a request line never starts with a zero byte) and is served as such.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketType,
};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// The byte a bridge sends with the connection it hands over.
pub const HANDOFF: u8 = 0;

/// `net.ipv4.tcp_rmem` (minimum, default, maximum, in bytes) for a workspace's own network
/// namespace, whose tools reach the proxy over loopback: an 8 MiB receive buffer from the start.
///
/// A client's kernel grows its receive window with the data it gets per round trip, and the
/// proxy is a peer tens of microseconds away, so an autotuned window stays a few hundred KB and
/// a fast download through the proxy spends its time on window updates (see the crate's
/// throughput benchmark). The buffer is memory only while data waits to be read, charged to the
/// workspace's own memory limit; the host's settings are untouched.
pub const WORKSPACE_TCP_RMEM: &str = "4096 8388608 8388608";

/// Why a handed-over descriptor was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandoffError {
    /// The handoff byte came without exactly one descriptor.
    #[error("a handoff must carry exactly one descriptor")]
    NoDescriptor,
    /// The descriptor is not a connected TCP socket.
    #[error("the handed-over descriptor is not a connected TCP socket ({0})")]
    NotTcp(&'static str),
    /// The socket's peer is not a loopback address.
    #[error("the handed-over connection's peer {0} is not on loopback")]
    NotLoopback(SocketAddr),
    /// Reading the handoff or the socket failed.
    #[error("taking a handed-over connection: {0}")]
    Io(#[from] std::io::Error),
}

/// Hands the accepted TCP `connection` over to the proxy on `socket` (a fresh connection to
/// the proxy's Unix socket). The caller closes its own copies afterwards.
pub fn hand_over(socket: &StdUnixStream, connection: impl AsFd) -> std::io::Result<()> {
    let fds = [connection.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for the descriptor"));
    }
    let sent = rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&[HANDOFF])],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    if sent == 1 {
        Ok(())
    } else {
        Err(std::io::Error::from(std::io::ErrorKind::WriteZero))
    }
}

/// What arrived first on a connection to the proxy's Unix socket.
pub(crate) enum Arrival {
    /// Nothing: the peer closed at once.
    Closed,
    /// Bytes of a client speaking HTTP over the Unix socket itself.
    Stream,
    /// A connection handed over, checked, ready to serve.
    Handed(TcpStream),
}

/// Looks at the first byte on `stream` without taking it; on [`HANDOFF`], takes the byte and
/// the descriptor that came with it, and checks the descriptor.
pub(crate) async fn arrival(stream: &UnixStream) -> Result<Arrival, HandoffError> {
    let mut first = [0_u8; 1];
    let peeked = stream
        .async_io(Interest::READABLE, || {
            rustix::net::recv(stream, &mut first, RecvFlags::PEEK | RecvFlags::DONTWAIT)
                .map(|(read, _)| read)
                .map_err(std::io::Error::from)
        })
        .await?;
    if peeked == 0 {
        return Ok(Arrival::Closed);
    }
    if first[0] != HANDOFF {
        return Ok(Arrival::Stream);
    }
    let fds = stream
        .async_io(Interest::READABLE, || receive(stream))
        .await?;
    let [fd] = <[OwnedFd; 1]>::try_from(fds).map_err(|_| HandoffError::NoDescriptor)?;
    checked(fd).map(Arrival::Handed)
}

/// Takes the handoff byte and every descriptor that came with it (each closed when dropped).
/// A message whose descriptors did not all fit is refused whole: the kernel closed the rest.
fn receive(stream: &UnixStream) -> std::io::Result<Vec<OwnedFd>> {
    let mut byte = [0_u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let message = rustix::net::recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    )?;
    let mut fds = Vec::new();
    for part in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = part {
            fds.extend(rights);
        }
    }
    if message.flags.contains(ReturnFlags::CTRUNC) || message.bytes != 1 {
        // Dropping the descriptors closes them; an empty list is refused by the caller.
        return Ok(Vec::new());
    }
    Ok(fds)
}

/// The descriptor as a TCP stream, when it is a connected TCP socket with a loopback peer.
fn checked(fd: OwnedFd) -> Result<TcpStream, HandoffError> {
    use rustix::net::sockopt;
    let stat = rustix::fs::fstat(&fd).map_err(std::io::Error::from)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(HandoffError::NotTcp("not a socket"));
    }
    let domain = sockopt::socket_domain(&fd).map_err(std::io::Error::from)?;
    if domain != AddressFamily::INET && domain != AddressFamily::INET6 {
        return Err(HandoffError::NotTcp("not an internet socket"));
    }
    if sockopt::socket_type(&fd).map_err(std::io::Error::from)? != SocketType::STREAM
        || sockopt::socket_protocol(&fd).map_err(std::io::Error::from)?
            != Some(rustix::net::ipproto::TCP)
    {
        return Err(HandoffError::NotTcp("not TCP"));
    }
    if sockopt::socket_acceptconn(&fd).map_err(std::io::Error::from)? {
        return Err(HandoffError::NotTcp("a listening socket"));
    }
    let peer = rustix::net::getpeername(&fd)
        .ok()
        .flatten()
        .and_then(|address| SocketAddr::try_from(address).ok())
        .ok_or(HandoffError::NotTcp("not connected"))?;
    on_loopback(peer)?;
    let stream = std::net::TcpStream::from(fd);
    stream.set_nonblocking(true)?;
    let stream = TcpStream::from_std(stream)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Refuses a peer that is not a loopback address (an IPv4 one written as IPv6 included).
fn on_loopback(peer: SocketAddr) -> Result<(), HandoffError> {
    if peer.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(HandoffError::NotLoopback(peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_descriptor_is_closed_on_exec() {
        let (ours, theirs) = StdUnixStream::pair().unwrap_or_else(|e| panic!("{e}"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let client =
            std::net::TcpStream::connect(listener.local_addr().unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|e| panic!("{e}"));
        hand_over(&theirs, &client).unwrap_or_else(|e| panic!("{e}"));
        ours.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        let ours = UnixStream::from_std(ours).unwrap_or_else(|e| panic!("{e}"));
        let Ok(Arrival::Handed(taken)) = arrival(&ours).await else {
            panic!("the connection was not taken");
        };
        let flags = rustix::io::fcntl_getfd(&taken).unwrap_or_else(|e| panic!("{e}"));
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    }

    #[test]
    fn only_a_loopback_peer_is_taken() {
        for taken in [
            "127.0.0.1:40000",
            "127.9.9.9:1",
            "[::1]:40000",
            "[::ffff:127.0.0.1]:2",
        ] {
            let peer: SocketAddr = taken.parse().unwrap_or_else(|e| panic!("{e}"));
            assert!(on_loopback(peer).is_ok(), "{taken}");
        }
        for refused in [
            "10.0.0.1:40000",
            "169.254.169.254:80",
            "0.0.0.0:1",
            "[::]:1",
            "[::ffff:10.0.0.1]:1",
            "[fe80::1]:1",
            "[2001:db8::1]:1",
        ] {
            let peer: SocketAddr = refused.parse().unwrap_or_else(|e| panic!("{e}"));
            assert!(
                matches!(on_loopback(peer), Err(HandoffError::NotLoopback(p)) if p == peer),
                "{refused}"
            );
        }
    }
}
