//! The seccomp filter every `local` sandbox runs under (bubblewrap's `--seccomp FD`): a classic
//! BPF program built here, with no library, from a deny list.
//!
//! Denied with `EPERM`: `io_uring_*` (a second syscall path around every other filter and a
//! rich source of kernel bugs), the key management calls (`keyctl`, `add_key`, `request_key`:
//! the sandbox inherits the caller's session keyring, whose keys it possesses), `bpf`,
//! `perf_event_open`, `userfaultfd` (a classic race amplifier), module loading and removal,
//! `kexec_*`, every mount call old and new (`mount`, `umount2`, `pivot_root`, `open_tree`,
//! `move_mount`, `fs*`, `mount_setattr`), `open_by_handle_at`, cross-process memory access
//! (`process_vm_readv`/`writev`), and `ptrace` `ATTACH`/`SEIZE`: a process may still trace a
//! child that asked for it (`PTRACE_TRACEME`, what a debugger's child does), never attach to
//! one already running. New user namespaces are refused by bubblewrap's `--disable-userns`.
//! A call from another architecture than the build's (and, on x86-64, an x32 call) kills the
//! process: the deny list is in this architecture's numbers only.

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instruction {
    /// Operation.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

/// Load a 32-bit word of `seccomp_data` at an absolute offset.
pub const LD_ABS: u16 = 0x20;
/// Jump if the accumulator equals `k`.
pub const JEQ: u16 = 0x15;
/// Jump if the accumulator is at least `k`.
pub const JGE: u16 = 0x35;
/// Return `k`.
pub const RET: u16 = 0x06;

/// `seccomp_data.nr`.
pub const OFFSET_NR: u32 = 0;
/// `seccomp_data.arch`.
pub const OFFSET_ARCH: u32 = 4;
/// The low 32 bits of `seccomp_data.args[0]` (little-endian).
pub const OFFSET_ARG0: u32 = 16;

/// Let the call through.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// Fail the call with `EPERM` (`SECCOMP_RET_ERRNO`, `0x0005_0000`, with errno 1).
pub const RET_EPERM: u32 = 0x0005_0001;
/// Kill the whole process.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// `PTRACE_ATTACH` and `PTRACE_SEIZE`.
pub const PTRACE_ATTACHES: [u32; 2] = [16, 0x4206];

/// The architecture's audit number and call numbers the filter is built with.
#[derive(Debug, Clone, Copy)]
pub struct Arch {
    /// `AUDIT_ARCH_*`.
    pub audit: u32,
    /// Call numbers from here up are another ABI (x32 on x86-64); none on others.
    pub foreign_from: Option<u32>,
    /// The denied calls, by name and number.
    pub denied: &'static [(&'static str, u32)],
    /// `ptrace`'s number.
    pub ptrace: u32,
}

/// x86-64.
pub const X86_64: Arch = Arch {
    audit: 0xc000_003e,
    foreign_from: Some(0x4000_0000),
    denied: &[
        ("mount", 165),
        ("umount2", 166),
        ("pivot_root", 155),
        ("init_module", 175),
        ("delete_module", 176),
        ("kexec_load", 246),
        ("add_key", 248),
        ("request_key", 249),
        ("keyctl", 250),
        ("perf_event_open", 298),
        ("open_by_handle_at", 304),
        ("process_vm_readv", 310),
        ("process_vm_writev", 311),
        ("finit_module", 313),
        ("kexec_file_load", 320),
        ("bpf", 321),
        ("userfaultfd", 323),
        ("io_uring_setup", 425),
        ("io_uring_enter", 426),
        ("io_uring_register", 427),
        ("open_tree", 428),
        ("move_mount", 429),
        ("fsopen", 430),
        ("fsconfig", 431),
        ("fsmount", 432),
        ("fspick", 433),
        ("mount_setattr", 442),
    ],
    ptrace: 101,
};

