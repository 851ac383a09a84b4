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
//! The turn itself is run by the session's backend ([`driver::SessionBackend`], made by the
//! registry's `TurnDriver`: the one turn path, `codex_driver.rs`, or in the unit tests of
//! `tests` a fake that runs no process) with one call. Files: `prepare` (a call made ready,
//! warm or exec chosen), `launch` (the turn's task), `finish` (the record after a turn:
//! `fold_turn`), `queue`, `steer`, `fork`, `close`.

use crate::calls::Answer;
use crate::calls::TurnCall;
use crate::error::{Error, Result};
use crate::security::ids::ThreadId;
use close::{close, close_unheld, close_warm, closed};
use finish::fold_turn;
use fork::{fork, op_done, thread_op};
use launch::launch;
use prepare::prepare;
use queue::queue;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use state::Phase;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use steer::steer;
use tokio::sync::oneshot;

mod close;
mod codex_driver;
pub mod driver;
mod finish;
mod fork;
mod launch;
pub mod message;
mod prepare;
mod queue;
pub mod state;
mod steer;

pub use driver::TurnDriver;
pub use finish::check_recorded;
pub use message::SessionMessage;
pub use state::{SessionArgs, SessionState};

/// The prompt that makes a session actor panic when fault injection is on (tests only).
pub const PANIC_PROMPT: &str = "__codex_mcp_bridge_fault__:panic";

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
        // how the warm pool asks this actor to close its idle process
        let closer = {
            let me = myself.clone();
            Arc::new(move || {
                let _ = me.cast(SessionMessage::CloseWarm);
            })
        };
        let backend = args
            .driver
            .0
            .backend(args.shared.clone(), args.id.clone(), closer);
        let mut args = args;
        forget_gone_worktree(&args.shared, &mut args.record).await;
        Ok(SessionState {
            shared: args.shared,
            backend: Some(backend),
            rollout: None,
            driver: args.driver,
            id: args.id,
            record: args.record,
            phase: Phase::Idle,
            pending: VecDeque::new(),
            last_activity: Instant::now(),
            idle_timer,
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

    /// One piece (about 80 lines): one arm per message, each a call into the module of its
    /// concern or a line or two of state; the match is the actor's table of what it does.
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        st: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        if matches!(st.phase, Phase::Closed { .. }) {
            closed(&st.id, msg);
            return Ok(());
        }
        #[cfg(test)]
        if let SessionMessage::Probe { reply } = msg {
            let _ = reply.send(message::Probe {
                queued: st.pending.len(),
                running: st.phase.running(),
                steerable: st.phase.steer_mut().is_some_and(|s| s.running),
            });
            return Ok(());
        }
        if !matches!(
            msg,
            SessionMessage::IdleCheck
                | SessionMessage::Get { .. }
                | SessionMessage::CredentialsReleased
        ) {
            st.last_activity = Instant::now();
        }
        match msg {
            SessionMessage::StartTurn { call, reply } => turn_asked(&myself, st, call, reply).await,
            SessionMessage::ThreadStarted { thread } => thread_started(st, thread).await,
            SessionMessage::Spawned { info } => {
                crate::actors::inflight::on_record(&st.shared.store, &st.id, info);
                let _ = st.shared.store.flush().await;
            }
            SessionMessage::TurnFinished { finished } => {
                let reply = match std::mem::replace(&mut st.phase, Phase::Idle) {
                    Phase::Turn { mut guard, .. } => guard.reply.take(),
                    other => {
                        st.phase = other;
                        None
                    }
                };
                fold_turn(st, *finished, reply).await;
                // a task's or background turn kept its process past its host: let go now
                close_unheld(st).await;
                start_next(&myself, st).await;
            }
            SessionMessage::Close {
                delete_thread,
                drop_changes,
                client,
                host,
                reply,
            } => {
                let how = (delete_thread, drop_changes, host);
                close(&myself, st, how, client, reply).await
            }
            SessionMessage::Get { reply } => {
                let view = st
                    .record
                    .as_ref()
                    .map(|r| crate::calls::SessionView::of(r, true));
                let _ = reply.send(Ok(view));
            }
            SessionMessage::CloseWarm => {
                if !st.phase.running() {
                    close_warm(st).await;
                }
            }
            SessionMessage::CredentialsReleased => {
                if !st.phase.running() {
                    close_unheld(st).await;
                }
            }
            SessionMessage::Steer {
                text,
                client,
                reply,
            } => steer(st, text, &client, reply),
            SessionMessage::RunsWithExec => {
                if let Phase::Turn { steer, .. } = &mut st.phase {
                    *steer = None;
                }
            }
            SessionMessage::TurnRunning => {
                if let Some(inbox) = st.phase.steer_mut() {
                    inbox.running = true;
                }
            }
            SessionMessage::OneOffDone => {
                if let Phase::OneOff { .. } = st.phase {
                    st.phase = Phase::Idle;
                    start_next(&myself, st).await;
                }
            }
            SessionMessage::Fork {
                client,
                timeout,
                reply,
            } => fork(&myself, st, client, timeout, reply),
            SessionMessage::ThreadOp {
                op,
                client,
                timeout,
                reply,
            } => thread_op(&myself, st, (op, client, timeout), reply).await,
            SessionMessage::OpDone { done, reply } => {
                if let Phase::OneOff { .. } = st.phase {
                    st.phase = Phase::Idle;
                }
                op_done(st, done, reply).await;
                start_next(&myself, st).await;
            }
            #[cfg(test)]
            SessionMessage::Probe { .. } => {}
            SessionMessage::IdleCheck => {
                if st.phase.idle()
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
    reply: oneshot::Sender<Result<Answer>>,
) {
    if st.shared.fault_injection && call.prompt.as_deref() == Some(PANIC_PROMPT) {
        panic!("fault injection: session actor panics");
    }
    if st.phase.idle() {
        start(myself, st, call, reply, Instant::now()).await;
        return;
    }
    // a call that can never run is refused now, not after the running turn
    let common = call
        .client
        .as_ref()
        .map_or(&st.shared.common, |c| &c.common);
    let checked = crate::codex::argv::check_call(common, call.sandbox);
    match checked {
        Ok(()) => queue(st, call, reply),
        Err(e) => {
            let _ = reply.send(Err(e.into()));
        }
    }
}

/// A stored session whose worktree was removed by hand since the server started (found gone
/// when its actor starts): forgotten as at the start ([`crate::actors::worktree::forget_if_gone`]).
async fn forget_gone_worktree(
    shared: &crate::actors::shared::Shared,
    record: &mut Option<crate::store::SessionRecord>,
) {
    if let Some(rec) = record
        && crate::actors::worktree::forget_if_gone(shared, rec).await
    {
        let _ = shared.store.flush().await;
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
        if st.phase.running() {
            break;
        }
    }
}

/// Start a call's turn in a task, or answer it at once with why it cannot run.
async fn start(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    mut call: Box<TurnCall>,
    reply: oneshot::Sender<Result<Answer>>,
    since: Instant,
) {
    match prepare(st, &mut call).await {
        Ok(prepared) => launch(myself, st, &call, prepared, reply, since),
        Err(e) => {
            let _ = reply.send(Err(e));
        }
    }
}

#[cfg(test)]
mod tests;
