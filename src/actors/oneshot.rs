//! Session-less codex processes (`query`, `search`, `review`, `structured`, `ping`'s version
//! probe and `closeSession`'s `codex delete`) as actors.
//!
//! Architecture invariants: every one-shot is owned by a [`OneShotActor`] spawned linked under
//! the registry, so [`super::Bridge::shutdown`] stops it (its process is killed and reaped
//! before the stop returns) and a supervisor that dies takes it down; while codex runs, the
//! actor keeps an `inflight` record under a key of its own (a generated session id no session
//! uses), which the takeover sweep ([`super::recover_interrupted`]) kills after a crash as it
//! does a session's turn; the short commands announce their process through the same spawn
//! hook as a turn. The actor writes only that record; it never reads or writes a session's. A
//! handler never awaits the child: the work runs in a task that reports back.
//!
//! On the app-server backend, `query`, `search` and `structured` (without images) run as
//! ephemeral threads on a warm `codex app-server` of the calling client context
//! ([`Runner::lease`]): the call's task takes the process whole from the warm pool (so this
//! actor's cancel or stop kills it, as a session turn's), runs its turn from the fixed
//! templates (read-only, approval `never`, a new thread per call, `query`'s in a fresh empty
//! directory), and gives it back only after a completed turn whose thread it let go of
//! (`thread/unsubscribe`); a process whose turn was cancelled, timed out or failed is killed
//! and replaced. Such a process is on record under a key of its own while it lives. With no
//! usable app-server, or every warm process busy, the call runs with `codex exec`.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::actors::calls::{Answer, Finding, OneShot, OneShotCall};
use crate::actors::warm::{OneShotServer, Serves};
use crate::actors::{ClientContext, Progress, Shared};
use crate::codex::argv::{
    Common, OneShotRequest, PathKind, ReasoningEffort, ReviewRequest, SandboxLevel, SpawnSpec,
    WarmTurn, build_one_shot_server, build_query, build_review, build_search, build_warm_one_shot,
};
use crate::codex::events::describe;
use crate::codex::process::{
    CodexCommand, Ending, ProcessError, RunOptions, SpawnHook, SpawnInfo, ThreadWanted,
    TurnControl, TurnOutcome, WarmProcess, key_of, run, run_command,
};
use crate::error::{Error, Result};
use crate::security::ids::{SessionId, ThreadId};
use crate::security::paths::{Confined, Kind};

/// What a one-shot actor runs: given the hook that records codex's process and the token that
/// stops it, a future that answers its caller itself.
pub(crate) type Job = Box<
    dyn FnOnce(SpawnHook, CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send,
>;

/// A [`Job`] from an async closure.
pub(crate) fn job<F, Fut>(f: F) -> Job
where
    F: FnOnce(SpawnHook, CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Box::new(
        move |hook: SpawnHook,
              cancel: CancellationToken|
              -> Pin<Box<dyn Future<Output = ()> + Send>> { Box::pin(f(hook, cancel)) },
    )
}

/// Start a one-shot actor running `job`, linked under `supervisor` (the registry: shutdown
/// stops it); `cancel` is the caller's (the job's token is a child of it).
pub(crate) async fn start(
    shared: Arc<Shared>,
    supervisor: ActorCell,
    cancel: CancellationToken,
    job: Job,
) -> Result<()> {
    let args = OneShotArgs {
        shared,
        cancel,
        job,
    };
    Actor::spawn_linked(None, OneShotActor, args, supervisor)
        .await
        .map(|_| ())
        .map_err(|e| Error::Busy(format!("could not start the turn: {e}")))
}

/// `codex delete --force THREAD` with `client`'s codex and environment, owned by a one-shot
/// actor linked under `supervisor` (on record for the crash sweep while it runs, killed by a
/// shutdown). Resolves once the actor runs, to a receiver answered when the command ended.
/// Failures are logged: the session is already forgotten either way.
pub(crate) async fn delete_thread(
    shared: Arc<Shared>,
    supervisor: ActorCell,
    client: Arc<ClientContext>,
    thread: ThreadId,
) -> Result<tokio::sync::oneshot::Receiver<()>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = job(move |hook, token| async move {
        let command = CodexCommand::DeleteThread(thread);
        let (program, env) = (&client.common.program, &client.common.env);
        let ran = tokio::select! {
            ran = run_command(program, env, &command, Some(&hook)) => ran,
            // dropping the command kills its process group
            _ = token.cancelled() => {
                tracing::warn!(%thread, "codex delete stopped by a shutdown");
                let _ = tx.send(());
                return;
            }
        };
        match ran {
            Ok(out) if out.success() => tracing::info!(%thread, "codex thread deleted"),
            Ok(out) => tracing::warn!(%thread, exit_code = ?out.exit_code, "codex delete failed"),
            Err(e) => tracing::warn!(%thread, error = %e, "codex delete failed"),
        }
        let _ = tx.send(());
    });
    start(shared, supervisor, CancellationToken::new(), job).await?;
    Ok(rx)
}

