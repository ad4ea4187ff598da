//! The `git-receive-pack` advertisement, the push request (updates, capabilities, pack), and the
//! rule a push must meet.

use std::collections::BTreeMap;

use super::pack;
use super::pkt::{PktLine, PktReader};
use super::{ObjectId, PushRefusal};

/// The advertisement's first line (after its newline is removed).
const SERVICE_LINE: &[u8] = b"# service=git-receive-pack";
/// The name an empty repository advertises its capabilities under.
const CAPABILITIES_ONLY: &str = "capabilities^{}";
/// The name of the lines advertising an alternate repository's tips; not refs.
const HAVE: &str = ".have";

fn bad_line(detail: &'static str) -> PushRefusal {
    PushRefusal::BadPktLine { detail }
}

fn bad_advertisement(detail: &'static str) -> PushRefusal {
    PushRefusal::BadAdvertisement { detail }
}

/// A line's payload without its one trailing newline, as git reads protocol lines.
fn chomp(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// Splits a line at its first NUL; a second NUL is refused with `error`.
fn split_nul(line: &[u8], error: PushRefusal) -> Result<(&[u8], Option<&[u8]>), PushRefusal> {
    match memchr::memchr(0, line) {
        None => Ok((line, None)),
        Some(at) => {
            let (head, tail) = (&line[..at], &line[at + 1..]);
            if tail.contains(&0) {
                return Err(error);
            }
            Ok((head, Some(tail)))
        }
    }
}

/// Text with no control characters (git refuses them in ref names; they have no place in a
/// capability either).
fn plain_text(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes).ok()?;
    (!text.chars().any(char::is_control)).then_some(text)
}

/// Reads a capability list, refusing any object format but SHA-1.
fn capabilities(raw: &[u8], error: PushRefusal) -> Result<Vec<String>, PushRefusal> {
    let text = plain_text(raw).ok_or(error)?;
    let list: Vec<String> = text
        .split(' ')
        .filter(|cap| !cap.is_empty())
        .map(str::to_owned)
        .collect();
    for cap in &list {
        if let Some(format) = cap.strip_prefix("object-format=")
            && format != "sha1"
        {
            return Err(PushRefusal::Sha256Repository {
                format: format.to_owned(),
            });
        }
    }
    Ok(list)
}

/// Reads `<40 hex> SP <name>`.
fn ref_line(line: &[u8]) -> Option<(ObjectId, &str)> {
    let id = ObjectId::from_hex(line.get(..40)?)?;
    let name = line.get(40..)?.strip_prefix(b" ")?;
    let name = plain_text(name).filter(|name| !name.is_empty() && !name.contains(' '))?;
    Some((id, name))
}

/// Reads the server's answer to `GET …/info/refs?service=git-receive-pack`: the refs it holds and
/// their values.
///
/// The body must be the `# service=git-receive-pack` line and a flush (git-http-backend always
/// sends them; a body without them is refused), an optional `version 1` line, the first ref line
/// `<id> <name>\0<capabilities>`, further `<id> <name>` lines, and a final flush that ends the
/// body. An empty repository's `0000…0000 capabilities^{}\0<capabilities>` gives an empty map;
/// `.have` lines are not refs and are skipped. A repository whose capabilities declare another
/// object format than SHA-1 is refused.
pub fn parse_advertisement(body: &[u8]) -> Result<BTreeMap<String, ObjectId>, PushRefusal> {
    let mut reader = PktReader::new(body);
    if !matches!(reader.read()?, Some(PktLine::Data(line)) if chomp(line) == SERVICE_LINE) {
        return Err(bad_advertisement(
            "it does not start with `# service=git-receive-pack`",
        ));
    }
    if reader.read()? != Some(PktLine::Flush) {
        return Err(bad_advertisement(
            "the service line is not followed by a flush",
        ));
    }
    let mut first = next_ref_line(&mut reader)?;
    if first.is_some_and(|line| line == b"version 1") {
        first = next_ref_line(&mut reader)?;
    }
    let Some(first) = first else {
        return Err(bad_advertisement("it has no capabilities line"));
    };
    let not_first = || bad_advertisement("the first ref line is malformed");
    let (head, caps) = split_nul(first, not_first())?;
    capabilities(caps.ok_or_else(not_first)?, not_first())?;
    let (id, name) = ref_line(head).ok_or_else(not_first)?;
    let mut refs = BTreeMap::new();
    let empty = name == CAPABILITIES_ONLY;
    if empty && !id.is_zero() {
        return Err(not_first());
    }
    if !empty {
        refs.insert(name.to_owned(), id);
    }
    while let Some(line) = next_ref_line(&mut reader)? {
        if empty {
            return Err(bad_advertisement(
                "an empty repository's advertisement lists a ref",
            ));
        }
        let (id, name) = ref_line(line).ok_or(bad_advertisement("a ref line is malformed"))?;
        if name != HAVE && refs.insert(name.to_owned(), id).is_some() {
            return Err(bad_advertisement("a ref is advertised twice"));
        }
    }
    if !reader.remaining().is_empty() {
        return Err(bad_advertisement("data follows the final flush"));
    }
    Ok(refs)
}

