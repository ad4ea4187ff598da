//! The auto-swe reference server: an HTTP API over the store and the worker, with tokens, roles
//! and run visibility, and a pool of workers that drive runs from the shared queue.
//!
//! Embed the API in your own program by building an [`AppState`] over a store and mounting
//! [`router`]:
//!
//! ```
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use auto_swe_server::{AppState, Authenticator, WorkerGauge, config::JwtConfig, router};
//! use auto_swe_store::{Keyring, Store, StoreConfig};
//! use tower::ServiceExt as _;
//!
//! let dir = tempfile::tempdir()?;
//! let url = format!("sqlite://{}", dir.path().join("store.db").display());
//! let store = Store::open(StoreConfig::new(&url, Keyring::single(1, [7; 32]))).await?;
//! let auth = Authenticator::new(store.clone(), &JwtConfig::default(), None)?;
//! let app = router(
//!     AppState::new(store, auth, WorkerGauge::new(0), None),
//!     1024 * 1024,
//!     std::time::Duration::from_secs(30),
//! );
//! let health = axum::http::Request::get("/health").body(axum::body::Body::empty())?;
//! assert_eq!(app.oneshot(health).await?.status(), 200);
//! # Ok(()) }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```

pub mod access;
pub mod auth;
mod bootstrap;
pub mod config;
pub mod config_kubernetes;
pub mod connection_limits;
pub mod error;
pub mod github;
pub mod pool;
pub mod repositories;
pub mod routes;
pub mod serve;
pub mod standard_webhooks;
pub mod state;
#[cfg(feature = "temporal")]
mod temporal_pool;
pub mod viewer;

pub use auth::{AccessLevel, Authenticator, Caller};
pub use bootstrap::{BootstrapError, bootstrap_admin};
pub use connection_limits::{ConnectionCounters, ConnectionLimits};
pub use error::{ApiError, ApiResult};
pub use pool::{PoolEngine, WorkerPool};
pub use routes::{ApiDoc, metrics_router, router};
pub use serve::ServeReport;
pub use state::{AppState, WorkerGauge};
