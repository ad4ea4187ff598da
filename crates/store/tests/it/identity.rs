//! Organizations, teams, users, memberships, tokens, service principals and connections.

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    tenancy_and_memberships,
    tokens_store_only_hashes,
    connections_keep_git_repos_unique,
    users_page_by_keyset_and_search_literally
);

async fn users_page_by_keyset_and_search_literally(db: &TestDb) {
    let mut created = Vec::new();
    for (n, (email, name)) in [
        ("ada@example.test", "Ada Lovelace"),
        ("grace@example.test", "Grace Hopper"),
        ("alan@example.test", "Alan Turing"),
        ("per_cent@example.test", "100% Sure"),
        ("edsger@example.test", "Edsger Dijkstra"),
    ]
    .into_iter()
    .enumerate()
    {
        // Two users share a creation time: the id breaks the tie.
        if n != 2 {
            db.clock.advance(Duration::from_secs(1));
        }
        created.push(db.store.create_user(email, name).await.unwrap());
    }
    created.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));

    let mut query = UserListQuery::first(2);
    let mut seen = Vec::new();
    let mut added_mid_paging = false;
    loop {
        let page = db.store.list_users(&query).await.unwrap();
        assert!(page.users.len() <= 2);
        seen.extend(page.users.iter().map(|u| u.id.clone()));
        if !added_mid_paging {
            // A user created while paging shifts nothing on later pages.
            added_mid_paging = true;
            db.clock.advance(Duration::from_secs(60));
            db.store
                .create_user("late@example.test", "Late Comer")
                .await
                .unwrap();
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(
        seen,
        created.iter().map(|u| u.id.clone()).collect::<Vec<_>>()
    );

    let emails = |page: &UserPage| {
        let mut emails: Vec<String> = page.users.iter().map(|u| u.email.clone()).collect();
        emails.sort();
        emails
    };
    // Name or email, any case.
    let page = db
        .store
        .list_users(&UserListQuery::search("HOPPER", 50))
        .await
        .unwrap();
    assert_eq!(emails(&page), ["grace@example.test"]);
    let page = db
        .store
        .list_users(&UserListQuery::search("La", 50))
        .await
        .unwrap();
    assert_eq!(
        emails(&page),
        ["ada@example.test", "alan@example.test", "late@example.test"]
    );
    // Wildcards are text: `_` and `%` match only themselves.
    let page = db
        .store
        .list_users(&UserListQuery::search("r_c", 50))
        .await
        .unwrap();
    assert_eq!(emails(&page), ["per_cent@example.test"]);
    let page = db
        .store
        .list_users(&UserListQuery::search("a_a", 50))
        .await
        .unwrap();
    assert!(page.users.is_empty(), "{page:?}");
    let page = db
        .store
        .list_users(&UserListQuery::search("100%", 50))
        .await
        .unwrap();
    assert_eq!(emails(&page), ["per_cent@example.test"]);
    let page = db
        .store
        .list_users(&UserListQuery::search("%", 50))
        .await
        .unwrap();
    assert_eq!(emails(&page), ["per_cent@example.test"]);

    // Bad pages and edited cursors are typed errors.
    for limit in [0, 501] {
        let error = db
            .store
            .list_users(&UserListQuery::first(limit))
            .await
            .unwrap_err();
        assert_eq!(error.code(), "STORE_INVALID_INPUT", "{limit}");
    }
    let first = db.store.list_users(&UserListQuery::first(1)).await.unwrap();
    let mut edited = first.next.clone().unwrap();
    edited.insert(0, 'x');
    let mut query = UserListQuery::first(1);
    query.cursor = Some(edited);
    assert_eq!(
        db.store.list_users(&query).await.unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    let long = UserListQuery::search("x".repeat(MAX_SHORT_TEXT_BYTES + 1), 10);
    assert_eq!(
        db.store.list_users(&long).await.unwrap_err().code(),
        "STORE_VALUE_TOO_LARGE"
    );
}

async fn tenancy_and_memberships(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    assert_eq!(db.store.get_org(&org.id).await.unwrap(), org);
    assert_eq!(
        db.store.find_org_by_slug("acme").await.unwrap(),
        Some(org.clone())
    );
    assert_eq!(db.store.find_org_by_slug("acme2").await.unwrap(), None);
    assert_eq!(
        db.store
            .create_org("acme", "Again")
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );
    db.store
        .set_org_budget(&org.id, Some(10_000))
        .await
        .unwrap();
    assert_eq!(
        db.store
            .get_org(&org.id)
            .await
            .unwrap()
            .monthly_budget_cents,
        Some(10_000)
    );
    assert_eq!(
        db.store
            .set_org_budget(&org.id, Some(-1))
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(
        db.store
            .set_org_budget("nope", None)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );

    let team = db.store.create_team(&org.id, "core").await.unwrap();
    assert_eq!(db.store.get_team(&team.id).await.unwrap(), team);
    // A team's egress rules: none at first, replaced whole, bounded in number and length.
    assert!(team.egress_allow.is_empty());
    let rules = vec![
        "mirror.example.test:443".to_owned(),
        "GET,HEAD *.pkg.example.test:443".to_owned(),
    ];
    db.store.set_team_egress(&team.id, &rules).await.unwrap();
    assert_eq!(
        db.store.get_team(&team.id).await.unwrap().egress_allow,
        rules
    );
    let too_many = vec!["a.example.test:443".to_owned(); auto_swe_store::MAX_TEAM_EGRESS_RULES + 1];
    let too_long = vec![format!(
        "{}.test:443",
        "a".repeat(auto_swe_store::MAX_SHORT_TEXT_BYTES)
    )];
    for (refused, code) in [
        (too_many, "STORE_INVALID_INPUT"),
        (too_long, "STORE_VALUE_TOO_LARGE"),
    ] {
        let error = db
            .store
            .set_team_egress(&team.id, &refused)
            .await
            .unwrap_err();
        assert_eq!(error.code(), code, "{error}");
    }
    assert_eq!(
        db.store
            .set_team_egress("nope", &[])
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    assert_eq!(
        db.store.get_team(&team.id).await.unwrap().egress_allow,
        rules,
        "a refused write changed nothing"
    );
    db.store.set_team_egress(&team.id, &[]).await.unwrap();
    let team = db.store.get_team(&team.id).await.unwrap();
    assert!(team.egress_allow.is_empty());
    assert_eq!(
        db.store
            .create_team(&org.id, "core")
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );
    assert_eq!(
        db.store.create_team("nope", "x").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );

    let user = db
        .store
        .create_user("Alice@Example.COM", "Alice")
        .await
        .unwrap();
    assert_eq!(user.email, "alice@example.com");
    assert_eq!(
        db.store
            .find_user_by_email("ALICE@example.com")
            .await
            .unwrap(),
        Some(user.clone())
    );
    assert_eq!(
        db.store
            .create_user("alice@example.com", "Dup")
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );
    assert_eq!(
        db.store
            .create_user("not-an-email", "X")
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );

    assert_eq!(db.store.org_role(&org.id, &user.id).await.unwrap(), None);
    db.store
        .set_org_role(&org.id, &user.id, OrgRole::Member)
        .await
        .unwrap();
    db.store
        .set_org_role(&org.id, &user.id, OrgRole::Admin)
        .await
        .unwrap();
    assert_eq!(
        db.store.org_role(&org.id, &user.id).await.unwrap(),
        Some(OrgRole::Admin)
    );
    db.store
        .set_team_role(&team.id, &user.id, TeamRole::Owner)
        .await
        .unwrap();
    assert_eq!(
        db.store.team_role(&team.id, &user.id).await.unwrap(),
        Some(TeamRole::Owner)
    );
    let ghost = db
        .store
        .set_team_role(&team.id, "ghost", TeamRole::Member)
        .await;
    assert_eq!(ghost.unwrap_err().code(), "STORE_NOT_FOUND");
}

async fn tokens_store_only_hashes(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let user = db
        .store
        .create_user("bob@example.com", "Bob")
        .await
        .unwrap();
    let (token, plaintext) = db
        .store
        .create_token(NewApiToken {
            owner: TokenOwner::User(user.id.clone()),
            name: "laptop".to_owned(),
            expires_at: Some(
                auto_swe_store::Timestamp::now(&db.clock).plus(Duration::from_secs(3_600)),
            ),
        })
        .await
        .unwrap();
    assert!(plaintext.expose().starts_with(TOKEN_PREFIX));
    assert!(plaintext.expose().starts_with(&token.prefix));
    assert!(!format!("{token:?}{plaintext:?}").contains(&plaintext.expose()[10..]));
    let authenticated = db
        .store
        .authenticate_token(&plaintext)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        authenticated.last_used_at,
        Some(auto_swe_store::Timestamp::now(&db.clock))
    );
    let mut token = token;
    token.last_used_at = authenticated.last_used_at;
    assert_eq!(authenticated, token);
    // Within the resolution the stored use is not rewritten; past it, it is.
    let first_use = authenticated.last_used_at;
    db.clock.advance(auto_swe_store::LAST_USE_RESOLUTION / 2);
    let again = db
        .store
        .authenticate_token(&plaintext)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.last_used_at, first_use);
    db.clock.advance(auto_swe_store::LAST_USE_RESOLUTION);
    let later = db
        .store
        .authenticate_token(&plaintext)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        later.last_used_at,
        Some(auto_swe_store::Timestamp::now(&db.clock))
    );
    let listed = db.store.list_tokens(&later.owner).await.unwrap();
    assert_eq!(
        listed[0].last_used_at, later.last_used_at,
        "the new use was stored"
    );
    assert_eq!(
        db.store
            .authenticate_token(&SecretString::new("ats_wrong"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.store
            .authenticate_token(&SecretString::new("x".repeat(10_000)))
            .await
            .unwrap(),
        None
    );

    // Only the hash is stored: no column holds the plaintext.
    let plain = plaintext.expose();
    let leaks = db
        .raw_count(&format!(
            "SELECT COUNT(*) FROM api_tokens WHERE token_hash = '{plain}' OR prefix = '{plain}' \
             OR name = '{plain}' OR id = '{plain}'"
        ))
        .await;
    assert_eq!(leaks, 0);
    let hash = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(plain.as_bytes()))
    };
    let hashed = db
        .raw_count(&format!(
            "SELECT COUNT(*) FROM api_tokens WHERE token_hash = '{hash}'"
        ))
        .await;
    assert_eq!(hashed, 1);

    db.clock.advance(Duration::from_secs(3_601));
    assert_eq!(
        db.store.authenticate_token(&plaintext).await.unwrap(),
        None,
        "expired"
    );

    let principal = db
        .store
        .create_service_principal(&team.id, "ci-bot", vec!["conn-1".to_owned()], vec![])
        .await
        .unwrap();
    assert_eq!(
        db.store.get_service_principal(&principal.id).await.unwrap(),
        principal
    );
    let (bot_token, bot_plain) = db
        .store
        .create_token(NewApiToken {
            owner: TokenOwner::ServicePrincipal(principal.id.clone()),
            name: "ci".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    assert_eq!(
        db.store
            .authenticate_token(&bot_plain)
            .await
            .unwrap()
            .map(|t| t.owner),
        Some(TokenOwner::ServicePrincipal(principal.id.clone()))
    );
    db.store.revoke_token(&bot_token.id).await.unwrap();
    assert_eq!(
        db.store.authenticate_token(&bot_plain).await.unwrap(),
        None,
        "revoked"
    );
    assert_eq!(
        db.store.revoke_token("nope").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
    let orphan = db
        .store
        .create_token(NewApiToken {
            owner: TokenOwner::User("ghost".to_owned()),
            name: "x".to_owned(),
            expires_at: None,
        })
        .await;
    assert_eq!(orphan.unwrap_err().code(), "STORE_NOT_FOUND");
}

async fn connections_keep_git_repos_unique(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let repo = RepoCoordinates {
        host: "GitHub.com".to_owned(),
        owner: "acme".to_owned(),
        name: "api".to_owned(),
        default_branch: "main".to_owned(),
    };
    let git = NewConnection {
        team_id: team.id.clone(),
        kind: ConnectionType::GitRepo,
        name: "api".to_owned(),
        repo: Some(repo.clone()),
        config: json!({"gates": ["cargo test"]}),
    };
    let created = db.store.create_connection(git.clone()).await.unwrap();
    assert_eq!(created.repo.as_ref().unwrap().host, "github.com");
    assert_eq!(db.store.get_connection(&created.id).await.unwrap(), created);
    let again = db
        .store
        .create_connection(NewConnection {
            name: "again".to_owned(),
            ..git.clone()
        })
        .await;
    assert_eq!(again.unwrap_err().code(), "STORE_CONFLICT");
    // A webhook names the repository as its host spells it: found without regard to case,
    // and only on its own host.
    let found = db
        .store
        .find_repo_connection("GitHub.com", &repo.owner.to_uppercase(), &repo.name)
        .await
        .unwrap();
    assert_eq!(found.map(|c| c.id), Some(created.id.clone()));
    for (host, owner, name) in [
        ("ghe.example.com", repo.owner.as_str(), repo.name.as_str()),
        ("github.com", "someone-else", repo.name.as_str()),
        ("github.com", repo.owner.as_str(), "other"),
        ("github.com", "%", "%"),
    ] {
        let missing = db
            .store
            .find_repo_connection(host, owner, name)
            .await
            .unwrap();
        assert!(missing.is_none(), "{host} {owner}/{name}");
    }
    // The partial index only covers git repositories.
    for name in ["tracker-1", "tracker-2"] {
        db.store
            .create_connection(NewConnection {
                team_id: team.id.clone(),
                kind: ConnectionType::IssueTracker,
                name: name.to_owned(),
                repo: None,
                config: json!({}),
            })
            .await
            .unwrap();
    }
    let no_repo = db
        .store
        .create_connection(NewConnection {
            repo: None,
            ..git.clone()
        })
        .await;
    assert_eq!(no_repo.unwrap_err().code(), "STORE_INVALID_INPUT");
    let stray_repo = db
        .store
        .create_connection(NewConnection {
            kind: ConnectionType::Mcp,
            ..git
        })
        .await;
    assert_eq!(stray_repo.unwrap_err().code(), "STORE_INVALID_INPUT");
    assert_eq!(
        "gitlab".parse::<ConnectionType>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
}
