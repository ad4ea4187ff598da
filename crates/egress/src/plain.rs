//! A plain `GET` or `HEAD` forwarded with its response body moved in the kernel.
//!
//! Most plain HTTP a workspace sends is a download: a request with no body, answered by a large
//! one. Through hyper the response body crosses the proxy's memory (read from the upstream,
//! written to the client); here it is moved with `splice`, as a tunnel's bytes are. Only a
//! request that needs no framing of its own takes this way ([`bodiless`]: `GET` or `HEAD`, no
//! `Content-Length`, `Transfer-Encoding`, `Expect` or `Upgrade`, nothing after its head), from a
//! TCP or Unix socket; every other request is served by hyper as before. The decision is the same
//! one ([`crate::proxy`] admits both), and the request is written anew the same way: origin form,
//! hop-by-hop and proxy headers dropped, `Host` set to the checked target.
//!
//! The response head is read and checked here (bounded; one `Content-Length` or several equal
//! ones; no switch of protocols) and sent on without its hop-by-hop headers, with
//! `Connection: close`; the body follows as the upstream framed it: exactly `Content-Length`
//! bytes, or, chunked or delimited by the close, everything until the upstream closes (it was
//! asked to, with `Connection: close`). The client then reads the framing the upstream chose,
//! which is the upstream's to choose: nothing the client sends reaches the upstream.

use bytes::{BufMut as _, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Version};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::forward::{host_value, strip_hop_by_hop};
use crate::io::head_end;
use crate::proxy::Stop;
use crate::relay::{Socket, one_way_up_to, write_all};
use crate::target::Target;

/// The largest response head read, in bytes.
const RESPONSE_HEAD_BYTES: usize = 64 * 1024;

/// The most header lines a response head may have.
const RESPONSE_HEAD_LINES: usize = 256;

/// The request in `head` when the proxy forwards it itself: a complete `GET` or `HEAD` with no
/// body and nothing after it, whose every header is valid; `None` leaves it to hyper.
pub(crate) fn bodiless(head: &[u8], max_lines: usize) -> Option<Request<()>> {
    let mut headers = vec![httparse::EMPTY_HEADER; max_lines];
    let mut parsed = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(length) = parsed.parse(head).ok()? else {
        return None;
    };
    if length != head.len() {
        return None;
    }
    let method = match parsed.method? {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        _ => return None,
    };
    let version = match parsed.version? {
        0 => Version::HTTP_10,
        1 => Version::HTTP_11,
        _ => return None,
    };
    let mut request = Request::builder()
        .method(method)
        .uri(parsed.path?)
        .version(version);
    for field in parsed.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).ok()?;
        if [
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::EXPECT,
            header::UPGRADE,
        ]
        .contains(&name)
        {
            return None;
        }
        request = request.header(name, HeaderValue::from_bytes(field.value).ok()?);
    }
    request.body(()).ok()
}

/// A failure before anything was sent to the client: a 502 naming it.
fn upstream_failed(message: impl Into<String>) -> Stop {
    Stop::Failed {
        reason: "UPSTREAM",
        message: message.into(),
        status: StatusCode::BAD_GATEWAY,
    }
}

