//! The run viewer in a real headless Chromium driven over `WebDriver` (`chromedriver`, started
//! on a loopback port and ended by its PID): a finished run renders, a waiting run's page
//! follows it live, an approval click resumes a parked run, markup in trace records stays
//! inert, another team's run is absent and a forged CSRF token is refused.
//!
//! Skipped with a message when chromedriver is not installed, unless
//! `AUTO_SWE_REQUIRE_BROWSER=1`. Chromium runs with `--no-sandbox` because CI runs as root,
//! where Chromium's own sandbox refuses to start.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use auto_swe_store::{FinalizeRun, PlatformRole, RunStatus, Spend, StepStatus};
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{
    Server, approval_spec, fresh_database, open_store, user_with_token, wait_for_run,
};
use crate::viewer_support::{HOSTILE, leased_run, trace, two_teams};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver process; ended by its PID when dropped.
struct Driver {
    child: Child,
    url: String,
    profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start() -> Option<Self> {
        if !std::path::Path::new(CHROMEDRIVER).exists() {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BROWSER").as_deref() != Ok("1"),
                "AUTO_SWE_REQUIRE_BROWSER=1 but {CHROMEDRIVER} is not installed"
            );
            eprintln!("skipped: {CHROMEDRIVER} is not installed (apt-get install chromium-driver)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        #[expect(
            clippy::disallowed_methods,
            reason = "the test drives the browser it tests with"
        )]
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Some(Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            profile: tempfile::tempdir().unwrap(),
        })
    }

    async fn browser(&self) -> Client {
        let start = Instant::now();
        loop {
            let ready = reqwest::get(format!("{}/status", self.url))
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-proxy-server", "--window-size=1280,1000",
                format!("--user-data-dir={}", self.profile.path().display()),
            ] }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap()
    }
}

