//! Connection edits guard their stored token's destination, and provider keys are replaced in
//! place and never listed.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    an_edit_cannot_redirect_a_stored_token,
    provider_keys_are_replaced_in_place
);

fn edit(config: Option<serde_json::Value>, token: TokenChange) -> ConnectionUpdate {
    let mut update = ConnectionUpdate::keep_token();
    update.config = config;
    update.token = token;
    update
}

async fn an_edit_cannot_redirect_a_stored_token(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let other = db.store.create_team(&org.id, "other").await.unwrap();
    let api = db
        .store
        .create_connection(NewConnection {
            team_id: team.id.clone(),
            kind: ConnectionType::HttpApi,
            name: "billing".to_owned(),
            repo: None,
            config: json!({ "baseUrl": "https://billing.example.test/v1" }),
        })
        .await
        .unwrap();
    db.store
        .create_connection(NewConnection {
            team_id: other.id.clone(),
            kind: ConnectionType::Mcp,
            name: "tools".to_owned(),
            repo: None,
            config: json!({ "url": "https://mcp.example.test/mcp" }),
        })
        .await
        .unwrap();
    let listed = db.store.list_connections(Some(&team.id)).await.unwrap();
    assert_eq!(
        listed.iter().map(|c| &c.name).collect::<Vec<_>>(),
        ["billing"]
    );
    assert_eq!(db.store.list_connections(None).await.unwrap().len(), 2);

    // Without a token, anything goes.
    let moved = json!({ "baseUrl": "https://elsewhere.example.test/" });
    let edited = db
        .store
        .update_connection(&api.id, &edit(Some(moved), TokenChange::Keep))
        .await
        .unwrap();
    assert!(!edited.has_token);
    let home = json!({ "baseUrl": "https://billing.example.test/v1" });
    let token = SecretString::new("tok-fake-1".to_owned());
    let edited = db
        .store
        .update_connection(
            &api.id,
            &edit(Some(home.clone()), TokenChange::Set(token.clone())),
        )
        .await
        .unwrap();
    assert!(edited.has_token);

    // Same origin (another path, default port spelled out): kept.
    let same = json!({ "baseUrl": "https://BILLING.example.test:443/v2", "timeout": 5 });
    let mut renamed = edit(Some(same.clone()), TokenChange::Keep);
    renamed.name = Some("billing-v2".to_owned());
    let edited = db.store.update_connection(&api.id, &renamed).await.unwrap();
    assert_eq!(
        (edited.name.as_str(), &edited.config),
        ("billing-v2", &same)
    );
    // Another origin, scheme or port while keeping the token: refused, nothing written.
    for elsewhere in [
        "https://attacker.example.test/v1",
        "http://billing.example.test/v1",
        "https://billing.example.test:8443/v1",
        "not a url",
    ] {
        let error = db
            .store
            .update_connection(
                &api.id,
                &edit(Some(json!({ "baseUrl": elsewhere })), TokenChange::Keep),
            )
            .await
            .unwrap_err();
        assert_eq!(error.code(), "TOKEN_ORIGIN_CHANGE", "{elsewhere}");
        let now = db.store.get_connection(&api.id).await.unwrap();
        assert_eq!(now.config, same);
        assert_eq!(
            db.store.connection_token(&api.id).await.unwrap(),
            Some(token.clone())
        );
    }
    // Dropping the key the destination is read from counts as moving it.
    let error = db
        .store
        .update_connection(&api.id, &edit(Some(json!({})), TokenChange::Keep))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "TOKEN_ORIGIN_CHANGE");
    // A new token, or clearing the old one, is consent.
    let attacker = json!({ "baseUrl": "https://attacker.example.test/" });
    let cleared = db
        .store
        .update_connection(&api.id, &edit(Some(attacker.clone()), TokenChange::Clear))
        .await
        .unwrap();
    assert!(!cleared.has_token);
    assert_eq!(db.store.connection_token(&api.id).await.unwrap(), None);
    let fresh = SecretString::new("tok-fake-2".to_owned());
    db.store
        .update_connection(
            &api.id,
            &edit(Some(home.clone()), TokenChange::Set(fresh.clone())),
        )
        .await
        .unwrap();
    assert_eq!(
        db.store.connection_token(&api.id).await.unwrap(),
        Some(fresh)
    );

    // The race: one edit moves the connection while it holds no token, another stores a token
    // for the old place. Whatever order they land in, a token never ends up at the new place.
    for _ in 0..20 {
        db.store
            .update_connection(&api.id, &edit(Some(home.clone()), TokenChange::Clear))
            .await
            .unwrap();
        let relocate = {
            let store = db.store.clone();
            let id = api.id.clone();
            let to = attacker.clone();
            tokio::spawn(async move {
                store
                    .update_connection(&id, &edit(Some(to), TokenChange::Keep))
                    .await
            })
        };
        let setter = {
            let store = db.store.clone();
            let id = api.id.clone();
            let at = home.clone();
            tokio::spawn(async move {
                let token = SecretString::new("tok-fake-3".to_owned());
                store
                    .update_connection(&id, &edit(Some(at), TokenChange::Set(token)))
                    .await
            })
        };
        for outcome in [relocate.await.unwrap(), setter.await.unwrap()] {
            if let Err(error) = outcome {
                assert!(
                    matches!(error.code(), "STORE_CONFLICT" | "TOKEN_ORIGIN_CHANGE"),
                    "{error}"
                );
            }
        }
        let now = db.store.get_connection(&api.id).await.unwrap();
        assert!(
            !(now.has_token && now.config == attacker),
            "a token was redirected by a racing edit"
        );
    }

    let missing = db
        .store
        .update_connection("no-such-id", &ConnectionUpdate::keep_token())
        .await
        .unwrap_err();
    assert_eq!(missing.code(), "STORE_NOT_FOUND");
}

