//! Proxy networking on the Kubernetes driver, against the mocked API server of
//! `kubernetes_api`: the workspace's `NetworkPolicy` is made before its pod and deleted with it on
//! every failure and on removal; the proxy URL (the credential) travels in the Secret only; a
//! proxied spec the backend cannot fence is refused before any request.

use std::collections::BTreeMap;
use std::sync::Arc;

use auto_swe_sandbox::kubernetes::{
    KubernetesBackend, KubernetesConfig, KubernetesEgress, PROXY_URL_KEY, network_policy_manifest,
    pod_manifest,
};
use auto_swe_sandbox::{
    EgressSocket, EgressTcpProxy, NetworkMode, SecretValue, WorkspaceBackend, WorkspaceSpec,
};
use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

use crate::kubernetes_api::{
    NS, all_text, config, deleted, handle_for, keeper_only, next, not_found, pod_with, respond,
    spec, start_api,
};

pub(crate) const CREDENTIAL: &str = "cred-0123456789abcdef-never-in-a-manifest";

pub(crate) fn egress() -> KubernetesEgress {
    KubernetesEgress::new(
        BTreeMap::from([("app".to_owned(), "auto-swe-egress".to_owned())]),
        Some("auto-swe-system".to_owned()),
    )
}

fn fenced_config() -> KubernetesConfig {
    let mut config = config();
    config.egress = Some(egress());
    config
}

pub(crate) fn tcp_proxy() -> EgressTcpProxy {
    EgressTcpProxy {
        host: "10.96.0.40".parse().unwrap(),
        port: 3128,
        credential: SecretValue::new(CREDENTIAL),
        ca_bundle_pem: None,
    }
}

fn proxied_spec() -> WorkspaceSpec {
    let mut spec = spec();
    spec.network = NetworkMode::Proxy;
    spec.egress = Some(tcp_proxy().into());
    spec
}

