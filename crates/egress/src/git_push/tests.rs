//! Request classification, object ids and pkt-lines; the helpers the other test files share.

use std::collections::BTreeMap;

use sha1::{Digest, Sha1};

use super::*;

/// An id whose 20 bytes are all `byte`.
pub(super) fn oid(byte: u8) -> ObjectId {
    ObjectId::from_bytes([byte; 20])
}

/// One pkt-line with this payload.
pub(super) fn pkt(payload: &[u8]) -> Vec<u8> {
    let mut line = format!("{:04x}", payload.len() + 4).into_bytes();
    line.extend_from_slice(payload);
    line
}

/// Stands for a flush in [`pkts`].
pub(super) const FLUSH: &str = "0000";

/// These texts as pkt-lines, [`FLUSH`] as a flush.
pub(super) fn pkts(lines: &[&str]) -> Vec<u8> {
    let encode = |line: &&str| {
        if *line == FLUSH {
            FLUSH.as_bytes().to_vec()
        } else {
            pkt(line.as_bytes())
        }
    };
    lines.iter().flat_map(encode).collect()
}

/// The capabilities git 2.47 asks for when pushing over HTTP.
pub(super) const CAPS: &str = "report-status-v2 side-band-64k object-format=sha1 agent=git/2.47.3";

/// A push body: the updates (capabilities on the first), a flush, then `pack`.
pub(super) fn push_body(
    updates: &[(ObjectId, ObjectId, &str)],
    caps: &str,
    pack: &[u8],
) -> Vec<u8> {
    let mut body = Vec::new();
    for (index, (old, new, name)) in updates.iter().enumerate() {
        let mut line = format!("{old} {new} {name}").into_bytes();
        if index == 0 {
            line.push(0);
            line.extend_from_slice(caps.as_bytes());
        }
        body.extend(pkt(&line));
    }
    body.extend_from_slice(FLUSH.as_bytes());
    body.extend_from_slice(pack);
    body
}

/// Appends a pack's trailing SHA-1 checksum.
pub(super) fn seal(mut pack: Vec<u8>) -> Vec<u8> {
    let checksum = Sha1::digest(&pack);
    pack.extend_from_slice(&checksum);
    pack
}

/// A valid pack with no objects.
pub(super) fn empty_pack() -> Vec<u8> {
    seal(b"PACK\0\0\0\x02\0\0\0\0".to_vec())
}

/// Parses and checks a push for branch `main` against `advertised`.
pub(super) fn decide(
    body: &[u8],
    advertised: &BTreeMap<String, ObjectId>,
) -> Result<(), PushRefusal> {
    let push = parse_push(body)?;
    check_push(&push, body, "main", advertised)
}

/// The code of a refusal, or `ALLOWED`.
pub(super) fn code<T>(result: &Result<T, PushRefusal>) -> &'static str {
    result
        .as_ref()
        .map_or_else(PushRefusal::code, |_| "ALLOWED")
}

#[test]
fn classify_recognises_the_four_smart_http_requests() {
    use GitService::{ReceivePack, UploadPack};
    let cases = [
        (
            "GET",
            "/o/r/info/refs",
            Some("service=git-upload-pack"),
            UploadPack,
            true,
        ),
        (
            "GET",
            "/o/r/info/refs",
            Some("service=git-receive-pack"),
            ReceivePack,
            true,
        ),
        ("POST", "/o/r/git-upload-pack", None, UploadPack, false),
        ("POST", "/o/r/git-receive-pack", None, ReceivePack, false),
    ];
    for (method, path, query, service, advertisement) in cases {
        let request = classify_request(method, path, query).unwrap();
        assert_eq!(request.repo(), "o/r", "{method} {path}");
        assert_eq!(request.service(), service, "{method} {path}");
        assert_eq!(request.is_advertisement(), advertisement, "{method} {path}");
        let kind = if advertisement {
            GitRequestKind::Advertisement
        } else {
            GitRequestKind::Rpc
        };
        assert_eq!(request.kind(), kind);
    }
    assert_eq!(UploadPack.name(), "git-upload-pack");
    assert_eq!(ReceivePack.name(), "git-receive-pack");
}

