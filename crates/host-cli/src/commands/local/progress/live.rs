//! The live view on a terminal: one indicatif bar whose message is the whole board, redrawn in
//! place as the store's rows land. Lines printed through it (CI verdicts, notes) appear above
//! the board, so nothing is overwritten.

use auto_swe_store::{Store, StoreError};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::board::{Area, Board};

/// How many trace rows a frame reads (the newest; enough for every node's tool-call count on
/// any run a terminal can show).
const TRACE_WINDOW: u32 = 5_000;

/// The board on stdout, redrawn in place.
pub(super) struct Live {
    bar: ProgressBar,
}

impl Live {
    /// A view drawing on this process's stdout, which is a terminal.
    pub(super) fn new() -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
        if let Ok(style) = ProgressStyle::with_template("{msg}") {
            bar.set_style(style);
        }
        Self { bar }
    }

    /// Prints `text` above the board.
    pub(super) fn println(&self, text: &str) {
        self.bar.println(text);
    }

    /// Redraws the board from the store (`parked_on`: the signal the run is known to wait for).
    pub(super) async fn refresh(
        &self,
        store: &Store,
        run_id: &str,
        parked_on: Option<&str>,
    ) -> Result<(), StoreError> {
        let run = store.get_run(run_id).await?;
        let steps = store.list_steps(run_id).await?;
        let traces = store.list_traces(run_id, TRACE_WINDOW).await?;
        let board = Board::build(&run, &steps, &traces, parked_on);
        self.bar.set_message(board.render(area()));
        Ok(())
    }

    /// Leaves the last frame on screen; what is printed next goes below it.
    pub(super) fn finish(&self) {
        self.bar.finish();
    }
}

/// The terminal's size: its columns less one, so a full line never wraps, and its rows less
/// the lines printed above the board that should stay in view.
fn area() -> Area {
    let (rows, columns) = console::Term::stdout().size();
    Area {
        columns: usize::from(columns).saturating_sub(1).max(20),
        rows: usize::from(rows).saturating_sub(2).max(6),
    }
}
