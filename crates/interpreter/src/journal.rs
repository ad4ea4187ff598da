//! Record and replay: [`Recorder`] wraps any dispatcher and journals every call with its result;
//! [`Replayer`] answers a fresh run from that [`Journal`] and notes every call that differs.
//!
//! Replay is keyed by recording id, never by a global sequence: within one recording id calls
//! happen in a fixed order, while calls of concurrent fan-out branches may interleave
//! differently on every run. Both wrappers can [`Shuffle`] that interleaving on purpose, so tests
//! can show that the outcome and the per-recording-id calls do not depend on it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::delta::{ContextLog, LoggedContext};
use crate::dispatcher::{
    Dispatcher, HumanStepNotice, HumanStepResolution, SignalWait, SignalWake, StepDispatch,
    StepRecord,
};
use crate::error::DispatchError;

/// One dispatcher call, as made.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "call", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Effect {
    /// `dispatch_step`.
    Step(StepDispatch),
    /// `dispatch_shell`.
    Shell(StepDispatch),
    /// `wait_signal`.
    Wait(SignalWait),
    /// `record_step`.
    Record(StepRecord),
    /// `notify_human_step`.
    Notify(HumanStepNotice),
    /// `resolve_human_step`.
    Resolve(HumanStepResolution),
    /// `now_ms`.
    Now {
        /// The recording id the clock was read for.
        recording_id: String,
    },
}

impl Effect {
    /// The recording id the call belongs to.
    #[must_use]
    pub fn recording_id(&self) -> &str {
        match self {
            Self::Step(r) | Self::Shell(r) => &r.recording_id,
            Self::Wait(w) => &w.recording_id,
            Self::Record(r) => &r.recording_id,
            Self::Notify(n) => &n.recording_id,
            Self::Resolve(r) => &r.recording_id,
            Self::Now { recording_id } => recording_id,
        }
    }
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum EffectResult {
    /// A dispatch output.
    Output(Value),
    /// How a wait ended.
    Wake(SignalWake),
    /// A call with no value.
    Done,
    /// A clock reading.
    Time(u64),
    /// An error.
    Error(DispatchError),
}

/// One journaled call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// The call.
    pub effect: Effect,
    /// Its result.
    pub result: EffectResult,
}

/// Every call of a run with its result, in completion order.
///
/// Serialised, a journal holds the run context once: the first dispatch's `context` is
/// `{"full": …}` and every later one `{"delta": {"changes": […]}}` against the dispatch before it
/// (see [`ContextLog`], which reads them back).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Journal {
    /// The entries.
    pub entries: Vec<Entry>,
}

/// A dispatch as a journal writes it: the context as a logged context.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireDispatch<'a> {
    recording_id: &'a str,
    spec_node_id: &'a str,
    attempt: u32,
    step: &'a str,
    config: &'a Value,
    inputs: &'a Value,
    context: LoggedContext,
}

#[derive(Serialize)]
#[serde(tag = "call", rename_all = "camelCase")]
enum WireEffect<'a> {
    Step(WireDispatch<'a>),
    Shell(WireDispatch<'a>),
    #[serde(untagged)]
    Other(&'a Effect),
}

fn wire<'a>(request: &'a StepDispatch, log: &mut ContextLog) -> WireDispatch<'a> {
    WireDispatch {
        recording_id: &request.recording_id,
        spec_node_id: &request.spec_node_id,
        attempt: request.attempt,
        step: &request.step,
        config: &request.config,
        inputs: &request.inputs,
        context: log.log(&request.context),
    }
}

#[derive(Serialize)]
struct WireEntry<'a> {
    effect: WireEffect<'a>,
    result: &'a EffectResult,
}

impl Serialize for Journal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut log = ContextLog::default();
        let entries: Vec<WireEntry<'_>> = self
            .entries
            .iter()
            .map(|entry| WireEntry {
                effect: match &entry.effect {
                    Effect::Step(request) => WireEffect::Step(wire(request, &mut log)),
                    Effect::Shell(request) => WireEffect::Shell(wire(request, &mut log)),
                    other => WireEffect::Other(other),
                },
                result: &entry.result,
            })
            .collect();
        let mut out = serde::Serializer::serialize_struct(serializer, "Journal", 1)?;
        serde::ser::SerializeStruct::serialize_field(&mut out, "entries", &entries)?;
        serde::ser::SerializeStruct::end(out)
    }
}

