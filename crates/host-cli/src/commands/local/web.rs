//! `auto-swe runs show RUN --web`: the run in the browser. Against a server, its viewer's
//! sign-in page that leads to the run; on the local store, the viewer served on a loopback port
//! for as long as the command runs, entered through a one-time code.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use auto_swe_server::viewer::serve_local;

use super::inspect::store_error;
use super::{open_store, runtime};
use crate::commands::remote::{ServerArgs, server_url};
use crate::output::{self, Status};

/// Opens (or prints) the viewer's page of `run`.
pub(crate) fn show(server: &ServerArgs, run: &str) -> anyhow::Result<Status> {
    if let Some(base) = server_url(server)? {
        let url = base
            .join(&format!("ui/login?next=/ui/runs/{}", path_segment(run)))
            .context("the viewer's URL")?;
        output::print_text(&format!("{url}\n"))?;
        // The URL holds no secret: the browser signs in on the page.
        open(url.as_str());
        return Ok(Status::Success);
    }
    runtime()?.block_on(async {
        let (home, store) = open_store().await?;
        store
            .get_run(run)
            .await
            .map_err(|e| store_error(&e, &format!("run {run}")))?;
        let viewer = serve_local(store, run)
            .await
            .map_err(|e| anyhow::anyhow!("the local viewer: {e}"))?;
        // The one-time code must not reach a command line other users can read: the browser is
        // pointed at an owner-only file that forwards to the link.
        let launcher = launcher(&home, viewer.url())?;
        output::print_text(&format!(
            "{}\nServing the run viewer on loopback; the link signs in once. Ctrl-C stops it.\n",
            viewer.url()
        ))?;
        open(&launcher.to_string_lossy());
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        let _ = std::fs::remove_file(&launcher);
        viewer.stop().await;
        Ok(Status::Success)
    })
}

/// Percent-encodes what a run id should never hold, so the path stays one segment.
fn path_segment(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An owner-only HTML file under the home that sends the browser on to `url`.
fn launcher(home: &Path, url: &str) -> anyhow::Result<PathBuf> {
    let path = home.join("viewer-link.html");
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    let escaped = url.replace('&', "&amp;").replace('"', "&quot;");
    writeln!(
        file,
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={escaped}\">\
         <a href=\"{escaped}\">Open the run viewer</a>"
    )?;
    Ok(path)
}

/// Asks the desktop to open `target` with `xdg-open`, when it is installed; otherwise the
/// printed URL is the way in.
fn open(target: &str) {
    let Some(opener) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("xdg-open"))
            .find(|candidate| candidate.is_file())
    }) else {
        return;
    };
    #[expect(
        clippy::disallowed_methods,
        reason = "handing a page to the desktop's browser is what --web asks for"
    )]
    let spawned = std::process::Command::new(opener)
        .arg(target)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(error) = spawned {
        eprintln!("auto-swe: xdg-open did not start ({error}); open the URL above");
    }
}
