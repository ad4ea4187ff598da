//! Advertisements, push requests and the push rule, on hand-made bodies. Real packs made by git
//! are in `pack_tests`.

use std::collections::BTreeMap;

use super::tests::{CAPS, FLUSH, code, decide, empty_pack, oid, pkt, pkts, push_body, seal};
use super::*;

fn main_at(id: ObjectId) -> BTreeMap<String, ObjectId> {
    BTreeMap::from([("refs/heads/main".to_owned(), id)])
}

/// An advertisement body as git-http-backend sends it, with these ref lines.
fn advertisement(lines: &[&str]) -> Vec<u8> {
    let mut all = vec!["# service=git-receive-pack\n", FLUSH];
    all.extend_from_slice(lines);
    all.push(FLUSH);
    pkts(&all)
}

fn first_line(id: ObjectId, name: &str, caps: &str) -> String {
    format!("{id} {name}\0{caps}\n")
}

#[test]
fn advertisement_of_several_refs() {
    let body = advertisement(&[
        &first_line(
            oid(1),
            "refs/heads/main",
            "report-status ofs-delta object-format=sha1",
        ),
        &format!("{} refs/heads/feature\n", oid(2)),
        &format!("{} .have\n", oid(3)),
        &format!("{} .have\n", oid(4)),
        &format!("{} refs/tags/v1", oid(5)),
    ]);
    let expected = BTreeMap::from([
        ("refs/heads/main".to_owned(), oid(1)),
        ("refs/heads/feature".to_owned(), oid(2)),
        ("refs/tags/v1".to_owned(), oid(5)),
    ]);
    assert_eq!(parse_advertisement(&body), Ok(expected));
}

#[test]
fn advertisement_of_an_empty_repository_is_empty() {
    let caps_only = first_line(ObjectId::ZERO, "capabilities^{}", "report-status");
    assert_eq!(
        parse_advertisement(&advertisement(&[&caps_only])),
        Ok(BTreeMap::new())
    );
    let versioned = advertisement(&["version 1\n", &caps_only]);
    assert_eq!(parse_advertisement(&versioned), Ok(BTreeMap::new()));
    let with_ref = advertisement(&[&caps_only, &format!("{} refs/heads/main\n", oid(1))]);
    assert_eq!(code(&parse_advertisement(&with_ref)), "BAD_ADVERTISEMENT");
    let nonzero = advertisement(&[&first_line(oid(1), "capabilities^{}", "report-status")]);
    assert_eq!(code(&parse_advertisement(&nonzero)), "BAD_ADVERTISEMENT");
}

#[test]
fn advertisement_framing_is_strict() {
    let first = first_line(oid(1), "refs/heads/main", "report-status");
    let mut unterminated = advertisement(&[&first]);
    unterminated.truncate(unterminated.len() - 4);
    let mut trailing = advertisement(&[&first]);
    trailing.extend_from_slice(b"0000");
    let mut delim = advertisement(&[&first]);
    delim.splice(delim.len() - 4.., *b"0001");
    let cases = [
        (pkts(&[&first, FLUSH]), "no preamble"),
        (
            pkts(&["# service=git-upload-pack\n", FLUSH, &first, FLUSH]),
            "upload-pack preamble",
        ),
        (
            pkts(&["# service=git-receive-pack\n", &first, FLUSH]),
            "no flush after the preamble",
        ),
        (advertisement(&[]), "no capabilities line"),
        (advertisement(&["version 1\n"]), "only a version line"),
        (unterminated, "no final flush"),
        (trailing, "bytes after the final flush"),
        (delim, "a delimiter"),
        (b"".to_vec(), "empty body"),
    ];
    for (body, why) in cases {
        let result = parse_advertisement(&body);
        assert_eq!(code(&result), "BAD_ADVERTISEMENT", "{why}: {result:?}");
    }
}

