//! What the server allows a connection: how long it may take to send a request head, how long
//! it may sit idle between requests, how many connections may be open at once (in all, and from
//! one client address), and how long shutdown waits for them. The counters here feed `/metrics`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How the server holds its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// A request head (request line and headers) must arrive within this, counted from the
    /// connection's opening for its first request and from the head's first byte after that.
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; more are closed as they are accepted.
    pub max_connections: usize,
    /// Connections open at once from one client address (0: no cap of its own).
    pub max_connections_per_address: usize,
    /// On shutdown, requests in flight have this long to finish; then their connections are
    /// dropped.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_address: 256,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl ConnectionLimits {
    /// How often a connection checks its timeouts: a quarter of the shorter one, between 50 ms
    /// and 1 s.
    pub(crate) fn tick(&self) -> Duration {
        (self.header_read_timeout.min(self.idle_timeout) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    /// These limits with other caps: `max_connections` in all, `per_address` from one address
    /// (0: none of its own).
    #[must_use]
    pub fn with_caps(mut self, max_connections: usize, per_address: usize) -> Self {
        self.max_connections = max_connections;
        self.max_connections_per_address = per_address;
        self
    }

    /// These limits with `max_connections` lowered to fit under `open_files` (the process's
    /// file-descriptor limit), leaving `reserve` descriptors for the store, logs and
    /// workspaces. Returns the limits and whether they were lowered.
    #[must_use]
    pub fn fitted_to(mut self, open_files: u64, reserve: u64) -> (Self, bool) {
        let room = usize::try_from(open_files.saturating_sub(reserve)).unwrap_or(usize::MAX);
        let room = room.max(16);
        if self.max_connections <= room {
            return (self, false);
        }
        self.max_connections = room;
        if self.max_connections_per_address > room {
            self.max_connections_per_address = room;
        }
        (self, true)
    }
}

/// The soft limit on this process's open files, from `/proc/self/limits` (Linux), when it can
/// be read and is not unlimited.
#[must_use]
pub fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Why a connection was closed as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `maxConnections` were open.
    Server,
    /// `maxConnectionsPerAddress` were open from its address.
    Address,
}

impl Refusal {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Address => "address",
        }
    }
}

/// Why the server closed a connection on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// Its request head did not arrive in time.
    Header,
    /// It sat idle between requests.
    Idle,
}

/// The server's connection counters; clones share them.
#[derive(Debug, Clone, Default)]
pub struct ConnectionCounters {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    slots: Mutex<SlotState>,
    open: AtomicUsize,
    accepted: AtomicU64,
    refused_server: AtomicU64,
    refused_address: AtomicU64,
    header_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    dropped_at_shutdown: AtomicU64,
}

#[derive(Debug, Default)]
struct SlotState {
    open: usize,
    by_address: HashMap<IpAddr, usize>,
}

impl ConnectionCounters {
    /// Connections open now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    /// Connections closed as they were accepted, over either cap.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.inner.refused_server.load(Ordering::Relaxed)
            + self.inner.refused_address.load(Ordering::Relaxed)
    }

    /// Takes a slot for a connection from `address`, or says which cap refuses it.
    pub(crate) fn take(&self, address: IpAddr, limits: &ConnectionLimits) -> Result<Slot, Refusal> {
        let mut state = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if state.open >= limits.max_connections {
            drop(state);
            self.inner.refused_server.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::Server);
        }
        let from_address = state.by_address.entry(address).or_insert(0);
        if limits.max_connections_per_address > 0
            && *from_address >= limits.max_connections_per_address
        {
            drop(state);
            self.inner.refused_address.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::Address);
        }
        *from_address += 1;
        state.open += 1;
        self.inner.open.store(state.open, Ordering::Relaxed);
        drop(state);
        self.inner.accepted.fetch_add(1, Ordering::Relaxed);
        Ok(Slot {
            counters: self.clone(),
            address,
        })
    }

    pub(crate) fn expired(&self, expiry: Expiry) {
        let counter = match expiry {
            Expiry::Header => &self.inner.header_timeouts,
            Expiry::Idle => &self.inner.idle_timeouts,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dropped_at_shutdown(&self, count: usize) {
        self.inner
            .dropped_at_shutdown
            .fetch_add(count as u64, Ordering::Relaxed);
    }

    /// The counters in the `OpenMetrics` text format (no `# EOF`).
    #[must_use]
    pub fn render(&self) -> String {
        let c = &self.inner;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        format!(
            "# TYPE http_connections_open gauge\n\
             # HELP http_connections_open Connections open now.\n\
             http_connections_open {}\n\
             # TYPE http_connections_accepted counter\n\
             # HELP http_connections_accepted Connections accepted and served.\n\
             http_connections_accepted_total {}\n\
             # TYPE http_connections_refused counter\n\
             # HELP http_connections_refused Connections closed as they were accepted, by the cap that refused them.\n\
             http_connections_refused_total{{cap=\"server\"}} {}\n\
             http_connections_refused_total{{cap=\"address\"}} {}\n\
             # TYPE http_connections_timed_out counter\n\
             # HELP http_connections_timed_out Connections the server closed: a request head too slow, or idle too long.\n\
             http_connections_timed_out_total{{reason=\"header\"}} {}\n\
             http_connections_timed_out_total{{reason=\"idle\"}} {}\n\
             # TYPE http_connections_dropped_at_shutdown counter\n\
             # HELP http_connections_dropped_at_shutdown Connections still busy when the shutdown grace ran out.\n\
             http_connections_dropped_at_shutdown_total {}\n",
            self.open(),
            load(&c.accepted),
            load(&c.refused_server),
            load(&c.refused_address),
            load(&c.header_timeouts),
            load(&c.idle_timeouts),
            load(&c.dropped_at_shutdown),
        )
    }
}

/// An open connection's place under the caps; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct Slot {
    counters: ConnectionCounters,
    address: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let inner = &self.counters.inner;
        let mut state = inner.slots.lock().unwrap_or_else(PoisonError::into_inner);
        state.open = state.open.saturating_sub(1);
        inner.open.store(state.open, Ordering::Relaxed);
        if let Some(count) = state.by_address.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.by_address.remove(&self.address);
            }
        }
    }
}

