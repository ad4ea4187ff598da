//! Fuzzes the SSE decoders of every provider protocol: any byte stream must decode to events or
//! a classified error, never a panic.

#![no_main]

use auto_swe_models::{Api, decode_bytes};
use futures_util::StreamExt as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let api = match selector % 4 {
        0 => Api::AnthropicMessages,
        1 => Api::OpenaiResponses,
        2 => Api::OpenaiChat,
        _ => Api::GoogleGemini,
    };
    // Split the body in two reads so frame boundaries fall anywhere.
    let cut = usize::from(selector) % (body.len() + 1);
    let reads = vec![
        Ok::<_, std::convert::Infallible>(body[..cut].to_vec()),
        Ok(body[cut..].to_vec()),
    ];
    let mut stream = decode_bytes(api, futures_util::stream::iter(reads));
    // Every read is ready at once, so polling with a no-op waker drives the stream to its end.
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    while let std::task::Poll::Ready(Some(item)) = stream.poll_next_unpin(&mut context) {
        if item.is_err() {
            break;
        }
    }
});
