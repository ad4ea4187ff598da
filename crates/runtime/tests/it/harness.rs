//! The harness seam's shared rules: decisions under the deadline, the canonical policy.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_agents::Capability;
use auto_swe_models::Usage;
use auto_swe_runtime::{
    CanonicalCall, CanonicalPolicy, DECISION_DEADLINE, Decision, HarnessAdapter,
    HarnessCapabilities, HarnessError, HarnessReport, HarnessTurn, NativeCall, decide_canonical,
    map_native_call,
};
use auto_swe_scanners::HarnessConfig;
use serde_json::{Value, json};

#[derive(Debug)]
enum Mapping {
    Hang,
    Panic,
    Refuse,
    Shell,
}

#[derive(Debug)]
struct Fake(Mapping);

#[async_trait]
impl HarnessAdapter for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn capabilities(&self) -> HarnessCapabilities {
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: true,
        }
    }
    async fn run_turn(&self, _: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        Ok(HarnessReport::default())
    }
    async fn decide(&self, _: &NativeCall) -> Result<CanonicalCall, String> {
        match self.0 {
            Mapping::Hang => std::future::pending().await,
            Mapping::Panic => {
                #[expect(clippy::panic, reason = "the test is of a panicking adapter")]
                {
                    panic!("adapter bug")
                }
            }
            Mapping::Refuse => Err("cannot map".to_owned()),
            Mapping::Shell => Ok(CanonicalCall::Shell {
                command: "ls".to_owned(),
            }),
        }
    }
    fn usage(&self, _: &Value) -> Option<Usage> {
        None
    }
}

fn native() -> NativeCall {
    NativeCall {
        tool: "Bash".to_owned(),
        input: json!({"command": "ls"}),
    }
}

#[tokio::test(start_paused = true)]
async fn a_decision_that_hangs_errs_or_panics_is_a_refusal() {
    let started = tokio::time::Instant::now();
    let hang = map_native_call(Arc::new(Fake(Mapping::Hang)), native(), DECISION_DEADLINE).await;
    assert!(hang.unwrap_err().contains("longer than 60 s"));
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    let panic = map_native_call(Arc::new(Fake(Mapping::Panic)), native(), DECISION_DEADLINE).await;
    assert!(panic.unwrap_err().contains("panic"));
    let refuse =
        map_native_call(Arc::new(Fake(Mapping::Refuse)), native(), DECISION_DEADLINE).await;
    assert_eq!(refuse.unwrap_err(), "cannot map");
    let shell = map_native_call(Arc::new(Fake(Mapping::Shell)), native(), DECISION_DEADLINE).await;
    assert!(matches!(shell, Ok(CanonicalCall::Shell { .. })));
}

#[test]
fn the_canonical_policy_applies_the_native_tools_scanners() {
    let policy = CanonicalPolicy {
        capabilities: [Capability::Read, Capability::Search, Capability::Write].into(),
        patterns: crate::support::patterns(),
        harness: HarnessConfig::NotLoaded,
        checkout: "/workspace/target-repo".to_owned(),
    };
    let write = |path: &str, content: &str| CanonicalCall::Write {
        path: path.to_owned(),
        content: content.to_owned(),
    };
    let allowed = [
        write("src/a.rs", "fn a() {}"),
        write("/workspace/target-repo/src/a.rs", "fn a() {}"),
        CanonicalCall::Read {
            path: "README.md".to_owned(),
        },
        CanonicalCall::Search {
            path: "/workspace/target-repo".to_owned(),
        },
    ];
    for call in &allowed {
        assert_eq!(decide_canonical(call, &policy), Decision::Allow, "{call:?}");
    }
    let refused = [
        write("/etc/passwd", "x"),
        write("/workspace/target-repo-evil/a", "x"),
        write("../a", "x"),
        write(".env", "A=1"),
        write("a.txt", auto_swe_runtime::compact::ARGUMENT_PLACEHOLDER),
        CanonicalCall::Read {
            path: "/workspace/.tool-output/x".to_owned(),
        },
        CanonicalCall::Shell {
            command: "ls".to_owned(),
        },
    ];
    for call in &refused {
        assert!(
            matches!(decide_canonical(call, &policy), Decision::Deny { .. }),
            "{call:?}"
        );
    }
}

#[test]
fn a_missing_or_different_cli_and_a_refused_key_have_their_own_codes() {
    let unavailable = HarnessError::CliUnavailable {
        runtime: "claude-code".to_owned(),
        reason: "/opt/claude has SHA-256 00, not the pinned ff".to_owned(),
    };
    assert_eq!(unavailable.code(), "HARNESS_UNAVAILABLE");
    assert!(!unavailable.is_retryable());
    assert!(unavailable.to_string().contains("claude-code"));
    let auth = HarnessError::AuthFailure {
        runtime: "claude-code".to_owned(),
    };
    assert_eq!(auth.code(), "HARNESS_AUTH_FAILURE");
    assert!(!auth.is_retryable());
}
