//! A session actor's state ([`SessionState`]), its arguments, the running turn's guard and
//! the warm turn's steer inbox.

use super::driver::{SessionBackend, TurnDriver};
use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::calls::Answer;
use crate::calls::TurnCall;
use crate::codex::process::Steer;
use crate::error::{Error, Result};
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
    pub driver: TurnDriver,
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
    pub(super) reply: Option<oneshot::Sender<Result<Answer>>>,
    /// The host that made the call ([`TurnCall::host`]).
    pub(super) host: Option<String>,
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
    pub(super) driver: TurnDriver,
    pub(super) id: SessionId,
    pub(super) record: Option<SessionRecord>,
    /// What the session is doing: nothing, a turn, a fork, or it was closed.
    pub(super) phase: Phase,
    pub(super) pending: VecDeque<(Box<TurnCall>, oneshot::Sender<Result<Answer>>, Instant)>,
    pub(super) last_activity: Instant,
    pub(super) idle_timer: Option<JoinHandle<()>>,
    /// The session's backend between turns (during a turn its task holds it), with its warm
    /// app-server if it keeps one.
    pub(super) backend: Option<Box<dyn SessionBackend>>,
    /// The thread's rollout as the session's last turn left it (none before the first turn
    /// since the server started).
    pub(super) rollout: Option<RolloutMark>,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        if let Some(t) = &self.idle_timer {
            t.abort();
        }
        if let Phase::OneOff { task: Some(f) } | Phase::Closed { fork: Some(f) } = &self.phase {
            f.abort();
        }
        for (_, reply, _) in self.pending.drain(..) {
            let _ = reply.send(Err(Error::SessionFailed(
                "the session stopped before this turn started".into(),
            )));
        }
    }
}

/// What a session actor is doing: one of these at a time.
pub(super) enum Phase {
    /// No turn and no fork: a call runs at once.
    Idle,
    /// A turn runs (its guard), and on the app-server its steer inbox.
    Turn {
        guard: TurnGuard,
        steer: Option<SteerInbox>,
    },
    /// A one-off app-server works on the thread (a fork, a rename: its task, once spawned):
    /// turns wait, since no turn writes the thread it reads or writes.
    OneOff {
        task: Option<tokio::task::AbortHandle>,
    },
    /// The session was closed: the actor drains its mailbox and stops (see `close::closed`).
    /// A fork or rename it was making is aborted with the state (its one-off process dies
    /// with it).
    Closed {
        fork: Option<tokio::task::AbortHandle>,
    },
}

impl Phase {
    /// Whether a turn runs.
    pub(super) fn running(&self) -> bool {
        matches!(self, Phase::Turn { .. })
    }

    /// Whether a call may start now (no turn, no fork, not closed).
    pub(super) fn idle(&self) -> bool {
        matches!(self, Phase::Idle)
    }

    /// The running turn's steer inbox, if it has one.
    pub(super) fn steer_mut(&mut self) -> Option<&mut SteerInbox> {
        match self {
            Phase::Turn { steer, .. } => steer.as_mut(),
            _ => None,
        }
    }
}

/// The running warm turn's steer inbox, who started the turn, and whether codex runs it yet.
pub(super) struct SteerInbox {
    pub(super) tx: tokio::sync::mpsc::UnboundedSender<Steer>,
    pub(super) client: Arc<ClientContext>,
    pub(super) running: bool,
}

/// A thread's rollout file and its length when a turn of the session ended: whether someone
/// else (codex's own app) wrote the thread since.
pub(super) struct RolloutMark {
    pub(super) path: std::path::PathBuf,
    pub(super) len: u64,
}

impl RolloutMark {
    /// The mark of `path` now; none when it cannot be read.
    pub(super) fn of(path: std::path::PathBuf) -> Option<RolloutMark> {
        let len = std::fs::metadata(&path).ok()?.len();
        Some(RolloutMark { path, len })
    }

    /// Whether the file is as the mark says (one stat).
    pub(super) fn unchanged(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.len() == self.len)
    }
}