const NONE: u64 = u64::MAX;

/// What one connection is doing, for its timeouts: read by its own task, written by its socket
/// reads and its requests (all polled on that task; atomics only to be shareable).
#[derive(Debug)]
pub(crate) struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// When the first byte of a request head not yet complete arrived (ms since `opened`).
    head_since: AtomicU64,
    /// When the last response ended (ms since `opened`; 0 before the first request).
    idle_since: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            head_since: AtomicU64::new(NONE),
            idle_since: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(NONE - 1)
    }

    /// Bytes arrived: between requests, they start a request head.
    pub(crate) fn read_bytes(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0 {
            let now = self.now();
            let _ =
                self.head_since
                    .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// A request head arrived; the returned guard ends the request when its response is
    /// done (or dropped).
    pub(crate) fn request_started(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(NONE, Ordering::Release);
        InFlight {
            activity: Arc::clone(self),
        }
    }

    /// Whether no request is being served.
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Whether the connection has outstayed a timeout, and which.
    pub(crate) fn expired(&self, limits: &ConnectionLimits) -> Option<Expiry> {
        if !self.is_idle() {
            return None;
        }
        let now = self.now();
        let since = |start: u64| Duration::from_millis(now.saturating_sub(start));
        let head = self.head_since.load(Ordering::Acquire);
        if head != NONE {
            return (since(head) >= limits.header_read_timeout).then_some(Expiry::Header);
        }
        let idle = since(self.idle_since.load(Ordering::Acquire));
        if self.requests.load(Ordering::Relaxed) == 0 {
            (idle >= limits.header_read_timeout).then_some(Expiry::Header)
        } else {
            (idle >= limits.idle_timeout).then_some(Expiry::Idle)
        }
    }
}

/// A request being served; dropping it (with its response body) makes the connection idle.
#[derive(Debug)]
pub(crate) struct InFlight {
    activity: Arc<Activity>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.activity;
        activity.idle_since.store(activity.now(), Ordering::Release);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caps_refuse_the_excess_and_free_places_on_drop() {
        let limits = ConnectionLimits {
            max_connections: 3,
            max_connections_per_address: 2,
            ..ConnectionLimits::default()
        };
        let counters = ConnectionCounters::default();
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = counters.take(a, &limits).unwrap();
        let _second = counters.take(a, &limits).unwrap();
        assert_eq!(counters.take(a, &limits).unwrap_err(), Refusal::Address);
        let _third = counters.take(b, &limits).unwrap();
        assert_eq!(counters.take(b, &limits).unwrap_err(), Refusal::Server);
        assert_eq!(counters.open(), 3);
        drop(first);
        assert_eq!(counters.open(), 2);
        let _again = counters.take(a, &limits).unwrap();
        assert_eq!(counters.refused(), 2);
        assert!(
            counters
                .render()
                .contains("http_connections_refused_total{cap=\"address\"} 1")
        );
    }

    #[test]
    fn a_connection_expires_by_what_it_is_doing() {
        let limits = ConnectionLimits {
            header_read_timeout: Duration::ZERO,
            idle_timeout: Duration::from_secs(3600),
            ..ConnectionLimits::default()
        };
        let activity = Arc::new(Activity::new());
        assert_eq!(activity.expired(&limits), Some(Expiry::Header));
        let request = activity.request_started();
        assert_eq!(activity.expired(&limits), None);
        drop(request);
        assert_eq!(activity.expired(&limits), None, "idle, not yet an hour");
        activity.read_bytes();
        assert_eq!(activity.expired(&limits), Some(Expiry::Header));
    }

    #[test]
    fn the_cap_fits_under_the_file_limit() {
        let limits = ConnectionLimits::default();
        assert_eq!(limits.fitted_to(1_000_000, 256), (limits, false));
        let (fitted, lowered) = limits.fitted_to(1024, 256);
        assert!(lowered);
        assert_eq!(fitted.max_connections, 768);
        assert_eq!(fitted.max_connections_per_address, 256);
    }
}
