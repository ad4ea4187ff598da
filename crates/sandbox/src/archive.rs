//! `assert_safe_archive`: the check every tar archive passes before it is copied into a workspace.
//!
//! The rules are lexical and conservative: an archive is refused when any entry could land
//! outside the extraction root or through a link, whatever order its entries come in.

use std::collections::BTreeSet;
use std::io::Read;

use tar::EntryType;

use crate::error::{Result, SandboxError, UnsafeArchiveReason};
use crate::spec::ExecRequest;

/// What a checked archive holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveSummary {
    /// Regular files.
    pub files: u64,
    /// Directories.
    pub directories: u64,
    /// Symlinks (all relative and contained).
    pub symlinks: u64,
    /// Sum of the regular files' sizes.
    pub bytes: u64,
}

struct Checked {
    raw: String,
    components: Vec<String>,
    kind: Kind,
}

enum Kind {
    File,
    Directory,
    Symlink(String),
}

fn refuse(path: &str, reason: UnsafeArchiveReason) -> SandboxError {
    SandboxError::UnsafeArchive {
        path: path.chars().take(256).collect(),
        reason,
    }
}

/// Splits an entry path into normal components, refusing absolute paths, `..` and malformed
/// names. `.` components and empty components are dropped.
fn components(raw: &str) -> Result<Vec<String>> {
    if raw.is_empty() || raw.contains('\0') {
        return Err(refuse(raw, UnsafeArchiveReason::MalformedPath));
    }
    if raw.starts_with('/') {
        return Err(refuse(raw, UnsafeArchiveReason::AbsolutePath));
    }
    let mut out = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(refuse(raw, UnsafeArchiveReason::ParentComponent)),
            other => out.push(other.to_owned()),
        }
    }
    Ok(out)
}

/// Checks a tar archive (uncompressed) and returns what it holds.
///
/// Refused: absolute paths, `..` components, hard links, devices and FIFOs, entries at or below
/// a path that the archive makes a symlink, symlinks with absolute targets, and symlinks whose
/// target climbs above the root or passes through another symlink of the archive.
pub fn assert_safe_archive(reader: impl Read) -> Result<ArchiveSummary> {
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|_| refuse("", UnsafeArchiveReason::Unreadable))?;
    let mut checked = Vec::new();
    let mut summary = ArchiveSummary::default();
    for entry in entries {
        let entry = entry.map_err(|_| refuse("", UnsafeArchiveReason::Unreadable))?;
        let raw = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| refuse("<non-utf8>", UnsafeArchiveReason::MalformedPath))?;
        let entry_type = entry.header().entry_type();
        let kind = match entry_type {
            EntryType::Regular | EntryType::Continuous => {
                summary.files += 1;
                summary.bytes = summary.bytes.saturating_add(entry.size());
                Kind::File
            }
            EntryType::Directory => {
                summary.directories += 1;
                Kind::Directory
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8(t.into_owned()))
                    .transpose()
                    .map_err(|_| refuse(&raw, UnsafeArchiveReason::MalformedPath))?
                    .unwrap_or_default();
                summary.symlinks += 1;
                Kind::Symlink(target)
            }
            EntryType::Link => return Err(refuse(&raw, UnsafeArchiveReason::HardLink)),
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                return Err(refuse(&raw, UnsafeArchiveReason::Device));
            }
            EntryType::XGlobalHeader | EntryType::XHeader => continue,
            _ => return Err(refuse(&raw, UnsafeArchiveReason::UnsupportedType)),
        };
        let components = components(&raw)?;
        if components.is_empty() && !matches!(kind, Kind::Directory) {
            return Err(refuse(&raw, UnsafeArchiveReason::MalformedPath));
        }
        checked.push(Checked {
            raw,
            components,
            kind,
        });
    }

    // Second pass: the full set of symlinks is known, whatever order the entries came in.
    let symlinks: BTreeSet<Vec<String>> = checked
        .iter()
        .filter(|c| matches!(c.kind, Kind::Symlink(_)))
        .map(|c| c.components.clone())
        .collect();
    for entry in &checked {
        // Anything strictly below a symlink of the archive, or a non-symlink at a symlink's path.
        for len in 1..=entry.components.len() {
            let prefix = &entry.components[..len];
            let is_self = len == entry.components.len();
            if symlinks.contains(prefix) && !(is_self && matches!(entry.kind, Kind::Symlink(_))) {
                return Err(refuse(&entry.raw, UnsafeArchiveReason::BelowSymlink));
            }
        }
        if let Kind::Symlink(target) = &entry.kind {
            check_symlink_target(entry, target, &symlinks)?;
        }
    }
    Ok(summary)
}

