//! Killing a turn's processes: the group, every descendant and the cgroup, the grace between
//! SIGTERM and SIGKILL, and the crash sweep's [`kill_leftover`]. The signals and the
//! descendant walk themselves are `signal.rs`'s; `/proc` is read through `procfs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::{Pid, getpgid};
use tokio::process::Child;

use super::cgroup::{CGROUP_PREFIX, TurnCgroup};
use super::signal::{descendants, signal_group, signal_pid};

/// Kills a process's group and descendants when the future that owns it is dropped early.
pub(super) struct KillGuard {
    pid: Option<i32>,
}

impl KillGuard {
    pub(super) fn new(pid: Option<i32>) -> Self {
        KillGuard { pid }
    }

    /// The process ended normally and was reaped: nothing to kill on drop.
    pub(super) fn disarm(&mut self) {
        self.pid = None;
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            kill_tree(pid);
        }
    }
}

/// The start time of a process in clock ticks since boot (/proc/PID/stat field 22).
pub fn start_ticks(pid: i32) -> Option<u64> {
    Some(
        procfs::process::Process::new(pid)
            .ok()?
            .stat()
            .ok()?
            .starttime,
    )
}

/// A stable hash of a program and its argv (FNV-1a; not for security, for recognition).
pub fn argv_hash(program: &Path, args: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes.iter().chain(std::iter::once(&0u8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(program.as_os_str().as_encoded_bytes());
    for a in args {
        eat(a.as_bytes());
    }
    h
}

/// After a crash of the server: kill a recorded turn's processes if they are still that turn
/// (same pid, same start time, same argv), and its cgroup. Returns whether anything was killed.
pub fn kill_leftover(pid: i32, start: u64, hash: u64, cgroup: Option<&Path>) -> bool {
    let mut killed = false;
    if let Some(dir) = cgroup
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(CGROUP_PREFIX))
        && dir.exists()
    {
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        let deadline = Instant::now() + Duration::from_secs(1);
        while std::fs::remove_dir(dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        killed = true;
    }
    let still_ours = start_ticks(pid) == Some(start)
        && procfs::process::Process::new(pid)
            .and_then(|p| p.cmdline())
            .is_ok_and(|argv| {
                argv.split_first()
                    .is_some_and(|(program, args)| argv_hash(&PathBuf::from(program), args) == hash)
            });
    if still_ours {
        kill_tree(pid);
        killed = true;
    }
    killed
}

/// SIGTERM the group (and the cgroup), wait up to `grace`, then SIGKILL everything. Returns
/// the exit code, if the process exited with one.
pub(super) async fn terminate(
    child: &mut Child,
    pid: Option<i32>,
    cgroup: Option<&TurnCgroup>,
    grace: Duration,
) -> Option<i32> {
    if let Some(pid) = pid {
        signal_group(pid, Signal::SIGTERM);
        if let Some(cg) = cgroup {
            cg.signal_all(Signal::SIGTERM);
        }
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => {
            if let Some(pid) = pid {
                kill_tree(pid);
            }
            if let Some(cg) = cgroup {
                cg.kill();
            }
            let _ = child.start_kill();
            child.wait().await.ok().and_then(|s| s.code())
        }
    }
}

/// After codex exited: kill what is left of its group, its descendants and its cgroup.
pub(super) async fn reap_leftovers(pid: Option<i32>, cgroup: Option<&TurnCgroup>) {
    // Without a cgroup the group kill is the only way to reach what is left of codex's group.
    // It runs after codex was reaped, so the group id could in theory name a new group if
    // every member had exited and the pid been reused in between; with a cgroup it is not
    // needed, and skipped.
    if let (Some(pid), None) = (pid, cgroup) {
        signal_group(pid, Signal::SIGKILL);
    }
    if let Some(cg) = cgroup {
        cg.kill();
        let deadline = Instant::now() + Duration::from_secs(2);
        while !cg.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Kill codex's group and every descendant's group, stopping them first so none can fork a
/// new one in between (tool commands run in sessions of their own).
pub(super) fn kill_tree(root: i32) {
    let mut seen: Vec<i32> = vec![];
    for _ in 0..8 {
        let found: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !seen.contains(p))
            .collect();
        if found.is_empty() {
            break;
        }
        for p in &found {
            signal_pid(*p, Signal::SIGSTOP);
        }
        seen.extend(found);
    }
    signal_group(root, Signal::SIGKILL);
    let own_group = getpgid(None).ok();
    for p in seen {
        if let Ok(pgid) = getpgid(Some(Pid::from_raw(p)))
            && Some(pgid) != own_group
        {
            signal_group(pgid.as_raw(), Signal::SIGKILL);
        }
        signal_pid(p, Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_start_time_and_a_child_are_read_from_proc() {
        let me = std::process::id() as i32;
        assert!(start_ticks(me).is_some_and(|t| t > 0));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(descendants(me).contains(&pid));
        signal_pid(pid, Signal::SIGKILL);
        child.wait().unwrap();
    }

    #[test]
    fn argv_hash_separates_arguments() {
        let p = Path::new("/bin/x");
        assert_ne!(
            argv_hash(p, &["ab".into(), "c".into()]),
            argv_hash(p, &["a".into(), "bc".into()])
        );
    }
}
