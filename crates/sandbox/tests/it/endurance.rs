//! Endurance: one workspace serves thousands of short execs, each succeeding, and nothing the
//! backend holds grows with them. Latency is printed, not asserted: timings belong in the
//! benchmarks, where a loaded machine does not fail a build.

use std::time::{Duration, Instant};

use auto_swe_sandbox::{ExecRequest, WorkspaceBackend, WorkspaceSpec};

/// The 99th percentile of `samples` (nearest rank).
fn p99(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    let rank = (samples.len() * 99).div_ceil(100).max(1);
    samples[rank - 1]
}

/// What this process holds: open descriptors and threads.
fn held() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    let threads = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0);
    (fds, threads)
}

/// Runs `count` execs of `/bin/true` in one workspace; every one must exit 0, and the
/// descriptors and threads this process holds after the last must be no more than after the
/// first 500 (with a little room for the runtime's own pool and for other tests in the binary).
pub(crate) async fn many_execs(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec, count: usize) {
    let ws = backend.create(&spec).await.unwrap();
    let request = ExecRequest::new(["/bin/true"]).timeout(Duration::from_secs(30));
    let mut latencies = Vec::with_capacity(count);
    let window = 500.min(count / 2);
    let mut warmed = (0, 0);
    for i in 0..count {
        if i == window {
            warmed = held();
        }
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
    let after = held();
    backend.remove(&ws).await.unwrap();
    let first = p99(&mut latencies[..window].to_vec());
    let last = p99(&mut latencies[count - window..].to_vec());
    eprintln!(
        "{count} execs: p99 of the first {window} {first:?}, of the last {window} {last:?}; \
         descriptors and threads {warmed:?} after {window}, {after:?} after {count}"
    );
    // A leak of one descriptor or thread per exec would show thousands here.
    assert!(
        after.0 <= warmed.0 + 64 && after.1 <= warmed.1 + 64,
        "the backend holds more after {count} execs than after {window}: \
         (descriptors, threads) {warmed:?} → {after:?}"
    );
}
