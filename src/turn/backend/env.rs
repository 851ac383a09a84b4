//! What one turn runs with, on either backend: codex's invocation of it ([`Invocation`]), its
//! environment and event sink ([`TurnEnv`], [`Sink`]), and how it ended ([`TurnEnd`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::actors::client::{ClientContext, Progress, progress_sink};
use crate::actors::shared::Shared;
use crate::codex::argv::{Common, SpawnSpec, WarmTurn};
use crate::codex::events::{Event, Usage};
use crate::codex::process::{RunOptions, SpawnHook, ThreadWanted, TurnOutcome};
use crate::codex::rollout::TurnContext;
use crate::config::Backend;
use crate::error::Result;
use crate::security::redact::ClientSecrets;

/// A turn codex ran: its outcome, what codex recorded of it (a session's turns only), and
/// where it ran.
pub(crate) struct TurnEnd {
    pub(crate) outcome: TurnOutcome,
    pub(crate) recorded: Option<TurnContext>,
    /// Which backend ran it: the one asked for, or `codex exec` when the warm backend handed
    /// the turn on (no app-server could run it). What codex may have recorded is judged by it.
    pub(crate) on: Backend,
}

/// What a turn's run ended with, or why it could not run.
pub(crate) type TurnRun = Result<TurnEnd>;

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

/// What a turn runs with besides its invocation and control: whose it is (the client, its
/// codex invocation `common`), its time and cancel, codex's running total of the thread it
/// continues, and its one event sink.
pub(crate) struct TurnEnv<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) client: &'a ClientContext,
    /// The client's codex invocation for this call (nested MCP servers off for `query` and
    /// `search`).
    pub(crate) common: &'a Common,
    pub(crate) timeout: Duration,
    pub(crate) prior_usage: Usage,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) sink: &'a Sink,
}

/// Something told of a turn's events besides its progress (a session's actor).
pub(crate) type OnEvent = Arc<dyn Fn(&Event) + Send + Sync>;

/// The one sink of a turn's events: a spawned process goes on record (`on_spawn`), each
/// event's description goes to the caller's progress (redacted with its secrets) and to
/// `on_event`, and `on_exec` learns that a warm turn runs with `codex exec` after all.
pub(crate) struct Sink {
    pub(crate) on_spawn: SpawnHook,
    pub(crate) progress: Option<Progress>,
    pub(crate) secrets: ClientSecrets,
    pub(crate) on_event: Option<OnEvent>,
    pub(crate) on_exec: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Sink {
    /// A sink that only records spawns and reports progress.
    pub(crate) fn progress(
        on_spawn: SpawnHook,
        progress: Option<Progress>,
        secrets: ClientSecrets,
    ) -> Sink {
        Sink {
            on_spawn,
            progress,
            secrets,
            on_event: None,
            on_exec: None,
        }
    }

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

impl TurnEnv<'_> {
    /// The options of the turn's run: its deadline, cancel, limits, secrets, the thread's
    /// running total, and the hook that records its process.
    pub(crate) fn options(&self) -> RunOptions {
        let mut opts = self.client.run_options(self.timeout, self.cancel);
        opts.prior_thread_usage = self.prior_usage;
        opts.on_spawn = Some(self.sink.on_spawn.clone());
        opts
    }
}
