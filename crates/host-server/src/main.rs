//! `auto-swe-server`: the API and a worker pool over one store.

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;

use auto_swe_agents::PatternsProvider;
use auto_swe_server::config::ServerConfig;
use auto_swe_server::connection_limits::open_file_limit;
use auto_swe_server::github::GitHub;
use auto_swe_server::{
    AppState, Authenticator, ConnectionCounters, ConnectionLimits, PoolEngine, WorkerGauge,
    WorkerPool, bootstrap_admin, router,
};
use auto_swe_store::{Keyring, SecretString, Store, StoreConfig};
use auto_swe_telemetry::{
    Metrics, OtlpConfig, SdkTracerProvider, metrics_layer, otel_layer, otlp_provider,
};
use auto_swe_worker::{LivePatterns, PATTERN_REFRESH_INTERVAL, RunStarter, Scm};
use clap::Parser;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// mimalloc rather than the system allocator: a request builds and drops many small JSON
/// values on several threads, where glibc's allocator spent a fifth of the server's time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Serve the auto-swe API and drive runs.
#[derive(Debug, Parser)]
#[command(name = "auto-swe-server", version)]
struct Args {
    /// A TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Worker tasks in this process (0: API only); overrides the file and `AUTO_SWE_WORKERS`.
    #[arg(long)]
    workers: Option<usize>,
}

fn main() -> ExitCode {
    // Bound into a proxied workspace, this binary is that workspace's bridge to its proxy.
    if auto_swe_sandbox::bridge::is_bridge_invocation() {
        return auto_swe_sandbox::bridge::bridge_main(std::env::args_os());
    }
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("auto-swe-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Metrics::new();
    let installed = match runtime.block_on(async { install_telemetry(&metrics) }) {
        Ok(installed) => installed,
        Err(error) => {
            eprintln!("auto-swe-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(serve(args, metrics));
    if let Some(provider) = installed {
        // Sends what the exporter still holds.
        let _ = runtime.block_on(tokio::task::spawn_blocking(move || provider.shutdown()));
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("auto-swe-server: {error}");
            ExitCode::FAILURE
        }
    }
}

fn store_key(config: &ServerConfig) -> Result<Keyring, String> {
    let text = match &config.store_key_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("store key file {}: {e}", path.display()))?,
        None => std::env::var("AUTO_SWE_STORE_KEY")
            .map_err(|_| "set AUTO_SWE_STORE_KEY (64 hex digits) or storeKeyFile".to_owned())?,
    };
    Keyring::from_hex(1, &text).map_err(|e| format!("the store key: {e} ({})", e.code()))
}

/// JSON logs on stderr (`AUTO_SWE_LOG`, default `info`), the metrics layer, and OTLP export
/// when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Call inside the runtime.
fn install_telemetry(metrics: &Metrics) -> Result<Option<SdkTracerProvider>, String> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AUTO_SWE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .json()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let provider = OtlpConfig::from_env()
        .map_err(|e| format!("{e} ({})", e.code()))?
        .map(|config| otlp_provider(&config).map_err(|e| format!("{e} ({})", e.code())))
        .transpose()?;
    let export = provider.as_ref().map(otel_layer);
    tracing_subscriber::registry()
        .with(logs)
        .with(metrics_layer(metrics))
        .with(export)
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(provider)
}

