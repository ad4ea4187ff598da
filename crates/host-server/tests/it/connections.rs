//! Connections and provider keys over HTTP: tokens and keys go in and never come out, an edit
//! cannot redirect a stored token, and only a team's leads (or platform admins) change them.

use auto_swe_store::{AuditQuery, PlatformRole};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Server, code, fresh_database, open_store, user_with_token};

const TOKEN: &str = "tok-fake-abcdef-0123456789";
const KEY: &str = "sk-fake-key-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_go_in_never_come_out_and_cannot_be_redirected() {
    let Some(url) = fresh_database("connections") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let admin = server.admin_token();
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let other = store.create_team(&org.id, "other").await.unwrap();
    let (_, lead) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let (_, member) = user_with_token(&store, "member@example.test", Some(&team.id), None).await;
    let (_, foreign_lead) = user_with_token(
        &store,
        "lead2@example.test",
        Some(&other.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let mut seen = Vec::new();

    let body = json!({ "teamId": team.id, "type": "http_api", "name": "billing",
                       "config": { "baseUrl": "https://billing.example.test/v1" },
                       "token": TOKEN });
    let (status, _) = server
        .call(
            Method::POST,
            "/api/v1/connections",
            Some(&member),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, refused) = server
        .call(
            Method::POST,
            "/api/v1/connections",
            Some(&foreign_lead),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    for bad in [
        json!({ "teamId": team.id, "type": "ftp", "name": "x", "config": {} }),
        json!({ "teamId": team.id, "type": "http_api", "name": "x", "config": [] }),
        json!({ "teamId": team.id, "type": "http_api", "name": "x", "token": "" }),
        json!({ "teamId": team.id, "type": "git_repo", "name": "x" }),
        json!({ "teamId": team.id, "type": "http_api", "name": "x", "secret": "s" }),
    ] {
        let (status, body) = server
            .call(Method::POST, "/api/v1/connections", Some(&lead), Some(&bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    assert!(store.list_connections(None).await.unwrap().is_empty());
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/connections",
            Some(&lead),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["data"]["hasToken"], true);
    seen.push(created.to_string());
    let id = created["data"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/connections/{id}");

    // Members read it; others are told it does not exist.
    let (status, read) = server.call(Method::GET, &path, Some(&member), None).await;
    assert_eq!(status, StatusCode::OK);
    seen.push(read.to_string());
    let (status, refused) = server
        .call(Method::GET, &path, Some(&foreign_lead), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&refused), "CONNECTION_NOT_FOUND");
    let (status, listed) = server
        .call(
            Method::GET,
            &format!("/api/v1/connections?teamId={}", team.id),
            Some(&member),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    seen.push(listed.to_string());
    let (status, _) = server
        .call(Method::GET, "/api/v1/connections", Some(&member), None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // The attack: a lead who cannot read the token points the connection elsewhere.
    let redirect = json!({ "config": { "baseUrl": "https://collector.example.test/" } });
    let (status, refused) = server
        .call(Method::PATCH, &path, Some(&lead), Some(&redirect))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(code(&refused), "TOKEN_ORIGIN_CHANGE");
    let kept = store.get_connection(&id).await.unwrap();
    assert_eq!(kept.config["baseUrl"], "https://billing.example.test/v1");
    let (status, _) = server
        .call(
            Method::PATCH,
            &path,
            Some(&member),
            Some(&json!({ "name": "x" })),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let both = json!({ "token": "t", "clearToken": true });
    let (status, _) = server
        .call(Method::PATCH, &path, Some(&lead), Some(&both))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Consent: clear the token with the move.
    let mut consent = redirect.clone();
    consent["clearToken"] = json!(true);
    let (status, moved) = server
        .call(Method::PATCH, &path, Some(&lead), Some(&consent))
        .await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!(moved["data"]["hasToken"], false);
    assert_eq!(store.connection_token(&id).await.unwrap(), None);

    // Provider keys: a team's by its lead, platform-wide by admins only.
    let team_key = json!({ "provider": "anthropic", "label": "team", "teamId": team.id,
                           "apiKey": KEY });
    let global_key = json!({ "provider": "openai", "label": "all", "apiKey": KEY });
    let (status, _) = server
        .call(
            Method::POST,
            "/api/v1/provider-credentials",
            Some(&lead),
            Some(&global_key),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server
        .call(
            Method::POST,
            "/api/v1/provider-credentials",
            Some(&member),
            Some(&team_key),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/provider-credentials",
            Some(&lead),
            Some(&team_key),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    seen.push(created.to_string());
    let credential = created["data"]["id"].as_str().unwrap().to_owned();
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/provider-credentials",
            Some(&admin),
            Some(&global_key),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    seen.push(created.to_string());
    let (_, listed) = server
        .call(
            Method::GET,
            &format!("/api/v1/provider-credentials?teamId={}", team.id),
            Some(&member),
            None,
        )
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    seen.push(listed.to_string());
    let (_, listed) = server
        .call(
            Method::GET,
            "/api/v1/provider-credentials",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
    seen.push(listed.to_string());

    let key_path = format!("/api/v1/provider-credentials/{credential}/key");
    let rotated = json!({ "apiKey": "sk-fake-rotated-0123" });
    let (status, _) = server
        .call(Method::PUT, &key_path, Some(&foreign_lead), Some(&rotated))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .call(Method::PUT, &key_path, Some(&lead), Some(&rotated))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        store
            .open_provider_credential(&credential)
            .await
            .unwrap()
            .expose(),
        "sk-fake-rotated-0123"
    );

    // No answer and no audit row ever held a token or a key.
    let query = AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    let audit = store.list_audit(&query).await.unwrap().entries;
    assert_eq!(audit.len(), 5, "{audit:?}");
    seen.extend(audit.iter().map(|e| e.detail.to_string()));
    for text in &seen {
        for secret in [TOKEN, KEY, "sk-fake-rotated"] {
            assert!(!text.contains(secret), "{secret} leaked into {text}");
        }
    }
}
