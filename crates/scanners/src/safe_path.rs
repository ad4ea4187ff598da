//! `safe_path`: turns a path a model or repository supplied into a normalised relative path that
//! cannot leave the workspace root, or refuses it.

use std::fmt;

/// A normalised path relative to the workspace root: no empty, `.` or `..` components, no
/// leading `/`, and none of the characters [`safe_path`] refuses. `"."` names the root itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SafePath(String);

impl SafePath {
    /// The normalised path, `/`-separated.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path's components (none for the root).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| *c != ".")
    }
}

impl fmt::Display for SafePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathRefusal {
    /// The path is empty.
    #[error("UNSAFE_PATH: the path is empty")]
    Empty,
    /// The path is absolute (or names a drive).
    #[error("UNSAFE_PATH: absolute paths are not allowed")]
    Absolute,
    /// Normalised, the path climbs above the root.
    #[error("UNSAFE_PATH: the path leaves the workspace")]
    EscapesRoot,
    /// The path contains a NUL byte.
    #[error("UNSAFE_PATH: the path contains a NUL byte")]
    Nul,
    /// The path contains a backslash.
    #[error("UNSAFE_PATH: the path contains a backslash")]
    Backslash,
    /// The path contains a single quote.
    #[error("UNSAFE_PATH: the path contains a single quote")]
    Quote,
    /// The path contains a control character.
    #[error("UNSAFE_PATH: the path contains a control character")]
    Control,
    /// The path contains a character that some tools fold into `/`, `\`, `.` or `'`, or one that
    /// is invisible or reorders text.
    #[error("UNSAFE_PATH: the path contains a look-alike or invisible character")]
    LookAlike,
}

impl PathRefusal {
    /// The stable code, `UNSAFE_PATH`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty
            | Self::Absolute
            | Self::EscapesRoot
            | Self::Nul
            | Self::Backslash
            | Self::Quote
            | Self::Control
            | Self::LookAlike => "UNSAFE_PATH",
        }
    }

    /// The same path is refused again.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Empty
            | Self::Absolute
            | Self::EscapesRoot
            | Self::Nul
            | Self::Backslash
            | Self::Quote
            | Self::Control
            | Self::LookAlike => false,
        }
    }
}

/// Characters that compatibility normalisation or "best fit" code pages turn into a separator,
/// a dot or a quote, plus invisible and bidirectional controls.
fn is_look_alike(c: char) -> bool {
    matches!(
        c,
        '\u{FF0F}' | '\u{FF3C}' | '\u{2215}' | '\u{2044}' | '\u{29F8}' | '\u{29F9}' | '\u{FE68}'
            | '\u{FF0E}' | '\u{2024}' | '\u{2025}' | '\u{2026}' | '\u{FE52}' | '\u{FF07}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{00AD}'
    )
}

/// Whether a path (or its first component) reads as rooted: a home directory (`~`, `~user`) or
/// a drive (`C:`).
fn looks_rooted(path: &str) -> bool {
    let bytes = path.as_bytes();
    path.starts_with('~')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
}

/// Normalises a relative path and refuses anything that could leave the root: absolute paths,
/// `..` that climbs past the start, NUL bytes, backslashes, single quotes, control characters
/// and look-alike or invisible characters. `a/./b//c` becomes `a/b/c`; `a/../b` becomes `b`.
pub fn safe_path(path: &str) -> Result<SafePath, PathRefusal> {
    if path.is_empty() {
        return Err(PathRefusal::Empty);
    }
    for c in path.chars() {
        match c {
            '\0' => return Err(PathRefusal::Nul),
            '\\' => return Err(PathRefusal::Backslash),
            '\'' => return Err(PathRefusal::Quote),
            c if c.is_control() => return Err(PathRefusal::Control),
            c if is_look_alike(c) => return Err(PathRefusal::LookAlike),
            _ => {}
        }
    }
    if path.starts_with('/') || looks_rooted(path) {
        return Err(PathRefusal::Absolute);
    }
    let mut parts: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathRefusal::EscapesRoot);
                }
            }
            other => parts.push(other),
        }
    }
    let Some(first) = parts.first() else {
        return Ok(SafePath(".".to_owned()));
    };
    // `./~` or `./C:` would normalise to a path that reads as rooted.
    if looks_rooted(first) {
        return Err(PathRefusal::Absolute);
    }
    Ok(SafePath(parts.join("/")))
}
