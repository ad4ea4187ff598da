//! Migration `0018_repository_owners` over connections written before a repository was held by
//! one connection: the oldest connection to name a repository holds it; a later twin (the same
//! path, or the same host/owner/name in another case) is left holding nothing, for the host to
//! report and refuse.

use crate::support::{BlankDb, Kind, keyring};

const OLDER_ROWS: &str = "
INSERT INTO organizations (id, slug, name, created_at) VALUES ('o', 'acme', 'Acme', 1);
INSERT INTO teams (id, org_id, name, created_at) VALUES ('a', 'o', 'a', 1), ('b', 'o', 'b', 1);
INSERT INTO connections (id, team_id, type, name, repo_host, repo_owner, repo_name,
    default_branch, config, created_at) VALUES
    ('c-twin', 'b', 'git_repo', 'stolen', 'local', 'local', 'stolen', 'main',
        '{\"bareRepository\": \"/srv/repos/a.git\"}', 20),
    ('c-old', 'a', 'git_repo', 'a', 'local', 'local', 'a', 'main',
        '{\"bareRepository\": \"/srv/repos/a.git\"}', 10),
    ('c-hosted', 'a', 'git_repo', 'widget', 'github.com', 'Acme', 'Widget', 'main', '{}', 30),
    ('c-cased', 'b', 'git_repo', 'widget2', 'github.com', 'acme', 'WIDGET', 'main', '{}', 40),
    ('c-http', 'b', 'http_api', 'api', NULL, NULL, NULL, NULL,
        '{\"bareRepository\": \"/srv/repos/a.git\"}', 50);
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_twins_of_a_repository_hold_nothing_on_sqlite() {
    if let Some(blank) = BlankDb::new(Kind::Sqlite).await {
        blank.written_before(18, OLDER_ROWS).await;
        check(blank).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_twins_of_a_repository_hold_nothing_on_postgres() {
    if let Some(blank) = BlankDb::new(Kind::Postgres).await {
        blank.written_before(18, OLDER_ROWS).await;
        check(blank).await;
    }
}

async fn check(blank: BlankDb) {
    let db = blank.open(keyring()).await;
    let identity = |id: &'static str| {
        let store = db.store.clone();
        async move { store.get_connection(id).await.unwrap().repository_identity }
    };
    assert_eq!(
        identity("c-old").await.as_deref(),
        Some("local:/srv/repos/a.git")
    );
    assert_eq!(identity("c-twin").await, None);
    assert_eq!(
        identity("c-hosted").await.as_deref(),
        Some("git:github.com/acme/widget")
    );
    assert_eq!(identity("c-cased").await, None);
    assert_eq!(identity("c-http").await, None);
    // The holder is the oldest.
    let holder = db
        .store
        .repository_holder("local:/srv/repos/a.git")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(holder.id, "c-old");
}
