//! The only module that spawns a process: one codex turn from [`SpawnSpec`] to [`TurnOutcome`]
//! ([`run`]), and the short codex commands ([`run_command`]: the version probe, thread
//! deletion).
//!
//! - Spawned from one long-lived spawner thread (so `PR_SET_PDEATHSIG`, which fires when the
//!   *thread* that forked the child exits, fires only when the server dies), with an argv array
//!   (no shell), the allowlisted environment, the confined cwd (checked again right before the
//!   spawn), a process group of its own, a parent-death signal, `kill_on_drop`, and, where the
//!   machine allows it, a cgroup v2 of its own so that every descendant can be killed, including
//!   tool commands codex starts in sessions of their own and their orphans.
//! - stdin is null or written in full and closed (codex reads stdin to EOF before it starts);
//!   stdout and stderr are always piped: stdout is our MCP channel.
//! - stdout is read as JSONL with a line cap (an over-long line is skipped and counted, and
//!   reading goes on) and a total cap (past it the turn is stopped); stderr keeps a bounded tail.
//! - Timeout: SIGTERM to the group, SIGKILL after a grace period; cancellation does the same
//!   with a short grace. Every ending kills whatever is left of the turn's processes.
//! - Every string in the outcome is redacted.
//!
//! Modules: [`spawn`] (the spawner thread, containment of each child), `kill` (signals, the
//! descendant walk, the crash sweep), `cgroup` (cgroup v2 containment), `read` (the JSONL read
//! loop, the stderr tail), `outcome` (judging a finished turn), `command` (short commands),
//! [`git`] (the git the server runs itself, which runs no program a repository configures).

mod cgroup;
mod command;
pub mod error;
pub(crate) mod freeze;
pub mod git;
mod holders;
mod kill;
mod outcome;
mod read;
mod server;
mod signal;
mod spawn;
pub mod turn;

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

pub use crate::codex::app_server::conversation::{Steer, ThreadWanted, TurnControl};
pub use cgroup::{CGROUP_PREFIX, containment};
pub use command::{CodexCommand, CommandOutput, codex_version, run_command};
pub use error::ProcessError;
pub use holders::app_holding;
pub use kill::{argv_hash, kill_leftover, start_ticks};
pub use server::{APP_SERVER_REPLACEMENTS, WarmKey, WarmProcess, key_of};
pub use signal::descendants;
pub use spawn::{Detached, keep_memory_private, start_detached};
pub use turn::{
    CANCEL_GRACE, Containment, Ending, ExecExit, Limits, RunOptions, SpawnHook, SpawnInfo,
    TIMEOUT_GRACE, TurnOutcome,
};

use crate::codex::argv::SpawnSpec;
use crate::codex::events::{Event, Transcript};
use crate::confine;
use cgroup::{TurnCgroup, move_into_cgroup};
use kill::{KillGuard, reap_leftovers, terminate};
use outcome::{finish, judge};
use read::{STDERR_REDACTION_MARGIN, Stops, read_events, read_tail};

/// What the process layer returns: its own error, never the crate's.
type Result<T, E = ProcessError> = std::result::Result<T, E>;

/// Run one codex turn. `on_event` sees every parsed event as it arrives (progress, actors).
/// Errors only when nothing could be started (codex missing, a path that changed); every
/// ending after the spawn is a [`TurnOutcome`].
pub async fn run(
    mut spec: SpawnSpec,
    opts: RunOptions,
    mut on_event: impl FnMut(&Event) + Send,
) -> Result<TurnOutcome> {
    let started = Instant::now();
    confine::recheck(spec.cwd())?;
    for c in spec.checked() {
        confine::recheck(c)?;
    }
    let cgroup = TurnCgroup::create();
    let mut child = spawn_turn(&spec, cgroup.as_ref()).await?;
    let pid = child.id().map(|p| p as i32);
    // Whatever happens to this future from here (an abort, a panic upstream), the turn's
    // processes die with it.
    let mut guard = KillGuard::new(pid);
    tracing::debug!(pid, kind = ?spec.kind(), sandbox = spec.sandbox().as_arg(), "codex spawned");
    announce(&spec, &opts, pid, cgroup.as_ref());
    // the prompt's bytes move to the writer: no copy (see `argv::build_turn`)
    let prompt = spec.take_stdin();
    let (stdout, stderr) = start_io(&mut child, prompt, cgroup.as_ref(), pid)?;
    // more than the tail is read, so that the tail is redacted with what precedes it
    let stderr_task = tokio::spawn(read_tail(
        stderr,
        opts.limits.stderr_tail_bytes + STDERR_REDACTION_MARGIN,
    ));

    let stops = Stops {
        cancel: &opts.cancel,
        deadline: tokio::time::Instant::now() + opts.timeout,
        timeout: opts.timeout,
    };
    let mut transcript = Transcript::default();
    let stopped = read_events(stdout, &opts.limits, &stops, &mut transcript, &mut on_event).await;
    let (ending, exit_code) =
        settle(&mut child, pid, cgroup.as_ref(), stopped, &stops, &opts).await;
    // Whatever the ending: nothing of this turn outlives it.
    reap_leftovers(pid, cgroup.as_ref()).await;
    guard.disarm();
    drop(cgroup);

    let stderr_tail = collect_stderr(stderr_task, &opts).await;
    let ending =
        ending.unwrap_or_else(|| judge(&transcript, exit_code, &stderr_tail, &opts.secrets));
    let exec = ExecExit {
        exit_code,
        stderr_tail,
    };
    let outcome = finish(
        ending,
        transcript,
        &opts,
        started.elapsed(),
        Some(exec),
        containment(),
    );
    if let Ending::Failed { kind, .. } = &outcome.ending {
        tracing::info!(kind = %kind, exit_code, "codex turn failed");
    }
    Ok(outcome)
}

