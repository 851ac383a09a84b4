//! The only module that spawns a process: one codex turn from [`SpawnSpec`] to [`TurnOutcome`].
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

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::process::{Child, Command};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

use crate::codex::argv::SpawnSpec;
use crate::codex::events::{
    CommandRun, Event, FailureKind, Transcript, Usage, classify, parse_line,
};
use crate::config::{Limits, NEWEST_TESTED_CODEX_VERSION};
use crate::confine;
use crate::error::{Error, Result};
use crate::security::ids::ThreadId;
use crate::security::redact::ClientSecrets;

/// Grace between SIGTERM and SIGKILL on a timeout (the security model's 5 s).
pub const TIMEOUT_GRACE: Duration = Duration::from_secs(5);
/// Grace on cancellation: short, so a cancelled call frees its slot well within 1 s.
pub const CANCEL_GRACE: Duration = Duration::from_millis(300);

/// How one turn runs.
#[derive(Clone)]
pub struct RunOptions {
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub limits: Limits,
    /// The thread's usage total before this turn (zero for a new thread), to compute the
    /// turn's own usage from codex's running total.
    pub prior_thread_usage: Usage,
    pub timeout_grace: Duration,
    pub cancel_grace: Duration,
    /// Called once codex runs, with what identifies its process (for crash recovery).
    pub on_spawn: Option<SpawnHook>,
    /// The asking client's own literal secrets, redacted from the outcome on top of the
    /// process-wide redactor (none for this process's own client).
    pub secrets: ClientSecrets,
}

/// Called once codex runs (see [`RunOptions::on_spawn`]).
pub type SpawnHook = std::sync::Arc<dyn Fn(&SpawnInfo) + Send + Sync>;

/// What identifies a running codex child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnInfo {
    pub pid: i32,
    /// /proc/PID/stat field 22: with the pid, identifies the process across pid reuse.
    pub start_ticks: u64,
    /// Hash of the argv, to recognise the process later from /proc/PID/cmdline.
    pub argv_hash: u64,
    pub cgroup: Option<PathBuf>,
}

impl RunOptions {
    /// Defaults for a turn with this timeout.
    pub fn new(timeout: Duration, limits: Limits) -> Self {
        RunOptions {
            timeout,
            cancel: CancellationToken::new(),
            limits,
            prior_thread_usage: Usage::default(),
            timeout_grace: TIMEOUT_GRACE,
            cancel_grace: CANCEL_GRACE,
            on_spawn: None,
            secrets: ClientSecrets::default(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Completed,
    Failed { kind: FailureKind, message: String },
    TimedOut { after: Duration },
    Cancelled,
    OutputCapExceeded { limit: usize },
}

/// For logs: `completed`, `failed (KIND): MESSAGE`, `timed out after Ns`, ….
impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Completed => f.write_str("completed"),
            Ending::Failed { kind, message } => write!(f, "failed ({kind}): {message}"),
            Ending::TimedOut { after } => write!(f, "timed out after {}s", after.as_secs()),
            Ending::Cancelled => f.write_str("cancelled"),
            Ending::OutputCapExceeded { limit } => {
                write!(f, "stopped at the output cap of {limit} bytes")
            }
        }
    }
}

/// What a turn produced, redacted. Present on every ending, so a timeout still carries the
/// partial answer.
#[derive(Debug, Clone, Default)]
pub struct TurnOutput {
    pub thread_id: Option<ThreadId>,
    /// The last agent message (the answer, or the partial answer).
    pub message: Option<String>,
    pub thread_usage: Option<Usage>,
    pub turn_usage: Option<Usage>,
    pub commands: Vec<CommandRun>,
    pub files_changed: Vec<String>,
    pub duration: Duration,
    pub exit_code: Option<i32>,
    pub stderr_tail: String,
    pub unknown_events: u64,
    pub malformed_lines: u64,
    pub retries: u64,
    /// Which containment the turn ran under.
    pub containment: Containment,
}

