//! The server's worker pool: N workers over the shared queue, with a run reaper and local CI,
//! all stopped by one token. With `workers = 0` the server only answers the API and runs wait
//! for workers elsewhere (`auto-swe worker` against the same store).

use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::PatternsProvider;
use auto_swe_models::{
    ApiKey, Cassette, ClientConfig, ModelClient, ModelSpec, PriceCatalog, ProviderClient,
    ReplayClient, Tier,
};
use auto_swe_sandbox::kubernetes::KubernetesBackend;
use auto_swe_sandbox::{
    DockerBackend, LocalBackend, SandboxChoice, SandboxSettings, WorkspaceBackend,
};
use auto_swe_store::Store;
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{
    DurableEngine, EmbeddedEngine, LocalCi, LocalScm, Reaper, ReaperConfig, Scm, SingleModel,
    StepEffects, Worker, WorkerConfig, WorkerServices, WorkspaceEgress, WorkspaceTemplate,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::PoolConfig;
use crate::state::WorkerGauge;

/// The model whose recorded answers the demo replays.
pub const DEMO_MODEL: &str = "replay/demo";

/// Why the pool cannot start.
#[derive(Debug, thiserror::Error)]
#[error("worker pool: {0}")]
pub struct PoolError(String);

/// A started pool; [`WorkerPool::stop`] ends it.
#[derive(Debug)]
pub struct WorkerPool {
    tasks: JoinSet<()>,
    stop: CancellationToken,
}

/// The engine a pool drives runs through.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum PoolEngine {
    /// The store's queue and journal.
    #[default]
    Embedded,
    /// A Temporal cluster: the pool's workers poll its task queue, and the pool relays the
    /// store's signals and stop requests to it.
    #[cfg(feature = "temporal")]
    Temporal {
        /// The host's client.
        engine: Box<auto_swe_engine_temporal::TemporalEngine>,
    },
}

impl WorkerPool {
    /// Starts `config.workers` workers (and, when there is at least one, a reaper and local CI)
    /// over `store`, each counted in `gauge`, scanning with `patterns`, on the embedded engine.
    pub async fn start(
        store: &Store,
        config: &PoolConfig,
        gauge: &WorkerGauge,
        scm: Option<Arc<dyn Scm>>,
        patterns: Arc<dyn PatternsProvider>,
    ) -> Result<Self, PoolError> {
        Self::start_on(store, config, gauge, scm, patterns, &PoolEngine::Embedded).await
    }

    /// [`start`](Self::start) on `engine`.
    pub async fn start_on(
        store: &Store,
        config: &PoolConfig,
        gauge: &WorkerGauge,
        scm: Option<Arc<dyn Scm>>,
        patterns: Arc<dyn PatternsProvider>,
        engine: &PoolEngine,
    ) -> Result<Self, PoolError> {
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        if config.workers == 0 {
            return Ok(Self { tasks, stop });
        }
        let services = services(store, config, scm, patterns).await?;
        let lease = Duration::from_secs(config.lease_seconds);
        #[cfg(not(feature = "temporal"))]
        let PoolEngine::Embedded = engine;
        #[cfg(feature = "temporal")]
        if let PoolEngine::Temporal { engine } = engine {
            crate::temporal_pool::start(store, config, gauge, &services, engine, &stop, &mut tasks);
            let ci = LocalCi::new(services);
            let token = stop.clone();
            tasks.spawn(async move { ci.serve(token).await });
            return Ok(Self { tasks, stop });
        }
        let engine = Arc::new(EmbeddedEngine::new(store.clone(), lease));
        for index in 0..config.workers {
            let worker = Worker::with_effects(
                Arc::clone(&engine) as Arc<dyn DurableEngine>,
                Arc::new(StepEffects::new(Arc::clone(&services))),
                WorkerConfig::new(format!("server-{}-{index}", std::process::id()), lease / 3),
            );
            let running = gauge.started();
            let token = stop.clone();
            tasks.spawn(async move {
                let _running = running;
                if let Err(error) = worker.serve(token).await {
                    tracing::error!(%error, code = error.code(), "a worker stopped");
                }
            });
        }
        let reaper = Reaper::new(
            store.clone(),
            engine as Arc<dyn DurableEngine>,
            ReaperConfig::default(),
        );
        let token = stop.clone();
        tasks.spawn(async move { reaper.serve(token).await });
        let ci = LocalCi::new(services);
        let token = stop.clone();
        tasks.spawn(async move { ci.serve(token).await });
        Ok(Self { tasks, stop })
    }

    /// Stops every task and waits for them: each worker releases its run's lease at its next
    /// step boundary.
    pub async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }

    /// [`stop`](Self::stop), waiting at most `grace`: the tasks still running then are aborted
    /// (a run such a worker held is taken again once its lease lapses). Returns how many were.
    pub async fn stop_within(mut self, grace: Duration) -> usize {
        self.stop.cancel();
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            tokio::select! {
                next = self.tasks.join_next() => if next.is_none() { return 0 },
                () = tokio::time::sleep_until(deadline) => {
                    let aborted = self.tasks.len();
                    self.tasks.abort_all();
                    while self.tasks.join_next().await.is_some() {}
                    return aborted;
                }
            }
        }
    }
}

