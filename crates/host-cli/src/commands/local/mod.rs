//! Local mode: the whole system in this process on embedded defaults — a `SQLite` store under
//! the auto-swe home (or the store `AUTO_SWE_STORE_URL` names), a `local` or `docker`
//! workspace backend, models from `--model` with keys from the environment (or the demo's
//! recorded answers), the local SCM and local CI.

pub(crate) mod inspect;
pub(crate) mod pr;
pub(crate) mod prerequisites;
mod progress;
pub(crate) mod resolve;
pub(crate) mod run;
pub(crate) mod temporal;
mod web;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use auto_swe_models::{
    Cassette, ModelClient, ModelError, PriceCatalog, ProviderClient, ReplayClient, Tier,
};
use auto_swe_sandbox::{DockerBackend, SandboxChoice, SandboxSettings, WorkspaceBackend};
use auto_swe_store::{Keyring, Store, StoreConfig};
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{
    DriveEnd, DurableEngine, EmbeddedEngine, LivePatterns, LocalCi, LocalScm,
    PATTERN_REFRESH_INTERVAL, Reaper, ReaperConfig, SingleModel, StepEffects, Worker, WorkerConfig,
    WorkerServices, WorkspaceEgress, WorkspaceTemplate,
};

use crate::commands::models::{ClientRequest, client_config};

/// The store URL override.
pub(crate) const STORE_URL_ENV: &str = "AUTO_SWE_STORE_URL";

/// The model a run names when it replays the demo's recorded answers.
pub(crate) const DEMO_MODEL: &str = "replay/demo";

/// How long a local worker's lease lasts unless `auto-swe worker --lease` says otherwise.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// `--sandbox`: the backends workspaces run on from this host (a `kubernetes` cluster is the
/// server's, `pool.sandbox`).
pub(crate) fn host_sandbox() -> impl clap::builder::TypedValueParser<Value = SandboxChoice> {
    crate::commands::sandbox::sandbox_choice(&[
        SandboxChoice::Auto,
        SandboxChoice::Docker,
        SandboxChoice::Local,
    ])
}

/// The worker's services over `store` in this process: `sandbox` workspaces, every agent on
/// `model`, the local SCM under `home`, and the store's scanner rules.
pub(crate) async fn services(
    home: &Path,
    store: &Store,
    sandbox: SandboxChoice,
    model: &str,
) -> anyhow::Result<Arc<WorkerServices>> {
    let client = model_client(model)?;
    let (backend, settings) = backend(sandbox, home).await?;
    let local_scm = scm(home, store);
    // The store's own scanner rules (an admin's, through the server) join the built-in
    // ones, read again every half minute while this process runs.
    let patterns = LivePatterns::load(store.clone()).await;
    drop(patterns.spawn_refresh(PATTERN_REFRESH_INTERVAL));
    let mut workspaces = WorkspaceTemplate::new(
        backend,
        settings.image.clone(),
        settings.local_root.clone(),
        settings.limits,
    );
    if let Some(egress) = workspace_egress(&crate::config::load()?.workspaces)? {
        workspaces = workspaces.with_egress(egress);
    }
    let services = Arc::new(WorkerServices {
        store: store.clone(),
        workspaces,
        models: Arc::new(SingleModel::new(client)),
        prices: PriceCatalog::builtin(),
        scm: Arc::new(local_scm.clone()),
        patterns,
        git: LocalGit::new(),
        tier: Tier::Standard,
    });
    apply_budget(&local_scm, store).await?;
    Ok(services)
}

/// The runtime local-mode commands run on.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The auto-swe home: `$AUTO_SWE_HOME`, else `~/.auto-swe`.
pub(crate) fn home() -> anyhow::Result<PathBuf> {
    crate::config::home()
        .context("set AUTO_SWE_HOME (or HOME) to say where auto-swe keeps its state")
}

