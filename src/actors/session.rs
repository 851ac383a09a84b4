//! The session actor: holds one conversation's record and owns the codex subprocess of its
//! current turn. It alone writes its session's record (and its `inflight` entry) while it
//! lives; a stored session without a live actor is changed only by the registry's close, the
//! takeover sweep and the expiry, none of which runs beside a live actor of it.
//!
//! Architecture invariants: a handler never awaits the child (a turn runs in a task that
//! reports back with `TurnFinished`); turns on one session run one at a time (later calls wait
//! in a queue, or fail at once when the caller asked not to wait); the record never holds a
//! sandbox level. [`TurnGuard`] kills the turn's processes and frees its slot when the state is
//! dropped, because ractor skips `post_stop` when an actor panics or is killed.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::actors::calls::WorkDir;
use crate::actors::warm::Acquired;
use crate::actors::{ClientContext, Shared, TurnCall, TurnReport, stored_thread};
use crate::codex::argv::{
    SandboxLevel, SpawnSpec, TurnRequest, WarmTurn, build_app_server, build_turn, build_warm_turn,
};
use crate::codex::events::{Event, FailureKind, Usage, describe};
use crate::codex::process::{
    Ending, RunOptions, SpawnInfo, Steer, ThreadWanted, TurnControl, TurnOutcome, WarmProcess,
    key_of, run,
};
use crate::codex::rollout::{TurnContext, last_turn_context};
use crate::config::Backend;
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::{Confined, Kind};
use crate::security::redact::redact;
use crate::store::{SessionRecord, TurnStatus, now_ms};

/// The prompt that makes a session actor panic when fault injection is on (tests only).
pub const PANIC_PROMPT: &str = "__codex_mcp_bridge_fault__:panic";

/// Messages to a session actor.
pub enum SessionMessage {
    /// Run a turn (or queue it behind the current one).
    StartTurn {
        call: Box<TurnCall>,
        reply: oneshot::Sender<Result<TurnReport>>,
    },
    /// Codex reported the thread id (mid-turn); stored at once so a crash can still resume.
    ThreadStarted { thread: ThreadId },
    /// Codex runs; remember its process for crash recovery.
    Spawned { info: SpawnInfo },
    /// The turn's task ended.
    TurnFinished { finished: Box<Finished> },
    /// Close the session: cancel its turn, forget it, optionally delete codex's thread.
    Close {
        delete_thread: bool,
        /// Whose codex deletes the thread.
        client: Arc<ClientContext>,
        reply: oneshot::Sender<Result<Option<SessionRecord>>>,
    },
    /// The session's record as the session tools show it (not an activity: it does not keep
    /// the actor alive).
    Get {
        reply: oneshot::Sender<Result<Option<crate::actors::SessionView>>>,
    },
    /// Stop if idle long enough.
    IdleCheck,
    /// Close the warm app-server process if the session is idle (the cap on warm processes
    /// was reached and this session was the least recently used).
    CloseWarm,
    /// Add a message to the running turn (`turn/steer`); answered once codex took it.
    Steer {
        text: String,
        /// Who asks: only the client that started the turn may steer it.
        client: Arc<ClientContext>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Codex started the running turn (`turn/started`): it can take a steer from now on.
    TurnRunning,
    /// A fork of the session's thread ended: turns may run again.
    ForkDone,
    /// Fork the session's thread into a new session (same working directory, a thread of its
    /// own from `thread/fork`); answered with the new session.
    Fork {
        client: Arc<ClientContext>,
        timeout: Duration,
        reply: oneshot::Sender<Result<crate::actors::SessionView>>,
    },
}

/// What a turn task sends back.
pub struct Finished {
    result: Result<(TurnOutcome, Option<TurnContext>)>,
    /// The warm app-server, handed back when it may serve the next turn.
    warm: Option<WarmProcess>,
    queued: Duration,
    call: CallMeta,
    reply: oneshot::Sender<Result<TurnReport>>,
}

/// The parts of a call the actor needs after the turn.
struct CallMeta {
    sandbox: SandboxLevel,
    model: Option<String>,
    resumed: bool,
    created: bool,
    reset: bool,
    /// The turn may be sent with approval policy `on-request` (its caller can be asked).
    may_ask: bool,
}

/// Arguments of a session actor.
pub struct SessionArgs {
    pub shared: Arc<Shared>,
    pub id: SessionId,
    /// The stored record, when the session is known.
    pub record: Option<SessionRecord>,
}

/// The running turn. Dropping it (a stop, a panic, a kill) cancels the turn and aborts its
/// task, whose runner kills codex's process group, descendants and cgroup, and whose slot is
/// released with it.
struct TurnGuard {
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.task.abort();
    }
}

/// A session actor's state.
pub struct SessionState {
    shared: Arc<Shared>,
    id: SessionId,
    record: Option<SessionRecord>,
    current: Option<TurnGuard>,
    pending: VecDeque<(Box<TurnCall>, oneshot::Sender<Result<TurnReport>>, Instant)>,
    last_activity: Instant,
    idle_timer: Option<JoinHandle<()>>,
    /// The warm app-server between turns (during a turn its task holds it).
    warm: Option<WarmProcess>,
    /// The running warm turn's steer inbox.
    steer: Option<SteerInbox>,
    /// A fork of the thread is being made: turns wait (no turn writes the thread it reads).
    forking: bool,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        // a warm process dropped here is killed with everything it started
        self.warm = None;
        self.shared.warm.release(&self.id);
        if let Some(t) = &self.idle_timer {
            t.abort();
        }
        for (_, reply, _) in self.pending.drain(..) {
            let _ = reply.send(Err(Error::SessionFailed(
                "the session stopped before this turn started".into(),
            )));
        }
    }
}

