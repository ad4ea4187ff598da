//! The local SCM's pull-request comments: kept beside the pull request, read back in order,
//! nothing else in their directory mistaken for one.

use auto_swe_worker::demo::write_demo_repository;
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{LocalScm, Scm};

use crate::support::{Kind, TestStore};

mod git_failure;
mod register;

#[tokio::test]
async fn comments_on_a_local_pull_request_are_kept_in_order() {
    let db = TestStore::new(Kind::Sqlite).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let git = LocalGit::new();
    let source = dir.path().join("source");
    write_demo_repository(&source, &git).await.unwrap();
    let scm = LocalScm::new(db.store.clone(), git, dir.path().join("repos"));
    let repo = scm
        .register(source.to_str().unwrap(), "slugify")
        .await
        .unwrap();
    assert!(
        scm.pull_request_comments(&repo, 1)
            .await
            .unwrap()
            .is_empty()
    );

    let first = Scm::comment_on_pull_request(&scm, &repo, 1, "### Review findings\n")
        .await
        .unwrap();
    let second = scm
        .comment_on_pull_request(&repo, 1, "second")
        .await
        .unwrap();
    assert_eq!(first, "local://slugify/pull/1#comment-1");
    assert_eq!(second, "local://slugify/pull/1#comment-2");
    // A file the provider did not write is not a comment.
    std::fs::write(
        repo.path.join("auto-swe-pulls/1.comments/notes.md"),
        "not a comment",
    )
    .unwrap();
    assert_eq!(
        scm.pull_request_comments(&repo, 1).await.unwrap(),
        vec!["### Review findings\n".to_owned(), "second".to_owned()]
    );
    // Another pull request's comments are its own.
    assert!(
        scm.pull_request_comments(&repo, 2)
            .await
            .unwrap()
            .is_empty()
    );
}
