//! Runs on Temporal with their rows in the store: the worker's own executors make the steps (a
//! shell node in a real `local` workspace), record them under the run's fenced lease and end the
//! run row, as on the embedded engine.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_engine_temporal::{
    RunEffects, StoreEffects, TEMPORAL_LEASE_HOLDER, TemporalEngine, TemporalSettings,
};
use auto_swe_interpreter::StepRecord;
use auto_swe_spec::TerminalStatus;
use auto_swe_store::{
    HumanStepStatus, NewRun, NewRunInput, QueueState, RunEngine, RunStatus, Store,
};
use auto_swe_worker::RunEnd;
use auto_swe_worker::StepEffects;
use serde_json::json;

use crate::support::{
    NoModels, WorkerThread, host_services, quick_limits, spec, task_queue, temporal_address,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_temporal_keeps_its_row_steps_and_end_in_the_store() {
    let Some((host, engine, _worker)) = hosted("store").await else {
        return;
    };
    let store = &host.store;

    // The host records the run as for any engine, then starts it on Temporal instead of
    // queueing it.
    let spec = spec(
        "hello",
        &json!([
            {"id": "hello", "type": "shell", "image": "unused",
             "command": ["sh", "-c", "echo hello from $0", "temporal"], "next": "done"},
            {"id": "done", "type": "terminate", "status": "SUCCESS",
             "result": {"said": "$.nodes.hello.output"}}
        ]),
    );
    let (input, _) = store
        .submit_run_input(NewRunInput::new("store-test", json!({})))
        .await
        .expect("the input is stored");
    let run = store
        .create_run(
            NewRun::new(spec.clone())
                .with_run_input(&input.id)
                .on_engine(RunEngine::Temporal),
        )
        .await
        .expect("the run is recorded");
    engine
        .launch(&run.id, spec, json!({}))
        .await
        .expect("the run starts");
    let end = tokio::time::timeout(Duration::from_mins(2), engine.wait_for_end(&run.id))
        .await
        .expect("the run ends")
        .expect("its result reads");
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");

    let row = store.get_run(&run.id).await.expect("the run reads");
    assert_eq!(row.status, RunStatus::Ended(TerminalStatus::Success));
    let result = store
        .run_result(&run.id)
        .await
        .expect("the result reads")
        .expect("a result is stored");
    assert_eq!(
        result["result"]["said"]["stdout"],
        json!("hello from temporal\n"),
        "{result}"
    );
    assert_eq!(result["result"]["said"]["exitCode"], json!(0), "{result}");
    let steps = store.list_steps(&run.id).await.expect("the steps read");
    assert!(
        steps.iter().any(|step| step.recording_id == "hello"),
        "the shell node's record is in the store: {steps:?}"
    );
    // The end was written through the fenced finalize, which takes the run out of the queue:
    // no embedded worker can claim it.
    let state = store
        .queue_state(&run.id)
        .await
        .expect("the queue state reads");
    assert_eq!(state, Some(QueueState::Done));
    let claimed = store
        .claim_run(
            &run.id,
            TEMPORAL_LEASE_HOLDER,
            Duration::from_secs(5),
            RunEngine::Temporal,
        )
        .await;
    assert_eq!(claimed.expect_err("an ended run").code(), "RUN_ENDED");
}

/// A host, and an engine and a worker over it on a task queue named `name`; `None` (the test
/// skips) without a dev server or bubblewrap.
async fn hosted(name: &str) -> Option<(Host, TemporalEngine, WorkerThread)> {
    let address = temporal_address()?;
    let host = Host::new().await?;
    let (engine, worker) = host.on_temporal(&address, name).await;
    Some((host, engine, worker))
}

/// A host with a store and the worker's step executors over it (a `local` workspace backend,
/// no models).
struct Host {
    _dir: tempfile::TempDir,
    store: Store,
    factory: Arc<StepEffects>,
}

impl Host {
    /// `None` (the test skips) without bubblewrap.
    async fn new() -> Option<Self> {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (store, services) = host_services(dir.path(), Arc::new(NoModels)).await?;
        Some(Self {
            _dir: dir,
            store,
            factory: Arc::new(StepEffects::new(services)),
        })
    }

    /// Store effects under leases of `lease`.
    fn effects(&self, lease: Duration) -> StoreEffects {
        StoreEffects::new(self.store.clone(), self.factory.clone(), lease)
    }

    /// Records a run of `spec` in the store, as the host does for any engine, and starts it on
    /// Temporal; returns its id.
    async fn launch(
        &self,
        engine: &TemporalEngine,
        spec: serde_json::Value,
        input: serde_json::Value,
    ) -> String {
        let run = self
            .store
            .create_run(NewRun::new(spec.clone()).on_engine(RunEngine::Temporal))
            .await
            .expect("the run is recorded")
            .id;
        engine
            .launch(&run, spec, input)
            .await
            .expect("the run starts");
        run
    }

    /// An engine and a worker with this host's store effects, on a task queue of their own.
    async fn on_temporal(&self, address: &str, name: &str) -> (TemporalEngine, WorkerThread) {
        let settings = TemporalSettings::new(address).with_task_queue(task_queue(name));
        let engine = TemporalEngine::connect(settings.clone())
            .await
            .expect("the dev server answers")
            .with_limits(quick_limits());
        let effects = Arc::new(self.effects(Duration::from_secs(30)));
        (
            engine,
            WorkerThread::start(settings, effects as Arc<dyn RunEffects>),
        )
    }
}

async fn recorded_run(store: &Store) -> String {
    let spec = spec("a", &json!([{"id": "a", "type": "step", "step": "work"}]));
    store
        .create_run(NewRun::new(spec).on_engine(RunEngine::Temporal))
        .await
        .expect("the run is recorded")
        .id
}

fn record(recording_id: &str) -> StepRecord {
    serde_json::from_value(json!({
        "recordingId": recording_id, "specNodeId": recording_id, "nodeType": "step",
        "status": "COMPLETED", "attempt": 1
    }))
    .expect("a step record")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_the_other_engine_is_neither_claimed_nor_made() {
    let Some(host) = Host::new().await else {
        return;
    };
    let (store, effects) = (&host.store, host.effects(Duration::from_secs(30)));
    // A Temporal run: an embedded host never takes it, whatever its lease.
    let temporal = recorded_run(store).await;
    let refused = store
        .claim_run(
            &temporal,
            "embedded-worker",
            Duration::from_secs(30),
            RunEngine::Embedded,
        )
        .await
        .expect_err("an embedded host does not claim a Temporal run");
    assert_eq!(refused.code(), "RUN_OTHER_ENGINE", "{refused}");
    // An embedded run: a Temporal worker makes none of its effects.
    let spec = spec("a", &json!([{"id": "a", "type": "step", "step": "work"}]));
    let embedded = store
        .create_run(NewRun::new(spec))
        .await
        .expect("the run is recorded")
        .id;
    let Err(refused) = effects.dispatcher(&embedded).await else {
        panic!("a Temporal worker made effects of an embedded run");
    };
    assert_eq!(refused.code, "RUN_OTHER_ENGINE", "{refused}");
    assert_eq!(
        store.queue_state(&embedded).await.expect("the queue reads"),
        None,
        "nothing was claimed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_dispatcher_writes_nothing_once_the_lapsed_lease_is_taken_again() {
    let Some(host) = Host::new().await else {
        return;
    };
    let store = &host.store;
    let run = recorded_run(store).await;

    // A worker takes the run's lease, writes, and dies (its effects are dropped, its lease
    // lapses); its dispatcher lives on, as in a process that is only paused.
    let dying = host.effects(Duration::from_secs(1));
    let zombie = dying
        .dispatcher(&run)
        .await
        .expect("the first worker holds the run");
    zombie
        .record_step(&record("before"))
        .await
        .expect("a write under a live lease");
    drop(dying);
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    // Another worker takes the lapsed lease with the next epoch.
    let living = host.effects(Duration::from_secs(30));
    let current = living
        .dispatcher(&run)
        .await
        .expect("the lapsed lease is taken again");
    current
        .record_step(&record("after"))
        .await
        .expect("a write under the new lease");

    let refused = zombie
        .record_step(&record("zombie"))
        .await
        .expect_err("the dead worker's write is fenced out");
    assert_eq!(refused.code, "LEASE_LOST", "{refused}");
    let steps: Vec<String> = store
        .list_steps(&run)
        .await
        .expect("the steps read")
        .into_iter()
        .map(|step| step.recording_id)
        .collect();
    assert!(
        steps.contains(&"before".to_owned()) && steps.contains(&"after".to_owned()),
        "{steps:?}"
    );
    assert!(!steps.contains(&"zombie".to_owned()), "{steps:?}");
}

/// Waits for the run's pending human step at `node`, answers it in the store as `by` (none:
/// only the signal is sent, as a forger can) and wakes the run on Temporal with `payload`.
async fn answer(
    store: &Store,
    engine: &TemporalEngine,
    run: &str,
    node: &str,
    by: &str,
    payload: &serde_json::Value,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    let step = loop {
        let steps = store
            .list_human_steps(run)
            .await
            .expect("the human steps read");
        if let Some(step) = steps
            .into_iter()
            .find(|s| s.node_id == node && s.status == HumanStepStatus::Pending)
        {
            break step;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pending human step at {node}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    if !by.is_empty() {
        store
            .answer_human_step(&step.id, by, payload)
            .await
            .expect("the answer is stored");
    }
    let signal = step.prompt["signal"]
        .as_str()
        .expect("the step names its signal");
    engine
        .signal(run, signal, payload.clone())
        .await
        .expect("delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_answer_on_temporal_names_the_answerer_the_store_recorded_not_the_signals_claim() {
    let Some((host, engine, _worker)) = hosted("four-eyes").await else {
        return;
    };
    let store = &host.store;

    let approval = |id: &str, next: &str| {
        json!({"id": id, "type": "humanApproval", "title": "Sign off?", "onApprove": next,
               "onReject": "same"})
    };
    let spec = spec(
        "first",
        &json!([
            approval("first", "second"),
            approval("second", "distinct"),
            {"id": "distinct", "type": "cond",
             "expr": "$.nodes.first.output.answeredBy != null && $.nodes.second.output.answeredBy != null && $.nodes.first.output.answeredBy != $.nodes.second.output.answeredBy",
             "onTrue": "ok", "onFalse": "same"},
            {"id": "ok", "type": "terminate", "status": "SUCCESS"},
            {"id": "same", "type": "terminate", "status": "FAILED"}
        ]),
    );
    let run = host.launch(&engine, spec, json!({})).await;
    // Alice signs off twice, claiming to be Bob the second time.
    let claim = |who: &str| json!({"decision": "approve", "answeredBy": who});
    answer(store, &engine, &run, "first", "alice", &claim("alice")).await;
    answer(store, &engine, &run, "second", "alice", &claim("bob")).await;
    let end = end_within_a_minute(&engine, &run).await;
    assert_eq!(
        end.status,
        TerminalStatus::Failed,
        "one person signed off twice: {end:?}"
    );
    let second = store
        .list_steps(&run)
        .await
        .expect("the steps read")
        .into_iter()
        .find(|step| step.recording_id == "second")
        .expect("the second sign-off is recorded");
    assert_eq!(
        second.output["outputs"]["answeredBy"],
        json!("alice"),
        "{:?}",
        second.output
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_temporal_workers_share_a_runs_lease_and_both_write_under_it() {
    let Some(host) = Host::new().await else {
        return;
    };
    let run = recorded_run(&host.store).await;
    // Two workers making two branches of one run at once.
    let (one, two) = (
        host.effects(Duration::from_secs(30)),
        host.effects(Duration::from_secs(30)),
    );
    let first = one
        .dispatcher(&run)
        .await
        .expect("the first worker takes the lease");
    let second = two
        .dispatcher(&run)
        .await
        .expect("the second worker shares it");
    first
        .record_step(&record("left"))
        .await
        .expect("a write from the first");
    second
        .record_step(&record("right"))
        .await
        .expect("a write from the second");
    let epochs = match host
        .store
        .queue_state(&run)
        .await
        .expect("the queue state reads")
    {
        Some(QueueState::Leased { worker, epoch, .. }) => (worker, epoch),
        other => panic!("not leased: {other:?}"),
    };
    assert_eq!(
        epochs,
        (TEMPORAL_LEASE_HOLDER.to_owned(), 1),
        "one lease, taken once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_runs_lease_is_kept_past_its_length_while_its_worker_lives() {
    let Some(host) = Host::new().await else {
        return;
    };
    let run = recorded_run(&host.store).await;
    let effects = host.effects(Duration::from_secs(1));
    let dispatcher = effects.dispatcher(&run).await.expect("the run is held");
    // A step longer than the lease: the lease is renewed beside it.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    dispatcher
        .record_step(&record("long"))
        .await
        .expect("still the run's lease");
    let taken = host
        .store
        .claim_run(&run, "reaper", Duration::from_secs(5), RunEngine::Temporal)
        .await
        .expect_err("a live lease is not taken");
    assert_eq!(taken.code(), "LEASE_LOST");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_end_is_recorded_once_and_an_unknown_runs_end_is_refused() {
    let Some(host) = Host::new().await else {
        return;
    };
    let run = recorded_run(&host.store).await;
    let effects = host.effects(Duration::from_secs(30));
    let end = RunEnd {
        status: TerminalStatus::Success,
        result: Some(json!({"result": "done", "context": {}, "error": null})),
    };
    effects
        .finish(&run, &end)
        .await
        .expect("the end is recorded");
    // A retry of the end after the write landed (its worker died before answering) changes
    // nothing and is not an error.
    let other = RunEnd {
        status: TerminalStatus::Failed,
        result: None,
    };
    effects
        .finish(&run, &other)
        .await
        .expect("a second end is quiet");
    let row = host.store.get_run(&run).await.expect("the run reads");
    assert_eq!(row.status, RunStatus::Ended(TerminalStatus::Success));
    let refused = effects
        .finish("no-such-run", &end)
        .await
        .expect_err("no such run");
    assert_ne!(refused.code, "RUN_ENDED", "{refused}");
    let refused = effects
        .dispatcher(&run)
        .await
        .err()
        .expect("an ended run makes no more effects");
    assert_eq!(refused.code, "RUN_ENDED", "{refused}");
}

/// Reads the run's status until `wanted` holds (at most a minute), checking every status seen
/// before it against `allowed`; returns the one wanted.
/// `run`'s end, which must come within a minute.
async fn end_within_a_minute(engine: &TemporalEngine, run: &str) -> RunEnd {
    tokio::time::timeout(Duration::from_mins(1), engine.wait_for_end(run))
        .await
        .expect("the run ends")
        .expect("its result reads")
}

async fn status_until(
    store: &Store,
    run: &str,
    wanted: impl Fn(RunStatus) -> bool,
    allowed: impl Fn(RunStatus) -> bool,
) -> RunStatus {
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let status = store.get_run(run).await.expect("the run reads").status;
        if wanted(status) {
            return status;
        }
        assert!(allowed(status), "{run} showed {status:?} on the way");
        assert!(
            tokio::time::Instant::now() < deadline,
            "{run} still {status:?} after a minute"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_on_a_signal_node_shows_waiting_and_running_again_once_signalled() {
    let Some((host, engine, _worker)) = hosted("signal-status").await else {
        return;
    };
    let store = &host.store;
    let spec = spec(
        "build",
        &json!([
            {"id": "build", "type": "shell", "image": "unused", "command": ["true"],
             "next": "ci"},
            {"id": "ci", "type": "signal", "name": "ci", "timeout": "1h", "onReceive": "after"},
            {"id": "after", "type": "shell", "image": "unused", "command": ["sleep", "2"],
             "next": "done"},
            {"id": "done", "type": "terminate", "status": "SUCCESS"}
        ]),
    );
    let run = host.launch(&engine, spec, json!({})).await;
    // Until the signal, the run may be queued or running, then shows it waits: the embedded
    // engine's status of a parked run.
    status_until(
        store,
        &run,
        |status| status == RunStatus::Waiting,
        |status| matches!(status, RunStatus::Pending | RunStatus::Running),
    )
    .await;
    engine
        .signal(&run, "ci", json!({"passed": true}))
        .await
        .expect("delivered");
    // Woken, it works again (a two-second step) before it ends.
    status_until(
        store,
        &run,
        |status| status == RunStatus::Running,
        |status| status == RunStatus::Waiting,
    )
    .await;
    let end = end_within_a_minute(&engine, &run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let row = store.get_run(&run).await.expect("the run reads");
    assert_eq!(row.status, RunStatus::Ended(TerminalStatus::Success));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_one_branch_waiting_and_another_working_shows_running_until_only_waits_remain() {
    let Some((host, engine, _worker)) = hosted("branch-status").await else {
        return;
    };
    let store = &host.store;
    let spec = spec(
        "fan",
        &json!([
            {"id": "fan", "type": "fanOut", "over": "$.input.items", "concurrency": 2,
             "subgraph": {"entry": "which", "nodes": [
                {"id": "which", "type": "cond", "expr": "$.index == 0", "onTrue": "hold",
                 "onFalse": "busy"},
                {"id": "hold", "type": "signal", "name": "go", "timeout": "1h"},
                {"id": "busy", "type": "shell", "image": "unused", "command": ["sleep", "3"]}
             ]},
             "next": "done"},
            {"id": "done", "type": "terminate", "status": "SUCCESS"}
        ]),
    );
    let run = host
        .launch(&engine, spec, json!({"items": ["wait", "work"]}))
        .await;
    // While the second branch's step runs, one branch waiting does not make the run wait. The
    // status is read before the steps, so a status written after the step's record is never
    // taken for one written before it.
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        let status = store.get_run(&run).await.expect("the run reads").status;
        let steps = store.list_steps(&run).await.expect("the steps read");
        if steps.iter().any(|step| step.node_id == "busy") {
            break;
        }
        assert_ne!(
            status,
            RunStatus::Waiting,
            "a branch still works: {steps:?}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the working branch never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Then only the wait is left.
    status_until(
        store,
        &run,
        |status| status == RunStatus::Waiting,
        |status| status == RunStatus::Running,
    )
    .await;
    engine
        .signal(&run, "go", json!("now"))
        .await
        .expect("delivered");
    let end = end_within_a_minute(&engine, &run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_too_large_for_a_payload_keeps_its_long_strings_as_artifacts_of_the_run() {
    let Some((host, engine, _worker)) = hosted("spilled-end").await else {
        return;
    };
    let store = &host.store;
    // A shell node's output (its stdout kept to 20 kB), 120 times over: an end of 2.4 MB, more
    // than a payload carries.
    let copies: serde_json::Map<String, serde_json::Value> = (0..COPIES)
        .map(|n| (format!("copy{n}"), json!("$.nodes.print.output.stdout")))
        .collect();
    let spec = spec(
        "print",
        &json!([
            {"id": "print", "type": "shell", "image": "unused",
             "command": ["sh", "-c", "head -c 30000 /dev/zero | tr '\\0' x"], "next": "end"},
            {"id": "end", "type": "terminate", "status": "SUCCESS", "result": copies}
        ]),
    );
    let run = host.launch(&engine, spec, json!({})).await;
    let end = end_within_a_minute(&engine, &run).await;
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let row = store.get_run(&run).await.expect("the run reads");
    assert_eq!(row.status, RunStatus::Ended(TerminalStatus::Success));
    let result = store
        .run_result(&run)
        .await
        .expect("the result reads")
        .expect("a result is stored");
    // The workflow stored long strings as artifacts until the end fitted a payload, then the
    // end's own spill stored up to its 64 more and cut the rest: more placeholders than that
    // spill alone makes, each naming an artifact of the run with the whole output.
    let mut held = None;
    let mut placeholders = 0;
    for n in 0..COPIES {
        let text = result["result"][format!("copy{n}")]
            .as_str()
            .expect("a string");
        let Some(id) = auto_swe_worker::spilled_artifact_id(text) else {
            assert!(
                text.chars().count() <= 8_000,
                "copy{n} is {} bytes",
                text.len()
            );
            continue;
        };
        placeholders += 1;
        let (artifact, bytes) = store.get_artifact(id).await.expect("the artifact reads");
        assert_eq!(artifact.run_id, run);
        assert!(bytes.len() > 19_000, "copy{n} holds {} bytes", bytes.len());
        let first = held.get_or_insert_with(|| bytes.clone());
        assert!(*first == bytes, "copy{n} holds other bytes");
    }
    assert!(
        placeholders > auto_swe_worker::MAX_SPILLS,
        "{placeholders} placeholders"
    );
}

/// How many times the spilled end repeats its output.
const COPIES: usize = 120;
