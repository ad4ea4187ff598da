//! The checks of running commands: status and output, output caps, timeouts, ending one exec,
//! secrets and the environment.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::backend::{Exit, OutputChunk};
use crate::error::{FailureClass, SandboxError};
use crate::spec::{EnvName, ExecRequest, SecretEnv, WorkspaceSpec};

use super::context::{Ctx, shown};
use super::{Check, CheckFailure, Outcome, Skip, host, posture, resources};

/// The workspace spec a check creates: the suite's, with the caps or secrets it tests.
pub(super) fn spec_for(check: Check, base: &WorkspaceSpec) -> WorkspaceSpec {
    let mut spec = base.clone();
    match check {
        Check::OomIsReported => spec.limits.memory_bytes = 64 * 1024 * 1024,
        Check::EscapeForkBomb => spec.limits.pids = 64,
        Check::FileCountBoundRefusesAfterABurst | Check::FileCountBoundEndsAnEndlessMaker => {
            spec.limits.files = 1000;
        }
        Check::SecretsStayOffCommandLines => {
            if let Ok(name) = EnvName::new(CREATE_SECRET) {
                spec.secret_env.insert(
                    name,
                    crate::spec::SecretValue::new(format!("{}-create", secret_value())),
                );
            }
        }
        _ => {}
    }
    spec
}

/// Runs one check's body in its workspace.
pub(super) async fn run(ctx: &Ctx<'_>, check: Check) -> Result<Outcome, CheckFailure> {
    match check {
        Check::ExecAndStatus => exec_and_status(ctx).await,
        Check::OutputLimitHonoured => output_limit_honoured(ctx).await,
        Check::TimeoutKillsTheTree => timeout_kills_the_tree(ctx).await,
        Check::KillOneExec => kill_one_exec(ctx).await,
        Check::SecretsStayOffCommandLines => secrets_stay_off_command_lines(ctx).await,
        Check::EnvironmentScrubbed => environment_scrubbed(ctx).await,
        Check::CopyInAndOut => posture::copy_in_and_out(ctx).await,
        Check::PauseAndResume => posture::pause_and_resume(ctx).await,
        Check::RemoveTwice => posture::remove_twice(ctx).await,
        Check::NoCapabilities => posture::no_capabilities(ctx).await,
        Check::WritesConfined => posture::writes_confined(ctx).await,
        Check::MetadataNamesBlackholed => posture::metadata_names_blackholed(ctx).await,
        Check::NoEngineSocket => posture::no_engine_socket(ctx).await,
        Check::HostFilesHidden => posture::host_files_hidden(ctx).await,
        Check::EscapeTarCopiedBack => posture::escape_tar_copied_back(ctx).await,
        Check::OomIsReported => resources::oom_is_reported(ctx).await,
        Check::EscapeForkBomb => resources::escape_fork_bomb(ctx).await,
        Check::FileCountBoundRefusesAfterABurst => {
            resources::file_count_bound_refuses_after_a_burst(ctx).await
        }
        Check::FileCountBoundEndsAnEndlessMaker => {
            resources::file_count_bound_ends_an_endless_maker(ctx).await
        }
    }
}

/// Fails `step` unless `result` is the error `code` of class `class`.
pub(super) fn expect_error<T: std::fmt::Debug>(
    ctx: &Ctx<'_>,
    step: &str,
    result: Result<T, SandboxError>,
    code: &str,
    class: FailureClass,
) -> Result<(), CheckFailure> {
    match result {
        Ok(value) => Err(ctx.fail(step, format!("a {code} error"), format!("{value:?}"))),
        Err(err) => ctx.ensure_eq(step, (code, class), (err.code(), err.class())),
    }
}