/// Writes `name: value` lines.
fn put_headers(out: &mut BytesMut, headers: &HeaderMap) {
    for (name, value) in headers {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
}

/// The request as the upstream gets it.
fn request_bytes(request: &Request<()>, target: &Target) -> Result<BytesMut, Stop> {
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    let mut headers = request.headers().clone();
    strip_hop_by_hop(&mut headers);
    headers.insert(header::HOST, host_value(target).map_err(upstream_failed)?);
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    let mut out = BytesMut::with_capacity(1024);
    out.put_slice(request.method().as_str().as_bytes());
    out.put_slice(b" ");
    out.put_slice(path.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    put_headers(&mut out, &headers);
    out.put_slice(b"\r\n");
    Ok(out)
}

/// How the response body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Everything until the upstream closes (chunked, or delimited by the close).
    UntilClose,
}

/// A final response head: the bytes the client gets, the framing, and how many bytes of `read`
/// it took.
struct Head {
    bytes: BytesMut,
    framing: Framing,
    used: usize,
}

/// Reads `upstream`'s final response head (skipping interim `1xx` ones) into `read`.
async fn read_response(
    upstream: &mut TcpStream,
    read: &mut Vec<u8>,
    method: &Method,
) -> Result<Head, Stop> {
    let mut start = 0;
    loop {
        let end = loop {
            if let Some(end) = head_end(&read[start..]) {
                break start + end;
            }
            if read.len() - start > RESPONSE_HEAD_BYTES {
                return Err(upstream_failed("the response head is too large"));
            }
            let mut chunk = [0_u8; 8192];
            let got = upstream
                .read(&mut chunk)
                .await
                .map_err(|e| upstream_failed(e.to_string()))?;
            if got == 0 {
                return Err(upstream_failed("the upstream closed before its response"));
            }
            read.extend_from_slice(&chunk[..got]);
        };
        if end - start > RESPONSE_HEAD_BYTES {
            return Err(upstream_failed("the response head is too large"));
        }
        let mut fields = vec![httparse::EMPTY_HEADER; RESPONSE_HEAD_LINES];
        let mut parsed = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(_)) = parsed.parse(&read[start..end]) else {
            return Err(upstream_failed("the response head is not HTTP/1.1"));
        };
        let status = parsed
            .code
            .and_then(|code| StatusCode::from_u16(code).ok())
            .ok_or_else(|| upstream_failed("the response has no status"))?;
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return Err(upstream_failed("the upstream switched protocols"));
        }
        if status.is_informational() {
            start = end;
            continue;
        }
        let mut headers = HeaderMap::new();
        for field in parsed.headers.iter() {
            let name = HeaderName::from_bytes(field.name.as_bytes())
                .map_err(|_| upstream_failed("a response header name is not valid"))?;
            let value = HeaderValue::from_bytes(field.value)
                .map_err(|_| upstream_failed("a response header value is not valid"))?;
            headers.append(name, value);
        }
        let framing = framing(&headers, status, method)?;
        let chunked: Vec<HeaderValue> = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .cloned()
            .collect();
        strip_hop_by_hop(&mut headers);
        if framing == Framing::UntilClose {
            headers.remove(header::CONTENT_LENGTH);
            for value in chunked {
                headers.append(header::TRANSFER_ENCODING, value);
            }
        }
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        let mut bytes = BytesMut::with_capacity(end - start + 64);
        bytes.put_slice(format!("HTTP/1.1 {} ", status.as_u16()).as_bytes());
        bytes.put_slice(parsed.reason.unwrap_or_default().as_bytes());
        bytes.put_slice(b"\r\n");
        put_headers(&mut bytes, &headers);
        bytes.put_slice(b"\r\n");
        return Ok(Head {
            bytes,
            framing,
            used: end,
        });
    }
}