/// The workers' services; pull requests go to `scm` (GitHub) when given, else to the local SCM
/// under the state directory.
async fn services(
    store: &Store,
    config: &PoolConfig,
    scm: Option<Arc<dyn Scm>>,
    patterns: Arc<dyn PatternsProvider>,
) -> Result<Arc<WorkerServices>, PoolError> {
    let client = model_client(&config.model)?;
    let (backend, settings) = backend(config).await?;
    let mut workspaces = WorkspaceTemplate::new(
        backend,
        settings.image.clone(),
        settings.local_root.clone(),
        settings.limits,
    );
    if let Some(policy) = config
        .workspaces
        .policy()
        .map_err(|e| PoolError(format!("pool.workspaces: {e} ({})", e.code())))?
    {
        let egress = if config.sandbox == SandboxChoice::Kubernetes {
            // A pod cannot share a Unix socket: it reaches its proxy here over TCP, and its
            // NetworkPolicy lets it reach this pod's address only.
            let kubernetes = &config.kubernetes;
            let advertise = kubernetes
                .proxy_address
                .ok_or_else(|| PoolError("pool.kubernetes.proxyAddress is unset".to_owned()))?;
            WorkspaceEgress::over_tcp(policy, kubernetes.proxy_listen, advertise)
        } else {
            // This binary is the bridge bound into each workspace (see `main`).
            let bridge = std::env::current_exe()
                .map_err(|e| PoolError(format!("finding this binary: {e}")))?;
            WorkspaceEgress::new(policy, bridge, config.state_dir.join("egress"))
        };
        workspaces = workspaces.with_egress(egress);
    }
    Ok(Arc::new(WorkerServices {
        store: store.clone(),
        workspaces,
        models: Arc::new(SingleModel::new(client)),
        prices: PriceCatalog::builtin(),
        scm: scm.unwrap_or_else(|| {
            Arc::new(LocalScm::new(
                store.clone(),
                LocalGit::new(),
                config.state_dir.join("repos"),
            ))
        }),
        patterns,
        git: LocalGit::new(),
        tier: Tier::Standard,
    }))
}

/// The model client for `model`: the demo's recorded answers, or a provider's model with its
/// key from the environment (never from configuration text).
fn model_client(model: &str) -> Result<Arc<dyn ModelClient>, PoolError> {
    if model == DEMO_MODEL {
        let cassette: Cassette = serde_json::from_str(auto_swe_worker::demo::DEMO_CASSETTE)
            .map_err(|e| PoolError(format!("the demo's answers: {e}")))?;
        return Ok(Arc::new(
            ReplayClient::new(cassette).map_err(|e| PoolError(e.to_string()))?,
        ));
    }
    let spec = ModelSpec::parse(model).map_err(|e| PoolError(format!("{model}: {e}")))?;
    let variable = spec.provider().key_variable();
    let key = std::env::var(variable).unwrap_or_default();
    if key.is_empty() {
        return Err(PoolError(format!("set {variable} to run {model}")));
    }
    let client = ProviderClient::new(ClientConfig::new(spec, ApiKey::new(key)))
        .map_err(|e| PoolError(format!("{model}: {e}")))?;
    Ok(Arc::new(client))
}

async fn backend(
    config: &PoolConfig,
) -> Result<(Arc<dyn WorkspaceBackend>, SandboxSettings), PoolError> {
    let state_dir = config.state_dir.as_path();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let settings = SandboxSettings::resolve(&|name| std::env::var(name).ok(), cpus)
        .map_err(|e| PoolError(e.to_string()))?;
    let local = |settings: &SandboxSettings| -> Result<Arc<dyn WorkspaceBackend>, PoolError> {
        let config = settings
            .local_config(state_dir.join("workspaces"))
            .map_err(|e| PoolError(e.to_string()))?;
        Ok(Arc::new(
            LocalBackend::new(config).map_err(|e| PoolError(e.to_string()))?,
        ))
    };
    let docker = async |settings: &SandboxSettings| -> Result<DockerBackend, PoolError> {
        let config = settings
            .docker_config(settings.image.clone())
            .map_err(|e| PoolError(e.to_string()))?;
        Ok(DockerBackend::connect(config)
            .await
            .map_err(|e| PoolError(e.to_string()))?
            .protect_path(state_dir))
    };
    let chosen: Arc<dyn WorkspaceBackend> = match config.sandbox {
        SandboxChoice::Local => local(&settings)?,
        SandboxChoice::Kubernetes => {
            let kubernetes = &config.kubernetes;
            Arc::new(
                KubernetesBackend::connect(
                    kubernetes.backend_config(config.proxied()),
                    kubernetes.kubeconfig.as_deref(),
                )
                .await
                .map_err(|e| PoolError(e.to_string()))?,
            )
        }
        SandboxChoice::Docker => Arc::new(docker(&settings).await?),
        _ => match docker(&settings).await {
            Ok(engine) if engine.has_image(&settings.image).await => Arc::new(engine),
            _ => local(&settings)?,
        },
    };
    Ok((chosen, settings))
}
