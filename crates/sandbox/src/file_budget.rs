//! The per-workspace file-count bound (`ResourceLimits::files`, `WORKSPACE_FILES_LIMIT`).
//!
//! No kernel control bounds how many files a process makes in a directory of the host's own
//! filesystem, and every one of them takes an inode the host shares with everything else. So the
//! workspace's writable trees are counted from the host: while an exec runs (a first look after
//! [`FIRST_LOOK`], then at ten times the last count's cost, between [`FIRST_LOOK`] and
//! [`LONGEST_GAP`]) and once more when it ends. An exec that takes the workspace past its bound is
//! ended and fails `WORKSPACE_FILE_LIMIT`; from then on the workspace starts no exec (a
//! workspace that may only shrink could still grow by what one command makes between two looks,
//! again and again), so it holds at most its bound plus what one exec makes before the next
//! look. The walk never follows a symbolic link, stops one entry past the bound, and counts a
//! directory it cannot read (a mode that shuts the host out, a path past `PATH_MAX`, a link
//! swapped in mid-walk) as over the bound: a workspace can make itself unusable that way, never
//! hide files from the count.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use crate::backend::{Exit, SpawnedProcess};
use crate::error::{Result, SandboxError};

/// When a running exec's workspace is first counted.
pub(crate) const FIRST_LOOK: Duration = Duration::from_millis(250);
/// The longest gap between two counts while an exec runs.
pub(crate) const LONGEST_GAP: Duration = Duration::from_secs(5);

/// What one count found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Count {
    /// This many entries (files, directories, links, anything), at most the bound plus one.
    Entries(u64),
    /// A directory could not be read; the workspace counts as over its bound.
    Unreadable(String),
}

/// Counts the entries under `roots` (the roots themselves not included), stopping once the
/// count passes `bound`. Blocking: run it off the async runtime.
#[must_use]
pub(crate) fn count_entries(roots: &[PathBuf], bound: u64) -> Count {
    let mut found: u64 = 0;
    let mut pending: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // A root that is not there (yet) holds nothing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && roots.contains(&dir) => continue,
            Err(e) => return Count::Unreadable(format!("{}: {e}", dir.display())),
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => return Count::Unreadable(format!("{}: {e}", dir.display())),
            };
            found += 1;
            if found > bound {
                return Count::Entries(found);
            }
            // The entry's own type, never its target's: a link to `/` is one entry.
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(entry.path()),
                Ok(_) => {}
                Err(e) => return Count::Unreadable(format!("{}: {e}", entry.path().display())),
            }
        }
    }
    Count::Entries(found)
}

/// One workspace's bound and what its last count found.
#[derive(Debug)]
pub(crate) struct FileBudget {
    limit: u64,
    roots: Vec<PathBuf>,
    /// Set once a count finds the workspace over its bound; never cleared.
    over: Mutex<Option<Count>>,
}

impl FileBudget {
    /// A bound of `limit` entries over the writable trees `roots`.
    #[must_use]
    pub(crate) fn new(limit: u64, roots: Vec<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            limit,
            roots,
            over: Mutex::new(None),
        })
    }

    /// Refuses a new exec once the workspace has been found over its bound.
    pub(crate) fn check_start(&self) -> Result<()> {
        match self.over.lock().ok().and_then(|over| over.clone()) {
            Some(found) => Err(self.error(&found)),
            None => Ok(()),
        }
    }

    /// Counts now (off the runtime); `Some(error)` when over the bound, remembered for every
    /// later [`Self::check_start`].
    pub(crate) async fn look(self: &Arc<Self>) -> Option<SandboxError> {
        let me = Arc::clone(self);
        let found = tokio::task::spawn_blocking(move || count_entries(&me.roots, me.limit))
            .await
            .unwrap_or_else(|e| Count::Unreadable(format!("the count did not finish: {e}")));
        let over = match &found {
            Count::Entries(n) => *n > self.limit,
            Count::Unreadable(_) => true,
        };
        if !over {
            return None;
        }
        if let Ok(mut slot) = self.over.lock() {
            slot.get_or_insert_with(|| found.clone());
        }
        tracing::warn!(
            limit = self.limit,
            ?found,
            "workspace over its file-count bound"
        );
        Some(self.error(&found))
    }

    fn error(&self, found: &Count) -> SandboxError {
        SandboxError::FileLimit {
            limit: self.limit,
            found: match found {
                Count::Entries(n) => format!("more than {}", n - 1),
                Count::Unreadable(why) => format!("an uncountable tree ({why})"),
            },
        }
    }
}

