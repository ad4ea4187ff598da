//! Workspaces that never outlive their owner on `local`. Each workspace `<id>` of a state
//! directory has an owner file `<id>.owner` beside its directory, written *before* the
//! directory is made: one line per process that holds it (the one that made it, and each that
//! attached to it), each with its PID and start time ([`Owner`]). The pooled data directories,
//! launcher directories and lent-mount records of ephemeral runs carry their owner in their
//! names (`<pid>.<start>.…`).
//!
//! [`sweep_state`] removes what belongs to owners that are all gone: the workspace's processes,
//! its lent mounts (handed back), its data directory, its directory and its owner file. Nothing
//! of a live owner is touched, nor anything without an owner record (a workspace of an older
//! release, which is left as it was).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::identity::{HostIdentity, Lent};
use crate::error::{Result, SandboxError};
use crate::owner::{self, Owner};

/// An owner file that is empty or unreadable for this long is its writer's crash, not a write
/// in progress.
const TORN_RECORD_AGE: Duration = Duration::from_secs(60);

/// The owner file of workspace `id`.
pub(crate) fn owner_file(state: &Path, id: &str) -> PathBuf {
    state.join(format!("{id}.owner"))
}

/// Records this process as an owner of workspace `id`, private to this process's user. A new
/// record is written whole under a name of this process's own and then renamed into place,
/// so no sweep ever finds it torn; a workspace attached from another process has that holder
/// appended.
pub(crate) fn claim(state: &Path, id: &str) -> Result<()> {
    let file = owner_file(state, id);
    let line = owner::record_line(&Owner::current());
    let io = |e| SandboxError::io(format!("recording the owner in {}", file.display()), e);
    let mut open = std::fs::OpenOptions::new();
    open.mode(0o600).custom_flags(nix::libc::O_NOFOLLOW);
    if std::fs::symlink_metadata(&file).is_ok() {
        return open
            .append(true)
            .open(&file)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(io);
    }
    let fresh = state.join(tagged(&format!("{id}{FRESH_SUFFIX}")));
    let written = open
        .write(true)
        .create_new(true)
        .open(&fresh)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .and_then(|()| std::fs::rename(&fresh, &file));
    if written.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    written.map_err(io)
}

/// The suffix of an owner record being written (`<pid>.<start>.<id>.owner-new`).
const FRESH_SUFFIX: &str = ".owner-new";

/// Makes workspace `id`'s directory (private), its owner on record first: a sweep never finds
/// a workspace without one, and removes it should this process die.
pub(crate) fn make_owned(state: &Path, id: &str) -> Result<()> {
    claim(state, id)?;
    if let Err(e) = super::private_dir(&state.join(id)) {
        release(state, id);
        return Err(e);
    }
    Ok(())
}

/// Removes what [`make_owned`] made (a workspace whose creation failed).
pub(crate) fn unmake(state: &Path, id: &str) {
    let _ = std::fs::remove_dir_all(state.join(id));
    release(state, id);
}

/// Drops workspace `id`'s owner file (its directory is gone).
pub(crate) fn release(state: &Path, id: &str) {
    let _ = std::fs::remove_file(owner_file(state, id));
}

/// A name with this process's owner tag in front: `<pid>.<start>.<name>`.
pub(crate) fn tagged(name: &str) -> String {
    format!("{}.{name}", Owner::current().tag())
}

/// What one sweep of a state directory removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Orphans {
    pub(crate) workspaces: usize,
    pub(crate) data_dirs: usize,
    pub(crate) launch_dirs: usize,
    pub(crate) lent_records: usize,
}

impl Orphans {
    pub(crate) fn total(self) -> usize {
        self.workspaces + self.data_dirs + self.launch_dirs + self.lent_records
    }
}

/// Whether every owner of the workspace whose owner file is `file` is gone.
fn owners_gone(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    let owners = owner::parse_records(&text);
    if owners.is_empty() {
        // A record torn by its writer's death; young, it may be a write in progress.
        return std::fs::symlink_metadata(file)
            .and_then(|m| m.modified())
            .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > TORN_RECORD_AGE));
    }
    owners.iter().all(|owner| !owner.alive())
}

