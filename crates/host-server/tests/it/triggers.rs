//! Triggers over real HTTP: managing them by role and tenant, and deliveries as a Standard
//! Webhooks sender and an attacker send them (forged, replayed, stale, oversized, over a limit).

use std::time::Duration;

use auto_swe_server::standard_webhooks::sign_delivery;
use auto_swe_store::{PlatformRole, SecretString, Store, TokenOwner};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{Server, code, fresh_database, open_store, user_with_token};

fn spec() -> Value {
    json!({
        "specVersion": 1,
        "name": "triage",
        "entry": "gather",
        "inputs": { "ticket": { "type": "object", "required": true } },
        "nodes": [
            { "id": "gather", "type": "step", "step": "gatherTicketContext", "next": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS", "result": {} }
        ]
    })
}

fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// A delivery as a sender makes it.
struct Delivery<'a> {
    id: &'a str,
    timestamp: i64,
    body: Vec<u8>,
    signature: Option<String>,
    skip: Option<&'static str>,
}

impl<'a> Delivery<'a> {
    /// Signed now with `secret`.
    fn signed(secret: &str, id: &'a str, body: &Value) -> Self {
        let body = serde_json::to_vec(body).unwrap();
        let timestamp = now();
        let signature = sign_delivery(&SecretString::new(secret), id, timestamp, &body).unwrap();
        Self {
            id,
            timestamp,
            body,
            signature: Some(signature),
            skip: None,
        }
    }
}

async fn deliver(
    server: &Server,
    trigger: &str,
    delivery: &Delivery<'_>,
) -> (StatusCode, Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/triggers/{trigger}/deliveries",
            server.base
        ))
        .header("content-type", "application/json")
        .body(delivery.body.clone());
    let timestamp = delivery.timestamp.to_string();
    for (name, value) in [
        ("webhook-id", Some(delivery.id)),
        ("webhook-timestamp", Some(timestamp.as_str())),
        ("webhook-signature", delivery.signature.as_deref()),
    ] {
        if let Some(value) = value
            && delivery.skip != Some(name)
        {
            request = request.header(name, value);
        }
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (
        status,
        retry_after,
        response.json().await.unwrap_or(Value::Null),
    )
}

async fn runs_started_by(store: &Store, trigger: &str) -> usize {
    store
        .trigger_deliveries(trigger, 500)
        .await
        .unwrap()
        .iter()
        .filter(|d| d.run_id.is_some())
        .count()
}

struct Setup {
    server: Server,
    store: Store,
    lead: String,
    lead_id: String,
    template: String,
    team: String,
}

async fn setup(tag: &str) -> Option<Setup> {
    let url = fresh_database(tag)?;
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let (lead_user, lead) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead),
            Some(&json!({ "name": "triage", "teamId": team.id, "spec": spec() })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    Some(Setup {
        template: created["data"]["id"].as_str().unwrap().to_owned(),
        server,
        store,
        lead,
        lead_id: lead_user.id,
        team: team.id,
    })
}

/// Makes a trigger as `token`; returns its id and secret.
async fn make_trigger(setup: &Setup, body: &Value) -> (String, String) {
    let (status, created) = setup
        .server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-templates/{}/triggers", setup.template),
            Some(&setup.lead),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let secret = created["data"]["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{created}");
    (
        created["data"]["trigger"]["id"]
            .as_str()
            .unwrap()
            .to_owned(),
        secret,
    )
}

