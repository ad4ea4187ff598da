//! App JWTs, scoped installation tokens and their cache, personal tokens, lost installations,
//! refused keys, rate limits.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use auto_swe_scm_github::{GitHubAuth, GitHubConfig, GitHubError, GitHubScm};
use auto_swe_store::SecretString;
use auto_swe_worker::{Scm, with_step_deadline};
use wiremock::ResponseTemplate;

use crate::support::{APP_ID, Auth, Harness, NAME, PERSONAL_TOKEN};

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn the_app_jwt_is_rs256_issued_60s_back_and_short_lived() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    h.register(&scm).await;
    // The fake verified every JWT's RS256 signature with the App's public key.
    let jwts = h.fake.with(|s| s.jwts.clone());
    assert!(!jwts.is_empty());
    let now = now_secs();
    for claims in &jwts {
        assert_eq!(claims.iss, APP_ID.to_string());
        assert!(
            claims.iat + 55 <= now && claims.iat + 70 >= now,
            "{claims:?}"
        );
        assert!(claims.exp > now && claims.exp <= now + 600, "{claims:?}");
        assert!(claims.exp - claims.iat <= 660);
    }
    // A JWT went only to the App's own endpoints; repository calls carried installation tokens.
    for seen in h.fake.seen("GET", "/repos/") {
        let bearer = seen.authorization.unwrap();
        if seen.path.ends_with("/installation") {
            assert!(bearer.starts_with("Bearer ey"), "{}", seen.path);
        } else {
            assert!(bearer.starts_with("Bearer ghs_"), "{}", seen.path);
        }
    }
}

#[tokio::test]
async fn installation_tokens_are_scoped_to_the_repository_and_the_call() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let minted = h.fake.with(|s| s.minted.clone());
    assert!(!minted.is_empty());
    for token in &minted {
        assert_eq!(token.body["repositories"], serde_json::json!([NAME]));
        let permissions = token.body["permissions"].as_object().unwrap();
        assert!(
            !permissions.is_empty() && permissions.len() <= 2,
            "{permissions:?}"
        );
        assert!(!permissions.contains_key("administration"));
    }
    // The metadata read and the fetch asked for what each needed, nothing more.
    let scopes: Vec<String> = minted
        .iter()
        .map(|m| m.body["permissions"].to_string())
        .collect();
    assert!(
        scopes.contains(&r#"{"metadata":"read"}"#.to_owned()),
        "{scopes:?}"
    );
    assert!(
        scopes.contains(&r#"{"contents":"read"}"#.to_owned()),
        "{scopes:?}"
    );
    // A second fetch reuses the cached token: nothing new is minted.
    let before = minted.len();
    Scm::repository(&*scm, &repo.connection_id).await.unwrap();
    assert_eq!(h.fake.with(|s| s.minted.len()), before);
}

#[tokio::test]
async fn a_token_near_its_expiry_is_replaced() {
    let h = Harness::new().await;
    // Tokens that expire in four minutes: inside the five-minute margin, so never reused.
    h.fake.with(|s| s.token_lifetime = 240);
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let before = h.fake.with(|s| s.minted.len());
    Scm::repository(&*scm, &repo.connection_id).await.unwrap();
    assert_eq!(h.fake.with(|s| s.minted.len()), before + 1);
}

#[tokio::test]
async fn a_personal_token_is_used_as_it_is() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::Token);
    h.register(&scm).await;
    assert!(h.fake.with(|s| s.minted.is_empty() && s.jwts.is_empty()));
    for seen in h.fake.seen("GET", "/repos/") {
        assert_eq!(
            seen.authorization.unwrap(),
            format!("Bearer {PERSONAL_TOKEN}")
        );
    }
}

#[tokio::test]
async fn an_app_not_installed_on_the_repository_is_a_typed_error() {
    let h = Harness::new().await;
    h.fake.with(|s| s.installation = None);
    let scm = h.scm(Auth::App);
    let error = scm
        .register(&h.team_id, "octo-org", NAME)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "GITHUB_INSTALLATION_LOST");
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn an_installation_that_lost_access_is_a_typed_error_and_forgets_its_tokens() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    // A read that mints (and caches) a pull-request token.
    let error = scm.merge_state(&repo_ref, 1).await.unwrap_err();
    assert_eq!(error.code(), "GITHUB_NOT_FOUND", "{error}");
    // The repository is removed from the installation: tokens already minted stop working and
    // no new one is granted.
    h.fake.with(|s| {
        s.revoked = true;
        s.mint_status = Some(422);
    });
    let error = scm.merge_state(&repo_ref, 1).await.unwrap_err();
    assert_eq!(error.code(), "GITHUB_INSTALLATION_LOST", "{error}");
    assert!(!error.is_retryable());
    // The cached token was forgotten: the next call asks for a new one and is refused.
    let mints = h.fake.seen("POST", "/access_tokens").len();
    let error = scm.merge_state(&repo_ref, 1).await.unwrap_err();
    assert_eq!(error.code(), "GITHUB_INSTALLATION_LOST", "{error}");
    assert_eq!(h.fake.seen("POST", "/access_tokens").len(), mints + 1);
}

