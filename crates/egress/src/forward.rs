//! One plain HTTP request forwarded over a connection to a checked address: the request in
//! origin form with its `Host` set to the checked target, hop-by-hop and proxy headers dropped
//! both ways, the request body framed anew, bodies streamed.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Version};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tracing::Instrument;

use crate::proxy::ProxyBody;
use crate::target::Target;

/// Headers that describe one hop and never travel on (RFC 9110 §7.6.1), plus the proxy's own.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Drops hop-by-hop headers, those the `Connection` header names included, and
/// `Transfer-Encoding` (the HTTP library frames the body itself).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// Sends `request` to `target` over `stream` and returns the upstream's response.
pub(crate) async fn forward(
    stream: TcpStream,
    target: &Target,
    request: Request<Incoming>,
) -> Result<Response<ProxyBody>, String> {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| error.to_string())?;
    tokio::spawn(
        async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream connection ended with an error");
            }
        }
        .in_current_span(),
    );
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str)
        .to_owned();
    parts.uri = path
        .parse()
        .map_err(|_| "the request path is not valid".to_owned())?;
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    // The body is framed again from what was read (its exact length, or chunked), so a request
    // whose Content-Length and Transfer-Encoding disagreed cannot reach the upstream framed two
    // ways.
    parts.headers.remove(header::CONTENT_LENGTH);
    let host = if target.port == 80 {
        target.host.clone()
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let host =
        HeaderValue::from_str(&host).map_err(|_| "the host is not a header value".to_owned())?;
    parts.headers.insert(header::HOST, host);
    let response = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|error| error.to_string())?;
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, Either::Left(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "close, x-secret"),
            ("x-secret", "1"),
            ("proxy-authorization", "Basic abc"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["accept"]);
    }
}
