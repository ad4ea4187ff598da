//! Integration tests of the sandbox crate: pure plans and guards, and the shared behaviour and
//! escape suites against every backend this host can run.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions fail loudly too"
)]

mod archive;
mod docker;
mod docker_owners;
mod egress;
mod egress_git;
mod endurance;
mod exit_codes;
mod git_escape;
mod git_scripts;
mod hardening;
mod harness;
mod kubernetes;
mod kubernetes_api;
mod kubernetes_egress;
mod lifecycle;
mod local;
mod mount_guard;
mod orphans;
mod plans;
mod seccomp;
mod settings;
mod suite;