/// `AArch64`.
pub const AARCH64: Arch = Arch {
    audit: 0xc000_00b7,
    foreign_from: None,
    denied: &[
        ("umount2", 39),
        ("mount", 40),
        ("pivot_root", 41),
        ("kexec_load", 104),
        ("init_module", 105),
        ("delete_module", 106),
        ("add_key", 217),
        ("request_key", 218),
        ("keyctl", 219),
        ("perf_event_open", 241),
        ("open_by_handle_at", 265),
        ("process_vm_readv", 270),
        ("process_vm_writev", 271),
        ("finit_module", 273),
        ("bpf", 280),
        ("userfaultfd", 282),
        ("kexec_file_load", 294),
        ("io_uring_setup", 425),
        ("io_uring_enter", 426),
        ("io_uring_register", 427),
        ("open_tree", 428),
        ("move_mount", 429),
        ("fsopen", 430),
        ("fsconfig", 431),
        ("fsmount", 432),
        ("fspick", 433),
        ("mount_setattr", 442),
    ],
    ptrace: 117,
};

/// The architecture this crate was built for, if the filter knows it.
#[must_use]
pub fn native() -> Option<Arch> {
    if cfg!(target_arch = "x86_64") {
        Some(X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(AARCH64)
    } else {
        None
    }
}

fn op(code: u16, k: u32) -> Instruction {
    Instruction {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The filter program for `arch`.
///
/// Layout: check the architecture (else kill), load the call number, send another ABI's calls
/// to `EPERM`, one equality test per denied call (to `EPERM`), then `ptrace`'s request checked
/// last (it replaces the number in the accumulator), then allow; the three returns close it.
#[must_use]
pub fn program(arch: &Arch) -> Vec<Instruction> {
    // Jumps are relative and forward; targets are fixed up once the returns' places are known.
    #[derive(Clone, Copy)]
    enum To {
        Next,
        Allow,
        Eperm,
        Kill,
    }
    let mut body: Vec<(Instruction, To, To)> = vec![
        (op(LD_ABS, OFFSET_ARCH), To::Next, To::Next),
        (op(JEQ, arch.audit), To::Next, To::Kill),
        (op(LD_ABS, OFFSET_NR), To::Next, To::Next),
    ];
    if let Some(foreign) = arch.foreign_from {
        body.push((op(JGE, foreign), To::Kill, To::Next));
    }
    for (_, nr) in arch.denied {
        body.push((op(JEQ, *nr), To::Eperm, To::Next));
    }
    body.push((op(JEQ, arch.ptrace), To::Next, To::Allow));
    body.push((op(LD_ABS, OFFSET_ARG0), To::Next, To::Next));
    body.push((op(JEQ, PTRACE_ATTACHES[0]), To::Eperm, To::Next));
    body.push((op(JEQ, PTRACE_ATTACHES[1]), To::Eperm, To::Allow));
    let allow = body.len();
    let eperm = allow + 1;
    let kill = allow + 2;
    let offset = |at: usize, to: To| -> u8 {
        let target = match to {
            To::Next => at + 1,
            To::Allow => allow,
            To::Eperm => eperm,
            To::Kill => kill,
        };
        u8::try_from(target - at - 1).unwrap_or(u8::MAX)
    };
    let mut out: Vec<Instruction> = body
        .iter()
        .enumerate()
        .map(|(at, (ins, jt, jf))| {
            if ins.code == LD_ABS {
                *ins
            } else {
                Instruction {
                    jt: offset(at, *jt),
                    jf: offset(at, *jf),
                    ..*ins
                }
            }
        })
        .collect();
    out.push(op(RET, RET_ALLOW));
    out.push(op(RET, RET_EPERM));
    out.push(op(RET, RET_KILL_PROCESS));
    out
}

/// The program as the kernel reads it: 8 bytes per instruction, native byte order.
#[must_use]
pub fn to_bytes(program: &[Instruction]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for ins in program {
        bytes.extend_from_slice(&ins.code.to_ne_bytes());
        bytes.push(ins.jt);
        bytes.push(ins.jf);
        bytes.extend_from_slice(&ins.k.to_ne_bytes());
    }
    bytes
}

/// Runs `program` on one call, as the kernel would: the return value (`RET_*`). For tests and
/// the fuzz target; `None` for a program that falls off its end, loads outside the data, or
/// runs more steps than it has instructions (classic BPF only jumps forward, so a program that
/// does is not one the kernel would take).
#[must_use]
pub fn evaluate(program: &[Instruction], arch: u32, nr: u32, arg0: u64) -> Option<u32> {
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    let word = |offset: u32| -> Option<u32> {
        match offset {
            OFFSET_NR => Some(nr),
            OFFSET_ARCH => Some(arch),
            OFFSET_ARG0 => Some((arg0 & 0xffff_ffff) as u32),
            _ => None,
        }
    };
    for _ in 0..program.len() {
        let ins = program.get(pc)?;
        match ins.code {
            LD_ABS => {
                acc = word(ins.k)?;
                pc += 1;
            }
            JEQ | JGE => {
                let taken = if ins.code == JEQ {
                    acc == ins.k
                } else {
                    acc >= ins.k
                };
                pc += 1 + usize::from(if taken { ins.jt } else { ins.jf });
            }
            RET => return Some(ins.k),
            _ => return None,
        }
    }
    None
}

/// The program run call by call: every denied call refused, ordinary calls allowed, `ptrace`
/// attach refused and other requests allowed, foreign ABIs killed, the byte form exact. Here,
/// beside the program, so the mutation run of this file needs only the library's tests.
#[cfg(test)]
mod tests {
    use super::*;

    fn check(arch: &Arch, ordinary: &[u32]) {
        let filter = program(arch);
        assert_eq!(to_bytes(&filter).len(), filter.len() * 8);
        for (name, nr) in arch.denied {
            assert_eq!(
                evaluate(&filter, arch.audit, *nr, 0),
                Some(RET_EPERM),
                "{name}"
            );
        }
        for nr in ordinary {
            assert_eq!(
                evaluate(&filter, arch.audit, *nr, 0),
                Some(RET_ALLOW),
                "call {nr}"
            );
        }
        // ptrace: a child that asks to be traced, and a tracer's requests on it, pass; attaching
        // to a running process does not.
        for request in [0u64, 2, 7, 24, 0x4200] {
            assert_eq!(
                evaluate(&filter, arch.audit, arch.ptrace, request),
                Some(RET_ALLOW),
                "ptrace request {request}"
            );
        }
        for request in [16u64, 0x4206, 0xffff_ffff_0000_0010] {
            assert_eq!(
                evaluate(&filter, arch.audit, arch.ptrace, request),
                Some(RET_EPERM),
                "ptrace request {request:#x}"
            );
        }
        // Another architecture's numbering is never trusted.
        for other in [0x4000_0003, 0xc000_0028, 0] {
            assert_eq!(
                evaluate(&filter, other, 0, 0),
                Some(RET_KILL_PROCESS),
                "arch {other:#x}"
            );
        }
        if let Some(foreign) = arch.foreign_from {
            assert_eq!(
                evaluate(&filter, arch.audit, foreign + 1, 0),
                Some(RET_KILL_PROCESS)
            );
        }
        // Every call number ends at one of the three returns.
        for nr in 0..1024 {
            assert!(evaluate(&filter, arch.audit, nr, 0).is_some(), "call {nr}");
        }
    }

    #[test]
    fn x86_64_program_refuses_the_list_and_allows_the_rest() {
        // read, write, openat, clone, execve, getpid, wait4, unshare, clone3.
        check(&X86_64, &[0, 1, 257, 56, 59, 39, 61, 272, 435]);
    }

    #[test]
    fn aarch64_program_refuses_the_list_and_allows_the_rest() {
        // read, write, openat, clone, execve, getpid, wait4, unshare, clone3.
        check(&AARCH64, &[63, 64, 56, 220, 221, 172, 260, 97, 435]);
    }

    #[test]
    fn the_native_filter_is_the_build_architectures() {
        let native = native().map(|arch| arch.audit);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(native, Some(X86_64.audit));
        } else if cfg!(target_arch = "aarch64") {
            assert_eq!(native, Some(AARCH64.audit));
        }
    }

    #[test]
    fn bytes_are_code_jumps_and_operand_in_native_order() {
        let ins = Instruction {
            code: JEQ,
            jt: 3,
            jf: 7,
            k: 0x0102_0304,
        };
        let mut expected = JEQ.to_ne_bytes().to_vec();
        expected.extend_from_slice(&[3, 7]);
        expected.extend_from_slice(&0x0102_0304_u32.to_ne_bytes());
        assert_eq!(to_bytes(&[ins, ins]), [expected.clone(), expected].concat());
    }
}
