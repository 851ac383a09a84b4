//! A prepared turn's task: the turn entered (a global slot, its environment and sink:
//! [`TurnEnv::enter`]), then the driver's one call, then `TurnFinished`. The
//! actor keeps the caller's reply ([`TurnGuard`]); the task never answers it.

use super::message::{Finished, SessionMessage};
use super::prepare::Prepared;
use super::state::{Phase, SessionState, SteerInbox, TurnGuard};
use crate::calls::Answer;
use crate::calls::TurnCall;
use crate::codex::events::Event;
use crate::codex::process::TurnControl;
use crate::codex::process::{SpawnHook, SpawnInfo};
use crate::error::{Error, Result};
use crate::turn::backend::{OnEvent, SinkHooks, TurnAsk, TurnEnv};
use ractor::ActorRef;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// Run a prepared turn in a task that reports back with `TurnFinished`.
///
/// One piece (about 80 lines): what the task takes from the actor's state is taken here, before
/// it is spawned, and the task's body (a slot, the driver's one call, the report) is a straight
/// line; split, the halves would pass a dozen values between them.
pub(super) fn launch(
    myself: &ActorRef<SessionMessage>,
    st: &mut SessionState,
    call: &TurnCall,
    prepared: Prepared,
    reply: oneshot::Sender<Result<Answer>>,
    since: Instant,
) {
    let cancel = call.cancel.child_token();
    let shared = st.shared.clone();
    let backend = st.backend.take();
    let me = myself.clone();
    let progress = call.progress.clone();
    let timeout = call.timeout;
    let task_cancel = cancel.clone();
    let (mut control, steer) = control_of(call, &prepared);
    // one span per turn, with the session id, so a user can follow a call through the logs
    let span = tracing::info_span!("turn", session = %st.id, resumed = prepared.meta.resumed);
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let Prepared {
                client,
                plan,
                meta,
                prior_usage,
            } = prepared;
            let ask = TurnAsk {
                common: client.common_for(false),
                timeout,
                prior_usage,
                progress,
                hooks: hooks_of(&me),
            };
            let entered = TurnEnv::enter(&shared, &client, &task_cancel, ask).await;
            // the time queued counts from the call's arrival (the session's queue too)
            let queued = since.elapsed();
            let (result, backend) = match (entered, backend) {
                (Err(e), backend) => (Err(e), backend),
                // the backend is the state's between turns, and the actor runs one turn at a
                // time: never missing (a session that lost it cannot run a turn)
                (Ok(_), None) => (
                    Err(Error::SessionFailed(
                        "the session's backend is busy with another turn".into(),
                    )),
                    None,
                ),
                (Ok((env, _)), Some(mut backend)) => {
                    let result = backend.run(&env, &mut control, plan).await;
                    drop(env);
                    (result, Some(backend))
                }
            };
            let _ = me.cast(SessionMessage::TurnFinished {
                finished: Box::new(Finished {
                    result,
                    backend,
                    queued,
                    call: meta,
                }),
            });
        },
        span,
    ));
    st.phase = Phase::Turn {
        guard: TurnGuard {
            cancel,
            task,
            reply: Some(reply),
            host: call.host.clone(),
        },
        steer,
    };
}

/// A turn's control handle: a warm turn can be steered (its inbox, kept by the actor for the
/// client that started it, is returned beside it) and asks its caller's person when it can;
/// an exec turn has neither.
fn control_of(call: &TurnCall, prepared: &Prepared) -> (TurnControl, Option<SteerInbox>) {
    let mut control = TurnControl::default();
    if !prepared.plan.on_app_server() {
        return (control, None);
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    control.steers = Some(rx);
    control.asker = call.asker.clone();
    let inbox = SteerInbox {
        tx,
        client: prepared.client.clone(),
        running: false,
    };
    (control, Some(inbox))
}

/// Who hears of a session turn's events besides its progress ([`SinkHooks`]): a process
/// spawned and a thread started go to the session's actor (on record, stored at once), the
/// turn's start opens it to steers, and a warm turn that runs with `codex exec` after all
/// closes it to them.
pub(super) fn hooks_of(me: &ActorRef<SessionMessage>) -> SinkHooks {
    let spawned = me.clone();
    let on_spawn: SpawnHook = Arc::new(move |info: &SpawnInfo| {
        let _ = spawned.cast(SessionMessage::Spawned { info: info.clone() });
    });
    let events = me.clone();
    let on_event: OnEvent = Arc::new(move |ev: &Event| {
        if let Event::ThreadStarted { thread_id } = ev {
            let _ = events.cast(SessionMessage::ThreadStarted { thread: *thread_id });
        }
        if let Event::TurnStarted = ev {
            let _ = events.cast(SessionMessage::TurnRunning);
        }
    });
    let exec = me.clone();
    SinkHooks {
        on_spawn,
        on_event: Some(on_event),
        on_exec: Some(Arc::new(move || {
            let _ = exec.cast(SessionMessage::RunsWithExec);
        })),
    }
}