/// How the turn's processes were contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Containment {
    /// A cgroup v2 of its own: every descendant is killed at the end.
    Cgroup,
    /// The process group plus a walk of codex's descendants.
    #[default]
    ProcessGroup,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    pub ending: Ending,
    pub output: TurnOutput,
}

impl TurnOutcome {
    /// The output when the turn completed; otherwise the matching [`Error`], carrying the
    /// partial answer for a timeout or a cancellation.
    pub fn into_result(self) -> Result<TurnOutput> {
        match self.ending {
            Ending::Completed => Ok(self.output),
            Ending::Failed { kind, message } => Err(Error::Codex { kind, message }),
            Ending::TimedOut { after } => Err(Error::TimedOut {
                after,
                partial: self.output.message,
            }),
            Ending::Cancelled => Err(Error::Cancelled {
                partial: self.output.message,
            }),
            Ending::OutputCapExceeded { limit } => Err(Error::OutputCap {
                what: "output",
                limit,
            }),
        }
    }
}

/// Run one codex turn. `on_event` sees every parsed event as it arrives (progress, actors).
/// Errors only when nothing could be started (codex missing, a path that changed); every
/// ending after the spawn is a [`TurnOutcome`].
pub async fn run(
    spec: SpawnSpec,
    opts: RunOptions,
    mut on_event: impl FnMut(&Event) + Send,
) -> Result<TurnOutcome> {
    let started = Instant::now();
    confine::recheck(&spec.cwd)?;
    for c in &spec.checked {
        confine::recheck(c)?;
    }
    let cgroup = TurnCgroup::create();
    let mut child = spawn(&spec, cgroup.as_ref()).await?;
    let pid = child.id().map(|p| p as i32);
    // Whatever happens to this future from here (an abort, a panic upstream), the turn's
    // processes die with it.
    let mut guard = KillGuard { pid, armed: true };
    tracing::debug!(pid, kind = ?spec.kind, sandbox = spec.sandbox.as_arg(), "codex spawned");
    if let (Some(hook), Some(pid)) = (&opts.on_spawn, pid) {
        hook(&SpawnInfo {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
            argv_hash: argv_hash(&spec.program, &spec.args),
            cgroup: cgroup.as_ref().map(|c| c.dir.clone()),
        });
    }

    // Codex reads stdin to EOF before it does anything, so it waits there while it is moved
    // into the turn's cgroup (moving a process costs the kernel an RCU grace period, ~10-15 ms:
    // done here, it overlaps codex's own start-up instead of delaying the exec). Then stdin is
    // written in full and closed.
    let mover = cgroup
        .as_ref()
        .and_then(|c| c.procs.try_clone().ok())
        .zip(pid);
    if let Some(mut stdin) = child.stdin.take() {
        let bytes = spec.stdin.clone();
        tokio::spawn(async move {
            if let Some((fd, pid)) = mover {
                let _ = tokio::task::spawn_blocking(move || move_into_cgroup(fd, pid)).await;
            }
            if let Some(bytes) = bytes {
                let _ = stdin.write_all(&bytes).await;
            }
            let _ = stdin.shutdown().await;
        });
    }
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Error::io("reading codex's output")(io::Error::other("stdout not piped")))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| Error::io("reading codex's errors")(io::Error::other("stderr not piped")))?;
    // more than the tail is read, so that the tail is redacted with what precedes it
    let stderr_task = tokio::spawn(read_tail(
        stderr,
        opts.limits.stderr_tail_bytes + STDERR_REDACTION_MARGIN,
    ));

    let mut transcript = Transcript::default();
    let cap = opts.limits.max_output_bytes;
    let capped = Counted {
        inner: stdout.take(cap as u64 + 1),
        read: 0,
    };
    let mut lines = FramedRead::new(
        capped,
        LinesCodec::new_with_max_length(opts.limits.max_line_bytes),
    );
    let deadline = tokio::time::sleep(opts.timeout);
    tokio::pin!(deadline);

    let mut errored = false;
    let ending: Option<Ending> = loop {
        tokio::select! {
            biased;
            _ = opts.cancel.cancelled() => break Some(Ending::Cancelled),
            _ = &mut deadline => break Some(Ending::TimedOut { after: opts.timeout }),
            next = lines.next() => match next {
                Some(Ok(line)) => {
                    errored = false;
                    if lines.get_ref().read > cap {
                        break Some(Ending::OutputCapExceeded { limit: cap });
                    }
                    let parsed = parse_line(&line);
                    if let crate::codex::events::Parsed::Event(ev) = &parsed {
                        on_event(ev);
                    }
                    transcript.apply(&parsed);
                }
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                    // the codec discards up to the next newline; after this error it yields
                    // None once and then resumes
                    transcript.malformed_lines += 1;
                    errored = true;
                }
                Some(Err(LinesCodecError::Io(e))) => {
                    tracing::warn!(error = %e, "reading codex stdout failed");
                    break None;
                }
                None if lines.get_ref().read > cap => {
                    break Some(Ending::OutputCapExceeded { limit: cap });
                }
                None if errored => { errored = false; continue; }
                None => break None,
            },
        }
    };

    let (ending, exit_code) = match ending {
        // stdout closed: codex is exiting; wait for it, but not past the deadline or a cancel
        None => {
            let waited = tokio::select! {
                biased;
                _ = opts.cancel.cancelled() => Err(Ending::Cancelled),
                _ = &mut deadline => Err(Ending::TimedOut { after: opts.timeout }),
                status = child.wait() => Ok(status),
            };
            match waited {
                Ok(status) => {
                    let code = status.ok().and_then(|s| s.code());
                    (None, code)
                }
                Err(ending) => {
                    let grace = grace_for(&ending, &opts);
                    let code = terminate(&mut child, pid, cgroup.as_ref(), grace).await;
                    (Some(ending), code)
                }
            }
        }
        Some(ending) => {
            let grace = grace_for(&ending, &opts);
            let code = terminate(&mut child, pid, cgroup.as_ref(), grace).await;
            (Some(ending), code)
        }
    };
    // Whatever the ending: nothing of this turn outlives it.
    reap_leftovers(pid, cgroup.as_ref()).await;
    guard.armed = false;
    drop(cgroup);

    // a descendant that escaped every kill could hold stderr open: never wait on it for long
    let abort = stderr_task.abort_handle();
    let stderr_tail = match tokio::time::timeout(Duration::from_secs(2), stderr_task).await {
        Ok(t) => t.unwrap_or_default(),
        Err(_) => {
            abort.abort();
            String::new()
        }
    };
    let stderr_tail = opts
        .secrets
        .redact_tail(&stderr_tail, opts.limits.stderr_tail_bytes);
    let ending =
        ending.unwrap_or_else(|| judge(&transcript, exit_code, &stderr_tail, &opts.secrets));
    let output = finish(
        transcript,
        &opts,
        started.elapsed(),
        exit_code,
        stderr_tail,
        cgroup_kind(&spec),
    );
    if let Ending::Failed { kind, .. } = &ending {
        tracing::info!(kind = %kind, exit_code, "codex turn failed");
    }
    Ok(TurnOutcome { ending, output })
}