fn policies_uri() -> String {
    format!("/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_pod_is_fenced_by_its_policy_before_it_exists() {
    let mut api = start_api(keeper_only()).await;
    let backend = KubernetesBackend::new(api.client(), fenced_config());
    let create = tokio::spawn(async move { backend.create(&proxied_spec()).await });
    let mut seen = Vec::new();

    let (method, uri, policy, send) = api.next().await;
    assert_eq!(method, http::Method::POST);
    assert!(uri.starts_with(&format!("{}?", policies_uri())), "{uri}");
    let name = policy["metadata"]["labels"]["asw/workspace"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(policy, network_policy_manifest(&name, NS, &egress(), 3128));
    respond(send, StatusCode::CREATED, &policy);
    seen.push((uri, policy));

    let (method, uri, pod, send) = api.next().await;
    assert_eq!(method, http::Method::POST);
    assert!(
        uri.starts_with(&format!("/api/v1/namespaces/{NS}/pods?")),
        "{uri}"
    );
    assert_eq!(pod["metadata"]["name"], name.as_str());
    assert_eq!(pod, pod_manifest(&name, &proxied_spec(), &fenced_config()));
    let mut created = pod.clone();
    created["metadata"]["uid"] = json!("pod-uid-0001");
    respond(send, StatusCode::CREATED, &created);
    seen.push((uri, pod));

    let (method, uri, secret, send) = api.next().await;
    assert_eq!(method, http::Method::POST);
    assert!(uri.contains("/secrets?"), "{uri}");
    assert_eq!(
        secret["stringData"][PROXY_URL_KEY],
        format!("http://auto-swe:{CREDENTIAL}@10.96.0.40:3128")
    );
    respond(send, StatusCode::CREATED, &secret);

    let (method, uri, _, send) = api.next().await;
    assert_eq!(method, http::Method::GET);
    respond(
        send,
        StatusCode::OK,
        &pod_with(&name, &json!({"phase": "Running"})),
    );
    seen.push((uri, Value::Null));

    let ws = create.await.unwrap().unwrap();
    assert_eq!(ws.id, name);
    let note = &ws.missing["metadata_addresses"];
    assert!(
        note.contains("NetworkPolicy denies every destination but the egress proxy"),
        "{note}"
    );
    for exec in api.execs() {
        seen.push((exec.uri.clone(), json!(exec.command)));
    }
    // The credential travelled in the Secret body and nowhere else.
    assert!(!all_text(&seen).contains(CREDENTIAL), "{}", all_text(&seen));
}

/// Answers the policy, pod and Secret POSTs of a proxied create; returns the pod's name.
async fn created_up_to_the_secret(handle: &mut crate::kubernetes_api::Handle) -> String {
    let (_, uri, policy, send) = next(handle).await;
    assert!(uri.starts_with(&policies_uri()), "{uri}");
    respond(send, StatusCode::CREATED, &policy);
    let (_, uri, pod, send) = next(handle).await;
    assert!(uri.contains("/pods?"), "{uri}");
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let mut created = pod.clone();
    created["metadata"]["uid"] = json!("pod-uid-0001");
    respond(send, StatusCode::CREATED, &created);
    let (_, uri, secret, send) = next(handle).await;
    assert!(uri.contains("/secrets?"), "{uri}");
    respond(send, StatusCode::CREATED, &secret);
    name
}

/// Expects the DELETEs of the pod, its Secret and its policy, in that order.
async fn expect_deletes(handle: &mut crate::kubernetes_api::Handle, name: &str) {
    for uri in [
        format!("/api/v1/namespaces/{NS}/pods/{name}?"),
        format!("/api/v1/namespaces/{NS}/secrets/{name}-env?"),
        format!("{}/{name}-egress?", policies_uri()),
    ] {
        let (method, got, _, send) = next(handle).await;
        assert_eq!((method, got), (http::Method::DELETE, uri));
        respond(send, StatusCode::OK, &deleted());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_pod_that_fails_to_start_is_deleted_with_its_secret_and_policy() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), fenced_config());
    let create = tokio::spawn(async move { backend.create(&proxied_spec()).await });
    let name = created_up_to_the_secret(&mut handle).await;
    let (method, _, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::GET);
    respond(
        send,
        StatusCode::OK,
        &pod_with(&name, &json!({"phase": "Failed", "reason": "Evicted"})),
    );
    expect_deletes(&mut handle, &name).await;
    let err = create.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_ENGINE_ERROR");
    assert!(!err.to_string().contains(CREDENTIAL));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_cannot_be_made_means_no_pod() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), fenced_config());
    let create = tokio::spawn(async move { backend.create(&proxied_spec()).await });
    let (_, uri, policy, send) = next(&mut handle).await;
    assert!(uri.starts_with(&policies_uri()), "{uri}");
    respond(
        send,
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "etcd timeout", "reason": "InternalError", "code": 500}),
    );
    // The POST may have landed: the policy is deleted by name, and no pod is asked for.
    let name = policy["metadata"]["name"].as_str().unwrap().to_owned();
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("{}/{name}?", policies_uri()));
    respond(send, StatusCode::NOT_FOUND, &not_found(&name));
    assert_eq!(
        create.await.unwrap().unwrap_err().code(),
        "WORKSPACE_ENGINE_ERROR"
    );
    assert!(handle.next_request().await.is_none(), "a request followed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_name_clash_deletes_only_the_policy() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), fenced_config());
    let create = tokio::spawn(async move { backend.create(&proxied_spec()).await });
    let (_, _, policy, send) = next(&mut handle).await;
    respond(send, StatusCode::CREATED, &policy);
    let (_, _, pod, send) = next(&mut handle).await;
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    respond(
        send,
        StatusCode::CONFLICT,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "already exists", "reason": "AlreadyExists", "code": 409}),
    );
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("{}/{name}-egress?", policies_uri()));
    respond(send, StatusCode::OK, &deleted());
    assert!(create.await.unwrap().is_err());
    assert!(handle.next_request().await.is_none(), "a request followed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_deletes_the_policy_after_the_pod_and_secret() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = Arc::new(KubernetesBackend::new(
        kube::Client::new(mock, NS),
        fenced_config(),
    ));
    let remove = tokio::spawn(async move { backend.remove(&handle_for("asw-impl-0a0b0c")).await });
    expect_deletes(&mut handle, "asw-impl-0a0b0c").await;
    remove.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_spec_the_backend_cannot_fence_is_refused_before_any_request() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let plain = KubernetesBackend::new(kube::Client::new(mock.clone(), NS), config());
    let err = plain.create(&proxied_spec()).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BACKEND_UNAVAILABLE", "{err}");
    assert!(err.to_string().contains("egress section"), "{err}");

    // Proxy pods selected by no label: the policy would let the workspace reach every pod.
    let mut unlabelled = config();
    unlabelled.egress = Some(KubernetesEgress::new(BTreeMap::new(), None));
    let unlabelled = KubernetesBackend::new(kube::Client::new(mock.clone(), NS), unlabelled);
    let err = unlabelled.create(&proxied_spec()).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_BACKEND_UNAVAILABLE", "{err}");
    assert!(err.to_string().contains("every pod"), "{err}");
    drop(unlabelled);

    let fenced = KubernetesBackend::new(kube::Client::new(mock, NS), fenced_config());
    // A Unix socket cannot reach into a pod.
    let mut socket = spec();
    socket.network = NetworkMode::Proxy;
    socket.egress = Some(
        EgressSocket {
            socket: "/run/auto-swe/egress.sock".into(),
            bridge: "/usr/bin/auto-swe-netbridge".into(),
            ca_bundle: None,
        }
        .into(),
    );
    let err = fenced.create(&socket).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{err}");
    assert!(
        err.to_string().contains("cannot be shared with a pod"),
        "{err}"
    );
    // An attachment without proxy networking, and proxy networking without one.
    let mut unproxied = proxied_spec();
    unproxied.network = NetworkMode::None;
    let mut unattached = proxied_spec();
    unattached.egress = None;
    for spec in [unproxied, unattached] {
        let err = fenced.create(&spec).await.unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{err}");
    }
    drop((plain, fenced));
    assert!(handle.next_request().await.is_none(), "a request was sent");
}
