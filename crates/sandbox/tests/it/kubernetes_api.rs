//! The Kubernetes driver against a mocked API server. REST-only operations (failed create,
//! attach, remove) go to kube's tower-test mock, each request asserted in order. Whatever needs
//! pods/exec (a successful create probes the keeper; exec, spawn, timeouts) goes to a fake API
//! server on 127.0.0.1 whose REST calls are handed to the test the same way and whose exec
//! upgrades speak the real `v5.channel.k8s.io` websocket subprotocol (channel byte prefix,
//! stdin 0, stdout 1, stderr 2, status 3 with a `Status` JSON, 255 closes a stream).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use auto_swe_sandbox::kubernetes::{
    KubernetesBackend, KubernetesConfig, STDIN_SECRET_WRAPPER, pod_manifest,
};
use auto_swe_sandbox::{
    BackendKind, EnvName, ExecRequest, LocalRoot, SecretEnv, WorkspaceBackend, WorkspaceHandle,
    WorkspaceSpec,
};
use futures_util::{SinkExt as _, StreamExt as _};
use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tower_test::mock;

pub(crate) const NS: &str = "asw-test";
const SECRET: &str = "tok-value-never-in-a-url";

pub(crate) type Handle = mock::Handle<Request<Body>, Response<Body>>;

/// What the fake kubelet does with one exec: answer with canned stdout and status, or (`None`)
/// run the argv for real as a host process.
pub(crate) type Behaviour = Arc<dyn Fn(&[String]) -> Option<(Vec<u8>, i32)> + Send + Sync>;

/// One exec as the fake kubelet saw it.
#[derive(Debug, Clone)]
pub(crate) struct ExecRecord {
    pub(crate) uri: String,
    pub(crate) command: Vec<String>,
    pub(crate) stdin: Vec<u8>,
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn query_commands(uri: &str) -> Vec<String> {
    let query = uri.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(k, _)| *k == "command")
        .map(|(_, v)| percent_decode(v))
        .collect()
}

fn status_json(code: i32) -> Vec<u8> {
    let status = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}
        })
    };
    let mut frame = vec![3_u8];
    frame.extend_from_slice(status.to_string().as_bytes());
    frame
}

/// One REST call as the fake API server received it.
struct RestCall {
    method: http::Method,
    uri: String,
    body: Value,
    reply: oneshot::Sender<(StatusCode, Value)>,
}

/// Answers one REST request, whichever side took it.
pub(crate) enum Reply {
    Mock(mock::SendResponse<Response<Body>>),
    Loopback(oneshot::Sender<(StatusCode, Value)>),
}

/// The fake API server on 127.0.0.1: REST calls are handed to the test in order; pods/exec
/// upgrades are served by the fake kubelet.
pub(crate) struct FakeApi {
    url: String,
    records: Arc<Mutex<Vec<ExecRecord>>>,
    rest: mpsc::Receiver<RestCall>,
}

impl FakeApi {
    pub(crate) fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    pub(crate) async fn next(&mut self) -> (http::Method, String, Value, Reply) {
        let call = tokio::time::timeout(Duration::from_secs(60), self.rest.recv())
            .await
            .unwrap_or_else(|_| panic!("the driver sent no further request"))
            .unwrap_or_else(|| panic!("the server stopped"));
        (
            call.method,
            call.uri,
            call.body,
            Reply::Loopback(call.reply),
        )
    }

    pub(crate) fn execs(&self) -> Vec<ExecRecord> {
        self.records.lock().unwrap().clone()
    }
}

type ServerBody = http_body_util::Full<bytes::Bytes>;

