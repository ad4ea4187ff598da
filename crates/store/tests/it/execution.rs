//! Steps, human steps, signals, artifacts and traces.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    steps_and_interactions,
    every_step_end_is_stored_and_read_back,
    a_step_started_again_is_the_same_step_and_is_written_once,
    artifacts_and_traces
);

/// Each way the interpreter says a step ends is a status the database accepts and returns as
/// it was written, with a completed step stored under its older spelling `SUCCESS`.
async fn every_step_end_is_stored_and_read_back(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let mut written = Vec::new();
    for (i, end) in StepEnd::ALL.into_iter().enumerate() {
        let attempt = i64::try_from(i).unwrap() + 1;
        let step = db
            .store
            .start_step(&token, "node", "node", attempt)
            .await
            .unwrap();
        let done = db
            .store
            .finish_step(&token, &step.id, StepStatus::Ended(end), &json!(i))
            .await
            .unwrap();
        assert_eq!(done.status.end(), Some(end));
        written.push(done.status);
    }
    let read: Vec<StepStatus> = db
        .store
        .list_steps(&run.id)
        .await
        .unwrap()
        .into_iter()
        .map(|step| step.status)
        .collect();
    assert_eq!(read, written);
    assert_eq!(StepStatus::SUCCEEDED.as_str(), "SUCCESS");
    assert_eq!(
        "SUCCESS".parse::<StepStatus>().unwrap(),
        StepStatus::SUCCEEDED
    );
    for bad in ["SKIPPED", "COMPLETED", "success", ""] {
        assert_eq!(
            bad.parse::<StepStatus>().unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
    assert_eq!(HumanStepStatus::ANSWERED.as_str(), "ANSWERED");
    assert_eq!(
        "CANCELLED".parse::<HumanStepStatus>().unwrap(),
        HumanStepStatus::Ended(HumanStepEnd::Cancelled)
    );
    assert!("RESOLVED".parse::<HumanStepStatus>().is_err());
}

/// A record made again (its first report lost) finds its step, running or ended, and writes no
/// second row; the same recording id under another node is a conflict, another attempt a new
/// step, and the same entry in another run is that run's own.
async fn a_step_started_again_is_the_same_step_and_is_written_once(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let first = db
        .store
        .start_step(&token, "impl", "impl", 1)
        .await
        .unwrap();
    let again = db
        .store
        .start_step(&token, "impl", "impl", 1)
        .await
        .unwrap();
    assert_eq!(again, first, "a running step comes back as it stands");
    let done = db
        .store
        .finish_step(&token, &first.id, StepStatus::SUCCEEDED, &json!("kept"))
        .await
        .unwrap();
    let ended = db
        .store
        .start_step(&token, "impl", "impl", 1)
        .await
        .unwrap();
    assert_eq!(
        ended, done,
        "an ended step comes back ended, its output kept"
    );
    let other_node = db.store.start_step(&token, "impl", "review", 1).await;
    assert_eq!(other_node.unwrap_err().code(), "STORE_CONFLICT");
    let retry = db
        .store
        .start_step(&token, "impl", "impl", 2)
        .await
        .unwrap();
    assert_ne!(retry.id, first.id);
    let mut steps = db.store.list_steps(&run.id).await.unwrap();
    steps.sort_by_key(|step| step.attempt);
    assert_eq!(steps, vec![done, retry]);
    let (other_run, other_claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let elsewhere = db
        .store
        .start_step(&other_claim.token(), "impl", "impl", 1)
        .await
        .unwrap();
    assert_eq!(elsewhere.run_id, other_run.id);
    assert_ne!(elsewhere.id, first.id);
}

async fn steps_and_interactions(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let step = db
        .store
        .start_step(&token, "fan[0]/impl", "impl", 1)
        .await
        .unwrap();
    assert_eq!(step.status, StepStatus::Running);
    let done = db
        .store
        .finish_step(
            &token,
            &step.id,
            StepStatus::SUCCEEDED,
            &json!({"ok": true}),
        )
        .await
        .unwrap();
    assert_eq!(
        (done.status, done.output.clone()),
        (StepStatus::SUCCEEDED, json!({"ok": true}))
    );
    let twice = db
        .store
        .finish_step(&token, &step.id, StepStatus::FAILED, &json!(null))
        .await;
    assert_eq!(twice.unwrap_err().code(), "STORE_CONFLICT");
    assert_eq!(db.store.list_steps(&run.id).await.unwrap(), vec![done]);
    let running = db
        .store
        .finish_step(&token, &step.id, StepStatus::Running, &json!(null))
        .await;
    assert_eq!(running.unwrap_err().code(), "STORE_INVALID_INPUT");
    let ghost = db
        .store
        .start_step(
            &LeaseToken {
                run_id: "nope".to_owned(),
                epoch: 1,
            },
            "a",
            "a",
            1,
        )
        .await;
    assert_eq!(ghost.unwrap_err().code(), "STORE_NOT_FOUND");

    let human = db
        .store
        .create_human_step(
            &token,
            &NewHumanStep::new(
                "approve",
                HumanStepKind::Decision,
                json!({"options": ["a", "b"]}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(human.status, HumanStepStatus::Pending);
    let answered = db
        .store
        .answer_human_step(&human.id, "bob", &json!({"choice": "a"}))
        .await
        .unwrap();
    assert_eq!(answered.status, HumanStepStatus::ANSWERED);
    assert_eq!(answered.answer, Some(json!({"choice": "a"})));
    let again = db
        .store
        .answer_human_step(&human.id, "eve", &json!({"choice": "b"}))
        .await;
    assert_eq!(again.unwrap_err().code(), "STORE_CONFLICT");
    assert_eq!(db.store.get_human_step(&human.id).await.unwrap(), answered);
    let listed = db.store.list_human_steps(&answered.run_id).await.unwrap();
    assert!(listed.contains(&answered));
    assert!(
        db.store
            .list_human_steps("no-such-run")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        db.store
            .answer_human_step("nope", "x", &json!(1))
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );

    db.store
        .send_signal(&run.id, "ci", &json!({"n": 1}))
        .await
        .unwrap();
    db.store
        .send_signal(&run.id, "other", &json!({}))
        .await
        .unwrap();
    db.store
        .send_signal(&run.id, "ci", &json!({"n": 2}))
        .await
        .unwrap();
    let signals = db.store.list_signals(&run.id, "ci").await.unwrap();
    assert_eq!(
        signals
            .iter()
            .map(|s| s.payload.clone())
            .collect::<Vec<_>>(),
        vec![json!({"n": 1}), json!({"n": 2})]
    );
    assert_eq!(
        db.store
            .send_signal("nope", "ci", &json!({}))
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
}

async fn artifacts_and_traces(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let body = vec![7_u8; 300_000];
    let artifact = db
        .store
        .put_artifact(&token, "diff.patch", "text/x-diff", &body)
        .await
        .unwrap();
    assert_eq!(artifact.size, 300_000);
    let (read, read_body) = db.store.get_artifact(&artifact.id).await.unwrap();
    assert_eq!((read, read_body), (artifact.clone(), body));
    assert_eq!(
        db.store.list_artifacts(&run.id).await.unwrap(),
        vec![artifact]
    );
    let too_big = vec![0_u8; MAX_ARTIFACT_BYTES + 1];
    let refused = db
        .store
        .put_artifact(&token, "big", "application/octet-stream", &too_big)
        .await;
    assert_eq!(refused.unwrap_err().code(), "STORE_VALUE_TOO_LARGE");

    let traces: Vec<_> = (0..5)
        .map(|n| NewAgentTrace {
            run_id: Some(run.id.clone()),
            workflow_id: "wf-1".to_owned(),
            node_id: Some("impl".to_owned()),
            recording_id: Some("impl".to_owned()),
            activity: "runAgent".to_owned(),
            kind: "llm_response".to_owned(),
            payload: json!({"n": n}),
            spend_owner_org_id: Some("org-1".to_owned()),
            model: Some("anthropic:claude".to_owned()),
            usage: Spend {
                cost_micros: 10,
                input_tokens: 1,
                output_tokens: 1,
            },
        })
        .collect();
    db.store.append_traces(&token, traces).await.unwrap();
    let newest = db.store.list_traces(&run.id, 3).await.unwrap();
    assert_eq!(
        newest.iter().map(|t| t.payload.clone()).collect::<Vec<_>>(),
        vec![json!({"n": 2}), json!({"n": 3}), json!({"n": 4})]
    );
    assert_eq!(newest[0].spend_owner_org_id.as_deref(), Some("org-1"));
}
