//! The seccomp profile every container of this backend runs under, sent inline with the create
//! body (`SecurityOpt: seccomp=<profile>`), so it does not depend on the engine's version.
//!
//! It denies, with `EPERM`, the calls `local`'s filter denies ([`crate::local::seccomp`]:
//! `io_uring_*`, key management, `bpf`, `perf_event_open`, `userfaultfd`, modules, `kexec_*`,
//! every mount call, handle opens, cross-process memory access, `ptrace` attach), plus new user
//! namespaces (`unshare` and `clone` with `CLONE_NEWUSER`; `clone3`, whose flags a filter
//! cannot read, answers `ENOSYS` so the C library falls back to `clone`), `setns`, and the
//! host-wide administration calls. Everything else is allowed: the engine's default profile
//! refuses more by an allow-list, but most of what it refuses needs a capability, and no
//! container of this backend has one (`CapDrop: ALL`, no-new-privileges). Only this
//! architecture's calls are named; a call of another ABI is refused by the engine.

use serde_json::{Value, json};

/// `CLONE_NEWUSER`.
const CLONE_NEWUSER: u64 = 0x1000_0000;

/// Denied on top of `local`'s list: namespaces and host administration.
const ALSO_DENIED: &[&str] = &[
    "setns",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "lookup_dcookie",
    "uselib",
    "ustat",
    "sysfs",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "vhangup",
];

fn architecture() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "SCMP_ARCH_AARCH64"
    } else {
        "SCMP_ARCH_X86_64"
    }
}

/// Every call name the profile refuses outright.
#[must_use]
pub fn denied_calls() -> Vec<&'static str> {
    let arch = crate::local::seccomp::native().unwrap_or(crate::local::seccomp::X86_64);
    let mut names: Vec<&'static str> = arch.denied.iter().map(|(name, _)| *name).collect();
    names.extend_from_slice(ALSO_DENIED);
    names.sort_unstable();
    names.dedup();
    names
}

fn when_arg0(mask_or_value: u64, masked: bool) -> Value {
    if masked {
        json!([{ "index": 0, "value": mask_or_value, "valueTwo": mask_or_value, "op": "SCMP_CMP_MASKED_EQ" }])
    } else {
        json!([{ "index": 0, "value": mask_or_value, "op": "SCMP_CMP_EQ" }])
    }
}

/// The profile as the engine takes it.
#[must_use]
pub fn seccomp_profile() -> Value {
    let eperm = |names: Value, args: Option<Value>| {
        let mut rule = json!({ "names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": 1 });
        if let Some(args) = args {
            rule["args"] = args;
        }
        rule
    };
    let mut rules = vec![
        eperm(json!(denied_calls()), None),
        eperm(json!(["unshare"]), Some(when_arg0(CLONE_NEWUSER, true))),
        eperm(json!(["clone"]), Some(when_arg0(CLONE_NEWUSER, true))),
        json!({ "names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38 }),
    ];
    for request in crate::local::seccomp::PTRACE_ATTACHES {
        rules.push(eperm(
            json!(["ptrace"]),
            Some(when_arg0(u64::from(request), false)),
        ));
    }
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": [architecture()],
        "syscalls": rules,
    })
}

/// The `SecurityOpt` entry that applies it.
#[must_use]
pub fn security_opt() -> String {
    format!("seccomp={}", seccomp_profile())
}
