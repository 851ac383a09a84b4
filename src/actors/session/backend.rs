//! Who runs a session's turns and forks: the seam between the session actor and codex.
//!
//! The actor prepares a turn (checked once, its backend chosen once: a [`Plan`]) and hands it
//! to a [`Driver`] in the turn's task; the driver runs it to its end and gives back the outcome
//! and, on the app-server backend, the warm process when it may serve the next turn. The real
//! driver ([`Codex`]) runs `codex exec` or the session's `codex app-server`; the unit tests put
//! a fake one in its place, so the actor's queue, cancel, close and fork are tested without a
//! codex binary.

use futures::future::BoxFuture;

use super::driver::{Driver, ForkSpec, Invocation, Plan, TurnDriver, TurnEnv};
use super::message::TurnRun;
use super::task::exec_turn;
use super::warm::warm_turn;
use crate::actors::shared::Shared;
use crate::codex::process::{TurnControl, WarmProcess};
use crate::error::{Error, Result};
use crate::security::ids::ThreadId;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The real driver: `codex exec` for an exec turn, the session's warm `codex app-server` for a
/// warm one (see [`warm_turn`]), a one-off app-server for a fork.
pub(super) struct Codex;

impl Driver for Codex {
    fn run<'a>(
        &'a self,
        turn: &'a TurnEnv<'a>,
        control: &'a mut TurnControl,
        plan: Plan,
        warm: Option<WarmProcess>,
    ) -> BoxFuture<'a, (TurnRun, Option<WarmProcess>)> {
        Box::pin(async move {
            // codex's invocation, assembled from the turn checked once (the prompt moves)
            match plan.invocation(&turn.client.common_for(false)) {
                Invocation::Exec(spec) => {
                    // one writer per thread: the warm process lets go of it first
                    if let Some(w) = warm {
                        w.close().await;
                    }
                    (exec_turn(turn, spec).await, None)
                }
                Invocation::Warm {
                    server,
                    turn: t,
                    wanted,
                } => warm_turn(turn, control, warm, (server, t, wanted)).await,
            }
        })
    }

    fn fork<'a>(
        &'a self,
        fork: ForkSpec,
        shared: &'a Arc<Shared>,
    ) -> BoxFuture<'a, Result<ThreadId>> {
        Box::pin(async move {
            let ForkSpec {
                server,
                thread,
                cwd,
                model,
                timeout,
            } = fork;
            let cancel = CancellationToken::new();
            let _slot = shared
                .limiter
                .acquire(shared.queue_timeout, &cancel, |_| {})
                .await?;
            // the fork's one-off process counts against max_warm like any other
            let t0 = Instant::now();
            let place = shared
                .warm
                .slot(timeout, Duration::ZERO, &cancel)
                .await
                .ok_or_else(|| {
                    Error::Busy(format!(
                        "every warm codex process (max_warm = {}) is busy; fork once a turn has \
                         ended",
                        shared.warm.max()
                    ))
                })?;
            let left = timeout.saturating_sub(t0.elapsed());
            // on record for the takeover sweep while it lives, like every process
            let spawned = crate::actors::inflight::Recorded::spawn(&server, shared.store.clone());
            let mut process =
                tokio::time::timeout(left, spawned)
                    .await
                    .map_err(|_| Error::TimedOut {
                        after: timeout,
                        partial: None,
                    })??;
            process.process().hold(place);
            let forked = process
                .process()
                .fork(thread, &cwd, model.as_deref(), timeout)
                .await;
            process.close().await;
            Ok(forked?)
        })
    }
}

impl Default for TurnDriver {
    fn default() -> Self {
        TurnDriver(Arc::new(Codex))
    }
}
