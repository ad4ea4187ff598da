//! The SKILL.md reader: accepted and refused inputs, tree planning and script modes.

use std::collections::BTreeMap;

use auto_swe_agents::{
    ScriptMode, TreeEntry, TreeEntryKind, parse_skill_md, plan_source, read_source,
};

#[test]
fn accepted_skill_md_inputs() {
    let cases: Vec<(&str, &str, &str, &str, &[&str])> = vec![
        (
            "---\nname: tdd\ndescription: Tests first.\n---\nWrite the test.\n",
            "tdd",
            "Tests first.",
            "Write the test.",
            &[],
        ),
        (
            "\u{feff}---\r\nname: My Skill_1.0\r\ndescription: |\r\n  Two\r\n  lines\r\n---\r\n\r\nBody\r\n",
            "My Skill_1.0",
            "Two lines",
            "Body",
            &[],
        ),
        (
            "---\nname: x\ndescription: d\nallowed-tools: [Bash]\nlicense: MIT\n---\nB",
            "x",
            "d",
            "B",
            &["allowed-tools", "license"],
        ),
        (
            "---\nname: x\ndescription: \"tab\\there\"\n---\nB",
            "x",
            "tab here",
            "B",
            &[],
        ),
    ];
    for (input, name, description, body, ignored) in cases {
        let got = parse_skill_md(input.as_bytes()).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(
            (
                got.name.as_str(),
                got.description.as_str(),
                got.body.as_str()
            ),
            (name, description, body),
            "{input:?}"
        );
        assert_eq!(got.ignored_keys, ignored, "{input:?}");
    }
}

#[test]
fn refused_skill_md_inputs() {
    let long_name = format!("---\nname: {}\ndescription: d\n---\nB", "n".repeat(201));
    let long_description = format!("---\nname: x\ndescription: {}\n---\nB", "d".repeat(1001));
    let long_body = format!("---\nname: x\ndescription: d\n---\n{}", "b".repeat(50_001));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"no front matter".to_vec(), "MISSING_FRONT_MATTER"),
        (
            b"---\nname: x\ndescription: d\nBody without a close".to_vec(),
            "MISSING_FRONT_MATTER",
        ),
        (b"---\n: : :\n---\nB".to_vec(), "INVALID_FRONT_MATTER"),
        (b"---\n- a list\n---\nB".to_vec(), "INVALID_FRONT_MATTER"),
        (b"---\ndescription: d\n---\nB".to_vec(), "INVALID_NAME"),
        (
            b"---\nname: [x]\ndescription: d\n---\nB".to_vec(),
            "INVALID_NAME",
        ),
        (
            b"---\nname: a/b\ndescription: d\n---\nB".to_vec(),
            "INVALID_NAME",
        ),
        (long_name.into_bytes(), "INVALID_NAME"),
        (b"---\nname: x\n---\nB".to_vec(), "INVALID_DESCRIPTION"),
        (
            b"---\nname: x\ndescription: 3\n---\nB".to_vec(),
            "INVALID_DESCRIPTION",
        ),
        (long_description.into_bytes(), "INVALID_DESCRIPTION"),
        (
            b"---\nname: x\ndescription: d\n---\n   \n".to_vec(),
            "EMPTY_BODY",
        ),
        (long_body.into_bytes(), "BODY_TOO_LONG"),
        (vec![0xff, 0xfe, 0x00], "NOT_UTF8"),
    ];
    for (input, code) in cases {
        let err = parse_skill_md(&input).unwrap_err();
        assert_eq!(err.code(), code, "{:?}", String::from_utf8_lossy(&input));
    }
}

fn skill_md(name: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: About {name}.\n---\nText of {name}.\n").into_bytes()
}

fn symlink(path: &str) -> TreeEntry {
    TreeEntry {
        path: path.to_owned(),
        kind: TreeEntryKind::Symlink,
    }
}

#[test]
fn a_tree_reads_into_skills_with_references_kept_and_scripts_skipped() {
    let entries = vec![
        TreeEntry::file("README.md", 10),
        TreeEntry::file("alpha/SKILL.md", 60),
        TreeEntry::file("alpha/notes.md", 5),
        TreeEntry::file("alpha/docs/extra.TXT", 5),
        TreeEntry::file("alpha/run.sh", 5),
        TreeEntry::file("alpha/huge.md", 200 * 1024),
        symlink("alpha/link.md"),
        TreeEntry::file("alpha/nested/SKILL.md", 60),
        TreeEntry::file("alpha/nested/inner.md", 5),
        TreeEntry::file("beta/SKILL.md", 60),
        TreeEntry::file("beta/bad.md", 3),
    ];
    let plans = plan_source(&entries, ScriptMode::TextOnly).unwrap();
    assert_eq!(
        plans.iter().map(|p| p.folder.as_str()).collect::<Vec<_>>(),
        ["alpha", "alpha/nested", "beta"]
    );
    let alpha = &plans[0];
    assert_eq!(alpha.references, ["alpha/notes.md", "alpha/docs/extra.TXT"]);
    let skipped: Vec<(&str, &str)> = alpha
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("run.sh", "not a .md or .txt file"),
            ("huge.md", "reference file over 100 KB"),
            ("link.md", "symlink (not followed)"),
        ]
    );
    assert_eq!(plans[1].references, ["alpha/nested/inner.md"]);
    let mut files = BTreeMap::new();
    for (path, bytes) in [
        ("alpha/SKILL.md", skill_md("alpha")),
        ("alpha/notes.md", b"notes".to_vec()),
        ("alpha/docs/extra.TXT", b"extra".to_vec()),
        ("alpha/nested/SKILL.md", skill_md("nested")),
        ("alpha/nested/inner.md", b"inner".to_vec()),
        ("beta/SKILL.md", skill_md("beta")),
        ("beta/bad.md", vec![0xff, 0xfe]),
    ] {
        files.insert(path.to_owned(), bytes);
    }
    let read = read_source(&plans, &files);
    assert!(read.iter().all(|s| s.errors.is_empty()), "{read:?}");
    assert_eq!(read[0].skill.as_ref().unwrap().body, "Text of alpha.");
    let refs: Vec<(&str, &str)> = read[0]
        .reference_files
        .iter()
        .map(|r| (r.path.as_str(), r.content.as_str()))
        .collect();
    assert_eq!(refs, [("notes.md", "notes"), ("docs/extra.TXT", "extra")]);
    assert_eq!(read[2].skipped.last().unwrap().reason, "not valid UTF-8");
}

