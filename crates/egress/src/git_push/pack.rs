//! The packfile a push carries, read as far as proving ancestry needs: the header and trailing
//! checksum, every object's extent (each object's zlib stream is inflated, and must yield exactly
//! its declared size), the commits' contents (deltified commits rebuilt from bases in the pack),
//! their ids and their `parent` lines.
//!
//! All work is bounded by the pack's length and the limits below; no declared count or size
//! is trusted to allocate.

use std::collections::{HashMap, HashSet, VecDeque};

use flate2::{Decompress, FlushDecompress, Status};
use sha1::{Digest, Sha1};

use super::{ObjectId, PushRefusal};

/// The largest commit object the check reads (1 MiB), before or after delta resolution.
pub const MAX_COMMIT_SIZE: usize = 1 << 20;
/// The largest declared size of any other object, or of a delta (256 MiB).
pub const MAX_OBJECT_SIZE: u64 = 256 << 20;
/// The most bytes the check inflates from one pack, summed over declared sizes (1 GiB).
pub const MAX_INFLATED: u64 = 1 << 30;
/// The most objects the check reads from one pack.
pub const MAX_PACK_OBJECTS: u64 = 1 << 20;
/// The most commit bytes the check holds at once (64 MiB).
pub const MAX_COMMIT_BYTES: usize = 64 << 20;

/// The bounds of one check: the constants above, or smaller ones in tests.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) commit: usize,
    pub(super) object: u64,
    pub(super) inflated: u64,
    pub(super) objects: u64,
    pub(super) held: usize,
}

impl Limits {
    /// The module's published limits.
    pub(super) const DEFAULT: Self = Self {
        commit: MAX_COMMIT_SIZE,
        object: MAX_OBJECT_SIZE,
        inflated: MAX_INFLATED,
        objects: MAX_PACK_OBJECTS,
        held: MAX_COMMIT_BYTES,
    };
}

/// `PACK`, the version and the object count.
const HEADER: usize = 12;
/// The SHA-1 of everything before it.
const TRAILER: usize = 20;

fn bad(detail: &'static str) -> PushRefusal {
    PushRefusal::BadPack { detail }
}

fn too_large(detail: &'static str) -> PushRefusal {
    PushRefusal::TooLarge { detail }
}

/// A pack whose header and checksum are valid.
pub(super) struct Envelope<'a> {
    /// The pack without its trailing checksum; object offsets count from its start.
    body: &'a [u8],
    /// The object count the header declares: a loop bound only, never an allocation size.
    count: u32,
}

impl<'a> Envelope<'a> {
    /// Checks the signature, the version (2 or 3) and the trailing SHA-1 checksum.
    pub(super) fn read(pack: &'a [u8]) -> Result<Self, PushRefusal> {
        if pack.is_empty() {
            return Err(bad("the push carries no pack"));
        }
        let Some(split) = pack
            .len()
            .checked_sub(TRAILER)
            .filter(|split| *split >= HEADER)
        else {
            return Err(bad("the pack is shorter than its header and checksum"));
        };
        let (body, checksum) = pack.split_at(split);
        if !body.starts_with(b"PACK") {
            return Err(bad("the pack does not start with `PACK`"));
        }
        let word =
            |at: usize| u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        if !matches!(word(4), 2 | 3) {
            return Err(bad("the pack's version is neither 2 nor 3"));
        }
        if Sha1::digest(body).as_slice() != checksum {
            return Err(bad(
                "the pack's trailing SHA-1 checksum does not match its contents",
            ));
        }
        Ok(Self {
            body,
            count: word(8),
        })
    }
}

/// What an object's header says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Commit,
    /// A tree, blob or tag: read only to find where the next object starts.
    Other,
    /// A delta against the object starting at this offset.
    OfsDelta(usize),
    /// A delta against the object with this id, in the pack or not.
    RefDelta(ObjectId),
}

/// An object's header.
struct Header {
    kind: Kind,
    /// The declared size of the inflated data (of the delta itself, for a delta).
    size: u64,
    /// Where the zlib stream starts.
    data: usize,
}

/// A size byte's seven low bits moved up by `shift`, if none is lost.
fn shifted(byte: u8, shift: u32) -> Option<u64> {
    let bits = u64::from(byte & 0x7f);
    let moved = bits.checked_shl(shift)?;
    (moved >> shift == bits).then_some(moved)
}

/// Reads the next byte of a header.
fn next_byte(body: &[u8], at: &mut usize) -> Result<u8, PushRefusal> {
    let byte = body
        .get(*at)
        .copied()
        .ok_or(bad("an object header is cut short"))?;
    *at += 1;
    Ok(byte)
}