impl Journal {
    /// The entries grouped by recording id, each group in call order.
    #[must_use]
    pub fn by_recording_id(&self) -> BTreeMap<String, Vec<Entry>> {
        let mut out: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
        for entry in &self.entries {
            out.entry(entry.effect.recording_id().to_owned())
                .or_default()
                .push(entry.clone());
        }
        out
    }
}

/// A deterministic source of extra scheduling points: before answering, a call yields to the
/// executor a pseudo-random number of times (0–3), so concurrent branches complete in an order
/// that depends on the seed.
#[derive(Debug)]
pub struct Shuffle(AtomicU64);

impl Shuffle {
    /// A shuffle from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(AtomicU64::new(seed | 1))
    }

    fn next(&self) -> u32 {
        let mut x = self.0.load(Ordering::SeqCst);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.store(x, Ordering::SeqCst);
        (x % 4) as u32
    }

    fn pause(&self) -> YieldTimes {
        YieldTimes(self.next())
    }
}

/// Returns `Pending` this many times, waking itself each time.
struct YieldTimes(u32);

impl Future for YieldTimes {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            Poll::Ready(())
        } else {
            self.0 -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

async fn pause(shuffle: Option<&Shuffle>) {
    if let Some(shuffle) = shuffle {
        shuffle.pause().await;
    }
}

/// Journals every call made through an inner dispatcher.
pub struct Recorder<D> {
    inner: D,
    shuffle: Option<Shuffle>,
    entries: Mutex<Vec<Entry>>,
}

impl<D: Dispatcher> Recorder<D> {
    /// Records calls to `inner`.
    #[must_use]
    pub fn new(inner: D) -> Self {
        Self {
            inner,
            shuffle: None,
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Shuffles the completion order of concurrent calls.
    #[must_use]
    pub fn with_shuffle(mut self, shuffle: Shuffle) -> Self {
        self.shuffle = Some(shuffle);
        self
    }

    /// The journal so far.
    #[must_use]
    pub fn journal(&self) -> Journal {
        Journal {
            entries: self
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    /// The wrapped dispatcher.
    #[must_use]
    pub fn inner(&self) -> &D {
        &self.inner
    }

    fn push(&self, effect: Effect, result: EffectResult) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Entry { effect, result });
    }
}

fn output_result(result: &Result<Value, DispatchError>) -> EffectResult {
    match result {
        Ok(value) => EffectResult::Output(value.clone()),
        Err(error) => EffectResult::Error(error.clone()),
    }
}

fn unit_result(result: &Result<(), DispatchError>) -> EffectResult {
    match result {
        Ok(()) => EffectResult::Done,
        Err(error) => EffectResult::Error(error.clone()),
    }
}

#[async_trait]
impl<D: Dispatcher> Dispatcher for Recorder<D> {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        pause(self.shuffle.as_ref()).await;
        let result = self.inner.dispatch_step(request, cancellation).await;
        self.push(Effect::Step(request.clone()), output_result(&result));
        result
    }

    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        pause(self.shuffle.as_ref()).await;
        let result = self.inner.dispatch_shell(request, cancellation).await;
        self.push(Effect::Shell(request.clone()), output_result(&result));
        result
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        pause(self.shuffle.as_ref()).await;
        let result = self.inner.wait_signal(wait, abandoned).await;
        let journaled = match &result {
            Ok(wake) => EffectResult::Wake(wake.clone()),
            Err(error) => EffectResult::Error(error.clone()),
        };
        self.push(Effect::Wait(wait.clone()), journaled);
        result
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        let result = self.inner.record_step(record).await;
        self.push(Effect::Record(record.clone()), unit_result(&result));
        result
    }

    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        let result = self.inner.notify_human_step(notice).await;
        self.push(Effect::Notify(notice.clone()), unit_result(&result));
        result
    }

    async fn resolve_human_step(
        &self,
        resolution: &HumanStepResolution,
    ) -> Result<(), DispatchError> {
        let result = self.inner.resolve_human_step(resolution).await;
        self.push(Effect::Resolve(resolution.clone()), unit_result(&result));
        result
    }

    async fn now_ms(&self, recording_id: &str) -> Result<u64, DispatchError> {
        let result = self.inner.now_ms(recording_id).await;
        let journaled = match &result {
            Ok(time) => EffectResult::Time(*time),
            Err(error) => EffectResult::Error(error.clone()),
        };
        self.push(
            Effect::Now {
                recording_id: recording_id.to_owned(),
            },
            journaled,
        );
        result
    }

    fn is_cancellation(&self, error: &DispatchError) -> bool {
        self.inner.is_cancellation(error)
    }

    fn patched(&self, id: &str) -> bool {
        self.inner.patched(id)
    }
}

