//! The one source of time for the crates that read it. It answers the two questions they ask:
//! how much time has passed (`now`, monotonic: cache lifetimes, deadlines) and what time it is
//! (`wall`: record timestamps, billing months). Tests move both together with [`ManualClock`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// A source of time.
///
/// Contract for implementors: `now` never goes backwards; `wall` is the calendar time at the
/// same moment.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant, for measuring elapsed time.
    fn now(&self) -> Instant;
    /// The current calendar time.
    fn wall(&self) -> SystemTime;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }

    fn wall(&self) -> SystemTime {
        (**self).wall()
    }
}

/// The system's clocks: the process's monotonic clock and the wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to; both readings advance together. Clones share the
/// same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    start: Instant,
    wall_start: SystemTime,
    elapsed: Arc<Mutex<Duration>>,
}

impl ManualClock {
    /// A clock whose instant starts at `start` and whose calendar time starts at the system's.
    #[must_use]
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            wall_start: SystemTime::now(),
            elapsed: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// A clock whose calendar time starts at `wall`.
    #[must_use]
    pub fn at_wall(wall: SystemTime) -> Self {
        Self {
            start: Instant::now(),
            wall_start: wall,
            elapsed: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let mut elapsed = self.elapsed.lock().unwrap_or_else(PoisonError::into_inner);
        *elapsed = elapsed.saturating_add(by);
    }

    fn elapsed(&self) -> Duration {
        *self.elapsed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + self.elapsed()
    }

    fn wall(&self) -> SystemTime {
        self.wall_start + self.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_both_readings_and_its_clones() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let clock = ManualClock::at_wall(wall);
        let shared = clock.clone();
        let before = clock.now();
        shared.advance(Duration::from_millis(1_500));
        assert_eq!(clock.now() - before, Duration::from_millis(1_500));
        assert_eq!(clock.wall(), wall + Duration::from_millis(1_500));
        assert_eq!(shared.wall(), clock.wall());
    }
}