/// The next line of the ref list, newline removed; `None` at its closing flush.
fn next_ref_line<'a>(reader: &mut PktReader<'a>) -> Result<Option<&'a [u8]>, PushRefusal> {
    match reader.read()? {
        Some(PktLine::Flush) => Ok(None),
        Some(PktLine::Data(line)) => Ok(Some(chomp(line))),
        None => Err(bad_advertisement("the ref list does not end with a flush")),
        Some(PktLine::Delim | PktLine::ResponseEnd) => {
            Err(bad_advertisement("the ref list holds a protocol v2 packet"))
        }
    }
}

/// One ref update of a push: set `name` from `old` to `new`. A zero `old` creates the ref; a
/// zero `new` deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    /// The value the client expects the ref to have now.
    pub old: ObjectId,
    /// The value to set.
    pub new: ObjectId,
    /// The full ref name, such as `refs/heads/main`.
    pub name: String,
}

/// A push request (`POST …/git-receive-pack`), as read by [`parse_push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    updates: Vec<RefUpdate>,
    capabilities: Vec<String>,
    pack_offset: usize,
}

impl Push {
    /// The ref updates, in the order sent.
    #[must_use]
    pub fn updates(&self) -> &[RefUpdate] {
        &self.updates
    }

    /// The capabilities the client asked for on its first update line, such as
    /// `report-status-v2` or `agent=git/2.47.0`.
    #[must_use]
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }

    /// Whether the client asked for this capability (a `name` or `name=value` entry).
    #[must_use]
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.iter().any(|cap| {
            cap == name
                || cap
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('='))
        })
    }

    /// Where the pack starts in the body: just after the command list's flush. The bytes from
    /// there on are the pack; none follow when every update is a delete.
    #[must_use]
    pub fn pack_offset(&self) -> usize {
        self.pack_offset
    }
}

/// Reads a push request body: `<old> <new> <name>` lines (the first followed by
/// `\0<capabilities>`), a flush, then the pack unless every update is a delete.
///
/// Refused: `shallow` lines (a push from a shallow clone), a push certificate, push options, an
/// object format other than SHA-1, capabilities on a later line, a delimiter where the flush
/// belongs, ref names with control characters, and bytes after the flush when no pack is due. A
/// body that is only a flush (what git sends to probe a server before a large push) gives a push
/// with no updates.
pub fn parse_push(body: &[u8]) -> Result<Push, PushRefusal> {
    let mut reader = PktReader::new(body);
    let mut updates = Vec::new();
    let mut capability_list = Vec::new();
    loop {
        let line = match reader.read()? {
            Some(PktLine::Flush) => break,
            Some(PktLine::Data(line)) => chomp(line),
            None => return Err(bad_line("the command list does not end with a flush")),
            Some(PktLine::Delim | PktLine::ResponseEnd) => {
                return Err(bad_line("the command list holds a protocol v2 packet"));
            }
        };
        if line.starts_with(b"shallow") {
            return Err(PushRefusal::ShallowPush);
        }
        let (command, caps) = split_nul(line, bad_line("a command line holds two NULs"))?;
        if command == b"push-cert" {
            return Err(PushRefusal::PushCert);
        }
        if let Some(caps) = caps {
            if !updates.is_empty() {
                return Err(bad_line("capabilities follow a command after the first"));
            }
            capability_list = capabilities(caps, bad_line("the capabilities are not plain text"))?;
        }
        updates.push(command_line(command)?);
    }
    let push = Push {
        updates,
        capabilities: capability_list,
        pack_offset: reader.position(),
    };
    if push.has_capability("push-options") {
        return Err(PushRefusal::PushOptions);
    }
    if push.has_capability("push-cert") {
        return Err(PushRefusal::PushCert);
    }
    let needs_pack = push.updates.iter().any(|update| !update.new.is_zero());
    if !needs_pack && !reader.remaining().is_empty() {
        return Err(PushRefusal::BadPack {
            detail: "data follows a command list that needs no pack",
        });
    }
    Ok(push)
}

