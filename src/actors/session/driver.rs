//! The seam between the session actor and codex: the [`Driver`] a turn's task hands its
//! prepared turn to ([`Prepared`], [`Backed`], [`TurnEnv`]), and [`Backends`], which holds it.
//! The real driver is [`super::backend`]'s; the unit tests put a fake one in its place.

use futures::future::BoxFuture;

use super::message::*;
use super::prelude::*;

/// A turn ready to run: codex's invocation and what the actor needs when it ends.
pub(super) struct Prepared {
    pub(super) client: Arc<ClientContext>,
    pub(super) run: Backed,
    pub(super) meta: CallMeta,
    pub(super) prior_usage: Usage,
}

/// How a prepared turn runs (one per turn, moved once: the size of a variant costs nothing).
#[expect(
    clippy::large_enum_variant,
    reason = "one value per turn, never copied or stored"
)]
pub(super) enum Backed {
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

/// What a turn's task runs with.
pub(super) struct TurnEnv<'a> {
    /// The session the turn is of (the record its processes are on).
    pub(super) session: &'a SessionId,
    pub(super) shared: &'a Arc<Shared>,
    pub(super) me: &'a ActorRef<SessionMessage>,
    pub(super) client: &'a ClientContext,
    pub(super) timeout: Duration,
    pub(super) prior_usage: Usage,
    pub(super) cancel: &'a CancellationToken,
    pub(super) progress: Option<crate::actors::client::Progress>,
    /// The warm turn's asker and steer inbox (taken by the run that reaches codex).
    pub(super) control: std::sync::Mutex<TurnControl>,
}

impl TurnEnv<'_> {
    /// The options of the turn's run: its deadline, cancel, limits, secrets and the hook that
    /// records its process for the crash sweep.
    pub(super) fn options(&self) -> RunOptions {
        let mut opts = RunOptions::new(self.timeout, self.client.config.limits);
        opts.cancel = self.cancel.clone();
        opts.prior_thread_usage = self.prior_usage;
        opts.secrets = self.client.secrets.clone();
        let me_spawn = self.me.clone();
        opts.on_spawn = Some(Arc::new(move |info: &SpawnInfo| {
            let _ = me_spawn.cast(SessionMessage::Spawned { info: info.clone() });
        }));
        opts
    }

    /// Run the turn on a warm process, with the turn's asker and steer inbox (kept for a run on
    /// another process when this one had ended before the turn reached it).
    pub(super) async fn run_on(
        &self,
        process: &mut WarmProcess,
        wanted: ThreadWanted,
        t: &WarmTurn,
        opts: &RunOptions,
    ) -> TurnOutcome {
        let mut ctl = std::mem::take(&mut *self.control.lock().unwrap_or_else(|p| p.into_inner()));
        let outcome = process
            .run_turn(wanted, t, opts, &mut ctl, self.on_event())
            .await;
        *self.control.lock().unwrap_or_else(|p| p.into_inner()) = ctl;
        outcome
    }

    /// Every event: a thread id goes to the actor (stored at once), a description to the
    /// caller's progress, redacted.
    pub(super) fn on_event(&self) -> impl FnMut(&Event) + Send + use<> {
        let me_ev = self.me.clone();
        let secrets = self.client.secrets.clone();
        let progress = self.progress.clone();
        move |ev: &Event| {
            if let Event::ThreadStarted { thread_id } = ev {
                let _ = me_ev.cast(SessionMessage::ThreadStarted { thread: *thread_id });
            }
            if let Event::TurnStarted = ev {
                let _ = me_ev.cast(SessionMessage::TurnRunning);
            }
            if let (Some(p), Some(line)) = (&progress, describe(ev)) {
                p(secrets.redact(&line).into_owned());
            }
        }
    }
}
/// Runs a session's prepared turns and its forks.
pub(super) trait Driver: Send + Sync + 'static {
    /// Run one prepared turn to its end (completion, failure, timeout or `turn.cancel`). `warm`
    /// is the session's warm process between turns; it comes back when it may serve the next.
    fn run<'a>(
        &'a self,
        turn: &'a TurnEnv<'a>,
        run: Backed,
        warm: Option<WarmProcess>,
    ) -> BoxFuture<'a, (Ran, Option<WarmProcess>)>;

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
pub struct Backends(pub(super) Arc<dyn Driver>);

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Backends")
    }
}
