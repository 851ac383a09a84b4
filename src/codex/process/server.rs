//! A warm `codex app-server`: one long-lived child per warm session, spawned like every codex
//! child (the one spawner thread, the allowlisted environment only, a process group of its own,
//! the parent-death signal, a cgroup where the machine has one), driven through the
//! app-server [`Client`], and ended by its owner. Its turns end in the same [`TurnOutcome`] as
//! an exec turn: its items and its end are mapped to the bridge's turn events
//! (`app_server::translate`) and folded into the same [`Transcript`] as exec's, so progress
//! lines, results and redaction are the same.
//!
//! - Every thread is opened from the fixed templates and its reported policy checked
//!   (read-only, approval `never`, reviewer `user`, the cwd); every turn carries its
//!   `sandboxPolicy`, and the policy codex reports for it is checked at `turn/started`. A
//!   mismatch fails the turn closed and kills the process.
//! - A cancel or a timeout sends `turn/interrupt` (bounded), then kills the process, its group,
//!   every descendant and its cgroup: an interrupt alone leaves a running command alive. The process is not reused after that
//!   (the next turn resumes the thread in a new one, about 0.1 s).
//! - Closing sends EOF on stdin (the app-server's clean shutdown), then kills what is left.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, Command};

use super::cgroup::{TurnCgroup, move_into_cgroup};
use super::error::ProcessError;
use super::kill::{KillGuard, argv_hash, kill_tree, start_ticks};
use super::outcome::{finish, judge_warm};
use super::signal::{descendants, signal_pid};
use super::spawn;
use super::turn::{Ending, RunOptions, SpawnHook, SpawnInfo, TurnOutcome};
use crate::approval::screen;

use crate::approval::LONGEST_WAIT;
use crate::codex::app_server::client::{Client, DEFAULT_MAX_LINE_BYTES};
use crate::codex::app_server::conversation::{
    Asks, Conversation, Screen, Stop, ThreadOpFailed, ThreadWanted, TurnControl,
};
use crate::codex::argv::{PathKind, SpawnSpec, WarmTurn};
use crate::codex::events::{self, FailureKind, Transcript};
use crate::confine;
use crate::invalid::InvalidArgument;
use crate::security::ids::ThreadId;

/// What the process layer returns: its own error, never the crate's.
type Result<T, E = ProcessError> = std::result::Result<T, E>;

/// How long the app-server may take to answer `initialize`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a closing app-server may take to exit after EOF before it is killed.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// The one replacement policy for an app-server that ended before codex accepted a turn: at
/// each stage it is seen (its start could not open codex's state, here; it was killed during
/// its handshake, `actors::pool::starts`; it had ended before the turn reached it,
/// `actors::backend::warm`) a new one is started, at most this many times; then the call fails
/// with the last reason.
pub const APP_SERVER_REPLACEMENTS: usize = 3;
/// The tail of stderr kept for error messages.
const STDERR_TAIL: usize = 16 * 1024;
/// How long a question may stay with its answerer before the client's task declines it:
/// longer than any person's timeout, so that the answerer's own timeout decides.
const ANSWER_DEADLINE: Duration = Duration::from_secs(LONGEST_WAIT.as_secs() + 10);

/// A running `codex app-server` and its client. Dropping it kills the process, its group,
/// its descendants and its cgroup; [`WarmProcess::close`] ends it cleanly first.
pub struct WarmProcess {
    child: Child,
    pid: i32,
    cgroup: Option<TurnCgroup>,
    guard: KillGuard,
    /// The conversation over its pipes: the client, the loaded thread, the turn loop.
    conv: Conversation<ChildStdin>,
    stderr: Arc<Mutex<Vec<u8>>>,
    key: WarmKey,
    info: SpawnInfo,
    /// The move into the cgroup, until it is done.
    moving: Option<tokio::task::JoinHandle<()>>,
    /// Killed, crashed or distrusted: never used again.
    spent: bool,
    /// Its place under the owner's cap on app-server processes, given back when this is
    /// dropped (after [`WarmProcess::close`] or [`WarmProcess::kill`] reaped the process).
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// What identifies the process a spec would start: program, argv (the pins name the working
/// directory) and environment, compared whole (not a hash: no collision can hand one client's
/// process to another). A turn whose spec has another key (another client's env or CODEX_HOME,
/// another nested-MCP choice, another directory) needs a process of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmKey {
    program: std::path::PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl WarmKey {
    /// The environment the process was started with (whose credentials it carries).
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }
}

