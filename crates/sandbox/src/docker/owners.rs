//! Containers that never outlive their owner, and read-write binds the workspace user may
//! write, on `docker`.
//!
//! Every container carries its owner ([`OWNER_LABEL`]: this host, its boot, the PID and start
//! time of the process that made it). The sweep — when a backend connects and on its timer —
//! removes each container of this host whose owner is gone, handing back what it was lent
//! first; containers of live owners, and those another host made on a shared engine, are left
//! to their owners and their expiry label.
//!
//! As on `local`, a read-write bind's source is lent to the user workspace commands run as
//! ([`plan::WORKSPACE_USER`]) for the container's life, when this process may hand it over
//! (it is root), so a root-owned work directory is writable inside; it is handed back when the
//! container is removed, and the container's [`LENT_LABEL`] lets a sweep hand it back should
//! this process die.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::plan;
use crate::error::{Result, SandboxError};
use crate::local::identity::{HostIdentity, Lent};
use crate::owner::Owner;
use crate::spec::Mount;

/// The label naming the process that made a container: `<host>/<boot>/<pid>.<start>`.
pub(crate) const OWNER_LABEL: &str = "io.auto-swe.owner";

/// The label recording what a container's binds were lent (JSON), for a sweep to hand back.
pub(crate) const LENT_LABEL: &str = "io.auto-swe.lent";

/// This host, as owner labels name it: its machine id, else its host name (a container's
/// own, when this process runs in one).
fn host_key() -> String {
    let machine = std::fs::read_to_string("/etc/machine-id")
        .map(|id| id.trim().to_owned())
        .unwrap_or_default();
    if !machine.is_empty() {
        return machine;
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// This process's owner label.
pub(crate) fn owner_label() -> String {
    let me = Owner::current();
    format!("{}/{}/{}", host_key(), me.boot, me.tag())
}

/// Whether a container labelled `label` belongs to this host and its owner is gone (`false`
/// for another host's, or a label that names no owner).
fn owner_gone(label: &str) -> bool {
    let mut parts = label.splitn(3, '/');
    let (Some(host), Some(boot), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host.is_empty() || host != host_key() {
        return false;
    }
    let Some((pid, start)) = tag.split_once('.') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) else {
        return false;
    };
    !Owner {
        pid,
        start,
        boot: boot.to_owned(),
    }
    .alive()
}

/// The account workspace commands run as, as a lending identity.
fn workspace_user() -> HostIdentity {
    HostIdentity {
        name: plan::WORKSPACE_USER.to_owned(),
        uid: plan::WORKSPACE_ID,
        gid: plan::WORKSPACE_ID,
        switched: true,
    }
}

/// The binds of containers this backend has lent, by container name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lending(Arc<Mutex<HashMap<String, Lent>>>);

impl Lending {
    /// Lends `mounts`' read-write sources to the workspace user for container `name` (when
    /// this process is root; otherwise nothing can be handed over and nothing is), and labels
    /// `body` with what was lent.
    pub(crate) fn lend(
        &self,
        name: &str,
        mounts: &[Mount],
        body: &mut ContainerCreateBody,
    ) -> Result<()> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        let user = workspace_user();
        let lent = Lent::planned(&user, mounts)?;
        if lent == Lent::default() {
            return Ok(());
        }
        let json = serde_json::to_string(&lent).map_err(|e| SandboxError::Engine {
            backend: "docker",
            message: e.to_string(),
        })?;
        body.labels
            .get_or_insert_with(HashMap::new)
            .insert(LENT_LABEL.to_owned(), json);
        // On record here before anything is lent: a removal from now on hands it back.
        if let Ok(mut table) = self.0.lock() {
            table.insert(name.to_owned(), lent.clone());
        }
        lent.lend(&user).inspect_err(|_| {
            self.give_back(name);
        })
    }

    /// Hands back what container `name` was lent (it is gone, or going).
    pub(crate) fn give_back(&self, name: &str) {
        let lent = self.0.lock().ok().and_then(|mut table| table.remove(name));
        if let Some(lent) = lent {
            lent.give_back(&workspace_user());
        }
    }
}

/// Removes every container of this host whose owner is gone (handing back what it was lent)
/// and every container whose expiry has passed; returns their ids.
pub(crate) async fn sweep(docker: &Docker) -> Vec<String> {
    let filters = HashMap::from([("label", vec![super::lifetime::EXPIRES_LABEL])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let Ok(containers) = docker.list_containers(Some(options)).await else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for container in containers {
        let labels = container.labels.unwrap_or_default();
        let orphaned = labels.get(OWNER_LABEL).is_some_and(|l| owner_gone(l));
        if !orphaned && !super::lifetime::expired(&labels) {
            continue;
        }
        let Some(id) = container.id else {
            continue;
        };
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        if docker.remove_container(&id, Some(options)).await.is_ok() {
            if orphaned && let Some(json) = labels.get(LENT_LABEL) {
                hand_back_json(json).await;
            }
            removed.push(id);
        }
    }
    removed
}

/// Hands back what a lent label records (off the runtime's threads: it walks trees).
async fn hand_back_json(json: &str) {
    if let Ok(lent) = serde_json::from_str::<Lent>(json) {
        let _ = tokio::task::spawn_blocking(move || lent.give_back(&workspace_user())).await;
    }
}

/// Sweeps every `every` while the returned task runs (aborted when the backend is dropped);
/// `None` without an interval.
pub(crate) fn start_timer(
    docker: &Docker,
    every: Option<Duration>,
) -> Option<tokio::task::AbortHandle> {
    let every = every?;
    let docker = docker.clone();
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let swept = sweep(&docker).await;
            if !swept.is_empty() {
                tracing::info!(
                    count = swept.len(),
                    "removed orphaned or expired sandbox containers"
                );
            }
        }
    });
    Some(task.abort_handle())
}

