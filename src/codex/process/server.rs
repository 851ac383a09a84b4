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
use tokio::sync::mpsc::UnboundedReceiver;

use super::cgroup::{TurnCgroup, move_into_cgroup};
use super::error::ProcessError;
use super::kill::{KillGuard, argv_hash, kill_tree, start_ticks};
use super::outcome::{finish, judge_warm};
use super::screen;
use super::signal::{descendants, signal_pid};
use super::spawn;
use super::turn::{Ending, RunOptions, SpawnHook, SpawnInfo, TurnOutcome};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc;

use crate::codex::app_server::approval::Asking;
use crate::codex::app_server::client::{Client, ClientError, DEFAULT_MAX_LINE_BYTES, Event};
use crate::codex::app_server::protocol::{
    self, Approvals, Notification, PolicyWatch, ThreadOpened, TurnParams, TurnRef,
};
use crate::codex::app_server::translate;
use crate::codex::argv::{PathKind, SandboxLevel, SpawnSpec, WarmTurn};
use crate::codex::events::{self, FailureKind, Transcript, describe};
use crate::confine;
use crate::invalid::InvalidArgument;
use crate::question::ask::Asker;
use crate::question::{DecisionRecord, LONGEST_WAIT};
use crate::security::ids::ThreadId;

/// What the process layer returns: its own error, never the crate's.
type Result<T, E = ProcessError> = std::result::Result<T, E>;

/// How long the app-server may take to answer `initialize`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `turn/interrupt` may take on a cancel or a timeout before the process is killed
/// anyway (well within the 1 s a cancel has), and how long the `thread/backgroundTerminals/clean`
/// after a completed turn may take.
pub const STOP_STEP: Duration = Duration::from_millis(200);
/// How long a closing app-server may take to exit after EOF before it is killed.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How often a start-up that could not open codex's state is retried.
const START_RETRIES: u64 = 3;
/// The tail of stderr kept for error messages.
const STDERR_TAIL: usize = 16 * 1024;
/// Most questions of one turn asked at once; more are declined.
const MAX_OPEN_QUESTIONS: usize = 4;
/// How long codex's `turn/steer` may take to be accepted.
pub const STEER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a question may stay with its answerer before the client's task declines it:
/// longer than any person's timeout, so that the answerer's own timeout decides.
const ANSWER_DEADLINE: Duration = Duration::from_secs(LONGEST_WAIT.as_secs() + 10);

/// A message to add to the running turn, and where to say whether codex took it.
pub struct Steer {
    pub text: protocol::Prompt,
    pub reply: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// What reaches a warm turn while it runs, besides codex's own events.
#[derive(Default)]
pub struct TurnControl {
    /// Answers codex's questions of this turn, and makes the turn go with approval policy
    /// `on-request`. `None`: the turn goes with `never`, and any question is declined at once.
    pub asker: Option<Asker>,
    /// Messages for `turn/steer`, taken once codex has started the turn.
    pub steers: Option<mpsc::UnboundedReceiver<Steer>>,
}

impl TurnControl {
    /// The approval policy the turn is sent with.
    pub fn approvals(&self) -> Approvals {
        match self.asker {
            Some(_) => Approvals::OnRequest,
            None => Approvals::Never,
        }
    }
}

/// Which thread a turn runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadWanted {
    /// A new thread.
    Start,
    /// The session's stored thread (loaded already, or resumed from its rollout).
    Resume(ThreadId),
}

/// The thread a process has loaded, and the policy codex last reported for it.
struct Loaded {
    thread: ThreadId,
    watch: PolicyWatch,
    /// Codex's rollout file of the thread (`None`: ephemeral), where the model's calls are.
    rollout: Option<std::path::PathBuf>,
}