/// The session actor's behaviour.
pub struct SessionActor;

impl Actor for SessionActor {
    type Msg = SessionMessage;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let every = (args.shared.idle_timeout / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(60));
        let idle_timer = Some(myself.send_interval(every, || SessionMessage::IdleCheck));
        Ok(SessionState {
            shared: args.shared,
            id: args.id,
            record: args.record,
            current: None,
            pending: VecDeque::new(),
            last_activity: Instant::now(),
            idle_timer,
            warm: None,
            steer: None,
            forking: false,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        st: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        close_warm(st).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        st: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        if !matches!(msg, SessionMessage::IdleCheck | SessionMessage::Get { .. }) {
            st.last_activity = Instant::now();
        }
        match msg {
            SessionMessage::StartTurn { call, reply } => {
                if st.shared.fault_injection && call.prompt == PANIC_PROMPT {
                    panic!("fault injection: session actor panics");
                }
                if st.current.is_some() || st.forking {
                    // a call that can never run is refused now, not after the running turn
                    let common = call
                        .client
                        .as_ref()
                        .map_or(&st.shared.common, |c| &c.common);
                    let checked = crate::codex::argv::check_call(
                        common,
                        &call.prompt,
                        call.model.as_deref(),
                        call.sandbox,
                    );
                    match checked {
                        Ok(()) => queue(st, call, reply),
                        Err(e) => {
                            let _ = reply.send(Err(e));
                        }
                    }
                    return Ok(());
                }
                start(&myself, st, call, reply, Instant::now()).await;
            }
            SessionMessage::ThreadStarted { thread } => {
                if let Some(rec) = &mut st.record
                    && rec.thread_id.as_deref() != Some(thread.to_string().as_str())
                {
                    rec.thread_id = Some(thread.to_string());
                    if let Err(e) = st.shared.store.put(rec) {
                        tracing::error!(error = %e, "could not store the thread id");
                    }
                    let _ = st.shared.store.flush().await;
                }
            }
            SessionMessage::Spawned { info } => {
                let t = crate::actors::inflight_of(info);
                if let Err(e) = st.shared.store.put_inflight(&st.id, &t) {
                    tracing::error!(error = %e, "could not record the turn in flight");
                }
                let _ = st.shared.store.flush().await;
            }
            SessionMessage::TurnFinished { finished } => {
                st.current = None;
                st.steer = None;
                finish(&myself, st, *finished).await;
                start_next(&myself, st).await;
            }
            SessionMessage::Close {
                delete_thread,
                client,
                reply,
            } => close(&myself, st, delete_thread, client, reply).await,
            SessionMessage::Get { reply } => {
                let view = st
                    .record
                    .as_ref()
                    .map(|r| crate::actors::SessionView::of(r, true));
                let _ = reply.send(Ok(view));
            }
            SessionMessage::CloseWarm => {
                if st.current.is_none() {
                    close_warm(st).await;
                }
            }
            SessionMessage::Steer {
                text,
                client,
                reply,
            } => steer(st, text, &client, reply),
            SessionMessage::TurnRunning => {
                if let Some(inbox) = &mut st.steer {
                    inbox.running = true;
                }
            }
            SessionMessage::ForkDone => {
                st.forking = false;
                if st.current.is_none() {
                    start_next(&myself, st).await;
                }
            }
            SessionMessage::Fork {
                client,
                timeout,
                reply,
            } => fork(&myself, st, client, timeout, reply),
            SessionMessage::IdleCheck => {
                if st.current.is_none()
                    && !st.forking
                    && st.pending.is_empty()
                    && st.last_activity.elapsed() >= st.shared.idle_timeout
                {
                    myself.stop(Some("idle".into()));
                }
            }
        }
        Ok(())
    }
}

/// A thread can be deleted only by a client using the CODEX_HOME that keeps it.
fn check_delete(client: &ClientContext, rec: &SessionRecord) -> Result<()> {
    client.check_codex_home(rec).map_err(|_| {
        Error::invalid(
            "deleteThread",
            "the session's thread lives in another CODEX_HOME than this client's; close it \
             without deleteThread, or from a client using that CODEX_HOME",
        )
    })
}

/// Start the next queued call, in arrival order; cancelled waiters, and calls that cannot
/// start (answered at once with why), are skipped.
async fn start_next(myself: &ActorRef<SessionMessage>, st: &mut SessionState) {
    while let Some((call, reply, since)) = st.pending.pop_front() {
        if call.cancel.is_cancelled() {
            let _ = reply.send(Err(Error::Cancelled { partial: None }));
            continue;
        }
        start(myself, st, call, reply, since).await;
        if st.current.is_some() {
            break;
        }
    }
}

/// Close the session: refused before anything when its thread cannot be deleted by this
/// client; else its turn is cancelled (killed), waiters are answered, the record is forgotten
/// and the actor stops.
async fn close(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    delete_thread: bool,
    client: Arc<ClientContext>,
    reply: oneshot::Sender<Result<Option<SessionRecord>>>,
) {
    if delete_thread
        && let Some(rec) = &st.record
        && let Err(e) = check_delete(&client, rec)
    {
        let _ = reply.send(Err(e));
        return;
    }
    st.current = None; // cancels and kills the running turn
    st.steer = None;
    if let Some(w) = st.warm.take() {
        st.shared.warm.release(&st.id);
        tokio::spawn(w.close());
    }
    for (_, r, _) in st.pending.drain(..) {
        let _ = r.send(Err(Error::Cancelled { partial: None }));
    }
    let res = forget_stored(&st.shared, &st.id).await;
    st.record = None;
    let thread = match (&res, delete_thread) {
        (Ok(Some(rec)), true) => stored_thread(rec),
        _ => None,
    };
    match (thread, myself.try_get_supervisor()) {
        // `codex delete` may take up to 30 s: a one-shot actor under the registry runs it,
        // not this handler; the reply still comes once it is done
        (Some(thread), Some(registry)) => {
            match oneshot_delete(&st.shared, registry, client, thread).await {
                Some(done) => {
                    tokio::spawn(async move {
                        let _ = done.await;
                        let _ = reply.send(res);
                    });
                }
                None => {
                    let _ = reply.send(res);
                }
            }
        }
        _ => {
            let _ = reply.send(res);
        }
    }
    myself.stop(Some("closed".into()));
}

/// A call on a busy session: queued behind the running turn, or refused when it asked not to
/// wait.
fn queue(st: &mut SessionState, call: Box<TurnCall>, reply: oneshot::Sender<Result<TurnReport>>) {
    if call.wait_if_busy {
        if let Some(p) = &call.progress {
            p(format!(
                "queued behind {} turn(s) on this session",
                st.pending.len() + 1
            ));
        }
        st.pending.push_back((call, reply, Instant::now()));
    } else {
        let _ = reply.send(Err(Error::Busy(format!(
            "session {} is busy with another turn; retry later or pass waitIfBusy: true",
            st.id
        ))));
    }
}

/// Forget a stored session (not live: the registry's); optionally delete codex's thread files
/// (`codex delete --force`, by a one-shot actor under `registry`), answering once it is done.
pub async fn close_stored(
    shared: &Arc<Shared>,
    registry: ActorCell,
    id: &SessionId,
    delete_thread: bool,
    client: Arc<ClientContext>,
) -> Result<Option<SessionRecord>> {
    if delete_thread && let Some(rec) = shared.store.get(id)? {
        check_delete(&client, &rec)?;
    }
    let removed = forget_stored(shared, id).await?;
    if delete_thread
        && let Some(thread) = removed.as_ref().and_then(stored_thread)
        && let Some(done) = oneshot_delete(shared, registry, client, thread).await
    {
        let _ = done.await;
    }
    Ok(removed)
}

/// Remove a session's record from the store, durably.
async fn forget_stored(shared: &Shared, id: &SessionId) -> Result<Option<SessionRecord>> {
    let removed = shared.store.remove(id)?;
    shared.store.flush().await?;
    Ok(removed)
}

/// Start `codex delete --force THREAD` in a one-shot actor under `registry`
/// ([`crate::actors::oneshot::delete_thread`]); `None` (logged) when it could not start.
async fn oneshot_delete(
    shared: &Arc<Shared>,
    registry: ActorCell,
    client: Arc<ClientContext>,
    thread: ThreadId,
) -> Option<tokio::sync::oneshot::Receiver<()>> {
    crate::actors::oneshot::delete_thread(shared.clone(), registry, client, thread)
        .await
        .inspect_err(|e| tracing::warn!(%thread, error = %e, "codex delete could not start"))
        .ok()
}

/// Start a call's turn in a task, or answer it at once with why it cannot run.
async fn start(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    mut call: Box<TurnCall>,
    reply: oneshot::Sender<Result<TurnReport>>,
    since: Instant,
) {
    match prepare(myself, st, &mut call).await {
        Ok(prepared) => launch(myself, st, &call, prepared, reply, since),
        Err(e) => {
            let _ = reply.send(Err(e));
        }
    }
}

/// A turn ready to run: codex's invocation and what the actor needs when it ends.
struct Prepared {
    client: Arc<ClientContext>,
    run: Backed,
    meta: CallMeta,
    prior_usage: Usage,
}

/// How a prepared turn runs.
enum Backed {
    /// A `codex exec` process for this turn.
    Exec(SpawnSpec),
    /// A turn on the session's warm app-server (`server` starts one when it has none, or one
    /// of another key).
    Warm {
        server: SpawnSpec,
        turn: WarmTurn,
        wanted: ThreadWanted,
    },
}

/// How long a steer waits for codex to take it (codex answers `turn/steer` within
/// `STEER_TIMEOUT`; this bounds the way there).
const STEER_WAIT: Duration = Duration::from_secs(30);

/// The running warm turn's steer inbox, who started the turn, and whether codex runs it yet.
struct SteerInbox {
    tx: tokio::sync::mpsc::UnboundedSender<Steer>,
    client: Arc<ClientContext>,
    running: bool,
}

/// Add `text` to the running turn, for the client that started it. Refused at once when no
/// turn runs, when it runs with `codex exec` (which cannot take a message mid-turn), when
/// another client asks, or when codex has not started it yet; answered once codex took it.
fn steer(
    st: &mut SessionState,
    text: String,
    client: &Arc<ClientContext>,
    reply: oneshot::Sender<Result<()>>,
) {
    let refused = |why: String| Err(Error::invalid("sessionId", why));
    let inbox = match (&st.current, &st.steer) {
        (None, _) => {
            let _ = reply.send(refused(format!(
                "no turn is running on session {}; send the message as a new turn with the \
                 `codex` tool",
                st.id
            )));
            return;
        }
        (Some(_), None) => {
            let _ = reply.send(refused(format!(
                "session {}'s running turn runs with `codex exec` (the exec backend, image \
                 attachments, or every warm process busy), which cannot take a message \
                 mid-turn; wait for it or cancel it",
                st.id
            )));
            return;
        }
        (Some(_), Some(inbox)) if !Arc::ptr_eq(&inbox.client, client) => {
            let _ = reply.send(refused(format!(
                "session {}'s running turn was started by another MCP client; only that client \
                 can steer it",
                st.id
            )));
            return;
        }
        (Some(_), Some(inbox)) if !inbox.running => {
            let _ = reply.send(refused(format!(
                "session {}'s turn has not started in codex yet (it waits for a codex slot or \
                 its process); try again in a moment",
                st.id
            )));
            return;
        }
        (Some(_), Some(inbox)) => &inbox.tx,
    };
    let (taken, answer) = oneshot::channel();
    if inbox.send(Steer { text, reply: taken }).is_err() {
        let _ = reply.send(Err(Error::invalid(
            "sessionId",
            "the turn ended before the message reached it; send it as a new turn",
        )));
        return;
    }
    tokio::spawn(async move {
        // bounded: the drive loop answers within `STEER_TIMEOUT` once it reads the message
        // (one it has not read when this gives up is dropped with `answer`, not sent)
        let answer = match tokio::time::timeout(STEER_WAIT, answer).await {
            Ok(a) => a,
            Err(_) => {
                let _ = reply.send(Err(Error::Busy(format!(
                    "codex did not take the message within {}s; it was not added",
                    STEER_WAIT.as_secs()
                ))));
                return;
            }
        };
        let _ = reply.send(match answer {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(Error::Codex {
                kind: FailureKind::TurnFailed,
                message,
            }),
            Err(_) => Err(Error::invalid(
                "sessionId",
                "the turn ended before the message reached it; send it as a new turn",
            )),
        });
    });
}

/// Fork the session's thread into a new session: same working directory and CODEX_HOME, a
/// thread of its own from `thread/fork` on a one-off app-server (so that no two processes
/// write one thread), its record written once before its id is returned. Refused while a turn
/// runs or waits, and for a session without a thread.
fn fork(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    client: Arc<ClientContext>,
    timeout: Duration,
    reply: oneshot::Sender<Result<crate::actors::SessionView>>,
) {
    let prepared = (|| {
        let Some(rec) = &st.record else {
            return Err(Error::invalid(
                "sessionId",
                format!("no session {}; start one with the `codex` tool", st.id),
            ));
        };
        if st.current.is_some() || !st.pending.is_empty() || st.forking {
            return Err(Error::Busy(format!(
                "session {} is running a turn (or a fork); fork it once that has ended",
                st.id
            )));
        }
        let thread = stored_thread(rec).ok_or_else(|| {
            Error::invalid(
                "sessionId",
                format!(
                    "session {} has no conversation yet (no turn started its thread): nothing \
                     to fork",
                    st.id
                ),
            )
        })?;
        client.check_codex_home(rec)?;
        let cwd = record_dir(&client, rec)?;
        // no nested MCP servers: nothing runs in the fork's one-off process
        let server = build_app_server(&client.common_for(true), cwd.clone())?;
        Ok((rec.clone(), thread, cwd, server))
    })();
    let (parent, thread, cwd, server) = match prepared {
        Ok(p) => p,
        Err(e) => {
            let _ = reply.send(Err(e));
            return;
        }
    };
    let shared = st.shared.clone();
    st.forking = true;
    let me = myself.clone();
    let home = client.codex_home.display().to_string();
    let span = tracing::info_span!("fork", session = %st.id);
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            let forked = async {
                let cancel = CancellationToken::new();
                let _slot = shared
                    .limiter
                    .acquire(shared.queue_timeout, &cancel, |_| {})
                    .await?;
                let mut process = tokio::time::timeout(timeout, WarmProcess::spawn(&server, None))
                    .await
                    .map_err(|_| Error::TimedOut {
                        after: timeout,
                        partial: None,
                    })??;
                let forked = process
                    .fork(thread, &cwd, parent.model.as_deref(), timeout)
                    .await;
                process.close().await;
                let forked = forked?;
                let mut rec =
                    SessionRecord::new(SessionId::generate(), cwd.path().to_path_buf(), now_ms());
                // the fork's thread lives in the asking client's CODEX_HOME (the parent's,
                // checked above)
                rec.codex_home = Some(home);
                rec.model = parent.model.clone();
                rec.thread_id = Some(forked.to_string());
                // the fork starts with the parent's history, and codex's running total with it
                rec.thread_usage = parent.thread_usage;
                shared.store.put(&rec)?;
                shared.store.flush().await?;
                tracing::info!(from = %thread, to = %forked, new_session = %rec.session_id, "forked");
                Ok(crate::actors::SessionView::of(&rec, false))
            };
            let forked = forked.await;
            let _ = me.cast(SessionMessage::ForkDone);
            let _ = reply.send(forked);
        },
        span,
    ));
}

