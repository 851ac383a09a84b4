//! A prepared turn's task: a global slot, then the driver's one call, then `TurnFinished`. The
//! actor keeps the caller's reply ([`TurnGuard`]); the task never answers it.

use super::driver::{Prepared, Sink, TurnEnv};
use super::message::{Finished, SessionMessage, TurnEnd, TurnRun};
use super::state::{Phase, SessionState, SteerInbox, TurnGuard};
use crate::actors::calls::TurnCall;
use crate::actors::report::TurnReport;
use crate::codex::argv::SpawnSpec;
use crate::codex::process::{TurnControl, TurnOutcome, run};
use crate::codex::rollout::last_turn_context;
use crate::config::Backend;
use crate::error::Result;
use ractor::ActorRef;
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
    let backends = st.backends.clone();
    let me = myself.clone();
    let progress = call.progress.clone();
    let timeout = call.timeout;
    let task_cancel = cancel.clone();
    let warm = st.warm.take();
    let session = st.id.clone();
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
                session: &session,
                shared: &shared,
                client: &client,
                timeout,
                prior_usage,
                cancel: &task_cancel,
                sink: Sink {
                    me: me.clone(),
                    secrets: client.secrets.clone(),
                    progress,
                },
            };
            let (result, warm) = match slot {
                Err(e) => (Err(e), warm),
                Ok(slot) => {
                    let outcome = backends.0.run(&turn, &mut control, plan, warm).await;
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

/// Run codex for a turn: its process and thread id reported to the actor as they appear, its
/// events as progress; then what codex recorded of the turn.
pub(super) async fn exec_turn(turn: &TurnEnv<'_>, spec: SpawnSpec) -> TurnRun {
    let outcome = run(spec, turn.options(), turn.sink.events()).await?;
    log_finished(&outcome);
    let recorded = outcome
        .output
        .thread_id
        .and_then(|t| last_turn_context(&turn.client.codex_home, &t));
    Ok(TurnEnd {
        outcome,
        recorded,
        on: Backend::Exec,
    })
}

pub(super) fn log_finished(outcome: &TurnOutcome) {
    tracing::info!(
        ending = %outcome.ending,
        duration_ms = outcome.output.duration.as_millis() as u64,
        commands = outcome.output.commands.len(),
        "turn finished"
    );
}
