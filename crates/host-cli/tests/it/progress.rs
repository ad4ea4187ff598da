//! The progress view as a person sees it: the demo on a pseudo-terminal, its output rendered by
//! a terminal emulator and the final screen snapshotted; then the same run followed through a
//! pipe, where the view degrades to plain lines without a single escape sequence.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::pty::{Winsize, openpty};

use crate::local::{local, sandbox_available};

const ROWS: u16 = 60;
const COLUMNS: u16 = 110;

/// Runs `auto-swe ARGS` with stdout and stderr on a fresh pseudo-terminal; returns the exit
/// code and every byte the terminal received.
fn on_a_terminal(home: &Path, args: &[&str]) -> (i32, Vec<u8>) {
    let size = Winsize {
        ws_row: ROWS,
        ws_col: COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(Some(&size), None).unwrap();
    let mut child = {
        #[expect(
            clippy::disallowed_methods,
            reason = "the tests run the real built binary, as users do"
        )]
        let mut command = Command::new(env!("CARGO_BIN_EXE_auto-swe"));
        command
            .args(args)
            .current_dir(home)
            .env("AUTO_SWE_HOME", home)
            .env("TERM", "xterm-256color")
            .env_remove("AUTO_SWE_STORE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
            .stderr(Stdio::from(pty.slave));
        command.spawn().unwrap()
        // The command, and with it this process's copies of the terminal's slave side, is
        // dropped here: the reader sees the end once the child's copies close.
    };
    let mut master = std::fs::File::from(pty.master);
    let (sender, chunks) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0_u8; 16 * 1024];
        // Linux answers EIO once no slave descriptor is open: the end of the output.
        while let Ok(read) = master.read(&mut buffer) {
            if read == 0 || sender.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    let status = child.wait().unwrap();
    let mut bytes = Vec::new();
    // Bounded: a descendant holding the terminal open would otherwise hang the test.
    while let Ok(chunk) = chunks.recv_timeout(Duration::from_secs(10)) {
        bytes.extend(chunk);
    }
    (status.code().unwrap(), bytes)
}

/// The screen a terminal of this size shows after `bytes`, row by row.
fn screen(bytes: &[u8]) -> String {
    let mut parser = vt100::Parser::new(ROWS, COLUMNS, 0);
    parser.process(bytes);
    let rows: Vec<String> = parser.screen().rows(0, COLUMNS).collect();
    rows.join("\n")
}

/// The run id of the board's header line.
fn run_id(screen: &str) -> String {
    screen
        .lines()
        .find_map(|l| l.strip_prefix("run ")?.split_whitespace().next())
        .unwrap()
        .to_owned()
}

/// The screen with what varies between runs (run id, the demo directory's time stamp, token
/// counts and cost) replaced by placeholders.
fn normalise(screen: &str, run: &str) -> String {
    let mut lines = Vec::new();
    for line in screen.replace(run, "<run>").lines() {
        let mut line = line.trim_end().to_owned();
        if let Some(at) = line.find("slugify-") {
            let start = at + "slugify-".len();
            let digits = line[start..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
            line.replace_range(start..start + digits, "<stamp>");
        }
        if let Some(at) = line
            .find(" at ")
            .filter(|_| line.contains("ci   pull request"))
        {
            line.replace_range(at + 4..at + 12, "<sha>");
        }
        if let Some(at) = line.find("tokens ") {
            line.replace_range(at.., "tokens <in> in / <out> out   cost $<cost>");
        }
        if let Some(at) = line.find("so far: ") {
            line.replace_range(at.., "so far: <tokens and cost>");
        }
        lines.push(line);
    }
    lines.join("\n").trim().to_owned()
}

#[test]
fn the_demo_on_a_terminal_draws_a_live_board_and_a_pipe_gets_plain_lines() {
    if !sandbox_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (code, bytes) = on_a_terminal(home.path(), &["demo", "--sandbox", "local"]);
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(code, 0, "{text}");
    // The board was drawn more than once, in place: frames, and the cursor moved back up.
    assert!(text.matches("tokens ").count() >= 2, "{text}");
    assert!(text.contains("\x1b["), "{text}");
    let screen = screen(&bytes);
    assert!(
        screen.lines().any(|l| l.starts_with("run ")),
        "{screen}\n---\n{text:?}"
    );
    let run = run_id(&screen);
    insta::assert_snapshot!("demo_on_a_terminal", normalise(&screen, &run));

    // Followed through a pipe, the rest of the run is plain lines.
    let merged = local(
        home.path(),
        &["pr", "merge", &run, "--sandbox", "local"],
        None,
    );
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert!(
        !merged.stdout.contains('\x1b') && !merged.stderr.contains('\x1b'),
        "{:?}",
        merged.stdout
    );
    assert!(merged.stdout.contains("lesson"), "{}", merged.stdout);
    assert!(
        merged.stdout.contains(&format!("run {run}: SUCCESS")),
        "{}",
        merged.stdout
    );
}