/// The key that seals the store's secrets: 32 random bytes in `keyring.key`, made on first use
/// and readable by the owner only. The key is written whole to a file of this process's own and
/// then linked into place, so two processes starting at once agree on one key and neither reads
/// a half-written one.
fn keyring(home: &Path) -> anyhow::Result<Keyring> {
    // A store shared with servers and other hosts is sealed with their key.
    if let Some(hex) = std::env::var(STORE_KEY_ENV).ok().filter(|k| !k.is_empty()) {
        return Keyring::from_hex(1, &hex)
            .map_err(|e| anyhow::anyhow!("{STORE_KEY_ENV}: {e} ({})", e.code()));
    }
    let path = home.join("keyring.key");
    let read = |path: &Path| -> anyhow::Result<Keyring> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| anyhow::anyhow!("{} is not a 32-byte key", path.display()))?;
        Ok(Keyring::single(1, key))
    };
    if path.exists() {
        return read(&path);
    }
    let mut bytes = [0_u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom for the store key")?;
    let staged = home.join(format!("keyring.key.{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(&staged)?, &bytes)
        .with_context(|| format!("writing {}", staged.display()))?;
    let linked = std::fs::hard_link(&staged, &path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => Ok(Keyring::single(1, bytes)),
        // Another process made the key first: use its key.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
        Err(e) => Err(e).with_context(|| format!("writing {}", path.display())),
    }
}

/// The shared store key: 64 hex digits, the same variable `auto-swe-server` reads.
pub(crate) const STORE_KEY_ENV: &str = "AUTO_SWE_STORE_KEY";

/// Opens the local store (creating the home and the `SQLite` file on first use).
pub(crate) async fn open_store() -> anyhow::Result<(PathBuf, Store)> {
    let home = home()?;
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let url = std::env::var(STORE_URL_ENV)
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("sqlite://{}", home.join("store.db").display()));
    let store = Store::open(StoreConfig::new(&url, keyring(&home)?))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "the store at {} cannot be opened: {e} ({})",
                crate::config::mask_url(&url),
                e.code()
            )
        })?;
    Ok((home, store))
}

/// The local SCM over `store`, its repositories under the home.
pub(crate) fn scm(home: &Path, store: &Store) -> LocalScm {
    LocalScm::new(store.clone(), LocalGit::new(), home.join("repos"))
}

/// Writes the configured monthly cap (`[budgets] monthlyCents`) onto the `local` org, when
/// one is configured: every launch and model call of local runs is checked against it.
pub(crate) async fn apply_budget(scm: &LocalScm, store: &Store) -> anyhow::Result<()> {
    let Some(cents) = crate::config::load()?.budgets.monthly_cents else {
        return Ok(());
    };
    let org = scm
        .local_org()
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
    store
        .set_org_budget(&org, Some(i64::from(cents)))
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
    Ok(())
}

/// The egress of runs' workspaces as `[workspaces]` sets it: `None` for no network. This
/// binary is the bridge bound into each workspace; the proxies' sockets live under the temporary
/// directory, where the sandbox's account may reach them.
fn workspace_egress(
    settings: &auto_swe_egress::EgressSettings,
) -> anyhow::Result<Option<WorkspaceEgress>> {
    let Some(policy) = settings
        .policy()
        .map_err(|e| anyhow::anyhow!("[workspaces] {e} ({})", e.code()))?
    else {
        return Ok(None);
    };
    let bridge = std::env::current_exe().context("finding this binary")?;
    let sockets = std::env::temp_dir().join("auto-swe-egress");
    Ok(Some(WorkspaceEgress::new(policy, bridge, sockets)))
}

async fn backend(
    choice: SandboxChoice,
    home: &Path,
) -> anyhow::Result<(Arc<dyn WorkspaceBackend>, SandboxSettings)> {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let settings = SandboxSettings::resolve(&|name| std::env::var(name).ok(), cpus)?;
    let state = home.join("workspaces");
    let local = |settings: &SandboxSettings| -> anyhow::Result<Arc<dyn WorkspaceBackend>> {
        Ok(Arc::new(prerequisites::local_backend(settings, &state)?))
    };
    let docker = async |settings: &SandboxSettings| -> anyhow::Result<DockerBackend> {
        let config = settings.docker_config(settings.image.clone())?;
        Ok(DockerBackend::connect(config).await?.protect_path(home))
    };
    let chosen: Arc<dyn WorkspaceBackend> = match choice {
        SandboxChoice::Local => local(&settings)?,
        SandboxChoice::Docker => Arc::new(docker(&settings).await?),
        SandboxChoice::Auto => match docker(&settings).await {
            Ok(engine) if engine.has_image(&settings.image).await => Arc::new(engine),
            _ => local(&settings)?,
        },
        other => anyhow::bail!(
            "--sandbox {other}: this command runs workspaces from this host (auto, docker or \
             local); a Kubernetes cluster is the server's (`pool.sandbox = \"kubernetes\"`)"
        ),
    };
    Ok((chosen, settings))
}