/// Close the warm app-server between turns (EOF first), forget its process record, and give
/// its place in the cap back.
async fn close_warm(st: &mut SessionState) {
    if let Some(w) = st.warm.take() {
        st.shared.warm.release(&st.id);
        w.close().await;
        let _ = st.shared.store.clear_inflight(&st.id);
    }
}

/// The working directory of a call on this session: the one it is bound to (a caller naming
/// another is refused), checked again against the client's roots; a new session's is the
/// call's.
fn session_dir(st: &SessionState, client: &ClientContext, dir: &WorkDir) -> Result<Confined> {
    let Some(rec) = &st.record else {
        return Ok(dir.confined().clone());
    };
    client.check_codex_home(rec)?;
    match dir {
        WorkDir::Given(c) if rec.working_directory != c.path() => Err(Error::invalid(
            "workingDirectory",
            format!(
                "session {} is bound to another working directory; start a new session (or omit \
                 workingDirectory) to work there",
                st.id
            ),
        )),
        WorkDir::Given(c) => Ok(c.clone()),
        WorkDir::Default(_) => record_dir(client, rec),
    }
}

/// A stored session's working directory, checked again against the client's roots.
fn record_dir(client: &ClientContext, rec: &SessionRecord) -> Result<Confined> {
    let roots = &client.config.roots;
    let first = roots
        .first()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("/"));
    crate::confine::resolve(
        "workingDirectory",
        &rec.working_directory.to_string_lossy(),
        first,
        roots,
        Kind::Dir,
    )
}