/// Ends an exec: the backend's own stop for it.
pub(crate) type Halt = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// Watches `spawned` under `budget`: counts while it runs and when it ends. An exec that takes
/// the workspace over its bound is halted and ends in [`SandboxError::FileLimit`] (as does one
/// that ended over it); any other end passes through unchanged.
#[must_use]
pub(crate) fn watch(
    mut spawned: SpawnedProcess,
    budget: Arc<FileBudget>,
    halt: Halt,
) -> SpawnedProcess {
    let (exit_tx, exit_rx) = oneshot::channel();
    let mut inner = std::mem::replace(&mut spawned.exit, exit_rx);
    tokio::spawn(async move {
        let mut gap = FIRST_LOOK;
        let ended = loop {
            tokio::select! {
                ended = &mut inner => break ended,
                () = tokio::time::sleep(gap) => {}
            }
            let started = Instant::now();
            if let Some(error) = budget.look().await {
                halt().await;
                let _ = (&mut inner).await;
                let _ = exit_tx.send(Err(error));
                return;
            }
            gap = (started.elapsed() * 10).clamp(FIRST_LOOK, LONGEST_GAP);
        };
        let exit: Result<Exit> = match ended {
            Ok(exit) => exit,
            Err(_) => Err(SandboxError::io(
                "waiting for the exec",
                std::io::Error::other("its supervisor ended without a verdict"),
            )),
        };
        let exit = match budget.look().await {
            Some(error) => Err(error),
            None => exit,
        };
        let _ = exit_tx.send(exit);
    });
    spawned
}

/// The writable trees of a workspace whose data directory is `data` on `local`.
#[must_use]
pub(crate) fn local_roots(data: &Path) -> Vec<PathBuf> {
    vec![data.join("workspace"), data.join("tmp")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_entry_once_and_stops_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        for i in 0..5 {
            std::fs::write(root.join(format!("a/b/f{i}")), b"x").unwrap();
        }
        // a, a/b, five files.
        assert_eq!(
            count_entries(std::slice::from_ref(&root), 100),
            Count::Entries(7)
        );
        assert_eq!(
            count_entries(std::slice::from_ref(&root), 3),
            Count::Entries(4)
        );
        assert_eq!(
            count_entries(std::slice::from_ref(&root), 7),
            Count::Entries(7)
        );
    }

    #[test]
    fn a_link_is_one_entry_whatever_it_points_at() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink("/", root.join("everything")).unwrap();
        std::os::unix::fs::symlink("/usr", root.join("usr")).unwrap();
        assert_eq!(count_entries(&[root], 1000), Count::Entries(2));
    }

    #[test]
    fn a_missing_root_holds_nothing_and_a_missing_subdirectory_is_uncountable() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            count_entries(&[dir.path().join("absent")], 10),
            Count::Entries(0)
        );
        // A regular file given as a root cannot be listed: uncountable, so over.
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(count_entries(&[file], 10), Count::Unreadable(_)));
    }

    #[test]
    fn deep_trees_do_not_recurse_on_the_stack() {
        let dir = tempfile::tempdir().unwrap();
        let mut path = dir.path().to_path_buf();
        for _ in 0..300 {
            path.push("d");
        }
        std::fs::create_dir_all(&path).unwrap();
        assert_eq!(
            count_entries(&[dir.path().to_path_buf()], 10_000),
            Count::Entries(300)
        );
    }

    #[tokio::test]
    async fn once_over_the_bound_no_exec_starts_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let budget = FileBudget::new(3, vec![root.clone()]);
        for i in 0..3 {
            std::fs::write(root.join(format!("f{i}")), b"").unwrap();
        }
        assert!(budget.look().await.is_none(), "at the bound is not over it");
        assert!(budget.check_start().is_ok());
        std::fs::write(root.join("f3"), b"").unwrap();
        let error = budget.look().await.unwrap();
        assert_eq!(error.code(), "WORKSPACE_FILE_LIMIT");
        // Removing files does not reopen it: the refusal stands.
        std::fs::remove_file(root.join("f3")).unwrap();
        assert_eq!(
            budget.check_start().unwrap_err().code(),
            "WORKSPACE_FILE_LIMIT"
        );
    }
}
