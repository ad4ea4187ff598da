//! `auto-swe runs resolve` through the binary: a person answers a pull request's claim that a
//! killed worker left pending, and the next worker acts on the answer; answers that cannot apply
//! are refused with their codes and change nothing.

use std::time::Duration;

use super::crash::{
    Env, finished, output, parked_for_merge, pending_claims, pull_request_trap, sandbox_available,
    show, start_demo, stop, wait_for, worker,
};

fn refused(env: &Env, args: &[&str], code: &str) {
    let out = output(env, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(stderr.contains(code), "{args:?}: {stderr}");
}

#[test]
fn a_pending_claim_answered_did_not_happen_is_sent_once_by_the_next_worker() {
    if !sandbox_available() {
        return;
    }
    let env = Env::sqlite();
    let run = start_demo(&env);
    let fifo = pull_request_trap(&env);
    let pulls = fifo.parent().unwrap().to_path_buf();
    let first = worker(&env, &["--no-ci"]);
    let caught = wait_for(&env, &run, "the pull request's claim", |s| {
        !pending_claims(s).is_empty()
    });
    let key = pending_claims(&caught).remove(0);
    std::thread::sleep(Duration::from_millis(300));
    stop(first);
    std::fs::remove_file(&fifo).unwrap();

    // Refusals first: an unknown run, a node with no claim, both answers at once.
    refused(
        &env,
        &[
            "runs",
            "resolve",
            "no-such-run",
            "openPr",
            "--did-not-happen",
        ],
        "no run no-such-run",
    );
    refused(
        &env,
        &["runs", "resolve", &run, "implement", "--happened"],
        "OUTCOME_NOT_FOUND",
    );
    let both = output(
        &env,
        &[
            "runs",
            "resolve",
            &run,
            "openPr",
            "--happened",
            "--did-not-happen",
        ],
    );
    assert_eq!(both.status.code(), Some(2), "{both:?}");
    assert_eq!(pending_claims(&show(&env, &run)), vec![key.clone()]);

    // While the killed worker's lease lasts, it might still record the claim itself: refused.
    refused(
        &env,
        &["runs", "resolve", &run, "openPr", "--did-not-happen"],
        "OUTCOME_NOT_AMBIGUOUS",
    );
    assert_eq!(pending_claims(&show(&env, &run)), vec![key.clone()]);
    std::thread::sleep(Duration::from_secs(7));

    // Past the lease, the answer, by node name: recorded; the run had not ended on it.
    let answered = output(
        &env,
        &[
            "runs",
            "resolve",
            &run,
            "openPr",
            "--did-not-happen",
            "--by",
            "lead@example.com",
        ],
    );
    let said = String::from_utf8_lossy(&answered.stdout);
    assert!(
        answered.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    assert!(
        said.contains(&format!("resolved `{key}`")) && said.contains("did not happen"),
        "{said}"
    );
    assert!(pending_claims(&show(&env, &run)).is_empty());
    // Answered once: a second answer finds no claim.
    refused(
        &env,
        &["runs", "resolve", &run, &key, "--happened"],
        "OUTCOME_NOT_FOUND",
    );

    // The next worker takes the run over and opens the pull request once.
    let second = worker(&env, &[]);
    let shown = wait_for(&env, &run, "the merge wait", parked_for_merge);
    stop(second);
    assert_eq!(
        shown["pullRequests"].as_array().unwrap().len(),
        1,
        "{shown}"
    );
    assert_eq!(finished(&shown, "openPr"), 2, "{shown}");
    assert!(pending_claims(&shown).is_empty(), "{shown}");
    assert!(
        std::fs::read_to_string(pulls.join("1.json")).is_ok(),
        "the pull request's text was written"
    );
}