/// A caller's prompt (refused when empty) with its `files` attached inside `cwd`: the text
/// appended in place (the prompt is moved, never copied, on its way to codex's stdin), the
/// images for `--image`. Codex's invocation checks the whole prompt's size.
pub(crate) fn compose(
    mut prompt: String,
    files: &[String],
    cwd: &Confined,
) -> Result<(String, Vec<Confined>)> {
    if prompt.trim().is_empty() {
        return Err(Error::invalid("prompt", "must not be empty"));
    }
    let att = crate::actors::files::attach(files, cwd)?;
    prompt.push_str(&att.text);
    Ok((prompt, att.images))
}

/// Check a call against the session and build codex's invocation; only then mark the record
/// running (stored and flushed), so that a call that cannot be built leaves it as it was.
async fn prepare(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    call: &mut TurnCall,
) -> Result<Prepared> {
    let client = call
        .client
        .clone()
        .unwrap_or_else(|| Arc::new(st.shared.own_context()));
    let cwd = session_dir(st, &client, &call.cwd)?;
    let resume = if call.reset {
        None
    } else {
        st.record.as_ref().and_then(stored_thread)
    };
    let (prompt, images) = compose(std::mem::take(&mut call.prompt), &call.files, &cwd)?;
    let dir = cwd.path().to_path_buf();
    // a turn with images, or one that finds every warm process busy at the cap, runs with
    // `codex exec` (after the session's own warm process, if any, is closed: one writer)
    let warm = st.shared.config.backend == Backend::AppServer
        && images.is_empty()
        && st.shared.warm.unusable().is_none()
        && matches!(st.shared.warm.acquire(&st.id, myself), Acquired::Granted);
    let req = TurnRequest {
        prompt,
        sandbox: call.sandbox,
        model: call.model.clone(),
        reasoning_effort: call.reasoning_effort,
        cwd,
        images,
        resume,
        output_schema: None,
        output_last_message: None,
    };
    let common = client.common_for(false);
    let built = build_backed(&common, req, resume, warm);
    if warm && built.is_err() {
        if st.warm.is_some() {
            st.shared.warm.idle(&st.id, myself);
        } else {
            st.shared.warm.release(&st.id);
        }
    }
    let run = built?;
    let created = st.record.is_none();
    let record = st
        .record
        .get_or_insert_with(|| SessionRecord::new(st.id.clone(), dir, now_ms()));
    if created {
        record.codex_home = Some(client.codex_home.display().to_string());
    }
    let prior_usage = if resume.is_some() {
        record.thread_usage
    } else {
        Default::default()
    };
    record.last_status = Some(TurnStatus::Running);
    record.last_used_ms = now_ms();
    let stored = st.shared.store.put(record);
    let flushed = st.shared.store.flush().await;
    stored.and(flushed)?;
    let sandbox = match &run {
        Backed::Exec(spec) => spec.sandbox(),
        Backed::Warm { turn, .. } => turn.sandbox(),
    };
    Ok(Prepared {
        meta: CallMeta {
            sandbox,
            model: call.model.clone(),
            resumed: resume.is_some(),
            created,
            reset: call.reset,
            may_ask: call.asker.is_some() && matches!(run, Backed::Warm { .. }),
        },
        client,
        run,
        prior_usage,
    })
}

