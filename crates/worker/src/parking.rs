//! Parking: how a run that only waits gives its worker back.
//!
//! A wait that finds no signal does not hold the run while anything else of the run is still
//! working (another fan-out branch's step, say): it waits in memory. Once every in-flight effect
//! of the run is a wait, the first waiter asks to park: the run's effects are suspended (the
//! journaling dispatcher records and makes nothing more), the interpreter is cancelled, and the
//! worker releases the lease with the wake condition instead of completing the run. Nothing the
//! suspended walk did afterwards is recorded, so the run replays to the same wait when it is
//! acquired again, and the wait then finds its signal (or its deadline).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::engine::RunWake;

/// One run's parking state, shared by its worker and its step dispatcher.
#[derive(Debug, Default)]
pub struct Parking {
    active: AtomicUsize,
    changed: Notify,
    requested: Mutex<Option<RunWake>>,
    suspended: CancellationToken,
}

/// Counts one effect as working until dropped.
#[derive(Debug)]
pub struct Working<'a> {
    parking: &'a Parking,
}

impl Drop for Working<'_> {
    fn drop(&mut self) {
        self.parking.active.fetch_sub(1, Ordering::AcqRel);
        self.parking.changed.notify_waiters();
    }
}

impl Parking {
    /// Nothing working, nothing requested.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks one effect (a step or shell dispatch) as working for as long as the guard lives.
    #[must_use]
    pub fn working(&self) -> Working<'_> {
        self.active.fetch_add(1, Ordering::AcqRel);
        Working { parking: self }
    }

    /// Whether no effect but waits is in flight.
    #[must_use]
    pub fn is_quiescent(&self) -> bool {
        self.active.load(Ordering::Acquire) == 0
    }

    /// Resolves when an effect stops working (or a park is requested).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Asks to park on `wake`; the first request wins. Fires [`Self::suspended`].
    pub fn request(&self, wake: RunWake) {
        let mut requested = self
            .requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if requested.is_none() {
            tracing::info!(signal = %wake.signal, deadline = ?wake.deadline, "run parks");
            *requested = Some(wake);
        }
        drop(requested);
        self.suspended.cancel();
        self.changed.notify_waiters();
    }

    /// The park asked for, if any.
    #[must_use]
    pub fn requested(&self) -> Option<RunWake> {
        self.requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Fires once a park is requested: from then on the run's effects are neither made nor
    /// recorded.
    #[must_use]
    pub fn suspended(&self) -> &CancellationToken {
        &self.suspended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiescent_only_when_nothing_works_and_first_request_wins() {
        let parking = Parking::new();
        assert!(parking.is_quiescent());
        let one = parking.working();
        let two = parking.working();
        assert!(!parking.is_quiescent());
        drop(one);
        assert!(!parking.is_quiescent());
        drop(two);
        assert!(parking.is_quiescent());
        assert!(!parking.suspended().is_cancelled());
        parking.request(RunWake {
            signal: "ci".to_owned(),
            deadline: None,
        });
        parking.request(RunWake {
            signal: "later".to_owned(),
            deadline: None,
        });
        assert!(parking.suspended().is_cancelled());
        assert_eq!(parking.requested().unwrap().signal, "ci");
    }
}
