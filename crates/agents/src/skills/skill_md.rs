//! Reading skills from a repository tree: every folder holding a `SKILL.md` is a skill. Its YAML
//! front matter gives `name` and `description`, its body the prompt text; `.md`/`.txt` siblings
//! are kept as reference text and never injected. Nothing is ever executed.
//!
//! Two steps, so a fetcher downloads only what is kept: [`plan_source`] reads the tree listing
//! and says which files to fetch; [`read_source`] turns the fetched bytes into skills.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use thiserror::Error;

use crate::skills::library::{normalise_description, validate_skill_name};
use crate::skills::model::{ReferenceFile, SKILL_TEXT_MAX_BYTES};

/// Most skills one source may hold.
pub const SOURCE_MAX_SKILLS: usize = 100;
/// Most text fetched from one source, in bytes.
pub const SOURCE_MAX_BYTES: u64 = 2 * 1024 * 1024;
/// Largest reference file kept, in bytes.
pub const REFERENCE_MAX_BYTES: u64 = 100 * 1024;
/// Most reference files kept per skill.
pub const REFERENCE_MAX_FILES: usize = 50;
/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// How a source treats files that are neither `SKILL.md` nor reference text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ScriptMode {
    /// Skip and list them (never downloaded).
    #[default]
    TextOnly,
    /// Refuse the skill whose folder holds one.
    Reject,
}

/// One entry of a repository tree listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeEntryKind {
    /// A regular file of this many bytes.
    File {
        /// Size in bytes.
        size: u64,
    },
    /// A symbolic link (never followed).
    Symlink,
    /// A submodule (never followed).
    Submodule,
}

/// A path in the tree and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Path relative to the source root, `/`-separated.
    pub path: String,
    /// What it is.
    pub kind: TreeEntryKind,
}

impl TreeEntry {
    /// A regular file.
    #[must_use]
    pub fn file(path: &str, size: u64) -> Self {
        Self {
            path: path.to_owned(),
            kind: TreeEntryKind::File { size },
        }
    }
}

/// Why a whole source is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SourceRefusal {
    /// A path is absolute, climbs with `..` or holds a backslash.
    #[error("unsafe path in source: {0}")]
    UnsafePath(String),
    /// More than [`SOURCE_MAX_SKILLS`] skills.
    #[error("source holds {0} skills; at most {SOURCE_MAX_SKILLS} are read")]
    TooManySkills(usize),
    /// The skills alone need more than [`SOURCE_MAX_BYTES`].
    #[error("source text is over {SOURCE_MAX_BYTES} bytes")]
    TooLarge,
}

impl SourceRefusal {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            SourceRefusal::UnsafePath(_) => "SKILL_SOURCE_UNSAFE_PATH",
            SourceRefusal::TooManySkills(_) => "SKILL_SOURCE_TOO_MANY_SKILLS",
            SourceRefusal::TooLarge => "SKILL_SOURCE_TOO_LARGE",
        }
    }

    /// Never retryable: the same tree is refused again.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            SourceRefusal::UnsafePath(_)
            | SourceRefusal::TooManySkills(_)
            | SourceRefusal::TooLarge => false,
        }
    }
}

/// A file left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedFile {
    /// Path relative to the skill folder.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What to fetch for one skill folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct FolderPlan {
    /// The folder (empty for the root).
    pub folder: String,
    /// Full paths of reference files to fetch.
    pub references: Vec<String>,
    /// Files left out.
    pub skipped: Vec<SkippedFile>,
    /// Errors that already refuse the skill.
    pub errors: Vec<String>,
}

impl FolderPlan {
    /// Full path of the folder's `SKILL.md`.
    #[must_use]
    pub fn skill_md_path(&self) -> String {
        join(&self.folder, SKILL_FILE)
    }
}

fn join(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_owned()
    } else {
        format!("{folder}/{name}")
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

fn owner_folder<'a>(folders: &BTreeSet<&'a str>, path: &str) -> Option<&'a str> {
    let mut dir = parent(path);
    loop {
        if let Some(found) = folders.get(dir) {
            return Some(found);
        }
        if dir.is_empty() {
            return None;
        }
        dir = parent(dir);
    }
}

