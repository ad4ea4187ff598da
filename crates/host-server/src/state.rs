//! What every handler shares, and the extractors that turn a request into a caller and a body.
//!
//! A route declares who may call it by the extractor it takes: [`SignedIn`] refuses service
//! principals with `401 SERVICE_TOKEN_NOT_ALLOWED`; [`AnyCaller`] is for the routes that declare
//! service scopes (launching runs, reading and cancelling them).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use auto_swe_store::Store;
use auto_swe_worker::{
    Launch, LaunchOptions, Launched, LivePatterns, RunStarter, StepRegistry, WorkerError,
    launch_on, launch_with,
};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::auth::{AccessLevel, Authenticator, Caller, UserIdentity};
use crate::error::ApiError;

/// The server's shared state.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    auth: Authenticator,
    registry: StepRegistry,
    workers: WorkerGauge,
    github: Option<crate::github::GitHub>,
    patterns: std::sync::OnceLock<Arc<LivePatterns>>,
    starter: std::sync::OnceLock<Arc<dyn RunStarter>>,
    public_url: std::sync::OnceLock<String>,
    repositories_root: std::sync::OnceLock<std::path::PathBuf>,
    login_codes: crate::viewer::LoginCodes,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

/// How many of the server's worker tasks are configured and running.
#[derive(Debug, Clone, Default)]
pub struct WorkerGauge {
    configured: Arc<AtomicUsize>,
    running: Arc<AtomicUsize>,
}

impl WorkerGauge {
    /// A gauge for `configured` workers, none running yet.
    #[must_use]
    pub fn new(configured: usize) -> Self {
        let gauge = Self::default();
        gauge.configured.store(configured, Ordering::Relaxed);
        gauge
    }

    /// Marks a worker started; the guard marks it stopped when dropped.
    #[must_use]
    pub fn started(&self) -> RunningWorker {
        self.running.fetch_add(1, Ordering::AcqRel);
        RunningWorker {
            running: Arc::clone(&self.running),
        }
    }

    /// (configured, running).
    #[must_use]
    pub fn read(&self) -> (usize, usize) {
        (
            self.configured.load(Ordering::Relaxed),
            self.running.load(Ordering::Acquire),
        )
    }
}

/// A running worker task; dropping it counts the task as stopped.
#[derive(Debug)]
pub struct RunningWorker {
    running: Arc<AtomicUsize>,
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl AppState {
    /// State over `store`, checking credentials with `auth`, with GitHub when it is configured.
    #[must_use]
    pub fn new(
        store: Store,
        auth: Authenticator,
        workers: WorkerGauge,
        github: Option<crate::github::GitHub>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                auth,
                registry: StepRegistry::builtin(),
                workers,
                github,
                patterns: std::sync::OnceLock::new(),
                starter: std::sync::OnceLock::new(),
                public_url: std::sync::OnceLock::new(),
                repositories_root: std::sync::OnceLock::new(),
                login_codes: crate::viewer::LoginCodes::default(),
            }),
        }
    }

    /// The scanner rules this process's workers scan with, so a write through the API is
    /// applied at once (set once; later calls keep the first).
    #[must_use]
    pub fn with_patterns(self, patterns: Arc<LivePatterns>) -> Self {
        let _ = self.inner.patterns.set(patterns);
        self
    }

    /// Starts runs on the engine `starter` hands them to (set once; without it, runs are
    /// queued for the embedded engine).
    #[must_use]
    pub fn with_starter(self, starter: Arc<dyn RunStarter>) -> Self {
        let _ = self.inner.starter.set(starter);
        self
    }

    /// Validates, records and starts a run on this server's engine.
    pub(crate) async fn launch(
        &self,
        launch: Launch,
        options: LaunchOptions,
    ) -> Result<Launched, WorkerError> {
        match self.inner.starter.get() {
            Some(starter) => {
                launch_on(
                    self.store(),
                    self.registry(),
                    launch,
                    options,
                    starter.as_ref(),
                )
                .await
            }
            None => launch_with(self.store(), self.registry(), launch, options).await,
        }
    }

    /// The address people reach this server at (`https://…`), when configured: the run
    /// viewer's cookie is `Secure` when it is https, and forms posted from it are same-origin
    /// (set once; later calls keep the first).
    #[must_use]
    pub fn with_public_url(self, url: impl Into<String>) -> Self {
        let _ = self.inner.public_url.set(url.into());
        self
    }

    /// The directory local repositories that connections name must lie under (set once;
    /// without it, no connection may name a local repository).
    #[must_use]
    pub fn with_repositories_root(self, root: impl Into<std::path::PathBuf>) -> Self {
        let _ = self.inner.repositories_root.set(root.into());
        self
    }

    /// The repositories root, when set.
    #[must_use]
    pub fn repositories_root(&self) -> Option<&std::path::Path> {
        self.inner
            .repositories_root
            .get()
            .map(std::path::PathBuf::as_path)
    }

    /// The configured public URL.
    #[must_use]
    pub fn public_url(&self) -> Option<&str> {
        self.inner.public_url.get().map(String::as_str)
    }

    /// The run viewer's one-time sign-in codes.
    pub(crate) fn login_codes(&self) -> &crate::viewer::LoginCodes {
        &self.inner.login_codes
    }

    /// The live scanner rules, when this process has workers scanning with them.
    #[must_use]
    pub fn patterns(&self) -> Option<&Arc<LivePatterns>> {
        self.inner.patterns.get()
    }

    /// GitHub, when configured.
    #[must_use]
    pub fn github(&self) -> Option<&crate::github::GitHub> {
        self.inner.github.as_ref()
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The authenticator.
    #[must_use]
    pub fn auth(&self) -> &Authenticator {
        &self.inner.auth
    }

    /// The built-in steps specs are validated against.
    #[must_use]
    pub fn registry(&self) -> &StepRegistry {
        &self.inner.registry
    }

    /// The worker pool's gauge.
    #[must_use]
    pub fn workers(&self) -> &WorkerGauge {
        &self.inner.workers
    }
}

