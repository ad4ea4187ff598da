//! Helpers for the run viewer's tests and benchmark: a browser's requests without a browser
//! (cookie, form, headers), signing in, and runs leased by the test so it writes their steps
//! and trace records itself, as a worker would.

use std::time::Duration;

use auto_swe_store::{LeaseToken, NewAgentTrace, NewRun, Spend, Store, Team};
use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::support::Server;

/// Two teams of one org: the team whose runs a test looks at, and a team of outsiders.
pub(crate) async fn two_teams(store: &Store) -> (Team, Team) {
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let other = store.create_team(&org.id, "other").await.unwrap();
    (team, other)
}

/// What a page answered.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

/// A client that does not follow redirects.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Sends a viewer request with `cookie` (`name=value`), a form body, and extra headers.
pub(crate) async fn ui(
    server: &Server,
    method: Method,
    path: &str,
    cookie: Option<&str>,
    form: Option<&[(&str, &str)]>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = client().request(method, format!("{}{path}", server.base));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    if let Some(form) = form {
        request = request.form(form);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    Answer {
        status: response.status(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap(),
    }
}

/// Signs in with `token`; returns the `auto_swe_ui=…` pair to send back.
pub(crate) async fn sign_in(server: &Server, token: &str) -> String {
    let answer = ui(
        server,
        Method::POST,
        "/ui/login",
        None,
        Some(&[("token", token), ("next", "/ui/runs")]),
        &[],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let cookie = answer.headers[SET_COOKIE].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

/// The value of the first `name="csrf"` input of `page`.
pub(crate) fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    page[at..].split('"').next().unwrap().to_owned()
}

/// A run of `team` launched by `user`, made in the store and leased by the test (as a worker
/// would), so the test writes its steps and trace records itself.
pub(crate) async fn leased_run(store: &Store, team: &str, user: &str, spec: &Value) -> LeaseToken {
    let run = store
        .create_run(NewRun::new(spec.clone()).with_team(team).launched_by(user))
        .await
        .unwrap();
    store
        .claim_run(
            &run.id,
            "test-worker",
            Duration::from_secs(600),
            auto_swe_store::RunEngine::Embedded,
        )
        .await
        .unwrap()
        .token()
}

/// A trace record of `kind` with `payload`, costing `cost_micros`.
pub(crate) fn trace(token: &LeaseToken, node: &str, kind: &str, payload: Value) -> NewAgentTrace {
    NewAgentTrace {
        run_id: Some(token.run_id.clone()),
        workflow_id: token.run_id.clone(),
        node_id: Some(node.to_owned()),
        recording_id: Some(node.to_owned()),
        activity: "agent".to_owned(),
        kind: kind.to_owned(),
        payload,
        spend_owner_org_id: None,
        model: Some("replay/demo".to_owned()),
        usage: Spend {
            cost_micros: 1_500,
            input_tokens: 100,
            output_tokens: 20,
        },
    }
}

/// The markup a hostile model or tool output could carry.
pub(crate) const HOSTILE: &str = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>\"'><svg onload=window.__pwned=3>";