async fn serve(
    mut req: Request<hyper::body::Incoming>,
    behaviour: Behaviour,
    records: Arc<Mutex<Vec<ExecRecord>>>,
    rest: mpsc::Sender<RestCall>,
) -> Result<Response<ServerBody>, std::convert::Infallible> {
    use http::header;
    use http_body_util::BodyExt as _;
    let uri = req.uri().to_string();
    if let Some(key) = req.headers().get(header::SEC_WEBSOCKET_KEY).cloned() {
        let offered = req
            .headers()
            .get(header::SEC_WEBSOCKET_PROTOCOL)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !offered.contains("v5.channel.k8s.io") {
            return Ok(Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .body(ServerBody::default())
                .unwrap());
        }
        let upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let upgraded = upgrade.await.unwrap();
            let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
                hyper_util::rt::TokioIo::new(upgraded),
                Role::Server,
                None,
            )
            .await;
            run_exec(ws, uri, behaviour, records).await;
        });
        return Ok(Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::UPGRADE, "websocket")
            .header(header::CONNECTION, "Upgrade")
            .header(
                header::SEC_WEBSOCKET_ACCEPT,
                derive_accept_key(key.as_bytes()),
            )
            .header(header::SEC_WEBSOCKET_PROTOCOL, "v5.channel.k8s.io")
            .body(ServerBody::default())
            .unwrap());
    }
    let method = req.method().clone();
    let bytes = req.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    let (reply, answer) = oneshot::channel();
    let call = RestCall {
        method,
        uri,
        body,
        reply,
    };
    let (status, value) = if rest.send(call).await.is_ok() {
        answer
            .await
            .unwrap_or((StatusCode::INTERNAL_SERVER_ERROR, json!({})))
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, json!({}))
    };
    Ok(Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(ServerBody::new(serde_json::to_vec(&value).unwrap().into()))
        .unwrap())
}

/// Serves one exec: either the canned reply or a real process wired to the channels.
async fn run_exec<S>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    uri: String,
    behaviour: Behaviour,
    records: Arc<Mutex<Vec<ExecRecord>>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let command = query_commands(&uri);
    let (mut sink, mut source) = ws.split();
    let mut stdin = Vec::new();

    if let Some((stdout, code)) = behaviour(&command) {
        // Read stdin up to its close, as a kubelet would hand it to the process.
        while let Some(Ok(message)) = source.next().await {
            if let Message::Binary(bin) = message {
                match bin.first() {
                    Some(0) => stdin.extend_from_slice(&bin[1..]),
                    Some(255) => break,
                    _ => {}
                }
            }
        }
        records.lock().unwrap().push(ExecRecord {
            uri,
            command,
            stdin,
        });
        if !stdout.is_empty() {
            let mut frame = vec![1_u8];
            frame.extend_from_slice(&stdout);
            sink.send(Message::binary(frame)).await.unwrap();
        }
        sink.send(Message::binary(status_json(code))).await.unwrap();
        let _ = sink.close().await;
        return;
    }
    run_on_host(sink, source, uri, command, records).await;
}

type WsSink<S> = futures_util::stream::SplitSink<tokio_tungstenite::WebSocketStream<S>, Message>;
type WsSource<S> = futures_util::stream::SplitStream<tokio_tungstenite::WebSocketStream<S>>;

