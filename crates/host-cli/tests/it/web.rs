//! `auto-swe runs show RUN --web`: over the local store, a viewer on loopback behind a one-time
//! code; against a server, the server's sign-in page for the run.

use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{LOCATION, SET_COOKIE};

use crate::json;
use crate::local::{local, sandbox_available};

/// The child process, ended by its PID when dropped.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `auto-swe runs show RUN --web` over `home`'s store; returns it and the URL it printed.
fn serve(home: &std::path::Path, run: &str) -> (Serving, String) {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let mut child = Command::new(env!("CARGO_BIN_EXE_auto-swe"))
        .args(["runs", "show", run, "--web"])
        .current_dir(home)
        .env("AUTO_SWE_HOME", home)
        .env_remove("AUTO_SWE_STORE_URL")
        .env_remove("AUTO_SWE_SERVER")
        // No xdg-open on this PATH: the URL is printed, not opened.
        .env("PATH", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let serving = Serving(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap()
        .trim()
        .to_owned();
    (serving, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_viewer_opens_once_with_its_code_and_serves_only_the_viewer() {
    if !sandbox_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let started = local(
        home.path(),
        &["demo", "--sandbox", "local", "--detach", "--format", "json"],
        None,
    );
    assert_eq!(started.code, 0, "{}\n{}", started.stdout, started.stderr);
    let run = json(&started)["runId"].as_str().unwrap().to_owned();

    let (serving, url) = serve(home.path(), &run);
    let prefix = "http://127.0.0.1:";
    assert!(url.starts_with(prefix), "{url}");
    let code = url
        .split("code=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    assert_eq!(code.len(), 64);
    assert!(code.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(url.ends_with(&format!("&next=/ui/runs/{run}")), "{url}");
    let base = url.split("/ui/").next().unwrap().to_owned();

    // The code reaches no command line: the browser is pointed at an owner-only file.
    let launcher = home.path().join("viewer-link.html");
    let mode = std::fs::metadata(&launcher).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(std::fs::read_to_string(&launcher).unwrap().contains(code));

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let forged = http
        .get(format!("{base}/ui/login?code={}", "0".repeat(64)))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    let first = http.get(&url).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        first.headers()[LOCATION],
        format!("/ui/runs/{run}").as_str()
    );
    let cookie = first.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let again = http.get(&url).send().await.unwrap();
    assert_eq!(
        again.status(),
        StatusCode::UNAUTHORIZED,
        "the code is spent"
    );
    assert!(again.headers().get(SET_COOKIE).is_none());

    let page = http
        .get(format!("{base}/ui/runs/{run}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let body = page.text().await.unwrap();
    assert!(
        body.contains(&run) && body.contains("<svg class=\"dag\""),
        "{body}"
    );
    assert!(
        body.contains("data-node=\"implement\""),
        "the demo's graph is drawn"
    );
    let unsigned = http
        .get(format!("{base}/ui/runs/{run}"))
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), StatusCode::SEE_OTHER);
    let api = http.get(format!("{base}/api/v1/me")).send().await.unwrap();
    assert_eq!(
        api.status(),
        StatusCode::NOT_FOUND,
        "only the viewer is served"
    );
    drop(serving);
}

#[test]
fn against_a_server_it_names_the_sign_in_page_of_the_run() {
    let home = tempfile::tempdir().unwrap();
    let run = "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b";
    let shown = local(
        home.path(),
        &[
            "runs",
            "show",
            run,
            "--web",
            "--server",
            "http://127.0.0.1:9",
        ],
        None,
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_eq!(
        shown.stdout.lines().next().unwrap(),
        format!("http://127.0.0.1:9/ui/login?next=/ui/runs/{run}")
    );
    let odd = local(
        home.path(),
        &[
            "runs",
            "show",
            "a/../b?x",
            "--web",
            "--server",
            "https://auto-swe.example",
        ],
        None,
    );
    assert_eq!(
        odd.stdout.lines().next().unwrap(),
        "https://auto-swe.example/ui/login?next=/ui/runs/a%2F%2E%2E%2Fb%3Fx"
    );
    let clear = local(
        home.path(),
        &[
            "runs",
            "show",
            run,
            "--web",
            "--server",
            "http://auto-swe.example",
        ],
        None,
    );
    assert_ne!(clear.code, 0);
    assert!(clear.stderr.contains("use https://"), "{}", clear.stderr);
}
