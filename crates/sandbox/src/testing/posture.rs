//! The checks of files and posture: copying in and out, pause and removal, capabilities,
//! confined writes, metadata names, engine sockets, host files and archive escapes.

use std::io::Read as _;
use std::time::Duration;

use crate::error::{FailureClass, SandboxError};

use super::checks::expect_error;
use super::context::{Ctx, shown};
use super::{CheckFailure, Outcome, Skip, host};

fn tar_of(name: &str, content: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(content.len() as u64);
    header.set_mode(0o755);
    builder.append_data(&mut header, name, content)?;
    builder.into_inner()
}

fn file_in_tar(archive: &[u8], suffix: &str) -> std::io::Result<Option<Vec<u8>>> {
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if entry.path()?.to_string_lossy().ends_with(suffix) {
            let mut buf = Vec::new();
            entry.read_to_end(&mut buf)?;
            return Ok(Some(buf));
        }
    }
    Ok(None)
}

/// The file `suffix` of a copied-out archive.
fn copied_file(
    ctx: &Ctx<'_>,
    step: &str,
    archive: &[u8],
    suffix: &str,
) -> Result<Vec<u8>, CheckFailure> {
    match file_in_tar(archive, suffix) {
        Ok(Some(content)) => Ok(content),
        Ok(None) => Err(ctx.fail(step, format!("`{suffix}` in the archive"), "no such entry")),
        Err(err) => Err(ctx.fail(step, "a readable tar archive", err.to_string())),
    }
}

async fn copy_in(
    ctx: &Ctx<'_>,
    step: &str,
    archive: &[u8],
    dest: &str,
) -> Result<Result<(), SandboxError>, CheckFailure> {
    ctx.bounded(
        step,
        ctx.profile.patience,
        ctx.backend.copy_in(&ctx.ws, archive, dest),
    )
    .await
}

async fn copy_out(
    ctx: &Ctx<'_>,
    step: &str,
    path: &str,
    limit: usize,
) -> Result<Result<Vec<u8>, SandboxError>, CheckFailure> {
    ctx.bounded(
        step,
        ctx.profile.patience,
        ctx.backend.copy_out(&ctx.ws, path, limit),
    )
    .await
}

fn archive(ctx: &Ctx<'_>, name: &str, content: &[u8]) -> Result<Vec<u8>, CheckFailure> {
    tar_of(name, content)
        .map_err(|err| ctx.fail("build a tar archive", "an archive", err.to_string()))
}

