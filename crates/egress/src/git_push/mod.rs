//! Git smart-HTTP traffic to a run's git host, read without I/O: which requests are git requests
//! for which repository ([`classify_request`]), and whether a push may go through ([`parse_advertisement`],
//! [`parse_push`], [`check_push`]).
//!
//! A run may push to one branch of its repository, and only forward: a push must carry exactly
//! one update, of `refs/heads/<branch>`, never a delete, starting from the value the server
//! advertised, to a commit that the pushed pack itself shows to descend from that value. What this
//! module does not understand is refused, never passed on: a refusal is a [`PushRefusal`], whose
//! `Display` is the line to answer with.
//!
//! ```
//! use auto_swe_egress::git_push::{classify_request, same_repo, GitRequest, GitService};
//!
//! let request = classify_request("GET", "/Octo/widgets.git/info/refs", Some("service=git-receive-pack"));
//! assert_eq!(request.as_ref().map(GitRequest::repo), Some("Octo/widgets"));
//! assert_eq!(request.as_ref().map(GitRequest::service), Some(GitService::ReceivePack));
//! assert!(request.is_some_and(|request| same_repo(request.repo(), "octo/Widgets")));
//!
//! let extra = Some("service=git-upload-pack&x=1");
//! assert!(classify_request("GET", "/octo/widgets/info/refs", extra).is_none());
//! assert!(classify_request("GET", "/octo/widgets/objects/info/packs", None).is_none());
//! ```
//!
//! The body given to [`parse_push`] and [`check_push`] is the request body as the git host would
//! read it: without any `Content-Encoding` (the proxy decodes a gzip-encoded push first, within
//! its size cap, and refuses any other encoding).

mod pack;
mod pkt;
mod push;

#[cfg(test)]
mod crafted_tests;
#[cfg(test)]
mod pack_tests;
#[cfg(test)]
mod push_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

pub use pack::{
    MAX_COMMIT_BYTES, MAX_COMMIT_SIZE, MAX_INFLATED, MAX_OBJECT_SIZE, MAX_PACK_OBJECTS,
};
pub use pkt::{MAX_PKT_LINE, PktLine, PktReader};
pub use push::{Push, RefUpdate, check_push, parse_advertisement, parse_push};

/// Which git service a smart-HTTP request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GitService {
    /// `git-upload-pack`: the server sends objects (fetch, clone, pull).
    UploadPack,
    /// `git-receive-pack`: the client sends objects and ref updates (push).
    ReceivePack,
}

impl GitService {
    /// The service's name on the wire: `git-upload-pack` or `git-receive-pack`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::UploadPack => "git-upload-pack",
            Self::ReceivePack => "git-receive-pack",
        }
    }
}

/// Which of a service's two smart-HTTP requests a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GitRequestKind {
    /// `GET /<repo>/info/refs?service=<service>`: the server advertises its refs and capabilities.
    Advertisement,
    /// `POST /<repo>/<service>`: the exchange itself (a fetch's negotiation, a push's updates and
    /// pack).
    Rpc,
}

/// A git smart-HTTP request, as recognised by [`classify_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRequest {
    repo: String,
    service: GitService,
    kind: GitRequestKind,
}

impl GitRequest {
    /// The repository, normalised to `owner/name`: no leading `/`, no `.git` suffix, the case as
    /// sent (compare with [`same_repo`]).
    #[must_use]
    pub fn repo(&self) -> &str {
        &self.repo
    }

    /// The service the request is for.
    #[must_use]
    pub fn service(&self) -> GitService {
        self.service
    }

    /// Whether the request is the advertisement or the exchange.
    #[must_use]
    pub fn kind(&self) -> GitRequestKind {
        self.kind
    }

    /// Whether the request is the advertisement (`GET …/info/refs`).
    #[must_use]
    pub fn is_advertisement(&self) -> bool {
        self.kind == GitRequestKind::Advertisement
    }
}

