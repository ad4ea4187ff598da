//! Test harness: which backends this host runs, canaries, and outside-the-sandbox checks.

use std::path::PathBuf;

use auto_swe_sandbox::{LocalBackend, LocalConfig, LocalRoot, WorkspaceSpec};

/// The workspace rootfs built by `scripts/build-workspace-rootfs.sh`, when present.
pub(crate) fn rootfs() -> Option<PathBuf> {
    let dir = std::env::var_os("AUTO_SWE_ROOTFS").map_or_else(
        || PathBuf::from("/var/cache/auto-swe/rootfs/bookworm"),
        PathBuf::from,
    );
    dir.join(".auto-swe-rootfs-v1").exists().then_some(dir)
}

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// A local backend, or `None` (with the reason printed) when bubblewrap is missing. Under
/// `AUTO_SWE_REQUIRE_BWRAP=1` a missing bubblewrap fails the test instead.
pub(crate) fn local(state: &tempfile::TempDir) -> Option<(LocalBackend, LocalRoot)> {
    // The sandbox's account must pass through the state directory (a temporary directory is
    // 0700): what a service's state directory is given by its operator.
    std::fs::set_permissions(
        state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let root = rootfs().map_or(LocalRoot::HostSystem, LocalRoot::Rootfs);
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.path().to_path_buf();
    match LocalBackend::new(config) {
        Ok(backend) => Some((backend, root)),
        Err(e) => {
            assert!(
                !required("AUTO_SWE_REQUIRE_BWRAP"),
                "bubblewrap required: {e}"
            );
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// A spec for tests: default hardening, small caps.
pub(crate) fn spec(image: &str, root: LocalRoot) -> WorkspaceSpec {
    let mut spec = WorkspaceSpec::new(image, root);
    "test".clone_into(&mut spec.label);
    spec.limits.memory_bytes = 256 * 1024 * 1024;
    spec.limits.pids = 128;
    spec
}

/// Host processes whose environment or command line holds `needle`.
pub(crate) fn host_processes_with(file: &str, needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/{file}"))
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

/// The workspace image built by `scripts/build-workspace-rootfs.sh`.
pub(crate) fn image() -> String {
    std::env::var("AUTO_SWE_WORKSPACE_IMAGE")
        .unwrap_or_else(|_| "auto-swe-workspace:bookworm".to_owned())
}

/// The engine socket: `DOCKER_HOST` (unix) or the default.
pub(crate) fn docker_socket() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| h.starts_with("unix://"))
        .unwrap_or_else(|| "/var/run/docker.sock".to_owned())
}

/// A Docker backend, or `None` (reason printed) when no engine answers. Under
/// `AUTO_SWE_REQUIRE_DOCKER=1` that fails the test instead.
pub(crate) async fn docker() -> Option<auto_swe_sandbox::DockerBackend> {
    let config = auto_swe_sandbox::DockerConfig::new(
        docker_socket(),
        image(),
        Some(
            std::env::var("AUTO_SWE_SIDECAR_IMAGE")
                .unwrap_or_else(|_| auto_swe_sandbox::DEFAULT_SIDECAR_IMAGE.to_owned()),
        ),
    );
    match auto_swe_sandbox::DockerBackend::connect(config).await {
        Ok(backend) => Some(backend),
        Err(e) => {
            assert!(!required("AUTO_SWE_REQUIRE_DOCKER"), "Docker required: {e}");
            eprintln!("skipping: {e}");
            None
        }
    }
}
