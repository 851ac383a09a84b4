//! Holding every other process of this server still while codex applies a file change a person
//! accepted: the window between the bridge's last look at the paths and codex's write.
//!
//! A file change is bound to its paths as the person saw them: they are resolved again when the
//! answer arrives, and a change that would now land elsewhere is declined. That check means
//! something only if nothing can move a directory between it and codex's write. The processes
//! that could are this server's other descendants: another session's codex, its commands and
//! background terminals (a hostile model in another session can swap a directory for a
//! symbolic link in a tight loop, from inside its own sandbox, since the directory is in its
//! workspace), and commands left running by the asking app-server itself. So every one of them
//! is stopped (SIGSTOP) before the check, and continued (SIGCONT) once codex reports the change
//! done or a short bound passed. Only the asking app-server keeps running (what it starts after
//! the freeze, such as its patch helper, is new and not stopped).
//!
//! Which processes: the descendants of this server (through `/proc`) and every member of this
//! server's turn cgroups (a command that left its process tree stays in its cgroup), read again
//! until a round finds nothing new (a fork in flight when a parent was read shows up in the
//! next), at least twice. A process already stopped is left as it is (and not continued). No
//! process of this server is spawned while a freeze is held ([`WINDOW`]), and freezes come one
//! at a time (two sessions' accepts would otherwise stop each other's app-server).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::signal::{descendants, signal_pid};

/// Held for writing through a freeze's whole window (which also makes freezes one at a time),
/// for reading by every spawn: no process of this server starts while one is frozen.
pub(crate) static WINDOW: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// How long the stops may take to land (a process in an uninterruptible call stops when it
/// returns) before the freeze goes on without that one.
const STOP_LANDING: Duration = Duration::from_millis(200);
/// Most rounds of reading the processes again.
const MAX_ROUNDS: usize = 8;

/// Processes stopped by [`Frozen::others`]; continued on [`Frozen::thaw`] or when dropped.
#[derive(Debug)]
pub(crate) struct Frozen {
    stopped: Vec<i32>,
    /// Every process found was stopped, and no new one appeared in the last round.
    complete: bool,
}

impl Frozen {
    /// Stop every process of this server (its descendants and its turn cgroups' members) but
    /// `spare` and this process, and wait (bounded) until each is stopped.
    pub(crate) fn others(spare: i32) -> Frozen {
        let me = std::process::id() as i32;
        let mut frozen = Frozen {
            stopped: vec![],
            complete: false,
        };
        let mut seen: BTreeSet<i32> = BTreeSet::new();
        for round in 0..MAX_ROUNDS {
            let mut found: BTreeSet<i32> = descendants(me).into_iter().collect();
            found.extend(super::cgroup::server_members());
            let new: Vec<i32> = found
                .into_iter()
                .filter(|p| *p != me && *p != spare && seen.insert(*p))
                .collect();
            if new.is_empty() && round >= 1 {
                frozen.complete = true;
                break;
            }
            for p in new {
                if !stopped_already(p) {
                    signal_pid(p, Signal::SIGSTOP);
                    frozen.stopped.push(p);
                }
            }
        }
        frozen.complete &= frozen.wait_landed();
        frozen
    }

    /// Whether the freeze is known whole: the search settled (a round found no new process)
    /// and every process it stopped is stopped (or gone). A freeze that is not whole (a
    /// process that keeps starting others, a stop that did not land) decides nothing: the
    /// accept it guards is declined.
    pub(crate) fn complete(&self) -> bool {
        self.complete
    }

    /// The processes this freeze stopped.
    pub(crate) fn stopped(&self) -> &[i32] {
        &self.stopped
    }

    /// Wait until every stopped process is in the stopped state (or gone), at most
    /// [`STOP_LANDING`].
    /// Whether they all landed in time.
    fn wait_landed(&self) -> bool {
        let until = Instant::now() + STOP_LANDING;
        loop {
            if self.stopped.iter().all(|p| stopped_already(*p)) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Continue every process it stopped.
    pub(crate) fn thaw(mut self) {
        self.continue_all();
    }

    fn continue_all(&mut self) {
        for p in self.stopped.drain(..) {
            signal_pid(p, Signal::SIGCONT);
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.continue_all();
    }
}

/// Whether `pid` is stopped (or traced), a zombie, or gone: nothing it does can change a path.
fn stopped_already(pid: i32) -> bool {
    match procfs::process::Process::new(pid).and_then(|p| p.stat()) {
        Ok(s) => matches!(s.state, 'T' | 't' | 'Z' | 'X'),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A freeze stops every child of the test process: one test at a time.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn state(pid: i32) -> char {
        procfs::process::Process::new(pid)
            .unwrap()
            .stat()
            .unwrap()
            .state
    }

    /// The state of `pid` once it is `want`, or what it is after a second.
    fn settles(pid: i32, want: char) -> char {
        let until = Instant::now() + Duration::from_secs(1);
        loop {
            let s = state(pid);
            if s == want || Instant::now() > until {
                return s;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_child_is_stopped_while_frozen_and_runs_again_after_and_the_spared_one_runs_throughout() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut a = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut b = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let (pa, pb) = (a.id() as i32, b.id() as i32);
        let frozen = Frozen::others(pb);
        assert!(frozen.complete(), "{frozen:?}");
        assert!(frozen.stopped().contains(&pa), "{frozen:?}");
        assert!(!frozen.stopped().contains(&pb), "{frozen:?}");
        assert_eq!(state(pa), 'T');
        assert_eq!(state(pb), 'S');
        frozen.thaw();
        assert_eq!(settles(pa, 'S'), 'S');

        // dropped without a thaw (an early return, a panic): continued all the same
        let frozen = Frozen::others(pb);
        assert_eq!(state(pa), 'T');
        drop(frozen);
        assert_eq!(settles(pa, 'S'), 'S');
        for c in [&mut a, &mut b] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[test]
    fn a_process_stopped_before_the_freeze_is_not_continued_by_it() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut a = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pa = a.id() as i32;
        signal_pid(pa, Signal::SIGSTOP);
        assert_eq!(settles(pa, 'T'), 'T');
        let frozen = Frozen::others(0);
        assert!(!frozen.stopped().contains(&pa));
        frozen.thaw();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(state(pa), 'T');
        let _ = a.kill();
        let _ = a.wait();
    }
}