/// Runs the exec's argv as a host process (the "pod") with a clean environment, its streams
/// wired to the channels, and reports its exit status on channel 3.
#[expect(
    clippy::disallowed_methods,
    reason = "the fake kubelet runs test-authored commands as the pod would"
)]
async fn run_on_host<S>(
    mut sink: WsSink<S>,
    mut source: WsSource<S>,
    uri: String,
    command: Vec<String>,
    records: Arc<Mutex<Vec<ExecRecord>>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut stdin = Vec::new();
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut child_in = child.stdin.take();
    let mut child_out = child.stdout.take().unwrap();
    let mut child_err = child.stderr.take().unwrap();
    let (frames_tx, mut frames_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let out_tx = frames_tx.clone();
    let out_pump = tokio::spawn(async move {
        let mut buf = vec![0_u8; 8192];
        while let Ok(n @ 1..) = child_out.read(&mut buf).await {
            let mut frame = vec![1_u8];
            frame.extend_from_slice(&buf[..n]);
            let _ = out_tx.send(frame).await;
        }
    });
    let err_pump = tokio::spawn(async move {
        let mut buf = vec![0_u8; 8192];
        while let Ok(n @ 1..) = child_err.read(&mut buf).await {
            let mut frame = vec![2_u8];
            frame.extend_from_slice(&buf[..n]);
            let _ = frames_tx.send(frame).await;
        }
    });
    let writer = tokio::spawn(async move {
        while let Some(frame) = frames_rx.recv().await {
            if sink.send(Message::binary(frame)).await.is_err() {
                return None;
            }
        }
        Some(sink)
    });
    // Stdin: until the client closes channel 0, the connection ends, or the process exits.
    let status = loop {
        tokio::select! {
            message = source.next() => match message {
                Some(Ok(Message::Binary(bin))) => match bin.first() {
                    Some(0) => {
                        stdin.extend_from_slice(&bin[1..]);
                        if let Some(input) = child_in.as_mut() {
                            let _ = input.write_all(&bin[1..]).await;
                        }
                    }
                    Some(255) => drop(child_in.take()),
                    _ => {}
                },
                Some(Ok(_)) => {}
                Some(Err(_)) | None => {
                    drop(child_in.take());
                    break child.wait().await.unwrap();
                }
            },
            status = child.wait() => break status.unwrap(),
        }
    };
    records.lock().unwrap().push(ExecRecord {
        uri,
        command,
        stdin,
    });
    let _ = out_pump.await;
    let _ = err_pump.await;
    if let Ok(Some(mut sink)) = writer.await {
        use std::os::unix::process::ExitStatusExt as _;
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        let _ = sink.send(Message::binary(status_json(code))).await;
        let _ = sink.close().await;
    }
}

pub(crate) async fn start_api(behaviour: Behaviour) -> FakeApi {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let records = Arc::new(Mutex::new(Vec::new()));
    let (rest_tx, rest) = mpsc::channel(16);
    let shared = Arc::clone(&records);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let behaviour = Arc::clone(&behaviour);
            let records = Arc::clone(&shared);
            let rest_tx = rest_tx.clone();
            let service = hyper::service::service_fn(move |req| {
                serve(
                    req,
                    Arc::clone(&behaviour),
                    Arc::clone(&records),
                    rest_tx.clone(),
                )
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .with_upgrades(),
            );
        }
    });
    FakeApi { url, records, rest }
}

pub(crate) fn config() -> KubernetesConfig {
    let mut config = KubernetesConfig::default();
    NS.clone_into(&mut config.namespace);
    config.poll_interval = Duration::from_millis(1);
    config.start_timeout = Duration::from_secs(60);
    config
}

pub(crate) fn spec() -> WorkspaceSpec {
    let mut spec = WorkspaceSpec::new(
        "registry.example.invalid/workspace:1",
        LocalRoot::HostSystem,
    );
    "impl".clone_into(&mut spec.label);
    spec.env.insert(EnvName::new("CI").unwrap(), "1".to_owned());
    spec.secret_env = SecretEnv::new()
        .with("YARN_NPM_AUTH_TOKEN", SECRET)
        .unwrap();
    spec
}

/// The next REST request: method, path and query, JSON body (`Null` when empty).
pub(crate) async fn next(handle: &mut Handle) -> (http::Method, String, Value, Reply) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(60), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("the driver sent no further request"))
        .unwrap_or_else(|| panic!("the client was dropped"));
    let method = request.method().clone();
    let uri = request.uri().to_string();
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (method, uri, body, Reply::Mock(send))
}

pub(crate) fn respond(reply: Reply, status: StatusCode, body: &Value) {
    match reply {
        Reply::Mock(send) => send.send_response(
            Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(body).unwrap()))
                .unwrap(),
        ),
        Reply::Loopback(send) => {
            let _ = send.send((status, body.clone()));
        }
    }
}

pub(crate) fn not_found(name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("\"{name}\" not found"), "reason": "NotFound", "code": 404})
}

pub(crate) fn deleted() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
}

