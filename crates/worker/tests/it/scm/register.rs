//! Registering a local repository: once per source, reused by every later run on it; its
//! default branch brought up to the source's only by a fast-forward; a path that now holds a
//! different repository registered anew; two registrations at once ending with one connection;
//! runs on one repository on branches and pull requests of their own.

use std::path::{Path, PathBuf};
use std::process::Command;

use auto_swe_store::{NewRun, Store};
use auto_swe_worker::demo::write_demo_repository;
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{LocalScm, Registered, run_branch};
use serde_json::json;

use crate::support::{Kind, TestStore};

/// Runs `git ARGS` in `dir` as a person would, failing the test on an error.
fn git(dir: &Path, args: &[&str]) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "the test changes repositories as a person would, with git"
    )]
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Commits `file` with `text` on the checked-out branch of the working repository `dir`.
fn commit(dir: &Path, file: &str, text: &str) -> String {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", file]);
    git(dir, &["rev-parse", "HEAD"])
}

/// What a merged pull request does to a bare copy: a commit on its `main` the source lacks.
fn merge_into_copy(copy: &Path, scratch: &Path) -> String {
    let work = scratch.join("merge");
    git(
        scratch,
        &[
            "clone",
            "-q",
            copy.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    let tip = commit(&work, "MERGED.md", "merged\n");
    git(&work, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    tip
}

struct Fixture {
    _dir: tempfile::TempDir,
    scratch: PathBuf,
    source: PathBuf,
    root: PathBuf,
    scm: LocalScm,
}

async fn fixture(store: &Store) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().to_path_buf();
    let source = scratch.join("slugify");
    write_demo_repository(&source, &LocalGit::new())
        .await
        .unwrap();
    let root = scratch.join("repos");
    let scm = LocalScm::new(store.clone(), LocalGit::new(), root.clone());
    Fixture {
        _dir: dir,
        scratch,
        source,
        root,
        scm,
    }
}

impl Fixture {
    fn source(&self) -> &str {
        self.source.to_str().unwrap()
    }

    fn copies(&self) -> usize {
        std::fs::read_dir(&self.root).unwrap().count()
    }
}

async fn main_of(path: &Path) -> String {
    LocalGit::new()
        .rev_parse(path, "refs/heads/main")
        .await
        .unwrap()
}

#[tokio::test]
async fn a_registered_source_is_reused_and_its_new_commits_fast_forwarded() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let f = fixture(&db.store).await;
    let first = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(first.outcome, Registered::Cloned);

    // Unchanged: the same connection and copy, nothing moved.
    let again = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(again.outcome, Registered::Current);
    assert_eq!(again.repository, first.repository);
    // The same path spelled differently is the same source.
    let spelled = format!("{}/../slugify/", f.source());
    let respelled = f.scm.register_source(&spelled, "slugify").await.unwrap();
    assert_eq!(respelled.repository, first.repository);

    // The source moved on: its main is fast-forwarded into the copy.
    let before = main_of(&first.repository.path).await;
    let tip = commit(&f.source, "NEWS.md", "news\n");
    let forwarded = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(
        forwarded.outcome,
        Registered::FastForwarded {
            from: before,
            to: tip.clone()
        }
    );
    assert_eq!(forwarded.repository, first.repository);
    assert_eq!(main_of(&first.repository.path).await, tip);
    assert_eq!(f.copies(), 1);
    assert_eq!(db.store.list_connections(None).await.unwrap().len(), 1);
    // No staging ref is left behind.
    assert_eq!(
        git(&first.repository.path, &["for-each-ref", "refs/auto-swe/"]),
        ""
    );
}

#[tokio::test]
async fn a_merged_pull_request_is_never_rewritten_by_the_source() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let f = fixture(&db.store).await;
    let repo = f.scm.register(f.source(), "slugify").await.unwrap();
    let merged = merge_into_copy(&repo.path, &f.scratch);

    // The source is behind the copy: nothing to take.
    let behind = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(behind.outcome, Registered::Current);
    assert_eq!(main_of(&repo.path).await, merged);

    // Both moved on: the copy's is kept, and registering says so.
    let theirs = commit(&f.source, "NEWS.md", "news\n");
    let diverged = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(
        diverged.outcome,
        Registered::Diverged {
            kept: merged.clone(),
            source: theirs
        }
    );
    assert_eq!(diverged.repository, repo);
    assert_eq!(main_of(&repo.path).await, merged);
}