/// Reads the object header at `offset`: type and size, then an offset delta's base distance or a
/// reference delta's base id.
fn header(body: &[u8], offset: usize) -> Result<Header, PushRefusal> {
    let mut at = offset;
    let mut byte = next_byte(body, &mut at)?;
    let type_bits = (byte >> 4) & 7;
    let mut size = u64::from(byte & 0x0f);
    let mut shift = 4;
    while byte & 0x80 != 0 {
        byte = next_byte(body, &mut at)?;
        size |= shifted(byte, shift).ok_or(bad("an object's size does not fit in 64 bits"))?;
        shift += 7;
    }
    let kind = match type_bits {
        1 => Kind::Commit,
        2..=4 => Kind::Other,
        6 => {
            let mut byte = next_byte(body, &mut at)?;
            let mut distance = u64::from(byte & 0x7f);
            while byte & 0x80 != 0 {
                distance = distance
                    .checked_add(1)
                    .and_then(|distance| distance.checked_mul(128))
                    .ok_or(bad("an offset delta's base distance overflows"))?;
                byte = next_byte(body, &mut at)?;
                distance |= u64::from(byte & 0x7f);
            }
            let base = usize::try_from(distance)
                .ok()
                .filter(|distance| *distance > 0)
                .and_then(|distance| offset.checked_sub(distance))
                .filter(|base| *base >= HEADER)
                .ok_or(bad("an offset delta's base lies outside the pack"))?;
            Kind::OfsDelta(base)
        }
        7 => {
            let id = body
                .get(at..at + 20)
                .ok_or(bad("an object header is cut short"))?;
            at += 20;
            let mut bytes = [0; 20];
            bytes.copy_from_slice(id);
            Kind::RefDelta(ObjectId::from_bytes(bytes))
        }
        _ => return Err(bad("an object has an invalid type")),
    };
    Ok(Header {
        kind,
        size,
        data: at,
    })
}

/// Inflates the zlib stream at the start of `input`, which must yield exactly `size` bytes (never
/// one more is produced). Returns the bytes when `keep` (else an empty vector) and the length of
/// the stream.
fn inflate(input: &[u8], size: usize, keep: bool) -> Result<(Vec<u8>, usize), PushRefusal> {
    let mut stream = Decompress::new(true);
    let mut kept = Vec::new();
    if keep {
        kept.reserve_exact(size);
    }
    let mut scratch = [0_u8; 16 * 1024];
    let mut produced = 0_usize;
    loop {
        let (read_before, written_before) = (stream.total_in(), stream.total_out());
        let consumed = usize::try_from(read_before).map_err(|_| bad("an object is too long"))?;
        let room = (size - produced + 1).min(scratch.len());
        let status = stream
            .decompress(
                input.get(consumed..).unwrap_or_default(),
                &mut scratch[..room],
                FlushDecompress::None,
            )
            .map_err(|_| bad("an object's zlib data is corrupt"))?;
        let written = usize::try_from(stream.total_out() - written_before)
            .map_err(|_| bad("an object is too long"))?;
        produced += written;
        if produced > size {
            return Err(bad("an object inflates to more than its declared size"));
        }
        if keep {
            kept.extend_from_slice(&scratch[..written]);
        }
        if status == Status::StreamEnd {
            break;
        }
        if written == 0 && stream.total_in() == read_before {
            return Err(bad("an object's zlib data is cut short"));
        }
    }
    if produced != size {
        return Err(bad("an object inflates to less than its declared size"));
    }
    let length = usize::try_from(stream.total_in()).map_err(|_| bad("an object is too long"))?;
    Ok((kept, length))
}

/// A commit of the pack, with its contents.
struct Commit {
    /// Where its object starts (for an offset delta against it).
    offset: usize,
    id: ObjectId,
    data: Vec<u8>,
}

/// A delta of the pack, not yet known to be a commit's.
struct Delta {
    offset: usize,
    /// Where its zlib stream starts.
    data: usize,
    size: u64,
}

/// What one pass over the pack's objects found.
struct Scan {
    limits: Limits,
    /// Every object's offset, ascending.
    offsets: Vec<usize>,
    commits: Vec<Commit>,
    deltas: Vec<Delta>,
    /// Deltas by the offset of their base.
    by_base_offset: HashMap<usize, Vec<usize>>,
    /// Deltas by the id of their base.
    by_base_id: HashMap<ObjectId, Vec<usize>>,
    /// Commit bytes held.
    held: usize,
}

