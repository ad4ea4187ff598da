//! Ending an exec's tree: its process group, and every process of this host still carrying the
//! exec's tag in its environment (a child that left the group but kept its environment).

use nix::sys::signal::{Signal, kill as signal, killpg};
use nix::unistd::Pid;

/// Exit status of a child: its code, or 128 + the signal that ended it.
pub(crate) fn status_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Processes of this host whose environment holds `AUTO_SWE_EXEC_ID=<tag>`.
fn tagged(tag: &str) -> Vec<i32> {
    let needle = format!("{}={tag}\0", auto_swe_sandbox::EXEC_ID_ENV).into_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .collect()
}

/// Kills process group `group` and every process tagged `tag`, until none is left (a few
/// rounds: a process may fork while the first signals go out).
pub(crate) async fn kill(group: u32, tag: &str) {
    let tag = tag.to_owned();
    let _ = tokio::task::spawn_blocking(move || {
        let group = i32::try_from(group)
            .ok()
            .filter(|g| *g > 1)
            .map(Pid::from_raw);
        for _ in 0..8 {
            let in_group = group.is_some_and(|g| killpg(g, Signal::SIGKILL).is_ok());
            let stray = tagged(&tag);
            for pid in &stray {
                let _ = signal(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            if !in_group && stray.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    })
    .await;
}
