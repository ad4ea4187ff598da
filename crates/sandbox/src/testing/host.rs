//! Looking from outside the workspace: this host's processes and planted canary files.

use std::path::PathBuf;

/// A fresh random tag for names the suite makes, so concurrent runs never see each other's.
pub(super) fn nonce() -> String {
    crate::spec::random_hex(6).unwrap_or_else(|_| format!("{}", std::process::id()))
}

/// This host's processes whose `/proc/<pid>/<file>` (`environ`, `cmdline`) holds `needle`.
pub(super) async fn processes_with(file: &'static str, needle: String) -> Vec<u32> {
    tokio::task::spawn_blocking(move || scan(file, needle.as_bytes()))
        .await
        .unwrap_or_default()
}

/// This host's processes whose command line is exactly `cmdline` (NUL-separated).
pub(super) async fn processes_running(cmdline: Vec<u8>) -> Vec<u32> {
    tokio::task::spawn_blocking(move || {
        pids()
            .into_iter()
            .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline))
            .collect()
    })
    .await
    .unwrap_or_default()
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc").map_or_else(
        |_| Vec::new(),
        |dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .collect()
        },
    )
}

fn scan(file: &str, needle: &[u8]) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/{file}"))
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

/// Canary files planted in `/root` and `$HOME`; removed on drop.
pub(super) struct Canaries {
    pub(super) value: String,
    pub(super) files: Vec<PathBuf>,
}

impl Canaries {
    /// Plants a canary in each directory the suite may write to.
    pub(super) async fn plant() -> Self {
        let tag = nonce();
        let value = format!("Canary-Value-{tag}-9f3");
        let mut dirs = vec![PathBuf::from("/root")];
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home));
        }
        let mut files = Vec::new();
        for dir in dirs {
            let file = dir.join(format!(".auto-swe-canary-{tag}"));
            if !files.contains(&file) && tokio::fs::write(&file, &value).await.is_ok() {
                files.push(file);
            }
        }
        Self { value, files }
    }
}

impl Drop for Canaries {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}
