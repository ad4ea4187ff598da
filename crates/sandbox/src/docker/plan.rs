//! The pure part of the `docker` backend: a workspace spec in, Docker create bodies out. Every
//! hardening control of the workspace table is decided here, so a snapshot shows all of them.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, ResourcesUlimits};

use crate::backend::EphemeralSpec;
use crate::bridge;
use crate::error::{Result, SandboxError};
use crate::policy::{METADATA_HOSTNAMES, blackhole_script};
use crate::spec::{
    MetadataBlock, Mount, MountAccess, NetworkMode, OPEN_FILES_PER_PROCESS, ResourceLimits,
    WorkspaceSpec,
};

/// The label every container of this backend carries, naming its workspace.
pub const WORKSPACE_LABEL: &str = "io.auto-swe.workspace";
/// The label that keeps a workspace's file-count bound, for a backend that attaches to it.
pub const FILES_LABEL: &str = "io.auto-swe.files-limit";

/// The user workspace commands run as (the rootfs's `agent`): every exec names it.
pub const WORKSPACE_USER: &str = "1000:1000";

/// The uid and gid of [`WORKSPACE_USER`].
pub const WORKSPACE_ID: u32 = 1000;

/// The user the container's own processes — the init and the keeper — run as: not the
/// workspace user, so no workspace process may trace them (a traced keeper ran an agent's code
/// under the one PID the authenticated git call's stray sweep spares) or signal them.
pub const KEEPER_USER: &str = "65534:65534";

/// The uid and gid of [`KEEPER_USER`].
pub const KEEPER_ID: u32 = 65534;

fn network_mode(network: NetworkMode) -> String {
    match network {
        // Proxied: no network at all; the proxy is reached through its socket, bound in.
        NetworkMode::None | NetworkMode::Proxy => "none",
        NetworkMode::Host => "host",
        NetworkMode::Bridge => "bridge",
    }
    .to_owned()
}

/// Refuses mounts that would hand the workspace an engine socket, the host's runtime state or
/// an ancestor of either: [`crate::mount_guard::MountGuard`]'s rules on the sources as given.
/// The driver has already resolved every source (links, `..`) through the same guard; this is
/// the plan's own check, so no plan is ever made from an unchecked spec.
pub fn check_mounts(mounts: &[Mount]) -> Result<()> {
    let guard = crate::mount_guard::MountGuard::new();
    for mount in mounts {
        if let Some(why) = guard.refusal(&mount.source, false) {
            return Err(SandboxError::InvalidRequest(format!(
                "mount of {} is not allowed: {why}",
                mount.source.display()
            )));
        }
        crate::mount_guard::check_target(&mount.target)?;
    }
    Ok(())
}

fn binds(mounts: &[Mount]) -> Vec<String> {
    mounts
        .iter()
        .map(|m| {
            let mode = match m.access {
                MountAccess::ReadOnly => "ro",
                MountAccess::ReadWrite => "rw",
            };
            // Docker's bind syntax takes `ro`/`rw` and relabel/propagation options only (it
            // refused `nosuid`); nothing set-id runs anyway: no-new-privileges, no capability.
            format!("{}:{}:{mode}", m.source.to_string_lossy(), m.target)
        })
        .collect()
}

fn limits(host: &mut HostConfig, limits: &ResourceLimits) {
    let memory = i64::try_from(limits.memory_bytes).unwrap_or(i64::MAX);
    host.memory = Some(memory);
    host.memory_swap = Some(memory);
    host.nano_cpus = Some(i64::try_from(limits.nano_cpus).unwrap_or(i64::MAX));
    host.pids_limit = Some(i64::from(limits.pids));
}

fn locked_host_config(network: NetworkMode) -> HostConfig {
    HostConfig {
        init: Some(true),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec![
            "no-new-privileges:true".to_owned(),
            super::profile::security_opt(),
        ]),
        network_mode: Some(network_mode(network)),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_owned(),
            "rw,nosuid,nodev,size=268435456".to_owned(),
        )])),
        privileged: Some(false),
        auto_remove: Some(false),
        ulimits: Some(vec![ResourcesUlimits {
            name: Some("nofile".to_owned()),
            soft: Some(i64::from(OPEN_FILES_PER_PROCESS)),
            hard: Some(i64::from(OPEN_FILES_PER_PROCESS)),
        }]),
        // A proxied container's tools reach the proxy over loopback, where an autotuned
        // receive window stays small: its own network namespace starts them larger.
        sysctls: (network == NetworkMode::Proxy).then(|| {
            HashMap::from([(
                "net.ipv4.tcp_rmem".to_owned(),
                auto_swe_egress::WORKSPACE_TCP_RMEM.to_owned(),
            )])
        }),
        ..HostConfig::default()
    }
}