/// The engine the configuration names, and what starts runs on it (none: the embedded queue).
#[cfg_attr(
    not(feature = "temporal"),
    expect(clippy::unused_async, reason = "only the Temporal engine connects")
)]
async fn engine(
    config: &ServerConfig,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<(PoolEngine, Option<Arc<dyn RunStarter>>), String> {
    match config.engine {
        #[cfg(feature = "temporal")]
        auto_swe_store::RunEngine::Temporal => {
            let settings = config
                .temporal
                .settings(env)
                .await
                .map_err(|e| e.to_string())?;
            let engine = auto_swe_engine_temporal::TemporalEngine::connect(settings)
                .await
                .map_err(|e| e.to_string())?;
            tracing::info!(settings = ?engine.settings(), "runs start on Temporal");
            let starter: Arc<dyn RunStarter> = Arc::new(engine.clone());
            Ok((
                PoolEngine::Temporal {
                    engine: Box::new(engine),
                },
                Some(starter),
            ))
        }
        _ => {
            let _ = env;
            Ok((PoolEngine::Embedded, None))
        }
    }
}

async fn serve(args: Args, metrics: Metrics) -> Result<(), String> {
    let env = |name: &str| std::env::var(name).ok();
    let mut config = ServerConfig::load(args.config.as_deref(), &env)
        .map_err(|e| format!("{e} ({})", e.code()))?;
    if let Some(workers) = args.workers {
        config.pool.workers = workers;
    }
    let url = config
        .store_url
        .clone()
        .ok_or("set AUTO_SWE_STORE_URL (or storeUrl in the configuration file)")?;
    let store = Store::open(StoreConfig::new(&url, store_key(&config)?))
        .await
        .map_err(|e| format!("the store cannot be opened: {e} ({})", e.code()))?;
    if let Some(email) = &config.bootstrap.admin_email {
        bootstrap_admin(&store, email, config.bootstrap.token_file.as_deref())
            .await
            .map_err(|e| e.to_string())?;
    }
    let secret = std::env::var("AUTO_SWE_JWT_SECRET")
        .ok()
        .filter(|s| !s.is_empty())
        .map(SecretString::new);
    let auth = Authenticator::new(store.clone(), &config.jwt, secret).map_err(|e| e.to_string())?;
    let github = match &config.github {
        Some(section) => Some(
            GitHub::open(section, &store, &config.pool.state_dir, &env)
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    let gauge = WorkerGauge::new(config.pool.workers);
    // The host's scanner rules, read now and every half minute; a write through the API
    // refreshes them at once.
    let patterns = LivePatterns::load(store.clone()).await;
    let refresher = patterns.spawn_refresh(PATTERN_REFRESH_INTERVAL);
    let (engine, starter) = engine(&config, &env).await?;
    let pool = WorkerPool::start_on(
        &store,
        &config.pool,
        &gauge,
        github.as_ref().map(|g| Arc::clone(&g.scm) as Arc<dyn Scm>),
        Arc::clone(&patterns) as Arc<dyn PatternsProvider>,
        &engine,
    )
    .await
    .map_err(|e| e.to_string())?;
    // Connections that break the repository rules are named at start (launches refuse them).
    let root = config.pool.repositories_root();
    if let Err(error) = tokio::fs::create_dir_all(&root).await {
        tracing::warn!(%error, root = %root.display(), "the repositories root cannot be made");
    }
    match auto_swe_server::repositories::report(&store, Some(&root)).await {
        Ok(problems) => {
            for problem in &problems {
                tracing::error!(%problem, "a connection breaks the repository rules; runs on it are refused");
                eprintln!("auto-swe-server: {problem}");
            }
        }
        Err(error) => tracing::warn!(%error, "the repository check could not run"),
    }
    let mut state = AppState::new(store, auth, gauge, github)
        .with_patterns(patterns)
        .with_repositories_root(root);
    if let Some(starter) = starter {
        state = state.with_starter(starter);
    }
    if let Some(url) = &config.public_url {
        state = state.with_public_url(url.trim_end_matches('/'));
    }
    let served = listen(&config, state, metrics, pool).await;
    refresher.abort();
    served
}

/// The connection limits the configuration names, `maxConnections` fitted under the process's
/// open-file limit.
fn connection_limits(config: &ServerConfig) -> ConnectionLimits {
    let Some(open_files) = open_file_limit() else {
        return config.connection_limits();
    };
    let (fitted, lowered) = config.connection_limits().fitted_to(open_files, 256);
    if lowered {
        tracing::warn!(
            open_files,
            configured = config.max_connections,
            max_connections = fitted.max_connections,
            "maxConnections was lowered to fit under the open-file limit"
        );
    }
    fitted
}

/// Cancels `shutdown` on SIGTERM or Ctrl-C.
fn cancel_on_signal(shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
        tracing::info!("shutting down");
        shutdown.cancel();
    });
}

/// Serves the API (and `/metrics`, beside it or on `metricsListen`) until a signal, then
/// drains the connections and stops the workers, both within the grace period.
/// How many connections the kernel queues before the server accepts them. A flood of new
/// connections (thousands at once) waits in this queue; past it the kernel drops handshakes,
/// and a client whose handshake it dropped while it believes itself connected would sit outside
/// every timeout of the server's. The kernel caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `address` with [`LISTEN_BACKLOG`].
fn bind(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

async fn listen(
    config: &ServerConfig,
    state: AppState,
    metrics: Metrics,
    pool: WorkerPool,
) -> Result<(), String> {
    let counters = ConnectionCounters::default();
    let limits = connection_limits(config);
    let metrics = auto_swe_server::serve::metrics_router(metrics, counters.clone());
    let mut app = router(state, config.body_limit_bytes, config.request_timeout());
    let metrics_listener = if let Some(address) = config.metrics_listen {
        Some(bind(address).map_err(|e| format!("listening for /metrics on {address}: {e}"))?)
    } else {
        app = app.merge(metrics.clone());
        None
    };
    let listener =
        bind(config.listen).map_err(|e| format!("listening on {}: {e}", config.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let shutdown = CancellationToken::new();
    let metrics_served = match metrics_listener {
        Some(listener) => {
            let address = listener.local_addr().map_err(|e| e.to_string())?;
            tracing::info!(%address, "serving /metrics");
            eprintln!("auto-swe-server: metrics on http://{address}");
            // Caps of its own: a flood on the API's address does not keep the scraper out.
            let served = auto_swe_server::serve::serve(
                listener,
                metrics,
                limits.with_caps(64, 0),
                ConnectionCounters::default(),
                shutdown.clone(),
            );
            Some(tokio::spawn(served))
        }
        None => None,
    };
    tracing::info!(
        address = %local,
        workers = config.pool.workers,
        max_connections = limits.max_connections,
        max_connections_per_address = limits.max_connections_per_address,
        header_read_timeout_seconds = limits.header_read_timeout.as_secs(),
        "serving"
    );
    // The one line a supervisor or a test reads to find the port.
    eprintln!("auto-swe-server: listening on http://{local}");
    cancel_on_signal(shutdown.clone());
    // On the signal the workers stop taking runs and give theirs back while the connections
    // drain.
    let stopping = shutdown.clone();
    let (report, aborted) = tokio::join!(
        auto_swe_server::serve::serve(listener, app, limits, counters, shutdown.clone()),
        async move {
            stopping.cancelled().await;
            pool.stop_within(limits.shutdown_grace).await
        }
    );
    if let Some(task) = metrics_served {
        let _ = task.await;
    }
    tracing::info!(
        open_at_shutdown = report.open_at_shutdown,
        dropped = report.dropped,
        workers_aborted = aborted,
        "stopped"
    );
    Ok(())
}
