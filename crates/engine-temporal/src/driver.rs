//! The workflow's side of the bridge: runs the interpreter inside the workflow's task and turns
//! each of its calls into Temporal commands.
//!
//! The interpreter's futures are woken by its own channels, which Temporal's executor neither
//! knows nor re-polls for (and its non-determinism detector would flag them). So the driver is a
//! small executor of its own: it polls the interpreter with a waker that only raises a flag,
//! starts a command for every new call, polls the commands' futures with the workflow's context,
//! answers the calls whose command finished, and repeats until a pass changes nothing. Every
//! decision depends only on the history and the order calls were made, so a replay makes the
//! same commands in the same order.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use auto_swe_interpreter::{
    CancellationToken, DispatchError, RunOptions, RunOutcome, SignalWait, SignalWake, WaitKind,
    run_spec,
};
use auto_swe_spec::WorkflowSpec;
use auto_swe_worker::{MAX_SPILLS, RunEnd, cut_bytes, long_string_pointers};
use serde_json::Value;
use temporalio_common::protos::temporal::api::common::v1::RetryPolicy;
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, CancellableFuture, LocalActivityOptions, TimerResult,
    WorkflowCancellationToken, WorkflowContext,
};
use tokio::sync::oneshot;

use crate::activities::RunActivities;
use crate::dispatcher::{Call, Shared, WorkflowDispatcher};
use crate::wire::{
    ActivityLimits, AnswerCall, Bookkeeping, BookkeepingReply, MAX_PAYLOAD_BYTES, SpillCall,
    StepCall, StepReply, encoded_len, oversized, too_large,
};
use crate::workflow::RunWorkflow;

/// Raised when something the interpreter awaits is ready.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

type StepFuture<'a> =
    Pin<Box<dyn CancellableFuture<Output = Result<StepReply, ActivityExecutionError>> + 'a>>;
type BookFuture<'a> =
    Pin<Box<dyn CancellableFuture<Output = Result<BookkeepingReply, ActivityExecutionError>> + 'a>>;
type AnswerFuture<'a> = Pin<
    Box<
        dyn CancellableFuture<Output = Result<Result<Value, DispatchError>, ActivityExecutionError>>
            + 'a,
    >,
>;
type TimerFuture<'a> = Pin<Box<dyn CancellableFuture<Output = TimerResult> + 'a>>;

/// A call whose command is under way.
enum Pending<'a> {
    /// A human node's wake-up, being made its answer by the host.
    Answer {
        future: AnswerFuture<'a>,
        reply: Option<oneshot::Sender<Result<SignalWake, DispatchError>>>,
    },
    Step {
        future: StepFuture<'a>,
        cancel: CancellationToken,
        reply: Option<oneshot::Sender<StepReply>>,
    },
    Book {
        future: BookFuture<'a>,
        reply: Option<oneshot::Sender<BookkeepingReply>>,
    },
    Wait {
        wait: SignalWait,
        seen: u64,
        timer: Option<TimerFuture<'a>>,
        abandoned: CancellationToken,
        reply: Option<oneshot::Sender<Result<SignalWake, DispatchError>>>,
    },
}

impl Pending<'_> {
    /// Whether the call is a wait (for a signal, a person's answer or a timer) rather than work.
    fn is_wait(&self) -> bool {
        matches!(self, Self::Wait { .. })
    }
}

/// What readers are shown of a run that waits: `WAITING` once every call in flight is a wait,
/// `RUNNING` again once one is not, as the embedded engine shows a parked run. A change is
/// written by a bookkeeping activity, one at a time; it is decided only where the walk has
/// settled (nothing more to poll), so the moment between one call ending and the next starting
/// is never taken for a wait, and a replay decides the same at the same points.
struct WaitStatus<'a> {
    /// Whether this run reports its waits (a run recorded before it did replays without).
    enabled: bool,
    /// What the last write said.
    shown_waiting: bool,
    /// The write under way and what it says.
    writing: Option<(BookFuture<'a>, bool)>,
}

impl<'a> WaitStatus<'a> {
    /// Polls the write under way; `true` when it finished. A failed write is not retried
    /// further: the status is only what readers see, and the run goes on.
    fn advance(&mut self, cx: &mut Context<'_>) -> bool {
        let Some((future, waiting)) = self.writing.as_mut() else {
            return false;
        };
        let Poll::Ready(done) = future.as_mut().poll(cx) else {
            return false;
        };
        if let Err(error) = done
            .map_err(|error| bookkeeping_failure(&error))
            .and_then(|r| r)
        {
            tracing::warn!(code = %error.code, "the run's waiting status was not written");
        }
        self.shown_waiting = *waiting;
        self.writing = None;
        true
    }

