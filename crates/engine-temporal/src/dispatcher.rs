//! The interpreter's side of the bridge: a [`Dispatcher`] that turns every call into a request
//! for the workflow's driver and waits for its answer. It touches no clock, timer or runtime of
//! its own: the clock is the workflow's (set by the driver before each poll), a patch's answer
//! was read from the workflow's history when the run started.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, HumanStepNotice, HumanStepResolution, SignalWait,
    SignalWake, StepDispatch, StepRecord,
};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::wire::{Bookkeeping, BookkeepingReply, StepReply};

/// One call of the interpreter, waiting for the driver.
pub(crate) enum Call {
    /// A step or shell dispatch.
    Step {
        dispatch: StepDispatch,
        shell: bool,
        cancel: CancellationToken,
        reply: oneshot::Sender<StepReply>,
    },
    /// A wait on a named slot.
    Wait {
        wait: SignalWait,
        abandoned: CancellationToken,
        reply: oneshot::Sender<Result<SignalWake, DispatchError>>,
    },
    /// A bookkeeping effect.
    Book {
        effect: Bookkeeping,
        reply: oneshot::Sender<BookkeepingReply>,
    },
}

/// What the dispatcher and the driver share.
pub(crate) struct Shared {
    run_id: String,
    calls: Mutex<VecDeque<Call>>,
    now_ms: AtomicU64,
    patches: BTreeMap<String, bool>,
}

impl Shared {
    pub(crate) fn new(run_id: String, patches: BTreeMap<String, bool>) -> Arc<Self> {
        Arc::new(Self {
            run_id,
            calls: Mutex::new(VecDeque::new()),
            now_ms: AtomicU64::new(0),
            patches,
        })
    }

    /// The calls made since the last take, in the order they were made.
    pub(crate) fn take_calls(&self) -> VecDeque<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Sets the run's clock: the workflow's time of the activation being processed.
    pub(crate) fn set_now_ms(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::Release);
    }

    /// The run (its `RunStart`'s, which every activity names).
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    fn push(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(call);
    }
}

/// The dispatcher the interpreter runs with inside a run workflow.
pub(crate) struct WorkflowDispatcher {
    shared: Arc<Shared>,
}

impl WorkflowDispatcher {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    async fn dispatch(
        &self,
        request: &StepDispatch,
        shell: bool,
        cancellation: &CancellationToken,
    ) -> StepReply {
        let (reply, answer) = oneshot::channel();
        self.shared.push(Call::Step {
            dispatch: request.clone(),
            shell,
            cancel: cancellation.clone(),
            reply,
        });
        answer.await.unwrap_or_else(|_| Err(dropped()))
    }

    async fn book(&self, effect: Bookkeeping) -> BookkeepingReply {
        let (reply, answer) = oneshot::channel();
        self.shared.push(Call::Book { effect, reply });
        answer.await.unwrap_or_else(|_| Err(dropped()))
    }
}

/// The answer of a call the workflow dropped: it is shutting down (an eviction), so the walk is
/// thrown away and replayed, and nothing is recorded of it.
fn dropped() -> DispatchError {
    DispatchError::cancelled("the workflow stopped before the call was answered")
}

#[async_trait]
impl Dispatcher for WorkflowDispatcher {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.dispatch(request, false, cancellation).await
    }

    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        self.dispatch(request, true, cancellation).await
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        let (reply, answer) = oneshot::channel();
        self.shared.push(Call::Wait {
            wait: wait.clone(),
            abandoned: abandoned.clone(),
            reply,
        });
        answer.await.unwrap_or(Ok(SignalWake::Abandoned))
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        let run_id = self.shared.run_id.clone();
        let record = record.clone();
        self.book(Bookkeeping::Record { run_id, record }).await
    }

    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        let run_id = self.shared.run_id.clone();
        let notice = notice.clone();
        self.book(Bookkeeping::Notify { run_id, notice }).await
    }

    async fn resolve_human_step(
        &self,
        resolution: &HumanStepResolution,
    ) -> Result<(), DispatchError> {
        let run_id = self.shared.run_id.clone();
        let resolution = resolution.clone();
        self.book(Bookkeeping::Resolve { run_id, resolution }).await
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(self.shared.now_ms.load(Ordering::Acquire))
    }

    fn patched(&self, id: &str) -> bool {
        self.shared.patches.get(id).copied().unwrap_or(true)
    }
}