async fn caller(parts: &Parts, state: &AppState) -> Result<Caller, ApiError> {
    let header = match parts.headers.get(AUTHORIZATION) {
        None => None,
        Some(value) => Some(value.to_str().map_err(|_| {
            ApiError::unauthenticated("the Authorization header is not readable text")
        })?),
    };
    state.auth().authenticate(header).await
}

/// A signed-in person; service principals are refused.
#[derive(Debug, Clone)]
pub struct SignedIn(pub UserIdentity);

impl SignedIn {
    /// Refuses a caller below `role` with 403.
    pub fn require(&self, role: AccessLevel) -> Result<&UserIdentity, ApiError> {
        if self.0.role >= role {
            Ok(&self.0)
        } else {
            Err(ApiError::forbidden(format!(
                "this needs the {} role",
                role.as_str()
            )))
        }
    }
}

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match caller(parts, state).await? {
            Caller::User(user) => Ok(SignedIn(user)),
            Caller::Service(_) => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "SERVICE_TOKEN_NOT_ALLOWED",
                "a service token cannot call this route",
            )),
        }
    }
}

/// A person or a service principal, for routes that declare service scopes.
#[derive(Debug, Clone)]
pub struct AnyCaller(pub Caller);

impl FromRequestParts<AppState> for AnyCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        caller(parts, state).await.map(AnyCaller)
    }
}

/// A JSON object body, refused in the one error shape: `413 PAYLOAD_TOO_LARGE` above the body
/// limit, `400 INVALID_BODY` when it is not a JSON object of the expected shape.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let ApiBytes(bytes) = ApiBytes::from_request(request, state).await?;
        // Every body is a JSON object: serde would also read a struct written as an array of
        // its fields in order, which no client means and the OpenAPI document does not allow.
        if bytes.iter().find(|b| !b" \t\n\r".contains(b)) != Some(&b'{') {
            return Err(ApiError::bad_request(
                "INVALID_BODY",
                "the body must be a JSON object",
            ));
        }
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| {
            ApiError::bad_request("INVALID_BODY", format!("the body is not valid: {e}"))
        })
    }
}

/// Query parameters, refused in the one error shape (`400 INVALID_QUERY`).
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|rejection| ApiError::bad_request("INVALID_QUERY", rejection.body_text()))
    }
}

/// A body of any kind, refused in the one error shape: `413 PAYLOAD_TOO_LARGE` above the body
/// limit, `400 INVALID_BODY` when it cannot be read.
#[derive(Debug, Clone)]
pub struct ApiBytes(pub Bytes);

impl<S> FromRequest<S> for ApiBytes
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(request, state)
            .await
            .map(ApiBytes)
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "PAYLOAD_TOO_LARGE",
                        "the request body is larger than the server accepts",
                    )
                } else {
                    ApiError::bad_request("INVALID_BODY", rejection.body_text())
                }
            })
    }
}

/// Path parameters, refused in the one error shape: `400 INVALID_PATH` when a segment is not
/// valid UTF-8 once decoded or does not parse as the route's type.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|path| ApiPath(path.0))
            .map_err(|rejection| {
                if rejection.status().is_client_error() {
                    ApiError::bad_request("INVALID_PATH", rejection.body_text())
                } else {
                    tracing::error!(rejection = %rejection.body_text(), "a route's path parameters do not match its handler");
                    ApiError::internal("INVALID_ROUTE", "the route's path parameters")
                }
            })
    }
}