#[tokio::test]
async fn an_expired_or_foreign_key_is_refused() {
    let h = Harness::new().await;
    // A key that is not the App's: the fake cannot verify the JWT's signature.
    let other = {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.pem");
        let status = std::process::Command::new("openssl")
            .args(["genrsa", "-traditional", "-out"])
            .arg(&path)
            .arg("2048")
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::read_to_string(path).unwrap()
    };
    let mut config = h.config(Auth::App);
    config.auth = GitHubAuth::App {
        app_id: APP_ID,
        private_key: SecretString::new(other),
    };
    let scm = GitHubScm::new(config, h.store.clone(), h.git.clone()).unwrap();
    let error = scm
        .register(&h.team_id, "octo-org", NAME)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "GITHUB_CREDENTIALS_REFUSED", "{error}");
    // A key that is no key at all is refused when the provider is made.
    let mut config = h.config(Auth::App);
    config.auth = GitHubAuth::App {
        app_id: APP_ID,
        private_key: SecretString::new(
            "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----\n",
        ),
    };
    let error = GitHubScm::new(config, h.store.clone(), h.git.clone()).unwrap_err();
    assert!(matches!(error, GitHubError::Config(_)), "{error}");
    assert_eq!(error.code(), "GITHUB_CONFIG_INVALID");
}

#[tokio::test]
async fn rate_limits_are_waited_out_within_the_allowance() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::Token);
    let repo = h.register(&scm).await;
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    // A secondary limit asking for one second, then the answer.
    h.fake.queue(
        "/repos/octo-org/hello-world/commits/",
        ResponseTemplate::new(429).insert_header("retry-after", "1"),
    );
    let started = Instant::now();
    let runs = scm.check_runs(&repo_ref, "abc1234").await.unwrap();
    assert!(runs.is_empty());
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(h.fake.seen("GET", "/commits/abc1234/check-runs").len(), 2);
}

#[tokio::test]
async fn a_rate_limit_past_the_allowance_is_a_typed_error_at_once() {
    let h = Harness::new().await;
    let mut config: GitHubConfig = h.config(Auth::Token);
    config.max_rate_limit_wait = Duration::from_secs(5);
    let scm = GitHubScm::new(config, h.store.clone(), h.git.clone()).unwrap();
    let repo = h.register(&scm).await;
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    let reset = now_secs() + 3_000;
    h.fake.queue(
        "/repos/octo-org/hello-world/commits/",
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", reset.to_string().as_str())
            .set_body_json(serde_json::json!({ "message": "API rate limit exceeded" })),
    );
    let started = Instant::now();
    let error = scm.check_runs(&repo_ref, "abc1234").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "it waited");
    match &error {
        GitHubError::RateLimited { wait, .. } => {
            assert!(*wait > Duration::from_secs(2_900), "{wait:?}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(error.code(), "GITHUB_RATE_LIMITED");
    assert!(error.is_retryable());
    // A 403 that is not a rate limit is a refusal, not a wait.
    h.fake.queue(
        "/repos/octo-org/hello-world/commits/",
        ResponseTemplate::new(403).set_body_json(
            serde_json::json!({ "message": "Resource not accessible by integration" }),
        ),
    );
    let error = scm.check_runs(&repo_ref, "abc1234").await.unwrap_err();
    assert_eq!(error.code(), "GITHUB_FORBIDDEN");
}

#[tokio::test]
async fn a_rate_limit_the_steps_deadline_cannot_outlast_is_refused_at_once() {
    let h = Harness::new().await;
    // The allowance (60 s by default) would cover a 30 s wait; the step has 20 s left.
    let scm = h.scm(Auth::Token);
    let repo = h.register(&scm).await;
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    h.fake.queue(
        "/repos/octo-org/hello-world/commits/",
        ResponseTemplate::new(429).insert_header("retry-after", "30"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let started = Instant::now();
    let error = with_step_deadline(deadline, scm.check_runs(&repo_ref, "abc1234"))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "it waited");
    match &error {
        GitHubError::RateLimited { wait, may_wait, .. } => {
            assert_eq!(*wait, Duration::from_secs(30));
            // What is left of the step, less the margin the call itself needs.
            assert!(*may_wait <= Duration::from_secs(10), "{may_wait:?}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(error.code(), "GITHUB_RATE_LIMITED");
    assert!(error.to_string().contains("may wait"), "{error}");
    // A step with time to spare waits a short limit out.
    h.fake.queue(
        "/repos/octo-org/hello-world/commits/",
        ResponseTemplate::new(429).insert_header("retry-after", "1"),
    );
    let far = Instant::now() + Duration::from_secs(600);
    with_step_deadline(far, scm.check_runs(&repo_ref, "abc1234"))
        .await
        .unwrap();
}
