//! What a run came to, made fit for its row: strings too long for a step record are moved to
//! artifacts of the run and replaced by placeholders that name them.
//!
//! The document kept is `{ "result", "context", "error": { "code", "message" } | null }`. Every
//! string longer than [`RECORD_STRING_LIMIT`] characters becomes a
//! `[stored as artifact <id> — <n> bytes]` placeholder whose artifact (named
//! [`SPILL_ARTIFACT`]) holds the text; a person reads it back through the server's artifact
//! route. Bounds: at most [`MAX_SPILLS`] artifacts per run and [`MAX_SPILL_BYTES`] per artifact
//! (longer text is cut there, and its placeholder says from how many bytes); a document still larger than the
//! row allows has its context, then its result, stored whole as one JSON artifact.

use auto_swe_interpreter::{RECORD_STRING_LIMIT, RunOutcome};
use auto_swe_store::{ArtifactStore, LeaseToken, MAX_JSON_BYTES, StoreResult};
use serde_json::{Value, json};

/// The artifact name of a spilled string (the only kind the artifact route serves).
pub const SPILL_ARTIFACT: &str = "context-overflow";
/// Largest spilled text, in bytes; the artifact route refuses anything larger.
pub const MAX_SPILL_BYTES: usize = 24_000_000;
/// Most strings one run spills; later ones are cut to [`RECORD_STRING_LIMIT`] characters.
pub const MAX_SPILLS: usize = 64;

const PLACEHOLDER_HEAD: &str = "[stored as artifact ";

/// The placeholder that stands for `bytes` bytes stored as artifact `id`.
#[must_use]
pub fn spill_placeholder(id: &str, bytes: usize) -> String {
    format!("{PLACEHOLDER_HEAD}{id} — {bytes} bytes]")
}

/// The artifact id a placeholder names, if `text` is one.
#[must_use]
pub fn spilled_artifact_id(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(PLACEHOLDER_HEAD)?;
    let (id, tail) = rest.split_once(" — ")?;
    let valid_id = !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    (valid_id && tail.ends_with(']')).then_some(id)
}

/// The document a run's row keeps, before anything is spilled (the error's message already
/// cut to [`RECORD_STRING_LIMIT`] characters).
#[must_use]
pub fn result_document(outcome: &RunOutcome, error_code: Option<&str>) -> Value {
    let error = match (&outcome.error, error_code) {
        // Cut like a step record's: a message is never spilled, so it must fit the row.
        (Some(error), _) => json!({
            "code": error.code(),
            "message": cut_chars(&error.to_string(), RECORD_STRING_LIMIT),
        }),
        (None, Some(code)) => json!({"code": code, "message": "the run was stopped"}),
        (None, None) => Value::Null,
    };
    json!({
        "result": Value::clone(&outcome.result),
        "context": outcome.context.clone(),
        "error": error,
    })
}

/// Moves `document`'s long strings into artifacts of the leased run and returns what the row
/// keeps. Each artifact write is fenced by the lease.
#[tracing::instrument(level = "debug", skip_all, fields(run_id = %token.run_id))]
pub async fn spill_document<S: ArtifactStore + ?Sized>(
    store: &S,
    token: &LeaseToken,
    mut document: Value,
) -> StoreResult<Value> {
    let mut spilled = 0;
    for pointer in long_string_pointers(&document) {
        let Some(slot) = document.pointer_mut(&pointer) else {
            continue;
        };
        let Value::String(text) = std::mem::take(slot) else {
            continue;
        };
        *slot = Value::String(if spilled < MAX_SPILLS {
            spilled += 1;
            store_text(store, token, "text/plain; charset=utf-8", &text).await?
        } else {
            cut_chars(&text, RECORD_STRING_LIMIT).to_owned()
        });
    }
    for part in ["context", "result"] {
        if serde_json::to_vec(&document).map_or(0, |bytes| bytes.len()) <= MAX_JSON_BYTES {
            break;
        }
        if let Some(slot) = document.get_mut(part) {
            let whole = serde_json::to_string(slot).unwrap_or_default();
            *slot = Value::String(store_text(store, token, "application/json", &whole).await?);
        }
    }
    if spilled > 0 {
        tracing::debug!(
            spilled,
            "long strings of the run's result stored as artifacts"
        );
    }
    Ok(document)
}