/// Codex's invocation for a prepared turn: a warm turn (and the app-server to run it on) or an
/// exec spec.
fn build_backed(
    common: &crate::codex::argv::Common,
    req: TurnRequest,
    resume: Option<crate::security::ids::ThreadId>,
    warm: bool,
) -> Result<Backed> {
    if warm {
        let server = build_app_server(common, req.cwd.clone())?;
        let wanted = match resume {
            Some(t) => ThreadWanted::Resume(t),
            None => ThreadWanted::Start,
        };
        // the prompt moves into the turn
        let turn = build_warm_turn(common, req)?;
        Ok(Backed::Warm {
            server,
            turn,
            wanted,
        })
    } else {
        // the prompt moves into the spec (see `build_turn`)
        Ok(Backed::Exec(build_turn(common, req)?))
    }
}

/// Run a prepared turn in a task that reports back with `TurnFinished`.
fn launch(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    call: &TurnCall,
    prepared: Prepared,
    reply: oneshot::Sender<Result<TurnReport>>,
    since: Instant,
) {
    let cancel = call.cancel.child_token();
    let shared = st.shared.clone();
    let me = myself.clone();
    let progress = call.progress.clone();
    let timeout = call.timeout;
    let task_cancel = cancel.clone();
    let warm = st.warm.take();
    // a warm turn can be steered, and asks its caller's person when it can
    let mut control = TurnControl::default();
    if matches!(prepared.run, Backed::Warm { .. }) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        st.steer = Some(SteerInbox {
            tx,
            client: prepared.client.clone(),
            running: false,
        });
        control.steers = Some(rx);
        control.asker = call.asker.clone();
    }
    // one span per turn, with the session id, so a user can follow a call through the logs
    let span = tracing::info_span!("turn", session = %st.id, resumed = prepared.meta.resumed);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let Prepared {
                client,
                run,
                meta,
                prior_usage,
            } = prepared;
            let slot = shared
                .limiter
                .acquire(shared.queue_timeout, &task_cancel, |ahead| {
                    if let Some(p) = &progress {
                        p(format!(
                            "queued behind {} turn(s) waiting for a codex slot",
                            ahead + shared.limiter.active()
                        ));
                    }
                })
                .await;
            let queued = since.elapsed();
            let turn = TurnEnv {
                shared: &shared,
                me: &me,
                client: &client,
                timeout,
                prior_usage,
                cancel: &task_cancel,
                progress,
                control: std::sync::Mutex::new(control),
            };
            let (result, warm) = match slot {
                Err(e) => (Err(e), warm),
                Ok(slot) => {
                    let outcome = match run {
                        Backed::Exec(spec) => {
                            // one writer per thread: the warm process lets go of it first
                            if let Some(w) = warm {
                                w.close().await;
                            }
                            (run_turn(&turn, spec).await, None)
                        }
                        Backed::Warm {
                            server,
                            turn: t,
                            wanted,
                        } => run_warm(&turn, warm, server, t, wanted).await,
                    };
                    drop(slot);
                    outcome
                }
            };
            let _ = me.cast(SessionMessage::TurnFinished {
                finished: Box::new(Finished {
                    result,
                    warm,
                    queued,
                    call: meta,
                    reply,
                }),
            });
        },
        span,
    ));
    st.current = Some(TurnGuard { cancel, task });
}

