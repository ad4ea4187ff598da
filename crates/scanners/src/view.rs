//! Rewritten views of scanned text that remember where each byte came from, so a finding in a
//! de-obfuscated command or in the added lines of a diff reports its offset in the original.

use regex::{Captures, Regex};

/// A rewritten text and, for each of its bytes, the byte offset in the original it came from.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub(crate) text: String,
    map: Vec<usize>,
    original_len: usize,
}

impl View {
    /// The original text, unchanged.
    pub(crate) fn identity(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            map: (0..text.len()).collect(),
            original_len: text.len(),
        }
    }

    /// Builds a view piece by piece: each piece is `(text, original offset of its first byte)`,
    /// and the piece's bytes map to consecutive original offsets.
    pub(crate) fn from_pieces<'a>(
        pieces: impl IntoIterator<Item = (&'a str, usize)>,
        original_len: usize,
    ) -> Self {
        let mut text = String::new();
        let mut map = Vec::new();
        for (piece, start) in pieces {
            text.push_str(piece);
            map.extend((0..piece.len()).map(|i| start + i));
        }
        Self {
            text,
            map,
            original_len,
        }
    }

    /// The original offset of byte `index` of this view.
    pub(crate) fn original_offset(&self, index: usize) -> usize {
        self.map.get(index).copied().unwrap_or(self.original_len)
    }

    /// Replaces every match of `regex`; replacement bytes map to where the match started, and
    /// untouched bytes keep their mapping.
    pub(crate) fn replace(&self, regex: &Regex, rewrite: impl Fn(&Captures<'_>) -> String) -> Self {
        let mut text = String::with_capacity(self.text.len());
        let mut map = Vec::with_capacity(self.map.len());
        let mut last = 0;
        for caps in regex.captures_iter(&self.text) {
            let Some(whole) = caps.get(0) else { continue };
            text.push_str(&self.text[last..whole.start()]);
            map.extend_from_slice(&self.map[last..whole.start()]);
            let origin = self.original_offset(whole.start());
            let replacement = rewrite(&caps);
            map.extend(std::iter::repeat_n(origin, replacement.len()));
            text.push_str(&replacement);
            last = whole.end();
        }
        text.push_str(&self.text[last..]);
        map.extend_from_slice(&self.map[last..]);
        Self {
            text,
            map,
            original_len: self.original_len,
        }
    }
}
