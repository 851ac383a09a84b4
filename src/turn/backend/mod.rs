//! The one turn path: every codex turn the server runs (a session's, a `query`'s or `search`'s,
//! each attempt of a `structured` call, a `review`) is one call of
//! [`CodexBackend::run`], given codex's invocation of the turn ([`Invocation`]), the turn's
//! environment ([`TurnEnv`]: whose it is, its time, its cancel and its one event [`env::Sink`]) and
//! its control handle. The backend runs `codex exec` ([`exec`]), or a warm `codex app-server`
//! it owns between turns and falls back to `codex exec` inside itself when no app-server can
//! take the turn ([`warm`]); where its app-server comes from is its [`Source`].
//!
//! Every caller enters its turn the same way ([`TurnEnv::enter`]: the global slot, the
//! environment, the sink) and owns what the answer becomes (a session's record, a one-shot
//! call's answer).

pub(crate) mod env;
pub(crate) mod exec;
pub(crate) mod source;
pub(crate) mod warm;

use crate::actors::shared::Shared;
use crate::codex::process::TurnControl;

pub(crate) use env::{Invocation, OnEvent, SinkHooks, TurnAsk, TurnEnv, TurnRun};
pub(crate) use source::Source;

/// The one place a turn's backend is chosen, for every caller (a session's turn when it is
/// planned, a `query` or `search`, the first attempt of a `structured` call): a warm
/// app-server when the turn can run on one (`can_run_warm`: no images, no output files of
/// `codex exec`), the bridge is set to the app-server backend and codex has a usable one; else
/// `codex exec`. A warm turn may still run with `codex exec` when no app-server can take it
/// when it runs (no place under `max_warm` in time, a start that failed): the backend's
/// fallback, not another choice.
pub(crate) fn warm_chosen(shared: &Shared, can_run_warm: bool) -> bool {
    if !can_run_warm {
        return false;
    }
    if shared.config.backend != crate::config::Backend::AppServer {
        return false;
    }
    match shared.warm.unusable() {
        Some(why) => {
            tracing::debug!("{why}: the turn runs with codex exec");
            false
        }
        None => true,
    }
}

/// The one turn path (see the module): `codex exec`, or a warm app-server from its
/// [`Source`], owned between turns.
pub(crate) struct CodexBackend {
    pub(crate) source: Source,
}

impl CodexBackend {
    /// A backend whose warm turns come from `source`.
    pub(crate) fn new(source: Source) -> CodexBackend {
        CodexBackend { source }
    }

    /// Run one turn to its end (completion, failure, timeout or `env.cancel`), its events into
    /// `env.sink`, with its `control`; which backend ran it is in the answer.
    pub(crate) async fn run(
        &mut self,
        env: &TurnEnv<'_>,
        control: &mut TurnControl,
        invocation: Invocation,
    ) -> TurnRun {
        match invocation {
            Invocation::Exec(spec) => {
                // one writer per thread: the warm process lets go of it first
                self.source.let_go().await;
                exec::run_exec(env, spec, self.source.reads_record(), env.timeout).await
            }
            Invocation::Warm {
                turn,
                wanted,
                fallback,
            } => warm::run_warm(&mut self.source, env, control, (turn, wanted, fallback)).await,
        }
    }

    /// Whether it holds a warm process between turns.
    pub(crate) fn holds_process(&self) -> bool {
        self.source.holds_process()
    }

    /// The credentials its warm process was started with (none held: none).
    pub(crate) fn credentials(&self) -> crate::actors::credentials::Credentials {
        self.source.credentials()
    }

    /// Close a session's warm process between turns (EOF first), giving its place under
    /// `max_warm` back; a one-shot call's is kept for the call's next turn (see
    /// [`CodexBackend::give_back`]).
    pub(crate) async fn close(&mut self) {
        self.source.let_go().await;
    }

    /// The call is over: a one-shot call's warm process goes back to the pool for its
    /// client's next call when every turn completed and it let go of the call's thread, else
    /// it is killed; a session's is closed.
    pub(crate) async fn give_back(self, shared: &Shared) {
        self.source.give_back(shared).await;
    }
}
