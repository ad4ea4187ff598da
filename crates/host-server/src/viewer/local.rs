//! The viewer over a local store, for the person at this machine (`auto-swe runs show RUN
//! --web` without a server): served on a loopback port for as long as the caller keeps it,
//! entered through a one-time sign-in code in the URL.

use std::time::Duration;

use auto_swe_store::{SecretString, Store};
use tokio_util::sync::CancellationToken;

use crate::access::is_run_id;
use crate::auth::KeyError;
use crate::config::JwtConfig;
use crate::error::ApiError;
use crate::state::{AppState, WorkerGauge};
use crate::{Authenticator, BootstrapError, bootstrap_admin};

/// The user a local viewer signs its browser in as: a platform admin of the local store, made
/// on first use.
pub const LOCAL_VIEWER_EMAIL: &str = "local-viewer@localhost";

/// Why the local viewer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalViewerError {
    /// The run id is not one.
    #[error("{0:?} is not a run id")]
    NotARunId(String),
    /// The store failed.
    #[error("the local store: {0}")]
    Store(#[from] auto_swe_store::StoreError),
    /// The local user could not be made.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// The session keys could not be made.
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// The sign-in code could not be made.
    #[error("{0}")]
    Session(#[from] ApiError),
    /// No loopback port could be had.
    #[error("listening on loopback: {0}")]
    Listen(#[from] std::io::Error),
}

/// A viewer serving on loopback; it stops when [`LocalViewer::stop`] is called or it is
/// dropped.
#[derive(Debug)]
pub struct LocalViewer {
    url: String,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl LocalViewer {
    /// The URL that signs a browser in (once) and opens the run.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops serving and waits (briefly) for open requests.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
    }
}

impl Drop for LocalViewer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Serves the viewer over `store` on `127.0.0.1` (a free port) and returns the one-time URL
/// that opens `run_id`. The session key is random, so nothing it signs outlives the process.
#[tracing::instrument(level = "info", skip(store))]
pub async fn serve_local(store: Store, run_id: &str) -> Result<LocalViewer, LocalViewerError> {
    if !is_run_id(run_id) {
        return Err(LocalViewerError::NotARunId(run_id.to_owned()));
    }
    let mut secret = [0_u8; 32];
    getrandom::getrandom(&mut secret)
        .map_err(|e| ApiError::internal("RANDOM_FAILED", e.to_string()))?;
    let auth = Authenticator::new(
        store.clone(),
        &JwtConfig::default(),
        Some(SecretString::new(hex::encode(secret))),
    )?;
    bootstrap_admin(&store, LOCAL_VIEWER_EMAIL, None).await?;
    let user = store
        .find_user_by_email(LOCAL_VIEWER_EMAIL)
        .await?
        .ok_or_else(|| ApiError::internal("LOCAL_USER_MISSING", "the local user was not made"))?;
    let state = AppState::new(store, auth, WorkerGauge::new(0), None);
    let code = state.login_codes().issue(&user.id)?;
    let app = super::routes()
        .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let address = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let stopped = shutdown.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stopped.cancelled().await })
            .await
    });
    tracing::info!(%address, "local viewer serving");
    Ok(LocalViewer {
        url: format!("http://{address}/ui/login?code={code}&next=/ui/runs/{run_id}"),
        shutdown,
        task,
    })
}
