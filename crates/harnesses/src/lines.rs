//! JSON lines from a spawned CLI's standard output, bounded.

use auto_swe_sandbox::{Exit, OutputChunk, SpawnedProcess};
use serde_json::{Map, Value};

use crate::error::ProtocolError;

/// The longest line a CLI may write (a tool result carrying a large file stays under it).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Receives every line a CLI writes on standard output, as written (used to record the golden
/// corpus when a pin moves). Lines carry file contents and command output: a worker serving
/// runs never sets one.
pub type Transcript = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Reads one JSON object per line from a process's standard output. Standard error is kept
/// (bounded) for diagnostics only and never parsed.
pub struct JsonLines {
    process: SpawnedProcess,
    transcript: Option<Transcript>,
    pending: Vec<u8>,
    stderr_tail: Vec<u8>,
    ended: bool,
}

impl std::fmt::Debug for JsonLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonLines")
            .field("process", &self.process)
            .field("transcript", &self.transcript.is_some())
            .finish_non_exhaustive()
    }
}

impl JsonLines {
    /// Wraps a spawned process (its `stdin` stays with the caller).
    #[must_use]
    pub fn new(process: SpawnedProcess, transcript: Option<Transcript>) -> Self {
        Self {
            process,
            transcript,
            pending: Vec::new(),
            stderr_tail: Vec::new(),
            ended: false,
        }
    }

    /// The process (to take its `stdin`).
    pub fn process_mut(&mut self) -> &mut SpawnedProcess {
        &mut self.process
    }

    /// The last bytes (at most 300 characters) the process wrote on standard error, credential
    /// shapes masked.
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr_tail);
        let skip = text.chars().count().saturating_sub(300);
        auto_swe_scanners::mask_credential_shapes(&text.chars().skip(skip).collect::<String>())
    }

    /// The error for output that ended before the turn's result.
    pub async fn ended_early(&mut self) -> ProtocolError {
        let status = self.exit_note(std::time::Duration::from_secs(2)).await;
        ProtocolError::ExitedMidTurn {
            status,
            stderr: self.stderr_tail().trim().to_owned(),
        }
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
                if let Some(tap) = &self.transcript {
                    tap(&String::from_utf8_lossy(text));
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