#[test]
fn advertisement_lines_are_strict() {
    let first = first_line(oid(1), "refs/heads/main", "report-status");
    let later = |text: &str| advertisement(&[&first, text]);
    let cases = [
        (
            advertisement(&[&format!("{} refs/heads/main\n", oid(1))]),
            "no capabilities",
        ),
        (
            advertisement(&[&first_line(oid(1), "refs/heads/main", "a\0b")]),
            "two NULs",
        ),
        (
            advertisement(&[&first_line(oid(1), "", "report-status")]),
            "empty name",
        ),
        (
            advertisement(&[&format!("{}  refs/heads/main\0x", oid(1))]),
            "two spaces",
        ),
        (
            advertisement(&[&first_line(oid(1), "refs/heads/a\tb", "x")]),
            "control character",
        ),
        (
            advertisement(&[&first_line(oid(1), "refs/heads/main", "a\x07b")]),
            "control in caps",
        ),
        (later(&format!("{} refs/heads/main", oid(2))), "a ref twice"),
        (
            later(&format!("{} refs/heads/x\0caps", oid(2))),
            "NUL on a later line",
        ),
        (later("zz refs/heads/x"), "short id"),
        (later(&format!("{}refs/heads/x", oid(2))), "no space"),
    ];
    for (body, why) in cases {
        let result = parse_advertisement(&body);
        assert_eq!(code(&result), "BAD_ADVERTISEMENT", "{why}: {result:?}");
    }
    let mut not_utf8 = pkts(&["# service=git-receive-pack\n", FLUSH, &first]);
    not_utf8.extend(pkt(
        &[oid(2).to_string().as_bytes(), b" refs/heads/\xff"].concat()
    ));
    not_utf8.extend_from_slice(b"0000");
    assert_eq!(
        code(&parse_advertisement(&not_utf8)),
        "BAD_ADVERTISEMENT",
        "not UTF-8"
    );
    let mut bad_pkt = advertisement(&[&first]);
    bad_pkt.splice(bad_pkt.len() - 4.., *b"00z0");
    assert_eq!(code(&parse_advertisement(&bad_pkt)), "BAD_PKT_LINE");
}

#[test]
fn advertisement_of_a_sha256_repository_is_refused() {
    let id = "a".repeat(64);
    let caps = "report-status object-format=sha256";
    let body = advertisement(&[&format!("{id} refs/heads/main\0{caps}\n")]);
    let refusal = parse_advertisement(&body).unwrap_err();
    assert_eq!(refusal.code(), "SHA256_REPOSITORY");
    assert!(refusal.to_string().contains("sha256"), "{refusal}");
}

#[test]
fn push_reads_updates_capabilities_and_the_pack_offset() {
    let pack = empty_pack();
    let updates = [
        (oid(1), oid(2), "refs/heads/main"),
        (ObjectId::ZERO, oid(3), "refs/heads/new"),
    ];
    let body = push_body(&updates, CAPS, &pack);
    let push = parse_push(&body).unwrap();
    let first = RefUpdate {
        old: oid(1),
        new: oid(2),
        name: "refs/heads/main".to_owned(),
    };
    let second = RefUpdate {
        old: ObjectId::ZERO,
        new: oid(3),
        name: "refs/heads/new".to_owned(),
    };
    assert_eq!(push.updates(), [first, second]);
    let caps = [
        "report-status-v2",
        "side-band-64k",
        "object-format=sha1",
        "agent=git/2.47.3",
    ];
    assert_eq!(push.capabilities(), caps);
    assert!(push.has_capability("agent"));
    assert!(push.has_capability("side-band-64k"));
    assert!(!push.has_capability("side-band"));
    assert!(!push.has_capability("report-status"));
    assert_eq!(push.pack_offset(), body.len() - pack.len());
    assert_eq!(&body[push.pack_offset()..], &pack[..]);
}

#[test]
fn push_lines_lose_one_newline() {
    let first = format!("{} {} refs/heads/main\0report-status\n", oid(1), oid(2));
    let second = format!("{} {} refs/heads/x\n", oid(1), ObjectId::ZERO);
    let push = parse_push(&pkts(&[&first, &second, FLUSH])).unwrap();
    assert_eq!(push.capabilities(), ["report-status"]);
    assert_eq!(push.updates()[1].name, "refs/heads/x");
    let two = format!("{} {} refs/heads/main\n\n", oid(1), oid(2));
    assert_eq!(code(&parse_push(&pkts(&[&two, FLUSH]))), "BAD_PKT_LINE");
}