async fn exec_and_status(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "status, stdout and stderr of `echo out; echo err >&2; exit 3`";
    let out = ctx.sh(step, "echo out; echo err >&2; exit 3").await?;
    ctx.ensure_eq(
        step,
        (3, "out\n".to_owned(), "err\n".to_owned()),
        (out.status, out.stdout_text(), out.stderr_text()),
    )?;
    let step = "exec_checked of `exit 5`";
    let checked = ctx
        .bounded(
            step,
            ctx.profile.patience * 2,
            ctx.backend.exec_checked(&ctx.ws, &ctx.shell("exit 5")),
        )
        .await?;
    expect_error(
        ctx,
        step,
        checked,
        "WORKSPACE_EXEC_FAILED",
        FailureClass::ExitStatus,
    )?;
    // Every exec is tagged, and the tag differs per call.
    let step = "every exec carries its own AUTO_SWE_EXEC_ID";
    let a = ctx.sh(step, "printf %s \"$AUTO_SWE_EXEC_ID\"").await?;
    let b = ctx.sh(step, "printf %s \"$AUTO_SWE_EXEC_ID\"").await?;
    ctx.ensure_eq(step, a.exec_id.as_str(), a.stdout_text().as_str())?;
    ctx.ensure(a.exec_id != b.exec_id, step, "two different tags", || {
        format!("{:?} twice", a.exec_id.as_str())
    })?;
    let step = "stdin reaches the command";
    let echoed = ctx
        .run(
            step,
            &ctx.request(ExecRequest::new(["cat"]).stdin(b"from stdin".to_vec())),
        )
        .await?;
    ctx.ensure_eq(step, "from stdin", echoed.stdout_text().as_str())?;
    // Arguments arrive exactly as given: newlines, quotes, empty strings, shell syntax, and a
    // leading dash or plus (the local launcher's own line markers).
    let tricky = [
        "two\nlines\n",
        "",
        "it's \"quoted\" $HOME `id` $(id) ; | &",
        "-dash",
        "+plus\n-minus",
        "\\ back\tslash",
    ];
    let mut argv = vec![
        "/bin/sh",
        "-c",
        r#"for a; do printf '[%s]' "$a"; done"#,
        "sh",
    ];
    argv.extend(tricky);
    let step = "arguments arrive exactly as given";
    let out = ctx.run(step, &ctx.request(ExecRequest::new(argv))).await?;
    let expected: String = tricky.iter().flat_map(|a| ["[", a, "]"]).collect();
    ctx.ensure_eq(step, expected, out.stdout_text())?;
    // Several execs at once in one workspace each get their own input, output and status.
    let step = "concurrent execs keep their own input, output and status";
    let runs = (0..6).map(|i| async move {
        let request = ExecRequest::new(["/bin/sh", "-c", "cat; exit \"$0\"", &i.to_string()])
            .stdin(format!("input {i}").into_bytes());
        (i, ctx.run(step, &ctx.request(request)).await)
    });
    for (i, out) in futures_util::future::join_all(runs).await {
        let out = out?;
        ctx.ensure_eq(
            step,
            (i, format!("input {i}")),
            (out.status, out.stdout_text()),
        )?;
    }
    Ok(Outcome::Passed)
}

async fn output_limit_honoured(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let step = "1,000-byte cap on 100,000 bytes of stdout and 3,000 of stderr";
    let mut request = ctx.shell(
        "head -c 100000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2; exit 7",
    );
    request.output_limit = 1000;
    let out = ctx.run(step, &request).await?;
    ctx.ensure_eq(
        step,
        (7, "a".repeat(1000), "b".repeat(1000), true),
        (
            out.status,
            out.stdout_text(),
            out.stderr_text(),
            out.truncated,
        ),
    )?;
    let step = "output under the cap is whole and not marked truncated";
    let mut request = ctx.shell("printf 0123456789");
    request.output_limit = 1000;
    let out = ctx.run(step, &request).await?;
    ctx.ensure_eq(
        step,
        ("0123456789".to_owned(), false),
        (out.stdout_text(), out.truncated),
    )?;
    Ok(Outcome::Passed)
}

