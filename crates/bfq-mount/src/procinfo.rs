//! What /proc and `ioprio_get` say about the process behind a request.

use bfq_engine::IoClass;
use std::fs;

/// A process as the flow table keys it: thread group id and start time
/// (so a reused pid is a new process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcKey {
    /// Thread group id (the process id).
    pub tgid: u32,
    /// Start time of the process, clock ticks since boot (/proc/PID/stat field 22).
    pub start: u64,
}

/// The thread group of thread `tid` and its start time, or `None` if the
/// thread is gone.
pub fn proc_key(tid: u32) -> Option<ProcKey> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())?;
    Some(ProcKey {
        tgid,
        start: start_time(tgid)?,
    })
}

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_start(&stat)
}

/// The start time from a /proc/PID/stat line (the command name in
/// parentheses may itself hold spaces and parentheses).
pub fn parse_stat_start(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ")": field 3 (state) is the first; start time is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process is still the one we keyed.
pub fn alive(k: ProcKey) -> bool {
    start_time(k.tgid) == Some(k.start)
}

/// The process's cgroup path: the v2 entry (`0::/path`) if there is one,
/// else the first v1 hierarchy's.
pub fn cgroup(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()
        .and_then(|t| parse_cgroup(&t))
        .unwrap_or_else(|| "/".into())
}

/// Parses /proc/PID/cgroup.
pub fn parse_cgroup(text: &str) -> Option<String> {
    let mut first = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, _ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
        if id == "0" {
            return Some(path.to_string());
        }
        first.get_or_insert_with(|| path.to_string());
    }
    first
}

/// The file name of the process's executable (its `comm` if the link
/// cannot be read).
pub fn exe_name(pid: u32) -> String {
    if let Ok(p) = fs::read_link(format!("/proc/{pid}/exe")) {
        if let Some(n) = p.file_name() {
            return n
                .to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_string();
        }
    }
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_SHIFT: u32 = 13;

/// The thread's I/O class and level as the kernel would use them:
/// `ioprio_get`, and for "none" (never set) best effort with the level
/// from the nice value, (nice + 20) / 5, as the kernel's `task_nice_ioprio`.
pub fn io_priority(tid: u32) -> (IoClass, u8) {
    // SAFETY: plain syscall with integer arguments.
    let v = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid as libc::c_int) };
    if v >= 0 {
        if let Some(p) = decode_ioprio(v as u32) {
            return p;
        }
    }
    (IoClass::Be, nice_level(tid))
}

/// Decodes an ioprio value; `None` for class "none".
pub fn decode_ioprio(v: u32) -> Option<(IoClass, u8)> {
    let level = (v & 7) as u8;
    match v >> IOPRIO_CLASS_SHIFT {
        1 => Some((IoClass::Rt, level)),
        2 => Some((IoClass::Be, level)),
        3 => Some((IoClass::Idle, 7)),
        _ => None,
    }
}

fn nice_level(tid: u32) -> u8 {
    // SAFETY: plain syscall; errno is cleared first since -1 is a valid nice.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    };
    ((nice.clamp(-20, 19) + 20) / 5) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_start_time_survives_odd_names() {
        let line =
            "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat_start(line), Some(987654));
        let me = std::process::id();
        assert!(start_time(me).is_some());
        let k = proc_key(me).unwrap();
        assert_eq!(k.tgid, me);
        assert!(alive(k));
    }

    #[test]
    fn cgroup_v2_entry_wins_over_v1() {
        assert_eq!(
            parse_cgroup("12:blkio:/a\n0::/user.slice/x.scope\n").as_deref(),
            Some("/user.slice/x.scope")
        );
        assert_eq!(
            parse_cgroup("3:cpu:/b\n2:blkio:/c\n").as_deref(),
            Some("/b")
        );
    }

    #[test]
    fn ioprio_classes() {
        assert_eq!(decode_ioprio((2 << 13) | 3), Some((IoClass::Be, 3)));
        assert_eq!(decode_ioprio(1 << 13), Some((IoClass::Rt, 0)));
        assert_eq!(decode_ioprio(3 << 13), Some((IoClass::Idle, 7)));
        assert_eq!(decode_ioprio(4), None);
        let (c, l) = io_priority(std::process::id());
        assert!(l <= 7, "{c:?} {l}");
    }
}
