//! The shared behaviour suite and escape suite against a real Docker engine, and the checks
//! only Docker has (stored config, metadata sidecar, keeper PID).

use auto_swe_sandbox::{ExecRequest, LocalRoot, Protection, SecretEnv, WorkspaceBackend};

use crate::{harness, suite};

async fn run(check: auto_swe_sandbox::testing::Check) {
    let Some(backend) = harness::docker().await else {
        return;
    };
    suite::check(
        &backend,
        harness::spec(&harness::image(), LocalRoot::HostSystem),
        check,
    )
    .await;
}

suite::every_check!(run);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_config_holds_no_secret_and_metadata_is_blackholed() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    let value = format!("stored-{}-secret", std::process::id());
    let mut spec = harness::spec(&harness::image(), LocalRoot::HostSystem);
    spec.secret_env = SecretEnv::new()
        .with("CREATE_SECRET", value.clone())
        .unwrap();
    let ws = backend.create(&spec).await.unwrap();
    assert!(ws.keeper_pid > 1, "{ws:?}");
    assert!(
        ws.protections.contains(&Protection::MetadataAddresses),
        "{ws:?}"
    );
    // The secret reaches execs...
    let out = backend
        .exec(&ws, &ExecRequest::shell("printf %s \"$CREATE_SECRET\""))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), value);
    // ...but is nowhere in what the engine stores (inspect).
    let docker = bollard::Docker::connect_with_socket(
        &harness::docker_socket(),
        30,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap()
    .negotiate_version()
    .await
    .unwrap();
    let inspected = docker.inspect_container(&ws.id, None).await.unwrap();
    let stored = serde_json::to_string(&inspected).unwrap();
    assert!(!stored.contains(&value));
    let host = inspected.host_config.unwrap();
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
    assert_eq!(host.init, Some(true));
    assert_eq!(host.readonly_rootfs, Some(true));
    assert!(
        host.binds
            .unwrap_or_default()
            .iter()
            .all(|b| !b.contains("docker.sock"))
    );
    assert_blackholed(&backend, &ws).await;
    backend.remove(&ws).await.unwrap();
}

/// The metadata blackhole, by inspection: the routing table, never a packet. `ip route get` on
/// a blackhole route is refused by the kernel (EINVAL) instead of naming a device or gateway;
/// the table shows the blackhole entries themselves. The sidecar that put them there is gone.
async fn assert_blackholed(
    backend: &auto_swe_sandbox::DockerBackend,
    ws: &auto_swe_sandbox::WorkspaceHandle,
) {
    let get = backend
        .exec(ws, &ExecRequest::shell("ip route get 169.254.169.254 2>&1"))
        .await
        .unwrap();
    assert_ne!(get.status, 0);
    assert_eq!(get.stdout_text(), "RTNETLINK answers: Invalid argument\n");
    let table = backend
        .exec(ws, &ExecRequest::shell("ip route show"))
        .await
        .unwrap()
        .stdout_text();
    for addr in ["169.254.169.254", "169.254.170.2", "100.100.100.200"] {
        assert!(table.contains(&format!("blackhole {addr}")), "{table}");
    }
    let docker = bollard::Docker::connect_with_socket(
        &harness::docker_socket(),
        30,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap();
    let all = docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            ..Default::default()
        }))
        .await
        .unwrap();
    let sidecar = format!("/{}-mdblock", ws.id);
    assert!(
        all.iter()
            .all(|c| !c.names.clone().unwrap_or_default().contains(&sidecar)),
        "the sidecar outlived create"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_sidecar_image_falls_back_to_the_workspace_image() {
    if harness::docker().await.is_none() {
        return;
    }
    let backend = auto_swe_sandbox::DockerBackend::connect(auto_swe_sandbox::DockerConfig::new(
        harness::docker_socket(),
        harness::image(),
        Some("auto-swe-no-such-sidecar:missing".to_owned()),
    ))
    .await
    .unwrap();
    let ws = backend
        .create(&harness::spec(&harness::image(), LocalRoot::HostSystem))
        .await
        .unwrap();
    assert!(
        ws.protections.contains(&Protection::MetadataAddresses),
        "{ws:?}"
    );
    assert_blackholed(&backend, &ws).await;
    backend.remove(&ws).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_leaves_no_container() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    let mut spec = harness::spec("auto-swe-no-such-image:missing", LocalRoot::HostSystem);
    spec.label = "failing".to_owned();
    let err = backend.create(&spec).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_ENGINE_ERROR");
    let docker = bollard::Docker::connect_with_socket(
        &harness::docker_socket(),
        30,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap();
    let all = docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert!(all.iter().all(|c| {
        !c.names
            .clone()
            .unwrap_or_default()
            .iter()
            .any(|n| n.contains("asw-failing-"))
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_escape_suite() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    crate::git_escape::git_escape_suite(
        &backend,
        harness::spec(&harness::image(), LocalRoot::HostSystem),
    )
    .await;
}

/// 1,000 execs in one container, each succeeding, with flat latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endurance_one_thousand_execs() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    crate::endurance::many_execs(
        &backend,
        harness::spec(&harness::image(), LocalRoot::HostSystem),
        1_000,
    )
    .await;
}
