//! Packs crafted byte by byte to attack the reader: zlib bombs, lying headers, malicious deltas,
//! and the limits that bound the work. Commit deltas built here are checked against git's own
//! reading of them.

use std::collections::HashMap;
use std::io::Write as _;

use flate2::Compression;
use flate2::write::ZlibEncoder;

use super::pack::{self, Envelope, Limits};
use super::pack_tests::{Git, main_at, update};
use super::tests::{code, decide, oid, seal};
use super::*;

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// An object: its header (type, declared size), then `base` (a delta's base), then `stream`.
fn object(kind: u8, size: u64, base: &[u8], stream: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut byte = (kind << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
    out.extend_from_slice(base);
    out.extend_from_slice(stream);
    out
}

/// git's encoding of an offset delta's distance to its base.
fn distance(mut value: u64) -> Vec<u8> {
    let mut bytes = vec![(value & 0x7f) as u8];
    value >>= 7;
    while value != 0 {
        value -= 1;
        bytes.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    bytes.reverse();
    bytes
}

/// A version 2 pack of these objects.
fn pack_of(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut pack = b"PACK\0\0\0\x02".to_vec();
    pack.extend_from_slice(&u32::try_from(objects.len()).unwrap().to_be_bytes());
    for object in objects {
        pack.extend_from_slice(object);
    }
    seal(pack)
}

fn graph(pack: &[u8], limits: Limits) -> Result<HashMap<ObjectId, Vec<ObjectId>>, PushRefusal> {
    pack::commit_graph(&Envelope::read(pack)?, limits)
}

fn commit_text(parent: Option<ObjectId>, message: &str) -> Vec<u8> {
    let tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    let parent = parent
        .map(|parent| format!("parent {parent}\n"))
        .unwrap_or_default();
    format!(
        "tree {tree}\n{parent}author t <t@example.test> 0 +0000\ncommitter t <t@example.test> 0 +0000\n\n{message}\n"
    )
    .into_bytes()
}

fn plain_commit(data: &[u8]) -> Vec<u8> {
    object(1, data.len() as u64, &[], &zlib(data))
}

#[test]
fn zlib_bombs_are_refused() {
    let zeros = zlib(&vec![0; 8 << 20]);
    let cases = [
        (
            object(3, 1000, &[], &zeros),
            "BAD_PACK",
            "a blob declaring 1000 bytes inflating to 8 MiB",
        ),
        (
            object(1, 1000, &[], &zeros),
            "BAD_PACK",
            "a commit declaring 1000 bytes inflating to 8 MiB",
        ),
        (
            object(3, 0, &[], &zlib(b"x")),
            "BAD_PACK",
            "a blob declaring nothing",
        ),
        (
            object(3, 1 << 40, &[], &zeros),
            "TOO_LARGE",
            "a blob declaring 1 TiB",
        ),
        (
            object(3, u64::MAX, &[], &zeros),
            "TOO_LARGE",
            "a blob declaring 2^64-1",
        ),
        (
            object(2, (256 << 20) + 1, &[], &zeros),
            "TOO_LARGE",
            "a tree over 256 MiB",
        ),
        (
            object(1, (1 << 20) + 1, &[], &zeros),
            "TOO_LARGE",
            "a commit over 1 MiB",
        ),
        (
            object(1, 8 << 20, &[], &zeros),
            "TOO_LARGE",
            "a commit declaring its true 8 MiB",
        ),
        (
            object(3, (8 << 20) + 1, &[], &zeros),
            "BAD_PACK",
            "a blob declaring one byte more",
        ),
        (
            object(6, 1000, &distance(1), &zeros),
            "BAD_PACK",
            "a delta whose base is in the header",
        ),
    ];
    for (object, expected, why) in cases {
        let result = graph(&pack_of(&[object]), Limits::DEFAULT);
        assert_eq!(
            code(&result),
            expected,
            "{why}: {:?}",
            result.map(|graph| graph.len())
        );
    }
    let exact = object(3, 8 << 20, &[], &zeros);
    assert_eq!(
        graph(&pack_of(&[exact]), Limits::DEFAULT).map(|graph| graph.len()),
        Ok(0)
    );
}

#[test]
fn object_headers_are_checked() {
    let commit = plain_commit(&commit_text(None, "root"));
    let mut overlong = vec![0x90];
    overlong.extend([0xff; 9]);
    overlong.push(0x01);
    let cases = [
        (vec![0x00], "type 0"),
        (object(5, 1, &[], &zlib(b"x")), "type 5"),
        (overlong, "size over 64 bits"),
        (vec![0x9f], "header cut short"),
        (object(7, 1, &[1; 10], &[]), "base id cut short"),
        (object(3, 1, &[], &zlib(b"x")[..3]), "stream cut short"),
        (object(3, 1, &[], b"not zlib"), "not zlib"),
    ];
    for (object, why) in cases {
        let result = graph(&pack_of(&[commit.clone(), object]), Limits::DEFAULT);
        assert_eq!(code(&result), "BAD_PACK", "{why}");
    }
    let mut no_tree = commit_text(None, "x");
    no_tree[0] = b'T';
    let mut bad_parent = commit_text(Some(oid(1)), "x");
    bad_parent[53] = b'z';
    for (data, why) in [
        (no_tree, "no tree line"),
        (bad_parent, "a parent that is not hex"),
    ] {
        let result = graph(&pack_of(&[plain_commit(&data)]), Limits::DEFAULT);
        assert_eq!(code(&result), "BAD_PACK", "{why}");
    }
}

/// A delta: base size, result size, instructions.
fn delta(base: usize, result: usize, instructions: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for mut value in [base, result] {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    out.extend_from_slice(instructions);
    out
}

/// Instructions that copy `base[..length]` (`length` < 256) then insert `literal` (in pieces of
/// at most 127 bytes, the largest insert).
fn copy_then_insert(length: usize, literal: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | 0x10, u8::try_from(length).unwrap()];
    for piece in literal.chunks(127) {
        out.push(u8::try_from(piece.len()).unwrap());
        out.extend_from_slice(piece);
    }
    out
}

#[test]
fn hand_made_commit_deltas_are_rebuilt_like_git_does() {
    let git = Git::new();
    let root = commit_text(None, "root");
    let root_id: ObjectId = {
        let out = git.run_in(
            &git.repo(),
            &["hash-object", "-t", "commit", "--stdin"],
            Some(&root),
            &[],
        );
        String::from_utf8(out).unwrap().trim().parse().unwrap()
    };
    // child: root's text with the tree line kept, then a parent line and the rest re-inserted.
    let child = commit_text(Some(root_id), "child");
    let child_id: ObjectId = {
        let out = git.run_in(
            &git.repo(),
            &["hash-object", "-t", "commit", "--stdin"],
            Some(&child),
            &[],
        );
        String::from_utf8(out).unwrap().trim().parse().unwrap()
    };
    let grandchild = commit_text(Some(child_id), "grandchild");
    let first = plain_commit(&root);
    let child_delta = delta(root.len(), child.len(), &copy_then_insert(46, &child[46..]));
    let second = object(
        6,
        child_delta.len() as u64,
        &distance(first.len() as u64),
        &zlib(&child_delta),
    );
    let grandchild_delta = delta(
        child.len(),
        grandchild.len(),
        &copy_then_insert(46, &grandchild[46..]),
    );
    let third = object(
        7,
        grandchild_delta.len() as u64,
        child_id.as_bytes(),
        &zlib(&grandchild_delta),
    );
    let pack = pack_of(&[third, first, second]);
    let listing = git.verify_pack(&pack).unwrap();
    assert!(
        listing.contains(&child_id.to_string()),
        "git reads the same child:\n{listing}"
    );
    let graph = graph(&pack, Limits::DEFAULT).unwrap();
    assert_eq!(graph.len(), 3);
    assert_eq!(graph[&root_id], []);
    assert_eq!(graph[&child_id], [root_id]);
    let grandchild_id = graph
        .iter()
        .find(|(_, parents)| parents.as_slice() == [child_id])
        .map(|(id, _)| *id)
        .unwrap();
    assert!(
        listing.contains(&grandchild_id.to_string()),
        "git reads the same grandchild:\n{listing}"
    );
    let body = update(root_id, grandchild_id, &pack);
    assert_eq!(decide(&body, &main_at(root_id)), Ok(()));
}

#[test]
fn malicious_deltas_are_refused() {
    let root = commit_text(None, "root");
    let first = plain_commit(&root);
    let with = |instructions: &[u8]| {
        let header = distance(first.len() as u64);
        let second = object(6, instructions.len() as u64, &header, &zlib(instructions));
        graph(&pack_of(&[first.clone(), second]), Limits::DEFAULT)
    };
    let target = commit_text(Some(oid(7)), "child");
    let valid = copy_then_insert(46, &target[46..]);
    let (base, size) = (root.len(), target.len());
    let good = with(&delta(base, size, &valid)).unwrap();
    assert_eq!(good.len(), 2, "the control delta is rebuilt");
    assert!(good.values().any(|parents| parents.as_slice() == [oid(7)]));
    let beyond = [&[0x80 | 0x01 | 0x10, 0xff, 46][..], &valid[2..]].concat();
    let whole = [&[0x80][..], &valid[2..]].concat();
    let cases = [
        (delta(base + 1, size, &valid), "BAD_PACK", "wrong base size"),
        (
            delta(base - 1, size, &valid),
            "BAD_PACK",
            "base size too small",
        ),
        (
            delta(base, size, &beyond),
            "BAD_PACK",
            "copy beyond the base",
        ),
        (
            delta(base, size, &whole),
            "BAD_PACK",
            "copy of 0x10000 from a short base",
        ),
        (
            delta(base, size, &[&valid[..], &[0x00]].concat()),
            "BAD_PACK",
            "reserved instruction",
        ),
        (
            delta(base, size - 1, &valid),
            "BAD_PACK",
            "builds more than declared",
        ),
        (
            delta(base, size + 1, &valid),
            "BAD_PACK",
            "builds less than declared",
        ),
        (
            delta(base, size, &valid[..valid.len() - 1]),
            "BAD_PACK",
            "insert cut short",
        ),
        (
            delta(base, (1 << 20) + 1, &valid),
            "TOO_LARGE",
            "result over 1 MiB",
        ),
        (vec![0x80; 12], "BAD_PACK", "size over 64 bits"),
        (vec![0x81], "BAD_PACK", "header cut short"),
        (vec![], "BAD_PACK", "empty delta"),
    ];
    for (instructions, expected, why) in cases {
        let result = with(&instructions);
        assert_eq!(code(&result), expected, "{why}: {result:?}");
    }
}

#[test]
fn offset_deltas_must_point_at_an_earlier_object() {
    let first = plain_commit(&commit_text(None, "root"));
    let instructions = delta(5, 1, &[0x01, b'x']);
    let stream = zlib(&instructions);
    for (gap, why) in [
        (first.len() as u64 - 1, "mid-object"),
        (first.len() as u64 + 1, "before the header"),
        (1 << 62, "far away"),
        (0, "itself"),
    ] {
        let second = object(6, instructions.len() as u64, &distance(gap), &stream);
        let result = graph(&pack_of(&[first.clone(), second]), Limits::DEFAULT);
        assert_eq!(code(&result), "BAD_PACK", "{why}");
    }
}

#[test]
fn limits_bound_the_work() {
    let commits: Vec<Vec<u8>> = (0..3)
        .map(|index| plain_commit(&commit_text(None, &index.to_string())))
        .collect();
    let pack = pack_of(&commits);
    let size = commit_text(None, "0").len();
    assert_eq!(
        graph(&pack, Limits::DEFAULT).map(|graph| graph.len()),
        Ok(3)
    );
    for (limits, why) in [
        (
            Limits {
                objects: 2,
                ..Limits::DEFAULT
            },
            "objects",
        ),
        (
            Limits {
                inflated: 3 * size as u64 - 1,
                ..Limits::DEFAULT
            },
            "inflated bytes",
        ),
        (
            Limits {
                held: 3 * size - 1,
                ..Limits::DEFAULT
            },
            "held commit bytes",
        ),
        (
            Limits {
                commit: size - 1,
                ..Limits::DEFAULT
            },
            "commit size",
        ),
    ] {
        assert_eq!(code(&graph(&pack, limits)), "TOO_LARGE", "{why}");
    }
    let blob = object(3, 10, &[], &zlib(b"0123456789"));
    let limits = Limits {
        object: 9,
        ..Limits::DEFAULT
    };
    assert_eq!(
        code(&graph(&pack_of(std::slice::from_ref(&blob)), limits)),
        "TOO_LARGE"
    );
    assert_eq!(
        graph(
            &pack_of(&[blob]),
            Limits {
                object: 10,
                ..Limits::DEFAULT
            }
        )
        .map(|graph| graph.len()),
        Ok(0)
    );
}