/// The model client a run names: the demo's recorded answers, or a provider's model built by
/// the one client builder (`models::client_config`: key from the environment, endpoint and
/// private hosts from the configuration file).
pub(crate) fn model_client(model: &str) -> anyhow::Result<Arc<dyn ModelClient>> {
    if model == DEMO_MODEL {
        let cassette: Cassette = serde_json::from_str(auto_swe_worker::demo::DEMO_CASSETTE)?;
        return Ok(Arc::new(ReplayClient::new(cassette)?));
    }
    let failed = |e: ModelError| {
        let hint = match &e {
            ModelError::RefusedByPolicy { .. } => {
                "; a private model endpoint is allowed by its exact HOST:PORT in \
                 `[models] privateNetworkHosts` of the configuration file"
            }
            _ => "",
        };
        // The code names the kind; the message alone says what is wrong.
        let what = match &e {
            ModelError::Configuration { message, .. } => message.clone(),
            other => other.to_string(),
        };
        anyhow::anyhow!("{model}: {what}{hint} ({})", e.code())
    };
    let config = client_config(&ClientRequest {
        model,
        api_base: None,
        private_hosts: &[],
    })
    .map_err(failed)?;
    Ok(Arc::new(ProviderClient::new(config).map_err(failed)?))
}

/// Everything a local worker needs.
pub(crate) struct LocalHost {
    pub(crate) store: Store,
    pub(crate) worker: Worker,
    pub(crate) ci: LocalCi,
    /// Ends this store's stranded runs (`auto-swe worker` sweeps with it).
    pub(crate) reaper: Reaper,
}

impl LocalHost {
    /// A worker in this process over the local store, on `sandbox`, running every agent on
    /// `model`.
    pub(crate) async fn open(
        home: &Path,
        store: Store,
        sandbox: SandboxChoice,
        model: &str,
    ) -> anyhow::Result<Self> {
        let lease = crate::config::load()?.worker.lease();
        Self::open_with_lease(home, store, sandbox, model, lease).await
    }

    /// [`Self::open`] with leases of `lease` (renewed every third of it).
    pub(crate) async fn open_with_lease(
        home: &Path,
        store: Store,
        sandbox: SandboxChoice,
        model: &str,
        lease: Duration,
    ) -> anyhow::Result<Self> {
        let services = services(home, &store, sandbox, model).await?;
        let engine = Arc::new(EmbeddedEngine::new(store.clone(), lease));
        let worker_id = format!("cli-{}", std::process::id());
        let reaper = Reaper::new(
            store.clone(),
            Arc::clone(&engine) as Arc<dyn DurableEngine>,
            ReaperConfig::default(),
        );
        let worker = Worker::with_effects(
            engine,
            Arc::new(StepEffects::new(Arc::clone(&services))),
            WorkerConfig::new(worker_id, lease / 3),
        );
        let ci = LocalCi::new(Arc::clone(&services));
        Ok(Self {
            store,
            worker,
            ci,
            reaper,
        })
    }

    /// Drives runnable runs and local CI until nothing moves; returns where `run_id` was left
    /// (`None` when this process did not drive it).
    pub(crate) async fn drive(
        &self,
        run_id: &str,
        progress: &progress::Progress,
    ) -> anyhow::Result<Option<DriveEnd>> {
        let mut last = None;
        loop {
            let driving = self.worker.run_once();
            let report = progress
                .follow(&self.store, run_id, driving)
                .await?
                .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
            if let Some(report) = report {
                if report.run_id == run_id {
                    last = Some(report.end);
                }
                continue;
            }
            let verdicts = self.ci.run_pending().await?;
            for verdict in &verdicts {
                progress.ci_verdict(verdict);
            }
            if verdicts.is_empty() {
                let parked_on = match &last {
                    Some(DriveEnd::Parked(wake)) => Some(wake.signal.as_str()),
                    _ => None,
                };
                progress.settle(&self.store, run_id, parked_on).await?;
                return Ok(last);
            }
        }
    }
}

/// The model a run was launched with (`input.model`), or the demo's.
pub(crate) fn run_model(input: &serde_json::Value) -> String {
    input
        .get("model")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(DEMO_MODEL)
        .to_owned()
}

/// Text from an argument: `-` reads stdin, `@FILE` reads a file, anything else is itself.
pub(crate) fn text_argument(value: &str) -> anyhow::Result<String> {
    if value == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        return Ok(text);
    }
    if let Some(path) = value.strip_prefix('@') {
        return std::fs::read_to_string(path).with_context(|| format!("reading {path}"));
    }
    Ok(value.to_owned())
}
