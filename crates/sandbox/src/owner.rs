//! Who a workspace belongs to: the process that made it, known by its PID *and* its start time
//! (`/proc/<pid>/stat`, field 22), so a PID the kernel has handed to a new process is never
//! taken for the owner. Every backend records its owner with each workspace (an owner file, a
//! cgroup's name, a container's label); the sweep removes what belongs to an owner that is gone
//! and never what belongs to a live one.

use std::sync::OnceLock;

/// How often a backend sweeps for what ended owners left behind, unless configured otherwise.
pub const DEFAULT_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(300);

/// A process: its PID, its start time in clock ticks after boot, and the boot it started in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    /// The process's PID.
    pub pid: u32,
    /// Its start time (clock ticks after boot).
    pub start: u64,
    /// The kernel's boot id at the time (`/proc/sys/kernel/random/boot_id`); empty where it
    /// cannot be read.
    #[serde(default)]
    pub boot: String,
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|text| text.trim().to_owned())
        .unwrap_or_default()
}

/// The start time of `pid`, unless it has ended (a zombie counts as ended).
fn start_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from its last `)`.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    if fields
        .first()
        .is_none_or(|state| *state == "Z" || *state == "X")
    {
        return None;
    }
    // `state` is field 3 of the file, `starttime` field 22.
    fields.get(19)?.parse().ok()
}

impl Owner {
    /// This process.
    #[must_use]
    pub fn current() -> Self {
        static CURRENT: OnceLock<Owner> = OnceLock::new();
        CURRENT
            .get_or_init(|| {
                let pid = std::process::id();
                Self {
                    pid,
                    start: start_of(pid).unwrap_or(0),
                    boot: boot_id(),
                }
            })
            .clone()
    }

    /// The process running now as `pid`, if any.
    #[must_use]
    pub fn of(pid: u32) -> Option<Self> {
        Some(Self {
            pid,
            start: start_of(pid)?,
            boot: boot_id(),
        })
    }

    /// Whether this process still runs: its PID is taken by a process that started when it
    /// did, in this boot. An owner recorded in another boot is gone.
    #[must_use]
    pub fn alive(&self) -> bool {
        if self == &Self::current() {
            return true;
        }
        if !self.boot.is_empty() && self.boot != boot_id() {
            return false;
        }
        start_of(self.pid) == Some(self.start)
    }

    /// The owner as a name prefix: `<pid>.<start>`.
    #[must_use]
    pub fn tag(&self) -> String {
        format!("{}.{}", self.pid, self.start)
    }

    /// Whether the owner a name starts with (`<pid>.<start>.` as [`Self::tag`] writes it, or
    /// an older `<pid>.` alone) is gone; `None` when the name starts with no owner.
    #[must_use]
    pub fn tag_is_gone(name: &str) -> Option<bool> {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let mut parts = name.splitn(3, '.');
        let pid: u32 = parts.next().filter(|p| digits(p))?.parse().ok()?;
        let second = parts.next()?;
        match (second, parts.next()) {
            (start, Some(_)) if digits(start) => {
                let start: u64 = start.parse().ok()?;
                Some(
                    !(Self {
                        pid,
                        start,
                        boot: String::new(),
                    })
                    .alive(),
                )
            }
            // `<pid>.<name>`: only the PID is known.
            _ => Some(pid != std::process::id() && !crate::cleanup::alive(pid)),
        }
    }
}

/// The owners recorded in an owner file: one JSON object a line. Unreadable lines are skipped.
#[must_use]
pub(crate) fn parse_records(text: &str) -> Vec<Owner> {
    text.lines()
        .filter_map(|line| serde_json::from_str(line.trim()).ok())
        .collect()
}

/// One owner file line for `owner`.
pub(crate) fn record_line(owner: &Owner) -> String {
    let mut line = serde_json::to_string(owner).unwrap_or_default();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = Owner::current();
        assert_eq!(me.pid, std::process::id());
        assert!(me.start > 0);
        assert!(me.alive());
        assert_eq!(Owner::of(me.pid), Some(me.clone()));
        let recycled = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!recycled.alive());
        let other_boot = Owner {
            boot: "another-boot".to_owned(),
            ..Owner::of(1).unwrap()
        };
        assert!(!other_boot.alive());
        assert!(Owner::of(1).unwrap().alive());
        assert!(Owner::of(4_194_305).is_none());
    }

    #[test]
    fn tags_name_their_owner() {
        let me = Owner::current();
        assert_eq!(
            Owner::tag_is_gone(&format!("{}.asw-x", me.tag())),
            Some(false)
        );
        assert_eq!(
            Owner::tag_is_gone(&format!("{}.{}.asw-x", me.pid, me.start + 1)),
            Some(true)
        );
        assert_eq!(Owner::tag_is_gone("4194305.asw-x"), Some(true));
        assert_eq!(Owner::tag_is_gone("1.asw-x"), Some(false));
        assert_eq!(Owner::tag_is_gone("asw-x"), None);
        assert_eq!(Owner::tag_is_gone("12a.asw"), None);
    }

    #[test]
    fn records_round_trip_and_skip_garbage() {
        let me = Owner::current();
        let text = format!("{}garbage\n{}", record_line(&me), record_line(&me));
        assert_eq!(parse_records(&text), vec![me.clone(), me]);
    }
}