#[test]
fn push_of_only_a_flush_is_the_probe() {
    let push = parse_push(b"0000").unwrap();
    assert!(push.updates().is_empty());
    assert_eq!(push.pack_offset(), 4);
    assert_eq!(decide(b"0000", &main_at(oid(1))), Ok(()));
    assert_eq!(code(&parse_push(b"0000PACK")), "BAD_PACK");
}

#[test]
fn pushes_using_unsupported_features_are_refused() {
    let command = format!("{} {} refs/heads/main", oid(1), oid(2));
    let first = format!("{command}\0{CAPS}");
    let shallow = format!("shallow {}", oid(9));
    let cert = format!("push-cert\0{CAPS}");
    let one = [(oid(1), oid(2), "refs/heads/main")];
    let cases = [
        (pkts(&[&shallow, &first, FLUSH]), "SHALLOW_PUSH"),
        (
            pkts(&[&cert, "certificate version 0.1\n", "push-cert-end\n", FLUSH]),
            "PUSH_CERT",
        ),
        (
            push_body(&one, "report-status push-cert=123-abc", &[]),
            "PUSH_CERT",
        ),
        (
            push_body(&one, "report-status push-options", &[]),
            "PUSH_OPTIONS",
        ),
        (
            push_body(&one, "object-format=sha256", &[]),
            "SHA256_REPOSITORY",
        ),
        (
            push_body(&one, "object-format=sha1 object-format=sha256", &[]),
            "SHA256_REPOSITORY",
        ),
    ];
    for (body, expected) in cases {
        let result = parse_push(&body);
        assert_eq!(code(&result), expected, "{result:?}");
    }
}

#[test]
fn malformed_push_requests_are_refused() {
    let command = format!("{} {} refs/heads/main", oid(1), oid(2));
    let first = format!("{command}\0{CAPS}");
    let (one, two) = (oid(1), oid(2));
    let cases = [
        (pkt(command.as_bytes()), "no flush"),
        (
            [pkt(command.as_bytes()), b"0001".to_vec()].concat(),
            "delimiter for flush",
        ),
        (
            [pkt(command.as_bytes()), b"0002".to_vec()].concat(),
            "response end for flush",
        ),
        (b"00040000".to_vec(), "empty line"),
        (pkts(&[&command, &first, FLUSH]), "caps on the second line"),
        (pkts(&[&format!("{command}\0a\0b"), FLUSH]), "two NULs"),
        (
            pkts(&[&format!("{command}\0a\tb"), FLUSH]),
            "control character in caps",
        ),
        (
            pkts(&[&format!("{one} {two} refs/heads/a\rb"), FLUSH]),
            "control character in name",
        ),
        (pkts(&[&format!("{one} {two} "), FLUSH]), "empty name"),
        (
            pkts(&[&format!("{one} {two}  refs/heads/main"), FLUSH]),
            "two spaces",
        ),
        (pkts(&[&format!("{one} {two}"), FLUSH]), "no name"),
        (
            pkts(&[&format!("{one}x{two} refs/heads/main"), FLUSH]),
            "no space",
        ),
        (
            pkts(&[&format!("{} {two} refs/heads/main", "g".repeat(40)), FLUSH]),
            "non-hex id",
        ),
        (
            pkts(&[
                &format!("{} {} main", "a".repeat(64), "b".repeat(64)),
                FLUSH,
            ]),
            "64-hex ids",
        ),
        (pkt(&[command.as_bytes(), b" \xff"].concat()), "not UTF-8"),
        (b"".to_vec(), "empty body"),
        (b"00".to_vec(), "cut-short length"),
    ];
    for (body, why) in cases {
        let result = parse_push(&body);
        assert_eq!(code(&result), "BAD_PKT_LINE", "{why}: {result:?}");
    }
    let delete = format!("{} {} refs/heads/main", oid(1), ObjectId::ZERO);
    let pack_after_delete = [pkts(&[&delete, FLUSH]), empty_pack()].concat();
    assert_eq!(code(&parse_push(&pack_after_delete)), "BAD_PACK");
}

