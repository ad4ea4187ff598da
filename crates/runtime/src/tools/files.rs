//! The four workspace tools. Paths pass `safe_path` and then a confinement check inside the
//! workspace that resolves symlinks; writes pass the sensitive path scanner (hard block), the
//! placeholder refusal and the pre-write content check; commands pass the shell scanner.

use auto_swe_models::ToolDefinition;
use auto_swe_sandbox::{ExecOutput, ExecRequest, SandboxError};
use auto_swe_scanners::{
    ScanResult, Verdict, mask_credential_shapes, safe_path, scan_content, scan_sensitive_path,
    scan_shell_command,
};
use serde_json::{Map, Value, json};

use super::offload::bound_output;
use super::{
    Outcome, SECURITY_CHECK_FAILED_PREFIX, SECURITY_WARNINGS_PREFIX, ToolSet, definition,
    security_tags, string_arg,
};
use crate::compact::ARGUMENT_PLACEHOLDER;
use crate::workspace::OUTSIDE_CHECKOUT_STATUS;

/// Captured bytes per stream of a file read or command.
const CAPTURE_LIMIT: usize = 32 * 1024 * 1024;

pub(super) fn definition_for(id: &str) -> ToolDefinition {
    let path_only = |what: &str| json!({"type":"object","properties":{"path":{"type":"string","description":what}},"required":["path"],"additionalProperties":false});
    match id {
        "readFile" => definition(
            id,
            "Read a file of the repository (path relative to the repository root).",
            path_only("relative path of the file"),
        ),
        "writeFile" => definition(
            id,
            "Create or overwrite a file of the repository with the given content.",
            json!({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}),
        ),
        "listDirectory" => definition(
            id,
            "List a directory of the repository (ls -la); \".\" is the repository root.",
            path_only("relative path of the directory"),
        ),
        _ => definition(
            "bash",
            "Run a shell command (bash) in the repository root and return its output and exit status.",
            json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}),
        ),
    }
}

/// The checked relative path (`""` for the root).
fn checked_path(args: &Map<String, Value>, root_allowed: bool) -> Result<String, Outcome> {
    let raw = string_arg(args, "path")?;
    if root_allowed && matches!(raw, "" | "." | "./") {
        return Ok(String::new());
    }
    match safe_path(raw) {
        Ok(path) if path.as_str().is_empty() && !root_allowed => Err(Outcome::error(
            "UNSAFE_PATH: the path names the repository root",
        )),
        Ok(path) => Ok(path.as_str().to_owned()),
        Err(refusal) => Err(Outcome::error(refusal.to_string())),
    }
}

fn exec_failure(path: &str, result: &Result<ExecOutput, SandboxError>, verb: &str) -> Outcome {
    match result {
        Ok(out) if out.status == OUTSIDE_CHECKOUT_STATUS => Outcome::error(format!(
            "UNSAFE_PATH: {path} resolves outside the repository"
        )),
        Ok(out) => Outcome::error(format!(
            "could not {verb} {path}: {}",
            mask_credential_shapes(out.stderr_text().trim())
        )),
        Err(e) => Outcome::error(format!("could not {verb} {path}: {}", e.code())),
    }
}

fn findings_text(result: &ScanResult) -> String {
    let mut lines: Vec<String> = result
        .findings
        .iter()
        .map(|f| {
            format!(
                "- {} ({}): {}",
                f.pattern_id,
                f.severity.as_str(),
                f.excerpt
            )
        })
        .collect();
    if result.incomplete {
        lines.push("- the scan was incomplete, so the content could not be cleared".to_owned());
    }
    lines.join("\n")
}

