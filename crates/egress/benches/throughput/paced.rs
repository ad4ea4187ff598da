//! Upstreams that send no faster than a link would: a remote host behind a 2, 4 or 8 Gbit/s
//! link, over TLS (for tunnels) and over plain HTTP.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio_rustls::TlsAcceptor;

use super::server;

/// The chunk a paced server sends at a time.
const CHUNK: usize = 256 * 1024;

/// When the byte at `sent` is due, for a server that started at `start` and sends `pace` MB/s.
fn due(start: Instant, sent: usize, pace: u32) -> Instant {
    let bytes_per_second = f64::from(pace) * 1024.0 * 1024.0;
    start + Duration::from_secs_f64(sent as f64 / bytes_per_second)
}

/// The paces of the link-paced servers, in MB/s: a remote host behind a 2, 4 or 8 Gbit/s
/// link. Where the proxied download falls behind the direct one says how fast a link the proxy
/// keeps up with while it shares the cores with both ends.
pub(crate) const LINK_MB_PER_SECOND: [u32; 3] = [250, 500, 1000];

/// A TLS server for tunnels: completes the handshake, then sends 100 MB, at most `pace` MB/s
/// when a pace is given (as a remote host behind a link would), else as fast as it can.
pub(crate) fn tls_upstream(
    big: Bytes,
    acceptor: TlsAcceptor,
    pace: Option<u32>,
) -> (SocketAddr, impl Future<Output = ()> + Send) {
    server(move |stream| {
        let (big, acceptor) = (big.clone(), acceptor.clone());
        async move {
            let Ok(mut tls) = acceptor.accept(stream).await else {
                return;
            };
            if let Some(pace) = pace {
                let start = Instant::now();
                let mut sent = 0_usize;
                for chunk in big.chunks(CHUNK) {
                    tokio::time::sleep_until(due(start, sent, pace).into()).await;
                    if tls.write_all(chunk).await.is_err() {
                        return;
                    }
                    sent += chunk.len();
                }
            } else {
                let _ = tls.write_all(&big).await;
            }
            let _ = tls.shutdown().await;
        }
    })
}

/// An HTTP server answering every request with 100 MB, sent at most `pace` MB/s.
pub(crate) fn http_upstream_paced(
    big: Bytes,
    pace: u32,
) -> (SocketAddr, impl Future<Output = ()> + Send) {
    server(move |stream| {
        let big = big.clone();
        async move {
            let service = service_fn(move |_request: hyper::Request<hyper::body::Incoming>| {
                let start = Instant::now();
                let chunks = futures_util::stream::unfold(0_usize, {
                    let big = big.clone();
                    move |sent| {
                        let big = big.clone();
                        async move {
                            if sent >= big.len() {
                                return None;
                            }
                            tokio::time::sleep_until(due(start, sent, pace).into()).await;
                            let end = (sent + CHUNK).min(big.len());
                            let frame = Frame::data(big.slice(sent..end));
                            Some((Ok::<_, std::convert::Infallible>(frame), end))
                        }
                    }
                });
                let mut response = hyper::Response::new(StreamBody::new(chunks));
                response.headers_mut().insert(
                    hyper::header::CONTENT_LENGTH,
                    hyper::header::HeaderValue::from(big.len()),
                );
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}
