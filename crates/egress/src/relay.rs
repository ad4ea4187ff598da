//! The tunnel's relay between two sockets with `splice(2)`: bytes move socket → pipe →
//! socket inside the kernel, never copied through the proxy's memory, which is what keeps a bulk
//! download through the proxy close to a direct one on a busy host.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{OFlag, SpliceFFlags, splice};
use nix::sys::socket::{Shutdown, shutdown};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// A socket the relay can splice: the proxy's TCP connections and a Unix socket bridged into a
/// workspace.
#[derive(Clone, Copy)]
pub(crate) enum Socket<'a> {
    Tcp(&'a TcpStream),
    Unix(&'a UnixStream),
}

impl Socket<'_> {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Tcp(stream) => stream.as_fd(),
            Self::Unix(stream) => stream.as_fd(),
        }
    }

    /// Runs `call` when the socket is ready for `interest`, again after each would-block.
    async fn ready<R>(
        &self,
        interest: Interest,
        call: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        match self {
            Self::Tcp(stream) => stream.async_io(interest, call).await,
            Self::Unix(stream) => stream.async_io(interest, call).await,
        }
    }
}

/// The pipe each direction asks for: a bulk download then moves in a sixteenth of the `splice`
/// calls and wake-ups the default 64 KiB pipe needs. `/proc/sys/fs/pipe-max-size` caps it (1 MiB
/// by default); a refusal keeps the default.
const PIPE_BYTES: usize = 1024 * 1024;

/// The default pipe's size, moved per call when a larger pipe was refused.
const DEFAULT_PIPE_BYTES: usize = 64 * 1024;

fn flags() -> SpliceFFlags {
    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK
}

/// Moves bytes from `from` to `to` until `from` reaches its end, then shuts `to`'s write side.
async fn one_way(from: Socket<'_>, to: Socket<'_>) -> io::Result<u64> {
    let (pipe_out, pipe_in): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
    let chunk = i32::try_from(PIPE_BYTES)
        .ok()
        .and_then(|size| {
            nix::fcntl::fcntl(pipe_in.as_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(size)).ok()
        })
        .and_then(|size| usize::try_from(size).ok())
        .unwrap_or(DEFAULT_PIPE_BYTES);
    let mut total = 0_u64;
    loop {
        // Fill the (empty) pipe from the source; a would-block here is the socket's.
        let filled = from
            .ready(Interest::READABLE, || {
                splice(from.fd(), None, pipe_in.as_fd(), None, chunk, flags())
                    .map_err(io::Error::from)
            })
            .await?;
        if filled == 0 {
            let _ = shutdown(to.fd().as_raw_fd(), Shutdown::Write);
            return Ok(total);
        }
        // Drain it into the destination; a would-block here is the destination socket's.
        let mut left = filled;
        while left > 0 {
            let moved = to
                .ready(Interest::WRITABLE, || {
                    splice(pipe_out.as_fd(), None, to.fd(), None, left, flags())
                        .map_err(io::Error::from)
                })
                .await?;
            if moved == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
            left -= moved;
        }
        total += filled as u64;
    }
}

/// Relays both ways until both directions have ended; returns the bytes sent each way.
pub(crate) async fn relay(client: Socket<'_>, upstream: &TcpStream) -> io::Result<(u64, u64)> {
    let upstream = Socket::Tcp(upstream);
    tokio::try_join!(one_way(client, upstream), one_way(upstream, client))
}
