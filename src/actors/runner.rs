//! What every codex run of one session-less call shares ([`Runner`]: where it runs, whose it
//! is, how it is watched) and the warm app-servers it takes from the pool ([`Lease`]): used by
//! the one-shot actor's calls and by `structured`'s re-asking loop.

use crate::actors::files::scratch_dir;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::actors::calls::Answer;
use crate::actors::client::{ClientContext, Progress, progress_sink};
use crate::actors::pool::starts::{StartFor, WarmStart, start_warm};
use crate::actors::pool::warm::{OneShotServer, Serves};
use crate::actors::shared::Shared;
use crate::codex::argv::{
    Common, OneShotRequest, PathKind, SpawnSpec, WarmTurn, build_one_shot_server,
    build_warm_one_shot,
};
use crate::codex::process::{
    Ending, SpawnHook, ThreadWanted, TurnControl, TurnOutcome, key_of, run,
};
use crate::error::{Error, Result};
use crate::plan::values::{ReasoningEffort, SandboxLevel};
use crate::security::ids::SessionId;
use crate::security::paths::Confined;
use crate::security::prompt::Prompt;

/// What every codex run of one call shares: where it runs, whose it is, how it is watched.
pub(crate) struct Runner<'a> {
    pub shared: &'a Shared,
    pub client: &'a ClientContext,
    /// Records codex's process for the crash sweep.
    pub hook: SpawnHook,
    pub cancel: &'a CancellationToken,
    /// One sink for the whole call.
    pub progress: Option<Progress>,
    /// The warm processes this call used, given back (or retired) before it answers.
    pub leases: std::sync::Mutex<Vec<Lease>>,
}

/// A one-shot app-server taken by one call: used for its turns, then given back to the pool
/// when every turn completed and it let go of the call's thread, else retired (killed).
pub(crate) struct Lease {
    server: OneShotServer,
    /// A turn that did not complete, or a process that cannot go on: never reused.
    spoiled: bool,
}

impl Lease {
    /// Run one turn of the call on this process, under the global limit; the outcome and the
    /// time spent queued. `wanted` is `Start` for the call's first turn (a new ephemeral
    /// thread), `Resume` of that thread for `structured`'s re-ask (loaded: nothing is sent
    /// but the turn).
    pub(crate) async fn run(
        &mut self,
        runner: &Runner<'_>,
        wanted: ThreadWanted,
        turn: &WarmTurn,
        timeout: Duration,
    ) -> Result<(TurnOutcome, Duration)> {
        let slot = runner.queue().await?;
        let (queued, progress) = (slot.1, runner.progress.clone());
        let opts = runner.client.run_options(timeout, runner.cancel);
        let Some(w) = self.server.process.as_mut() else {
            self.spoiled = true;
            return Err(Error::SessionFailed(
                "the one-shot app-server is gone".into(),
            ));
        };
        let outcome = w
            .run_turn(
                wanted,
                turn,
                &opts,
                &mut TurnControl::default(),
                progress_sink(progress, runner.client.secrets.clone()),
            )
            .await;
        if !matches!(outcome.ending, Ending::Completed) || !w.reusable() {
            self.spoiled = true;
        }
        drop(slot);
        Ok((outcome, queued))
    }

    /// Give the process back for the next call of its client (after it let go of this call's
    /// thread), or retire it.
    pub(crate) async fn finish(mut self, shared: &Shared) {
        // a process whose turn did not complete is never used again: killed
        let reusable = !self.spoiled
            && match self.server.process.as_mut() {
                Some(w) => w.forget_thread().await && w.reusable() && !w.exited(),
                None => false,
            };
        if !reusable {
            return self.server.kill().await;
        }
        if let Some(refused) = shared.warm.put_one_shot(self.server) {
            refused.retire().await;
        }
    }
}

/// An exec builder of a `query` or `search`.
type BuildOneShot =
    fn(&Common, OneShotRequest) -> std::result::Result<SpawnSpec, crate::invalid::InvalidArgument>;

