//! Step time limits: every step runs under a deadline (the seeds' activity start-to-close
//! timeout), and what it calls can ask how much of it is left.
//!
//! The deadline travels with the step's task rather than through every seam's signature: a
//! provider deep under a step (an SCM client waiting out a rate limit, for example) reads
//! [`step_deadline`] and refuses a wait the step could not survive, with a typed error, instead
//! of sleeping into the step's own timeout.

use std::future::Future;
use std::time::{Duration, Instant};

use auto_swe_interpreter::DispatchError;

/// How long a step may run when its executor names no limit of its own.
pub const DEFAULT_STEP_TIME_LIMIT: Duration = Duration::from_secs(10 * 60);

/// How long an implementer-family step (a coding session, the quality gates, an agent node in
/// a checkout) may run: the seeds' implementer activity limit, 30 minutes.
pub const IMPLEMENTER_TIME_LIMIT: Duration = Duration::from_secs(30 * 60);

/// The code of a step that ran past its limit (retryable: the step's retry starts afresh).
pub const STEP_TIMED_OUT: &str = "STEP_TIMED_OUT";

tokio::task_local! {
    static DEADLINE: Instant;
}

/// The deadline of the step the current task runs, when it runs one.
#[must_use]
pub fn step_deadline() -> Option<Instant> {
    DEADLINE.try_with(|deadline| *deadline).ok()
}

/// Runs `work` with `deadline` as its step deadline, without enforcing it: how a host that
/// drives a step's seams itself (an engine of its own, a request handler) lets them see it.
pub async fn with_step_deadline<F: Future>(deadline: Instant, work: F) -> F::Output {
    DEADLINE.scope(deadline, work).await
}

/// Runs `step` with `limit` as its deadline: visible to it through [`step_deadline`], and
/// enforced (the step is dropped at the deadline and the result is [`STEP_TIMED_OUT`]).
pub(crate) async fn run_within<F>(
    limit: Duration,
    what: &str,
    step: F,
) -> Result<serde_json::Value, DispatchError>
where
    F: Future<Output = Result<serde_json::Value, DispatchError>>,
{
    let deadline = Instant::now() + limit;
    if let Ok(result) = tokio::time::timeout(limit, DEADLINE.scope(deadline, step)).await {
        result
    } else {
        tracing::warn!(limit_s = limit.as_secs(), "step ran past its time limit");
        Err(DispatchError::failure(
            STEP_TIMED_OUT,
            format!("{what} ran past its time limit of {} s", limit.as_secs()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn a_step_sees_its_deadline_and_is_stopped_at_it() {
        assert_eq!(step_deadline(), None, "no step, no deadline");
        let before = Instant::now();
        let seen = run_within(Duration::from_secs(60), "s", async {
            let deadline = step_deadline().expect("a deadline inside the step");
            Ok(json!(deadline.duration_since(before).as_secs()))
        })
        .await
        .unwrap();
        assert!((59..=60).contains(&seen.as_u64().unwrap()), "{seen}");

        let error = run_within(Duration::from_millis(20), "`slow`", async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(json!(null))
        })
        .await
        .unwrap_err();
        assert_eq!(error.code(), STEP_TIMED_OUT);
        assert!(error.is_retryable());
        assert!(error.to_string().contains("`slow`"), "{error}");
    }
}