/// Lets the container's keeper account (which runs the bridge) connect to a proxied
/// workspace's egress socket: handed to it when this process is root, else opened to all
/// (the socket's directory is what keeps other accounts away then).
pub(crate) fn hand_socket_to_keeper(socket: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let handed = if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::lchown(socket, Some(plan::KEEPER_ID), Some(plan::KEEPER_ID))
    } else {
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))
    };
    handed.map_err(|e| {
        SandboxError::io(
            format!(
                "handing the egress socket {} to the workspace",
                socket.display()
            ),
            e,
        )
    })
}

/// Why the engine's socket at `path` cannot be opened, as the error to report: a socket this
/// user may not open is a permission problem with its own fix, not an engine that is down.
pub(crate) fn socket_refusal(path: &str, error: &std::io::Error) -> SandboxError {
    if error.kind() == std::io::ErrorKind::PermissionDenied {
        return SandboxError::BackendUnavailable {
            backend: "docker",
            reason: format!("this user may not open the engine socket {path} ({error})"),
            remedy: "add this user to the group that owns the socket (usually `docker`: \
                     usermod -aG docker USER, then log in again), or run as a user that may \
                     open it"
                .to_owned(),
        };
    }
    SandboxError::BackendUnavailable {
        backend: "docker",
        reason: format!("the engine does not answer on {path}: {error}"),
        remedy: "start a Docker engine (Debian: apt-get install docker.io; dockerd) or set \
                 DOCKER_HOST to its socket"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_labels_of_this_host_name_live_and_gone_owners() {
        assert!(!owner_gone(&owner_label()));
        let me = Owner::current();
        let recycled = format!("{}/{}/{}.{}", host_key(), me.boot, me.pid, me.start + 1);
        assert!(owner_gone(&recycled));
        let other_host = format!("another-host/{}/{}.{}", me.boot, me.pid, me.start + 1);
        assert!(!owner_gone(&other_host));
        assert!(!owner_gone("garbage"));
    }

    #[test]
    fn a_socket_refused_for_permission_says_so() {
        let denied = std::io::Error::from_raw_os_error(nix::libc::EACCES);
        let text = socket_refusal("/var/run/docker.sock", &denied).to_string();
        assert!(text.contains("may not open"), "{text}");
        assert!(text.contains("usermod -aG docker"), "{text}");
        assert!(!text.contains("does not answer"), "{text}");
        let refused = std::io::Error::from_raw_os_error(nix::libc::ECONNREFUSED);
        let text = socket_refusal("/var/run/docker.sock", &refused).to_string();
        assert!(text.contains("does not answer"), "{text}");
    }
}