async fn timeout_kills_the_tree(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let request = ctx
        .shell("sleep 300 & sleep 300 & (sleep 300 &) ; sleep 300")
        .timeout(Duration::from_secs(2));
    let step = "a spawned exec over its 2s timeout ends timed out";
    let spawned = ctx.spawn(step, &request).await?;
    let tag = format!("AUTO_SWE_EXEC_ID={}", spawned.exec_id.as_str());
    let (_, exit) = ctx.wait(step, spawned, request.timeout).await?;
    ctx.ensure_eq(step, Exit::TimedOut, exit)?;
    // Checked from outside: no process of this host carries the exec's tag any more.
    let left = host::processes_with("environ", tag).await;
    ctx.ensure_eq("no process of the timed-out tree is left", vec![], left)?;
    let step = "exec over its timeout fails WORKSPACE_EXEC_TIMEOUT";
    let result = ctx.exec(step, &request).await?;
    expect_error(
        ctx,
        step,
        result,
        "WORKSPACE_EXEC_TIMEOUT",
        FailureClass::Timeout,
    )?;
    let step = "the workspace still runs commands after a timeout";
    let out = ctx.sh(step, "echo alive").await?;
    ctx.ensure_eq(step, "alive\n", out.stdout_text().as_str())?;
    Ok(Outcome::Passed)
}

/// Sleep durations no other run of the suite uses, so their processes can be told apart.
fn unique_sleeps() -> (u32, u32) {
    let n = u32::from_str_radix(&host::nonce()[..4], 16).unwrap_or(0) % 50_000;
    (100_000 + 2 * n, 100_001 + 2 * n)
}

async fn kill_one_exec(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let (a, b) = unique_sleeps();
    let script = format!("sleep {a} & env -i /bin/sh -c 'sleep {b}' & echo up; wait");
    let request = ctx.shell(&script).timeout(Duration::from_secs(120));
    let step = "a long exec starts and writes `up`";
    let mut long = ctx.spawn(step, &request).await?;
    let first = ctx
        .bounded(step, ctx.profile.patience, long.output.recv())
        .await?;
    ctx.ensure(
        matches!(first, Some(OutputChunk::Stdout(ref bytes)) if bytes == b"up\n"),
        step,
        "`up` on stdout",
        || format!("{first:?}"),
    )?;
    let step = "kill_exec ends the exec";
    let started = Instant::now();
    let killed = ctx
        .bounded(
            step,
            ctx.profile.patience,
            ctx.backend.kill_exec(&ctx.ws, &long.exec_id),
        )
        .await?;
    match killed {
        Err(err) if err.class() == FailureClass::Unsupported => {
            return Ok(Outcome::Skipped(Skip::Unsupported {
                operation: "ending one exec (kill_exec)",
            }));
        }
        Err(err) => return Err(ctx.fail(step, "success", shown(&err))),
        Ok(()) => {}
    }
    let exec_id = long.exec_id.clone();
    let (_, exit) = ctx.wait(step, long, Duration::ZERO).await?;
    ctx.ensure_eq("an ended exec reports status 137", Exit::Status(137), exit)?;
    ctx.ensure(
        started.elapsed() < Duration::from_secs(30),
        step,
        "the exec ended within 30s",
        || format!("{}s", started.elapsed().as_secs()),
    )?;
    // Nothing of it is left, seen from inside and from this host, and the workspace runs on.
    let step = "nothing of the ended exec is left inside";
    let out = ctx
        .sh(
            step,
            "ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '",
        )
        .await?;
    let listing = out.stdout_text();
    ctx.ensure(
        !listing.contains(&format!("sleep {a}")) && !listing.contains(&format!("sleep {b}")),
        step,
        "no `sleep` of the exec in the process list",
        || listing.clone(),
    )?;
    for secs in [a, b] {
        let left = host::processes_running(format!("sleep\0{secs}\0").into_bytes()).await;
        ctx.ensure_eq(
            &format!("no `sleep {secs}` of the ended exec is left on this host"),
            vec![],
            left,
        )?;
    }
    let step = "the workspace still runs commands after kill_exec";
    let out = ctx.sh(step, "echo still").await?;
    ctx.ensure_eq(step, "still\n", out.stdout_text().as_str())?;
    // Ending an exec that has ended is no error.
    let step = "kill_exec of an ended exec";
    let again = ctx
        .bounded(
            step,
            ctx.profile.patience,
            ctx.backend.kill_exec(&ctx.ws, &exec_id),
        )
        .await?;
    again.map_err(|err| ctx.fail(step, "success", shown(&err)))?;
    Ok(Outcome::Passed)
}

