//! One module per top-level subcommand. Each exposes `…Args` (clap) and `run(args)`, which
//! returns the process exit status or an error that `output::finish` turns into exit code 2.

pub(crate) mod agents;
pub(crate) mod config_show;
pub(crate) mod doctor;
pub(crate) mod local;
pub(crate) mod models;
pub(crate) mod remote;
pub(crate) mod sandbox;
mod sandbox_egress;
pub(crate) mod scan;
pub(crate) mod simulate;
pub(crate) mod spec;
