//! Credentials as an attacker presents them: missing, malformed, forged, expired, revoked, of
//! a switched-off user, of a service principal on a user route, of a role too low.

use auto_swe_store::{NewApiToken, PlatformRole, TokenOwner};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{JWT_SECRET, Server, code, fresh_database, open_store, user_with_token};

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn jwt(secret: &[u8], claims: &Value, algorithm: Algorithm) -> String {
    jsonwebtoken::encode(
        &Header::new(algorithm),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_live_credentials_of_active_users_authenticate() {
    let Some(url) = fresh_database("auth") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let (alice, alice_token) = user_with_token(&store, "alice@example.test", None, None).await;

    // No credential, the wrong scheme, unknown or garbled tokens: 401 in the one shape.
    let garbled = format!("{alice_token}x");
    for token in [
        None,
        Some("ats_not-a-real-token"),
        Some(garbled.as_str()),
        Some("eyJhbGciOiJub25lIn0.e30."),
        Some("something-else"),
    ] {
        let (status, body) = server.call(Method::GET, "/api/v1/me", token, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}: {body}");
        assert_eq!(code(&body), "UNAUTHENTICATED", "{body}");
        assert!(body["error"]["message"].is_string());
    }
    let basic = reqwest::Client::new()
        .get(format!("{}/api/v1/me", server.base))
        .basic_auth("alice", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);

    // A live token works, and exchanges for a JWT that works.
    let (status, body) = server
        .call(Method::GET, "/api/v1/me", Some(&alice_token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["role"], "ENGINEER");
    let (status, body) = server
        .call(Method::POST, "/api/v1/auth/token", Some(&alice_token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let alice_jwt = body["data"]["token"].as_str().unwrap().to_owned();
    let (status, _) = server
        .call(Method::GET, "/api/v1/me", Some(&alice_jwt), None)
        .await;
    assert_eq!(status, StatusCode::OK);

    // Forged JWTs: another key, `none`, a claimed admin role under another key, expired,
    // another audience. None authenticates.
    let claims = |exp: u64, aud: &str| json!({"sub": alice.id, "role": "ADMIN", "iss": "auto-swe", "aud": aud, "iat": now(), "exp": exp});
    let forged = [
        jwt(
            b"another-secret-that-is-long-enough-0000",
            &claims(now() + 600, "auto-swe-api"),
            Algorithm::HS256,
        ),
        jwt(
            JWT_SECRET.as_bytes(),
            &claims(now() - 600, "auto-swe-api"),
            Algorithm::HS256,
        ),
        jwt(
            JWT_SECRET.as_bytes(),
            &claims(now() + 600, "someone-else"),
            Algorithm::HS256,
        ),
        jwt(
            JWT_SECRET.as_bytes(),
            &claims(now() + 600, "auto-swe-api"),
            Algorithm::HS512,
        ),
    ];
    for token in &forged {
        let (status, body) = server
            .call(Method::GET, "/api/v1/me", Some(token), None)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    }
    // The right key with a claimed ADMIN role: the role is read from the store, not the claim.
    let claimed_admin = jwt(
        JWT_SECRET.as_bytes(),
        &claims(now() + 600, "auto-swe-api"),
        Algorithm::HS256,
    );
    let (status, body) = server
        .call(Method::GET, "/api/v1/me", Some(&claimed_admin), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["role"], "ENGINEER");

    // A revoked token stops at once.
    let (revoked, revoked_token) = store
        .create_token(NewApiToken {
            owner: TokenOwner::User(alice.id.clone()),
            name: "to revoke".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    store.revoke_token(&revoked.id).await.unwrap();
    let (status, _) = server
        .call(
            Method::GET,
            "/api/v1/me",
            Some(revoked_token.expose()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A switched-off user: their token stops at once, and a JWT first used after it too.
    let (bob, bob_token) = user_with_token(&store, "bob@example.test", None, None).await;
    let (_, body) = server
        .call(Method::POST, "/api/v1/auth/token", Some(&bob_token), None)
        .await;
    let bob_jwt = body["data"]["token"].as_str().unwrap().to_owned();
    store.set_user_active(&bob.id, false).await.unwrap();
    for token in [&bob_token, &bob_jwt] {
        let (status, body) = server
            .call(Method::GET, "/api/v1/me", Some(token), None)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    }

    // Roles are read from the store: a lead is a lead.
    let (_, lead_token) =
        user_with_token(&store, "lead@example.test", None, Some(PlatformRole::Lead)).await;
    let (_, body) = server
        .call(Method::GET, "/api/v1/me", Some(&lead_token), None)
        .await;
    assert_eq!(body["data"]["role"], "LEAD");
    let (_, body) = server
        .call(Method::GET, "/api/v1/me", Some(&server.admin_token()), None)
        .await;
    assert_eq!(body["data"]["role"], "ADMIN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_tokens_reach_only_routes_with_service_scopes() {
    let Some(url) = fresh_database("service") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let bot = store
        .create_service_principal(&team.id, "ci", vec![], vec![])
        .await
        .unwrap();
    let (_, token) = store
        .create_token(NewApiToken {
            owner: TokenOwner::ServicePrincipal(bot.id.clone()),
            name: "ci".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    let token = token.expose();
    for (method, path) in [
        (Method::GET, "/api/v1/me"),
        (Method::POST, "/api/v1/auth/token"),
    ] {
        let (status, body) = server.call(method, path, Some(token), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
        assert_eq!(code(&body), "SERVICE_TOKEN_NOT_ALLOWED", "{body}");
    }
    // A route with service scopes takes it.
    let (status, body) = server
        .call(Method::GET, "/api/v1/workflow-runs", Some(token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"], json!([]));
}

/// The first admin: a token file that cannot be written does not lock the admin out (the next
/// start writes it), and an admin who holds a token is never given another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_admin_gets_one_token_even_after_a_failed_start() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let store = open_store(&url).await;
    let file = dir.path().join("admin.token");
    std::fs::write(&file, "left over").unwrap();
    let failed = auto_swe_server::bootstrap_admin(&store, "root@example.test", Some(&file)).await;
    assert!(
        failed.is_err(),
        "an existing token file is never overwritten"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "left over");
    std::fs::remove_file(&file).unwrap();
    assert!(
        auto_swe_server::bootstrap_admin(&store, "root@example.test", Some(&file))
            .await
            .unwrap()
    );
    let token = std::fs::read_to_string(&file).unwrap();
    let found = store
        .authenticate_token(&auto_swe_store::SecretString::new(token))
        .await
        .unwrap();
    assert!(found.is_some());
    std::fs::remove_file(&file).unwrap();
    assert!(
        !auto_swe_server::bootstrap_admin(&store, "root@example.test", Some(&file))
            .await
            .unwrap()
    );
    assert!(!file.exists(), "an admin who holds a token gets no other");
}
