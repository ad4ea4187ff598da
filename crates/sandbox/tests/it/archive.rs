//! `assert_safe_archive` against hostile archives built entry by entry.

use auto_swe_sandbox::{UnsafeArchiveReason, assert_safe_archive};
use tar::{Builder, EntryType, Header};

enum E<'a> {
    File(&'a str),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    Device(&'a str),
    Fifo(&'a str),
}

/// Builds an archive with raw header names, so `..` and absolute paths get through the builder.
fn build(entries: &[E<'_>]) -> Vec<u8> {
    let mut b = Builder::new(Vec::new());
    for e in entries {
        let mut h = Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(0);
        let (name, kind, link) = match e {
            E::File(n) => (*n, EntryType::Regular, None),
            E::Dir(n) => (*n, EntryType::Directory, None),
            E::Symlink(n, t) => (*n, EntryType::Symlink, Some(*t)),
            E::HardLink(n, t) => (*n, EntryType::Link, Some(*t)),
            E::Device(n) => (*n, EntryType::Char, None),
            E::Fifo(n) => (*n, EntryType::Fifo, None),
        };
        h.set_entry_type(kind);
        {
            let gnu = h.as_gnu_mut().unwrap();
            gnu.name[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(t) = link {
                gnu.linkname[..t.len()].copy_from_slice(t.as_bytes());
            }
        }
        h.set_cksum();
        b.append(&h, std::io::empty()).unwrap();
    }
    b.into_inner().unwrap()
}

fn reason(entries: &[E<'_>]) -> Option<UnsafeArchiveReason> {
    match assert_safe_archive(build(entries).as_slice()) {
        Ok(_) => None,
        Err(auto_swe_sandbox::SandboxError::UnsafeArchive { reason, .. }) => Some(reason),
        Err(other) => panic!("unexpected error {other}"),
    }
}

#[test]
fn a_plain_tree_passes() {
    let summary = assert_safe_archive(
        build(&[
            E::Dir("src/"),
            E::File("src/main.rs"),
            E::Symlink("src/link", "main.rs"),
            E::Symlink("docs", "src/../src"),
        ])
        .as_slice(),
    )
    .unwrap();
    assert_eq!(
        (summary.files, summary.directories, summary.symlinks),
        (1, 1, 2)
    );
}

#[test]
fn hostile_entries_are_refused() {
    type Why = UnsafeArchiveReason;
    let cases: Vec<(Vec<E<'_>>, Why)> = vec![
        (vec![E::File("/etc/passwd")], Why::AbsolutePath),
        (vec![E::File("../escape")], Why::ParentComponent),
        (vec![E::File("a/../../escape")], Why::ParentComponent),
        (
            vec![E::File("a"), E::HardLink("b", "/etc/shadow")],
            Why::HardLink,
        ),
        (vec![E::HardLink("b", "a")], Why::HardLink),
        (vec![E::Device("dev/sda")], Why::Device),
        (vec![E::Fifo("pipe")], Why::Device),
        (vec![E::Symlink("etc", "/etc")], Why::AbsoluteSymlink),
        (vec![E::Symlink("up", "../..")], Why::ClimbingSymlink),
        (vec![E::Symlink("a/b/up", "../../..")], Why::ClimbingSymlink),
        // Entries below a symlink the archive made, in either order.
        (
            vec![E::Symlink("x", "y"), E::File("x/passwd")],
            Why::BelowSymlink,
        ),
        (
            vec![E::File("x/passwd"), E::Symlink("x", "y")],
            Why::BelowSymlink,
        ),
        (vec![E::Symlink("x", "y"), E::Dir("x/")], Why::BelowSymlink),
        // A chain through another link of the archive (`d/l1 -> ..` then `l2 -> d/l1/..`).
        (
            vec![
                E::Dir("d/"),
                E::Symlink("d/l1", ".."),
                E::Symlink("l2", "d/l1/.."),
            ],
            Why::ClimbingSymlink,
        ),
    ];
    for (entries, expected) in cases {
        assert_eq!(reason(&entries), Some(expected));
    }
}

#[test]
fn garbage_is_unreadable_not_accepted() {
    let mut bytes = build(&[E::File("ok")]);
    bytes[0..512].fill(0xff);
    assert!(assert_safe_archive(bytes.as_slice()).is_err());
}
