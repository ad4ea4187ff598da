//! The host's side of runs on Temporal: a launch while the cluster is unreachable writes
//! nothing, a signal sent again under its request id is delivered once, and the reaper asks
//! Temporal only about Temporal's runs.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_engine_temporal::{SignalRelay, TemporalEngine, TemporalLookup, TemporalSettings};
use auto_swe_spec::TerminalStatus;
use auto_swe_store::{NewRun, RunEngine, RunListQuery, RunStatus};
use auto_swe_worker::{Launch, LaunchOptions, Reaper, ReaperConfig, StepRegistry, launch_on};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::support::{Cluster, Steps, run_id, scratch_store, spec, task_queue, temporal_address};

/// A loopback TCP forwarder to `target`, cut (listener and every connection) when dropped.
struct Forwarder {
    address: String,
    tasks: JoinSet<()>,
}

impl Forwarder {
    async fn to(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = listener.local_addr().expect("its address").to_string();
        let target = target.to_owned();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut pipes = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                pipes.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { address, tasks }
    }

    fn cut(mut self) {
        self.tasks.abort_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_while_temporal_is_unreachable_is_refused_and_writes_nothing() {
    let Some(address) = temporal_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = scratch_store(dir.path()).await;
    let forwarder = Forwarder::to(&address).await;
    let through = forwarder.address.clone();
    let engine = TemporalEngine::connect(
        TemporalSettings::new(&through).with_task_queue(task_queue("unreachable")),
    )
    .await
    .expect("the cluster answers through the forwarder");
    forwarder.cut();
    // The listener is gone with its task: give the kernel a moment to refuse.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let launched = launch_on(
        &store,
        &StepRegistry::builtin(),
        Launch {
            spec: spec(
                "a",
                &json!([{"id": "a", "type": "terminate", "status": "SUCCESS"}]),
            ),
            input: json!({}),
            submitter: "tester".to_owned(),
        },
        LaunchOptions::default(),
        &engine,
    )
    .await;
    let error = launched.expect_err("an unreachable cluster takes no run");
    assert_eq!(error.code(), "ENGINE_UNAVAILABLE", "{error}");
    assert!(error.is_retryable());
    assert!(error.to_string().contains(&through), "{error}");
    let mut query = RunListQuery::default();
    query.limit = 10;
    let runs = store.list_runs(&query).await.expect("the runs read");
    assert!(runs.runs.is_empty(), "a run was written: {:?}", runs.runs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_again_under_its_request_id_is_delivered_once() {
    let Some(address) = temporal_address() else {
        return;
    };
    let cluster = Cluster::start(&address, "request-ids", Steps::default()).await;
    // After the first payload, a second one for `go` within 3 s fails the run.
    let spec = spec(
        "first",
        &json!([
            {"id": "first", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "work"},
            {"id": "work", "type": "step", "step": "work", "next": "second"},
            {"id": "second", "type": "signal", "name": "go", "timeout": 3000,
             "onTimeout": "once", "onReceive": "twice"},
            {"id": "once", "type": "terminate", "status": "SUCCESS"},
            {"id": "twice", "type": "terminate", "status": "FAILED"}
        ]),
    );
    let send = |run: String, request_id: Option<&'static str>| {
        let engine = cluster.engine.clone();
        async move {
            engine
                .deliver(&run, "go", json!({"n": 1}), request_id.map(str::to_owned))
                .await
                .expect("delivered");
        }
    };
    let mut ends = Vec::new();
    // The same request id twice (a relay that crashed between sending and marking), then, to
    // show the run would notice, two different ones.
    for (name, second) in [("same", Some("relay-1")), ("different", Some("relay-2"))] {
        let run = run_id(name);
        cluster
            .engine
            .launch(&run, spec.clone(), json!({}))
            .await
            .expect("the run starts");
        send(run.clone(), Some("relay-1")).await;
        let steps = cluster.effects.steps.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while steps.calls().len() < ends.len() + 1 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the first wait took nothing"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        send(run.clone(), second).await;
        ends.push(cluster.end(&run).await.status);
    }
    assert_eq!(ends, [TerminalStatus::Success, TerminalStatus::Failed]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_temporal_reaper_ends_a_run_without_a_workflow_and_leaves_live_and_embedded_runs() {
    let Some(address) = temporal_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = scratch_store(dir.path()).await;
    let cluster = Cluster::start(&address, "reaper", Steps::default()).await;
    let waits = spec(
        "hold",
        &json!([{"id": "hold", "type": "signal", "name": "go", "timeout": "1h",
                 "onReceive": "done"},
                {"id": "done", "type": "terminate", "status": "SUCCESS"}]),
    );
    // Started on Temporal and waiting; recorded for Temporal but never started; embedded.
    let live = launch_on(
        &store,
        &StepRegistry::builtin(),
        Launch {
            spec: waits.clone(),
            input: json!({}),
            submitter: "tester".to_owned(),
        },
        LaunchOptions::default(),
        &cluster.engine,
    )
    .await
    .expect("the run launches")
    .run()
    .id
    .clone();
    let unstarted = store
        .create_run(NewRun::new(waits.clone()).on_engine(RunEngine::Temporal))
        .await
        .expect("recorded")
        .id;
    let embedded = store
        .create_run(NewRun::new(waits))
        .await
        .expect("recorded")
        .id;

    // A signal for the run whose workflow never started waits: Temporal does not know it yet.
    store
        .send_signal(&unstarted, "go", &json!({}))
        .await
        .expect("the signal is written");
    let relay = SignalRelay::new(store.clone(), cluster.engine.clone());
    let pass = relay.pass().await.expect("a relay pass");
    assert_eq!((pass.forwarded, pass.dropped, pass.left), (0, 0, 1));

    let reaper = Reaper::new(
        store.clone(),
        Arc::new(TemporalLookup::new(cluster.engine.clone(), store.clone())),
        ReaperConfig::default().older_than(Duration::ZERO),
    );
    let report = reaper.sweep().await.expect("the sweep runs");
    assert_eq!(report.checked, 2, "{report:?}");
    assert_eq!(
        report.ended,
        vec![(unstarted.clone(), TerminalStatus::Failed)]
    );
    let status = |run: String| {
        let store = store.clone();
        async move { store.get_run(&run).await.expect("the run reads").status }
    };
    assert_eq!(status(unstarted).await, RunStatus::FAILED);
    // Its run ended: the waiting signal is dropped, and nothing is left pending.
    let pass = relay.pass().await.expect("a relay pass");
    assert_eq!((pass.forwarded, pass.dropped, pass.left), (0, 1, 0));
    assert!(
        store
            .pending_relays(RunEngine::Temporal, 10)
            .await
            .expect("the relay's items read")
            .is_empty()
    );
    assert!(!status(live.clone()).await.is_terminal());
    assert_eq!(status(embedded).await, RunStatus::Pending);
    // A payload no Temporal payload carries is refused where it enters, never accepted and then
    // dropped: nothing reaches the relay.
    let refused = store
        .send_signal(&live, "go", &json!({"text": "x".repeat(3 * 1024 * 1024)}))
        .await
        .expect_err("the store refuses it for a run on Temporal");
    assert_eq!(refused.code(), "ENGINE_PAYLOAD_TOO_LARGE", "{refused}");
    let pass = relay.pass().await.expect("a relay pass");
    assert_eq!((pass.forwarded, pass.dropped, pass.left), (0, 0, 0));
    // The live run's signal, written to the store, is forwarded and ends it.
    store
        .send_signal(&live, "go", &json!({}))
        .await
        .expect("the signal is written");
    let pass = relay.pass().await.expect("a relay pass");
    assert_eq!((pass.forwarded, pass.dropped, pass.left), (1, 0, 0));
    assert_eq!(cluster.end(&live).await.status, TerminalStatus::Success);
}
