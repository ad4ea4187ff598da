//! The accept loop: each HTTP/1 connection is served on a task of its own, under the
//! [`ConnectionLimits`]. A connection over a cap is closed as it is accepted; one that is slow
//! to send its request head, or idle too long, is closed by the server; on shutdown, idle
//! connections close at once and busy ones get the grace period, after which they are dropped.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response};
use futures_util::future::BoxFuture;
use http_body_util::BodyExt as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::connection_limits::{Activity, ConnectionCounters, ConnectionLimits, Slot};

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeReport {
    /// Connections open when shutdown began.
    pub open_at_shutdown: usize,
    /// Of those, the ones still busy when the grace period ran out, and dropped.
    pub dropped: usize,
}

/// Serves `app` on `listener` under `limits`, counting in `counters`, until `shutdown` is
/// cancelled; then stops accepting, closes idle connections, lets requests in flight finish
/// within the grace period and drops what is left.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    counters: ConnectionCounters,
    shutdown: CancellationToken,
) -> ServeReport {
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()).http1_only());
    let stop = CancellationToken::new();
    let warned = RateLimitedWarning::default();
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match counters.take(peer.ip(), &limits) {
                    Ok(slot) => {
                        let connection = Connection {
                            app: app.clone(),
                            builder: Arc::clone(&builder),
                            limits,
                            counters: counters.clone(),
                            stop: stop.clone(),
                            _slot: slot,
                        };
                        let span = tracing::debug_span!("connection", %peer);
                        tasks.spawn(connection.run(stream).instrument(span));
                    }
                    Err(refusal) => {
                        // Closed at once: the cap is what keeps the server answering.
                        drop(stream);
                        tracing::debug!(%peer, cap = refusal.as_str(), "a connection over the cap was closed");
                        warned.warn(|| tracing::warn!(
                            cap = refusal.as_str(),
                            refused = counters.refused(),
                            open = counters.open(),
                            "connections over the cap are being closed as they are accepted"
                        ));
                    }
                },
                Err(error) if is_connection_error(&error) => {}
                Err(error) => {
                    // Out of file descriptors, most likely: wait a little rather than spin.
                    warned.warn(|| tracing::warn!(%error, "accepting a connection failed"));
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    let open_at_shutdown = tasks.len();
    tracing::info!(
        open = open_at_shutdown,
        grace_seconds = limits.shutdown_grace.as_secs(),
        "stopped accepting; closing connections"
    );
    stop.cancel();
    let deadline = tokio::time::Instant::now() + limits.shutdown_grace;
    let mut dropped = 0;
    loop {
        tokio::select! {
            next = tasks.join_next() => if next.is_none() { break },
            () = tokio::time::sleep_until(deadline) => {
                dropped = tasks.len();
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                break;
            }
        }
    }
    if dropped > 0 {
        counters.dropped_at_shutdown(dropped);
        tracing::warn!(
            dropped,
            "the shutdown grace ran out; busy connections were dropped"
        );
    }
    ServeReport {
        open_at_shutdown,
        dropped,
    }
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Logs at most one warning every ten seconds: a flood of refusals must not become a flood of
/// log lines.
#[derive(Debug)]
struct RateLimitedWarning {
    start: Instant,
    last: AtomicU64,
}

impl Default for RateLimitedWarning {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl RateLimitedWarning {
    fn warn(&self, log: impl FnOnce()) {
        let now = self.start.elapsed().as_secs() + 10;
        let last = self.last.load(Ordering::Relaxed);
        if now >= last + 10
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            log();
        }
    }
}

/// One accepted connection and what it needs.
struct Connection {
    app: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    limits: ConnectionLimits,
    counters: ConnectionCounters,
    stop: CancellationToken,
    /// Frees the connection's place under the caps when the task ends, aborted or not.
    _slot: Slot,
}

impl Connection {
    async fn run(self, stream: TcpStream) {
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            stream,
            activity: Arc::clone(&activity),
        });
        let service = TowerToHyperService::new(Tracked {
            app: self.app.clone(),
            activity: Arc::clone(&activity),
        });
        let connection = self.builder.serve_connection(io, service);
        tokio::pin!(connection);
        let mut tick = tokio::time::interval(self.limits.tick());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut draining = false;
        loop {
            tokio::select! {
                served = connection.as_mut() => {
                    if let Err(error) = served {
                        tracing::debug!(%error, "the connection ended with an error");
                    }
                    return;
                }
                _ = tick.tick() => if let Some(expiry) = activity.expired(&self.limits) {
                    self.counters.expired(expiry);
                    tracing::debug!(?expiry, "closed a connection that outstayed its timeout");
                    return;
                },
                () = self.stop.cancelled(), if !draining => {
                    if activity.is_idle() {
                        return;
                    }
                    draining = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// The router, with each request counted in flight until its response body is done.
#[derive(Clone)]
struct Tracked {
    app: Router,
    activity: Arc<Activity>,
}

impl<B> tower::Service<Request<B>> for Tracked
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let in_flight = self.activity.request_started();
        let response = tower::ServiceExt::oneshot(self.app.clone(), request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _held = &in_flight;
                    frame
                }))
            }))
        })
    }
}

/// The socket, telling the connection's [`Activity`] when bytes arrive.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read_bytes();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// `GET /metrics` as [`crate::metrics_router`] serves it, with the connection counters
/// (`http_connections_*`) added.
pub fn metrics_router(
    metrics: auto_swe_telemetry::Metrics,
    counters: ConnectionCounters,
) -> Router {
    Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            let counters = counters.clone();
            async move {
                let text = metrics.render().map_err(|error| {
                    crate::ApiError::internal("METRICS_FAILED", error.to_string())
                })?;
                let body = text.strip_suffix("# EOF\n").unwrap_or(&text);
                Ok::<_, crate::ApiError>((
                    [(
                        axum::http::header::CONTENT_TYPE,
                        auto_swe_telemetry::METRICS_CONTENT_TYPE,
                    )],
                    format!("{body}{}# EOF\n", counters.render()),
                ))
            }
        }),
    )
}