/// The create body of an agent workspace: `--init`, every capability dropped,
/// no-new-privileges, memory (no swap) / CPU / pids caps, read-only root with a private
/// `/workspace` volume and a tmpfs `/tmp`, resolvers (bridge only: Docker refuses them with
/// `none` and `host`), metadata names pinned to `0.0.0.0`, no engine socket, the keeper
/// `sleep infinity`. Secret env is not here: it travels with each exec, so it is in no stored
/// config.
pub fn workspace_container(name: &str, spec: &WorkspaceSpec) -> Result<ContainerCreateBody> {
    check_mounts(&spec.mounts)?;
    let mut host = locked_host_config(spec.network);
    limits(&mut host, &spec.limits);
    if spec.network == NetworkMode::Bridge {
        host.dns = Some(spec.dns.iter().map(ToString::to_string).collect());
    }
    if spec.block_metadata == MetadataBlock::On {
        host.extra_hosts = Some(
            METADATA_HOSTNAMES
                .iter()
                .map(|h| format!("{h}:0.0.0.0"))
                .collect(),
        );
    }
    let (binds, env, cmd) = proxied_parts(
        &spec.mounts,
        &spec.env,
        spec.network,
        spec.checked_socket_egress()?,
        vec!["sleep".to_owned(), "infinity".to_owned()],
    );
    if !binds.is_empty() {
        host.binds = Some(binds);
    }
    Ok(ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(cmd),
        entrypoint: Some(Vec::new()),
        user: Some(KEEPER_USER.to_owned()),
        hostname: Some("workspace".to_owned()),
        working_dir: Some("/workspace".to_owned()),
        env: Some(
            env.into_iter()
                .chain(["HOME=/workspace".to_owned()])
                .collect(),
        ),
        volumes: Some(vec!["/workspace".to_owned()]),
        labels: Some(HashMap::from([
            (WORKSPACE_LABEL.to_owned(), name.to_owned()),
            (FILES_LABEL.to_owned(), spec.limits.files.to_string()),
        ])),
        host_config: Some(host),
        ..ContainerCreateBody::default()
    })
}

/// The short-lived sidecar that blackholes the metadata addresses inside the workspace's network
/// namespace. The only container of this backend that holds a capability, and only `NET_ADMIN`.
#[must_use]
pub fn metadata_sidecar(workspace: &str, image: &str) -> ContainerCreateBody {
    let mut host = locked_host_config(NetworkMode::None);
    host.network_mode = Some(format!("container:{workspace}"));
    host.cap_add = Some(vec!["NET_ADMIN".to_owned()]);
    host.memory = Some(32 * 1024 * 1024);
    host.pids_limit = Some(16);
    ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            blackhole_script(),
        ]),
        entrypoint: Some(Vec::new()),
        user: Some("0:0".to_owned()),
        labels: Some(HashMap::from([(
            WORKSPACE_LABEL.to_owned(),
            workspace.to_owned(),
        )])),
        host_config: Some(host),
        ..ContainerCreateBody::default()
    }
}

/// The create body of an ephemeral author command: the same lockdown as a workspace, the
/// command itself as the container's process. Secret env is named only
/// (`NAME` without a value is resolved by the engine from nothing, so values are passed by exec
/// instead; see the driver).
pub fn ephemeral_container(
    name: &str,
    spec: &EphemeralSpec,
    argv: &[String],
    workdir: &str,
) -> Result<ContainerCreateBody> {
    check_mounts(&spec.mounts)?;
    let mut host = locked_host_config(spec.network);
    limits(&mut host, &spec.limits);
    host.extra_hosts = Some(
        METADATA_HOSTNAMES
            .iter()
            .map(|h| format!("{h}:0.0.0.0"))
            .collect(),
    );
    let (binds, env, cmd) = proxied_parts(
        &spec.mounts,
        &spec.env,
        spec.network,
        spec.checked_socket_egress()?,
        argv.to_vec(),
    );
    if !binds.is_empty() {
        host.binds = Some(binds);
    }
    Ok(ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(cmd),
        entrypoint: Some(Vec::new()),
        user: Some(KEEPER_USER.to_owned()),
        working_dir: Some(workdir.to_owned()),
        env: Some(env),
        labels: Some(HashMap::from([(
            WORKSPACE_LABEL.to_owned(),
            name.to_owned(),
        )])),
        host_config: Some(host),
        ..ContainerCreateBody::default()
    })
}

/// The create body of the container an authenticated git call of `workspace` runs in: the
/// workspace's own volumes and binds (`volumes_from`) and network namespace, the same lockdown,
/// small caps, and a PID namespace of its own, so no process of the workspace can see, trace or
/// signal the git process that holds the credential. Its keeper ends it after `lifetime_secs`.
#[must_use]
pub fn git_helper_container(
    workspace: &str,
    image: &str,
    lifetime_secs: u64,
) -> ContainerCreateBody {
    let mut host = locked_host_config(NetworkMode::None);
    host.network_mode = Some(format!("container:{workspace}"));
    host.volumes_from = Some(vec![format!("{workspace}:rw")]);
    host.memory = Some(512 * 1024 * 1024);
    host.memory_swap = Some(512 * 1024 * 1024);
    host.pids_limit = Some(64);
    ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(vec!["sleep".to_owned(), lifetime_secs.max(1).to_string()]),
        entrypoint: Some(Vec::new()),
        user: Some(KEEPER_USER.to_owned()),
        working_dir: Some("/".to_owned()),
        labels: Some(HashMap::from([(
            WORKSPACE_LABEL.to_owned(),
            workspace.to_owned(),
        )])),
        host_config: Some(host),
        ..ContainerCreateBody::default()
    }
}