fn cgroup_kind(_spec: &SpawnSpec) -> Containment {
    if cgroup_base().is_some() {
        Containment::Cgroup
    } else {
        Containment::ProcessGroup
    }
}

fn grace_for(ending: &Ending, opts: &RunOptions) -> Duration {
    match ending {
        Ending::Cancelled => opts.cancel_grace,
        _ => opts.timeout_grace,
    }
}

/// Decide how a turn whose stdout ended and whose process exited went.
fn judge(
    t: &Transcript,
    exit_code: Option<i32>,
    stderr_tail: &str,
    secrets: &ClientSecrets,
) -> Ending {
    if let Some(msg) = &t.failure {
        let msg = secrets.redact(msg).into_owned();
        return Ending::Failed {
            kind: classify(&msg),
            message: msg,
        };
    }
    match exit_code {
        Some(0) if t.turn_completed => Ending::Completed,
        Some(0) => Ending::Failed {
            kind: FailureKind::Crashed,
            message: with_stderr("codex exited without completing the turn", stderr_tail),
        },
        code => {
            let status = code.map_or("was killed by a signal".to_owned(), |c| {
                format!("exited with status {c}")
            });
            if stderr_tail.trim().is_empty() && t.last_message.is_none() {
                Ending::Failed {
                    kind: FailureKind::Crashed,
                    message: format!("codex {status} and printed nothing"),
                }
            } else {
                let kind = match classify(stderr_tail) {
                    FailureKind::TurnFailed => FailureKind::Crashed,
                    k => k,
                };
                Ending::Failed {
                    kind,
                    message: with_stderr(&format!("codex {status}"), stderr_tail),
                }
            }
        }
    }
}

