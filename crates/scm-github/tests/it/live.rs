//! A smoke test against real GitHub, run only when `AUTO_SWE_GITHUB_LIVE` names a repository
//! (`owner/name`) and a token is given (`AUTO_SWE_GITHUB_TOKEN`, or an App:
//! `AUTO_SWE_GITHUB_APP_ID` and `AUTO_SWE_GITHUB_APP_KEY_FILE`). It reads the repository, mirrors
//! it and reads CI of its default branch; it writes nothing.

use std::sync::Arc;

use auto_swe_scm_github::{GitHubAuth, GitHubConfig, GitHubHost, GitHubScm};
use auto_swe_store::{Keyring, SecretString, Store, StoreConfig};
use auto_swe_worker::local_git::LocalGit;

#[tokio::test]
async fn live_github_smoke() {
    let Ok(target) = std::env::var("AUTO_SWE_GITHUB_LIVE") else {
        eprintln!("skipped: AUTO_SWE_GITHUB_LIVE is not set (owner/name of a repository to read)");
        return;
    };
    let Some((owner, name)) = target.split_once('/') else {
        panic!("AUTO_SWE_GITHUB_LIVE must be owner/name, not {target}");
    };
    let auth = match (
        std::env::var("AUTO_SWE_GITHUB_TOKEN"),
        std::env::var("AUTO_SWE_GITHUB_APP_ID"),
        std::env::var("AUTO_SWE_GITHUB_APP_KEY_FILE"),
    ) {
        (Ok(token), _, _) => GitHubAuth::Token(SecretString::new(token)),
        (_, Ok(id), Ok(file)) => GitHubAuth::App {
            app_id: id.parse().unwrap(),
            private_key: SecretString::new(std::fs::read_to_string(file).unwrap()),
        },
        _ => panic!("AUTO_SWE_GITHUB_LIVE is set but no credential is"),
    };
    let host = match std::env::var("AUTO_SWE_GITHUB_HOST") {
        Ok(host) => GitHubHost::enterprise(&host).unwrap(),
        Err(_) => GitHubHost::github_com(),
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let store = Store::open(StoreConfig::new(&url, Keyring::single(1, [0x44; 32])))
        .await
        .unwrap();
    let org = store.create_org("live", "Live").await.unwrap();
    let team = store.create_team(&org.id, "live").await.unwrap();
    let config = GitHubConfig::new(host, auth, dir.path().join("mirrors"));
    let scm = Arc::new(GitHubScm::new(config, store, LocalGit::new()).unwrap());
    let repo = scm.register(&team.id, owner, name).await.unwrap();
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    let head = LocalGit::new()
        .rev_parse(&repo.path, &format!("refs/heads/{}", repo.default_branch))
        .await
        .unwrap();
    let runs = scm.check_runs(&repo_ref, &head).await.unwrap();
    eprintln!("{target}@{head}: {} check runs", runs.len());
}
