//! The session actor: holds one conversation's record and owns the codex subprocess of its
//! current turn. It alone writes its session's record (and its `inflight` entry) while it
//! lives; a stored session without a live actor is changed only by the takeover sweep and the
//! expiry, neither of which runs beside a live actor of it. A close always goes through the
//! session's actor (the registry starts one from the record for it), so a close and a turn on
//! one session are serialised by its mailbox.
//!
//! Architecture invariants: a handler never awaits the child (a turn runs in a task that
//! reports back with `TurnFinished`); the actor, not the task, answers the turn's caller, so a
//! close during a turn answers it (`Cancelled`); turns on one session run one at a time (later
//! calls wait in a queue, or fail at once when the caller asked not to wait); the record never
//! holds a sandbox level. [`TurnGuard`] kills the turn's processes and frees its slot when the
//! state is dropped, because ractor skips `post_stop` when an actor panics or is killed.
//!
//! The turn itself is run by a [`backend::Driver`] with one call (`Shared::backends`: codex,
//! or in the unit tests of `tests` a fake that runs no process). Files: `prepare` (a call made
//! ready, the backend chosen once), `run` (the turn's task), `warm_run` (the real driver's warm
//! path), `finish` (the record after a turn), `queue`, `steer`, `fork`, `close`.

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
use crate::actors::{ClientContext, Shared, TurnCall, TurnReport};
use crate::codex::argv::{
    SandboxLevel, SpawnSpec, TurnRequest, WarmTurn, build_app_server, build_turn, build_warm_turn,
};
use crate::codex::events::{Event, FailureKind, Usage, describe};
use crate::codex::process::{
    Ending, ProcessError, RunOptions, SpawnInfo, Steer, ThreadWanted, TurnControl, TurnOutcome,
    WarmProcess, key_of, run,
};
use crate::codex::rollout::{TurnContext, last_turn_context};
use crate::config::Backend;
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::{Confined, Kind};
use crate::security::redact::redact;
use crate::store::{SessionRecord, TurnStatus, now_ms};

mod backend;
mod close;
mod finish;
mod fork;
mod prepare;
mod queue;
mod run;
mod steer;
mod warm_run;

pub use backend::Backends;
use backend::*;
use close::*;
pub use finish::check_recorded;
use finish::*;
use fork::*;
pub(crate) use prepare::compose;
use prepare::*;
use queue::*;
use run::*;
use steer::*;
use warm_run::*;

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
    /// The turn's caller, answered by the actor (when the task reports back, or when a close
    /// ends the turn), never by the task.
    reply: Option<oneshot::Sender<Result<TurnReport>>>,
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
    /// The fork's task, aborted with the state (its one-off process dies with it).
    fork_task: Option<tokio::task::AbortHandle>,
    /// The session was closed: the actor drains its mailbox and stops (see [`closed`]).
    closed: bool,
    /// How the warm pool asks this actor to close its idle process (`CloseWarm`).
    closer: crate::actors::warm::Closer,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        // a warm process dropped here is killed with everything it started
        self.warm = None;
        self.shared.warm.release(&self.id);
        if let Some(t) = &self.idle_timer {
            t.abort();
        }
        if let Some(f) = &self.fork_task {
            f.abort();
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
            fork_task: None,
            closed: false,
            closer: {
                let me = myself.clone();
                Arc::new(move || {
                    let _ = me.cast(SessionMessage::CloseWarm);
                })
            },
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
        if st.closed {
            closed(&st.id, msg);
            return Ok(());
        }
        if !matches!(msg, SessionMessage::IdleCheck | SessionMessage::Get { .. }) {
            st.last_activity = Instant::now();
        }
        match msg {
            SessionMessage::StartTurn { call, reply } => turn_asked(&myself, st, call, reply).await,
            SessionMessage::ThreadStarted { thread } => thread_started(st, thread).await,
            SessionMessage::Spawned { info } => {
                let t = crate::actors::inflight_of(info);
                if let Err(e) = st.shared.store.put_inflight(&st.id, &t) {
                    tracing::error!(error = %e, "could not record the turn in flight");
                }
                let _ = st.shared.store.flush().await;
            }
            SessionMessage::TurnFinished { finished } => {
                let reply = st.current.take().and_then(|mut g| g.reply.take());
                st.steer = None;
                finish(st, *finished, reply).await;
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
                st.fork_task = None;
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

/// A call for a turn: started now when the session is free, else queued behind the running
/// turn (or the fork), or refused at once when it could never run.
async fn turn_asked(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    call: Box<TurnCall>,
    reply: oneshot::Sender<Result<TurnReport>>,
) {
    if st.shared.fault_injection && call.prompt == PANIC_PROMPT {
        panic!("fault injection: session actor panics");
    }
    if st.current.is_none() && !st.forking {
        start(myself, st, call, reply, Instant::now()).await;
        return;
    }
    // a call that can never run is refused now, not after the running turn
    let common = call
        .client
        .as_ref()
        .map_or(&st.shared.common, |c| &c.common);
    let checked =
        crate::codex::argv::check_call(common, &call.prompt, call.model.as_deref(), call.sandbox);
    match checked {
        Ok(()) => queue(st, call, reply),
        Err(e) => {
            let _ = reply.send(Err(e));
        }
    }
}

/// Codex reported the turn's thread: stored (flushed) at once, so a crash can still resume it.
async fn thread_started(st: &mut SessionState, thread: ThreadId) {
    if let Some(rec) = &mut st.record
        && rec.thread_id != Some(thread)
    {
        rec.thread_id = Some(thread);
        if let Err(e) = st.shared.store.put(rec) {
            tracing::error!(error = %e, "could not store the thread id");
        }
        let _ = st.shared.store.flush().await;
    }
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

/// Close the warm app-server between turns (EOF first), forget its process record, and give
/// its place in the cap back.
async fn close_warm(st: &mut SessionState) {
    if let Some(w) = st.warm.take() {
        st.shared.warm.release(&st.id);
        w.close().await;
        let _ = st.shared.store.clear_inflight(&st.id);
    }
}

#[cfg(test)]
mod tests;