/// How much stderr is read before the kept tail: the tail is redacted with this much of what
/// came before it, so that a secret (shorter than this) cut by the start of the tail is
/// recognised whole and its remains removed.
const STDERR_REDACTION_MARGIN: usize = 64 * 1024;

/// Most stderr quoted in an error message.
const STDERR_IN_ERRORS: usize = 2000;

fn with_stderr(what: &str, stderr_tail: &str) -> String {
    let tail = stderr_tail.trim();
    if tail.is_empty() {
        return what.to_owned();
    }
    let start = tail.len().saturating_sub(STDERR_IN_ERRORS);
    let start = (start..tail.len())
        .find(|i| tail.is_char_boundary(*i))
        .unwrap_or(tail.len());
    format!("{what}: {}", &tail[start..])
}

fn finish(
    t: Transcript,
    opts: &RunOptions,
    duration: Duration,
    exit_code: Option<i32>,
    stderr_tail: String,
    containment: Containment,
) -> TurnOutput {
    let thread_id = t
        .thread_id
        .as_deref()
        .and_then(|raw| match ThreadId::parse(raw) {
            Ok(id) => Some(id),
            Err(_) => {
                tracing::warn!("codex printed a thread id that is not a UUID; ignored");
                None
            }
        });
    TurnOutput {
        thread_id,
        message: t.last_message.map(|m| opts.secrets.redact(&m).into_owned()),
        turn_usage: t.thread_usage.map(|u| u.delta(&opts.prior_thread_usage)),
        thread_usage: t.thread_usage,
        commands: t
            .commands
            .into_iter()
            .map(|c| CommandRun {
                command: opts.secrets.redact(&c.command).into_owned(),
                ..c
            })
            .collect(),
        files_changed: t
            .files_changed
            .iter()
            .map(|f| opts.secrets.redact(f).into_owned())
            .collect(),
        duration,
        exit_code,
        stderr_tail,
        unknown_events: t.unknown_events,
        malformed_lines: t.malformed_lines,
        retries: t.retries,
        containment,
    }
}

/// Keep the last `cap` bytes of a stream (lossy UTF-8).
async fn read_tail(mut r: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut tail: VecDeque<u8> = VecDeque::with_capacity(cap.min(64 * 1024));
    let mut buf = vec![0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend(&buf[..n]);
                let excess = tail.len().saturating_sub(cap);
                tail.drain(..excess);
            }
        }
    }
    String::from_utf8_lossy(tail.make_contiguous()).into_owned()
}

/// An `AsyncRead` that counts the bytes that went through. Wrapped around `take(cap + 1)`, a
/// count past `cap` means the output cap was exceeded (and reading stopped there).
struct Counted<R> {
    inner: R,
    read: usize,
}

impl<R: AsyncRead + Unpin> AsyncRead for Counted<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &res {
            self.read += buf.filled().len() - before;
        }
        res
    }
}

/// `codex --version` (e.g. `codex-cli 0.145.0`), or `None` when codex cannot be run.
pub async fn codex_version(program: &Path, env: &[(String, String)]) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.arg("--version")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(10), cmd.output())
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

// ---------------------------------------------------------------------------------------------
// Spawning

type SpawnJob = (
    tokio::runtime::Handle,
    Command,
    tokio::sync::oneshot::Sender<io::Result<Child>>,
);

/// The long-lived spawner thread's queue.
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

