//! The run viewer over real HTTP as a browser and an attacker call it: signing in (and who
//! cannot), where it redirects, forms without this session's CSRF token or from another origin,
//! another team's run, markup in trace records, and paging a long trace.

use auto_swe_store::{FinalizeRun, PlatformRole, RunStatus, Spend, StepStatus};
use reqwest::header::{LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{
    Server, approval_spec, fresh_database, open_store, service_token, user_with_token, wait_for_run,
};
use crate::viewer_support::{HOSTILE, client, csrf_of, leased_run, sign_in, trace, two_teams, ui};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_signs_people_in_and_refuses_what_an_attacker_sends() {
    let Some(url) = fresh_database("viewer") else {
        return;
    };
    let server = Server::start(&url, 1, "");
    let store = open_store(&url).await;
    let (team, other) = two_teams(&store).await;
    let (lead, lead_token) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let (_, outsider_token) =
        user_with_token(&store, "out@example.test", Some(&other.id), None).await;
    let bot = service_token(&store, &team.id, vec![]).await;

    // Unsigned: pages send the browser to sign in, and come back only inside the viewer.
    let answer = ui(
        &server,
        Method::GET,
        "/ui/runs?status=FAILED",
        None,
        None,
        &[],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(
        answer.headers[LOCATION],
        "/ui/login?next=/ui/runs%3Fstatus%3DFAILED"
    );
    let login = ui(
        &server,
        Method::GET,
        "/ui/login?next=//evil.example",
        None,
        None,
        &[],
    )
    .await;
    assert_eq!(login.status, StatusCode::OK);
    assert!(
        login.body.contains("name=\"next\" value=\"/ui/runs\""),
        "{}",
        login.body
    );
    for next in [
        "https://evil.example/ui/runs",
        "//evil.example/ui/runs",
        "/ui/../api/v1/me",
        "/\\evil.example",
        "javascript:alert(1)",
    ] {
        let answer = ui(
            &server,
            Method::POST,
            "/ui/login",
            None,
            Some(&[("token", &lead_token), ("next", next)]),
            &[],
        )
        .await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{next}");
        assert_eq!(
            answer.headers[LOCATION], "/ui/runs",
            "{next} is not followed"
        );
    }
    let answer = ui(
        &server,
        Method::POST,
        "/ui/login",
        None,
        Some(&[("token", &lead_token), ("next", "/ui/runs?q=01")]),
        &[],
    )
    .await;
    assert_eq!(answer.headers[LOCATION], "/ui/runs?q=01");
    let cookie = answer.headers[SET_COOKIE].to_str().unwrap().to_owned();
    for part in [
        "auto_swe_ui=eyJ",
        "; Path=/ui",
        "; HttpOnly",
        "; SameSite=Strict",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain http on loopback: {cookie}"
    );
    let answer = ui(
        &server,
        Method::POST,
        "/ui/login",
        None,
        Some(&[("token", &lead_token)]),
        &[("x-forwarded-proto", "https")],
    )
    .await;
    assert!(
        answer.headers[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );

    // Service tokens, wrong tokens and cross-site sign-ins get no session.
    for (token, status) in [
        (bot.as_str(), StatusCode::FORBIDDEN),
        ("ats_not-a-token", StatusCode::UNAUTHORIZED),
        ("eyJhbGciOiJub25lIn0.e30.", StatusCode::UNAUTHORIZED),
    ] {
        let answer = ui(
            &server,
            Method::POST,
            "/ui/login",
            None,
            Some(&[("token", token)]),
            &[],
        )
        .await;
        assert_eq!(answer.status, status, "{}", answer.body);
        assert!(answer.headers.get(SET_COOKIE).is_none());
    }
    let answer = ui(
        &server,
        Method::POST,
        "/ui/login",
        None,
        Some(&[("token", &lead_token)]),
        &[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(answer.headers.get(SET_COOKIE).is_none());

    // The API stays bearer-only: the cookie opens nothing there.
    let session = sign_in(&server, &lead_token).await;
    let api = client()
        .get(format!("{}/api/v1/workflow-runs", server.base))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);

    // Every page carries the policy; the assets are cached for long and typed.
    let page = ui(&server, Method::GET, "/ui/runs", Some(&session), None, &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.headers["content-security-policy"],
        auto_swe_server::viewer::CONTENT_SECURITY_POLICY
    );
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    assert_eq!(page.headers["referrer-policy"], "no-referrer");
    assert_eq!(page.headers["cache-control"], "no-store");
    assert!(!page.body.contains("<script>") && !page.body.contains(" style="));
    let script_at = page.body.find("/ui/assets/viewer.js?v=").unwrap();
    let script = &page.body[script_at..page.body[script_at..].find('"').unwrap() + script_at];
    let asset = ui(&server, Method::GET, script, None, None, &[]).await;
    assert_eq!(asset.status, StatusCode::OK);
    assert_eq!(
        asset.headers["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(
        asset.headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    assert!(
        !asset.body.contains("innerHTML"),
        "trace rows are built with textContent"
    );

    // A run waiting on an approval: answered only with this session's token from this origin.
    let template = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead_token),
            Some(&json!({ "name": "gate", "teamId": team.id, "spec": approval_spec("Ship <b>it</b>?") })),
        )
        .await
        .1["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, launched) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-templates/{template}/runs"),
            Some(&lead_token),
            Some(&json!({ "input": {} })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{launched}");
    let run = launched["data"]["runId"].as_str().unwrap().to_owned();
    let waiting = wait_for_run(&server, &lead_token, &run, |r| {
        r["status"] == "WAITING" && r["humanSteps"].as_array().is_some_and(|s| !s.is_empty())
    })
    .await;
    let step = waiting["humanSteps"][0]["id"].as_str().unwrap().to_owned();
    let page = ui(
        &server,
        Method::GET,
        &format!("/ui/runs/{run}"),
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("Ship &lt;b&gt;it&lt;/b&gt;?"),
        "the title is escaped"
    );
    assert!(
        page.body
            .contains("class=\"node node-waiting\" data-node=\"approve\"")
    );
    let csrf = csrf_of(&page.body);
    let respond = format!("/ui/human-steps/{step}/respond");
    let other_session = sign_in(&server, &lead_token).await;
    let other_csrf = csrf_of(
        &ui(
            &server,
            Method::GET,
            "/ui/runs",
            Some(&other_session),
            None,
            &[],
        )
        .await
        .body,
    );
    assert_ne!(csrf, other_csrf, "each session has its own token");
    for (form, headers, why) in [
        (vec![("decision", "approve")], vec![], "no token"),
        (
            vec![("decision", "approve"), ("csrf", "00")],
            vec![],
            "a forged token",
        ),
        (
            vec![("decision", "approve"), ("csrf", other_csrf.as_str())],
            vec![],
            "another session's token",
        ),
        (
            vec![("decision", "approve"), ("csrf", csrf.as_str())],
            vec![("origin", "https://evil.example")],
            "another origin",
        ),
        (
            vec![("decision", "approve"), ("csrf", csrf.as_str())],
            vec![("sec-fetch-site", "same-site")],
            "a sibling site",
        ),
        (
            vec![("decision", "approve"), ("csrf", csrf.as_str())],
            vec![("origin", "null")],
            "an opaque origin without Sec-Fetch-Site",
        ),
    ] {
        let answer = ui(
            &server,
            Method::POST,
            &respond,
            Some(&session),
            Some(&form),
            &headers,
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "{why}: {}",
            answer.body
        );
    }
    let still = wait_for_run(&server, &lead_token, &run, |_| true).await;
    assert_eq!(
        still["humanSteps"][0]["status"], "PENDING",
        "a refused form changes nothing"
    );

    // Another team's member: the run and its step do not exist for them, as in the API.
    let outsider = sign_in(&server, &outsider_token).await;
    let hidden = ui(
        &server,
        Method::GET,
        &format!("/ui/runs/{run}"),
        Some(&outsider),
        None,
        &[],
    )
    .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert!(hidden.body.contains("RUN_NOT_FOUND"));
    let absent = ui(
        &server,
        Method::GET,
        "/ui/runs/0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b",
        Some(&outsider),
        None,
        &[],
    )
    .await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND);
    assert_eq!(
        hidden.body,
        absent
            .body
            .replace("0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b", &run)
    );
    let events = ui(
        &server,
        Method::GET,
        &format!("/ui/runs/{run}/events"),
        Some(&outsider),
        None,
        &[],
    )
    .await;
    assert_eq!(events.status, StatusCode::NOT_FOUND);
    let outsider_csrf = csrf_of(
        &ui(&server, Method::GET, "/ui/runs", Some(&outsider), None, &[])
            .await
            .body,
    );
    let answer = ui(
        &server,
        Method::POST,
        &respond,
        Some(&outsider),
        Some(&[("decision", "approve"), ("csrf", &outsider_csrf)]),
        &[],
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    let list = ui(&server, Method::GET, "/ui/runs", Some(&outsider), None, &[]).await;
    assert!(!list.body.contains(&run), "the list hides it too");

    // The lead's form answers it, through the API's own rules; the run ends.
    let answer = ui(
        &server,
        Method::POST,
        &respond,
        Some(&session),
        Some(&[
            ("decision", "approve"),
            ("comment", "fine"),
            ("csrf", &csrf),
        ]),
        &[("origin", "null"), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(answer.headers[LOCATION], format!("/ui/runs/{run}").as_str());
    let done = wait_for_run(&server, &lead_token, &run, |r| r["status"] == "SUCCESS").await;
    assert_eq!(done["humanSteps"][0]["answeredBy"], lead.id.as_str());
    let again = ui(
        &server,
        Method::POST,
        &respond,
        Some(&session),
        Some(&[("decision", "approve"), ("csrf", &csrf)]),
        &[],
    )
    .await;
    assert_eq!(again.status, StatusCode::CONFLICT);

    // Sign-out needs the token too, then the cookie is cleared.
    let out = ui(
        &server,
        Method::POST,
        "/ui/logout",
        Some(&session),
        Some(&[]),
        &[],
    )
    .await;
    assert_eq!(out.status, StatusCode::FORBIDDEN);
    let out = ui(
        &server,
        Method::POST,
        "/ui/logout",
        Some(&session),
        Some(&[("csrf", &csrf)]),
        &[],
    )
    .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        out.headers[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markup_in_traces_is_text_and_a_long_trace_is_paged() {
    let Some(url) = fresh_database("viewer_traces") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let (team, other) = two_teams(&store).await;
    let (user, token) = user_with_token(&store, "dev@example.test", Some(&team.id), None).await;
    let spec = json!({
        "specVersion": 1, "name": "one-agent", "entry": "work",
        "nodes": [
            { "id": "work", "type": "set", "values": {}, "next": "end" },
            { "id": "end", "type": "terminate", "status": "SUCCESS", "result": {} }
        ]
    });
    let lease = leased_run(&store, &team.id, &user.id, &spec).await;
    let run = lease.run_id.clone();
    let step = store.start_step(&lease, "work", "work", 1).await.unwrap();
    store
        .finish_step(&lease, &step.id, StepStatus::SUCCEEDED, &json!({}))
        .await
        .unwrap();
    let hostile = trace(
        &lease,
        "work",
        "tool_call",
        json!({ "type": "tool_call", "toolName": HOSTILE, "inputJson": { "cmd": HOSTILE },
                "outputJson": HOSTILE, "error": HOSTILE, "node": { "agentKey": HOSTILE } }),
    );
    let mut rows = vec![hostile];
    for i in 0..449 {
        rows.push(trace(&lease, "work", "llm_response", json!({ "type": "llm_response", "outputJson": format!("turn {i}"),
            "call": { "model": "replay/demo", "inputTokens": 100, "outputTokens": 20, "costUsd": 0.0015 } })));
    }
    store.append_traces(&lease, rows).await.unwrap();
    // A result string too long for its row, stored as an artifact behind a placeholder.
    let long = format!("{HOSTILE}{}", "x".repeat(20_000));
    let spilled = store
        .put_artifact(
            &lease,
            auto_swe_worker::SPILL_ARTIFACT,
            "text/plain",
            long.as_bytes(),
        )
        .await
        .unwrap();
    let placeholder = auto_swe_worker::spill_placeholder(&spilled.id, long.len());
    store
        .finalize_run(
            &lease,
            FinalizeRun {
                status: RunStatus::SUCCESS,
                usage: Spend {
                    cost_micros: 675_000,
                    input_tokens: 45_000,
                    output_tokens: 9_000,
                },
                result: Some(
                    json!({ "result": { "summary": placeholder, "note": HOSTILE },
                                     "context": {}, "error": null }),
                ),
            },
        )
        .await
        .unwrap();
    let session = sign_in(&server, &token).await;

    // The latest page: 200 of 450, the way back, the spend, the graph's statuses.
    let page = ui(
        &server,
        Method::GET,
        &format!("/ui/runs/{run}"),
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.body.matches("<tr class=\"trace ").count(), 200);
    assert!(page.body.contains("200 of 450 records."));
    assert!(page.body.contains(&format!(
        "href=\"/ui/runs/{run}?since=0\">Load earlier records"
    )));
    assert!(page.body.contains("turn 448") && !page.body.contains("turn 248<"));
    assert!(
        page.body.contains("<dd id=\"run-cost\">$0.67</dd>"),
        "the run's spend"
    );
    assert!(
        page.body
            .contains("class=\"node node-success\" data-node=\"work\"")
    );
    assert!(
        page.body
            .contains("class=\"node node-pending\" data-node=\"end\"")
    );
    assert!(
        page.body.contains("data-live=\"0\""),
        "an ended run is not followed"
    );

    // From the start, 200 a page, by the `since` cursor: the hostile record is text.
    let first = ui(
        &server,
        Method::GET,
        &format!("/ui/runs/{run}?since=0"),
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(first.body.matches("<tr class=\"trace ").count(), 200);
    assert!(
        first.body.contains("turn 0<")
            || first.body.contains("turn 0\n")
            || first.body.contains("out: turn 0")
    );
    assert!(
        !first.body.contains("<img")
            && !first.body.contains("<svg onload")
            && !first.body.contains("<script>window")
    );
    assert!(
        first
            .body
            .contains("&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;")
    );
    let next_at = first.body.find("rel=\"next\" href=\"").unwrap() + 17;
    let next = first.body[next_at..].split('"').next().unwrap().to_owned();
    let second = ui(&server, Method::GET, &next, Some(&session), None, &[]).await;
    assert_eq!(second.body.matches("<tr class=\"trace ").count(), 200);
    assert!(second.body.contains("out: turn 199") && !second.body.contains("out: turn 198\n"));
    let bad = ui(
        &server,
        Method::GET,
        &format!("/ui/runs/{run}?since=-1"),
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    // The list filters as the API does.
    let list = ui(
        &server,
        Method::GET,
        &format!("/ui/runs?status=SUCCESS&q={}", &run[..8]),
        Some(&session),
        None,
        &[],
    )
    .await;
    assert!(list.body.contains(&run));
    let list = ui(
        &server,
        Method::GET,
        "/ui/runs?status=FAILED",
        Some(&session),
        None,
        &[],
    )
    .await;
    assert!(!list.body.contains(&run));
    let list = ui(
        &server,
        Method::GET,
        "/ui/runs?q=%3Cscript%3E",
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(list.status, StatusCode::BAD_REQUEST);
    assert!(!list.body.contains("<script>"));

    // The result: escaped, its placeholder a link to the full text, under the run's visibility.
    let artifact = format!("/ui/runs/{run}/artifacts/{}", spilled.id);
    assert!(
        page.body
            .contains(&format!("<a class=\"artifact\" href=\"{artifact}\">")),
        "{}",
        page.body
    );
    assert!(page.body.contains("&quot;note&quot;: &quot;&lt;img src=x"));
    let text = ui(&server, Method::GET, &artifact, Some(&session), None, &[]).await;
    assert_eq!(text.status, StatusCode::OK);
    assert_eq!(text.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(text.headers["x-content-type-options"], "nosniff");
    assert_eq!(text.body, long);
    let (_, outsider_token) =
        user_with_token(&store, "out@example.test", Some(&other.id), None).await;
    let outsider = sign_in(&server, &outsider_token).await;
    let hidden = ui(&server, Method::GET, &artifact, Some(&outsider), None, &[]).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert!(hidden.body.contains("RUN_NOT_FOUND") && !hidden.body.contains("xxxx"));
    let wrong = format!("/ui/runs/{run}/artifacts/{run}");
    let wrong = ui(&server, Method::GET, &wrong, Some(&session), None, &[]).await;
    assert_eq!(wrong.status, StatusCode::NOT_FOUND);
    assert!(wrong.body.contains("ARTIFACT_NOT_FOUND"));
}
