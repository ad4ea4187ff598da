//! The scanner rules a worker scans with: the built-in pack plus the host's rules from the store,
//! read again in the background and swapped in whole, so a scan never waits for the store or
//! for a compile.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use auto_swe_agents::PatternsProvider;
use auto_swe_scanners::{CompiledPatterns, SourcePatterns, builtin_patterns, compile_with_source};
use auto_swe_store::{Store, StoreError, StoredPattern};
use tokio::task::JoinHandle;

/// How often a worker reads the host's rules again; a write through the server's API is seen by
/// its own workers at once and by other processes within this time.
pub const PATTERN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// The rules scans use now, refreshed from the store.
///
/// Before the first successful read the built-in pack runs alone, marked `load-failed` so each
/// scan reports itself incomplete. After that a failed read keeps the last set read: the host's
/// rules stay in force through a store outage, and the failure is logged.
pub struct LivePatterns {
    store: Store,
    state: RwLock<Loaded>,
    /// Serializes refreshes, so two racing ones never swap an older read over a newer one.
    refreshing: tokio::sync::Mutex<()>,
}

struct Loaded {
    /// The host rows the current set was compiled from; `None` before the first read.
    rows: Option<Vec<StoredPattern>>,
    set: Arc<CompiledPatterns>,
}

impl std::fmt::Debug for LivePatterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LivePatterns").finish_non_exhaustive()
    }
}

impl LivePatterns {
    /// Rules over `store`, read and compiled once now, off the async threads. When the store
    /// cannot be read, the built-in pack runs alone, marked `load-failed` so each scan reports
    /// itself incomplete, until a [`LivePatterns::refresh`] reads it.
    pub async fn load(store: Store) -> Arc<Self> {
        let read = store.list_patterns().await;
        let (rows, set) = match read {
            Ok(rows) => {
                let source = source_of(&rows);
                (
                    Some(rows),
                    compiled(move || compile_with_source(source)).await,
                )
            }
            Err(error) => {
                tracing::warn!(%error, "scanner rules could not be read; built-in rules only for now");
                let fallback =
                    compiled(|| CompiledPatterns::compile(builtin_patterns()).with_load_failure());
                (None, fallback.await)
            }
        };
        Arc::new(Self {
            store,
            state: RwLock::new(Loaded {
                rows,
                set: Arc::new(set),
            }),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// Reads the host's rules and, when they changed, compiles them (off the async threads) and
    /// swaps the new set in. Returns whether the set changed.
    ///
    /// # Errors
    /// The store could not be read; the current set stays.
    #[tracing::instrument(level = "debug", skip_all, err)]
    pub async fn refresh(&self) -> Result<bool, StoreError> {
        let _one_at_a_time = self.refreshing.lock().await;
        let rows = self.store.list_patterns().await?;
        if self.read_state(|loaded| loaded.rows.as_ref() == Some(&rows)) {
            return Ok(false);
        }
        let source = source_of(&rows);
        let set = compiled(move || compile_with_source(source)).await;
        let problems = set.problems().len();
        let mut state = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *state = Loaded {
            rows: Some(rows),
            set: Arc::new(set),
        };
        tracing::info!(problems, "scanner rules reloaded");
        Ok(true)
    }

    /// Refreshes now and then every `interval` until the returned task is aborted (or the last
    /// other holder of `self` is gone).
    #[must_use]
    pub fn spawn_refresh(self: &Arc<Self>, interval: Duration) -> JoinHandle<()> {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(live) = weak.upgrade() else {
                    return;
                };
                if let Err(error) = live.refresh().await {
                    tracing::warn!(%error, "scanner rules could not be read; the last set stays");
                }
            }
        })
    }

    fn read_state<T>(&self, read: impl FnOnce(&Loaded) -> T) -> T {
        read(
            &self
                .state
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// The host's rows as the scanners' source (a disabled row with a built-in's id switches it off).
fn source_of(rows: &[StoredPattern]) -> SourcePatterns {
    SourcePatterns::new(
        rows.iter().map(|row| row.pattern.clone()).collect(),
        Vec::new(),
    )
}

/// Compiles off the async threads; a compile that panicked panics here too.
async fn compiled(compile: impl FnOnce() -> CompiledPatterns + Send + 'static) -> CompiledPatterns {
    match tokio::task::spawn_blocking(compile).await {
        Ok(set) => set,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

impl PatternsProvider for LivePatterns {
    fn patterns(&self) -> Arc<CompiledPatterns> {
        self.read_state(|loaded| Arc::clone(&loaded.set))
    }
}
