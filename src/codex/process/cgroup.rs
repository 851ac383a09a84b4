//! cgroup v2 containment: where the machine lets the server make child cgroups, every turn runs
//! in one of its own, so that every descendant (including tool commands in sessions of their
//! own, and their orphans) is killed at the end through `cgroup.kill`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::signal::{descendants, signal_pid};
use super::turn::Containment;

/// A cgroup v2 directory for one turn; removed on drop.
pub(super) struct TurnCgroup {
    pub(super) dir: PathBuf,
    pub(super) procs: OwnedFd,
}

static TURN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Prefix of every cgroup the bridge creates: `codex-mcp-bridge.<server pid>.<n>`.
pub const CGROUP_PREFIX: &str = "codex-mcp-bridge.";

/// The directory under which turn cgroups are made: our own cgroup v2, when writable.
fn cgroup_base() -> Option<&'static PathBuf> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(|| {
        let base = find_cgroup_base()?;
        // probe: can we make and remove a child?
        let probe = base.join(format!("{CGROUP_PREFIX}{}.probe", std::process::id()));
        std::fs::create_dir(&probe).ok()?;
        let ok = probe.join("cgroup.kill").exists();
        let _ = std::fs::remove_dir(&probe);
        if !ok {
            return None;
        }
        cleanup_stale_cgroups(&base);
        Some(base)
    })
    .as_ref()
}

/// Our own cgroup v2 directory: the cgroup2 mount joined with our path in the unified
/// hierarchy (hierarchy 0 of /proc/self/cgroup).
fn find_cgroup_base() -> Option<PathBuf> {
    let me = procfs::process::Process::myself().ok()?;
    let mount = me
        .mountinfo()
        .ok()?
        .0
        .into_iter()
        .find(|m| m.fs_type == "cgroup2")?
        .mount_point;
    let own = me
        .cgroups()
        .ok()?
        .0
        .into_iter()
        .find(|c| c.hierarchy == 0)?;
    Some(mount.join(own.pathname.trim_start_matches('/')))
}

/// Kill and remove cgroups left by servers that died (SIGKILL) with turns in flight.
fn cleanup_stale_cgroups(base: &Path) {
    let Ok(dir) = std::fs::read_dir(base) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(CGROUP_PREFIX)) else {
            continue;
        };
        let Some(owner) = rest.split('.').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let alive =
            owner == std::process::id() as i32 || Path::new(&format!("/proc/{owner}")).exists();
        if !alive {
            let _ = std::fs::write(e.path().join("cgroup.kill"), "1");
            let deadline = Instant::now() + Duration::from_secs(1);
            while std::fs::remove_dir(e.path()).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            tracing::info!(cgroup = %e.path().display(), "removed a cgroup left by a server that died");
        }
    }
}

impl TurnCgroup {
    pub(super) fn create() -> Option<TurnCgroup> {
        let base = cgroup_base()?;
        let n = TURN_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{CGROUP_PREFIX}{}.{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .ok()?;
        Some(TurnCgroup {
            dir,
            procs: procs.into(),
        })
    }

    pub(super) fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pids().is_empty()
    }

    pub(super) fn signal_all(&self, sig: Signal) {
        for p in self.pids() {
            signal_pid(p, sig);
        }
    }

    pub(super) fn kill(&self) {
        if std::fs::write(self.dir.join("cgroup.kill"), "1").is_err() {
            self.signal_all(Signal::SIGKILL);
        }
    }
}

impl Drop for TurnCgroup {
    fn drop(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_millis(500);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Move codex (and anything it already started) into the turn's cgroup: one pid per write.
/// Failure is not fatal: the process group still contains codex itself.
pub(super) fn move_into_cgroup(fd: OwnedFd, pid: i32) {
    use std::io::Write;
    let mut procs = std::fs::File::from(fd);
    let _ = procs.write_all(pid.to_string().as_bytes());
    for d in descendants(pid) {
        let _ = procs.write_all(d.to_string().as_bytes());
    }
}

/// Every process in a turn cgroup of this server (none without cgroup containment).
pub(super) fn server_members() -> Vec<i32> {
    let Some(base) = cgroup_base() else {
        return vec![];
    };
    let own = format!("{CGROUP_PREFIX}{}.", std::process::id());
    let Ok(dir) = std::fs::read_dir(base) else {
        return vec![];
    };
    dir.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&own)))
        .filter_map(|e| std::fs::read_to_string(e.path().join("cgroup.procs")).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Is cgroup containment available on this machine (for `ping`/`doctor`)?
pub fn containment() -> Containment {
    if cgroup_base().is_some() {
        Containment::Cgroup
    } else {
        Containment::ProcessGroup
    }
}