/// The in-container script that stops and kills every process carrying an exec tag, and every
/// descendant of one (a child that cleared its environment still has a tagged parent until the
/// kill: it is found by its parent before anything is killed).
#[must_use]
pub fn kill_tagged_script(exec_id: &str) -> String {
    let tag = crate::quote::shell_quote(&format!("{}={exec_id}", crate::spec::EXEC_ID_ENV));
    format!(
        r#"tag={tag}
for round in 1 2 3 4 5; do
  found=
  pairs=
  for d in /proc/[0-9]*; do
    pid=${{d#/proc/}}
    [ "$pid" = "$$" ] && continue
    ppid=
    {{ while read -r key value; do
      if [ "$key" = PPid: ]; then ppid=$value; break; fi
    done < "$d/status"; }} 2>/dev/null
    pairs="$pairs $pid:$ppid"
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$tag"; then found="$found $pid"; fi
  done
  [ -z "$found" ] && exit 0
  grown=1
  while [ -n "$grown" ]; do
    grown=
    for pair in $pairs; do
      pid=${{pair%%:*}}
      case " $found " in *" $pid "*) continue ;; esac
      case " $found " in *" ${{pair#*:}} "*) found="$found $pid"; grown=1 ;; esac
    done
  done
  for pid in $found; do kill -STOP "$pid" 2>/dev/null || true; done
  for pid in $found; do kill -KILL "$pid" 2>/dev/null || true; done
done
"#
    )
}

/// The in-container script that prints the keeper's PID: the `sleep` children of PID 1 (the
/// init). A proxied workspace's keeper is a shell until its bridge listens, and only then
/// becomes `sleep`; the bridge itself, also a child of the init, is not the keeper.
pub const KEEPER_PROBE: &str = r#"for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  [ "$pid" = 1 ] && continue
  name=
  while read -r key value; do
    case "$key" in
      Name:) name=$value ;;
      PPid:) [ "$value" = 1 ] && [ "$name" = sleep ] && echo "$pid"; break ;;
    esac
  done < "$d/status" 2>/dev/null || true
done
"#;

/// A proxied container's keeper: starts the bridge to the egress proxy (it returns once it
/// listens), then becomes `keeper`; without the bridge the container ends.
fn proxied_keeper(keeper: Vec<String>) -> Vec<String> {
    let mut argv = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        format!("{} || exit 1\nexec \"$@\"", bridge::bridge_command()),
        "sh".to_owned(),
    ];
    argv.extend(keeper);
    argv
}

/// The in-container script that waits (up to ten seconds) until the bridge of a proxied
/// container listens on [`bridge::PROXY_ADDRESS`] (`127.0.0.1:3128`, a listening socket in
/// `/proc/net/tcp`).
pub const BRIDGE_PROBE: &str = r"i=0
while [ $i -lt 200 ]; do
  while read -r _ local _ state _; do
    [ $local = 0100007F:0C38 ] && [ $state = 0A ] && exit 0
  done < /proc/net/tcp
  sleep 0.05
  i=$((i + 1))
done
exit 1
";

/// The binds, environment and keeper of a container on `network` with `egress`: the
/// container's own `mounts` and `env`, plus for a proxied one the socket, the bridge, the
/// proxy variables and the bridge started before `keeper`.
fn proxied_parts(
    mounts: &[Mount],
    env: &std::collections::BTreeMap<crate::spec::EnvName, String>,
    network: NetworkMode,
    egress: Option<&bridge::EgressSocket>,
    keeper: Vec<String>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut binds = binds(mounts);
    let env = bridge::with_proxy_env(env, network, egress);
    let keeper = match egress {
        Some(egress) => {
            binds.push(format!(
                "{}:{}:rw",
                egress.socket.to_string_lossy(),
                bridge::SOCKET_INSIDE
            ));
            binds.push(format!(
                "{}:{}:ro",
                egress.bridge.to_string_lossy(),
                bridge::BRIDGE_INSIDE
            ));
            if let Some(bundle) = &egress.ca_bundle {
                binds.push(format!(
                    "{}:{}:ro",
                    bundle.to_string_lossy(),
                    bridge::CA_BUNDLE_INSIDE
                ));
            }
            proxied_keeper(keeper)
        }
        None => keeper,
    };
    let env = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    (binds, env, keeper)
}

/// The in-container script that prints how many processes the OOM killer has killed.
pub const OOM_PROBE: &str = r"if [ -r /sys/fs/cgroup/memory.events ]; then
  sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events
else
  sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control
fi
";
