//! Endurance: one workspace serves thousands of short execs, each succeeding, with latency that
//! stays flat from the first to the last.

use std::time::{Duration, Instant};

use auto_swe_sandbox::{ExecRequest, WorkspaceBackend, WorkspaceSpec};

/// The 99th percentile of `samples` (nearest rank).
fn p99(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    let rank = (samples.len() * 99).div_ceil(100).max(1);
    samples[rank - 1]
}

/// Runs `count` execs of `/bin/true` in one workspace; every one must exit 0, and the p99 of
/// the last 500 must be within 2× of the first 500's.
pub(crate) async fn many_execs(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec, count: usize) {
    let ws = backend.create(&spec).await.unwrap();
    let request = ExecRequest::new(["/bin/true"]).timeout(Duration::from_secs(30));
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count {
        let started = Instant::now();
        let out = backend.exec(&ws, &request).await;
        latencies.push(started.elapsed());
        match out {
            Ok(out) => assert_eq!(
                out.status,
                0,
                "exec {i} exited {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => panic!("exec {i} failed: {e}"),
        }
    }
    backend.remove(&ws).await.unwrap();
    let window = 500.min(count / 2);
    let first = p99(&mut latencies[..window].to_vec());
    let last = p99(&mut latencies[count - window..].to_vec());
    eprintln!("{count} execs: p99 of the first {window} {first:?}, of the last {window} {last:?}");
    assert!(
        last <= first * 2,
        "latency grew: p99 {first:?} over the first {window} execs, {last:?} over the last"
    );
}
