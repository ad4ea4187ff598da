//! A harness CLI pinned by its SHA-256, checked inside the workspace before every turn.

use auto_swe_runtime::{HarnessError, HarnessTurn};
use auto_swe_sandbox::{Exit, OutputChunk};

/// A CLI binary the workspace must hold, and the hash it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedCli {
    /// Its absolute path inside the workspace (outside the checkout: a read-only mount of the
    /// project's install, or an image layer).
    pub path: String,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
}

impl PinnedCli {
    /// Checks the binary in the turn's workspace: missing, unreadable or with another hash is
    /// `HARNESS_UNAVAILABLE` for `runtime` and the turn does not start.
    pub async fn verify(&self, turn: &HarnessTurn) -> Result<(), HarnessError> {
        let unavailable = |reason: String| HarnessError::CliUnavailable {
            runtime: turn.runtime().to_owned(),
            reason,
        };
        if !self.path.starts_with('/') || self.sha256.len() != 64 {
            return Err(unavailable(
                "the pin is not an absolute path and a SHA-256".to_owned(),
            ));
        }
        let mut process = turn
            .spawn(vec![
                "sha256sum".to_owned(),
                "--".to_owned(),
                self.path.clone(),
            ])
            .await?;
        drop(process.stdin.take());
        let mut stdout = Vec::new();
        while let Some(chunk) = process.output.recv().await {
            if let OutputChunk::Stdout(bytes) = chunk
                && stdout.len() < 4096
            {
                stdout.extend_from_slice(&bytes);
            }
        }
        match process.exit.await {
            Ok(Ok(Exit::Status(0))) => {}
            _ => {
                return Err(unavailable(format!(
                    "{} is missing or unreadable",
                    self.path
                )));
            }
        }
        let text = String::from_utf8_lossy(&stdout);
        let found = text.split_whitespace().next().unwrap_or_default();
        if found.eq_ignore_ascii_case(&self.sha256) {
            Ok(())
        } else {
            Err(unavailable(format!(
                "{} has SHA-256 {}, not the pinned {}",
                self.path,
                crate::error::cut(found, 64),
                self.sha256
            )))
        }
    }
}
