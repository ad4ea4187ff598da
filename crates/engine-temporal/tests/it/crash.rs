//! Worker processes: two on one task queue with one killed (`SIGKILL`) in the middle of an
//! activity, and every worker killed while the run waits. The run ends, and no activity that
//! completed is made again.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_engine_temporal::{
    ActivityLimits, RunEffects, TemporalEngine, TemporalSettings, TemporalWorker,
};
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, SignalWait, SignalWake, StepDispatch, StepRecord,
};
use auto_swe_spec::TerminalStatus;
use auto_swe_worker::RunEnd;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::support::{quick_limits, run_id, spec, task_queue, temporal_address};

const QUEUE: &str = "AUTO_SWE_TEMPORAL_TEST_QUEUE";
const LOG: &str = "AUTO_SWE_TEMPORAL_TEST_LOG";

/// Steps that write `start`, `done` and `record` lines, with this process's id, to a log all
/// worker processes share. `slow` works for four seconds.
struct LoggedSteps {
    log: PathBuf,
}

impl LoggedSteps {
    async fn note(&self, line: String) -> Result<(), DispatchError> {
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .await
            .map_err(|error| DispatchError::failure("LOG", error.to_string()))?;
        let line = format!("{line} {}\n", std::process::id());
        file.write_all(line.as_bytes())
            .await
            .map_err(|error| DispatchError::failure("LOG", error.to_string()))
    }
}

#[async_trait]
impl Dispatcher for LoggedSteps {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.note(format!("start {}", request.recording_id)).await?;
        if request.step == "slow" {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(4)) => {}
                () = cancellation.cancelled() => return Err(DispatchError::cancelled("stopped")),
            }
        }
        self.note(format!("done {}", request.recording_id)).await?;
        Ok(json!({"node": request.recording_id}))
    }

    async fn wait_signal(
        &self,
        _wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        self.note(format!("record {}", record.recording_id)).await
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(0)
    }
}

#[async_trait]
impl RunEffects for LoggedSteps {
    async fn dispatcher(&self, _run_id: &str) -> Result<Arc<dyn Dispatcher>, DispatchError> {
        Ok(Arc::new(Self {
            log: self.log.clone(),
        }))
    }

    async fn finish(&self, run_id: &str, end: &RunEnd) -> Result<(), DispatchError> {
        self.note(format!("end {run_id} {:?}", end.status)).await
    }
}

/// Not a test: the body of a worker process the tests below start (this test binary, run with
/// this test's name and the queue and log in its environment).
#[test]
#[ignore = "a worker process for the crash tests"]
fn worker_process() {
    let (Ok(queue), Ok(log), Some(address)) =
        (std::env::var(QUEUE), std::env::var(LOG), temporal_address())
    else {
        return;
    };
    let settings = TemporalSettings::new(address).with_task_queue(queue);
    let effects = Arc::new(LoggedSteps { log: log.into() });
    TemporalWorker::new(settings, effects)
        .run_blocking(CancellationToken::new())
        .expect("the worker runs until it is killed");
}

/// A worker process, killed (`SIGKILL`) when dropped.
struct WorkerProcess(Child);

impl WorkerProcess {
    #[expect(
        clippy::disallowed_methods,
        reason = "the crash tests start worker processes in order to kill them"
    )]
    fn start(queue: &str, log: &Path) -> Self {
        let child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "--exact",
                "crash::worker_process",
                "--ignored",
                "--nocapture",
            ])
            .env(QUEUE, queue)
            .env(LOG, log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a worker process starts");
        Self(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn lines(log: &Path) -> Vec<(String, String, u32)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split(' ');
            let what = words.next()?.to_owned();
            let node = words.next()?.to_owned();
            let pid = words.next_back()?.parse().ok()?;
            Some((what, node, pid))
        })
        .collect()
}

