//! JSON lines from a spawned CLI's standard output, bounded.

use auto_swe_sandbox::{Exit, OutputChunk, SpawnedProcess};
use serde_json::{Map, Value};

use crate::error::ProtocolError;

/// The longest line a CLI may write (a tool result carrying a large file stays under it).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Reads one JSON object per line from a process's standard output. Standard error is kept
/// (bounded) for diagnostics only and never parsed.
#[derive(Debug)]
pub struct JsonLines {
    process: SpawnedProcess,
    pending: Vec<u8>,
    stderr_tail: Vec<u8>,
    ended: bool,
}

impl JsonLines {
    /// Wraps a spawned process (its `stdin` stays with the caller).
    #[must_use]
    pub fn new(process: SpawnedProcess) -> Self {
        Self {
            process,
            pending: Vec::new(),
            stderr_tail: Vec::new(),
            ended: false,
        }
    }

    /// The process (to take its `stdin`).
    pub fn process_mut(&mut self) -> &mut SpawnedProcess {
        &mut self.process
    }

    /// The last bytes the process wrote on standard error.
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        String::from_utf8_lossy(&self.stderr_tail).into_owned()
    }

    /// The next object; `Ok(None)` when the output ended. A line that is not a JSON object, or
    /// is longer than [`MAX_LINE_BYTES`], is an error; blank lines are skipped.
    pub async fn next(&mut self) -> Result<Option<Map<String, Value>>, ProtocolError> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let text = line.trim_ascii();
                if text.is_empty() {
                    continue;
                }
                return match serde_json::from_slice::<Value>(text) {
                    Ok(Value::Object(map)) => Ok(Some(map)),
                    _ => Err(ProtocolError::MalformedLine { bytes: text.len() }),
                };
            }
            if self.pending.len() > MAX_LINE_BYTES {
                return Err(ProtocolError::LineTooLong {
                    limit: MAX_LINE_BYTES,
                });
            }
            if self.ended {
                if self.pending.trim_ascii().is_empty() {
                    return Ok(None);
                }
                // A last line without its newline.
                self.pending.push(b'\n');
                continue;
            }
            match self.process.output.recv().await {
                Some(OutputChunk::Stdout(bytes)) => self.pending.extend_from_slice(&bytes),
                Some(OutputChunk::Stderr(bytes)) => {
                    self.stderr_tail.extend_from_slice(&bytes);
                    let over = self.stderr_tail.len().saturating_sub(4096);
                    self.stderr_tail.drain(..over);
                }
                Some(_) => {}
                None => self.ended = true,
            }
        }
    }

    /// How the process ended, waiting at most `wait` for it: `" (status N)"` or empty.
    pub async fn exit_note(&mut self, wait: std::time::Duration) -> String {
        match tokio::time::timeout(wait, &mut self.process.exit).await {
            Ok(Ok(Ok(Exit::Status(code)))) => format!(" (status {code})"),
            Ok(Ok(Ok(other))) => format!(" ({other:?})"),
            _ => String::new(),
        }
    }
}