/// Messages to a one-shot actor.
pub enum OneShotMessage {
    /// Codex runs; remember its process for crash recovery.
    Spawned { info: SpawnInfo },
    /// The job ended (it has answered its caller).
    Done,
}

/// Arguments of a one-shot actor.
pub struct OneShotArgs {
    pub(crate) shared: Arc<Shared>,
    /// The caller's cancellation (the job's token is a child of it).
    pub(crate) cancel: CancellationToken,
    pub(crate) job: Job,
}

/// A one-shot actor's state. Dropping it (a kill, a panic) cancels the job and aborts its
/// task, whose runner kills codex's process group, descendants and cgroup.
pub struct OneShotState {
    shared: Arc<Shared>,
    /// The `inflight` key of this one-shot's process.
    key: SessionId,
    recorded: bool,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Drop for OneShotState {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// The one-shot actor's behaviour.
pub struct OneShotActor;

/// How long a stopping one-shot waits for its process to be killed and reaped.
const STOP_WAIT: Duration = Duration::from_secs(10);

impl Actor for OneShotActor {
    type Msg = OneShotMessage;
    type State = OneShotState;
    type Arguments = OneShotArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: OneShotArgs,
    ) -> Result<OneShotState, ActorProcessingErr> {
        let cancel = args.cancel.child_token();
        let me = myself.clone();
        let hook: SpawnHook = Arc::new(move |info: &SpawnInfo| {
            let _ = me.cast(OneShotMessage::Spawned { info: info.clone() });
        });
        let job = (args.job)(hook, cancel.clone());
        let me = myself.clone();
        let task = tokio::spawn(async move {
            job.await;
            let _ = me.cast(OneShotMessage::Done);
        });
        Ok(OneShotState {
            shared: args.shared,
            key: SessionId::generate(),
            recorded: false,
            cancel,
            task: Some(task),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        st: &mut OneShotState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            OneShotMessage::Spawned { info } => {
                let t = crate::actors::inflight_of(info);
                if let Err(e) = st.shared.store.put_inflight(&st.key, &t) {
                    tracing::error!(error = %e, "could not record the one-shot turn in flight");
                }
                let _ = st.shared.store.flush().await;
                st.recorded = true;
            }
            OneShotMessage::Done => {
                st.task = None;
                myself.stop(None);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        st: &mut OneShotState,
    ) -> Result<(), ActorProcessingErr> {
        // a stop (shutdown) while codex runs: cancel it and wait until its processes are
        // killed and reaped, so that nothing outlives the stop
        st.cancel.cancel();
        if let Some(task) = st.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(STOP_WAIT, task).await.is_err() {
                abort.abort();
            }
        }
        if st.recorded {
            let _ = st.shared.store.clear_inflight(&st.key);
            let _ = st.shared.store.flush().await;
        }
        Ok(())
    }
}

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

/// How many times a one-shot start killed before it answered `initialize` is tried again.
const KILLED_STARTS: usize = 3;
/// How long a one-shot start waits for a place under `max_warm` before the call runs with
/// `codex exec` (as a session turn's).
const SLOT_WAIT: Duration = Duration::from_secs(10);
/// How long it waits for a close it asked for before asking another idle holder.
const CLOSE_PATIENCE: Duration = Duration::from_secs(5);

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
        let mut opts = RunOptions::new(timeout, runner.client.config.limits);
        opts.cancel = runner.cancel.clone();
        opts.secrets = runner.client.secrets.clone();
        let secrets = runner.client.secrets.clone();
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
                move |ev| {
                    if let (Some(p), Some(line)) = (&progress, describe(ev)) {
                        p(secrets.redact(&line).into_owned());
                    }
                },
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
    async fn finish(mut self, shared: &Shared) {
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
type BuildOneShot = fn(&Common, OneShotRequest) -> Result<SpawnSpec>;

/// A hook that puts the spawned process on record under `record` (flushed by the caller).
fn record_hook(store: crate::store::Store, record: SessionId) -> SpawnHook {
    Arc::new(move |info: &SpawnInfo| {
        let t = crate::actors::inflight_of(info.clone());
        if let Err(e) = store.put_inflight(&record, &t) {
            tracing::error!(error = %e, "could not record a one-shot app-server");
        }
    })
}

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
        let mut opts = RunOptions::new(timeout, self.client.config.limits);
        opts.cancel = self.cancel.clone();
        opts.secrets = self.client.secrets.clone();
        opts.on_spawn = Some(self.hook.clone());
        let secrets = self.client.secrets.clone();
        let outcome = run(spec, opts, move |ev| {
            if let (Some(p), Some(line)) = (&progress, describe(ev)) {
                p(secrets.redact(&line).into_owned());
            }
        })
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
        if let Some(server) = shared.warm.take_one_shot(self.client.id, &serves, fits) {
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
        let t0 = Instant::now();
        let mut killed = 0;
        loop {
            let remaining = timeout.saturating_sub(t0.elapsed());
            let slot = shared
                .warm
                .slot(SLOT_WAIT.min(remaining), CLOSE_PATIENCE, self.cancel)
                .await;
            let Some(slot) = slot else {
                if self.cancel.is_cancelled() {
                    return Err(Error::Cancelled { partial: None });
                }
                if t0.elapsed() >= timeout {
                    return Err(Error::TimedOut {
                        after: timeout,
                        partial: None,
                    });
                }
                tracing::info!(
                    "no warm codex process came free in time (max_warm); this call runs with codex exec"
                );
                return Ok(None);
            };
            let record = SessionId::generate();
            let hook = record_hook(shared.store.clone(), record.clone());
            let spawned = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err(Error::Cancelled { partial: None }),
                _ = tokio::time::sleep(timeout.saturating_sub(t0.elapsed())) => Err(Error::TimedOut {
                    after: timeout,
                    partial: None,
                }),
                w = WarmProcess::spawn(&spec, Some(hook)) => w,
            };
            let forget = || {
                let _ = shared.store.clear_inflight(&record);
            };
            match spawned {
                Ok(mut w) => {
                    w.hold(slot);
                    if !shared.warm.known() {
                        shared.warm.record(Ok(()));
                    }
                    let _ = shared.store.flush().await;
                    let server = OneShotServer::new(
                        self.client.id,
                        serves,
                        w,
                        record,
                        home,
                        shared.store.clone(),
                    );
                    return Ok(Some(Lease {
                        server,
                        spoiled: false,
                    }));
                }
                Err(Error::Process(ProcessError::KilledAtStart { signal }))
                    if killed < KILLED_STARTS =>
                {
                    forget();
                    killed += 1;
                    tracing::info!(
                        signal,
                        attempt = killed,
                        "codex app-server was killed before it answered `initialize`; starting another"
                    );
                }
                // the binary's app-server failed to start or to answer: this call, and the
                // next ones (sessions' too), run with codex exec
                Err(e @ (Error::Codex { .. } | Error::Process(_))) => {
                    forget();
                    tracing::warn!(
                        error = %self.client.secrets.redact(&crate::security::redact::redact(&e.to_string())),
                        "codex app-server did not start"
                    );
                    shared.warm.record(Err(
                        "codex app-server did not start or answer (the server log says why)".into(),
                    ));
                    return Ok(None);
                }
                Err(e) => {
                    forget();
                    return Err(e);
                }
            }
        }
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
        let turn = match build_warm_one_shot(&common, req, kind) {
            Ok(t) => t,
            Err(e) => {
                self.keep(lease);
                return Err(e);
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
    async fn scratch(
        &self,
        (kind, build): (PathKind, BuildOneShot),
        (prompt, model, reasoning_effort): (String, Option<String>, Option<ReasoningEffort>),
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

/// Run one session-less call to its answer (inside a one-shot actor's task), with the warm
/// processes it used (to be given back or retired).
pub(crate) async fn answer(
    shared: Arc<Shared>,
    call: OneShotCall,
    hook: SpawnHook,
    cancel: CancellationToken,
) -> (Result<Answer>, Vec<Lease>) {
    let OneShotCall {
        request,
        timeout,
        progress,
        client,
        ..
    } = call;
    let runner = Runner {
        shared: &shared,
        client: &client,
        hook,
        cancel: &cancel,
        progress,
        leases: Default::default(),
    };
    let answer = run_call(&runner, request, timeout).await;
    let leases = std::mem::take(&mut *runner.leases.lock().unwrap_or_else(|p| p.into_inner()));
    (answer, leases)
}

/// Run one session-less call (inside a one-shot actor's task) and answer `reply`, once the
/// warm processes it used are back in the pool (each let go of the call's thread first: one
/// round trip) or retired, so that the caller's next call finds its process there.
pub(crate) async fn answer_then(
    shared: Arc<Shared>,
    call: OneShotCall,
    hook: SpawnHook,
    cancel: CancellationToken,
    reply: tokio::sync::oneshot::Sender<Result<Answer>>,
) {
    let (answer, leases) = answer(shared.clone(), call, hook, cancel).await;
    for lease in leases {
        lease.finish(&shared).await;
    }
    let _ = reply.send(answer);
}

/// One call's request, run to its answer by `runner`.
async fn run_call(runner: &Runner<'_>, request: OneShot, timeout: Duration) -> Result<Answer> {
    let client = runner.client;
    match request {
        OneShot::Query {
            prompt,
            context,
            model,
            reasoning_effort,
        } => {
            non_empty("prompt", &prompt)?;
            let prompt = match context {
                Some(c) if !c.trim().is_empty() => format!("Context:\n{c}\n\nQuestion:\n{prompt}"),
                _ => prompt,
            };
            let req = (prompt, model, reasoning_effort);
            runner
                .scratch((PathKind::Query, build_query), req, timeout)
                .await
        }
        OneShot::Search { query, model } => {
            non_empty("query", &query)?;
            let prompt = format!("Search the web and answer with sources: {query}");
            let req = (prompt, model, None);
            runner
                .scratch((PathKind::Search, build_search), req, timeout)
                .await
        }
        OneShot::Review { target, model, cwd } => {
            let req = ReviewRequest { target, model, cwd };
            let spec = build_review(&client.common_for(false), &req)?;
            let sandbox = spec.sandbox();
            let (outcome, queued) = runner.run(spec, timeout).await?;
            let mut a = Answer::of(outcome, queued, sandbox, None, req.model);
            a.findings = Some(parse_findings(&a.response));
            Ok(a)
        }
        OneShot::Structured {
            prompt,
            files,
            plan,
            model,
            cwd,
        } => {
            let (prompt, images) = super::session::compose(prompt, &files, &cwd)?;
            let ask = super::structured::Ask {
                prompt,
                plan: *plan,
                model,
                cwd,
                images,
                timeout,
            };
            super::structured::answer(runner, ask).await
        }
    }
}

/// A caller's question, refused when empty (codex's invocation checks the whole prompt,
/// which the bridge's own wording never leaves empty).
fn non_empty(field: &str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    Ok(())
}

/// A fresh empty directory for a `query` or `search`, confined inside itself.
pub(crate) fn scratch_dir() -> Result<(tempfile::TempDir, Confined)> {
    let dir = tempfile::Builder::new()
        .prefix("codex-mcp-bridge-")
        .tempdir()
        .map_err(Error::io("creating a scratch directory"))?;
    let canon = dir
        .path()
        .canonicalize()
        .map_err(Error::io("resolving the scratch directory"))?;
    let c = crate::confine::resolve(
        "workingDirectory",
        &canon.to_string_lossy(),
        Path::new("/"),
        std::slice::from_ref(&canon),
        Kind::Dir,
    )?;
    Ok((dir, c))
}

/// Parse `[P1] title — path:lines` lines of a rendered review.
pub fn parse_findings(text: &str) -> Vec<Finding> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches("- ").trim();
            let rest = l.strip_prefix('[')?;
            let (prio, rest) = rest.split_once(']')?;
            if !(prio.len() == 2
                && prio.starts_with('P')
                && prio[1..].chars().all(|c| c.is_ascii_digit()))
            {
                return None;
            }
            let rest = rest.trim();
            let (title, location) = match rest.rsplit_once(" — ") {
                Some((t, loc)) => (t.trim().to_owned(), Some(loc.trim().to_owned())),
                None => (rest.to_owned(), None),
            };
            Some(Finding {
                priority: prio.to_owned(),
                title,
                location,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_findings_are_parsed_from_codexs_rendering() {
        let text = "One bug.\n\nReview comment:\n\n- [P1] Appended line breaks parser — /r/f.txt:2-2\n  The new `b` line is wrong.\n- [P3] Nit\n[X] not a finding";
        assert_eq!(
            parse_findings(text),
            vec![
                Finding {
                    priority: "P1".into(),
                    title: "Appended line breaks parser".into(),
                    location: Some("/r/f.txt:2-2".into())
                },
                Finding {
                    priority: "P3".into(),
                    title: "Nit".into(),
                    location: None
                },
            ]
        );
    }
}
