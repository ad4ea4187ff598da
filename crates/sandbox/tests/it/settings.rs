//! The one settings resolver: a table of variables in, settings or a typed refusal out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use auto_swe_sandbox::{LocalRoot, SandboxSettings, parse_cpus, parse_memory, parse_pids};

fn resolve(vars: &[(&str, &str)], cpus: usize) -> auto_swe_sandbox::Result<SandboxSettings> {
    let table: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    SandboxSettings::resolve(&|name| table.get(name).cloned(), cpus)
}

#[test]
fn defaults_leave_the_host_a_core() {
    let two = resolve(&[], 2).unwrap();
    assert_eq!(two.limits.nano_cpus, 1_000_000_000);
    assert_eq!(two.limits.pids, 512);
    assert_eq!(two.limits.files, 1_000_000);
    assert_eq!(two.limits.memory_bytes, 4 << 30);
    assert_eq!(resolve(&[], 1).unwrap().limits.nano_cpus, 1_000_000_000);
    assert_eq!(resolve(&[], 8).unwrap().limits.nano_cpus, 7_000_000_000);
    assert_eq!(two.docker_socket, "/var/run/docker.sock");
    assert_eq!(two.account, "auto-swe-sandbox");
}

#[test]
fn knobs_set_the_caps_and_bad_ones_are_refused() {
    let set = resolve(
        &[
            ("WORKSPACE_MEMORY", "512m"),
            ("WORKSPACE_CPUS", "0.5"),
            ("WORKSPACE_PIDS_LIMIT", "64"),
            ("WORKSPACE_FILES_LIMIT", "250000"),
        ],
        2,
    )
    .unwrap();
    assert_eq!(set.limits.memory_bytes, 512 << 20);
    assert_eq!(set.limits.nano_cpus, 500_000_000);
    assert_eq!(set.limits.pids, 64);
    assert_eq!(set.limits.files, 250_000);
    for (name, value) in [
        ("WORKSPACE_MEMORY", "lots"),
        ("WORKSPACE_MEMORY", "1m"),
        ("WORKSPACE_MEMORY", "99999999999999999g"),
        ("WORKSPACE_CPUS", "-1"),
        ("WORKSPACE_CPUS", "0"),
        ("WORKSPACE_CPUS", "1e3"),
        ("WORKSPACE_CPUS", "2000"),
        ("WORKSPACE_PIDS_LIMIT", "0"),
        ("WORKSPACE_PIDS_LIMIT", "many"),
        ("WORKSPACE_FILES_LIMIT", "999"),
        ("WORKSPACE_FILES_LIMIT", "100000001"),
        ("WORKSPACE_FILES_LIMIT", "-1"),
        ("WORKSPACE_FILES_LIMIT", "1e6"),
    ] {
        let err = resolve(&[(name, value)], 2).unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{name}={value}");
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn size_and_count_parsers() {
    assert_eq!(parse_memory("2g"), Ok(2 << 30));
    assert_eq!(parse_memory("2GiB"), Ok(2 << 30));
    assert_eq!(parse_memory("65536k"), Ok(64 << 20));
    assert_eq!(parse_memory("16777216"), Ok(16 << 20));
    assert!(parse_memory("16777215").is_err());
    assert!(parse_memory("").is_err());
    assert_eq!(parse_cpus("1"), Ok(1_000_000_000));
    assert_eq!(parse_cpus("1.25"), Ok(1_250_000_000));
    assert_eq!(parse_cpus(".5"), Ok(500_000_000));
    assert_eq!(parse_cpus("0.01"), Ok(10_000_000));
    assert!(parse_cpus("0.009").is_err());
    assert!(parse_cpus(".").is_err());
    assert!(parse_cpus("1.2.3").is_err());
    assert_eq!(parse_pids("16"), Ok(16));
    assert!(parse_pids("15").is_err());
    assert!(parse_pids("65537").is_err());
}

/// A configured bubblewrap, rootfs or engine that is not there is an error, never a fallback to
/// something else (the host's own directories, the default socket).
#[test]
fn nothing_configured_falls_back_silently() {
    let missing = resolve(&[("AUTO_SWE_ROOTFS", "/nonexistent")], 2).unwrap();
    assert_eq!(
        missing.local_root,
        LocalRoot::Rootfs(PathBuf::from("/nonexistent"))
    );
    let err = missing.local_config(PathBuf::from("/tmp/x")).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BACKEND_UNAVAILABLE");
    assert!(err.to_string().contains("/nonexistent"), "{err}");

    let named = resolve(&[("AUTO_SWE_BWRAP", "/nonexistent/bwrap")], 2).unwrap();
    let err = named.local_config(PathBuf::from("/tmp/x")).unwrap_err();
    assert!(err.to_string().contains("AUTO_SWE_BWRAP"), "{err}");

    let none = resolve(&[("PATH", "/nonexistent")], 2).unwrap();
    assert_eq!(none.bwrap, None);
    assert!(none.local_config(PathBuf::from("/tmp/x")).is_err());

    let tcp = resolve(&[("DOCKER_HOST", "tcp://10.0.0.1:2375")], 2).unwrap();
    let err = tcp.docker_config("img".to_owned()).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BACKEND_UNAVAILABLE");
    let unix = resolve(&[("DOCKER_HOST", "unix:///run/user/5/docker.sock")], 2).unwrap();
    assert_eq!(
        unix.docker_config("img".to_owned()).unwrap().socket,
        "/run/user/5/docker.sock"
    );
}