pub(super) async fn copy_in_and_out(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let inside = ctx.path("in");
    ctx.sh(
        "make a directory",
        &format!("mkdir -p {}", ctx.quoted("in")),
    )
    .await?;
    let step = "copy in a script";
    let tool = archive(ctx, "tool.sh", b"#!/bin/sh\necho tool ran\n")?;
    copy_in(ctx, step, &tool, &inside)
        .await?
        .map_err(|err| ctx.fail(step, "success", shown(&err)))?;
    // The mode is kept: the copied script is executable.
    let step = "a copied-in script keeps its mode and runs";
    let out = ctx.sh(step, &ctx.quoted("in/tool.sh")).await?;
    ctx.ensure_eq(step, "tool ran\n", out.stdout_text().as_str())?;
    ctx.sh(
        "write a file inside",
        &format!("echo made inside > {}", ctx.quoted("in/made.txt")),
    )
    .await?;
    let step = "copy out a directory";
    let archive_out = copy_out(ctx, step, &inside, 1 << 20)
        .await?
        .map_err(|err| ctx.fail(step, "an archive", shown(&err)))?;
    let made = copied_file(ctx, step, &archive_out, "in/made.txt")?;
    ctx.ensure_eq(step, &b"made inside\n"[..], &made[..])?;
    // Copy-out is capped.
    ctx.sh(
        "write a big file",
        &format!("head -c 200000 /dev/zero > {}", ctx.quoted("in/big")),
    )
    .await?;
    let step = "copy out past a 10,000-byte cap is refused";
    let capped = copy_out(ctx, step, &inside, 10_000).await?;
    match capped {
        Ok(bytes) => {
            return Err(ctx.fail(step, "a refusal", format!("{} bytes", bytes.len())));
        }
        Err(err) => ctx.ensure_eq(step, FailureClass::Refused, err.class())?,
    }
    // Hostile copy paths are refused before anything runs: climbing out, relative, a NUL,
    // look-alikes of `/` and `.` (fullwidth solidus, one-dot leader), control characters.
    let dir = ctx.dir.trim_end_matches('/');
    let hostile = [
        format!("{dir}/../etc"),
        format!("{}/in", dir.trim_start_matches('/')),
        format!("{dir}/in\0x"),
        format!("{dir}\u{ff0f}in"),
        format!("{dir}/\u{2024}\u{2024}/etc"),
        format!("{dir}/in\nx"),
    ];
    let x = archive(ctx, "x", b"x")?;
    for bad in &hostile {
        let step = format!("copy in to {bad:?} is refused");
        let result = copy_in(ctx, &step, &x, bad).await?;
        expect_error(
            ctx,
            &step,
            result,
            "WORKSPACE_INVALID_REQUEST",
            FailureClass::Refused,
        )?;
        let step = format!("copy out of {bad:?} is refused");
        let result = copy_out(ctx, &step, bad, 1 << 20).await?;
        expect_error(
            ctx,
            &step,
            result,
            "WORKSPACE_INVALID_REQUEST",
            FailureClass::Refused,
        )?;
    }
    // A failing command's stderr reaches the error text with credential shapes masked.
    let step = "a failing command's stderr, credential masked, in the error";
    let failing = ctx.shell(
        "echo 'fatal: https://x-access-token:ghs_0123456789abcdefghijABCDEFGHIJ0123@git.example/r' >&2; exit 3",
    );
    let checked = ctx
        .bounded(
            step,
            ctx.profile.patience * 2,
            ctx.backend.exec_checked(&ctx.ws, &failing),
        )
        .await?;
    let shown_err = match checked {
        Ok(out) => return Err(ctx.fail(step, "an error", format!("status {}", out.status))),
        Err(err) => format!("{err:?}"),
    };
    ctx.ensure(
        shown_err.contains("fatal:") && !shown_err.contains("ghs_0123456789abcdefghij"),
        step,
        "`fatal:` shown, the token masked",
        || shown_err.clone(),
    )?;
    Ok(Outcome::Passed)
}

pub(super) async fn pause_and_resume(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "pause";
    ctx.bounded(step, ctx.profile.patience, ctx.backend.pause(&ctx.ws))
        .await?
        .map_err(|err| ctx.fail(step, "success", shown(&err)))?;
    // Nothing new starts while paused.
    let step = "nothing runs while paused";
    let paused = ctx
        .exec(step, &ctx.shell("echo ran").timeout(Duration::from_secs(2)))
        .await?;
    if let Ok(out) = paused {
        return Err(ctx.fail(step, "an error", format!("ran: {:?}", out.stdout_text())));
    }
    let step = "resume";
    ctx.bounded(step, ctx.profile.patience, ctx.backend.resume(&ctx.ws))
        .await?
        .map_err(|err| ctx.fail(step, "success", shown(&err)))?;
    let step = "commands run again after resume";
    let out = ctx.sh(step, "echo back").await?;
    ctx.ensure_eq(step, "back\n", out.stdout_text().as_str())?;
    Ok(Outcome::Passed)
}

pub(super) async fn remove_twice(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    for step in ["remove", "remove again"] {
        ctx.bounded(step, ctx.profile.patience, ctx.backend.remove(&ctx.ws))
            .await?
            .map_err(|err| ctx.fail(step, "success", shown(&err)))?;
    }
    let step = "a removed workspace is not found";
    let result = ctx.exec(step, &ctx.shell("true")).await?;
    match result {
        Ok(out) => Err(ctx.fail(step, "a NotFound error", format!("status {}", out.status))),
        Err(err) => {
            ctx.ensure_eq(step, FailureClass::NotFound, err.class())?;
            Ok(Outcome::Passed)
        }
    }
}

