//! The worker's services for tests: a `local` sandbox backend and services over a store.

use std::path::Path;
use std::sync::Arc;

use auto_swe_agents::StaticPatterns;
use auto_swe_models::{ModelClient, PriceCatalog, Tier};
use auto_swe_sandbox::{LocalBackend, LocalConfig, LocalRoot, ResourceLimits, WorkspaceBackend};
use auto_swe_store::Store;
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{LocalScm, SingleModel, WorkerServices, WorkspaceTemplate};

/// A `local` backend, or `None` when bubblewrap is missing (a failure under
/// `AUTO_SWE_REQUIRE_BWRAP=1`).
pub(crate) fn local_backend(state: &Path) -> Option<(Arc<dyn WorkspaceBackend>, LocalRoot)> {
    let root = std::env::var("AUTO_SWE_ROOTFS")
        .ok()
        .filter(|r| !r.is_empty())
        .map_or(LocalRoot::HostSystem, |r| LocalRoot::Rootfs(r.into()));
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.to_path_buf();
    match LocalBackend::new(config) {
        Ok(backend) => Some((Arc::new(backend), root)),
        Err(error) => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
                "bubblewrap required: {error}"
            );
            eprintln!("skipping: {error}");
            None
        }
    }
}

/// Everything a worker needs, over `store`, with the model `client`.
pub(crate) fn services_with(
    store: Store,
    backend: Arc<dyn WorkspaceBackend>,
    root: LocalRoot,
    repos: &Path,
    client: Arc<dyn ModelClient>,
) -> Arc<WorkerServices> {
    let git = LocalGit::new();
    Arc::new(WorkerServices {
        store: store.clone(),
        workspaces: WorkspaceTemplate::new(
            backend,
            "unused".to_owned(),
            root,
            ResourceLimits::new(512 * 1024 * 1024, 1_000_000_000, 256),
        ),
        models: Arc::new(SingleModel::new(client)),
        prices: PriceCatalog::builtin(),
        scm: Arc::new(LocalScm::new(store, git.clone(), repos.to_path_buf())),
        patterns: Arc::new(StaticPatterns::builtin()),
        git,
        tier: Tier::Standard,
    })
}
