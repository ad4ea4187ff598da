//! The mock Anthropic server's prompt cache, modelled on the published behaviour: a request's
//! blocks (tools, then system, then every message's content blocks) form a prefix; each block
//! carrying `cache_control` is a breakpoint that writes the prefix up to it; a later request
//! reads the longest prefix written before, found at a block boundary no more than 20 blocks
//! before one of its own breakpoints. A request without breakpoints reads and writes nothing.
//! Tokens are counted deterministically (a quarter of each block's JSON, plus one).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use crate::model::Usage;

/// How far before a breakpoint the cache looks for an earlier entry (the documented 20
/// blocks).
const LOOKBACK: usize = 20;

/// The prefixes written so far.
#[derive(Debug, Default)]
pub(crate) struct PromptCacheSim {
    written: HashSet<u64>,
}

struct Block {
    hash: u64,
    tokens: u64,
    breakpoint: Option<bool>,
}

impl PromptCacheSim {
    /// The usage of a Messages request body (output left at zero), updating the cache.
    pub(crate) fn account(&mut self, body: &Value) -> Usage {
        let blocks = blocks(body);
        let mut cumulative = Vec::with_capacity(blocks.len());
        let mut total = 0;
        for block in &blocks {
            total += block.tokens;
            cumulative.push(total);
        }
        let breakpoints: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.breakpoint.map(|_| i))
            .collect();
        let Some(&last) = breakpoints.last() else {
            return Usage {
                input: total,
                cache_reported: true,
                ..Usage::default()
            };
        };
        let read = breakpoints
            .iter()
            .filter_map(|&b| {
                (b.saturating_sub(LOOKBACK - 1)..=b)
                    .rev()
                    .find(|&j| self.written.contains(&blocks[j].hash))
                    .map(|j| cumulative[j])
            })
            .max()
            .unwrap_or(0);
        let write = cumulative[last].saturating_sub(read);
        for &b in &breakpoints {
            self.written.insert(blocks[b].hash);
        }
        let one_hour = blocks[last].breakpoint.unwrap_or(false);
        Usage {
            input: total,
            cache_read: read,
            cache_write_5m: if one_hour { 0 } else { write },
            cache_write_1h: if one_hour { write } else { 0 },
            cache_reported: true,
            ..Usage::default()
        }
    }
}

/// The request's blocks in prefix order, each with the hash of the prefix ending at it.
fn blocks(body: &Value) -> Vec<Block> {
    let mut out = Vec::new();
    let mut hasher = DefaultHasher::new();
    body.get("model").and_then(Value::as_str).hash(&mut hasher);
    let mut push = |kind: &str, block: &Value| {
        let mut plain = block.clone();
        let breakpoint = plain
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .map(|c| c.get("ttl").and_then(Value::as_str) == Some("1h"));
        let text = format!("{kind}:{plain}");
        text.hash(&mut hasher);
        out.push(Block {
            hash: hasher.finish(),
            tokens: text.len() as u64 / 4 + 1,
            breakpoint,
        });
    };
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        push("tool", tool);
    }
    match body.get("system") {
        Some(Value::Array(items)) => items.iter().for_each(|b| push("system", b)),
        Some(text @ Value::String(_)) => push("system", text),
        _ => {}
    }
    for message in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        match message.get("content") {
            Some(Value::Array(items)) => items.iter().for_each(|b| push(role, b)),
            Some(other) => push(role, other),
            None => {}
        }
    }
    out
}