/// The [`WarmKey`] of a spec.
pub fn key_of(spec: &SpawnSpec) -> WarmKey {
    WarmKey {
        program: spec.program().to_path_buf(),
        args: spec.args().to_vec(),
        env: spec.env().to_vec(),
    }
}

impl WarmProcess {
    /// Spawn `codex app-server` from a spec made by `argv::build_app_server` and complete the
    /// handshake. `on_spawn` learns what identifies the process (the owner records it for the
    /// crash sweep) before anything is sent to it.
    pub async fn spawn(spec: &SpawnSpec, on_spawn: Option<SpawnHook>) -> Result<WarmProcess> {
        // Codex 0.145.0's app-server fails to start ("failed to initialize sqlite state
        // runtime") when another one initialises the same CODEX_HOME at the same moment
        // (measured with 16 sessions starting at once): start-ups are serialised, and one
        // that fails so is retried.
        static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let mut attempt = 0;
        loop {
            let started = {
                let _one_at_a_time = STARTING.lock().await;
                Self::spawn_once(spec, on_spawn.clone()).await
            };
            match started {
                Err(ProcessError::Codex { message, .. })
                    if attempt < APP_SERVER_REPLACEMENTS && message.contains("state runtime") =>
                {
                    attempt += 1;
                    tracing::info!(
                        attempt,
                        "codex app-server could not open its state; retrying"
                    );
                    tokio::time::sleep(Duration::from_millis(100 * attempt as u64)).await;
                }
                other => return other,
            }
        }
    }

    /// One start: the process spawned and wired ([`WarmProcess::start`]), then the handshake
    /// ([`WarmProcess::handshake`]).
    async fn spawn_once(spec: &SpawnSpec, on_spawn: Option<SpawnHook>) -> Result<WarmProcess> {
        if spec.kind() != PathKind::AppServer {
            return Err(InvalidArgument::new(
                "backend",
                "a warm process needs an app-server invocation",
            )
            .into());
        }
        confine::recheck(spec.cwd())?;
        Self::start(spec, on_spawn.as_ref())
            .await?
            .handshake()
            .await
    }

