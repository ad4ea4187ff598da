//! What a harness CLI's output can get wrong.

use auto_swe_runtime::HarnessError;

/// A CLI broke its protocol; the turn ends with it (as `HARNESS_TURN_FAILED`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A line that is not one JSON object.
    #[error("the CLI wrote a line that is not a JSON object ({bytes} bytes)")]
    MalformedLine {
        /// The line's length.
        bytes: usize,
    },
    /// A line longer than the cap.
    #[error("the CLI wrote a line longer than {limit} bytes")]
    LineTooLong {
        /// The cap.
        limit: usize,
    },
    /// An event whose type the pinned version does not emit.
    #[error("the CLI wrote an event of unknown type {kind:?}")]
    UnknownEvent {
        /// The type, cut to 64 characters.
        kind: String,
    },
    /// A known event without a field it must carry.
    #[error("the CLI wrote a {kind} event without {field}")]
    MissingField {
        /// The event type.
        kind: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The CLI ended (or closed its output) before the turn's result.
    #[error("the CLI exited mid-turn{status}: {stderr}")]
    ExitedMidTurn {
        /// `" (status N)"`, or empty when unknown.
        status: String,
        /// The end of its standard error, credential shapes masked.
        stderr: String,
    },
    /// The CLI refused our handshake.
    #[error("the CLI refused the session handshake: {message}")]
    Handshake {
        /// What it said (cut).
        message: String,
    },
    /// The CLI closed its input while we still had something to say.
    #[error("the CLI closed its input")]
    InputClosed,
    /// The CLI ended the turn with an error result.
    #[error("the CLI ended the turn with {subtype}")]
    ErrorResult {
        /// The result's subtype (cut).
        subtype: String,
    },
}

impl From<ProtocolError> for HarnessError {
    fn from(e: ProtocolError) -> Self {
        HarnessError::TurnFailed {
            message: e.to_string(),
        }
    }
}

/// Cuts untrusted text to `max` characters for an error or a trace.
pub(crate) fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}