/// Spawn a turn's codex: argv array, exactly the spec's environment, the confined cwd, and the
/// containment of every child ([`spawn::contain`]).
async fn spawn_turn(spec: &SpawnSpec, cgroup: Option<&TurnCgroup>) -> Result<Child> {
    let mut cmd = Command::new(spec.program());
    cmd.args(spec.args())
        .env_clear()
        .envs(spec.env().iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd().path())
        // piped when there is a prompt, or a cgroup to move codex into before it starts
        .stdin(if spec.stdin().is_some() || cgroup.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn::contain(&mut cmd);
    spawn::spawn(cmd, spec.program()).await
}

/// Tell [`RunOptions::on_spawn`] what identifies the running codex (for crash recovery).
fn announce(spec: &SpawnSpec, opts: &RunOptions, pid: Option<i32>, cgroup: Option<&TurnCgroup>) {
    if let (Some(hook), Some(pid)) = (&opts.on_spawn, pid) {
        hook(&SpawnInfo {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
            argv_hash: argv_hash(spec.program(), spec.args()),
            cgroup: cgroup.map(|c| c.dir.clone()),
        });
    }
}

/// Start feeding stdin (`prompt`, moved into the writing task) and hand back stdout and stderr.
///
/// Codex reads stdin to EOF before it does anything, so it waits there while it is moved
/// into the turn's cgroup (moving a process costs the kernel an RCU grace period, ~10-15 ms:
/// done here, it overlaps codex's own start-up instead of delaying the exec). Then stdin is
/// written in full and closed.
fn start_io(
    child: &mut Child,
    prompt: Option<Vec<u8>>,
    cgroup: Option<&TurnCgroup>,
    pid: Option<i32>,
) -> Result<(ChildStdout, ChildStderr)> {
    let mover = cgroup.and_then(|c| c.procs.try_clone().ok()).zip(pid);
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            if let Some((fd, pid)) = mover {
                let _ = tokio::task::spawn_blocking(move || move_into_cgroup(fd, pid)).await;
            }
            if let Some(bytes) = prompt {
                let _ = stdin.write_all(&bytes).await;
            }
            let _ = stdin.shutdown().await;
        });
    }
    let stdout = child
        .stdout
        .take()
        .ok_or(ProcessError::NotPiped("output"))?;
    let stderr = child
        .stderr
        .take()
        .ok_or(ProcessError::NotPiped("error output"))?;
    Ok((stdout, stderr))
}

/// After reading stopped: when stdout closed (`stopped` is `None`), wait for codex to exit,
/// but not past the deadline or a cancel; when the turn was stopped, or the wait was, end it
/// with the matching grace. Returns the ending decided here, if any, and the exit code.
async fn settle(
    child: &mut Child,
    pid: Option<i32>,
    cgroup: Option<&TurnCgroup>,
    stopped: Option<Ending>,
    stops: &Stops<'_>,
    opts: &RunOptions,
) -> (Option<Ending>, Option<i32>) {
    let ending = match stopped {
        Some(ending) => ending,
        None => {
            let waited = tokio::select! {
                biased;
                _ = stops.cancel.cancelled() => Err(Ending::Cancelled),
                _ = tokio::time::sleep_until(stops.deadline) => {
                    Err(Ending::TimedOut { after: stops.timeout })
                }
                status = child.wait() => Ok(status),
            };
            match waited {
                Ok(status) => return (None, status.ok().and_then(|s| s.code())),
                Err(ending) => ending,
            }
        }
    };
    let grace = match ending {
        Ending::Cancelled => opts.cancel_grace,
        _ => opts.timeout_grace,
    };
    let code = terminate(child, pid, cgroup, grace).await;
    (Some(ending), code)
}

/// The redacted stderr tail. A descendant that escaped every kill could hold stderr open:
/// never wait on it for long.
async fn collect_stderr(task: tokio::task::JoinHandle<String>, opts: &RunOptions) -> String {
    let abort = task.abort_handle();
    let tail = match tokio::time::timeout(Duration::from_secs(2), task).await {
        Ok(t) => t.unwrap_or_default(),
        Err(_) => {
            abort.abort();
            String::new()
        }
    };
    opts.secrets
        .redact_tail(&tail, opts.limits.stderr_tail_bytes)
}