fn check_symlink_target(
    entry: &Checked,
    target: &str,
    symlinks: &BTreeSet<Vec<String>>,
) -> Result<()> {
    if target.is_empty() || target.contains('\0') {
        return Err(refuse(&entry.raw, UnsafeArchiveReason::MalformedPath));
    }
    if target.starts_with('/') {
        return Err(refuse(&entry.raw, UnsafeArchiveReason::AbsoluteSymlink));
    }
    // Resolve lexically from the link's directory.
    let mut resolved: Vec<String> = entry.components[..entry.components.len() - 1].to_vec();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if resolved.pop().is_none() {
                    return Err(refuse(&entry.raw, UnsafeArchiveReason::ClimbingSymlink));
                }
            }
            other => {
                resolved.push(other.to_owned());
                // Walking through another link of the archive would make the lexical answer
                // wrong (`a -> ..` then `b -> a/..`), so such chains are refused.
                if symlinks.contains(&resolved) && resolved != entry.components {
                    return Err(refuse(&entry.raw, UnsafeArchiveReason::ClimbingSymlink));
                }
            }
        }
    }
    Ok(())
}

/// The error of a copy-out past its cap.
pub(crate) fn archive_too_large(limit: usize) -> SandboxError {
    SandboxError::InvalidRequest(format!("archive exceeds the {limit}-byte copy-out cap"))
}

/// A copy path: absolute, no `..` component, and below the root a path the scanners' `safe_path`
/// accepts (no NUL or control characters, quotes, backslashes or Unicode look-alikes of `/` and
/// `.`), since it reaches `tar` inside the workspace.
pub(crate) fn check_inside_path(path: &str) -> Result<()> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(SandboxError::InvalidRequest(
            "path must be absolute without `..`".to_owned(),
        ));
    };
    if path.split('/').any(|c| c == "..") {
        return Err(SandboxError::InvalidRequest(
            "path must be absolute without `..`".to_owned(),
        ));
    }
    if !rest.trim_matches('/').is_empty() {
        auto_swe_scanners::safe_path(rest)
            .map_err(|refusal| SandboxError::InvalidRequest(refusal.to_string()))?;
    }
    Ok(())
}

pub(crate) fn copy_in_request(archive: &[u8], dest: &str) -> Result<ExecRequest> {
    check_inside_path(dest)?;
    assert_safe_archive(archive)?;
    Ok(ExecRequest::new([
        "tar",
        "-x",
        "-f",
        "-",
        "--no-same-owner",
        "--no-overwrite-dir",
        "-C",
        dest,
    ])
    .stdin(archive.to_vec()))
}

pub(crate) fn copy_out_request(path: &str, limit: usize) -> Result<ExecRequest> {
    check_inside_path(path)?;
    let trimmed = path.trim_end_matches('/');
    let (parent, base) = match trimmed.rfind('/') {
        Some(0) | None => ("/", trimmed.trim_start_matches('/')),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
    };
    let base = if base.is_empty() { "." } else { base };
    let mut request = ExecRequest::new(["tar", "-c", "-f", "-", "-C", parent, "--", base]);
    request.output_limit = limit;
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_drop_dots() {
        assert_eq!(components("./a//b/.").unwrap(), vec!["a", "b"]);
        assert!(components("a/../b").is_err());
        assert!(components("/etc").is_err());
    }
}