impl Scan {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            offsets: Vec::new(),
            commits: Vec::new(),
            deltas: Vec::new(),
            by_base_offset: HashMap::new(),
            by_base_id: HashMap::new(),
            held: 0,
        }
    }

    /// Holds a commit's contents, within the limit on commit bytes.
    fn hold(&mut self, offset: usize, data: Vec<u8>) -> Result<usize, PushRefusal> {
        self.held += data.len();
        if self.held > self.limits.held {
            return Err(too_large("the pack's commits exceed 64 MiB"));
        }
        self.commits.push(Commit {
            offset,
            id: commit_id(&data),
            data,
        });
        Ok(self.commits.len() - 1)
    }

    /// Reads the object at `offset`, whose header is `header`; returns where the next starts.
    fn object(
        &mut self,
        body: &[u8],
        offset: usize,
        header: &Header,
    ) -> Result<usize, PushRefusal> {
        let stream = body.get(header.data..).unwrap_or_default();
        let length = if header.kind == Kind::Commit {
            let size = usize::try_from(header.size)
                .ok()
                .filter(|size| *size <= self.limits.commit)
                .ok_or(too_large("a commit object is larger than 1 MiB"))?;
            let (data, length) = inflate(stream, size, true)?;
            self.hold(offset, data)?;
            length
        } else {
            let size = Some(header.size)
                .filter(|size| *size <= self.limits.object)
                .and_then(|size| usize::try_from(size).ok())
                .ok_or(too_large("an object is larger than 256 MiB"))?;
            inflate(stream, size, false)?.1
        };
        let delta = self.deltas.len();
        let base = match header.kind {
            Kind::OfsDelta(base) => self.by_base_offset.entry(base).or_default(),
            Kind::RefDelta(base) => self.by_base_id.entry(base).or_default(),
            Kind::Commit | Kind::Other => return Ok(header.data + length),
        };
        base.push(delta);
        self.deltas.push(Delta {
            offset,
            data: header.data,
            size: header.size,
        });
        Ok(header.data + length)
    }
}

/// The id git gives a commit with these contents.
fn commit_id(data: &[u8]) -> ObjectId {
    let mut hasher = Sha1::new();
    hasher.update(format!("commit {}\0", data.len()).as_bytes());
    hasher.update(data);
    ObjectId::from_bytes(hasher.finalize().into())
}

/// Reads every object: their extents, the commits' contents, where the deltas are. The loop
/// ends at the declared count or, sooner, at the end of the pack.
fn scan(envelope: &Envelope<'_>, limits: Limits) -> Result<Scan, PushRefusal> {
    let body = envelope.body;
    let mut scan = Scan::new(limits);
    let mut inflated = 0_u64;
    let mut offset = HEADER;
    for index in 0..u64::from(envelope.count) {
        if offset >= body.len() {
            return Err(bad("the pack holds fewer objects than its header declares"));
        }
        if index >= limits.objects {
            return Err(too_large("the pack holds more than 1048576 objects"));
        }
        let header = header(body, offset)?;
        inflated = inflated.saturating_add(header.size);
        if inflated > limits.inflated {
            return Err(too_large("the pack's objects inflate to more than 1 GiB"));
        }
        scan.offsets.push(offset);
        offset = scan.object(body, offset, &header)?;
    }
    if offset != body.len() {
        return Err(bad("data follows the objects the pack's header declares"));
    }
    if scan
        .by_base_offset
        .keys()
        .any(|base| scan.offsets.binary_search(base).is_err())
    {
        return Err(bad("an offset delta's base is not an object of the pack"));
    }
    Ok(scan)
}

/// Rebuilds every deltified commit whose base chain ends at a commit of the pack. Each delta is
/// rebuilt at most once, when its base is.
fn resolve(body: &[u8], scan: &mut Scan) -> Result<(), PushRefusal> {
    let mut queue: VecDeque<usize> = (0..scan.commits.len()).collect();
    while let Some(base) = queue.pop_front() {
        let (offset, id) = (scan.commits[base].offset, scan.commits[base].id);
        let mut ready = scan.by_base_offset.remove(&offset).unwrap_or_default();
        ready.extend(scan.by_base_id.remove(&id).unwrap_or_default());
        for delta in ready {
            let Delta { offset, data, size } = scan.deltas[delta];
            let size = usize::try_from(size)
                .ok()
                .filter(|size| *size <= 2 * scan.limits.commit)
                .ok_or(too_large("a commit's delta is larger than 2 MiB"))?;
            let (instructions, _) = inflate(body.get(data..).unwrap_or_default(), size, true)?;
            let rebuilt = apply_delta(&scan.commits[base].data, &instructions, scan.limits.commit)?;
            queue.push_back(scan.hold(offset, rebuilt)?);
        }
    }
    Ok(())
}

/// Reads one of a delta header's two sizes.
fn delta_size(delta: &[u8], at: &mut usize) -> Result<usize, PushRefusal> {
    let mut value = 0_u64;
    let mut shift = 0;
    loop {
        let byte = *delta.get(*at).ok_or(bad("a delta's header is cut short"))?;
        *at += 1;
        value |= shifted(byte, shift).ok_or(bad("a delta's size does not fit in 64 bits"))?;
        shift += 7;
        if byte & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| bad("a delta's size does not fit"));
        }
    }
}