#[test]
fn reject_mode_refuses_a_folder_with_non_text_files() {
    let entries = vec![
        TreeEntry::file("a/SKILL.md", 10),
        TreeEntry::file("a/tool.py", 10),
        TreeEntry::file("b/SKILL.md", 10),
        TreeEntry::file("b/ok.md", 10),
    ];
    let plans = plan_source(&entries, ScriptMode::Reject).unwrap();
    assert_eq!(
        plans[0].errors,
        ["script mode REJECT: folder holds non-text files: tool.py"]
    );
    assert!(plans[1].errors.is_empty());
    let files: BTreeMap<String, Vec<u8>> = [
        ("a/SKILL.md".to_owned(), skill_md("a")),
        ("b/SKILL.md".to_owned(), skill_md("b")),
        ("b/ok.md".to_owned(), b"ok".to_vec()),
    ]
    .into();
    let read = read_source(&plans, &files);
    assert!(read[0].skill.is_none());
    assert!(read[1].skill.is_some());
}

#[test]
fn duplicate_names_are_an_error_on_both() {
    let entries = vec![
        TreeEntry::file("a/SKILL.md", 10),
        TreeEntry::file("b/SKILL.md", 10),
        TreeEntry::file("c/SKILL.md", 10),
    ];
    let plans = plan_source(&entries, ScriptMode::TextOnly).unwrap();
    let files: BTreeMap<String, Vec<u8>> = [
        ("a/SKILL.md".to_owned(), skill_md("Same")),
        ("b/SKILL.md".to_owned(), skill_md("same.")),
        ("c/SKILL.md".to_owned(), b"broken".to_vec()),
    ]
    .into();
    let read = read_source(&plans, &files);
    assert!(read[0].skill.is_none() && read[1].skill.is_none());
    assert!(read[0].errors[0].contains("also named"));
    assert_eq!(
        read[2].errors,
        ["MISSING_FRONT_MATTER: SKILL.md has no front matter"]
    );
}

#[test]
fn unsafe_or_oversized_sources_are_refused() {
    for path in ["/abs/SKILL.md", "a/../SKILL.md", "a\\SKILL.md"] {
        let err = plan_source(&[TreeEntry::file(path, 1)], ScriptMode::TextOnly).unwrap_err();
        assert_eq!(err.code(), "SKILL_SOURCE_UNSAFE_PATH", "{path}");
    }
    let many: Vec<TreeEntry> = (0..101)
        .map(|i| TreeEntry::file(&format!("s{i}/SKILL.md"), 1))
        .collect();
    assert_eq!(
        plan_source(&many, ScriptMode::TextOnly).unwrap_err().code(),
        "SKILL_SOURCE_TOO_MANY_SKILLS"
    );
    let big = vec![TreeEntry::file("a/SKILL.md", 3 * 1024 * 1024)];
    assert_eq!(
        plan_source(&big, ScriptMode::TextOnly).unwrap_err().code(),
        "SKILL_SOURCE_TOO_LARGE"
    );
    // References are dropped before any skill when the text budget runs short.
    let mut tight = vec![TreeEntry::file("a/SKILL.md", 2 * 1024 * 1024 - 10)];
    tight.push(TreeEntry::file("a/ref.md", 50));
    let plans = plan_source(&tight, ScriptMode::TextOnly).unwrap();
    assert!(plans[0].references.is_empty());
    assert_eq!(plans[0].skipped[0].reason, "source text budget reached");
    // More than 50 reference files: the rest are skipped and listed.
    let mut lots = vec![TreeEntry::file("a/SKILL.md", 1)];
    lots.extend((0..52).map(|i| TreeEntry::file(&format!("a/r{i:02}.md"), 1)));
    let plans = plan_source(&lots, ScriptMode::TextOnly).unwrap();
    assert_eq!(plans[0].references.len(), 50);
    assert_eq!(plans[0].skipped.len(), 2);
    // A folder name with a control character is refused.
    let plans = plan_source(
        &[TreeEntry::file("bad\u{7}/SKILL.md", 1)],
        ScriptMode::TextOnly,
    )
    .unwrap();
    assert_eq!(
        plans[0].errors,
        ["folder name contains a control character"]
    );
}
