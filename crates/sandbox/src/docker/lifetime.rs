//! Containers that outlive nobody: every container of this backend carries its expiry time
//! ([`EXPIRES_LABEL`]) and its owner (`io.auto-swe.owner`); the sweep (when a
//! backend connects, and on its timer) removes expired ones and those whose owner is gone, and
//! what a backend still holds when it is shut down or dropped is removed then.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bollard::models::ContainerCreateBody;

/// The label naming when a container may be removed by any backend that connects: seconds
/// since the Unix epoch.
pub const EXPIRES_LABEL: &str = "io.auto-swe.expires";

/// How long a workspace container lives unless [`super::DockerBackend::workspace_lifetime`]
/// says otherwise: a week.
pub const DEFAULT_WORKSPACE_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// What an ephemeral run's container is given on top of its command's timeout before its own
/// keeper ends it (and before it counts as expired).
pub const EPHEMERAL_GRACE: Duration = Duration::from_secs(10);

/// How long the metadata sidecar may live.
pub const SIDECAR_LIFETIME: Duration = Duration::from_secs(300);

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Labels `body` with the time `lifetime` from now, and with its owner (this process; see
/// [`super::owners`]).
pub(crate) fn label_expiry(body: &mut ContainerCreateBody, lifetime: Duration) {
    let expires = now_secs().saturating_add(lifetime.as_secs());
    let labels = body.labels.get_or_insert_with(HashMap::new);
    labels.insert(EXPIRES_LABEL.to_owned(), expires.to_string());
    labels.insert(
        super::owners::OWNER_LABEL.to_owned(),
        super::owners::owner_label(),
    );
}

/// Whether a container with `labels` has passed its expiry.
pub(crate) fn expired(labels: &HashMap<String, String>) -> bool {
    labels
        .get(EXPIRES_LABEL)
        .and_then(|value| value.parse::<u64>().ok())
        .is_some_and(|expires| expires <= now_secs())
}

/// The keeper of an ephemeral run: a `sleep` that ends `timeout` plus [`EPHEMERAL_GRACE`] after
/// the container starts. The container's init exits with it and the engine stops the container,
/// killing every exec in it, so the run keeps its timeout even when its caller has died.
pub(crate) fn ephemeral_keeper(timeout: Duration) -> Vec<String> {
    let secs = timeout.saturating_add(EPHEMERAL_GRACE).as_secs().max(1);
    vec!["sleep".to_owned(), secs.to_string()]
}

/// The containers a backend has made and not yet removed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Live(Arc<Mutex<BTreeSet<String>>>);

impl Live {
    pub(crate) fn add(&self, name: &str) {
        if let Ok(mut set) = self.0.lock() {
            set.insert(name.to_owned());
        }
    }

    pub(crate) fn forget(&self, name: &str) {
        if let Ok(mut set) = self.0.lock() {
            set.remove(name);
        }
    }

    /// Takes every name out.
    pub(crate) fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut set| std::mem::take(&mut *set).into_iter().collect())
            .unwrap_or_default()
    }
}

/// Removes `name` (forced, with its anonymous volumes) by a plain blocking request on the
/// engine's socket: usable where no async runtime is left to drive the client (a `Drop`).
pub(crate) fn remove_blocking(socket: &str, name: &str) -> bool {
    let Ok(mut stream) = std::os::unix::net::UnixStream::connect(socket) else {
        return false;
    };
    let limit = Some(Duration::from_secs(20));
    if stream.set_read_timeout(limit).is_err() || stream.set_write_timeout(limit).is_err() {
        return false;
    }
    // Names are this backend's own (`asw-…`, letters, digits and dashes): nothing to escape.
    let request = format!(
        "DELETE /containers/{name}?force=true&v=true HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0_u8; 12];
    if stream.read_exact(&mut head).is_err() {
        return false;
    }
    // `HTTP/1.1 204`, or 404 when it was gone already.
    matches!(&head[9..12], b"204" | b"404")
}