pub(crate) fn pod_with(name: &str, status: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": "pod-uid-0001",
            "labels": {"asw/role": "workspace", "asw/workspace": name}},
        "status": status})
}

/// Answers the keeper probe with one PID and refuses to run anything else.
pub(crate) fn keeper_only() -> Behaviour {
    Arc::new(|argv: &[String]| {
        assert!(
            argv.last().is_some_and(|s| s.contains("PPid:")),
            "unexpected exec {argv:?}"
        );
        Some((b"4242\n".to_vec(), 0))
    })
}

pub(crate) fn all_text(records: &[(String, Value)]) -> String {
    records
        .iter()
        .map(|(uri, body)| format!("{uri} {body}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_posts_the_pod_then_its_owned_secret_and_waits_for_running() {
    let mut api = start_api(keeper_only()).await;
    let backend = KubernetesBackend::new(api.client(), config());
    let create = tokio::spawn(async move { backend.create(&spec()).await });
    let mut seen = Vec::new();

    let (method, uri, pod, send) = api.next().await;
    assert_eq!(method, http::Method::POST);
    assert!(
        uri.starts_with(&format!("/api/v1/namespaces/{NS}/pods?")),
        "{uri}"
    );
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("asw-impl-"), "{name}");
    assert_eq!(pod, pod_manifest(&name, &spec(), &config()));
    let mut created = pod.clone();
    created["metadata"]["uid"] = json!("pod-uid-0001");
    created["status"] = json!({"phase": "Pending"});
    respond(send, StatusCode::CREATED, &created);
    seen.push((uri, pod));

    let (method, uri, secret, send) = api.next().await;
    assert_eq!(method, http::Method::POST);
    assert!(
        uri.starts_with(&format!("/api/v1/namespaces/{NS}/secrets?")),
        "{uri}"
    );
    assert_eq!(secret["metadata"]["name"], format!("{name}-env"));
    assert_eq!(
        secret["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": "pod-uid-0001"}])
    );
    assert_eq!(secret["stringData"]["YARN_NPM_AUTH_TOKEN"], SECRET);
    respond(send, StatusCode::CREATED, &secret);

    // Waiting for the Secret, then pulling, then running.
    let waiting = [
        json!({"phase": "Pending", "containerStatuses": [{"name": "workspace", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "CreateContainerConfigError"}}}]}),
        json!({"phase": "Pending"}),
        json!({"phase": "Running"}),
    ];
    for status in waiting {
        let (method, uri, body, send) = api.next().await;
        assert_eq!(method, http::Method::GET);
        assert_eq!(uri, format!("/api/v1/namespaces/{NS}/pods/{name}"));
        respond(send, StatusCode::OK, &pod_with(&name, &status));
        seen.push((uri, body));
    }

    let ws = create.await.unwrap().unwrap();
    assert_eq!(ws.id, name);
    assert_eq!(ws.backend, BackendKind::Kubernetes);
    assert_eq!(ws.keeper_pid, 4242);
    assert!(ws.missing.contains_key("pids_cap"));

    let execs = api.execs();
    assert_eq!(execs.len(), 1, "{execs:?}");
    assert!(
        execs[0]
            .uri
            .starts_with(&format!("/api/v1/namespaces/{NS}/pods/{name}/exec?")),
        "{}",
        execs[0].uri
    );
    assert!(execs[0].uri.contains("container=workspace"));
    for exec in &execs {
        seen.push((
            exec.uri.clone(),
            Value::String(String::from_utf8_lossy(&exec.stdin).into()),
        ));
    }
    // The value travelled in the Secret body and nowhere else.
    assert!(!all_text(&seen).contains(SECRET), "{}", all_text(&seen));
}