#[test]
fn check_refuses_other_refs_and_update_counts() {
    let pack = empty_pack();
    let push = |updates: &[(ObjectId, ObjectId, &str)]| push_body(updates, CAPS, &pack);
    let main = (oid(1), oid(2), "refs/heads/main");
    let cases = [
        (
            push(&[(oid(1), oid(2), "refs/heads/other")]),
            "OTHER_REF",
            "another branch",
        ),
        (
            push(&[(oid(1), oid(2), "refs/heads/mainx")]),
            "OTHER_REF",
            "a longer name",
        ),
        (
            push(&[(oid(1), oid(2), "refs/heads/main/x")]),
            "OTHER_REF",
            "below the branch",
        ),
        (
            push(&[(oid(1), oid(2), "refs/heads/Main")]),
            "OTHER_REF",
            "case",
        ),
        (
            push(&[(oid(1), oid(2), "refs/tags/main")]),
            "OTHER_REF",
            "a tag",
        ),
        (
            push(&[(oid(1), oid(2), "main")]),
            "OTHER_REF",
            "a short name",
        ),
        (push(&[(oid(1), oid(2), "HEAD")]), "OTHER_REF", "HEAD"),
        (
            push(&[main, (oid(1), oid(2), "refs/heads/x")]),
            "OTHER_REF",
            "good, then other",
        ),
        (
            push(&[(oid(1), oid(2), "refs/heads/x"), main]),
            "OTHER_REF",
            "other, then good",
        ),
        (push(&[main, main]), "UPDATE_COUNT", "the branch twice"),
    ];
    for (body, expected, why) in cases {
        let result = decide(&body, &main_at(oid(1)));
        assert_eq!(code(&result), expected, "{why}: {result:?}");
    }
    let other = parse_push(&push(&[(oid(1), oid(2), "refs/heads/x")])).unwrap();
    let refusal = check_push(&other, &[], "main", &main_at(oid(1))).unwrap_err();
    let text = "push refused (OTHER_REF): refs/heads/x may not be pushed; only refs/heads/main may";
    assert_eq!(refusal.to_string(), text);
}

#[test]
fn check_refuses_deletes_stale_values_and_missing_packs() {
    let pack = empty_pack();
    let one = |old, new| push_body(&[(old, new, "refs/heads/main")], CAPS, &pack);
    let advertised = main_at(oid(1));
    let delete = push_body(&[(oid(1), ObjectId::ZERO, "refs/heads/main")], CAPS, &[]);
    let no_pack = push_body(&[(oid(1), oid(2), "refs/heads/main")], CAPS, &[]);
    let cases = [
        (delete, "DELETE", "delete"),
        (
            one(ObjectId::ZERO, oid(2)),
            "STALE_OLD_VALUE",
            "create an advertised branch",
        ),
        (one(oid(3), oid(2)), "STALE_OLD_VALUE", "another old value"),
        (no_pack, "BAD_PACK", "no pack"),
        (one(oid(1), oid(2)), "NOT_FAST_FORWARD", "an empty pack"),
    ];
    for (body, expected, why) in cases {
        let result = decide(&body, &advertised);
        assert_eq!(code(&result), expected, "{why}: {result:?}");
    }
    let created = decide(&one(oid(3), oid(2)), &BTreeMap::new()).unwrap_err();
    let zero = ObjectId::ZERO;
    let text = format!(
        "push refused (STALE_OLD_VALUE): refs/heads/main is at {zero} on the server, \
         but the push updates it from {}",
        oid(3)
    );
    assert_eq!(
        created.to_string(),
        text,
        "an unadvertised branch must be created from zero"
    );
}

