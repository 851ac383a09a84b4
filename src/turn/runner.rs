//! What every codex turn of one session-less call shares ([`Runner`]: where it runs, whose it
//! is, how it is watched, the global slot), used by the one-shot actor's calls and by
//! `structured`'s re-asking loop. Each turn is one call of the one turn path
//! ([`CodexBackend::run`]); the backends a call used are given back (their warm processes to
//! the pool, or killed) before it answers ([`CodexBackend::give_back`]).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::actors::client::{ClientContext, Progress};
use crate::actors::pool::warm::Serves;
use crate::actors::shared::Shared;
use crate::calls::Answer;
use crate::codex::argv::{
    Common, OneShotRequest, PathKind, SpawnSpec, WarmTurn, build_warm_one_shot,
};
use crate::codex::process::{SpawnHook, ThreadWanted, TurnControl, TurnOutcome};
use crate::error::Result;
use crate::plan::values::{ReasoningEffort, SandboxLevel};
use crate::security::ids::ModelId;
use crate::security::prompt::Prompt;
use crate::turn::backend::source::OneShotSource;
use crate::turn::backend::{
    CodexBackend, Invocation, SinkHooks, Source, TurnAsk, TurnEnv, warm_chosen,
};
use crate::turn::files::scratch_dir;

/// What every codex run of one call shares: where it runs, whose it is, how it is watched.
pub(crate) struct Runner<'a> {
    pub shared: &'a Shared,
    pub client: &'a ClientContext,
    /// Records codex's process for the crash sweep.
    pub hook: SpawnHook,
    pub cancel: &'a CancellationToken,
    /// One sink for the whole call.
    pub progress: Option<Progress>,
    /// The backends this call used, finished (given back or retired) before it answers.
    pub backends: std::sync::Mutex<Vec<CodexBackend>>,
}

/// An exec builder of a `query` or `search`.
type BuildOneShot =
    fn(&Common, OneShotRequest) -> std::result::Result<SpawnSpec, crate::invalid::InvalidArgument>;

impl Runner<'_> {
    /// Run one turn of the call on `backend`, entered as every turn is ([`TurnEnv::enter`]),
    /// with the client's codex invocation `common` the turn's `invocation` was built with;
    /// how it ended and the time spent queued.
    pub(crate) async fn turn(
        &self,
        backend: &mut CodexBackend,
        common: Common,
        invocation: Invocation,
        timeout: Duration,
    ) -> Result<(TurnOutcome, Duration)> {
        let ask = TurnAsk {
            common,
            timeout,
            prior_usage: Default::default(),
            progress: self.progress.clone(),
            hooks: SinkHooks::spawns(self.hook.clone()),
        };
        let (env, queued) = TurnEnv::enter(self.shared, self.client, self.cancel, ask).await?;
        let outcome = backend
            .run(&env, &mut TurnControl::default(), invocation)
            .await?;
        Ok((outcome, queued))
    }

    /// Run `spec`, built with the client's codex invocation `common`, with `codex exec`; the
    /// outcome and the time spent queued.
    pub(crate) async fn exec(
        &self,
        (spec, common): (SpawnSpec, Common),
        timeout: Duration,
    ) -> Result<(TurnOutcome, Duration)> {
        let mut backend = CodexBackend::new(Source::Exec);
        self.turn(&mut backend, common, Invocation::Exec(spec), timeout)
            .await
    }

    /// Keep `backend` until the call's answer is ready (then it is finished).
    pub(crate) fn keep(&self, backend: CodexBackend) {
        self.backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(backend);
    }

    /// A `query` or `search` turn, read-only in a fresh empty directory with nested MCP
    /// servers off: on a warm app-server of the client's that serves this kind of call (a new
    /// ephemeral thread), else with `codex exec` as `build` makes it.
    pub(crate) async fn scratch(
        &self,
        (kind, build): (PathKind, BuildOneShot),
        (prompt, model, reasoning_effort): (Prompt, Option<ModelId>, Option<ReasoningEffort>),
        timeout: Duration,
    ) -> Result<Answer> {
        let (_dir, cwd) = scratch_dir()?;
        let common = self.client.common_for(true);
        let request = OneShotRequest {
            prompt,
            model: model.clone(),
            reasoning_effort,
            cwd,
        };
        let invocation = if warm_chosen(self.shared, true) {
            Invocation::Warm {
                turn: build_warm_one_shot(&common, request)?,
                wanted: ThreadWanted::Start,
                // the prompt moves into the exec spec (see `build_turn`)
                fallback: Box::new(move |t: WarmTurn, common: &Common| {
                    Ok(build(common, OneShotRequest::from(t))?)
                }),
            }
        } else {
            Invocation::Exec(build(&common, request)?)
        };
        let serves = Serves::Scratch {
            search: kind == PathKind::Search,
        };
        let mut backend = CodexBackend::new(Source::OneShot(OneShotSource::new(
            self.client.id,
            serves,
            None,
        )));
        let ran = self.turn(&mut backend, common, invocation, timeout).await;
        self.keep(backend);
        let (outcome, queued) = ran?;
        Ok(Answer::of(
            outcome,
            queued,
            SandboxLevel::ReadOnly,
            model.map(|m| m.to_string()),
        ))
    }
}
