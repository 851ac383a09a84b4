//! A session actor's state ([`SessionState`]), its arguments, the running turn's guard and
//! the warm turn's steer inbox.

use super::driver::TurnDriver;
use crate::actors::calls::TurnCall;
use crate::actors::calls::TurnReport;
use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::codex::process::Steer;
use crate::codex::process::WarmProcess;
use crate::error::Error;
use crate::error::Result;
use crate::security::ids::SessionId;
use crate::store::SessionRecord;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Arguments of a session actor.
pub struct SessionArgs {
    pub shared: Arc<Shared>,
    /// What runs its turns and forks.
    pub backends: TurnDriver,
    pub id: SessionId,
    /// The stored record, when the session is known.
    pub record: Option<SessionRecord>,
}

/// The running turn. Dropping it (a stop, a panic, a kill) cancels the turn and aborts its
/// task, whose runner kills codex's process group, descendants and cgroup, and whose slot is
/// released with it.
pub(super) struct TurnGuard {
    pub(super) cancel: CancellationToken,
    pub(super) task: JoinHandle<()>,
    /// The turn's caller, answered by the actor (when the task reports back, or when a close
    /// ends the turn), never by the task.
    pub(super) reply: Option<oneshot::Sender<Result<TurnReport>>>,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.task.abort();
    }
}

/// A session actor's state.
pub struct SessionState {
    pub(super) shared: Arc<Shared>,
    pub(super) backends: TurnDriver,
    pub(super) id: SessionId,
    pub(super) record: Option<SessionRecord>,
    pub(super) current: Option<TurnGuard>,
    pub(super) pending: VecDeque<(Box<TurnCall>, oneshot::Sender<Result<TurnReport>>, Instant)>,
    pub(super) last_activity: Instant,
    pub(super) idle_timer: Option<JoinHandle<()>>,
    /// The warm app-server between turns (during a turn its task holds it).
    pub(super) warm: Option<WarmProcess>,
    /// The running warm turn's steer inbox.
    pub(super) steer: Option<SteerInbox>,
    /// A fork of the thread is being made: turns wait (no turn writes the thread it reads).
    pub(super) forking: bool,
    /// The fork's task, aborted with the state (its one-off process dies with it).
    pub(super) fork_task: Option<tokio::task::AbortHandle>,
    /// The session was closed: the actor drains its mailbox and stops (see [`closed`]).
    pub(super) closed: bool,
    /// How the warm pool asks this actor to close its idle process (`CloseWarm`).
    pub(super) closer: crate::actors::pool::warm::Closer,
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

/// The running warm turn's steer inbox, who started the turn, and whether codex runs it yet.
pub(super) struct SteerInbox {
    pub(super) tx: tokio::sync::mpsc::UnboundedSender<Steer>,
    pub(super) client: Arc<ClientContext>,
    pub(super) running: bool,
}
