//! A prepared turn's task: a global slot, then the driver's one call, then `TurnFinished`. The
//! actor keeps the caller's reply ([`TurnGuard`]); the task never answers it.

use super::driver::TurnEnv;
use super::message::{Finished, SessionMessage};
use super::prepare::Prepared;
use super::state::{Phase, SessionState, SteerInbox, TurnGuard};
use crate::actors::calls::TurnCall;
use crate::actors::client::Progress;
use crate::actors::report::TurnReport;
use crate::codex::events::Event;
use crate::codex::process::TurnControl;
use crate::codex::process::{SpawnHook, SpawnInfo};
use crate::error::{Error, Result};
use crate::turn::backend::{OnEvent, Sink};
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
    reply: oneshot::Sender<Result<TurnReport>>,
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
            // the time queued counts from the call's arrival (the session's queue too)
            let slot = shared
                .limiter
                .queue_turn(shared.queue_timeout, &task_cancel, progress.as_ref())
                .await
                .map(|(slot, _)| slot);
            let queued = since.elapsed();
            let sink = sink_of(&me, client.secrets.clone(), progress);
            let common = client.common_for(false);
            let env = TurnEnv {
                shared: &shared,
                client: &client,
                common: &common,
                timeout,
                prior_usage,
                cancel: &task_cancel,
                sink: &sink,
            };
            let (result, backend) = match (slot, backend) {
                (Err(e), backend) => (Err(e), backend),
                // the backend is the state's between turns, and the actor runs one turn at a
                // time: never missing (a session that lost it cannot run a turn)
                (Ok(_), None) => (
                    Err(Error::SessionFailed(
                        "the session's backend is busy with another turn".into(),
                    )),
                    None,
                ),
                (Ok(slot), Some(mut backend)) => {
                    let result = backend.run(&env, &mut control, plan).await;
                    drop(slot);
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

/// The sink of a session turn's events ([`Sink`]): a process spawned and a thread started go
/// to the session's actor (on record, stored at once), the turn's start opens it to steers, a
/// warm turn that runs with `codex exec` after all closes it to them, and each event's
/// description goes to the caller's progress, redacted.
pub(super) fn sink_of(
    me: &ActorRef<SessionMessage>,
    secrets: crate::security::redact::ClientSecrets,
    progress: Option<Progress>,
) -> Sink {
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
    Sink {
        on_spawn,
        progress,
        secrets,
        on_event: Some(on_event),
        on_exec: Some(Arc::new(move || {
            let _ = exec.cast(SessionMessage::RunsWithExec);
        })),
    }
}
