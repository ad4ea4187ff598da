//! A leased run's pinned runtimes as the agent library's `RuntimePinStore`.

use std::collections::BTreeMap;
use std::sync::Arc;

use auto_swe_agents::{LibraryStoreError, Runtime, RuntimePinStore};

use crate::StoreBackend;
use crate::records::queue::LeaseToken;

/// The runtime pins of the run a lease holds: reads go to any run, and a first-use pin is
/// written only to the leased run, through the same fence as every other execution write (a
/// worker that lost its lease pins nothing).
#[derive(Debug, Clone)]
pub struct FencedRuntimePins {
    store: Arc<dyn StoreBackend>,
    token: LeaseToken,
}

impl FencedRuntimePins {
    pub(crate) fn new(store: Arc<dyn StoreBackend>, token: LeaseToken) -> Self {
        Self { store, token }
    }
}

#[async_trait::async_trait]
impl RuntimePinStore for FencedRuntimePins {
    async fn load(
        &self,
        run_id: &str,
    ) -> Result<BTreeMap<String, Option<Runtime>>, LibraryStoreError> {
        Ok(self.store.runtime_pins(run_id).await?)
    }

    async fn compare_and_set(
        &self,
        run_id: &str,
        expected: &BTreeMap<String, Option<Runtime>>,
        next: BTreeMap<String, Option<Runtime>>,
    ) -> Result<bool, LibraryStoreError> {
        if run_id != self.token.run_id {
            return Err(LibraryStoreError::Invalid(format!(
                "the lease held is for run {}, not {run_id}",
                self.token.run_id
            )));
        }
        let written = self
            .store
            .compare_and_set_runtime_pins(&self.token, expected, &next)
            .await?;
        tracing::debug!(run_id, written, "runtime pins compare-and-set");
        Ok(written)
    }
}
