//! Scanner rules over HTTP: only platform admins read and write them, an expression that does
//! not compile writes nothing, a write reaches the server's own workers at once, and trying an
//! expression writes nothing at all.

use std::time::{Duration, Instant};

use auto_swe_store::{AuditQuery, PlatformRole};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Server, code, fresh_database, open_store, service_token, user_with_token};

fn reloads(server: &Server) -> usize {
    server
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains("scanner rules reloaded"))
        .count()
}

fn rule(pattern: &str) -> Value {
    json!({ "type": "SHELL_COMMAND", "severity": "CRITICAL", "pattern": pattern,
            "description": "a host rule" })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_write_rules_and_a_bad_one_writes_nothing() {
    let Some(url) = fresh_database("patterns") else {
        return;
    };
    // The worker crate's info lines show when the server re-reads its rules.
    let server = Server::start_with_env(
        &url,
        1,
        "",
        &[("AUTO_SWE_LOG", "warn,auto_swe_worker=info")],
    );
    let store = open_store(&url).await;
    let admin = server.admin_token();
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let (_, engineer) = user_with_token(&store, "eng@example.test", Some(&team.id), None).await;
    let (_, lead) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let bot_token = service_token(&store, &team.id, vec![]).await;
    let ours = rule(r"\bfrobnicate\s+--all\b");
    let path = "/api/v1/scanner-patterns/host.frobnicate";

    // Refusals, each writing nothing.
    for token in [&engineer, &lead] {
        for (method, route, body) in [
            (Method::GET, "/api/v1/scanner-patterns", None),
            (Method::PUT, path, Some(&ours)),
            (Method::DELETE, path, None),
        ] {
            let (status, body) = server.call(method, route, Some(token), body).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{route}: {body}");
        }
    }
    let (status, body) = server
        .call(Method::PUT, path, Some(&bot_token), Some(&ours))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&body), "SERVICE_TOKEN_NOT_ALLOWED");
    let (status, _) = server.call(Method::PUT, path, None, Some(&ours)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for (bad, expected) in [
        (rule("(unclosed"), "INVALID_REGEX"),
        (rule("a*"), "INVALID_REGEX"),
        (rule(&"a".repeat(4097)), "INVALID_REGEX"),
        (
            json!({ "type": "SHELL_COMMAND", "severity": "CRITICAL", "pattern": "x+y",
                    "flags": "g" }),
            "UNSAFE_FLAGS",
        ),
        (
            json!({ "type": "MALWARE", "severity": "CRITICAL", "pattern": "x+y" }),
            "INVALID_BODY",
        ),
        (
            json!({ "type": "SHELL_COMMAND", "severity": "HIGH", "pattern": "x+y" }),
            "INVALID_BODY",
        ),
        (
            json!({ "type": "SHELL_COMMAND", "severity": "INFO", "pattern": "x+y",
                    "extra": 1 }),
            "INVALID_BODY",
        ),
    ] {
        let (status, body) = server
            .call(Method::PUT, path, Some(&admin), Some(&bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(code(&body), expected, "{bad}: {body}");
    }
    let (status, body) = server
        .call(
            Method::PUT,
            "/api/v1/scanner-patterns/..%2Fetc",
            Some(&admin),
            Some(&ours),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(code(&body), "INVALID_PATTERN_ID");
    assert!(store.list_patterns().await.unwrap().is_empty());

    // The admin's list is the built-in pack before any write.
    let (status, listed) = server
        .call(Method::GET, "/api/v1/scanner-patterns", Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let builtins = auto_swe_scanners::builtin_patterns().len();
    let rows = listed["data"].as_array().unwrap();
    assert_eq!(rows.len(), builtins);
    assert!(rows.iter().all(|r| r["origin"] == "BUILTIN"));

    // A new rule, then a change to it; each reaches this server's workers at once.
    let before = reloads(&server);
    let (status, body) = server
        .call(Method::PUT, path, Some(&admin), Some(&ours))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["origin"], "HOST");
    let deadline = Instant::now() + Duration::from_secs(10);
    while reloads(&server) == before {
        assert!(
            Instant::now() < deadline,
            "the server did not re-read its rules"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut changed = ours.clone();
    changed["severity"] = json!("WARNING");
    let (status, body) = server
        .call(Method::PUT, path, Some(&admin), Some(&changed))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["severity"], "WARNING");

    // A built-in switched off by id shows as an override.
    let off = json!({ "type": "SHELL_COMMAND", "severity": "CRITICAL", "pattern": r"\brm\b",
                      "enabled": false });
    let (status, body) = server
        .call(
            Method::PUT,
            "/api/v1/scanner-patterns/sh.rm-rf-root",
            Some(&admin),
            Some(&off),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["origin"], "OVERRIDE");
    let (_, listed) = server
        .call(Method::GET, "/api/v1/scanner-patterns", Some(&admin), None)
        .await;
    let rows = listed["data"].as_array().unwrap();
    assert_eq!(rows.len(), builtins + 1);
    let switched = rows.iter().find(|r| r["id"] == "sh.rm-rf-root").unwrap();
    assert_eq!(
        (&switched["origin"], &switched["enabled"]),
        (&json!("OVERRIDE"), &json!(false))
    );
    assert_eq!(rows.last().unwrap()["id"], "host.frobnicate");

    // Deleting the override brings the built-in back; a second delete finds nothing.
    let override_path = "/api/v1/scanner-patterns/sh.rm-rf-root";
    let (status, _) = server
        .call(Method::DELETE, override_path, Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = server
        .call(Method::DELETE, override_path, Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&body), "PATTERN_NOT_FOUND");

    // Every change was audited.
    let query = AuditQuery {
        limit: 50,
        ..AuditQuery::default()
    };
    let actions: Vec<String> = store
        .list_audit(&query)
        .await
        .unwrap()
        .entries
        .into_iter()
        .filter(|e| e.target_kind == "scanner_rule")
        .map(|e| e.action)
        .collect();
    assert_eq!(
        actions,
        [
            "scanner_rule.create",
            "scanner_rule.update",
            "scanner_rule.create",
            "scanner_rule.delete"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trying_an_expression_answers_per_sample_and_writes_nothing() {
    let Some(url) = fresh_database("pattern_try") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let admin = server.admin_token();
    let (_, engineer) = user_with_token(&store, "eng@example.test", None, None).await;
    let route = "/api/v1/scanner-patterns/test";
    let body = json!({ "pattern": "^curl .*\\| *sh$", "flags": "m",
                       "samples": ["ls\ncurl x | sh", "curl x > f", "curl a | sh\ncurl b |sh"] });
    let (status, _) = server
        .call(Method::POST, route, Some(&engineer), Some(&body))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, answer) = server
        .call(Method::POST, route, Some(&admin), Some(&body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let results = answer["data"]["results"].as_array().unwrap();
    assert_eq!(results[0]["result"], "matched");
    assert_eq!(results[0]["excerpt"], "curl x | sh");
    assert_eq!(results[1]["result"], "no_match");
    assert_eq!(results[2]["matches"], 2);

    let too_many = json!({ "pattern": "x", "samples": vec!["x"; 11] });
    let too_long = json!({ "pattern": "x", "samples": ["é".repeat(20_001)] });
    let none = json!({ "pattern": "x", "samples": [] });
    for bad in [&too_many, &too_long, &none] {
        let (status, answer) = server
            .call(Method::POST, route, Some(&admin), Some(bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(code(&answer), "INVALID_BODY");
    }
    let broken = json!({ "pattern": "(?<=a)b", "samples": ["ab"] });
    let (status, answer) = server
        .call(Method::POST, route, Some(&admin), Some(&broken))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(code(&answer), "INVALID_REGEX");
    assert!(store.list_patterns().await.unwrap().is_empty());
    let query = AuditQuery {
        limit: 50,
        ..AuditQuery::default()
    };
    assert!(store.list_audit(&query).await.unwrap().entries.is_empty());
}
