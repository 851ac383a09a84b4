//! Signals to one process or a process group (through `nix`, never pid or group 0 or 1), and
//! the walk of a process's descendants through `/proc` (`procfs`). A leaf of the process layer:
//! `kill.rs` and `cgroup.rs` both build on it.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Signal a process group (never group 0 or 1: that would be ourselves or init's).
pub(super) fn signal_group(pgid: i32, sig: Signal) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), sig);
    }
}

/// Signal one process (never pid 0 or 1).
pub(super) fn signal_pid(pid: i32, sig: Signal) {
    if pid > 1 {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// Every live descendant of `root`, from /proc.
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return vec![];
    };
    let parent_of: Vec<(i32, i32)> = all
        .flatten()
        .filter_map(|p| p.stat().ok())
        .map(|s| (s.pid, s.ppid))
        .collect();
    let mut out = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, parent) in &parent_of {
            if *parent == p && !out.contains(child) {
                out.push(*child);
                frontier.push(*child);
            }
        }
    }
    out
}
