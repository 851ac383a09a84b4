//! The real session backend: the one turn path ([`CodexBackend`]) with the session's own
//! warm app-server as its source ([`SessionSource`]); a fork on a one-off app-server.
//!
//! The actor prepares a turn (checked once, its backend chosen once: a [`TurnPlan`]) and hands it
//! to its [`SessionBackend`] in the turn's task; the backend runs it to its end and keeps, on
//! the app-server backend, the warm process when it may serve the next turn. The unit tests
//! put a fake one in its place, so the actor's queue, cancel, close and fork are tested
//! without a codex binary.

use futures::future::BoxFuture;

use super::driver::{Driver, ForkSpec, OpSpec, SessionBackend, TurnDriver, TurnEnv, TurnPlan};
use crate::actors::credentials::Credentials;
use crate::actors::pool::warm::Closer;
use crate::actors::shared::Shared;
use crate::calls::ThreadOp;
use crate::codex::process::TurnControl;
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::turn::backend::source::SessionSource;
use crate::turn::backend::{CodexBackend, Source, TurnRun};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

impl SessionBackend for CodexBackend {
    fn run<'a>(
        &'a mut self,
        env: &'a TurnEnv<'a>,
        control: &'a mut TurnControl,
        plan: TurnPlan,
    ) -> BoxFuture<'a, TurnRun> {
        Box::pin(async move {
            if plan.reload && CodexBackend::holds_process(self) {
                // its loaded thread is not codex's record any more: read again by a new one
                tracing::info!(
                    "the thread was written elsewhere since the last turn; reading it again"
                );
                CodexBackend::close(self).await;
            }
            // codex's invocation, assembled from the turn checked once (the prompt moves)
            let invocation = plan.invocation(&env.common);
            CodexBackend::run(self, env, control, invocation).await
        })
    }

    fn holds_process(&self) -> bool {
        CodexBackend::holds_process(self)
    }

    fn close(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(CodexBackend::close(self))
    }

    fn credentials(&self) -> Credentials {
        CodexBackend::credentials(self)
    }
}

/// The real driver: each session's backend is the one turn path with the session's warm
/// app-server as its source; a fork runs on a one-off app-server.
pub(super) struct Codex;

impl Driver for Codex {
    fn backend(
        &self,
        shared: Arc<Shared>,
        session: SessionId,
        closer: Closer,
    ) -> Box<dyn SessionBackend> {
        Box::new(CodexBackend::new(Source::Session(SessionSource {
            shared,
            id: session,
            closer,
            process: None,
        })))
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
            let (mut process, _slot) = one_off(&server, timeout, shared, "fork").await?;
            let forked = process
                .process()
                .fork(thread, &cwd, model.as_ref(), timeout)
                .await;
            process.close().await;
            Ok(forked?)
        })
    }

    fn thread_op<'a>(
        &'a self,
        op: OpSpec,
        shared: &'a Arc<Shared>,
    ) -> BoxFuture<'a, Result<ThreadOp>> {
        Box::pin(async move {
            let OpSpec {
                server,
                thread,
                cwd,
                op,
                timeout,
            } = op;
            let what = op.verb();
            let (mut process, _slot) = one_off(&server, timeout, shared, what).await?;
            let done = match op {
                ThreadOp::Name(name) => process
                    .process()
                    .set_name(thread, &cwd, &name, timeout)
                    .await
                    .map(|()| ThreadOp::Name(name)),
                ThreadOp::Rewind(turns) => process
                    .process()
                    .rewind(thread, &cwd, turns, timeout)
                    .await
                    .map(|()| ThreadOp::Rewind(turns)),
                ThreadOp::Compact(_) => process
                    .process()
                    .compact(thread, &cwd, timeout)
                    .await
                    .map(ThreadOp::Compact),
            };
            process.close().await;
            Ok(done?)
        })
    }
}

/// A one-off app-server from `server` for work on a thread no turn uses (`what`: a fork, a
/// rename), within `timeout`: a global slot first, then a place under `max_warm` like any
/// other app-server, then the process, on record for the takeover sweep while it lives.
async fn one_off(
    server: &crate::codex::argv::SpawnSpec,
    timeout: Duration,
    shared: &Shared,
    what: &str,
) -> Result<(
    crate::actors::inflight::Recorded,
    crate::turn::limiter::Slot,
)> {
    let cancel = CancellationToken::new();
    let slot = shared
        .limiter
        .acquire(shared.queue_timeout, &cancel, |_| {})
        .await?;
    let t0 = Instant::now();
    let place = shared
        .warm
        .slot(timeout, Duration::ZERO, &cancel)
        .await
        .ok_or_else(|| {
            Error::Busy(format!(
                "every warm codex process (max_warm = {}) is busy; {what} once a turn has ended",
                shared.warm.max()
            ))
        })?;
    let left = timeout.saturating_sub(t0.elapsed());
    let spawned = crate::actors::inflight::Recorded::spawn(server, shared.store.clone());
    let mut process =
        tokio::time::timeout(left, spawned)
            .await
            .map_err(|_| Error::TimedOut {
                after: timeout,
                partial: None,
            })??;
    process.process().hold(place);
    Ok((process, slot))
}

impl Default for TurnDriver {
    fn default() -> Self {
        TurnDriver(Arc::new(Codex))
    }
}
