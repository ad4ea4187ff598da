//! OpenAI-style embeddings (`POST /v1/embeddings`), 1536 dimensions enforced, metered by cost.

use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::{Value, json};
use url::Url;

use crate::ModelError;
use crate::budget::Meter;
use crate::client::{ClientConfig, Endpoint, default_base};
use crate::http::{ApiKey, GuardedHttp};
use crate::model::{ModelSpec, Provider, Usage};
use crate::providers::{classify_http, join};

/// The one dimension count stored vectors have.
pub const EMBEDDING_DIMENSIONS: usize = 1536;

/// The result of one embedding call.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens.
    pub input_tokens: u64,
    /// USD (zero when unpriced).
    pub cost_usd: f64,
}

/// An embeddings client for an `OpenAI` or OpenAI-compatible model.
#[derive(Debug, Clone)]
pub struct EmbeddingClient {
    spec: ModelSpec,
    key: ApiKey,
    url: Url,
    http: GuardedHttp,
}

impl EmbeddingClient {
    /// Builds the client (`OpenAI` and OpenAI-compatible only).
    pub fn new(config: ClientConfig) -> Result<Self, ModelError> {
        let provider = config.spec.provider();
        if !matches!(provider, Provider::Openai | Provider::OpenaiCompatible) {
            return Err(ModelError::Configuration {
                message: format!(
                    "{} has no OpenAI-style embeddings endpoint",
                    provider.as_str()
                ),
            });
        }
        let (base, path) = match (&config.endpoint, default_base(provider)) {
            (Endpoint::Default, Some(base)) => (
                Url::parse(base).map_err(|_| ModelError::Configuration {
                    message: "bad built-in base URL".into(),
                })?,
                "/v1/embeddings",
            ),
            (Endpoint::BaseUrl(url), _) => (url.clone(), "/v1/embeddings"),
            (Endpoint::ApiBase(url), _) => (url.clone(), "/embeddings"),
            (Endpoint::Default, None) => {
                return Err(ModelError::Configuration {
                    message: "openai-compatible needs an apiBase".into(),
                });
            }
        };
        let http = GuardedHttp::with_lookup(&base, config.policy, config.http, config.lookup)?;
        Ok(Self {
            url: join(&base, path)?,
            spec: config.spec,
            key: config.key,
            http,
        })
    }

    /// Embeds `inputs`, accruing the cost on `meter`.
    pub async fn embed(&self, inputs: &[String], meter: &Meter) -> Result<Embeddings, ModelError> {
        meter.admit(&self.spec)?;
        let mut headers = HeaderMap::new();
        if !self.key.is_empty() {
            headers.insert(
                HeaderName::from_static("authorization"),
                self.key.header("Bearer ")?,
            );
        }
        let mut body =
            json!({"model": self.spec.model(), "input": inputs, "encoding_format": "float"});
        if self.spec.model().starts_with("text-embedding-3") {
            body["dimensions"] = json!(EMBEDDING_DIMENSIONS);
        }
        let body = serde_json::to_vec(&body).map_err(|e| ModelError::Configuration {
            message: e.to_string(),
        })?;
        let response = self
            .http
            .post_json(self.url.clone(), headers, body)
            .await
            .map_err(|f| f.error)?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await?;
        if !(200..300).contains(&status) {
            return Err(classify_http(status, &headers, &bytes));
        }
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|e| ModelError::InvalidResponse {
                message: format!("the embeddings response is not JSON: {e}"),
            })?;
        let embeddings = parse_embeddings(&value, inputs.len())?;
        let usage = Usage {
            input: embeddings.1,
            ..Usage::default()
        };
        let charge = meter.charge(&self.spec, &usage);
        meter.record_cost(charge.cost_usd)?;
        Ok(Embeddings {
            vectors: embeddings.0,
            input_tokens: embeddings.1,
            cost_usd: charge.cost_usd,
        })
    }
}

fn parse_embeddings(value: &Value, expected: usize) -> Result<(Vec<Vec<f32>>, u64), ModelError> {
    let invalid = |message: String| ModelError::InvalidResponse { message };
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("the embeddings response has no data".into()))?;
    if data.len() != expected {
        return Err(invalid(format!(
            "expected {expected} embeddings, got {}",
            data.len()
        )));
    }
    let mut vectors: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let vector: Vec<f32> = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("an embedding is not an array of numbers".into()))?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| invalid("an embedding is not an array of numbers".into()))?;
        if vector.len() != EMBEDDING_DIMENSIONS {
            return Err(invalid(format!(
                "an embedding has {} dimensions, not {EMBEDDING_DIMENSIONS}",
                vector.len()
            )));
        }
        vectors.push((index, vector));
    }
    vectors.sort_by_key(|(i, _)| *i);
    let tokens = value
        .get("usage")
        .and_then(|u| u.get("prompt_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Ok((vectors.into_iter().map(|(_, v)| v).collect(), tokens))
}

/// Keeps `Arc` in the public signature family for callers sharing one meter.
pub type SharedMeter = Arc<Meter>;