async fn create_fails_and_cleans_up(status: Value, expected: &str) {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), config());
    let create = tokio::spawn(async move { backend.create(&spec()).await });

    let (_, _, pod, send) = next(&mut handle).await;
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let mut created = pod.clone();
    created["metadata"]["uid"] = json!("pod-uid-0001");
    respond(send, StatusCode::CREATED, &created);
    let (_, _, secret, send) = next(&mut handle).await;
    respond(send, StatusCode::CREATED, &secret);
    let (method, _, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::GET);
    respond(send, StatusCode::OK, &pod_with(&name, &status));

    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/pods/{name}?"));
    respond(send, StatusCode::OK, &pod_with(&name, &status));
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/secrets/{name}-env?"));
    respond(send, StatusCode::OK, &deleted());

    let err = create.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_ENGINE_ERROR");
    assert!(err.to_string().contains(expected), "{err}");
    assert!(!err.to_string().contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fails_to_start_is_deleted_with_its_secret() {
    create_fails_and_cleans_up(
        json!({"phase": "Failed", "reason": "DeadlineExceeded"}),
        "DeadlineExceeded",
    )
    .await;
    create_fails_and_cleans_up(
        json!({"phase": "Pending", "containerStatuses": [{"name": "workspace", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off pulling"}}}]}),
        "ImagePullBackOff",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_gets_the_pod_by_name() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = Arc::new(KubernetesBackend::new(
        kube::Client::new(mock, NS),
        config(),
    ));

    let b = Arc::clone(&backend);
    let attach = tokio::spawn(async move { b.attach("asw-impl-0a0b0c").await });
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::GET);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/pods/asw-impl-0a0b0c"));
    respond(
        send,
        StatusCode::OK,
        &pod_with("asw-impl-0a0b0c", &json!({"phase": "Running"})),
    );
    let ws = attach.await.unwrap().unwrap();
    assert_eq!(ws.id, "asw-impl-0a0b0c");
    assert_eq!(ws.backend, BackendKind::Kubernetes);

    let b = Arc::clone(&backend);
    let attach = tokio::spawn(async move { b.attach("asw-gone-000000").await });
    let (_, _, _, send) = next(&mut handle).await;
    respond(send, StatusCode::NOT_FOUND, &not_found("asw-gone-000000"));
    assert_eq!(
        attach.await.unwrap().unwrap_err().code(),
        "WORKSPACE_NOT_FOUND"
    );

    // A pod that is not one of ours is not a workspace.
    let b = Arc::clone(&backend);
    let attach = tokio::spawn(async move { b.attach("someone-else").await });
    let (_, _, _, send) = next(&mut handle).await;
    respond(
        send,
        StatusCode::OK,
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "someone-else"},
            "status": {"phase": "Running"}}),
    );
    assert_eq!(
        attach.await.unwrap().unwrap_err().code(),
        "WORKSPACE_NOT_FOUND"
    );
}

pub(crate) fn handle_for(id: &str) -> WorkspaceHandle {
    WorkspaceHandle {
        id: id.to_owned(),
        backend: BackendKind::Kubernetes,
        keeper_pid: 0,
        protections: Vec::new(),
        missing: std::collections::BTreeMap::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_deletes_the_pod_then_the_secret_and_twice_is_fine() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = Arc::new(KubernetesBackend::new(
        kube::Client::new(mock, NS),
        config(),
    ));
    let ws = handle_for("asw-impl-0a0b0c");
    for round in 0..2 {
        let b = Arc::clone(&backend);
        let w = ws.clone();
        let remove = tokio::spawn(async move { b.remove(&w).await });
        let (method, uri, _, send) = next(&mut handle).await;
        assert_eq!(method, http::Method::DELETE);
        assert_eq!(
            uri,
            format!("/api/v1/namespaces/{NS}/pods/asw-impl-0a0b0c?")
        );
        if round == 0 {
            respond(
                send,
                StatusCode::OK,
                &pod_with("asw-impl-0a0b0c", &json!({"phase": "Running"})),
            );
        } else {
            respond(send, StatusCode::NOT_FOUND, &not_found("asw-impl-0a0b0c"));
        }
        let (method, uri, _, send) = next(&mut handle).await;
        assert_eq!(method, http::Method::DELETE);
        assert_eq!(
            uri,
            format!("/api/v1/namespaces/{NS}/secrets/asw-impl-0a0b0c-env?")
        );
        if round == 0 {
            respond(send, StatusCode::OK, &deleted());
        } else {
            respond(
                send,
                StatusCode::NOT_FOUND,
                &not_found("asw-impl-0a0b0c-env"),
            );
        }
        remove.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_still_deletes_the_secret_when_the_pod_delete_fails() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), config());
    let remove = tokio::spawn(async move { backend.remove(&handle_for("asw-x-000001")).await });
    let (_, _, _, send) = next(&mut handle).await;
    respond(
        send,
        StatusCode::FORBIDDEN,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "forbidden", "reason": "Forbidden", "code": 403}),
    );
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert!(uri.contains("/secrets/asw-x-000001-env"), "{uri}");
    respond(send, StatusCode::OK, &deleted());
    let err = remove.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_ENGINE_ERROR");
}