#[test]
fn check_allows_a_no_op_and_a_creation_with_a_valid_pack() {
    let pack = empty_pack();
    let no_op = push_body(&[(oid(1), oid(1), "refs/heads/main")], CAPS, &pack);
    assert_eq!(decide(&no_op, &main_at(oid(1))), Ok(()));
    let create = push_body(&[(ObjectId::ZERO, oid(1), "refs/heads/main")], CAPS, &pack);
    assert_eq!(decide(&create, &BTreeMap::new()), Ok(()));
    let other = BTreeMap::from([("refs/heads/other".to_owned(), oid(7))]);
    assert_eq!(decide(&create, &other), Ok(()), "other refs do not matter");
    let mut broken = pack.clone();
    broken[5] ^= 1;
    let create = push_body(
        &[(ObjectId::ZERO, oid(1), "refs/heads/main")],
        CAPS,
        &broken,
    );
    assert_eq!(code(&decide(&create, &BTreeMap::new())), "BAD_PACK");
    let no_op = push_body(&[(oid(1), oid(1), "refs/heads/main")], CAPS, &broken);
    assert_eq!(code(&decide(&no_op, &main_at(oid(1)))), "BAD_PACK");
}

#[test]
fn pack_envelope_is_checked() {
    let create = |pack: &[u8]| {
        let body = push_body(&[(ObjectId::ZERO, oid(1), "refs/heads/main")], CAPS, pack);
        decide(&body, &BTreeMap::new())
    };
    let good = empty_pack();
    assert_eq!(create(&good), Ok(()));
    assert_eq!(
        create(&seal(b"PACK\0\0\0\x03\0\0\0\0".to_vec())),
        Ok(()),
        "version 3"
    );
    for (pack, why) in [
        (seal(b"PACK\0\0\0\x01\0\0\0\0".to_vec()), "version 1"),
        (seal(b"PACK\0\0\0\x04\0\0\0\0".to_vec()), "version 4"),
        (seal(b"KCAP\0\0\0\x02\0\0\0\0".to_vec()), "signature"),
        (good[..good.len() - 1].to_vec(), "cut checksum"),
        (good[..12].to_vec(), "no checksum"),
        (b"PACK".to_vec(), "only the signature"),
        ([&good[..], b"x"].concat(), "a byte after the checksum"),
    ] {
        assert_eq!(code(&create(&pack)), "BAD_PACK", "{why}");
    }
}

#[test]
fn refusals_name_their_code_and_what_was_wrong() {
    let main = || "refs/heads/main".to_owned();
    let refusals = [
        PushRefusal::OtherRef {
            name: "refs/heads/x".to_owned(),
            allowed: main(),
        },
        PushRefusal::UpdateCount { count: 2 },
        PushRefusal::Delete { name: main() },
        PushRefusal::StaleOldValue {
            name: main(),
            old: oid(1),
            advertised: oid(2),
        },
        PushRefusal::NotFastForward {
            name: main(),
            old: oid(1),
            new: oid(2),
            detail: "d",
        },
        PushRefusal::BadPktLine { detail: "d" },
        PushRefusal::BadAdvertisement { detail: "d" },
        PushRefusal::BadPack { detail: "d" },
        PushRefusal::Sha256Repository {
            format: "sha256".to_owned(),
        },
        PushRefusal::ShallowPush,
        PushRefusal::PushCert,
        PushRefusal::PushOptions,
        PushRefusal::TooLarge { detail: "d" },
    ];
    let mut codes = Vec::new();
    for refusal in &refusals {
        let text = refusal.to_string();
        assert!(
            text.starts_with(&format!("push refused ({}): ", refusal.code())),
            "{text}"
        );
        codes.push(refusal.code());
    }
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), refusals.len(), "codes are distinct");
    let (old, new) = (oid(1), oid(2));
    let text = format!(
        "push refused (NOT_FAST_FORWARD): refs/heads/main is not a fast-forward of {old} to {new}: d"
    );
    assert_eq!(refusals[4].to_string(), text);
    assert_eq!(
        refusals[2].to_string(),
        "push refused (DELETE): refs/heads/main may not be deleted"
    );
}