    /// Starts a write when the settled walk waits and readers are shown otherwise, or the other
    /// way round; `true` when one started.
    fn settle(
        &mut self,
        ctx: &'a WorkflowContext<RunWorkflow>,
        shared: &Shared,
        pending: &[Pending<'_>],
        limits: ActivityLimits,
        ids: &mut ActivityIds,
    ) -> bool {
        if !self.enabled || self.writing.is_some() {
            return false;
        }
        let waiting = !pending.is_empty() && pending.iter().all(Pending::is_wait);
        if waiting == self.shown_waiting {
            return false;
        }
        let on = if waiting {
            pending.iter().find_map(|call| match call {
                Pending::Wait { wait, .. } => Some(wait.name.clone()),
                _ => None,
            })
        } else {
            None
        };
        let effect = Bookkeeping::Waiting {
            run_id: shared.run_id().to_owned(),
            waiting,
            on,
        };
        self.writing = Some((book(ctx, effect, limits, ids), waiting));
        true
    }
}

/// Runs `spec` to its end inside the workflow; `report_waits` shows readers when the run only
/// waits ([`WaitStatus`]).
pub(crate) async fn drive(
    ctx: &WorkflowContext<RunWorkflow>,
    spec: &WorkflowSpec,
    input: Value,
    shared: Arc<Shared>,
    limits: ActivityLimits,
    report_waits: bool,
) -> RunOutcome {
    let dispatcher = WorkflowDispatcher::new(Arc::clone(&shared));
    let run_token = CancellationToken::new();
    let options = RunOptions::default().with_cancellation(run_token.clone());
    let mut walk = pin!(run_spec(spec, input, &dispatcher, options));
    let mut outcome = None;
    let flag = Arc::new(Flag::default());
    let inner = Waker::from(Arc::clone(&flag));
    let mut pending: Vec<Pending<'_>> = Vec::new();
    let mut cancelled = pin!(ctx.cancelled());
    let mut cancel_seen = false;
    let mut ids = ActivityIds::default();
    let mut status = WaitStatus {
        enabled: report_waits,
        shown_waiting: false,
        writing: None,
    };
    std::future::poll_fn(move |cx| {
        loop {
            flag.0.store(false, Ordering::Release);
            shared.set_now_ms(workflow_now_ms(ctx));
            if outcome.is_none()
                && let Poll::Ready(done) = walk.as_mut().poll(&mut Context::from_waker(&inner))
            {
                outcome = Some(done);
            }
            let mut progressed = false;
            if !cancel_seen && cancelled.as_mut().poll(cx).is_ready() {
                cancel_seen = true;
                run_token.cancel();
                progressed = true;
            }
            for call in shared.take_calls() {
                if let Some(started) = start(ctx, &shared, call, limits, &mut ids) {
                    pending.push(started);
                }
                progressed = true;
            }
            let before = pending.len();
            pending.retain_mut(|call| !advance(ctx, &shared, call, cx, limits, &mut ids));
            progressed |= pending.len() != before;
            progressed |= status.advance(cx);
            if !progressed && !flag.0.load(Ordering::Acquire) {
                // Settled: the calls in flight are the walk's real state.
                if outcome.is_none() && status.settle(ctx, &shared, &pending, limits, &mut ids) {
                    continue;
                }
                break;
            }
        }
        if pending.is_empty()
            && status.writing.is_none()
            && let Some(done) = outcome.take()
        {
            return Poll::Ready(done);
        }
        Poll::Pending
    })
    .await
}

/// The workflow's time in milliseconds since the epoch (0 before the first activation).
fn workflow_now_ms(ctx: &WorkflowContext<RunWorkflow>) -> u64 {
    ctx.workflow_time()
        .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Activity ids: the recording id, with the call's occurrence after it from the second on (an
/// `onFail` retry dispatches the same recording id again).
#[derive(Default)]
struct ActivityIds(BTreeMap<String, u32>);

impl ActivityIds {
    fn next(&mut self, base: String) -> String {
        let seen = self.0.entry(base.clone()).or_insert(0);
        *seen += 1;
        if *seen == 1 {
            base
        } else {
            format!("{base}~{seen}")
        }
    }
}

fn retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        maximum_attempts: i32::try_from(attempts).unwrap_or(i32::MAX),
        ..RetryPolicy::default()
    }
}