fn is_text_reference(path: &str) -> bool {
    std::path::Path::new(path)
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("md") || ext.eq_ignore_ascii_case("txt"))
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass over the listing reads best as one function"
)]
/// Plans a source from its tree listing: finds the skill folders (a nested skill owns its own
/// files), chooses reference files within the limits, and lists what is skipped.
pub fn plan_source(
    entries: &[TreeEntry],
    mode: ScriptMode,
) -> Result<Vec<FolderPlan>, SourceRefusal> {
    for entry in entries {
        let p = &entry.path;
        if p.starts_with('/') || p.contains('\\') || p.split('/').any(|seg| seg == "..") {
            return Err(SourceRefusal::UnsafePath(
                p.chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect(),
            ));
        }
    }
    let folders: BTreeSet<&str> = entries
        .iter()
        .filter(|e| matches!(e.kind, TreeEntryKind::File { .. }))
        .filter(|e| e.path == SKILL_FILE || e.path.ends_with(&format!("/{SKILL_FILE}")))
        .map(|e| parent(&e.path))
        .collect();
    if folders.len() > SOURCE_MAX_SKILLS {
        return Err(SourceRefusal::TooManySkills(folders.len()));
    }
    let owner = |path: &str| owner_folder(&folders, path).map(str::to_owned);
    let mut plans: BTreeMap<&str, FolderPlan> = folders
        .iter()
        .map(|f| {
            let mut errors = Vec::new();
            if f.chars().any(char::is_control) {
                errors.push("folder name contains a control character".to_owned());
            }
            (
                *f,
                FolderPlan {
                    folder: (*f).to_owned(),
                    references: Vec::new(),
                    skipped: Vec::new(),
                    errors,
                },
            )
        })
        .collect();
    let mut skill_bytes: u64 = 0;
    let mut rejected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in entries {
        let Some(folder_name) = owner(&entry.path) else {
            continue;
        };
        let folder = folder_name.as_str();
        let Some(plan) = plans.get_mut(folder) else {
            continue;
        };
        let relative = entry
            .path
            .strip_prefix(&join(folder, ""))
            .unwrap_or(&entry.path)
            .trim_start_matches('/')
            .to_owned();
        let shown: String = relative
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        match entry.kind {
            TreeEntryKind::Symlink => plan.skipped.push(SkippedFile {
                path: shown,
                reason: "symlink (not followed)".to_owned(),
            }),
            TreeEntryKind::Submodule => plan.skipped.push(SkippedFile {
                path: shown,
                reason: "submodule (not followed)".to_owned(),
            }),
            TreeEntryKind::File { size } => {
                if relative == SKILL_FILE {
                    skill_bytes += size;
                } else if !is_text_reference(&relative) {
                    match mode {
                        ScriptMode::TextOnly => plan.skipped.push(SkippedFile {
                            path: shown,
                            reason: "not a .md or .txt file".to_owned(),
                        }),
                        ScriptMode::Reject => {
                            rejected.entry(folder_name.clone()).or_default().push(shown);
                        }
                    }
                } else if size > REFERENCE_MAX_BYTES {
                    plan.skipped.push(SkippedFile {
                        path: shown,
                        reason: "reference file over 100 KB".to_owned(),
                    });
                } else if plan.references.len() >= REFERENCE_MAX_FILES {
                    plan.skipped.push(SkippedFile {
                        path: shown,
                        reason: "more than 50 reference files".to_owned(),
                    });
                } else {
                    plan.references.push(entry.path.clone());
                }
            }
        }
    }
    if skill_bytes > SOURCE_MAX_BYTES {
        return Err(SourceRefusal::TooLarge);
    }
    for (folder, files) in rejected {
        if let Some(plan) = plans.get_mut(folder.as_str()) {
            plan.errors.push(format!(
                "script mode REJECT: folder holds non-text files: {}",
                files.join(", ")
            ));
        }
    }
    // Reference files are dropped (and listed) before any skill when the text budget is short.
    let mut budget = SOURCE_MAX_BYTES - skill_bytes;
    let sizes: BTreeMap<&str, u64> = entries
        .iter()
        .filter_map(|e| match e.kind {
            TreeEntryKind::File { size } => Some((e.path.as_str(), size)),
            TreeEntryKind::Symlink | TreeEntryKind::Submodule => None,
        })
        .collect();
    for plan in plans.values_mut() {
        let folder = plan.folder.clone();
        plan.references.retain(|path| {
            let size = sizes.get(path.as_str()).copied().unwrap_or(0);
            if size <= budget {
                budget -= size;
                true
            } else {
                plan.skipped.push(SkippedFile {
                    path: path
                        .strip_prefix(&join(&folder, ""))
                        .unwrap_or(path)
                        .to_owned(),
                    reason: "source text budget reached".to_owned(),
                });
                false
            }
        });
    }
    Ok(plans.into_values().collect())
}