#[test]
fn classify_normalises_the_repository() {
    let repo =
        |path: &str| classify_request("POST", path, None).map(|request| request.repo().to_owned());
    let long = "/Octo-Org/my_repo.v2.git/git-receive-pack";
    assert_eq!(repo(long).as_deref(), Some("Octo-Org/my_repo.v2"));
    assert_eq!(
        repo("/o/r.git.git/git-receive-pack").as_deref(),
        Some("o/r.git")
    );
    assert_eq!(
        repo("/o/r.GIT/git-receive-pack").as_deref(),
        Some("o/r.GIT")
    );
    assert_eq!(
        repo("/o/..git/git-receive-pack"),
        None,
        "`..git` loses `.git`, leaving `.`"
    );
    assert_eq!(
        repo("/o/...git/git-receive-pack"),
        None,
        "`...git` leaves `..`"
    );
    assert_eq!(
        repo("/o/....git/git-receive-pack").as_deref(),
        Some("o/...")
    );
}

#[test]
fn classify_refuses_bad_repositories() {
    for path in [
        "/o/git-receive-pack",
        "/o/r/x/git-receive-pack",
        "//o/r/git-receive-pack",
        "o/r/git-receive-pack",
        "/o//git-receive-pack",
        "/o/.git/git-receive-pack",
        "/./r/git-receive-pack",
        "/../r/git-receive-pack",
        "/o/../git-receive-pack",
        "/o/./git-receive-pack",
        "/o/r/../git-receive-pack",
        "/o/r/.git/git-receive-pack",
        "/o/r//git-receive-pack",
        "/o/r /git-receive-pack",
        "/o/r+x/git-receive-pack",
        "/o/r~/git-receive-pack",
        "/o/r\\x/git-receive-pack",
        "/o/r:x/git-receive-pack",
        "/ö/r/git-receive-pack",
        "/o/r%2egit/git-receive-pack",
        "/o%2Fr/git-receive-pack",
        "/o/%72/git-receive-pack",
        "/o/r/git-receive-pack%00",
        "/o/r/git%2Dreceive-pack",
    ] {
        assert_eq!(classify_request("POST", path, None), None, "{path}");
    }
}

#[test]
fn classify_refuses_other_methods_and_paths() {
    let receive = Some("service=git-receive-pack");
    for (method, path, query) in [
        ("HEAD", "/o/r/info/refs", receive),
        ("get", "/o/r/info/refs", receive),
        ("POST", "/o/r/info/refs", receive),
        ("PUT", "/o/r/git-receive-pack", None),
        ("GET", "/o/r/git-receive-pack", None),
        ("post", "/o/r/git-receive-pack", None),
        ("GET", "/o/r/info/refs/", receive),
        ("GET", "/o/r/INFO/refs", receive),
        ("GET", "/o/r/info/refs%3Fservice=git-receive-pack", None),
        ("POST", "/o/r/git-receive-pack/", None),
        ("POST", "/o/r/Git-Receive-Pack", None),
        ("POST", "/o/r/git-upload-archive", None),
        ("GET", "/o/r/HEAD", None),
        ("GET", "/o/r/objects/info/packs", None),
        (
            "GET",
            "/o/r/objects/12/3456789012345678901234567890123456789a",
            None,
        ),
        ("GET", "/o/r/objects/pack/pack-1.pack", None),
        ("POST", "/o/r/info/lfs/objects/batch", None),
        ("GET", "/o/r/info/lfs/locks", None),
        ("GET", "/o/r", None),
        ("GET", "/", receive),
        ("GET", "", receive),
    ] {
        assert_eq!(
            classify_request(method, path, query),
            None,
            "{method} {path} {query:?}"
        );
    }
}

#[test]
fn classify_takes_exactly_one_service_parameter() {
    for query in [
        None,
        Some(""),
        Some("service=git-receive-pack&service=git-receive-pack"),
        Some("service=git-upload-pack&service=git-receive-pack"),
        Some("service=git-receive-pack&x=1"),
        Some("x=1&service=git-receive-pack"),
        Some("service=git-receive-pack&"),
        Some("service=git-receive-pack;x=1"),
        Some("service=git-archive"),
        Some("service=git-receive-pack "),
        Some("Service=git-receive-pack"),
        Some("service=GIT-RECEIVE-PACK"),
        Some("service=git%2Dreceive-pack"),
        Some("service"),
    ] {
        assert_eq!(
            classify_request("GET", "/o/r/info/refs", query),
            None,
            "{query:?}"
        );
    }
    for query in [Some(""), Some("service=git-receive-pack"), Some("x")] {
        assert_eq!(
            classify_request("POST", "/o/r/git-receive-pack", query),
            None,
            "{query:?}"
        );
        assert_eq!(
            classify_request("POST", "/o/r/git-upload-pack", query),
            None,
            "{query:?}"
        );
    }
}

