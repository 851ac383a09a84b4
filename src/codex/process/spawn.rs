//! Starting a process: every codex child is forked by one long-lived spawner thread, into a
//! process group of its own, with a parent-death signal, `kill_on_drop`, an empty environment
//! plus the given one, and piped (never inherited) stdout and stderr: our stdout is the MCP
//! channel.

use std::io;
use std::path::Path;
use std::sync::OnceLock;

use nix::sys::signal::Signal;
use nix::unistd::{Pid, getppid};
use tokio::process::{Child, Command};

use super::error::ProcessError;

type SpawnJob = (
    tokio::runtime::Handle,
    Command,
    tokio::sync::oneshot::Sender<io::Result<Child>>,
);

/// The long-lived spawner thread's queue.
///
/// Why a thread of its own: `PR_SET_PDEATHSIG` fires when the *thread* that forked the child
/// exits, not the process. Forked from a tokio worker (which the runtime may retire at any
/// time), a child would be killed when that worker exits; forked from this thread, which lives
/// as long as the server, it is killed only when the server dies.
fn spawner() -> &'static std::sync::mpsc::Sender<SpawnJob> {
    static SPAWNER: OnceLock<std::sync::mpsc::Sender<SpawnJob>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("codex-spawner".into())
            .spawn(move || {
                // lives as long as the process: PR_SET_PDEATHSIG follows this thread
                while let Ok((handle, mut cmd, reply)) = rx.recv() {
                    let _guard = handle.enter();
                    let _ = reply.send(cmd.spawn());
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!(error = %e, "could not start the spawner thread"));
        tx
    })
}

/// Make this process's memory and environment unreadable to the other processes of its user
/// (`PR_SET_DUMPABLE` 0): `/proc/PID/environ`, `mem`, `maps` and ptrace become open only to
/// a process with `CAP_SYS_PTRACE`. What codex runs outside its sandbox (an operator-allowed
/// `danger-full-access` turn, a command a person approved) runs as the server's user, and
/// would otherwise read every secret the environment allowlist keeps from codex, and the
/// server's heap. A child is unaffected: `execve` makes a process dumpable again, so codex
/// itself (whose own environment holds the key it needs) stays as readable as it always is.
/// Process-wide: called once, by the executable, before any thread starts.
pub fn keep_memory_private() -> io::Result<()> {
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::from)?;
    match nix::sys::prctl::get_dumpable() {
        Ok(false) => Ok(()),
        Ok(true) => Err(io::Error::other("the process is still dumpable")),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Give `cmd` a process group of its own, `kill_on_drop` and a parent-death signal (SIGKILL
/// when the server dies, even by SIGKILL).
pub(super) fn contain(cmd: &mut Command) {
    cmd.kill_on_drop(true).process_group(0);
    let parent = Pid::this();
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed: it makes two raw syscalls through nix (prctl, getppid), which neither
    // allocate nor take locks, on a value (`parent`) prepared before the fork; its errors are
    // bare errno values (no allocation).
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // the server may have died between fork and prctl: then nothing would kill us
            if getppid() != parent {
                return Err(io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}

/// Spawn `cmd` (already [`contain`]ed) on the spawner thread, once no freeze window is open
/// (`freeze::WINDOW`). `program` is for the error.
pub(super) async fn spawn(cmd: Command, program: &Path) -> Result<Child, ProcessError> {
    // no process starts while a file change a person accepted is being applied
    let _window = super::freeze::WINDOW.read().await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    spawner()
        .send((tokio::runtime::Handle::current(), cmd, tx))
        .map_err(|_| ProcessError::SpawnerGone)?;
    let res = rx.await.map_err(|_| ProcessError::SpawnerGone)?;
    res.map_err(|e| ProcessError::from_spawn(program, e))
}

/// Start the store's owner daemon: `program args` in a session of its own (`setsid`: no
/// terminal, outside the host's process group, so neither the host's signals to its child nor
/// a terminal's hang-up reach it), no parent-death signal (it is meant to outlive this
/// process), stdin a pipe that carries `input` and then closes, stdout null (ours is the MCP
/// channel), stderr `log` (a file of its own), no other descriptor of this process's, and only
/// `vars` in its environment. On the spawner thread, like every child. The returned child is
/// reaped by tokio once dropped.
pub async fn start_detached(
    program: &Path,
    args: &[&str],
    vars: &[(String, String)],
    input: Vec<u8>,
    log: std::fs::File,
) -> Result<Detached, ProcessError> {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(false);
    // SAFETY: setsid and close_range are raw syscalls, async-signal-safe, with no allocation;
    // they run after the child's stdio is in place (0, 1, 2), so only what the host left open
    // without close-on-exec is touched
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(io::Error::from)?;
            // nothing of the host's (a pipe it holds, say) is held open by the daemon: every
            // descriptor above stderr is marked close-on-exec (Linux 5.11), so the exec closes
            // them and std's own error pipe still reports a failed exec; before 5.11 they are
            // closed here (5.9)
            let (first, last) = (3u32, u32::MAX);
            if libc::syscall(
                libc::SYS_close_range,
                first,
                last,
                libc::CLOSE_RANGE_CLOEXEC,
            ) != 0
            {
                libc::syscall(libc::SYS_close_range, first, last, 0u32);
            }
            Ok(())
        });
    }
    let mut child = spawn(cmd, program).await?;
    if let Some(mut stdin) = child.stdin.take() {
        // the daemon reads one line and closes: a failure here shows as a daemon that exits
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    }
    Ok(Detached(child))
}

/// A process started by [`start_detached`]: never killed by this one.
pub struct Detached(Child);

impl Detached {
    /// Its pid.
    pub fn id(&self) -> Option<u32> {
        self.0.id()
    }

    /// Whether it has exited (and so was reaped): `Some(true)` with success.
    pub fn exited(&mut self) -> Option<bool> {
        match self.0.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.success()),
            Err(_) => Some(false),
        }
    }
}