impl Runner<'_> {
    /// Wait for a global slot (progress says how many are ahead); the slot and the wait.
    async fn queue(&self) -> Result<(crate::actors::limiter::Slot, Duration)> {
        let (shared, progress) = (self.shared, self.progress.clone());
        let since = Instant::now();
        let slot = shared
            .limiter
            .acquire(shared.queue_timeout, self.cancel, |ahead| {
                if let Some(p) = &progress {
                    p(format!(
                        "queued behind {} turn(s) waiting for a codex slot",
                        ahead + shared.limiter.active()
                    ));
                }
            })
            .await?;
        Ok((slot, since.elapsed()))
    }

    /// Run `spec` under the global limit; the outcome and the time spent queued.
    pub(crate) async fn run(
        &self,
        spec: SpawnSpec,
        timeout: Duration,
    ) -> Result<(TurnOutcome, Duration)> {
        let progress = self.progress.clone();
        let (slot, queued) = self.queue().await?;
        let mut opts = self.client.run_options(timeout, self.cancel);
        opts.on_spawn = Some(self.hook.clone());
        let outcome = run(
            spec,
            opts,
            progress_sink(progress, self.client.secrets.clone()),
        )
        .await?;
        drop(slot);
        Ok((outcome, queued))
    }

    /// Keep `lease` until the call's answer is ready (then it is given back or retired).
    pub(crate) fn keep(&self, lease: Lease) {
        self.leases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(lease);
    }

    /// A warm app-server of this client for a one-shot call that `serves` (`dir`: the call's
    /// working directory, for `structured`), started with `common`: an idle one started the
    /// same way, else a new one into a place under `max_warm`. `None`: the call runs with
    /// `codex exec` (the exec backend is set, codex has no usable app-server, or no place came
    /// free in time).
    pub(crate) async fn lease(
        &self,
        serves: Serves,
        common: &Common,
        dir: Option<&Confined>,
        timeout: Duration,
    ) -> Result<Option<Lease>> {
        let shared = self.shared;
        if shared.config.backend != crate::config::Backend::AppServer {
            return Ok(None);
        }
        if let Some(why) = shared.warm.unusable() {
            tracing::debug!("{why}: this one-shot call runs with codex exec");
            return Ok(None);
        }
        let search = serves == Serves::Scratch { search: true };
        let spec_in = |cwd: Confined| build_one_shot_server(common, cwd, search);
        let fits = |s: &OneShotServer| {
            let cwd = match (&s.home, dir) {
                (Some((_, home)), _) => home.clone(),
                (None, Some(d)) => d.clone(),
                (None, None) => return false,
            };
            match (spec_in(cwd), s.process.as_ref()) {
                (Ok(spec), Some(w)) => w.key() == &key_of(&spec),
                _ => false,
            }
        };
        if let Some(server) = shared
            .warm
            .take_one_shot(self.client.id, &serves, fits)
            .await
        {
            return Ok(Some(Lease {
                server,
                spoiled: false,
            }));
        }
        let (home, cwd) = match dir {
            Some(d) => (None, d.clone()),
            None => {
                let (t, c) = scratch_dir()?;
                (Some((t, c.clone())), c)
            }
        };
        let spec = spec_in(cwd)?;
        // on record from its spawn under a key of its own, for the crash sweep
        let record = SessionId::generate();
        let started = start_warm(
            StartFor {
                shared,
                secrets: &self.client.secrets,
                cancel: self.cancel,
                timeout,
            },
            &spec,
            || {
                Some(crate::actors::inflight::record_hook(
                    shared.store.clone(),
                    record.clone(),
                ))
            },
            || {
                let _ = crate::actors::inflight::off_record(&shared.store, &record);
            },
        )
        .await?;
        let WarmStart::Process(w) = started else {
            return Ok(None);
        };
        let _ = shared.store.flush().await;
        let server = OneShotServer::new(
            self.client.id,
            serves,
            w,
            record,
            home,
            shared.store.clone(),
        );
        Ok(Some(Lease {
            server,
            spoiled: false,
        }))
    }

    /// A `query` or `search` on a warm app-server: a new ephemeral thread in the call's fresh
    /// empty directory. `Err(req)` hands the request back when the call runs with
    /// `codex exec`.
    async fn scratch_warm(
        &self,
        kind: PathKind,
        req: OneShotRequest,
        timeout: Duration,
    ) -> Result<std::result::Result<Answer, OneShotRequest>> {
        let serves = Serves::Scratch {
            search: kind == PathKind::Search,
        };
        let common = self.client.common_for(true);
        let started = Instant::now();
        let Some(mut lease) = self.lease(serves, &common, None, timeout).await? else {
            return Ok(Err(req));
        };
        // a start-up counts against the call's time
        let timeout = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        let model = req.model.clone();
        let turn = match build_warm_one_shot(&common, req) {
            Ok(t) => t,
            Err(e) => {
                self.keep(lease);
                return Err(e.into());
            }
        };
        let ran = lease.run(self, ThreadWanted::Start, &turn, timeout).await;
        self.keep(lease);
        let (outcome, queued) = ran?;
        Ok(Ok(Answer::of(
            outcome,
            queued,
            SandboxLevel::ReadOnly,
            None,
            model,
        )))
    }

    /// A `query` or `search` turn, read-only in a fresh empty directory with nested MCP
    /// servers off: `(prompt, model, reasoning effort)` built by `build`.
    pub(crate) async fn scratch(
        &self,
        (kind, build): (PathKind, BuildOneShot),
        (prompt, model, reasoning_effort): (Prompt, Option<String>, Option<ReasoningEffort>),
        timeout: Duration,
    ) -> Result<Answer> {
        let (_dir, cwd) = scratch_dir()?;
        let req = OneShotRequest {
            prompt,
            model: model.clone(),
            reasoning_effort,
            cwd,
        };
        let req = match self.scratch_warm(kind, req, timeout).await? {
            Ok(answer) => return Ok(answer),
            Err(req) => req,
        };
        // the prompt moves into the spec (see `build_turn`)
        let spec = build(&self.client.common_for(true), req)?;
        let (outcome, queued) = self.run(spec, timeout).await?;
        let sandbox = SandboxLevel::ReadOnly;
        Ok(Answer::of(outcome, queued, sandbox, None, model))
    }
}
