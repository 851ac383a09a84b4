//! The seam between the session actor and codex: the [`SessionBackend`] each session holds
//! (made by the registry's [`TurnDriver`]), which runs a prepared turn's [`TurnPlan`] with one
//! call, and the driver's forks. The real backend is the one turn path's
//! ([`crate::turn::backend::CodexBackend`], see `codex_driver.rs`); the unit tests put a fake one
//! in its place, which reads the plan as it is.

use futures::future::BoxFuture;

use crate::actors::credentials::Credentials;
use crate::actors::pool::warm::Closer;
use crate::actors::shared::Shared;
use crate::calls::ThreadOp;
use crate::codex::argv::{CheckedTurn, Common, SpawnSpec};
use crate::codex::process::{ThreadWanted, TurnControl};
use crate::error::Result;
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::Confined;
use crate::turn::backend::{Invocation, TurnRun};
use std::sync::Arc;
use std::time::Duration;

pub(super) use crate::turn::backend::TurnEnv;

/// A session turn planned once, in no backend's terms: the turn checked once (what codex is
/// asked, where, at which sandbox level, with which files), the thread it continues, and the
/// backend it asks for (chosen in one place, when the call was prepared; the backend may
/// still run a warm plan with `codex exec`). The driver turns it into
/// codex's invocation ([`Invocation`]); a fake driver reads it as it is.
pub(super) struct TurnPlan {
    pub(super) turn: CheckedTurn,
    /// The thread it continues (`None`: a new one).
    pub(super) resume: Option<ThreadId>,
    /// Whether it goes to the session's warm app-server (else `codex exec`), chosen once
    /// ([`crate::turn::backend::warm_chosen`]).
    pub(super) warm: bool,
    /// Whether the thread is read again from codex's record first (someone else wrote it
    /// since the session's last turn): a warm process that has it loaded is closed.
    pub(super) reload: bool,
}

impl TurnPlan {
    /// Whether it runs on the warm app-server (the only backend that can ask a person or take
    /// a steer): as chosen when it was planned.
    pub(super) fn on_app_server(&self) -> bool {
        self.warm
    }

    /// Codex's invocation of the plan: a warm turn (`codex exec` on the same thread when no
    /// app-server can take it), or an exec spec, both assembled from the turn checked once
    /// (the prompt moves into it).
    pub(super) fn invocation(self, common: &Common) -> Invocation {
        let TurnPlan {
            turn, resume, warm, ..
        } = self;
        if !warm {
            return Invocation::Exec(turn.into_exec(common));
        }
        // a turn chosen warm is one an app-server can run (`warm_chosen` asked `runs_warm`):
        // `into_warm` hands nothing back; were it to, the turn would run as it was checked
        match turn.into_warm() {
            Ok(turn) => {
                let wanted = resume.map_or(ThreadWanted::Start, ThreadWanted::Resume);
                Invocation::warm_or_resume(turn, wanted)
            }
            Err(turn) => Invocation::Exec(turn.into_exec(common)),
        }
    }
}

/// A session's backend: runs its turns, one at a time, and holds whatever it keeps between
/// them (the real one: a warm app-server).
pub(super) trait SessionBackend: Send + 'static {
    /// Run one planned turn, `plan`, to its end (completion, failure, timeout or
    /// `env.cancel`), its events into `env.sink`, with its `control`; which backend ran it is
    /// in the answer.
    fn run<'a>(
        &'a mut self,
        env: &'a TurnEnv<'a>,
        control: &'a mut TurnControl,
        plan: TurnPlan,
    ) -> BoxFuture<'a, TurnRun>;

    /// Whether it holds a process between turns (on record under the session while it does).
    fn holds_process(&self) -> bool;

    /// Close what it holds between turns (the pool asked, or the session closes).
    fn close(&mut self) -> BoxFuture<'_, ()>;

    /// The credentials the process it holds between turns was started with (none held:
    /// [`Credentials::NONE`]).
    fn credentials(&self) -> Credentials;
}

/// Makes each session's backend, and runs forks.
pub(super) trait Driver: Send + Sync + 'static {
    /// The backend of session `session` (`closer`: how the warm pool asks it to close its idle
    /// process).
    fn backend(
        &self,
        shared: Arc<Shared>,
        session: SessionId,
        closer: Closer,
    ) -> Box<dyn SessionBackend>;

    /// Fork `thread` (of the working directory `cwd`) into a new thread, on a process that no
    /// turn uses; the new thread's id.
    fn fork<'a>(
        &'a self,
        fork: ForkSpec,
        shared: &'a Arc<Shared>,
    ) -> BoxFuture<'a, Result<ThreadId>>;

    /// Do `op` on `thread` (codex's `thread/name/set`, its rewind or compaction), on a process
    /// that no turn uses; what was done (a compaction with codex's token counts).
    fn thread_op<'a>(
        &'a self,
        op: OpSpec,
        shared: &'a Arc<Shared>,
    ) -> BoxFuture<'a, Result<ThreadOp>>;
}

/// A one-off operation to do: the app-server's invocation, the thread and its directory, the
/// operation.
pub(super) struct OpSpec {
    pub(super) server: SpawnSpec,
    pub(super) thread: ThreadId,
    pub(super) cwd: Confined,
    pub(super) op: ThreadOp,
    pub(super) timeout: Duration,
}

/// A fork to make: the one-off app-server's invocation and the thread to fork.
pub(super) struct ForkSpec {
    pub(super) server: SpawnSpec,
    pub(super) thread: ThreadId,
    pub(super) cwd: Confined,
    pub(super) model: Option<crate::security::ids::ModelId>,
    pub(super) timeout: Duration,
}

/// The driver the session actors use (the registry's, given to each): codex itself, unless a unit test put a
/// fake in its place.
#[derive(Clone)]
pub struct TurnDriver(pub(super) Arc<dyn Driver>);

impl std::fmt::Debug for TurnDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnDriver")
    }
}