/// The workspace metadata fields the sweep needs.
#[derive(serde::Deserialize, Default)]
struct MetaView {
    #[serde(default)]
    data: Option<PathBuf>,
    #[serde(default)]
    lent: Lent,
}

fn meta_of(dir: &Path) -> Option<MetaView> {
    let text = std::fs::read_to_string(dir.join("meta.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Removes from `state` what owners that are gone left: see the module's documentation.
pub(crate) fn sweep_state(identity: &HostIdentity, state: &Path) -> Orphans {
    let mut swept = Orphans::default();
    let Ok(entries) = std::fs::read_dir(state) else {
        return swept;
    };
    let data_root = state.join(".data");
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            let id = name.strip_suffix(".owner")?.to_owned();
            super::valid_id(&id).then(|| (id, entry.path()))
        })
        .collect();
    files.sort();
    for (id, file) in files {
        if !super::sweep::ours(&file) || !owners_gone(&file) {
            continue;
        }
        let dir = state.join(&id);
        // Its processes first (those in a cgroup were ended with the cgroup), then what it
        // was lent, then its files.
        super::LocalBackend::kill_all(&id);
        if super::sweep::ours(&dir)
            && let Some(meta) = meta_of(&dir)
        {
            meta.lent.give_back(identity);
            if let Some(data) = meta
                .data
                .filter(|d| d.parent() == Some(data_root.as_path()))
            {
                let _ = std::fs::remove_dir_all(data);
            }
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(workspace = %id, error = %e, "could not remove an orphaned workspace");
                continue;
            }
        }
        release(state, &id);
        swept.workspaces += 1;
    }
    remove_gone_tags(state, |path| {
        path.to_str().is_some_and(|p| p.ends_with(FRESH_SUFFIX))
    });
    swept.data_dirs = sweep_data(state, &data_root);
    swept.launch_dirs = remove_gone_tags(&state.join(".launch"), |_| true);
    swept.lent_records = sweep_lent(identity, &state.join(".ephemeral"));
    swept
}

/// Removes pooled data directories of owners that are gone, unless a workspace still on
/// record uses one.
fn sweep_data(state: &Path, data_root: &Path) -> usize {
    let in_use: Vec<PathBuf> = std::fs::read_dir(state)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| meta_of(&entry.path())?.data)
        .collect();
    remove_gone_tags(data_root, |path| !in_use.iter().any(|used| used == path))
}

/// Removes each entry of `dir` named after an owner that is gone (and passing `also`). `dir`
/// must be ours and writable by no one else, so each entry in it was made by this backend's
/// user (a launcher's directory is then handed to the sandbox's account).
fn remove_gone_tags(dir: &Path, also: impl Fn(&Path) -> bool) -> usize {
    if !super::sweep::ours(dir) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let gone = entry
            .file_name()
            .to_str()
            .and_then(tag_only_gone)
            .unwrap_or(false);
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        if gone && !link && also(&path) && remove_any(&path) {
            removed += 1;
        }
    }
    removed
}

/// Like [`Owner::tag_is_gone`], for names that must carry a full `<pid>.<start>.` tag (a bare
/// `<pid>.` prefix is no owner record here).
fn tag_only_gone(name: &str) -> Option<bool> {
    let mut parts = name.splitn(3, '.');
    let (pid, start) = (parts.next()?, parts.next()?);
    parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(start))
        .then(|| Owner::tag_is_gone(name))
        .flatten()
}

fn remove_any(path: &Path) -> bool {
    let result = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    result.is_ok()
}

/// Hands back and drops the lent-mount records (`<pid>.<start>.<run>.lent`) of ephemeral runs
/// whose owner is gone.
fn sweep_lent(identity: &HostIdentity, dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let gone = entry
            .file_name()
            .to_str()
            .filter(|name| Path::new(name).extension().is_some_and(|x| x == "lent"))
            .and_then(tag_only_gone)
            .unwrap_or(false);
        if !gone || !super::sweep::ours(&path) {
            continue;
        }
        if let Some(lent) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<Lent>(&text).ok())
        {
            lent.give_back(identity);
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}