#[test]
fn destinations_follow_each_type_s_own_setting() {
    let tracker = |provider: &str, base: &str| {
        credential_destination(
            ConnectionType::IssueTracker,
            &json!({ "provider": provider, "baseUrl": base }),
        )
    };
    assert_eq!(
        tracker("jira", "https://a.example.test/x"),
        tracker("JIRA", "https://a.example.test/y")
    );
    assert_ne!(
        tracker("jira", "https://a.example.test/"),
        tracker("linear", "https://a.example.test/")
    );
    let zendesk =
        |sub: &str| credential_destination(ConnectionType::Zendesk, &json!({ "subdomain": sub }));
    assert_ne!(zendesk("acme"), zendesk("evil"));
    let mcp = |url: &str| credential_destination(ConnectionType::Mcp, &json!({ "url": url }));
    assert_ne!(
        mcp("https://a.example.test/mcp"),
        mcp("https://b.example.test/mcp")
    );
    // Services whose host is fixed cannot be redirected by their settings.
    assert_eq!(
        credential_destination(
            ConnectionType::Notion,
            &json!({ "baseUrl": "https://x.test" })
        ),
        credential_destination(ConnectionType::Notion, &json!({}))
    );
}

async fn provider_keys_are_replaced_in_place(db: &TestDb) {
    let first = db
        .store
        .create_provider_credential(
            "anthropic",
            &ScopeRef::Global,
            "main",
            &SecretString::new("sk-fake-one".to_owned()),
        )
        .await
        .unwrap();
    let listed = db.store.list_provider_credentials().await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&first));
    db.store
        .replace_provider_key(&first.id, &SecretString::new("sk-fake-two".to_owned()))
        .await
        .unwrap();
    assert_eq!(
        db.store
            .open_provider_credential(&first.id)
            .await
            .unwrap()
            .expose(),
        "sk-fake-two"
    );
    assert_eq!(db.store.list_provider_credentials().await.unwrap(), [first]);
    let empty = db
        .store
        .replace_provider_key("x", &SecretString::new(String::new()))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), "STORE_INVALID_INPUT");
    let missing = db
        .store
        .replace_provider_key("no-such-id", &SecretString::new("sk-fake".to_owned()))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), "STORE_NOT_FOUND");
}
