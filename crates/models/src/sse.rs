//! A server-sent events parser (WHATWG "Parsing an event stream") over byte chunks. It keeps
//! one buffer, scans for line ends with `memchr` and never copies the unread rest per line, so
//! decoding a long stream is linear. The differential test in `tests/it` checks it against
//! `eventsource-stream` on generated streams.

use crate::ModelError;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    event: Vec<u8>,
    data: Vec<u8>,
    started: bool,
    /// The previous chunk ended with `\r`, so a leading `\n` belongs to that line end.
    skip_lf: bool,
}

impl SseParser {
    /// An empty parser.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk; complete events are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        self.feed_with(chunk, &mut |event, data| {
            out.push(SseEvent {
                event: event.to_owned(),
                data: data.to_owned(),
            });
            Ok(())
        })
    }

    /// Feeds a chunk and hands each complete event to `on_event` as borrowed `(event, data)`,
    /// without allocating per event. An error from `on_event` stops the chunk.
    pub fn feed_with(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(&str, &str) -> Result<(), ModelError>,
    ) -> Result<(), ModelError> {
        let mut chunk = chunk;
        if self.skip_lf && !chunk.is_empty() {
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
            self.skip_lf = false;
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.extend_from_slice(chunk);
        if !self.started {
            // A byte-order mark may arrive split across reads.
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            if buffer.len() < BOM.len() && BOM.starts_with(&buffer) {
                self.buffer = buffer;
                return Ok(());
            }
            self.started = true;
            if buffer.starts_with(BOM) {
                buffer.drain(..BOM.len());
            }
        }
        let mut start = 0;
        let mut result = Ok(());
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &buffer[start..]) {
            let end = start + offset;
            let next = if buffer[end] == b'\r' {
                match buffer.get(end + 1) {
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                    None => {
                        self.skip_lf = true;
                        end + 1
                    }
                }
            } else {
                end + 1
            };
            result = self.line(&buffer[start..end], on_event);
            start = next;
            if result.is_err() {
                break;
            }
        }
        buffer.drain(..start);
        self.buffer = buffer;
        result
    }

    fn line(
        &mut self,
        line: &[u8],
        on_event: &mut dyn FnMut(&str, &str) -> Result<(), ModelError>,
    ) -> Result<(), ModelError> {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            // `id` and `retry` steer reconnection, which a model call never does.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(
        &mut self,
        on_event: &mut dyn FnMut(&str, &str) -> Result<(), ModelError>,
    ) -> Result<(), ModelError> {
        if self.data.is_empty() {
            self.event.clear();
            return Ok(());
        }
        self.data.pop();
        let invalid = |_| ModelError::InvalidResponse {
            message: "the stream is not UTF-8".into(),
        };
        let result = match (
            std::str::from_utf8(&self.event),
            std::str::from_utf8(&self.data),
        ) {
            (Ok(event), Ok(data)) => {
                on_event(if event.is_empty() { "message" } else { event }, data)
            }
            (Err(e), _) | (_, Err(e)) => Err(invalid(e)),
        };
        self.event.clear();
        self.data.clear();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_bom_is_dropped() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for byte in b"\xEF\xBB\xBFdata: first\r\n\r\n" {
            parser.feed(&[*byte], &mut out).unwrap();
        }
        assert_eq!(
            out,
            vec![SseEvent {
                event: "message".into(),
                data: "first".into()
            }]
        );
    }
}