/// What a turn's task runs with.
struct TurnEnv<'a> {
    shared: &'a Arc<Shared>,
    me: &'a ActorRef<SessionMessage>,
    client: &'a ClientContext,
    timeout: Duration,
    prior_usage: Usage,
    cancel: &'a CancellationToken,
    progress: Option<crate::actors::Progress>,
    /// The warm turn's asker and steer inbox (taken by the run that reaches codex).
    control: std::sync::Mutex<TurnControl>,
}

impl TurnEnv<'_> {
    /// The options of the turn's run: its deadline, cancel, limits, secrets and the hook that
    /// records its process for the crash sweep.
    fn options(&self) -> RunOptions {
        let mut opts = RunOptions::new(self.timeout, self.client.config.limits);
        opts.cancel = self.cancel.clone();
        opts.prior_thread_usage = self.prior_usage;
        opts.secrets = self.client.secrets.clone();
        let me_spawn = self.me.clone();
        opts.on_spawn = Some(Arc::new(move |info: &SpawnInfo| {
            let _ = me_spawn.cast(SessionMessage::Spawned { info: info.clone() });
        }));
        opts
    }

    /// Run the turn on a warm process, with the turn's asker and steer inbox (kept for a run on
    /// another process when this one had ended before the turn reached it).
    async fn run_on(
        &self,
        process: &mut WarmProcess,
        wanted: ThreadWanted,
        t: &WarmTurn,
        opts: &RunOptions,
    ) -> TurnOutcome {
        let mut ctl = std::mem::take(&mut *self.control.lock().unwrap_or_else(|p| p.into_inner()));
        let outcome = process
            .run_turn(wanted, t, opts, &mut ctl, self.on_event())
            .await;
        *self.control.lock().unwrap_or_else(|p| p.into_inner()) = ctl;
        outcome
    }

    /// Every event: a thread id goes to the actor (stored at once), a description to the
    /// caller's progress, redacted.
    fn on_event(&self) -> impl FnMut(&Event) + Send + use<> {
        let me_ev = self.me.clone();
        let secrets = self.client.secrets.clone();
        let progress = self.progress.clone();
        move |ev: &Event| {
            if let Event::ThreadStarted { thread_id } = ev
                && let Ok(thread) = ThreadId::parse(thread_id)
            {
                let _ = me_ev.cast(SessionMessage::ThreadStarted { thread });
            }
            if let Event::TurnStarted = ev {
                let _ = me_ev.cast(SessionMessage::TurnRunning);
            }
            if let (Some(p), Some(line)) = (&progress, describe(ev)) {
                p(secrets.redact(&line).into_owned());
            }
        }
    }
}

