//! Benchmarks: SSE decoding throughput over a 10 MB recorded stream (our parser alone, and
//! parser plus protocol decoder, against `eventsource-stream` as the baseline), and per-call
//! client overhead against the loopback mock (against a bare HTTP POST of the same bytes).

#![expect(
    clippy::unwrap_used,
    reason = "a benchmark fails loudly on setup errors"
)]

use std::hint::black_box;
use std::sync::Arc;

use auto_swe_models::testing::{MockReply, MockServer, MockTurn, render_reply};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, FinishReason, Message, ModelClient, ModelRequest,
    ModelSpec, Part, ProviderClient, SseParser, ToolCall, Usage, decode_bytes,
};
use auto_swe_scanners::UrlPolicy;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;

const TARGET: usize = 10 * 1024 * 1024;
const READ: usize = 16 * 1024;

/// A recorded-style stream of about 10 MB: text, thinking and tool-call deltas.
fn recorded(api: Api) -> Vec<u8> {
    let sentence =
        "The quick brown fox jumps over the lazy dog while the compiler checks every borrow. ";
    let text: String = sentence.repeat(4_000);
    let reply = MockReply {
        parts: vec![
            Part::text(text.clone()),
            Part::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "write_file".into(),
                arguments: serde_json::json!({"path": "src/lib.rs", "content": text}).to_string(),
                thought_signature: None,
                item_id: None,
            }),
        ],
        finish: FinishReason::ToolCalls,
        usage: Usage {
            input: 1_000,
            output: 2_000,
            ..Usage::default()
        },
        chunk: 24,
    };
    let (frames, tail) = render_reply(api, "bench-model", &reply);
    let body: Vec<u8> = frames[..frames.len() - tail].concat();
    let closing: Vec<u8> = frames[frames.len() - tail..].concat();
    let mut out = Vec::with_capacity(TARGET + body.len());
    // Repeat the body frames (without the opening/closing ones for Anthropic, whose
    // message_start is harmless to repeat) until the stream is 10 MB, then close it.
    while out.len() < TARGET {
        out.extend_from_slice(&body);
    }
    out.extend_from_slice(&closing);
    out
}

fn chunks(bytes: &[u8]) -> Vec<bytes::Bytes> {
    bytes
        .chunks(READ)
        .map(bytes::Bytes::copy_from_slice)
        .collect()
}

fn sse_decoding(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("sse_decode_10mb");
    group.sample_size(10);
    for (name, api) in [
        ("anthropic", Api::AnthropicMessages),
        ("openai_chat", Api::OpenaiChat),
        ("openai_responses", Api::OpenaiResponses),
        ("google", Api::GoogleGemini),
    ] {
        let stream = recorded(api);
        group.throughput(Throughput::Bytes(stream.len() as u64));
        let pieces = chunks(&stream);
        group.bench_function(format!("{name}/eventsource_stream_parser"), |b| {
            b.to_async(&runtime).iter(|| async {
                let source = futures_util::stream::iter(
                    pieces
                        .clone()
                        .into_iter()
                        .map(Ok::<_, std::convert::Infallible>),
                );
                let mut events = source.eventsource();
                let mut count = 0usize;
                while let Some(event) = events.next().await {
                    count += event.unwrap().data.len();
                }
                black_box(count)
            });
        });
        group.bench_function(format!("{name}/sse_parser"), |b| {
            b.iter(|| {
                let mut parser = SseParser::new();
                let mut out = Vec::new();
                let mut count = 0usize;
                for piece in &pieces {
                    parser.feed(piece, &mut out).unwrap();
                    count += out.drain(..).map(|e| e.data.len()).sum::<usize>();
                }
                black_box(count)
            });
        });
        group.bench_function(format!("{name}/decode_to_events"), |b| {
            b.to_async(&runtime).iter(|| async {
                let source = futures_util::stream::iter(
                    pieces
                        .clone()
                        .into_iter()
                        .map(Ok::<_, std::convert::Infallible>),
                );
                let mut events = decode_bytes(api, source);
                let mut count = 0usize;
                while let Some(event) = events.next().await {
                    black_box(event.unwrap());
                    count += 1;
                }
                black_box(count)
            });
        });
    }
    group.finish();
}

fn call_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api = Api::AnthropicMessages;
    let reply = MockReply::text("A short answer of a few words.");
    let (frames, _) = render_reply(api, "claude-haiku-4-5", &reply);
    let body = frames.concat();
    let server = runtime
        .block_on(MockServer::start(
            api,
            None,
            vec![MockTurn::Raw {
                status: 200,
                content_type: "text/event-stream".into(),
                body: body.clone(),
            }],
        ))
        .unwrap();
    let mut policy = UrlPolicy::default();
    policy.allow_private_origin(&server.origin()).unwrap();
    let mut config = ClientConfig::new(
        ModelSpec::parse("anthropic/claude-haiku-4-5").unwrap(),
        ApiKey::new("bench-key"),
    );
    config.endpoint = Endpoint::BaseUrl(url::Url::parse(&server.base_url()).unwrap());
    config.policy = Arc::new(policy);
    let client = ProviderClient::new(config).unwrap();
    let request = ModelRequest {
        messages: vec![Message::user("hi")],
        max_tokens: Some(64),
        ..ModelRequest::default()
    };
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{}/v1/messages", server.base_url());
    let request_body =
        serde_json::json!({"model": "claude-haiku-4-5", "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
        .to_string();

    let mut group = c.benchmark_group("call_overhead_loopback");
    group.bench_function("bare_http_post_and_read", |b| {
        b.to_async(&runtime).iter(|| async {
            let response = plain
                .post(&url)
                .header("content-type", "application/json")
                .body(request_body.clone())
                .send()
                .await
                .unwrap();
            black_box(response.bytes().await.unwrap().len())
        });
    });
    group.bench_function("model_client_complete", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(client.complete(&request).await.unwrap()) });
    });
    group.finish();
}

criterion_group!(benches, sse_decoding, call_overhead);
criterion_main!(benches);
