//! Rewritten views of scanned text that remember where each byte came from, so a finding in a
//! de-obfuscated command, a normalised text or the added lines of a diff reports its offset in
//! the original.

use regex::{Captures, Regex};

/// A rewritten text and, for each of its bytes, the byte offset in the original it came from.
/// The view of an unchanged text keeps no map (it would cost eight bytes per scanned byte).
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub(crate) text: String,
    map: Option<Vec<usize>>,
    original_len: usize,
}

impl View {
    /// The original text, unchanged.
    pub(crate) fn identity(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            map: None,
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
            map: Some(map),
            original_len,
        }
    }

    /// Builds a view character by character: every byte of a character maps to the original
    /// offset given with it.
    pub(crate) fn from_chars(
        chars: impl IntoIterator<Item = (char, usize)>,
        original_len: usize,
    ) -> Self {
        let mut text = String::new();
        let mut map = Vec::new();
        for (c, origin) in chars {
            text.push(c);
            map.extend(std::iter::repeat_n(origin, c.len_utf8()));
        }
        Self {
            text,
            map: Some(map),
            original_len,
        }
    }

    /// A text that stands, as a whole, for the original bytes at `origin` (a decoded payload).
    pub(crate) fn at(text: String, origin: usize, original_len: usize) -> Self {
        let map = vec![origin; text.len()];
        Self {
            text,
            map: Some(map),
            original_len,
        }
    }

    /// The original offset of byte `index` of this view.
    pub(crate) fn original_offset(&self, index: usize) -> usize {
        match &self.map {
            None => index.min(self.original_len),
            Some(map) => map.get(index).copied().unwrap_or(self.original_len),
        }
    }

    /// Replaces every match of `regex`; replacement bytes map to where the match started, and
    /// untouched bytes keep their mapping.
    pub(crate) fn replace(&self, regex: &Regex, rewrite: impl Fn(&Captures<'_>) -> String) -> Self {
        let mut text = String::with_capacity(self.text.len());
        let mut map = Vec::with_capacity(self.text.len());
        let mut last = 0;
        let keep = |map: &mut Vec<usize>, from: usize, to: usize| {
            map.extend((from..to).map(|i| self.original_offset(i)));
        };
        for caps in regex.captures_iter(&self.text) {
            let Some(whole) = caps.get(0) else { continue };
            text.push_str(&self.text[last..whole.start()]);
            keep(&mut map, last, whole.start());
            let origin = self.original_offset(whole.start());
            let replacement = rewrite(&caps);
            map.extend(std::iter::repeat_n(origin, replacement.len()));
            text.push_str(&replacement);
            last = whole.end();
        }
        text.push_str(&self.text[last..]);
        keep(&mut map, last, self.text.len());
        Self {
            text,
            map: Some(map),
            original_len: self.original_len,
        }
    }
}