const CREATE_SECRET: &str = "CREATE_SECRET";

/// The secret value of this process's runs of the secrets check.
fn secret_value() -> String {
    static VALUE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VALUE
        .get_or_init(|| format!("s3cret-{}-value", host::nonce()))
        .clone()
}

async fn secrets_stay_off_command_lines(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let value = secret_value();
    let secrets = SecretEnv::new()
        .with("EXEC_SECRET", value.clone())
        .map_err(|err| ctx.fail("name a secret", "a valid name", shown(&err)))?;
    let request = ctx
        .shell(
            "test -n \"$EXEC_SECRET\" && test -n \"$CREATE_SECRET\" && \
             cat /proc/[0-9]*/cmdline | tr '\\0' ' '; sleep 2",
        )
        .secrets(secrets);
    let step = "secrets reach the command";
    let mut spawned = ctx.spawn(step, &request).await?;
    // From outside, while it runs: no host process has the value on its command line.
    let mut seen = Vec::new();
    let first = ctx
        .bounded(
            step,
            request.timeout + ctx.profile.patience,
            spawned.output.recv(),
        )
        .await?;
    if let Some(OutputChunk::Stdout(first)) = first {
        let on_host = host::processes_with("cmdline", value.clone()).await;
        ctx.ensure_eq(
            "no command line on this host holds the secret while the exec runs",
            vec![],
            on_host,
        )?;
        seen.extend(first);
    }
    let (rest, exit) = ctx.wait(step, spawned, request.timeout).await?;
    seen.extend(rest);
    ctx.ensure_eq(step, Exit::Status(0), exit)?;
    let inside = String::from_utf8_lossy(&seen).into_owned();
    ctx.ensure(
        inside.contains("sleep"),
        step,
        "both secrets set, and the command lines listed",
        || inside.clone(),
    )?;
    ctx.ensure(
        !inside.contains(&value),
        "no command line seen inside holds the secret",
        "no secret value",
        || inside.clone(),
    )?;
    Ok(Outcome::Passed)
}

/// Variables a workspace sets for itself, whatever the host process has.
const OWN_VARIABLES: &[&str] = &[
    "PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "LANG", "LANGUAGE", "TZ", "USER",
    "LOGNAME", "SHELL", "HOSTNAME", "TMPDIR",
];

async fn environment_scrubbed(ctx: &Ctx<'_>) -> Result<Outcome, CheckFailure> {
    let host: Vec<(String, String)> = std::env::vars()
        .filter(|(name, value)| {
            !value.is_empty()
                && !OWN_VARIABLES.contains(&name.as_str())
                && !name.starts_with("LC_")
                && name != crate::spec::EXEC_ID_ENV
                && !ctx.spec.env.keys().any(|own| own.as_str() == name)
        })
        .collect();
    if host.is_empty() {
        return Ok(Outcome::Skipped(Skip::NothingToCompare(
            "the suite's process has no variable of its own to look for",
        )));
    }
    let step = "the command's environment";
    let out = ctx.sh(step, "env").await?;
    let inside: BTreeMap<String, String> = out
        .stdout_text()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let leaked: Vec<&str> = host
        .iter()
        .filter(|(name, value)| {
            inside
                .get(name)
                .is_some_and(|seen| value.lines().next() == Some(seen.as_str()))
        })
        .map(|(name, _)| name.as_str())
        .collect();
    ctx.ensure(
        leaked.is_empty(),
        "no variable of the host process reaches the command",
        "none",
        || leaked.join(", "),
    )?;
    Ok(Outcome::Passed)
}
