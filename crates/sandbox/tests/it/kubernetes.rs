//! The Kubernetes plans: manifest snapshots, the stdin secret preamble (run for real through the
//! local sandbox's shell), and the refusal of shell steps.

use std::time::Duration;

use auto_swe_sandbox::kubernetes::{
    KubernetesConfig, KubernetesEphemeral, exec_argv, pod_manifest, secret_manifest, stdin_preamble,
};
use auto_swe_sandbox::{
    EnvName, EphemeralRunner, EphemeralSpec, ExecRequest, LocalRoot, SecretEnv, WorkspaceBackend,
    WorkspaceSpec,
};

fn spec() -> WorkspaceSpec {
    let mut spec = WorkspaceSpec::new(
        "registry.example.invalid/workspace:1",
        LocalRoot::HostSystem,
    );
    spec.env.insert(EnvName::new("CI").unwrap(), "1".to_owned());
    spec.secret_env = SecretEnv::new()
        .with("YARN_NPM_AUTH_TOKEN", "tok-value-never-in-pod")
        .unwrap();
    spec
}

#[test]
fn pod_manifest_snapshot() {
    let mut config = KubernetesConfig::default();
    config.runtime_class = Some("gvisor".to_owned());
    let pod = pod_manifest("asw-impl-0001", &spec(), &config);
    assert!(!pod.to_string().contains("tok-value-never-in-pod"));
    insta::assert_json_snapshot!("k8s_pod", pod);
}

#[test]
fn secret_manifest_is_owned_by_the_pod() {
    let secret = secret_manifest(
        "asw-impl-0001",
        "0f1e-uid",
        "auto-swe-workspaces",
        &spec().secret_env,
    );
    insta::assert_json_snapshot!("k8s_secret", secret, {".stringData.YARN_NPM_AUTH_TOKEN" => "[value]"});
    assert_eq!(
        secret["stringData"]["YARN_NPM_AUTH_TOKEN"],
        "tok-value-never-in-pod"
    );
}

#[test]
fn stdin_preamble_refuses_line_breaks_and_empty_values() {
    let ok = SecretEnv::new()
        .with("A", "1")
        .unwrap()
        .with("B", "x=y")
        .unwrap();
    assert_eq!(stdin_preamble(&ok).unwrap(), b"A=1\nB=x=y\n\n");
    for bad in ["two\nlines", "cr\r", ""] {
        let env = SecretEnv::new().with("S", bad).unwrap();
        let err = stdin_preamble(&env).unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_SECRET_REFUSED");
        assert!(bad.is_empty() || !err.to_string().contains(bad));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_steps_are_unsupported() {
    let spec = EphemeralSpec {
        image: String::new(),
        mounts: Vec::new(),
        env: std::collections::BTreeMap::default(),
        secret_env: SecretEnv::new(),
        limits: auto_swe_sandbox::ResourceLimits::default(),
        network: auto_swe_sandbox::NetworkMode::default(),
        egress: None,
    };
    let err = KubernetesEphemeral
        .run_ephemeral(&spec, &ExecRequest::new(["true"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BACKEND_UNSUPPORTED");
    assert!(!err.is_retryable());
}

/// The exec wrapper is real shell: run it in a local sandbox, secrets on stdin, argv inspected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_wrapper_reads_secrets_from_stdin_only() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = crate::harness::local(&state) else {
        return;
    };
    let ws = backend
        .create(&crate::harness::spec("unused", root))
        .await
        .unwrap();
    let secrets = SecretEnv::new()
        .with("EXEC_SECRET", "stdin-carried-value")
        .unwrap();
    let mut request = ExecRequest::shell(
        "printf '%s|%s|' \"$EXEC_SECRET\" \"$PLAIN\"; cat; cat /proc/[0-9]*/cmdline | tr '\\0' ' '",
    );
    request
        .env
        .insert(EnvName::new("PLAIN").unwrap(), "plain".to_owned());
    let argv = exec_argv(&request, "x123");
    assert!(!argv.iter().any(|a| a.contains("stdin-carried-value")));
    let mut stdin = stdin_preamble(&secrets).unwrap();
    stdin.extend_from_slice(b"caller stdin\n");
    let out = backend
        .exec(
            &ws,
            &ExecRequest::new(argv)
                .stdin(stdin)
                .timeout(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    let text = out.stdout_text();
    assert!(
        text.starts_with("stdin-carried-value|plain|caller stdin\n"),
        "{text}"
    );
    assert_eq!(text.matches("stdin-carried-value").count(), 1, "{text}");
    backend.remove(&ws).await.unwrap();
}
