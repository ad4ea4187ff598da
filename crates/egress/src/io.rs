//! The request head guard and the stream that replays what it read: the proxy reads a
//! connection's head itself (to refuse an oversized one with a 403 of its own) and then hands the
//! same bytes, followed by the rest of the stream, to the HTTP parser.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// Where the head ends (just past its blank line), if it is complete. A line ends in `\n`, with
/// or without `\r`, as the HTTP parser accepts both.
pub(crate) fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes.iter().enumerate().find_map(|(index, byte)| {
        if *byte != b'\n' {
            return None;
        }
        match bytes.get(index + 1..) {
            Some([b'\n', ..]) => Some(index + 2),
            Some([b'\r', b'\n', ..]) => Some(index + 3),
            _ => None,
        }
    })
}

/// What reading a head came to.
#[derive(Debug)]
pub(crate) enum Head {
    /// The head is complete within the limits; these are all the bytes read (the head and
    /// whatever followed it in the same reads).
    Complete(Vec<u8>),
    /// The head is longer than `max_bytes` or has more than `max_lines` lines.
    TooLarge,
    /// The client closed before a head was complete.
    Closed,
}

/// Reads until a head is complete, refusing one that outgrows the limits before it ends.
pub(crate) async fn read_head<IO: AsyncRead + Unpin>(
    io: &mut IO,
    max_bytes: usize,
    max_lines: usize,
) -> io::Result<Head> {
    let mut bytes = Vec::with_capacity(1024);
    let mut chunk = [0_u8; 4096];
    loop {
        let read = io.read(&mut chunk).await?;
        if read == 0 {
            return Ok(Head::Closed);
        }
        // Search from just before the new bytes, so a terminator split across reads is found.
        let from = bytes.len().saturating_sub(2);
        bytes.extend_from_slice(&chunk[..read]);
        let end = head_end(&bytes[from..]).map(|end| from + end);
        let head = &bytes[..end.unwrap_or(bytes.len()).min(bytes.len())];
        let lines = memchr::memchr_iter(b'\n', head).count();
        if head.len() > max_bytes || lines > max_lines {
            return Ok(Head::TooLarge);
        }
        if end.is_some() {
            return Ok(Head::Complete(bytes));
        }
    }
}

/// A stream that first yields `prefix`, then reads from `inner`; writes go to `inner`.
#[derive(Debug)]
pub(crate) struct Rewind<IO> {
    prefix: Vec<u8>,
    offset: usize,
    inner: IO,
}

impl<IO> Rewind<IO> {
    pub(crate) fn new(prefix: Vec<u8>, inner: IO) -> Self {
        Self {
            prefix,
            offset: 0,
            inner,
        }
    }

    /// The prefix bytes not yet read, and the stream.
    pub(crate) fn into_parts(self) -> (Vec<u8>, IO) {
        let rest = self.prefix.get(self.offset..).unwrap_or_default().to_vec();
        (rest, self.inner)
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewind<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.offset < self.prefix.len() {
            let remaining = &self.prefix[self.offset..];
            let count = remaining.len().min(buf.remaining());
            buf.put_slice(&remaining[..count]);
            self.offset += count;
            if self.offset == self.prefix.len() {
                self.prefix = Vec::new();
                self.offset = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewind<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: b\n\nbody"), Some(21));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r"), None);
    }

    #[tokio::test]
    async fn rewind_replays_its_prefix_through_small_reads() {
        let mut stream = Rewind::new(b"head".to_vec(), &b" and the rest"[..]);
        let mut out = Vec::new();
        let mut byte = [0_u8; 1];
        while stream.read(&mut byte).await.unwrap() == 1 {
            out.push(byte[0]);
        }
        assert_eq!(out, b"head and the rest");
        let mut partly = Rewind::new(b"abc".to_vec(), &b"d"[..]);
        assert_eq!(partly.read(&mut byte).await.unwrap(), 1);
        assert_eq!(partly.into_parts(), (b"bc".to_vec(), &b"d"[..]));
    }

    #[tokio::test]
    async fn read_head_limits_and_split_terminators() {
        let head = b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n";
        let mut whole = &head[..];
        assert!(matches!(
            read_head(&mut whole, 1024, 10).await.unwrap(),
            Head::Complete(bytes) if bytes == head
        ));
        let mut exact = &head[..];
        assert!(matches!(
            read_head(&mut exact, head.len(), 3).await.unwrap(),
            Head::Complete(_)
        ));
        let mut short = &head[..];
        assert!(matches!(
            read_head(&mut short, 20, 10).await.unwrap(),
            Head::TooLarge
        ));
        let mut few_lines = &head[..];
        assert!(matches!(
            read_head(&mut few_lines, 1024, 2).await.unwrap(),
            Head::TooLarge
        ));
        let mut cut = &head[..10];
        assert!(matches!(
            read_head(&mut cut, 1024, 10).await.unwrap(),
            Head::Closed
        ));
        // One byte per read: the terminator arrives split.
        let (mut client, mut server) = tokio::io::duplex(1);
        let writer = tokio::spawn(async move {
            tokio::io::AsyncWriteExt::write_all(&mut client, head)
                .await
                .unwrap();
            client
        });
        assert!(matches!(
            read_head(&mut server, 1024, 10).await.unwrap(),
            Head::Complete(bytes) if bytes == head
        ));
        drop(writer.await.unwrap());
    }
}
