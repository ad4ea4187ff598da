//! The demo: a small real repository with a bug its ticket describes, and recorded model
//! exchanges that take `ticket-to-merge` through review, gates, local CI and a CI fix. Only the
//! model's answers are recorded: the workspace, the tests, git, the gates and CI run for real.

use std::path::Path;

use crate::local_git::{LocalGit, LocalGitError};

/// The demo repository's files (path, text).
pub const DEMO_FILES: [(&str, &str); 6] = [
    ("slugify.sh", include_str!("../demo/repo/slugify.sh")),
    ("tests/run.sh", include_str!("../demo/repo/tests/run.sh")),
    (
        "scripts/check-changelog.sh",
        include_str!("../demo/repo/scripts/check-changelog.sh"),
    ),
    ("CHANGELOG.md", include_str!("../demo/repo/CHANGELOG.md")),
    ("README.md", include_str!("../demo/repo/README.md")),
    ("auto-swe.toml", include_str!("../demo/repo/auto-swe.toml")),
];

/// The ticket: first line the title, the rest the body.
pub const DEMO_TICKET: &str = include_str!("../demo/ticket.md");

/// The recorded exchanges (a matched cassette: see `auto_swe_models::ReplayClient`).
pub const DEMO_CASSETTE: &str = include_str!("../demo/cassette.json");

/// The ticket as a run's `ticket` input.
#[must_use]
pub fn demo_ticket() -> serde_json::Value {
    let mut lines = DEMO_TICKET.trim().splitn(2, '\n');
    let title = lines.next().unwrap_or_default().trim();
    let body = lines.next().unwrap_or_default().trim();
    serde_json::json!({ "title": title, "body": body })
}

/// Writes the demo repository into `dir` (which must be empty or absent) with one commit on
/// `main`.
pub async fn write_demo_repository(dir: &Path, git: &LocalGit) -> Result<String, LocalGitError> {
    for (path, text) in DEMO_FILES {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::write(&file, text).await?;
    }
    git.init_with_commit(dir, "main", "slugify 1.0").await
}
