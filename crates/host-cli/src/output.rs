//! Output helpers shared by every subcommand: the `--format` flag, writing to stdout, and the
//! single place where errors become exit codes.

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;

use crate::commands::local::prerequisites::LocalUnavailable;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON document on stdout.
    Json,
}

/// Exit status of a command that ran to completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Everything checked out.
    Success,
    /// The command ran and found problems (invalid spec, failed check, …).
    Problems,
    /// Some input could not be read; what could be read was reported, the rest went to stderr.
    Unreadable,
    /// Exit with this exact status (a command run on the user's behalf, 124 on timeout, …).
    Exit(u8),
}

/// Exit code for input the command could not read or understand.
pub(crate) const EXIT_UNREADABLE: u8 = 2;

/// Writes a JSON document followed by a newline to stdout.
pub(crate) fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Writes one line to stderr (for problems that are not the command's result).
pub(crate) fn print_error(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {text}");
}

/// Writes text to stdout as is.
pub(crate) fn print_text(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// Writes raw bytes to stdout and flushes (streamed command output).
pub(crate) fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Writes raw bytes to stderr (streamed command output).
pub(crate) fn write_stderr(bytes: &[u8]) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    err.write_all(bytes)?;
    err.flush()
}

/// Writes one diagnostic line to stderr as is.
pub(crate) fn print_diagnostic(line: &str) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "{line}")?;
    Ok(())
}

/// Maps a command's result onto the process exit code: 0 success, 1 problems found, 2 when the
/// command could not do its work (unreadable input, bad arguments).
pub(crate) fn finish(result: anyhow::Result<Status>) -> ExitCode {
    match result {
        Ok(Status::Success) => ExitCode::SUCCESS,
        Ok(Status::Problems) => ExitCode::from(1),
        Ok(Status::Unreadable) => ExitCode::from(EXIT_UNREADABLE),
        Ok(Status::Exit(code)) => ExitCode::from(code),
        // A reader that stopped reading (`auto-swe completions bash | head`) is not an error.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => {
            let mut err = std::io::stderr().lock();
            // A list of what the host lacks keeps one line per item and its fix.
            match error
                .chain()
                .find_map(|cause| cause.downcast_ref::<LocalUnavailable>())
            {
                Some(lacks @ LocalUnavailable::Lacks(_)) => {
                    let _ = writeln!(err, "error: {lacks}");
                }
                _ => {
                    let _ = writeln!(err, "error: {}", one_line(&error));
                }
            }
            ExitCode::from(EXIT_UNREADABLE)
        }
    }
}

/// An error and its causes as one line, each cause once: a cause whose text the line already
/// holds (a wrapper that prints its source) is not repeated, and no cause repeats the
/// `error:` prefix.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        let text = text.trim().trim_start_matches("error: ");
        if text.is_empty() || line.contains(text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(text);
    }
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("invalid script: {0}")]
    struct Wrapper(#[source] std::io::Error);

    #[test]
    fn a_cause_its_wrapper_already_prints_is_said_once() {
        let error = anyhow::Error::new(Wrapper(std::io::Error::other("bad entry")))
            .context("script x.json");
        assert_eq!(one_line(&error), "script x.json: invalid script: bad entry");
    }

    #[test]
    fn distinct_causes_are_chained_on_one_line() {
        let error = anyhow::anyhow!("inner\ndetail").context("outer");
        assert_eq!(one_line(&error), "outer: inner detail");
    }
}