fn event(kind: &str, n: u32) -> Value {
    json!({ "type": kind, "ticket": { "title": format!("ticket {n}") } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_starts_one_run_per_webhook_id_under_the_signature_rules() {
    let Some(setup) = setup("triggers").await else {
        return;
    };
    let server = &setup.server;
    let (trigger, secret) = make_trigger(&setup, &json!({ "name": "tracker" })).await;

    // Signed: a run of the template's newest version, the body its input, the creator its
    // launcher.
    let body = event("issue.created", 1);
    let (status, _, first) =
        deliver(server, &trigger, &Delivery::signed(&secret, "msg_1", &body)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    assert_eq!(first["data"]["outcome"], "started");
    let run_id = first["data"]["runId"].as_str().unwrap().to_owned();
    let run = setup.store.get_run(&run_id).await.unwrap();
    assert_eq!(run.launched_by.as_deref(), Some(setup.lead_id.as_str()));
    assert!(run.template_version_id.is_some());
    let input = setup
        .store
        .get_run_input(run.run_input_id.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(input.payload, body);
    assert_eq!(input.submitter, format!("trigger:{trigger}"));
    let (status, seen) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run_id}"),
            Some(&setup.lead),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{seen}");

    // A retry (signed again, as senders do) answers the first run and starts nothing.
    for _ in 0..2 {
        let (status, _, again) =
            deliver(server, &trigger, &Delivery::signed(&secret, "msg_1", &body)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{again}");
        assert_eq!(again["data"]["outcome"], "replayed");
        assert_eq!(again["data"]["runId"], run_id.as_str());
    }
    assert_eq!(runs_started_by(&setup.store, &trigger).await, 1);

    // Two signatures, one of them good (a sender mid-rotation): taken.
    let mut two = Delivery::signed(&secret, "msg_2", &event("issue.created", 2));
    let stranger = sign_delivery(
        &SecretString::new("whsec_c3RyYW5nZXItc2VjcmV0LWZvci10ZXN0cw=="),
        "msg_2",
        two.timestamp,
        &two.body,
    )
    .unwrap();
    two.signature = Some(format!("{stranger} {}", two.signature.unwrap()));
    let (status, _, taken) = deliver(server, &trigger, &two).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{taken}");
    assert_eq!(taken["data"]["outcome"], "started");

    // Forged, re-used over another body, or for a trigger that does not exist: one answer.
    let ledger_before = setup.store.trigger_deliveries(&trigger, 500).await.unwrap();
    let mut forged = Delivery::signed(&secret, "msg_3", &event("issue.created", 3));
    forged.signature = Some(
        sign_delivery(
            &SecretString::new("whsec_Z3Vlc3NlZC1zZWNyZXQtZm9yLXRlc3Rz"),
            "msg_3",
            forged.timestamp,
            &forged.body,
        )
        .unwrap(),
    );
    let mut swapped = Delivery::signed(&secret, "msg_3", &event("issue.created", 3));
    swapped.body = serde_json::to_vec(&event("issue.created", 4)).unwrap();
    let mut only_stranger = Delivery::signed(&secret, "msg_3", &event("issue.created", 3));
    only_stranger.signature = Some(stranger.clone());
    let good = Delivery::signed(&secret, "msg_3", &event("issue.created", 3));
    let mut refusals = Vec::new();
    for (target, delivery) in [
        (trigger.as_str(), &forged),
        (trigger.as_str(), &swapped),
        (trigger.as_str(), &only_stranger),
        ("0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b", &good),
        ("not-a-trigger", &good),
    ] {
        let (status, _, body) = deliver(server, target, delivery).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        refusals.push(body);
    }
    assert!(refusals.iter().all(|r| *r == refusals[0]), "{refusals:?}");
    assert_eq!(code(&refusals[0]), "WEBHOOK_SIGNATURE_INVALID");

    // Stale and future timestamps, even correctly signed: refused.
    for skew in [-301, 301, -3_600, 86_400] {
        let mut late = Delivery::signed(&secret, "msg_3", &event("issue.created", 3));
        late.timestamp += skew;
        late.signature = Some(
            sign_delivery(
                &SecretString::new(&secret),
                "msg_3",
                late.timestamp,
                &late.body,
            )
            .unwrap(),
        );
        let (status, _, body) = deliver(server, &trigger, &late).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{skew}: {body}");
        assert_eq!(code(&body), "WEBHOOK_TIMESTAMP_OUT_OF_RANGE");
    }

    // Missing headers.
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        let mut missing = Delivery::signed(&secret, "msg_3", &event("issue.created", 3));
        missing.skip = Some(name);
        let (status, _, body) = deliver(server, &trigger, &missing).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {body}");
        assert_eq!(code(&body), "WEBHOOK_HEADER_MISSING");
    }

    // Over 64 KB: refused, whether it says so up front or streams.
    let mut big = event("issue.created", 3);
    big["padding"] = Value::String("x".repeat(64 * 1024));
    let (status, _, body) =
        deliver(server, &trigger, &Delivery::signed(&secret, "msg_3", &big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(chunked_post(server, &trigger, 70 * 1024).await, 413);

    // Signed but not a JSON object: refused before it is recorded.
    let mut not_json = Delivery::signed(&secret, "msg_3", &json!(null));
    not_json.body = b"{not json".to_vec();
    not_json.signature = Some(
        sign_delivery(
            &SecretString::new(&secret),
            "msg_3",
            not_json.timestamp,
            &not_json.body,
        )
        .unwrap(),
    );
    let (status, _, body) = deliver(server, &trigger, &not_json).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        setup.store.trigger_deliveries(&trigger, 500).await.unwrap(),
        ledger_before,
        "a refused delivery records nothing"
    );

    // A retry while its run is starting elsewhere: 409 with Retry-After.
    setup
        .store
        .admit_delivery(&trigger, "msg_held", Some("issue.created"))
        .await
        .unwrap();
    let (status, retry, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_held", &event("issue.created", 5)),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(code(&body), "DELIVERY_IN_PROGRESS");
    assert!(retry.unwrap().parse::<u64>().unwrap() <= 60);

    // Event types: another type is skipped, and stays skipped when retried.
    let lead = setup.lead.as_str();
    let patch = |body: Value| {
        let trigger = trigger.clone();
        async move {
            let (status, patched) = server
                .call(
                    Method::PATCH,
                    &format!("/api/v1/triggers/{trigger}"),
                    Some(lead),
                    Some(&body),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{patched}");
            patched
        }
    };
    patch(json!({ "eventTypes": ["issue.created"] })).await;
    let other = event("issue.updated", 6);
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_6", &other),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["data"]["outcome"], "skipped");
    assert_eq!(body["data"]["reason"], "EVENT_TYPE_NOT_SELECTED");
    let patched = patch(json!({ "eventTypes": null })).await;
    assert_eq!(patched["data"]["eventTypes"], Value::Null);
    let (_, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_6", &other),
    )
    .await;
    assert_eq!(body["data"]["outcome"], "skipped");

    // Paused: acknowledged, nothing started.
    patch(json!({ "paused": true })).await;
    let started = runs_started_by(&setup.store, &trigger).await;
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_7", &event("issue.created", 7)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["data"]["reason"], "PAUSED");
    assert_eq!(body["data"]["runId"], Value::Null);
    assert_eq!(runs_started_by(&setup.store, &trigger).await, started);
    patch(json!({ "paused": false })).await;

    // A new secret: the old one is refused from then on.
    let (status, rotated) = server
        .call(
            Method::POST,
            &format!("/api/v1/triggers/{trigger}/secret"),
            Some(&setup.lead),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new_secret = rotated["data"]["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    let (status, _, _) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_8", &event("issue.created", 8)),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&new_secret, "msg_8", &event("issue.created", 8)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // The daily number: one more fits, the next is 429 with Retry-After and records nothing.
    let started = runs_started_by(&setup.store, &trigger).await;
    patch(json!({ "dailyLimit": started + 2 })).await;
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&new_secret, "msg_9", &event("issue.created", 9)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, retry, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&new_secret, "msg_10", &event("issue.created", 10)),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(code(&body), "TRIGGER_RATE_LIMITED");
    assert_eq!(body["error"]["details"]["limit"], "DAILY");
    let wait: u64 = retry.unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");

    // Ten a minute: a fresh trigger's eleventh delivery in a burst is 429.
    let (burst, burst_secret) = make_trigger(&setup, &json!({ "name": "burst" })).await;
    for n in 0..10 {
        let id = format!("burst_{n}");
        let (status, _, body) = deliver(
            server,
            &burst,
            &Delivery::signed(&burst_secret, &id, &event("issue.created", n)),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{n}: {body}");
    }
    let (status, retry, body) = deliver(
        server,
        &burst,
        &Delivery::signed(&burst_secret, "burst_10", &event("issue.created", 10)),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["details"]["limit"], "PER_MINUTE");
    assert!((1..=60).contains(&retry.unwrap().parse::<u64>().unwrap()));

    // The secrets appear in no list, detail, audit entry or log line.
    let (_, listed) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-templates/{}/triggers", setup.template),
            Some(&setup.lead),
            None,
        )
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");
    let (_, detail) = server
        .call(
            Method::GET,
            &format!("/api/v1/triggers/{trigger}"),
            Some(&setup.lead),
            None,
        )
        .await;
    assert_eq!(detail["data"]["id"], trigger.as_str());
    let mut audit = setup.store.audit_for("trigger", &trigger).await.unwrap();
    audit.extend(setup.store.audit_for("trigger", &burst).await.unwrap());
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert!(actions.contains(&"trigger.create") && actions.contains(&"trigger.rotate_secret"));
    let log = server.log.lock().unwrap().join("\n");
    let seen = format!("{listed} {detail} {audit:?} {log}");
    for secret in [&secret, &new_secret, &burst_secret] {
        let material = secret.strip_prefix("whsec_").unwrap();
        assert!(!seen.contains(material), "a secret leaked: {seen}");
    }
    assert!(!seen.contains("whsec_"), "{seen}");
}

/// Posts a signed-looking delivery whose body streams in chunks (no length up front); returns
/// the status code.
async fn chunked_post(server: &Server, trigger: &str, size: usize) -> u16 {
    let address = server.base.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /api/v1/triggers/{trigger}/deliveries HTTP/1.1\r\nHost: {address}\r\n\
         content-type: application/json\r\ntransfer-encoding: chunked\r\n\
         webhook-id: msg_big\r\nwebhook-timestamp: {}\r\nwebhook-signature: v1,AAAA\r\n\
         connection: close\r\n\r\n",
        now()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 8 * 1024];
    let mut sent = 0;
    while sent < size {
        let part = format!("{:x}\r\n", chunk.len());
        if stream.write_all(part.as_bytes()).await.is_err()
            || stream.write_all(&chunk).await.is_err()
            || stream.write_all(b"\r\n").await.is_err()
        {
            break;
        }
        sent += chunk.len();
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_are_managed_by_the_templates_leads_only() {
    let Some(setup) = setup("trigger_roles").await else {
        return;
    };
    let server = &setup.server;
    let (trigger, secret) =
        make_trigger(&setup, &json!({ "name": "tracker", "dailyLimit": 5 })).await;
    let store = &setup.store;
    let org = store.create_org("other", "Other").await.unwrap();
    let other_team = store.create_team(&org.id, "elsewhere").await.unwrap();
    let (_, engineer) = user_with_token(store, "eng@example.test", Some(&setup.team), None).await;
    let (_, outsider) = user_with_token(
        store,
        "lead@other.test",
        Some(&other_team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let bot = store
        .create_service_principal(&setup.team, "ci", vec![], vec![setup.template.clone()])
        .await
        .unwrap();
    let (_, bot_token) = store
        .create_token(auto_swe_store::NewApiToken {
            owner: TokenOwner::ServicePrincipal(bot.id.clone()),
            name: "ci".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    let bot_token = bot_token.expose().to_owned();
    let calls = |trigger: &str| {
        vec![
            (Method::GET, format!("/api/v1/triggers/{trigger}"), None),
            (
                Method::PATCH,
                format!("/api/v1/triggers/{trigger}"),
                Some(json!({ "paused": true })),
            ),
            (
                Method::POST,
                format!("/api/v1/triggers/{trigger}/secret"),
                None,
            ),
            (Method::DELETE, format!("/api/v1/triggers/{trigger}"), None),
            (
                Method::GET,
                format!("/api/v1/workflow-templates/{}/triggers", setup.template),
                None,
            ),
            (
                Method::POST,
                format!("/api/v1/workflow-templates/{}/triggers", setup.template),
                Some(json!({ "name": "mine" })),
            ),
        ]
    };
    let before = store.get_trigger(&trigger).await.unwrap();
    // Another team's lead: nothing of this team's exists for them.
    for (method, path, body) in calls(&trigger) {
        let (status, answer) = server
            .call(method, &path, Some(&outsider), body.as_ref())
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {answer}");
    }
    // An engineer of the team sees the template but may not manage its triggers.
    for (method, path, body) in calls(&trigger) {
        let (status, answer) = server
            .call(method, &path, Some(&engineer), body.as_ref())
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {answer}");
    }
    // A service token is refused on every management route.
    for (method, path, body) in calls(&trigger) {
        let (status, answer) = server
            .call(method, &path, Some(&bot_token), body.as_ref())
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {answer}");
        assert_eq!(code(&answer), "SERVICE_TOKEN_NOT_ALLOWED");
    }
    // No credential at all.
    for (method, path, body) in calls(&trigger) {
        let (status, _) = server.call(method, &path, None, body.as_ref()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // Ids of the wrong shape, or of nothing.
    for id in ["not-an-id", "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b"] {
        for (method, path, body) in calls(id).into_iter().take(4) {
            let (status, answer) = server
                .call(method, &path, Some(&setup.lead), body.as_ref())
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {answer}");
            assert_eq!(code(&answer), "TRIGGER_NOT_FOUND");
        }
    }
    // Bad bodies: refused, nothing changed.
    for bad in [
        json!({ "dailyLimit": 0 }),
        json!({ "dailyLimit": 1_001 }),
        json!({ "dailyLimit": -1 }),
        json!({ "eventTypes": [] }),
        json!({ "eventTypes": vec!["t"; 21] }),
        json!({ "name": "" }),
        json!({ "paused": "yes" }),
        json!({ "secret": "whsec_mine" }),
    ] {
        let (status, answer) = server
            .call(
                Method::PATCH,
                &format!("/api/v1/triggers/{trigger}"),
                Some(&setup.lead),
                Some(&bad),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {answer}");
    }
    for bad in [
        json!({}),
        json!({ "name": "x", "dailyLimit": 5_000 }),
        json!({ "name": "x", "id": "mine" }),
    ] {
        let (status, answer) = server
            .call(
                Method::POST,
                &format!("/api/v1/workflow-templates/{}/triggers", setup.template),
                Some(&setup.lead),
                Some(&bad),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {answer}");
    }
    assert_eq!(store.get_trigger(&trigger).await.unwrap(), before);
    assert_eq!(store.list_triggers(&setup.template).await.unwrap().len(), 1);
    assert_eq!(store.audit_for("trigger", &trigger).await.unwrap().len(), 1);

    // Runs start under the creator's launch authorization: not on another team's repository,
    // and not once the creator has left the template's team. Neither starts a run, and a
    // retry is taken again once the creator may launch again.
    let foreign = store
        .create_connection(auto_swe_store::NewConnection {
            team_id: other_team.id.clone(),
            kind: auto_swe_store::ConnectionType::HttpApi,
            name: "theirs".to_owned(),
            repo: None,
            config: json!({ "baseUrl": "https://api.example.invalid" }),
        })
        .await
        .unwrap();
    let mut theirs = event("issue.created", 1);
    theirs["repository"] = Value::String(foreign.id.clone());
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_repo", &theirs),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(code(&body), "REPOSITORY_NOT_FOUND");
    store
        .remove_team_member(&setup.team, &setup.lead_id)
        .await
        .unwrap();
    let ours = event("issue.created", 2);
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_left", &ours),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(code(&body), "TRIGGER_NOT_AUTHORIZED");
    assert_eq!(runs_started_by(store, &trigger).await, 0);
    store
        .set_team_role(
            &setup.team,
            &setup.lead_id,
            auto_swe_store::TeamRole::Member,
        )
        .await
        .unwrap();
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_left", &ours),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["data"]["outcome"], "started");

    // A creator who has been switched off starts nothing. (The trigger is made through the
    // store, as another server would, by a user this server has never read.)
    let (gone, _) = user_with_token(
        store,
        "gone@example.test",
        Some(&setup.team),
        Some(PlatformRole::Lead),
    )
    .await;
    let gone_secret = auto_swe_server::standard_webhooks::generate_secret().unwrap();
    let orphaned = store
        .create_trigger(
            auto_swe_store::NewTrigger {
                template_id: setup.template.clone(),
                name: "orphaned".to_owned(),
                created_by: gone.id.clone(),
                daily_limit: None,
                event_types: None,
            },
            &gone_secret,
        )
        .await
        .unwrap();
    store.set_user_active(&gone.id, false).await.unwrap();
    let (status, _, body) = deliver(
        server,
        &orphaned.id,
        &Delivery::signed(gone_secret.expose(), "msg_gone", &ours),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(code(&body), "TRIGGER_CREATOR_INACTIVE");
    assert_eq!(runs_started_by(store, &orphaned.id).await, 0);

    // The lead deletes it: audited, and its deliveries are answered like any unknown trigger's.
    let (status, _) = server
        .call(
            Method::DELETE,
            &format!("/api/v1/triggers/{trigger}"),
            Some(&setup.lead),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let actions: Vec<String> = store
        .audit_for("trigger", &trigger)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.action)
        .collect();
    assert_eq!(actions, ["trigger.create", "trigger.delete"]);
    let (status, _, body) = deliver(
        server,
        &trigger,
        &Delivery::signed(&secret, "msg_1", &event("issue.created", 1)),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(code(&body), "WEBHOOK_SIGNATURE_INVALID");
}