impl ToolSet {
    pub(super) async fn read_file(&self, args: &Map<String, Value>) -> Outcome {
        let path = match checked_path(args, false) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let mut request = self.workspace.confined(
            r#"[ -f "$target" ] || { echo "not a file" >&2; exit 1; }; cat -- "$target""#,
            &[&path],
            self.config.file_timeout,
        );
        request.output_limit = CAPTURE_LIMIT;
        let result = self.workspace.exec(&request).await;
        match result {
            Ok(out) if out.status == 0 => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                if out.truncated {
                    text.push_str(
                        "\n[the file is larger than the tool reads; only its start is shown]",
                    );
                }
                self.bounded(text, "readFile").await
            }
            other => exec_failure(&path, &other, "read"),
        }
    }

    pub(super) async fn list_directory(&self, args: &Map<String, Value>) -> Outcome {
        let path = match checked_path(args, true) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let mut request =
            self.workspace
                .confined(r#"ls -la -- "$target""#, &[&path], self.config.file_timeout);
        request.output_limit = CAPTURE_LIMIT;
        match self.workspace.exec(&request).await {
            Ok(out) if out.status == 0 => self.bounded(out.stdout_text(), "listDirectory").await,
            other => exec_failure(if path.is_empty() { "." } else { &path }, &other, "list"),
        }
    }

    pub(super) async fn write_file(&self, args: &Map<String, Value>) -> Outcome {
        let path = match checked_path(args, false) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let content = match string_arg(args, "content") {
            Ok(c) => c,
            Err(e) => return e,
        };
        self.audit(&format!(
            "[writeFile:audit] path={path} bytes={}",
            content.len()
        ));
        let sensitive = scan_sensitive_path(&self.patterns, &path, self.config.harness);
        if sensitive.verdict == Verdict::Block {
            return Outcome::refused(
                format!(
                    "Blocked: {path} is a sensitive file and cannot be written.\n{}",
                    findings_text(&sensitive)
                ),
                security_tags::SENSITIVE_FILE,
            );
        }
        if content.contains(ARGUMENT_PLACEHOLDER) {
            return Outcome::error(format!(
                "refused: the content contains the history placeholder {ARGUMENT_PLACEHOLDER:?}, \
                 which stands for text elided from the conversation; read the file for its \
                 real content and write that"
            ));
        }
        let scan = scan_content(&self.patterns, content).in_file(&path);
        if scan.verdict == Verdict::Block {
            return Outcome::refused(
                format!(
                    "{SECURITY_CHECK_FAILED_PREFIX} the content of {path} was not written because \
                     it appears to contain secrets or credentials:\n{}",
                    findings_text(&scan)
                ),
                security_tags::CONTENT_BLOCK,
            );
        }
        let mut request = self.workspace.confined(
            r#"mkdir -p -- "$(dirname -- "$target")" && cat > "$target""#,
            &[&path],
            self.config.file_timeout,
        );
        request.stdin = content.as_bytes().to_vec();
        let result = self.workspace.exec(&request).await;
        match result {
            Ok(out) if out.status == 0 => {
                let done = format!("Wrote {} bytes to {path}.", content.len());
                if scan.verdict == Verdict::Warn {
                    let mut outcome = Outcome::ok(format!(
                        "{SECURITY_WARNINGS_PREFIX}\n{}\n{done}",
                        findings_text(&scan)
                    ));
                    outcome.tag = Some(security_tags::CONTENT_WARNING.to_owned());
                    outcome
                } else {
                    Outcome::ok(done)
                }
            }
            other => exec_failure(&path, &other, "write"),
        }
    }

    pub(super) async fn bash(&self, args: &Map<String, Value>) -> Outcome {
        let command = match string_arg(args, "command") {
            Ok(c) => c,
            Err(e) => return e,
        };
        self.audit(&format!("[bash:audit] command={command}"));
        let scan = scan_shell_command(&self.patterns, command, self.config.harness);
        if scan.verdict == Verdict::Block {
            return Outcome::refused(
                format!(
                    "Blocked by the shell command scanner; the command was not run:\n{}",
                    findings_text(&scan)
                ),
                security_tags::SHELL_BLOCK,
            );
        }
        let mut request =
            ExecRequest::new(["bash", "-c", command]).timeout(self.config.bash_timeout);
        request
            .workdir
            .clone_from(&self.workspace.layout().checkout);
        request.output_limit = CAPTURE_LIMIT;
        match self.workspace.exec(&request).await {
            Ok(out) => {
                let mut text = out.stdout_text();
                let stderr = out.stderr_text();
                if !stderr.is_empty() {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&stderr);
                }
                if out.truncated {
                    text.push_str("\n[output past the capture limit was dropped]");
                }
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str("[exit status ");
                text.push_str(&out.status.to_string());
                text.push(']');
                if scan.verdict == Verdict::Warn {
                    text = format!("Shell scanner warnings:\n{}\n{text}", findings_text(&scan));
                }
                self.bounded(text, "bash").await
            }
            Err(e) => Outcome::error(format!(
                "the command could not run: {} ({})",
                mask_credential_shapes(&e.to_string()),
                e.code()
            )),
        }
    }

    async fn bounded(&self, text: String, tool: &str) -> Outcome {
        let name = self.offload_name(tool);
        let bounded =
            bound_output(&self.workspace, text, self.config.max_output_chars, &name).await;
        Outcome {
            text: bounded.text,
            is_error: false,
            tag: None,
            offload_path: bounded.offload_path,
            original_chars: bounded.original_chars,
        }
    }
}
