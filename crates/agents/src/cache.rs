//! The resolver's short-lived cache: answers keyed by everything that changes them, kept for a
//! time-to-live read from an injected clock.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use auto_swe_scanners::Clock;

/// Default time an answer is kept.
pub const DEFAULT_CONFIG_CACHE_TTL: Duration = Duration::from_secs(5);
/// Most answers held; past it, expired answers are dropped, then everything.
pub const CONFIG_CACHE_MAX_ENTRIES: usize = 4_096;

pub(crate) struct TtlCache<K, V> {
    clock: Arc<dyn Clock>,
    ttl: Duration,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    pub(crate) fn new(clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self {
            clock,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let now = self.clock.now();
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, v)| v.clone())
    }

    pub(crate) fn put(&self, key: K, value: V) {
        let now = self.clock.now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= CONFIG_CACHE_MAX_ENTRIES {
            entries.retain(|_, (at, _)| now.saturating_duration_since(*at) < self.ttl);
            if entries.len() >= CONFIG_CACHE_MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (now, value));
    }

    pub(crate) fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}