async fn spawn(spec: &SpawnSpec, cgroup: Option<&TurnCgroup>) -> Result<Child> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd.path())
        // piped when there is a prompt, or a cgroup to move codex into before it starts
        .stdin(if spec.stdin.is_some() || cgroup.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls
    // (prctl, getppid) on values prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // the server may have died between fork and prctl
            if libc::getppid() != parent {
                return Err(io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    spawner()
        .send((tokio::runtime::Handle::current(), cmd, tx))
        .map_err(|_| Error::io("running codex")(io::Error::other("the spawner thread is gone")))?;
    let res = rx
        .await
        .map_err(|_| Error::io("running codex")(io::Error::other("the spawner thread is gone")))?;
    res.map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::CodexNotFound {
            program: spec.program.display().to_string(),
            version: NEWEST_TESTED_CODEX_VERSION,
        },
        io::ErrorKind::PermissionDenied => Error::CodexNotFound {
            program: format!("{} (not executable)", spec.program.display()),
            version: NEWEST_TESTED_CODEX_VERSION,
        },
        _ => Error::io("running codex")(e),
    })
}

// ---------------------------------------------------------------------------------------------
// Killing

/// Kills a turn's process group and descendants when the turn's future is dropped early.
struct KillGuard {
    pid: Option<i32>,
    armed: bool,
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if self.armed
            && let Some(pid) = self.pid
        {
            kill_tree(pid);
        }
    }
}

/// The start time of a process in clock ticks since boot (/proc/PID/stat field 22).
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // fields after comm start at field 3 (state); field 22 is the 20th of them
    rest.split_whitespace().nth(19)?.parse().ok()
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
        && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
            let mut parts = raw.split(|b| *b == 0).filter(|p| !p.is_empty());
            let program = parts
                .next()
                .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()));
            let args: Vec<String> = parts
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            program.is_some_and(|p| argv_hash(&p, &args) == hash)
        });
    if still_ours {
        kill_tree(pid);
        killed = true;
    }
    killed
}