/// A `SKILL.md` that parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SkillMd {
    /// Front matter `name`.
    pub name: String,
    /// Front matter `description`, flattened to one line.
    pub description: String,
    /// The body: the prompt text.
    pub body: String,
    /// Front matter keys nothing is read from (such as `allowed-tools`).
    pub ignored_keys: Vec<String>,
}

/// Why a `SKILL.md` was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize)]
#[serde(tag = "code", content = "message", rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum SkillMdError {
    /// Not valid UTF-8.
    #[error("SKILL.md is not valid UTF-8")]
    NotUtf8,
    /// No `---` front matter block.
    #[error("SKILL.md has no front matter")]
    MissingFrontMatter,
    /// The front matter is not a YAML mapping.
    #[error("front matter is not valid YAML: {0}")]
    InvalidFrontMatter(String),
    /// `name` is missing or invalid.
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// `description` is missing or invalid.
    #[error("invalid description: {0}")]
    InvalidDescription(String),
    /// The body is empty.
    #[error("SKILL.md body is empty")]
    EmptyBody,
    /// The body is over 50,000 characters.
    #[error("SKILL.md body is over 50,000 characters")]
    BodyTooLong,
}

impl SkillMdError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            SkillMdError::NotUtf8 => "NOT_UTF8",
            SkillMdError::MissingFrontMatter => "MISSING_FRONT_MATTER",
            SkillMdError::InvalidFrontMatter(_) => "INVALID_FRONT_MATTER",
            SkillMdError::InvalidName(_) => "INVALID_NAME",
            SkillMdError::InvalidDescription(_) => "INVALID_DESCRIPTION",
            SkillMdError::EmptyBody => "EMPTY_BODY",
            SkillMdError::BodyTooLong => "BODY_TOO_LONG",
        }
    }

    /// Never retryable: the same text is refused again.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// Parses one `SKILL.md`.