/// Starts the command for `call`; `None` when it was answered at once.
fn start<'a>(
    ctx: &'a WorkflowContext<RunWorkflow>,
    shared: &Shared,
    call: Call,
    limits: ActivityLimits,
    ids: &mut ActivityIds,
) -> Option<Pending<'a>> {
    match call {
        Call::Step {
            dispatch,
            shell,
            cancel,
            reply,
        } => {
            let id = ids.next(dispatch.recording_id.clone());
            let heartbeat = Duration::from_secs(limits.heartbeat_timeout_secs.max(1));
            let options = ActivityOptions::with_start_to_close_timeout(Duration::from_secs(
                limits.step_timeout_secs.max(1),
            ))
            .activity_id(id)
            .heartbeat_timeout(heartbeat)
            .retry_policy(retry(limits.step_attempts))
            // Stopped through the run's own token (so the interpreter sees the
            // cancellation where it happens), never by the workflow's.
            .cancellation_token(WorkflowCancellationToken::new())
            .build();
            let heartbeat_every_ms = u64::try_from(heartbeat.as_millis() / 4).unwrap_or(1000);
            let call = StepCall {
                run_id: shared.run_id().to_owned(),
                shell,
                dispatch,
                heartbeat_every_ms: heartbeat_every_ms.max(100),
            };
            // Inputs too large for a payload would fail the workflow task for ever: the step
            // fails instead, before anything is scheduled.
            if let Some(bytes) = oversized(&call) {
                let _ = reply.send(Err(too_large("inputs are", bytes)));
                return None;
            }
            let future = ctx.execute_activity(RunActivities::step, call, options);
            Some(Pending::Step {
                future: Box::pin(future),
                cancel,
                reply: Some(reply),
            })
        }
        Call::Book { effect, reply } => {
            let future = book(ctx, effect, limits, ids);
            Some(Pending::Book {
                future,
                reply: Some(reply),
            })
        }
        Call::Wait {
            wait,
            abandoned,
            reply,
        } => {
            if abandoned.is_cancelled() {
                let _ = reply.send(Ok(SignalWake::Abandoned));
                return None;
            }
            if let Some(payload) = ctx.state_mut(|state| state.take(&wait.name)) {
                return delivered(ctx, shared, &wait, payload, reply, limits, ids);
            }
            let seen = ctx.state(|state| state.deliveries(&wait.name));
            let timer = wait.timeout_ms.map(|ms| {
                let timer: TimerFuture<'_> = Box::pin(ctx.timer(Duration::from_millis(ms)));
                timer
            });
            Some(Pending::Wait {
                wait,
                seen,
                timer,
                abandoned,
                reply: Some(reply),
            })
        }
    }
}

/// Schedules a bookkeeping activity; it runs whether or not the workflow is being cancelled (a
/// cancelled run still records its steps and its end).
fn book<'a>(
    ctx: &'a WorkflowContext<RunWorkflow>,
    effect: Bookkeeping,
    limits: ActivityLimits,
    ids: &mut ActivityIds,
) -> BookFuture<'a> {
    let (prefix, recording) = match &effect {
        Bookkeeping::Record { record, .. } => ("record", record.recording_id.as_str()),
        Bookkeeping::Notify { notice, .. } => ("notify", notice.recording_id.as_str()),
        Bookkeeping::Resolve { resolution, .. } => ("resolve", resolution.recording_id.as_str()),
        Bookkeeping::Waiting { waiting: true, .. } => ("status", "waiting"),
        Bookkeeping::Waiting { waiting: false, .. } => ("status", "running"),
        Bookkeeping::Finish { .. } => ("finish", "run"),
    };
    let id = ids.next(format!("{prefix}:{recording}"));
    if matches!(effect, Bookkeeping::Finish { .. }) {
        let options = ActivityOptions::with_start_to_close_timeout(Duration::from_mins(1))
            .activity_id(id)
            .retry_policy(retry(limits.bookkeeping_attempts))
            .cancellation_token(WorkflowCancellationToken::new())
            .build();
        return Box::pin(ctx.execute_activity(RunActivities::bookkeeping, effect, options));
    }
    // A record or a human step is one short write: it runs as a local activity, inside the
    // workflow task that asked for it, which spares the run a round trip through the server per
    // node (its result is still a marker in the history, so a replay does not write again).
    let options = local_options(id, limits);
    Box::pin(ctx.execute_local_activity(RunActivities::bookkeeping, effect, options))
}

