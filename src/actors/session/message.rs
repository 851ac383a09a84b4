//! The session actor's messages ([`SessionMessage`]) and what a turn's task sends back
//! ([`Finished`]). Names no actor state, so [`crate::actors::shared::Shared`] can name it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::actors::client::ClientContext;
use crate::calls::Answer;
use crate::calls::{SessionView, ThreadOp, TurnCall};
use crate::codex::process::SpawnInfo;
use crate::error::Result;
use crate::plan::values::SandboxLevel;
use crate::security::ids::ThreadId;
use crate::store::SessionRecord;

use super::driver::SessionBackend;

/// Messages to a session actor.
pub enum SessionMessage {
    /// Run a turn (or queue it behind the current one).
    StartTurn {
        call: Box<TurnCall>,
        reply: oneshot::Sender<Result<Answer>>,
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
        /// Remove the session's worktree even while it holds changes not applied.
        drop_changes: bool,
        /// Whose codex deletes the thread.
        client: Arc<ClientContext>,
        /// The host that closes ([`crate::actors::TurnCall::host`]): it ends no turn of
        /// another host; `None`: the operator's own close, which ends any.
        host: Option<String>,
        reply: oneshot::Sender<Result<Option<SessionRecord>>>,
    },
    /// The session's record as the session tools show it (not an activity: it does not keep
    /// the actor alive).
    Get {
        reply: oneshot::Sender<Result<Option<SessionView>>>,
    },
    /// Stop if idle long enough.
    IdleCheck,
    /// Close the warm app-server process if the session is idle (the cap on warm processes
    /// was reached and this session was the least recently used).
    CloseWarm,
    /// A host's last connection is gone: close the warm app-server between turns when it was
    /// started with credentials nobody holds now (a running turn keeps it until it ends).
    CredentialsReleased,
    /// Add a message to the running turn (`turn/steer`); answered once codex took it.
    Steer {
        text: crate::security::prompt::Prompt,
        /// Who asks: only the client that started the turn may steer it.
        client: Arc<ClientContext>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Codex started the running turn (`turn/started`): it can take a steer from now on.
    TurnRunning,
    /// The running turn went to `codex exec` (no app-server could take it): it takes no steer.
    RunsWithExec,
    /// A one-off app-server's work on the session's thread (a fork, a rename) ended: turns may
    /// run again.
    OneOffDone,
    /// A one-off operation on the thread ended: what to record, or why codex did not do it.
    OpDone {
        done: Result<ThreadOp>,
        reply: oneshot::Sender<Result<SessionView>>,
    },
    /// Fork the session's thread into a new session (same working directory, a thread of its
    /// own from `thread/fork`); answered with the new session.
    Fork {
        client: Arc<ClientContext>,
        timeout: Duration,
        reply: oneshot::Sender<Result<SessionView>>,
    },
    /// Name the session, or drop its thread's last turns (with a one-off app-server where it
    /// has a thread); answered with the session as it is then.
    ThreadOp {
        op: ThreadOp,
        client: Arc<ClientContext>,
        timeout: Duration,
        reply: oneshot::Sender<Result<SessionView>>,
    },
    /// What the actor holds now, for the unit tests to wait on a state instead of a time (not
    /// an activity).
    #[cfg(test)]
    Probe { reply: oneshot::Sender<Probe> },
}

/// A session actor's state as the unit tests wait on it ([`SessionMessage::Probe`]).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Calls waiting behind the running turn.
    pub queued: usize,
    /// Whether a turn runs.
    pub running: bool,
    /// Whether the running turn takes a steer (codex started it on the app-server).
    pub steerable: bool,
}

/// What a turn's task sends back: what its run ended with (the turn path's answer, as it is),
/// and beside it the session's backend, the time queued and what the actor needs of the call.
pub struct Finished {
    pub(super) result: TurnRun,
    /// The session's backend, handed back (with its warm process when it may serve the next
    /// turn).
    pub(super) backend: Option<Box<dyn SessionBackend>>,
    pub(super) queued: Duration,
    pub(super) call: CallMeta,
}

/// The parts of a call the actor needs after the turn.
pub(super) struct CallMeta {
    pub(super) sandbox: SandboxLevel,
    pub(super) model: Option<crate::security::ids::ModelId>,
    pub(super) resumed: bool,
    pub(super) created: bool,
    pub(super) reset: bool,
    /// The turn may be sent with approval policy `on-request` (its caller can be asked).
    pub(super) may_ask: bool,
}

pub(super) use crate::turn::backend::TurnRun;