/// Recognises git's smart-HTTP requests, and nothing else.
///
/// - `GET /<repo>/info/refs` whose query is exactly `service=git-upload-pack` or
///   `service=git-receive-pack` (one parameter; no other, no repeat) is that service's
///   advertisement;
/// - `POST /<repo>/git-upload-pack` and `POST /<repo>/git-receive-pack`, with no query, are that
///   service's exchange.
///
/// `<repo>` loses one trailing `.git` and must then be `owner/name`: two non-empty segments of
/// ASCII letters, digits, `.`, `_` and `-`, neither `.` nor `..`. A path holding `%` is refused
/// rather than decoded. Every other request (other methods or paths, `HEAD`, the dumb protocol's
/// `objects/` paths, `info/lfs`) is `None`.
#[must_use]
pub fn classify_request(method: &str, path: &str, query: Option<&str>) -> Option<GitRequest> {
    if path.contains('%') {
        return None;
    }
    let path = path.strip_prefix('/')?;
    let (repo, service, kind) = match method {
        "GET" => {
            let repo = path.strip_suffix("/info/refs")?;
            let service = match query? {
                "service=git-upload-pack" => GitService::UploadPack,
                "service=git-receive-pack" => GitService::ReceivePack,
                _ => return None,
            };
            (repo, service, GitRequestKind::Advertisement)
        }
        "POST" => {
            if query.is_some() {
                return None;
            }
            if let Some(repo) = path.strip_suffix("/git-upload-pack") {
                (repo, GitService::UploadPack, GitRequestKind::Rpc)
            } else {
                let repo = path.strip_suffix("/git-receive-pack")?;
                (repo, GitService::ReceivePack, GitRequestKind::Rpc)
            }
        }
        _ => return None,
    };
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    let (owner, name) = repo.split_once('/')?;
    (repo_segment(owner) && repo_segment(name)).then(|| GitRequest {
        repo: repo.to_owned(),
        service,
        kind,
    })
}

/// One segment of `owner/name`.
fn repo_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

/// Whether two `owner/name` repositories are the same: git hosts such as GitHub compare them
/// without regard to ASCII case.
#[must_use]
pub fn same_repo(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// A SHA-1 object id. Only SHA-1 repositories are supported: a push or advertisement declaring
/// another object format is refused with [`PushRefusal::Sha256Repository`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId([u8; 20]);

impl ObjectId {
    /// The all-zero id: an update's old value when it creates a ref, its new value when it
    /// deletes one.
    pub const ZERO: Self = Self([0; 20]);

    /// The id with these bytes.
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }

    /// The id's 20 bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// Whether this is [`ObjectId::ZERO`].
    #[must_use]
    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    /// Reads exactly 40 hexadecimal digits (either case, as git reads them).
    #[must_use]
    pub fn from_hex(hex: &[u8]) -> Option<Self> {
        if hex.len() != 40 {
            return None;
        }
        let mut bytes = [0; 20];
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
        }
        Some(Self(bytes))
    }
}

/// The value of one hexadecimal digit.
pub(crate) fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0
            .iter()
            .try_for_each(|byte| write!(formatter, "{byte:02x}"))
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "ObjectId({self})")
    }
}

/// A text that is not 40 hexadecimal digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an object id is 40 hexadecimal digits")]
pub struct InvalidObjectId;

impl FromStr for ObjectId {
    type Err = InvalidObjectId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::from_hex(text.as_bytes()).ok_or(InvalidObjectId)
    }
}

