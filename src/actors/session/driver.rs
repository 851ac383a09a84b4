//! The seam between the session actor and codex: the [`Driver`] a turn's task hands its
//! prepared turn to ([`Prepared`], its [`Plan`], [`TurnEnv`]), and [`TurnDriver`], which holds it.
//! The real driver is [`super::backend`]'s; the unit tests put a fake one in its place.

use futures::future::BoxFuture;

use super::message::{CallMeta, SessionMessage, TurnRun};
use crate::actors::client::ClientContext;
use crate::actors::shared::Shared;
use crate::codex::argv::{CheckedTurn, Common, SpawnSpec, WarmTurn};
use crate::codex::events::{Event, Usage};
use crate::codex::process::{
    RunOptions, SpawnHook, SpawnInfo, ThreadWanted, TurnControl, TurnOutcome, WarmProcess,
};
use crate::error::Result;
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::Confined;
use ractor::ActorRef;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A turn ready to run: its plan and what the actor needs when it ends.
pub(super) struct Prepared {
    pub(super) client: Arc<ClientContext>,
    pub(super) plan: Plan,
    pub(super) meta: CallMeta,
    pub(super) prior_usage: Usage,
}

/// A session turn planned once, in no backend's terms: the turn checked once (what codex is
/// asked, where, at which sandbox level, with which files), the thread it continues, and the
/// backend chosen for it (in one place, when the call was prepared). The driver turns it into
/// codex's invocation ([`Invocation`]); a fake driver reads it as it is.
pub(super) struct Plan {
    pub(super) turn: CheckedTurn,
    /// The thread it continues (`None`: a new one).
    pub(super) resume: Option<ThreadId>,
    /// Whether it goes to the session's warm app-server (else `codex exec`).
    pub(super) warm: bool,
}

impl Plan {
    /// Whether it runs on the warm app-server: chosen so, and a turn an app-server can run
    /// (the only backend that can ask a person or take a steer).
    pub(super) fn on_app_server(&self) -> bool {
        self.warm && self.turn.runs_warm()
    }

    /// Codex's invocation of the plan: a warm turn and the app-server to run it on, or an exec
    /// spec, both assembled from the turn checked once (the prompt moves into it).
    pub(super) fn invocation(self, common: &Common) -> Invocation {
        let Plan { turn, resume, warm } = self;
        if warm {
            let server = turn.app_server(common);
            let wanted = match resume {
                Some(t) => ThreadWanted::Resume(t),
                None => ThreadWanted::Start,
            };
            match turn.into_warm() {
                Ok(turn) => {
                    return Invocation::Warm {
                        server,
                        turn,
                        wanted,
                    };
                }
                Err(turn) => return Invocation::Exec(turn.into_exec(common)),
            }
        }
        Invocation::Exec(turn.into_exec(common))
    }
}

/// How a planned turn runs (one per turn, moved once: the size of a variant costs nothing).
#[expect(
    clippy::large_enum_variant,
    reason = "one value per turn, never copied or stored"
)]
pub(super) enum Invocation {
    /// A `codex exec` process for this turn.
    Exec(SpawnSpec),
    /// A turn on the session's warm app-server (`server` starts one when it has none, or one
    /// of another key).
    Warm {
        server: SpawnSpec,
        turn: WarmTurn,
        wanted: ThreadWanted,
    },
}

/// What a turn's task hands its driver besides the plan ([`Plan`]) and the turn's control
/// ([`TurnControl`]: on the app-server its steer inbox and the asker of its caller's person):
/// where the turn runs and whose it is, its cancel and the sink of its events.
pub(super) struct TurnEnv<'a> {
    /// The session the turn is of (the record its processes are on).
    pub(super) session: &'a SessionId,
    pub(super) shared: &'a Arc<Shared>,
    pub(super) client: &'a ClientContext,
    pub(super) timeout: Duration,
    pub(super) prior_usage: Usage,
    /// The call's cancel.
    pub(super) cancel: &'a CancellationToken,
    pub(super) sink: Sink,
}

