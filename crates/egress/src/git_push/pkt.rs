//! git's pkt-line framing: four hexadecimal digits giving the line's length including themselves,
//! then the payload; `0000` is a flush, `0001` a delimiter, `0002` a response end.

use super::{PushRefusal, hex_digit};

/// The largest pkt-line, its four length digits included (git's `LARGE_PACKET_MAX`).
pub const MAX_PKT_LINE: usize = 65_520;

/// One pkt-line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PktLine<'a> {
    /// A line with a payload (possibly empty: `0004`), which borrows from the input.
    Data(&'a [u8]),
    /// `0000`: the end of a section.
    Flush,
    /// `0001`: a delimiter between the parts of a section (protocol v2).
    Delim,
    /// `0002`: the end of a response (protocol v2).
    ResponseEnd,
}

/// Reads pkt-lines from a buffer, one at a time. It never allocates and never reads past the
/// buffer: a line whose length is malformed, 3, over [`MAX_PKT_LINE`], or longer than the
/// bytes left is an error.
#[derive(Debug, Clone)]
pub struct PktReader<'a> {
    input: &'a [u8],
    position: usize,
}

fn bad(detail: &'static str) -> PushRefusal {
    PushRefusal::BadPktLine { detail }
}

impl<'a> PktReader<'a> {
    /// A reader at the start of `input`.
    #[must_use]
    pub fn new(input: &'a [u8]) -> Self {
        Self { input, position: 0 }
    }

    /// How many bytes the lines read so far took.
    #[must_use]
    pub fn position(&self) -> usize {
        self.position
    }

    /// The bytes after the lines read so far.
    #[must_use]
    pub fn remaining(&self) -> &'a [u8] {
        self.input.get(self.position..).unwrap_or_default()
    }

    /// The next line: `Ok(None)` at the end of the input, an error when the bytes left do not
    /// start with a whole, well-formed line (the reader then stays where it was).
    pub fn read(&mut self) -> Result<Option<PktLine<'a>>, PushRefusal> {
        let rest = self.remaining();
        if rest.is_empty() {
            return Ok(None);
        }
        let Some(digits) = rest.get(..4) else {
            return Err(bad("a pkt-line length is cut short"));
        };
        let length = digits.iter().try_fold(0_usize, |length, digit| {
            hex_digit(*digit).map(|value| (length << 4) | usize::from(value))
        });
        let Some(length) = length else {
            return Err(bad("a pkt-line length is not four hexadecimal digits"));
        };
        let (line, taken) = match length {
            0 => (PktLine::Flush, 4),
            1 => (PktLine::Delim, 4),
            2 => (PktLine::ResponseEnd, 4),
            3 => return Err(bad("a pkt-line has the invalid length 3")),
            4..=MAX_PKT_LINE => {
                let Some(payload) = rest.get(4..length) else {
                    return Err(bad("a pkt-line is cut short"));
                };
                (PktLine::Data(payload), length)
            }
            _ => return Err(bad("a pkt-line is longer than 65520 bytes")),
        };
        self.position += taken;
        Ok(Some(line))
    }
}
