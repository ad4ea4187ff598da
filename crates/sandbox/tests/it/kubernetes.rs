//! The Kubernetes plans: manifest snapshots, the stdin secret preamble (run for real through the
//! local sandbox's shell), and the refusal of shell steps.

use std::time::Duration;

use auto_swe_sandbox::kubernetes::{
    CA_BUNDLE_KEY, KubernetesConfig, KubernetesEphemeral, PROXY_URL_KEY, exec_argv,
    network_policy_manifest, pod_manifest, secret_manifest, stdin_preamble,
};
use auto_swe_sandbox::{
    EnvName, EphemeralRunner, EphemeralSpec, ExecRequest, LocalRoot, NetworkMode, SecretEnv,
    WorkspaceBackend, WorkspaceSpec,
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
        None,
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

#[test]
fn the_network_policy_lets_the_pod_reach_only_the_proxy_port() {
    let policy = network_policy_manifest(
        "asw-impl-0001",
        "auto-swe-workspaces",
        &crate::kubernetes_egress::egress(),
        3128,
    );
    insta::assert_json_snapshot!("k8s_network_policy", policy);
    let spec = &policy["spec"];
    // Exactly this pod, by the per-pod label its manifest sets.
    let pod = pod_manifest(
        "asw-impl-0001",
        &spec_proxied(),
        &KubernetesConfig::default(),
    );
    assert_eq!(
        spec["podSelector"],
        serde_json::json!({"matchLabels": {"asw/workspace": "asw-impl-0001"}})
    );
    assert_eq!(pod["metadata"]["labels"]["asw/workspace"], "asw-impl-0001");
    assert_eq!(
        spec["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert_eq!(spec["ingress"], serde_json::json!([]));
    let egress = spec["egress"].as_array().unwrap();
    assert_eq!(egress.len(), 1, "{egress:?}");
    assert_eq!(
        egress[0]["ports"],
        serde_json::json!([{"protocol": "TCP", "port": 3128}])
    );
    assert_eq!(
        egress[0]["to"],
        serde_json::json!([{
            "podSelector": {"matchLabels": {"app": "auto-swe-egress"}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "auto-swe-system"}}
        }])
    );
    // No DNS: nothing names port 53 or UDP.
    let text = policy.to_string();
    assert!(!text.contains("53") && !text.contains("UDP"), "{text}");
    // Without a namespace the proxy pods are looked for in the policy's own.
    let mut local = crate::kubernetes_egress::egress();
    local.proxy_namespace = None;
    let policy = network_policy_manifest("asw-impl-0001", "auto-swe-workspaces", &local, 3128);
    assert_eq!(
        policy["spec"]["egress"][0]["to"],
        serde_json::json!([{"podSelector": {"matchLabels": {"app": "auto-swe-egress"}}}])
    );
}

fn spec_proxied() -> WorkspaceSpec {
    let mut spec = spec();
    spec.network = NetworkMode::Proxy;
    let mut proxy = crate::kubernetes_egress::tcp_proxy();
    proxy.ca_bundle_pem =
        Some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_owned());
    spec.egress = Some(proxy.into());
    spec
}

#[test]
fn a_proxied_pod_takes_its_proxy_url_and_trust_bundle_from_its_secret() {
    let mut spec = spec_proxied();
    // The spec's own value wins over the proxy's.
    spec.env
        .insert(EnvName::new("npm_config_proxy").unwrap(), "mine".to_owned());
    let pod = pod_manifest("asw-impl-0001", &spec, &KubernetesConfig::default());
    let text = pod.to_string();
    assert!(
        !text.contains(crate::kubernetes_egress::CREDENTIAL),
        "{text}"
    );
    assert!(!text.contains("auto-swe:"), "{text}");
    insta::assert_json_snapshot!("k8s_pod_proxied", pod);
    let env = pod["spec"]["containers"][0]["env"].as_array().unwrap();
    let find = |name: &str| {
        let found: Vec<_> = env.iter().filter(|e| e["name"] == name).collect();
        assert_eq!(found.len(), 1, "{name}: {env:?}");
        found[0].clone()
    };
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
    ] {
        assert_eq!(
            find(name)["valueFrom"]["secretKeyRef"],
            serde_json::json!({"name": "asw-impl-0001-env", "key": PROXY_URL_KEY}),
            "{name}"
        );
    }
    assert_eq!(find("npm_config_proxy")["value"], "mine");
    for name in ["NO_PROXY", "no_proxy"] {
        assert_eq!(find(name)["value"], "");
    }
    for (name, _) in auto_swe_sandbox::bridge::ca_env() {
        assert_eq!(
            find(name.as_str())["value"],
            auto_swe_sandbox::bridge::CA_BUNDLE_INSIDE
        );
    }
    let mounts = &pod["spec"]["containers"][0]["volumeMounts"];
    assert!(
        mounts.as_array().unwrap().contains(
            &serde_json::json!({"name": "egress-trust", "mountPath": "/run/auto-swe", "readOnly": true})
        ),
        "{mounts}"
    );
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    let trust = volumes
        .iter()
        .find(|v| v["name"] == "egress-trust")
        .unwrap();
    assert_eq!(
        trust["secret"]["items"],
        serde_json::json!([{"key": CA_BUNDLE_KEY, "path": "ca.pem"}])
    );

    let secret = secret_manifest(
        "asw-impl-0001",
        "0f1e-uid",
        "auto-swe-workspaces",
        &spec.secret_env,
        Some(&crate::kubernetes_egress::tcp_proxy()),
    );
    assert_eq!(
        secret["stringData"][PROXY_URL_KEY],
        format!(
            "http://auto-swe:{}@10.96.0.40:3128",
            crate::kubernetes_egress::CREDENTIAL
        )
    );
}

/// Without proxy networking nothing of the proxy reaches the pod (the attachment is refused by
/// the driver before; the manifest ignores it).
#[test]
fn an_unproxied_pod_has_no_proxy_variables() {
    let pod = pod_manifest("asw-impl-0001", &spec(), &KubernetesConfig::default());
    assert!(!pod.to_string().contains("PROXY"), "{pod}");
}