/// Run codex for a turn: its process and thread id reported to the actor as they appear, its
/// events as progress; then what codex recorded of the turn.
async fn run_turn(
    turn: &TurnEnv<'_>,
    spec: SpawnSpec,
) -> Result<(TurnOutcome, Option<TurnContext>)> {
    let outcome = run(spec, turn.options(), turn.on_event()).await?;
    log_finished(&outcome);
    let recorded = outcome
        .output
        .thread_id
        .and_then(|t| last_turn_context(&turn.client.codex_home, &t));
    Ok((outcome, recorded))
}

fn log_finished(outcome: &TurnOutcome) {
    tracing::info!(
        ending = %outcome.ending,
        duration_ms = outcome.output.duration.as_millis() as u64,
        commands = outcome.output.commands.len(),
        "turn finished"
    );
}

/// Run a turn on the session's warm app-server: the one it has when it was started the same
/// way (same client environment, CODEX_HOME, binary and pins) and may be reused, else a new
/// one (the old one closed first). Hands the process back when it may serve the next turn.
async fn run_warm(
    turn: &TurnEnv<'_>,
    warm: Option<WarmProcess>,
    server: SpawnSpec,
    t: WarmTurn,
    wanted: ThreadWanted,
) -> (
    Result<(TurnOutcome, Option<TurnContext>)>,
    Option<WarmProcess>,
) {
    let mut opts = turn.options();
    let key = key_of(&server);
    // the session's own process, when it was started the same way and is alive
    let reused = match warm {
        Some(mut w) => {
            if w.reusable() && w.key() == &key && !w.exited() {
                Some(w)
            } else {
                w.close().await;
                None
            }
        }
        None => None,
    };
    let process = match reused {
        Some(mut w) => {
            let outcome = turn.run_on(&mut w, wanted, &t, &opts).await;
            let ended = matches!(
                outcome.ending,
                Ending::Failed {
                    kind: FailureKind::Crashed,
                    ..
                }
            );
            if w.reusable() || w.accepted() || !ended {
                return conclude(turn, w, outcome);
            }
            // it had ended (killed, crashed) before the turn reached it: a new one runs it
            tracing::info!("the warm codex app-server had ended; starting a new one");
            None
        }
        None => None,
    };
    let process = match process {
        Some(w) => w,
        None => {
            // a spare started the same way for this directory and client: no start-up wait;
            // then the next spare starts (a host's next new session here finds one too)
            if let Some(w) = turn.shared.warm.take_spare(&key) {
                crate::actors::warm::refill(turn.shared, server.clone());
                let _ = turn.me.cast(SessionMessage::Spawned {
                    info: w.info().clone(),
                });
                return finish_warm(turn, w, wanted, t, &opts).await;
            }
            let t0 = Instant::now();
            // the start-up counts against the call's timeout
            let spawned = tokio::select! {
                biased;
                _ = turn.cancel.cancelled() => Err(Error::Cancelled { partial: None }),
                _ = tokio::time::sleep(turn.timeout) => Err(Error::TimedOut {
                    after: turn.timeout,
                    partial: None,
                }),
                w = WarmProcess::spawn(&server, opts.on_spawn.clone()) => w,
            };
            tracing::debug!(
                spawn_ms = t0.elapsed().as_millis() as u64,
                "warm process start"
            );
            match spawned {
                Ok(w) => {
                    if !turn.shared.warm.known() {
                        turn.shared.warm.record(Ok(()));
                    }
                    crate::actors::warm::refill(turn.shared, server.clone());
                    // what is left of the call's time
                    opts.timeout = turn
                        .timeout
                        .saturating_sub(t0.elapsed())
                        .max(Duration::from_millis(1));
                    w
                }
                Err(e @ (Error::Cancelled { .. } | Error::TimedOut { .. })) => {
                    return (Err(e), None);
                }
                // the binary's app-server failed to start or to answer: this turn, and the
                // next ones, run with codex exec (the details go to the log only, redacted
                // for this client: other clients see the bare reason)
                Err(e @ (Error::Codex { .. } | Error::Process(_))) => {
                    tracing::warn!(
                        error = %turn.client.secrets.redact(&redact(&e.to_string())),
                        "codex app-server did not start"
                    );
                    turn.shared.warm.record(Err(
                        "codex app-server did not start or answer (the server log says why)".into(),
                    ));
                    let resume = match wanted {
                        ThreadWanted::Resume(t) => Some(t),
                        ThreadWanted::Start => None,
                    };
                    let spec = build_turn(&turn.client.common_for(false), t.into_request(resume));
                    return match spec {
                        Ok(spec) => (run_turn(turn, spec).await, None),
                        Err(e) => (Err(e), None),
                    };
                }
                // the session's directory changed under it, or the machine is out of processes:
                // this turn fails, the backend stays
                Err(e) => return (Err(e), None),
            }
        }
    };
    finish_warm(turn, process, wanted, t, &opts).await
}

/// Run the turn on `process` and hand the process back when it may serve the next turn.
async fn finish_warm(
    turn: &TurnEnv<'_>,
    mut process: WarmProcess,
    wanted: ThreadWanted,
    t: WarmTurn,
    opts: &RunOptions,
) -> (
    Result<(TurnOutcome, Option<TurnContext>)>,
    Option<WarmProcess>,
) {
    let outcome = turn.run_on(&mut process, wanted, &t, opts).await;
    conclude(turn, process, outcome)
}

