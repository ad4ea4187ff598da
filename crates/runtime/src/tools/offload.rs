//! Large tool output: the full text goes to a file beside the checkout and the model gets a
//! head + tail excerpt, the file's path and how much was left out. A failed write falls back
//! to the same excerpt without a path: never the whole text.

use std::time::Duration;

use auto_swe_sandbox::ExecRequest;

use crate::workspace::ToolWorkspace;

/// The default `maxToolOutputChars`.
pub const DEFAULT_MAX_TOOL_OUTPUT_CHARS: usize = 20_000;

/// What the model receives for one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    /// The text the model sees.
    pub text: String,
    /// Where the full output was kept, when it was offloaded.
    pub offload_path: Option<String>,
    /// The original length in characters, when it was cut.
    pub original_chars: Option<usize>,
}

/// Bounds `output` to about `max` characters, offloading the whole of it to `file_name` in the
/// workspace's offload directory when it is longer.
pub(crate) async fn bound_output(
    workspace: &ToolWorkspace,
    output: String,
    max: usize,
    file_name: &str,
) -> Bounded {
    let total = output.chars().count();
    if total <= max {
        return Bounded {
            text: output,
            offload_path: None,
            original_chars: None,
        };
    }
    let dir = workspace.layout().offload_dir.clone();
    let path = format!("{dir}/{file_name}");
    let request = ExecRequest::new([
        "sh",
        "-c",
        r#"umask 077 && mkdir -p -- "$1" && cat > "$2""#,
        "sh",
        dir.as_str(),
        path.as_str(),
    ])
    .stdin(output.as_bytes().to_vec())
    .timeout(Duration::from_secs(60));
    let saved = matches!(workspace.exec(&request).await, Ok(out) if out.status == 0);
    if !saved {
        tracing::warn!(
            chars = total,
            "tool output offload failed; truncating instead"
        );
    }
    let offload_path = saved.then_some(path);
    Bounded {
        text: excerpt(&output, total, max, offload_path.as_deref()),
        offload_path,
        original_chars: Some(total),
    }
}

/// Head and tail of `text` (`total` characters) in about `max` characters, with a note between
/// them saying what was left out and where the whole of it is.
#[must_use]
pub fn excerpt(text: &str, total: usize, max: usize, path: Option<&str>) -> String {
    let head_chars = max / 2;
    let tail_chars = max - head_chars;
    let elided = total.saturating_sub(head_chars + tail_chars);
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total.saturating_sub(tail_chars))
        .map_or(text.len(), |(i, _)| i)
        .max(head_end);
    let note = match path {
        Some(path) => format!(
            "\n\n[… {elided} characters elided. The full output ({total} characters) is in {path}; \
             read more of it with bash, e.g. sed -n '1,200p' {path} …]\n\n"
        ),
        None => format!(
            "\n\n[… {elided} characters elided; the full output ({total} characters) could not be \
             saved …]\n\n"
        ),
    };
    format!("{}{note}{}", &text[..head_end], &text[tail_start..])
}