/// Stores `text` (cut to [`MAX_SPILL_BYTES`]) and returns its placeholder.
async fn store_text<S: ArtifactStore + ?Sized>(
    store: &S,
    token: &LeaseToken,
    content_type: &str,
    text: &str,
) -> StoreResult<String> {
    spill_text(store, token, content_type, text, text.len()).await
}

/// Stores `text` as an artifact of the leased run (cut to [`MAX_SPILL_BYTES`]) and returns its
/// placeholder. `from_bytes` is how long the text was before whoever passed it cut it (the
/// placeholder then says so); `text.len()` when it was not cut.
pub async fn spill_text<S: ArtifactStore + ?Sized>(
    store: &S,
    token: &LeaseToken,
    content_type: &str,
    text: &str,
    from_bytes: usize,
) -> StoreResult<String> {
    let kept = cut_bytes(text, MAX_SPILL_BYTES);
    let artifact = store
        .put_artifact(token, SPILL_ARTIFACT, content_type, kept.as_bytes())
        .await?;
    let from_bytes = from_bytes.max(text.len());
    Ok(if kept.len() < from_bytes {
        format!(
            "{PLACEHOLDER_HEAD}{} — {} bytes, cut from {from_bytes} bytes]",
            artifact.id,
            kept.len(),
        )
    } else {
        spill_placeholder(&artifact.id, kept.len())
    })
}

/// JSON pointers, in document order, of every string of `document` longer than
/// [`RECORD_STRING_LIMIT`] characters: the ones a result document spills.
#[must_use]
pub fn long_string_pointers(document: &Value) -> Vec<String> {
    let mut long = Vec::new();
    long_strings(document, &mut String::new(), &mut long);
    long
}

fn long_strings(value: &Value, at: &mut String, out: &mut Vec<String>) {
    match value {
        Value::String(text) if text.chars().nth(RECORD_STRING_LIMIT).is_some() => {
            out.push(at.clone());
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let len = at.len();
                at.push('/');
                at.push_str(&index.to_string());
                long_strings(item, at, out);
                at.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                long_strings(item, at, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

fn cut_chars(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(end, _)| &text[..end])
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character.
#[must_use]
pub fn cut_bytes(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_round_trip_and_look_alikes_are_not_ids() {
        let text = spill_placeholder("0f3a-9b", 20_000);
        assert_eq!(text, "[stored as artifact 0f3a-9b — 20000 bytes]");
        assert_eq!(spilled_artifact_id(&text), Some("0f3a-9b"));
        assert_eq!(
            spilled_artifact_id("[stored as artifact ab — 3 bytes, cut from 9 bytes]"),
            Some("ab")
        );
        for fake in [
            "[stored as artifact  — 3 bytes]",
            "[stored as artifact ../etc — 3 bytes]",
            "[stored as artifact ab — 3 bytes",
            "stored as artifact ab — 3 bytes]",
            "[stored as artifact ab 3 bytes]",
        ] {
            assert_eq!(spilled_artifact_id(fake), None, "{fake}");
        }
    }

    #[test]
    fn long_strings_are_found_by_pointer_with_escaped_keys() {
        let long = "é".repeat(RECORD_STRING_LIMIT + 1);
        let edge = "x".repeat(RECORD_STRING_LIMIT);
        let doc = json!({"a/b": [1, long.clone()], "t~": {"k": long}, "edge": edge});
        let mut out = Vec::new();
        long_strings(&doc, &mut String::new(), &mut out);
        out.sort();
        assert_eq!(out, ["/a~1b/1", "/t~0/k"]);
        for pointer in &out {
            assert!(doc.pointer(pointer).is_some());
        }
    }

    #[test]
    fn cuts_respect_character_boundaries() {
        assert_eq!(cut_bytes("aé", 2), "a");
        assert_eq!(cut_bytes("aé", 3), "aé");
        assert_eq!(cut_chars("aéb", 2), "aé");
        assert_eq!(cut_chars("ab", 5), "ab");
    }
}