/// The body's framing (RFC 9112 §6.3): none for `HEAD`, `204` and `304`; the upstream's close
/// when it is transfer-coded; else its one `Content-Length` (several must agree); else the close.
fn framing(headers: &HeaderMap, status: StatusCode, method: &Method) -> Result<Framing, Stop> {
    if method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return Ok(Framing::UntilClose);
    }
    let mut length = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for part in value.to_str().unwrap_or_default().split(',') {
            let part = part.trim();
            let parsed: u64 = (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
                .ok_or_else(|| upstream_failed("the response's Content-Length is not a number"))?;
            if length.is_some_and(|known| known != parsed) {
                return Err(upstream_failed(
                    "the response's Content-Length values disagree",
                ));
            }
            length = Some(parsed);
        }
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

/// Sends `request` to `target` over `upstream` and the response to `client`. An `Err` means
/// nothing was sent to the client yet; once the head went, a failure only ends the connection.
pub(crate) async fn forward(
    client: Socket<'_>,
    mut upstream: TcpStream,
    target: &Target,
    request: &Request<()>,
) -> Result<(), Stop> {
    let bytes = request_bytes(request, target)?;
    upstream
        .write_all(&bytes)
        .await
        .map_err(|e| upstream_failed(e.to_string()))?;
    let mut read = Vec::with_capacity(8192);
    let head = read_response(&mut upstream, &mut read, request.method()).await?;
    let mut early = &read[head.used..];
    let limit = match head.framing {
        Framing::Empty => Some(0),
        Framing::Length(length) => Some(length),
        Framing::UntilClose => None,
    };
    if let Some(limit) = limit {
        early = &early[..early
            .len()
            .min(usize::try_from(limit).unwrap_or(usize::MAX))];
    }
    let mut first = head.bytes;
    first.put_slice(early);
    if write_all(client, &first).await.is_err() {
        return Ok(());
    }
    let left = limit.map(|limit| limit - early.len() as u64);
    if let Err(error) = one_way_up_to(Socket::Tcp(&upstream), client, left).await {
        tracing::debug!(%error, "a plain response ended early");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bodiless_get_or_head_is_taken() {
        let taken = bodiless(
            b"GET http://registry.test/x HTTP/1.1\r\nhost: registry.test\r\naccept: */*\r\n\r\n",
            32,
        )
        .unwrap_or_else(|| panic!("a plain GET"));
        assert_eq!(taken.uri(), "http://registry.test/x");
        assert!(bodiless(b"HEAD http://registry.test/ HTTP/1.0\r\n\r\n", 32).is_some());
        for left in [
            &b"POST http://registry.test/ HTTP/1.1\r\n\r\n"[..],
            b"GET http://registry.test/ HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            b"GET http://registry.test/ HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
            b"GET http://registry.test/ HTTP/1.1\r\nexpect: 100-continue\r\n\r\n",
            b"GET http://registry.test/ HTTP/1.1\r\nupgrade: websocket\r\n\r\n",
            b"GET http://registry.test/ HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            b"GET http://registry.test/ HTTP/1.1\r\nbad header\r\n\r\n",
            b"GET http://registry.test/ HTTP/1.1\r\n",
        ] {
            assert!(
                bodiless(left, 32).is_none(),
                "{}",
                String::from_utf8_lossy(left)
            );
        }
    }

    #[test]
    fn the_body_is_framed_as_the_upstream_framed_it() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            map
        };
        let (ok, get) = (StatusCode::OK, Method::GET);
        let frame = |pairs, status, method| framing(&headers(pairs), status, method).ok();
        assert_eq!(
            frame(&[("content-length", "7")], ok, &get),
            Some(Framing::Length(7))
        );
        assert_eq!(
            frame(
                &[("content-length", "7, 7"), ("content-length", "7")],
                ok,
                &get
            ),
            Some(Framing::Length(7))
        );
        for disagreeing in [
            &[("content-length", "7, 8")][..],
            &[("content-length", "+7")],
        ] {
            assert_eq!(frame(disagreeing, ok, &get), None);
        }
        assert_eq!(
            frame(
                &[("transfer-encoding", "chunked"), ("content-length", "7")],
                ok,
                &get
            ),
            Some(Framing::UntilClose)
        );
        assert_eq!(frame(&[], ok, &get), Some(Framing::UntilClose));
        assert_eq!(
            frame(&[("content-length", "7")], ok, &Method::HEAD),
            Some(Framing::Empty)
        );
        for status in [StatusCode::NO_CONTENT, StatusCode::NOT_MODIFIED] {
            assert_eq!(
                frame(&[("content-length", "7")], status, &get),
                Some(Framing::Empty)
            );
        }
    }
}