/// Reads `<old> <new> <name>`.
fn command_line(command: &[u8]) -> Result<RefUpdate, PushRefusal> {
    let malformed = || bad_line("a command is not `<old> <new> <ref>`");
    let old = command
        .get(..40)
        .and_then(ObjectId::from_hex)
        .ok_or_else(malformed)?;
    let rest = command
        .get(40..)
        .and_then(|rest| rest.strip_prefix(b" "))
        .ok_or_else(malformed)?;
    let (new, name) = ref_line(rest).ok_or_else(malformed)?;
    Ok(RefUpdate {
        old,
        new,
        name: name.to_owned(),
    })
}

/// Decides whether a push may go through. `push` is [`parse_push`]'s reading of `body`;
/// `branch` is the one branch the run may push (without `refs/heads/`); `advertised` is
/// [`parse_advertisement`]'s reading of the server's advertisement.
///
/// Allowed only when every update names `refs/heads/<branch>` and there is exactly one; it
/// does not delete; its old value is the advertised value, or zero when the branch is not
/// advertised (creating it); the pack is well formed (`PACK`, version 2 or 3, the trailing SHA-1
/// checksum); and, when the old value is not zero, the new value equals it (a no-op) or the
/// pack's commits lead from the new commit to the old one through `parent` lines. Commits outside
/// the pack end the walk: a fast-forward whose chain runs through a commit the server already
/// holds (the pushed commit included) cannot be proven and is refused. A body that carries no
/// update and nothing after its flush (git's probe before a large push) is allowed: it changes
/// nothing.
pub fn check_push(
    push: &Push,
    body: &[u8],
    branch: &str,
    advertised: &BTreeMap<String, ObjectId>,
) -> Result<(), PushRefusal> {
    let pack = body.get(push.pack_offset..).unwrap_or_default();
    if push.updates.is_empty() && pack.is_empty() {
        return Ok(());
    }
    let allowed = format!("refs/heads/{branch}");
    if let Some(other) = push.updates.iter().find(|update| update.name != allowed) {
        return Err(PushRefusal::OtherRef {
            name: other.name.clone(),
            allowed,
        });
    }
    let [update] = push.updates.as_slice() else {
        return Err(PushRefusal::UpdateCount {
            count: push.updates.len(),
        });
    };
    if update.new.is_zero() {
        return Err(PushRefusal::Delete {
            name: update.name.clone(),
        });
    }
    let current = advertised.get(&allowed).copied().unwrap_or(ObjectId::ZERO);
    if update.old != current {
        return Err(PushRefusal::StaleOldValue {
            name: update.name.clone(),
            old: update.old,
            advertised: current,
        });
    }
    let envelope = pack::Envelope::read(pack)?;
    if update.old.is_zero() || update.old == update.new {
        return Ok(());
    }
    let graph = pack::commit_graph(&envelope, pack::Limits::DEFAULT)?;
    let refuse = |detail| PushRefusal::NotFastForward {
        name: update.name.clone(),
        old: update.old,
        new: update.new,
        detail,
    };
    match pack::walk(&graph, update.new, update.old) {
        pack::Walk::Reached => Ok(()),
        pack::Walk::NewNotInPack => Err(refuse("the pack does not hold the pushed commit")),
        pack::Walk::NotReached => Err(refuse(
            "no chain of the pack's commits leads from the pushed commit to it",
        )),
    }
}
