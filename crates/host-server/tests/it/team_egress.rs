//! A team's egress rules over HTTP against `PostgreSQL`: read by the team's owners and admins,
//! set by platform admins only, every rule checked before anything is written, audited, and
//! another team's rules reading as absent.

use auto_swe_store::AuditQuery;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{
    Server, TwoTeams, code, fresh_database, open_store, two_teams, user_with_token,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_platform_admin_widens_a_teams_egress() {
    let Some(url) = fresh_database("team_egress") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let admin = server.admin_token();
    let TwoTeams {
        core,
        web,
        owner_token,
        member_token: member,
        ..
    } = two_teams(&store).await;
    let (_, outsider) = user_with_token(&store, "web@example.test", Some(&web.id), None).await;
    let path = format!("/api/v1/teams/{}/egress", core.id);
    let rules = json!({"allow": ["GET,HEAD pkg.example.test:443", "*.mirror.example.test:443"]});

    // Nobody but a platform admin sets them; the team's owner reads them, others cannot.
    for (token, status, expected) in [
        (&owner_token, StatusCode::FORBIDDEN, "FORBIDDEN"),
        (&member, StatusCode::FORBIDDEN, "FORBIDDEN"),
        (&outsider, StatusCode::NOT_FOUND, "TEAM_NOT_FOUND"),
    ] {
        let (got, body) = server
            .call(Method::PUT, &path, Some(token), Some(&rules))
            .await;
        assert_eq!(got, status, "{body}");
        assert_eq!(code(&body), expected, "{body}");
    }
    let (status, body) = server
        .call(Method::PUT, &path, Some(&admin), Some(&rules))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["allow"], rules["allow"], "{body}");
    let (status, body) = server
        .call(Method::GET, &path, Some(&owner_token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["teamId"], core.id.as_str());
    assert_eq!(body["data"]["allow"], rules["allow"], "{body}");
    for (token, status) in [
        (&member, StatusCode::FORBIDDEN),
        (&outsider, StatusCode::NOT_FOUND),
    ] {
        let (got, body) = server.call(Method::GET, &path, Some(token), None).await;
        assert_eq!(got, status, "{body}");
    }

    // A rule that does not parse, too many rules, or an unknown field: refused, nothing written.
    let too_many: Vec<String> = (0..65).map(|i| format!("h{i}.example.test:443")).collect();
    for (bad, expected) in [
        (
            json!({"allow": ["ok.example.test:443", "no-port.example.test"]}),
            "INVALID_EGRESS_RULE",
        ),
        (json!({"allow": ["*:443"]}), "INVALID_EGRESS_RULE"),
        (json!({"allow": ["GET"]}), "INVALID_EGRESS_RULE"),
        (
            json!({"allow": [format!("{}.example.test:443", "a".repeat(600))]}),
            "INVALID_EGRESS_RULE",
        ),
        // One that parses (methods may repeat) but is longer than a rule may be stored.
        (
            json!({"allow": [format!("{} a.example.test:443", ["GET"; 128].join(","))]}),
            "INVALID_EGRESS_RULE",
        ),
        (json!({"allow": too_many}), "INVALID_BODY"),
        (
            json!({"allow": [], "allowPrivate": ["db:5432"]}),
            "INVALID_BODY",
        ),
        (json!(["a.example.test:443"]), "INVALID_BODY"),
    ] {
        let (got, body) = server
            .call(Method::PUT, &path, Some(&admin), Some(&bad))
            .await;
        assert_eq!(got, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(code(&body), expected, "{bad}: {body}");
    }
    assert_eq!(
        store.get_team(&core.id).await.unwrap().egress_allow,
        ["GET,HEAD pkg.example.test:443", "*.mirror.example.test:443"]
    );
    assert!(
        store
            .get_team(&web.id)
            .await
            .unwrap()
            .egress_allow
            .is_empty()
    );

    // Exactly as many rules as a team may have, each exactly as long as one may be, are taken.
    let longest = format!("{} a.example.test:443", ["GET"; 120].join(","));
    let longest = format!("{}{longest}", " ".repeat(512 - longest.len()));
    let full: Vec<String> = (1..64)
        .map(|i| format!("h{i}.example.test:443"))
        .chain([longest])
        .collect();
    let (status, body) = server
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(&json!({"allow": full})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["allow"], json!(full));
    let (status, body) = server
        .call(Method::PUT, &path, Some(&admin), Some(&rules))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The change is audited with what it replaced; an empty list removes them.
    let (status, body) = server
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(&json!({"allow": []})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["allow"], json!([]));
    let audit = store
        .list_audit(&AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .unwrap()
        .entries;
    let changes: Vec<_> = audit
        .iter()
        .filter(|entry| entry.action == "team.egress")
        .collect();
    assert_eq!(changes.len(), 4, "{audit:?}");
    assert!(
        changes
            .iter()
            .any(|entry| entry.detail["from"] == rules["allow"] && entry.detail["to"] == json!([])),
        "{changes:?}"
    );
}
