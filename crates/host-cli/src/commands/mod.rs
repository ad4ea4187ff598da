//! One module per top-level subcommand. Each exposes `…Args` (clap) and `run(args)`, which
//! returns the process exit status or an error that `output::finish` turns into exit code 2.

pub(crate) mod sandbox;
pub(crate) mod spec;
