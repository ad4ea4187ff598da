//! The credential-free git helpers: URL splitting, header hygiene, and the generated scripts.

use auto_swe_sandbox::{
    AuthedGit, CloneRequest, GitOperation, StraySweep, authed_git_script, basic_auth_header,
    clone_script, clone_script_at_egress, git_auth_env, split_clone_credential,
};

#[test]
fn credentials_are_split_off_the_url() {
    let split =
        split_clone_credential("https://x-access-token:ghs_SECRET@github.com/o/r.git").unwrap();
    assert_eq!(split.clean_url, "https://github.com/o/r.git");
    let header = split.auth_header.unwrap();
    assert_eq!(header, basic_auth_header("x-access-token", "ghs_SECRET"));
    assert_eq!(format!("{header:?}"), "[redacted]");
    let plain = split_clone_credential("https://github.com/o/r.git").unwrap();
    assert!(plain.auth_header.is_none());
}

#[test]
fn only_http_transports_are_accepted() {
    for url in [
        "ext::sh -c touch% /tmp/pwned",
        "file:///etc",
        "ssh://git@host/r.git",
        "git@github.com:o/r.git",
        "https://host/r.git\n[core]",
        "https:///nohost",
    ] {
        assert!(split_clone_credential(url).is_err(), "{url}");
    }
}

#[test]
fn a_header_with_a_line_break_is_refused() {
    let smuggled = auto_swe_sandbox::SecretValue::new("Authorization: Basic x\r\nX-Evil: 1");
    let err = git_auth_env(&smuggled).unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_SECRET_REFUSED");
    assert!(!err.to_string().contains("X-Evil"));
}

fn call(operation: GitOperation) -> AuthedGit {
    AuthedGit {
        repo_dir: "/workspace/repo".to_owned(),
        clean_url: "https://git.example.invalid/o/r.git".to_owned(),
        operation,
        sweep: StraySweep::AgentWorkspace { keeper_pid: 7 },
    }
}

#[test]
fn authed_push_script_snapshot() {
    let script = authed_git_script(&call(GitOperation::Push(vec![
        "HEAD:refs/heads/asw/fix".to_owned(),
    ])))
    .unwrap();
    insta::assert_snapshot!("authed_push", script);
}

#[test]
fn clone_script_snapshot() {
    let script = clone_script(&CloneRequest {
        clean_url: "https://git.example.invalid/o/r.git".to_owned(),
        dest: "/workspace/repo".to_owned(),
        branch: Some("main".to_owned()),
    })
    .unwrap();
    insta::assert_snapshot!("clone", script);
}

#[test]
fn the_clone_at_egress_is_the_hardened_clone_without_a_credential() {
    let request = CloneRequest {
        clean_url: "https://git.example.invalid/o/r.git".to_owned(),
        dest: "/workspace/repo".to_owned(),
        branch: Some("main".to_owned()),
    };
    let at_egress = clone_script_at_egress(&request).unwrap();
    insta::assert_snapshot!("clone_at_egress", at_egress);
    assert!(!at_egress.contains("ASW_GIT_AUTH"), "{at_egress}");
    assert!(!at_egress.contains("extraheader"), "{at_egress}");
    // Everything else is the credentialed clone's: the same prelude, hardening, arguments
    // and config rewrite.
    let credentialed = clone_script(&request).unwrap();
    for line in at_egress.lines() {
        let line = line.trim_start_matches("  ");
        assert!(credentialed.contains(line), "{line}");
    }
    // A credential in the URL, a bad destination or a bad branch are refused the same way.
    let mut with_credential = request.clone();
    with_credential.clean_url = "https://u:p@git.example.invalid/o/r.git".to_owned();
    assert!(clone_script_at_egress(&with_credential).is_err());
    let mut bad_dir = request.clone();
    bad_dir.dest = "/workspace/../etc".to_owned();
    assert!(clone_script_at_egress(&bad_dir).is_err());
    let mut bad_branch = request;
    bad_branch.branch = Some("--upload-pack=touch /tmp/x".to_owned());
    assert!(clone_script_at_egress(&bad_branch).is_err());
}

#[test]
fn scripts_refuse_option_injection_and_credentialed_urls() {
    for refspec in ["--upload-pack=touch /tmp/x", "-o", "a b", "ext::x", ""] {
        assert!(
            authed_git_script(&call(GitOperation::Fetch(vec![refspec.to_owned()]))).is_err(),
            "{refspec}"
        );
    }
    let mut with_cred = call(GitOperation::LsRemote);
    with_cred.clean_url = "https://u:p@host/r.git".to_owned();
    assert!(authed_git_script(&with_cred).is_err());
    let mut bad_dir = call(GitOperation::LsRemote);
    bad_dir.repo_dir = "/workspace/../etc".to_owned();
    assert!(authed_git_script(&bad_dir).is_err());
}

#[test]
fn the_header_value_never_appears_in_a_script() {
    let script = authed_git_script(&call(GitOperation::LsRemote)).unwrap();
    assert!(script.contains(r#"GIT_CONFIG_VALUE_0="$ASW_GIT_AUTH""#));
    assert!(script.contains(r#": "${ASW_GIT_AUTH:?"#));
    assert!(!script.contains("extraheader=")); // never a `-c http.extraheader=…` in argv
}