/// A warm turn's answer (with what codex recorded of it), and the process when it may serve
/// the next turn.
fn conclude(
    turn: &TurnEnv<'_>,
    process: WarmProcess,
    outcome: TurnOutcome,
) -> (
    Result<(TurnOutcome, Option<TurnContext>)>,
    Option<WarmProcess>,
) {
    log_finished(&outcome);
    let recorded = outcome
        .output
        .thread_id
        .and_then(|t| last_turn_context(&turn.client.codex_home, &t));
    let keep = process.reusable().then_some(process);
    (Ok((outcome, recorded)), keep)
}

/// Check what codex recorded against what was asked: approval `never`, reviewer `user`, and
/// the sandbox level. A mismatch fails the call closed.
pub fn check_recorded(
    asked: SandboxLevel,
    recorded: &TurnContext,
    may_ask: bool,
) -> std::result::Result<(), String> {
    // `on-request` only for a turn whose questions go to the person who started it
    let approval_ok = recorded.approval_policy == "never"
        || (may_ask && recorded.approval_policy == "on-request");
    let ok =
        approval_ok && recorded.approvals_reviewer == "user" && recorded.sandbox == asked.as_arg();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "codex ran this turn with sandbox `{}`, approval `{}`, reviewer `{}`, but the bridge asked \
             for sandbox `{}`, approval `{}`, reviewer `user`; the result is withheld",
            recorded.sandbox,
            recorded.approval_policy,
            recorded.approvals_reviewer,
            asked.as_arg(),
            if may_ask {
                "never` or `on-request"
            } else {
                "never"
            }
        ))
    }
}

/// Fold a finished turn into the record, store it (flushed), and answer the caller.
async fn finish(myself: &ActorRef<SessionMessage>, st: &mut SessionState, f: Finished) {
    let store = &st.shared.store;
    match f.warm {
        // the warm app-server stays on record (for the crash sweep) while it lives
        Some(w) => {
            st.warm = Some(w);
            st.shared.warm.idle(&st.id, myself);
        }
        None => {
            let _ = store.clear_inflight(&st.id);
            st.shared.warm.release(&st.id);
        }
    }
    let Some(rec) = st.record.as_mut() else {
        let _ = f.reply.send(Err(Error::SessionFailed(
            "the session was closed during the turn".into(),
        )));
        return;
    };
    let report = match f.result {
        Err(e) => {
            rec.last_status = Some(match e {
                Error::Cancelled { .. } => TurnStatus::Cancelled,
                _ => TurnStatus::Failed,
            });
            rec.last_error = Some(redact(&e.to_string()).into_owned());
            Err(e)
        }
        Ok((outcome, recorded)) => Ok(fold(rec, &st.id, &f.call, f.queued, outcome, recorded)),
    };
    rec.last_used_ms = now_ms();
    let saved = store.put(rec).and(store.flush().await);
    let record = rec.clone();
    let _ = f.reply.send(match (report, saved) {
        (Ok(mut r), Ok(())) => {
            r.record = Some(record);
            Ok(r)
        }
        (Ok(_), Err(e)) => Err(e.into()),
        (Err(e), _) => Err(e),
    });
}

/// Fold a turn codex ran into the session's record (after checking what codex recorded of it
/// against what was asked: a mismatch fails the turn closed) and make the caller's report.
fn fold(
    rec: &mut SessionRecord,
    id: &SessionId,
    call: &CallMeta,
    queued: Duration,
    mut outcome: TurnOutcome,
    recorded: Option<TurnContext>,
) -> TurnReport {
    if let (Ending::Completed, Some(ctx)) = (&outcome.ending, &recorded)
        && let Err(msg) = check_recorded(call.sandbox, ctx, call.may_ask)
    {
        tracing::error!(session = %id, "{msg}");
        outcome.ending = Ending::Failed {
            kind: FailureKind::PolicyMismatch,
            message: msg,
        };
    }
    if let Some(t) = outcome.output.thread_id {
        if call.reset || rec.thread_id.as_deref() != Some(t.to_string().as_str()) {
            rec.thread_usage = Default::default();
        }
        rec.thread_id = Some(t.to_string());
    }
    if let Some(u) = outcome.output.turn_usage {
        rec.usage = rec.usage.plus(&u);
    }
    if let Some(u) = outcome.output.thread_usage {
        rec.thread_usage = u;
    }
    // the model codex ran with, as it recorded it (an operator override or codex's own
    // config may have chosen it), else the one asked for
    let model = recorded
        .as_ref()
        .and_then(|r| r.model.clone())
        .or_else(|| call.model.clone());
    if let Some(m) = &model {
        rec.model = Some(m.clone());
    }
    rec.turn_count += 1;
    rec.last_status = Some(match &outcome.ending {
        Ending::Completed => TurnStatus::Completed,
        Ending::TimedOut { .. } => TurnStatus::TimedOut,
        Ending::Cancelled => TurnStatus::Cancelled,
        Ending::Failed { .. } | Ending::OutputCapExceeded { .. } => TurnStatus::Failed,
    });
    rec.last_error = match &outcome.ending {
        Ending::Completed => None,
        Ending::Failed { message, .. } => Some(message.chars().take(500).collect()),
        other => Some(other.to_string()),
    };
    TurnReport {
        session_id: id.clone(),
        resumed: call.resumed,
        created: call.created,
        outcome,
        queued,
        sandbox: call.sandbox,
        recorded,
        model,
        record: None,
    }
}