/// The sink of a turn's events, the bridge's own ([`Event`]): a process spawned and a thread
/// started go to the session's actor (on record, stored at once), the turn's start opens it to
/// steers, and each event's description goes to the caller's progress, redacted.
pub(super) struct Sink {
    pub(super) me: ActorRef<SessionMessage>,
    pub(super) secrets: crate::security::redact::ClientSecrets,
    pub(super) progress: Option<crate::actors::client::Progress>,
}

/// Tell the session's actor of a spawned process (it records it in `inflight`).
fn spawned_to(me: &ActorRef<SessionMessage>, info: &SpawnInfo) {
    let _ = me.cast(SessionMessage::Spawned { info: info.clone() });
}

impl Sink {
    /// A process of the turn spawned: on record under the session for the crash sweep.
    pub(super) fn spawned(&self, info: &SpawnInfo) {
        spawned_to(&self.me, info);
    }

    /// The turn goes to `codex exec` after all: a steer is refused at once, as for any exec
    /// turn (sent before exec runs, so it reaches the actor before the turn's start does).
    pub(super) fn runs_with_exec(&self) {
        let _ = self.me.cast(SessionMessage::RunsWithExec);
    }

    /// The hook a spawn calls with its process ([`Sink::spawned`]).
    pub(super) fn spawn_hook(&self) -> SpawnHook {
        let me = self.me.clone();
        Arc::new(move |info: &SpawnInfo| spawned_to(&me, info))
    }

    /// Every event (see [`Sink`]).
    pub(super) fn events(&self) -> impl FnMut(&Event) + Send + use<> {
        let me = self.me.clone();
        let mut progress =
            crate::actors::client::progress_sink(self.progress.clone(), self.secrets.clone());
        move |ev: &Event| {
            if let Event::ThreadStarted { thread_id } = ev {
                let _ = me.cast(SessionMessage::ThreadStarted { thread: *thread_id });
            }
            if let Event::TurnStarted = ev {
                let _ = me.cast(SessionMessage::TurnRunning);
            }
            progress(ev);
        }
    }
}

impl TurnEnv<'_> {
    /// The options of the turn's run: its deadline, cancel, limits, secrets and the hook that
    /// records its process for the crash sweep.
    pub(super) fn options(&self) -> RunOptions {
        let mut opts = self.client.run_options(self.timeout, self.cancel);
        opts.prior_thread_usage = self.prior_usage;
        opts.on_spawn = Some(self.sink.spawn_hook());
        opts
    }

    /// Run the turn on a warm process, with the turn's control (kept for a run on another
    /// process when this one had ended before the turn reached it) and its sink.
    pub(super) async fn run_on(
        &self,
        process: &mut WarmProcess,
        (wanted, t): (ThreadWanted, &WarmTurn),
        opts: &RunOptions,
        control: &mut TurnControl,
    ) -> TurnOutcome {
        process
            .run_turn(wanted, t, opts, control, self.sink.events())
            .await
    }
}

/// Runs a session's prepared turns and its forks.
pub(super) trait Driver: Send + Sync + 'static {
    /// Run one planned turn, `plan`, to its end (completion, failure, timeout or `turn.cancel`),
    /// its events into `turn.sink`, with its `control`; which backend ran it is in the answer.
    /// `warm` is the session's warm process between turns; it comes back when it may serve
    /// the next.
    fn run<'a>(
        &'a self,
        turn: &'a TurnEnv<'a>,
        control: &'a mut TurnControl,
        plan: Plan,
        warm: Option<WarmProcess>,
    ) -> BoxFuture<'a, (TurnRun, Option<WarmProcess>)>;

    /// Fork `thread` (of the working directory `cwd`) into a new thread, on a process that no
    /// turn uses; the new thread's id.
    fn fork<'a>(
        &'a self,
        fork: ForkSpec,
        shared: &'a Arc<Shared>,
    ) -> BoxFuture<'a, Result<ThreadId>>;
}

/// A fork to make: the one-off app-server's invocation and the thread to fork.
pub(super) struct ForkSpec {
    pub(super) server: SpawnSpec,
    pub(super) thread: ThreadId,
    pub(super) cwd: Confined,
    pub(super) model: Option<String>,
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