/// A short write made inside the workflow task, outside the workflow's cancellation scope.
fn local_options(id: String, limits: ActivityLimits) -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .activity_id(id)
        .retry_policy(retry(limits.bookkeeping_attempts).into())
        .start_to_close_timeout(Duration::from_mins(1))
        .cancellation_token(WorkflowCancellationToken::new())
        .build()
}

/// `end` made small enough to be a Temporal payload (the end's bookkeeping input and the
/// workflow's result): its long strings, in document order, become artifacts of the run and
/// placeholders in the document (the embedded engine's spill, one activity per string) until
/// it fits; if it still does not, its context, then its result, give way to a note of their
/// size. An end that fits is returned as it is, with no command made.
pub(crate) async fn fit_end(
    ctx: &WorkflowContext<RunWorkflow>,
    mut end: RunEnd,
    run_id: &str,
    limits: ActivityLimits,
) -> RunEnd {
    if encoded_len(&end) <= MAX_PAYLOAD_BYTES {
        return end;
    }
    let Some(mut document) = end.result.take() else {
        return end;
    };
    // Room for the end's bookkeeping around the document. The document's size is kept up to
    // date as strings are replaced, not encoded again after each one.
    let budget = MAX_PAYLOAD_BYTES - 1024;
    let mut size = encoded_len(&document);
    let mut ids = ActivityIds::default();
    for pointer in long_string_pointers(&document).into_iter().take(MAX_SPILLS) {
        if size <= budget {
            break;
        }
        let Some(Value::String(text)) = document.pointer(&pointer) else {
            continue;
        };
        let call = SpillCall {
            run_id: run_id.to_owned(),
            text: cut_bytes(text, budget).to_owned(),
            bytes: text.len(),
        };
        let options = local_options(ids.next(format!("spill:{pointer}")), limits);
        let kept = match ctx
            .execute_local_activity(RunActivities::spill, call, options)
            .await
        {
            Ok(Ok(placeholder)) => placeholder,
            // Kept nowhere: the document still says how long the text was.
            Ok(Err(_)) | Err(_) => format!("[{} bytes, not kept]", text.len()),
        };
        if let Some(slot) = document.pointer_mut(&pointer) {
            size = replaced(size, slot, Value::String(kept));
        }
    }
    for part in ["context", "result"] {
        if size <= budget {
            break;
        }
        if let Some(slot) = document.get_mut(part) {
            let bytes = encoded_len(slot);
            let note = format!("[{bytes} bytes, too large for a Temporal payload; not kept]");
            size = replaced(size, slot, Value::String(note));
        }
    }
    end.result = Some(document);
    end
}

/// Puts `value` in `slot` of a document `size` bytes long encoded; returns the new size.
fn replaced(size: usize, slot: &mut Value, value: Value) -> usize {
    let gone = encoded_len(slot);
    let added = encoded_len(&value);
    *slot = value;
    (size + added).saturating_sub(gone)
}

/// Runs the end's bookkeeping: the last command of every run.
pub(crate) async fn finish(
    ctx: &WorkflowContext<RunWorkflow>,
    effect: Bookkeeping,
    limits: ActivityLimits,
) -> Result<BookkeepingReply, ActivityExecutionError> {
    book(ctx, effect, limits, &mut ActivityIds::default()).await
}

/// An activity that failed as an activity (its attempts ran out, it timed out, it was
/// cancelled) rather than through its executor.
fn activity_failure(error: &ActivityExecutionError) -> DispatchError {
    match error {
        ActivityExecutionError::Cancelled(_) => {
            DispatchError::cancelled("the activity was cancelled")
        }
        other => DispatchError::failure("ENGINE_ACTIVITY_FAILED", other.to_string()),
    }
}

/// A bookkeeping or answer activity that failed as an activity: nothing a retry of the node
/// would mend.
fn bookkeeping_failure(error: &ActivityExecutionError) -> DispatchError {
    let mut failure = activity_failure(error);
    failure.non_retryable = true;
    failure
}

