//! The SSE parser agrees with `eventsource-stream` (the reference implementation we compare
//! against) on generated streams split at arbitrary points.

use auto_swe_models::{SseEvent, SseParser};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use proptest::prelude::*;

fn line() -> impl Strategy<Value = String> {
    let text = "[a-zA-Z0-9 :{}\",.é漢-]{0,12}";
    prop_oneof![
        text.prop_map(|t| format!("data: {t}")),
        text.prop_map(|t| format!("data:{t}")),
        Just("data".to_owned()),
        "[a-z_.]{1,10}".prop_map(|t| format!("event: {t}")),
        text.prop_map(|t| format!(": {t}")),
        Just(String::new()),
        Just("id: 7".to_owned()),
        Just("retry: 100".to_owned()),
        Just("unknown: field".to_owned()),
    ]
}

fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    (
        proptest::collection::vec(
            (line(), prop_oneof![Just("\n"), Just("\r\n"), Just("\r")]),
            0..40,
        ),
        proptest::collection::vec(any::<usize>(), 0..6),
    )
        .prop_map(|(lines, cuts)| {
            let mut text = String::new();
            for (line, end) in lines {
                text.push_str(&line);
                text.push_str(end);
            }
            text.push_str("\n\n");
            (text.into_bytes(), cuts)
        })
}

fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut last = 0;
    for point in points {
        pieces.push(bytes[last..point].to_vec());
        last = point;
    }
    pieces.push(bytes[last..].to_vec());
    pieces
}

fn ours(pieces: &[Vec<u8>]) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for piece in pieces {
        parser.feed(piece, &mut out).unwrap();
    }
    out
}

fn reference(pieces: &[Vec<u8>]) -> Vec<SseEvent> {
    let source = futures_util::stream::iter(
        pieces
            .iter()
            .cloned()
            .map(Ok::<_, std::convert::Infallible>),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(
        source
            .eventsource()
            .map(|e| {
                let e = e.unwrap();
                SseEvent {
                    event: e.event,
                    data: e.data,
                }
            })
            .collect(),
    )
}

proptest! {
    #[test]
    fn agrees_with_the_reference_parser((bytes, cuts) in stream()) {
        let pieces = split(&bytes, &cuts);
        prop_assert_eq!(ours(&pieces), reference(&pieces));
    }
}

#[test]
fn spec_examples() {
    let text = b"\xEF\xBB\xBFdata: first\r\n\r\nevent: add\rdata: a\rdata:b\r\r: comment\n\ndata\n\nevent: x\n\n";
    assert_eq!(
        ours(&[text.to_vec()]),
        vec![
            SseEvent {
                event: "message".into(),
                data: "first".into()
            },
            SseEvent {
                event: "add".into(),
                data: "a\nb".into()
            },
            SseEvent {
                event: "message".into(),
                data: String::new()
            },
        ]
    );
    // Byte by byte gives the same.
    let bytes: Vec<Vec<u8>> = text.iter().map(|b| vec![*b]).collect();
    assert_eq!(ours(&bytes), ours(&[text.to_vec()]));
}