pub fn parse_skill_md(bytes: &[u8]) -> Result<SkillMd, SkillMdError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SkillMdError::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let rest = text
        .strip_prefix("---\n")
        .ok_or(SkillMdError::MissingFrontMatter)?;
    let (front, body) = if let Some(body) = rest.strip_prefix("---\n") {
        ("", body)
    } else if let Some(end) = rest.find("\n---\n") {
        (&rest[..end], &rest[end + 5..])
    } else if let Some(front) = rest.strip_suffix("\n---") {
        (front, "")
    } else {
        return Err(SkillMdError::MissingFrontMatter);
    };
    let value: serde_yaml_ng::Value = if front.trim().is_empty() {
        serde_yaml_ng::Value::Mapping(serde_yaml_ng::Mapping::new())
    } else {
        serde_yaml_ng::from_str(front)
            .map_err(|e| SkillMdError::InvalidFrontMatter(e.to_string()))?
    };
    let serde_yaml_ng::Value::Mapping(map) = value else {
        return Err(SkillMdError::InvalidFrontMatter("not a mapping".to_owned()));
    };
    let mut name = None;
    let mut description = None;
    let mut ignored_keys = Vec::new();
    for (k, v) in &map {
        let key = k.as_str().map_or_else(|| format!("{k:?}"), str::to_owned);
        match key.as_str() {
            "name" => name = Some(v.as_str().map(str::to_owned)),
            "description" => description = Some(v.as_str().map(str::to_owned)),
            _ => ignored_keys.push(
                key.chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect(),
            ),
        }
    }
    let name = match name {
        Some(Some(n)) => n.trim().to_owned(),
        Some(None) => {
            return Err(SkillMdError::InvalidName(
                "name must be a string".to_owned(),
            ));
        }
        None => return Err(SkillMdError::InvalidName("name is missing".to_owned())),
    };
    validate_skill_name(&name).map_err(|e| SkillMdError::InvalidName(e.to_string()))?;
    let description = match description {
        Some(Some(d)) => d,
        Some(None) => {
            return Err(SkillMdError::InvalidDescription(
                "description must be a string".to_owned(),
            ));
        }
        None => {
            return Err(SkillMdError::InvalidDescription(
                "description is missing".to_owned(),
            ));
        }
    };
    let description = normalise_description(&description)
        .map_err(|e| SkillMdError::InvalidDescription(e.to_string()))?;
    if description.is_empty() {
        return Err(SkillMdError::InvalidDescription(
            "description is empty".to_owned(),
        ));
    }
    let body = body.trim().to_owned();
    if body.is_empty() {
        return Err(SkillMdError::EmptyBody);
    }
    if body.chars().count() > SKILL_TEXT_MAX_BYTES {
        return Err(SkillMdError::BodyTooLong);
    }
    Ok(SkillMd {
        name,
        description,
        body,
        ignored_keys,
    })
}

/// One skill read from a source: its folder, the parsed skill or its errors, its kept
/// reference files and what was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SourceSkill {
    /// The folder.
    pub folder: String,
    /// The parsed skill, when it has no errors.
    pub skill: Option<SkillMd>,
    /// Why it cannot be installed.
    pub errors: Vec<String>,
    /// Reference files kept (stored, never injected).
    pub reference_files: Vec<ReferenceFile>,
    /// Files left out.
    pub skipped: Vec<SkippedFile>,
}

/// Reads every planned skill from the fetched bytes (`files` by full path). A skill whose name
/// another skill of the source shares is an error on both.
#[must_use]
pub fn read_source(plans: &[FolderPlan], files: &BTreeMap<String, Vec<u8>>) -> Vec<SourceSkill> {
    let mut out: Vec<SourceSkill> = plans
        .iter()
        .map(|plan| {
            let mut errors = plan.errors.clone();
            let mut skipped = plan.skipped.clone();
            let skill = if let Some(bytes) = files.get(&plan.skill_md_path()) {
                match parse_skill_md(bytes) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        errors.push(format!("{}: {e}", e.code()));
                        None
                    }
                }
            } else {
                errors.push("SKILL.md was not fetched".to_owned());
                None
            };
            let mut reference_files = Vec::new();
            for path in &plan.references {
                let relative = path
                    .strip_prefix(&join(&plan.folder, ""))
                    .unwrap_or(path)
                    .to_owned();
                match files.get(path).map(|b| String::from_utf8(b.clone())) {
                    Some(Ok(content)) => reference_files.push(ReferenceFile {
                        path: relative,
                        content,
                    }),
                    Some(Err(_)) => skipped.push(SkippedFile {
                        path: relative,
                        reason: "not valid UTF-8".to_owned(),
                    }),
                    None => skipped.push(SkippedFile {
                        path: relative,
                        reason: "not fetched".to_owned(),
                    }),
                }
            }
            SourceSkill {
                folder: plan.folder.clone(),
                skill: if errors.is_empty() { skill } else { None },
                errors,
                reference_files,
                skipped,
            }
        })
        .collect();
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, s) in out.iter().enumerate() {
        if let Some(skill) = &s.skill {
            by_name
                .entry(crate::skills::library::fold_skill_name(&skill.name))
                .or_default()
                .push(i);
        }
    }
    for (name, indexes) in by_name {
        if indexes.len() > 1 {
            for i in indexes {
                if let Some(s) = out.get_mut(i) {
                    s.errors.push(format!(
                        "another skill in this source is also named `{name}`"
                    ));
                    s.skill = None;
                }
            }
        }
    }
    out
}