/// Advances one call; `true` when it is done.
fn advance<'a>(
    ctx: &'a WorkflowContext<RunWorkflow>,
    shared: &Shared,
    call: &mut Pending<'a>,
    cx: &mut Context<'_>,
    limits: ActivityLimits,
    ids: &mut ActivityIds,
) -> bool {
    match call {
        Pending::Step {
            future,
            cancel,
            reply,
        } => {
            if reply.is_some() && cancel.is_cancelled() {
                future.cancel();
                if let Some(reply) = reply.take() {
                    let _ = reply.send(Err(DispatchError::cancelled("the step was cancelled")));
                }
            }
            match future.as_mut().poll(cx) {
                Poll::Ready(done) => {
                    if let Some(reply) = reply.take() {
                        let _ =
                            reply.send(done.unwrap_or_else(|error| Err(activity_failure(&error))));
                    }
                    true
                }
                Poll::Pending => false,
            }
        }
        Pending::Book { future, reply } => match future.as_mut().poll(cx) {
            Poll::Ready(done) => {
                if let Some(reply) = reply.take() {
                    let answer = done.unwrap_or_else(|error| Err(bookkeeping_failure(&error)));
                    let _ = reply.send(answer);
                }
                true
            }
            Poll::Pending => false,
        },
        Pending::Answer { future, reply } => match future.as_mut().poll(cx) {
            Poll::Ready(done) => {
                if let Some(reply) = reply.take() {
                    let answer = match done {
                        Ok(Ok(payload)) => Ok(SignalWake::Delivered { payload }),
                        Ok(Err(error)) => Err(error),
                        Err(error) => Err(bookkeeping_failure(&error)),
                    };
                    let _ = reply.send(answer);
                }
                true
            }
            Poll::Pending => false,
        },
        Pending::Wait {
            wait,
            seen,
            timer,
            abandoned,
            reply,
        } => {
            let Some(wake) = wake_of(ctx, &wait.name, *seen, timer, abandoned, cx) else {
                return false;
            };
            if !matches!(wake, SignalWake::TimedOut)
                && let Some(timer) = timer.take()
            {
                timer.cancel();
            }
            let Some(reply) = reply.take() else {
                return true;
            };
            match wake {
                SignalWake::Delivered { payload } => {
                    let wait = wait.clone();
                    match delivered(ctx, shared, &wait, payload, reply, limits, ids) {
                        Some(answering) => {
                            *call = answering;
                            // Not done: the answer is under way; poll it at once.
                            advance(ctx, shared, call, cx, limits, ids)
                        }
                        None => true,
                    }
                }
                other => {
                    let _ = reply.send(Ok(other));
                    true
                }
            }
        }
    }
}

/// What ends a wait now, if anything: its abandonment, a delivery to its slot since it began, or
/// its timer.
fn wake_of(
    ctx: &WorkflowContext<RunWorkflow>,
    name: &str,
    seen: u64,
    timer: &mut Option<TimerFuture<'_>>,
    abandoned: &CancellationToken,
    cx: &mut Context<'_>,
) -> Option<SignalWake> {
    if abandoned.is_cancelled() {
        Some(SignalWake::Abandoned)
    } else if ctx.state(|state| state.deliveries(name)) > seen {
        Some(match ctx.state_mut(|state| state.take(name)) {
            Some(payload) => SignalWake::Delivered { payload },
            None => SignalWake::SlotEmpty,
        })
    } else if let Some(timer) = timer.as_mut()
        && timer.as_mut().poll(cx).is_ready()
    {
        Some(SignalWake::TimedOut)
    } else {
        None
    }
}

/// Delivers `payload` to `wait`: at once for a `signal` node; for a human node, once the host
/// made it the answer (the answerer the store recorded, not the signal's claim).
fn delivered<'a>(
    ctx: &'a WorkflowContext<RunWorkflow>,
    shared: &Shared,
    wait: &SignalWait,
    payload: Value,
    reply: oneshot::Sender<Result<SignalWake, DispatchError>>,
    limits: ActivityLimits,
    ids: &mut ActivityIds,
) -> Option<Pending<'a>> {
    if wait.kind != WaitKind::Human {
        let _ = reply.send(Ok(SignalWake::Delivered { payload }));
        return None;
    }
    let call = AnswerCall {
        run_id: shared.run_id().to_owned(),
        wait: wait.clone(),
        payload,
    };
    let options = local_options(ids.next(format!("answer:{}", wait.recording_id)), limits);
    let future = ctx.execute_local_activity(RunActivities::answer, call, options);
    Some(Pending::Answer {
        future: Box::pin(future),
        reply: Some(reply),
    })
}
