//! A `ModelClient` wrapper that checks a `Meter` before every call and accrues the call's usage
//! once, whichever way its stream ends: completed (the call that passes a cap fails), failed
//! (the usage the provider reported before the failure is debited, then the failure is
//! returned) or dropped by the caller (debited when the stream is dropped).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;

use crate::ModelError;
use crate::budget::Meter;
use crate::client::{ModelClient, ModelStream};
use crate::model::{ModelRequest, ModelSpec, Usage};
use crate::stream::{ResponseBuilder, StreamEvent};

/// Meters every call of the wrapped client.
#[derive(Debug)]
pub struct MeteredClient<C> {
    inner: C,
    meter: Arc<Meter>,
}

impl<C> MeteredClient<C> {
    /// Wraps `inner`, charging `meter`.
    pub fn new(inner: C, meter: Arc<Meter>) -> Self {
        Self { inner, meter }
    }
}

#[async_trait::async_trait]
impl<C: ModelClient> ModelClient for MeteredClient<C> {
    fn spec(&self) -> &ModelSpec {
        self.inner.spec()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let spec = self.inner.spec().clone();
        self.meter.admit(&spec)?;
        let inner = self.inner.stream(request).await?;
        Ok(Box::pin(Metered {
            inner,
            usage: ResponseBuilder::new(),
            meter: Arc::clone(&self.meter),
            spec,
            state: State::Open,
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Debited; nothing more to yield.
    Done,
}

struct Metered {
    inner: ModelStream,
    /// Folds the usage reports (the builder's merge rule: later non-zero figures win).
    usage: ResponseBuilder,
    meter: Arc<Meter>,
    spec: ModelSpec,
    state: State,
}

impl Metered {
    /// Debits what the call has reported so far, once.
    fn settle(&mut self) -> Result<(), ModelError> {
        if self.state == State::Done {
            return Ok(());
        }
        self.state = State::Done;
        let usage: Usage = self.usage.usage();
        self.meter.record(&self.spec, &usage).map(|_| ())
    }
}

impl Stream for Metered {
    type Item = Result<StreamEvent, ModelError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.state == State::Done {
            return Poll::Ready(None);
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(event))) => {
                if let StreamEvent::Usage(reported) = &event {
                    this.usage.push(StreamEvent::Usage(*reported));
                }
                Poll::Ready(Some(Ok(event)))
            }
            Poll::Ready(Some(Err(error))) => {
                // What was consumed before the failure is still billed. The call's own error
                // is the one reported; a cap passed by the debit shows on the next `admit`.
                let _ = this.settle();
                tracing::debug!(model = %this.spec, code = error.code(), "failed call debited");
                Poll::Ready(Some(Err(error)))
            }
            // Accrue, then check: the call that passes a cap fails.
            Poll::Ready(None) => match this.settle() {
                Ok(()) => Poll::Ready(None),
                Err(error) => Poll::Ready(Some(Err(error))),
            },
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // A cancelled call: debit what the provider reported before the caller left.
        if self.state == State::Open {
            let _ = self.settle();
        }
    }
}