#[tokio::test]
async fn a_path_holding_a_different_repository_is_registered_anew() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let f = fixture(&db.store).await;
    let old = f.scm.register(f.source(), "slugify").await.unwrap();
    let old_main = main_of(&old.path).await;

    // The same path, a new repository: no history in common with the copy.
    std::fs::remove_dir_all(&f.source).unwrap();
    std::fs::create_dir_all(&f.source).unwrap();
    std::fs::write(f.source.join("other.txt"), "other\n").unwrap();
    LocalGit::new()
        .init_with_commit(&f.source, "main", "another project")
        .await
        .unwrap();
    let new = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(
        new.outcome,
        Registered::Replaced {
            previous: "slugify".to_owned()
        }
    );
    assert_eq!(new.repository.name, "slugify-2");
    assert_ne!(new.repository.connection_id, old.connection_id);
    assert_ne!(new.repository.path, old.path);
    // The earlier registration and its copy are left as they were, for the runs made on it.
    assert_eq!(main_of(&old.path).await, old_main);
    assert_eq!(f.scm.repository(&old.connection_id).await.unwrap(), old);

    // From now on the path is the new repository's.
    let again = f.scm.register_source(f.source(), "slugify").await.unwrap();
    assert_eq!(again.outcome, Registered::Current);
    assert_eq!(again.repository, new.repository);

    // Another source of the same name gets a name of its own.
    let elsewhere = f.scratch.join("elsewhere").join("slugify");
    write_demo_repository(&elsewhere, &LocalGit::new())
        .await
        .unwrap();
    let third = f
        .scm
        .register_source(elsewhere.to_str().unwrap(), "slugify")
        .await
        .unwrap();
    assert_eq!(third.outcome, Registered::Cloned);
    assert_eq!(third.repository.name, "slugify-3");
}

/// Two processes registering one source at once end with one connection and one copy.
async fn registering_at_once(kind: Kind) {
    let Some(db) = TestStore::new(kind).await else {
        return;
    };
    let f = fixture(&db.store).await;
    let other = LocalScm::new(db.reopen().await, LocalGit::new(), f.root.clone());
    for _ in 0..3 {
        let (one, two) = tokio::join!(
            f.scm.register_source(f.source(), "slugify"),
            other.register_source(f.source(), "slugify"),
        );
        let (one, two) = (one.unwrap(), two.unwrap());
        assert_eq!(one.repository, two.repository);
        assert_eq!(db.store.list_connections(None).await.unwrap().len(), 1);
        assert_eq!(f.copies(), 1);
    }
}

#[tokio::test]
async fn two_registrations_at_once_end_with_one_connection_sqlite() {
    registering_at_once(Kind::Sqlite).await;
}

#[tokio::test]
async fn two_registrations_at_once_end_with_one_connection_postgres() {
    registering_at_once(Kind::Postgres).await;
}

/// Runs started at the same moment on one repository work on branches of their own and open
/// pull requests of their own.
#[tokio::test]
async fn runs_on_one_repository_get_their_own_branches_and_pull_requests() {
    // Run ids are UUIDv7: two made in the same millisecond share their first twelve digits.
    let same_moment = [
        "0190f3a1-b2c3-7d4e-8f60-000000000001",
        "0190f3a1-b2c3-7d4e-8f60-000000000002",
    ];
    assert_ne!(run_branch(same_moment[0]), run_branch(same_moment[1]));
    assert_eq!(
        run_branch(same_moment[0]),
        "auto-swe/0190f3a1b2c37d4e8f60000000000001"
    );

    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let f = fixture(&db.store).await;
    let repo = f.scm.register(f.source(), "slugify").await.unwrap();
    let other = LocalScm::new(db.reopen().await, LocalGit::new(), f.root.clone());
    let mut runs = Vec::new();
    for _ in 0..2 {
        let run = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
        runs.push(run.id);
    }
    let branches: Vec<String> = runs.iter().map(|r| run_branch(r)).collect();
    for branch in &branches {
        git(&repo.path, &["branch", branch, "main"]);
    }
    let (one, two) = tokio::join!(
        f.scm
            .create_or_update_pull_request(&repo, &runs[0], &branches[0], "one", "first run"),
        other.create_or_update_pull_request(&repo, &runs[1], &branches[1], "two", "second run"),
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    assert_ne!(one.number, two.number);
    let mut numbers = vec![one.number, two.number];
    numbers.sort_unstable();
    assert_eq!(numbers, vec![1, 2]);
    for (run, opened, title) in [(&runs[0], &one, "one"), (&runs[1], &two, "two")] {
        let pr = f
            .scm
            .pull_request_of_run(&repo, run)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pr.number, opened.number);
        let text = f.scm.pull_request_text(&repo, pr.number).await.unwrap();
        assert_eq!(text.title, title);
        assert_eq!(text.head_branch, run_branch(run));
    }
}