/// Applies git's delta format to a commit: the base's size, the result's size, then copy
/// (from the base) and insert (literal) instructions that must build exactly the result, which
/// may not exceed `max` bytes.
pub(super) fn apply_delta(base: &[u8], delta: &[u8], max: usize) -> Result<Vec<u8>, PushRefusal> {
    let mut at = 0;
    if delta_size(delta, &mut at)? != base.len() {
        return Err(bad("a delta's base size does not match its base"));
    }
    let size = delta_size(delta, &mut at)?;
    if size > max {
        return Err(too_large("a commit object is larger than 1 MiB"));
    }
    let mut out = Vec::with_capacity(size);
    while let Some(&op) = delta.get(at) {
        at += 1;
        let piece = if op & 0x80 != 0 {
            let mut field = |bits: &[(u8, u32)]| -> Result<usize, PushRefusal> {
                let mut value = 0_usize;
                for &(bit, shift) in bits {
                    if op & bit != 0 {
                        value |= usize::from(next_byte(delta, &mut at)?) << shift;
                    }
                }
                Ok(value)
            };
            let start = field(&[(0x01, 0), (0x02, 8), (0x04, 16), (0x08, 24)])?;
            let length = match field(&[(0x10, 0), (0x20, 8), (0x40, 16)])? {
                0 => 0x1_0000,
                length => length,
            };
            start
                .checked_add(length)
                .and_then(|end| base.get(start..end))
                .ok_or(bad("a delta copies from beyond its base"))?
        } else if op != 0 {
            let piece = delta
                .get(at..at + usize::from(op))
                .ok_or(bad("a delta's insert is cut short"))?;
            at += usize::from(op);
            piece
        } else {
            return Err(bad("a delta holds the reserved instruction 0"));
        };
        if out.len() + piece.len() > size {
            return Err(bad("a delta builds more than its declared size"));
        }
        out.extend_from_slice(piece);
    }
    if out.len() != size {
        return Err(bad("a delta builds less than its declared size"));
    }
    Ok(out)
}

/// Reads a commit's `parent` lines: the `tree` line comes first, the parents right after it.
fn parents(data: &[u8]) -> Result<Vec<ObjectId>, PushRefusal> {
    let id_line = |text: &[u8]| -> Option<(ObjectId, usize)> {
        let id = ObjectId::from_hex(text.get(..40)?)?;
        (text.get(40) == Some(&b'\n')).then_some((id, 41))
    };
    let malformed = || bad("a commit's tree or parent line is malformed");
    let mut rest = data.strip_prefix(b"tree ").ok_or_else(malformed)?;
    let (_, length) = id_line(rest).ok_or_else(malformed)?;
    rest = &rest[length..];
    let mut parents = Vec::new();
    while let Some(line) = rest.strip_prefix(b"parent ") {
        let (parent, length) = id_line(line).ok_or_else(malformed)?;
        parents.push(parent);
        rest = &line[length..];
    }
    Ok(parents)
}

/// Every commit of the pack (deltified ones included) and its parents.
pub(super) fn commit_graph(
    envelope: &Envelope<'_>,
    limits: Limits,
) -> Result<HashMap<ObjectId, Vec<ObjectId>>, PushRefusal> {
    let mut scan = scan(envelope, limits)?;
    resolve(envelope.body, &mut scan)?;
    scan.commits
        .iter()
        .map(|commit| Ok((commit.id, parents(&commit.data)?)))
        .collect()
}

/// How a walk from the pushed commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Walk {
    /// The old value is an ancestor.
    Reached,
    /// The pushed commit is not in the pack.
    NewNotInPack,
    /// Every chain through the pack's commits ends without meeting the old value.
    NotReached,
}

/// Walks parents breadth-first from `new`, through the pack's commits only, looking for `old`.
/// Each commit is visited at most once.
pub(super) fn walk(graph: &HashMap<ObjectId, Vec<ObjectId>>, new: ObjectId, old: ObjectId) -> Walk {
    if !graph.contains_key(&new) {
        return Walk::NewNotInPack;
    }
    let mut seen = HashSet::from([new]);
    let mut queue = VecDeque::from([new]);
    while let Some(commit) = queue.pop_front() {
        for &parent in graph.get(&commit).map(Vec::as_slice).unwrap_or_default() {
            if parent == old {
                return Walk::Reached;
            }
            if graph.contains_key(&parent) && seen.insert(parent) {
                queue.push_back(parent);
            }
        }
    }
    Walk::NotReached
}
