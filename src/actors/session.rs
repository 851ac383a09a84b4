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
use crate::actors::{ClientContext, Shared, TurnCall, TurnReport, stored_thread};
use crate::codex::argv::{SandboxLevel, SpawnSpec, TurnRequest, build_turn};
use crate::codex::events::{Event, FailureKind, Usage, describe};
use crate::codex::process::{Ending, RunOptions, SpawnInfo, TurnOutcome, run};
use crate::codex::rollout::{TurnContext, last_turn_context};
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
}

/// What a turn task sends back.
pub struct Finished {
    result: Result<(TurnOutcome, Option<TurnContext>)>,
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
}

impl Drop for SessionState {
    fn drop(&mut self) {
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
        })
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
                if st.current.is_some() {
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
                finish(st, *finished).await;
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
            SessionMessage::IdleCheck => {
                if st.current.is_none()
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
    match prepare(st, &mut call).await {
        Ok(prepared) => launch(myself, st, &call, prepared, reply, since),
        Err(e) => {
            let _ = reply.send(Err(e));
        }
    }
}

/// A turn ready to run: codex's invocation and what the actor needs when it ends.
struct Prepared {
    client: Arc<ClientContext>,
    spec: SpawnSpec,
    meta: CallMeta,
    prior_usage: Usage,
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
        WorkDir::Default(_) => {
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
    }
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
async fn prepare(st: &mut SessionState, call: &mut TurnCall) -> Result<Prepared> {
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
    // the prompt moves into the spec (see `build_turn`)
    let spec = build_turn(&client.common_for(false), req)?;

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
    Ok(Prepared {
        meta: CallMeta {
            sandbox: spec.sandbox(),
            model: call.model.clone(),
            resumed: resume.is_some(),
            created,
            reset: call.reset,
        },
        client,
        spec,
        prior_usage,
    })
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
    // one span per turn, with the session id, so a user can follow a call through the logs
    let span = tracing::info_span!("turn", session = %st.id, resumed = prepared.meta.resumed);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let Prepared {
                client,
                spec,
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
            let result = match slot {
                Err(e) => Err(e),
                Ok(slot) => {
                    let run = run_turn(
                        &me,
                        &client,
                        spec,
                        timeout,
                        prior_usage,
                        &task_cancel,
                        progress,
                    );
                    let outcome = run.await;
                    drop(slot);
                    outcome
                }
            };
            let _ = me.cast(SessionMessage::TurnFinished {
                finished: Box::new(Finished {
                    result,
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

/// Run codex for a turn: its process and thread id reported to the actor as they appear, its
/// events as progress; then what codex recorded of the turn.
async fn run_turn(
    me: &ActorRef<SessionMessage>,
    client: &ClientContext,
    spec: SpawnSpec,
    timeout: Duration,
    prior_usage: Usage,
    cancel: &CancellationToken,
    progress: Option<crate::actors::Progress>,
) -> Result<(TurnOutcome, Option<TurnContext>)> {
    let mut opts = RunOptions::new(timeout, client.config.limits);
    opts.cancel = cancel.clone();
    opts.prior_thread_usage = prior_usage;
    opts.secrets = client.secrets.clone();
    let me_spawn = me.clone();
    opts.on_spawn = Some(Arc::new(move |info: &SpawnInfo| {
        let _ = me_spawn.cast(SessionMessage::Spawned { info: info.clone() });
    }));
    let me_ev = me.clone();
    let secrets = client.secrets.clone();
    let on_event = move |ev: &Event| {
        if let Event::ThreadStarted { thread_id } = ev
            && let Ok(thread) = ThreadId::parse(thread_id)
        {
            let _ = me_ev.cast(SessionMessage::ThreadStarted { thread });
        }
        if let (Some(p), Some(line)) = (&progress, describe(ev)) {
            p(secrets.redact(&line).into_owned());
        }
    };
    let outcome = run(spec, opts, on_event).await?;
    tracing::info!(
        ending = %outcome.ending,
        duration_ms = outcome.output.duration.as_millis() as u64,
        commands = outcome.output.commands.len(),
        "turn finished"
    );
    let recorded = outcome
        .output
        .thread_id
        .and_then(|t| last_turn_context(&client.codex_home, &t));
    Ok((outcome, recorded))
}

/// Check what codex recorded against what was asked: approval `never`, reviewer `user`, and
/// the sandbox level. A mismatch fails the call closed.
pub fn check_recorded(
    asked: SandboxLevel,
    recorded: &TurnContext,
) -> std::result::Result<(), String> {
    let ok = recorded.approval_policy == "never"
        && recorded.approvals_reviewer == "user"
        && recorded.sandbox == asked.as_arg();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "codex ran this turn with sandbox `{}`, approval `{}`, reviewer `{}`, but the bridge asked \
             for sandbox `{}`, approval `never`, reviewer `user`; the result is withheld",
            recorded.sandbox,
            recorded.approval_policy,
            recorded.approvals_reviewer,
            asked.as_arg()
        ))
    }
}

/// Fold a finished turn into the record, store it (flushed), and answer the caller.
async fn finish(st: &mut SessionState, f: Finished) {
    let store = &st.shared.store;
    let _ = store.clear_inflight(&st.id);
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
        && let Err(msg) = check_recorded(call.sandbox, ctx)
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