fn count(log: &Path, what: &str, node: &str) -> usize {
    lines(log)
        .iter()
        .filter(|(w, n, _)| w == what && n == node)
        .count()
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn engine(address: &str, queue: &str, limits: ActivityLimits) -> TemporalEngine {
    let settings = TemporalSettings::new(address).with_task_queue(queue);
    TemporalEngine::connect(settings)
        .await
        .expect("the dev server answers")
        .with_limits(limits)
}

async fn end(engine: &TemporalEngine, run: &str) -> RunEnd {
    tokio::time::timeout(Duration::from_secs(90), engine.wait_for_end(run))
        .await
        .expect("the run ends")
        .expect("its result reads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_activity_loses_that_attempt_and_nothing_else() {
    let Some(address) = temporal_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let log = dir.path().join("log");
    let queue = task_queue("crash-activity");
    let mut workers = [
        WorkerProcess::start(&queue, &log),
        WorkerProcess::start(&queue, &log),
    ];
    // The default limits, as a deployment runs: the figure printed below is the recovery time
    // the heartbeat timeout gives.
    let engine = engine(&address, &queue, ActivityLimits::default()).await;
    let spec = spec(
        "a",
        &json!([
            {"id": "a", "type": "step", "step": "work", "next": "s"},
            {"id": "s", "type": "step", "step": "slow", "next": "b"},
            {"id": "b", "type": "step", "step": "work"}
        ]),
    );
    let run = run_id("crash-activity");
    engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");
    until("the slow step to start", || count(&log, "start", "s") == 1).await;
    let (_, _, holder) = lines(&log)
        .into_iter()
        .find(|(what, node, _)| what == "start" && node == "s")
        .expect("a start line");
    let killed = workers
        .iter_mut()
        .find(|worker| worker.pid() == holder)
        .expect("one of the two workers holds the step");
    killed.kill();
    let killed_at = tokio::time::Instant::now();
    until("the step to be tried again", || {
        count(&log, "start", "s") == 2
    })
    .await;
    eprintln!(
        "a step whose worker was killed (SIGKILL) started again on another worker after {:.1} s \
         (heartbeat timeout {} s)",
        killed_at.elapsed().as_secs_f64(),
        ActivityLimits::default().heartbeat_timeout_secs
    );

    let ended = end(&engine, &run).await;
    assert_eq!(ended.status, TerminalStatus::Success, "{ended:?}");
    assert_eq!(
        count(&log, "done", "a"),
        1,
        "a completed step is never made again"
    );
    assert_eq!(
        count(&log, "start", "s"),
        2,
        "the killed attempt and one more"
    );
    assert_eq!(count(&log, "done", "s"), 1);
    assert_eq!(count(&log, "done", "b"), 1);
    let finisher = lines(&log)
        .into_iter()
        .find(|(what, node, _)| what == "done" && node == "s")
        .map(|(_, _, pid)| pid);
    assert_ne!(finisher, Some(holder), "the other worker finished the step");
    assert_eq!(
        lines(&log)
            .iter()
            .filter(|(what, ..)| what == "end")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_worker_killed_mid_wait_loses_nothing_and_a_new_one_ends_the_run() {
    let Some(address) = temporal_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let log = dir.path().join("log");
    let queue = task_queue("crash-wait");
    let mut first = WorkerProcess::start(&queue, &log);
    let engine = engine(&address, &queue, quick_limits()).await;
    let spec = spec(
        "a",
        &json!([
            {"id": "a", "type": "step", "step": "work", "next": "wait"},
            {"id": "wait", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "b"},
            {"id": "b", "type": "step", "step": "work"}
        ]),
    );
    let run = run_id("crash-wait");
    engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");
    until("the first step's record", || {
        count(&log, "record", "a") == 1
    })
    .await;
    first.kill();

    let second = WorkerProcess::start(&queue, &log);
    engine
        .signal(&run, "go", json!("now"))
        .await
        .expect("delivered");
    let ended = end(&engine, &run).await;
    let written = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        ended.status,
        TerminalStatus::Success,
        "{ended:?}\n{written}"
    );
    assert_eq!(
        count(&log, "done", "a"),
        1,
        "a completed step is never made again:\n{written}"
    );
    // The record is an activity too: killed after its line and before its report, it is made
    // again by the new worker (the store keeps one step for both), never twice by one worker.
    let recorders: Vec<u32> = lines(&log)
        .into_iter()
        .filter(|(what, node, _)| what == "record" && node == "a")
        .map(|(_, _, pid)| pid)
        .collect();
    assert!(
        recorders == [first.pid()] || recorders == [first.pid(), second.pid()],
        "the first step's record, once per worker at most:\n{written}"
    );
    assert_eq!(count(&log, "done", "b"), 1, "{written}");
}
