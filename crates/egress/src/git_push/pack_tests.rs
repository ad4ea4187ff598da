//! Pushes whose packs are made by the host's git (`git pack-objects`, as `git push` runs it),
//! and exchanges with git's own `git http-backend` showing that the request bodies built here are
//! what a git host accepts and that its advertisements read as expected.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::pack::{self, Envelope, Limits};
use super::tests::{CAPS, code, decide, push_body, seal};
use super::*;

#[expect(
    clippy::disallowed_methods,
    reason = "the tests build real packs with the host's git"
)]
pub(super) fn git_command() -> Command {
    Command::new("git")
}

/// A scratch directory holding a work repository `repo`, with git isolated from the host's
/// configuration.
pub(super) struct Git {
    root: tempfile::TempDir,
}

impl Git {
    pub(super) fn new() -> Self {
        let git = Self {
            root: tempfile::tempdir().unwrap(),
        };
        git.run_in(
            git.root.path(),
            &["init", "-q", "-b", "main", "repo"],
            None,
            &[],
        );
        git
    }

    pub(super) fn repo(&self) -> PathBuf {
        self.root.path().join("repo")
    }

    /// Runs git in `dir` with `env` added, feeding `input`; returns its standard output and
    /// fails the test when git fails.
    pub(super) fn run_in(
        &self,
        dir: &Path,
        args: &[&str],
        input: Option<&[u8]>,
        env: &[(&str, &str)],
    ) -> Vec<u8> {
        let output = self.try_run_in(dir, args, input, env);
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    pub(super) fn try_run_in(
        &self,
        dir: &Path,
        args: &[&str],
        input: Option<&[u8]>,
        env: &[(&str, &str)],
    ) -> std::process::Output {
        let mut command = git_command();
        command
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.root.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_OBJECT_DIRECTORY")
            .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
            .envs(env.iter().copied())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.test"])
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let writer = input.map(|input| {
            let mut pipe = child.stdin.take().unwrap();
            let input = input.to_vec();
            std::thread::spawn(move || pipe.write_all(&input))
        });
        let output = child.wait_with_output().unwrap();
        if let Some(writer) = writer {
            writer.join().unwrap().unwrap();
        }
        output
    }

    pub(super) fn run(&self, args: &[&str]) -> Vec<u8> {
        self.run_in(&self.repo(), args, None, &[])
    }

    pub(super) fn rev(&self, rev: &str) -> ObjectId {
        let out = self.run(&["rev-parse", "--verify", rev]);
        String::from_utf8(out).unwrap().trim().parse().unwrap()
    }

    /// Writes `file`, commits everything with `message`, returns the new commit.
    pub(super) fn commit_with(&self, file: &str, text: &str, message: &str) -> ObjectId {
        std::fs::write(self.repo().join(file), text).unwrap();
        self.run(&["add", "-A"]);
        self.run(&["commit", "-q", "-m", message]);
        self.rev("HEAD")
    }

    pub(super) fn commit(&self, file: &str, text: &str) -> ObjectId {
        self.commit_with(file, text, &format!("write {file}: {text}"))
    }

    /// The pack `git push` sends for `new` when the server has `exclude`:
    /// `git pack-objects --revs --stdout` fed `new` and `^exclude` lines.
    pub(super) fn pack(&self, new: ObjectId, exclude: &[ObjectId], options: &[&str]) -> Vec<u8> {
        let revs: String = std::iter::once(format!("{new}\n"))
            .chain(exclude.iter().map(|old| format!("^{old}\n")))
            .collect();
        let mut args = vec!["pack-objects", "--revs", "--stdout", "-q"];
        args.extend_from_slice(options);
        let pack = self.run_in(&self.repo(), &args, Some(revs.as_bytes()), &[]);
        assert!(pack.starts_with(b"PACK"), "git made a pack");
        pack
    }

    /// `git verify-pack -v` on a pack, after indexing it (which fails for a thin pack).
    pub(super) fn verify_pack(&self, pack: &[u8]) -> Result<String, String> {
        let path = self.root.path().join("check.pack");
        std::fs::write(&path, pack).unwrap();
        let path = path.to_str().unwrap();
        let indexed = self.try_run_in(&self.repo(), &["index-pack", path], None, &[]);
        if !indexed.status.success() {
            return Err(String::from_utf8_lossy(&indexed.stderr).into_owned());
        }
        let listing = self.run(&["verify-pack", "-v", &path.replace(".pack", ".idx")]);
        Ok(String::from_utf8(listing).unwrap())
    }
}

pub(super) fn main_at(id: ObjectId) -> BTreeMap<String, ObjectId> {
    BTreeMap::from([("refs/heads/main".to_owned(), id)])
}

pub(super) fn update(old: ObjectId, new: ObjectId, pack: &[u8]) -> Vec<u8> {
    push_body(&[(old, new, "refs/heads/main")], CAPS, pack)
}

/// A file of `lines` numbered lines, line `changed` altered: big enough for git to deltify.
fn text(lines: usize, changed: usize) -> String {
    (0..lines)
        .map(|line| {
            if line == changed {
                format!("line {line} changed\n")
            } else {
                format!("line {line}\n")
            }
        })
        .collect()
}

#[test]
fn fast_forward_of_several_commits_is_allowed() {
    let git = Git::new();
    let a = git.commit("a", "1");
    let b = git.commit("b", "2");
    let c = git.commit("a", "3");
    let d = git.commit("c", "4");
    let pack = git.pack(d, &[a], &[]);
    let body = update(a, d, &pack);
    assert_eq!(decide(&body, &main_at(a)), Ok(()));
    assert_eq!(code(&decide(&body, &main_at(b))), "STALE_OLD_VALUE");
    let middle = update(a, c, &git.pack(c, &[a], &["--delta-base-offset"]));
    assert_eq!(decide(&middle, &main_at(a)), Ok(()));
    let graph = pack::commit_graph(&Envelope::read(&pack).unwrap(), Limits::DEFAULT).unwrap();
    assert_eq!(graph.len(), 3, "b, c and d are in the pack; a is not");
    assert_eq!(graph[&d], [c]);
    assert_eq!(graph[&c], [b]);
    assert_eq!(graph[&b], [a]);
}

#[test]
fn thin_fast_forward_is_allowed() {
    let git = Git::new();
    let a = git.commit("big", &text(400, 0));
    git.commit("big", &text(400, 100));
    let c = git.commit("big", &text(400, 200));
    let pack = git.pack(c, &[a], &["--thin", "--delta-base-offset"]);
    let unresolved = git.verify_pack(&pack).unwrap_err();
    assert!(
        unresolved.contains("unresolved delta"),
        "the pack is thin: {unresolved}"
    );
    assert_eq!(decide(&update(a, c, &pack), &main_at(a)), Ok(()));
}

#[test]
fn deltified_commits_are_rebuilt() {
    let git = Git::new();
    let body = "a long, repeated body line for git to find deltas between commits\n".repeat(60);
    let base = git.commit_with("f", "0", &format!("subject 0\n\n{body}"));
    let mut commits = Vec::new();
    for index in 1..=6 {
        commits.push(git.commit_with(
            "f",
            &index.to_string(),
            &format!("subject {index}\n\n{body}"),
        ));
    }
    let tip = *commits.last().unwrap();
    for options in [&[][..], &["--delta-base-offset"]] {
        let pack = git.pack(tip, &[base], options);
        let listing = git.verify_pack(&pack).unwrap();
        let deltified_commits = listing
            .lines()
            .filter(|line| line.split_whitespace().nth(1) == Some("commit"))
            .filter(|line| line.split_whitespace().count() == 7)
            .count();
        assert!(
            deltified_commits >= 3,
            "git deltified commits ({options:?}):\n{listing}"
        );
        let graph = pack::commit_graph(&Envelope::read(&pack).unwrap(), Limits::DEFAULT).unwrap();
        assert_eq!(
            graph.len(),
            commits.len(),
            "every commit is rebuilt ({options:?})"
        );
        for (index, commit) in commits.iter().enumerate() {
            let parent = if index == 0 { base } else { commits[index - 1] };
            assert_eq!(graph[commit], [parent]);
        }
        assert_eq!(
            decide(&update(base, tip, &pack), &main_at(base)),
            Ok(()),
            "{options:?}"
        );
    }
}

#[test]
fn merge_whose_second_parent_is_outside_the_pack_is_allowed() {
    let git = Git::new();
    let a = git.commit("a", "1");
    git.run(&["checkout", "-q", "-b", "side"]);
    let side = git.commit("side", "s");
    git.run(&["checkout", "-q", "main"]);
    let b = git.commit("b", "2");
    git.run(&["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
    let merge = git.rev("HEAD");
    assert_eq!(git.rev("HEAD^1"), b);
    assert_eq!(git.rev("HEAD^2"), side);
    let pack = git.pack(merge, &[a, side], &["--thin"]);
    assert_eq!(decide(&update(a, merge, &pack), &main_at(a)), Ok(()));
    let graph = pack::commit_graph(&Envelope::read(&pack).unwrap(), Limits::DEFAULT).unwrap();
    assert!(
        !graph.contains_key(&side),
        "the second parent is outside the pack"
    );
    let to_side = update(side, merge, &pack);
    assert_eq!(
        decide(&to_side, &main_at(side)),
        Ok(()),
        "the second parent is an ancestor too"
    );
}

#[test]
fn ancestry_through_a_commit_outside_the_pack_is_not_proven() {
    let git = Git::new();
    let a = git.commit("a", "1");
    let b = git.commit("a", "2");
    let c = git.commit("a", "3");
    let pack = git.pack(c, &[b], &[]);
    let refusal = decide(&update(a, c, &pack), &main_at(a)).unwrap_err();
    assert_eq!(refusal.code(), "NOT_FAST_FORWARD", "{refusal}");
    assert!(refusal.to_string().contains("no chain"), "{refusal}");
    assert_eq!(
        decide(&update(b, c, &pack), &main_at(b)),
        Ok(()),
        "the same pack proves b..c"
    );
}

#[test]
fn rewritten_history_is_not_a_fast_forward() {
    let git = Git::new();
    let a = git.commit("a", "1");
    let b = git.commit("a", "2");
    git.run(&["reset", "-q", "--hard", &a.to_string()]);
    let c = git.commit("a", "rewritten");
    let advertised = main_at(b);
    for pack in [
        git.pack(c, &[b], &[]),
        git.pack(c, &[a], &["--thin"]),
        git.pack(c, &[], &[]),
    ] {
        let refusal = decide(&update(b, c, &pack), &advertised).unwrap_err();
        assert_eq!(refusal.code(), "NOT_FAST_FORWARD", "{refusal}");
        assert_eq!(
            refusal.to_string(),
            format!(
                "push refused (NOT_FAST_FORWARD): refs/heads/main is not a fast-forward of {b} to {c}: \
                 no chain of the pack's commits leads from the pushed commit to it"
            )
        );
    }
    let back = update(b, a, &git.pack(a, &[b], &[]));
    assert_eq!(
        code(&decide(&back, &advertised)),
        "NOT_FAST_FORWARD",
        "moving back is refused"
    );
}

#[test]
fn a_pack_without_the_pushed_commit_is_refused() {
    let git = Git::new();
    let a = git.commit("a", "1");
    let b = git.commit("a", "2");
    let c = git.commit("a", "3");
    let pack = git.pack(b, &[a], &[]);
    let refusal = decide(&update(a, c, &pack), &main_at(a)).unwrap_err();
    assert_eq!(refusal.code(), "NOT_FAST_FORWARD");
    assert!(
        refusal
            .to_string()
            .contains("does not hold the pushed commit"),
        "{refusal}"
    );
}

#[test]
fn other_refs_creation_and_deletion_with_real_packs() {
    let git = Git::new();
    let a = git.commit("a", "1");
    let b = git.commit("a", "2");
    let pack = git.pack(b, &[a], &[]);
    let advertised = main_at(a);
    let other = push_body(&[(a, b, "refs/heads/other")], CAPS, &pack);
    assert_eq!(code(&decide(&other, &advertised)), "OTHER_REF");
    let both = push_body(
        &[
            (a, b, "refs/heads/main"),
            (ObjectId::ZERO, b, "refs/heads/x"),
        ],
        CAPS,
        &pack,
    );
    assert_eq!(code(&decide(&both, &advertised)), "OTHER_REF");
    let tag = push_body(&[(ObjectId::ZERO, b, "refs/tags/main")], CAPS, &pack);
    assert_eq!(code(&decide(&tag, &advertised)), "OTHER_REF");
    let create_advertised = update(ObjectId::ZERO, b, &pack);
    assert_eq!(
        code(&decide(&create_advertised, &advertised)),
        "STALE_OLD_VALUE"
    );
    let create = update(ObjectId::ZERO, b, &git.pack(b, &[], &[]));
    assert_eq!(
        decide(&create, &BTreeMap::new()),
        Ok(()),
        "creating the branch"
    );
    let delete = update(a, ObjectId::ZERO, &[]);
    assert_eq!(code(&decide(&delete, &advertised)), "DELETE");
}

/// A fast-forward of a few commits: (a, d, pack of d ^a).
fn sample_push(git: &Git) -> (ObjectId, ObjectId, Vec<u8>) {
    let a = git.commit("a", "1");
    git.commit("b", "2");
    let d = git.commit("a", "3");
    (a, d, git.pack(d, &[a], &[]))
}

#[test]
fn tampered_packs_are_refused() {
    let git = Git::new();
    let (a, d, pack) = sample_push(&git);
    assert_eq!(decide(&update(a, d, &pack), &main_at(a)), Ok(()));
    for at in [
        4,
        9,
        12,
        20,
        pack.len() / 2,
        pack.len() - 21,
        pack.len() - 1,
    ] {
        let mut tampered = pack.clone();
        tampered[at] ^= 0x40;
        let refusal = decide(&update(a, d, &tampered), &main_at(a)).unwrap_err();
        assert_eq!(refusal.code(), "BAD_PACK", "byte {at}: {refusal}");
    }
    let body_end = pack.len() - 20;
    for (at, detail) in [
        (12, "an object has an invalid type"),
        (14, "an object's zlib data is corrupt"),
        (body_end / 2, "an object's zlib data is corrupt"),
        (body_end - 4, "an object's zlib data is corrupt"),
        (body_end - 1, "an object's zlib data is corrupt"),
    ] {
        let mut tampered = pack[..body_end].to_vec();
        tampered[at] ^= 0x40;
        let resealed = seal(tampered);
        let result = decide(&update(a, d, &resealed), &main_at(a));
        assert_eq!(
            result,
            Err(PushRefusal::BadPack { detail }),
            "byte {at}, checksum redone"
        );
    }
}

#[test]
fn truncated_packs_are_refused() {
    let git = Git::new();
    let (a, d, pack) = sample_push(&git);
    for keep in [
        0,
        4,
        11,
        12,
        31,
        40,
        pack.len() / 2,
        pack.len() - 20,
        pack.len() - 1,
    ] {
        let result = decide(&update(a, d, &pack[..keep]), &main_at(a));
        assert_eq!(code(&result), "BAD_PACK", "{keep} bytes: {result:?}");
    }
    let body_end = pack.len() - 20;
    for keep in [12, 13, body_end / 2, body_end - 1] {
        let resealed = seal(pack[..keep].to_vec());
        let result = decide(&update(a, d, &resealed), &main_at(a));
        assert_eq!(
            code(&result),
            "BAD_PACK",
            "{keep} bytes, checksum redone: {result:?}"
        );
    }
}

/// The pack with its object count replaced and its checksum redone.
fn recount(pack: &[u8], count: u32) -> Vec<u8> {
    let mut body = pack[..pack.len() - 20].to_vec();
    body[8..12].copy_from_slice(&count.to_be_bytes());
    seal(body)
}

#[test]
fn object_counts_are_not_trusted() {
    let git = Git::new();
    let (a, d, pack) = sample_push(&git);
    let count = u32::from_be_bytes(pack[8..12].try_into().unwrap());
    for (claimed, why) in [
        (u32::MAX, "2^32-1"),
        (count + 1, "one more"),
        (count - 1, "one fewer"),
        (0, "none"),
    ] {
        let result = decide(&update(a, d, &recount(&pack, claimed)), &main_at(a));
        assert_eq!(code(&result), "BAD_PACK", "{why}: {result:?}");
    }
    assert_eq!(
        decide(&update(a, d, &recount(&pack, count)), &main_at(a)),
        Ok(())
    );
}

/// Runs `git http-backend` as a web server would, for the repositories under the scratch root;
/// returns the response body.
fn http_backend(git: &Git, method: &str, path: &str, query: &str, body: &[u8]) -> Vec<u8> {
    let root = git.root.path().to_str().unwrap().to_owned();
    let length = body.len().to_string();
    let content_type = "application/x-git-receive-pack-request";
    let env = [
        ("GIT_PROJECT_ROOT", root.as_str()),
        ("GIT_HTTP_EXPORT_ALL", "1"),
        ("REMOTE_USER", "t"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REQUEST_METHOD", method),
        ("PATH_INFO", path),
        ("QUERY_STRING", query),
        ("CONTENT_TYPE", content_type),
        ("CONTENT_LENGTH", length.as_str()),
    ];
    let out = git.run_in(git.root.path(), &["http-backend"], Some(body), &env);
    let end = out
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap();
    out[end + 4..].to_vec()
}

#[test]
fn git_http_backend_accepts_what_the_guard_allows() {
    let git = Git::new();
    let root = git.root.path();
    let server = root.join("octo/server.git");
    git.run_in(
        root,
        &["init", "-q", "--bare", "-b", "main", "octo/server.git"],
        None,
        &[],
    );
    let a = git.commit("a", "1");
    git.run(&["push", "-q", server.to_str().unwrap(), "main"]);
    let b = git.commit("a", "2");
    let c = git.commit("b", "3");

    let refs = "/octo/server.git/info/refs";
    let request = classify_request("GET", refs, Some("service=git-receive-pack")).unwrap();
    assert_eq!(request.repo(), "octo/server");
    let advertisement = http_backend(&git, "GET", refs, "service=git-receive-pack", b"");
    let advertised = parse_advertisement(&advertisement).unwrap();
    assert_eq!(advertised, main_at(a));

    let pack = git.pack(c, &[a], &["--thin", "--delta-base-offset"]);
    let body = push_body(
        &[(a, c, "refs/heads/main")],
        "report-status object-format=sha1 agent=git/2.47.3",
        &pack,
    );
    let push = parse_push(&body).unwrap();
    assert_eq!(check_push(&push, &body, "main", &advertised), Ok(()));
    let rpc = "/octo/server.git/git-receive-pack";
    assert!(
        classify_request("POST", rpc, None)
            .is_some_and(|request| request.service() == GitService::ReceivePack)
    );
    let report = http_backend(&git, "POST", rpc, "", &body);
    let report = String::from_utf8_lossy(&report);
    assert!(
        report.contains("unpack ok") && report.contains("ok refs/heads/main"),
        "{report}"
    );
    let moved = git.run_in(&server, &["rev-parse", "refs/heads/main"], None, &[]);
    assert_eq!(String::from_utf8(moved).unwrap().trim(), c.to_string());
    assert_ne!(b, c);

    let again = http_backend(&git, "GET", refs, "service=git-receive-pack", b"");
    let advertised = parse_advertisement(&again).unwrap();
    assert_eq!(advertised, main_at(c), "the guard reads the new value");
}

#[test]
fn sha256_repositories_are_refused_from_their_advertisement() {
    let git = Git::new();
    git.run_in(
        git.root.path(),
        &["init", "-q", "--bare", "--object-format=sha256", "sha.git"],
        None,
        &[],
    );
    let advertisement = http_backend(
        &git,
        "GET",
        "/sha.git/info/refs",
        "service=git-receive-pack",
        b"",
    );
    let refusal = parse_advertisement(&advertisement).unwrap_err();
    assert_eq!(refusal.code(), "SHA256_REPOSITORY", "{refusal}");
    git.run_in(
        git.root.path(),
        &["init", "-q", "--bare", "sha1.git"],
        None,
        &[],
    );
    let empty = http_backend(
        &git,
        "GET",
        "/sha1.git/info/refs",
        "service=git-receive-pack",
        b"",
    );
    assert_eq!(
        parse_advertisement(&empty),
        Ok(BTreeMap::new()),
        "an empty SHA-1 repository"
    );
}