/// Runs every exec for real on this host (the fake kubelet is the "pod"), from `dir`.
async fn exec_setup() -> (
    FakeApi,
    KubernetesBackend,
    WorkspaceHandle,
    tempfile::TempDir,
) {
    let kubelet = start_api(Arc::new(|_: &[String]| None)).await;
    let backend = KubernetesBackend::new(kubelet.client(), config());
    let dir = tempfile::tempdir().unwrap();
    (kubelet, backend, handle_for("asw-exec-0a0b0c"), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_carries_secrets_on_stdin_and_round_trips_streams_and_status() {
    let (kubelet, backend, ws, dir) = exec_setup().await;
    let mut request = ExecRequest::shell(
        "printf '%s|%s|%s|' \"$EXEC_SECRET\" \"$PLAIN\" \"$(pwd)\"; cat; echo to-stderr >&2; exit 3",
    )
    .stdin(b"caller stdin".to_vec())
    .timeout(Duration::from_secs(60));
    request.workdir = dir.path().to_str().unwrap().to_owned();
    request
        .env
        .insert(EnvName::new("PLAIN").unwrap(), "plain".to_owned());
    request.secret_env = SecretEnv::new().with("EXEC_SECRET", SECRET).unwrap();

    let out = backend.exec(&ws, &request).await.unwrap();
    assert_eq!(out.status, 3);
    assert_eq!(
        out.stdout_text(),
        format!("{SECRET}|plain|{}|caller stdin", dir.path().display())
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "to-stderr\n");

    let records = kubelet.execs();
    assert_eq!(records.len(), 1);
    let exec = &records[0];
    assert!(!exec.uri.contains(SECRET), "{}", exec.uri);
    assert!(exec.uri.contains("stdin=true"));
    assert_eq!(exec.command[..3], ["/bin/sh", "-c", STDIN_SECRET_WRAPPER]);
    assert!(
        exec.command
            .contains(&format!("AUTO_SWE_EXEC_ID={}", out.exec_id.as_str())),
        "{:?}",
        exec.command
    );
    assert!(exec.command.contains(&"PLAIN=plain".to_owned()));
    assert_eq!(
        exec.stdin,
        format!("EXEC_SECRET={SECRET}\n\ncaller stdin").into_bytes()
    );

    // The throwing variant reports the status; a second exec has a fresh tag.
    let err = backend.exec_checked(&ws, &request).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_EXEC_FAILED");
    assert!(!err.to_string().contains(SECRET));
    let records = kubelet.execs();
    assert_eq!(records.len(), 2);
    assert_ne!(records[0].command[6], records[1].command[6]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_with_a_line_break_is_refused_before_anything_is_sent() {
    let (kubelet, backend, ws, dir) = exec_setup().await;
    let mut refused = ExecRequest::new(["true"]);
    refused.workdir = dir.path().to_str().unwrap().to_owned();
    refused.secret_env = SecretEnv::new().with("EXEC_SECRET", "two\nlines").unwrap();
    let err = backend.exec(&ws, &refused).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_SECRET_REFUSED");
    assert!(!err.to_string().contains("two\nlines"));

    // The kubelet sees the next exec as its first.
    let mut ok = ExecRequest::new(["true"]).timeout(Duration::from_secs(60));
    ok.workdir = refused.workdir.clone();
    assert_eq!(backend.exec(&ws, &ok).await.unwrap().status, 0);
    let records = kubelet.execs();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].stdin, b"\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_streams_stdin_and_output() {
    let (_kubelet, backend, ws, dir) = exec_setup().await;
    let mut request = ExecRequest::new(["cat"]).timeout(Duration::from_secs(60));
    request.workdir = dir.path().to_str().unwrap().to_owned();
    let mut spawned = backend.spawn(&ws, &request).await.unwrap();
    let stdin = spawned.stdin.take().unwrap();
    stdin.send(b"first\n".to_vec()).await.unwrap();
    let mut echoed = Vec::new();
    while echoed != b"first\n" {
        match spawned.output.recv().await.unwrap() {
            auto_swe_sandbox::OutputChunk::Stdout(bytes) => echoed.extend(bytes),
            other => panic!("{other:?}"),
        }
    }
    drop(stdin);
    while spawned.output.recv().await.is_some() {}
    assert_eq!(
        spawned.exit.await.unwrap().unwrap(),
        auto_swe_sandbox::Exit::Status(0)
    );
}

/// Host processes whose environment carries `tag`.
fn tagged(tag: &str) -> Vec<u32> {
    let needle = format!("AUTO_SWE_EXEC_ID={tag}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_exec_has_its_whole_tagged_tree_killed() {
    let (kubelet, backend, ws, dir) = exec_setup().await;
    let mut request = ExecRequest::shell("sleep 600 & sleep 600 & echo started; wait")
        .timeout(Duration::from_secs(2));
    request.workdir = dir.path().to_str().unwrap().to_owned();
    let mut spawned = backend.spawn(&ws, &request).await.unwrap();
    drop(spawned.stdin.take());
    let tag = spawned.exec_id.as_str().to_owned();
    // Once it printed, its children exist.
    let first = spawned.output.recv().await.unwrap();
    assert_eq!(
        first,
        auto_swe_sandbox::OutputChunk::Stdout(b"started\n".to_vec())
    );
    // A child caught in the middle of its execve has no readable environment for a moment:
    // look again (bounded) before judging.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tagged(&tag).len() < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(tagged(&tag).len() >= 3, "{:?}", tagged(&tag));
    while spawned.output.recv().await.is_some() {}
    assert_eq!(
        spawned.exit.await.unwrap().unwrap(),
        auto_swe_sandbox::Exit::TimedOut
    );
    // The second exec was the tree kill, tagged with the first's id; nothing is left.
    let records = kubelet.execs();
    let kill = records
        .iter()
        .find(|r| r.command.len() == 3 && r.command[2].contains(&tag))
        .unwrap_or_else(|| panic!("no kill exec in {records:?}"));
    assert!(kill.command[2].contains("kill -KILL"));
    let alive = || -> Vec<u32> {
        tagged(&tag)
            .into_iter()
            .filter(|pid| {
                // Zombies awaiting their reaper are dead already.
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
            })
            .collect()
    };
    // SIGKILL has been sent; a process may take a moment to finish dying (bounded wait).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !alive().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left = alive();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_every_process_and_refuses_execs_until_resumed() {
    // The pod answers every exec with status 0 (nothing may signal this host's processes).
    let api = start_api(Arc::new(|_: &[String]| Some((Vec::new(), 0)))).await;
    let backend = KubernetesBackend::new(api.client(), config());
    let ws = handle_for("asw-pause-0a0b0c");
    backend.pause(&ws).await.unwrap();
    let err = backend
        .exec(&ws, &ExecRequest::new(["true"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_PAUSED");
    backend.resume(&ws).await.unwrap();
    backend
        .exec(&ws, &ExecRequest::new(["true"]))
        .await
        .unwrap();
    let commands: Vec<String> = api
        .execs()
        .iter()
        .map(|r| r.command.last().unwrap().clone())
        .collect();
    assert_eq!(commands, ["kill -STOP -1", "kill -CONT -1", "true"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_refuses_an_unsafe_archive_before_any_exec() {
    let api = start_api(Arc::new(|_: &[String]| Some((Vec::new(), 0)))).await;
    let backend = KubernetesBackend::new(api.client(), config());
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.as_old_mut().name[..9].copy_from_slice(b"../escape");
    header.set_cksum();
    builder.append(&header, &b"x"[..]).unwrap();
    let archive = builder.into_inner().unwrap();
    let err = backend
        .copy_in(&handle_for("asw-copy-0a0b0c"), &archive, "/workspace")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_UNSAFE_ARCHIVE");
    assert!(api.execs().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_secret_deletes_the_pod_and_the_secret_by_name() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), config());
    let create = tokio::spawn(async move { backend.create(&spec()).await });
    let (_, _, pod, send) = next(&mut handle).await;
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let mut created = pod.clone();
    created["metadata"]["uid"] = json!("pod-uid-0001");
    respond(send, StatusCode::CREATED, &created);
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::POST);
    assert!(uri.contains("/secrets"), "{uri}");
    respond(
        send,
        StatusCode::FORBIDDEN,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "secrets is forbidden", "reason": "Forbidden", "code": 403}),
    );
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/pods/{name}?"));
    respond(
        send,
        StatusCode::OK,
        &pod_with(&name, &json!({"phase": "Pending"})),
    );
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/secrets/{name}-env?"));
    respond(
        send,
        StatusCode::NOT_FOUND,
        &not_found(&format!("{name}-env")),
    );
    let err = create.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("forbidden"), "{err}");
    assert!(!err.to_string().contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_clash_deletes_nothing() {
    let (mock, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let backend = KubernetesBackend::new(kube::Client::new(mock, NS), config());
    let create = tokio::spawn(async move { backend.create(&spec()).await });
    let (method, _, _, send) = next(&mut handle).await;
    assert_eq!(method, http::Method::POST);
    respond(
        send,
        StatusCode::CONFLICT,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "already exists", "reason": "AlreadyExists", "code": 409}),
    );
    assert_eq!(
        create.await.unwrap().unwrap_err().code(),
        "WORKSPACE_ENGINE_ERROR"
    );
    // The backend is gone with its task; the mock saw no further request.
    assert!(handle.next_request().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_keeper_fails_creation_and_cleans_up() {
    let mut api = start_api(Arc::new(|_: &[String]| Some((b"7\n9\n".to_vec(), 0)))).await;
    let backend = KubernetesBackend::new(api.client(), config());
    let mut workspace = spec();
    workspace.secret_env = SecretEnv::new();
    let create = tokio::spawn(async move { backend.create(&workspace).await });
    let (method, _, pod, reply) = api.next().await;
    assert_eq!(method, http::Method::POST);
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    respond(
        reply,
        StatusCode::CREATED,
        &pod_with(&name, &json!({"phase": "Pending"})),
    );
    // No secret env: no Secret POST, straight to waiting.
    let (method, _, _, reply) = api.next().await;
    assert_eq!(method, http::Method::GET);
    respond(
        reply,
        StatusCode::OK,
        &pod_with(&name, &json!({"phase": "Running"})),
    );
    let (method, uri, _, reply) = api.next().await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/pods/{name}?"));
    respond(
        reply,
        StatusCode::OK,
        &pod_with(&name, &json!({"phase": "Running"})),
    );
    let (method, uri, _, reply) = api.next().await;
    assert_eq!(method, http::Method::DELETE);
    assert_eq!(uri, format!("/api/v1/namespaces/{NS}/secrets/{name}-env?"));
    respond(
        reply,
        StatusCode::NOT_FOUND,
        &not_found(&format!("{name}-env")),
    );
    let err = create.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("exactly one keeper"), "{err}");
    assert_eq!(api.execs().len(), 1);
}
