//! A team's overrides of platform-wide agents over HTTP against `PostgreSQL`: written by the
//! team's owners and admins only, never reaching the platform-wide row, another team's MCP
//! connection or another team's routes (404), and audited.

use auto_swe_agents::ScopeRef;
use auto_swe_store::{AuditQuery, ConnectionType, NewConnection, SecretString, TeamRole};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::agents::versions_in_store;
use crate::support::{
    Server, TwoTeams, code, fresh_database, open_store, service_token, two_teams, user_with_token,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_overrides_platform_agents_and_no_other_team_reaches_them() {
    let Some(url) = fresh_database("overrides") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let admin = server.admin_token();
    let TwoTeams {
        org,
        core,
        web,
        owner,
        owner_token,
        member_token: member,
    } = two_teams(&store).await;
    let (other, other_token) =
        user_with_token(&store, "other@example.test", Some(&web.id), None).await;
    store
        .set_team_role(&web.id, &other.id, TeamRole::Admin)
        .await
        .unwrap();
    let web_mcp = store
        .create_connection(NewConnection {
            team_id: web.id.clone(),
            kind: ConnectionType::Mcp,
            name: "web tools".to_owned(),
            repo: None,
            config: json!({}),
        })
        .await
        .unwrap();
    let key = SecretString::new("sk-test-not-real".to_owned());
    let web_credential = store
        .create_provider_credential("anthropic", &ScopeRef::Team(web.id.clone()), "web", &key)
        .await
        .unwrap();
    let org_credential = store
        .create_provider_credential(
            "anthropic",
            &ScopeRef::Organization(org.id.clone()),
            "acme",
            &key,
        )
        .await
        .unwrap();
    let bot_token = service_token(&store, &core.id, vec![]).await;
    let core_mcp = store
        .create_connection(NewConnection {
            team_id: core.id.clone(),
            kind: ConnectionType::Mcp,
            name: "core tools".to_owned(),
            repo: None,
            config: json!({}),
        })
        .await
        .unwrap();
    let (status, body) = server
        .call(
            Method::POST,
            "/api/v1/platform/agent-library",
            Some(&admin),
            Some(&json!({ "key": "reviewer", "modelSpec": "anthropic/claude-sonnet-5-5", "runtime": "claude-code" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let team_lib = format!("/api/v1/teams/{}/agent-library", core.id);
    let team_scope = ScopeRef::Team(core.id.clone());

    // A team admin writes the team's rows only: never a platform-wide one.
    let (status, body) = server
        .call(
            Method::POST,
            "/api/v1/platform/agent-library",
            Some(&owner_token),
            Some(&json!({ "key": "x", "modelSpec": "a/b" })),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "FORBIDDEN"),
        "{body}"
    );
    let (status, body) = server
        .call(
            Method::PUT,
            "/api/v1/platform/agent-library/reviewer",
            Some(&owner_token),
            Some(&json!({ "expectedVersion": 1, "systemPrompt": "mine" })),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "FORBIDDEN"),
        "{body}"
    );

    // Refusals that write nothing: an agent with no platform-wide row, a runtime (admins
    // only), another team's MCP connection or credential.
    for (bad, status_expected, expected) in [
        (
            json!({ "key": "reviewer", "modelSpec": "anthropic/x", "credentialId": web_credential.id }),
            StatusCode::BAD_REQUEST,
            "CREDENTIAL_INVALID",
        ),
        (
            json!({ "key": "ghost", "modelSpec": "a/b" }),
            StatusCode::NOT_FOUND,
            "AGENT_NOT_FOUND",
        ),
        (
            json!({ "key": "reviewer", "modelSpec": "anthropic/x", "runtime": "pi" }),
            StatusCode::FORBIDDEN,
            "RUNTIME_ADMIN_ONLY",
        ),
        (
            json!({ "key": "reviewer", "modelSpec": "anthropic/x", "mcpConnectionId": web_mcp.id }),
            StatusCode::BAD_REQUEST,
            "MCP_CONNECTION_INVALID",
        ),
    ] {
        let (status, body) = server
            .call(Method::POST, &team_lib, Some(&owner_token), Some(&bad))
            .await;
        assert_eq!(
            (status, code(&body)),
            (status_expected, expected),
            "{bad}: {body}"
        );
    }
    assert!(
        store
            .agent_store()
            .history("reviewer", &team_scope)
            .await
            .unwrap()
            .is_none()
    );

    // The override: the team's own lineage of the key, starting on the platform row's runtime.
    let (status, body) = server
        .call(
            Method::POST,
            &team_lib,
            Some(&owner_token),
            Some(&json!({
                "key": "reviewer",
                "modelSpec": "anthropic/claude-opus-5-5",
                "mcpConnectionId": core_mcp.id,
                "credentialId": org_credential.id
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let agent = &body["data"]["agent"];
    assert_eq!(
        (agent["scope"].as_str(), agent["scopeId"].as_str()),
        (Some("TEAM"), Some(core.id.as_str()))
    );
    assert_eq!(agent["runtime"], "claude-code");
    assert_eq!(agent["createdBy"], owner.id.as_str());
    assert_eq!(agent["credentialId"], org_credential.id.as_str());
    let override_path = format!("{team_lib}/reviewer");
    let (status, body) = server
        .call(
            Method::PUT,
            &override_path,
            Some(&owner_token),
            Some(&json!({ "expectedVersion": 1, "systemPrompt": "Our way." })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["agent"]["version"], 2);
    let (status, body) = server
        .call(
            Method::PUT,
            &override_path,
            Some(&owner_token),
            Some(&json!({ "expectedVersion": 2, "mcpConnectionId": web_mcp.id })),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "MCP_CONNECTION_INVALID"),
        "{body}"
    );
    // The platform-wide row is untouched by the override.
    assert_eq!(
        versions_in_store(&store, "reviewer", &ScopeRef::Global)
            .await
            .len(),
        1
    );

    // Another team's admin, and anyone outside the team, meet 404 on every route: the
    // team's ids do not leak. A member without the team's admin role is 403.
    let routes = [
        (Method::GET, team_lib.clone(), None),
        (
            Method::POST,
            team_lib.clone(),
            Some(json!({ "key": "reviewer", "modelSpec": "a/b" })),
        ),
        (Method::GET, override_path.clone(), None),
        (Method::GET, format!("{override_path}/versions"), None),
        (
            Method::PUT,
            override_path.clone(),
            Some(json!({ "expectedVersion": 2, "systemPrompt": "theirs" })),
        ),
        (
            Method::POST,
            format!("{override_path}/restore"),
            Some(json!({ "fromVersion": 1, "expectedVersion": 2 })),
        ),
        (Method::DELETE, override_path.clone(), None),
    ];
    for (method, path, with) in &routes {
        let (status, body) = server
            .call(method.clone(), path, Some(&bot_token), with.as_ref())
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNAUTHORIZED, "SERVICE_TOKEN_NOT_ALLOWED"),
            "{path}: {body}"
        );
        let (status, body) = server
            .call(method.clone(), path, Some(&other_token), with.as_ref())
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::NOT_FOUND, "TEAM_NOT_FOUND"),
            "{path}: {body}"
        );
        let (status, body) = server
            .call(method.clone(), path, Some(&member), with.as_ref())
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::FORBIDDEN, "FORBIDDEN"),
            "{path}: {body}"
        );
    }
    for bad_team in ["not-a-team", "00000000-0000-7000-8000-000000000000"] {
        let (status, body) = server
            .call(
                Method::GET,
                &format!("/api/v1/teams/{bad_team}/agent-library"),
                Some(&admin),
                None,
            )
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::NOT_FOUND, "TEAM_NOT_FOUND"),
            "{body}"
        );
    }
    assert_eq!(
        versions_in_store(&store, "reviewer", &team_scope)
            .await
            .len(),
        2,
        "nothing written"
    );

    // The team's list and history; a platform admin sees the override among the rest.
    let (status, body) = server
        .call(Method::GET, &team_lib, Some(&owner_token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "{body}");
    let (status, body) = server
        .call(
            Method::GET,
            &format!("{override_path}/versions"),
            Some(&owner_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"][0]["systemPrompt"], "Our way.");
    for (query, count) in [
        ("", 2),
        ("?scope=TEAM", 1),
        ("?scope=GLOBAL", 1),
        (&*format!("?teamId={}", web.id), 0),
        (&*format!("?teamId={}&active=true", core.id), 1),
    ] {
        let (status, body) = server
            .call(
                Method::GET,
                &format!("/api/v1/platform/agent-library{query}"),
                Some(&admin),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(
            body["data"].as_array().unwrap().len(),
            count,
            "{query}: {body}"
        );
    }
    for bad in [
        "?scope=EVERYWHERE",
        "?scope=GLOBAL&teamId=x",
        "?sort=key",
        "?active=maybe",
    ] {
        let (status, body) = server
            .call(
                Method::GET,
                &format!("/api/v1/platform/agent-library{bad}"),
                Some(&admin),
                None,
            )
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::BAD_REQUEST, "INVALID_QUERY"),
            "{bad}: {body}"
        );
    }

    // Switched off and on by the team; a restore goes through the same checks.
    let (status, body) = server
        .call(Method::DELETE, &override_path, Some(&owner_token), None)
        .await;
    assert_eq!(
        (status, &body["data"]["active"]),
        (StatusCode::OK, &json!(false)),
        "{body}"
    );
    let (status, body) = server
        .call(
            Method::POST,
            &format!("{override_path}/restore"),
            Some(&owner_token),
            Some(&json!({ "fromVersion": 1, "expectedVersion": 2 })),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "AGENT_INACTIVE"),
        "{body}"
    );
    let (status, _) = server
        .call(
            Method::PUT,
            &override_path,
            Some(&owner_token),
            Some(&json!({ "isActive": true })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = server
        .call(
            Method::POST,
            &format!("{override_path}/restore"),
            Some(&owner_token),
            Some(&json!({ "fromVersion": 1, "expectedVersion": 2 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["agent"]["systemPrompt"], Value::Null);
    assert_eq!(body["data"]["agent"]["version"], 3);

    let entries = store
        .list_audit(&AuditQuery {
            actor: Some(owner.id.clone()),
            limit: 500,
            ..AuditQuery::default()
        })
        .await
        .unwrap()
        .entries;
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "agent.create",
            "agent.edit",
            "agent.deactivate",
            "agent.reactivate",
            "agent.restore"
        ]
    );
    assert!(
        entries
            .iter()
            .all(|e| e.target_id == format!("TEAM:{}/reviewer", core.id))
    );
}