    /// Spawn `codex app-server` like every codex child, start its move into a cgroup of its
    /// own, tell `on_spawn` what identifies it, and wire its pipes to a new [`Client`]. Nothing
    /// is sent to it yet.
    async fn start(spec: &SpawnSpec, on_spawn: Option<&SpawnHook>) -> Result<WarmProcess> {
        let cgroup = TurnCgroup::create();
        let mut cmd = Command::new(spec.program());
        cmd.args(spec.args())
            .env_clear()
            .envs(spec.env().iter().map(|(k, v)| (k, v)))
            .current_dir(spec.cwd().path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        spawn::contain(&mut cmd);
        let mut child = spawn::spawn(cmd, spec.program()).await?;
        let pid = child
            .id()
            .map(|p| p as i32)
            .ok_or(ProcessError::NotPiped("process id"))?;
        let guard = KillGuard::new(Some(pid));
        // moving a process costs the kernel an RCU grace period (~10-15 ms): done beside the
        // handshake, and awaited before the first thread is opened (nothing runs before that)
        let moving = cgroup
            .as_ref()
            .and_then(|c| c.procs.try_clone().ok())
            .map(|fd| tokio::task::spawn_blocking(move || move_into_cgroup(fd, pid)));
        let info = SpawnInfo {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
            argv_hash: argv_hash(spec.program(), spec.args()),
            cgroup: cgroup.as_ref().map(|c| c.dir.clone()),
        };
        if let Some(hook) = on_spawn {
            hook(&info);
        }
        let stdin = child.stdin.take().ok_or(ProcessError::NotPiped("input"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or(ProcessError::NotPiped("output"))?;
        let stderr_pipe = child
            .stderr
            .take()
            .ok_or(ProcessError::NotPiped("error output"))?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(keep_tail(stderr_pipe, stderr.clone()));
        let (client, events, asked) =
            Client::with_answerer(stdout, stdin, DEFAULT_MAX_LINE_BYTES, ANSWER_DEADLINE);
        Ok(WarmProcess {
            child,
            pid,
            cgroup,
            guard,
            conv: Conversation::new(client, events, asked),
            stderr,
            key: key_of(spec),
            info,
            moving,
            spent: false,
            slot: None,
        })
    }

    /// Complete the `initialize` handshake within [`HANDSHAKE_TIMEOUT`]. A process that fails
    /// it is killed; one killed from outside meanwhile (or by the OOM killer) is told apart
    /// from an app-server that cannot start, since the next start may work.
    async fn handshake(mut self) -> Result<WarmProcess> {
        let version = env!("CARGO_PKG_VERSION");
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.conv.handshake(version)).await {
            Ok(Ok(_)) => {
                tracing::debug!(pid = self.pid, "codex app-server ready");
                Ok(self)
            }
            Ok(Err(e)) => {
                let status = tokio::time::timeout(Duration::from_millis(500), self.child.wait())
                    .await
                    .ok()
                    .and_then(|s| s.ok());
                let signal = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
                let message = self.failure(&format!("codex app-server did not start: {e}"));
                self.kill().await;
                match signal {
                    Some(signal) => Err(ProcessError::KilledAtStart { signal }),
                    None => Err(ProcessError::Codex {
                        kind: FailureKind::Crashed,
                        message,
                    }),
                }
            }
            Err(_) => {
                self.kill().await;
                Err(ProcessError::Codex {
                    kind: FailureKind::Crashed,
                    message: format!(
                        "codex app-server did not answer `initialize` within {}s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    ),
                })
            }
        }
    }

    /// Hold `slot` (a place under the owner's cap) for as long as the process exists.
    pub fn hold(&mut self, slot: tokio::sync::OwnedSemaphorePermit) {
        self.slot = Some(slot);
    }

    /// What identifies the process (see [`key_of`]).
    pub fn key(&self) -> &WarmKey {
        &self.key
    }

    /// What the crash sweep needs to find and kill it.
    pub fn info(&self) -> &SpawnInfo {
        &self.info
    }

    /// Whether the process has exited or its output ended (it is reaped if it exited). What
    /// came from it since the last turn is taken in first: a late notification updates the
    /// policy watch, an end of output marks it spent.
    pub fn exited(&mut self) -> bool {
        self.conv.take_in();
        !self.reusable() || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Whether codex accepted the last turn: when not, and the process is spent, the turn never
    /// reached codex (the process had ended) and may run on a new one.
    pub fn accepted(&self) -> bool {
        self.conv.accepted()
    }

    /// Whether it may run another turn: alive, not killed, nothing reported amiss.
    pub fn reusable(&self) -> bool {
        !self.spent && !self.conv.spent()
    }

    /// The rollout file codex reported for the thread it has loaded (`None`: none loaded, or
    /// an ephemeral thread).
    pub fn rollout(&self) -> Option<&std::path::Path> {
        self.conv.rollout()
    }

    /// Let go of the loaded thread ([`Conversation::forget_thread`]): whether codex confirmed
    /// it; a process that did not is not reused.
    pub async fn forget_thread(&mut self) -> bool {
        self.conv.forget_thread().await
    }

    /// How this process's questions reach the turn's asker: screened
    /// ([`screen::screened`]) with the turn's working directory `cwd`, this process kept
    /// running while the server's others are frozen around an accepted file change.
    fn screen(&self, cwd: &std::path::Path, opts: &RunOptions) -> Box<Screen> {
        let (app_server, cwd, secrets) = (self.pid, cwd.to_path_buf(), opts.secrets.clone());
        Box::new(move |ask, asking, rollout, applied| {
            let writes = screen::Writes {
                app_server,
                applied,
            };
            screen::screened(ask, asking, cwd.clone(), (rollout, writes), secrets.clone())
        })
    }

    /// A failure message with the last of stderr (codex's own lines), redacted by the caller.
    fn failure(&self, what: &str) -> String {
        let tail = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        let tail = String::from_utf8_lossy(&tail);
        let tail = tail.trim();
        if tail.is_empty() {
            what.to_owned()
        } else {
            let start = tail.len().saturating_sub(2000);
            let start = (start..tail.len())
                .find(|i| tail.is_char_boundary(*i))
                .unwrap_or(tail.len());
            format!("{what}: {}", &tail[start..])
        }
    }

    /// Run one turn on `wanted`: open the thread if it is not the loaded one, start the turn,
    /// fold its notifications until `turn/completed`, a cancel, the deadline or the end of the
    /// process. Every ending after the spawn is a [`TurnOutcome`]; afterwards check
    /// [`WarmProcess::reusable`].
    pub async fn run_turn(
        &mut self,
        wanted: ThreadWanted,
        turn: &WarmTurn,
        opts: &RunOptions,
        ctl: &mut TurnControl,
        mut on_event: impl FnMut(&events::Event) + Send,
    ) -> TurnOutcome {
        let started = Instant::now();
        self.conv.start_turn();
        let deadline = tokio::time::Instant::now() + opts.timeout;
        let mut t = Transcript::default();
        let mut asks = Asks::default();
        if let Some(moving) = self.moving.take() {
            let _ = moving.await;
        }
        let screen = self.screen(turn.cwd().path(), opts);
        let driven = self
            .conv
            .drive(
                wanted,
                turn,
                opts,
                deadline,
                (ctl, &mut asks, &*screen),
                &mut t,
                &mut on_event,
            )
            .await;
        let ending = match driven {
            Ok(()) => {
                let ran = started.elapsed();
                self.settle().await;
                tracing::debug!(
                    turn_ms = ran.as_millis() as u64,
                    settle_ms = (started.elapsed() - ran).as_millis() as u64,
                    "warm turn timings"
                );
                judge_warm(&t, &opts.secrets)
            }
            Err(stop) => self.stop(stop, opts).await,
        };
        let ending = match ending {
            Ending::Failed { kind, message } => Ending::Failed {
                kind,
                message: opts.secrets.redact(&message).into_owned(),
            },
            other => other,
        };
        let containment = super::cgroup::containment();
        // the thread's usage is the session's prior total plus codex's per-call counts of this
        // turn (`drive`: a resumed process's running total may not include the turns of earlier
        // processes), so the turn's is that minus the prior, as on exec (`finish`)
        let mut outcome = finish(ending, t, opts, started.elapsed(), None, containment);
        outcome.approvals = asks.records;
        outcome.steered = asks
            .steered
            .iter()
            .map(|m| opts.secrets.redact(m).into_owned())
            .collect();
        outcome
    }

    /// Fork the stored `thread` (`thread/fork`): a new thread that starts with a copy of its
    /// history, opened from the thread-level template and its reported policy checked
    /// (read-only, approval `never`, reviewer `user`, the cwd). `model` should be the thread's
    /// own (another hands the history over as a summary, which costs a model call). The fork
    /// is loaded in this process afterwards.
    pub async fn fork(
        &mut self,
        thread: ThreadId,
        cwd: &crate::security::paths::Confined,
        model: Option<&crate::security::ids::ModelId>,
        timeout: Duration,
    ) -> Result<ThreadId> {
        self.ready_for_one_off(cwd).await?;
        let forked = self.conv.fork(thread, cwd.path(), model, timeout).await;
        self.thread_op_result(forked, timeout).await
    }

    /// Drop the last `turns` turns of the stored `thread` (of `cwd`) on this process (see
    /// [`Conversation::rewind`]).
    pub async fn rewind(
        &mut self,
        thread: ThreadId,
        cwd: &crate::security::paths::Confined,
        turns: u32,
        timeout: Duration,
    ) -> Result<()> {
        self.ready_for_one_off(cwd).await?;
        let rewound = self.conv.rewind(thread, cwd.path(), turns, timeout).await;
        self.thread_op_result(rewound, timeout).await
    }

    /// Compact the stored `thread` (of `cwd`) on this process (see
    /// [`Conversation::compact`]): codex's token counts of the context before and after.
    pub async fn compact(
        &mut self,
        thread: ThreadId,
        cwd: &crate::security::paths::Confined,
        timeout: Duration,
    ) -> Result<Option<(u64, u64)>> {
        self.ready_for_one_off(cwd).await?;
        let compacted = self
            .conv
            .compact(thread, cwd.path(), timeout, &mut |_| {})
            .await;
        self.thread_op_result(compacted, timeout).await
    }

    /// Before a one-off operation on a thread of `cwd`: the directory checked again, and a
    /// change being applied (a file change's freeze) let finish.
    async fn ready_for_one_off(&mut self, cwd: &crate::security::paths::Confined) -> Result<()> {
        confine::recheck(cwd)?;
        if let Some(moving) = self.moving.take() {
            let _ = moving.await;
        }
        Ok(())
    }

    /// A one-off operation's outcome in the process's terms; a thread that came back under
    /// another policy than the template's kills the process.
    async fn thread_op_result<T>(
        &mut self,
        done: std::result::Result<T, ThreadOpFailed>,
        timeout: Duration,
    ) -> Result<T> {
        match done {
            Ok(t) => Ok(t),
            Err(ThreadOpFailed::TimedOut) => Err(ProcessError::TimedOut { after: timeout }),
            Err(ThreadOpFailed::Refused(message)) => Err(ProcessError::Codex {
                kind: FailureKind::TurnFailed,
                message,
            }),
            Err(ThreadOpFailed::Closed) => Err(ProcessError::Codex {
                kind: FailureKind::Crashed,
                message: "codex app-server is closed".into(),
            }),
            Err(ThreadOpFailed::Policy(message)) => {
                self.kill().await;
                Err(ProcessError::Codex {
                    kind: FailureKind::PolicyMismatch,
                    message,
                })
            }
        }
    }

    /// Give the stored `thread` (of `cwd`) the name `name` on this process (see
    /// [`Conversation::set_name`]); a process whose thread came back under another policy is
    /// killed.
    pub async fn set_name(
        &mut self,
        thread: ThreadId,
        cwd: &crate::security::paths::Confined,
        name: &crate::security::ids::SessionName,
        timeout: Duration,
    ) -> Result<()> {
        self.ready_for_one_off(cwd).await?;
        let named = self.conv.set_name(thread, cwd.path(), name, timeout).await;
        self.thread_op_result(named, timeout).await
    }

    /// End a turn that did not complete: interrupt it and clean its background terminals
    /// (each bounded), then kill the process and everything it started.
    async fn stop(&mut self, stop: Stop, opts: &RunOptions) -> Ending {
        let turn = match &stop {
            Stop::Cancelled(t) | Stop::TimedOut(t) | Stop::Policy(_, t) | Stop::OutputCap(t) => {
                t.clone()
            }
            _ => None,
        };
        // the interrupt lets codex record the turn as interrupted; the kill that follows takes
        // every process of the turn (its group, descendants and cgroup), background terminals
        // included, so no `thread/backgroundTerminals/clean` is waited for here
        if let Some(turn) = turn {
            self.conv.interrupt(turn).await;
        }
        let ending = match stop {
            Stop::Cancelled(_) => Ending::Cancelled,
            Stop::OutputCap(_) => Ending::OutputCapExceeded {
                limit: opts.limits.max_output_bytes,
            },
            Stop::TimedOut(_) => Ending::TimedOut {
                after: opts.timeout,
            },
            Stop::Policy(message, _) => {
                tracing::error!("{message}");
                Ending::Failed {
                    kind: FailureKind::PolicyMismatch,
                    message: format!("{message}; the turn was stopped and its result withheld"),
                }
            }
            Stop::Refused(message) => Ending::Failed {
                kind: FailureKind::TurnFailed,
                message,
            },
            Stop::Closed(e) => {
                // give the exit a moment, for its status and its last stderr lines
                let status = tokio::time::timeout(Duration::from_millis(500), self.child.wait())
                    .await
                    .ok()
                    .and_then(|s| s.ok());
                let how = match status {
                    Some(s) => {
                        match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                            (Some(c), _) => format!("exited with status {c}"),
                            (None, Some(sig)) => format!("was killed by a signal ({sig})"),
                            _ => "exited".to_owned(),
                        }
                    }
                    None => "closed its output".to_owned(),
                };
                let what = match e {
                    Some(e) => format!("codex app-server {how} during the turn: {e}"),
                    None => format!("codex app-server {how} during the turn"),
                };
                Ending::Failed {
                    kind: FailureKind::Crashed,
                    message: self.failure(&what),
                }
            }
        };
        self.kill().await;
        ending
    }

    /// After a turn completed: nothing the turn started outlives it, as with an exec turn.
    /// Commands left in background terminals are cleaned (bounded), and every process in the
    /// cgroup that is neither the app-server nor one of its descendants (a job that escaped
    /// into a session of its own, re-parented away) is killed. The app-server's own children
    /// (nested MCP servers) stay.
    async fn settle(&mut self) {
        self.conv.clean_terminals().await;
        if let Some(cg) = &self.cgroup {
            // the cgroup first: a process started after it was read is not judged
            let members = cg.pids();
            let own = descendants(self.pid);
            for p in members {
                if p != self.pid && !own.contains(&p) {
                    tracing::info!(pid = p, "killing a process a turn left behind");
                    signal_pid(p, nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
    }

    /// Kill the process, its group, its descendants and its cgroup, and reap it.
    pub async fn kill(&mut self) {
        self.spent = true;
        kill_tree(self.pid);
        if let Some(cg) = &self.cgroup {
            cg.kill();
        }
        let _ = self.child.start_kill();
        let waited = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        tracing::debug!(pid = self.pid, reaped = ?waited.as_ref().map(|r| r.is_ok()), "codex app-server ended");
        self.guard.disarm();
    }

    /// End it cleanly: EOF on stdin, up to [`CLOSE_GRACE`] to exit, then kill whatever is left
    /// (its descendants included).
    pub async fn close(mut self) {
        // the client's close waits for stdout to end; the process exits on EOF
        self.conv.close(CLOSE_GRACE).await;
        self.kill().await;
    }
}

impl Drop for WarmProcess {
    fn drop(&mut self) {
        if !self.spent {
            // an owner that stopped without closing (a panic, an abort): nothing outlives it
            kill_tree(self.pid);
        }
    }
}

/// Keep the last [`STDERR_TAIL`] bytes of stderr; drained so codex never blocks on a full
/// pipe.
async fn keep_tail(mut pipe: tokio::process::ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = vec![0u8; 4096];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Ok(mut t) = tail.lock() {
            t.extend_from_slice(&buf[..n]);
            if t.len() > 2 * STDERR_TAIL {
                let cut = t.len() - STDERR_TAIL;
                t.drain(..cut);
            }
        }
    }
}
