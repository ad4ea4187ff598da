//! Snapshots of the pure plans: bubblewrap argv, hosts files, metadata blackhole commands.

use std::path::Path;

use auto_swe_sandbox::local::plan::{
    BwrapPlan, HostEntry, HostLayout, Lockdown, bwrap_args, hosts_file,
};
use auto_swe_sandbox::policy::{blackhole_script, is_metadata_address};
use auto_swe_sandbox::{LocalRoot, Mount, MountAccess, NetworkMode};

fn layout() -> HostLayout {
    HostLayout {
        system: vec![
            ("/usr".to_owned(), HostEntry::Directory),
            ("/bin".to_owned(), HostEntry::Symlink("usr/bin".to_owned())),
            ("/lib".to_owned(), HostEntry::Symlink("usr/lib".to_owned())),
        ],
        etc: vec!["/etc/passwd".to_owned(), "/etc/ssl/certs".to_owned()],
    }
}

#[test]
fn workspace_argv_on_a_rootfs() {
    let root = LocalRoot::Rootfs("/var/cache/auto-swe/rootfs/bookworm".into());
    let host = layout();
    let argv = vec!["git".to_owned(), "status".to_owned()];
    let bwrap = bwrap_args(&BwrapPlan {
        root: &root,
        host: &host,
        workspace_dir: Some(Path::new("/state/asw-x/workspace")),
        tmp_dir: Some(Path::new("/state/asw-x/tmp")),
        hosts_file: Path::new("/state/asw-x/hosts"),
        resolv_file: Path::new("/state/asw-x/resolv.conf"),
        mounts: &[],
        network: NetworkMode::None,
        egress: None,
        lockdown: Lockdown::Workspace,
        workdir: "/workspace",
        argv: &argv,
        seccomp_fd: Some(auto_swe_sandbox::local::plan::SECCOMP_FD),
    });
    insta::assert_snapshot!("bwrap_workspace_rootfs", bwrap.join("\n"));
}

#[test]
fn ephemeral_argv_on_host_system_dirs() {
    let root = LocalRoot::HostSystem;
    let host = layout();
    let argv = vec!["make".to_owned(), "test".to_owned()];
    let mounts = [Mount {
        source: "/state/vol".into(),
        target: "/workspace".to_owned(),
        access: MountAccess::ReadWrite,
    }];
    let bwrap = bwrap_args(&BwrapPlan {
        root: &root,
        host: &host,
        workspace_dir: None,
        tmp_dir: None,
        hosts_file: Path::new("/state/.ephemeral/hosts"),
        resolv_file: Path::new("/state/.ephemeral/resolv.conf"),
        mounts: &mounts,
        network: NetworkMode::Host,
        egress: None,
        lockdown: Lockdown::Ephemeral,
        workdir: "/workspace",
        argv: &argv,
        seccomp_fd: Some(auto_swe_sandbox::local::plan::SECCOMP_FD),
    });
    insta::assert_snapshot!("bwrap_ephemeral_host_system", bwrap.join("\n"));
    // Never a home directory, /root, /var/run, the host /proc or a credential file.
    for forbidden in [
        "/root",
        "/home",
        "/var/run",
        "/run",
        "/etc/shadow",
        "/etc/ssh",
    ] {
        assert!(!bwrap.iter().any(|a| a == forbidden), "{forbidden}");
    }
    assert!(!bwrap.iter().any(|a| a == "--unshare-net"));
}

#[test]
fn hosts_and_blackhole() {
    insta::assert_snapshot!("hosts_blocked", hosts_file(true));
    insta::assert_snapshot!("blackhole_script", blackhole_script());
    assert!(is_metadata_address("169.254.169.254".parse().unwrap()));
    assert!(is_metadata_address("fd00:ec2::254".parse().unwrap()));
    assert!(!is_metadata_address("127.0.0.1".parse().unwrap()));
}

#[test]
fn docker_workspace_and_sidecar_bodies() {
    use auto_swe_sandbox::docker::plan::{metadata_sidecar, workspace_container};
    let mut spec =
        auto_swe_sandbox::WorkspaceSpec::new("auto-swe-workspace:bookworm", LocalRoot::HostSystem);
    spec.network = NetworkMode::Bridge;
    spec.env.insert(
        auto_swe_sandbox::EnvName::new("CI").unwrap(),
        "1".to_owned(),
    );
    spec.secret_env = auto_swe_sandbox::SecretEnv::new()
        .with("REGISTRY_TOKEN", "never-in-the-body")
        .unwrap();
    let body = workspace_container("asw-test-0001", &spec).unwrap();
    let json = serde_json::to_value(&body).unwrap();
    assert!(!json.to_string().contains("never-in-the-body"));
    // The engine's maps are hash maps: sorted here so the snapshot does not depend on their order.
    insta::with_settings!({ sort_maps => true }, {
        insta::assert_json_snapshot!("docker_workspace", json);
    });
    insta::assert_json_snapshot!(
        "docker_metadata_sidecar",
        serde_json::to_value(metadata_sidecar(
            "asw-test-0001",
            "auto-swe-workspace:bookworm"
        ))
        .unwrap()
    );
    // No engine socket, runtime dir or home can be mounted in.
    for source in [
        "/var/run/docker.sock",
        "/run/containerd/containerd.sock",
        "/root",
        "/var/run",
        "/",
    ] {
        spec.mounts = vec![Mount {
            source: source.into(),
            target: "/x".to_owned(),
            access: MountAccess::ReadOnly,
        }];
        assert!(
            workspace_container("asw-test-0001", &spec).is_err(),
            "{source}"
        );
    }
}