/// Answers a run from a [`Journal`], per recording id, and notes every call that differs from
/// the journaled one (or has no journaled counterpart).
pub struct Replayer {
    pending: Mutex<HashMap<String, VecDeque<Entry>>>,
    divergences: Mutex<Vec<String>>,
    shuffle: Option<Shuffle>,
}

impl Replayer {
    /// A replayer over `journal`.
    #[must_use]
    pub fn new(journal: &Journal) -> Self {
        let mut pending: HashMap<String, VecDeque<Entry>> = HashMap::new();
        for entry in &journal.entries {
            pending
                .entry(entry.effect.recording_id().to_owned())
                .or_default()
                .push_back(entry.clone());
        }
        Self {
            pending: Mutex::new(pending),
            divergences: Mutex::new(Vec::new()),
            shuffle: None,
        }
    }

    /// Shuffles the completion order of concurrent calls.
    #[must_use]
    pub fn with_shuffle(mut self, shuffle: Shuffle) -> Self {
        self.shuffle = Some(shuffle);
        self
    }

    /// Every difference seen so far.
    #[must_use]
    pub fn divergences(&self) -> Vec<String> {
        self.divergences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Journaled calls the replay never made, by recording id.
    #[must_use]
    pub fn unconsumed(&self) -> BTreeMap<String, usize> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, entries)| !entries.is_empty())
            .map(|(id, entries)| (id.clone(), entries.len()))
            .collect()
    }

    fn answer(&self, effect: &Effect) -> Result<EffectResult, DispatchError> {
        let next = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(effect.recording_id())
            .and_then(VecDeque::pop_front);
        let message = match next {
            Some(entry) if entry.effect == *effect => return Ok(entry.result),
            Some(entry) => format!(
                "{}: replay made {:?}, the journal holds {:?}",
                effect.recording_id(),
                effect,
                entry.effect
            ),
            None => format!(
                "{}: replay made {effect:?}, the journal holds nothing more",
                effect.recording_id()
            ),
        };
        self.divergences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message.clone());
        Err(DispatchError::non_retryable("REPLAY_DIVERGED", message))
    }
}

fn diverged(result: &EffectResult) -> DispatchError {
    DispatchError::non_retryable(
        "REPLAY_DIVERGED",
        format!("journaled result {result:?} does not fit the call"),
    )
}

#[async_trait]
impl Dispatcher for Replayer {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        pause(self.shuffle.as_ref()).await;
        match self.answer(&Effect::Step(request.clone()))? {
            EffectResult::Output(value) => Ok(value),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }

    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        _cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        pause(self.shuffle.as_ref()).await;
        match self.answer(&Effect::Shell(request.clone()))? {
            EffectResult::Output(value) => Ok(value),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        _abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        pause(self.shuffle.as_ref()).await;
        match self.answer(&Effect::Wait(wait.clone()))? {
            EffectResult::Wake(wake) => Ok(wake),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        match self.answer(&Effect::Record(record.clone()))? {
            EffectResult::Done => Ok(()),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }

    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        match self.answer(&Effect::Notify(notice.clone()))? {
            EffectResult::Done => Ok(()),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }

    async fn resolve_human_step(
        &self,
        resolution: &HumanStepResolution,
    ) -> Result<(), DispatchError> {
        match self.answer(&Effect::Resolve(resolution.clone()))? {
            EffectResult::Done => Ok(()),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }

    async fn now_ms(&self, recording_id: &str) -> Result<u64, DispatchError> {
        let effect = Effect::Now {
            recording_id: recording_id.to_owned(),
        };
        match self.answer(&effect)? {
            EffectResult::Time(time) => Ok(time),
            EffectResult::Error(error) => Err(error),
            other => Err(diverged(&other)),
        }
    }
}