#[test]
fn same_repo_ignores_ascii_case_only() {
    assert!(same_repo("Octo/Widgets", "octo/widgets"));
    assert!(!same_repo("octo/widgets", "octo/widget"));
    assert!(!same_repo("octo/widgets", "octo/widgets2"));
    assert!(!same_repo("octo/widgets", "other/widgets"));
}

#[test]
fn object_ids_read_and_print_hex() {
    let text = "0123456789abcdef0123456789ABCDEF01234567";
    let id: ObjectId = text.parse().unwrap();
    assert_eq!(id.to_string(), text.to_ascii_lowercase());
    assert_eq!(id.as_bytes()[..3], [0x01, 0x23, 0x45]);
    assert_eq!(
        format!("{id:?}"),
        format!("ObjectId({})", text.to_ascii_lowercase())
    );
    assert_eq!(ObjectId::ZERO.to_string(), "0".repeat(40));
    assert!(ObjectId::ZERO.is_zero());
    assert!(!id.is_zero());
    let bad = [
        String::new(),
        "0123".to_owned(),
        "0".repeat(39),
        "0".repeat(41),
        format!("{}g", "0".repeat(39)),
        " ".repeat(40),
        format!("+{}", "0".repeat(39)),
    ];
    for bad in bad {
        assert_eq!(bad.parse::<ObjectId>(), Err(InvalidObjectId), "{bad:?}");
    }
    assert_eq!(
        InvalidObjectId.to_string(),
        "an object id is 40 hexadecimal digits"
    );
}

#[test]
fn pkt_lines_special_lengths() {
    let mut reader = PktReader::new(b"000000010002000400050x0006ab");
    assert_eq!(reader.read(), Ok(Some(PktLine::Flush)));
    assert_eq!(reader.read(), Ok(Some(PktLine::Delim)));
    assert_eq!(reader.read(), Ok(Some(PktLine::ResponseEnd)));
    assert_eq!(reader.read(), Ok(Some(PktLine::Data(b""))));
    assert_eq!(reader.read(), Ok(Some(PktLine::Data(b"0"))));
    assert_eq!(reader.position(), 21);
    assert_eq!(reader.remaining(), b"x0006ab");
    assert_eq!(code(&reader.read()), "BAD_PKT_LINE", "`x000` is not hex");
    assert_eq!(reader.position(), 21, "an error does not advance");
    let mut reader = PktReader::new(b"0006ab");
    assert_eq!(reader.read(), Ok(Some(PktLine::Data(b"ab"))));
    assert_eq!(reader.read(), Ok(None));
    assert_eq!(reader.read(), Ok(None));
}

#[test]
fn pkt_lines_refuse_bad_lengths() {
    for (input, why) in [
        (&b"0003"[..], "length 3"),
        (b"0003abc", "length 3 with bytes after"),
        (b"000", "cut-short length"),
        (b"0", "cut-short length"),
        (b"0005", "payload missing"),
        (b"0009abcd", "payload cut short"),
        (b"fff1", "over 65520"),
        (b"ffff", "over 65520"),
        (b"00g0", "non-hex"),
        (b"+004", "sign"),
        (b" 004", "space"),
        (b"-001", "negative"),
        (b"\x000\x000", "NULs"),
    ] {
        let mut reader = PktReader::new(input);
        assert_eq!(code(&reader.read()), "BAD_PKT_LINE", "{why}: {input:?}");
    }
    // Length 3 is refused as what it is, not as an over-long line.
    let refusal = PktReader::new(b"0003").read().unwrap_err();
    assert!(
        refusal.to_string().contains("invalid length 3"),
        "{refusal}"
    );
}

#[test]
fn pkt_lines_accept_the_largest_line_and_upper_case_hex() {
    let mut input = b"fff0".to_vec();
    input.resize(MAX_PKT_LINE, b'x');
    let mut reader = PktReader::new(&input);
    assert!(matches!(reader.read(), Ok(Some(PktLine::Data(payload))) if payload.len() == 65_516));
    assert_eq!(reader.read(), Ok(None));
    let mut reader = PktReader::new(b"000Aabcdef");
    assert_eq!(reader.read(), Ok(Some(PktLine::Data(b"abcdef"))));
    let mut cut = input.clone();
    cut.pop();
    assert_eq!(code(&PktReader::new(&cut).read()), "BAD_PKT_LINE");
}

#[test]
fn pkts_helper_writes_flushes_and_lines() {
    assert_eq!(pkts(&["ab", FLUSH, "c\n"]), b"0006ab00000006c\n");
}
