//! Reads the server name (SNI) from the TLS `ClientHello` a client sends into a tunnel, so the
//! proxy can hold it to the `CONNECT` host before any byte goes upstream. Pure: it looks at the
//! bytes read so far and says "need more", "this name" or "not TLS".

use crate::refusal::EgressRefusal;
use crate::target::normalize_host;

/// TLS record type of handshake messages.
const HANDSHAKE: u8 = 22;
/// Handshake type of a `ClientHello`.
const CLIENT_HELLO: u8 = 1;
/// The largest TLS plaintext record (2^14).
const MAX_RECORD: usize = 16_384;
/// The largest `ClientHello` the proxy reads (hybrid post-quantum key shares make them ~2 KiB).
pub(crate) const MAX_CLIENT_HELLO: usize = 65_536;
/// The `server_name` extension.
const SERVER_NAME: u16 = 0;
/// The `host_name` entry of a `server_name` list.
const HOST_NAME: u8 = 0;

/// What the bytes read so far say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hello {
    /// The `ClientHello` is not complete yet.
    NeedMore,
    /// The one server name, normalised.
    ServerName(String),
}

fn not_tls(detail: &'static str) -> EgressRefusal {
    EgressRefusal::NotTls { detail }
}

/// Reads the server name from the start of a tunnel's bytes. A `ClientHello` may span several
/// records; every record before it is complete must be a handshake record.
pub(crate) fn server_name(bytes: &[u8]) -> Result<Hello, EgressRefusal> {
    let mut handshake = Vec::new();
    let mut rest = bytes;
    loop {
        if let Some(hello) = complete_message(&handshake)? {
            return parse_client_hello(hello).map(Hello::ServerName);
        }
        let Some(header) = rest.get(..5) else {
            return check_prefix(rest).map(|()| Hello::NeedMore);
        };
        if header[0] != HANDSHAKE || header[1] != 3 {
            return Err(not_tls("the first record is not a TLS handshake"));
        }
        let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if length == 0 || length > MAX_RECORD {
            return Err(not_tls("a TLS record has an impossible length"));
        }
        let Some(fragment) = rest.get(5..5 + length) else {
            return Ok(Hello::NeedMore);
        };
        handshake.extend_from_slice(fragment);
        rest = &rest[5 + length..];
    }
}

/// Refuses early a partial record header that cannot start a TLS handshake.
fn check_prefix(rest: &[u8]) -> Result<(), EgressRefusal> {
    match rest {
        [first, ..] if *first != HANDSHAKE => {
            Err(not_tls("the first record is not a TLS handshake"))
        }
        [_, second, ..] if *second != 3 => Err(not_tls("the first record is not a TLS handshake")),
        _ => Ok(()),
    }
}

/// The `ClientHello` body, once the handshake bytes hold all of it.
fn complete_message(handshake: &[u8]) -> Result<Option<&[u8]>, EgressRefusal> {
    let Some(header) = handshake.get(..4) else {
        return Ok(None);
    };
    if header[0] != CLIENT_HELLO {
        return Err(not_tls("the first handshake message is not a ClientHello"));
    }
    let length =
        (usize::from(header[1]) << 16) | (usize::from(header[2]) << 8) | usize::from(header[3]);
    if length > MAX_CLIENT_HELLO {
        return Err(not_tls("the ClientHello is too large"));
    }
    Ok(handshake.get(4..4 + length))
}

/// A bounds-checked reader over a message.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], EgressRefusal> {
        if self.bytes.len() < count {
            return Err(not_tls("the ClientHello is truncated"));
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, EgressRefusal> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, EgressRefusal> {
        let pair = self.take(2)?;
        Ok(u16::from_be_bytes([pair[0], pair[1]]))
    }

    fn vector8(&mut self) -> Result<&'a [u8], EgressRefusal> {
        let length = self.u8()?;
        self.take(usize::from(length))
    }

    fn vector16(&mut self) -> Result<&'a [u8], EgressRefusal> {
        let length = self.u16()?;
        self.take(usize::from(length))
    }
}

fn parse_client_hello(body: &[u8]) -> Result<String, EgressRefusal> {
    let mut cursor = Cursor { bytes: body };
    cursor.take(2 + 32)?; // legacy_version, random
    cursor.vector8()?; // legacy_session_id
    cursor.vector16()?; // cipher_suites
    cursor.vector8()?; // legacy_compression_methods
    if cursor.bytes.is_empty() {
        return Err(not_tls("the ClientHello names no server"));
    }
    let mut extensions = Cursor {
        bytes: cursor.vector16()?,
    };
    if !cursor.bytes.is_empty() {
        return Err(not_tls("the ClientHello has bytes after its extensions"));
    }
    let mut found = None;
    while !extensions.bytes.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vector16()?;
        if kind != SERVER_NAME {
            continue;
        }
        if found.is_some() {
            return Err(not_tls("the ClientHello has two server_name extensions"));
        }
        found = Some(host_name(data)?);
    }
    found.ok_or_else(|| not_tls("the ClientHello names no server"))
}