/// A running `codex app-server` and its client. Dropping it kills the process, its group,
/// its descendants and its cgroup; [`WarmProcess::close`] ends it cleanly first.
pub struct WarmProcess {
    child: Child,
    pid: i32,
    cgroup: Option<TurnCgroup>,
    guard: KillGuard,
    /// `None` once closed.
    client: Option<Client<ChildStdin>>,
    events: UnboundedReceiver<Event>,
    /// Codex's questions (approvals, input, nested servers' forms): answered only by the
    /// running turn's asker, else declined.
    asked: UnboundedReceiver<Asking>,
    stderr: Arc<Mutex<Vec<u8>>>,
    key: WarmKey,
    info: SpawnInfo,
    loaded: Option<Loaded>,
    /// The move into the cgroup, until it is done.
    moving: Option<tokio::task::JoinHandle<()>>,
    /// Whether codex accepted the last turn (`turn/start` answered).
    accepted: bool,
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
                    if attempt < START_RETRIES && message.contains("state runtime") =>
                {
                    attempt += 1;
                    tracing::info!(
                        attempt,
                        "codex app-server could not open its state; retrying"
                    );
                    tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
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
            client: Some(client),
            events,
            asked,
            stderr,
            key: key_of(spec),
            info,
            loaded: None,
            moving,
            accepted: false,
            spent: false,
            slot: None,
        })
    }

    /// Complete the `initialize` handshake within [`HANDSHAKE_TIMEOUT`]. A process that fails
    /// it is killed; one killed from outside meanwhile (or by the OOM killer) is told apart
    /// from an app-server that cannot start, since the next start may work.
    async fn handshake(mut self) -> Result<WarmProcess> {
        let version = env!("CARGO_PKG_VERSION");
        let handshake = async {
            match &self.client {
                Some(c) => c.handshake(version).await,
                None => Err(ClientError::Closed),
            }
        };
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
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
        while let Ok(ev) = self.events.try_recv() {
            match ev {
                Event::Notification(n) => {
                    if let Some(l) = &mut self.loaded {
                        l.watch.observe(&n);
                    }
                }
                Event::Declined(req) => {
                    tracing::warn!(method = %req.method, "declined a request from codex app-server between turns");
                }
                Event::Closed(_) => self.spent = true,
            }
        }
        // a question that came while no turn ran: no turn of this process is waiting for it
        while let Ok(asking) = self.asked.try_recv() {
            tracing::info!(method = %asking.request.method, "declined a question from codex app-server between turns");
            asking.asked.decline();
        }
        self.spent || matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Whether codex accepted the last turn: when not, and the process is spent, the turn never
    /// reached codex (the process had ended) and may run on a new one.
    pub fn accepted(&self) -> bool {
        self.accepted
    }

    /// Whether it may run another turn: alive, not killed, nothing reported amiss.
    pub fn reusable(&self) -> bool {
        !self.spent
    }

    /// The rollout file codex reported for the thread it has loaded (`None`: none loaded, or
    /// an ephemeral thread).
    pub fn rollout(&self) -> Option<&std::path::Path> {
        self.loaded.as_ref().and_then(|l| l.rollout.as_deref())
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
        self.accepted = false;
        let deadline = tokio::time::Instant::now() + opts.timeout;
        let mut t = Transcript::default();
        let mut asks = Asks::default();
        let ending = match self
            .drive(
                wanted,
                turn,
                opts,
                deadline,
                (ctl, &mut asks),
                &mut t,
                &mut on_event,
            )
            .await
        {
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
        let mut output = finish(t, opts, started.elapsed(), None, containment);
        output.approvals = asks.records;
        output.steered = asks
            .steered
            .iter()
            .map(|m| opts.secrets.redact(m).into_owned())
            .collect();
        TurnOutcome { ending, output }
    }

    /// Drive one turn from `turn/start` to `turn/completed`: each notification of this turn
    /// mapped to the bridge's turn events (folded into `t`, shown through `on_event`), codex's
    /// questions and the steers served meanwhile, the reported policy checked at the start and
    /// at the end.
    ///
    /// One piece on purpose: one `select!` loop whose arms share the turn's state (the policy
    /// watch, the usage sum, the transcript and the questions in flight), and every exit of
    /// which is a [`Stop`] or the turn's end, read in one place.
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &mut self,
        wanted: ThreadWanted,
        turn: &WarmTurn,
        opts: &RunOptions,
        deadline: tokio::time::Instant,
        (ctl, asks): (&mut TurnControl, &mut Asks),
        t: &mut Transcript,
        on_event: &mut (impl FnMut(&events::Event) + Send),
    ) -> Result<(), Stop> {
        confine::recheck(turn.cwd()).map_err(|e| Stop::Refused(e.to_string()))?;
        let cwd = turn.cwd().path();
        let t0 = Instant::now();
        let thread = self.open(wanted, turn, opts, deadline).await?;
        tracing::debug!(
            open_ms = t0.elapsed().as_millis() as u64,
            "warm thread open"
        );
        // the id was parsed as codex's result was read: one that is not a UUID was refused
        let opened = events::Event::ThreadStarted { thread_id: thread };
        t.apply_event(&opened);
        on_event(&opened);
        let params = TurnParams {
            thread: &thread,
            prompt: turn.prompt(),
            sandbox: Some(turn.sandbox()),
            cwd,
            model: turn.model(),
            effort: turn.effort(),
        };
        let approvals = ctl.approvals();
        let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
        let started_turn = client.start_turn_with_schema(&params, approvals, turn.output_schema());
        let turn_id = bounded(opts, deadline, started_turn).await?;
        self.accepted = true;
        // what the turn may print, counted from here (a resumed thread's history is not)
        let read_at_start = client.bytes_read();
        let cap = opts.limits.max_output_bytes as u64;
        let mut usage = opts.prior_thread_usage;
        let mut answering = FuturesUnordered::new();
        // the `fileChange` items codex reports done, for an accepted change's freeze
        let (applied, _) = tokio::sync::broadcast::channel::<String>(64);
        loop {
            let ev = tokio::select! {
                biased;
                _ = opts.cancel.cancelled() => return Err(Stop::Cancelled(Some(turn_id))),
                _ = tokio::time::sleep_until(deadline) => return Err(Stop::TimedOut(Some(turn_id))),
                Some(record) = answering.next(), if !answering.is_empty() => {
                    asks.records.push(record);
                    continue;
                }
                Some(asking) = self.asked.recv() => {
                    // only a question of this turn (its thread, and its turn when codex names
                    // one), while it runs, goes to its asker; a few at once at most
                    let ours = asking.request.is_of(&thread, &turn_id);
                    match (&ctl.asker, ours) {
                        (Some(ask), true) if answering.len() < MAX_OPEN_QUESTIONS => {
                            let rollout = self.loaded.as_ref().and_then(|l| l.rollout.clone());
                            let writes = screen::Writes {
                                app_server: self.pid,
                                applied: applied.clone(),
                            };
                            answering.push(screen::screened(
                                ask.clone(),
                                asking,
                                cwd.to_path_buf(),
                                (rollout, writes),
                                opts.secrets.clone(),
                            ))
                        }
                        _ => {
                            tracing::info!(method = %asking.request.method, ours, "declined a question from codex app-server");
                            asking.asked.decline();
                        }
                    }
                    continue;
                }
                Some(steer) = next_steer(&mut ctl.steers) => {
                    if steer.reply.is_closed() {
                        // its caller gave up waiting: not sent
                        continue;
                    }
                    let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
                    let taken = steer_turn(client, &thread, &turn_id, &steer.text).await;
                    if taken.is_ok() {
                        asks.steered.push(steer.text.into_string());
                    }
                    let _ = steer.reply.send(taken);
                    continue;
                }
                ev = self.events.recv() => ev,
            };
            if let Some(c) = &self.client
                && c.bytes_read().saturating_sub(read_at_start) > cap
            {
                return Err(Stop::OutputCap(Some(turn_id)));
            }
            let n = match ev {
                Some(Event::Notification(n)) => n,
                Some(Event::Declined(req)) => {
                    tracing::warn!(method = %req.method, "declined a request from codex app-server");
                    continue;
                }
                Some(Event::Closed(e)) => return Err(Stop::Closed(e.flatten_closed())),
                None => return Err(Stop::Closed(None)),
            };
            let loaded = self
                .loaded
                .as_mut()
                .ok_or_else(|| Stop::Refused("no thread is loaded".into()))?;
            loaded.watch.observe(&n);
            let ours = |th: &ThreadId, tu: &TurnRef| *th == thread && *tu == turn_id;
            match &n {
                Notification::TurnStarted {
                    thread_id,
                    turn_id: tu,
                } if ours(thread_id, tu) => {
                    if let Err(m) =
                        loaded
                            .watch
                            .current()
                            .check_with(turn.sandbox(), cwd, approvals)
                    {
                        return Err(Stop::Policy(m.to_string(), Some(turn_id)));
                    }
                    let ev = events::Event::TurnStarted;
                    on_event(&ev);
                }
                Notification::TokenUsage {
                    thread_id,
                    turn_id: tu,
                    last,
                    ..
                } if ours(thread_id, tu) => {
                    usage = usage.plus(&translate::usage(last));
                }
                Notification::ItemStarted {
                    thread_id,
                    turn_id: tu,
                    item,
                } if ours(thread_id, tu) => {
                    if let Some(ev) = translate::started(item) {
                        t.apply_event(&ev);
                        on_event(&ev);
                    }
                }
                Notification::ItemCompleted {
                    thread_id,
                    turn_id: tu,
                    item,
                } if ours(thread_id, tu) => {
                    if let protocol::Item::FileChange { id, .. } = item {
                        let _ = applied.send(id.clone());
                    }
                    if let Some(ev) = translate::completed(item) {
                        t.apply_event(&ev);
                        on_event(&ev);
                    }
                }
                Notification::Error {
                    thread_id,
                    turn_id: tu,
                    message,
                    will_retry,
                } if ours(thread_id, tu) => {
                    // a retry is its own variant: nothing downstream reads the message's text
                    let ev = if *will_retry {
                        events::Event::Retrying {
                            message: message.clone(),
                        }
                    } else {
                        events::Event::Error {
                            message: message.clone(),
                        }
                    };
                    t.apply_event(&ev);
                    if describe(&ev).is_some() {
                        on_event(&ev);
                    }
                }
                Notification::TurnCompleted {
                    thread_id,
                    turn_id: tu,
                    status,
                    error,
                } if ours(thread_id, tu) => {
                    // checked again at the end: a `turn/started` that never came (or came in
                    // a shape not read), or a settings change after it, fails closed here
                    if let Err(m) =
                        loaded
                            .watch
                            .current()
                            .check_with(turn.sandbox(), cwd, approvals)
                    {
                        return Err(Stop::Policy(m.to_string(), None));
                    }
                    let ev = translate::turn_completed(*status, error.as_deref(), usage);
                    if let events::Event::TurnCompleted { .. } = ev {
                        t.apply_event(&ev);
                        on_event(&ev);
                    } else {
                        t.thread_usage = Some(usage);
                        t.apply_event(&ev);
                    }
                    return Ok(());
                }
                _ => {}
            }
        }
    }

    /// The thread a turn runs on: the loaded one when it is the one wanted, else opened from
    /// the templates, its reported policy checked.
    async fn open(
        &mut self,
        wanted: ThreadWanted,
        turn: &WarmTurn,
        opts: &RunOptions,
        deadline: tokio::time::Instant,
    ) -> Result<ThreadId, Stop> {
        let cwd = turn.cwd().path();
        if let Some(moving) = self.moving.take() {
            let _ = moving.await;
        }
        let refused = |e: protocol::ProtocolError| Stop::Refused(e.to_string());
        let opened: ThreadOpened = match wanted {
            ThreadWanted::Resume(thread) => {
                if let Some(l) = &self.loaded
                    && l.thread == thread
                {
                    return Ok(thread);
                }
                let msg = protocol::thread_resume(&thread, cwd, turn.model()).map_err(refused)?;
                let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
                bounded(opts, deadline, client.open_thread(&msg)).await?
            }
            ThreadWanted::Start => {
                let msg =
                    protocol::thread_start(cwd, turn.model(), turn.ephemeral()).map_err(refused)?;
                let client = self.client.as_ref().ok_or(Stop::Closed(None))?;
                bounded(opts, deadline, client.open_thread(&msg)).await?
            }
        };
        if let Err(m) = opened.policy.check(SandboxLevel::ReadOnly, cwd) {
            return Err(Stop::Policy(m.to_string(), None));
        }
        let thread = opened.thread;
        self.loaded = Some(Loaded {
            thread,
            watch: PolicyWatch::new(&opened),
            rollout: opened.path.as_ref().map(std::path::PathBuf::from),
        });
        Ok(thread)
    }

    /// Let go of the loaded thread (`thread/unsubscribe`, bounded by [`STOP_STEP`]): a
    /// one-shot call's ephemeral thread is gone with it, so the next call on this process
    /// starts from nothing. Whether codex confirmed it; a process that did not is not reused
    /// (it is marked spent).
    pub async fn forget_thread(&mut self) -> bool {
        let (Some(l), Some(client)) = (self.loaded.take(), &self.client) else {
            return true;
        };
        let answer = tokio::time::timeout(
            STOP_STEP * 5,
            client.request(&protocol::thread_unsubscribe(&l.thread)),
        )
        .await;
        let gone = matches!(&answer, Ok(Ok(u)) if u.unloaded());
        if !gone {
            tracing::warn!(
                ?answer,
                "codex app-server did not let go of a one-shot thread"
            );
            self.spent = true;
        }
        gone
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
        model: Option<&str>,
        timeout: Duration,
    ) -> Result<ThreadId> {
        confine::recheck(cwd)?;
        if let Some(moving) = self.moving.take() {
            let _ = moving.await;
        }
        let refused = |message: String| ProcessError::Codex {
            kind: FailureKind::TurnFailed,
            message,
        };
        let msg = protocol::thread_fork(&thread, cwd.path(), model)
            .map_err(|e| refused(e.to_string()))?;
        let client = self.client.as_ref().ok_or(ProcessError::Codex {
            kind: FailureKind::Crashed,
            message: "codex app-server is closed".into(),
        })?;
        let opened = match tokio::time::timeout(timeout, client.open_thread(&msg)).await {
            Err(_) => {
                return Err(ProcessError::TimedOut { after: timeout });
            }
            Ok(Err(e)) => return Err(refused(format!("codex could not fork the thread: {e}"))),
            Ok(Ok(o)) => o,
        };
        if let Err(m) = opened.policy.check(SandboxLevel::ReadOnly, cwd.path()) {
            self.kill().await;
            return Err(ProcessError::Codex {
                kind: FailureKind::PolicyMismatch,
                message: m.to_string(),
            });
        }
        let forked = opened.thread;
        self.loaded = Some(Loaded {
            thread: forked,
            watch: PolicyWatch::new(&opened),
            rollout: opened.path.as_ref().map(std::path::PathBuf::from),
        });
        Ok(forked)
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
        if let (Some(turn), Some(l), Some(client)) = (turn, &self.loaded, &self.client) {
            let _ = tokio::time::timeout(
                STOP_STEP,
                client.request(&protocol::turn_interrupt(&l.thread, &turn)),
            )
            .await;
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
        if let (Some(l), Some(client)) = (&self.loaded, &self.client) {
            let _ = tokio::time::timeout(
                STOP_STEP,
                client.request(&protocol::clean_background_terminals(&l.thread)),
            )
            .await;
        }
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
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(CLOSE_GRACE, client.close()).await;
        }
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

/// What a turn's questions and steers left for its result.
#[derive(Default)]
struct Asks {
    records: Vec<DecisionRecord>,
    steered: Vec<String>,
}

/// The next steer, when the turn has a steer inbox (never, otherwise).
async fn next_steer(steers: &mut Option<mpsc::UnboundedReceiver<Steer>>) -> Option<Steer> {
    match steers {
        Some(rx) => match rx.recv().await {
            Some(s) => Some(s),
            None => {
                *steers = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// `turn/steer` on the running turn, bounded; codex's refusal as a sentence.
async fn steer_turn<W: tokio::io::AsyncWrite + Unpin + Send + 'static>(
    client: &Client<W>,
    thread: &ThreadId,
    turn: &TurnRef,
    text: &protocol::Prompt,
) -> Result<(), String> {
    let msg = protocol::turn_steer(thread, turn, text).map_err(|e| e.to_string())?;
    match tokio::time::timeout(STEER_TIMEOUT, client.request(&msg)).await {
        Err(_) => Err(format!(
            "codex did not take the message within {}s",
            STEER_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(format!("codex refused the message: {e}")),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Why a turn did not run to `turn/completed`.
enum Stop {
    Cancelled(Option<TurnRef>),
    TimedOut(Option<TurnRef>),
    /// The turn printed more than `max_output_bytes`.
    OutputCap(Option<TurnRef>),
    /// The policy codex reports is not the one sent.
    Policy(String, Option<TurnRef>),
    /// Codex refused a request, or the bridge refused to send one.
    Refused(String),
    /// The process ended (or its output could not be read).
    Closed(Option<ClientError>),
}

/// `Closed(Some(ClientError::Closed))` is the plain end of output.
trait FlattenClosed {
    fn flatten_closed(self) -> Option<ClientError>;
}

impl FlattenClosed for Option<ClientError> {
    fn flatten_closed(self) -> Option<ClientError> {
        match self {
            Some(ClientError::Closed) | None => None,
            other => other,
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

/// A request's answer, unless a cancel, the deadline or the end of the process comes first.
async fn bounded<T>(
    opts: &RunOptions,
    deadline: tokio::time::Instant,
    fut: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, Stop> {
    tokio::select! {
        biased;
        _ = opts.cancel.cancelled() => Err(Stop::Cancelled(None)),
        _ = tokio::time::sleep_until(deadline) => Err(Stop::TimedOut(None)),
        r = fut => r.map_err(|e| match e {
            ClientError::Closed => Stop::Closed(None),
            ClientError::Refused { .. } => Stop::Refused(e.to_string()),
            other => Stop::Closed(Some(other)),
        }),
    }
}