/// Waits (up to 30 s) until `script` returns `true` in the page (a script error, as while a
/// page loads, counts as not yet).
async fn until(browser: &Client, script: &str, what: &str) {
    let start = Instant::now();
    loop {
        let value = browser.execute(script, vec![]).await;
        if matches!(value, Ok(Value::Bool(true))) {
            return;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let url = browser.current_url().await.map(|u| u.to_string());
            let source = browser.source().await.unwrap_or_default();
            unreachable!("{what}: still {value:?} at {url:?}\n{source}");
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

async fn eval(browser: &Client, script: &str) -> Value {
    browser.execute(script, vec![]).await.unwrap()
}

/// The class attribute of graph node `node`.
async fn node_class(browser: &Client, node: &str) -> String {
    eval(
        browser,
        &format!(
            "return Array.from(document.querySelectorAll('svg.dag g.node'))\
             .filter(g => g.dataset.node === {node:?}).map(g => g.getAttribute('class'))[0] || '';"
        ),
    )
    .await
    .as_str()
    .unwrap()
    .to_owned()
}

async fn sign_in(browser: &Client, server: &Server, token: &str, next: &str) {
    browser
        .goto(&format!("{}/ui/login?next={next}", server.base))
        .await
        .unwrap();
    browser
        .find(Locator::Css("input[name=token]"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    browser
        .find(Locator::Css("section.login button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let start = Instant::now();
    while browser.current_url().await.unwrap().path() != next.split('?').next().unwrap() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "sign-in did not land on {next}: {} {}",
            browser.current_url().await.unwrap(),
            browser.source().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_page_in_a_real_browser() {
    let Some(url) = fresh_database("browser") else {
        return;
    };
    let Some(driver) = Driver::start() else {
        return;
    };
    let server = Server::start(&url, 1, "");
    let browser = driver.browser().await;
    // The browser is closed (and Chromium with it) whether the scenarios pass or not.
    let outcome = std::panic::AssertUnwindSafe(scenarios(&server, &url, &browser))
        .catch_unwind()
        .await;
    let _ = browser.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn scenarios(server: &Server, url: &str, browser: &Client) {
    let store = open_store(url).await;
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
    let template = |spec: Value| {
        let body = json!({ "name": spec["name"], "teamId": team.id, "spec": spec });
        let token = lead_token.clone();
        async move {
            let (status, created) = server
                .call(
                    Method::POST,
                    "/api/v1/workflow-templates",
                    Some(&token),
                    Some(&body),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{created}");
            created["data"]["id"].as_str().unwrap().to_owned()
        }
    };
    let launch = |template: String| {
        let token = lead_token.clone();
        async move {
            let (status, launched) = server
                .call(
                    Method::POST,
                    &format!("/api/v1/workflow-templates/{template}/runs"),
                    Some(&token),
                    Some(&json!({ "input": {} })),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{launched}");
            launched["data"]["runId"].as_str().unwrap().to_owned()
        }
    };
    let gate = template(approval_spec("Ship it?")).await;
    let waiter = template(json!({
        "specVersion": 1, "name": "wait-then-end", "entry": "wait",
        "nodes": [
            { "id": "wait", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS", "result": {} }
        ]
    }))
    .await;

    sign_in(browser, server, &lead_token, "/ui/runs").await;

    // (e) A forged or absent CSRF token is refused and the step stays pending.
    let parked = launch(gate.clone()).await;
    wait_for_run(server, &lead_token, &parked, |r| {
        r["status"] == "WAITING" && r["humanSteps"].as_array().is_some_and(|s| !s.is_empty())
    })
    .await;
    let page = format!("{}/ui/runs/{parked}", server.base);
    for tamper in [
        "document.querySelector('form.answer input[name=csrf]').value = 'ab'.repeat(32);",
        "document.querySelector('form.answer input[name=csrf]').remove();",
    ] {
        browser.goto(&page).await.unwrap();
        eval(browser, &format!("{tamper} return true;")).await;
        browser
            .find(Locator::Css("form.answer button.answer-approve"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        until(
            browser,
            "return document.querySelector('section.error h1')?.textContent === '403';",
            "a 403 page",
        )
        .await;
    }
    let still = wait_for_run(server, &lead_token, &parked, |_| true).await;
    assert_eq!(still["humanSteps"][0]["status"], "PENDING");

    // (c) An approval click on the page resumes the parked run, which completes.
    browser.goto(&page).await.unwrap();
    assert!(
        node_class(browser, "approve")
            .await
            .contains("node-waiting")
    );
    browser
        .find(Locator::Css("form.answer textarea[name=comment]"))
        .await
        .unwrap()
        .send_keys("approved from the page")
        .await
        .unwrap();
    browser
        .find(Locator::Css("form.answer button.answer-approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let done = wait_for_run(server, &lead_token, &parked, |r| r["status"] == "SUCCESS").await;
    assert_eq!(done["humanSteps"][0]["status"], "ANSWERED");
    assert_eq!(done["humanSteps"][0]["answeredBy"], lead.id.as_str());

    // (a) The finished run renders: node statuses, steps, costs as the API reports them.
    browser.goto(&page).await.unwrap();
    assert!(
        node_class(browser, "approve")
            .await
            .contains("node-success")
    );
    assert!(
        node_class(browser, "stopped")
            .await
            .contains("node-pending")
    );
    assert_eq!(
        eval(
            browser,
            "return document.getElementById('run-status').textContent;"
        )
        .await,
        "SUCCESS"
    );
    let steps = eval(
        browser,
        "return Array.from(document.querySelectorAll('#steps tbody tr[data-node]')).map(r => r.dataset.node);",
    )
    .await;
    let api_steps: Vec<Value> = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["nodeId"].clone())
        .collect();
    assert_eq!(steps, Value::Array(api_steps));
    assert!(steps.as_array().unwrap().contains(&json!("approve")));
    let tokens = eval(
        browser,
        "return [document.getElementById('run-input-tokens').textContent, document.getElementById('run-output-tokens').textContent];",
    )
    .await;
    assert_eq!(
        tokens,
        json!([done["tokens"][0].to_string(), done["tokens"][1].to_string()])
    );
    assert!(
        eval(
            browser,
            "return document.querySelector('#human-steps form.answer') === null;"
        )
        .await
        .as_bool()
        .unwrap(),
        "an answered step offers no form"
    );

    // (b) A waiting run's page follows it without a reload when the signal comes.
    let waiting = launch(waiter).await;
    wait_for_run(server, &lead_token, &waiting, |r| r["status"] == "WAITING").await;
    browser
        .goto(&format!("{}/ui/runs/{waiting}", server.base))
        .await
        .unwrap();
    assert!(!node_class(browser, "wait").await.contains("node-success"));
    assert!(node_class(browser, "done").await.contains("node-pending"));
    eval(browser, "window.__samePage = 42; return true;").await;
    let (status, sent) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{waiting}/signals/go"),
            Some(&lead_token),
            Some(&json!({ "payload": { "ok": true } })),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
    until(
        browser,
        "return Array.from(document.querySelectorAll('svg.dag g.node')).some(g => g.dataset.node === 'wait' && g.classList.contains('node-success'));",
        "the signal node turns green",
    )
    .await;
    until(
        browser,
        "return document.getElementById('run-status').textContent === 'SUCCESS';",
        "the run's status follows",
    )
    .await;
    assert_eq!(
        eval(browser, "return window.__samePage;").await,
        json!(42),
        "the page was updated in place, not reloaded"
    );

    // (d) Markup in trace records stays text: on the page as served, and when it arrives live.
    let spec = json!({
        "specVersion": 1, "name": "agent-at-work", "entry": "work",
        "nodes": [
            { "id": "work", "type": "set", "values": {}, "next": "end" },
            { "id": "end", "type": "terminate", "status": "SUCCESS", "result": {} }
        ]
    });
    let lease = leased_run(&store, &team.id, &lead.id, &spec).await;
    let run = lease.run_id.clone();
    let payload = json!({ "type": "tool_call", "toolName": HOSTILE, "inputJson": { "cmd": HOSTILE },
        "outputJson": HOSTILE, "error": HOSTILE, "node": { "agentKey": HOSTILE } });
    store
        .append_traces(
            &lease,
            vec![trace(&lease, "work", "tool_call", payload.clone())],
        )
        .await
        .unwrap();
    browser
        .goto(&format!("{}/ui/runs/{run}", server.base))
        .await
        .unwrap();
    let inert = "return document.querySelectorAll('img, svg:not(.dag), main script').length === 0 \
                 && document.scripts.length === 1 && typeof window.__pwned === 'undefined';";
    assert_eq!(
        eval(browser, inert).await,
        json!(true),
        "served markup stayed text"
    );
    assert!(
        eval(
            browser,
            "return document.getElementById('trace-rows').textContent;"
        )
        .await
        .as_str()
        .unwrap()
        .contains("<img src=x onerror=\"window.__pwned=1\">"),
        "and reads as the text it is"
    );
    let step = store.start_step(&lease, "work", "work", 1).await.unwrap();
    store
        .append_traces(&lease, vec![trace(&lease, "work", "tool_call", payload)])
        .await
        .unwrap();
    until(
        browser,
        "return document.querySelectorAll('#trace-rows tr.trace').length === 2;",
        "the live record arrives",
    )
    .await;
    assert_eq!(
        eval(browser, inert).await,
        json!(true),
        "live markup stayed text"
    );
    until(
        browser,
        "return Array.from(document.querySelectorAll('svg.dag g.node')).some(g => g.dataset.node === 'work' && g.classList.contains('node-running'));",
        "the node the records name shows running",
    )
    .await;
    store
        .finish_step(&lease, &step.id, StepStatus::SUCCEEDED, &json!({}))
        .await
        .unwrap();
    store
        .finalize_run(
            &lease,
            FinalizeRun {
                status: RunStatus::SUCCESS,
                usage: Spend {
                    cost_micros: 1_230_000,
                    input_tokens: 4_200,
                    output_tokens: 900,
                },
                result: None,
            },
        )
        .await
        .unwrap();
    until(
        browser,
        "return document.getElementById('run-cost').textContent === '$1.23' \
         && document.getElementById('run-status').textContent === 'SUCCESS';",
        "the spend and the end arrive",
    )
    .await;
    assert_eq!(eval(browser, inert).await, json!(true));

    // (e) Another team's member: the run does not exist for them.
    let logout = browser
        .find(Locator::Css("form.logout button"))
        .await
        .unwrap();
    logout.click().await.unwrap();
    until(
        browser,
        "return location.pathname === '/ui/login';",
        "signed out",
    )
    .await;
    sign_in(browser, server, &outsider_token, "/ui/runs").await;
    browser.goto(&page).await.unwrap();
    assert_eq!(
        eval(
            browser,
            "return document.querySelector('section.error h1').textContent;"
        )
        .await,
        "404"
    );
    browser
        .goto(&format!("{}/ui/runs", server.base))
        .await
        .unwrap();
    let listed = eval(
        browser,
        "return document.querySelector('table.runs').textContent;",
    )
    .await;
    assert!(!listed.as_str().unwrap().contains(&parked), "{listed}");
}