/// The one `host_name` of a `server_name` extension.
fn host_name(data: &[u8]) -> Result<String, EgressRefusal> {
    let mut outer = Cursor { bytes: data };
    let mut list = Cursor {
        bytes: outer.vector16()?,
    };
    if !outer.bytes.is_empty() {
        return Err(not_tls("the server_name extension is malformed"));
    }
    let mut name = None;
    while !list.bytes.is_empty() {
        let kind = list.u8()?;
        let entry = list.vector16()?;
        if kind != HOST_NAME {
            continue;
        }
        if name.is_some() {
            return Err(not_tls("the ClientHello names two servers"));
        }
        let text = std::str::from_utf8(entry)
            .map_err(|_| not_tls("the server name is not a host name"))?;
        name =
            Some(normalize_host(text).map_err(|_| not_tls("the server name is not a host name"))?);
    }
    name.ok_or_else(|| not_tls("the ClientHello names no server"))
}

/// Builds a minimal `ClientHello` record naming these servers (`host_name` entries), for tests
/// of the parser and of the proxy.
#[doc(hidden)]
#[must_use]
pub fn client_hello_for_tests(names: &[&str]) -> Vec<u8> {
    let mut list = Vec::new();
    for name in names {
        list.push(HOST_NAME);
        list.extend_from_slice(&(name.len() as u16).to_be_bytes());
        list.extend_from_slice(name.as_bytes());
    }
    let mut sni = (list.len() as u16).to_be_bytes().to_vec();
    sni.extend_from_slice(&list);
    let mut extensions = Vec::new();
    if !names.is_empty() {
        extensions.extend_from_slice(&SERVER_NAME.to_be_bytes());
        extensions.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        extensions.extend_from_slice(&sni);
    }
    // supported_versions: TLS 1.3, as a real client would also send.
    extensions.extend_from_slice(&[0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7; 32]);
    body.push(0);
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]);
    body.extend_from_slice(&[0x01, 0x00]);
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let length = body.len() as u32;
    let mut handshake = vec![CLIENT_HELLO];
    handshake.extend_from_slice(&length.to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![HANDSHAKE, 3, 1];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_server_name_at_every_split() {
        let record = client_hello_for_tests(&["Registry.Test"]);
        for cut in 0..record.len() {
            assert_eq!(
                server_name(&record[..cut]),
                Ok(Hello::NeedMore),
                "cut at {cut}"
            );
        }
        assert_eq!(
            server_name(&record),
            Ok(Hello::ServerName("registry.test".into()))
        );
    }

    #[test]
    fn a_hello_split_across_records_is_read() {
        let record = client_hello_for_tests(&["registry.test"]);
        let handshake = &record[5..];
        let (first, second) = handshake.split_at(10);
        let mut split = Vec::new();
        for part in [first, second] {
            split.extend_from_slice(&[HANDSHAKE, 3, 3]);
            split.extend_from_slice(&(part.len() as u16).to_be_bytes());
            split.extend_from_slice(part);
        }
        assert_eq!(
            server_name(&split),
            Ok(Hello::ServerName("registry.test".into()))
        );
    }

    #[test]
    fn record_and_message_lengths_at_their_limits() {
        let record = |length: u16| {
            let mut bytes = vec![HANDSHAKE, 3, 1];
            bytes.extend_from_slice(&length.to_be_bytes());
            bytes
        };
        assert_eq!(server_name(&record(16_384)), Ok(Hello::NeedMore));
        assert!(server_name(&record(16_385)).is_err());
        assert!(server_name(&record(0)).is_err());
        // A ClientHello of exactly the most the proxy reads is awaited; one byte more is refused.
        let hello = |length: [u8; 3]| {
            let mut bytes = record(4);
            bytes.extend_from_slice(&[CLIENT_HELLO, length[0], length[1], length[2]]);
            bytes
        };
        assert_eq!(server_name(&hello([1, 0, 0])), Ok(Hello::NeedMore));
        assert!(server_name(&hello([1, 0, 1])).is_err());
        assert!(server_name(&hello([2, 0, 0])).is_err());
        // A first byte that cannot start a handshake is refused before five bytes arrive.
        assert_eq!(server_name(&[HANDSHAKE]), Ok(Hello::NeedMore));
        assert!(server_name(b"G").is_err());
        assert!(server_name(b"GE").is_err());
    }

    #[test]
    fn refuses_what_is_not_one_server_name() {
        let refused =
            |bytes: &[u8]| matches!(server_name(bytes), Err(EgressRefusal::NotTls { .. }));
        assert!(refused(b"GET / HTTP/1.1\r\n\r\n"));
        assert!(refused(b"SSH-2.0-OpenSSH_9.6\r\n"));
        assert!(refused(&[HANDSHAKE, 2]));
        assert!(refused(&[HANDSHAKE, 2, 0, 0, 5]));
        assert!(refused(&[23, 3, 3, 0, 5]));
        assert!(refused(&client_hello_for_tests(&[])));
        assert!(refused(&client_hello_for_tests(&["a.test", "b.test"])));
        assert!(refused(&client_hello_for_tests(&["127.0.0.1"])));
        assert!(refused(&client_hello_for_tests(&["bad name"])));
        assert!(refused(&[HANDSHAKE, 3, 1, 0x40, 0x01]));
        assert!(refused(&[HANDSHAKE, 3, 1, 0, 4, 2, 0, 0, 0]));
        let mut huge = vec![HANDSHAKE, 3, 1, 0, 4, CLIENT_HELLO, 0x02, 0, 0];
        huge.extend_from_slice(&[0; 4]);
        assert!(refused(&huge));
    }
}