/// SIGTERM the group (and the cgroup), wait up to `grace`, then SIGKILL everything.
async fn terminate(
    child: &mut Child,
    pid: Option<i32>,
    cgroup: Option<&TurnCgroup>,
    grace: Duration,
) -> Option<i32> {
    if let Some(pid) = pid {
        signal_group(pid, libc::SIGTERM);
        if let Some(cg) = cgroup {
            cg.signal_all(libc::SIGTERM);
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
async fn reap_leftovers(pid: Option<i32>, cgroup: Option<&TurnCgroup>) {
    // Without a cgroup the group kill is the only way to reach what is left of codex's group.
    // It runs after codex was reaped, so the group id could in theory name a new group if
    // every member had exited and the pid been reused in between; with a cgroup it is not
    // needed, and skipped.
    if let (Some(pid), None) = (pid, cgroup) {
        signal_group(pid, libc::SIGKILL);
    }
    if let Some(cg) = cgroup {
        cg.kill();
        let deadline = Instant::now() + Duration::from_secs(2);
        while !cg.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// Kill codex's group and every descendant's group, stopping them first so none can fork a
/// new one in between (tool commands run in sessions of their own).
fn kill_tree(root: i32) {
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
            // SAFETY: signals only.
            unsafe {
                libc::kill(*p, libc::SIGSTOP);
            }
        }
        seen.extend(found);
    }
    signal_group(root, libc::SIGKILL);
    for p in seen {
        // SAFETY: signals only.
        unsafe {
            let pgid = libc::getpgid(p);
            if pgid > 1 && pgid != libc::getpgid(0) {
                libc::kill(-pgid, libc::SIGKILL);
            }
            libc::kill(p, libc::SIGKILL);
        }
    }
}

/// Every live descendant of `root`, from /proc.
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let mut parent_of: Vec<(i32, i32)> = vec![];
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            && let Some(ppid) = stat_ppid(&stat)
        {
            parent_of.push((pid, ppid));
        }
    }
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

/// The ppid field of /proc/PID/stat (after the parenthesised comm, which may hold spaces).
fn stat_ppid(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// cgroup v2 containment

/// A cgroup v2 directory for one turn; removed on drop.
struct TurnCgroup {
    dir: PathBuf,
    procs: OwnedFd,
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

fn find_cgroup_base() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        (post.split_whitespace().next()? == "cgroup2")
            .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(rel.trim_start_matches('/')))
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
    fn create() -> Option<TurnCgroup> {
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

    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    fn is_empty(&self) -> bool {
        self.pids().is_empty()
    }

    fn signal_all(&self, sig: i32) {
        for p in self.pids() {
            // SAFETY: signals only.
            unsafe {
                libc::kill(p, sig);
            }
        }
    }

    fn kill(&self) {
        if std::fs::write(self.dir.join("cgroup.kill"), "1").is_err() {
            self.signal_all(libc::SIGKILL);
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
fn move_into_cgroup(fd: OwnedFd, pid: i32) {
    use std::io::Write;
    let mut procs = std::fs::File::from(fd);
    let _ = procs.write_all(pid.to_string().as_bytes());
    for d in descendants(pid) {
        let _ = procs.write_all(d.to_string().as_bytes());
    }
}

/// Is cgroup containment available on this machine (for `ping`/`doctor`)?
pub fn containment() -> Containment {
    if cgroup_base().is_some() {
        Containment::Cgroup
    } else {
        Containment::ProcessGroup
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ending_reads_as_a_sentence_in_the_log() {
        let failed = Ending::Failed {
            kind: FailureKind::TurnFailed,
            message: "the mock refuses".into(),
        };
        assert_eq!(
            failed.to_string(),
            "failed (codex turn failed): the mock refuses"
        );
        let after = Duration::from_secs(3);
        assert_eq!(Ending::TimedOut { after }.to_string(), "timed out after 3s");
        assert_eq!(Ending::Completed.to_string(), "completed");
    }

    #[test]
    fn stat_ppid_handles_spaces_and_parens_in_comm() {
        assert_eq!(stat_ppid("123 (a b) c) S 45 123 123 0"), Some(45));
        assert_eq!(stat_ppid("1 (init) S 0 1 1"), Some(0));
        assert_eq!(stat_ppid("garbage"), None);
    }

    #[test]
    fn judge_classifies_endings() {
        let mut t = Transcript {
            turn_completed: true,
            ..Default::default()
        };
        assert_eq!(
            judge(&t, Some(0), "", &ClientSecrets::default()),
            Ending::Completed
        );
        t.turn_completed = false;
        assert!(matches!(
            judge(&t, Some(0), "", &ClientSecrets::default()),
            Ending::Failed {
                kind: FailureKind::Crashed,
                ..
            }
        ));
        let e = judge(&t, Some(1), "", &ClientSecrets::default());
        assert_eq!(
            e,
            Ending::Failed {
                kind: FailureKind::Crashed,
                message: "codex exited with status 1 and printed nothing".into()
            }
        );
        let e = judge(
            &t,
            Some(1),
            "Error: 401 Unauthorized",
            &ClientSecrets::default(),
        );
        assert!(matches!(
            e,
            Ending::Failed {
                kind: FailureKind::Auth,
                ..
            }
        ));
        t.failure = Some("exceeded your current quota".into());
        assert!(matches!(
            judge(&t, Some(1), "", &ClientSecrets::default()),
            Ending::Failed {
                kind: FailureKind::RateLimit,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn counted_take_reads_one_byte_past_the_cap_and_stops() {
        let data = [b'x'; 100];
        let mut r = Counted {
            inner: (&data[..]).take(11),
            read: 0,
        };
        let mut out = vec![];
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(r.read, 11);
    }

    #[tokio::test]
    async fn stderr_keeps_only_the_tail() {
        let data: Vec<u8> = (0..100_000).map(|i| b'a' + (i % 26) as u8).collect();
        let tail = read_tail(&data[..], 1000).await;
        assert_eq!(tail.len(), 1000);
        assert_eq!(tail.as_bytes(), &data[99_000..]);
    }
}
