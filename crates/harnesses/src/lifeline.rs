//! The lifeline: how a harness CLI's processes end with the turn.
//!
//! The CLI is not started directly: a small shell of ours starts it in a process group (and
//! session) of its own, reading from a FIFO the shell feeds from its own standard input, which
//! is the pipe the worker holds. When the worker lets go of the turn (cancellation, the turn's
//! deadline, a protocol error, an early return: the `SpawnedProcess` is dropped, which closes
//! that pipe), the feed ends and the shell kills the CLI's whole process group with `SIGKILL`
//! before it exits; when the CLI exits on its own, the shell kills whatever the CLI left in its
//! group. On the `local` backend every exec also has a PID namespace of its own, which ends —
//! taking every process in it — when the shell does; on `docker` and `kubernetes` the runtime's
//! tag kill at the end of the turn reaches anything that left the group.

/// The lifeline shell (`sh -c LIFELINE lifeline MODE CLI ARGS…`); exit status is the CLI's,
/// or 125 when the lifeline itself could not be set up (it also makes the CLI's `HOME`). In mode `feed` the CLI reads what the
/// worker writes; in mode `watch` it reads nothing (`/dev/null`) and the worker's input only
/// keeps it alive.
///
/// An asynchronous list reads `/dev/null` unless it names its input, so the feed names ours
/// (saved as descriptor 3).
pub const LIFELINE_SCRIPT: &str = r#"mode=$1
shift
if [ -n "${HOME:-}" ]; then mkdir -p -- "$HOME" || exit 125; fi
d=$(mktemp -d) || exit 125
if [ "$mode" = feed ]; then
  mkfifo "$d/in" || exit 125
  in="$d/in"
else
  in=/dev/null
fi
exec 3<&0
setsid "$@" < "$in" 3<&- &
cli=$!
{ cat > "$in"; kill -KILL -- "-$cli" 2>/dev/null || kill -KILL "$cli" 2>/dev/null; } <&3 &
exec 3<&-
wait "$cli"
status=$?
kill -KILL -- "-$cli" 2>/dev/null
rm -rf -- "$d"
exit "$status""#;

fn argv(mode: &str, cli: &str, args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut all = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        LIFELINE_SCRIPT.to_owned(),
        "lifeline".to_owned(),
        mode.to_owned(),
        cli.to_owned(),
    ];
    all.extend(args);
    all
}

/// The argv that runs `cli` (an absolute path inside the workspace) with `args` under the
/// lifeline, its standard input fed from the worker's. Every argument stays a positional
/// argument: nothing is evaluated as shell text.
#[must_use]
pub fn feeding(cli: &str, args: impl IntoIterator<Item = String>) -> Vec<String> {
    argv("feed", cli, args)
}

/// [`feeding`], but the CLI reads nothing: the worker's input is held open only as the
/// lifeline (closing it ends the CLI's process group).
#[must_use]
pub fn watching(cli: &str, args: impl IntoIterator<Item = String>) -> Vec<String> {
    argv("watch", cli, args)
}
