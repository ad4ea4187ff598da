//! auto-swe model providers: a provider-neutral request/response model, streaming clients for
//! Anthropic Messages, `OpenAI` Responses and Chat Completions, Google Gemini and any
//! OpenAI-compatible endpoint, the reasoning-level mapping, pricing, counted tokens, budget
//! tiers and the `Meter`, embeddings, a replay provider, and a guarded HTTP client that applies
//! the outbound URL policy to every URL and every resolved address.
//!
//! With the `testing` feature, `testing` holds loopback mock servers for every provider that
//! speak the published wire formats.
//!
//! ```
//! use auto_swe_models::{ModelSpec, Provider, capabilities};
//!
//! let spec = ModelSpec::parse("anthropic/claude-sonnet-4-5")?;
//! assert_eq!(spec.provider(), Provider::Anthropic);
//! assert!(capabilities(&spec).context_window >= 200_000);
//! // A spec names a provider and a model, or it is a typed error.
//! assert_eq!(ModelSpec::parse("no-slash").unwrap_err().code(), "MODEL_CONFIGURATION");
//! # Ok::<(), auto_swe_models::ModelError>(())
//! ```

mod budget;
mod capabilities;
mod client;
mod embeddings;
mod error;
mod http;
mod metered;
mod model;
mod price_file;
mod pricing;
mod providers;
mod reasoning;
mod replay;
mod retry;
mod sse;
mod stream;
#[cfg(feature = "testing")]
pub mod testing;

pub use budget::{
    CallLedger, CallLog, Charge, Meter, MeterConfig, MeterTotals, MeteredCall, Spend, Tier,
    TokenCaps, budget_message, group, usd_to_micros,
};
pub use capabilities::{
    Adjustment, CacheSupport, Efforts, ModelCapabilities, ResponseStorage, Thinking, capabilities,
};
pub use client::{
    ClientConfig, Endpoint, ModelClient, ModelStream, ProviderClient, collect, decode_bytes,
};
pub use embeddings::{EMBEDDING_DIMENSIONS, EmbeddingClient, Embeddings, SharedMeter};
pub use error::{ModelError, scrub};
pub use http::{
    ApiKey, GuardedHttp, HttpConfig, HttpResponse, NameLookup, SendError, SystemLookup,
};
pub use metered::MeteredClient;
pub use model::{
    CacheTtl, FinishReason, Message, ModelRequest, ModelResponse, ModelSpec, OutputFormat, Part,
    PromptCache, Provider, ReasoningLevel, ReasoningMetadata, Role, ToolCall, ToolChoice,
    ToolDefinition, ToolResult, Usage,
};
pub use price_file::{BUILTIN_PRICES, PRICE_FILE_VERSION, PriceEntry, PriceFile, PriceFileError};
pub use pricing::{
    ANTHROPIC_CACHE, CacheMultipliers, LongContext, Price, PriceCatalog, PriceLookup, PriceSource,
    Rates, counted_input,
};
pub use providers::{Api, Decoder};
pub use reasoning::{
    ANTHROPIC_BUDGETS, Effort, GOOGLE_BUDGETS, ReasoningCall, Route, anthropic_can_think,
    reasoning_call,
};
pub use replay::{Cassette, Exchange, ReplayClient, events_for};
pub use retry::{Jitter, RetryPolicy, go_duration, retry_after, retry_after_at};
pub use sse::{SseEvent, SseParser};
pub use stream::{ResponseBuilder, StreamEvent};
