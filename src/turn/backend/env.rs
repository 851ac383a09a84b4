//! What one turn runs with, on either backend: codex's invocation of it ([`Invocation`]), its
//! environment and event sink ([`TurnEnv`], [`Sink`]), and how it ended ([`TurnRun`]). Every
//! caller (a session's turn, each turn of a session-less call) enters a turn the same way,
//! [`TurnEnv::enter`]: the global slot, then the environment and the sink, built once.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::actors::client::{ClientContext, Progress, progress_sink};
use crate::actors::shared::Shared;
use crate::codex::argv::{Common, SpawnSpec, WarmTurn};
use crate::codex::events::{Event, Usage};
use crate::codex::process::{RunOptions, SpawnHook, ThreadWanted, TurnOutcome};
use crate::error::Result;
use crate::security::redact::ClientSecrets;
use crate::turn::limiter::Slot;

/// What a turn's run ended with (how codex ended it, what it produced and recorded, and
/// whether `codex exec` ran it: [`TurnOutcome::ran_with_exec`]), or why it could not run.
pub(crate) type TurnRun = Result<TurnOutcome>;

/// How a warm turn runs with `codex exec` when no app-server can take it: its exec invocation,
/// assembled from the turn as it was checked (the prompt moves on) with the call's `Common`.
pub(crate) type Fallback = Box<dyn FnOnce(WarmTurn, &Common) -> Result<SpawnSpec> + Send>;

/// Codex's invocation of one turn.
pub(crate) enum Invocation {
    /// A `codex exec` process for this turn.
    Exec(SpawnSpec),
    /// A turn on a warm app-server (the backend's own, or one its [`Source`](super::Source) gives), on the
    /// thread `wanted`; `fallback` when none can take it.
    Warm {
        turn: WarmTurn,
        wanted: ThreadWanted,
        fallback: Fallback,
    },
}

impl Invocation {
    /// A warm turn that, without an app-server, runs as `codex exec` on the same thread.
    pub(crate) fn warm_or_resume(turn: WarmTurn, wanted: ThreadWanted) -> Invocation {
        let resume = match wanted {
            ThreadWanted::Resume(t) => Some(t),
            ThreadWanted::Start => None,
        };
        Invocation::Warm {
            turn,
            wanted,
            fallback: Box::new(move |t: WarmTurn, common: &Common| Ok(t.into_exec(common, resume))),
        }
    }
}

/// What a turn runs with besides its invocation and control: its global slot (held while the
/// environment lives), whose it is (the client, its codex invocation `common`), its time and
/// cancel, codex's running total of the thread it continues, and its one event sink. Made
/// only by [`TurnEnv::enter`].
pub(crate) struct TurnEnv<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) client: &'a ClientContext,
    /// The client's codex invocation for this call (nested MCP servers off for `query` and
    /// `search`).
    pub(crate) common: Common,
    pub(crate) timeout: Duration,
    pub(crate) prior_usage: Usage,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) sink: Sink,
    _slot: Slot,
}

/// What a caller says of the turn it enters ([`TurnEnv::enter`]): the codex invocation it
/// built the turn's invocation with, its time, the thread's running total, where its progress
/// goes and who else hears of its events.
pub(crate) struct TurnAsk {
    pub(crate) common: Common,
    pub(crate) timeout: Duration,
    pub(crate) prior_usage: Usage,
    pub(crate) progress: Option<Progress>,
    pub(crate) hooks: SinkHooks,
}

/// Who hears of a turn's events besides its progress: its spawned processes (on record for
/// the crash sweep), each event (a session's actor), and the news that a warm turn runs with
/// `codex exec` after all.
pub(crate) struct SinkHooks {
    pub(crate) on_spawn: SpawnHook,
    pub(crate) on_event: Option<OnEvent>,
    pub(crate) on_exec: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl SinkHooks {
    /// Only the spawns go on record (a session-less call's turn).
    pub(crate) fn spawns(on_spawn: SpawnHook) -> SinkHooks {
        SinkHooks {
            on_spawn,
            on_event: None,
            on_exec: None,
        }
    }
}

/// Something told of a turn's events besides its progress (a session's actor).
pub(crate) type OnEvent = Arc<dyn Fn(&Event) + Send + Sync>;

/// The one sink of a turn's events: a spawned process goes on record (`on_spawn`), each
/// event's description goes to the caller's progress (redacted with its secrets) and to
/// `on_event`, and `on_exec` learns that a warm turn runs with `codex exec` after all.
pub(crate) struct Sink {
    pub(super) on_spawn: SpawnHook,
    pub(super) progress: Option<Progress>,
    pub(super) secrets: ClientSecrets,
    pub(super) on_event: Option<OnEvent>,
    pub(super) on_exec: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Sink {
    /// The turn goes to `codex exec` after all (a session refuses steers from now on).
    pub(crate) fn runs_with_exec(&self) {
        if let Some(f) = &self.on_exec {
            f();
        }
    }

    /// Every event (see [`Sink`]).
    pub(crate) fn events(&self) -> impl FnMut(&Event) + Send + use<> {
        let on_event = self.on_event.clone();
        let mut progress = progress_sink(self.progress.clone(), self.secrets.clone());
        move |ev: &Event| {
            if let Some(f) = &on_event {
                f(ev);
            }
            progress(ev);
        }
    }
}

impl<'a> TurnEnv<'a> {
    /// Enter a turn, the one way every caller does: wait for a global slot (up to the
    /// server's queue timeout, ended by `cancel`; the progress hears once how many turns are
    /// ahead when it has to wait), then the turn's environment and its one sink, the client's
    /// progress redacted with its secrets. The environment and the time spent queued; the
    /// slot is given back when the environment is dropped.
    pub(crate) async fn enter(
        shared: &'a Shared,
        client: &'a ClientContext,
        cancel: &'a CancellationToken,
        ask: TurnAsk,
    ) -> Result<(TurnEnv<'a>, Duration)> {
        let TurnAsk {
            common,
            timeout,
            prior_usage,
            progress,
            hooks,
        } = ask;
        let (slot, queued) = shared
            .limiter
            .queue_turn(shared.queue_timeout, cancel, progress.as_ref())
            .await?;
        let sink = Sink {
            on_spawn: hooks.on_spawn,
            progress,
            secrets: client.secrets.clone(),
            on_event: hooks.on_event,
            on_exec: hooks.on_exec,
        };
        let env = TurnEnv {
            shared,
            client,
            common,
            timeout,
            prior_usage,
            cancel,
            sink,
            _slot: slot,
        };
        Ok((env, queued))
    }

    /// The options of the turn's run: its deadline, cancel, limits, secrets, the thread's
    /// running total, and the hook that records its process.
    pub(crate) fn options(&self) -> RunOptions {
        let mut opts = self.client.run_options(self.timeout, self.cancel);
        opts.prior_thread_usage = self.prior_usage;
        opts.on_spawn = Some(self.sink.on_spawn.clone());
        opts
    }
}