/// Why a push (or the advertisement it is checked against) is refused. [`PushRefusal::code`] is
/// stable; the `Display` text is the line to answer with, `push refused (CODE): …`, and names
/// refs, ids and limits, never file contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PushRefusal {
    /// An update names another ref than the run's branch.
    #[error("push refused (OTHER_REF): {name} may not be pushed; only {allowed} may")]
    OtherRef {
        /// The ref the update names.
        name: String,
        /// The one ref that may be updated.
        allowed: String,
    },
    /// The push carries no update, or more than one.
    #[error(
        "push refused (UPDATE_COUNT): a push updates exactly one ref; this one updates {count}"
    )]
    UpdateCount {
        /// How many updates the push carries.
        count: usize,
    },
    /// The update deletes the branch.
    #[error("push refused (DELETE): {name} may not be deleted")]
    Delete {
        /// The ref.
        name: String,
    },
    /// The update's old value is not what the server advertised for the branch (zero when the
    /// branch was not advertised, so the push must create it).
    #[error(
        "push refused (STALE_OLD_VALUE): {name} is at {advertised} on the server, \
         but the push updates it from {old}"
    )]
    StaleOldValue {
        /// The ref.
        name: String,
        /// The update's old value.
        old: ObjectId,
        /// The advertised value, or zero when the ref was not advertised.
        advertised: ObjectId,
    },
    /// The pack does not show the new commit to descend from the old one.
    #[error(
        "push refused (NOT_FAST_FORWARD): {name} is not a fast-forward of {old} to {new}: {detail}"
    )]
    NotFastForward {
        /// The ref.
        name: String,
        /// The advertised value.
        old: ObjectId,
        /// The pushed value.
        new: ObjectId,
        /// What the pack lacks, in fixed words.
        detail: &'static str,
    },
    /// The body is not a well-formed sequence of pkt-lines, or a line is not what the protocol
    /// puts there.
    #[error("push refused (BAD_PKT_LINE): {detail}")]
    BadPktLine {
        /// What was wrong, in fixed words.
        detail: &'static str,
    },
    /// The server's `git-receive-pack` advertisement is malformed.
    #[error("push refused (BAD_ADVERTISEMENT): {detail}")]
    BadAdvertisement {
        /// What was wrong, in fixed words.
        detail: &'static str,
    },
    /// The pack is missing, malformed, or fails its checksum.
    #[error("push refused (BAD_PACK): {detail}")]
    BadPack {
        /// What was wrong, in fixed words.
        detail: &'static str,
    },
    /// The repository or the push uses another object format than SHA-1.
    #[error(
        "push refused (SHA256_REPOSITORY): only SHA-1 repositories are supported, \
         not object-format={format:?}"
    )]
    Sha256Repository {
        /// The declared object format.
        format: String,
    },
    /// The push comes from a shallow clone (`shallow` lines).
    #[error("push refused (SHALLOW_PUSH): pushes from a shallow clone are not supported")]
    ShallowPush,
    /// The push is signed (a push certificate).
    #[error("push refused (PUSH_CERT): signed pushes (push certificates) are not supported")]
    PushCert,
    /// The push carries push options (`git push -o`).
    #[error("push refused (PUSH_OPTIONS): push options are not supported")]
    PushOptions,
    /// The pack exceeds a bound of the check.
    #[error("push refused (TOO_LARGE): {detail}")]
    TooLarge {
        /// Which bound, in fixed words.
        detail: &'static str,
    },
}

impl PushRefusal {
    /// The stable code: `OTHER_REF`, `UPDATE_COUNT`, `DELETE`, `STALE_OLD_VALUE`,
    /// `NOT_FAST_FORWARD`, `BAD_PKT_LINE`, `BAD_ADVERTISEMENT`, `BAD_PACK`, `SHA256_REPOSITORY`,
    /// `SHALLOW_PUSH`, `PUSH_CERT`, `PUSH_OPTIONS` or `TOO_LARGE`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::OtherRef { .. } => "OTHER_REF",
            Self::UpdateCount { .. } => "UPDATE_COUNT",
            Self::Delete { .. } => "DELETE",
            Self::StaleOldValue { .. } => "STALE_OLD_VALUE",
            Self::NotFastForward { .. } => "NOT_FAST_FORWARD",
            Self::BadPktLine { .. } => "BAD_PKT_LINE",
            Self::BadAdvertisement { .. } => "BAD_ADVERTISEMENT",
            Self::BadPack { .. } => "BAD_PACK",
            Self::Sha256Repository { .. } => "SHA256_REPOSITORY",
            Self::ShallowPush => "SHALLOW_PUSH",
            Self::PushCert => "PUSH_CERT",
            Self::PushOptions => "PUSH_OPTIONS",
            Self::TooLarge { .. } => "TOO_LARGE",
        }
    }
}