pub(super) async fn no_capabilities(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "every capability set is empty";
    let caps = ctx
        .sh(step, "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status")
        .await?;
    let text = caps.stdout_text();
    ctx.ensure(
        text.lines().count() == 4 && text.lines().all(|l| l.ends_with("0000000000000000")),
        step,
        "CapEff, CapPrm, CapBnd and CapAmb all zero",
        || text.clone(),
    )?;
    Ok(Outcome::Passed)
}

pub(super) async fn writes_confined(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let name = format!(".auto-swe-suite-{}", host::nonce());
    for dir in ["/etc", "/usr", "", "/var", "/bin"] {
        let target = format!("{dir}/{name}");
        let step = format!("writing {target} fails");
        let out = ctx
            .sh(&step, &format!("echo x > {target} && rm -f {target}"))
            .await?;
        ctx.ensure(out.status != 0, &step, "a non-zero status", || {
            format!("{target} was writable")
        })?;
    }
    let step = "the workspace and /tmp are writable";
    let out = ctx
        .sh(
            step,
            &format!(
                "echo x > {} && echo x > /tmp/{name} && rm -f /tmp/{name} && echo ok",
                ctx.quoted(&name)
            ),
        )
        .await?;
    ctx.ensure_eq(step, "ok\n", out.stdout_text().as_str())?;
    Ok(Outcome::Passed)
}

pub(super) async fn metadata_names_blackholed(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "/etc/hosts sends metadata.google.internal to 0.0.0.0";
    let hosts = ctx.sh(step, "cat /etc/hosts").await?.stdout_text();
    let blackholed = hosts.lines().any(|line| {
        let mut fields = line.split_whitespace();
        fields.next() == Some("0.0.0.0") && fields.any(|name| name == "metadata.google.internal")
    });
    ctx.ensure(blackholed, step, "a 0.0.0.0 entry for it", || hosts.clone())?;
    Ok(Outcome::Passed)
}

pub(super) async fn no_engine_socket(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "no Docker socket";
    let out = ctx
        .sh(
            step,
            "for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo $s; done; true",
        )
        .await?;
    ctx.ensure_eq(step, "", out.stdout_text().as_str())?;
    Ok(Outcome::Passed)
}

pub(super) async fn host_files_hidden(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let canaries = host::Canaries::plant().await;
    if canaries.files.is_empty() {
        return Ok(Outcome::Skipped(Skip::NothingToCompare(
            "no canary could be planted in /root or $HOME",
        )));
    }
    for file in &canaries.files {
        let parent = file
            .parent()
            .map_or_else(String::new, |p| p.display().to_string());
        let step = format!("{} cannot be read", file.display());
        let out = ctx
            .sh(
                &step,
                &format!(
                    "cat {} 2>&1; ls -a {} 2>&1",
                    crate::quote::shell_quote(&file.display().to_string()),
                    crate::quote::shell_quote(&parent)
                ),
            )
            .await?;
        let text = out.stdout_text();
        ctx.ensure(
            !text.contains(&canaries.value),
            &step,
            "no canary value",
            || text.clone(),
        )?;
    }
    Ok(Outcome::Passed)
}

/// Escape: a tar with `../` entries made inside and copied back in is refused.
pub(super) async fn escape_tar_copied_back(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "make a tar with a `../` entry inside";
    let made = ctx
        .sh(
            step,
            &format!(
                "mkdir -p {b} && echo pwn > {x} && cd {b} && tar -cPf {evil} ../x && echo ok",
                b = ctx.quoted("a/b"),
                x = ctx.quoted("a/x"),
                evil = ctx.quoted("evil.tar"),
            ),
        )
        .await?;
    ctx.ensure_eq(step, "ok\n", made.stdout_text().as_str())?;
    let step = "copy the tar out";
    let outer = copy_out(ctx, step, &ctx.path("evil.tar"), 1 << 20)
        .await?
        .map_err(|err| ctx.fail(step, "an archive", shown(&err)))?;
    let evil = copied_file(ctx, step, &outer, "evil.tar")?;
    let step = "copying the tar back in is refused";
    let result = copy_in(ctx, step, &evil, &ctx.path("a/b")).await?;
    expect_error(
        ctx,
        step,
        result,
        "WORKSPACE_UNSAFE_ARCHIVE",
        FailureClass::Refused,
    )?;
    Ok(Outcome::Passed)
}