/// A proxied workspace: its own network namespace (loopback only), the proxy's socket and the
/// bridge bound under a fresh `/run` before the root turns read-only, the bridge started first.
#[test]
fn a_proxied_local_sandbox_binds_the_socket_and_bridge_and_starts_the_bridge_first() {
    let root = LocalRoot::Rootfs("/var/cache/auto-swe/rootfs/bookworm".into());
    let host = layout();
    let argv = vec!["git".to_owned(), "fetch".to_owned()];
    let egress = auto_swe_sandbox::EgressSocket {
        socket: "/state/egress/asw-x.sock".into(),
        bridge: "/opt/auto-swe/bin/auto-swe-netbridge".into(),
        ca_bundle: None,
    };
    let bwrap = bwrap_args(&BwrapPlan {
        root: &root,
        host: &host,
        workspace_dir: Some(Path::new("/state/asw-x/workspace")),
        tmp_dir: Some(Path::new("/state/asw-x/tmp")),
        hosts_file: Path::new("/state/asw-x/hosts"),
        resolv_file: Path::new("/state/asw-x/resolv.conf"),
        mounts: &[],
        network: NetworkMode::Proxy,
        egress: Some(&egress),
        lockdown: Lockdown::Workspace,
        workdir: "/workspace",
        argv: &argv,
        seccomp_fd: None,
    });
    let at = |items: &[&str]| {
        bwrap
            .windows(items.len())
            .position(|w| w == items)
            .unwrap_or_else(|| panic!("{items:?} in {bwrap:?}"))
    };
    at(&["--unshare-net"]);
    let run = at(&["--tmpfs", "/run"]);
    let socket = at(&[
        "--bind",
        "/state/egress/asw-x.sock",
        auto_swe_sandbox::bridge::SOCKET_INSIDE,
    ]);
    let bridge = at(&[
        "--ro-bind",
        "/opt/auto-swe/bin/auto-swe-netbridge",
        auto_swe_sandbox::bridge::BRIDGE_INSIDE,
    ]);
    let read_only = at(&["--remount-ro", "/"]);
    assert!(run < socket && socket < bridge && bridge < read_only);
    let shell = bwrap.iter().rev().nth(argv.len() + 1).unwrap();
    let started = shell
        .find("/run/auto-swe/netbridge 127.0.0.1:3128")
        .unwrap();
    assert!(started < shell.find("\"$@\"").unwrap(), "{shell}");
}

/// Docker: a proxied workspace has no network at all, the socket and bridge bound in, the
/// variables that point tools at the bridge, and a keeper that starts the bridge first.
#[test]
fn a_proxied_docker_workspace_has_no_network_and_its_keeper_starts_the_bridge() {
    use auto_swe_sandbox::docker::plan::{KEEPER_ID, KEEPER_USER, workspace_container};
    assert_eq!(KEEPER_USER, format!("{KEEPER_ID}:{KEEPER_ID}"));
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let bridge = std::path::PathBuf::from(env!("CARGO_BIN_EXE_auto-swe-netbridge"));
    let mut spec =
        auto_swe_sandbox::WorkspaceSpec::new("auto-swe-workspace:bookworm", LocalRoot::HostSystem);
    spec.network = NetworkMode::Proxy;
    spec.egress = Some(
        auto_swe_sandbox::EgressSocket {
            socket: socket.clone(),
            bridge: bridge.clone(),
            ca_bundle: None,
        }
        .into(),
    );
    let body = workspace_container("asw-test-0001", &spec).unwrap();
    let host = body.host_config.as_ref().unwrap();
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    let binds = host.binds.clone().unwrap();
    assert!(binds.contains(&format!(
        "{}:/run/auto-swe/egress.sock:rw",
        socket.display()
    )));
    assert!(binds.contains(&format!("{}:/run/auto-swe/netbridge:ro", bridge.display())));
    let env = body.env.clone().unwrap();
    for variable in [
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "CARGO_HTTP_PROXY",
    ] {
        assert!(
            env.contains(&format!("{variable}=http://127.0.0.1:3128")),
            "{variable}: {env:?}"
        );
    }
    let keeper = body.cmd.unwrap().join(" ");
    assert!(
        keeper.find("/run/auto-swe/netbridge").unwrap() < keeper.find("sleep infinity").unwrap(),
        "{keeper}"
    );
    // Without its socket, or with one on a workspace that is not proxied: refused.
    spec.egress = None;
    assert!(workspace_container("asw-test-0001", &spec).is_err());
    spec.egress = Some(
        auto_swe_sandbox::EgressSocket {
            socket,
            bridge,
            ca_bundle: None,
        }
        .into(),
    );
    spec.network = NetworkMode::None;
    assert!(workspace_container("asw-test-0001", &spec).is_err());
    // A proxy reached over TCP is the kubernetes backend's; Docker binds a socket in.
    spec.network = NetworkMode::Proxy;
    spec.egress = Some(
        auto_swe_sandbox::EgressTcpProxy {
            host: "10.0.0.9".parse().unwrap(),
            port: 3128,
            credential: auto_swe_sandbox::SecretValue::new("c"),
            ca_bundle_pem: None,
        }
        .into(),
    );
    let error = workspace_container("asw-test-0001", &spec).unwrap_err();
    assert!(error.to_string().contains("over TCP"), "{error}");
}
