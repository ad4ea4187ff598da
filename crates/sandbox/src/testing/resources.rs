//! The checks of caps: memory, processes and the file-count bound.

use std::time::Duration;

use crate::error::FailureClass;

use super::checks::expect_error;
use super::context::{Ctx, shown};
use super::{CheckFailure, Outcome, host};

pub(super) async fn oom_is_reported(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "a command over the 64 MiB cap fails out-of-memory";
    let request = ctx
        .shell("x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo ${#x}")
        .timeout(Duration::from_secs(120));
    let result = ctx.exec(step, &request).await?;
    expect_error(
        ctx,
        step,
        result,
        "WORKSPACE_OUT_OF_MEMORY",
        FailureClass::OutOfMemory,
    )?;
    Ok(Outcome::Passed)
}

/// Escape: a fork bomb runs into the pids cap and, once the workspace is removed, nothing of it
/// is left. (While the cap is saturated even an engine's own kill exec cannot start inside, so
/// removal is the containment.)
pub(super) async fn escape_fork_bomb(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let request = ctx
        .shell("b() { b | b & }; b; sleep 5; echo survived")
        .timeout(Duration::from_secs(10));
    let step = "a fork bomb under a 64-process cap ends";
    let spawned = ctx.spawn(step, &request).await?;
    let tag = format!("AUTO_SWE_EXEC_ID={}", spawned.exec_id.as_str());
    // Any end will do: the point is that this host kept working and the bomb ends.
    let _ = ctx.wait(step, spawned, request.timeout).await?;
    let step = "remove the bombed workspace";
    ctx.bounded(step, ctx.profile.patience, ctx.backend.remove(&ctx.ws))
        .await?
        .map_err(|err| ctx.fail(step, "success", shown(&err)))?;
    let left = host::processes_with("environ", tag).await;
    ctx.ensure_eq("nothing of the bomb is left on this host", vec![], left)?;
    Ok(Outcome::Passed)
}

/// Makes `n` empty files in `<workspace>/<dir>` as fast as a shell can.
fn make_files(ctx: &Ctx<'_>, dir: &str, n: u32) -> String {
    let dir = ctx.quoted(dir);
    format!(
        "mkdir -p {dir} && cd {dir} && i=0; \
         while [ $i -lt {n} ]; do : > f$i; i=$((i+1)); done"
    )
}

/// Under its bound a workspace works as ever; the exec that takes it over fails
/// `WORKSPACE_FILE_LIMIT`, and from then on nothing runs in it — removing files from inside
/// would need an exec, and an exec could as well make more.
pub(super) async fn file_count_bound_refuses_after_a_burst(
    ctx: &Ctx<'_>,
) -> Result<Outcome, CheckFailure> {
    let step = "500 files under a bound of 1,000";
    let out = ctx.sh(step, &make_files(ctx, "a", 500)).await?;
    ctx.ensure_eq(step, 0, out.status)?;
    // Links to the whole host count as one entry each, not as what they point at.
    let step = "links to / and /usr count as one entry each";
    let out = ctx
        .sh(
            step,
            &format!(
                "ln -s / {} && ln -s /usr {}",
                ctx.quoted("root"),
                ctx.quoted("usr")
            ),
        )
        .await?;
    ctx.ensure_eq(step, 0, out.status)?;
    let out = ctx.sh(step, "echo ok").await?;
    ctx.ensure_eq(step, "ok\n", out.stdout_text().as_str())?;
    let step = "the exec that passes the bound fails WORKSPACE_FILE_LIMIT";
    let result = ctx
        .exec(step, &ctx.shell(&make_files(ctx, "b", 1500)))
        .await?;
    expect_error(
        ctx,
        step,
        result,
        "WORKSPACE_FILE_LIMIT",
        FailureClass::Refused,
    )?;
    let step = "an exec after the bound was passed is refused";
    ctx.refused(
        step,
        &ctx.shell(&format!("rm -rf {}", ctx.quoted("b"))),
        "WORKSPACE_FILE_LIMIT",
    )
    .await?;
    let step = "a spawn after the bound was passed is refused";
    let spawned = ctx
        .bounded(
            step,
            ctx.profile.patience,
            ctx.backend.spawn(&ctx.ws, &ctx.shell("true")),
        )
        .await?;
    match spawned {
        Ok(_) => Err(ctx.fail(step, "a WORKSPACE_FILE_LIMIT error", "it started")),
        Err(err) => {
            ctx.ensure_eq(step, "WORKSPACE_FILE_LIMIT", err.code())?;
            Ok(Outcome::Passed)
        }
    }
}

/// A command that makes files without end is ended by the bound, long before its timeout, and
/// its whole tree with it.
pub(super) async fn file_count_bound_ends_an_endless_maker(
    ctx: &Ctx<'_>,
) -> Result<Outcome, CheckFailure> {
    let marker = format!("files-maker-{}", host::nonce());
    // The maker carries the marker in its environment, so its host process can be looked for.
    let script = format!(
        "MARK={marker} exec sh -c 'mkdir -p {dir} && cd {dir} && i=0; \
         while :; do : > f$i; i=$((i+1)); done'",
        dir = ctx.path("c"),
    );
    let step = "an endless file maker is ended with WORKSPACE_FILE_LIMIT";
    ctx.refused(
        step,
        &ctx.shell(&script).timeout(Duration::from_secs(120)),
        "WORKSPACE_FILE_LIMIT",
    )
    .await?;
    let left = host::processes_with("environ", marker).await;
    ctx.ensure_eq("the maker did not outlive its exec", vec![], left)?;
    Ok(Outcome::Passed)
}
