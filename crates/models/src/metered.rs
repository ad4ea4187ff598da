//! A `ModelClient` wrapper that checks a `Meter` before every call and accrues the call's usage
//! when its stream ends, failing the call that passes a cap.

use std::sync::Arc;

use futures_util::StreamExt;

use crate::ModelError;
use crate::budget::Meter;
use crate::client::{ModelClient, ModelStream};
use crate::model::{ModelRequest, ModelSpec, Usage};
use crate::stream::StreamEvent;

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
        let meter = Arc::clone(&self.meter);
        let state = (inner, Usage::default(), false, meter, spec);
        Ok(Box::pin(futures_util::stream::unfold(
            state,
            |(mut inner, mut usage, mut done, meter, spec)| async move {
                if done {
                    return None;
                }
                match inner.next().await {
                    Some(Ok(event)) => {
                        if let StreamEvent::Usage(reported) = &event {
                            merge(&mut usage, *reported);
                        }
                        Some((Ok(event), (inner, usage, done, meter, spec)))
                    }
                    Some(Err(error)) => {
                        done = true;
                        Some((Err(error), (inner, usage, done, meter, spec)))
                    }
                    None => {
                        done = true;
                        // Accrue, then check: the call that passes a cap fails.
                        match meter.record(&spec, &usage) {
                            Ok(_) => None,
                            Err(error) => Some((Err(error), (inner, usage, done, meter, spec))),
                        }
                    }
                }
            },
        )))
    }
}

fn merge(into: &mut Usage, from: Usage) {
    let mut builder = crate::stream::ResponseBuilder::new();
    builder.push(StreamEvent::Usage(*into));
    builder.push(StreamEvent::Usage(from));
    *into = builder.finish().usage;
}
